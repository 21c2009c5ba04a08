/* SPDX-License-Identifier: MIT */
/* The headline benchmark: a cache that sizes itself. The example cache (examples/kvcache.c) serves a
 * skewed GET workload (bench/kv-zipf.c: Zipf s = 0.99 over more values than fit) in a cgroup with a memory
 * limit, beside a file working set that another process of the group reads; a miss costs a fixed
 * recompute and inserts the value. With the same workload and seed, per policy:
 *   (a) unbounded, no daemon;
 *   (b) drop every value whenever pressured reports the group's level rising (what applications do
 *       with a low-memory warning today);
 *   (c) a fixed cap on the values, at the caps around the edge;
 *   (d) pressured with the pressure_lru shrinker, default configuration.
 * Four workloads, one table each:
 *   zipf99: Zipf 0.99, a miss costs 250 us;
 *   zipf80: Zipf 0.8, a miss costs 1 ms: flatter and costlier, where dropping everything hurts;
 *   phase:  as zipf99, but halfway through the neighbour's file working set doubles (a second reader
 *           of a second file), so that the cap right for the first half is wrong for the second; its
 *           steady figures hold the change, and a line per policy gives the stall once it has settled
 *           (from 5 s after the change);
 *   burst:  as zipf99, but the neighbour reads for 20 s after the warm-up, then stops: how long the
 *           cache takes to regain 90% of the room it had before, and what it evicted meanwhile.
 * --repeat N runs the matrix N times, the policies interleaved within each repeat, and prints the
 * median and the worst of each figure. The oracle is the fixed cap with the most requests per second
 * among those whose median steady stall is within the 2 ms/s budget; the unconstrained best cap is
 * shown beside it. Ratios against a cap are taken within a repeat (the same minutes of the machine),
 * then their median and worst. Steady figures start after a warm-up (a third of the run; the burst's
 * warm-up is the time before its neighbour comes). Per run also: CPU seconds of the cache and its load,
 * of the neighbour and of the daemon; the group's IO stall; its file refaults; the neighbour's reads
 * against its rate alone in the same group (measured once per workload and repeat).
 * Writes the cache's size over time in the first repeat to OUT_DIR/kvcache-bench.csv and one plot per
 * workload to OUT_DIR/kvcache-bench-WORKLOAD.svg.
 *
 * Usage: kvcache-bench BUILD_DIR [OUT_DIR] [--repeat N] [--seconds S] (as root)
 * KVCACHE_BENCH_WORKLOAD=name: only that workload; KVCACHE_BENCH_ONLY=word: only the policies whose
 * name has it; KVCACHE_BENCH_CONFIG=file: the daemon's configuration; KVCACHE_BENCH_LOG=1: its log. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 96
#define WORKING_SET_MIB 48
#define KEYS 65536
#define VALUE_BYTES 4096
#define SEED 42
#define SAMPLE_MS 250
#define MAX_SAMPLES 1024
#define MAX_REPEAT 9
#define BURST_WARM_S 8     /* the burst: its neighbour comes after this warm-up, */
#define BURST_READ_S 20    /* reads this long, */
#define BURST_AFTER_S 10   /* and the run goes on this long after it stopped: the regain goal's 10 s */
#define ALONE_S 3          /* the neighbour alone in the group, for its rate */
#define STALL_BUDGET_MS 2.0 /* steady stall per second within which a cap may be the oracle */
#define SETTLE_S 5         /* the phase change: its "settled" figures start this long after the change */

/* The caps around the edge: below it, at it, just over it (the neighbour's 48 MiB and the load's
 * own memory leave about 44 MiB of the 96 for values; every workload's edge is there in its
 * second half). */
static const unsigned caps_mib[] = { 40, 44, 48 };
#define N_CAPS (sizeof(caps_mib) / sizeof(caps_mib[0]))

enum policy { UNBOUNDED, DROP, CAP, PRESSURED };

struct workload {
        const char *name, *what;
        const char *zipf;
        unsigned miss_us;
        unsigned ws_mib; /* the neighbour's file working set */
        bool phase;      /* it doubles halfway (a second reader of a second file as large) */
        bool burst;      /* it reads for BURST_READ_S after BURST_WARM_S, then stops */
        double seconds;  /* the length of a run (--seconds overrides it, except the burst's) */
};

static const struct workload workloads[] = {
        /* zipf80 fills the cache at a quarter of zipf99's pace (a miss costs 1 ms): a longer warm-up */
        { "zipf99", "Zipf(0.99), miss = 250 us", "0.99", 250, WORKING_SET_MIB, false, false, 22 },
        { "zipf80", "Zipf(0.8), miss = 1 ms", "0.8", 1000, WORKING_SET_MIB, false, false, 26 },
        { "phase", "Zipf(0.99), miss = 250 us, the neighbour's working set doubles halfway (24 -> 48 MiB)", "0.99", 250,
          WORKING_SET_MIB / 2, true, false, 22 },
        { "burst", "Zipf(0.99), miss = 250 us, the neighbour reads for 20 s after 8 s, then stops", "0.99", 250,
          WORKING_SET_MIB, false, true, BURST_WARM_S + BURST_READ_S + BURST_AFTER_S },
};
static const struct workload *wl;

