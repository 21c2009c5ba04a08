/* SPDX-License-Identifier: MIT */
/* pressurectl: look at pressured from the command line. Tables for people, --json for scripts. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "macro.h"
#include "pressure-private.h"
#include "protocol.h"

/* Exit codes */
enum {
        EXIT_OK = 0,
        EXIT_UNREACHABLE = 1, /* the daemon could not be reached, or went away */
        EXIT_USAGE = 2,
        EXIT_FAILED = 3, /* the daemon answered with an error */
};

static const char *arg_socket = NULL;
static int arg_json = 0;
static enum pressure_level arg_min_level = PRESSURE_LEVEL_LOW;
static bool arg_min_level_set = false;
static const char *arg_cgroup = NULL;
static long arg_node = -1;
static long long arg_nr = 0;
static bool arg_all = false, arg_dry_run = false;
static long long arg_shrinker = 0;
static const char *arg_exec = NULL;

static void help(void) {
        printf("Usage: pressurectl [OPTIONS] COMMAND [SCOPE...]\n"
               "\n"
               "A SCOPE is \"system\", \"node:N\" or a cgroup path relative to the cgroup v2 mount\n"
               "(\"/system.slice/foo.service\", as in the 0:: line of /proc/PID/cgroup).\n"
               "\n"
               "Commands:\n"
               "  status                 Level, pressure and headroom of the system, each NUMA node and\n"
               "                         each watched cgroup, one row each\n"
               "  status SCOPE...        A closer look at these scopes, watched or not: level and why,\n"
               "                         stall, usage, limit, headroom and the thresholds\n"
               "  config                 The thresholds and intervals in effect\n"
               "  watch [SCOPE...]       One line per level change as it happens (default: system)\n"
               "  shrinkers              Registered client shrinkers: objects per node, freed, state\n"
               "  shrink                 Ask shrinkers to free now (root, or the owner of --shrinker);\n"
               "                         needs --nr=N, --all or --dry-run\n"
               "\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "  -j --json              Print JSON (one object per line for watch, each with \"time\")\n"
               "  -s --socket=PATH       Talk to the daemon on PATH (default: $PRESSURED_SOCKET, else\n"
               "                         /run/pressured/io.pressured, or $XDG_RUNTIME_DIR/pressured/\n"
               "                         io.pressured for a user's own daemon)\n"
               "  -l --min-level=LEVEL   watch: report changes reaching LEVEL (low, medium, critical)\n"
               "     --exec=CMD          watch: run CMD with /bin/sh on every change; it gets\n"
               "                         PRESSURE_SCOPE, PRESSURE_LEVEL, PRESSURE_PREVIOUS_LEVEL,\n"
               "                         PRESSURE_SOURCE, PRESSURE_RECLAIM_TARGET (bytes) and\n"
               "                         PRESSURE_EVENT (level, max or oom_kill) in its environment\n"
               "     --cgroup=PATH       shrink: shrinkers of this cgroup's subtree (MEMCG_AWARE ones)\n"
               "     --node=N            shrink: NUMA_AWARE shrinkers, for node N\n"
               "     --nr=N              shrink: scan N objects per shrinker\n"
               "     --all               shrink: scan everything each shrinker counts\n"
               "     --dry-run           shrink: only count; nothing is freed\n"
               "     --shrinker=ID       shrink: only this shrinker\n"
               "\n"
               "Exit status: 0 success, 1 daemon unreachable, 2 usage error, 3 the daemon refused.\n");
}

static const char *bytes(uint64_t b, char *buf, size_t size) {
        return format_bytes(buf, size, b);
}

/* The regulator's state (a Regulation) in words: "budget 1.00 ms/s, stall 0.12 ms/s, under; held at
 * 11.3M: edge 12.5M found 11:22:41, back in 2.5 s, rising 0.8%/s; 12 steps asked 3.4M". */
static void regulation_words(const struct regulation_snapshot *reg, char *buf, size_t size) {
        char a[16], b[16], c[16], when[16] = "?";
        size_t off = 0;
        off += (size_t) snprintf(buf, size, "budget %.2f ms/s, stall %.2f ms/s, %s", (double) reg->budget / 1000,
                                 (double) reg->stall / 1000, reg->state ?: "?");
        if (reg->limit > 0 && off < size) {
                time_t t = (time_t) (reg->edge_found / 1000000);
                struct tm tm;
                if (t > 0 && localtime_r(&t, &tm))
                        strftime(when, sizeof(when), "%H:%M:%S", &tm);
                off += (size_t) snprintf(buf + off, size - off, "; held at %s: edge %s found %s, back in %.1f s, rising %.1f%%/s",
                                         bytes(reg->limit, a, sizeof(a)), bytes(reg->edge, b, sizeof(b)), when,
                                         (double) reg->return_usec / 1e6, (double) reg->rising / 10);
        } else if (off < size)
                off += (size_t) snprintf(buf + off, size - off, "; no growth limit");
        if (off < size)
                snprintf(buf + off, size - off, "; %" PRIu64 " steps asked %s", reg->steps, bytes(reg->asked, c, sizeof(c)));
}

/* A reply the daemon's own codec cannot read: a daemon newer or older than this pressurectl. */
static int say_unreadable(const char *method) {
        fprintf(stderr, "pressurectl: cannot read pressured's reply to %s (a daemon of another version?)\n", method);
        return EXIT_FAILED;
}

/* ---- errors in words ---- */

/* The daemon's last word on the client (why it is away), for the message when a watch ends. */
static char last_log[512];

static void on_log(struct pressure_client *c, int priority, const char *message, void *userdata) {
        (void) c;
        (void) priority;
        (void) userdata;
        snprintf(last_log, sizeof(last_log), "%s", message);
}

static int connect_client(struct pressure_client **ret) {
        int r = pressure_client_new(arg_socket, ret);
        if (r < 0) {
                fprintf(stderr, "pressurectl: %s\n", strerror(-r));
                return -EXIT_FAILED;
        }
        (void) pressure_client_set_log_handler(*ret, on_log, NULL);
        return 0;
}

/* Errors that mean the daemon is not there, or went. */
static bool unreachable(int r) {
        return r == -ENOENT || r == -ECONNREFUSED || r == -ENOTCONN || r == -ECONNRESET || r == -ETIMEDOUT ||
               r == -EPIPE || r == -ESHUTDOWN;
}

static int report_unreachable(struct pressure_client *c, int r) {
        if (r == -ESHUTDOWN)
                fprintf(stderr, "pressurectl: pressured at %s is shutting down\n", pressure_client_get_socket_path(c));
        else if (r == -ENOENT || r == -ECONNREFUSED)
                fprintf(stderr,
                        "pressurectl: cannot reach pressured at %s: %s. Is it running? (systemctl start pressured.socket, "
                        "or build-aux/run in a source tree; --socket or $PRESSURED_SOCKET name another socket)\n",
                        pressure_client_get_socket_path(c), strerror(-r));
        else
                fprintf(stderr, "pressurectl: cannot reach pressured at %s: %s\n", pressure_client_get_socket_path(c),
                        strerror(-r));
        return EXIT_UNREACHABLE;
}

/* A failed call that is no answer of the daemon's. */
static int report_error(struct pressure_client *c, const char *what, int r) {
        if (unreachable(r))
                return report_unreachable(c, r);
        fprintf(stderr, "pressurectl: %s: %s\n", what, strerror(-r));
        return EXIT_FAILED;
}

/* Why the daemon refused a scope, in words that name it. */
static void say_scope_refused(const char *scope, int error) {
        if (error == -ENOENT)
                fprintf(stderr,
                        "pressurectl: %s: no such cgroup, or it was removed (cgroup paths are relative to the cgroup v2 "
                        "mount, e.g. /system.slice; see /proc/self/cgroup)\n",
                        scope);
        else if (error == -ENXIO)
                fprintf(stderr, "pressurectl: %s: no such NUMA node (with memory)\n", scope);
        else if (error == -EACCES)
                fprintf(stderr,
                        "pressurectl: %s: pressured may not watch that cgroup for you: it watches a cgroup for a user "
                        "who owns it (a delegated group), may write its memory.pressure, or has a process in it. Ask "
                        "root to add cgroup=%s to pressured's configuration, or to delegate the group to you\n",
                        scope, scope);
        else if (error == -EDQUOT)
                fprintf(stderr,
                        "pressurectl: %s: you have pressured watch as many cgroups as one user may (max_cgroups_per_uid), "
                        "or all users together as many as they may (max_cgroups_users); end a watch first\n",
                        scope);
        else
                fprintf(stderr, "pressurectl: %s: %s\n", scope, strerror(-error));
}

/* ---- time ---- */

/* Wall-clock time of a CLOCK_MONOTONIC instant, as ISO 8601 with milliseconds and the zone. */
static void wall_time(uint64_t monotonic_usec, char *buf, size_t size) {
        struct timespec mono, real;
        clock_gettime(CLOCK_MONOTONIC, &mono);
        clock_gettime(CLOCK_REALTIME, &real);
        int64_t now_mono = (int64_t) mono.tv_sec * 1000000 + mono.tv_nsec / 1000;
        int64_t now_real = (int64_t) real.tv_sec * 1000000 + real.tv_nsec / 1000;
        int64_t t = monotonic_usec > 0 ? now_real - (now_mono - (int64_t) monotonic_usec) : now_real;
        time_t sec = (time_t) (t / 1000000);
        struct tm tm;
        char date[32], zone[8];
        localtime_r(&sec, &tm);
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
        strftime(zone, sizeof(zone), "%z", &tm);
        snprintf(buf, size, "%s.%03d%.3s:%s", date, (int) (t % 1000000 / 1000), zone, zone + 3);
}

static void print_json_line(struct json_object *o) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* ---- scopes ---- */

/* The scope's state as the daemon sent it (for what the library has no getter for). */
static struct json_object *scope_json(const struct pressure_scope *s) {
        return json_tokener_parse(pressure_scope_to_json(s));
}

/* Room left under the nearest limit: bytes and percent; false when no limit binds. */
static bool scope_room(const struct pressure_scope *s, uint64_t *ret_limit, uint64_t *ret_room, double *ret_percent) {
        uint64_t limit, unreclaimable;
        if (pressure_scope_get_headroom(s, &limit, &unreclaimable) < 0 || limit == 0)
                return false;
        *ret_limit = limit;
        *ret_room = limit > unreclaimable ? limit - unreclaimable : 0;
        *ret_percent = 100.0 * (double) *ret_room / (double) limit;
        return true;
}

static void print_row(const struct pressure_scope *s) {
        struct pressure_stall some, full;
        char c1[16] = "-", c2[16] = "-", c4[16] = "-", used[16] = "-", limit_s[16] = "-", room_s[32] = "-";
        uint64_t total, free_b, usage, limit, room;
        double pct;

        if (pressure_scope_get_stall(s, PRESSURE_STALL_SOME, &some) >= 0) {
                snprintf(c1, sizeof(c1), "%.2f", some.avg10);
                snprintf(c2, sizeof(c2), "%.2f", some.avg60);
        }
        if (pressure_scope_get_stall(s, PRESSURE_STALL_FULL, &full) >= 0)
                snprintf(c4, sizeof(c4), "%.2f", full.avg10);
        if (pressure_scope_get_cgroup_memory(s, &usage, &limit) >= 0) {
                bytes(usage, used, sizeof(used));
                if (limit != UINT64_MAX)
                        bytes(limit, limit_s, sizeof(limit_s));
        } else if (pressure_scope_get_memory(s, &total, &free_b) >= 0) {
                bytes(total - free_b, used, sizeof(used));
                bytes(total, limit_s, sizeof(limit_s));
        }
        if (scope_room(s, &limit, &room, &pct)) {
                char b[16];
                snprintf(room_s, sizeof(room_s), "%s %.1f%%", bytes(room, b, sizeof(b)), pct);
                /* The system: its memory, less what is available (no swap). */
                if (strcmp(used, "-") == 0) {
                        bytes(limit - room, used, sizeof(used));
                        bytes(limit, limit_s, sizeof(limit_s));
                }
        }
        const char *source = pressure_scope_get_source(s);
        printf("%-24s %-9s %-9s %7s %7s %7s %8s %8s %14s\n", pressure_scope_get_name(s),
               pressure_level_to_string(pressure_scope_get_level(s)), source ? source : "-", c1, c2, c4, used, limit_s,
               room_s);
}

static void print_header(void) {
        printf("%-24s %-9s %-9s %7s %7s %7s %8s %8s %14s\n", "SCOPE", "LEVEL", "SOURCE", "SOME10", "SOME60", "FULL10",
               "USED", "LIMIT", "HEADROOM");
}

/* ---- config ---- */

static int call(struct pressure_client *c, const char *method, const char *params, struct json_object **ret);

/* GetConfiguration, as the raw reply (for --json) and decoded by the codec (conf points into *ret). */
static int get_config(struct pressure_client *c, struct json_object **ret, struct configuration_snapshot *conf) {
        int r = call(c, "io.pressured.GetConfiguration", NULL, ret);
        if (r < 0)
                return r;
        if (protocol_decode_configuration(*ret, conf) < 0) {
                json_object_put(*ret);
                *ret = NULL;
                return -say_unreadable("GetConfiguration");
        }
        return 0;
}

static const char *usec(uint64_t v, char *buf, size_t size) {
        return format_usec(buf, size, v);
}

/* "some 100ms per 2s, or headroom at or below 15%" for one level. */
static void describe_threshold(const struct level_thresholds *t, char *buf, size_t size) {
        char st[FORMAT_USEC_MAX], w[FORMAT_USEC_MAX], b[FORMAT_BYTES_MAX];
        int n = snprintf(buf, size, "%s stall %s per %s (%.1f%%)", psi_kind_to_string(t->pressure.kind),
                         usec(t->pressure.stall_usec, st, sizeof(st)), usec(t->pressure.window_usec, w, sizeof(w)),
                         100.0 * (double) t->pressure.stall_usec / (double) MAX(t->pressure.window_usec, 1u));
        if (!t->have_headroom || n < 0 || (size_t) n >= size)
                return;
        if (t->headroom_bytes > 0)
                snprintf(buf + n, size - (size_t) n, ", or headroom <= %s", format_bytes(b, sizeof(b), t->headroom_bytes));
        else
                snprintf(buf + n, size - (size_t) n, ", or headroom <= %.0f%%", t->headroom_percent);
}

/* The regulator's part of `pressurectl config`: its budget, and the groups with their own. */
static void print_regulator_config(const struct configuration_snapshot *conf) {
        char a[FORMAT_USEC_MAX];
        if (!conf->have_regulator)
                return; /* a daemon from before the regulator */
        if (conf->regulate_budget_usec > 0)
                printf("The regulator holds the stall of scopes with shrinkers under %.2f ms/s, looking every %s, "
                       "in steps of at most %.2f%%.\n",
                       (double) conf->regulate_budget_usec / 1000, usec(conf->regulate_interval_usec, a, sizeof(a)),
                       conf->regulate_step_max_percent);
        else
                printf("The regulator is off (regulate_budget=0).\n");
        for (size_t i = 0; i < conf->n_regulate_cgroups; i++) {
                const struct regulated_cgroup *g = &conf->regulate_cgroups[i];
                if (g->budget_usec > 0)
                        printf("  %s: %.2f ms/s\n", g->pattern, (double) g->budget_usec / 1000);
                else
                        printf("  %s: not regulated\n", g->pattern);
        }
}

static void print_list(const char *title, const char *const *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                printf("%s %s\n", i == 0 ? title : " ", list[i]);
}

static void print_config(const struct configuration_snapshot *conf) {
        char a[FORMAT_USEC_MAX], b[FORMAT_USEC_MAX];
        static const char *const marks[] = { "high", "low", "min" };
        printf("%-9s %-54s %s\n", "LEVEL", "RAISED AT (PSI stall, or headroom)", "NODE: FREE <= FACTOR x WATERMARK");
        for (size_t i = 0; i < PROTOCOL_LEVELS; i++) {
                char th[128];
                describe_threshold(&conf->levels[i], th, sizeof(th));
                printf("%-9s %-54s %.2f x %s\n", level_to_string(conf->levels[i].level), th, conf->levels[i].node_factor,
                       marks[i]);
        }
        printf("\nA level falls after the figures stay below it for %s; scopes above ok are sampled every %s.\n",
               usec(conf->hold_usec, a, sizeof(a)), usec(conf->sample_interval_usec, b, sizeof(b)));
        printf("Reclaim rounds every %s; a shrinker has %s to answer a request.\n",
               usec(conf->round_interval_usec, a, sizeof(a)), usec(conf->request_timeout_usec, b, sizeof(b)));
        printf("Watched from start-up:");
        for (size_t i = 0; i < conf->n_cgroups; i++)
                printf(" %s", conf->cgroups[i]);
        printf("%s\n", conf->n_cgroups > 0 ? "" : " (no cgroup)");
        printf("systemd's memory pressure clients are told at %s; GLib's LowMemoryMonitor is %s.\n",
               level_to_string(conf->memory_pressure_level), conf->low_memory_monitor ? "served" : "off");
        print_regulator_config(conf);
        print_list("Proactive reclaim (memory.reclaim, within the budget above) of:", conf->reclaim_cgroups,
                   conf->n_reclaim_cgroups);
        print_list("Values compared across users in:", conf->value_cgroups, conf->n_value_cgroups);
}

static int cmd_config(void) {
        struct pressure_client *c;
        struct json_object *reply;
        struct configuration_snapshot conf;
        int r = connect_client(&c);
        if (r < 0)
                return -r;
        r = get_config(c, &reply, &conf);
        pressure_client_unref(c);
        if (r < 0)
                return -r;
        if (arg_json)
                print_json_line(reply);
        else
                print_config(&conf);
        protocol_configuration_done(&conf);
        json_object_put(reply);
        return EXIT_OK;
}

/* ---- status ---- */

static int status_all(void) {
        struct pressure_client *c;
        struct pressure_status *st;
        int r = connect_client(&c);
        if (r < 0)
                return -r;

        r = pressure_client_get_status(c, &st);
        if (r < 0) {
                r = report_error(c, "status", r);
                pressure_client_unref(c);
                return r;
        }

        if (arg_json)
                printf("%s\n", pressure_status_to_json(st));
        else {
                print_header();
                print_row(pressure_status_get_system(st));
                for (size_t i = 0; i < pressure_status_get_n_nodes(st); i++)
                        print_row(pressure_status_get_node(st, i));
                for (size_t i = 0; i < pressure_status_get_n_cgroups(st); i++)
                        print_row(pressure_status_get_cgroup(st, i));
                /* One column, three measures: each is what that kind of scope's limit is held against. */
                printf("\nUSED: the system's memory less what is available (what reclaim cannot take cheaply); a\n"
                       "node's memory less its free pages; a cgroup's usage, page cache included.\n");
        }
        pressure_status_unref(st);
        pressure_client_unref(c);
        return EXIT_OK;
}

/* status SCOPE...: one subscription per scope, for its first state (the daemon watches a scope while
 * someone subscribes), and each refusal names its scope. */
struct look {
        const char *name;
        struct pressure_subscription *sub;
        struct json_object *state; /* the first state, as sent */
        struct scope_snapshot snap; /* decoded from it, with the regulator's state from GetStatus */
        int error;
};

static void on_look_state(struct pressure_client *c, const struct pressure_scope *s, int is_initial, void *userdata) {
        struct look *l = userdata;
        (void) c;
        if (!is_initial || l->state)
                return;
        l->state = scope_json(s);
        if (!l->state || protocol_decode_scope_state(l->state, &l->snap) < 0)
                l->error = -EBADMSG;
}

static void on_look_end(struct pressure_subscription *s, int error, void *userdata) {
        struct look *l = userdata;
        (void) s;
        l->error = error < 0 ? error : -EPROTO;
}

static void print_look_memory(const struct scope_snapshot *st);
static void print_look_thresholds(const struct configuration_snapshot *conf, bool node);

static void print_look(const char *name, const struct scope_snapshot *st, const struct configuration_snapshot *conf) {
        char a[16];

        printf("%s\n", name);
        printf("  Level:      %s", level_to_string(st->level));
        if (st->level != LEVEL_OK)
                printf(" (source %s)", level_source_to_string(st->source));
        printf("\n");
        if (st->reason && st->reason[0])
                printf("  Why:        %s\n", st->reason);
        else if (st->level == LEVEL_OK)
                printf("  Why:        below every threshold\n");
        if (st->have_psi) {
                const struct psi_line *some = &st->psi.line[PSI_SOME], *full = &st->psi.line[PSI_FULL];
                printf("  Stall:      some %.2f%% %.2f%% %.2f%%", some->avg10, some->avg60, some->avg300);
                if (st->psi.has_full)
                        printf(", full %.2f%% %.2f%% %.2f%%", full->avg10, full->avg60, full->avg300);
                printf(" (avg10 avg60 avg300)\n");
        }
        print_look_memory(st);
        if (st->reclaim_target > 0)
                printf("  Target:     %s to free\n", bytes(st->reclaim_target, a, sizeof(a)));
        print_look_thresholds(conf, st->have_node_memory);
        if (st->have_regulation) {
                char words[512];
                regulation_words(&st->regulation, words, sizeof(words));
                printf("  Regulator:  %s\n", words);
        }
}

static void print_look_memory(const struct scope_snapshot *st) {
        char a[16], b[16], c[16], d[16], e[16];
        if (st->have_cgroup_memory) {
                printf("  Memory:     %s used", bytes(st->usage, a, sizeof(a)));
                if (st->limit != UINT64_MAX)
                        printf(", limit %s", bytes(st->limit, b, sizeof(b)));
                else
                        printf(", no limit of its own");
                printf("\n");
        }
        if (st->have_node_memory)
                printf("  Memory:     %s free of %s; watermarks min %s low %s high %s\n", bytes(st->node.free, a, sizeof(a)),
                       bytes(st->node.total, b, sizeof(b)), bytes(st->node.watermark_min, c, sizeof(c)),
                       bytes(st->node.watermark_low, d, sizeof(d)), bytes(st->node.watermark_high, e, sizeof(e)));
        if (st->have_headroom) {
                uint64_t limit = st->headroom_limit, unrecl = st->headroom_unreclaimable;
                uint64_t room = limit > unrecl ? limit - unrecl : 0;
                printf("  Headroom:   %s left of %s (%.1f%%)", bytes(room, a, sizeof(a)), bytes(limit, b, sizeof(b)),
                       limit ? 100.0 * (double) room / (double) limit : 0);
                if (st->headroom_cgroup)
                        printf(", under the limit of %s", st->headroom_cgroup);
                printf("; %s cannot be reclaimed cheaply\n", bytes(unrecl, c, sizeof(c)));
        } else if (st->have_cgroup_memory)
                printf("  Headroom:   no limit binds it\n");
}

static void print_look_thresholds(const struct configuration_snapshot *conf, bool node) {
        static const char *const marks[] = { "high", "low", "min" };
        for (size_t i = 0; i < PROTOCOL_LEVELS; i++) {
                char th[128];
                if (node)
                        snprintf(th, sizeof(th), "free <= %.2f x the %s watermark", conf->levels[i].node_factor, marks[i]);
                else
                        describe_threshold(&conf->levels[i], th, sizeof(th));
                printf("  %-11s %s\n", i == 0 ? "Thresholds:" : "", th);
        }
}

static int looks_subscribe(struct pressure_client *c, struct look *looks, char **scopes, size_t n);
static int looks_wait(struct pressure_client *c, struct look *looks, size_t n);
static void looks_print(struct look *looks, size_t n, struct json_object *conf_json,
                        const struct configuration_snapshot *conf);
static int call(struct pressure_client *c, const char *method, const char *params, struct json_object **ret);

/* A subscription's state has no regulator in it: GetStatus has, for the scopes the regulator follows.
 * *ret_all holds the strings the looks' regulation points into. */
static void looks_add_regulation(struct pressure_client *c, struct look *looks, size_t n, struct json_object **ret_all) {
        struct status_snapshot all;
        if (call(c, "io.pressured.GetStatus", NULL, ret_all) < 0)
                return; /* said; the rest is still worth printing */
        if (protocol_decode_status(*ret_all, &all) < 0) {
                (void) say_unreadable("GetStatus");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                const struct scope_snapshot *found = NULL;
                if (looks[i].snap.id.type == SCOPE_SYSTEM)
                        found = &all.system;
                for (size_t k = 0; looks[i].snap.id.type == SCOPE_CGROUP && !found && k < all.n_cgroups; k++)
                        if (streq(all.cgroups[k].id.cgroup, looks[i].snap.id.cgroup))
                                found = &all.cgroups[k];
                if (found && found->have_regulation) {
                        looks[i].snap.have_regulation = true;
                        looks[i].snap.regulation = found->regulation;
                }
        }
        protocol_status_done(&all);
}

static int status_scopes(char **scopes) {
        struct pressure_client *c;
        struct json_object *conf_json = NULL, *all = NULL;
        struct configuration_snapshot conf = {};
        size_t n = 0;
        int r = connect_client(&c);
        if (r < 0)
                return -r;
        while (scopes[n])
                n++;
        struct look *looks = calloc(n, sizeof(struct look));
        if (!looks) {
                pressure_client_unref(c);
                return EXIT_FAILED;
        }
        int code = looks_subscribe(c, looks, scopes, n);
        if (code == EXIT_OK)
                r = get_config(c, &conf_json, &conf);
        if (code == EXIT_OK && r < 0)
                code = -r;
        if (code == EXIT_OK)
                code = looks_wait(c, looks, n);
        if (code == EXIT_OK)
                looks_add_regulation(c, looks, n, &all);
        if (code == EXIT_OK)
                looks_print(looks, n, conf_json, &conf);
        for (size_t i = 0; i < n; i++) {
                pressure_subscription_unref(looks[i].sub);
                json_object_put(looks[i].state);
        }
        free(looks);
        protocol_configuration_done(&conf);
        json_object_put(conf_json);
        json_object_put(all);
        pressure_client_unref(c);
        return code;
}

/* One short subscription per scope: its first reply is the state. */
static int looks_subscribe(struct pressure_client *c, struct look *looks, char **scopes, size_t n) {
        int code = EXIT_OK;
        for (size_t i = 0; i < n && code == EXIT_OK; i++) {
                const char *one[] = { scopes[i], NULL };
                looks[i].name = scopes[i];
                int r = pressure_subscription_new(c, one, PRESSURE_LEVEL_LOW, on_look_state, &looks[i], &looks[i].sub);
                if (r == -EINVAL) {
                        fprintf(stderr, "pressurectl: %s: not a scope (use system, node:N or /cgroup/path)\n", scopes[i]);
                        code = EXIT_USAGE;
                } else if (r < 0)
                        code = report_error(c, scopes[i], r);
                else
                        (void) pressure_subscription_set_end_handler(looks[i].sub, on_look_end, &looks[i]);
        }
        return code;
}

/* Until every scope has its first state or its refusal. */
static int looks_wait(struct pressure_client *c, struct look *looks, size_t n) {
        int code = EXIT_OK, r;
        for (;;) {
                size_t waiting = 0;
                for (size_t i = 0; i < n && code == EXIT_OK; i++) {
                        if (looks[i].error == -EBADMSG)
                                code = say_unreadable("Subscribe");
                        else if (looks[i].error) {
                                say_scope_refused(looks[i].name, looks[i].error);
                                code = EXIT_FAILED;
                        }
                        waiting += !looks[i].state && !looks[i].error;
                }
                if (code != EXIT_OK || waiting == 0)
                        break;
                struct pollfd pfd = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                r = poll(&pfd, 1, 10000);
                if (r == 0) {
                        code = report_unreachable(c, -ETIMEDOUT);
                        break;
                }
                r = pressure_client_dispatch(c);
                if (r < 0 && unreachable(r)) {
                        code = report_unreachable(c, r);
                        break;
                }
                if (!pressure_client_is_connected(c) && last_log[0] && strstr(last_log, "trying again")) {
                        fprintf(stderr, "pressurectl: %s\n", last_log);
                        code = EXIT_UNREACHABLE;
                        break;
                }
        }
        return code;
}

/* --json: each state as the codec writes it (the regulator's state included), and the configuration as
 * the daemon sent it. */
static void looks_print(struct look *looks, size_t n, struct json_object *conf_json,
                        const struct configuration_snapshot *conf) {
        if (arg_json) {
                struct json_object *o = json_object_new_object(), *list = json_object_new_array();
                for (size_t i = 0; i < n; i++)
                        json_object_array_add(list, protocol_encode_scope_state(&looks[i].snap));
                json_object_object_add(o, "scopes", list);
                json_object_object_add(o, "configuration", json_object_get(conf_json));
                print_json_line(o);
                json_object_put(o);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        printf("\n");
                print_look(looks[i].name, &looks[i].snap, conf);
        }
}

static int cmd_status(char **scopes) {
        return *scopes ? status_scopes(scopes) : status_all();
}

/* ---- watch ---- */

/* --exec: children still running, reaped as the loop goes; a command slower than the changes it is run
 * for is not started again and again, one at most per scope is enough for a shell script. */
#define EXEC_MAX 16
static unsigned exec_running;

static void reap_children(void) {
        while (exec_running > 0 && waitpid(-1, NULL, WNOHANG) > 0)
                exec_running--;
}

static void run_exec(const char *scope, const char *event, const char *level, const char *previous, const char *source,
                     uint64_t target) {
        if (!arg_exec)
                return;
        reap_children();
        if (exec_running >= EXEC_MAX) {
                fprintf(stderr, "pressurectl: %u commands still running, not starting another for %s\n", exec_running,
                        scope);
                return;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
                fprintf(stderr, "pressurectl: cannot start --exec command: %s\n", strerror(errno));
                return;
        }
        if (pid == 0) {
                char t[32];
                snprintf(t, sizeof(t), "%" PRIu64, target);
                setenv("PRESSURE_SCOPE", scope, 1);
                setenv("PRESSURE_EVENT", event, 1);
                setenv("PRESSURE_LEVEL", level ? level : "", 1);
                setenv("PRESSURE_PREVIOUS_LEVEL", previous ? previous : "", 1);
                setenv("PRESSURE_SOURCE", source ? source : "", 1);
                setenv("PRESSURE_RECLAIM_TARGET", t, 1);
                execl("/bin/sh", "sh", "-c", arg_exec, (char *) NULL);
                _exit(127);
        }
        exec_running++;
}

static void on_event(struct pressure_client *c, const struct pressure_scope *s, int is_initial, void *userdata) {
        (void) c;
        (void) userdata;
        const char *source = pressure_scope_get_source(s);
        const char *level = pressure_level_to_string(pressure_scope_get_level(s));
        const char *previous = pressure_level_to_string(pressure_scope_get_previous_level(s));
        char when[48];

        if (!is_initial && !pressure_scope_is_removed(s))
                run_exec(pressure_scope_get_name(s), "level", level, previous, source, pressure_scope_get_reclaim_target(s));

        if (arg_json) {
                struct json_object *o = json_object_new_object(), *e = scope_json(s);
                /* An initial state's time is now; a change's is when the daemon saw it. */
                wall_time(is_initial ? 0 : pressure_scope_get_timestamp(s), when, sizeof(when));
                json_object_object_add(o, "time", json_object_new_string(when));
                json_object_object_add(o, "initial", json_object_new_boolean(is_initial));
                json_object_object_add(o, "event", e);
                print_json_line(o);
                json_object_put(o);
                return;
        }

        char target[16];
        time_t t = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
        bytes(pressure_scope_get_reclaim_target(s), target, sizeof(target));

        struct pressure_stall some;
        char psi[48] = "";
        if (pressure_scope_get_stall(s, PRESSURE_STALL_SOME, &some) >= 0)
                snprintf(psi, sizeof(psi), " some avg10=%.2f%%", some.avg10);
        uint64_t limit, room;
        double pct;
        char why[96] = "";
        if (source && strcmp(source, "headroom") == 0 && scope_room(s, &limit, &room, &pct)) {
                char b[16];
                snprintf(why, sizeof(why), " source=headroom headroom=%.1f%% (%s left)", pct, bytes(room, b, sizeof(b)));
        } else if (source)
                snprintf(why, sizeof(why), " source=%s", source);

        if (is_initial)
                printf("%s %s %s (current)%s%s\n", when, pressure_scope_get_name(s), level, psi, why);
        else if (pressure_scope_is_removed(s))
                printf("%s %s removed\n", when, pressure_scope_get_name(s));
        else
                printf("%s %s %s -> %s%s%s reclaim-target=%s\n", when, pressure_scope_get_name(s), previous, level, psi,
                       why, target);
}

/* The kernel killed in a watched cgroup, or it hit its memory.max: always shown, whatever the level. */
static void on_memory_event(struct pressure_client *c, const char *scope, const char *kind, uint64_t count,
                            void *userdata) {
        (void) c;
        (void) userdata;
        char when[48];
        run_exec(scope, kind, NULL, NULL, NULL, 0);
        if (arg_json) {
                struct json_object *o = json_object_new_object(), *e = json_object_new_object();
                wall_time(0, when, sizeof(when));
                json_object_object_add(o, "time", json_object_new_string(when));
                json_object_object_add(e, "cgroup", json_object_new_string(scope));
                json_object_object_add(e, "kind", json_object_new_string(kind));
                json_object_object_add(e, "count", json_object_new_int64((int64_t) count));
                json_object_object_add(o, "memory_event", e);
                print_json_line(o);
                json_object_put(o);
                return;
        }
        time_t t = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
        printf("%s %s %s x%" PRIu64 "%s\n", when, scope, kind, count,
               strcmp(kind, "oom_kill") == 0 ? " (the kernel's OOM killer killed in this cgroup; pressured's log names the process)" : "");
}

/* watch ends when a subscription does (refused, or its scopes removed) or the daemon goes away. */
static int watch_exit = -1;

static void on_watch_end(struct pressure_subscription *s, int error, void *userdata) {
        (void) s;
        say_scope_refused(userdata, error);
        watch_exit = EXIT_FAILED;
}

static void on_watch_connection(struct pressure_client *c, int connected, void *userdata) {
        (void) userdata;
        if (connected)
                return;
        if (last_log[0]) {
                /* The library's own words ("... is shutting down; trying again"): watch does not wait. */
                char *cut = strstr(last_log, "; trying again");
                if (cut)
                        *cut = 0;
                fprintf(stderr, "pressurectl: %s\n", last_log);
                watch_exit = EXIT_UNREACHABLE;
        } else
                watch_exit = report_unreachable(c, -ECONNRESET);
}

static int cmd_watch(char **scopes) {
        static char *const system_only[] = { (char *) "system", NULL };
        struct pressure_client *c;
        size_t n = 0;
        int r = connect_client(&c);
        if (r < 0)
                return -r;
        if (!*scopes)
                scopes = (char **) system_only;
        while (scopes[n])
                n++;

        setvbuf(stdout, NULL, _IOLBF, 0);
        (void) pressure_client_set_memory_event_handler(c, on_memory_event, NULL);
        (void) pressure_client_set_connection_handler(c, on_watch_connection, NULL);
        /* One subscription per scope: a refusal names its scope. */
        struct pressure_subscription **subs = calloc(n, sizeof(*subs));
        if (!subs) {
                pressure_client_unref(c);
                return EXIT_FAILED;
        }
        for (size_t i = 0; i < n && watch_exit < 0; i++) {
                const char *one[] = { scopes[i], NULL };
                r = pressure_subscription_new(c, one, arg_min_level, on_event, NULL, &subs[i]);
                if (r == -EINVAL) {
                        fprintf(stderr, "pressurectl: %s: not a scope (use system, node:N or /cgroup/path)\n", scopes[i]);
                        watch_exit = EXIT_USAGE;
                } else if (r < 0)
                        watch_exit = report_error(c, scopes[i], r);
                else
                        (void) pressure_subscription_set_end_handler(subs[i], on_watch_end, scopes[i]);
        }

        while (watch_exit < 0) {
                struct pollfd p = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                /* With --exec, wake now and then to reap the commands that ended. */
                if (poll(&p, 1, exec_running > 0 ? 1000 : -1) < 0 && errno != EINTR)
                        break;
                reap_children();
                (void) pressure_client_dispatch(c);
        }
        for (size_t i = 0; i < n; i++)
                pressure_subscription_unref(subs[i]);
        free(subs);
        pressure_client_unref(c);
        return watch_exit < 0 ? EXIT_FAILED : watch_exit;
}

/* A daemon's error in words, naming what it is about. */
static void say_error(const char *method, const char *error) {
        if (strcmp(error, "io.pressured.NoSuchShrinker") == 0)
                fprintf(stderr, "pressurectl: no shrinker with id %lld (see pressurectl shrinkers)\n", arg_shrinker);
        else if (strcmp(error, "io.pressured.NoSuchCgroup") == 0)
                say_scope_refused(arg_cgroup ? arg_cgroup : "cgroup", -ENOENT);
        else if (strcmp(error, "io.pressured.NoSuchNode") == 0) {
                char node[32];
                snprintf(node, sizeof(node), "node:%ld", arg_node);
                say_scope_refused(node, -ENXIO);
        } else if (strcmp(error, "org.varlink.service.MethodNotFound") == 0)
                fprintf(stderr, "pressurectl: this pressured does not know %s (older than this pressurectl?)\n", method);
        else if (strcmp(error, "org.varlink.service.InvalidParameter") == 0)
                fprintf(stderr, "pressurectl: pressured refused a parameter of %s\n", method);
        else
                fprintf(stderr, "pressurectl: pressured refused %s: %s\n", method, error);
}

/* Call a method; on failure print why and return the exit code (as a negative number). */
static int call(struct pressure_client *c, const char *method, const char *params, struct json_object **ret) {
        char *reply = NULL, *error = NULL;
        int r = pressure_client_call_json(c, method, params, &reply, &error);
        if (r < 0) {
                if (r == -EPERM)
                        fprintf(stderr, "pressurectl: permission denied: only root, or the owner of the shrinker named with --shrinker, may shrink\n");
                else if (error)
                        say_error(method + strlen("io.pressured."), error);
                else
                        return -report_error(c, method, r);
                free(error);
                return -EXIT_FAILED;
        }
        *ret = json_tokener_parse(reply);
        free(reply);
        return *ret ? 0 : -EXIT_FAILED;
}

/* COUNTED/NODE: each node's last count, "-" before the first (a 0 would read as an empty cache). A dry
 * run counts without scanning: its counts show. */
/* COUNTED/NODE: each node's last count, or "-" before any. */
static void shrinker_counts(const struct shrinker_info_snapshot *sh, char *buf, size_t size) {
        bool counted = sh->stats.calls > 0;
        size_t off = 0;
        for (size_t k = 0; k < sh->n_nodes; k++)
                counted = counted || sh->nodes[k].objects > 0;
        snprintf(buf, size, "-");
        for (size_t k = 0; counted && k < sh->n_nodes && off < size; k++)
                off += (size_t) snprintf(buf + off, size - off, "%s%d:%" PRIu64, k ? " " : "", sh->nodes[k].node,
                                         sh->nodes[k].objects);
}

/* FLAGS: N for numa_aware, M for memcg_aware. */
static void shrinker_flags(const struct shrinker_info_snapshot *sh, char *buf, size_t size) {
        snprintf(buf, size, "%s%s", sh->flags & SHRINKER_NUMA_AWARE ? "N" : "", sh->flags & SHRINKER_MEMCG_AWARE ? "M" : "");
        if (!buf[0])
                snprintf(buf, size, "-");
}

/* What its last counts said one more MiB would save (the largest over its nodes), or "-". */
static void shrinker_value(const struct shrinker_info_snapshot *sh, char *buf, size_t size) {
        double best = 0;
        for (size_t k = 0; k < sh->n_nodes; k++)
                best = MAX(best, sh->nodes[k].value);
        if (best > 0)
                snprintf(buf, size, "%.3g", best);
        else
                snprintf(buf, size, "-");
}

static void print_shrinker(const struct shrinker_info_snapshot *sh, int name_w, int cgroup_w) {
        char objs[256], fl[32], claimed[32], released[32], trust[16], for_pid[16] = "-", limit[32] = "-", value[32];
        shrinker_counts(sh, objs, sizeof(objs));
        shrinker_flags(sh, fl, sizeof(fl));
        shrinker_value(sh, value, sizeof(value));
        if (sh->for_pid > 0)
                snprintf(for_pid, sizeof(for_pid), "%d", (int) sh->for_pid);
        snprintf(trust, sizeof(trust), "%u%%", sh->client_trust / 10);
        bytes(sh->client_claimed_bytes, claimed, sizeof(claimed));
        bytes(sh->client_released_bytes, released, sizeof(released));
        if (sh->limit > 0)
                bytes(sh->limit, limit, sizeof(limit));
        printf("%-5" PRIu64 " %-*s %-7d %-7s %-*s %-5s %-20s %10" PRIu64 " %8" PRIu64 " %9s %9s %6s %8s %8s %-11s\n", sh->id,
               name_w, sh->name, (int) sh->pid, for_pid, cgroup_w, sh->cgroup, fl, objs, sh->stats.freed, sh->stats.timeouts,
               claimed, released, trust, limit, value, sh->quarantined ? "quarantined" : "active");
}

static const char *regulated_scope(const struct shrinker_info_snapshot *sh) {
        return sh->regulation.cgroup ?: "system";
}

/* The regulator, once per scope that holds a client back. */
static void print_regulators(const struct shrinker_info_snapshot *list, size_t n) {
        bool header = false;
        for (size_t i = 0; i < n; i++) {
                bool seen = false;
                for (size_t k = 0; list[i].have_regulation && k < i && !seen; k++)
                        seen = list[k].have_regulation && streq(regulated_scope(&list[k]), regulated_scope(&list[i]));
                if (!list[i].have_regulation || seen)
                        continue;
                char words[512];
                regulation_words(&list[i].regulation, words, sizeof(words));
                if (!header)
                        printf("\nREGULATOR (where it holds the clients above):\n");
                header = true;
                printf("  %s: %s\n", regulated_scope(&list[i]), words);
        }
}

static void print_shrinkers(const struct shrinker_info_snapshot *list, size_t n) {
        /* CLAIMED, RELEASED and TRUST are the client's: what it said it freed, how far its resident memory
         * fell around the rounds that asked it, and how much of its claims counts towards goals. LIMIT is
         * the shrinker's share of the regulator's growth limit (told to it if it takes limits). VALUE is what
         * its last count said one more MiB of it would save (miss cost per second). FOR is the
         * process an adapter serves for. NAME and CGROUP are as wide as their longest (a 30-character
         * adapter name shifted every column). */
        int name_w = (int) strlen("NAME"), cgroup_w = (int) strlen("CGROUP");
        for (size_t i = 0; i < n; i++) {
                name_w = MAX(name_w, (int) strlen(list[i].name));
                cgroup_w = MAX(cgroup_w, (int) strlen(list[i].cgroup));
        }
        printf("%-5s %-*s %-7s %-7s %-*s %-5s %-20s %10s %8s %9s %9s %6s %8s %8s %-11s\n", "ID", name_w, "NAME", "PID", "FOR",
               cgroup_w, "CGROUP", "FLAGS", "COUNTED/NODE", "FREED", "TIMEOUTS", "CLAIMED", "RELEASED", "TRUST", "LIMIT",
               "VALUE", "STATE");
        for (size_t i = 0; i < n; i++)
                print_shrinker(&list[i], name_w, cgroup_w);
        print_regulators(list, n);
}

static int cmd_shrinkers(void) {
        struct pressure_client *c;
        struct json_object *reply;
        struct shrinker_info_snapshot *list;
        size_t n;
        int r = connect_client(&c);
        if (r < 0)
                return -r;
        r = call(c, "io.pressured.ListShrinkers", NULL, &reply);
        pressure_client_unref(c);
        if (r < 0)
                return -r;
        if (arg_json)
                print_json_line(reply);
        else if (protocol_decode_shrinkers_reply(reply, &list, &n) < 0)
                r = -say_unreadable("ListShrinkers");
        else {
                print_shrinkers(list, n);
                protocol_shrinker_infos_free(list, n);
        }
        json_object_put(reply);
        return -r;
}

/* Shrink's parameters from the options. */
static void shrink_params(struct json_object *params) {
        if (arg_cgroup || arg_node >= 0) {
                struct json_object *scope = json_object_new_object();
                json_object_object_add(scope, "type", json_object_new_string(arg_cgroup ? "cgroup" : "node"));
                if (arg_cgroup)
                        json_object_object_add(scope, "cgroup", json_object_new_string(arg_cgroup));
                else
                        json_object_object_add(scope, "node", json_object_new_int((int) arg_node));
                json_object_object_add(params, "scope", scope);
        }
        if (arg_nr > 0)
                json_object_object_add(params, "nr_to_scan", json_object_new_int64(arg_nr));
        if (arg_dry_run)
                json_object_object_add(params, "dry_run", json_object_new_boolean(true));
        if (arg_shrinker > 0)
                json_object_object_add(params, "shrinker", json_object_new_int64(arg_shrinker));
}

static void print_shrink_results(const struct shrink_result *list, size_t n);

static int cmd_shrink(void) {
        struct pressure_client *c;
        struct json_object *params = json_object_new_object(), *reply;

        if (arg_cgroup && arg_node >= 0) {
                fprintf(stderr, "pressurectl: --cgroup and --node exclude each other\n");
                json_object_put(params);
                return EXIT_USAGE;
        }
        /* Like the kernel's debugfs scan, a number is needed: emptying every cache is said, not assumed. */
        if ((arg_nr > 0) + arg_all + arg_dry_run != 1) {
                fprintf(stderr, "pressurectl: shrink needs one of --nr=N (objects per shrinker), --all (everything "
                                "they count) or --dry-run (count only)\n");
                json_object_put(params);
                return EXIT_USAGE;
        }
        shrink_params(params);
        int r = connect_client(&c);
        if (r < 0) {
                json_object_put(params);
                return -r;
        }
        /* A scan pass may wait for slow clients: allow for a few deadlines. */
        pressure_client_set_timeout(c, 30000);
        r = call(c, "io.pressured.Shrink", json_object_to_json_string(params), &reply);
        json_object_put(params);
        pressure_client_unref(c);
        if (r < 0)
                return -r;

        struct shrink_result *results;
        size_t n;
        if (arg_json)
                print_json_line(reply);
        else if (protocol_decode_shrink_reply(reply, &results, &n) < 0)
                r = -say_unreadable("Shrink");
        else {
                print_shrink_results(results, n);
                free(results);
        }
        json_object_put(reply);
        return -r;
}

static void print_shrink_result(const struct shrink_result *x, int name_w, int cgroup_w) {
        const char *note = x->timed_out ? "timed out" : x->stopped ? "stopped" : x->quarantined ? "quarantined" : x->empty ? "empty" : "";
        if (arg_dry_run && !x->have_count && !*note)
                note = "did not count";
        if (arg_dry_run)
                printf("%-5" PRIu64 " %-*s %-5d %-*s %10" PRIu64 "  %s\n", x->shrinker, name_w, x->name, x->node, cgroup_w,
                       x->cgroup, x->count, note);
        else
                printf("%-5" PRIu64 " %-*s %-5d %-*s %10" PRIu64 " %10" PRIu64 "  %s\n", x->shrinker, name_w, x->name, x->node,
                       cgroup_w, x->cgroup, x->scanned, x->freed, note);
}

static void print_shrink_results(const struct shrink_result *list, size_t n) {
        uint64_t scanned = 0, freed = 0, counted = 0; /* sums over the results */
        int name_w = (int) strlen("NAME"), cgroup_w = (int) strlen("CGROUP");
        for (size_t i = 0; i < n; i++) {
                name_w = MAX(name_w, (int) strlen(list[i].name));
                cgroup_w = MAX(cgroup_w, (int) strlen(list[i].cgroup));
        }
        /* A dry run frees nothing: it has no FREED column. */
        if (arg_dry_run)
                printf("%-5s %-*s %-5s %-*s %10s  %s\n", "ID", name_w, "NAME", "NODE", cgroup_w, "CGROUP", "COUNTED", "NOTE");
        else
                printf("%-5s %-*s %-5s %-*s %10s %10s  %s\n", "ID", name_w, "NAME", "NODE", cgroup_w, "CGROUP", "SCANNED",
                       "FREED", "NOTE");
        for (size_t i = 0; i < n; i++) {
                print_shrink_result(&list[i], name_w, cgroup_w);
                counted += list[i].count;
                scanned += list[i].scanned;
                freed += list[i].freed;
        }
        if (arg_dry_run)
                printf("dry run: %zu shrinker job%s counted %" PRIu64 " objects; nothing was freed\n", n, n == 1 ? "" : "s",
                       counted);
        else
                printf("scanned %" PRIu64 ", freed %" PRIu64 " objects\n", scanned, freed);
}

static int parse_number(const char *s, long long min, long long max, long long *ret) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int usage(const char *message) {
        fprintf(stderr, "pressurectl: %s\n", message);
        return EXIT_USAGE;
}

/* Options into the arg_* globals. Returns 0 to go on, -1 after --help (nothing more to do), or
 * EXIT_USAGE. */
/* An option's value that is a level or a number: 0, or what usage() returns. */
static int parse_value(const char *option, const char *value) {
        long long v;
        if (streq(option, "min-level")) {
                int l = pressure_level_from_string(value);
                if (l <= PRESSURE_LEVEL_OK)
                        return usage("--min-level takes low, medium or critical");
                arg_min_level = l;
                arg_min_level_set = true;
        } else if (streq(option, "node")) {
                if (parse_number(value, 0, INT_MAX, &v) < 0)
                        return usage("--node takes a node number");
                arg_node = (long) v;
        } else if (streq(option, "nr")) {
                if (parse_number(value, 1, INT64_MAX, &v) < 0)
                        return usage("--nr takes a positive number");
                arg_nr = v;
        } else {
                if (parse_number(value, 1, INT64_MAX, &v) < 0)
                        return usage("--shrinker takes a shrinker id");
                arg_shrinker = v;
        }
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_CGROUP = 0x100, ARG_NODE, ARG_NR, ARG_SHRINKER, ARG_VERSION, ARG_ALL, ARG_DRY_RUN, ARG_EXEC };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "socket", required_argument, NULL, 's' },
                { "min-level", required_argument, NULL, 'l' },
                { "cgroup", required_argument, NULL, ARG_CGROUP },
                { "node", required_argument, NULL, ARG_NODE },
                { "nr", required_argument, NULL, ARG_NR },
                { "shrinker", required_argument, NULL, ARG_SHRINKER },
                { "version", no_argument, NULL, ARG_VERSION },
                { "all", no_argument, NULL, ARG_ALL },
                { "dry-run", no_argument, NULL, ARG_DRY_RUN },
                { "exec", required_argument, NULL, ARG_EXEC },
                {},
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "hjs:l:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return -1;
                case ARG_VERSION:
                        printf("pressurectl %s\n", PRESSURED_VERSION);
                        return -1;
                case ARG_ALL:
                        arg_all = true;
                        break;
                case ARG_DRY_RUN:
                        arg_dry_run = true;
                        break;
                case ARG_EXEC:
                        arg_exec = optarg;
                        break;
                case 'j':
                        arg_json = 1;
                        break;
                case 's':
                        arg_socket = optarg;
                        break;
                case ARG_CGROUP:
                        arg_cgroup = optarg;
                        break;
                case 'l':
                case ARG_NODE:
                case ARG_NR:
                case ARG_SHRINKER:
                        r = parse_value(c == 'l' ? "min-level" : c == ARG_NODE ? "node" : c == ARG_NR ? "nr" : "shrinker", optarg);
                        if (r != 0)
                                return r;
                        break;
                default:
                        return EXIT_USAGE;
                }
        return 0;
}

