/* SPDX-License-Identifier: MIT */
/* libpressure's client against the real daemon: made before it, through its restarts, against a daemon
 * that accepts and never answers, shrinkers added and removed one at a time, and callbacks that take the
 * application's lock while another thread holds it and calls the library. */

#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "pressure-private.h"
#include "test-util.h"

static struct test_daemon daemon_;

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

/* ---- what the callbacks saw ---- */

struct seen {
        int connected; /* last told; -1 none */
        unsigned n_told[2];
        unsigned initial, events;
        int ended; /* error of the end handler; 1 none */
        unsigned counts, scans;
        struct pressure_shrink_control last; /* fields copied, cgroup not kept */
};

static void on_connection(struct pressure_client *c, int connected, void *userdata) {
        struct seen *s = userdata;
        (void) c;
        s->connected = connected;
        s->n_told[connected ? 1 : 0]++;
}

static void on_event(struct pressure_client *c, const struct pressure_scope *scope, int is_initial, void *userdata) {
        struct seen *s = userdata;
        (void) c;
        (void) scope;
        if (is_initial)
                s->initial++;
        else
                s->events++;
}

static char last_log[512];
static int last_priority;

static void on_log(struct pressure_client *c, int priority, const char *message, void *userdata) {
        (void) c;
        (void) userdata;
        last_priority = priority;
        snprintf(last_log, sizeof(last_log), "%s", message);
}

static void on_end(struct pressure_subscription *sub, int error, void *userdata) {
        struct seen *s = userdata;
        (void) sub;
        s->ended = error;
}

static uint64_t count_cb(struct pressure_shrinker *sh, struct pressure_shrink_control *sc, void *userdata) {
        struct seen *s = pressure_shrinker_get_userdata(sh);
        (void) userdata;
        s->counts++;
        s->last = *sc;
        return 10;
}

static uint64_t scan_cb(struct pressure_shrinker *sh, struct pressure_shrink_control *sc, void *userdata) {
        struct seen *s = pressure_shrinker_get_userdata(sh);
        (void) userdata;
        s->scans++;
        s->last = *sc;
        return sc->nr_to_scan;
}

static struct pressure_shrinker *make_shrinker(struct pressure_client *c, const char *name, struct seen *seen) {
        struct pressure_shrinker *s;
        CU_ASSERT_EQUAL_FATAL(pressure_shrinker_alloc(c, 0, name, &s), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_callbacks(s, count_cb, scan_cb), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_userdata(s, seen, NULL), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_batch(s, 16), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_register(s), 0);
        /* Settings are the daemon's once registered. */
        CU_ASSERT_EQUAL(pressure_shrinker_set_seeks(s, 4), -EBUSY);
        CU_ASSERT_EQUAL(pressure_shrinker_register(s), -EBUSY);
        return s;
}

/* The ids of this process's shrinkers the daemon lists, by name; -1 for one not listed. */
static int64_t listed_id(struct pressure_client *c, const char *name, int64_t *ret_batch) {
        char *reply = NULL;
        int64_t id = -1;
        if (pressure_client_call_json(c, "io.pressured.ListShrinkers", NULL, &reply, NULL) < 0)
                return -1;
        struct json_object *o = json_tokener_parse(reply), *list, *v;
        free(reply);
        if (json_object_object_get_ex(o, "shrinkers", &list))
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        struct json_object *e = json_object_array_get_idx(list, i);
                        if (json_object_object_get_ex(e, "pid", &v) && json_object_get_int(v) == getpid() &&
                            json_object_object_get_ex(e, "name", &v) && strcmp(json_object_get_string(v), name) == 0) {
                                json_object_object_get_ex(e, "id", &v);
                                id = json_object_get_int64(v);
                                if (ret_batch && json_object_object_get_ex(e, "batch", &v))
                                        *ret_batch = json_object_get_int64(v);
                        }
                }
        json_object_put(o);
        return id;
}