struct run {
        enum policy policy;
        unsigned cap_mib;
        char name[64];
        bool ran;
        int survived;
        double seconds;
        unsigned long long requests, hits, misses, p50_us, p99_us, ws_reads;
        double ws_seconds;
        uint64_t stall_us;
        /* steady state: from the first sample after the warm-up to the last */
        double st_seconds;
        unsigned long long st_gets, st_hits;
        uint64_t st_stall_us;
        uint64_t st_io_us, st_refaults; /* the group's IO stall and file refaults, steady */
        /* the phase change, once settled: from SETTLE_S after the change to the end (beside the steady
         * figure, which holds the change itself) */
        double settle_t0, settle_seconds;
        uint64_t settle_stall0, settle_stall_us;
        double cpu_cache_s, cpu_load_s, cpu_neighbour_s, cpu_daemon_s;
        unsigned long evicted_bytes, drops, peak_bytes;
        /* burst: the room before the neighbour came, when it stopped, how long to regain 90% of the room
         * (< 0: not within the run), and what was evicted from its stop to then */
        unsigned long room_bytes, evicted_at_stop, evicted_regaining;
        double stop_t, regain_s;
        size_t n_samples;
        double t[MAX_SAMPLES];
        unsigned long bytes[MAX_SAMPLES];
};

static const char *build;

