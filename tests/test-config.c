/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "log.h"
#include "test-util.h"

static void test_defaults(void) {
        struct config c;
        config_init(&c);
        CU_ASSERT_EQUAL(c.max_message_size, 65536u);
        CU_ASSERT_EQUAL(c.hold_usec, 10000000u);
        CU_ASSERT_EQUAL(c.psi.t[LEVEL_LOW].stall_usec, 100000u);
        CU_ASSERT_EQUAL(c.psi.t[LEVEL_CRITICAL].kind, PSI_FULL);
        CU_ASSERT_EQUAL(config_verify(&c, NULL), 0);
        config_done(&c);
}

static void test_regulate(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(c.regulate_budget_usec, 1000u);
        CU_ASSERT_EQUAL(c.regulate_interval_usec, 1000000u);
        CU_ASSERT_EQUAL(c.regulate_step_max_permille, 50u);
        CU_ASSERT_EQUAL(config_parse(&c,
                                     "regulate_budget=2ms\nregulate_step_max=2.5%\nregulate_interval=500ms\n"
                                     "regulate_cgroup=/system.slice/redis.service 5ms\n"
                                     "regulate_cgroup=/user.slice/* off\n"
                                     "regulate_cgroup=/user.slice/user-1000.slice 3ms\n",
                                     "t.conf", NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(c.regulate_budget_usec, 2000u);
        CU_ASSERT_EQUAL(c.regulate_step_max_permille, 25u);
        CU_ASSERT_EQUAL(c.regulate_interval_usec, 500000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, NULL), 2000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/"), 2000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/system.slice/redis.service"), 5000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/system.slice/redis.service/sub"), 5000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/system.slice/redis.service2"), 2000u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/user.slice/user-1001.slice"), 0u);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/user.slice/user-1000.slice"), 3000u); /* the last wins */
        static const char *const bad[] = { "regulate_budget=1s", "regulate_step_max=60%", "regulate_step_max=5",
                                           "regulate_interval=10ms", "regulate_cgroup=/a", "regulate_cgroup=a 5ms",
                                           "regulate_cgroup=/a 5 parsecs", "regulate_cgroup=/a 600ms" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                free(err);
                err = NULL;
                CU_ASSERT(config_parse(&c, bad[i], "t.conf", NULL, NULL, &err) < 0);
                CU_ASSERT_PTR_NOT_NULL(err);
        }
        CU_ASSERT_EQUAL(c.regulate_budget_usec, 2000u); /* unchanged by what was refused */
        free(err);
        config_done(&c);
}

