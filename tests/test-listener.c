/* SPDX-License-Identifier: MIT */
/* Accepting connections (listener.c) on a real listening Unix socket: at most 64 per wake-up, a pause
 * that grows when accept() fails for want of descriptors, and the quota both sockets share, with the
 * reserve no ordinary uid can take. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "listener.h"
#include "test-util.h"

static void test_quota(void) {
        CU_ASSERT_TRUE(connection_uid_reserved(0));
        CU_ASSERT_TRUE(connection_uid_reserved(999));
        CU_ASSERT_FALSE(connection_uid_reserved(1000));
        CU_ASSERT_TRUE(connection_uid_reserved(61184));
        CU_ASSERT_TRUE(connection_uid_reserved(65519));
        CU_ASSERT_FALSE(connection_uid_reserved(65520));
        CU_ASSERT_FALSE(connection_uid_reserved(100000)); /* one of a rootless container's uids */

        /* 16 places: ordinary uids together get 14, whichever uids they are; root the last two. */
        struct connection_quota q = { .max = 16 };
        for (unsigned i = 0; i < 14; i++)
                CU_ASSERT_TRUE(connection_quota_take(&q, 100000 + i));
        CU_ASSERT_PTR_NOT_NULL(connection_quota_refusal(&q, 1000));
        CU_ASSERT_FALSE(connection_quota_take(&q, 1000));
        CU_ASSERT_FALSE(connection_quota_take(&q, 200000));
        CU_ASSERT_PTR_NULL(connection_quota_refusal(&q, 0));
        CU_ASSERT_TRUE(connection_quota_take(&q, 0));
        CU_ASSERT_TRUE(connection_quota_take(&q, 998));
        /* Full for everyone. */
        CU_ASSERT_FALSE(connection_quota_take(&q, 0));
        CU_ASSERT_EQUAL(q.n, 16u);
        CU_ASSERT_EQUAL(q.n_users, 14u);
        /* A user's place given back is a user's again; root's give back the reserve. */
        connection_quota_put(&q, 100003);
        CU_ASSERT_TRUE(connection_quota_take(&q, 1000));
        connection_quota_put(&q, 0);
        CU_ASSERT_FALSE(connection_quota_take(&q, 1001));
        CU_ASSERT_TRUE(connection_quota_take(&q, 0));
        /* Putting back more than was taken does not wrap. */
        struct connection_quota e = { .max = 4 };
        connection_quota_put(&e, 1000);
        CU_ASSERT_EQUAL(e.n, 0u);
        CU_ASSERT_EQUAL(e.n_users, 0u);
        /* max 0: no cap. */
        struct connection_quota none = {};
        CU_ASSERT_PTR_NULL(connection_quota_refusal(&none, 100000));
}

struct accepted {
        int fds[256];
        unsigned n;
};

static void on_accept(int fd, void *userdata) {
        struct accepted *a = userdata;
        if (a->n < sizeof(a->fds) / sizeof(a->fds[0]))
                a->fds[a->n++] = fd;
        else
                close(fd);
}

static int listen_socket(char *path, size_t size) {
        snprintf(path, size, "/tmp/pressured-test-listener-%d.sock", (int) getpid());
        unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 512) < 0)
                return -errno;
        test_cleanup_path(path, false);
        return fd;
}

