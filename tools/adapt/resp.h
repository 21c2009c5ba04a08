/* SPDX-License-Identifier: MIT */
#pragma once

/* A blocking client of Redis's protocol (RESP2), enough for an adapter: commands as arrays of bulk
 * strings, replies parsed with bounds (what a server sends is outside input), over a struct conn. */

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"

/* Bounds over one whole reply, whatever its shape: INFO is a few KiB, CONFIG GET two elements, and
 * nothing we ask for is larger. A deep or huge array made the adapter spin and grow to 87 MB before. */
#define RESP_MAX_REPLY (1u << 20) /* bytes of the whole reply */
#define RESP_MAX_BULK RESP_MAX_REPLY
#define RESP_MAX_ELEMENTS 1024u /* items of the whole reply, at every depth */
#define RESP_MAX_DEPTH 4
#define RESP_MAX_LINE 4096u /* a header, status or error line */

enum resp_type {
        RESP_STATUS = '+',
        RESP_ERROR = '-',
        RESP_INTEGER = ':',
        RESP_BULK = '$',
        RESP_ARRAY = '*',
};

struct resp_reply {
        enum resp_type type;
        long long integer; /* RESP_INTEGER; the length for RESP_BULK and RESP_ARRAY (-1: nil) */
        char *str;         /* RESP_STATUS, RESP_ERROR, RESP_BULK: NUL-terminated */
        size_t len;
        struct resp_reply *elements; /* RESP_ARRAY */
        size_t n_elements;
};

/* Send a command (NULL-terminated arguments) and read its reply. 0 (the reply may be an error reply:
 * check its type), or a negative errno: -ETIMEDOUT, -ECONNRESET, -EPROTO for what is not RESP. After a
 * negative errno the connection is closed. */
int resp_command(struct conn *c, struct resp_reply *ret, const char *const *argv);
void resp_reply_done(struct resp_reply *r);

/* Parse one reply from text of n bytes: its length in *ret_used, or -EAGAIN when more is needed, or
 * -EPROTO. Pure: for the tests and the fuzzer. */
int resp_parse(const char *text, size_t n, struct resp_reply *ret, size_t *ret_used);

/* The same, fed as the bytes arrive: each byte is looked at once. */
struct resp_parser {
        struct resp_reply root;
        struct resp_reply *open[RESP_MAX_DEPTH]; /* arrays being filled, outermost first */
        unsigned depth;
        struct resp_reply *bulk; /* a bulk string whose body is being read */
        size_t bulk_have;        /* of its body and CRLF */
        size_t elements, bytes;  /* of the reply so far */
        size_t line_scanned;     /* of a header line not whole yet: how far it was searched */
        bool started;
};
void resp_parser_init(struct resp_parser *p);
/* Frees what was parsed, unless the reply was taken (p->root after 1 is the caller's). */
void resp_parser_done(struct resp_parser *p);
/* Take what of text[0..n) completes items (*ret_used bytes; the caller drops them, and gives the rest
 * again with what follows): 1 once the reply is whole (in p->root), 0 when more is needed, -EPROTO past
 * a bound or for what is not RESP, -ENOMEM. */
int resp_parser_feed(struct resp_parser *p, const char *text, size_t n, size_t *ret_used);

/* The value of a field of an INFO reply ("used_memory:1234"), as a number. 0 or -ENOENT/-EINVAL. */
int resp_info_u64(const char *info, const char *field, unsigned long long *ret);
