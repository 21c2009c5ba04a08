/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "frame.h"
#include "log.h"
#include "macro.h"

void config_init(struct config *c) {
        assert(c);

        *c = (struct config){
                .max_message_size = FRAME_DEFAULT_MAX_SIZE,
                .max_connections = 4096,
                .max_connections_per_uid = 256,
                .max_buffered = 32u * 1024 * 1024,
                .max_cgroups_per_uid = 64,
                .max_cgroups_users = 1024,
                .max_shrinkers_per_uid = 256,
                .idle_timeout_usec = 60000000,
                .sample_interval_usec = 1000000,
                .node_interval_usec = 30000000,
                .hold_usec = 10000000,
                .round_interval_usec = 250000,
                .round_budget_usec = 250000,
                .request_timeout_usec = 1000000,
                .quarantine_after = 3,
                .regulate_budget_usec = 1000,
                .regulate_interval_usec = 1000000,
                .regulate_step_max_permille = 50,
                .empty_backoff_usec = 10000000,
                .lock_memory = true,
                .log_level = LOG_INFO,
                .headroom = true,
                .low_memory_monitor = true,
                .memory_pressure_level = LEVEL_LOW,
                .low_memory_monitor_repeat_usec = 15000000,
                .headroom_interval_usec = 250000,
                .headroom_max_interval_usec = 10000000,
        };
        headroom_thresholds_default(&c->headroom_at);
        shrink_priorities_default(&c->priorities);
        level_psi_thresholds_default(&c->psi);
        level_node_thresholds_default(&c->node);
        c->sysfs_root = strdup("");
        c->system_pressure = strdup("");
}

void config_done(struct config *c) {
        assert(c);

        free(c->socket_path);
        free(c->metrics_directory);
        free(c->memory_pressure_socket);
        for (size_t i = 0; i < c->n_cgroups; i++)
                free(c->cgroups[i]);
        free(c->cgroups);
        for (size_t i = 0; i < c->n_regulate_cgroups; i++)
                free(c->regulate_cgroups[i].pattern);
        free(c->regulate_cgroups);
        for (size_t i = 0; i < c->n_reclaim_cgroups; i++)
                free(c->reclaim_cgroups[i]);
        free(c->reclaim_cgroups);
        for (size_t i = 0; i < c->n_value_cgroups; i++)
                free(c->value_cgroups[i]);
        free(c->value_cgroups);
        free(c->sysfs_root);
        free(c->system_pressure);
        *c = (struct config){};
}

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        if (ret_error) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return r;
}

/* systemd's time spans: "500ms", "2s", "1.5s", "1h 30min", "2d"; a bare number is milliseconds. */
int config_parse_duration(const char *s, uint64_t *ret_usec) {
        assert(ret_usec);

        static const struct {
                const char *suffix;
                uint64_t mult;
        } units[] = {
                { "us", 1 },           { "usec", 1 },          { "ms", 1000 },         { "msec", 1000 },
                { "s", 1000000 },      { "sec", 1000000 },     { "second", 1000000 },  { "seconds", 1000000 },
                { "m", 60000000 },     { "min", 60000000 },    { "minute", 60000000 }, { "minutes", 60000000 },
                { "h", 3600000000ULL }, { "hr", 3600000000ULL }, { "hour", 3600000000ULL }, { "hours", 3600000000ULL },
                { "d", 86400000000ULL }, { "day", 86400000000ULL }, { "days", 86400000000ULL },
                { "w", 604800000000ULL }, { "week", 604800000000ULL }, { "weeks", 604800000000ULL },
        };
        double total = 0;
        bool any = false;

        if (!s)
                return -EINVAL;
        for (const char *p = s;;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                char *end;
                errno = 0;
                double v = strtod(p, &end);
                if (errno || end == p || v < 0)
                        return -EINVAL;
                p = end;
                while (*p == ' ' || *p == '\t')
                        p++;
                size_t n = 0;
                while (isalpha((unsigned char) p[n]))
                        n++;
                uint64_t mult = 0;
                if (n == 0) {
                        /* A bare number: milliseconds, and only alone ("1 2" says nothing clear). */
                        if (any || *p)
                                return -EINVAL;
                        mult = 1000;
                }
                for (size_t i = 0; n > 0 && i < ELEMENTSOF(units); i++)
                        if (strlen(units[i].suffix) == n && strncmp(p, units[i].suffix, n) == 0)
                                mult = units[i].mult;
                if (mult == 0)
                        return -EINVAL;
                p += n;
                total += v * (double) mult;
                if (total > 1e15)
                        return -ERANGE;
                any = true;
        }
        if (!any)
                return -EINVAL;
        *ret_usec = (uint64_t) (total + 0.5);
        return 0;
}

