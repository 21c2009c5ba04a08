/* SPDX-License-Identifier: MIT */
#include "resp.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "time-util.h"

static long long now_ms(void) {
        return (long long) (clock_now_usec(CLOCK_MONOTONIC) / USEC_PER_MSEC);
}

/* Wait for fd to be ready for events until the deadline. */
static int wait_fd(int fd, short events, long long deadline) {
        for (;;) {
                long long left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = events };
                int r = poll(&p, 1, (int) (left > INT_MAX ? INT_MAX : left));
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, long long deadline) {
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

int resp_connect(const char *address, int timeout_ms, struct resp_conn *ret) {
        assert(address);
        assert(ret);

        long long deadline = now_ms() + timeout_ms;
        *ret = (struct resp_conn){ .fd = -1, .timeout_ms = timeout_ms };
        const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address[0] == '/' ? address : NULL;
        if (path) {
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
                ret->fd = fd;
                return 0;
        }

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
                        ret->fd = fd;
                        break;
                }
                close(fd);
        }
        freeaddrinfo(ai);
        return r;
}

void resp_close(struct resp_conn *c) {
        if (c && c->fd >= 0) {
                close(c->fd);
                c->fd = -1;
        }
}

void resp_reply_done(struct resp_reply *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n_elements; i++)
                resp_reply_done(&r->elements[i]);
        free(r->elements);
        free(r->str);
        *r = (struct resp_reply){};
}

/* A line ending in CRLF at text[0..n): its length without the CRLF, or -EAGAIN. */
static long line_len(const char *text, size_t n) {
        for (size_t i = 0; i + 1 < n; i++)
                if (text[i] == '\r' && text[i + 1] == '\n')
                        return (long) i;
        return n > 64 * 1024 ? -EPROTO : -EAGAIN; /* a header line is short; a status line too */
}

static int parse_number(const char *s, size_t n, long long *ret) {
        char buf[32];
        if (n == 0 || n >= sizeof(buf))
                return -EPROTO;
        memcpy(buf, s, n);
        buf[n] = 0;
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (errno != 0 || *end != 0)
                return -EPROTO;
        *ret = v;
        return 0;
}

static int parse_at(const char *text, size_t n, struct resp_reply *ret, size_t *ret_used, int depth) {
        *ret = (struct resp_reply){};
        if (n == 0)
                return -EAGAIN;
        long l = line_len(text, n);
        if (l < 0)
                return (int) l;
        const char *body = text + 1;
        size_t body_len = (size_t) l - (l > 0 ? 1 : 0), used = (size_t) l + 2;
        if (l == 0)
                return -EPROTO;
        switch (text[0]) {
        case RESP_STATUS:
        case RESP_ERROR:
                ret->type = (enum resp_type) text[0];
                /* Not strndup(): a NUL inside would make the copy shorter than len says. */
                ret->str = malloc(body_len + 1);
                if (!ret->str)
                        return -ENOMEM;
                memcpy(ret->str, body, body_len);
                ret->str[body_len] = 0;
                ret->len = body_len;
                *ret_used = used;
                return 0;
        case RESP_INTEGER:
                ret->type = RESP_INTEGER;
                if (parse_number(body, body_len, &ret->integer) < 0)
                        return -EPROTO;
                *ret_used = used;
                return 0;
        case RESP_BULK: {
                long long len;
                if (parse_number(body, body_len, &len) < 0 || len < -1 || len > (long long) RESP_MAX_BULK)
                        return -EPROTO;
                ret->type = RESP_BULK;
                ret->integer = len;
                if (len < 0) {
                        *ret_used = used;
                        return 0;
                }
                if (n - used < (size_t) len + 2)
                        return -EAGAIN;
                if (text[used + (size_t) len] != '\r' || text[used + (size_t) len + 1] != '\n')
                        return -EPROTO;
                ret->str = malloc((size_t) len + 1);
                if (!ret->str)
                        return -ENOMEM;
                memcpy(ret->str, text + used, (size_t) len);
                ret->str[len] = 0;
                ret->len = (size_t) len;
                *ret_used = used + (size_t) len + 2;
                return 0;
        }
        case RESP_ARRAY: {
                long long count;
                if (depth >= RESP_MAX_DEPTH || parse_number(body, body_len, &count) < 0 || count < -1 ||
                    count > (long long) RESP_MAX_ELEMENTS)
                        return -EPROTO;
                ret->type = RESP_ARRAY;
                ret->integer = count;
                if (count <= 0) {
                        *ret_used = used;
                        return 0;
                }
                ret->elements = calloc((size_t) count, sizeof(*ret->elements));
                if (!ret->elements)
                        return -ENOMEM;
                for (long long i = 0; i < count; i++) {
                        size_t u;
                        int r = parse_at(text + used, n - used, &ret->elements[i], &u, depth + 1);
                        if (r < 0) {
                                resp_reply_done(ret);
                                return r;
                        }
                        ret->n_elements++;
                        used += u;
                }
                *ret_used = used;
                return 0;
        }
        default:
                return -EPROTO;
        }
}

