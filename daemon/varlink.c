/* SPDX-License-Identifier: MIT */
#include "varlink.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#include "clock.h"
#include "hashmap.h"
#include "json_build.h"
#include "list.h"
#include "listener.h"
#include "log.h"
#include "macro.h"
#include "pidref.h"
#include "sockets.h"
#include "varlink_call.h"
#include "varlink_stream.h"

/* Stop reading calls from a peer while this much output waits for it: a client that pipelines calls and
 * never reads cannot make the daemon buffer without bound. */
#define OUTPUT_HIGH_WATER (256u * 1024u)

/* What a connection may do next. Calls are read one at a time: none while one is open.
 *
 *   IDLE --call--> CALL --end--> IDLE            (a streaming call stays in CALL until its last reply)
 *   IDLE --peer shuts down--> CLOSING           (close once the output is out)
 *   CALL --peer shuts down--> CALL_CLOSING --end--> CLOSING --a call still buffered--> CALL_CLOSING
 *   any --error, limit, close--> DEAD           (freed from the event loop) */
enum connection_state {
        CONNECTION_IDLE,
        CONNECTION_CALL,
        CONNECTION_CALL_CLOSING,
        CONNECTION_CLOSING,
        CONNECTION_DEAD,
        _CONNECTION_STATE_MAX,
};


struct varlink_connection {
        struct varlink_server *server;
        struct varlink_connection *prev, *next;
        struct varlink_stream io; /* its socket and buffers */
        struct ucred peer;
        struct pidref peer_ref; /* the process that connected, named as it was at accept */
        sd_event_source *defer_source; /* processes buffered calls and deferred close */

        enum connection_state state; /* written by connection_set_state() only */
        unsigned call_flags;
        void *call_data;
        void (*call_data_free)(void *);
        void (*drain)(struct varlink_connection *c, void *data);

        uint64_t last_active_usec; /* when it connected, or a call of it began or ended */
        size_t accounted; /* its buffers' memory as last counted in the server's total */
        bool reading; /* in connection_read()'s loop, which goes on until EAGAIN by itself: not a state of
                       * the connection but of the stack (call_end() must not re-arm under it) */
};

struct varlink_server {
        sd_event *event;
        const struct varlink_interface *interfaces;
        size_t n_interfaces;
        struct varlink_info info;
        void *userdata;
        size_t max_message_size;
        struct json_text scratch; /* each message is written here, then framed */

        int listen_fd;
        char *socket_path; /* unlinked on free, if we created it */
        struct listener *listener;
        struct connection_quota *quota; /* shared with the other sockets; NULL: none */

        /* Connections are watched by an epoll set of the server's own, one source in the event loop:
         * one loop iteration serves up to CONNECTIONS_PER_WAKEUP ready connections, where a source per
         * connection costs an iteration (and its system calls) each. */
        int epoll_fd;
        sd_event_source *epoll_source;

        struct varlink_connection *connections;
        size_t n_connections;

        struct varlink_limits limits;
        size_t buffered; /* memory of every connection's buffers, as last counted */
        uint64_t n_overflow_closed;
        struct ratelimit overflow_log;
        struct hashmap *per_uid; /* uid -> connections open (as a pointer-sized count) */
        struct hashmap *buffered_per_uid; /* uid -> bytes its connections' buffers hold, as last counted */
        uint64_t n_refused; /* for the log line */
        struct ratelimit refuse_log;
        sd_event_source *idle_timer;
        /* accept() ran out of file descriptors or memory: the listening socket rests a moment instead
         * of waking the loop again at once (it is level-triggered) */
};

static inline bool connection_dead(const struct varlink_connection *c) {
        return c->state == CONNECTION_DEAD;
}

static inline bool connection_in_call(const struct varlink_connection *c) {
        return c->state == CONNECTION_CALL || c->state == CONNECTION_CALL_CLOSING;
}



static const char *const connection_state_names[_CONNECTION_STATE_MAX] = {
        [CONNECTION_IDLE] = "idle",
        [CONNECTION_CALL] = "call",
        [CONNECTION_CALL_CLOSING] = "call-closing",
        [CONNECTION_CLOSING] = "closing",
        [CONNECTION_DEAD] = "dead",
};

#define CONNECTIONS_PER_WAKEUP 64
/* Calls one connection may have processed per wake-up before the others get their turn. */
#define CALLS_PER_WAKEUP 8

