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
#include <time.h>

#include "pressure-private.h"

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
static const char *arg_cgroup = NULL;
static long arg_node = -1;
static long long arg_nr = 0;
static long long arg_shrinker = 0;

static void help(void) {
        printf("Usage: pressurectl [OPTIONS] COMMAND\n"
               "\n"
               "Commands:\n"
               "  status                 Level and pressure of the system, each NUMA node and each\n"
               "                         watched cgroup\n"
               "  watch [SCOPE...]       Print one line per level change as it happens. A SCOPE is\n"
               "                         \"system\" (default), \"node:N\" or a cgroup v2 path\n"
               "  shrinkers              Registered client shrinkers: objects per node, freed, state\n"
               "  shrink                 Run one scan pass now (root, or the owner of --shrinker)\n"
               "\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "  -j --json              Print JSON (one object per line for watch)\n"
               "  -s --socket=PATH       Talk to the daemon on PATH\n"
               "  -l --min-level=LEVEL   watch: report changes reaching LEVEL (low, medium, critical)\n"
               "     --cgroup=PATH       shrink: shrinkers of this cgroup's subtree (MEMCG_AWARE ones)\n"
               "     --node=N            shrink: NUMA_AWARE shrinkers, for node N\n"
               "     --nr=N              shrink: scan N objects per shrinker (default: all they count)\n"
               "     --shrinker=ID       shrink: only this shrinker\n"
               "\n"
               "Exit status: 0 success, 1 daemon unreachable, 2 usage error, 3 the daemon refused.\n");
}

static void format_bytes(uint64_t b, char *buf, size_t size) {
        static const char *const units[] = { "B", "K", "M", "G", "T" };
        double v = (double) b;
        size_t u = 0;
        while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
                v /= 1024;
                u++;
        }
        snprintf(buf, size, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
}

static int connect_client(struct pressure_client **ret) {
        int r = pressure_client_new(arg_socket, ret);
        if (r < 0) {
                fprintf(stderr, "pressurectl: %s\n", strerror(-r));
                return -EXIT_FAILED;
        }
        return 0;
}

/* Errors that mean the daemon is not there, or went. */
static bool unreachable(int r) {
        return r == -ENOENT || r == -ECONNREFUSED || r == -ENOTCONN || r == -ECONNRESET || r == -ETIMEDOUT ||
               r == -EPIPE;
}

static int report_unreachable(struct pressure_client *c, int r) {
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

static void print_row(const struct pressure_scope *s) {
        struct pressure_stall some, full;
        char c1[16] = "-", c2[16] = "-", c3[16] = "-", c4[16] = "-", mem[48] = "-";
        uint64_t total, free_b;

        if (pressure_scope_get_stall(s, PRESSURE_STALL_SOME, &some) >= 0) {
                snprintf(c1, sizeof(c1), "%.2f", some.avg10);
                snprintf(c2, sizeof(c2), "%.2f", some.avg60);
                snprintf(c3, sizeof(c3), "%.2f", some.avg300);
        }
        if (pressure_scope_get_stall(s, PRESSURE_STALL_FULL, &full) >= 0)
                snprintf(c4, sizeof(c4), "%.2f", full.avg10);
        if (pressure_scope_get_memory(s, &total, &free_b) >= 0) {
                char a[16], b[16];
                format_bytes(free_b, a, sizeof(a));
                format_bytes(total, b, sizeof(b));
                snprintf(mem, sizeof(mem), "%s/%s", a, b);
        }
        /* Where a limit binds: the share of it that reclaim cannot take cheaply. */
        uint64_t limit, unreclaimable;
        char headroom[32] = "-";
        if (pressure_scope_get_headroom(s, &limit, &unreclaimable) >= 0 && limit > 0)
                snprintf(headroom, sizeof(headroom), "%.1f%%", 100.0 * (double) unreclaimable / (double) limit);
        const char *source = pressure_scope_get_source(s);
        printf("%-24s %-9s %-9s %7s %7s %7s %7s %8s  %s\n", pressure_scope_get_name(s),
               pressure_level_to_string(pressure_scope_get_level(s)), source ? source : "-", c1, c2, c3, c4, headroom,
               mem);
}

static int cmd_status(void) {
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
                printf("%-24s %-9s %-9s %7s %7s %7s %7s %8s  %s\n", "SCOPE", "LEVEL", "SOURCE", "SOME10", "SOME60",
                       "SOME300", "FULL10", "HEADROOM", "FREE/TOTAL");
                print_row(pressure_status_get_system(st));
                for (size_t i = 0; i < pressure_status_get_n_nodes(st); i++)
                        print_row(pressure_status_get_node(st, i));
                for (size_t i = 0; i < pressure_status_get_n_cgroups(st); i++)
                        print_row(pressure_status_get_cgroup(st, i));
        }
        pressure_status_unref(st);
        pressure_client_unref(c);
        return EXIT_OK;
}