int resp_parse(const char *text, size_t n, struct resp_reply *ret, size_t *ret_used) {
        assert(text || n == 0);
        assert(ret);
        assert(ret_used);
        return parse_at(text, n, ret, ret_used, 0);
}

static int send_all(struct resp_conn *c, const char *data, size_t n, long long deadline) {
        while (n > 0) {
                ssize_t k = send(c->fd, data, n, MSG_NOSIGNAL);
                if (k > 0) {
                        data += k;
                        n -= (size_t) k;
                        continue;
                }
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                int r = wait_fd(c->fd, POLLOUT, deadline);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int read_reply(struct resp_conn *c, struct resp_reply *ret, long long deadline) {
        /* A reply larger than the buffer (a big INFO) is read into a growing copy. */
        char *big = NULL;
        size_t big_len = 0;
        for (;;) {
                const char *text = big ? big : c->buf + c->start;
                size_t n = big ? big_len : c->end - c->start, used;
                int r = resp_parse(text, n, ret, &used);
                if (r == 0) {
                        if (big) {
                                /* what came after the reply stays for the next one (there is none: one
                                 * command at a time) */
                                free(big);
                                c->start = c->end = 0;
                        } else
                                c->start += used;
                        return 0;
                }
                if (r != -EAGAIN) {
                        free(big);
                        return r;
                }
                if (!big && c->start > 0) { /* make room */
                        memmove(c->buf, c->buf + c->start, c->end - c->start);
                        c->end -= c->start;
                        c->start = 0;
                }
                if (!big && c->end == sizeof(c->buf)) {
                        big = malloc(c->end);
                        if (!big)
                                return -ENOMEM;
                        memcpy(big, c->buf, c->end);
                        big_len = c->end;
                }
                char chunk[16384];
                char *dst = big ? chunk : c->buf + c->end;
                size_t room = big ? sizeof(chunk) : sizeof(c->buf) - c->end;
                ssize_t k = recv(c->fd, dst, room, 0);
                if (k == 0) {
                        free(big);
                        return -ECONNRESET;
                }
                if (k < 0) {
                        if (errno != EAGAIN && errno != EINTR) {
                                free(big);
                                return -errno;
                        }
                        r = wait_fd(c->fd, POLLIN, deadline);
                        if (r < 0) {
                                free(big);
                                return r;
                        }
                        continue;
                }
                if (big) {
                        if (big_len + (size_t) k > RESP_MAX_BULK + 64) {
                                free(big);
                                return -EPROTO;
                        }
                        char *b = realloc(big, big_len + (size_t) k);
                        if (!b) {
                                free(big);
                                return -ENOMEM;
                        }
                        big = b;
                        memcpy(big + big_len, chunk, (size_t) k);
                        big_len += (size_t) k;
                } else
                        c->end += (size_t) k;
        }
}

int resp_command(struct resp_conn *c, struct resp_reply *ret, const char *const *argv) {
        assert(c);
        assert(ret);
        assert(argv && argv[0]);

        if (c->fd < 0)
                return -ENOTCONN;
        size_t argc = 0, size = 32;
        for (; argv[argc]; argc++)
                size += strlen(argv[argc]) + 32;
        char *msg = malloc(size);
        if (!msg)
                return -ENOMEM;
        size_t len = (size_t) snprintf(msg, size, "*%zu\r\n", argc);
        for (size_t i = 0; i < argc; i++) {
                size_t l = strlen(argv[i]);
                len += (size_t) snprintf(msg + len, size - len, "$%zu\r\n", l);
                memcpy(msg + len, argv[i], l);
                len += l;
                msg[len++] = '\r';
                msg[len++] = '\n';
        }
        long long deadline = now_ms() + c->timeout_ms;
        int r = send_all(c, msg, len, deadline);
        free(msg);
        if (r >= 0)
                r = read_reply(c, ret, deadline);
        if (r < 0)
                resp_close(c); /* out of step with the server: start again */
        return r;
}

int resp_info_u64(const char *info, const char *field, unsigned long long *ret) {
        assert(info);
        assert(field);
        assert(ret);

        size_t fl = strlen(field);
        for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strncmp(p, field, fl) != 0 || p[fl] != ':')
                        continue;
                char *end;
                if (p[fl + 1] < '0' || p[fl + 1] > '9')
                        return -EINVAL;
                errno = 0;
                unsigned long long v = strtoull(p + fl + 1, &end, 10);
                if (errno != 0 || end == p + fl + 1 || (*end != '\r' && *end != '\n' && *end != 0))
                        return -EINVAL;
                *ret = v;
                return 0;
        }
        return -ENOENT;
}

