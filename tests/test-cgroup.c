/* SPDX-License-Identifier: MIT */
/* cgroup.c's memory.stat reading: the parser against recorded files of both hierarchies and bad text,
 * and the real file of a real group with a process that grows its anonymous memory. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "cgroup_reclaim.h"
#include "limit_stall.h"
#include "kmsg.h"
#include "macro.h"
#include "pidref.h"
#include "pressure-gen.h"
#include "test-util.h"

static char *fixture(const char *name) {
        char path[512];
        snprintf(path, sizeof(path), "%s/memory-stat/%s", getenv("PRESSURED_FIXTURES"), name);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = calloc(1, 65536);
        size_t n = buf ? fread(buf, 1, 65535, f) : 0;
        (void) n;
        fclose(f);
        return buf;
}

static void test_parse_recorded(void) {
        uint64_t v = 0;
        char *v2 = fixture("v2"), *v1 = fixture("v1");
        CU_ASSERT_PTR_NOT_NULL_FATAL(v2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
        CU_ASSERT_EQUAL(cgroup_parse_anon(v2, true, &v), 0);
        CU_ASSERT_EQUAL(v, 16723968u);
        /* v1: the hierarchical figure (total_rss), not the group's own (rss). */
        CU_ASSERT_EQUAL(cgroup_parse_anon(v1, false, &v), 0);
        CU_ASSERT_EQUAL(v, 33554432u);
        /* The other hierarchy's spelling is not there. */
        CU_ASSERT_EQUAL(cgroup_parse_anon(v2, false, &v), -ENODATA);
        free(v2);
        free(v1);
}

static void test_parse_bad(void) {
        uint64_t v = 7;
        CU_ASSERT_EQUAL(cgroup_parse_anon("", true, &v), -ENODATA);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon_thp 5\nfile 3\n", true, &v), -ENODATA); /* a prefix is not the key */
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon x\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon 12abc\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon 99999999999999999999999\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(v, 7u);
        CU_ASSERT_EQUAL(cgroup_parse_anon("file 1\nanon 42", true, &v), 0); /* no final newline */
        CU_ASSERT_EQUAL(v, 42u);
}

/* ---- headroom: fixture trees of both hierarchies, and the arithmetic ---- */

static char *headroom_root(const char *v) {
        char path[512];
        snprintf(path, sizeof(path), "%s/headroom/%s", getenv("PRESSURED_FIXTURES"), v);
        return strdup(path);
}

static void test_headroom_tree_v2(void) {
        struct cgroup_layout l = { .memory_v2 = true };
        struct headroom_group g[8];
        char *paths[8] = {};
        struct headroom h;
        struct headroom_thresholds t;
        size_t n = 99;

        l.v2_root = l.memory_root = headroom_root("v2");
        headroom_thresholds_default(&t);

        /* c's own limit is its memory.high, below its memory.max; b has none; a's binds all below it. */
        CU_ASSERT_EQUAL_FATAL(cgroup_headroom_groups(&l, "/a/b/c", g, paths, 8, &n), 0);
        CU_ASSERT_EQUAL_FATAL(n, 2u);
        CU_ASSERT_STRING_EQUAL(paths[0], "/a/b/c");
        CU_ASSERT_STRING_EQUAL(paths[1], "/a");
        CU_ASSERT_EQUAL(g[0].limit, 402653184u);
        CU_ASSERT_EQUAL(g[0].usage, 314572800u);
        CU_ASSERT_EQUAL(g[0].reclaimable, 0u);
        CU_ASSERT_EQUAL(g[1].limit, 1073741824u);
        CU_ASSERT_EQUAL(g[1].reclaimable, 10485760u);

        /* c is at 78% of its own limit, a at 86.9% of its: a decides, and the scope is low. */
        headroom_evaluate(g, n, &t, &h);
        CU_ASSERT_EQUAL(h.level, LEVEL_LOW);
        CU_ASSERT_EQUAL(h.binding, 1u);
        CU_ASSERT_EQUAL(h.limit, 1073741824u);
        CU_ASSERT_DOUBLE_EQUAL(h.fraction, 933232640.0 / 1073741824.0, 1e-9);
        CU_ASSERT_EQUAL(h.over_bytes, 933232640u - 912680550u);
        CU_ASSERT_EQUAL(h.room_bytes, 0u); /* a is past its threshold */
        for (size_t i = 0; i < n; i++)
                free(paths[i]);

        /* Without a: c alone is 27 MB short of its threshold. */
        headroom_evaluate(g, 1, &t, &h);
        CU_ASSERT_EQUAL(h.level, LEVEL_OK);
        CU_ASSERT_EQUAL(h.over_bytes, 0u);
        CU_ASSERT_EQUAL(h.room_bytes, 342255206u - 314572800u);

        /* No limit anywhere: nothing to be near. */
        CU_ASSERT_EQUAL(cgroup_headroom_groups(&l, "/x", g, NULL, 8, &n), 0);
        CU_ASSERT_EQUAL(n, 0u);
        headroom_evaluate(g, n, &t, &h);
        CU_ASSERT_EQUAL(h.level, LEVEL_OK);
        CU_ASSERT_EQUAL(h.limit, UINT64_MAX);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 0, 100, 250000, 10000000), 10000000u);

        /* A group that is not there. */
        CU_ASSERT_EQUAL(cgroup_headroom_groups(&l, "/nope", g, NULL, 8, &n), -ENOENT);

        /* At most max groups. */
        CU_ASSERT_EQUAL(cgroup_headroom_groups(&l, "/a/b/c", g, NULL, 1, &n), 0);
        CU_ASSERT_EQUAL(n, 1u);
        free(l.v2_root);
}