int config_parse_threshold(const char *s, struct psi_trigger *ret) {
        assert(ret);

        char kind[8], stall[32], window[32], extra[2];
        struct psi_trigger t;

        if (!s || sscanf(s, "%7s %31s %31s %1s", kind, stall, window, extra) != 3)
                return -EINVAL;
        int k = psi_kind_from_string(kind);
        if (k < 0)
                return -EINVAL;
        t.kind = k;
        if (config_parse_duration(stall, &t.stall_usec) < 0 || config_parse_duration(window, &t.window_usec) < 0)
                return -EINVAL;
        if (!psi_trigger_valid(&t))
                return -ERANGE;
        *ret = t;
        return 0;
}

static int parse_factor(const char *s, double *ret) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || v < 0 || v > 100)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_bool(const char *s, int *ret) {
        if (streq(s, "yes") || streq(s, "true") || streq(s, "1") || streq(s, "on"))
                *ret = 1;
        else if (streq(s, "no") || streq(s, "false") || streq(s, "0") || streq(s, "off"))
                *ret = 0;
        else
                return -EINVAL;
        return 0;
}

static int set_string(char **field, const char *value) {
        char *p = strdup(value);
        if (!p)
                return -ENOMEM;
        free(*field);
        *field = p;
        return 0;
}

/* ---- keys: one parser per kind of value, one table row per key ---- */

struct config_key;
typedef int (*config_parser)(struct config *c, const struct config_key *k, const char *value, char **ret_error);

struct config_key {
        const char *name;
        config_parser parse;
        size_t offset;           /* of the field in struct config */
        uint64_t min, max;       /* where the parser takes a range */
        const char *range;       /* the range as the error message says it */
};

#define FIELD(c, k, type) ((type *) ((char *) (c) + (k)->offset))

static int parse_socket(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        return value[0] == '/' ? set_string(FIELD(c, k, char *), value)
                               : fail(ret_error, -EINVAL, "socket must be an absolute path");
}

static int parse_directory(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        return value[0] == '/' || value[0] == 0 ? set_string(FIELD(c, k, char *), value)
                                                : fail(ret_error, -EINVAL, "%s must be an absolute path, or empty", k->name);
}

static int parse_level_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        int l = level_from_string(value);
        if (l <= LEVEL_OK)
                return fail(ret_error, -EINVAL, "%s: expected low, medium or critical, got \"%s\"", k->name, value);
        *FIELD(c, k, enum level) = l;
        return 0;
}

int config_parse_bytes(const char *s, bool need_suffix, uint64_t *ret) {
        assert(s);
        assert(ret);

        static const struct {
                const char *suffix;
                uint64_t factor;
        } units[] = {
                { "K", 1ULL << 10 }, { "M", 1ULL << 20 }, { "G", 1ULL << 30 }, { "T", 1ULL << 40 },
        };
        if (!isdigit((unsigned char) s[0]))
                return -EINVAL;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno != 0 || end == s)
                return -EINVAL;
        uint64_t factor = 0;
        if (*end == 0 && !need_suffix && !strpbrk(s, ".eExXpP"))
                factor = 1;
        for (size_t i = 0; factor == 0 && i < ELEMENTSOF(units); i++) {
                size_t n = strlen(units[i].suffix);
                const char *rest = end + n;
                if (strncasecmp(end, units[i].suffix, n) == 0 &&
                    (*rest == 0 || streq(rest, "B") || streq(rest, "iB")))
                        factor = units[i].factor;
        }
        if (factor == 0 || !(v >= 0) || v * (double) factor >= 18446744073709551615.0)
                return -EINVAL;
        *ret = (uint64_t) (v * (double) factor);
        return 0;
}

