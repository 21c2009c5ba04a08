/* SPDX-License-Identifier: MIT */
#pragma once

/* libpressure's insides, shared by its files:
 *   scope.c         replies parsed into pressure_scope and pressure_status (pure)
 *   client.c        the client: connections, reconnection, dispatch, synchronous calls
 *   subscription.c  subscriptions, one streaming Subscribe call each
 *   shrinker.c      shrinkers on the client's one Serve call, their requests and answers
 *   lru.c, shadow.c pressure_lru, its built-in shrinker, and its shadow entries (public API only)
 *
 * Locking: every field of a client and of its subscriptions and shrinkers is guarded by the client's
 * mutex. Dispatch reads the sockets under it and turns what came into work items; it runs the
 * application's callbacks from those items with the mutex released, so that a callback may call any
 * function of the library, and an application lock held around a library call cannot deadlock
 * against a callback that takes it. */

#include <assert.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "frame.h"
#include "pressure.h"

#define EXPORT __attribute__((visibility("default")))

/* Replies can be larger than calls: a status lists every watched cgroup. */
#define CLIENT_MAX_MESSAGE (16u * 1024u * 1024u)
/* Output a daemon does not take: past this, the connection is given up (and made again). */
#define CLIENT_MAX_OUTPUT (16u * 1024u * 1024u)

/* ---- scope.c ---- */

struct pressure_scope {
        struct json_object *obj; /* borrowed from the owner's message */
        char name[4096 + 16];
        enum pressure_scope_type type;
        int node;
        const char *cgroup;
        enum pressure_level level, previous;
        struct pressure_stall stall[2];
        bool have_stall[2];
        bool have_memory, have_watermarks, have_cgroup_memory, have_limit;
        uint64_t mem_total, mem_free, wmark_min, wmark_low, wmark_high;
        uint64_t cg_usage, cg_limit;
        uint64_t reclaim_target, timestamp;
        unsigned coalesced;
        bool removed;
        const char *source; /* NULL at ok */
        bool have_headroom;
        uint64_t headroom_limit, headroom_unreclaimable;
};

struct json_object *json_get(struct json_object *o, const char *key);
/* A reply to method (its short name) as the interface defines it, or -EPROTO (logged to c, if given).
 * Error replies pass: they are the caller's to read. */
int reply_check(struct pressure_client *c, struct json_object *msg, const char *method);
int scope_parse(struct json_object *o, struct pressure_scope *ret);
/* A GetStatus reply (taken over) as a status. */
int status_from_reply(struct json_object *reply, struct pressure_status **ret);
/* The errno for a Varlink error reply; 0 for a reply that is not an error. */
int reply_to_errno(struct json_object *reply);
/* {"type": ...} for a scope name ("system", "node:N", "/path"), or NULL if it is none. */
struct json_object *scope_ref_from_name(const char *name);

/* ---- client.c: connections ---- */

struct conn {
        int fd;
        struct frame_reader in;
        struct frame_writer out;
        uint32_t events; /* as registered with the client's epoll */
};

void conn_init(struct conn *c);
/* Non-blocking connect; the fd goes into epoll_fd. */
int conn_open(struct conn *c, const char *path, int epoll_fd);
void conn_close(struct conn *c, int epoll_fd);
/* Queue a message and send what the socket takes now; never waits. */
int conn_queue(struct conn *c, int epoll_fd, struct json_object *msg);
int conn_flush(struct conn *c, int epoll_fd);
/* Read what is there (bounded). 0, or -ECONNRESET at the end of the stream, or another error. */
int conn_fill(struct conn *c);
/* The next whole message: 1 and *ret, 0 when none is complete, <0 for a stream that cannot go on. */
int conn_next(struct conn *c, struct json_object **ret);
struct json_object *call_new(const char *method, struct json_object *params, bool more, bool oneway);
/* Send what waits, read what is there, and hand each whole message to fn (which takes it; a negative
 * return ends the stream with that error, a positive one stops reading for now). Returns 0, or the
 * error that ends the stream (-ECONNRESET at its end), after every message that came before it. */
