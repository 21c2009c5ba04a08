/* SPDX-License-Identifier: MIT */
/* Whose memory is short (shortage.c): the global reclaim counters of /proc/vmstat, the decision from
 * them or from MemAvailable, and the files read below a root (fixtures written here). */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "shortage.h"
#include "test-util.h"

#define SEC 1000000ULL

static void test_parse_vmstat(void) {
        uint64_t v = 0;
        /* kswapd, direct reclaim and khugepaged, also split by zone; not the throttle count, nor the
         * counters that include limit reclaim. */
        CU_ASSERT_EQUAL(shortage_parse_vmstat("nr_free_pages 100\npgscan_kswapd 10\npgscan_direct 5\n"
                                              "pgscan_direct_throttle 1000\npgscan_khugepaged 2\npgscan_file 7777\n"
                                              "pgscan_anon 8888\n",
                                              &v),
                        0);
        CU_ASSERT_EQUAL(v, 17u);
        CU_ASSERT_EQUAL(shortage_parse_vmstat("pgscan_kswapd_dma 1\npgscan_kswapd_normal 20\npgscan_direct_movable 3", &v), 0);
        CU_ASSERT_EQUAL(v, 24u);
        /* None of them: the kernel cannot tell. */
        CU_ASSERT_EQUAL(shortage_parse_vmstat("nr_free_pages 100\npgscan_direct_throttle 3\n", &v), -ENODATA);
        CU_ASSERT_EQUAL(shortage_parse_vmstat("", &v), -ENODATA);
        /* A value that is not a number is an error, not a zero. */
        CU_ASSERT_EQUAL(shortage_parse_vmstat("pgscan_kswapd 12x\n", &v), -EINVAL);
        CU_ASSERT_EQUAL(shortage_parse_vmstat("pgscan_kswapd \n", &v), -EINVAL);
        /* The sum saturates. */
        CU_ASSERT_EQUAL(shortage_parse_vmstat("pgscan_kswapd 18446744073709551615\npgscan_direct 5\n", &v), 0);
        CU_ASSERT_EQUAL(v, UINT64_MAX);
}

static void test_machine_by_counters(void) {
        struct shortage s = {};
        const uint64_t recent = 10 * SEC;
        /* The first reading only sets the mark: what ran before the daemon looked is not news. */
        shortage_feed(&s, 1 * SEC, 1000, 0.99);
        CU_ASSERT_FALSE(shortage_machine(&s, 1 * SEC, recent));
        shortage_feed(&s, 2 * SEC, 1000, 0.99);
        CU_ASSERT_FALSE(shortage_machine(&s, 2 * SEC, recent));
        /* Global reclaim ran: short for `recent`, whatever MemAvailable says. */
        shortage_feed(&s, 3 * SEC, 1200, 0.99);
        CU_ASSERT_TRUE(shortage_machine(&s, 3 * SEC, recent));
        CU_ASSERT_TRUE(shortage_machine(&s, 13 * SEC, recent));
        CU_ASSERT_FALSE(shortage_machine(&s, 13 * SEC + 1, recent));
        /* Little available but no global reclaim: the counters decide. */
        shortage_feed(&s, 20 * SEC, 1200, 0.1);
        CU_ASSERT_FALSE(shortage_machine(&s, 20 * SEC, recent));
}

static void test_machine_without_counters(void) {
        struct shortage s = {};
        /* No counters: GLib's rule, less than half available. */
        shortage_feed(&s, 1 * SEC, -1, 0.6);
        CU_ASSERT_FALSE(shortage_machine(&s, 1 * SEC, 10 * SEC));
        shortage_feed(&s, 2 * SEC, -1, 0.4);
        CU_ASSERT_TRUE(shortage_machine(&s, 2 * SEC, 10 * SEC));
        /* Nothing to tell by: the stall is all there is. */
        shortage_feed(&s, 3 * SEC, -1, -1);
        CU_ASSERT_TRUE(shortage_machine(&s, 3 * SEC, 10 * SEC));
}