static int parse_size(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        uint64_t v;
        if (config_parse_bytes(value, false, &v) < 0 || v < k->min || v > k->max)
                return fail(ret_error, -EINVAL, "%s must be %s bytes (K, M, G suffixes allowed)", k->name, k->range);
        *FIELD(c, k, size_t) = (size_t) v;
        return 0;
}

/* A duration that must fall in a range, said as "expected a duration of ...". */
static int parse_bounded_duration(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        uint64_t u;
        if (config_parse_duration(value, &u) < 0 || u < k->min || u > k->max)
                return fail(ret_error, -EINVAL, "%s: expected a duration of %s, got \"%s\"", k->name, k->range, value);
        *FIELD(c, k, uint64_t) = u;
        return 0;
}

/* A duration; a range, when there is one, is checked apart so that the error says which is wrong. */
static int parse_duration(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        uint64_t u;
        if (config_parse_duration(value, &u) < 0)
                return fail(ret_error, -EINVAL, "%s: invalid duration \"%s\" (e.g. 500ms, 2s)", k->name, value);
        if (k->range && (u < k->min || u > k->max))
                return fail(ret_error, -ERANGE, "%s must be %s", k->name, k->range);
        *FIELD(c, k, uint64_t) = u;
        return 0;
}

static int parse_number(const struct config_key *k, const char *value, char **ret_error, long *ret) {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || *end || end == value || v < (long) k->min || v > (long) k->max)
                return fail(ret_error, -EINVAL, "%s must be %s", k->name, k->range);
        *ret = v;
        return 0;
}

static int parse_unsigned(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        long v;
        int r = parse_number(k, value, ret_error, &v);
        if (r >= 0)
                *FIELD(c, k, unsigned) = (unsigned) v;
        return r;
}

static int parse_int(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        long v;
        int r = parse_number(k, value, ret_error, &v);
        if (r >= 0)
                *FIELD(c, k, int) = (int) v;
        return r;
}

static int parse_threshold_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        int r = config_parse_threshold(value, FIELD(c, k, struct psi_trigger));
        if (r < 0)
                return fail(ret_error, r, "%s: expected \"some|full STALL WINDOW\" with 0 < STALL <= WINDOW <= 10s, got \"%s\"",
                            k->name, value);
        return 0;
}

static int parse_factor_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        if (parse_factor(value, FIELD(c, k, double)) < 0)
                return fail(ret_error, -EINVAL, "%s: expected a number 0..100, got \"%s\"", k->name, value);
        return 0;
}

/* "15%": the headroom (room left under the nearest limit) at or below which a level is raised, kept as the
 * share used, as headroom.c decides on it; or "512M": a size left (earlyoom's -M). The "%" or the size's
 * unit is required: "0.15" or "15" could mean anything. Before 1.0 these keys took the share used ("85%");
 * such a value is refused rather than read the other way round. k->min is the level. */
static int parse_headroom_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        struct headroom_thresholds *t = FIELD(c, k, struct headroom_thresholds);
        enum level l = (enum level) k->min;
        uint64_t left;
        if (config_parse_bytes(value, true, &left) >= 0) {
                if (left == 0)
                        return fail(ret_error, -ERANGE, "%s: the room left must be above 0, got \"%s\"", k->name, value);
                t->left[l] = left;
                return 0;
        }
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || !isdigit((unsigned char) value[0]))
                return fail(ret_error, -EINVAL, "%s: expected a percentage such as 15%% or a size such as 512M, got \"%s\"",
                            k->name, value);
        if (*end != '%' || end[1])
                return fail(ret_error, -EINVAL,
                            "%s: write the room left as a percentage with %%, e.g. %s=15%%, or as a size with its unit, "
                            "e.g. %s=512M, got \"%s\"",
                            k->name, k->name, k->name, value);
        if (!(v > 0 && v < 50))
                return fail(ret_error, -ERANGE,
                            "%s: the room left under the limit must be above 0%% and below 50%%, got %s "
                            "(before 1.0 this key took the share used: %s=85%% is now %s=15%%)",
                            k->name, value, k->name, k->name);
        t->f[l] = 1 - v / 100;
        t->left[l] = 0;
        return 0;
}