static bool is_error_line(const char *line) {
        return strncmp(line, "ERROR", 5) == 0 || strncmp(line, "CLIENT_ERROR", 12) == 0 ||
               strncmp(line, "SERVER_ERROR", 12) == 0;
}

size_t text_reply_complete(const char *text, size_t n, bool multiline) {
        for (size_t start = 0; start < n;) {
                const char *nl = memchr(text + start, '\n', n - start);
                if (!nl)
                        return 0;
                size_t end = (size_t) (nl - text) + 1;
                const char *line = text + start;
                if (!multiline || is_error_line(line) || (end - start == 5 && strncmp(line, "END\r\n", 5) == 0))
                        return end;
                start = end;
        }
        return 0;
}

int text_command(struct resp_conn *c, const char *cmd, bool multiline, char *out, size_t size) {
        assert(c && cmd && out && size > 0);

        if (c->fd < 0)
                return -ENOTCONN;
        long long deadline = now_ms() + c->timeout_ms;
        int r = send_all(c, cmd, strlen(cmd), deadline);
        size_t n = 0;
        while (r >= 0) {
                size_t done = text_reply_complete(out, n, multiline);
                if (done > 0) {
                        out[done] = 0;
                        return 0; /* one command at a time: nothing follows the reply */
                }
                if (n + 1 >= size) {
                        r = -E2BIG;
                        break;
                }
                ssize_t k = recv(c->fd, out + n, size - 1 - n, 0);
                if (k > 0) {
                        n += (size_t) k;
                        out[n] = 0;
                } else if (k == 0)
                        r = -ECONNRESET;
                else if (errno != EAGAIN && errno != EINTR)
                        r = -errno;
                else
                        r = wait_fd(c->fd, POLLIN, deadline);
        }
        resp_close(c);
        return r;
}

int text_stat_u64(const char *reply, const char *name, unsigned long long *ret) {
        assert(reply && name && ret);

        size_t n = strlen(name);
        for (const char *line = reply; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (strncmp(line, "STAT ", 5) != 0 || strncmp(line + 5, name, n) != 0 || line[5 + n] != ' ')
                        continue;
                const char *v = line + 5 + n + 1;
                char *end;
                errno = 0;
                unsigned long long x = strtoull(v, &end, 10);
                if (errno || end == v || *v == '-' || (*end != '\r' && *end != '\n' && *end))
                        return -EINVAL;
                *ret = x;
                return 0;
        }
        return -ENOENT;
}
