/* SPDX-License-Identifier: MIT */
/* libpressure: connection to pressured, status and subscriptions. */

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "macro.h"
#include "pressure.h"

#define EXPORT __attribute__((visibility("default")))

/* Replies can be larger than calls: a status lists every watched cgroup. */
#define CLIENT_MAX_MESSAGE (16u * 1024u * 1024u)
#define DEFAULT_TIMEOUT_MS 5000

struct conn {
        int fd;
        struct frame_reader in;
};

struct pressure_scope {
        struct json_object *obj; /* borrowed from the owner's reply */
        char name[PATH_MAX + 16];
        enum pressure_scope_type type;
        int node;
        const char *cgroup;
        enum pressure_level level, previous;
        struct pressure_stall stall[2];
        bool have_stall[2];
        uint64_t mem_total, mem_free;
        bool have_memory;
        uint64_t reclaim_target, timestamp;
        unsigned coalesced;
        bool removed;
        const char *source; /* NULL at ok */
        bool have_headroom;
        uint64_t headroom_limit, headroom_unreclaimable;
};

struct pressure_status {
        int n_ref;
        struct json_object *reply;
        struct pressure_scope system;
        struct pressure_scope *nodes, *cgroups;
        size_t n_nodes, n_cgroups;
};

struct pressure_shrinker {
        struct pressure_client *client;
        struct pressure_shrinker *prev, *next;
        char *name;
        unsigned flags;
        int seeks, batch;
        pressure_count_objects_t count;
        pressure_scan_objects_t scan;
        void *userdata;
        uint64_t id; /* from the daemon; 0 while not registered */
};

struct pressure_client {
        int n_ref;
        char *path;
        int timeout_ms;
        struct conn call;  /* for calls that get one reply, and oneway answers */
        struct conn sub;   /* the streaming Subscribe call */
        struct conn serve; /* the streaming Serve call of our shrinkers */
        int epoll_fd;
        int wake_fd;  /* readable while messages wait in a buffer */
        int retry_fd; /* timerfd: reconnect to a restarted daemon */
        int release_fd; /* timerfd: a release that was not due yet */
        pressure_event_handler_t handler;
        void *userdata;
        pressure_memory_event_handler_t memory_handler;
        void *memory_userdata;

        struct pressure_shrinker *shrinkers;
        char token[64];

        /* Giving freed memory back to the kernel after scans (malloc_trim by default). */
        pressure_release_t release;
        void *release_userdata;
        int release_pending;      /* a scan freed something since the last release */
        uint64_t last_release_us; /* CLOCK_MONOTONIC */

        pthread_mutex_t lock; /* recursive: callbacks run with it held */
        pthread_t thread;
        int thread_running;
        int stop_fd;
};

static void release_heap(void *userdata);

#define LOCKED(c) for (int _once_ = (pthread_mutex_lock(&(c)->lock), 1); _once_; _once_ = (pthread_mutex_unlock(&(c)->lock), 0))

/* ---- small helpers ---- */

static const char *const level_names[] = { "ok", "low", "medium", "critical" };

EXPORT const char *pressure_level_to_string(enum pressure_level level) {
        return (int) level >= 0 && (size_t) level < ELEMENTSOF(level_names) ? level_names[level] : NULL;
}

EXPORT int pressure_level_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(level_names); i++)
                if (streq(s, level_names[i]))
                        return (int) i;
        return -EINVAL;
}

EXPORT int pressure_default_socket_path(char **ret) {
        const char *env = getenv("PRESSURED_SOCKET");
        char *p = NULL;

        if (!ret)
                return -EINVAL;
        if (env && env[0] == '/')
                p = strdup(env);
        else if (geteuid() == 0)
                p = strdup("/run/pressured/io.pressured");
        else {
                const char *rt = getenv("XDG_RUNTIME_DIR");
                if (!rt || rt[0] != '/')
                        return -ENXIO;
                if (asprintf(&p, "%s/pressured/io.pressured", rt) < 0)
                        p = NULL;
        }
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static int remaining_ms(uint64_t deadline) {
        if (deadline == 0)
                return -1;
        uint64_t now = now_ms();
        return now >= deadline ? 0 : (int) MIN(deadline - now, (uint64_t) INT_MAX);
}

/* ---- connections ---- */

static void conn_close(struct conn *c) {
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        frame_reader_done(&c->in);
}

static int conn_open(struct conn *c, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A unix socket connects at once or fails; EAGAIN means a full backlog. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        c->fd = fd;
        frame_reader_init(&c->in, CLIENT_MAX_MESSAGE);
        return 0;
}

static int conn_send(struct conn *c, struct json_object *msg, uint64_t deadline) {
        size_t len;
        const char *text = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!text)
                return -ENOMEM;

        /* Send the text and its terminating NUL. */
        size_t off = 0, total = len + 1;
        while (off < total) {
                ssize_t n = send(c->fd, text + off, total - off, MSG_NOSIGNAL);
                if (n >= 0) {
                        off += (size_t) n;
                        continue;
                }
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return errno == EPIPE ? -ECONNRESET : -errno;
                struct pollfd p = { .fd = c->fd, .events = POLLOUT };
                int k = poll(&p, 1, remaining_ms(deadline));
                if (k == 0)
                        return -ETIMEDOUT;
                if (k < 0 && errno != EINTR)
                        return -errno;
        }
        return 0;
}

