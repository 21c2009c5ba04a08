/* SPDX-License-Identifier: MIT */
/* Subscriptions: each a streaming Subscribe call on a connection of its own, made again after the
 * daemon comes back, delivered from dispatch (the first states too), ended by unref. */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "list.h"
#include "macro.h"
#include "protocol.h"

static void sub_close(struct pressure_subscription *s) {
        conn_close(&s->conn, s->client->epoll_fd);
}

static void sub_unlink(struct pressure_subscription *s) {
        struct pressure_client *c = s->client;
        client_assert_locked(c);
        if (s->prev || c->subs == s) /* linked */
                LIST_REMOVE(c->subs, s);
        if (c->legacy == s)
                c->legacy = NULL;
}

static void sub_destroy(struct pressure_subscription *s) {
        sub_close(s);
        frame_reader_done(&s->conn.in);
        json_object_put(s->params);
        free(s);
}

/* No handle and no work names it: gone. A floating one ends with its call. */
static void sub_maybe_destroy(struct pressure_subscription *s) {
        if (s->n_ref > 0 || s->active > 0 || (s->floating && s->state != SUB_ENDED))
                return;
        sub_unlink(s);
        sub_destroy(s);
}

static void sub_add_work(struct pressure_subscription *s, struct work *w) {
        w->sub = s;
        s->active++;
        client_add_work(s->client, w);
}

/* The call is over for good: refused, its scopes removed, or a broken stream. */
static void sub_end(struct pressure_subscription *s, int error) {
        s->state = SUB_ENDED;
        s->error = error;
        sub_close(s);
        struct work *w = work_new(WORK_SUB_END);
        if (w) {
                w->error = error;
                sub_add_work(s, w);
        }
        pthread_cond_broadcast(&s->client->cond);
}

static int sub_start(struct pressure_subscription *s) {
        struct pressure_client *c = s->client;
        int r = conn_open(&s->conn, c->path, c->epoll_fd);
        if (r >= 0) {
                struct json_object *call = call_new("io.pressured.Subscribe", json_object_get(s->params), true, false);
                r = conn_queue(&s->conn, c->epoll_fd, call);
                json_object_put(call);
        }
        if (r < 0) {
                sub_close(s);
                return r;
        }
        s->state = SUB_STARTING;
        return 0;
}

void subscriptions_start(struct pressure_client *c) {
        for (struct pressure_subscription *s = c->subs; s && !c->away; s = s->next)
                if (s->state == SUB_WAITING && !s->cancelled) {
                        int r = sub_start(s);
                        if (r < 0)
                                client_away(c, r);
                }
}

void subscriptions_away(struct pressure_client *c) {
        for (struct pressure_subscription *s = c->subs; s; s = s->next)
                if (s->state == SUB_STARTING || s->state == SUB_ACTIVE) {
                        sub_close(s);
                        s->state = SUB_WAITING;
                }
        pthread_cond_broadcast(&c->cond);
}

size_t subscriptions_starting(const struct pressure_client *c) {
        size_t n = 0;
        for (const struct pressure_subscription *s = c->subs; s; s = s->next)
                n += s->state == SUB_STARTING;
        return n;
}

/* Errors that say the daemon is going, not that this subscription is wrong. */
static bool error_means_away(struct json_object *msg) {
        const char *e = json_object_get_string(json_get(msg, "error"));
        return e && streq(e, "io.pressured.ShuttingDown");
}

static void sub_message(struct pressure_subscription *s, struct json_object *msg) {
        struct json_object *p = json_get(msg, "parameters");

        if (json_get(msg, "error")) {
                if (error_means_away(msg)) {
                        json_object_put(msg);
                        client_away(s->client, -ESHUTDOWN);
                        return;
                }
                int r = reply_to_errno(msg);
                json_object_put(msg);
                sub_end(s, r == -ECONNRESET ? -ENOENT : r); /* ScopeRemoved: its scopes are gone */
                return;
        }
        if (reply_check(s->client, msg, "Subscribe") < 0) {
                json_object_put(msg);
                sub_end(s, -EPROTO);
                return;
        }
        struct json_object *state = json_get(p, "state");
        if (s->state == SUB_STARTING) {
                if (!json_object_is_type(state, json_type_array)) {
                        json_object_put(msg);
                        sub_end(s, -EPROTO);
                        return;
                }
                s->state = SUB_ACTIVE;
                pthread_cond_broadcast(&s->client->cond);
                /* One work item per state, each with its own reference to the message. */
                for (size_t i = 0; i < json_object_array_length(state); i++) {
                        struct work *w = work_new(WORK_EVENT);
                        if (!w)
                                break;
                        w->msg = json_object_get(msg);
                        w->item = json_object_array_get_idx(state, i);
                        w->is_initial = 1;
                        sub_add_work(s, w);
                }
                json_object_put(msg);
                return;
        }
        struct json_object *event = json_get(p, "event"), *mem = json_get(p, "memory_event");
        struct work *w = work_new(event ? WORK_EVENT : WORK_MEMORY_EVENT);
        if (!w || (!event && !mem)) {
                free(w);
                json_object_put(msg);
                return; /* a reply of a later daemon this library does not know: skipped */
        }
        w->msg = msg;
        w->item = event ? event : mem;
        sub_add_work(s, w);
}