static void connection_free(struct varlink_connection *c);
static void idle_timer_arm(struct varlink_server *s, uint64_t deadline);
static void connection_update_events(struct varlink_connection *c);
static void connection_set_events(struct varlink_connection *c, bool rearm);
static void connection_protocol_violation(struct varlink_connection *c, const char *reason);
static void connection_account_buffers(struct varlink_connection *c);
static void connection_call_end(struct varlink_connection *c);

static void connection_set_state(struct varlink_connection *c, enum connection_state state) {
        assert(state >= 0 && state < _CONNECTION_STATE_MAX);
        /* Nothing comes back from the dead: a call that ends on a dead connection leaves it dead. */
        if (c->state == state || c->state == CONNECTION_DEAD)
                return;
        log_debug("Connection of pid %d: %s -> %s.", (int) c->peer.pid, connection_state_names[c->state],
                  connection_state_names[state]);
        c->state = state;
}

/* The peer shut down its side, nothing is open, and everything for it is out: nobody is left to talk to. */
static bool connection_finished(const struct varlink_connection *c) {
        return c->state == CONNECTION_CLOSING && varlink_stream_queued(&c->io) == 0;
}

/* The peer shut down its side: answer what was asked (a call in progress goes on), then close. */
static void connection_peer_closed(struct varlink_connection *c) {
        if (c->state == CONNECTION_IDLE)
                connection_set_state(c, CONNECTION_CLOSING);
        else if (c->state == CONNECTION_CALL)
                connection_set_state(c, CONNECTION_CALL_CLOSING);
}

static bool connection_peer_gone(const struct varlink_connection *c) {
        return c->state == CONNECTION_CLOSING || c->state == CONNECTION_CALL_CLOSING;
}

static bool connection_wants_input(const struct varlink_connection *c) {
        return c->state == CONNECTION_IDLE && varlink_stream_queued(&c->io) < OUTPUT_HIGH_WATER;
}

/* ---- output ---- */

static void connection_kill(struct varlink_connection *c) {
        assert(c);

        if (connection_dead(c))
                return;
        connection_set_state(c, CONNECTION_DEAD);
        (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_ONESHOT);
}

/* ---- what goes out: replies, notifications, errors, framed into the output and written as far as
 * the socket takes it (the rest on EPOLLOUT) ---- */

/* Write what is queued now; whatever the socket does not take waits for EPOLLOUT. */
static int flush_now(struct varlink_connection *c) {
        int r = varlink_stream_flush(&c->io);
        if (r < 0) {
                log_debug_errno(r, "Connection of pid %d: write failed: %m", (int) c->peer.pid);
                connection_kill(c);
                return r;
        }
        connection_account_buffers(c);
        connection_update_events(c);
        return 0;
}

static int connection_send(struct varlink_connection *c, struct json_object *msg) {
        struct json_text *text = &c->server->scratch;
        int r;

        if (connection_dead(c))
                return -ECONNRESET;
        /* A message that cannot be sent is a gap in the conversation: the peer must not go on as if
         * nothing was lost. */
        json_text_truncate(text, 0);
        r = json_text_append_value(text, msg);
        if (r >= 0)
                r = varlink_stream_put(&c->io, text->data, text->len);
        /* The scratch text serves every message; a huge one is not kept. */
        if (text->size > 64 * 1024)
                json_text_done(text);
        if (r < 0) {
                connection_kill(c);
                return r;
        }
        return flush_now(c);
}

/* A message around parameters that are text already: no json-c tree of the whole. */
static int send_serialized(struct varlink_connection *c, const char *params, size_t len, bool continues) {
        static const char head[] = "{\"parameters\":", more[] = ",\"continues\":true}", end[] = "}";
        const char *tail = continues ? more : end;
        size_t tail_len = continues ? sizeof(more) - 1 : sizeof(end) - 1;
        char stack[4096];

        if (connection_dead(c))
                return -ECONNRESET;
        if (!params) {
                connection_kill(c);
                return -ENOMEM;
        }
        size_t total = sizeof(head) - 1 + len + tail_len;
        char *msg = total <= sizeof(stack) ? stack : malloc(total);
        if (!msg) {
                connection_kill(c);
                return -ENOMEM;
        }
        memcpy(msg, head, sizeof(head) - 1);
        memcpy(msg + sizeof(head) - 1, params, len);
        memcpy(msg + sizeof(head) - 1 + len, tail, tail_len);
        int r = varlink_stream_put(&c->io, msg, total);
        if (msg != stack)
                free(msg);
        if (r < 0) {
                connection_kill(c);
                return r;
        }
        return flush_now(c);
}

int varlink_notify_serialized(struct varlink_connection *c, const char *params, size_t len) {
        assert(c);

        if (!connection_in_call(c) || !(c->call_flags & VARLINK_CALL_MORE))
                return -EPROTO;
        return send_serialized(c, params, len, true);
}