/* Wait for one whole message. */
static int conn_receive(struct conn *c, uint64_t deadline, struct json_object **ret) {
        for (;;) {
                const char *text;
                size_t len;
                int r = frame_reader_next(&c->in, &text, &len);
                if (r == -EMSGSIZE)
                        return -EPROTO;
                if (r > 0) {
                        struct json_tokener *tok = json_tokener_new();
                        if (!tok)
                                return -ENOMEM;
                        struct json_object *o = json_tokener_parse_ex(tok, text, (int) len);
                        bool ok = o && json_tokener_get_error(tok) == json_tokener_success &&
                                  json_object_is_type(o, json_type_object);
                        json_tokener_free(tok);
                        if (!ok) {
                                json_object_put(o);
                                return -EPROTO;
                        }
                        *ret = o;
                        return 0;
                }
                if (deadline == UINT64_MAX)
                        return -EAGAIN; /* caller only wants what is there */

                ssize_t n = frame_reader_read_fd(&c->in, c->fd);
                if (n == 0)
                        return -ECONNRESET;
                if (n == -EAGAIN) {
                        struct pollfd p = { .fd = c->fd, .events = POLLIN };
                        int k = poll(&p, 1, remaining_ms(deadline));
                        if (k == 0)
                                return -ETIMEDOUT;
                        if (k < 0 && errno != EINTR)
                                return -errno;
                        continue;
                }
                if (n < 0)
                        return n == -ECONNRESET || n == -EPIPE ? -ECONNRESET : (int) n;
        }
}

static int reply_to_errno(struct json_object *reply) {
        struct json_object *e;
        if (!json_object_object_get_ex(reply, "error", &e))
                return 0;
        const char *name = json_object_get_string(e);
        if (!name)
                return -EPROTO;
        if (streq(name, "io.pressured.NoSuchCgroup"))
                return -ENOENT;
        if (streq(name, "io.pressured.NoSuchNode"))
                return -ENXIO;
        if (streq(name, "io.pressured.CgroupNotWatchable"))
                return -EACCES;
        if (streq(name, "org.varlink.service.InvalidParameter"))
                return -EINVAL;
        if (streq(name, "org.varlink.service.PermissionDenied"))
                return -EPERM;
        if (streq(name, "io.pressured.NoSuchShrinker"))
                return -ENOENT;
        if (streq(name, "io.pressured.ScopeRemoved") || streq(name, "io.pressured.ShuttingDown"))
                return -ECONNRESET;
        if (streq(name, "org.varlink.service.MethodNotFound") || streq(name, "org.varlink.service.InterfaceNotFound"))
                return -EOPNOTSUPP;
        return -EPROTO;
}

/* ---- parsing replies ---- */

static struct json_object *get(struct json_object *o, const char *key) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static uint64_t get_u64(struct json_object *o, const char *key) {
        struct json_object *v = get(o, key);
        if (!v || !json_object_is_type(v, json_type_int))
                return 0;
        int64_t i = json_object_get_int64(v);
        return i > 0 ? (uint64_t) i : 0;
}

static int get_level(struct json_object *o, const char *key) {
        struct json_object *v = get(o, key);
        return v && json_object_is_type(v, json_type_string) ? pressure_level_from_string(json_object_get_string(v))
                                                              : -EINVAL;
}

static void parse_stall(struct json_object *o, struct pressure_stall *ret, bool *have) {
        if (!o || !json_object_is_type(o, json_type_object))
                return;
        ret->avg10 = json_object_get_double(get(o, "avg10"));
        ret->avg60 = json_object_get_double(get(o, "avg60"));
        ret->avg300 = json_object_get_double(get(o, "avg300"));
        ret->total = get_u64(o, "total");
        *have = true;
}

/* A MemoryEvent of the subscription, to the application's handler if it set one; anything malformed
 * is dropped, as an unknown reply would be. */
static void deliver_memory_event(struct pressure_client *c, struct json_object *e) {
        struct json_object *ref = get(e, "scope"), *cg = get(ref, "cgroup"), *kind = get(e, "kind");
        if (!c->memory_handler || !json_object_is_type(cg, json_type_string) || !json_object_is_type(kind, json_type_string))
                return;
        c->memory_handler(c, json_object_get_string(cg), json_object_get_string(kind), get_u64(e, "count"),
                          c->memory_userdata);
}

