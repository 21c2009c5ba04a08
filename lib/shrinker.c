/* SPDX-License-Identifier: MIT */
/* Shrinkers: all of a client's on one streaming Serve call; one added or removed later is one
 * AddShrinker or RemoveShrinker call, the others untouched. Requests run from dispatch, without the
 * client's lock; their answers go back in one oneway Answer per batch. */

#include <errno.h>
#include <math.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <syslog.h>

#include "internal.h"
#include "pressure-private.h"
#include "list.h"
#include "macro.h"
#include "protocol.h"

#define NAME_MAX_LEN 64
/* Answers of one batch, sent in one call. */
#define ANSWERS_MAX 4096
/* After scans that freed something, memory goes back to the kernel at most this often. */
#define RELEASE_INTERVAL_US 100000

/* Objects freed into glibc's heap stay in the process until the heap is trimmed; without that, freeing
 * a cache lowers neither the RSS nor the cgroup's usage, and the pressure stays. */
void release_heap(void *userdata) {
        (void) userdata;
#ifdef __GLIBC__
        (void) malloc_trim(0);
#endif
}

static bool shrinker_freed(const struct pressure_shrinker *s) {
        return s->state == SHRINKER_FREED || s->state == SHRINKER_FREED_ACKING;
}

/* In the client's list: registered with the library and not freed. */
static bool shrinker_linked(const struct pressure_shrinker *s) {
        return s->state != SHRINKER_UNREGISTERED && !shrinker_freed(s);
}

static bool transition_ok(enum shrinker_state from, enum shrinker_state to) {
        switch (to) {
        case SHRINKER_WANTED:
                return from == SHRINKER_UNREGISTERED || from == SHRINKER_ACKING || from == SHRINKER_REGISTERED;
        case SHRINKER_ACKING:
                return from == SHRINKER_WANTED || from == SHRINKER_REFUSED;
        case SHRINKER_REGISTERED:
        case SHRINKER_REFUSED:
        case SHRINKER_FREED_ACKING:
                return from == SHRINKER_ACKING;
        case SHRINKER_FREED:
                return from != SHRINKER_FREED;
        default:
                return false;
        }
}

static void shrinker_set_state(struct pressure_shrinker *s, enum shrinker_state state) {
        client_assert_locked(s->client);
        if (s->state == state)
                return;
        assert(transition_ok(s->state, state));
        s->state = state;
        if (state != SHRINKER_REGISTERED)
                s->id = 0;
}

static void shrinker_maybe_destroy(struct pressure_shrinker *s) {
        if (s->state != SHRINKER_FREED || s->active > 0)
                return;
        free(s->name);
        free(s);
}

static void shrinker_unlink(struct pressure_shrinker *s) {
        struct pressure_client *c = s->client;
        if (!shrinker_linked(s))
                return;
        LIST_REMOVE(c->shrinkers, s);
}

static struct json_object *shrinker_spec(const struct pressure_shrinker *s) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(s->name));
        if (s->flags & PRESSURE_SHRINKER_NUMA_AWARE)
                json_object_object_add(o, "numa_aware", json_object_new_boolean(1));
        if (s->flags & PRESSURE_SHRINKER_MEMCG_AWARE)
                json_object_object_add(o, "memcg_aware", json_object_new_boolean(1));
        if (s->seeks >= 0)
                json_object_object_add(o, "seeks", json_object_new_int(s->seeks));
        if (s->batch > 0)
                json_object_object_add(o, "batch", json_object_new_int(s->batch));
        return o;
}

static void remove_on_daemon(struct pressure_client *c, uint64_t id) {
        client_assert_locked(c);
        if (!c->token[0] || id == 0)
                return;
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "token", json_object_new_string(c->token));
        json_object_object_add(p, "shrinker", json_object_new_int64((int64_t) id));
        /* Oneway: nothing waits for it; a shrinker the daemon no longer has is what we want. */
        (void) client_ctl_call(c, call_new("io.pressured.RemoveShrinker", p, false, true), NULL, NULL);
}

/* ---- one at a time: AddShrinker ---- */