int varlink_reply_serialized(struct varlink_connection *c, const char *params, size_t len) {
        assert(c);

        if (!connection_in_call(c))
                return -EBADMSG; /* programmer error: nothing to answer */
        int r = c->call_flags & VARLINK_CALL_ONEWAY ? 0 : send_serialized(c, params, len, false);
        connection_call_end(c);
        return r;
}


static int send_reply(struct varlink_connection *c, const char *error, struct json_object *params, bool continues) {
        int r = 0;

        if (!connection_in_call(c)) {
                json_object_put(params);
                return -EBADMSG; /* programmer error: nothing to answer */
        }

        /* NULL parameters: building them failed. The call cannot be answered as it should be, so the
         * connection goes (as for any message that cannot be sent); a final answer still ends the call. */
        if (!params) {
                connection_kill(c);
                r = -ENOMEM;
        } else if (!(c->call_flags & VARLINK_CALL_ONEWAY)) {
                struct json_object *msg = json_object_new_object();
                if (error)
                        jb_set_string(&msg, "error", error);
                jb_set(&msg, "parameters", params);
                jb_set_true(&msg, "continues", continues);
                if (msg)
                        r = connection_send(c, msg);
                else {
                        connection_kill(c);
                        r = -ENOMEM;
                }
                json_object_put(msg);
        } else
                json_object_put(params);

        if (!continues)
                connection_call_end(c);
        return r;
}

int varlink_reply(struct varlink_connection *c, struct json_object *params) {
        assert(c);

        return send_reply(c, NULL, params, false);
}

int varlink_notify(struct varlink_connection *c, struct json_object *params) {
        assert(c);

        if (!(c->call_flags & VARLINK_CALL_MORE)) {
                json_object_put(params);
                return -EPROTO;
        }
        return send_reply(c, NULL, params, true);
}

int varlink_error(struct varlink_connection *c, const char *error, struct json_object *params) {
        assert(c);

        return send_reply(c, error, params, false);
}

int varlink_error_invalid_parameter(struct varlink_connection *c, const char *parameter) {
        assert(c);

        struct json_object *p = json_object_new_object();
        jb_set_string(&p, "parameter", parameter);
        return varlink_error(c, VARLINK_ERROR_INVALID_PARAMETER, p);
}

static void connection_protocol_violation(struct varlink_connection *c, const char *reason) {
        assert(c);

        log_debug("Connection of pid %d broke the protocol (%s), closing it.", (int) c->peer.pid, reason);

        /* A last, best-effort error so that the peer learns why; then the connection goes. */
        struct json_object *msg = json_object_new_object();
        jb_set_string(&msg, "error", VARLINK_ERROR_PROTOCOL);
        jb_set(&msg, "parameters", jb_object_with("reason", json_object_new_string(reason)));
        if (msg)
                (void) connection_send(c, msg);
        json_object_put(msg);
        connection_kill(c);
}

int varlink_parse_params(struct varlink_connection *c, struct json_object *params, const struct param *table, void *out) {
        assert(c);

        const char *bad;
        if (params_dispatch(params, table, out, &bad) < 0) {
                (void) varlink_error_invalid_parameter(c, bad);
                return -EINVAL;
        }
        return 0;
}

/* ---- the memory of all buffers together ---- */

static size_t connection_buffered(const struct varlink_connection *c) {
        return varlink_stream_buffered(&c->io);
}

static void close_for_buffers(struct varlink_server *s, struct varlink_connection *big, enum varlink_overflow why) {
        unsigned suppressed;
        s->n_overflow_closed++;
        if (ratelimit_below(&s->overflow_log, event_now(s->event), &suppressed))
                log_warning("Closing the connection of uid %u (pid %d): it holds %zu bytes of buffers and %s "
                            "(max_buffered %zu; %llu closed so far).",
                            (unsigned) big->peer.uid, (int) big->peer.pid, big->accounted,
                            why == VARLINK_OVER_SHARE ? "its user's connections hold more than their share"
                                                      : "all together hold more than max_buffered",
                            s->limits.max_buffered, (unsigned long long) s->n_overflow_closed);
        connection_kill(big);
}

/* Over a share or the cap: varlink_policy_overflow() says whose connections go. Closed from the event
 * loop; what they hold counts until then, so the ones already condemned are left out of the choice. */