static int scope_parse(struct json_object *o, struct pressure_scope *ret) {
        struct pressure_scope s = { .obj = o, .node = -1 };
        struct json_object *ref = get(o, "scope"), *t;

        if (!o || !json_object_is_type(o, json_type_object) || !ref || !(t = get(ref, "type")))
                return -EPROTO;
        const char *type = json_object_get_string(t);
        if (!type)
                return -EPROTO;
        if (streq(type, "system")) {
                s.type = PRESSURE_SCOPE_SYSTEM;
                snprintf(s.name, sizeof(s.name), "system");
        } else if (streq(type, "node")) {
                s.type = PRESSURE_SCOPE_NODE;
                s.node = (int) get_u64(ref, "node");
                snprintf(s.name, sizeof(s.name), "node:%d", s.node);
        } else if (streq(type, "cgroup")) {
                s.type = PRESSURE_SCOPE_CGROUP;
                s.cgroup = json_object_get_string(get(ref, "cgroup"));
                if (!s.cgroup)
                        return -EPROTO;
                snprintf(s.name, sizeof(s.name), "%s", s.cgroup);
        } else
                return -EPROTO;

        int l = get_level(o, "level");
        if (l < 0)
                return -EPROTO;
        s.level = l;
        int p = get_level(o, "previous");
        s.previous = p >= 0 ? p : l;

        struct json_object *pressure = get(o, "pressure");
        parse_stall(get(pressure, "some"), &s.stall[PRESSURE_STALL_SOME], &s.have_stall[PRESSURE_STALL_SOME]);
        parse_stall(get(pressure, "full"), &s.stall[PRESSURE_STALL_FULL], &s.have_stall[PRESSURE_STALL_FULL]);

        struct json_object *mem = get(o, "memory");
        if (mem) {
                s.mem_total = get_u64(mem, "total");
                s.mem_free = get_u64(mem, "free");
                s.have_memory = true;
        }
        s.reclaim_target = get_u64(o, "reclaim_target");
        s.timestamp = get_u64(o, "timestamp");
        if (!s.timestamp)
                s.timestamp = get_u64(o, "since");
        s.coalesced = (unsigned) get_u64(o, "coalesced");
        s.removed = json_object_get_boolean(get(o, "removed"));
        struct json_object *source = get(o, "source"), *h = get(o, "headroom");
        if (json_object_is_type(source, json_type_string))
                s.source = json_object_get_string(source);
        if (json_object_is_type(h, json_type_object)) {
                s.have_headroom = true;
                s.headroom_limit = get_u64(h, "limit");
                s.headroom_unreclaimable = get_u64(h, "unreclaimable");
        }
        *ret = s;
        return 0;
}

static int scope_array_parse(struct json_object *a, struct pressure_scope **ret, size_t *ret_n) {
        if (!a || !json_object_is_type(a, json_type_array))
                return -EPROTO;
        size_t n = json_object_array_length(a);
        struct pressure_scope *s = calloc(MAX(n, 1u), sizeof(*s));
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (scope_parse(json_object_array_get_idx(a, i), &s[i]) < 0) {
                        free(s);
                        return -EPROTO;
                }
        *ret = s;
        *ret_n = n;
        return 0;
}

/* ---- client ---- */

