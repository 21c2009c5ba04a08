/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

static int max_level = LOG_INFO;
static int prefix_priority = 0;
static int to_journal = 0;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_open(void) {
        /* systemd sets JOURNAL_STREAM when stderr goes to the journal; then "<N>" carries the priority. */
        prefix_priority = getenv("JOURNAL_STREAM") != NULL;
        /* Under systemd, structured entries go to the journal directly. */
        to_journal = prefix_priority && access("/run/systemd/journal/socket", W_OK) == 0;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        int saved = errno;
        char msg[2048];
        va_list ap;

        (void) file;
        (void) line;

        /* Make %m print the error we were handed, not whatever errno happens to be. */
        errno = abs(error);
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        if (prefix_priority)
                fprintf(stderr, "<%d>%s\n", level, msg);
        else
                fprintf(stderr, "pressured: %s\n", msg);

        errno = saved;
        return -abs(error);
}

void log_struct(int level, const char *message_id, const char *scope, const char *const *fields,
                const char *fmt, ...) {
        char msg[2048];
        va_list ap;

        if (level > max_level)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        if (!to_journal) {
                log_internal(level, 0, NULL, 0, "%s", msg);
                return;
        }

        struct iovec iov[16];
        char buf[16][512], message[sizeof(msg) + 16];
        size_t n = 0;
        snprintf(message, sizeof(message), "MESSAGE=%s", msg);
        snprintf(buf[n + 1], sizeof(buf[n + 1]), "PRIORITY=%d", level);
        snprintf(buf[n + 2], sizeof(buf[n + 2]), "MESSAGE_ID=%s", message_id);
        snprintf(buf[n + 3], sizeof(buf[n + 3]), "PRESSURED_SCOPE=%s", scope);
        snprintf(buf[n + 4], sizeof(buf[n + 4]), "SYSLOG_IDENTIFIER=pressured");
        n += 5;
        for (size_t i = 0; fields && fields[i] && n < 16; i++, n++)
                snprintf(buf[n], sizeof(buf[n]), "%s", fields[i]);
        iov[0] = (struct iovec){ .iov_base = message, .iov_len = strlen(message) };
        for (size_t i = 1; i < n; i++)
                iov[i] = (struct iovec){ .iov_base = buf[i], .iov_len = strlen(buf[i]) };
        if (sd_journal_sendv(iov, (int) n) < 0)
                log_internal(level, 0, NULL, 0, "%s", msg);
}

bool ratelimit_below(struct ratelimit *rl, uint64_t now_usec, unsigned *ret_suppressed) {
        *ret_suppressed = 0;
        if (rl->begin == 0 || now_usec - rl->begin >= rl->interval_usec) {
                *ret_suppressed = rl->suppressed;
                rl->begin = now_usec;
                rl->num = rl->suppressed = 0;
        }
        if (rl->num < rl->burst) {
                rl->num++;
                return true;
        }
        rl->suppressed++;
        return false;
}