static void on_event(struct pressure_client *c, const struct pressure_scope *s, int is_initial, void *userdata) {
        (void) c;
        (void) userdata;

        if (arg_json) {
                printf("{\"initial\":%s,\"event\":%s}\n", is_initial ? "true" : "false", pressure_scope_to_json(s));
                return;
        }

        char when[32], target[16];
        time_t t = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
        format_bytes(pressure_scope_get_reclaim_target(s), target, sizeof(target));

        struct pressure_stall some;
        char psi[48] = "";
        if (pressure_scope_get_stall(s, PRESSURE_STALL_SOME, &some) >= 0)
                snprintf(psi, sizeof(psi), " some avg10=%.2f", some.avg10);
        uint64_t limit, unreclaimable;
        const char *source = pressure_scope_get_source(s);
        char why[96] = "";
        if (source && strcmp(source, "headroom") == 0 &&
            pressure_scope_get_headroom(s, &limit, &unreclaimable) >= 0 && limit > 0)
                snprintf(why, sizeof(why), " headroom=%.1f%%", 100.0 * (double) unreclaimable / (double) limit);
        else if (source)
                snprintf(why, sizeof(why), " source=%s", source);

        if (is_initial)
                printf("%s %s %s (current)%s\n", when, pressure_scope_get_name(s),
                       pressure_level_to_string(pressure_scope_get_level(s)), psi);
        else if (pressure_scope_is_removed(s))
                printf("%s %s removed\n", when, pressure_scope_get_name(s));
        else
                printf("%s %s %s -> %s%s%s reclaim-target=%s\n", when, pressure_scope_get_name(s),
                       pressure_level_to_string(pressure_scope_get_previous_level(s)),
                       pressure_level_to_string(pressure_scope_get_level(s)), psi, why, target);
}

/* The kernel killed in a watched cgroup, or it hit its memory.max: always shown, whatever the level. */
static void on_memory_event(struct pressure_client *c, const char *scope, const char *kind, uint64_t count,
                            void *userdata) {
        (void) c;
        (void) userdata;
        if (arg_json) {
                struct json_object *o = json_object_new_object(), *e = json_object_new_object();
                json_object_object_add(e, "cgroup", json_object_new_string(scope));
                json_object_object_add(e, "kind", json_object_new_string(kind));
                json_object_object_add(e, "count", json_object_new_int64((int64_t) count));
                json_object_object_add(o, "memory_event", e);
                printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(o);
                return;
        }
        char when[32];
        time_t t = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
        printf("%s %s %s x%" PRIu64 "%s\n", when, scope, kind, count,
               strcmp(kind, "oom_kill") == 0 ? " (the kernel's OOM killer killed in this cgroup)" : "");
}

/* watch ends when the subscription does (refused, or its scopes removed) or the daemon goes away. */
static int watch_exit = -1;

static void on_watch_end(struct pressure_subscription *s, int error, void *userdata) {
        (void) s;
        (void) userdata;
        if (error == -ENOENT)
                fprintf(stderr, "pressurectl: no such cgroup, or it was removed\n");
        else if (error == -ENXIO)
                fprintf(stderr, "pressurectl: no such NUMA node\n");
        else if (error == -EACCES)
                fprintf(stderr, "pressurectl: pressured may not watch that cgroup for you\n");
        else if (error == -EDQUOT)
                fprintf(stderr, "pressurectl: you have pressured watch as many cgroups as one user may\n");
        else
                fprintf(stderr, "pressurectl: subscription ended: %s\n", strerror(-error));
        watch_exit = EXIT_FAILED;
}

static void on_watch_connection(struct pressure_client *c, int connected, void *userdata) {
        (void) userdata;
        if (!connected)
                watch_exit = report_unreachable(c, -ECONNRESET);
}

static int cmd_watch(char **scopes) {
        struct pressure_client *c;
        struct pressure_subscription *sub;
        int r = connect_client(&c);
        if (r < 0)
                return -r;

        setvbuf(stdout, NULL, _IOLBF, 0);
        (void) pressure_client_set_memory_event_handler(c, on_memory_event, NULL);
        (void) pressure_client_set_connection_handler(c, on_watch_connection, NULL);
        r = pressure_subscription_new(c, (const char *const *) scopes, arg_min_level, on_event, NULL, &sub);
        if (r == -EINVAL) {
                pressure_client_unref(c);
                fprintf(stderr, "pressurectl: invalid scope (use system, node:N or /cgroup/path)\n");
                return EXIT_USAGE;
        }
        if (r < 0) {
                r = report_error(c, "subscribe", r);
                pressure_client_unref(c);
                return r;
        }
        (void) pressure_subscription_set_end_handler(sub, on_watch_end, NULL);

        while (watch_exit < 0) {
                struct pollfd p = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        break;
                (void) pressure_client_dispatch(c);
        }
        pressure_subscription_unref(sub);
        pressure_client_unref(c);
        return watch_exit < 0 ? EXIT_FAILED : watch_exit;
}