/* ---- proactive reclaim: what a group holds that reclaim could take, and the groups a glob names ---- */

static void test_reclaimable(void) {
        uint64_t v = 0;
        char *v2 = fixture("v2");
        CU_ASSERT_PTR_NOT_NULL_FATAL(v2);
        /* Without swap: the file pages only (active 8 MiB + inactive 40 MiB). */
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable(v2, 0, &v), 0);
        CU_ASSERT_EQUAL(v, 41943040u + 8388608u);
        /* With swap: the anonymous pages too, as far as swap has room. */
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable(v2, 1u << 30, &v), 0);
        CU_ASSERT_EQUAL(v, 41943040u + 8388608u + 16699392u + 24576u);
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable(v2, 4096, &v), 0);
        CU_ASSERT_EQUAL(v, 41943040u + 8388608u + 4096u);
        /* The refaults of the recorded group (Linux 6.x: workingset_refault_file), an older kernel's name,
         * and none. */
        CU_ASSERT_EQUAL(cgroup_parse_refaults(v2), 25088u);
        free(v2);
        CU_ASSERT_EQUAL(cgroup_parse_refaults("workingset_refault 7\n"), 7u);
        CU_ASSERT_EQUAL(cgroup_parse_refaults("anon 1\n"), 0u);
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable("active_file 1\n", 0, &v), -ENODATA);
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable("active_file 1\ninactive_file 2\n", 1, &v), -ENODATA);
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable("active_file x\ninactive_file 2\n", 0, &v), -EINVAL);
        CU_ASSERT_EQUAL(cgroup_parse_reclaimable("active_file 18446744073709551615\ninactive_file 2\n", 0, &v), 0);
        CU_ASSERT_EQUAL(v, UINT64_MAX); /* saturates */

        /* A fixture tree: /a holds 10 MiB of inactive file pages. */
        struct cgroup_layout l = { .memory_v2 = true };
        l.v2_root = l.memory_root = headroom_root("v2");
        struct cgroup_reclaim_figures f;
        CU_ASSERT_EQUAL(cgroup_reclaimable(&l, "/a", 0, &f), 0);
        CU_ASSERT_EQUAL(f.reclaimable, 10485760u);
        CU_ASSERT_EQUAL(f.current, 943718400u);
        CU_ASSERT_EQUAL(f.refaulted_file, 0u);
        CU_ASSERT_EQUAL(cgroup_reclaimable(&l, "/nope", 0, &f), -ENOENT);
        CU_ASSERT_EQUAL(cgroup_reclaim(&l, "/nope", 4096), -ENOENT);
        /* memory on v1: nothing to write to, whatever the group. */
        l.memory_v2 = false;
        CU_ASSERT_EQUAL(cgroup_reclaimable(&l, "/a", 0, &f), -EOPNOTSUPP);
        CU_ASSERT_EQUAL(cgroup_reclaim(&l, "/a", 4096), -EOPNOTSUPP);
        free(l.v2_root);
}