/* A client made while no daemon runs registers everything once it comes; it hears each state change. */
static void test_before_and_through_restarts(void) {
        struct pressure_client *c;
        struct pressure_subscription *sub;
        struct pressure_status *st;
        struct seen seen = { .connected = -1, .ended = 1 }, shr = { .ended = 1 };

        CU_ASSERT_EQUAL_FATAL(test_daemon_stop(&daemon_), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_set_connection_handler(c, on_connection, &seen), 0);
        CU_ASSERT_EQUAL(pressure_client_set_log_handler(c, on_log, NULL), 0);
        CU_ASSERT_EQUAL(pressure_subscription_new(c, NULL, PRESSURE_LEVEL_LOW, on_event, &seen, &sub), 0);
        CU_ASSERT_EQUAL(pressure_subscription_set_end_handler(sub, on_end, &seen), 0);
        struct pressure_shrinker *a = make_shrinker(c, "client-a", &shr);

        /* Away: said once, and the calls that need the daemon say so. */
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, seen.connected == 0));
        CU_ASSERT_EQUAL(pressure_client_is_connected(c), 0);
        CU_ASSERT_EQUAL(pressure_subscription_get_state(sub), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(a), 0u);
        int r = pressure_client_get_status(c, &st);
        CU_ASSERT(r == -ENOENT || r == -ECONNREFUSED);
        CU_ASSERT_EQUAL(pressure_client_get_status_async(c, NULL, NULL), -EINVAL);
        CU_ASSERT_EQUAL(seen.initial, 0u);
        /* And the log handler says why, once. */
        CU_ASSERT_PTR_NOT_NULL(strstr(last_log, "is not there"));
        CU_ASSERT_PTR_NOT_NULL(strstr(last_log, daemon_.socket));
        CU_ASSERT_EQUAL(last_priority, 5 /* LOG_NOTICE */);
        last_log[0] = 0;
        (void) pressure_client_dispatch(c);
        CU_ASSERT_STRING_EQUAL(last_log, "");

        /* The daemon comes: everything is registered by itself, the first states come from dispatch. */
        const char *const args[] = { "--hold", "0", NULL };
        CU_ASSERT_EQUAL_FATAL(test_daemon_restart(&daemon_, args), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, seen.connected == 1));
        CU_ASSERT_EQUAL(seen.n_told[0], 1u);
        CU_ASSERT_EQUAL(seen.initial, 1u);
        CU_ASSERT_EQUAL(pressure_subscription_get_state(sub), 1);
        uint64_t id = pressure_shrinker_get_id(a);
        CU_ASSERT(id > 0);
        int64_t batch = 0;
        CU_ASSERT_EQUAL(listed_id(c, "client-a", &batch), (int64_t) id);
        CU_ASSERT_EQUAL(batch, 16);

        /* Restarted under a subscription: told away, then back, with the states again; a shrinker
         * added while it was away is registered with the other. */
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, seen.connected == 0));
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(a), 0u);
        struct pressure_shrinker *b = make_shrinker(c, "client-b", &shr);
        CU_ASSERT_EQUAL_FATAL(test_daemon_restart(&daemon_, args), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, seen.connected == 1));
        CU_ASSERT_EQUAL(seen.n_told[0], 2u);
        CU_ASSERT_EQUAL(seen.n_told[1], 2u);
        CU_ASSERT_EQUAL(seen.initial, 2u);
        CU_ASSERT_EQUAL(seen.ended, 1); /* never ended: it waited */
        CU_ASSERT(pressure_shrinker_get_id(a) > 0 && pressure_shrinker_get_id(b) > 0);
        CU_ASSERT(listed_id(c, "client-a", NULL) > 0);
        CU_ASSERT(listed_id(c, "client-b", NULL) > 0);

        pressure_shrinker_free(b);
        pressure_shrinker_free(a);
        pressure_subscription_unref(sub);
        pressure_client_unref(c);
}

struct shrink_call {
        const char *socket;
        int r;
};

