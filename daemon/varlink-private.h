/* SPDX-License-Identifier: MIT */
#pragma once

/* The server's and its connections' insides, for varlink.c (connections, input, calls) and
 * varlink_output.c (what goes out) only. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "frame.h"
#include "hashmap.h"
#include "json_build.h"
#include "listener.h"
#include "pidref.h"
#include "log.h"
#include "varlink.h"

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
        int fd;
        struct ucred peer;
        struct pidref peer_ref; /* the process that connected, named as it was at accept */
        sd_event_source *defer_source; /* processes buffered calls and deferred close */
        struct frame_reader in;
        struct frame_writer out;

        enum connection_state state; /* written by connection_set_state() only */
        unsigned call_flags;
        void *call_data;
        void (*call_data_free)(void *);
        void (*drain)(struct varlink_connection *c, void *data);

        uint64_t last_active_usec; /* when it connected, or a call of it began or ended */
        size_t accounted; /* its buffers' memory as last counted in the server's total */
        bool reading; /* in connection_read()'s loop, which goes on until EAGAIN by itself: not a state of
                       * the connection but of the stack (call_end() must not re-arm under it) */
        uint32_t events; /* as registered */
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


/* varlink.c's, for varlink_output.c */
void connection_kill(struct varlink_connection *c);          /* to be freed from the event loop */
void connection_call_end(struct varlink_connection *c);      /* the final reply went: read on */
void connection_account_buffers(struct varlink_connection *c);
void connection_update_events(struct varlink_connection *c);
/* varlink_output.c's, for varlink.c */
void connection_protocol_violation(struct varlink_connection *c, const char *reason);