static void write_fixture(const char *dir, const char *name, const char *text) {
        char path[600];
        snprintf(path, sizeof(path), "%s/proc/%s", dir, name);
        FILE *f = fopen(path, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(text, f);
        fclose(f);
}

static void test_read_fixtures(void) {
        char dir[] = "/tmp/pressured-test-shortage-XXXXXX", proc[600];
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
        test_cleanup_tree(dir);
        snprintf(proc, sizeof(proc), "%s/proc", dir);
        CU_ASSERT_EQUAL_FATAL(mkdir(proc, 0755), 0);
        write_fixture(dir, "vmstat", "pgscan_kswapd 10\npgscan_direct 0\n");
        write_fixture(dir, "meminfo", "MemTotal:       1000 kB\nMemFree:         900 kB\nMemAvailable:    300 kB\n");

        struct shortage s = {};
        shortage_read(&s, dir, 1 * SEC, SEC / 2);
        CU_ASSERT_TRUE(s.have_counters);
        CU_ASSERT_EQUAL(s.scanned, 10u);
        CU_ASSERT_TRUE(s.have_available);
        CU_ASSERT_DOUBLE_EQUAL(s.available, 0.3, 1e-9);
        /* Read again only after min_interval. */
        write_fixture(dir, "vmstat", "pgscan_kswapd 50\npgscan_direct 0\n");
        shortage_read(&s, dir, 1 * SEC + SEC / 4, SEC / 2);
        CU_ASSERT_EQUAL(s.scanned, 10u);
        shortage_read(&s, dir, 2 * SEC, SEC / 2);
        CU_ASSERT_EQUAL(s.scanned, 50u);
        CU_ASSERT_TRUE(shortage_machine(&s, 2 * SEC, 10 * SEC));
        /* A kernel without the counters, and a meminfo without MemAvailable. */
        write_fixture(dir, "vmstat", "nr_free_pages 5\n");
        write_fixture(dir, "meminfo", "MemTotal:       1000 kB\nMemFree:         900 kB\n");
        shortage_read(&s, dir, 3 * SEC, SEC / 2);
        CU_ASSERT_FALSE(s.have_counters);
        CU_ASSERT_FALSE(s.have_available);
        CU_ASSERT_TRUE(shortage_machine(&s, 3 * SEC, 10 * SEC));
        /* No files at all: nothing to tell by. */
        shortage_read(&s, "/nonexistent", 4 * SEC, SEC / 2);
        CU_ASSERT_FALSE(s.have_counters);
        CU_ASSERT_TRUE(shortage_machine(&s, 4 * SEC, 10 * SEC));
}

static void test_limit_binds(void) {
        CU_ASSERT_TRUE(shortage_limit_binds(90, 100));
        CU_ASSERT_TRUE(shortage_limit_binds(100, 100));
        CU_ASSERT_FALSE(shortage_limit_binds(89, 100));
        CU_ASSERT_FALSE(shortage_limit_binds(UINT64_MAX - 1, UINT64_MAX)); /* no limit */
        CU_ASSERT_FALSE(shortage_limit_binds(0, 0));
}

/* The limits' events decide once there are counts to compare; usage near a limit only where there are
 * none, or at a scope's first look. */
static void test_limit_update(void) {
        const uint64_t recent = 10 * SEC;
        struct limit_watch w = {};
        struct limit_reading near = { .events = 5, .have_events = true, .near = true };

        /* The first reading has nothing to compare with: a first look goes by usage, a later one not. */
        CU_ASSERT_TRUE(shortage_limit_update(&w, &near, 1 * SEC, recent, true));
        w = (struct limit_watch){};
        CU_ASSERT_FALSE(shortage_limit_update(&w, &near, 1 * SEC, recent, false));
        /* Near the limit, the same count: page cache at 95% of the limit is no reclaim. */
        CU_ASSERT_FALSE(shortage_limit_update(&w, &near, 2 * SEC, recent, false));
        /* The count grew: the limit reclaims, for recent_usec after the growth. */
        struct limit_reading grew = { .events = 9, .have_events = true };
        CU_ASSERT_TRUE(shortage_limit_update(&w, &grew, 3 * SEC, recent, false));
        CU_ASSERT_TRUE(shortage_limit_update(&w, &grew, 13 * SEC, recent, false));
        CU_ASSERT_FALSE(shortage_limit_update(&w, &grew, 13 * SEC + 1, recent, false));
        CU_ASSERT_EQUAL(w.grew_usec, 3 * SEC);
        /* A count that cannot be read: usage is all there is. */
        struct limit_reading blind = { .near = true };
        CU_ASSERT_TRUE(shortage_limit_update(&w, &blind, 14 * SEC, recent, false));
        blind.near = false;
        CU_ASSERT_FALSE(shortage_limit_update(&w, &blind, 15 * SEC, recent, false));
        /* Counts again after that: a first reading once more, not a growth from the old sum. */
        struct limit_reading again = { .events = 20, .have_events = true };
        CU_ASSERT_FALSE(shortage_limit_update(&w, &again, 16 * SEC, recent, false));
}

static void test_gate(void) {
        CU_ASSERT_EQUAL(shortage_gate(LEVEL_OK, false, true, true), LEVEL_OK);
        CU_ASSERT_EQUAL(shortage_gate(LEVEL_CRITICAL, true, false, false), LEVEL_CRITICAL);   /* a node's */
        CU_ASSERT_EQUAL(shortage_gate(LEVEL_MEDIUM, false, true, false), LEVEL_MEDIUM);       /* the machine's */
        CU_ASSERT_EQUAL(shortage_gate(LEVEL_LOW, false, false, true), LEVEL_LOW);             /* its limit's */
        CU_ASSERT_EQUAL(shortage_gate(LEVEL_CRITICAL, false, false, false), LEVEL_OK);        /* another's */
}

int main(void) {
        static const struct test_case cases[] = {
                { "the global reclaim counters of vmstat", test_parse_vmstat },
                { "short while global reclaim ran lately", test_machine_by_counters },
                { "without counters, by what is available", test_machine_without_counters },
                { "the files below a root, at most every interval", test_read_fixtures },
                { "a limit binds within a tenth of it", test_limit_binds },
                { "a limit reclaims while its events grow", test_limit_update },
                { "the gate: whose stall it is", test_gate },
                {},
        };
        return test_run("shortage", cases, NULL);
}
