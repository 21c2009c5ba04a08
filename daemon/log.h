/* SPDX-License-Identifier: MIT */
#pragma once

/* Daemon logging: one line per message to stderr, with a syslog priority prefix ("<3>") when stderr is
 * connected to the journal so that journald keeps the priority. Every log_*_errno() returns the negative
 * errno it was given, so a caller can write "return log_error_errno(r, ...)". "%m" prints strerror(-r). */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
void log_open(void);

/* "emerg" ... "debug" (syslog's names, as systemd takes them) or 0..7; -EINVAL otherwise. */
int log_level_from_string(const char *s);
const char *log_level_to_string(int level);

/* Under the journal every line is an entry of its own with CODE_FILE=, CODE_LINE= and CODE_FUNC=. */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...)
        _printf_(6, 7);

#define log_full_errno(level, error, ...)                                                                  \
        ({                                                                                                 \
                int _l_ = (level), _e_ = (error);                                                          \
                (log_get_max_level() >= _l_) ? log_internal(_l_, _e_, __FILE__, __LINE__, __func__, __VA_ARGS__)     \
                                             : -abs(_e_);                                                  \
        })

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")

/* At most `burst` messages per `interval_usec` for what clients can make happen as often as they like
 * (registrations, say): one client must not flood the journal. ratelimit_below() says whether the next
 * one may be logged; once a new interval begins, the count of those left out is in *ret_suppressed. */
struct ratelimit {
        uint64_t interval_usec;
        unsigned burst;
        uint64_t begin;
        unsigned num, suppressed;
};
bool ratelimit_below(struct ratelimit *rl, uint64_t now_usec, unsigned *ret_suppressed);

/* Lines a client can cause as often as it likes (a refused call, a registration, a cgroup it removes) go
 * through log_client(): at most LOG_CLIENT_BURST per LOG_CLIENT_INTERVAL_USEC per uid, so that one user
 * can neither flood the journal nor silence another's lines. When a uid's next interval begins, one line
 * says how many of its lines were dropped. uid (uid_t) -1: lines nobody in particular caused. Users other
 * than root also share one limit of LOG_CLIENTS_BURST, however many uids they are. */
#define LOG_CLIENT_BURST 10u
/* And all users other than root together (a uid's lines count in both). */
#define LOG_CLIENTS_BURST 50u
#define LOG_CLIENT_INTERVAL_USEC (10 * 1000000ULL)
bool log_client_may(uid_t uid);
#define log_client_full(uid, level, error, ...)                                                            \
        ({                                                                                                 \
                int _cl_ = (level), _ce_ = (error);                                                        \
                (log_get_max_level() >= _cl_ && log_client_may(uid))                                       \
                        ? log_internal(_cl_, _ce_, __FILE__, __LINE__, __func__, __VA_ARGS__)              \
                        : -abs(_ce_);                                                                      \
        })
#define log_client(uid, level, ...) log_client_full(uid, level, 0, __VA_ARGS__)
#define log_client_errno(uid, level, e, ...) log_client_full(uid, level, e, __VA_ARGS__)

/* Message ids of the structured journal entries (documented in pressured(8)). */
#define PRESSURED_MESSAGE_LEVEL_CHANGE "3f4d0c6a2b9e4f5c9d1e7a8b6c5d4e3f"
#define PRESSURED_MESSAGE_RECLAIM_ROUND "8a1b2c3d4e5f40718293a4b5c6d7e8f9"
#define PRESSURED_MESSAGE_RELEASE "43087693fbff4890a213c3f50cdf132e"

/* A message with structured fields: under systemd straight to the journal with the fields
 * (MESSAGE_ID=, PRESSURED_SCOPE=, and any "KEY=value" strings given, NULL-terminated, as many and as long
 * as they are), otherwise the plain message to stderr. */
void log_struct_internal(int level, const char *file, int line, const char *func, const char *message_id,
                         const char *scope, const char *const *fields, const char *fmt, ...) _printf_(8, 9);
#define log_struct(level, message_id, scope, fields, ...)                                                  \
        log_struct_internal(level, __FILE__, __LINE__, __func__, message_id, scope, fields, __VA_ARGS__)