static void test_value_cgroups(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT(!config_value_shared(&c, "/system.slice/a.service"));
        CU_ASSERT_EQUAL(config_parse(&c, "value_cgroup=/system.slice/*.service\nvalue_cgroup=/cache.slice/\n", "t.conf",
                                     NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL_FATAL(c.n_value_cgroups, 2u);
        CU_ASSERT_STRING_EQUAL(c.value_cgroups[1], "/cache.slice"); /* normalised */
        CU_ASSERT(config_value_shared(&c, "/system.slice/a.service"));
        CU_ASSERT(!config_value_shared(&c, "/system.slice/a.service/sub")); /* a glob names groups */
        CU_ASSERT(config_value_shared(&c, "/cache.slice/x/y"));               /* a path its subtree */
        CU_ASSERT(!config_value_shared(&c, "/user.slice"));
        CU_ASSERT(!config_value_shared(&c, NULL));
        static const char *const bad[] = { "value_cgroup=", "value_cgroup=a.slice", "value_cgroup=/a/../b" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                CU_ASSERT(config_parse(&c, bad[i], "t.conf", NULL, NULL, &err) < 0);
                CU_ASSERT_PTR_NOT_NULL(err);
                free(err);
                err = NULL;
        }
        CU_ASSERT_EQUAL(c.n_value_cgroups, 2u); /* unchanged by what was refused */
        config_done(&c);
}

static void test_reclaim_cgroups(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(c.n_reclaim_cgroups, 0u);
        CU_ASSERT_EQUAL(config_parse(&c, "reclaim_cgroup=/system.slice/*.service\nreclaim_cgroup=/batch.slice/\n",
                                     "t.conf", NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL_FATAL(c.n_reclaim_cgroups, 2u);
        CU_ASSERT_STRING_EQUAL(c.reclaim_cgroups[0], "/system.slice/*.service");
        CU_ASSERT_STRING_EQUAL(c.reclaim_cgroups[1], "/batch.slice"); /* normalised */
        static const char *const bad[] = { "reclaim_cgroup=", "reclaim_cgroup=/", "reclaim_cgroup=a.slice",
                                           "reclaim_cgroup=/a/../b", "reclaim_cgroup=/a//b", "reclaim_cgroup=/a\x01" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                free(err);
                err = NULL;
                CU_ASSERT(config_parse(&c, bad[i], "t.conf", NULL, NULL, &err) < 0);
                CU_ASSERT_PTR_NOT_NULL(err);
        }
        CU_ASSERT_EQUAL(c.n_reclaim_cgroups, 2u); /* unchanged by what was refused */
        free(err);
        config_done(&c);
}

static void test_durations(void) {
        uint64_t u;
        CU_ASSERT_EQUAL(config_parse_duration("100ms", &u), 0);
        CU_ASSERT_EQUAL(u, 100000u);
        CU_ASSERT_EQUAL(config_parse_duration("2s", &u), 0);
        CU_ASSERT_EQUAL(u, 2000000u);
        CU_ASSERT_EQUAL(config_parse_duration("1.5s", &u), 0);
        CU_ASSERT_EQUAL(u, 1500000u);
        CU_ASSERT_EQUAL(config_parse_duration("250", &u), 0);
        CU_ASSERT_EQUAL(u, 250000u);
        CU_ASSERT_EQUAL(config_parse_duration("7us", &u), 0);
        CU_ASSERT_EQUAL(u, 7u);
        CU_ASSERT_EQUAL(config_parse_duration("1min", &u), 0);
        CU_ASSERT_EQUAL(u, 60000000u);
        /* systemd's time spans */
        CU_ASSERT_EQUAL(config_parse_duration("1h", &u), 0);
        CU_ASSERT_EQUAL(u, 3600000000ULL);
        CU_ASSERT_EQUAL(config_parse_duration("2d", &u), 0);
        CU_ASSERT_EQUAL(u, 172800000000ULL);
        CU_ASSERT_EQUAL(config_parse_duration("1h 30min", &u), 0);
        CU_ASSERT_EQUAL(u, 5400000000ULL);
        CU_ASSERT_EQUAL(config_parse_duration("1min30s", &u), 0);
        CU_ASSERT_EQUAL(u, 90000000u);
        CU_ASSERT_EQUAL(config_parse_duration("2 sec", &u), 0);
        CU_ASSERT_EQUAL(u, 2000000u);
        CU_ASSERT_EQUAL(config_parse_duration("1w", &u), 0);
        CU_ASSERT_EQUAL(u, 604800000000ULL);
        CU_ASSERT_EQUAL(config_parse_duration("1 2", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("2s 5", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("1hx", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("   ", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("100000000d", &u), -ERANGE);
        CU_ASSERT_EQUAL(config_parse_duration("-1s", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("5 parsecs", &u), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_duration("", &u), -EINVAL);
}

static void test_file(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(config_parse(&c,
                                     "# comment\n"
                                     "[pressured]\n"
                                     "  low = some 50ms 2s\n"
                                     "medium=some 200ms 2s\n"
                                     "critical=full 1s 4s\n"
                                     "hold=3s\n"
                                     "cgroup=/system.slice\n"
                                     "cgroup=/user.slice\n"
                                     "max_message_size=131072\n"
                                     "node_low_factor=1.5\n"
                                     "node_foreign_raises=no\n"
                                     "headroom_low=20%\n"
                                     "headroom_medium=10%   # inline comment\n"
                                     "low_memory_monitor_repeat=1h\n"
                                     "headroom_interval=100ms\n"
                                     "headroom=no\n",
                                     "test.conf", NULL, NULL, &err),
                        0);
        CU_ASSERT_PTR_NULL(err);
        CU_ASSERT_EQUAL(c.psi.t[LEVEL_LOW].stall_usec, 50000u);
        CU_ASSERT_EQUAL(c.psi.t[LEVEL_CRITICAL].window_usec, 4000000u);
        CU_ASSERT_EQUAL(c.hold_usec, 3000000u);
        CU_ASSERT_EQUAL(c.n_cgroups, 2u);
        CU_ASSERT_STRING_EQUAL(c.cgroups[1], "/user.slice");
        CU_ASSERT_EQUAL(c.max_message_size, 131072u);
        CU_ASSERT_DOUBLE_EQUAL(c.node.low_factor, 1.5, 1e-9);
        CU_ASSERT_FALSE(c.node.foreign_raises);
        CU_ASSERT_DOUBLE_EQUAL(c.headroom_at.f[LEVEL_LOW], 0.80, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.headroom_at.f[LEVEL_MEDIUM], 0.90, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(c.headroom_at.f[LEVEL_CRITICAL], 0.97, 1e-9);
        CU_ASSERT_EQUAL(c.low_memory_monitor_repeat_usec, 3600000000ULL);
        CU_ASSERT_EQUAL(c.headroom_interval_usec, 100000u);
        CU_ASSERT_FALSE(c.headroom);
        config_done(&c);
}

static void test_errors_name_file_and_line(void) {
        static const struct {
                const char *text, *want;
        } cases[] = {
                { "hold=2s\nbogus=1\n", "x.conf:2: unknown key \"bogus\"" },
                { "low=some 3s 2s\n", "x.conf:1: low: expected" },
                { "\n\nlow\n", "x.conf:3: expected KEY=VALUE" },
                { "hold=soon\n", "x.conf:1: hold: invalid duration" },
                { "cgroup=relative\n", "x.conf:1: cgroup must be an absolute" },
                { "max_message_size=12\n", "x.conf:1: max_message_size must be" },
                { "low=some 500ms 2s\nmedium=some 100ms 2s\n", "thresholds of the same kind" },
                { "headroom_low=0%\n", "x.conf:1: headroom_low: the room left under the limit must be above 0%" },
                { "headroom_low=85%\n", "x.conf:1: headroom_low: the room left under the limit must be above 0% and below 50%, got 85% (before 1.0" },
                { "headroom_low=0.15\n", "x.conf:1: headroom_low: write the room left as a percentage with %" },
                { "headroom_low=15\n", "x.conf:1: headroom_low: write the room left as a percentage with %" },
                { "headroom_medium=9x\n", "x.conf:1: headroom_medium: write the room left" },
                { "headroom_medium=x\n", "x.conf:1: headroom_medium: expected a percentage such as 15%" },
                { "headroom_low=4%\n", "headroom thresholds must not rise" },
                { "hold=2s # a comment\nlow=some 3s 2s # too much\n", "x.conf:2: low: expected" },
                { "headroom_interval=5s\nheadroom_max_interval=1s\n", "headroom_max_interval is shorter" },
                { "headroom=maybe\n", "x.conf:1: headroom: expected yes or no" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct config c;
                char *err = NULL;
                config_init(&c);
                CU_ASSERT(config_parse(&c, cases[i].text, "x.conf", NULL, NULL, &err) < 0);
                CU_ASSERT_PTR_NOT_NULL(err);
                if (err)
                        CU_ASSERT_EQUAL(strncmp(err, cases[i].want, strlen(cases[i].want)), 0);
                free(err);
                config_done(&c);
        }
}

static void test_missing_file(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(config_load(&c, "/nonexistent/pressured.conf", 0, NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(config_load(&c, "/nonexistent/pressured.conf", 1, NULL, NULL, &err), -ENOENT);
        free(err);
        config_done(&c);
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(text, f);
        fclose(f);
}

/* PATH.d/NAME.conf after PATH, in lexical order: later lines win, list keys add up, other names are
 * skipped, and a bad drop-in is named with its line. */
static void test_dropins(void) {
        char dir[] = "/tmp/pressured-config-XXXXXX", path[200], d[300], f[400];
        struct config c;
        char *err = NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/p.conf", dir);
        snprintf(d, sizeof(d), "%s.d", path);
        CU_ASSERT_EQUAL_FATAL(mkdir(d, 0755), 0);
        write_text(path, "regulate_budget=2ms\nhold=20s\n");
        snprintf(f, sizeof(f), "%s/50-svc.conf", d);
        write_text(f, "regulate_budget=3ms\nregulate_cgroup=/b.slice 4ms\n");
        snprintf(f, sizeof(f), "%s/10-first.conf", d);
        write_text(f, "regulate_budget=9ms\nregulate_cgroup=/a.slice off\n");
        snprintf(f, sizeof(f), "%s/70-x.conf.dpkg-old", d);
        write_text(f, "regulate_budget=7ms\n");
        snprintf(f, sizeof(f), "%s/.80-swap.conf", d);
        write_text(f, "regulate_budget=8ms\n");

        config_init(&c);
        CU_ASSERT_EQUAL(config_load(&c, path, 1, NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(c.regulate_budget_usec, 3000);
        CU_ASSERT_EQUAL(c.hold_usec, 20000000);
        CU_ASSERT_EQUAL(c.n_regulate_cgroups, 2);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/a.slice"), 0);
        CU_ASSERT_EQUAL(config_regulate_budget(&c, "/b.slice"), 4000);
        config_done(&c);

        /* Without the file itself, the drop-ins still apply when it may be missing. */
        unlink(path);
        config_init(&c);
        CU_ASSERT_EQUAL(config_load(&c, path, 0, NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(c.regulate_budget_usec, 3000);
        config_done(&c);

        snprintf(f, sizeof(f), "%s/60-bad.conf", d);
        write_text(f, "\nhold=soon\n");
        config_init(&c);
        CU_ASSERT(config_load(&c, path, 0, NULL, NULL, &err) < 0);
        CU_ASSERT_PTR_NOT_NULL(err);
        if (err)
                CU_ASSERT_PTR_NOT_NULL(strstr(err, "60-bad.conf:2: hold"));
        free(err);
        config_done(&c);

        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Headroom as a size left, and sizes for the byte keys. */
static void test_sizes(void) {
        struct config c;
        char *err = NULL;
        uint64_t v;
        CU_ASSERT_EQUAL(config_parse_bytes("512M", true, &v), 0);
        CU_ASSERT_EQUAL(v, 512ULL << 20);
        CU_ASSERT_EQUAL(config_parse_bytes("1.5G", true, &v), 0);
        CU_ASSERT_EQUAL(v, 3ULL << 29);
        CU_ASSERT_EQUAL(config_parse_bytes("64KiB", true, &v), 0);
        CU_ASSERT_EQUAL(v, 64ULL << 10);
        CU_ASSERT_EQUAL(config_parse_bytes("4096", false, &v), 0);
        CU_ASSERT_EQUAL(v, 4096u);
        CU_ASSERT_EQUAL(config_parse_bytes("4096", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_bytes("1e3", false, &v), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_bytes("-1M", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_bytes("5Q", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(config_parse_bytes("99999999T", true, &v), -EINVAL);

        config_init(&c);
        CU_ASSERT_EQUAL(config_parse(&c, "headroom_low=512M\nheadroom_medium=256M\nmax_buffered=64M\n", "x.conf", NULL,
                                     NULL, &err), 0);
        CU_ASSERT_EQUAL(c.headroom_at.left[LEVEL_LOW], 512ULL << 20);
        CU_ASSERT_EQUAL(c.headroom_at.left[LEVEL_MEDIUM], 256ULL << 20);
        CU_ASSERT_EQUAL(c.headroom_at.left[LEVEL_CRITICAL], 0u); /* still 3% */
        CU_ASSERT_EQUAL(c.max_buffered, 64u << 20);
        /* A percentage after a size takes the share again. */
        CU_ASSERT_EQUAL(config_parse(&c, "headroom_low=20%\n", "x.conf", NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(c.headroom_at.left[LEVEL_LOW], 0u);
        config_done(&c);

        config_init(&c);
        CU_ASSERT(config_parse(&c, "headroom_low=256M\nheadroom_medium=512M\n", "x.conf", NULL, NULL, &err) < 0);
        free(err);
        err = NULL;
        config_done(&c);
        config_init(&c);
        CU_ASSERT(config_parse(&c, "headroom_low=512\n", "x.conf", NULL, NULL, &err) < 0);
        CU_ASSERT(err && strstr(err, "e.g. headroom_low=512M"));
        free(err);
        config_done(&c);
}

static void collect(const char *message, void *userdata) {
        char *buf = userdata;
        strncat(buf, message, 1023 - strlen(buf));
        strncat(buf, "\n", 1023 - strlen(buf));
}

/* Taken, but probably not what was meant: said, and the file still loads. */
static void test_warnings(void) {
        struct config c;
        char warnings[1024] = "";
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(config_parse(&c,
                                     "[pressured]\n"
                                     "hold=2s\n"
                                     "cgroup=/a\n"
                                     "cgroup=/b\n"
                                     "hold=3s\n"
                                     "[Service]\n"
                                     "hold=4s\n"
                                     "nonsense here\n"
                                     "[pressured]\n"
                                     "sample_interval=2s\n",
                                     "w.conf", collect, warnings, &err),
                        0);
        CU_ASSERT_PTR_NULL(err);
        CU_ASSERT_EQUAL(c.hold_usec, 3000000u); /* the last line of our own section wins */
        CU_ASSERT_EQUAL(c.n_cgroups, 2u);        /* a list, not a duplicate */
        CU_ASSERT_EQUAL(c.sample_interval_usec, 2000000u);
        CU_ASSERT_PTR_NOT_NULL(strstr(warnings, "w.conf:5: hold is also set on line 2; this line wins\n"));
        CU_ASSERT_PTR_NOT_NULL(strstr(warnings, "w.conf:6: unknown section [Service], its keys are ignored\n"));
        CU_ASSERT_PTR_NULL(strstr(warnings, "cgroup"));
        config_done(&c);
}

/* A reload keeps what only a start can change, and names it. */
static void test_restart_only(void) {
        struct config a, b;
        char *names = NULL;
        config_init(&a);
        config_init(&b);
        CU_ASSERT_EQUAL(config_restart_only_changed(&a, &b, &names), 0);
        CU_ASSERT_PTR_NULL(names);
        CU_ASSERT_EQUAL(config_set(&b, "hold", "3s", NULL), 0);
        CU_ASSERT_EQUAL(config_restart_only_changed(&a, &b, &names), 0);
        CU_ASSERT_PTR_NULL(names);
        CU_ASSERT_EQUAL(config_set(&b, "socket", "/run/x", NULL), 0);
        CU_ASSERT_EQUAL(config_set(&b, "lock_memory", "no", NULL), 0);
        CU_ASSERT_EQUAL(config_restart_only_changed(&a, &b, &names), 0);
        CU_ASSERT_STRING_EQUAL(names, "socket, lock_memory");
        free(names);
        /* The system scope's PSI file (tests isolate their daemons from the host's stall with it). */
        CU_ASSERT_EQUAL(config_set(&b, "system_pressure", "relative/memory.pressure", NULL), -EINVAL);
        CU_ASSERT_STRING_EQUAL(b.system_pressure, "");
        CU_ASSERT_EQUAL(config_set(&b, "system_pressure", "/proc/pressure/memory", NULL), 0);
        CU_ASSERT_STRING_EQUAL(b.system_pressure, "");
        CU_ASSERT_EQUAL(config_set(&b, "system_pressure", "/sys/fs/cgroup/q/memory.pressure", NULL), 0);
        CU_ASSERT_EQUAL(config_restart_only_changed(&a, &b, &names), 0);
        CU_ASSERT_STRING_EQUAL(names, "socket, system_pressure, lock_memory");
        free(names);
        config_done(&a);
        config_done(&b);
}

static void test_log_level(void) {
        struct config c;
        char *err = NULL;
        config_init(&c);
        CU_ASSERT_EQUAL(c.log_level, LOG_INFO);
        CU_ASSERT_EQUAL(config_set(&c, "log_level", "debug", NULL), 0);
        CU_ASSERT_EQUAL(c.log_level, LOG_DEBUG);
        CU_ASSERT_EQUAL(config_set(&c, "log_level", "4", NULL), 0);
        CU_ASSERT_EQUAL(c.log_level, LOG_WARNING);
        CU_ASSERT_EQUAL(config_set(&c, "log_level", "loud", &err), -EINVAL);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "expected one of emerg"));
        CU_ASSERT_EQUAL(c.log_level, LOG_WARNING);
        free(err);
        CU_ASSERT_STRING_EQUAL(log_level_to_string(LOG_NOTICE), "notice");
        CU_ASSERT_EQUAL(log_level_from_string("8"), -EINVAL);
        config_done(&c);
}

int main(void) {
        static const struct test_case cases[] = {
                { "defaults", test_defaults },
                { "durations", test_durations },
                { "the regulator's keys", test_regulate },
                { "proactive reclaim's groups", test_reclaim_cgroups },
                { "groups whose values compare across users", test_value_cgroups },
                { "a full file", test_file },
                { "errors name file and line", test_errors_name_file_and_line },
                { "missing file", test_missing_file },
                { "drop-ins", test_dropins },
                { "sizes", test_sizes },
                { "warnings", test_warnings },
                { "restart-only keys", test_restart_only },
                { "log level", test_log_level },
                {},
        };
        return test_run("config", cases, NULL);
}