static int run_policy(struct run *run, double seconds) {
        struct pressure_gen g;
        struct test_daemon d = {};
        char cwd[400], ws[600], ws2[600], kv_sock[300], secs[32], seed[32], keys[32], value[32], miss[32], cap[32], line[512];
        int r;

        if (!getcwd(cwd, sizeof(cwd)) || (r = pressure_gen_create(&g, cwd, (uint64_t) LIMIT_MIB << 20)) < 0)
                return -EIO;
        snprintf(ws, sizeof(ws), "%s/kvcache-bench.dat", cwd);
        snprintf(ws2, sizeof(ws2), "%s/kvcache-bench-2.dat", cwd);
        if ((r = pressure_gen_working_set(ws, wl->ws_mib)) < 0 ||
            (wl->phase && (r = pressure_gen_working_set(ws2, wl->ws_mib)) < 0)) {
                pressure_gen_destroy(&g);
                return r;
        }
        bool with_daemon = run->policy == DROP || run->policy == PRESSURED;
        if (with_daemon) {
                /* KVCACHE_BENCH_CONFIG=file: the daemon's configuration (default: none, the defaults) */
                const char *conf = getenv("KVCACHE_BENCH_CONFIG");
                const char *const args[] = { "--config", conf ? conf : "/dev/null", NULL };
                if (test_daemon_start(&d, args) < 0) {
                        pressure_gen_destroy(&g);
                        return -ECHILD;
                }
                snprintf(kv_sock, sizeof(kv_sock), "%s/kv.sock", d.dir);
        } else
                snprintf(kv_sock, sizeof(kv_sock), "/tmp/kvcache-bench-%d.sock", (int) getpid());

        char kvcache[600], zipf[600];
        snprintf(kvcache, sizeof(kvcache), "%s/kvcache", build);
        snprintf(zipf, sizeof(zipf), "%s/kv-zipf", build);
        snprintf(cap, sizeof(cap), "%llu", (unsigned long long) run->cap_mib << 20);
        const char *kv_argv[8] = { kvcache, "--listen", kv_sock, "--pressured", with_daemon ? d.socket : "/nonexistent/socket" };
        if (run->policy == CAP) {
                kv_argv[5] = "--max-bytes";
                kv_argv[6] = cap;
        } else if (run->policy == DROP)
                kv_argv[5] = "--drop-on-warning";
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t kv = pressure_gen_spawn_quiet(&g, kv_argv, p[1]);
        close(p[1]);
        FILE *kv_out = fdopen(p[0], "r");
        if (kv < 0 || !fgets(line, sizeof(line), kv_out))
                return -EIO;
        int sfd = bench_connect(kv_sock);

        char rsecs[32];
        snprintf(rsecs, sizeof(rsecs), "%g", seconds + 60); /* until told to stop */
        const char *read_argv[] = { zipf, "--read", ws, rsecs, NULL };
        int rp[2];
        if (pipe2(rp, O_CLOEXEC) < 0)
                return -errno;
        pid_t rd = wl->burst ? -1 : pressure_gen_spawn_quiet(&g, read_argv, rp[1]);
        bool burst_over = false;
        run->regain_s = -1;
        run->ran = true;
        const double warm_s = wl->burst ? BURST_WARM_S : seconds / 3;

        snprintf(secs, sizeof(secs), "%g", seconds);
        snprintf(keys, sizeof(keys), "%d", KEYS);
        snprintf(value, sizeof(value), "%d", VALUE_BYTES);
        snprintf(seed, sizeof(seed), "%d", SEED);
        snprintf(miss, sizeof(miss), "%u", wl->miss_us);
        const char *load_argv[] = { zipf, kv_sock, secs, keys, value, seed, miss, wl->zipf, NULL };
        pid_t rd2 = -1;
        const char *read2_argv[] = { zipf, "--read", ws2, secs, NULL };
        bool warm = false;
        unsigned long long gets0 = 0, hits0 = 0;
        uint64_t stall_warm = 0, io_warm = 0, refaults_warm = 0;
        double t_warm = 0;
        int q[2];
        if (pipe2(q, O_CLOEXEC) < 0)
                return -errno;
        uint64_t stall0 = pressure_gen_some_total(&g), t0 = test_now_ms();
        pid_t ld = pressure_gen_spawn_quiet(&g, load_argv, q[1]);
        close(q[1]);

        /* Sample the cache while the load runs; the load's one line comes at its end. */
        char out[512] = "";
        size_t out_len = 0;
        for (;;) {
                struct pollfd pl = { .fd = q[0], .events = POLLIN };
                int k = poll(&pl, 1, SAMPLE_MS);
                if (k > 0) {
                        ssize_t n = read(q[0], out + out_len, sizeof(out) - 1 - out_len);
                        if (n <= 0)
                                break;
                        out_len += (size_t) n;
                        continue;
                }
                if (bench_stats(sfd, line, sizeof(line)) < 0) {
                        if (sfd >= 0)
                                close(sfd);
                        sfd = -1;
                } else if (run->n_samples < MAX_SAMPLES) {
                        unsigned long bytes = (unsigned long) bench_field(line, "bytes=");
                        double t = (double) (test_now_ms() - t0) / 1000;
                        unsigned long long hits = bench_field(line, "hits="), gets = hits + bench_field(line, "misses=");
                        if (!warm && t >= warm_s) {
                                warm = true;
                                t_warm = t;
                                gets0 = gets;
                                hits0 = hits;
                                stall_warm = pressure_gen_some_total(&g);
                                io_warm = pressure_gen_io_some_total(&g);
                                refaults_warm = pressure_gen_file_refaults(&g);
                        } else if (warm) {
                                run->st_seconds = t - t_warm;
                                run->st_gets = gets - gets0;
                                run->st_hits = hits - hits0;
                                run->st_stall_us = pressure_gen_some_total(&g) - stall_warm;
                                run->st_io_us = pressure_gen_io_some_total(&g) - io_warm;
                                run->st_refaults = pressure_gen_file_refaults(&g) - refaults_warm;
                        }
                        if (wl->burst && rd < 0 && !burst_over && t >= warm_s) {
                                run->room_bytes = bytes;
                                rd = pressure_gen_spawn_quiet(&g, read_argv, rp[1]);
                        } else if (wl->burst && rd > 0 && !burst_over && t >= warm_s + BURST_READ_S) {
                                kill(rd, SIGTERM);
                                run->cpu_neighbour_s += bench_reap(rd, NULL);
                                burst_over = true;
                                run->stop_t = t;
                                run->evicted_at_stop = (unsigned long) bench_field(line, "evicted_bytes=");
                        } else if (burst_over && run->regain_s < 0) {
                                run->evicted_regaining = (unsigned long) bench_field(line, "evicted_bytes=") - run->evicted_at_stop;
                                if (bytes >= run->room_bytes / 10 * 9)
                                        run->regain_s = t - run->stop_t;
                        }
                        if (wl->phase && t >= seconds / 2 + SETTLE_S) {
                                uint64_t total = pressure_gen_some_total(&g);
                                if (run->settle_t0 == 0) {
                                        run->settle_t0 = t;
                                        run->settle_stall0 = total;
                                }
                                run->settle_seconds = t - run->settle_t0;
                                run->settle_stall_us = total - run->settle_stall0;
                        }
                        if (wl->phase && rd2 < 0 && t >= seconds / 2) {
                                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
                                rd2 = pressure_gen_spawn_quiet(&g, read2_argv, devnull);
                                close(devnull);
                        }
                        run->t[run->n_samples] = t;
                        run->bytes[run->n_samples++] = bytes;
                        run->peak_bytes = bytes > run->peak_bytes ? bytes : run->peak_bytes;
                        run->evicted_bytes = (unsigned long) bench_field(line, "evicted_bytes=");
                        run->drops = (unsigned long) bench_field(line, "drops=");
                }
        }
        out[out_len] = 0;
        run->cpu_load_s = bench_reap(ld, NULL);
        run->stall_us = pressure_gen_some_total(&g) - stall0;
        close(q[0]);
        run->survived = strncmp(out, "survived", 8) == 0;
        run->seconds = atof(strstr(out, "seconds=") ? strstr(out, "seconds=") + 8 : "0");
        run->requests = bench_field(out, "requests=");
        run->hits = bench_field(out, "hits=");
        run->misses = bench_field(out, "misses=");
        run->p50_us = bench_field(out, "p50_us=");
        run->p99_us = bench_field(out, "p99_us=");
        if (sfd >= 0 && bench_stats(sfd, line, sizeof(line)) == 0) {
                run->evicted_bytes = (unsigned long) bench_field(line, "evicted_bytes=");
                run->drops = (unsigned long) bench_field(line, "drops=");
        }

        close(rp[1]);
        if (rd > 0 && !burst_over) {
                kill(rd, SIGTERM);
                run->cpu_neighbour_s += bench_reap(rd, NULL);
        }
        if (rd2 > 0) {
                kill(rd2, SIGTERM);
                run->cpu_neighbour_s += bench_reap(rd2, NULL);
        }
        ssize_t n = read(rp[0], line, sizeof(line) - 1);
        line[n > 0 ? n : 0] = 0;
        run->ws_reads = bench_field(line, "reads=");
        run->ws_seconds = strstr(line, "seconds=") ? atof(strstr(line, "seconds=") + 8) : 0;
        close(rp[0]);
        if (sfd >= 0)
                close(sfd);
        if (with_daemon)
                run->cpu_daemon_s = bench_proc_cpu_s(d.pid);
        kill(kv, SIGTERM);
        int status = 0;
        run->cpu_cache_s = bench_reap(kv, &status);
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                run->survived = 0; /* the OOM killer's signal */
        fclose(kv_out);
        unlink(ws);
        if (wl->phase)
                unlink(ws2);
        unlink(kv_sock);
        if (with_daemon)
                test_daemon_stop(&d);
        pressure_gen_destroy(&g);
        return 0;
}