int conn_pump(struct conn *c, int epoll_fd, int (*fn)(struct json_object *msg, void *data), void *data);

/* ---- client.c: work for the application, collected under the lock and run without it ---- */

enum work_kind {
        WORK_EVENT,        /* sub, msg: a scope state (is_initial) or a level change */
        WORK_MEMORY_EVENT, /* sub, msg */
        WORK_SUB_END,      /* sub, error */
        WORK_REQUESTS,     /* msg: a Serve reply with one or more requests */
        WORK_STATUS,       /* an async GetStatus finished: error, status */
        WORK_CONNECTION,   /* connected */
        WORK_LOG,          /* text, error: its syslog priority */
};

struct work {
        struct work *next;
        enum work_kind kind;
        struct pressure_subscription *sub;
        struct json_object *msg;  /* owned */
        struct json_object *item; /* borrowed from msg */
        int is_initial, error, connected;
        pressure_status_handler_t status_fn;
        void *status_userdata;
        struct pressure_status *status;
        char *text;
        pressure_log_handler_t log_handler;
        void *log_userdata;
};

struct pending_call; /* a reply expected on the control connection */

struct pressure_client {
        int n_ref;
        char *path;
        int timeout_ms;
        pthread_mutex_t lock; /* through client_lock() and client_unlock() only */
        pthread_cond_t cond;
        pthread_t lock_holder; /* valid while lock_held */
        bool lock_held; /* callbacks finished; a subscription started or ended */

        int epoll_fd;
        int wake_fd;    /* readable while work waits that no socket shows */
        int retry_fd;   /* timerfd: reach the daemon again */
        int release_fd; /* timerfd: a release that was not due yet */
        pid_t serve_for; /* Serve's for_pid: whose memory the shrinkers free (0: this process's) */

        /* The daemon: away after a stream ended or a connect failed; retried with a backoff. */
        bool away;
        int away_error; /* why: the errno of the failed connect, or -ECONNRESET */
        unsigned retry_ms;
        int told; /* what the connection handler was last told: -1 nothing, 0 away, 1 connected */
        pressure_connection_handler_t connection_handler;
        void *connection_userdata;
        pressure_log_handler_t log_handler;
        void *log_userdata;

        /* Calls that get one reply (AddShrinker, RemoveShrinker, async GetStatus) and oneway Answers. */
        struct conn ctl;
        struct pending_call *pending, *pending_last;

        struct pressure_subscription *subs;
        struct pressure_subscription *legacy; /* pressure_client_subscribe()'s */
        pressure_memory_event_handler_t memory_handler;
        void *memory_userdata;

        struct conn serve;
        bool serve_waiting; /* the Serve call is sent, its registration not in yet */
        char token[64];
        struct pressure_shrinker *shrinkers;
        struct pressure_shrinker **serve_members; /* the shrinkers named in the Serve call in flight */
        size_t n_serve_members;

        pressure_release_t release;
        void *release_userdata;
        bool release_pending;
        uint64_t last_release_us;

        struct work *work, *work_last;
        bool dispatching;
        pthread_t dispatcher;

        pthread_t thread;
        bool thread_running;
        bool free_on_thread_exit; /* the last reference was dropped on the library's thread */
        int stop_fd;
};

/* Under the lock. */
void client_add_work(struct pressure_client *c, struct work *w);
struct work *work_new(enum work_kind kind);
void work_free(struct work *w);
/* The daemon went away (a stream ended, a connect failed): every connection closes, shrinkers and
 * subscriptions wait for the reconnection, the application hears it once. */
void client_away(struct pressure_client *c, int error);
/* A message for the application's log handler, delivered from dispatch (nothing without a handler). */
/* The client's lock, with its holder recorded so that helpers that must run under it can say so. */
void client_lock(struct pressure_client *c);
void client_unlock(struct pressure_client *c);
/* pthread_cond_wait() and pthread_cond_timedwait() (deadline NULL: none) on c->cond, under the lock. */
void client_wait(struct pressure_client *c, const struct timespec *deadline);
#define client_assert_locked(c) assert((c)->lock_held && pthread_equal((c)->lock_holder, pthread_self()))