static void buffers_enforce(struct varlink_server *s, uid_t uid) {
        size_t n = 0, k = 0;
        for (struct varlink_connection *c = s->connections; c; c = c->next)
                n += !connection_dead(c);
        _cleanup_free_ struct varlink_holder *h = calloc(MAX(n, 1u), sizeof(*h));
        _cleanup_free_ struct varlink_connection **conns = calloc(MAX(n, 1u), sizeof(*conns));
        _cleanup_free_ size_t *victims = calloc(MAX(n, 1u), sizeof(size_t));
        _cleanup_free_ enum varlink_overflow *why = calloc(MAX(n, 1u), sizeof(*why));
        if (!h || !conns || !victims || !why)
                return; /* the next count tries again */
        for (struct varlink_connection *c = s->connections; c; c = c->next)
                if (!connection_dead(c)) {
                        h[k] = (struct varlink_holder){ .uid = c->peer.uid, .bytes = c->accounted };
                        conns[k++] = c;
                }
        size_t n_victims = varlink_policy_overflow(&s->limits, h, n, uid, victims, why);
        for (size_t i = 0; i < n_victims; i++)
                close_for_buffers(s, conns[victims[i]], why[i]);
}

/* c's buffers may have grown or shrunk: bring the server's total and its user's up to date. */
static void connection_account_buffers(struct varlink_connection *c) {
        assert(c);

        struct varlink_server *s = c->server;
        size_t now = connection_dead(c) ? c->accounted : connection_buffered(c);
        if (now != c->accounted)
                (void) hashmap_count_add_u64(s->buffered_per_uid, c->peer.uid,
                                             now > c->accounted ? (int) (now - c->accounted) : -(int) (c->accounted - now));
        s->buffered = s->buffered - c->accounted + now;
        c->accounted = now;
        if (s->limits.max_buffered == 0 || now == 0)
                return;
        size_t share = s->limits.max_buffered / VARLINK_BUFFERED_SHARE_DIVISOR;
        if ((c->peer.uid != 0 && hashmap_count_get_u64(s->buffered_per_uid, c->peer.uid) > share) ||
            s->buffered > s->limits.max_buffered)
                buffers_enforce(s, c->peer.uid);
}

/* ---- calls ---- */

static void connection_call_end(struct varlink_connection *c) {
        void *data = c->call_data;
        void (*free_fn)(void *) = c->call_data_free;

        connection_set_state(c, c->state == CONNECTION_CALL_CLOSING ? CONNECTION_CLOSING : CONNECTION_IDLE);
        c->call_flags = 0;
        c->call_data = NULL;
        c->call_data_free = NULL;
        c->drain = NULL;
        if (free_fn)
                free_fn(data);
        /* Holding nothing now: it may go idle. */
        c->last_active_usec = event_now(c->server->event);
        if (c->server->limits.idle_timeout_usec > 0)
                idle_timer_arm(c->server, c->last_active_usec + c->server->limits.idle_timeout_usec);

        /* Calls may be waiting in the input buffer, or still in the socket. Inside the read loop (a
         * oneway call ends there) the loop itself goes on with both: a deferred pass or a renewed
         * registration would cost a loop iteration or an epoll_ctl per call for nothing. */
        if (!connection_dead(c) && !c->reading)
                (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_ONESHOT);
        connection_set_events(c, !c->reading);
}

const struct varlink_interface *varlink_server_find_interface(const struct varlink_server *s, const char *name) {
        assert(s);

        for (size_t i = 0; i < s->n_interfaces; i++)
                if (streq(s->interfaces[i].name, name))
                        return &s->interfaces[i];
        return NULL;
}

const struct varlink_info *varlink_server_info(const struct varlink_server *s) {
        assert(s);

        return &s->info;
}

const struct varlink_interface *varlink_server_interfaces(const struct varlink_server *s, size_t *ret_n) {
        assert(s);

        *ret_n = s->n_interfaces;
        return s->interfaces;
}

struct varlink_server *varlink_connection_server(const struct varlink_connection *c) {
        assert(c);

        return c->server;
}

static int error_with_method(struct varlink_connection *c, const char *error, const char *key, const char *value) {
        return varlink_error(c, error, jb_object_with(key, json_object_new_string(value)));
}