static double hit_rate(const struct run *r) {
        return r->requests ? (double) r->hits / (double) r->requests : 0;
}

static double stall_ms_per_s(const struct run *r) {
        return r->seconds > 0 ? (double) r->stall_us / 1000 / r->seconds : 0;
}

static void write_csv(const char *dir, struct run *const *runs, size_t n, bool first) {
        char path[700];
        snprintf(path, sizeof(path), "%s/kvcache-bench.csv", dir);
        FILE *f = fopen(path, first ? "we" : "ae");
        if (!f)
                return;
        if (first)
                fprintf(f, "workload,policy,seconds,cache_bytes\n");
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < runs[i]->n_samples; j++)
                        fprintf(f, "%s,%s,%.2f,%lu\n", wl->name, runs[i]->name, runs[i]->t[j], runs[i]->bytes[j]);
        fclose(f);
        printf("wrote %s\n", path);
}

/* Cache size over time, one line per policy, against the group's limit; a cross where a run was
 * killed. The legend sits under the plot, so that no name is cut at the edge. */
static void write_svg(const char *dir, struct run *const *runs, size_t n, double seconds) {
        static const char *const colours[] = { "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd" };
        const double w = 760, left = 60, right = 30, top = 20, ph = 300, axis = 40, row = 20;
        const double h = top + ph + axis + row * (double) (n + 1) + 10;
        double ymax = LIMIT_MIB;
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < runs[i]->n_samples; j++)
                        ymax = (double) runs[i]->bytes[j] / 1048576 > ymax ? (double) runs[i]->bytes[j] / 1048576 : ymax;
        ymax = ((int) (ymax / 16) + 1) * 16;
        char path[700];
        snprintf(path, sizeof(path), "%s/kvcache-bench-%s.svg", dir, wl->name);
        FILE *f = fopen(path, "we");
        if (!f)
                return;
        double pw = w - left - right;
        fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h);
        fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
        fprintf(f, "<text x=\"%.0f\" y=\"14\">%s</text>\n", left, wl->what);
        for (int y = 0; y <= (int) ymax; y += 16) {
                double py = top + ph - (double) y / ymax * ph;
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, py, left + pw, py);
                fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", left - 6, py + 4, y);
        }
        for (int x = 0; x <= (int) seconds; x += 5) {
                double px = left + (double) x / seconds * pw;
                fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", px, top + ph + 16, x);
        }
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">seconds</text>\n", left + pw / 2, top + ph + 32);
        fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">cache values (MiB)</text>\n",
                top + ph / 2, top + ph / 2);
        /* The group's limit: cache, load generator and the neighbour's file all count against it. */
        double ly = top + ph - (double) LIMIT_MIB / ymax * ph;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n",
                left, ly, left + pw, ly);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">cgroup limit %d MiB (cache, load and neighbour together)</text>\n",
                left + pw - 4, ly - 4, LIMIT_MIB);
        for (size_t i = 0; i < n; i++) {
                const char *c = colours[i % 5];
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
                for (size_t j = 0; j < runs[i]->n_samples; j++)
                        fprintf(f, "%.1f,%.1f ", left + runs[i]->t[j] / seconds * pw,
                                top + ph - (double) runs[i]->bytes[j] / 1048576 / ymax * ph);
                fprintf(f, "\"/>\n");
                if (!runs[i]->survived && runs[i]->n_samples > 0) {
                        size_t k = runs[i]->n_samples - 1;
                        double kx = left + runs[i]->t[k] / seconds * pw,
                               ky = top + ph - (double) runs[i]->bytes[k] / 1048576 / ymax * ph;
                        fprintf(f, "<path d=\"M%.1f %.1fl10 10m0 -10l-10 10\" stroke=\"%s\" stroke-width=\"3\"/>\n", kx - 5,
                                ky - 5, c);
                        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">OOM-killed at %.1f s</text>\n", kx + 8, ky + 4, runs[i]->seconds);
                }
                double gy = top + ph + axis + row * (double) (i + 1);
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                        left, gy - 4, left + 24, gy - 4, c);
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s%s</text>\n", left + 30, gy, runs[i]->name,
                        runs[i]->survived ? "" : " (OOM-killed)");
        }
        fprintf(f, "</svg>\n");
        fclose(f);
        printf("wrote %s\n", path);
}