static void *shrink_thread(void *userdata) {
        struct shrink_call *sc = userdata;
        struct pressure_client *c;
        char *reply = NULL;
        sc->r = pressure_client_new(sc->socket, &c);
        if (sc->r >= 0)
                sc->r = pressure_client_call_json(c, "io.pressured.Shrink", "{\"nr_to_scan\":4}", &reply, NULL);
        free(reply);
        pressure_client_unref(c);
        return NULL;
}

/* Adding and freeing one shrinker touches only that one: the others keep their ids. The requests
 * carry their scope's type and level (none for an explicit Shrink) and a deadline. */
static void test_one_shrinker_one_registration(void) {
        struct pressure_client *c;
        struct seen seen = { .connected = -1 }, sa = {}, sb = {}, sc = {};

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_set_connection_handler(c, on_connection, &seen), 0);
        struct pressure_shrinker *a = make_shrinker(c, "one-a", &sa), *b = make_shrinker(c, "one-b", &sb);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, seen.connected == 1));
        uint64_t ida = pressure_shrinker_get_id(a), idb = pressure_shrinker_get_id(b);
        CU_ASSERT(ida > 0 && idb > 0 && ida != idb);

        struct pressure_shrinker *s3 = make_shrinker(c, "one-c", &sc);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, pressure_shrinker_get_id(s3) > 0));
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(a), ida);
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(b), idb);
        pressure_shrinker_free(b);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, listed_id(c, "one-b", NULL) < 0));
        CU_ASSERT_EQUAL(listed_id(c, "one-a", NULL), (int64_t) ida);
        CU_ASSERT_EQUAL(listed_id(c, "one-c", NULL), (int64_t) pressure_shrinker_get_id(s3));

        /* An explicit Shrink from another client, answered by this one's dispatch. */
        pthread_t t;
        struct shrink_call call = { .socket = daemon_.socket };
        uint64_t before = now_us();
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, shrink_thread, &call), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, sa.scans > 0 && sc.scans > 0));
        pthread_join(t, NULL);
        CU_ASSERT_EQUAL(call.r, 0);
        CU_ASSERT_EQUAL(sb.counts + sb.scans, 0u);
        CU_ASSERT_EQUAL(sa.last.nr_to_scan, 4u);
        CU_ASSERT_EQUAL(sa.last.scope_type, PRESSURE_SCOPE_SYSTEM);
        CU_ASSERT_EQUAL(sa.last.level, PRESSURE_LEVEL_OK);
        CU_ASSERT(sa.last.deadline > before);
        pressure_shrinker_free(s3);
        pressure_shrinker_free(a);
        pressure_client_unref(c);
}

/* A daemon that accepts and never answers: a listening socket nobody accepts on. */
static void on_alarm(int sig) {
        (void) sig;
        static const char msg[] = "dispatch or a call blocked for 20 s\n";
        (void) !write(2, msg, sizeof(msg) - 1);
        _exit(1);
}

static void test_silent_daemon(void) {
        char path[108];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct pressure_client *c;
        struct pressure_subscription *sub;
        struct pressure_status *st;
        struct seen seen = { .connected = -1 }, shr = {};

        snprintf(path, sizeof(path), "/tmp/pressured-silent-%d", (int) getpid());
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CU_ASSERT_FATAL(fd >= 0);
        unlink(path);
        CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        test_cleanup_path(path, false);
        CU_ASSERT_EQUAL_FATAL(listen(fd, 64), 0);

        /* A guard, not a measurement: the old library blocked here for the whole timeout, forever with
         * none. */
        signal(SIGALRM, on_alarm);
        alarm(20);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(path, &c), 0);
        pressure_client_set_timeout(c, 0); /* wait forever where a call waits */
        CU_ASSERT_EQUAL(pressure_client_set_connection_handler(c, on_connection, &seen), 0);
        CU_ASSERT_EQUAL(pressure_subscription_new(c, NULL, PRESSURE_LEVEL_LOW, on_event, &seen, &sub), 0);
        struct pressure_shrinker *s = make_shrinker(c, "silent", &shr);
        for (int i = 0; i < 50; i++)
                CU_ASSERT_EQUAL(pressure_client_dispatch(c), 0);
        CU_ASSERT_EQUAL(pressure_subscription_get_state(sub), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(s), 0u);
        CU_ASSERT_EQUAL(seen.connected, -1);
        /* The calls that wait say how long they may: a timeout ends them. */
        pressure_client_set_timeout(c, 200);
        CU_ASSERT_EQUAL(pressure_client_get_status(c, &st), -ETIMEDOUT);
        CU_ASSERT_EQUAL(pressure_client_subscribe(c, NULL, PRESSURE_LEVEL_LOW, on_event, &seen), -ETIMEDOUT);
        pressure_shrinker_free(s);
        pressure_subscription_unref(sub);
        pressure_client_unref(c);
        alarm(0);
        close(fd);
        unlink(path);
}