void client_log(struct pressure_client *c, int priority, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* A registration finished: tell the application when none is left. */
void client_check_ready(struct pressure_client *c);
/* The control connection, opened when first needed. */
int client_ctl(struct pressure_client *c);
/* Send a call on the control connection; done() gets its reply (NULL if the connection was lost), under
 * the lock. */
int client_ctl_call(struct pressure_client *c, struct json_object *call,
                    void (*done)(struct pressure_client *c, struct json_object *reply, void *data), void *data);
/* Whether the calling thread runs this client's callbacks now (then it may not wait for them). */
bool client_in_callback(struct pressure_client *c);
/* Wait until no callback runs (not from a callback). */
void client_wait_callbacks(struct pressure_client *c);
uint64_t now_usec(void);
/* Something new was asked of the daemon: reach it now if it was away, and wake the dispatcher. */
void client_kick(struct pressure_client *c);

/* ---- subscription.c ---- */

struct pressure_subscription {
        struct pressure_client *client;
        struct pressure_subscription *prev, *next;
        int n_ref;
        bool floating; /* owned by the client, not by a handle */
        struct json_object *params; /* of the Subscribe call, kept for the reconnection */
        pressure_event_handler_t handler;
        void *userdata;
        pressure_subscription_end_handler_t end_handler;
        void *end_userdata;
        struct conn conn;
        enum { SUB_WAITING, SUB_STARTING, SUB_ACTIVE, SUB_ENDED } state;
        int error;       /* why it ended */
        bool cancelled;  /* unsubscribed: no callback from now on */
        unsigned active; /* work items that name it */
};

void subscriptions_start(struct pressure_client *c);
void subscriptions_process(struct pressure_client *c);
void subscriptions_away(struct pressure_client *c);
size_t subscriptions_starting(const struct pressure_client *c);
void subscriptions_free_all(struct pressure_client *c);
/* Outside the lock. */
void subscription_run(struct pressure_client *c, struct work *w);
/* Under the lock, after run. */
void subscription_work_done(struct work *w);

/* ---- shrinker.c ---- */

/* Where a shrinker is with the daemon. In the client's list from WANTED to REFUSED.
 *
 *   UNREGISTERED --register--> WANTED --Serve/AddShrinker sent--> ACKING --id--> REGISTERED
 *   ACKING --refused--> REFUSED --the next Serve--> ACKING;  ACKING --lost--> WANTED
 *   REGISTERED --the daemon went away--> WANTED
 *   any --free--> FREED, or FREED_ACKING (named in a call: the reply is awaited) --reply--> FREED
 * A FREED shrinker goes once no callback of it runs. */
enum shrinker_state {
        SHRINKER_UNREGISTERED,
        SHRINKER_WANTED,
        SHRINKER_ACKING,
        SHRINKER_REGISTERED,
        SHRINKER_REFUSED,
        SHRINKER_FREED,
        SHRINKER_FREED_ACKING,
        _SHRINKER_STATE_MAX,
};

struct pressure_shrinker {
        struct pressure_client *client;
        struct pressure_shrinker *prev, *next; /* in the client's list, while registered or wanted */
        char *name;
        unsigned flags;
        int seeks, batch;
        pressure_count_objects_t count;
        pressure_scan_objects_t scan;
        void *userdata;
        pressure_destroy_t destroy;
        pressure_limit_handler_t on_limit;
        uint64_t limit; /* the growth limit the daemon told last (0: none): written on dispatch, read atomically */
        uint64_t id; /* from the daemon: SHRINKER_REGISTERED only */
        enum shrinker_state state; /* written by shrinker_set_state() only */
        unsigned active; /* callbacks running */
};

void shrinkers_start(struct pressure_client *c);
void shrinkers_process(struct pressure_client *c);
void shrinkers_away(struct pressure_client *c);
bool shrinkers_waiting(const struct pressure_client *c);
/* Outside the lock: run the requests of a Serve reply and send the answers. */
void shrinkers_run(struct pressure_client *c, struct work *w);
void shrinkers_release_if_due(struct pressure_client *c, bool *ret_call);
void release_heap(void *userdata);