EXPORT int pressure_client_new(const char *socket_path, struct pressure_client **ret) {
        struct pressure_client *c;
        int r;

        if (!ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->timeout_ms = DEFAULT_TIMEOUT_MS;
        c->release = release_heap;
        c->call.fd = c->sub.fd = c->serve.fd = c->epoll_fd = c->wake_fd = c->retry_fd = c->release_fd = c->stop_fd = -1;

        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&c->lock, &attr);
        pthread_mutexattr_destroy(&attr);

        if (socket_path)
                r = (c->path = strdup(socket_path)) ? 0 : -ENOMEM;
        else
                r = pressure_default_socket_path(&c->path);
        if (r >= 0)
                r = conn_open(&c->call, c->path);
        if (r >= 0) {
                c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
                c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                c->retry_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                c->release_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                if (c->epoll_fd < 0 || c->wake_fd < 0 || c->retry_fd < 0 || c->release_fd < 0)
                        r = -errno;
        }
        if (r >= 0) {
                struct epoll_event ev = { .events = EPOLLIN, .data.fd = c->wake_fd };
                if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->wake_fd, &ev) < 0)
                        r = -errno;
                ev.data.fd = c->retry_fd;
                if (r >= 0 && epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->retry_fd, &ev) < 0)
                        r = -errno;
                ev.data.fd = c->release_fd;
                if (r >= 0 && epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->release_fd, &ev) < 0)
                        r = -errno;
        }
        if (r < 0) {
                pressure_client_unref(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* Atomic: thread mode lets any thread hold and drop references, the last one frees. */
EXPORT struct pressure_client *pressure_client_ref(struct pressure_client *c) {
        if (c)
                __atomic_add_fetch(&c->n_ref, 1, __ATOMIC_RELAXED);
        return c;
}

EXPORT struct pressure_client *pressure_client_unref(struct pressure_client *c) {
        if (!c)
                return NULL;
        /* Release what this thread did with the client; the last one acquires all of it before freeing. */
        if (__atomic_sub_fetch(&c->n_ref, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;

        if (c->thread_running) {
                uint64_t one = 1;
                (void) !write(c->stop_fd, &one, sizeof(one));
                pthread_join(c->thread, NULL);
        }
        while (c->shrinkers) {
                struct pressure_shrinker *s = c->shrinkers;
                c->shrinkers = s->next;
                free(s->name);
                free(s);
        }
        conn_close(&c->call);
        conn_close(&c->sub);
        conn_close(&c->serve);
        if (c->epoll_fd >= 0)
                close(c->epoll_fd);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        if (c->retry_fd >= 0)
                close(c->retry_fd);
        if (c->release_fd >= 0)
                close(c->release_fd);
        if (c->stop_fd >= 0)
                close(c->stop_fd);
        pthread_mutex_destroy(&c->lock);
        free(c->path);
        free(c);
        return NULL;
}

EXPORT const char *pressure_client_get_socket_path(struct pressure_client *c) {
        return c ? c->path : NULL;
}

EXPORT void pressure_client_set_timeout(struct pressure_client *c, int timeout_ms) {
        if (c)
                c->timeout_ms = timeout_ms;
}

static uint64_t client_deadline(struct pressure_client *c) {
        return c->timeout_ms > 0 ? now_ms() + (uint64_t) c->timeout_ms : 0;
}

static struct json_object *new_call(const char *method, struct json_object *params, bool more) {
        struct json_object *m = json_object_new_object();
        json_object_object_add(m, "method", json_object_new_string(method));
        json_object_object_add(m, "parameters", params ? params : json_object_new_object());
        if (more)
                json_object_object_add(m, "more", json_object_new_boolean(1));
        return m;
}

static int client_get_status(struct pressure_client *c, struct pressure_status **ret) {
        struct json_object *reply = NULL;
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (c->call.fd < 0)
                return -ECONNRESET;

        uint64_t deadline = client_deadline(c);
        struct json_object *call = new_call("io.pressured.GetStatus", NULL, false);
        r = conn_send(&c->call, call, deadline);
        json_object_put(call);
        if (r >= 0)
                r = conn_receive(&c->call, deadline, &reply);
        if (r < 0) {
                /* The stream is out of step after a timeout or an error: start afresh next time. */
                conn_close(&c->call);
                if (conn_open(&c->call, c->path) < 0)
                        c->call.fd = -1;
                return r;
        }
        r = reply_to_errno(reply);
        if (r < 0) {
                json_object_put(reply);
                return r;
        }

        struct pressure_status *s = calloc(1, sizeof(*s));
        if (!s) {
                json_object_put(reply);
                return -ENOMEM;
        }
        s->n_ref = 1;
        s->reply = reply;
        struct json_object *p = get(reply, "parameters");
        r = scope_parse(get(p, "system"), &s->system);
        if (r >= 0)
                r = scope_array_parse(get(p, "nodes"), &s->nodes, &s->n_nodes);
        if (r >= 0)
                r = scope_array_parse(get(p, "cgroups"), &s->cgroups, &s->n_cgroups);
        if (r < 0) {
                pressure_status_unref(s);
                return r;
        }
        *ret = s;
        return 0;
}

EXPORT struct pressure_status *pressure_status_ref(struct pressure_status *s) {
        if (s)
                s->n_ref++;
        return s;
}

EXPORT struct pressure_status *pressure_status_unref(struct pressure_status *s) {
        if (!s || --s->n_ref > 0)
                return NULL;
        free(s->nodes);
        free(s->cgroups);
        json_object_put(s->reply);
        free(s);
        return NULL;
}

EXPORT const struct pressure_scope *pressure_status_get_system(const struct pressure_status *s) {
        return s ? &s->system : NULL;
}

EXPORT size_t pressure_status_get_n_nodes(const struct pressure_status *s) {
        return s ? s->n_nodes : 0;
}

EXPORT const struct pressure_scope *pressure_status_get_node(const struct pressure_status *s, size_t i) {
        return s && i < s->n_nodes ? &s->nodes[i] : NULL;
}

EXPORT size_t pressure_status_get_n_cgroups(const struct pressure_status *s) {
        return s ? s->n_cgroups : 0;
}

EXPORT const struct pressure_scope *pressure_status_get_cgroup(const struct pressure_status *s, size_t i) {
        return s && i < s->n_cgroups ? &s->cgroups[i] : NULL;
}

EXPORT const char *pressure_status_to_json(const struct pressure_status *s) {
        return s ? json_object_to_json_string_ext(get(s->reply, "parameters"), JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
}

/* ---- scope accessors ---- */

EXPORT enum pressure_scope_type pressure_scope_get_type(const struct pressure_scope *s) {
        return s->type;
}

EXPORT int pressure_scope_get_node(const struct pressure_scope *s) {
        return s->type == PRESSURE_SCOPE_NODE ? s->node : -1;
}

EXPORT const char *pressure_scope_get_cgroup(const struct pressure_scope *s) {
        return s->type == PRESSURE_SCOPE_CGROUP ? s->cgroup : NULL;
}

EXPORT const char *pressure_scope_get_name(const struct pressure_scope *s) {
        return s->name;
}

EXPORT enum pressure_level pressure_scope_get_level(const struct pressure_scope *s) {
        return s->level;
}

EXPORT enum pressure_level pressure_scope_get_previous_level(const struct pressure_scope *s) {
        return s->previous;
}

EXPORT int pressure_scope_get_stall(const struct pressure_scope *s, enum pressure_stall_kind kind,
                                    struct pressure_stall *ret) {
        if (!s || !ret || (kind != PRESSURE_STALL_SOME && kind != PRESSURE_STALL_FULL))
                return -EINVAL;
        if (!s->have_stall[kind])
                return -ENODATA;
        *ret = s->stall[kind];
        return 0;
}

EXPORT int pressure_scope_get_memory(const struct pressure_scope *s, uint64_t *ret_total, uint64_t *ret_free) {
        if (!s)
                return -EINVAL;
        if (!s->have_memory)
                return -ENODATA;
        if (ret_total)
                *ret_total = s->mem_total;
        if (ret_free)
                *ret_free = s->mem_free;
        return 0;
}

EXPORT uint64_t pressure_scope_get_reclaim_target(const struct pressure_scope *s) {
        return s->reclaim_target;
}

EXPORT uint64_t pressure_scope_get_timestamp(const struct pressure_scope *s) {
        return s->timestamp;
}

EXPORT int pressure_scope_is_removed(const struct pressure_scope *s) {
        return s->removed;
}

EXPORT int pressure_client_set_memory_event_handler(struct pressure_client *c, pressure_memory_event_handler_t handler,
                                                    void *userdata) {
        pthread_mutex_lock(&c->lock);
        c->memory_handler = handler;
        c->memory_userdata = userdata;
        pthread_mutex_unlock(&c->lock);
        return 0;
}

EXPORT const char *pressure_scope_get_source(const struct pressure_scope *s) {
        return s->level == PRESSURE_LEVEL_OK ? NULL : s->source ? s->source : "pressure";
}

EXPORT int pressure_scope_get_headroom(const struct pressure_scope *s, uint64_t *ret_limit, uint64_t *ret_unreclaimable) {
        if (!s->have_headroom)
                return -ENODATA;
        if (ret_limit)
                *ret_limit = s->headroom_limit;
        if (ret_unreclaimable)
                *ret_unreclaimable = s->headroom_unreclaimable;
        return 0;
}

EXPORT unsigned pressure_scope_get_coalesced(const struct pressure_scope *s) {
        return s->coalesced;
}

EXPORT const char *pressure_scope_to_json(const struct pressure_scope *s) {
        return s ? json_object_to_json_string_ext(s->obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
}

/* ---- subscriptions ---- */

static struct json_object *scope_ref_from_name(const char *name) {
        struct json_object *o = json_object_new_object();

        if (streq(name, "system"))
                json_object_object_add(o, "type", json_object_new_string("system"));
        else if (strncmp(name, "node:", 5) == 0) {
                char *end;
                errno = 0;
                long n = strtol(name + 5, &end, 10);
                if (errno || end == name + 5 || *end || n < 0 || n > INT_MAX) {
                        json_object_put(o);
                        return NULL;
                }
                json_object_object_add(o, "type", json_object_new_string("node"));
                json_object_object_add(o, "node", json_object_new_int((int) n));
        } else if (name[0] == '/') {
                json_object_object_add(o, "type", json_object_new_string("cgroup"));
                json_object_object_add(o, "cgroup", json_object_new_string(name));
        } else {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static void wake(struct pressure_client *c) {
        uint64_t one = 1;
        (void) !write(c->wake_fd, &one, sizeof(one));
}

static void unwake(struct pressure_client *c) {
        uint64_t v;
        (void) !read(c->wake_fd, &v, sizeof(v));
}

static void sub_close(struct pressure_client *c) {
        if (c->sub.fd >= 0)
                (void) epoll_ctl(c->epoll_fd, EPOLL_CTL_DEL, c->sub.fd, NULL);
        conn_close(&c->sub);
}

static int client_subscribe(struct pressure_client *c, const char *const *scopes, enum pressure_level min_level,
                            pressure_event_handler_t handler, void *userdata) {
        struct json_object *reply = NULL;
        int r;

        if (!c || !handler || !pressure_level_to_string(min_level))
                return -EINVAL;
        if (c->sub.fd >= 0)
                return -EBUSY;

        struct json_object *params = json_object_new_object(), *list = json_object_new_array();
        for (size_t i = 0; scopes && scopes[i]; i++) {
                struct json_object *ref = scope_ref_from_name(scopes[i]);
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

        r = conn_open(&c->sub, c->path);
        if (r < 0) {
                json_object_put(params);
                return r;
        }

        uint64_t deadline = client_deadline(c);
        struct json_object *call = new_call("io.pressured.Subscribe", params, true);
        r = conn_send(&c->sub, call, deadline);
        json_object_put(call);
        if (r >= 0)
                r = conn_receive(&c->sub, deadline, &reply);
        if (r >= 0)
                r = reply_to_errno(reply);
        struct json_object *state = get(get(reply, "parameters"), "state");
        if (r >= 0 && (!state || !json_object_is_type(state, json_type_array)))
                r = -EPROTO;
        if (r < 0) {
                json_object_put(reply);
                conn_close(&c->sub);
                return r;
        }

        struct epoll_event ev = { .events = EPOLLIN, .data.fd = c->sub.fd };
        if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->sub.fd, &ev) < 0) {
                r = -errno;
                json_object_put(reply);
                conn_close(&c->sub);
                return r;
        }
        c->handler = handler;
        c->userdata = userdata;

        for (size_t i = 0; i < json_object_array_length(state); i++) {
                struct pressure_scope s;
                if (scope_parse(json_object_array_get_idx(state, i), &s) >= 0)
                        handler(c, &s, 1, userdata);
        }
        json_object_put(reply);

        /* Events that arrived with the first reply are buffered already: say so through the fd. */
        if (frame_reader_pending(&c->sub.in) > 0)
                wake(c);
        return 0;
}

EXPORT int pressure_client_get_fd(struct pressure_client *c) {
        return c ? c->epoll_fd : -EINVAL;
}

static int dispatch_subscription(struct pressure_client *c) {
        if (c->sub.fd < 0)
                return 0;

        /* Read what is there now, then hand out every whole message. */
        for (;;) {
                ssize_t n = frame_reader_read_fd(&c->sub.in, c->sub.fd);
                if (n == -EAGAIN)
                        break;
                if (n <= 0) {
                        /* Deliver what came before the end, then report it. */
                        struct json_object *msg;
                        while (conn_receive(&c->sub, UINT64_MAX, &msg) >= 0) {
                                struct pressure_scope s;
                                if (!get(msg, "error") &&
                                    scope_parse(get(get(msg, "parameters"), "event"), &s) >= 0)
                                        c->handler(c, &s, 0, c->userdata);
                                json_object_put(msg);
                        }
                        sub_close(c);
                        return -ECONNRESET;
                }
                if (frame_reader_pending(&c->sub.in) >= 1024 * 1024)
                        break;
        }

        for (;;) {
                struct json_object *msg;
                int r = conn_receive(&c->sub, UINT64_MAX, &msg);
                if (r == -EAGAIN)
                        return 0;
                if (r < 0) {
                        sub_close(c);
                        return r;
                }
                if (get(msg, "error")) {
                        r = reply_to_errno(msg);
                        json_object_put(msg);
                        sub_close(c);
                        return r == -EPROTO ? -EPROTO : -ECONNRESET;
                }
                struct pressure_scope s;
                r = scope_parse(get(get(msg, "parameters"), "event"), &s);
                bool more = json_object_get_boolean(get(msg, "continues"));
                if (r >= 0)
                        c->handler(c, &s, 0, c->userdata);
                else
                        deliver_memory_event(c, get(get(msg, "parameters"), "memory_event"));
                json_object_put(msg);
                if (!more) {
                        sub_close(c);
                        return -ECONNRESET;
                }
                if (c->sub.fd < 0) /* the handler dropped the subscription */
                        return 0;
        }
}

/* ---- shrinkers ---- */

static void epoll_watch(struct pressure_client *c, int fd) {
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
        (void) epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

static void serve_close(struct pressure_client *c) {
        if (c->serve.fd >= 0)
                (void) epoll_ctl(c->epoll_fd, EPOLL_CTL_DEL, c->serve.fd, NULL);
        conn_close(&c->serve);
        c->token[0] = 0;
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next)
                s->id = 0;
}

static void retry_arm(struct pressure_client *c, bool on) {
        struct itimerspec its = {};
        if (on)
                its.it_value.tv_sec = its.it_interval.tv_sec = 1;
        (void) timerfd_settime(c->retry_fd, 0, &its, NULL);
}

/* (Re)register every shrinker of this client on a fresh serving connection. */
static int serve_register(struct pressure_client *c) {
        struct json_object *reply = NULL;
        int r;

        serve_close(c);
        if (!c->shrinkers)
                return 0;

        struct json_object *params = json_object_new_object(), *list = json_object_new_array();
        size_t n = 0;
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next, n++) {
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
                json_object_array_add(list, o);
        }
        json_object_object_add(params, "shrinkers", list);
        /* Requests made together come in one message, and go back in one Answer. */
        json_object_object_add(params, "batched", json_object_new_boolean(1));

        r = conn_open(&c->serve, c->path);
        if (r < 0) {
                json_object_put(params);
                return r;
        }
        uint64_t deadline = client_deadline(c);
        struct json_object *call = new_call("io.pressured.Serve", params, true);
        r = conn_send(&c->serve, call, deadline);
        json_object_put(call);
        if (r >= 0)
                r = conn_receive(&c->serve, deadline, &reply);
        if (r >= 0)
                r = reply_to_errno(reply);
        struct json_object *reg = get(get(reply, "parameters"), "registered");
        struct json_object *ids = get(reg, "shrinkers");
        const char *token = json_object_get_string(get(reg, "token"));
        if (r >= 0 && (!token || strlen(token) >= sizeof(c->token) || !ids ||
                       !json_object_is_type(ids, json_type_array) || json_object_array_length(ids) != n))
                r = -EPROTO;
        if (r < 0) {
                json_object_put(reply);
                serve_close(c);
                return r;
        }
        snprintf(c->token, sizeof(c->token), "%s", token);
        size_t i = 0;
        for (struct pressure_shrinker *s = c->shrinkers; s; s = s->next, i++)
                s->id = get_u64(json_object_array_get_idx(ids, i), "id");
        json_object_put(reply);
        epoll_watch(c, c->serve.fd);
        if (frame_reader_pending(&c->serve.in) > 0)
                wake(c);
        return 0;
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* Objects freed into glibc's heap stay in the process until the heap is trimmed; without that, freeing
 * a cache lowers neither the RSS nor the cgroup's usage, and the pressure stays. */
static void release_heap(void *userdata) {
        (void) userdata;
#ifdef __GLIBC__
        (void) malloc_trim(0);
#endif
}

/* After a batch of requests: release what scans freed, at most every RELEASE_INTERVAL_US (a daemon round
 * is 250 ms by default; a trim costs a walk of the heap). One that is not due yet is set on a timer, so
 * that the last scans of a pass are released too. */
#define RELEASE_INTERVAL_US 100000
static void release_if_due(struct pressure_client *c) {
        uint64_t expirations;
        (void) !read(c->release_fd, &expirations, sizeof(expirations));
        if (!c->release_pending || !c->release)
                return;
        uint64_t now = now_us();
        if (c->last_release_us > 0 && now - c->last_release_us < RELEASE_INTERVAL_US) {
                uint64_t left = RELEASE_INTERVAL_US - (now - c->last_release_us);
                struct itimerspec its = { .it_value = { .tv_sec = 0, .tv_nsec = (long) (left * 1000) } };
                (void) timerfd_settime(c->release_fd, 0, &its, NULL);
                return;
        }
        c->release(c->release_userdata);
        c->release_pending = 0;
        c->last_release_us = now;
}

EXPORT int pressure_client_set_release(struct pressure_client *c, pressure_release_t release, void *userdata) {
        if (!c)
                return -EINVAL;
        LOCKED(c) {
                c->release = release;
                c->release_userdata = userdata;
        }
        return 0;
}

/* Answers of one dispatch, sent in one oneway Answer call. */
#define ANSWERS_MAX 4096
struct answers {
        struct json_object *list;
        size_t n;
};

static void answers_send(struct pressure_client *c, struct answers *a) {
        if (a->n == 0)
                return;
        struct json_object *params = json_object_new_object();
        json_object_object_add(params, "token", json_object_new_string(c->token));
        json_object_object_add(params, "answers", a->list);
        struct json_object *m = new_call("io.pressured.Answer", params, false);
        /* Nobody waits for the daemon's reply: a oneway call. */
        json_object_object_add(m, "oneway", json_object_new_boolean(1));
        if (c->call.fd >= 0)
                (void) conn_send(&c->call, m, client_deadline(c));
        json_object_put(m);
        *a = (struct answers){};
}

static void answers_add(struct pressure_client *c, struct answers *a, uint64_t request, struct json_object *item,
                        uint64_t deadline_us) {
        /* Past the deadline the daemon has counted a timeout already and would refuse the answer. */
        if (now_us() > deadline_us) {
                json_object_put(item);
                return;
        }
        json_object_object_add(item, "request", json_object_new_int64((int64_t) request));
        if (!a->list)
                a->list = json_object_new_array();
        json_object_array_add(a->list, item);
        if (++a->n >= ANSWERS_MAX)
                answers_send(c, a);
}

static void handle_request(struct pressure_client *c, struct json_object *req, struct answers *out) {
        uint64_t id = get_u64(req, "id"), sid = get_u64(req, "shrinker"), deadline = get_u64(req, "deadline");
        const char *op = json_object_get_string(get(req, "op"));
        struct pressure_shrinker *s;

        for (s = c->shrinkers; s; s = s->next)
                if (s->id == sid)
                        break;
        if (!s || !op)
                return;

        struct pressure_shrink_control sc = {
                .node = (int) get_u64(req, "node"),
                .cgroup = json_object_get_string(get(req, "cgroup")),
                .nr_to_scan = get_u64(req, "nr_to_scan"),
                .priority = (int) get_u64(req, "priority"),
        };
        if (!sc.cgroup)
                sc.cgroup = "/";

        /* Already past its deadline (we were busy): the daemon has given up on it; do not do the work. */
        if (now_us() > deadline)
                return;

        struct json_object *p = json_object_new_object();

        if (streq(op, "count")) {
                uint64_t n = s->count(s, &sc, s->userdata);
                if (n == PRESSURE_SHRINK_EMPTY)
                        json_object_object_add(p, "empty", json_object_new_boolean(1));
                else {
                        json_object_object_add(p, "count", json_object_new_int64((int64_t) MIN(n, (uint64_t) INT64_MAX)));
                        if (sc.nr_bytes > 0)
                                json_object_object_add(p, "bytes", json_object_new_int64((int64_t) MIN(sc.nr_bytes, (uint64_t) INT64_MAX)));
                }
        } else if (streq(op, "scan")) {
                sc.nr_scanned = sc.nr_to_scan;
                uint64_t freed = s->scan(s, &sc, s->userdata);
                if (freed != PRESSURE_SHRINK_STOP && freed > 0)
                        c->release_pending = 1;
                if (freed == PRESSURE_SHRINK_STOP)
                        json_object_object_add(p, "stop", json_object_new_boolean(1));
                else {
                        json_object_object_add(p, "freed", json_object_new_int64((int64_t) MIN(freed, (uint64_t) INT64_MAX)));
                        if (sc.nr_scanned != sc.nr_to_scan)
                                json_object_object_add(p, "scanned", json_object_new_int64((int64_t) MIN(sc.nr_scanned, (uint64_t) INT64_MAX)));
                        if (sc.nr_bytes > 0)
                                json_object_object_add(p, "bytes", json_object_new_int64((int64_t) MIN(sc.nr_bytes, (uint64_t) INT64_MAX)));
                }
        } else {
                json_object_put(p);
                return;
        }
        answers_add(c, out, id, p, deadline);
}

static int dispatch_serve(struct pressure_client *c) {
        if (c->serve.fd < 0)
                return 0;
        for (;;) {
                ssize_t n = frame_reader_read_fd(&c->serve.in, c->serve.fd);
                if (n == -EAGAIN)
                        break;
                if (n <= 0) {
                        /* The daemon went away: try again every second until it is back. */
                        serve_close(c);
                        conn_close(&c->call);
                        retry_arm(c, true);
                        return 0;
                }
                if (frame_reader_pending(&c->serve.in) >= 1024 * 1024)
                        break;
        }
        struct answers answers = {};
        for (;;) {
                struct json_object *msg;
                int r = conn_receive(&c->serve, UINT64_MAX, &msg);
                if (r == -EAGAIN) {
                        answers_send(c, &answers);
                        /* The answers are out; now give back what the scans freed. */
                        release_if_due(c);
                        return 0;
                }
                if (r < 0) {
                        json_object_put(answers.list);
                        serve_close(c);
                        retry_arm(c, true);
                        return 0;
                }
                struct json_object *params = get(msg, "parameters"), *req = get(params, "request");
                struct json_object *reqs = get(params, "requests");
                if (req)
                        handle_request(c, req, &answers);
                if (reqs && json_object_is_type(reqs, json_type_array))
                        for (size_t i = 0; i < json_object_array_length(reqs); i++)
                                handle_request(c, json_object_array_get_idx(reqs, i), &answers);
                json_object_put(msg);
                if (c->serve.fd < 0) {
                        json_object_put(answers.list);
                        return 0;
                }
        }
}

static void dispatch_retry(struct pressure_client *c) {
        uint64_t expirations;
        if (read(c->retry_fd, &expirations, sizeof(expirations)) != sizeof(expirations))
                return;
        if (c->call.fd < 0 && conn_open(&c->call, c->path) < 0)
                return;
        if (serve_register(c) >= 0)
                retry_arm(c, false);
}

EXPORT int pressure_shrinker_new(struct pressure_client *c, const char *name, unsigned flags, int seeks, int batch,
                                 pressure_count_objects_t count, pressure_scan_objects_t scan, void *userdata,
                                 struct pressure_shrinker **ret) {
        if (!c || !name || !*name || strlen(name) > 64 || !count || !scan || !ret ||
            (flags & ~(unsigned) (PRESSURE_SHRINKER_NUMA_AWARE | PRESSURE_SHRINKER_MEMCG_AWARE)))
                return -EINVAL;

        struct pressure_shrinker *s = calloc(1, sizeof(*s));
        if (!s || !(s->name = strdup(name))) {
                free(s);
                return -ENOMEM;
        }
        s->client = c;
        s->flags = flags;
        s->seeks = seeks;
        s->batch = batch;
        s->count = count;
        s->scan = scan;
        s->userdata = userdata;

        int r;
        LOCKED(c) {
                s->next = c->shrinkers;
                if (s->next)
                        s->next->prev = s;
                c->shrinkers = s;
                r = serve_register(c);
                if (r < 0) {
                        c->shrinkers = s->next;
                        if (s->next)
                                s->next->prev = NULL;
                        /* Put the others back if they were registered before. */
                        (void) serve_register(c);
                }
        }
        if (r < 0) {
                free(s->name);
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

EXPORT void pressure_shrinker_free(struct pressure_shrinker *s) {
        if (!s)
                return;
        struct pressure_client *c = s->client;
        LOCKED(c) {
                if (s->prev)
                        s->prev->next = s->next;
                else
                        c->shrinkers = s->next;
                if (s->next)
                        s->next->prev = s->prev;
                if (serve_register(c) < 0 && c->shrinkers)
                        retry_arm(c, true);
        }
        free(s->name);
        free(s);
}

EXPORT uint64_t pressure_shrinker_get_id(const struct pressure_shrinker *s) {
        return s ? s->id : 0;
}

/* ---- locked entry points ---- */

EXPORT int pressure_client_get_status(struct pressure_client *c, struct pressure_status **ret) {
        int r = -EINVAL;
        if (!c)
                return r;
        LOCKED(c) {
                if (c->call.fd < 0)
                        (void) conn_open(&c->call, c->path);
                r = client_get_status(c, ret);
        }
        return r;
}

EXPORT int pressure_client_subscribe(struct pressure_client *c, const char *const *scopes,
                                     enum pressure_level min_level, pressure_event_handler_t handler,
                                     void *userdata) {
        int r = -EINVAL;
        if (!c)
                return r;
        LOCKED(c) r = client_subscribe(c, scopes, min_level, handler, userdata);
        return r;
}

EXPORT int pressure_client_dispatch(struct pressure_client *c) {
        int r = 0;
        if (!c)
                return -EINVAL;
        LOCKED(c) {
                unwake(c);
                dispatch_retry(c);
                (void) dispatch_serve(c);
                release_if_due(c);
                r = dispatch_subscription(c);
        }
        return r;
}

static void *client_thread(void *userdata) {
        struct pressure_client *c = userdata;
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = c->epoll_fd, .events = POLLIN },
                        { .fd = c->stop_fd, .events = POLLIN },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents)
                        break;
                (void) pressure_client_dispatch(c);
        }
        return NULL;
}

EXPORT int pressure_client_start_thread(struct pressure_client *c) {
        int r = 0;
        if (!c)
                return -EINVAL;
        LOCKED(c) {
                if (c->thread_running)
                        r = -EBUSY;
                else if ((c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
                        r = -errno;
                else if ((r = -pthread_create(&c->thread, NULL, client_thread, c)) == 0)
                        c->thread_running = 1;
        }
        return r;
}

EXPORT int pressure_client_call_json(struct pressure_client *c, const char *method, const char *parameters,
                                     char **ret, char **ret_error) {
        struct json_object *params = NULL, *reply = NULL;
        int r = 0;

        if (!c || !method || !ret)
                return -EINVAL;
        if (parameters) {
                params = json_tokener_parse(parameters);
                if (!params || !json_object_is_type(params, json_type_object)) {
                        json_object_put(params);
                        return -EINVAL;
                }
        }
        LOCKED(c) {
                if (c->call.fd < 0)
                        r = conn_open(&c->call, c->path);
                uint64_t deadline = client_deadline(c);
                struct json_object *call = new_call(method, params, false);
                params = NULL;
                if (r >= 0)
                        r = conn_send(&c->call, call, deadline);
                json_object_put(call);
                if (r >= 0)
                        r = conn_receive(&c->call, deadline, &reply);
                if (r < 0)
                        conn_close(&c->call); /* out of step: start afresh next time */
        }
        if (r < 0)
                return r;

        r = reply_to_errno(reply);
        if (r < 0) {
                if (ret_error) {
                        const char *e = json_object_get_string(get(reply, "error"));
                        *ret_error = e ? strdup(e) : NULL;
                }
                json_object_put(reply);
                return r;
        }
        const char *text = json_object_to_json_string_ext(get(reply, "parameters"),
                                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = strdup(text ? text : "{}");
        json_object_put(reply);
        return *ret ? 0 : -ENOMEM;
}
