/* SPDX-License-Identifier: MIT */
#pragma once

/* memcached's text protocol, enough for an adapter: one command at a time over a struct conn, its reply
 * read with a bound into the caller's buffer. What the server sends is outside input. */

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"

/* Send cmd (a line with its "\r\n") and read the reply into out (NUL-terminated): up to and including
 * "END\r\n" when multiline (stats), else one line; an error line (ERROR, CLIENT_ERROR, SERVER_ERROR) ends
 * either. By conn_command_deadline(). 0, or a negative errno: -E2BIG when the reply does not fit,
 * -ETIMEDOUT, -ECONNRESET (the connection is then closed). */
int text_command(struct conn *c, const char *cmd, bool multiline, char *out, size_t size);

/* Whether a text reply ends here: its length when complete, 0 when more is needed. Pure. */
size_t text_reply_complete(const char *text, size_t n, bool multiline);
/* The same from *from (0 at first), which it moves past the whole lines it has seen: a reply arriving a
 * byte at a time is not searched from its start again on every read. */
size_t text_reply_complete_from(const char *text, size_t n, bool multiline, size_t *from);

/* The value of "STAT name value" in a stats reply. 0 or -ENOENT/-EINVAL. */
int text_stat_u64(const char *reply, const char *name, unsigned long long *ret);