/* A daemon that answers GetStatus with what it is told to: a reply without a mandatory field, then one
 * with a field this library does not know, twice (the library's call, then pressurectl's JSON call).
 * Anything else gets empty parameters. */
#define STATUS_BROKEN "{\"parameters\":{\"system\":{\"scope\":{\"type\":\"system\"},\"level\":\"ok\",\"since\":0}," \
                      "\"nodes\":[],\"cgroups\":[]}}"
#define STATUS_LATER "{\"parameters\":{\"system\":{\"scope\":{\"type\":\"system\"},\"level\":\"low\",\"reclaim_target\":5," \
                     "\"since\":0,\"from_the_future\":1},\"nodes\":[],\"cgroups\":[]}}"
static const char *const status_replies[] = { STATUS_BROKEN, STATUS_LATER, STATUS_BROKEN, STATUS_LATER };

static void *scripted_daemon(void *arg) {
        int lfd = *(int *) arg;
        size_t next = 0;
        while (next < ELEMENTSOF(status_replies)) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        return NULL;
                char buf[4096];
                size_t len = 0;
                ssize_t n;
                while (next < ELEMENTSOF(status_replies) && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
                        len += (size_t) n;
                        char *end;
                        while ((end = memchr(buf, 0, len))) {
                                const char *reply = strstr(buf, "GetStatus") ? status_replies[next++] : "{\"parameters\":{}}";
                                (void) !write(fd, reply, strlen(reply) + 1);
                                size_t used = (size_t) (end - buf) + 1;
                                memmove(buf, end + 1, len - used);
                                len -= used;
                        }
                }
                close(fd);
        }
        return NULL;
}

/* A reply that breaks the interface is refused, not read as zeros; one with more than this library
 * knows is taken. */
static void test_reply_held_to_interface(void) {
        char path[108];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct pressure_client *c;
        struct pressure_status *st = NULL;
        pthread_t t;

        snprintf(path, sizeof(path), "/tmp/pressured-scripted-%d", (int) getpid());
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CU_ASSERT_FATAL(fd >= 0);
        unlink(path);
        CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        test_cleanup_path(path, false);
        CU_ASSERT_EQUAL_FATAL(listen(fd, 64), 0);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, scripted_daemon, &fd), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(path, &c), 0);
        pressure_client_set_timeout(c, 10000);
        CU_ASSERT_EQUAL(pressure_client_get_status(c, &st), -EPROTO);
        CU_ASSERT_EQUAL(pressure_client_get_status(c, &st), 0);
        if (st) {
                const struct pressure_scope *sys = pressure_status_get_system(st);
                CU_ASSERT_EQUAL(pressure_scope_get_level(sys), PRESSURE_LEVEL_LOW);
                CU_ASSERT_EQUAL(pressure_scope_get_reclaim_target(sys), 5u);
                pressure_status_unref(st);
        }
        /* The same for the JSON calls pressurectl makes. */
        char *text = NULL, *error = NULL;
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.GetStatus", NULL, &text, &error), -EPROTO);
        CU_ASSERT_PTR_NULL(text);
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.GetStatus", NULL, &text, &error), 0);
        CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "from_the_future"));
        free(text);
        free(error);
        pressure_client_unref(c);
        shutdown(fd, SHUT_RDWR);
        pthread_join(t, NULL);
        close(fd);
        unlink(path);
}