static int connect_to(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void close_all(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* A listening socket, an event loop and a listener on it that keeps what it accepts. */
struct fixture {
        char path[108];
        int lfd;
        sd_event *ev;
        struct accepted a;
        struct listener *l;
};

static void fixture_start(struct fixture *f) {
        *f = (struct fixture){};
        f->lfd = listen_socket(f->path, sizeof(f->path));
        CU_ASSERT_FATAL(f->lfd >= 0);
        CU_ASSERT_EQUAL_FATAL(sd_event_new(&f->ev), 0);
        CU_ASSERT_EQUAL_FATAL(listener_new(f->ev, f->lfd, "test socket", on_accept, &f->a, &f->l), 0);
}

static void fixture_stop(struct fixture *f) {
        listener_free(f->l);
        sd_event_unref(f->ev);
        close_all(f->a.fds, f->a.n);
        close(f->lfd);
}

/* 100 waiting connections: the first wake-up takes 64, the next the other 36. */
static void test_accepts_per_wakeup(void) {
        struct fixture f;
        fixture_start(&f);
        int clients[100];
        for (unsigned i = 0; i < 100; i++)
                clients[i] = connect_to(f.path);
        CU_ASSERT(clients[99] >= 0);
        CU_ASSERT(sd_event_run(f.ev, 1000000) > 0);
        CU_ASSERT_EQUAL(f.a.n, 64u);
        CU_ASSERT(sd_event_run(f.ev, 1000000) > 0);
        CU_ASSERT_EQUAL(f.a.n, 100u);
        close_all(clients, 100);
        fixture_stop(&f);
}

static int on_nothing(sd_event_source *src, uint64_t usec, void *userdata) {
        (void) src;
        (void) usec;
        (void) userdata;
        return 0;
}

/* With no descriptor left, accept() fails: the listener stops listening for 50 ms, then 100 (not a loop
 * that spins on a readable socket), and takes the waiting connection once descriptors are back. */
static void test_backs_off_without_descriptors(void) {
        struct fixture f;
        fixture_start(&f);
        /* sd-event makes its timerfd for the clock with the first timer and keeps it: made here, before
         * the descriptors run out, as the daemon's own timers have made it long before. */
        sd_event_source *dummy = NULL;
        CU_ASSERT_EQUAL_FATAL(sd_event_add_time(f.ev, &dummy, CLOCK_MONOTONIC, UINT64_MAX, 0, on_nothing, NULL), 0);
        sd_event_source_disable_unref(dummy);
        int client = connect_to(f.path);
        CU_ASSERT_FATAL(client >= 0);

        struct rlimit old;
        CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_NOFILE, &old), 0);
        int src = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CU_ASSERT_FATAL(src >= 0);
        /* Fill every descriptor below a low limit, so that accept() has none. */
        struct rlimit low = { .rlim_cur = 64, .rlim_max = old.rlim_max };
        int fill[64];
        unsigned n_fill = 0;
        CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
        for (int fd; n_fill < 64 && (fd = fcntl(src, F_DUPFD_CLOEXEC, 0)) >= 0;)
                fill[n_fill++] = fd;
        CU_ASSERT_EQUAL(errno, EMFILE);
        int r = sd_event_run(f.ev, 1000000);
        CU_ASSERT(r > 0);
        CU_ASSERT_EQUAL(f.a.n, 0u);
        CU_ASSERT_EQUAL(f.l->backoff_usec, 50000u);
        CU_ASSERT_PTR_NOT_NULL(f.l->retry);
        int enabled = SD_EVENT_ON;
        CU_ASSERT_EQUAL(sd_event_source_get_enabled(f.l->source, &enabled), 0);
        CU_ASSERT_EQUAL(enabled, SD_EVENT_OFF);
        /* Still none when it looks again: twice as long. */
        for (int fd; n_fill < 64 && (fd = fcntl(src, F_DUPFD_CLOEXEC, 0)) >= 0;)
                fill[n_fill++] = fd;
        while (f.a.n == 0 && f.l->backoff_usec == 50000u && sd_event_run(f.ev, 1000000) > 0)
                ;
        CU_ASSERT_EQUAL(f.l->backoff_usec, 100000u);
        /* Descriptors back: the waiting connection is taken. */
        close_all(fill, n_fill);
        CU_ASSERT_EQUAL(setrlimit(RLIMIT_NOFILE, &old), 0);
        for (int i = 0; i < 10 && f.a.n == 0; i++)
                (void) sd_event_run(f.ev, 1000000);
        CU_ASSERT_EQUAL(f.a.n, 1u);
        CU_ASSERT_EQUAL(f.l->backoff_usec, 0u);
        close(client);
        close(src);
        fixture_stop(&f);
}

int main(void) {
        static const struct test_case cases[] = {
                { "the quota both sockets share, and its reserve", test_quota },
                { "at most 64 connections per wake-up", test_accepts_per_wakeup },
                { "no descriptors: a growing pause, then the connection", test_backs_off_without_descriptors },
                {},
        };
        return test_run("listener", cases, NULL);
}