static int dispatch_method(struct varlink_connection *c, const char *method, struct json_object *params,
                           unsigned flags, bool upgrade) {
        const char *dot = strrchr(method, '.');
        if (!dot || dot == method || !dot[1])
                return error_with_method(c, VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", method);

        _cleanup_free_ char *iface = strndup(method, (size_t) (dot - method));
        if (!iface)
                return -ENOMEM;
        const char *name = dot + 1;

        const struct varlink_interface *i = varlink_server_find_interface(c->server, iface);
        if (!i)
                return error_with_method(c, VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", iface);
        for (size_t k = 0; k < i->n_methods; k++)
                if (streq(i->methods[k].name, name)) {
                        /* No method of ours switches protocols. */
                        if (upgrade)
                                return error_with_method(c, VARLINK_ERROR_METHOD_NOT_IMPLEMENTED, "method", method);
                        return i->methods[k].fn(c, params, flags, c->server->userdata);
                }
        return error_with_method(c, VARLINK_ERROR_METHOD_NOT_FOUND, "method", method);
}

static int process_message(struct varlink_connection *c, const char *text, size_t len) {
        const char *bad;
        struct varlink_call call;

        c->last_active_usec = event_now(c->server->event);
        struct json_object *msg = varlink_call_parse_object(text, len, &bad);
        if (!msg && !bad)
                return -ENOMEM;
        if (msg)
                bad = varlink_call_parse(msg, &call);
        if (bad) {
                json_object_put(msg);
                connection_protocol_violation(c, bad);
                return 0;
        }

        /* Absent, null and {} parameters are the same. */
        struct json_object *empty = NULL, *params = call.params;
        if (!params) {
                params = empty = json_object_new_object();
                if (!empty) {
                        json_object_put(msg);
                        return -ENOMEM;
                }
        }

        /* Complete calls still buffered when the peer shut down its side are answered too. */
        connection_set_state(c, c->state == CONNECTION_CLOSING ? CONNECTION_CALL_CLOSING : CONNECTION_CALL);
        c->call_flags = call.flags;
        int r = dispatch_method(c, call.method, params, call.flags, call.upgrade);
        json_object_put(empty);
        json_object_put(msg);

        if (r < 0 && connection_in_call(c))
                return r;
        /* A oneway call is over once its method ran, whatever it did. */
        if (connection_in_call(c) && (call.flags & VARLINK_CALL_ONEWAY) && !c->call_data)
                connection_call_end(c);
        return 0;
}

/* Calls processed, at most *budget of them (each one counted off): one connection's flood of calls is
 * served a slice at a time, the others in between. */
static int process_input(struct varlink_connection *c, unsigned *budget) {
        while (!connection_dead(c) && !connection_in_call(c) && varlink_stream_queued(&c->io) < OUTPUT_HIGH_WATER && *budget > 0) {
                const char *text;
                size_t len;
                int r = varlink_stream_next(&c->io, &text, &len);
                if (r == -EMSGSIZE) {
                        connection_protocol_violation(c, "message exceeds the size limit");
                        return 0;
                }
                if (r <= 0)
                        return r;
                (*budget)--;
                r = process_message(c, text, len);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- connection plumbing ---- */

static void connection_set_events(struct varlink_connection *c, bool rearm) {
        if (!connection_dead(c) && varlink_stream_watch(&c->io, connection_wants_input(c), rearm) < 0)
                connection_kill(c);
}

static void connection_update_events(struct varlink_connection *c) {
        connection_set_events(c, false);
}

/* The socket takes output again. Returns false when the connection must go. */
static bool connection_write_ready(struct varlink_connection *c) {
        int r = varlink_stream_flush(&c->io);
        if (r < 0)
                return false;
        if (r > 0 && c->drain)
                c->drain(c, c->call_data);
        return !connection_dead(c) && !connection_finished(c);
}

/* Input is there: everything there is, as long as calls may be processed and this wake-up's slice of
 * calls lasts. What stays in the socket is reported again when the registration is renewed, what stays
 * in the buffer is processed from the deferred source. Returns false when the connection must go. */
static bool connection_read_ready(struct varlink_connection *c) {
        bool drained = false, ok = true;
        unsigned budget = CALLS_PER_WAKEUP;

        c->reading = true;
        while (ok && connection_wants_input(c) && budget > 0) {
                ssize_t n = varlink_stream_read(&c->io);
                if (n == -EAGAIN) {
                        drained = true;
                        break;
                }
                if (n == 0)
                        connection_peer_closed(c);
                ok = n >= 0 && process_input(c, &budget) >= 0;
        }
        c->reading = false;
        if (!ok)
                return false;
        if (budget == 0 && !connection_dead(c))
                /* Its slice is used up: the rest after the other connections had theirs. */
                (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_ONESHOT);
        /* Stopped before EAGAIN (a call is open, or the output is full): what stays in the socket must
         * be reported again once input is wanted. */
        if (!drained && !connection_peer_gone(c) && connection_wants_input(c))
                connection_set_events(c, true);
        varlink_stream_trim(&c->io);
        return !connection_finished(c);
}

static void connection_io(struct varlink_connection *c, uint32_t revents) {
        if (revents & EPOLLOUT) {
                if (!connection_write_ready(c))
                        goto kill;
                /* Reading may have stopped at the output's high water: go on, what waits in the socket
                 * raised no edge of its own. */
                if (connection_wants_input(c))
                        revents |= EPOLLIN;
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (!connection_read_ready(c))
                        goto kill;
                /* Hung up in both directions (or broken): nobody is left to answer. */
                if (revents & (EPOLLHUP | EPOLLERR))
                        goto kill;
        }
        connection_account_buffers(c);
        if (connection_dead(c))
                goto kill;
        connection_update_events(c);
        return;

kill:
        connection_free(c);
}

/* A connection's handler frees no connection but its own (others die through their deferred source):
 * every connection of the batch is still there when its turn comes. */
static int on_connections(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct epoll_event evs[CONNECTIONS_PER_WAKEUP];
        (void) src;
        (void) revents;

        int n = epoll_wait(fd, evs, CONNECTIONS_PER_WAKEUP, 0);
        if (n < 0 && errno == EINTR)
                return 0;
        /* An error returned here would make sd-event disable the source: every connection would go
         * quiet while the daemon looked alive. Stop instead, so that the service manager restarts it. */
        if (n < 0)
                return sd_event_exit(((struct varlink_server *) userdata)->event,
                                     log_error_errno(-errno, "epoll_wait on connections failed, stopping: %m"));
        for (int i = 0; i < n; i++)
                connection_io(evs[i].data.ptr, evs[i].events);
        return 0;
}

static int on_connection_defer(sd_event_source *s, void *userdata) {
        struct varlink_connection *c = userdata;
        (void) s;

        unsigned budget = CALLS_PER_WAKEUP;
        if (!connection_dead(c) && process_input(c, &budget) < 0)
                connection_kill(c);
        if (connection_dead(c) || connection_finished(c)) {
                connection_free(c);
                return 0;
        }
        if (budget == 0) {
                /* Another slice later: more complete calls may wait in the buffer. */
                (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_ONESHOT);
                connection_update_events(c);
                return 0;
        }
        /* The buffer holds no complete call now; the socket may still hold data that the read loop
         * left there when its slice ran out: renew the registration, which reports it. */
        connection_set_events(c, true);
        return 0;
}

static void connection_free(struct varlink_connection *c) {
        if (!c)
                return;
        struct varlink_server *s = c->server;

        /* The call's owner (a subscription) learns through its data being freed. */
        connection_kill(c);
        if (c->call_data_free)
                c->call_data_free(c->call_data);
        c->call_data = NULL;
        c->call_data_free = NULL;

        s->buffered -= c->accounted;
        if (c->accounted > 0)
                (void) hashmap_count_add_u64(s->buffered_per_uid, c->peer.uid, -(int) c->accounted);
        sd_event_source_disable_unref(c->defer_source);
        varlink_stream_done(&c->io);

        LIST_REMOVE(s->connections, c);
        s->n_connections--;
        if (s->quota)
                connection_quota_put(s->quota, c->peer.uid);
        (void) hashmap_count_add_u64(s->per_uid, c->peer.uid, -1);
        free(c);
}

/* Over a limit: closed before anything is read from it, counted, and logged at most a few times a
 * minute (a flood of refused connections must not become a flood of log lines). */
static int connection_refuse(struct varlink_server *s, int fd, const struct ucred *peer, const char *which) {
        unsigned suppressed;
        close(fd);
        s->n_refused++;
        if (ratelimit_below(&s->refuse_log, event_now(s->event), &suppressed))
                log_warning("Refused a connection of uid %u (pid %d): %s reached (%llu refused so far%s).",
                            (unsigned) peer->uid, (int) peer->pid, which, (unsigned long long) s->n_refused,
                            suppressed > 0 ? ", some not logged" : "");
        return -EDQUOT;
}

static int connection_new(struct varlink_server *s, int fd) {
        struct ucred peer = { .pid = 0, .uid = (uid_t) -1, .gid = (gid_t) -1 };
        socklen_t len = sizeof(peer);
        int r;

        (void) getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len);
        const char *which = varlink_policy_admit(&s->limits, s->n_connections, hashmap_count_get_u64(s->per_uid, peer.uid),
                                                 peer.uid);
        if (!which && s->quota)
                which = connection_quota_refusal(s->quota, peer.uid);
        if (which)
                return connection_refuse(s, fd, &peer, which);

        struct varlink_connection *c = calloc(1, sizeof(*c));
        if (!c || hashmap_count_add_u64(s->per_uid, peer.uid, +1) < 0) {
                free(c);
                close(fd);
                return -ENOMEM;
        }
        c->server = s;
        c->peer = peer;
        (void) pidref_set(&c->peer_ref, peer.pid); /* gone already: start 0, nothing will match it */

        c->last_active_usec = event_now(s->event);
        varlink_stream_init(&c->io, fd, s->epoll_fd, c, s->max_message_size);

        LIST_PREPEND(s->connections, c);
        s->n_connections++;
        if (s->quota)
                (void) connection_quota_take(s->quota, peer.uid);

        r = varlink_stream_register(&c->io);
        if (r >= 0)
                r = sd_event_add_defer(s->event, &c->defer_source, on_connection_defer, c);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->defer_source, SD_EVENT_OFF);
        if (r < 0) {
                connection_free(c);
                return r;
        }
        if (s->limits.idle_timeout_usec > 0)
                idle_timer_arm(s, c->last_active_usec + s->limits.idle_timeout_usec);
        return 0;
}

/* ---- idle connections ---- */

/* The timer is set for the earliest moment a connection with no call could have been idle long enough,
 * and is off while there is none: subscribers (a call that stays open) never wake the daemon for this. */
static void idle_timer_arm(struct varlink_server *s, uint64_t deadline) {
        uint64_t cur = 0;
        int enabled = SD_EVENT_OFF;
        if (!s->idle_timer)
                return;
        (void) sd_event_source_get_enabled(s->idle_timer, &enabled);
        if (enabled != SD_EVENT_OFF && sd_event_source_get_time(s->idle_timer, &cur) >= 0 && cur <= deadline)
                return;
        (void) sd_event_source_set_time(s->idle_timer, deadline);
        (void) sd_event_source_set_enabled(s->idle_timer, SD_EVENT_ONESHOT);
}

static int on_idle_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct varlink_server *s = userdata;
        uint64_t now = event_now(s->event), timeout = s->limits.idle_timeout_usec, next = UINT64_MAX;
        (void) src;
        (void) usec;

        for (struct varlink_connection *c = s->connections, *n; c; c = n) {
                n = c->next;
                if (connection_in_call(c) || connection_dead(c) || timeout == 0)
                        continue;
                if (varlink_policy_idle(&s->limits, c->last_active_usec, now)) {
                        log_debug("Closing connection of uid %u (pid %d): idle for %llu s.", (unsigned) c->peer.uid,
                                  (int) c->peer.pid, (unsigned long long) ((now - c->last_active_usec) / 1000000));
                        connection_free(c);
                } else
                        next = MIN(next, c->last_active_usec + timeout);
        }
        if (next != UINT64_MAX)
                idle_timer_arm(s, next);
        return 0;
}

/* ---- the listening socket ---- */

static void on_accept(int fd, void *userdata) {
        int r = connection_new(userdata, fd);
        if (r < 0 && r != -EDQUOT)
                log_warning_errno(r, "Failed to set up connection, ignoring: %m");
}

int varlink_server_new(sd_event *event, const struct varlink_interface *interfaces, size_t n_interfaces,
                       const struct varlink_info *info, void *userdata, struct varlink_server **ret) {
        assert(event);

        struct varlink_server *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->interfaces = interfaces;
        s->n_interfaces = n_interfaces;
        if (info)
                s->info = *info;
        s->userdata = userdata;
        s->max_message_size = FRAME_DEFAULT_MAX_SIZE;
        s->refuse_log = s->overflow_log =
                (struct ratelimit){ .interval_usec = 10 * 1000000ULL, .burst = 5 };
        s->listen_fd = -EBADF;
        s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        int r = s->epoll_fd < 0 ? -errno : 0;
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &s->per_uid);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &s->buffered_per_uid);
        if (r >= 0)
                r = sd_event_add_time(event, &s->idle_timer, CLOCK_MONOTONIC, 0, 1000000, on_idle_timer, s);
        if (r >= 0) {
                (void) sd_event_source_set_enabled(s->idle_timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(s->idle_timer, "varlink-idle");
        }
        if (r >= 0)
                r = sd_event_add_io(event, &s->epoll_source, s->epoll_fd, EPOLLIN, on_connections, s);
        if (r < 0) {
                varlink_server_free(s);
                return r;
        }
        (void) sd_event_source_set_description(s->epoll_source, "varlink-connections");
        *ret = s;
        return 0;
}

