/* SPDX-License-Identifier: MIT */
#include "text.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

int text_command(struct conn *c, const char *cmd, bool multiline, char *out, size_t size) {
        assert(c && cmd && out && size > 0);

        if (c->fd < 0)
                return -ENOTCONN;
        uint64_t deadline = conn_command_deadline(c);
        int r = conn_send(c, cmd, strlen(cmd), deadline);
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
                        r = conn_wait(c, POLLIN, deadline);
        }
        conn_close(c);
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