/* A daemon that takes a Serve call and tells its one shrinker a growth limit; every other call gets empty
 * parameters. It notes whether the Serve call asked for limits. */
#define SERVE_REGISTERED "{\"parameters\":{\"registered\":{\"token\":\"t\",\"shrinkers\":[{\"id\":7,\"name\":\"lru\"}]}}," \
                         "\"continues\":true}"
#define SERVE_LIMITS "{\"parameters\":{\"limits\":[{\"shrinker\":7,\"bytes\":40960}]},\"continues\":true}"
#define SERVE_NO_LIMIT "{\"parameters\":{\"limits\":[{\"shrinker\":7,\"bytes\":0}]},\"continues\":true}"

struct limit_script {
        int lfd;
        int asked; /* the Serve call had "limits": true */
        sem_t lift; /* posted by the test: send SERVE_NO_LIMIT */
};

static void *limit_daemon(void *arg) {
        struct limit_script *ls = arg;
        struct pollfd p[4] = { { .fd = ls->lfd, .events = POLLIN } };
        char buf[4][4096];
        size_t len[4] = {}, n = 1;
        int serve = -1;
        for (;;) {
                if (serve >= 0 && sem_trywait(&ls->lift) == 0)
                        (void) !write(serve, SERVE_NO_LIMIT, sizeof(SERVE_NO_LIMIT));
                if (poll(p, n, 50) < 0)
                        return NULL;
                if ((p[0].revents & POLLIN) && n < 4) {
                        int fd = accept4(ls->lfd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                return NULL; /* shut down */
                        p[n] = (struct pollfd){ .fd = fd, .events = POLLIN };
                        len[n++] = 0;
                }
                for (size_t i = 1; i < n; i++) {
                        if (!p[i].revents)
                                continue;
                        ssize_t k = read(p[i].fd, buf[i] + len[i], sizeof(buf[i]) - 1 - len[i]);
                        if (k <= 0) {
                                close(p[i].fd);
                                p[i] = p[--n];
                                memcpy(buf[i], buf[n], len[n]);
                                len[i] = len[n];
                                continue;
                        }
                        len[i] += (size_t) k;
                        char *end;
                        while ((end = memchr(buf[i], 0, len[i]))) {
                                if (strstr(buf[i], "io.pressured.Serve")) {
                                        ls->asked = strstr(buf[i], "\"limits\":true") != NULL;
                                        serve = p[i].fd;
                                        (void) !write(serve, SERVE_REGISTERED, sizeof(SERVE_REGISTERED));
                                        (void) !write(serve, SERVE_LIMITS, sizeof(SERVE_LIMITS));
                                } else
                                        (void) !write(p[i].fd, "{\"parameters\":{}}", 18);
                                size_t used = (size_t) (end - buf[i]) + 1;
                                memmove(buf[i], end + 1, len[i] - used);
                                len[i] -= used;
                        }
                }
        }
}

struct lru_item {
        struct pressure_lru_node node;
        int freed;
};

static void lru_item_free(struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        ((struct lru_item *) n)->freed = 1;
}

/* pressure_lru's shrinker asks for growth limits, is trimmed at once to one it is told, trims what was
 * added past it with pressure_lru_trim(), and grows freely once the limit is lifted. */
static void test_lru_growth_limit(void) {
        char path[108];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct limit_script ls = {};
        struct pressure_client *c;
        struct pressure_lru *lru;
        struct pressure_shrinker *sh;
        static struct lru_item items[100];
        pthread_t t;

        snprintf(path, sizeof(path), "/tmp/pressured-limits-%d", (int) getpid());
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        ls.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CU_ASSERT_FATAL(ls.lfd >= 0);
        unlink(path);
        CU_ASSERT_EQUAL_FATAL(bind(ls.lfd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        test_cleanup_path(path, false);
        CU_ASSERT_EQUAL_FATAL(listen(ls.lfd, 64), 0);
        sem_init(&ls.lift, 0, 0);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, limit_daemon, &ls), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        for (size_t i = 0; i < 90; i++) {
                pressure_lru_node_init(&items[i].node);
                CU_ASSERT_EQUAL(pressure_lru_add(lru, &items[i].node, 0), 1);
        }
        CU_ASSERT_EQUAL(pressure_lru_trim(lru), 0u); /* no shrinker, no limit */
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(path, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_shrinker_new(lru, c, "lru", 0, 4096, NULL, lru_item_free, NULL, &sh), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_limit_handler(sh, NULL), -EBUSY); /* registered */
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, pressure_shrinker_get_limit(sh) == 40960));
        CU_ASSERT_TRUE(ls.asked);
        /* 40960 bytes of 4096-byte objects: ten are left, the oldest went. */
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 10u);
        CU_ASSERT_TRUE(items[0].freed && !items[89].freed);
        for (size_t i = 90; i < 100; i++) {
                pressure_lru_node_init(&items[i].node);
                CU_ASSERT_EQUAL(pressure_lru_add(lru, &items[i].node, 0), 1);
        }
        CU_ASSERT_EQUAL(pressure_lru_trim(lru), 10u);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 10u);
        CU_ASSERT_TRUE(!items[99].freed);
        /* Lifted: nothing more is trimmed. */
        sem_post(&ls.lift);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, pressure_shrinker_get_limit(sh) == 0));
        for (size_t i = 0; i < 10; i++) {
                pressure_lru_node_init(&items[i].node);
                CU_ASSERT_EQUAL(pressure_lru_add(lru, &items[i].node, 0), 1);
        }
        CU_ASSERT_EQUAL(pressure_lru_trim(lru), 0u);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 20u);

        pressure_shrinker_free(sh);
        pressure_client_unref(c);
        shutdown(ls.lfd, SHUT_RDWR);
        pthread_join(t, NULL);
        close(ls.lfd);
        unlink(path);
        pressure_lru_free(lru);
        sem_destroy(&ls.lift);
}