/* One message; reading stops once the subscription ended or the daemon went. */
static int sub_pumped(struct json_object *msg, void *data) {
        struct pressure_subscription *s = data;
        sub_message(s, msg);
        return s->client->away || s->state == SUB_ENDED;
}

void subscriptions_process(struct pressure_client *c) {
        client_assert_locked(c);
        for (struct pressure_subscription *s = c->subs, *next; s && !c->away; s = next) {
                next = s->next;
                if (s->state != SUB_STARTING && s->state != SUB_ACTIVE)
                        continue;
                /* What came before an end is delivered first. */
                int r = conn_pump(&s->conn, c->epoll_fd, sub_pumped, s);
                if (c->away)
                        return;
                if (r == -EPROTO || r == -ENOMEM)
                        sub_end(s, r);
                else if (r < 0 && s->state != SUB_ENDED)
                        client_away(c, r); /* the stream ended without a word: the daemon went */
        }
}

void subscriptions_free_all(struct pressure_client *c) {
        while (c->subs) {
                struct pressure_subscription *s = c->subs;
                sub_unlink(s);
                sub_destroy(s);
        }
}

/* ---- run outside the lock ---- */

void subscription_run(struct pressure_client *c, struct work *w) {
        struct pressure_subscription *s = w->sub;

        client_lock(c);
        bool cancelled = s->cancelled;
        pressure_event_handler_t handler = s->handler;
        void *userdata = s->userdata;
        pressure_subscription_end_handler_t end = s->end_handler;
        void *end_userdata = s->end_userdata;
        pressure_memory_event_handler_t mem = c->memory_handler;
        void *mem_userdata = c->memory_userdata;
        client_unlock(c);
        if (cancelled)
                return;

        switch (w->kind) {
        case WORK_EVENT: {
                struct pressure_scope scope;
                if (scope_parse(w->item, &scope) >= 0)
                        handler(c, &scope, w->is_initial, userdata);
                break;
        }
        case WORK_MEMORY_EVENT: {
                struct memory_event_snapshot e;
                if (mem && protocol_decode_memory_event(w->item, &e) >= 0 && e.id.type == SCOPE_CGROUP)
                        mem(c, e.id.cgroup, memory_event_to_string(e.kind), e.count, mem_userdata);
                break;
        }
        case WORK_SUB_END:
                if (end)
                        end(s, w->error, end_userdata);
                break;
        default:
                break;
        }
}

void subscription_work_done(struct work *w) {
        struct pressure_subscription *s = w->sub;
        s->active--;
        sub_maybe_destroy(s);
}

/* ---- the public face ---- */

EXPORT int pressure_subscription_new(struct pressure_client *c, const char *const *scopes,
                                     enum pressure_level min_level, pressure_event_handler_t handler, void *userdata,
                                     struct pressure_subscription **ret) {
        if (!c || !handler || !pressure_level_to_string(min_level))
                return -EINVAL;

        struct json_object *params = json_object_new_object(), *list = json_object_new_array();
        size_t n = 0;
        for (; scopes && scopes[n]; n++) {
                struct json_object *ref = scope_ref_from_name(scopes[n]);
                if (!ref) {
                        json_object_put(list);
                        json_object_put(params);
                        return -EINVAL;
                }
                json_object_array_add(list, ref);
        }
        json_object_object_add(params, "scopes", list);
        if (min_level > PRESSURE_LEVEL_OK)
                json_object_object_add(params, "min_level", json_object_new_string(pressure_level_to_string(min_level)));

        struct pressure_subscription *s = calloc(1, sizeof(*s));
        if (!s) {
                json_object_put(params);
                return -ENOMEM;
        }
        conn_init(&s->conn);
        s->params = params;
        s->handler = handler;
        s->userdata = userdata;
        s->state = SUB_WAITING;

        client_lock(c);
        s->client = c;
        LIST_PREPEND(c->subs, s);
        if (ret) {
                s->n_ref = 1;
                pressure_client_ref(c); /* a handle keeps its client */
                *ret = s;
        } else
                s->floating = true;
        int r = c->away ? 0 : sub_start(s);
        if (r < 0)
                client_away(c, r);
        client_kick(c);
        client_unlock(c);
        return 0;
}

