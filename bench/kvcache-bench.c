/* SPDX-License-Identifier: MIT */
/* The headline benchmark: a cache that sizes itself. The example cache (examples/kvcache.c) serves a
 * skewed GET workload (bench/kv-zipf.c: Zipf s = 0.99 over more values than fit) in a cgroup with a memory
 * limit, beside a file working set that another process of the group reads; a miss costs a fixed
 * recompute and inserts the value. With the same workload and seed, one run per policy:
 *   (a) unbounded, no daemon;
 *   (b) drop every value whenever pressured reports the group's level rising (what applications do
 *       with a low-memory warning today);
 *   (c) a fixed cap on the values, several caps, the best one the hand-tuned oracle;
 *   (d) pressured with the pressure_lru shrinker, default configuration.
 * Three workloads, one table each, the oracle re-chosen per workload with hindsight:
 *   zipf99: Zipf 0.99, a miss costs 250 us (the first headline);
 *   zipf80: Zipf 0.8, a miss costs 1 ms: flatter and costlier, where dropping everything hurts;
 *   phase:  as zipf99, but halfway through the neighbour's file working set doubles (a second reader
 *           of a second file), so that the cap right for the first half is wrong for the second;
 *   burst:  as zipf99, but the neighbour reads only in the middle third of the run, then stops: how
 *           long the cache takes to regain 90% of the room it had before, and what it evicted meanwhile.
 * Whole-run figures, and steady-state ones from the samples after a warm-up (a third of the run).
 * Writes the cache's size over time to OUT_DIR/kvcache-bench.csv and one plot per workload to
 * OUT_DIR/kvcache-bench-WORKLOAD.svg.
 *
 * Usage: kvcache-bench BUILD_DIR [OUT_DIR [SECONDS]] (as root; 60 s per run by default)
 * KVCACHE_BENCH_WORKLOAD=name: only that workload. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 96
#define WORKING_SET_MIB 48
#define KEYS 65536
#define VALUE_BYTES 4096
#define SEED 42
#define SAMPLE_MS 250
#define MAX_SAMPLES 1024

static const unsigned caps_mib[] = { 24, 32, 40, 44, 48, 56, 64 };
#define N_CAPS (sizeof(caps_mib) / sizeof(caps_mib[0]))

enum policy { UNBOUNDED, DROP, CAP, PRESSURED };

struct workload {
        const char *name, *what;
        const char *zipf;
        unsigned miss_us;
        unsigned ws_mib; /* the neighbour's file working set */
        bool phase;      /* it doubles halfway (a second reader of a second file as large) */
        bool burst;      /* it reads only in the middle third of the run */
};

static const struct workload workloads[] = {
        { "zipf99", "Zipf(0.99), miss = 250 us", "0.99", 250, WORKING_SET_MIB, false },
        { "zipf80", "Zipf(0.8), miss = 1 ms", "0.8", 1000, WORKING_SET_MIB, false },
        { "phase", "Zipf(0.99), miss = 250 us, the neighbour's working set doubles halfway (24 -> 48 MiB)", "0.99", 250,
          WORKING_SET_MIB / 2, true },
        { "burst", "Zipf(0.99), miss = 250 us, the neighbour reads only from 1/3 to 2/3 of the run", "0.99", 250,
          WORKING_SET_MIB, false, true },
};
static const struct workload *wl;

struct run {
        enum policy policy;
        unsigned cap_mib;
        char name[64];
        int survived;
        double seconds;
        unsigned long long requests, hits, misses, p50_us, p99_us, ws_reads;
        double ws_seconds;
        uint64_t stall_us;
        /* steady state: from the first sample after the warm-up to the last */
        double st_seconds;
        unsigned long long st_gets, st_hits;
        uint64_t st_stall_us;
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

static unsigned long long field(const char *line, const char *key) {
        const char *p = strstr(line, key);
        return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* One STATS line from the cache; -1 once it is gone. */
static int stats(int fd, char *line, size_t size) {
        if (fd < 0 || send(fd, "STATS\n", 6, MSG_NOSIGNAL) != 6)
                return -1;
        size_t n = 0;
        while (n < size - 1) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 2000) <= 0)
                        return -1;
                ssize_t k = read(fd, line + n, 1);
                if (k <= 0)
                        return -1;
                if (line[n++] == '\n')
                        break;
        }
        line[n] = 0;
        return 0;
}