/* Which options each command takes: one given to a command that would ignore it is refused. */
static int check_options(const char *cmd) {
        bool watch = strcmp(cmd, "watch") == 0, shrink = strcmp(cmd, "shrink") == 0;
        if (arg_min_level_set && !watch)
                return usage("--min-level is for watch");
        if (arg_exec && !watch)
                return usage("--exec is for watch");
        if ((arg_cgroup || arg_node >= 0 || arg_nr > 0 || arg_all || arg_dry_run || arg_shrinker > 0) && !shrink)
                return usage("--cgroup, --node, --nr, --all, --dry-run and --shrinker are for shrink");
        return 0;
}

static int run_command(const char *cmd, char **args) {
        static const char *const commands[] = { "status", "watch", "config", "shrinkers", "shrink" };
        bool known = false;
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                known = known || strcmp(cmd, commands[i]) == 0;
        if (!known) {
                fprintf(stderr, "pressurectl: unknown command \"%s\"; see --help\n", cmd);
                return EXIT_USAGE;
        }
        int r = check_options(cmd);
        if (r != 0)
                return r;
        if (strcmp(cmd, "watch") == 0)
                return cmd_watch(args);
        if (strcmp(cmd, "status") == 0)
                return cmd_status(args);
        if (*args) {
                fprintf(stderr, "pressurectl: %s takes no arguments\n", cmd);
                return EXIT_USAGE;
        }
        if (strcmp(cmd, "config") == 0)
                return cmd_config();
        return strcmp(cmd, "shrinkers") == 0 ? cmd_shrinkers() : cmd_shrink();
}

int main(int argc, char *argv[]) {
        int r = parse_argv(argc, argv);
        if (r != 0)
                return r < 0 ? EXIT_OK : r;
        if (optind >= argc)
                return usage("missing command (status, config, watch, shrinkers, shrink); see --help");
        return run_command(argv[optind], argv + optind + 1);
}