static struct json_object *jget(struct json_object *o, const char *key) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* Call a method; on failure print why and return the exit code (as a negative number). */
static int call(struct pressure_client *c, const char *method, const char *params, struct json_object **ret) {
        char *reply = NULL, *error = NULL;
        int r = pressure_client_call_json(c, method, params, &reply, &error);
        if (r < 0) {
                if (r == -EPERM)
                        fprintf(stderr, "pressurectl: permission denied: only root, or the owner of the shrinker named with --shrinker, may shrink\n");
                else if (error)
                        fprintf(stderr, "pressurectl: the daemon answered %s\n", error);
                else
                        return -report_error(c, method, r);
                free(error);
                return -EXIT_FAILED;
        }
        *ret = json_tokener_parse(reply);
        free(reply);
        return *ret ? 0 : -EXIT_FAILED;
}

static int cmd_shrinkers(void) {
        struct pressure_client *c;
        struct json_object *reply;
        int r = connect_client(&c);
        if (r < 0)
                return -r;
        r = call(c, "io.pressured.ListShrinkers", NULL, &reply);
        pressure_client_unref(c);
        if (r < 0)
                return -r;

        if (arg_json) {
                printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(reply);
                return EXIT_OK;
        }
        struct json_object *list = jget(reply, "shrinkers");
        /* CLAIMED, RELEASED and TRUST are the client's: what it said it freed, how far its resident memory
         * fell around the rounds that asked it, and how much of its claims counts towards goals. */
        printf("%-5s %-20s %-7s %-28s %-12s %-20s %10s %8s %9s %9s %6s %-11s\n", "ID", "NAME", "PID", "CGROUP",
               "FLAGS", "OBJECTS/NODE", "FREED", "TIMEOUTS", "CLAIMED", "RELEASED", "TRUST", "STATE");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                struct json_object *sh = json_object_array_get_idx(list, i), *nodes = jget(sh, "nodes"),
                                   *flags = jget(sh, "flags");
                char objs[256] = "", fl[32] = "";
                size_t off = 0;
                for (size_t k = 0; nodes && k < json_object_array_length(nodes) && off < sizeof(objs); k++) {
                        struct json_object *n = json_object_array_get_idx(nodes, k);
                        off += (size_t) snprintf(objs + off, sizeof(objs) - off, "%s%d:%" PRId64, k ? " " : "",
                                                 json_object_get_int(jget(n, "node")), json_object_get_int64(jget(n, "objects")));
                }
                for (size_t k = 0; flags && k < json_object_array_length(flags); k++) {
                        const char *f = json_object_get_string(json_object_array_get_idx(flags, k));
                        strncat(fl, strcmp(f, "numa_aware") == 0 ? "N" : strcmp(f, "memcg_aware") == 0 ? "M" : "?",
                                sizeof(fl) - strlen(fl) - 1);
                }
                char claimed[32], released[32], trust[16];
                struct json_object *t = jget(sh, "client_trust");
                if (t)
                        snprintf(trust, sizeof(trust), "%d%%", json_object_get_int(t) / 10);
                else
                        snprintf(trust, sizeof(trust), "-");
                format_bytes((uint64_t) json_object_get_int64(jget(sh, "client_claimed_bytes")), claimed, sizeof(claimed));
                format_bytes((uint64_t) json_object_get_int64(jget(sh, "client_released_bytes")), released,
                             sizeof(released));
                printf("%-5" PRId64 " %-20s %-7d %-28s %-12s %-20s %10" PRId64 " %8" PRId64 " %9s %9s %6s %-11s\n",
                       json_object_get_int64(jget(sh, "id")), json_object_get_string(jget(sh, "name")),
                       json_object_get_int(jget(sh, "pid")), json_object_get_string(jget(sh, "cgroup")),
                       fl[0] ? fl : "-", objs, json_object_get_int64(jget(sh, "freed")),
                       json_object_get_int64(jget(sh, "timeouts")), claimed, released, trust,
                       json_object_get_string(jget(sh, "state")));
        }
        json_object_put(reply);
        return EXIT_OK;
}