static int connect_to(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -1;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

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
        int sfd = connect_to(kv_sock);

        char rsecs[32];
        snprintf(rsecs, sizeof(rsecs), "%g", seconds + 60); /* until told to stop */
        const char *read_argv[] = { zipf, "--read", ws, rsecs, NULL };
        int rp[2];
        if (pipe2(rp, O_CLOEXEC) < 0)
                return -errno;
        pid_t rd = wl->burst ? -1 : pressure_gen_spawn_quiet(&g, read_argv, rp[1]);
        bool burst_over = false;
        run->regain_s = -1;

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
        uint64_t stall_warm = 0;
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
                if (stats(sfd, line, sizeof(line)) < 0) {
                        if (sfd >= 0)
                                close(sfd);
                        sfd = -1;
                } else if (run->n_samples < MAX_SAMPLES) {
                        unsigned long bytes = (unsigned long) field(line, "bytes=");
                        double t = (double) (test_now_ms() - t0) / 1000;
                        unsigned long long hits = field(line, "hits="), gets = hits + field(line, "misses=");
                        if (!warm && t >= seconds / 3) {
                                warm = true;
                                t_warm = t;
                                gets0 = gets;
                                hits0 = hits;
                                stall_warm = pressure_gen_some_total(&g);
                        } else if (warm) {
                                run->st_seconds = t - t_warm;
                                run->st_gets = gets - gets0;
                                run->st_hits = hits - hits0;
                                run->st_stall_us = pressure_gen_some_total(&g) - stall_warm;
                        }
                        if (wl->burst && rd < 0 && !burst_over && t >= seconds / 3) {
                                run->room_bytes = bytes;
                                rd = pressure_gen_spawn_quiet(&g, read_argv, rp[1]);
                        } else if (wl->burst && rd > 0 && !burst_over && t >= 2 * seconds / 3) {
                                kill(rd, SIGTERM);
                                waitpid(rd, NULL, 0);
                                burst_over = true;
                                run->stop_t = t;
                                run->evicted_at_stop = (unsigned long) field(line, "evicted_bytes=");
                        } else if (burst_over && run->regain_s < 0) {
                                run->evicted_regaining = (unsigned long) field(line, "evicted_bytes=") - run->evicted_at_stop;
                                if (bytes >= run->room_bytes / 10 * 9)
                                        run->regain_s = t - run->stop_t;
                        }
                        if (wl->phase && rd2 < 0 && t >= seconds / 2) {
                                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
                                rd2 = pressure_gen_spawn_quiet(&g, read2_argv, devnull);
                                close(devnull);
                        }
                        run->t[run->n_samples] = t;
                        run->bytes[run->n_samples++] = bytes;
                        run->peak_bytes = bytes > run->peak_bytes ? bytes : run->peak_bytes;
                        run->evicted_bytes = (unsigned long) field(line, "evicted_bytes=");
                        run->drops = (unsigned long) field(line, "drops=");
                }
        }
        out[out_len] = 0;
        waitpid(ld, NULL, 0);
        run->stall_us = pressure_gen_some_total(&g) - stall0;
        close(q[0]);
        run->survived = strncmp(out, "survived", 8) == 0;
        run->seconds = atof(strstr(out, "seconds=") ? strstr(out, "seconds=") + 8 : "0");
        run->requests = field(out, "requests=");
        run->hits = field(out, "hits=");
        run->misses = field(out, "misses=");
        run->p50_us = field(out, "p50_us=");
        run->p99_us = field(out, "p99_us=");
        if (sfd >= 0 && stats(sfd, line, sizeof(line)) == 0) {
                run->evicted_bytes = (unsigned long) field(line, "evicted_bytes=");
                run->drops = (unsigned long) field(line, "drops=");
        }

        close(rp[1]);
        if (rd > 0 && !burst_over) {
                kill(rd, SIGTERM);
                waitpid(rd, NULL, 0);
        }
        if (rd2 > 0) {
                kill(rd2, SIGTERM);
                waitpid(rd2, NULL, 0);
        }
        ssize_t n = read(rp[0], line, sizeof(line) - 1);
        line[n > 0 ? n : 0] = 0;
        run->ws_reads = field(line, "reads=");
        run->ws_seconds = strstr(line, "seconds=") ? atof(strstr(line, "seconds=") + 8) : 0;
        close(rp[0]);
        if (sfd >= 0)
                close(sfd);
        kill(kv, SIGTERM);
        int status = 0;
        waitpid(kv, &status, 0);
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

static void print_row(const struct run *r) {
        char fate[32];
        snprintf(fate, sizeof(fate), "%s %.1f s", r->survived ? "survived" : "killed after", r->seconds);
        printf("%-22s %-18s %8.1f%% %8.0f %8.1f %7.2f | %8.1f%% %8.0f %8.1f | %9.0f %7.1f %9.1f %5lu\n", r->name, fate,
               100 * hit_rate(r), req_s(r), stall_ms_per_s(r), (double) r->p99_us / 1000,
               r->st_gets ? 100.0 * (double) r->st_hits / (double) r->st_gets : 0, st_req_s(r), st_stall(r),
               r->ws_seconds > 0 ? (double) r->ws_reads / r->ws_seconds : 0, (double) r->peak_bytes / 1048576,
               (double) r->evicted_bytes / 1048576, r->drops);
}