static void add_done(struct pressure_client *c, struct json_object *reply, void *data) {
        struct pressure_shrinker *s = data;
        struct shrinker_ref ref = {};
        /* Through the daemon's own codec: an AddShrinker reply without a whole ShrinkerRef is no id. */
        if (reply && !json_get(reply, "error") &&
            (reply_check(c, reply, "AddShrinker") < 0 ||
             protocol_decode_shrinker_ref(json_get(json_get(reply, "parameters"), "shrinker"), &ref) < 0))
                ref.id = 0;
        uint64_t id = ref.id;
        bool freed = s->state == SHRINKER_FREED_ACKING;
        if (!reply || json_get(reply, "error") || id == 0) {
                /* Lost with the connection: asked again when the daemon is back. */
                shrinker_set_state(s, freed ? SHRINKER_FREED : reply ? SHRINKER_REFUSED : SHRINKER_WANTED);
                if (reply && !freed)
                        client_log(c, LOG_WARNING, "pressured refused shrinker \"%s\": %s", s->name,
                                   json_object_get_string(json_get(reply, "error")) ?: "no id");
        } else if (freed) {
                remove_on_daemon(c, id);
                shrinker_set_state(s, SHRINKER_FREED);
        } else {
                shrinker_set_state(s, SHRINKER_REGISTERED);
                s->id = id;
        }
        json_object_put(reply);
        shrinker_maybe_destroy(s);
        client_check_ready(c);
}

static void add_on_daemon(struct pressure_client *c, struct pressure_shrinker *s) {
        client_assert_locked(c);
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "token", json_object_new_string(c->token));
        json_object_object_add(p, "shrinker", shrinker_spec(s));
        if (client_ctl_call(c, call_new("io.pressured.AddShrinker", p, false, false), add_done, s) >= 0)
                shrinker_set_state(s, SHRINKER_ACKING);
}

/* ---- all at once: the Serve call ---- */

static void serve_start(struct pressure_client *c) {
        client_assert_locked(c);
        size_t n = 0;
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                n++;
        if (n == 0 || c->serve.fd >= 0 || c->away)
                return;

        struct pressure_shrinker **members = calloc(n, sizeof(*members));
        struct json_object *params = json_object_new_object(), *list = json_object_new_array();
        size_t i = 0;
        for (struct pressure_shrinker *s = c->shrinkers; s && members; s = s->next) {
                members[i++] = s;
                json_object_array_add(list, shrinker_spec(s));
        }
        json_object_object_add(params, "shrinkers", list);
        /* Requests made together come in one message, and go back in one Answer. */
        json_object_object_add(params, "batched", json_object_new_boolean(1));
        /* Growth limits only for a client that has a use for them (an older daemon knows no such field). */
        bool limits = false;
        for (i = 0; i < n && members; i++)
                limits = limits || members[i]->on_limit;
        if (limits)
                json_object_object_add(params, "limits", json_object_new_boolean(1));
        if (c->serve_for > 0)
                json_object_object_add(params, "for_pid", json_object_new_int64(c->serve_for));
        struct json_object *call = call_new("io.pressured.Serve", params, true, false);

        int r = members ? conn_open(&c->serve, c->path, c->epoll_fd) : -ENOMEM;
        if (r >= 0)
                r = conn_queue(&c->serve, c->epoll_fd, call);
        json_object_put(call);
        if (r < 0) {
                free(members);
                conn_close(&c->serve, c->epoll_fd);
                client_away(c, r);
                return;
        }
        for (i = 0; i < n; i++)
                shrinker_set_state(members[i], SHRINKER_ACKING);
        free(c->serve_members);
        c->serve_members = members;
        c->n_serve_members = n;
        c->serve_waiting = true;
}

static void serve_members_done(struct pressure_client *c) {
        struct pressure_shrinker **m = c->serve_members;
        size_t n = c->n_serve_members;
        c->serve_members = NULL;
        c->n_serve_members = 0;
        c->serve_waiting = false;
        for (size_t i = 0; i < n; i++) {
                /* Those given an id are registered by now; the rest are asked again later. */
                if (m[i]->state == SHRINKER_FREED_ACKING)
                        shrinker_set_state(m[i], SHRINKER_FREED);
                else if (m[i]->state == SHRINKER_ACKING)
                        shrinker_set_state(m[i], SHRINKER_WANTED);
                shrinker_maybe_destroy(m[i]);
        }
        free(m);
}