/* A count callback takes the application's lock; another thread holds that lock and calls the library.
 * With callbacks under the client's lock this deadlocked. */
static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t entered, registered;

static void post_when_connected(struct pressure_client *c, int connected, void *userdata) {
        (void) c;
        if (connected)
                sem_post(userdata);
}

/* Count and scan alike (an explicit Shrink with nr_to_scan scans without counting). */
static uint64_t locking_callback(struct pressure_shrinker *sh, struct pressure_shrink_control *sc, void *userdata) {
        (void) sh;
        (void) userdata;
        sem_post(&entered);
        pthread_mutex_lock(&app_lock);
        pthread_mutex_unlock(&app_lock);
        return sc->nr_to_scan;
}

static void test_callbacks_without_library_lock(void) {
        struct pressure_client *c;
        struct pressure_shrinker *s, *other;
        struct seen shr = {};

        sem_init(&entered, 0, 0);
        sem_init(&registered, 0, 0);
        signal(SIGALRM, on_alarm);
        alarm(20);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_set_connection_handler(c, post_when_connected, &registered), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_shrinker_alloc(c, 0, "locking", &s), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_callbacks(s, locking_callback, locking_callback), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_register(s), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_start_thread(c), 0);
        sem_wait(&registered); /* the library's thread registered it */
        CU_ASSERT_FATAL(pressure_shrinker_get_id(s) > 0);

        pthread_mutex_lock(&app_lock);
        pthread_t t;
        struct shrink_call call = { .socket = daemon_.socket };
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, shrink_thread, &call), 0);
        sem_wait(&entered); /* the library's thread is in the callback, waiting for app_lock */
        /* Calls that take the client's lock, while the callback waits for ours. */
        CU_ASSERT(pressure_shrinker_get_id(s) > 0);
        CU_ASSERT_EQUAL(pressure_shrinker_alloc(c, 0, "other", &other), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_callbacks(other, count_cb, scan_cb), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_userdata(other, &shr, NULL), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_register(other), 0);
        pressure_client_set_timeout(c, 3000);
        pthread_mutex_unlock(&app_lock);
        pthread_join(t, NULL);
        CU_ASSERT_EQUAL(call.r, 0);
        pressure_shrinker_free(other);
        /* Freed from another thread than the library's: no callback of it runs after this. */
        pressure_shrinker_free(s);
        pressure_client_unref(c);
        alarm(0);
        sem_destroy(&entered);
        sem_destroy(&registered);
}

