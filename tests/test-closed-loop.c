/* SPDX-License-Identifier: MIT */
/* The closed loop on real pressure: the example cache (examples/kvcache.c) keeps growing in a cgroup with a
 * 64 MiB limit while a file-backed working set is read there. Its values live on a pressure_lru, so
 * pressured's reclaim rounds for the cgroup shrink it. 90 MiB of values go in over 15 s: without
 * shrinking it is OOM-killed about half way (the benchmark shows that side); here it must survive, must
 * have evicted values, and must still hold a good share of them: reclaim trims, it does not empty. Twice:
 * with the working set's page cache charged to the group (reclaim stalls: PSI), and charged outside it
 * (read once by this test first: the group holds only anonymous memory, PSI stays quiet until the limit,
 * and only the headroom levels can warn). */

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 64
#define WORKING_SET_MIB 48

static struct test_daemon daemon_;


static void closed_loop(bool anon_only) {
        struct pressure_gen g;
        char cwd[400], ws[600], kv_sock[200], line[512];
        const char *kvcache = getenv("KVCACHE_BIN"), *load = getenv("KV_LOAD_BIN");

        CU_ASSERT_PTR_NOT_NULL_FATAL(kvcache);
        CU_ASSERT_PTR_NOT_NULL_FATAL(load);
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, cwd, (uint64_t) LIMIT_MIB << 20), 0);
        test_cleanup_path(g.v2_dir, true);
        if (g.mem_dir[0])
                test_cleanup_path(g.mem_dir, true);
        snprintf(ws, sizeof(ws), "%s/closed-loop-%d.dat", cwd, (int) getpid());
        test_cleanup_path(ws, false);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_working_set(ws, WORKING_SET_MIB), 0);
        if (anon_only)
                CU_ASSERT_EQUAL_FATAL(pressure_gen_charge_outside(ws), 0);
        snprintf(kv_sock, sizeof(kv_sock), "%s/kv.sock", daemon_.dir);
        test_cleanup_path(kv_sock, false);

        /* The cache, in the cgroup; it says when it listens. */
        int p[2];
        CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
        const char *kv_argv[] = { kvcache, "--listen", kv_sock, "--pressured", daemon_.socket, NULL };
        pid_t kv = pressure_gen_spawn(&g, kv_argv, p[1]);
        close(p[1]);
        test_cleanup_pid(kv);
        FILE *kv_out = fdopen(p[0], "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof(line), kv_out));
        CU_ASSERT_PTR_NOT_NULL(strstr(line, "shrinker registered"));

        /* The load, in the cgroup too: 6 MiB/s of values for 15 s (90 MiB), and the working set read. */
        int q[2];
        CU_ASSERT_EQUAL_FATAL(pipe(q), 0);
        const char *load_argv[] = { load, kv_sock, ws, "15", "6", NULL };
        pid_t ld = pressure_gen_spawn(&g, load_argv, q[1]);
        close(q[1]);
        test_cleanup_pid(ld);
        int status = 0;
        waitpid(ld, &status, 0);
        test_cleanup_forget_pid(ld);
        char result[512] = "";
        ssize_t n = read(q[0], result, sizeof(result) - 1);
        close(q[0]);
        result[n > 0 ? n : 0] = 0;
        printf("\n    kv-load: %s", result);

        CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CU_ASSERT_EQUAL(strncmp(result, "survived", 8), 0);
        unsigned long evicted = 0;
        const char *ev = strstr(result, "evicted=");
        if (ev)
                evicted = strtoul(ev + 8, NULL, 10);
        CU_ASSERT(evicted > 0);
        /* Trimmed, not emptied: the cache still holds a share of what was put in. Only about a tenth fits
         * beside the 48 MiB file, and where in its swings the cache is when the load ends varies: 10.6% to
         * 38% of the values in three runs of the current policy; one cut of it, which went on taking
         * goals while the stall did not fall, left 5 values of 23,039, and one 1,262 (the kernel's formula
         * alone kept 6.6%). A floor against emptying, not a measure of the policy: bench/kvcache-bench.c
         * measures that. */
        unsigned long sets = 0, items = 0;
        const char *st = strstr(result, "sets="), *it = strstr(result, "items=");
        if (st)
                sets = strtoul(st + 5, NULL, 10);
        if (it)
                items = strtoul(it + 6, NULL, 10);
        CU_ASSERT(sets > 0 && items >= sets / 32);
        CU_ASSERT_EQUAL(kill(kv, 0), 0); /* still alive */

        kill(kv, SIGTERM);
        waitpid(kv, NULL, 0);
        test_cleanup_forget_pid(kv);
        fclose(kv_out);
        unlink(ws);
        pressure_gen_destroy(&g);
}

static void test_cache_survives(void) {
        closed_loop(false);
}

static void test_cache_survives_anon_only(void) {
        closed_loop(true);
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "the example cache survives real pressure", test_cache_survives },
                { "and with the working set charged outside its group (anonymous only)", test_cache_survives_anon_only },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = test_need_root_psi();
#ifdef __SANITIZE_ADDRESS__
        /* AddressSanitizer keeps freed memory in quarantine and adds shadow memory: the cache could not
         * shrink inside 64 MiB however well it is asked. The plain build runs this test. */
        skip = "built with AddressSanitizer, whose quarantine keeps freed memory";
#endif
        if (!skip) {
                static const char *const args[] = { "--config", "/dev/null", NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        return 1;
                }
        }
        return test_run("closed-loop", cases, skip);
}