static int serve_registered(struct pressure_client *c, struct json_object *msg) {
        _cleanup_(protocol_registration_done) struct shrink_registration g = {};
        int r = reply_to_errno(msg);
        if (r >= 0)
                r = reply_check(c, msg, "Serve");
        /* Through the daemon's own codec: one id per shrinker sent, a token that fits. */
        if (r >= 0 && protocol_decode_registration(json_get(json_get(msg, "parameters"), "registered"), &g) < 0)
                r = -EPROTO;
        if (r >= 0 && (strlen(g.token) >= sizeof(c->token) || g.n_shrinkers != c->n_serve_members))
                r = -EPROTO;
        if (r < 0)
                return r;
        snprintf(c->token, sizeof(c->token), "%s", g.token);
        for (size_t i = 0; i < c->n_serve_members; i++) {
                struct pressure_shrinker *s = c->serve_members[i];
                uint64_t id = g.shrinkers[i].id;
                if (shrinker_freed(s))
                        remove_on_daemon(c, id);
                else {
                        shrinker_set_state(s, SHRINKER_REGISTERED);
                        s->id = id;
                }
        }
        serve_members_done(c);
        /* Those registered while the Serve call was on its way go one by one. */
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                if (s->state == SHRINKER_WANTED || s->state == SHRINKER_REFUSED)
                        add_on_daemon(c, s);
        return 0;
}

void shrinkers_start(struct pressure_client *c) {
        serve_start(c);
}

void shrinkers_away(struct pressure_client *c) {
        conn_close(&c->serve, c->epoll_fd);
        c->token[0] = 0;
        serve_members_done(c);
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                if (s->state == SHRINKER_REGISTERED)
                        shrinker_set_state(s, SHRINKER_WANTED);
}

