/* SPDX-License-Identifier: MIT */
#pragma once

/* The Varlink server: where a request enters. It owns the listening socket and the connections, frames
 * and parses calls, enforces the protocol (flags, one call at a time, size limit), answers
 * org.varlink.service itself and hands every other call to a method of a registered interface. It knows
 * nothing about pressure. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "listener.h"
#include "params.h"
#include "pidref.h"
#include "varlink_call.h"
#include "varlink_policy.h"

struct varlink_server;
struct varlink_connection;

#define VARLINK_ERROR_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define VARLINK_ERROR_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define VARLINK_ERROR_METHOD_NOT_IMPLEMENTED "org.varlink.service.MethodNotImplemented"
#define VARLINK_ERROR_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define VARLINK_ERROR_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define VARLINK_ERROR_EXPECTED_MORE "org.varlink.service.ExpectedMore"
/* Sent just before a connection is closed for breaking the protocol. */
#define VARLINK_ERROR_PROTOCOL "io.pressured.ProtocolViolation" /* = PROTOCOL_ERROR_PROTOCOL_VIOLATION */

/* A method gets its parameters (never NULL: absent and null arrive as an empty object) and must answer
 * with varlink_reply()/varlink_error() now or later; with VARLINK_CALL_MORE it may first send any number
 * of varlink_notify(). While a call is unanswered the connection reads no further calls. Returning a
 * negative errno without answering closes the connection. */
typedef int (*varlink_method_fn)(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                 void *userdata);

struct varlink_method {
        const char *name; /* without the interface, e.g. "GetStatus" */
        varlink_method_fn fn;
        /* The method's parameters as it parses them (params.h): checked against the interface's
         * definition by the test suite (test-interface), so that the two cannot drift apart. */
        const struct param *params;
};

struct varlink_interface {
        const char *name;        /* e.g. "io.pressured" */
        const char *description; /* the interface definition text */
        const struct varlink_method *methods;
        size_t n_methods;
};

struct varlink_info {
        const char *vendor, *product, *version, *url;
};

int varlink_server_new(sd_event *event, const struct varlink_interface *interfaces, size_t n_interfaces,
                       const struct varlink_info *info, void *userdata, struct varlink_server **ret);
struct varlink_server *varlink_server_free(struct varlink_server *s);

void varlink_server_set_max_message_size(struct varlink_server *s, size_t size);

/* What one local user, or all of them, may hold of the server (in the spirit of sd-varlink's
 * connections_max and connections_per_uid_max; root is bound by the first only): a connection over a
 * limit is accepted and closed at once,
 * before anything of it is read, and counted. A connection with no call in progress whose last call began
 * or ended (or which connected) idle_timeout_usec ago is closed (0: never): a peer that opened a
 * connection and went quiet, or sends half a message a byte at a time, holds nothing for long. */
/* None by default (0 everywhere). Applies to connections made from now on; existing ones over a lowered
 * limit stay. */
/* The interface of that name: one of the server's, or org.varlink.service (varlink_service.h). */
const struct varlink_interface *varlink_server_find_interface(const struct varlink_server *s, const char *name);
const struct varlink_info *varlink_server_info(const struct varlink_server *s);
const struct varlink_interface *varlink_server_interfaces(const struct varlink_server *s, size_t *ret_n);
struct varlink_server *varlink_connection_server(const struct varlink_connection *c);

int varlink_server_set_limits(struct varlink_server *s, const struct varlink_limits *limits);

/* Serve on an already listening socket (socket activation). The server takes the fd. */
int varlink_server_listen_fd(struct varlink_server *s, int fd);
/* Create, bind and listen on a unix socket path, replacing a stale socket file. The file is removed again
 * by varlink_server_free(). */
int varlink_server_listen_path(struct varlink_server *s, const char *path, mode_t mode);

/* Count connections in a quota shared with the daemon's other sockets (listener.h) too. */
void varlink_server_set_quota(struct varlink_server *s, struct connection_quota *q);
size_t varlink_server_n_connections(const struct varlink_server *s);

/* The final reply with parameters that are JSON text already (a large reply written piece by piece,
 * without a json-c tree of the whole; NULL: building them failed, the connection goes). */
int varlink_reply_serialized(struct varlink_connection *c, const char *params, size_t len);

/* Answers. Each takes ownership of params; for a oneway call they are dropped. NULL params mean that
 * building them failed: the connection is closed and -ENOMEM returned (see json_build.h). */
int varlink_reply(struct varlink_connection *c, struct json_object *params);
int varlink_notify(struct varlink_connection *c, struct json_object *params);
int varlink_error(struct varlink_connection *c, const char *error, struct json_object *params);
/* varlink_notify() with the parameters already serialized (JSON object text): for sending one event to
 * many subscribers without encoding it for each. NULL: encoding failed, as for varlink_notify(). */
int varlink_notify_serialized(struct varlink_connection *c, const char *params, size_t len);
/* params against table into out (params.h); on error the InvalidParameter reply is sent and -EINVAL
 * returned. */
int varlink_parse_params(struct varlink_connection *c, struct json_object *params, const struct param *table, void *out);
int varlink_error_invalid_parameter(struct varlink_connection *c, const char *parameter);

/* Per-call state owned by the connection: freed when the call is answered or the connection goes away. */
void varlink_connection_set_call_data(struct varlink_connection *c, void *data, void (*free_fn)(void *));

/* Called once the output queue has drained to empty, so that a streaming method can send what it held
 * back. */
void varlink_connection_set_drain_handler(struct varlink_connection *c,
                                          void (*fn)(struct varlink_connection *c, void *data));

size_t varlink_connection_queued(const struct varlink_connection *c);

/* Close the connection from the event loop (never under the caller's feet); its call data is freed then. */
void varlink_connection_close(struct varlink_connection *c);
const struct ucred *varlink_connection_peer(const struct varlink_connection *c);
/* The process that connected, named by pid and start time as it was at accept: a decision about "the
 * caller's process" opens it with pidref_open_proc(), which fails once it is gone. */
const struct pidref *varlink_connection_peer_ref(const struct varlink_connection *c);
/* The groups of the process that connected, as the kernel recorded them at connect() (SO_PEERGROUPS):
 * the primary group first, then the supplementary ones. The caller frees *ret. */
int varlink_connection_peer_groups(const struct varlink_connection *c, gid_t **ret, size_t *ret_n);
/* A new pidfd of the process that connected, from SO_PEERPIDFD (Linux 6.5 and newer; the caller closes
 * it), or a negative errno where the kernel has none: unlike the pid, it can never name another
 * process. */
int varlink_connection_peer_pidfd(const struct varlink_connection *c);