static void glob_expect(const struct cgroup_layout *l, const char *pattern, size_t max, const char *const *want,
                        size_t n_want, bool want_truncated) {
        char **found = NULL;
        bool truncated = !want_truncated;
        const struct cgroup_glob_limits lim = { .max = max, .max_per_owner = max, .entries = 16384, .entries_per_owner = 512 };
        int n = cgroup_glob(l, pattern, &lim, &found, NULL, &truncated);
        CU_ASSERT_EQUAL_FATAL(n, (int) n_want);
        CU_ASSERT_EQUAL(truncated, want_truncated);
        for (int i = 0; i < n; i++) {
                if (want[i]) /* NULL: any of them (readdir()'s order) */
                        CU_ASSERT_STRING_EQUAL(found[i], want[i]);
                free(found[i]);
        }
        CU_ASSERT_PTR_NULL(found[n]);
        free(found);
}

static void test_glob(void) {
        struct cgroup_layout l = { .memory_v2 = true };
        l.v2_root = l.memory_root = headroom_root("v2");
        glob_expect(&l, "/*", 16, (const char *[]){ "/a", "/x" }, 2, false);
        glob_expect(&l, "/a/*/c", 16, (const char *[]){ "/a/b/c" }, 1, false);
        glob_expect(&l, "/a/b", 16, (const char *[]){ "/a/b" }, 1, false);
        glob_expect(&l, "/[ax]", 16, (const char *[]){ "/a", "/x" }, 2, false);
        glob_expect(&l, "/*/c", 16, NULL, 0, false);   /* a '*' never crosses a '/' */
        glob_expect(&l, "/nope/*", 16, NULL, 0, false);
        glob_expect(&l, "/a/b/c/memory.stat", 16, NULL, 0, false); /* files are not groups */
        glob_expect(&l, "/*", 1, (const char *[]){ NULL }, 1, true);
        char **found;
        CU_ASSERT_EQUAL(cgroup_glob(&l, "a", NULL, &found, NULL, NULL), -EINVAL);
        const struct cgroup_glob_limits none = { .max = 0 };
        CU_ASSERT_EQUAL(cgroup_glob(&l, "/*", &none, &found, NULL, NULL), -EINVAL);
        free(l.v2_root);
}

/* Whose stall: a group's own limit events (v2 high + max; the local file), and what a group explains. */
static void test_limit_stall(void) {
        uint64_t v;
        CU_ASSERT_EQUAL(cgroup_parse_limit_events("low 0\nhigh 7\nmax 5\noom 0\noom_kill 0\n", &v), 0);
        CU_ASSERT_EQUAL(v, 12u);
        CU_ASSERT_EQUAL(cgroup_parse_limit_events("oom 1\n", &v), 0);
        CU_ASSERT_EQUAL(v, 0u);
        CU_ASSERT(cgroup_parse_limit_events("max x\n", &v) < 0);
        /* Its own limit reclaimed: all of its stall; else what its children explain, never more than it. */
        CU_ASSERT_EQUAL(limit_stall_explains(1000, true, 0), 1000u);
        CU_ASSERT_EQUAL(limit_stall_explains(1000, false, 400), 400u);
        CU_ASSERT_EQUAL(limit_stall_explains(1000, false, 5000), 1000u);
        CU_ASSERT_EQUAL(limit_stall_explains(0, false, 0), 0u);
}

/* Owners: user A's 100 groups (some chowned on to other uids, as in a user namespace) take at most
 * max_per_owner places and entries_per_owner reads; user B's 3 groups are all found. */