static int parse_bool_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        int b;
        if (parse_bool(value, &b) < 0)
                return fail(ret_error, -EINVAL, "%s: expected yes or no, got \"%s\"", k->name, value);
        *FIELD(c, k, bool) = b;
        return 0;
}

static int parse_log_level_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        int l = log_level_from_string(value);
        if (l < 0)
                return fail(ret_error, -EINVAL, "%s: expected one of emerg, alert, crit, err, warning, notice, info, debug, got \"%s\"",
                            k->name, value);
        *FIELD(c, k, int) = l;
        return 0;
}

static int parse_cgroup(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        (void) k;
        if (value[0] != '/')
                return fail(ret_error, -EINVAL, "cgroup must be an absolute cgroup v2 path");
        char **a = realloc(c->cgroups, (c->n_cgroups + 1) * sizeof(char *));
        if (!a)
                return -ENOMEM;
        c->cgroups = a;
        if (!(a[c->n_cgroups] = strdup(value)))
                return -ENOMEM;
        c->n_cgroups++;
        return 0;
}

/* "5%" or "0.5%": a share kept in thousandths. */
static int parse_permille_key(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || !isdigit((unsigned char) value[0]) || *end != '%' || end[1] ||
            v * 10 < (double) k->min || v * 10 > (double) k->max)
                return fail(ret_error, -EINVAL, "%s: expected a percentage of %s, got \"%s\"", k->name, k->range, value);
        *FIELD(c, k, unsigned) = (unsigned) (v * 10 + 0.5);
        return 0;
}

/* The budget is a duration of stall per second of time: "1ms" is 0.1%. */
#define REGULATE_BUDGET_MAX_USEC 500000u