void varlink_server_set_max_message_size(struct varlink_server *s, size_t size) {
        assert(s);

        s->max_message_size = size;
        for (struct varlink_connection *c = s->connections; c; c = c->next)
                varlink_stream_set_max_message(&c->io, size);
}

int varlink_server_set_limits(struct varlink_server *s, const struct varlink_limits *limits) {
        assert(s);

        s->limits = *limits;
        /* A new or shorter timeout applies to the connections that hold nothing now, too. */
        for (struct varlink_connection *c = s->connections; c && limits->idle_timeout_usec > 0; c = c->next)
                if (!connection_in_call(c))
                        idle_timer_arm(s, c->last_active_usec + limits->idle_timeout_usec);
        return 0;
}

struct varlink_server *varlink_server_free(struct varlink_server *s) {
        if (!s)
                return NULL;
        while (s->connections)
                connection_free(s->connections);
        hashmap_free(s->per_uid);
        hashmap_free(s->buffered_per_uid);
        sd_event_source_disable_unref(s->idle_timer);
        sd_event_source_disable_unref(s->epoll_source);
        if (s->epoll_fd >= 0)
                close(s->epoll_fd);
        listener_free(s->listener);
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        if (s->socket_path) {
                (void) unlink(s->socket_path);
                free(s->socket_path);
        }
        sd_event_unref(s->event);
        json_text_done(&s->scratch);
        free(s);
        return NULL;
}