static void test_glob_owners(void) {
        char root[] = "/tmp/pressured-glob-XXXXXX", path[512];
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(root));
        struct cgroup_layout l = { .memory_v2 = true, .v2_root = root };
        snprintf(path, sizeof(path), "%s/users", root);
        CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
        for (int u = 0; u < 2; u++) {
                snprintf(path, sizeof(path), "%s/users/%c", root, 'a' + u);
                CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
                CU_ASSERT_EQUAL(chown(path, 100001 + (uid_t) u, 100001 + (gid_t) u), 0);
                for (int i = 0; i < (u == 0 ? 100 : 3); i++) {
                        snprintf(path, sizeof(path), "%s/users/%c/g%03d", root, 'a' + u, i);
                        CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
                        CU_ASSERT_EQUAL(chown(path, 200000 + (uid_t) i, 200000), 0); /* A's namespace's uids */
                }
        }
        const struct cgroup_glob_limits lim = { .max = 1024, .max_per_owner = 10, .entries = 16384, .entries_per_owner = 512 };
        char **found = NULL;
        uid_t *owners = NULL;
        bool truncated = false;
        int n = cgroup_glob(&l, "/users/*/*", &lim, &found, &owners, &truncated);
        CU_ASSERT_EQUAL(n, 13);
        CU_ASSERT(truncated);
        int of_a = 0, of_b = 0;
        for (int i = 0; i < n; i++) {
                of_a += owners[i] == 100001 && strncmp(found[i], "/users/a/", 9) == 0;
                of_b += owners[i] == 100002 && strncmp(found[i], "/users/b/", 9) == 0;
                free(found[i]);
        }
        CU_ASSERT_EQUAL(of_a, 10);
        CU_ASSERT_EQUAL(of_b, 3);
        free(found);
        free(owners);
        /* A deeper pattern that never matches: A's listing stops at its share, B's is read whole. */
        const struct cgroup_glob_limits few = { .max = 1024, .max_per_owner = 64, .entries = 16384, .entries_per_owner = 20 };
        n = cgroup_glob(&l, "/users/*/*/x", &few, &found, NULL, &truncated);
        CU_ASSERT_EQUAL(n, 0);
        CU_ASSERT(truncated);
        free(found);
        snprintf(path, sizeof(path), "rm -rf %s", root);
        CU_ASSERT_EQUAL(system(path), 0);
}

static void test_headroom_tree_v1(void) {
        struct cgroup_layout l = { .memory_v2 = false };
        struct headroom_group g[8];
        struct headroom h;
        struct headroom_thresholds t;
        size_t n = 0;

        l.memory_root = headroom_root("v1");
        l.v2_root = l.memory_root;
        headroom_thresholds_default(&t);
        /* h's limit is v1's "unlimited" (a huge number): g's applies, with its page cache. */
        CU_ASSERT_EQUAL_FATAL(cgroup_headroom_groups(&l, "/g/h", g, NULL, 8, &n), 0);
        CU_ASSERT_EQUAL_FATAL(n, 1u);
        CU_ASSERT_EQUAL(g[0].limit, 67108864u);
        CU_ASSERT_EQUAL(g[0].usage, 66060288u);
        CU_ASSERT_EQUAL(g[0].reclaimable, 8388608u);
        headroom_evaluate(g, n, &t, &h);
        CU_ASSERT_EQUAL(h.level, LEVEL_LOW); /* 57671680 / 67108864 = 85.9% */
        free(l.memory_root);
}

