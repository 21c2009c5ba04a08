/* SPDX-License-Identifier: MIT */
/* Fuzz target: what libpressure parses from the daemon. A fake daemon on a thread of its own answers
 * every connection the library opens with the input (then shuts its side down); the library asks for the
 * status, subscribes (its first reply, then events through dispatch) and registers a shrinker (the
 * registration reply, then requests through dispatch), and does the same without waiting (a
 * subscription object, an asynchronous status). A library must survive any daemon, also a broken
 * or hostile one: nothing may crash, leak, hang or read out of bounds. Replayed over its corpus as a unit
 * test; built for libFuzzer with -Dfuzzer=true. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pressure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], sock_path[96];
static int listen_fd = -1;

static struct {
        pthread_mutex_t lock;
        const uint8_t *data;
        size_t size;
        int fds[16]; /* the connections of this input, kept open until it is done */
        size_t n_fds;
} input = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The fake daemon: answers each connection with the input at once, reads nothing, shuts its side down,
 * and keeps the connection open until the input is done (the library's calls end on EOF, not EPIPE). */
static void *daemon_thread(void *arg) {
        (void) arg;
        for (;;) {
                int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR)
                                continue;
                        return NULL;
                }
                pthread_mutex_lock(&input.lock);
                if (input.size > 0)
                        (void) !send(fd, input.data, input.size, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void) shutdown(fd, SHUT_WR);
                if (input.n_fds < sizeof(input.fds) / sizeof(input.fds[0]))
                        input.fds[input.n_fds++] = fd;
                else
                        close(fd);
                pthread_mutex_unlock(&input.lock);
        }
}

static void teardown(void) {
        if (sock_path[0])
                (void) unlink(sock_path);
        if (dir[0])
                (void) rmdir(dir);
}

static int setup(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        pthread_t t;
        snprintf(dir, sizeof(dir), "/tmp/pressure-fuzz-XXXXXX");
        if (!mkdtemp(dir))
                return -errno;
        snprintf(sock_path, sizeof(sock_path), "%s/io.pressured", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        atexit(teardown);
        listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(listen_fd, 16) < 0)
                return -errno;
        if (pthread_create(&t, NULL, daemon_thread, NULL) != 0)
                return -EAGAIN;
        pthread_detach(t);
        return 0;
}

static uint64_t count(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        (void) s;
        (void) userdata;
        sc->nr_bytes = 1000;
        return 10;
}

static uint64_t scan(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        (void) s;
        (void) userdata;
        return sc->nr_to_scan > 10 ? 10 : sc->nr_to_scan;
}

static void on_status(struct pressure_client *c, int error, struct pressure_status *st, void *userdata) {
        (void) c;
        (void) error;
        (void) userdata;
        if (st)
                (void) pressure_status_get_n_cgroups(st);
}

static void on_change(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        (void) c;
        (void) initial;
        (void) userdata;
        (void) pressure_scope_get_level(s);
        (void) pressure_scope_get_reclaim_target(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int ready;
        struct pressure_client *c = NULL;
        struct pressure_status *st = NULL;
        struct pressure_shrinker *sh = NULL;
        const char *scopes[] = { "system", NULL };

        if (!ready) {
                if (setup() < 0)
                        abort();
                ready = 1;
        }
        pthread_mutex_lock(&input.lock);
        input.data = data;
        input.size = size;
        pthread_mutex_unlock(&input.lock);

        if (pressure_client_new(sock_path, &c) < 0)
                return 0;
        pressure_client_set_timeout(c, 200);
        if (pressure_client_get_status(c, &st) >= 0)
                pressure_status_unref(st);
        (void) pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_change, NULL);
        (void) pressure_shrinker_new(c, "fuzz", PRESSURE_SHRINKER_NUMA_AWARE, -1, 0, count, scan, NULL, &sh);
        /* The asynchronous ways in: a subscription object and a status, both answered from dispatch. */
        struct pressure_subscription *sub = NULL;
        (void) pressure_subscription_new(c, scopes, PRESSURE_LEVEL_LOW, on_change, NULL, &sub);
        (void) pressure_client_get_status_async(c, on_status, NULL);
        for (int i = 0; i < 4; i++)
                (void) pressure_client_dispatch(c);
        pressure_subscription_unref(sub);
        if (sh)
                pressure_shrinker_free(sh);
        pressure_client_unref(c);

        pthread_mutex_lock(&input.lock);
        input.data = NULL;
        input.size = 0;
        for (size_t i = 0; i < input.n_fds; i++)
                close(input.fds[i]);
        input.n_fds = 0;
        pthread_mutex_unlock(&input.lock);
        return 0;
}