static double req_s(const struct run *r) {
        return r->seconds > 0 ? (double) r->requests / r->seconds : 0;
}

static double st_req_s(const struct run *r) {
        return r->st_seconds > 0 ? (double) r->st_gets / r->st_seconds : 0;
}

static double st_stall(const struct run *r) {
        return r->st_seconds > 0 ? (double) r->st_stall_us / 1000 / r->st_seconds : 0;
}

static double settled_stall(const struct run *r) {
        return r->settle_seconds > 0 ? (double) r->settle_stall_us / 1000 / r->settle_seconds : 0;
}

static double st_io(const struct run *r) {
        return r->st_seconds > 0 ? (double) r->st_io_us / 1000 / r->st_seconds : 0;
}

static double ws_rate(const struct run *r) {
        return r->ws_seconds > 0 ? (double) r->ws_reads / r->ws_seconds : 0;
}

/* The neighbour alone in a group like the runs': its reads per second, the yardstick of its column. */
static double neighbour_alone(void) {
        struct pressure_gen g;
        char cwd[400], ws[600], zipf[600], secs[32], line[256];
        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, (uint64_t) LIMIT_MIB << 20) < 0)
                return 0;
        snprintf(ws, sizeof(ws), "%s/kvcache-bench.dat", cwd);
        snprintf(zipf, sizeof(zipf), "%s/kv-zipf", build);
        snprintf(secs, sizeof(secs), "%d", ALONE_S);
        double rate = 0;
        int p[2];
        if (pressure_gen_working_set(ws, wl->ws_mib) == 0 && pipe2(p, O_CLOEXEC) == 0) {
                const char *const argv[] = { zipf, "--read", ws, secs, NULL };
                pid_t rd = pressure_gen_spawn_quiet(&g, argv, p[1]);
                close(p[1]);
                ssize_t n = rd > 0 ? read(p[0], line, sizeof(line) - 1) : -1;
                line[n > 0 ? n : 0] = 0;
                bench_reap(rd, NULL);
                close(p[0]);
                const char *t = strstr(line, "seconds=");
                double sec = t ? atof(t + 8) : 0;
                rate = sec > 0 ? (double) bench_field(line, "reads=") / sec : 0;
        }
        unlink(ws);
        pressure_gen_destroy(&g);
        return rate;
}