static void test_headroom_arithmetic(void) {
        struct headroom_thresholds t;
        struct headroom h;
        headroom_thresholds_default(&t);
        CU_ASSERT_EQUAL(headroom_thresholds_check(&t), 0);

        /* Each level at its threshold, inclusive; critical at the limit and beyond. */
        const struct { uint64_t usage, reclaimable; enum level want; } cases[] = {
                { 84, 0, LEVEL_OK }, { 85, 0, LEVEL_LOW }, { 91, 0, LEVEL_LOW }, { 92, 0, LEVEL_MEDIUM },
                { 97, 0, LEVEL_CRITICAL }, { 100, 0, LEVEL_CRITICAL }, { 120, 0, LEVEL_CRITICAL },
                { 99, 20, LEVEL_OK }, /* page cache the kernel takes back cheaply does not count */
                { 10, 50, LEVEL_OK },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct headroom_group g = { cases[i].usage * 1000000, 100 * 1000000, cases[i].reclaimable * 1000000 };
                headroom_evaluate(&g, 1, &t, &h);
                CU_ASSERT_EQUAL(h.level, cases[i].want);
        }

        /* Sizes left (headroom_low=512M): low under 512 MiB left whatever the limit's size, so a 64 GiB
         * group at 99% used is low where a 1 GiB group at 50% is too. */
        struct headroom_thresholds sized = t;
        sized.left[LEVEL_LOW] = 512ULL << 20;
        sized.left[LEVEL_MEDIUM] = 256ULL << 20;
        sized.left[LEVEL_CRITICAL] = 64ULL << 20;
        CU_ASSERT_EQUAL(headroom_thresholds_check(&sized), 0);
        const struct { uint64_t usage_mib, limit_mib; enum level want; } sizes[] = {
                { 512, 1024, LEVEL_LOW },      { 511, 1024, LEVEL_OK },        { 800, 1024, LEVEL_MEDIUM },
                { 1000, 1024, LEVEL_CRITICAL }, { 65100, 65536, LEVEL_LOW },   { 65000, 65536, LEVEL_OK },
                { 0, 256, LEVEL_OK },           /* more room wanted than the limit: nothing used is no warning */
        };
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                struct headroom_group g = { sizes[i].usage_mib << 20, sizes[i].limit_mib << 20, 0, 0 };
                headroom_evaluate(&g, 1, &sized, &h);
                CU_ASSERT_EQUAL(h.level, sizes[i].want);
                CU_ASSERT_EQUAL(h.left, (sizes[i].limit_mib - MIN(sizes[i].usage_mib, sizes[i].limit_mib)) << 20);
        }
        /* Of two groups, the one at the higher level decides, not the one nearer its limit in share. */
        struct headroom_group two[2] = { { 900ULL << 20, 1024ULL << 20, 0, 0 }, { 63ULL << 30, 64ULL << 30, 0, 0 } };
        headroom_evaluate(two, 2, &sized, &h);
        CU_ASSERT_EQUAL(h.level, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(h.binding, 0u);
        sized.left[LEVEL_MEDIUM] = 600ULL << 20; /* more room than low's: rising sizes are refused */
        CU_ASSERT_EQUAL(headroom_thresholds_check(&sized), -EINVAL);

        /* Bad thresholds: falling, zero, above the limit. */
        struct headroom_thresholds bad = t;
        bad.f[LEVEL_MEDIUM] = 0.80;
        CU_ASSERT_EQUAL(headroom_thresholds_check(&bad), -EINVAL);
        bad = t;
        bad.f[LEVEL_LOW] = 0;
        CU_ASSERT_EQUAL(headroom_thresholds_check(&bad), -EINVAL);
        bad = t;
        bad.f[LEVEL_CRITICAL] = 1.01;
        CU_ASSERT_EQUAL(headroom_thresholds_check(&bad), -EINVAL);

        /* The next look: half the time to the threshold, at the measured growth or a tenth of the limit
         * per second, whichever is faster; within the bounds. */
        struct headroom_group g = { 50u << 20, 100u << 20, 0 }; /* 35 MiB short of low */
        headroom_evaluate(&g, 1, &t, &h);
        uint64_t room = h.room_bytes;
        CU_ASSERT(room > (34u << 20) && room < (36u << 20));
        uint64_t want = (uint64_t) ((unsigned __int128) room * 1000000 / ((100u << 20) / 1000 * 100) / 2);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 0, 100, 1000, 60000000), want);
        want = (uint64_t) ((unsigned __int128) room * 1000000 / (40u << 20) / 2);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 40u << 20, 100, 1000, 60000000), want);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 0, 100, 5000000, 60000000), 5000000u);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 0, 100, 1000, 100000), 100000u);
        /* A gentler floor (the system's: 1% of its memory per second) looks ten times less often. */
        want = (uint64_t) ((unsigned __int128) room * 1000000 / ((100u << 20) / 1000 * 10) / 2);
        CU_ASSERT_EQUAL(headroom_next_check_usec(&h, 0, 10, 1000, 60000000), want);
}