/* One workload: every policy, the table, the plot. */
static int run_workload(const char *out_dir, double seconds, const char *only, bool first) {
        static struct run unbounded, drop, caps[N_CAPS], shrinker;
        unbounded = (struct run){ .policy = UNBOUNDED, .name = "unbounded, no daemon" };
        drop = (struct run){ .policy = DROP, .name = "drop all on warning" };
        shrinker = (struct run){ .policy = PRESSURED, .name = "pressured" };
        struct run *all[N_CAPS + 3] = { &unbounded, &drop };
        size_t n_all = 2;
        for (size_t i = 0; i < N_CAPS; i++) {
                caps[i] = (struct run){ .policy = CAP, .cap_mib = caps_mib[i] };
                snprintf(caps[i].name, sizeof(caps[i].name), "fixed cap %u MiB", caps_mib[i]);
                /* Caps beyond the 48 MiB working set's room only make sense with a smaller one. */
                if (caps_mib[i] + wl->ws_mib <= LIMIT_MIB)
                        all[n_all++] = &caps[i];
        }
        all[n_all++] = &shrinker;
        for (size_t i = 0; i < n_all; i++)
                if ((!only || strstr(all[i]->name, only)) && run_policy(all[i], seconds) < 0) {
                        fprintf(stderr, "kvcache-bench: the run \"%s\" failed (root? cgroups?)\n", all[i]->name);
                        return 1;
                }

        /* The oracle, with hindsight: the cap that served the most requests per second and survived. (The
         * best hit rate alone would pick a cap so large that the working set thrashes.) */
        struct run *best = NULL;
        for (size_t i = 0; i < N_CAPS; i++)
                if (caps[i].survived && (!best || req_s(&caps[i]) > req_s(best)))
                        best = &caps[i];

        printf("\n== %s: %s; %d MiB cgroup, %u MiB file working set read beside it, %d values of %d bytes (%d MiB), "
               "%.0f s per run, steady state after %.0f s, seed %d ==\n",
               wl->name, wl->what, LIMIT_MIB, wl->ws_mib * (wl->phase ? 2 : 1), KEYS, VALUE_BYTES, KEYS * VALUE_BYTES >> 20, seconds,
               seconds / 3, SEED);
        printf("%-22s %-18s %9s %8s %8s %7s | %9s %8s %8s | %9s %7s %9s %5s\n", "", "", "whole run:", "", "", "",
               "steady:", "", "", "", "", "", "");
        printf("%-22s %-18s %9s %8s %8s %7s | %9s %8s %8s | %9s %7s %9s %5s\n", "policy", "cache", "hit rate", "req/s",
               "stall", "p99 ms", "hit rate", "req/s", "stall", "ws rd/s", "peak", "evicted", "drops");
        for (size_t i = 0; i < n_all; i++)
                print_row(all[i]);
        printf("(stall in ms of `some` per second in the group; peak and evicted in MiB)\n");
        if (best) {
                double inserted = (double) shrinker.misses * VALUE_BYTES, must = inserted - (double) best->cap_mib * 1048576;
                printf("%s: oracle %s; pressured against it: requests/s %.2fx whole, %.2fx steady (goal >= 0.95, 1.0 in the "
                       "phase change); against drop-all: %.2fx whole, %.2fx steady (goal >= 1.3); steady stall %.1f ms/s "
                       "(goal <= 2); evicted %.2fx what had to go (goal <= 1.25)\n",
                       wl->name, best->name, req_s(&shrinker) / req_s(best), st_req_s(&shrinker) / st_req_s(best),
                       req_s(&drop) > 0 ? req_s(&shrinker) / req_s(&drop) : 0,
                       st_req_s(&drop) > 0 ? st_req_s(&shrinker) / st_req_s(&drop) : 0, st_stall(&shrinker),
                       must > 0 ? (double) shrinker.evicted_bytes / must : 0);
        } else
                printf("%s: no fixed cap survived\n", wl->name);
        for (size_t i = 0; wl->burst && i < n_all; i++) {
                const struct run *r = all[i];
                if (!r->survived || r->room_bytes == 0)
                        continue;
                if (r->regain_s >= 0)
                        printf("burst: %s: 90%% of its %.1f MiB of room again %.1f s after the neighbour stopped (goal <= 10), "
                               "evicting %.1f MiB meanwhile (goal <= its room)\n",
                               r->name, r->room_bytes / 1048576.0, r->regain_s, r->evicted_regaining / 1048576.0);
                else
                        printf("burst: %s: not at 90%% of its %.1f MiB of room within %.1f s of the neighbour stopping "
                               "(goal 10), evicting %.1f MiB meanwhile\n",
                               r->name, r->room_bytes / 1048576.0, seconds - r->stop_t, r->evicted_regaining / 1048576.0);
        }
        struct run *plot[] = { &unbounded, &drop, best ? best : &caps[0], &shrinker };
        write_csv(out_dir, all, n_all, first);
        write_svg(out_dir, plot, 4, seconds);
        return 0;
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: kvcache-bench BUILD_DIR [OUT_DIR [SECONDS]]\n");
                return 2;
        }
        build = argv[1];
        const char *out_dir = argc > 2 ? argv[2] : ".";
        double seconds = argc > 3 ? atof(argv[3]) : 60;
        /* KVCACHE_BENCH_LOG=1: the daemon's log after each run. KVCACHE_BENCH_ONLY=word: only the runs
         * whose policy name has it; KVCACHE_BENCH_WORKLOAD=name: only that workload. */
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
                if (run_workload(out_dir, seconds, only, first) != 0)
                        return 1;
                first = false;
                fflush(stdout);
        }
        return 0;
}