static void print_row(unsigned rep, const struct run *r, double alone) {
        char fate[32];
        snprintf(fate, sizeof(fate), "%s %.1f s", r->survived ? "survived" : "killed after", r->seconds);
        printf("%u %-21s %-18s %6.1f%% %7.0f %7.1f | %6.1f%% %7.0f %7.1f %6.1f %7.0f | %5.2f %5.1f %5.1f %5.2f | %5.2f %6.1f %7.1f %5lu\n",
               rep + 1, r->name, fate, 100 * hit_rate(r), req_s(r), stall_ms_per_s(r),
               r->st_gets ? 100.0 * (double) r->st_hits / (double) r->st_gets : 0, st_req_s(r), st_stall(r), st_io(r),
               r->st_seconds > 0 ? (double) r->st_refaults / r->st_seconds : 0, alone > 0 ? ws_rate(r) / alone : 0,
               r->cpu_cache_s + r->cpu_load_s, r->cpu_neighbour_s, r->seconds > 0 ? 100 * r->cpu_daemon_s / r->seconds : 0,
               (double) r->p99_us / 1000, (double) r->peak_bytes / 1048576, (double) r->evicted_bytes / 1048576, r->drops);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* The median and the worst of n figures (the worst is the largest when high is bad). */
struct spread {
        double median, worst;
        size_t n;
};

static struct spread spread_of(double *v, size_t n, bool high_is_bad) {
        struct spread s = { .n = n };
        if (n == 0)
                return s;
        qsort(v, n, sizeof(double), cmp_double);
        s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        s.worst = high_is_bad ? v[n - 1] : v[0];
        return s;
}

typedef double (*figure_fn)(const struct run *r);

/* A figure of one policy over the repeats that ran it. */
static struct spread policy_spread(struct run *runs, size_t n_pol, unsigned repeat, size_t i, figure_fn f, bool high_is_bad) {
        double v[MAX_REPEAT];
        size_t n = 0;
        for (unsigned k = 0; k < repeat; k++)
                if (runs[k * n_pol + i].ran)
                        v[n++] = f(&runs[k * n_pol + i]);
        return spread_of(v, n, high_is_bad);
}

/* A ratio between two policies, taken within each repeat. */
static struct spread ratio_spread(struct run *runs, size_t n_pol, unsigned repeat, size_t i, size_t j, figure_fn f) {
        double v[MAX_REPEAT];
        size_t n = 0;
        for (unsigned k = 0; k < repeat; k++) {
                const struct run *a = &runs[k * n_pol + i], *b = &runs[k * n_pol + j];
                if (a->ran && b->ran && f(b) > 0)
                        v[n++] = f(a) / f(b);
        }
        return spread_of(v, n, false);
}

static double f_hit(const struct run *r) {
        return r->st_gets ? 100.0 * (double) r->st_hits / (double) r->st_gets : 0;
}
static double f_cpu_cache(const struct run *r) {
        return r->cpu_cache_s + r->cpu_load_s;
}
static double f_cpu_neighbour(const struct run *r) {
        return r->cpu_neighbour_s;
}
static double f_cpu_daemon_pct(const struct run *r) {
        return r->seconds > 0 ? 100 * r->cpu_daemon_s / r->seconds : 0;
}
static double f_refaults(const struct run *r) {
        return r->st_seconds > 0 ? (double) r->st_refaults / r->st_seconds : 0;
}
static double f_regain(const struct run *r) {
        return r->regain_s >= 0 ? r->regain_s : 1e9; /* not regained within the run: worst of all */
}
static double f_evicted_regaining(const struct run *r) {
        return (double) r->evicted_regaining / 1048576;
}
static double f_room(const struct run *r) {
        return (double) r->room_bytes / 1048576;
}

static unsigned survivals(struct run *runs, size_t n_pol, unsigned repeat, size_t i, unsigned *ran) {
        unsigned s = 0;
        *ran = 0;
        for (unsigned k = 0; k < repeat; k++) {
                *ran += runs[k * n_pol + i].ran;
                s += runs[k * n_pol + i].ran && runs[k * n_pol + i].survived;
        }
        return s;
}

static void print_summary(struct run *runs, size_t n_pol, unsigned repeat, const double *alone) {
        double alone_v[MAX_REPEAT];
        memcpy(alone_v, alone, repeat * sizeof(double));
        struct spread al = spread_of(alone_v, repeat, false);
        printf("\n%s over %u repeats, median (worst); steady figures; the neighbour against its %.0f reads/s alone:\n", wl->name,
               repeat, al.median);
        printf("%-21s %5s %15s %15s %13s %13s %13s %11s %10s %10s %11s\n", "policy", "alive", "stall ms/s", "req/s", "hit rate",
               "neighbour", "io ms/s", "refaults/s", "cpu cache", "cpu neigh", "daemon cpu");
        for (size_t i = 0; i < n_pol; i++) {
                const struct run *r0 = &runs[i];
                unsigned ran, alive = survivals(runs, n_pol, repeat, i, &ran);
                if (ran == 0)
                        continue;
                struct spread stall = policy_spread(runs, n_pol, repeat, i, st_stall, true),
                              rq = policy_spread(runs, n_pol, repeat, i, st_req_s, false),
                              hit = policy_spread(runs, n_pol, repeat, i, f_hit, false),
                              nb = policy_spread(runs, n_pol, repeat, i, ws_rate, false),
                              io = policy_spread(runs, n_pol, repeat, i, st_io, true),
                              rf = policy_spread(runs, n_pol, repeat, i, f_refaults, true),
                              cc = policy_spread(runs, n_pol, repeat, i, f_cpu_cache, false),
                              cn = policy_spread(runs, n_pol, repeat, i, f_cpu_neighbour, false),
                              cd = policy_spread(runs, n_pol, repeat, i, f_cpu_daemon_pct, true);
                char dcpu[32] = "-";
                if (r0->policy == DROP || r0->policy == PRESSURED)
                        snprintf(dcpu, sizeof(dcpu), "%.2f%% (%.2f)", cd.median, cd.worst);
                printf("%-21s %2u/%-2u %6.1f (%6.1f) %6.0f (%6.0f) %5.1f%% (%4.1f) %5.2fx (%4.2f) %5.1f (%5.1f) %5.0f (%5.0f) %4.1f (%4.1f) "
                       "%4.1f (%4.1f) %11s\n",
                       r0->name, alive, ran, stall.median, stall.worst, rq.median, rq.worst, hit.median, hit.worst,
                       al.median > 0 ? nb.median / al.median : 0, al.median > 0 ? nb.worst / al.median : 0, io.median, io.worst,
                       rf.median, rf.worst, cc.median, cc.worst, cn.median, cn.worst, dcpu);
        }

        /* The oracle: the cap with the most requests among those within the stall budget, every repeat alive. */
        size_t shrinker = n_pol - 1, best = SIZE_MAX, best_any = SIZE_MAX;
        double best_rq = 0, best_any_rq = 0;
        for (size_t i = 0; i < n_pol; i++) {
                unsigned ran, alive = survivals(runs, n_pol, repeat, i, &ran);
                if (runs[i].policy != CAP || ran == 0 || alive < ran)
                        continue;
                double rq = policy_spread(runs, n_pol, repeat, i, st_req_s, false).median;
                if (rq > best_any_rq) {
                        best_any_rq = rq;
                        best_any = i;
                }
                if (policy_spread(runs, n_pol, repeat, i, st_stall, true).median <= STALL_BUDGET_MS && rq > best_rq) {
                        best_rq = rq;
                        best = i;
                }
        }
        unsigned ran, alive = survivals(runs, n_pol, repeat, shrinker, &ran);
        if (runs[shrinker].policy != PRESSURED || ran == 0)
                return;
        struct spread stall = policy_spread(runs, n_pol, repeat, shrinker, st_stall, true);
        printf("%s: pressured alive %u/%u, steady stall %.1f ms/s median, %.1f worst (goal <= 2, <= 5); daemon CPU %.2f%% of a core "
               "median (goal <= 1%%)\n",
               wl->name, alive, ran, stall.median, stall.worst,
               policy_spread(runs, n_pol, repeat, shrinker, f_cpu_daemon_pct, true).median);
        if (best != SIZE_MAX) {
                struct spread q = ratio_spread(runs, n_pol, repeat, shrinker, best, st_req_s),
                              w = ratio_spread(runs, n_pol, repeat, shrinker, best, req_s);
                printf("%s: oracle within %.0f ms/s: %s; pressured's requests/s against it %.2fx median, %.2fx worst steady "
                       "(goal >= 0.95%s), %.2fx whole run\n",
                       wl->name, STALL_BUDGET_MS, runs[best].name, q.median, q.worst, wl->phase ? ", 1.0 here" : "", w.median);
                double must = 0, ev = 0;
                for (unsigned k = 0; k < repeat; k++) {
                        const struct run *r = &runs[k * n_pol + shrinker];
                        if (!r->ran)
                                continue;
                        must += (double) r->misses * VALUE_BYTES - (double) runs[best].cap_mib * 1048576;
                        ev += (double) r->evicted_bytes;
                }
                if (must > 0)
                        printf("%s: pressured evicted %.2fx what had to go beside that cap, summed over the repeats (goal <= 1.25)\n",
                               wl->name, ev / must);
        } else
                printf("%s: no fixed cap stayed within %.0f ms/s\n", wl->name, STALL_BUDGET_MS);
        if (best_any != SIZE_MAX && best_any != best) {
                struct spread q = ratio_spread(runs, n_pol, repeat, shrinker, best_any, st_req_s);
                printf("%s: the best cap by requests alone: %s (stall %.1f ms/s median); pressured %.2fx median, %.2fx worst\n",
                       wl->name, runs[best_any].name, policy_spread(runs, n_pol, repeat, best_any, st_stall, true).median, q.median,
                       q.worst);
        }
        for (size_t i = 0; i < n_pol; i++)
                if (runs[i].policy == DROP) {
                        struct spread q = ratio_spread(runs, n_pol, repeat, shrinker, i, st_req_s);
                        printf("%s: against drop-all: %.2fx median, %.2fx worst steady\n", wl->name, q.median, q.worst);
                }
        /* The phase change once it has settled: whether a policy holds after the change, apart from
         * what the change itself cost (which the steady figure holds). */
        for (size_t i = 0; wl->phase && i < n_pol; i++) {
                unsigned ran_i;
                if (survivals(runs, n_pol, repeat, i, &ran_i) == 0)
                        continue;
                struct spread st = policy_spread(runs, n_pol, repeat, i, settled_stall, true);
                printf("phase: %s: stall from %d s after the change to the end %.1f ms/s median, %.1f worst\n", runs[i].name,
                       SETTLE_S, st.median, st.worst);
        }
        for (size_t i = 0; wl->burst && i < n_pol; i++) {
                unsigned ran_i;
                if (survivals(runs, n_pol, repeat, i, &ran_i) < ran_i || ran_i == 0)
                        continue;
                struct spread rg = policy_spread(runs, n_pol, repeat, i, f_regain, true),
                              ev = policy_spread(runs, n_pol, repeat, i, f_evicted_regaining, true),
                              room = policy_spread(runs, n_pol, repeat, i, f_room, false);
                char med[32], worst[32];
                snprintf(med, sizeof(med), rg.median < 1e9 ? "%.1f s" : "not within the run", rg.median);
                snprintf(worst, sizeof(worst), rg.worst < 1e9 ? "%.1f s" : "not within the run", rg.worst);
                printf("burst: %s: 90%% of its room (%.1f MiB median) again after the neighbour stopped: %s median, %s worst "
                       "(goal <= 10 s); evicted meanwhile %.1f MiB median, %.1f worst (goal <= its room)\n",
                       runs[i].name, room.median, med, worst, ev.median, ev.worst);
        }
}

/* One workload: every policy, repeat times, interleaved; each run's row as it ends, then the summary. */
static int run_workload(const char *out_dir, double seconds, unsigned repeat, const char *only, bool first) {
        struct run proto[N_CAPS + 3];
        size_t n_pol = 0;
        proto[n_pol++] = (struct run){ .policy = UNBOUNDED, .name = "unbounded, no daemon" };
        proto[n_pol++] = (struct run){ .policy = DROP, .name = "drop all on warning" };
        for (size_t i = 0; i < N_CAPS; i++) {
                proto[n_pol] = (struct run){ .policy = CAP, .cap_mib = caps_mib[i] };
                snprintf(proto[n_pol].name, sizeof(proto[n_pol].name), "fixed cap %u MiB", caps_mib[i]);
                n_pol++;
        }
        proto[n_pol++] = (struct run){ .policy = PRESSURED, .name = "pressured" };
        struct run *runs = calloc(repeat * n_pol, sizeof(struct run));
        double alone[MAX_REPEAT] = {};
        if (!runs)
                return 1;

        printf("\n== %s: %s; %d MiB cgroup, %u MiB file working set read beside it, %d values of %d bytes (%d MiB), "
               "%.0f s per run, steady state after %.0f s, seed %d ==\n",
               wl->name, wl->what, LIMIT_MIB, wl->ws_mib * (wl->phase ? 2 : 1), KEYS, VALUE_BYTES, KEYS * VALUE_BYTES >> 20, seconds,
               wl->burst ? BURST_WARM_S : seconds / 3, SEED);
        printf("%-23s %-18s %7s %7s %7s | %7s %7s %7s %6s %7s | %5s %5s %5s %5s | %5s %6s %7s %5s\n", "# policy", "cache", "hit", "req/s",
               "stall", "st hit", "req/s", "stall", "io", "refault", "neigh", "cpu", "cpu n", "dmn%", "p99ms", "peak", "evicted",
               "drops");
        for (unsigned k = 0; k < repeat; k++) {
                alone[k] = neighbour_alone();
                for (size_t i = 0; i < n_pol; i++) {
                        struct run *r = &runs[k * n_pol + i];
                        *r = proto[i];
                        /* The unbounded cache is killed in every run, at the same point of the same seed: once. */
                        if ((only && !strstr(r->name, only)) || (r->policy == UNBOUNDED && k > 0))
                                continue;
                        if (run_policy(r, seconds) < 0) {
                                fprintf(stderr, "kvcache-bench: the run \"%s\" failed (root? cgroups?)\n", r->name);
                                free(runs);
                                return 1;
                        }
                        print_row(k, r, alone[k]);
                        fflush(stdout);
                }
        }
        printf("(per run: hit rates, requests/s and stall in ms of `some` per second in the group, whole run then steady; "
               "io: the group's IO stall in ms/s; refault: file refaults/s; neigh: the neighbour's reads against its rate "
               "alone; cpu: CPU s of cache and load, of the neighbour, the daemon's %% of a core; peak and evicted in MiB)\n");
        print_summary(runs, n_pol, repeat, alone);

        /* The plot and the CSV: the first repeat, the best cap within the budget by that repeat's stall. */
        struct run *all[N_CAPS + 3], *best = NULL;
        for (size_t i = 0; i < n_pol; i++) {
                all[i] = &runs[i];
                if (runs[i].policy == CAP && runs[i].ran && runs[i].survived && st_stall(&runs[i]) <= STALL_BUDGET_MS &&
                    (!best || st_req_s(&runs[i]) > st_req_s(best)))
                        best = &runs[i];
        }
        struct run *plot[] = { &runs[0], &runs[1], best ? best : &runs[2], &runs[n_pol - 1] };
        write_csv(out_dir, all, n_pol, first);
        write_svg(out_dir, plot, 4, seconds);
        free(runs);
        return 0;
}

int main(int argc, char *argv[]) {
        const char *out_dir = ".";
        unsigned repeat = 1;
        double seconds = 0;
        build = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
                        repeat = (unsigned) atoi(argv[++i]);
                else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
                        seconds = atof(argv[++i]);
                else if (argv[i][0] == '-') {
                        build = NULL;
                        break;
                } else if (!build)
                        build = argv[i];
                else
                        out_dir = argv[i];
        }
        if (!build || repeat < 1 || repeat > MAX_REPEAT || seconds < 0) {
                fprintf(stderr, "usage: kvcache-bench BUILD_DIR [OUT_DIR] [--repeat N (1-%d)] [--seconds S]\n", MAX_REPEAT);
                return 2;
        }
        if (!getenv("KVCACHE_BENCH_LOG"))
                setenv("PRESSURED_TEST_NO_LOG", "1", 1);
        const char *only = getenv("KVCACHE_BENCH_ONLY"), *which = getenv("KVCACHE_BENCH_WORKLOAD");
        char bin[600];
        snprintf(bin, sizeof(bin), "%s/pressured", build);
        setenv("PRESSURED_BIN", bin, 1);
        bool first = true;
        for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
                wl = &workloads[i];
                if (which && strcmp(which, wl->name) != 0)
                        continue;
                double s = seconds > 0 && !wl->burst ? seconds : wl->seconds;
                if (run_workload(out_dir, s, repeat, only, first) != 0)
                        return 1;
                first = false;
                fflush(stdout);
        }
        return 0;
}