static void test_headroom_texts(void) {
        uint64_t v = 0;
        struct cgroup_memory_events e;

        CU_ASSERT_EQUAL(headroom_parse_field("MemTotal:       24576000 kB\nMemFree: 1 kB\nMemAvailable:    1000 kB\n",
                                             "MemAvailable", &v), 0);
        CU_ASSERT_EQUAL(v, 1024000u);
        CU_ASSERT_EQUAL(headroom_parse_field("MemTotal: 1 kB\n", "MemAvailable", &v), -ENODATA);
        CU_ASSERT_EQUAL(headroom_parse_field("MemTotal: 99999999999999999999 kB\n", "MemTotal", &v), -EINVAL);
        CU_ASSERT_EQUAL(headroom_parse_field("inactive_file_x 5\ninactive_file 7\n", "inactive_file", &v), 0);
        CU_ASSERT_EQUAL(v, 7u);

        CU_ASSERT_EQUAL(cgroup_parse_memory_events("low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n", &e), 0);
        CU_ASSERT_EQUAL(e.max, 3u);
        CU_ASSERT_EQUAL(e.oom_kill, 1u);
        /* v1's memory.oom_control: no max, and oom_kill_disable is not oom_kill. */
        CU_ASSERT_EQUAL(cgroup_parse_memory_events("oom_kill_disable 1\nunder_oom 0\noom_kill 2\n", &e), 0);
        CU_ASSERT_EQUAL(e.max, 0u);
        CU_ASSERT_EQUAL(e.oom_kill, 2u);
        CU_ASSERT_EQUAL(cgroup_parse_memory_events("oom_kill x\n", &e), -EINVAL);
}

/* A real group: its anonymous memory grows by what a process in it touches. */
static void test_live(void) {
        struct cgroup_layout l = {};
        struct pressure_gen g;
        char cwd[400];
        uint64_t before = 0, after = 0;

        CU_ASSERT_EQUAL_FATAL(cgroup_layout_discover(&l), 0);
        CU_ASSERT_FATAL(getcwd(cwd, sizeof(cwd)) != NULL);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, cwd, 256u << 20), 0);
        int p[2];
        CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
        /* This program again: 32 MiB touched, then it waits to be killed. */
        char self[512];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        CU_ASSERT_FATAL(n > 0);
        self[n] = 0;
        const char *const argv[] = { self, "--grow", NULL };
        CU_ASSERT_EQUAL(cgroup_anon(&l, g.cgroup, &before), 0);
        pid_t pid = pressure_gen_spawn(&g, argv, p[1]);
        close(p[1]);
        struct test_lines lines = { .fd = p[0] };
        char line[64] = "";
        CU_ASSERT_EQUAL(test_lines_next(&lines, 20000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "grown");
        CU_ASSERT_EQUAL(cgroup_anon(&l, g.cgroup, &after), 0);
        CU_ASSERT(after >= before + (30u << 20));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        pressure_gen_destroy(&g);
        cgroup_layout_done(&l);
}