int varlink_server_listen_fd(struct varlink_server *s, int fd) {
        assert(s);

        int r;

        if (s->listener)
                return -EBUSY;
        r = fd_set_nonblock(fd);
        if (r < 0)
                return r;
        r = listener_new(s->event, fd, "varlink-listen", on_accept, s, &s->listener);
        if (r < 0)
                return r;
        s->listen_fd = fd;
        return 0;
}

int varlink_server_listen_path(struct varlink_server *s, const char *path, mode_t mode) {
        _cleanup_close_ int fd = unix_listen(path, mode);
        if (fd < 0)
                return fd;
        s->socket_path = strdup(path);
        if (!s->socket_path)
                return -ENOMEM;
        int r = varlink_server_listen_fd(s, fd);
        if (r < 0)
                return r;
        TAKE_FD(fd);
        return 0;
}

void varlink_server_set_quota(struct varlink_server *s, struct connection_quota *q) {
        assert(s);

        s->quota = q;
}

size_t varlink_server_n_connections(const struct varlink_server *s) {
        assert(s);

        return s->n_connections;
}

void varlink_connection_set_call_data(struct varlink_connection *c, void *data, void (*free_fn)(void *)) {
        c->call_data = data;
        c->call_data_free = free_fn;
}

void varlink_connection_set_drain_handler(struct varlink_connection *c,
                                          void (*fn)(struct varlink_connection *c, void *data)) {
        c->drain = fn;
}

