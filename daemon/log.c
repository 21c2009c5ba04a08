/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
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
        else {
                /* On a terminal or in a file there is nobody else to say when. */
                struct timespec ts;
                struct tm tm;
                char when[32] = "";
                if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && localtime_r(&ts.tv_sec, &tm))
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                fprintf(stderr, "%s.%03ld pressured: %s\n", when, ts.tv_nsec / 1000000, msg);
        }

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

/* The uids seen last, each with its own limit; the one idle longest makes room for a new one. */
#define LOG_CLIENT_UIDS 64
static struct {
        uid_t uid;
        bool used;
        struct ratelimit rl;
} log_clients[LOG_CLIENT_UIDS];

static void log_dropped(uid_t uid, unsigned n) {
        if (n == 0)
                return;
        if (uid == (uid_t) -1)
                log_notice("%u log messages dropped (more than %u in %llu s).", n, LOG_CLIENT_BURST,
                           LOG_CLIENT_INTERVAL_USEC / 1000000);
        else
                log_notice("%u log messages caused by uid %u dropped (more than %u in %llu s).", n, (unsigned) uid,
                           LOG_CLIENT_BURST, LOG_CLIENT_INTERVAL_USEC / 1000000);
}

bool log_client_may(uid_t uid) {
        struct timespec ts;
        unsigned dropped;
        size_t slot = 0;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000 + 1;
        for (size_t i = 0; i < LOG_CLIENT_UIDS; i++)
                if (log_clients[i].used && log_clients[i].uid == uid) {
                        slot = i;
                        goto found;
                }
        for (size_t i = 0; i < LOG_CLIENT_UIDS; i++) {
                if (!log_clients[i].used) {
                        slot = i;
                        break;
                }
                if (log_clients[i].rl.begin < log_clients[slot].rl.begin)
                        slot = i;
        }
        if (log_clients[slot].used)
                log_dropped(log_clients[slot].uid, log_clients[slot].rl.suppressed);
        log_clients[slot].used = true;
        log_clients[slot].uid = uid;
        log_clients[slot].rl = (struct ratelimit){ .interval_usec = LOG_CLIENT_INTERVAL_USEC, .burst = LOG_CLIENT_BURST };
found:;
        bool ok = ratelimit_below(&log_clients[slot].rl, now, &dropped);
        log_dropped(uid, dropped);
        return ok;
}
