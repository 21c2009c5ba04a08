/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
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
                                     "headroom_low=80%\n"
                                     "headroom_medium=90\n"
                                     "headroom_interval=100ms\n"
                                     "headroom=no\n",
                                     "test.conf", &err),
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
                { "headroom_low=0%\n", "x.conf:1: headroom_low: expected a percentage" },
                { "headroom_low=101\n", "x.conf:1: headroom_low: expected a percentage" },
                { "headroom_medium=9x\n", "x.conf:1: headroom_medium: expected a percentage" },
                { "headroom_low=95%\n", "headroom thresholds must not fall" },
                { "headroom_interval=5s\nheadroom_max_interval=1s\n", "headroom_max_interval is shorter" },
                { "headroom=maybe\n", "x.conf:1: headroom: expected yes or no" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct config c;
                char *err = NULL;
                config_init(&c);
                CU_ASSERT(config_parse(&c, cases[i].text, "x.conf", &err) < 0);
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
        CU_ASSERT_EQUAL(config_load(&c, "/nonexistent/pressured.conf", 0, &err), 0);
        CU_ASSERT_EQUAL(config_load(&c, "/nonexistent/pressured.conf", 1, &err), -ENOENT);
        free(err);
        config_done(&c);
}

int main(void) {
        static const struct test_case cases[] = {
                { "defaults", test_defaults },
                { "durations", test_durations },
                { "a full file", test_file },
                { "errors name file and line", test_errors_name_file_and_line },
                { "missing file", test_missing_file },
                {},
        };
        return test_run("config", cases, NULL);
}