/* One raw call on a fresh connection: the reply's text. */
static char *raw_call(const char *text) {
        char *reply = NULL;
        int fd = test_connect(daemon_.socket);
        if (fd < 0)
                return NULL;
        if (test_send_raw(fd, text, strlen(text) + 1) < 0 || test_recv_msg(fd, 5000, &reply) != 1)
                reply = NULL;
        close(fd);
        return reply;
}

/* AddShrinker and RemoveShrinker change only the caller's own client: a token used by another process,
 * a shrinker of another client, a bad spec and the 65th shrinker are refused. */
static void test_add_remove_refusals(void) {
        char *msg = NULL, call[512], token[64] = "";
        struct pressure_client *c;
        struct seen shr = {};

        int serve = test_connect(daemon_.socket);
        CU_ASSERT_FATAL(serve >= 0);
        const char start[] = "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":[{\"name\":\"raw\"}]},\"more\":true}";
        CU_ASSERT_EQUAL(test_send_raw(serve, start, sizeof(start)), 0);
        CU_ASSERT_EQUAL_FATAL(test_recv_msg(serve, 5000, &msg), 1);
        const char *t = strstr(msg, "\"token\":\"");
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        snprintf(token, sizeof(token), "%.32s", t + 9);
        free(msg);

        /* Another client's shrinker, to name. */
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        struct pressure_shrinker *other = make_shrinker(c, "not-yours", &shr);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, pressure_shrinker_get_id(other) > 0));

        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.RemoveShrinker\",\"parameters\":{\"token\":\"%s\",\"shrinker\":%llu}}",
                 token, (unsigned long long) pressure_shrinker_get_id(other));
        CU_ASSERT((msg = raw_call(call)) && strstr(msg, "io.pressured.NoSuchShrinker"));
        free(msg);
        CU_ASSERT(listed_id(c, "not-yours", NULL) > 0);

        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.AddShrinker\",\"parameters\":{\"token\":\"%s\",\"shrinker\":{\"name\":\"\"}}}", token);
        CU_ASSERT((msg = raw_call(call)) && strstr(msg, "InvalidParameter"));
        free(msg);

        /* The token alone is not enough: another process may not use it. */
        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.AddShrinker\",\"parameters\":{\"token\":\"%s\",\"shrinker\":{\"name\":\"stolen\"}}}", token);
        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        pid_t pid = fork();
        if (pid == 0) {
                char *r = raw_call(call);
                char verdict = r && strstr(r, "PermissionDenied") ? 'y' : 'n';
                (void) !write(p[1], &verdict, 1);
                _exit(0);
        }
        close(p[1]);
        char verdict = 0;
        CU_ASSERT_EQUAL(read(p[0], &verdict, 1), 1);
        CU_ASSERT_EQUAL(verdict, 'y');
        close(p[0]);
        waitpid(pid, NULL, 0);

        /* Up to 64 in all, then no more. */
        unsigned added = 0;
        for (int i = 0; i < 70; i++) {
                snprintf(call, sizeof(call), "{\"method\":\"io.pressured.AddShrinker\",\"parameters\":{\"token\":\"%s\",\"shrinker\":{\"name\":\"raw-%d\"}}}",
                         token, i);
                msg = raw_call(call);
                if (msg && strstr(msg, "\"id\":"))
                        added++;
                else
                        CU_ASSERT(msg && strstr(msg, "InvalidParameter"));
                free(msg);
        }
        CU_ASSERT_EQUAL(added, 63u);
        close(serve);
        pressure_shrinker_free(other);
        pressure_client_unref(c);
}

