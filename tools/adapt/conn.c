/* SPDX-License-Identifier: MIT */
#include "conn.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "time-util.h"

static int wait_fd(int fd, short events, uint64_t deadline) {
        for (;;) {
                uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -ETIMEDOUT;
                uint64_t left_ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
                struct pollfd p = { .fd = fd, .events = events };
                int r = poll(&p, 1, left_ms > INT_MAX ? INT_MAX : (int) left_ms);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, uint64_t deadline) {
        if (connect(fd, sa, len) == 0)
                return 0;
        if (errno != EINPROGRESS && errno != EAGAIN)
                return -errno;
        int r = wait_fd(fd, POLLOUT, deadline), err = 0;
        socklen_t l = sizeof(err);
        if (r < 0)
                return r;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
                return -errno;
        return -err;
}

static int open_unix(const char *path, uint64_t deadline, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        int r = connect_fd(fd, (struct sockaddr *) &sa, sizeof(sa), deadline);
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static int open_tcp(const char *address, uint64_t deadline, int *ret_fd) {
        char host[256];
        const char *colon = strrchr(address, ':');
        if (!colon || colon == address || (size_t) (colon - address) >= sizeof(host) || !colon[1])
                return -EINVAL;
        memcpy(host, address, (size_t) (colon - address));
        host[colon - address] = 0;
        if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [::1]:6379 */
                memmove(host, host + 1, strlen(host));
                host[strlen(host) - 1] = 0;
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
        int g = getaddrinfo(host, colon + 1, &hints, &ai);
        if (g != 0)
                return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
        int r = -EHOSTUNREACH;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                r = connect_fd(fd, a->ai_addr, a->ai_addrlen, deadline);
                if (r == 0) {
                        *ret_fd = fd;
                        break;
                }
                close(fd);
        }
        freeaddrinfo(ai);
        return r;
}

int conn_open(const char *address, int timeout_ms, struct conn *ret) {
        assert(address);
        assert(ret);

        *ret = (struct conn){ .fd = -1, .timeout_ms = timeout_ms };
        uint64_t deadline = conn_command_deadline(ret);
        const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address[0] == '/' ? address : NULL;
        return path ? open_unix(path, deadline, &ret->fd) : open_tcp(address, deadline, &ret->fd);
}

void conn_close(struct conn *c) {
        if (c && c->fd >= 0) {
                close(c->fd);
                c->fd = -1;
        }
        if (c)
                c->start = c->end = 0;
}

void conn_set_request_deadline(struct conn *c, uint64_t usec) {
        assert(c);
        c->request_deadline = usec;
}

uint64_t conn_command_deadline(const struct conn *c) {
        assert(c);
        uint64_t d = clock_now_usec(CLOCK_MONOTONIC) + (uint64_t) (c->timeout_ms > 0 ? c->timeout_ms : 0) * USEC_PER_MSEC;
        return c->request_deadline > 0 && c->request_deadline < d ? c->request_deadline : d;
}

int conn_wait(const struct conn *c, short events, uint64_t deadline) {
        assert(c);
        return c->fd < 0 ? -ENOTCONN : wait_fd(c->fd, events, deadline);
}

int conn_send(struct conn *c, const char *data, size_t n, uint64_t deadline) {
        assert(c);
        assert(data || n == 0);

        while (n > 0) {
                ssize_t k = send(c->fd, data, n, MSG_NOSIGNAL);
                if (k > 0) {
                        data += k;
                        n -= (size_t) k;
                        continue;
                }
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                int r = conn_wait(c, POLLOUT, deadline);
                if (r < 0)
                        return r;
        }
        return 0;
}