void varlink_connection_close(struct varlink_connection *c) {
        assert(c);

        connection_kill(c);
}

size_t varlink_connection_queued(const struct varlink_connection *c) {
        assert(c);

        return varlink_stream_queued(&c->io);
}

int varlink_connection_peer_groups(const struct varlink_connection *c, gid_t **ret, size_t *ret_n) {
        assert(c);

        socklen_t len = 16 * sizeof(gid_t);
        for (;;) {
                _cleanup_free_ gid_t *g = malloc(sizeof(gid_t) + len);
                if (!g)
                        return -ENOMEM;
                g[0] = c->peer.gid;
                socklen_t got = len;
                if (getsockopt(c->io.fd, SOL_SOCKET, SO_PEERGROUPS, g + 1, &got) < 0) {
                        if (errno == ERANGE && got > len) {
                                len = got; /* the kernel says how much room it needs */
                                continue;
                        }
                        got = 0; /* no supplementary groups known: the primary one alone */
                }
                *ret_n = 1 + got / sizeof(gid_t);
                *ret = TAKE_PTR(g);
                return 0;
        }
}

int varlink_connection_peer_pidfd(const struct varlink_connection *c) {
        assert(c);

        /* The kernel keeps the connecting process with the socket: asked now, it still names that one
         * (one descriptor per connection for the whole of its life would halve how many fit). */
        int pidfd = -EBADF;
        socklen_t len = sizeof(pidfd);
        if (getsockopt(c->io.fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
                return -errno;
        return pidfd;
}

const struct pidref *varlink_connection_peer_ref(const struct varlink_connection *c) {
        assert(c);

        return &c->peer_ref;
}

const struct ucred *varlink_connection_peer(const struct varlink_connection *c) {
        assert(c);

        return &c->peer;
}

