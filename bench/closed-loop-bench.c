/* SPDX-License-Identifier: MIT */
/* The closed loop, with and without pressured, in the same run: the example cache (examples/kvcache.c)
 * grows by 8 MiB/s in a cgroup with a 64 MiB limit for 15 s while a 48 MiB file-backed working set is read
 * there (tests/kv-load.c). Reports whether the cache survived, the group's memory stall, and the work
 * done: values stored and working-set reads, per second of the run. Twice: with the working set's page
 * cache charged to the group (reclaim stalls, PSI sees it), and charged outside it, read once by this
 * program before the run ("anonymous only": the group holds nothing but the cache, PSI stays quiet
 * until the limit, and only headroom warns).
 *
 * Usage: closed-loop-bench BUILD_DIR [SECONDS [MIB_PER_SECOND]] (as root) */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 64
#define WORKING_SET_MIB 48

static const char *build;

struct result {
        int survived;
        double seconds;
        unsigned long sets, reads, evicted;
        uint64_t stall_us;
};

static int run(int with_daemon, int anon_only, double seconds, double rate, struct result *res) {
        struct pressure_gen g;
        struct test_daemon d = {};
        char cwd[400], ws[600], kv_sock[200], secs[32], rates[32];
        int r;

        if (!getcwd(cwd, sizeof(cwd)) || (r = pressure_gen_create(&g, cwd, (uint64_t) LIMIT_MIB << 20)) < 0)
                return -EIO;
        snprintf(ws, sizeof(ws), "%s/closed-loop-bench.dat", cwd);
        if (pressure_gen_working_set(ws, WORKING_SET_MIB) < 0 || (anon_only && pressure_gen_charge_outside(ws) < 0)) {
                pressure_gen_destroy(&g);
                return -EIO;
        }

        if (with_daemon) {
                static const char *const args[] = { "--config", "/dev/null", NULL };
                if (test_daemon_start(&d, args) < 0)
                        return -ECHILD;
                snprintf(kv_sock, sizeof(kv_sock), "%s/kv.sock", d.dir);
        } else
                snprintf(kv_sock, sizeof(kv_sock), "/tmp/closed-loop-bench-%d.sock", (int) getpid());

        char kvcache[600], load[600];
        snprintf(kvcache, sizeof(kvcache), "%s/kvcache", build);
        snprintf(load, sizeof(load), "%s/tests/kv-load", build);
        int p[2];
        if (pipe(p) < 0)
                return -errno;
        const char *kv_argv[] = { kvcache, "--listen", kv_sock, "--pressured",
                                  with_daemon ? d.socket : "/nonexistent/socket", NULL };
        pid_t kv = pressure_gen_spawn_quiet(&g, kv_argv, p[1]);
        close(p[1]);
        char line[256];
        FILE *kv_out = fdopen(p[0], "r");
        if (!fgets(line, sizeof(line), kv_out))
                return -EIO;

        snprintf(secs, sizeof(secs), "%g", seconds);
        snprintf(rates, sizeof(rates), "%g", rate);
        int q[2];
        if (pipe(q) < 0)
                return -errno;
        uint64_t stall0 = pressure_gen_some_total(&g);
        double t0 = (double) test_now_ms() / 1000;
        const char *load_argv[] = { load, kv_sock, ws, secs, rates, NULL };
        pid_t ld = pressure_gen_spawn_quiet(&g, load_argv, q[1]);
        close(q[1]);
        int status;
        waitpid(ld, &status, 0);
        res->seconds = (double) test_now_ms() / 1000 - t0;
        res->stall_us = pressure_gen_some_total(&g) - stall0;
        char out[512] = "";
        ssize_t n = read(q[0], out, sizeof(out) - 1);
        close(q[0]);
        out[n > 0 ? n : 0] = 0;
        res->survived = strncmp(out, "survived", 8) == 0;
        const char *s = strstr(out, "sets=");
        res->sets = s ? strtoul(s + 5, NULL, 10) : 0;
        s = strstr(out, "reads=");
        res->reads = s ? strtoul(s + 6, NULL, 10) : 0;
        s = strstr(out, "evicted=");
        res->evicted = s ? strtoul(s + 8, NULL, 10) : 0;
        if (!res->survived) {
                s = strstr(out, "after=");
                if (s)
                        res->seconds = atof(s + 6);
        }

        kill(kv, SIGTERM);
        waitpid(kv, NULL, 0);
        fclose(kv_out);
        unlink(ws);
        unlink(kv_sock);
        if (with_daemon)
                test_daemon_stop(&d);
        pressure_gen_destroy(&g);
        return 0;
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: closed-loop-bench BUILD_DIR [SECONDS [MIB_PER_SECOND]]\n");
                return 2;
        }
        build = argv[1];
        double seconds = argc > 2 ? atof(argv[2]) : 15, rate = argc > 3 ? atof(argv[3]) : 8;
        setenv("PRESSURED_TEST_NO_LOG", "1", 1);
        char bin[600];
        snprintf(bin, sizeof(bin), "%s/pressured", build);
        setenv("PRESSURED_BIN", bin, 1);

        for (int anon_only = 0; anon_only < 2; anon_only++) {
                struct result without = {}, with = {};
                if (run(0, anon_only, seconds, rate, &without) < 0 || run(1, anon_only, seconds, rate, &with) < 0) {
                        fprintf(stderr, "closed-loop-bench: a run failed (root? cgroups?)\n");
                        return 1;
                }
                printf("closed loop%s: %d MiB cgroup, cache growing %.0f MiB/s for %.0f s, %d MiB working set read%s\n",
                       anon_only ? " (anonymous only)" : "", LIMIT_MIB, rate, seconds, WORKING_SET_MIB,
                       anon_only ? ", its page cache charged outside the group" : "");
                printf("%-18s %-22s %12s %14s %16s %9s\n", "", "cache", "stall ms/s", "values/s", "ws reads/s", "evicted");
                struct result *r[2] = { &without, &with };
                const char *names[2] = { "without pressured", "with pressured" };
                for (int i = 0; i < 2; i++) {
                        char fate[32];
                        if (r[i]->survived)
                                snprintf(fate, sizeof(fate), "survived %.1f s", r[i]->seconds);
                        else
                                snprintf(fate, sizeof(fate), "killed after %.1f s", r[i]->seconds);
                        printf("%-18s %-22s %12.1f %14.0f %16.0f %9lu\n", names[i], fate,
                               (double) r[i]->stall_us / 1000 / r[i]->seconds, (double) r[i]->sets / r[i]->seconds,
                               (double) r[i]->reads / r[i]->seconds, r[i]->evicted);
                }
                printf("ratio with/without: stall per second %.2fx, values per second %.2fx, working-set reads per "
                       "second %.2fx\n\n",
                       ((double) with.stall_us / with.seconds) / ((double) without.stall_us / without.seconds),
                       ((double) with.sets / with.seconds) / ((double) without.sets / without.seconds),
                       ((double) with.reads / with.seconds) / ((double) without.reads / without.seconds));
        }
        return 0;
}