/* Records as this machine's kernel (6.18) wrote them. */
static void test_kmsg(void) {
        static const char kill[] =
                "6,9377,13751155609,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                "oom_memcg=/pressured-test-24127,task_memcg=/pressured-test-24127/sub,task=shrinker-client,pid=24131,uid=0\n";
        static const char odd_comm[] =
                "6,1,5,-;oom-kill:constraint=CONSTRAINT_NONE,task_memcg=/a,task=we,ird,pid=1x,pid=7,uid=1000";
        struct oom_kill_record r;

        CU_ASSERT_EQUAL(kmsg_parse_oom_kill(kill, strlen(kill), &r), 0);
        CU_ASSERT_EQUAL(r.usec, 13751155609ULL);
        CU_ASSERT_STRING_EQUAL(r.task_memcg, "/pressured-test-24127/sub");
        CU_ASSERT_STRING_EQUAL(r.task, "shrinker-client");
        CU_ASSERT_EQUAL(r.pid, 24131);
        CU_ASSERT_EQUAL(r.uid, 0u);
        /* A command with commas and "pid=" in it: the last ",pid=" is the pid. */
        CU_ASSERT_EQUAL(kmsg_parse_oom_kill(odd_comm, strlen(odd_comm), &r), 0);
        CU_ASSERT_STRING_EQUAL(r.task, "we,ird,pid=1x");
        CU_ASSERT_EQUAL(r.pid, 7);
        CU_ASSERT_EQUAL(r.uid, 1000u);

        const char *other = "3,2,3,-;Memory cgroup out of memory: Killed process 24131 (shrinker-client)";
        CU_ASSERT_EQUAL(kmsg_parse_oom_kill(other, strlen(other), &r), -ENOMSG);
        const char *bad[] = { "no header", "6,1;oom-kill:task_memcg=/a,task=x,pid=1",
                              "6,1,2,-;oom-kill:task_memcg=/a,task=x", "6,1,2,-;oom-kill:task=x,pid=1",
                              "6,1,2,-;oom-kill:task_memcg=/a,task=x,pid=-1" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                CU_ASSERT_EQUAL(kmsg_parse_oom_kill(bad[i], strlen(bad[i]), &r), -EINVAL);

        CU_ASSERT_TRUE(kmsg_memcg_in("/a/b", "/a"));
        CU_ASSERT_TRUE(kmsg_memcg_in("/a", "/a"));
        CU_ASSERT_FALSE(kmsg_memcg_in("/ab", "/a"));
        CU_ASSERT_TRUE(kmsg_memcg_in("/ab", "/"));
        /* Not a log: nothing found, no crash. */
        CU_ASSERT(kmsg_find_oom_kill("/dev/null", "/", 0, 10, &r) < 0);
}

/* /proc/PID/status and /proc/PID/stat, as the kernel writes them and as they must not be read. */
static void test_proc_texts(void) {
        uid_t u[4];
        CU_ASSERT_EQUAL(proc_status_parse_uids("Name:\tredis-server\nUmask:\t0022\nState:\tS (sleeping)\n"
                                               "Uid:\t107\t108\t109\t110\nGid:\t0\t0\t0\t0\n", u), 0);
        CU_ASSERT(u[0] == 107 && u[1] == 108 && u[2] == 109 && u[3] == 110);
        CU_ASSERT_EQUAL(proc_status_parse_uids("Name:\tx\nUid:\t4294967295\t0\t0\t0\n", u), 0);
        CU_ASSERT_EQUAL(u[0], (uid_t) 4294967295u);
        CU_ASSERT_EQUAL(proc_status_parse_uids("Name:\tx\nUid:\t4294967296\t0\t0\t0\n", u), -EINVAL);
        CU_ASSERT_EQUAL(proc_status_parse_uids("Name:\tx\nUid:\t1\t2\t3\n", u), -EINVAL);
        CU_ASSERT_EQUAL(proc_status_parse_uids("Name:\tUid:\t1\t2\t3\t4\n", u), -EINVAL); /* not a line of its own */
        CU_ASSERT_EQUAL(proc_status_parse_uids("", u), -EINVAL);
        /* The real thing: this process's own. */
        char buf[4096];
        FILE *f = fopen("/proc/self/status", "re");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        CU_ASSERT_EQUAL(proc_status_parse_uids(buf, u), 0);
        CU_ASSERT(u[0] == getuid() && u[1] == geteuid());

        uint64_t start;
        CU_ASSERT_EQUAL(pidref_parse_stat("42 (a (b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0", &start), 0);
        CU_ASSERT_EQUAL(start, 12345u);
        CU_ASSERT_EQUAL(pidref_parse_stat("42 (x) S 1 2", &start), -EINVAL);
        CU_ASSERT_EQUAL(pidref_parse_stat("no parenthesis", &start), -EINVAL);
}

int main(int argc, char *argv[]) {
        if (argc == 2 && strcmp(argv[1], "--grow") == 0) {
                size_t size = 32u << 20;
                char *p = malloc(size);
                if (!p)
                        return 1;
                memset(p, 1, size);
                printf("grown\n");
                fflush(stdout);
                pause();
                return p[size - 1];
        }
        static const struct test_case cases[] = {
                { "memory.stat as recorded", test_parse_recorded },
                { "bad memory.stat text", test_parse_bad },
                { "a real group's anonymous memory", test_live },
                { "headroom of a v2 tree: nested limits, memory.high below memory.max, none", test_headroom_tree_v2 },
                { "headroom of a v1 tree", test_headroom_tree_v1 },
                { "headroom levels, thresholds and the next look", test_headroom_arithmetic },
                { "meminfo and memory.events text", test_headroom_texts },
                { "the kernel log's oom-kill lines", test_kmsg },
                { "process status and stat texts", test_proc_texts },
                { "what reclaim could take from a group", test_reclaimable },
                { "the groups a glob names", test_glob },
                { "a glob's groups and reads per owner", test_glob_owners },
                { "whose stall: limit events and what a group explains", test_limit_stall },
                {},
        };
        return test_run("cgroup", cases, NULL);
}