bool shrinkers_waiting(const struct pressure_client *c) {
        if (c->serve_waiting)
                return true;
        for (const struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                if (s->state == SHRINKER_ACKING || s->state == SHRINKER_WANTED)
                        return true;
        return false;
}

/* The registration first, then batches of requests, each a work item. */
static int serve_message(struct json_object *msg, void *data) {
        struct pressure_client *c = data;
        if (c->serve_waiting) {
                int r = serve_registered(c, msg);
                json_object_put(msg);
                return r;
        }
        struct work *w = work_new(WORK_REQUESTS);
        if (!w) {
                json_object_put(msg);
                return 0; /* the daemon counts them as timed out */
        }
        w->msg = msg;
        client_add_work(c, w);
        return 0;
}

void shrinkers_process(struct pressure_client *c) {
        client_assert_locked(c);
        if (c->serve.fd < 0 || c->away)
                return;
        int r = conn_pump(&c->serve, c->epoll_fd, serve_message, c);
        if (r >= 0)
                return;
        /* Refused, broken or ended: the daemon is gone or did not want this; try again later. */
        if (r != -ECONNRESET)
                client_log(c, LOG_WARNING, "pressured did not take this client's shrinkers (%s); trying again",
                           strerror(-r));
        client_away(c, r);
}

/* ---- requests, outside the lock ---- */

struct answers {
        struct json_object *list;
        size_t n;
};

static void answers_send(struct pressure_client *c, struct answers *a) {
        if (a->n == 0)
                return;
        client_lock(c);
        if (c->token[0]) {
                struct json_object *params = json_object_new_object();
                json_object_object_add(params, "token", json_object_new_string(c->token));
                json_object_object_add(params, "answers", a->list);
                (void) client_ctl_call(c, call_new("io.pressured.Answer", params, false, true), NULL, NULL);
        } else
                json_object_put(a->list);
        client_unlock(c);
        *a = (struct answers){};
}

static void answers_add(struct pressure_client *c, struct answers *a, uint64_t request, struct json_object *item) {
        json_object_object_add(item, "request", json_object_new_int64((int64_t) request));
        if (!a->list)
                a->list = json_object_new_array();
        json_object_array_add(a->list, item);
        if (++a->n >= ANSWERS_MAX)
                answers_send(c, a);
}

static int64_t clamp64(uint64_t v) {
        return (int64_t) MIN(v, (uint64_t) INT64_MAX);
}

static struct pressure_shrinker *shrinker_get(struct pressure_client *c, uint64_t id) {
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                if (s->state == SHRINKER_REGISTERED && s->id == id)
                        return s;
        return NULL;
}

/* The Answer's numbers for what a callback returned. */
static struct json_object *answer_of(bool scan, uint64_t n, const struct pressure_shrink_control *sc) {
        struct json_object *p = json_object_new_object();
        if (!scan && n == PRESSURE_SHRINK_EMPTY)
                json_object_object_add(p, "empty", json_object_new_boolean(1));
        else if (scan && n == PRESSURE_SHRINK_STOP)
                json_object_object_add(p, "stop", json_object_new_boolean(1));
        else {
                json_object_object_add(p, scan ? "freed" : "count", json_object_new_int64(clamp64(n)));
                if (scan && sc->nr_scanned != sc->nr_to_scan)
                        json_object_object_add(p, "scanned", json_object_new_int64(clamp64(sc->nr_scanned)));
                if (sc->nr_bytes > 0)
                        json_object_object_add(p, "bytes", json_object_new_int64(clamp64(sc->nr_bytes)));
                /* Only what the daemon takes: a finite, positive number, within its cap. */
                if (!scan && isfinite(sc->value) && sc->value > 0)
                        json_object_object_add(p, "value", json_object_new_double(MIN(sc->value, PROTOCOL_VALUE_MAX)));
        }
        return p;
}

/* A Request, decoded by the daemon's own codec: one that lacks a mandatory field or has one out of range
 * is not run (it runs into its deadline on the daemon's side). */
static void run_request(struct pressure_client *c, struct json_object *req, struct answers *out) {
        struct shrink_request_snapshot q;

        if (protocol_decode_shrink_request(req, &q) < 0) {
                client_log(c, LOG_ERR, "pressured sent a request that breaks the interface: ignored");
                return;
        }
        uint64_t id = q.id, deadline = q.deadline;
        if (now_usec() > deadline)
                return; /* past its deadline (we were busy): the daemon has given up on it */
        struct pressure_shrink_control sc = {
                .node = q.node,
                .cgroup = q.cgroup,
                .nr_to_scan = q.nr_to_scan,
                .priority = q.priority,
                .level = q.level >= 0 ? (enum pressure_level) q.level : PRESSURE_LEVEL_OK,
                .scope_type = q.scope_type == SCOPE_CGROUP ? PRESSURE_SCOPE_CGROUP
                              : q.scope_type == SCOPE_NODE ? PRESSURE_SCOPE_NODE
                                                           : PRESSURE_SCOPE_SYSTEM,
                .deadline = deadline,
        };
        bool scan = q.op == SHRINK_OP_SCAN;

        client_lock(c);
        struct pressure_shrinker *s = shrinker_get(c, q.shrinker);
        if (s)
                s->active++;
        client_unlock(c);
        if (!s)
                return;

        uint64_t n;
        if (scan) {
                sc.nr_scanned = sc.nr_to_scan;
                n = s->scan(s, &sc, s->userdata);
        } else
                n = s->count(s, &sc, s->userdata);

        client_lock(c);
        if (scan && n != PRESSURE_SHRINK_STOP && n > 0)
                c->release_pending = true;
        if (--s->active == 0)
                pthread_cond_broadcast(&c->cond);
        shrinker_maybe_destroy(s);
        client_unlock(c);

        /* Past the deadline the daemon has counted a timeout already and would refuse the answer. */
        if (now_usec() > deadline)
                return;
        answers_add(c, out, id, answer_of(scan, n, &sc));
}

/* A growth limit: kept for pressure_shrinker_get_limit(), and handed to the shrinker's handler. */
static void apply_limit(struct pressure_client *c, struct json_object *item) {
        struct shrinker_limit l;
        if (protocol_decode_shrinker_limit(item, &l) < 0) {
                client_log(c, LOG_ERR, "pressured sent a growth limit that breaks the interface: ignored");
                return;
        }
        client_lock(c);
        struct pressure_shrinker *s = shrinker_get(c, l.shrinker);
        if (s) {
                __atomic_store_n(&s->limit, l.bytes, __ATOMIC_RELAXED);
                s->active++;
        }
        client_unlock(c);
        if (!s)
                return;
        if (s->on_limit)
                s->on_limit(s, l.bytes, s->userdata);
        client_lock(c);
        /* A handler that trimmed its cache freed into the heap, as a scan does. */
        if (s->on_limit)
                c->release_pending = true;
        if (--s->active == 0)
                pthread_cond_broadcast(&c->cond);
        shrinker_maybe_destroy(s);
        client_unlock(c);
}

void shrinkers_run(struct pressure_client *c, struct work *w) {
        struct json_object *params = json_get(w->msg, "parameters"), *req = json_get(params, "request");
        struct json_object *reqs = json_get(params, "requests");
        struct answers answers = {};

        /* Requests that break the interface are not run: they run into their deadlines. */
        if (reply_check(c, w->msg, "Serve") < 0)
                return;
        if (req)
                run_request(c, req, &answers);
        if (json_object_is_type(reqs, json_type_array))
                for (size_t i = 0; i < json_object_array_length(reqs); i++)
                        run_request(c, json_object_array_get_idx(reqs, i), &answers);
        struct json_object *limits = json_get(params, "limits");
        if (json_object_is_type(limits, json_type_array))
                for (size_t i = 0; i < json_object_array_length(limits); i++)
                        apply_limit(c, json_object_array_get_idx(limits, i));
        answers_send(c, &answers);
}

/* After a batch of requests: release what scans freed, at most every RELEASE_INTERVAL_US (a daemon round
 * is 250 ms by default; a trim costs a walk of the heap). One that is not due yet is set on a timer, so
 * that the last scans of a pass are released too. */
void shrinkers_release_if_due(struct pressure_client *c, bool *ret_call) {
        uint64_t expirations;
        (void) !read(c->release_fd, &expirations, sizeof(expirations));
        *ret_call = false;
        if (!c->release_pending || !c->release)
                return;
        uint64_t now = now_usec();
        if (c->last_release_us > 0 && now - c->last_release_us < RELEASE_INTERVAL_US) {
                uint64_t left = RELEASE_INTERVAL_US - (now - c->last_release_us);
                struct itimerspec its = { .it_value = { .tv_sec = 0, .tv_nsec = (long) (left * 1000) } };
                (void) timerfd_settime(c->release_fd, 0, &its, NULL);
                return;
        }
        *ret_call = true;
        c->release_pending = false;
        c->last_release_us = now;
}

EXPORT int pressure_client_set_release(struct pressure_client *c, pressure_release_t release, void *userdata) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        c->release = release;
        c->release_userdata = userdata;
        client_unlock(c);
        return 0;
}

