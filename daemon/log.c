/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <assert.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <systemd/sd-journal.h>

#include "time-util.h"

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

static const char *const level_names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };

int log_level_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
                if (streq(s, level_names[i]))
                        return (int) i;
        if (s[0] >= '0' && s[0] <= '7' && !s[1])
                return s[0] - '0';
        return -EINVAL;
}

const char *log_level_to_string(int level) {
        return level >= 0 && level < (int) ELEMENTSOF(level_names) ? level_names[level] : NULL;
}

/* One journal entry: MESSAGE, PRIORITY, CODE_*, SYSLOG_IDENTIFIER, then the extra "KEY=value" fields
 * (any number, any length: nothing is cut). Returns a negative errno when it could not be sent. */
static int journal_send(int level, const char *file, int line, const char *func, const char *msg,
                        const char *const *extra) {
        size_t n_extra = 0;
        while (extra && extra[n_extra])
                n_extra++;
        size_t n = 6 + n_extra;
        _cleanup_free_ struct iovec *iov = calloc(n, sizeof(*iov));
        _cleanup_free_ char *m = NULL;
        char prio[16], code_line[32], code_file[512], code_func[256];
        if (!iov || asprintf(&m, "MESSAGE=%s", msg) < 0)
                return -ENOMEM;
        snprintf(prio, sizeof(prio), "PRIORITY=%d", level);
        /* __FILE__ and __func__ are ours and short; the message and the fields are what may be long. */
        snprintf(code_file, sizeof(code_file), "CODE_FILE=%s", file ? file : "");
        snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);
        snprintf(code_func, sizeof(code_func), "CODE_FUNC=%s", func ? func : "");
        const char *base[] = { m, prio, code_file, code_line, code_func, "SYSLOG_IDENTIFIER=pressured" };
        for (size_t i = 0; i < ELEMENTSOF(base); i++)
                iov[i] = (struct iovec){ .iov_base = (void *) base[i], .iov_len = strlen(base[i]) };
        for (size_t i = 0; i < n_extra; i++)
                iov[6 + i] = (struct iovec){ .iov_base = (void *) extra[i], .iov_len = strlen(extra[i]) };
        return sd_journal_sendv(iov, (int) n);
}

static void stderr_line(int level, const char *msg) {
        if (prefix_priority) {
                fprintf(stderr, "<%d>%s\n", level, msg);
                return;
        }
        /* On a terminal or in a file there is nobody else to say when. */
        struct timespec ts = {};
        struct tm tm;
        char when[32] = "";
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && localtime_r(&ts.tv_sec, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        fprintf(stderr, "%s.%03ld pressured: %s\n", when, ts.tv_nsec / 1000000, msg);
}

static void emit(int level, const char *file, int line, const char *func, const char *msg,
                 const char *const *extra) {
        if (to_journal && journal_send(level, file, line, func, msg, extra) >= 0)
                return;
        stderr_line(level, msg);
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...) {
        int saved = errno;
        char msg[2048];
        va_list ap;

        /* Make %m print the error we were handed, not whatever errno happens to be. */
        errno = abs(error);
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        emit(level, file, line, func, msg, NULL);
        errno = saved;
        return -abs(error);
}

void log_struct_internal(int level, const char *file, int line, const char *func, const char *message_id,
                         const char *scope, const char *const *fields, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL, *id = NULL, *sc = NULL;
        va_list ap;

        if (level > max_level)
                return;
        va_start(ap, fmt);
        int r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return;
        if (!to_journal) {
                stderr_line(level, msg);
                return;
        }

        size_t n_fields = 0;
        while (fields && fields[n_fields])
                n_fields++;
        _cleanup_free_ const char **all = calloc(n_fields + 3, sizeof(char *));
        if (!all || asprintf(&id, "MESSAGE_ID=%s", message_id) < 0 || asprintf(&sc, "PRESSURED_SCOPE=%s", scope) < 0) {
                stderr_line(level, msg);
                return;
        }
        all[0] = id;
        all[1] = sc;
        for (size_t i = 0; i < n_fields; i++)
                all[2 + i] = fields[i];
        emit(level, file, line, func, msg, all);
}

bool ratelimit_below(struct ratelimit *rl, uint64_t now_usec, unsigned *ret_suppressed) {
        assert(rl);

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
        unsigned dropped;
        size_t slot = 0;

        uint64_t now = clock_now_usec(CLOCK_MONOTONIC) + 1;
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
        if (!ok || uid == 0 || uid == (uid_t) -1)
                return ok;
        /* All users together, too: one account can be many uids, each with a limiter of its own (and
         * more uids than slots get a fresh one each time). Root's lines are not theirs to crowd out. */
        static struct ratelimit all = { .interval_usec = LOG_CLIENT_INTERVAL_USEC, .burst = LOG_CLIENTS_BURST };
        ok = ratelimit_below(&all, now, &dropped);
        if (dropped > 0)
                log_notice("%u log messages caused by users dropped (more than %u of all users in %llu s).", dropped,
                           LOG_CLIENTS_BURST, LOG_CLIENT_INTERVAL_USEC / 1000000);
        return ok;
}
