/* SPDX-License-Identifier: MIT */
#pragma once

/* A blocking client of Redis's protocol (RESP2), enough for an adapter: commands as arrays of bulk
 * strings, replies parsed with bounds (what a server sends is outside input). Every read and write has a
 * deadline, so that a server that stops answering costs a shrinker callback at most that. */

#include <stdbool.h>
#include <stddef.h>

#define RESP_MAX_BULK (16u << 20) /* INFO is a few KiB; nothing we ask for is larger */
#define RESP_MAX_ELEMENTS 1024u
#define RESP_MAX_DEPTH 4

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

struct resp_conn {
        int fd;
        int timeout_ms;
        char buf[16384];
        size_t start, end; /* unread bytes of buf */
};

/* "unix:/path", "/path" (a Unix socket) or "host:port" (TCP). 0 or a negative errno. */
int resp_connect(const char *address, int timeout_ms, struct resp_conn *ret);
void resp_close(struct resp_conn *c);

/* Send a command (NULL-terminated arguments) and read its reply. 0 (the reply may be an error reply:
 * check its type), or a negative errno: -ETIMEDOUT, -ECONNRESET, -EPROTO for what is not RESP. After a
 * negative errno the connection is closed. */
int resp_command(struct resp_conn *c, struct resp_reply *ret, const char *const *argv);
void resp_reply_done(struct resp_reply *r);

/* Parse one reply from text of n bytes: its length in *ret_used, or -EAGAIN when more is needed, or
 * -EPROTO. Pure: for the tests and the fuzzer. */
int resp_parse(const char *text, size_t n, struct resp_reply *ret, size_t *ret_used);

/* The value of a field of an INFO reply ("used_memory:1234"), as a number. 0 or -ENOENT/-EINVAL. */
int resp_info_u64(const char *info, const char *field, unsigned long long *ret);

/* memcached's text protocol over the same kind of connection (the deadline as for RESP): send cmd (a line
 * with its "\r\n") and read the reply into out (NUL-terminated): up to and including "END\r\n" when
 * multiline (stats), else one line; an error line (ERROR, CLIENT_ERROR, SERVER_ERROR) ends either. 0, or
 * a negative errno: -E2BIG when the reply does not fit, -ETIMEDOUT, -ECONNRESET (the connection is then
 * closed). */
int text_command(struct resp_conn *c, const char *cmd, bool multiline, char *out, size_t size);

/* Whether a text reply ends here: its length when complete, 0 when more is needed. Pure. */
size_t text_reply_complete(const char *text, size_t n, bool multiline);

/* The value of "STAT name value" in a stats reply. 0 or -ENOENT/-EINVAL. */
int text_stat_u64(const char *reply, const char *name, unsigned long long *ret);