EXPORT struct pressure_subscription *pressure_subscription_ref(struct pressure_subscription *s) {
        if (!s)
                return NULL;
        client_lock(s->client);
        s->n_ref++;
        client_unlock(s->client);
        return s;
}

EXPORT struct pressure_subscription *pressure_subscription_unref(struct pressure_subscription *s) {
        if (!s)
                return NULL;
        struct pressure_client *c = s->client;
        client_lock(c);
        if (--s->n_ref > 0) {
                client_unlock(c);
                return NULL;
        }
        /* Unsubscribe: the call ends, and no callback of it runs once this returns (one running on
         * another thread is waited for; from its own callback, the rest of that callback is the last). */
        s->cancelled = true;
        sub_close(s);
        s->state = SUB_ENDED;
        client_wait_callbacks(c);
        sub_maybe_destroy(s);
        client_check_ready(c);
        client_unlock(c);
        pressure_client_unref(c);
        return NULL;
}

EXPORT struct pressure_client *pressure_subscription_get_client(struct pressure_subscription *s) {
        return s ? s->client : NULL;
}

EXPORT int pressure_subscription_set_end_handler(struct pressure_subscription *s,
                                                 pressure_subscription_end_handler_t handler, void *userdata) {
        if (!s)
                return -EINVAL;
        client_lock(s->client);
        s->end_handler = handler;
        s->end_userdata = userdata;
        client_unlock(s->client);
        return 0;
}

EXPORT int pressure_subscription_get_state(struct pressure_subscription *s) {
        if (!s)
                return -EINVAL;
        client_lock(s->client);
        int r = s->state == SUB_ENDED ? s->error < 0 ? s->error : -ECANCELED
                : s->state == SUB_ACTIVE ? 1 : 0;
        client_unlock(s->client);
        return r;
}

EXPORT int pressure_client_set_memory_event_handler(struct pressure_client *c, pressure_memory_event_handler_t handler,
                                                    void *userdata) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        c->memory_handler = handler;
        c->memory_userdata = userdata;
        client_unlock(c);
        return 0;
}

/* Called locked, returns unlocked: the library's thread is given 10 ms to answer, or (no thread) the
 * answer is awaited here for up to a second, and dispatched. */
static void subscribe_wait(struct pressure_client *c, bool threaded, uint64_t deadline) {
        if (threaded) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 10 * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                client_wait(c, &ts);
                client_unlock(c);
                return;
        }
        client_unlock(c);
        struct pollfd p = { .fd = c->epoll_fd, .events = POLLIN };
        uint64_t left = deadline == UINT64_MAX ? 1000 : (deadline - MIN(deadline, now_usec())) / 1000 + 1;
        (void) poll(&p, 1, (int) MIN(left, 1000u));
        (void) pressure_client_dispatch(c);
}

/* The first interface: one subscription per client, its answer awaited, its first states delivered
 * before it returns (by the library's thread in thread mode, by dispatching here otherwise). */
EXPORT int pressure_client_subscribe(struct pressure_client *c, const char *const *scopes,
                                     enum pressure_level min_level, pressure_event_handler_t handler,
                                     void *userdata) {
        struct pressure_subscription *s;
        if (!c || !handler)
                return -EINVAL;
        client_lock(c);
        bool busy = c->legacy != NULL;
        bool threaded = c->thread_running;
        int timeout_ms = c->timeout_ms;
        client_unlock(c);
        if (busy)
                return -EBUSY;

        int r = pressure_subscription_new(c, scopes, min_level, handler, userdata, &s);
        if (r < 0)
                return r;
        uint64_t deadline = timeout_ms > 0 ? now_usec() + (uint64_t) timeout_ms * 1000 : UINT64_MAX;
        for (;;) {
                client_lock(c);
                int state = s->state;
                bool away = c->away, delivered = s->active == 0;
                if (state == SUB_ENDED || away) {
                        r = state == SUB_ENDED ? s->error : c->away_error;
                        client_unlock(c);
                        break;
                }
                if (state == SUB_ACTIVE && delivered) {
                        c->legacy = s;
                        s->floating = true; /* the client owns it from now on */
                        s->n_ref--;
                        client_unlock(c);
                        pressure_client_unref(c);
                        return 0;
                }
                if (now_usec() >= deadline) {
                        client_unlock(c);
                        r = -ETIMEDOUT;
                        break;
                }
                subscribe_wait(c, threaded, deadline);
        }
        pressure_subscription_unref(s);
        return r < 0 ? r : -EPROTO;
}