static int cmd_shrink(void) {
        struct pressure_client *c;
        struct json_object *params = json_object_new_object(), *reply;

        if (arg_cgroup && arg_node >= 0) {
                fprintf(stderr, "pressurectl: --cgroup and --node exclude each other\n");
                json_object_put(params);
                return EXIT_USAGE;
        }
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
        if (arg_shrinker > 0)
                json_object_object_add(params, "shrinker", json_object_new_int64(arg_shrinker));

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

        if (arg_json)
                printf("%s\n", json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        else {
                struct json_object *list = jget(reply, "results");
                int64_t scanned = 0, freed = 0;
                printf("%-5s %-20s %-5s %-28s %10s %10s  %s\n", "ID", "NAME", "NODE", "CGROUP", "SCANNED", "FREED", "NOTE");
                for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                        struct json_object *x = json_object_array_get_idx(list, i);
                        const char *note = jget(x, "timed_out") ? "timed out" : jget(x, "stopped") ? "stopped"
                                           : jget(x, "quarantined") ? "quarantined" : jget(x, "empty") ? "empty" : "";
                        printf("%-5" PRId64 " %-20s %-5d %-28s %10" PRId64 " %10" PRId64 "  %s\n",
                               json_object_get_int64(jget(x, "shrinker")), json_object_get_string(jget(x, "name")),
                               json_object_get_int(jget(x, "node")), json_object_get_string(jget(x, "cgroup")),
                               json_object_get_int64(jget(x, "scanned")), json_object_get_int64(jget(x, "freed")), note);
                        scanned += json_object_get_int64(jget(x, "scanned"));
                        freed += json_object_get_int64(jget(x, "freed"));
                }
                printf("scanned %" PRId64 ", freed %" PRId64 " objects\n", scanned, freed);
        }
        json_object_put(reply);
        return EXIT_OK;
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
static int parse_argv(int argc, char *argv[]) {
        enum { ARG_CGROUP = 0x100, ARG_NODE, ARG_NR, ARG_SHRINKER };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "socket", required_argument, NULL, 's' },
                { "min-level", required_argument, NULL, 'l' },
                { "cgroup", required_argument, NULL, ARG_CGROUP },
                { "node", required_argument, NULL, ARG_NODE },
                { "nr", required_argument, NULL, ARG_NR },
                { "shrinker", required_argument, NULL, ARG_SHRINKER },
                {},
        };
        int c, l;
        long long v;

        while ((c = getopt_long(argc, argv, "hjs:l:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return -1;
                case 'j':
                        arg_json = 1;
                        break;
                case 's':
                        arg_socket = optarg;
                        break;
                case 'l':
                        l = pressure_level_from_string(optarg);
                        if (l <= PRESSURE_LEVEL_OK)
                                return usage("--min-level takes low, medium or critical");
                        arg_min_level = l;
                        break;
                case ARG_CGROUP:
                        arg_cgroup = optarg;
                        break;
                case ARG_NODE:
                        if (parse_number(optarg, 0, INT_MAX, &v) < 0)
                                return usage("--node takes a node number");
                        arg_node = (long) v;
                        break;
                case ARG_NR:
                        if (parse_number(optarg, 1, INT64_MAX, &v) < 0)
                                return usage("--nr takes a positive number");
                        arg_nr = v;
                        break;
                case ARG_SHRINKER:
                        if (parse_number(optarg, 1, INT64_MAX, &v) < 0)
                                return usage("--shrinker takes a shrinker id");
                        arg_shrinker = v;
                        break;
                default:
                        return EXIT_USAGE;
                }
        return 0;
}

static int run_command(const char *cmd, char **args) {
        if (strcmp(cmd, "watch") == 0)
                return cmd_watch(*args ? args : NULL);
        if (strcmp(cmd, "status") != 0 && strcmp(cmd, "shrinkers") != 0 && strcmp(cmd, "shrink") != 0) {
                fprintf(stderr, "pressurectl: unknown command \"%s\"; see --help\n", cmd);
                return EXIT_USAGE;
        }
        if (*args) {
                fprintf(stderr, "pressurectl: %s takes no arguments\n", cmd);
                return EXIT_USAGE;
        }
        if (strcmp(cmd, "status") == 0)
                return cmd_status();
        return strcmp(cmd, "shrinkers") == 0 ? cmd_shrinkers() : cmd_shrink();
}

int main(int argc, char *argv[]) {
        int r = parse_argv(argc, argv);
        if (r != 0)
                return r < 0 ? EXIT_OK : r;
        if (optind >= argc)
                return usage("missing command (status, watch, shrinkers, shrink); see --help");
        return run_command(argv[optind], argv + optind + 1);
}
