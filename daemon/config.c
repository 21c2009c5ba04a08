/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "macro.h"

void config_init(struct config *c) {
        *c = (struct config){
                .max_message_size = FRAME_DEFAULT_MAX_SIZE,
                .sample_interval_usec = 1000000,
                .node_interval_usec = 30000000,
                .hold_usec = 10000000,
                .round_interval_usec = 250000,
                .request_timeout_usec = 1000000,
                .quarantine_after = 3,
                .lock_memory = true,
        };
        shrink_priorities_default(&c->priorities);
        level_psi_thresholds_default(&c->psi);
        level_node_thresholds_default(&c->node);
        c->sysfs_root = strdup("");
}

void config_done(struct config *c) {
        free(c->socket_path);
        for (size_t i = 0; i < c->n_cgroups; i++)
                free(c->cgroups[i]);
        free(c->cgroups);
        free(c->sysfs_root);
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

int config_parse_duration(const char *s, uint64_t *ret_usec) {
        static const struct {
                const char *suffix;
                uint64_t mult;
        } units[] = { { "us", 1 }, { "ms", 1000 }, { "s", 1000000 }, { "min", 60000000 }, { "", 1000 } };
        char *end;

        if (!s || !isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(end, units[i].suffix)) {
                        double us = v * (double) units[i].mult;
                        if (us > 1e15)
                                return -ERANGE;
                        *ret_usec = (uint64_t) (us + 0.5);
                        return 0;
                }
        return -EINVAL;
}

int config_parse_threshold(const char *s, struct psi_trigger *ret) {
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

int config_set(struct config *c, const char *key, const char *value, char **ret_error) {
        uint64_t u;
        int r;

        if (streq(key, "socket"))
                return value[0] == '/' ? set_string(&c->socket_path, value)
                                       : fail(ret_error, -EINVAL, "socket must be an absolute path");
        if (streq(key, "max_message_size")) {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(value, &end, 10);
                if (errno || *end || v < 1024 || v > 16u * 1024 * 1024)
                        return fail(ret_error, -EINVAL, "max_message_size must be 1024..16777216 bytes");
                c->max_message_size = (size_t) v;
                return 0;
        }
        if (streq(key, "round_interval") || streq(key, "request_timeout")) {
                if (config_parse_duration(value, &u) < 0 || u < 1000 || u > 600000000)
                        return fail(ret_error, -EINVAL, "%s: expected a duration of 1ms..10min, got \"%s\"", key, value);
                if (streq(key, "round_interval"))
                        c->round_interval_usec = u;
                else
                        c->request_timeout_usec = u;
                return 0;
        }
        if (streq(key, "quarantine_after")) {
                char *end;
                errno = 0;
                unsigned long v = strtoul(value, &end, 10);
                if (errno || *end || end == value || v < 1 || v > 1000)
                        return fail(ret_error, -EINVAL, "quarantine_after must be 1..1000");
                c->quarantine_after = (unsigned) v;
                return 0;
        }
        if (streq(key, "priority_low") || streq(key, "priority_medium") || streq(key, "priority_critical")) {
                char *end;
                errno = 0;
                long v = strtol(value, &end, 10);
                if (errno || *end || end == value || v < 0 || v > SHRINK_PRIORITY_MAX)
                        return fail(ret_error, -EINVAL, "%s must be 0..%d", key, SHRINK_PRIORITY_MAX);
                c->priorities.at[level_from_string(key + strlen("priority_"))] = (int) v;
                return 0;
        }
        if (streq(key, "sample_interval") || streq(key, "node_interval") || streq(key, "hold")) {
                if (config_parse_duration(value, &u) < 0)
                        return fail(ret_error, -EINVAL, "%s: invalid duration \"%s\" (e.g. 500ms, 2s)", key, value);
                if (streq(key, "sample_interval")) {
                        if (u < 10000 || u > 60000000)
                                return fail(ret_error, -ERANGE, "sample_interval must be 10ms..60s");
                        c->sample_interval_usec = u;
                } else if (streq(key, "node_interval"))
                        c->node_interval_usec = u;
                else
                        c->hold_usec = u;
                return 0;
        }
        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                if (streq(key, level_to_string(l))) {
                        r = config_parse_threshold(value, &c->psi.t[l]);
                        if (r < 0)
                                return fail(ret_error, r,
                                            "%s: expected \"some|full STALL WINDOW\" with 0 < STALL <= WINDOW <= 10s, got \"%s\"",
                                            key, value);
                        return 0;
                }
        if (streq(key, "node_low_factor") || streq(key, "node_medium_factor") || streq(key, "node_critical_factor")) {
                double d;
                if (parse_factor(value, &d) < 0)
                        return fail(ret_error, -EINVAL, "%s: expected a number 0..100, got \"%s\"", key, value);
                if (streq(key, "node_low_factor"))
                        c->node.low_factor = d;
                else if (streq(key, "node_medium_factor"))
                        c->node.medium_factor = d;
                else
                        c->node.critical_factor = d;
                return 0;
        }
        if (streq(key, "lock_memory")) {
                int b;
                if (parse_bool(value, &b) < 0)
                        return fail(ret_error, -EINVAL, "%s: expected yes or no, got \"%s\"", key, value);
                c->lock_memory = b;
                return 0;
        }
        if (streq(key, "node_foreign_raises")) {
                int b;
                if (parse_bool(value, &b) < 0)
                        return fail(ret_error, -EINVAL, "%s: expected yes or no, got \"%s\"", key, value);
                c->node.foreign_raises = b;
                return 0;
        }
        if (streq(key, "cgroup")) {
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
        if (streq(key, "sysfs_root"))
                return set_string(&c->sysfs_root, streq(value, "/") ? "" : value);

        return fail(ret_error, -ENOKEY, "unknown key \"%s\"", key);
}

static char *strip(char *s) {
        while (isspace((unsigned char) *s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char) s[n - 1]))
                s[--n] = 0;
        return s;
}

int config_parse(struct config *c, const char *text, const char *filename, char **ret_error) {
        _cleanup_free_ char *copy = strdup(text);
        if (!copy)
                return -ENOMEM;

        unsigned lineno = 0;
        char *save = NULL;
        for (char *p = copy, *line; (line = strsep(&p, "\n")); ) {
                (void) save;
                lineno++;
                char *s = strip(line);
                if (!*s || *s == '#' || *s == ';')
                        continue;
                if (*s == '[') /* a section header: "[pressured]" is allowed for familiarity */
                        continue;
                char *eq = strchr(s, '=');
                if (!eq)
                        return fail(ret_error, -EINVAL, "%s:%u: expected KEY=VALUE", filename, lineno);
                *eq = 0;
                char *key = strip(s), *value = strip(eq + 1);

                _cleanup_free_ char *msg = NULL;
                int r = config_set(c, key, value, &msg);
                if (r < 0)
                        return fail(ret_error, r, "%s:%u: %s", filename, lineno, msg ? msg : strerror(-r));
        }
        return config_verify(c, ret_error);
}

int config_load(struct config *c, const char *path, int must_exist, char **ret_error) {
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
        return config_parse(c, n < 0 ? "" : text, path, ret_error);
}

int config_verify(const struct config *c, char **ret_error) {
        if (level_psi_thresholds_check(&c->psi) < 0)
                return fail(ret_error, -EINVAL,
                            "thresholds of the same kind must not fall from low to medium to critical");
        return 0;
}