/* The application drops its last reference while the library's thread runs one of its callbacks: the
 * thread frees the client once dispatch returns (it polled the freed client's fd before; AddressSanitizer
 * reports that in the sanitizer build). */
static sem_t in_handler, leave_handler;

static void blocking_handler(struct pressure_client *c, const struct pressure_scope *scope, int is_initial,
                             void *userdata) {
        (void) c;
        (void) scope;
        (void) is_initial;
        (void) userdata;
        sem_post(&in_handler);
        sem_wait(&leave_handler);
}

static void test_last_unref_during_callback(void) {
        struct pressure_client *c;
        sem_init(&in_handler, 0, 0);
        sem_init(&leave_handler, 0, 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_start_thread(c), 0);
        /* Floating: it holds no reference, so the application's is the last but dispatch's. */
        CU_ASSERT_EQUAL_FATAL(pressure_subscription_new(c, NULL, PRESSURE_LEVEL_LOW, blocking_handler, NULL, NULL), 0);
        sem_wait(&in_handler);
        pressure_client_unref(c);
        sem_post(&leave_handler);
        /* Nothing to wait on from here: the thread is detached and ends by itself. The next tests run
         * beside it. */
}

/* examples/poll-watch: its first state, its daemon going and coming back, and a clean exit. */
static void test_poll_watch_example(void) {
        int p[2];
        char line[256];
        CU_ASSERT_FATAL(pipe(p) == 0);
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                execl(getenv("POLL_WATCH_BIN"), "poll-watch", "--socket", daemon_.socket, "system", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        struct test_child w = { .lines.fd = -1 };
        test_child_adopt(&w, pid, p[0]);
        CU_ASSERT_EQUAL(test_lines_next(&w.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT(strncmp(line, "system ", 7) == 0 && strstr(line, "(initial)"));
        CU_ASSERT_EQUAL(test_lines_next(&w.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "daemon connected");

        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        CU_ASSERT_EQUAL(test_lines_next(&w.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "daemon away: waiting for it");
        const char *const args[] = { "--hold", "0", NULL };
        CU_ASSERT_EQUAL_FATAL(test_daemon_restart(&daemon_, args), 0);
        CU_ASSERT_EQUAL(test_lines_next(&w.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT(strncmp(line, "system ", 7) == 0 && strstr(line, "(initial)"));
        CU_ASSERT_EQUAL(test_lines_next(&w.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "daemon connected");

        int status = -1;
        CU_ASSERT_EQUAL(kill(pid, SIGTERM), 0);
        CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
        CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        w.pid = 0;
        test_cleanup_forget_pid(pid);
        test_child_stop(&w);
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "shrinkers added and freed one at a time", test_one_shrinker_one_registration },
                { "AddShrinker and RemoveShrinker refuse what is not the caller's", test_add_remove_refusals },
                { "a daemon that accepts and never answers", test_silent_daemon },
                { "replies are held to the interface", test_reply_held_to_interface },
                { "pressure_lru keeps within the growth limit it is told", test_lru_growth_limit },
                { "callbacks run without the library's lock", test_callbacks_without_library_lock },
                { "made before the daemon, through its restarts", test_before_and_through_restarts },
                { "the last reference dropped during a callback of the library's thread", test_last_unref_during_callback },
                { "examples/poll-watch", test_poll_watch_example },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = access("/proc/pressure/memory", R_OK) < 0 ? "no PSI on this kernel" : NULL;
        if (!skip) {
                const char *const args[] = { "--hold", "0", NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        return 1;
                }
        }
        return test_run("client", cases, skip);
}
