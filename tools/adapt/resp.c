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

#include "macro.h"
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

void resp_parser_init(struct resp_parser *p) {
        assert(p);
        *p = (struct resp_parser){};
}

void resp_parser_done(struct resp_parser *p) {
        if (p)
                resp_reply_done(&p->root);
}

/* The reply the next line fills: the root, or the next element of the innermost open array. */
static struct resp_reply *next_slot(struct resp_parser *p) {
        if (p->depth == 0) {
                p->started = true;
                return &p->root;
        }
        struct resp_reply *a = p->open[p->depth - 1];
        return &a->elements[a->n_elements++];
}

/* An item is whole: close the arrays it completes. 1 once the root is whole. */
static int item_done(struct resp_parser *p) {
        while (p->depth > 0) {
                struct resp_reply *a = p->open[p->depth - 1];
                if (a->n_elements < (size_t) a->integer)
                        return 0;
                p->depth--;
        }
        return 1;
}

/* One header line (without its CRLF) into the next slot: 1 when the reply is whole, 0 to go on. */
static int take_line(struct resp_parser *p, const char *line, size_t l) {
        if (l == 0)
                return -EPROTO;
        if (++p->elements > RESP_MAX_ELEMENTS)
                return -EPROTO;
        struct resp_reply *r = next_slot(p);
        const char *body = line + 1;
        size_t body_len = l - 1;
        long long v;
        switch (line[0]) {
        case RESP_STATUS:
        case RESP_ERROR:
                r->type = (enum resp_type) line[0];
                /* Not strndup(): a NUL inside would make the copy shorter than len says. */
                r->str = malloc(body_len + 1);
                if (!r->str)
                        return -ENOMEM;
                memcpy(r->str, body, body_len);
                r->str[body_len] = 0;
                r->len = body_len;
                return item_done(p);
        case RESP_INTEGER:
                r->type = RESP_INTEGER;
                if (parse_number(body, body_len, &r->integer) < 0)
                        return -EPROTO;
                return item_done(p);
        case RESP_BULK:
                if (parse_number(body, body_len, &v) < 0 || v < -1 || v > (long long) RESP_MAX_BULK ||
                    p->bytes + (size_t) MAX(v, 0) > RESP_MAX_REPLY)
                        return -EPROTO;
                r->type = RESP_BULK;
                r->integer = v;
                if (v < 0)
                        return item_done(p);
                r->str = malloc((size_t) v + 1);
                if (!r->str)
                        return -ENOMEM;
                r->len = (size_t) v;
                p->bulk = r;
                p->bulk_have = 0;
                return 0;
        case RESP_ARRAY:
                if (parse_number(body, body_len, &v) < 0 || v < -1 || v > (long long) (RESP_MAX_ELEMENTS - p->elements))
                        return -EPROTO;
                r->type = RESP_ARRAY;
                r->integer = v;
                if (v <= 0)
                        return item_done(p);
                if (p->depth >= RESP_MAX_DEPTH)
                        return -EPROTO;
                r->elements = calloc((size_t) v, sizeof(*r->elements));
                if (!r->elements)
                        return -ENOMEM;
                p->open[p->depth++] = r;
                return 0;
        default:
                return -EPROTO;
        }
}

int resp_parser_feed(struct resp_parser *p, const char *text, size_t n, size_t *ret_used) {
        assert(p);
        assert(text || n == 0);
        assert(ret_used);

        size_t used = 0;
        int r = 0;
        while (r == 0 && used < n) {
                if (p->bulk) {
                        /* The body, then its CRLF: each byte looked at once, however it arrives. */
                        struct resp_reply *b = p->bulk;
                        size_t take = MIN(b->len + 2 - p->bulk_have, n - used);
                        for (size_t i = 0; i < take; i++, p->bulk_have++) {
                                char ch = text[used + i];
                                if (p->bulk_have < b->len)
                                        b->str[p->bulk_have] = ch;
                                else if (ch != (p->bulk_have == b->len ? '\r' : '\n'))
                                        return -EPROTO;
                        }
                        used += take;
                        p->bytes += take;
                        if (p->bulk_have < b->len + 2)
                                break;
                        b->str[b->len] = 0;
                        p->bulk = NULL;
                        r = item_done(p);
                        continue;
                }
                /* A header line: its CRLF is searched from where the last look stopped. */
                const char *line = text + used;
                size_t avail = n - used, i = p->line_scanned > 0 ? p->line_scanned - 1 : 0;
                while (i + 1 < avail && !(line[i] == '\r' && line[i + 1] == '\n'))
                        i++;
                if (i + 1 >= avail) {
                        p->line_scanned = avail;
                        if (avail > RESP_MAX_LINE)
                                return -EPROTO;
                        break;
                }
                p->line_scanned = 0;
                used += i + 2;
                p->bytes += i + 2;
                if (p->bytes > RESP_MAX_REPLY)
                        return -EPROTO;
                r = take_line(p, line, i);
        }
        *ret_used = used;
        return r;
}

int resp_parse(const char *text, size_t n, struct resp_reply *ret, size_t *ret_used) {
        assert(text || n == 0);
        assert(ret);
        assert(ret_used);

        struct resp_parser p;
        resp_parser_init(&p);
        int r = resp_parser_feed(&p, text, n, ret_used);
        if (r <= 0) {
                resp_parser_done(&p);
                return r == 0 ? -EAGAIN : r;
        }
        *ret = p.root;
        return 0;
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

/* One reply, fed to the parser as it arrives: every byte is looked at once, whatever the server sends
 * and however it splits it (a 3 MiB reply to each PING, parsed again on every read, kept the adapter at a
 * whole core before); what the parser took leaves the buffer. */
static int read_reply(struct resp_conn *c, struct resp_reply *ret, long long deadline) {
        struct resp_parser p;
        resp_parser_init(&p);
        for (;;) {
                size_t used = 0;
                int r = resp_parser_feed(&p, c->buf + c->start, c->end - c->start, &used);
                c->start += used;
                if (r < 0) {
                        resp_parser_done(&p);
                        return r;
                }
                if (r > 0) {
                        *ret = p.root;
                        return 0;
                }
                /* What is left is part of a line, shorter than RESP_MAX_LINE: move it to the front. */
                memmove(c->buf, c->buf + c->start, c->end - c->start);
                c->end -= c->start;
                c->start = 0;
                ssize_t k = recv(c->fd, c->buf + c->end, sizeof(c->buf) - c->end, 0);
                if (k == 0) {
                        resp_parser_done(&p);
                        return -ECONNRESET;
                }
                if (k < 0) {
                        r = errno != EAGAIN && errno != EINTR ? -errno : wait_fd(c->fd, POLLIN, deadline);
                        if (r < 0) {
                                resp_parser_done(&p);
                                return r;
                        }
                        continue;
                }
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
        size_t from = 0;
        return text_reply_complete_from(text, n, multiline, &from);
}

size_t text_reply_complete_from(const char *text, size_t n, bool multiline, size_t *from) {
        for (size_t start = *from; start < n; *from = start) {
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
        size_t n = 0, from = 0; /* lines before from are whole and not the last: not looked at again */
        while (r >= 0) {
                size_t done = text_reply_complete_from(out, n, multiline, &from);
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