/* "regulate_cgroup=/system.slice/redis.service 5ms", or "... off": that subtree's own budget. */
static int parse_regulate_cgroup(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        (void) k;
        const char *sp = strpbrk(value, " \t");
        uint64_t budget = 0;
        if (value[0] != '/' || !sp)
                return fail(ret_error, -EINVAL, "regulate_cgroup: expected \"/CGROUP BUDGET\" (a cgroup v2 path or glob, and a stall per second such as 5ms, or off), got \"%s\"", value);
        const char *b = sp + strspn(sp, " \t");
        if (!streq(b, "off") && (config_parse_duration(b, &budget) < 0 || budget > REGULATE_BUDGET_MAX_USEC))
                return fail(ret_error, -EINVAL, "regulate_cgroup: expected a budget of 0..500ms per second, or off, got \"%s\"", b);
        struct config_regulate_cgroup *a = realloc(c->regulate_cgroups, (c->n_regulate_cgroups + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        c->regulate_cgroups = a;
        if (!(a[c->n_regulate_cgroups].pattern = strndup(value, (size_t) (sp - value))))
                return -ENOMEM;
        a[c->n_regulate_cgroups++].budget_usec = budget;
        return 0;
}

/* A cgroup path or glob onto a list key's list, normalised; the root itself only where allowed. */
static int path_list_add(char ***list, size_t *n, const char *value, bool root, const char *key, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        if (value[0] != '/' || (!root && streq(value, "/")) || cgroup_path_normalize(value, &norm) < 0)
                return fail(ret_error, -EINVAL, "%s: expected a cgroup v2 path or glob%s, such as /system.slice/*.service, got \"%s\"",
                            key, root ? "" : " below the root", value);
        char **a = realloc(*list, (*n + 1) * sizeof(char *));
        if (!a)
                return -ENOMEM;
        *list = a;
        a[(*n)++] = TAKE_PTR(norm);
        return 0;
}

/* "reclaim_cgroup=/system.slice/foo-*.service": groups the daemon reclaims from itself. Globs match whole
 * paths component by component (FNM_PATHNAME): a pattern names groups, not subtrees. */
static int parse_reclaim_cgroup(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        return path_list_add(&c->reclaim_cgroups, &c->n_reclaim_cgroups, value, false, k->name, ret_error);
}

/* "value_cgroup=/system.slice/foo-*.service": the shrinkers of clients in those groups (and below) have their
 * values compared across uids; root's to name, since a value is a claim. */
static int parse_value_cgroup(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        return path_list_add(&c->value_cgroups, &c->n_value_cgroups, value, true, k->name, ret_error);
}

static bool regulate_pattern_covers(const char *pattern, const char *cgroup) {
        if (fnmatch(pattern, cgroup, FNM_PATHNAME) == 0)
                return true;
        size_t n = strlen(pattern);
        if (strpbrk(pattern, "*?[") || strncmp(pattern, cgroup, n) != 0)
                return false;
        return cgroup[n] == '/' || streq(pattern, "/");
}

bool config_value_shared(const struct config *c, const char *cgroup) {
        assert(c);

        for (size_t i = 0; cgroup && i < c->n_value_cgroups; i++)
                if (regulate_pattern_covers(c->value_cgroups[i], cgroup))
                        return true;
        return false;
}

uint64_t config_regulate_budget(const struct config *c, const char *cgroup) {
        assert(c);

        uint64_t budget = c->regulate_budget_usec;
        for (size_t i = 0; cgroup && i < c->n_regulate_cgroups; i++)
                if (regulate_pattern_covers(c->regulate_cgroups[i].pattern, cgroup))
                        budget = c->regulate_cgroups[i].budget_usec;
        return budget;
}

static int parse_sysfs_root(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        (void) ret_error;
        return set_string(FIELD(c, k, char *), streq(value, "/") ? "" : value);
}

/* An absolute path, or "" for /proc/pressure/memory. */
static int parse_system_pressure(struct config *c, const struct config_key *k, const char *value, char **ret_error) {
        if (value[0] != '/' && value[0] != 0)
                return fail(ret_error, -EINVAL, "system_pressure: not an absolute path: %s", value);
        return set_string(FIELD(c, k, char *), streq(value, "/proc/pressure/memory") ? "" : value);
}

#define AT(field) offsetof(struct config, field)

static const struct config_key config_keys[] = {
        { "socket", parse_socket, AT(socket_path) },
        { "metrics_directory", parse_directory, AT(metrics_directory) },
        { "memory_pressure_socket", parse_directory, AT(memory_pressure_socket) },
        { "memory_pressure_level", parse_level_key, AT(memory_pressure_level) },
        { "low_memory_monitor", parse_bool_key, AT(low_memory_monitor) },
        { "low_memory_monitor_repeat", parse_bounded_duration, AT(low_memory_monitor_repeat_usec), 0, 3600000000ULL, "0..1h" },
        { "max_message_size", parse_size, AT(max_message_size), 1024, 16u * 1024 * 1024, "1024..16777216" },
        { "max_connections", parse_unsigned, AT(max_connections), 1, 65536, "1..65536" },
        { "max_connections_per_uid", parse_unsigned, AT(max_connections_per_uid), 1, 65536, "1..65536" },
        { "max_cgroups_per_uid", parse_unsigned, AT(max_cgroups_per_uid), 1, 65536, "1..65536" },
        { "max_cgroups_users", parse_unsigned, AT(max_cgroups_users), 1, 1048576, "1..1048576" },
        { "max_shrinkers_per_uid", parse_unsigned, AT(max_shrinkers_per_uid), 1, 65536, "1..65536" },
        { "max_buffered", parse_size, AT(max_buffered), 1u << 20, 1u << 30, "1048576..1073741824" },
        { "idle_timeout", parse_bounded_duration, AT(idle_timeout_usec), 0, 86400000000ULL, "0..1d" },
        { "round_interval", parse_bounded_duration, AT(round_interval_usec), 1000, 600000000, "1ms..10min" },
        { "round_budget", parse_bounded_duration, AT(round_budget_usec), 0, 600000000, "0..10min" },
        { "request_timeout", parse_bounded_duration, AT(request_timeout_usec), 1000, 600000000, "1ms..10min" },
        { "empty_backoff", parse_bounded_duration, AT(empty_backoff_usec), 0, 3600000000ULL, "0..1h" },
        { "quarantine_after", parse_unsigned, AT(quarantine_after), 1, 1000, "1..1000" },
        { "priority_low", parse_int, AT(priorities.at[LEVEL_LOW]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "priority_medium", parse_int, AT(priorities.at[LEVEL_MEDIUM]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "priority_critical", parse_int, AT(priorities.at[LEVEL_CRITICAL]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "priority_floor_low", parse_int, AT(priorities.floor[LEVEL_LOW]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "priority_floor_medium", parse_int, AT(priorities.floor[LEVEL_MEDIUM]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "priority_floor_critical", parse_int, AT(priorities.floor[LEVEL_CRITICAL]), 0, SHRINK_PRIORITY_MAX, "0..12" },
        { "sample_interval", parse_duration, AT(sample_interval_usec), 10000, 60000000, "10ms..60s" },
        { "node_interval", parse_duration, AT(node_interval_usec) },
        { "hold", parse_duration, AT(hold_usec) },
        { "low", parse_threshold_key, AT(psi.t[LEVEL_LOW]) },
        { "medium", parse_threshold_key, AT(psi.t[LEVEL_MEDIUM]) },
        { "critical", parse_threshold_key, AT(psi.t[LEVEL_CRITICAL]) },
        { "node_low_factor", parse_factor_key, AT(node.low_factor) },
        { "node_medium_factor", parse_factor_key, AT(node.medium_factor) },
        { "node_critical_factor", parse_factor_key, AT(node.critical_factor) },
        { "lock_memory", parse_bool_key, AT(lock_memory) },
        { "log_level", parse_log_level_key, AT(log_level) },
        { "headroom", parse_bool_key, AT(headroom) },
        { "headroom_low", parse_headroom_key, AT(headroom_at), LEVEL_LOW },
        { "headroom_medium", parse_headroom_key, AT(headroom_at), LEVEL_MEDIUM },
        { "headroom_critical", parse_headroom_key, AT(headroom_at), LEVEL_CRITICAL },
        { "headroom_interval", parse_bounded_duration, AT(headroom_interval_usec), 10000, 60000000, "10ms..60s" },
        { "headroom_max_interval", parse_bounded_duration, AT(headroom_max_interval_usec), 10000, 3600000000ULL, "10ms..1h" },
        { "node_foreign_raises", parse_bool_key, AT(node.foreign_raises) },
        { "cgroup", parse_cgroup },
        { "regulate_budget", parse_bounded_duration, AT(regulate_budget_usec), 0, REGULATE_BUDGET_MAX_USEC, "0..500ms (per second)" },
        { "regulate_interval", parse_bounded_duration, AT(regulate_interval_usec), 100000, 60000000, "100ms..60s" },
        { "regulate_step_max", parse_permille_key, AT(regulate_step_max_permille), 1, 500, "0.1%..50%" },
        { "regulate_cgroup", parse_regulate_cgroup },
        { "reclaim_cgroup", parse_reclaim_cgroup },
        { "value_cgroup", parse_value_cgroup },
        { "sysfs_root", parse_sysfs_root, AT(sysfs_root) },
        { "system_pressure", parse_system_pressure, AT(system_pressure) },
};

static const struct config_key *config_key_find(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++)
                if (streq(key, config_keys[i].name))
                        return &config_keys[i];
        return NULL;
}

int config_set(struct config *c, const char *key, const char *value, char **ret_error) {
        assert(c);

        const struct config_key *k = config_key_find(key);
        if (!k)
                return fail(ret_error, -ENOKEY, "unknown key \"%s\"", key);
        return k->parse(c, k, value, ret_error);
}

static char *strip(char *s) {
        while (isspace((unsigned char) *s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char) s[n - 1]))
                s[--n] = 0;
        return s;
}

/* "2s   # two seconds": a '#' after white space starts a comment. No value of ours holds " #". */
static void cut_comment(char *s) {
        for (char *p = s; (p = strchr(p, '#')); p++)
                if (p > s && isspace((unsigned char) p[-1])) {
                        *p = 0;
                        return;
                }
}

static void warn(config_warn_t w, void *userdata, const char *fmt, ...) _printf_(3, 4);
static void warn(config_warn_t w, void *userdata, const char *fmt, ...) {
        if (!w)
                return;
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r >= 0)
                w(msg, userdata);
}

/* One file's lines onto c, without the checks across keys (those wait for the last drop-in). */
static int config_parse_lines(struct config *c, const char *text, const char *filename, config_warn_t w,
                              void *userdata, char **ret_error) {
        assert(c);

        _cleanup_free_ char *copy = strdup(text);
        unsigned seen[ELEMENTSOF(config_keys)] = {}; /* line a key was last set on */
        bool skipping = false;                        /* in a section other than [pressured] */
        if (!copy)
                return -ENOMEM;

        unsigned lineno = 0;
        for (char *p = copy, *line; (line = strsep(&p, "\n"));) {
                lineno++;
                char *s = strip(line);
                if (!*s || *s == '#' || *s == ';')
                        continue;
                if (*s == '[') {
                        /* "[pressured]", as in other daemons' files, or none at all; anything else is
                         * someone else's, and its keys are not ours to read. */
                        skipping = !streq(s, "[pressured]");
                        if (skipping)
                                warn(w, userdata, "%s:%u: unknown section %s, its keys are ignored", filename, lineno, s);
                        continue;
                }
                if (skipping)
                        continue;
                cut_comment(s);
                char *eq = strchr(s, '=');
                if (!eq)
                        return fail(ret_error, -EINVAL, "%s:%u: expected KEY=VALUE", filename, lineno);
                *eq = 0;
                char *key = strip(s), *value = strip(eq + 1);

                const struct config_key *k = config_key_find(key);
                if (k && k->parse != parse_cgroup && k->parse != parse_regulate_cgroup &&
                    k->parse != parse_reclaim_cgroup && k->parse != parse_value_cgroup) { /* lists: each line adds one */
                        size_t i = (size_t) (k - config_keys);
                        if (seen[i])
                                warn(w, userdata, "%s:%u: %s is also set on line %u; this line wins", filename, lineno,
                                     key, seen[i]);
                        seen[i] = lineno;
                }
                _cleanup_free_ char *msg = NULL;
                int r = config_set(c, key, value, &msg);
                if (r < 0)
                        return fail(ret_error, r, "%s:%u: %s", filename, lineno, msg ? msg : strerror(-r));
        }
        return 0;
}

int config_parse(struct config *c, const char *text, const char *filename, config_warn_t w, void *userdata,
                 char **ret_error) {
        int r = config_parse_lines(c, text, filename, w, userdata, ret_error);
        return r < 0 ? r : config_verify(c, ret_error);
}

static int load_file(struct config *c, const char *path, bool must_exist, config_warn_t w, void *userdata,
                     char **ret_error) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT && !must_exist)
                        return 0;
                return fail(ret_error, -errno, "%s: %s", path, strerror(errno));
        }

        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        ssize_t n = getdelim(&text, &size, '\0', f);
        if (n < 0 && ferror(f))
                return fail(ret_error, -EIO, "%s: read error", path);
        return config_parse_lines(c, n < 0 ? "" : text, path, w, userdata, ret_error);
}

/* "50-redis.conf": a drop-in is a file whose name ends in .conf and does not start with a dot (an
 * editor's or a package manager's leftovers, "x.conf.dpkg-old", ".x.conf.swp", are not). */
static int is_dropin(const struct dirent *d) {
        size_t n = strlen(d->d_name);
        return d->d_name[0] != '.' && n > 5 && streq(d->d_name + n - 5, ".conf") &&
               (d->d_type == DT_REG || d->d_type == DT_LNK || d->d_type == DT_UNKNOWN);
}

int config_load(struct config *c, const char *path, int must_exist, config_warn_t w, void *userdata,
                char **ret_error) {
        assert(c);
        assert(path);

        int r = load_file(c, path, must_exist, w, userdata, ret_error);
        if (r < 0)
                return r;

        /* PATH.d/NAME.conf in lexical order, each over what came before, as systemd's own daemons read
         * oomd.conf.d/: a package or an administrator sets one service's keys in a file of its own. */
        _cleanup_free_ char *dir = NULL;
        if (asprintf(&dir, "%s.d", path) < 0)
                return -ENOMEM;
        struct dirent **names = NULL;
        int n = scandir(dir, &names, is_dropin, alphasort);
        if (n < 0) {
                if (errno == ENOENT || errno == ENOTDIR)
                        return config_verify(c, ret_error);
                return fail(ret_error, -errno, "%s: %s", dir, strerror(errno));
        }
        r = 0;
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *file = NULL;
                if (r >= 0 && asprintf(&file, "%s/%s", dir, names[i]->d_name) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = load_file(c, file, true, w, userdata, ret_error);
                free(names[i]);
        }
        free(names);
        return r < 0 ? r : config_verify(c, ret_error);
}

int config_verify(const struct config *c, char **ret_error) {
        assert(c);

        if (level_psi_thresholds_check(&c->psi) < 0)
                return fail(ret_error, -EINVAL,
                            "thresholds of the same kind must not fall from low to medium to critical");
        if (headroom_thresholds_check(&c->headroom_at) < 0)
                return fail(ret_error, -EINVAL, "headroom thresholds must not rise from low to medium to critical (less room left is worse)");
        if (c->headroom_max_interval_usec < c->headroom_interval_usec)
                return fail(ret_error, -EINVAL, "headroom_max_interval is shorter than headroom_interval");
        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                if (c->priorities.floor[l] > c->priorities.at[l])
                        return fail(ret_error, -EINVAL, "priority_floor_%s is above priority_%s", level_to_string(l),
                                    level_to_string(l));
        return 0;
}

static bool same_string(const char *a, const char *b) {
        return (!a && !b) || (a && b && streq(a, b));
}

void config_take(struct config *cur, struct config *next) {
        assert(cur);
        assert(next);

        struct config old = *cur;
        *cur = *next;
        *next = (struct config){};
        SWAP_PTR(cur->socket_path, old.socket_path);
        SWAP_PTR(cur->sysfs_root, old.sysfs_root);
        SWAP_PTR(cur->system_pressure, old.system_pressure);
        SWAP_PTR(cur->memory_pressure_socket, old.memory_pressure_socket);
        cur->lock_memory = old.lock_memory;
        cur->low_memory_monitor = old.low_memory_monitor;
        config_done(&old);
}

int config_restart_only_changed(const struct config *cur, const struct config *next, char **ret) {
        assert(cur);

        const struct {
                const char *key;
                bool same;
        } keys[] = {
                { "socket", same_string(cur->socket_path, next->socket_path) },
                { "sysfs_root", same_string(cur->sysfs_root, next->sysfs_root) },
                { "system_pressure", same_string(cur->system_pressure, next->system_pressure) },
                { "memory_pressure_socket", same_string(cur->memory_pressure_socket, next->memory_pressure_socket) },
                { "lock_memory", cur->lock_memory == next->lock_memory },
                { "low_memory_monitor", cur->low_memory_monitor == next->low_memory_monitor },
        };
        _cleanup_free_ char *names = NULL;

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                if (keys[i].same)
                        continue;
                char *n = NULL;
                if (asprintf(&n, "%s%s%s", names ? names : "", names ? ", " : "", keys[i].key) < 0)
                        return -ENOMEM;
                free(names);
                names = n;
        }
        *ret = TAKE_PTR(names);
        return 0;
}
