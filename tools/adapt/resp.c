/* SPDX-License-Identifier: MIT */
#include "resp.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "macro.h"

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

/* One reply, fed to the parser as it arrives: every byte is looked at once, whatever the server sends
 * and however it splits it (a 3 MiB reply to each PING, parsed again on every read, kept the adapter at a
 * whole core before); what the parser took leaves the buffer. */
static int read_reply(struct conn *c, struct resp_reply *ret, uint64_t deadline) {
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
                        r = errno != EAGAIN && errno != EINTR ? -errno : conn_wait(c, POLLIN, deadline);
                        if (r < 0) {
                                resp_parser_done(&p);
                                return r;
                        }
                        continue;
                }
                c->end += (size_t) k;
        }
}

int resp_command(struct conn *c, struct resp_reply *ret, const char *const *argv) {
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
        uint64_t deadline = conn_command_deadline(c);
        int r = conn_send(c, msg, len, deadline);
        free(msg);
        if (r >= 0)
                r = read_reply(c, ret, deadline);
        if (r < 0)
                conn_close(c); /* out of step with the server: start again */
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