EXPORT int pressure_client_set_serve_for(struct pressure_client *c, pid_t pid) {
        if (!c || pid < 0)
                return -EINVAL;
        client_lock(c);
        c->serve_for = pid;
        client_unlock(c);
        return 0;
}

/* ---- the public face: alloc, set, register, free ---- */

static bool name_ok(const char *name) {
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > NAME_MAX_LEN)
                return false;
        for (const unsigned char *p = (const unsigned char *) name; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

#define FLAGS_ALL ((unsigned) (PRESSURE_SHRINKER_NUMA_AWARE | PRESSURE_SHRINKER_MEMCG_AWARE))

EXPORT int pressure_shrinker_alloc(struct pressure_client *c, unsigned flags, const char *name,
                                   struct pressure_shrinker **ret) {
        if (!c || !ret || !name_ok(name) || (flags & ~FLAGS_ALL))
                return -EINVAL;
        struct pressure_shrinker *s = calloc(1, sizeof(*s));
        if (!s || !(s->name = strdup(name))) {
                free(s);
                return -ENOMEM;
        }
        s->client = pressure_client_ref(c);
        s->flags = flags;
        s->seeks = -1;
        *ret = s;
        return 0;
}

/* Settings change only before the shrinker is registered: the daemon has them from then on. */
#define SETTER_BEGIN(s)                                                                                    \
        if (!(s))                                                                                          \
                return -EINVAL;                                                                            \
        client_lock((s)->client);                                                                          \
        int _r = (s)->state != SHRINKER_UNREGISTERED ? -EBUSY : 0;                                         \
        if (_r == 0) {
#define SETTER_END(s)                                                                                      \
        }                                                                                                  \
        client_unlock((s)->client);                                                                        \
        return _r

EXPORT int pressure_shrinker_set_seeks(struct pressure_shrinker *s, int seeks) {
        if (seeks > 1000)
                return -EINVAL;
        SETTER_BEGIN(s) s->seeks = seeks < 0 ? -1 : seeks; SETTER_END(s);
}

EXPORT int pressure_shrinker_set_batch(struct pressure_shrinker *s, int batch) {
        if (batch == 0 || batch > (1 << 20))
                return -EINVAL;
        SETTER_BEGIN(s) s->batch = batch < 0 ? 0 : batch; SETTER_END(s);
}

EXPORT int pressure_shrinker_set_callbacks(struct pressure_shrinker *s, pressure_count_objects_t count,
                                           pressure_scan_objects_t scan) {
        if (!count || !scan)
                return -EINVAL;
        SETTER_BEGIN(s) s->count = count; s->scan = scan; SETTER_END(s);
}

EXPORT int pressure_shrinker_set_userdata(struct pressure_shrinker *s, void *userdata, pressure_destroy_t destroy) {
        SETTER_BEGIN(s) s->userdata = userdata; s->destroy = destroy; SETTER_END(s);
}

EXPORT int pressure_shrinker_set_limit_handler(struct pressure_shrinker *s, pressure_limit_handler_t handler) {
        SETTER_BEGIN(s) s->on_limit = handler; SETTER_END(s);
}

EXPORT uint64_t pressure_shrinker_get_limit(const struct pressure_shrinker *s) {
        return s ? __atomic_load_n(&s->limit, __ATOMIC_RELAXED) : 0;
}

EXPORT void *pressure_shrinker_get_userdata(const struct pressure_shrinker *s) {
        return s ? s->userdata : NULL;
}

EXPORT int pressure_shrinker_register(struct pressure_shrinker *s) {
        if (!s)
                return -EINVAL;
        struct pressure_client *c = s->client;
        int r = 0;
        client_lock(c);
        if (!s->count || !s->scan)
                r = -EINVAL;
        else if (s->state != SHRINKER_UNREGISTERED)
                r = -EBUSY;
        else {
                shrinker_set_state(s, SHRINKER_WANTED);
                LIST_PREPEND(c->shrinkers, s);
                /* Registered now if the daemon is there, after the Serve call if it is on its way, and
                 * with the others when the daemon is back if it is away. */
                if (c->token[0] && c->serve.fd >= 0 && !c->serve_waiting)
                        add_on_daemon(c, s);
                else if (c->serve.fd < 0 && !c->away)
                        serve_start(c);
                client_kick(c);
        }
        client_unlock(c);
        return r;
}

EXPORT void pressure_shrinker_free(struct pressure_shrinker *s) {
        if (!s)
                return;
        struct pressure_client *c = s->client;
        client_lock(c);
        if (shrinker_freed(s)) { /* a second free is the caller's bug; do no harm */
                client_unlock(c);
                return;
        }
        shrinker_unlink(s);
        remove_on_daemon(c, s->id);
        shrinker_set_state(s, s->state == SHRINKER_ACKING ? SHRINKER_FREED_ACKING : SHRINKER_FREED);
        /* No callback of it runs once this returns: one running on another thread is waited for. */
        while (s->active > 0 && !client_in_callback(c))
                client_wait(c, NULL);
        pressure_destroy_t destroy = s->destroy;
        void *userdata = s->userdata;
        shrinker_maybe_destroy(s);
        /* The last one gone: the serving connection goes too (the daemon drops the client). */
        if (!c->shrinkers && c->serve.fd >= 0 && !c->serve_waiting) {
                conn_close(&c->serve, c->epoll_fd);
                c->token[0] = 0;
        }
        client_check_ready(c);
        client_unlock(c);
        if (destroy)
                destroy(userdata);
        pressure_client_unref(c);
}

EXPORT uint64_t pressure_shrinker_get_id(const struct pressure_shrinker *s) {
        if (!s)
                return 0;
        client_lock(s->client);
        uint64_t id = s->id;
        client_unlock(s->client);
        return id;
}

EXPORT struct pressure_client *pressure_shrinker_get_client(const struct pressure_shrinker *s) {
        return s ? s->client : NULL;
}

/* The first interface, in one call; registration happens in the background as for the others. */
EXPORT int pressure_shrinker_new(struct pressure_client *c, const char *name, unsigned flags, int seeks, int batch,
                                 pressure_count_objects_t count, pressure_scan_objects_t scan, void *userdata,
                                 struct pressure_shrinker **ret) {
        struct pressure_shrinker *s;
        if (!count || !scan || !ret)
                return -EINVAL;
        int r = pressure_shrinker_alloc(c, flags, name, &s);
        if (r < 0)
                return r;
        if ((r = pressure_shrinker_set_seeks(s, seeks)) < 0 ||
            (r = pressure_shrinker_set_batch(s, batch == 0 ? PRESSURE_SHRINKER_DEFAULT : batch)) < 0 ||
            (r = pressure_shrinker_set_callbacks(s, count, scan)) < 0 ||
            (r = pressure_shrinker_set_userdata(s, userdata, NULL)) < 0 || (r = pressure_shrinker_register(s)) < 0) {
                pressure_shrinker_free(s);
                return r;
        }
        *ret = s;
        return 0;
}
