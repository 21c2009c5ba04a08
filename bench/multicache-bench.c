/* SPDX-License-Identifier: MIT */
/* Value-aware reclaim across caches. Three example caches (examples/kvcache.c), each a process of its own
 * with its own paced load (bench/kv-zipf.c), share one cgroup with a memory limit:
 *   steep: Zipf 1.1 over 65,536 values, a miss costs 100 us, 2,000 GETs/s: its tail is worth little;
 *   flat:  Zipf 0.7 over 32,768 values, a miss costs 1 ms, 600 GETs/s: every byte is worth keeping;
 *   scan:  uniform over 262,144 values, a miss costs 200 us, 800 GETs/s: the cache barely helps.
 * Each GET tells its cache what a miss costs; the caches keep shadow entries and their counts carry
 * their values (lib/shadow.c).
 * Policies, interleaved within each repeat:
 *   proportional: pressured, the caches' counts without values (today's split, by what each holds);
 *   value-aware:  pressured, with values;
 *   equal split:  no daemon, each cache capped at a third of the values' budget;
 *   drop-all:     each cache drops everything when pressured reports its group's level rising;
 *   best static:  with hindsight: each cache's cost at each cap of a grid (all three capped alike in a
 *                 group large enough, once per workload), and the best sum within the budget.
 * Workloads: steady, and swap (steep and flat exchange their loads halfway through the measured part,
 * each its skew, cost and rate, over keys it never asked before: no static split follows). The swap runs
 * twice as long, so that each half is long enough to be served by the split that suits it and not only
 * by the move between them. MULTICACHE_BENCH_WORKLOAD=steady or swap: only that one.
 * Figures, steady (after the loads' unpaced warm-up, 40% of --seconds, and two seconds): the total miss
 * cost per second (each cache's misses times its miss cost), the combined hit rate, the group's stall,
 * the daemon's CPU; each cache's size over time in OUT_DIR/multicache-bench.csv (first repeat). Memory for equal service (steady, first repeat): the
 * smallest group limit at which value-aware costs no more than the equal split at the full limit.
 * The last lines, one per workload, are medians over the repeats:
 *   multicache WORKLOAD: value-aware miss cost Ax the best static split, Bx proportional; stall C ms/s
 *
 * Usage: multicache-bench BUILD_DIR [OUT_DIR] [--repeat N] [--seconds S] (as root)
 * MULTICACHE_BENCH_ONLY=word: only the policies whose name has it, the steady workload, no grid. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "macro.h"
#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 96
#define BUDGET_MIB 72  /* for values: what the processes' own memory leaves of the limit */
#define GRID_LIMIT_MIB 256
#define VALUE_BYTES 4096
#define SEED 7
#define SAMPLE_MS 500
#define MAX_SAMPLES 512
#define MAX_REPEAT 9
#define N_CACHES 3
#define WARM_FRACTION 0.4 /* of a run: the loads unpaced, filling the caches; measured after it */

struct cache_load {
        const char *name;
        const char *zipf;
        unsigned keys, miss_us, rate;
};

static const struct cache_load loads[N_CACHES] = {
        { "steep", "1.1", 65536, 100, 2000 },
        { "flat", "0.7", 32768, 1000, 600 },
        { "scan", "0", 262144, 200, 800 },
};

/* The grid of caps, per cache, for the best static split. */
static const unsigned grid_mib[] = { 4, 8, 16, 24, 40, 56 };
#define N_GRID (sizeof(grid_mib) / sizeof(grid_mib[0]))

enum policy { PROPORTIONAL, VALUE, EQUAL, DROP, _POLICY_MAX, CAPPED = _POLICY_MAX };
static const char *const policy_names[] = { "proportional", "value-aware", "equal split", "drop-all" };

struct run {
        bool ok;
        double cost_per_s;             /* steady: sum of misses x cost, per second */
        double cache_cost_per_s[N_CACHES];
        double hit_rate;               /* steady, all GETs together */
        double stall_ms_per_s;         /* steady, the group's some stall */
        double cpu_daemon_s;
        double value[N_CACHES]; /* each cache's last value, as its STATS said */
        unsigned killed;        /* caches that died before the end (the OOM killer): the run does not count */
        size_t n_samples;
        double t[MAX_SAMPLES];
        unsigned long bytes[MAX_SAMPLES][N_CACHES];
};

static const char *build;
static bool swap; /* the workload: steep and flat exchange their loads halfway */
static double base_seconds; /* --seconds: the steady run's length, which sets the warm-up of every run */

/* When the measured part begins (after the unpaced warm-up), and when the swap exchanges the loads: in
 * the middle of the measured part, so that a static split has to serve both halves alike. */
static double unpaced_s(void) {
        return base_seconds * WARM_FRACTION; /* filling the caches takes as long in a longer run */
}

static double warm_at(void) {
        return unpaced_s() + 2;
}

static double swap_at(double seconds) {
        return (warm_at() + seconds) / 2;
}

static int spawn_cache(const struct pressure_gen *g, const char *sock, const char *daemon_sock, enum policy p,
                       unsigned cap_mib, pid_t *ret) {
        char kvcache[600], cap[32], line[256];
        snprintf(kvcache, sizeof(kvcache), "%s/kvcache", build);
        snprintf(cap, sizeof(cap), "%llu", (unsigned long long) cap_mib << 20);
        const char *argv[10] = { kvcache, "--listen", sock, "--pressured", daemon_sock ? daemon_sock : "/nonexistent" };
        int n = 5;
        if (p == CAPPED || p == EQUAL) {
                argv[n++] = "--max-bytes";
                argv[n++] = cap;
        } else if (p == DROP)
                argv[n++] = "--drop-on-warning";
        if (p != VALUE)
                argv[n++] = "--no-value";
        argv[n] = NULL;
        int fd[2];
        if (pipe2(fd, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = pressure_gen_spawn_quiet(g, argv, fd[1]);
        close(fd[1]);
        FILE *f = fdopen(fd[0], "r");
        bool up = pid > 0 && f && fgets(line, sizeof(line), f);
        if (f)
                fclose(f);
        *ret = pid;
        return up ? 0 : -EIO;
}

/* The load of cache i; in the swap, steep and flat exchange theirs at half the run. */
static pid_t spawn_load(const struct pressure_gen *g, const char *sock, size_t i, double seconds, int out_fd) {
        char zipf[600], secs[32], keys[32], value[32], seed[32], miss[32], rate[32], then[96];
        const struct cache_load *l = &loads[i], *other = i == 0 ? &loads[1] : i == 1 ? &loads[0] : NULL;
        snprintf(zipf, sizeof(zipf), "%s/kv-zipf", build);
        snprintf(secs, sizeof(secs), "%g", seconds);
        snprintf(keys, sizeof(keys), "%u", l->keys);
        snprintf(value, sizeof(value), "%d", VALUE_BYTES);
        snprintf(seed, sizeof(seed), "%zu", SEED + i);
        snprintf(miss, sizeof(miss), "%u", l->miss_us);
        /* Unpaced for the warm-up: the caches fill before the steady part is measured. */
        snprintf(rate, sizeof(rate), "%u@%g", l->rate, unpaced_s());
        const char *argv[11] = { zipf, sock, secs, keys, value, seed, miss, l->zipf, rate, NULL };
        if (swap && other) {
                snprintf(then, sizeof(then), "%g:%s:%u:%u:%u", swap_at(seconds), other->zipf, other->keys,
                         other->miss_us, other->rate);
                argv[9] = then;
        }
        return pressure_gen_spawn_quiet(g, argv, out_fd);
}

/* The miss cost of cache i's load at time t (the swap exchanges steep's and flat's). */
static unsigned miss_us_at(size_t i, double t, double seconds) {
        if (swap && i < 2 && t >= swap_at(seconds))
                return loads[1 - i].miss_us;
        return loads[i].miss_us;
}

struct sampler {
        int fd[N_CACHES];
        unsigned long long hits[N_CACHES], misses[N_CACHES];
        double cost[N_CACHES]; /* steady: misses x cost, summed per sample */
        unsigned long long st_gets, st_hits;
};

/* One sample of every cache: sizes, and the misses since the last, costed, once the run is steady. */
static void sample(struct sampler *s, struct run *run, double t, double warm_s, double seconds) {
        char line[512];
        size_t k = run->n_samples < MAX_SAMPLES ? run->n_samples : MAX_SAMPLES - 1;
        run->t[k] = t;
        for (size_t i = 0; i < N_CACHES; i++) {
                if (bench_stats(s->fd[i], line, sizeof(line)) < 0) {
                        run->bytes[k][i] = 0;
                        continue;
                }
                unsigned long long h = bench_field(line, "hits="), m = bench_field(line, "misses=");
                run->bytes[k][i] = (unsigned long) bench_field(line, "bytes=");
                const char *v = strstr(line, "value=");
                run->value[i] = v ? strtod(v + 6, NULL) : 0;
                if (t > warm_s) {
                        s->cost[i] += (double) (m - s->misses[i]) * miss_us_at(i, t, seconds);
                        s->st_gets += (h - s->hits[i]) + (m - s->misses[i]);
                        s->st_hits += h - s->hits[i];
                }
                s->hits[i] = h;
                s->misses[i] = m;
        }
        run->n_samples = k + 1;
}

/* One run: the three caches under policy p (caps of cap_mib for CAPPED) in a group of limit_mib. */
static int run_one(struct run *run, enum policy p, unsigned cap_mib, unsigned limit_mib, double seconds) {
        struct pressure_gen g;
        struct test_daemon d = {};
        char cwd[400], socks[N_CACHES][300];
        pid_t kv[N_CACHES] = {}, ld[N_CACHES] = {};
        int r;

        *run = (struct run){};
        if (!getcwd(cwd, sizeof(cwd)) || (r = pressure_gen_create(&g, cwd, (uint64_t) limit_mib << 20)) < 0)
                return -EIO;
        bool with_daemon = p == PROPORTIONAL || p == VALUE || p == DROP;
        if (with_daemon) {
                const char *const args[] = { "--config", "/dev/null", NULL };
                if (test_daemon_start(&d, args) < 0) {
                        pressure_gen_destroy(&g);
                        return -ECHILD;
                }
        }
        struct sampler s = {};
        for (size_t i = 0; i < N_CACHES; i++) {
                snprintf(socks[i], sizeof(socks[i]), "/tmp/multicache-%d-%zu.sock", (int) getpid(), i);
                test_cleanup_path(socks[i], false);
                unsigned cap = p == EQUAL ? BUDGET_MIB / N_CACHES : cap_mib;
                if (spawn_cache(&g, socks[i], with_daemon ? d.socket : NULL, p, cap, &kv[i]) < 0) {
                        fprintf(stderr, "multicache-bench: cache %s did not start\n", loads[i].name);
                        goto out;
                }
                s.fd[i] = bench_connect(socks[i]);
        }
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        uint64_t t0 = test_now_ms(), stall_warm = 0;
        for (size_t i = 0; i < N_CACHES; i++)
                ld[i] = spawn_load(&g, socks[i], i, seconds, devnull);
        close(devnull);
        const double warm_s = warm_at();
        bool warm = false;
        for (double t = 0; t < seconds; t = (double) (test_now_ms() - t0) / 1000) {
                usleep(SAMPLE_MS * 1000);
                t = (double) (test_now_ms() - t0) / 1000;
                if (!warm && t > warm_s) {
                        warm = true;
                        stall_warm = pressure_gen_some_total(&g);
                }
                sample(&s, run, t, warm_s, seconds);
        }
        double steady_s = seconds - warm_s;
        run->stall_ms_per_s = (double) (pressure_gen_some_total(&g) - stall_warm) / 1000 / steady_s;
        for (size_t i = 0; i < N_CACHES; i++) {
                run->cache_cost_per_s[i] = s.cost[i] / 1e6 / steady_s; /* seconds of miss cost per second */
                run->cost_per_s += run->cache_cost_per_s[i];
        }
        run->hit_rate = s.st_gets > 0 ? (double) s.st_hits / (double) s.st_gets : 0;
        run->ok = true;
        if (with_daemon)
                run->cpu_daemon_s = bench_proc_cpu_s(d.pid);
out:
        for (size_t i = 0; i < N_CACHES; i++) {
                if (ld[i] > 0) {
                        kill(ld[i], SIGTERM);
                        bench_reap(ld[i], NULL);
                }
                if (s.fd[i] > 0)
                        close(s.fd[i]);
                if (kv[i] > 0) {
                        int st = 0;
                        if (waitpid(kv[i], &st, WNOHANG) == kv[i])
                                run->killed++; /* gone before its time */
                        else {
                                kill(kv[i], SIGTERM);
                                bench_reap(kv[i], NULL);
                        }
                }
                unlink(socks[i]);
        }
        if (with_daemon)
                test_daemon_stop(&d);
        pressure_gen_destroy(&g);
        return run->ok && run->killed == 0 ? 0 : -EIO;
}

/* The best static split with hindsight: each cache's cost at each cap of the grid, and the cheapest
 * sum within the budget. */
static double best_static(const double cost[N_GRID][N_CACHES], unsigned ret_caps[N_CACHES]) {
        double best = -1;
        for (size_t a = 0; a < N_GRID; a++)
                for (size_t b = 0; b < N_GRID; b++)
                        for (size_t c = 0; c < N_GRID; c++) {
                                if (grid_mib[a] + grid_mib[b] + grid_mib[c] > BUDGET_MIB)
                                        continue;
                                double sum = cost[a][0] + cost[b][1] + cost[c][2];
                                if (best < 0 || sum < best) {
                                        best = sum;
                                        ret_caps[0] = grid_mib[a];
                                        ret_caps[1] = grid_mib[b];
                                        ret_caps[2] = grid_mib[c];
                                }
                        }
        return best;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
        qsort(v, n, sizeof(double), cmp_double);
        return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void write_csv(FILE *csv, const char *workload, const char *policy, const struct run *run) {
        for (size_t k = 0; csv && k < run->n_samples; k++)
                fprintf(csv, "%s,%s,%.1f,%lu,%lu,%lu\n", workload, policy, run->t[k], run->bytes[k][0], run->bytes[k][1],
                        run->bytes[k][2]);
}

/* Each cache's size over time: value-aware solid, proportional dashed, one colour per cache. */
static void write_svg(const char *dir, const char *workload, const struct run *value, const struct run *prop,
                      double seconds) {
        static const char *const colours[N_CACHES] = { "#1f77b4", "#d62728", "#2ca02c" };
        const double w = 760, left = 60, top = 24, pw = 670, ph = 300, ymax = 64;
        char path[700];
        snprintf(path, sizeof(path), "%s/multicache-bench-%s.svg", dir, workload);
        FILE *f = fopen(path, "we");
        if (!f)
                return;
        fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", w, top + ph + 90);
        fprintf(f, "<text x=\"%.0f\" y=\"16\">%s: each cache's values (MiB) over %.0f s; value-aware solid, proportional "
                   "dashed</text>\n", left, workload, seconds);
        for (int y = 0; y <= (int) ymax; y += 16)
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.0f\" "
                           "y=\"%.1f\" text-anchor=\"end\">%d</text>\n",
                        left, top + ph - y / ymax * ph, left + pw, top + ph - y / ymax * ph, left - 6,
                        top + ph - y / ymax * ph + 4, y);
        const struct run *runs[2] = { value, prop };
        for (int r = 0; r < 2; r++)
                for (size_t i = 0; runs[r] && i < N_CACHES; i++) {
                        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", colours[i],
                                r ? " stroke-dasharray=\"6 4\"" : "");
                        for (size_t k = 0; k < runs[r]->n_samples; k++)
                                fprintf(f, "%.1f,%.1f ", left + runs[r]->t[k] / seconds * pw,
                                        top + ph - MIN(runs[r]->bytes[k][i] / 1048576.0, ymax) / ymax * ph);
                        fprintf(f, "\"/>\n");
                }
        for (size_t i = 0; i < N_CACHES; i++)
                fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/>"
                           "<text x=\"%.0f\" y=\"%.0f\">%s: Zipf %s, a miss %u us</text>\n",
                        left + 200 * (double) i, top + ph + 40, left + 200 * (double) i + 24, top + ph + 40, colours[i],
                        left + 200 * (double) i + 30, top + ph + 44, loads[i].name, loads[i].zipf, loads[i].miss_us);
        fprintf(f, "</svg>\n");
        fclose(f);
}

/* The smallest group limit (of a few below LIMIT_MIB) at which value-aware costs no more than target. */
static void memory_for_equal_service(double target, double seconds) {
        static const unsigned limits[] = { 48, 58, 67, 77, 86 };
        for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
                struct run run;
                if (run_one(&run, VALUE, 0, limits[i], seconds) < 0)
                        continue;
                printf("  value-aware in %u MiB: %.3f s/s of miss cost (the equal split in %u MiB: %.3f)\n", limits[i],
                       run.cost_per_s, LIMIT_MIB, target);
                if (run.cost_per_s <= target) {
                        printf("  memory for equal service: %u MiB of %u, %.2fx\n", limits[i], LIMIT_MIB,
                               (double) limits[i] / LIMIT_MIB);
                        return;
                }
        }
        printf("  memory for equal service: more than %u MiB of %u\n", limits[4], LIMIT_MIB);
}

static const char *only; /* MULTICACHE_BENCH_ONLY */

static void run_workload(const char *name, unsigned repeat, double seconds, FILE *csv, const char *dir,
                         double *ret_vs_best, double *ret_vs_prop, double *ret_stall) {
        static struct run first[_POLICY_MAX];
        double grid_cost[N_GRID][N_CACHES] = {};
        printf("== %s: %s ==\n", name,
               swap ? "steep and flat exchange their loads halfway" : "steep, flat and scan, each its own load");
        /* The grid, once: each cap for all three caches at once, in a group where they all fit. */
        for (size_t k = 0; !only && k < N_GRID; k++) {
                struct run run;
                if (run_one(&run, CAPPED, grid_mib[k], GRID_LIMIT_MIB, seconds) < 0)
                        continue;
                memcpy(grid_cost[k], run.cache_cost_per_s, sizeof(grid_cost[k]));
                printf("  cap %2u MiB each: miss cost %.3f / %.3f / %.3f s/s\n", grid_mib[k], grid_cost[k][0],
                       grid_cost[k][1], grid_cost[k][2]);
        }
        unsigned caps[N_CACHES] = {};
        double best = best_static(grid_cost, caps);
        printf("  best static split (hindsight): %u / %u / %u MiB, %.3f s/s\n", caps[0], caps[1], caps[2], best);

        double cost[_POLICY_MAX][MAX_REPEAT] = {}, stall[_POLICY_MAX][MAX_REPEAT] = {};
        printf("  %-13s %6s %14s %9s %10s %9s  (per cache: steep / flat / scan)\n", "policy", "repeat",
               "miss cost s/s", "hit rate", "stall ms/s", "daemon s");
        for (unsigned rep = 0; rep < repeat; rep++)
                for (enum policy p = 0; p < _POLICY_MAX; p++) {
                        struct run run;
                        if (only && !strstr(policy_names[p], only))
                                continue;
                        if (run_one(&run, p, 0, LIMIT_MIB, seconds) < 0) {
                                printf("  %-13s %6u  failed: %u of its caches killed\n", policy_names[p], rep + 1, run.killed);
                                cost[p][rep] = -1;
                                continue;
                        }
                        cost[p][rep] = run.cost_per_s;
                        stall[p][rep] = run.stall_ms_per_s;
                        printf("  %-13s %6u %14.3f %8.1f%% %10.1f %9.2f  (%.3f / %.3f / %.3f; last sizes %.1f / %.1f / "
                               "%.1f MiB; values %.0f / %.0f / %.0f)\n",
                               policy_names[p], rep + 1, run.cost_per_s, 100 * run.hit_rate, run.stall_ms_per_s,
                               run.cpu_daemon_s, run.cache_cost_per_s[0], run.cache_cost_per_s[1], run.cache_cost_per_s[2],
                               run.n_samples ? run.bytes[run.n_samples - 1][0] / 1048576.0 : 0,
                               run.n_samples ? run.bytes[run.n_samples - 1][1] / 1048576.0 : 0,
                               run.n_samples ? run.bytes[run.n_samples - 1][2] / 1048576.0 : 0, run.value[0], run.value[1],
                               run.value[2]);
                        if (rep == 0) {
                                write_csv(csv, name, policy_names[p], &run);
                                first[p] = run;
                        }
                        fflush(stdout);
                }
        write_svg(dir, name, first[VALUE].ok ? &first[VALUE] : NULL, first[PROPORTIONAL].ok ? &first[PROPORTIONAL] : NULL,
                  seconds);
        /* Ratios within a repeat (the same minutes of the machine), over the repeats whose runs all lived. */
        double vs_best[MAX_REPEAT], vs_prop[MAX_REPEAT], st[MAX_REPEAT], eq[MAX_REPEAT];
        size_t nb = 0, np = 0, ns = 0, ne = 0;
        for (unsigned rep = 0; rep < repeat; rep++) {
                if (cost[VALUE][rep] > 0 && best > 0)
                        vs_best[nb++] = cost[VALUE][rep] / best;
                if (cost[VALUE][rep] > 0 && cost[PROPORTIONAL][rep] > 0)
                        vs_prop[np++] = cost[VALUE][rep] / cost[PROPORTIONAL][rep];
                if (cost[VALUE][rep] > 0)
                        st[ns++] = stall[VALUE][rep];
                if (cost[EQUAL][rep] > 0)
                        eq[ne++] = cost[EQUAL][rep];
        }
        *ret_vs_best = median(vs_best, nb);
        *ret_vs_prop = median(vs_prop, np);
        *ret_stall = median(st, ns);
        if (!swap && !only && ne > 0)
                memory_for_equal_service(median(eq, ne), seconds);
}

int main(int argc, char *argv[]) {
        unsigned repeat = 1;
        double seconds = 60;
        const char *out_dir = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
                        repeat = (unsigned) atoi(argv[++i]);
                else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
                        seconds = atof(argv[++i]);
                else if (!build)
                        build = argv[i];
                else
                        out_dir = argv[i];
        }
        if (!build || repeat < 1 || repeat > MAX_REPEAT || seconds < 10) {
                fprintf(stderr, "usage: multicache-bench BUILD_DIR [OUT_DIR] [--repeat N] [--seconds S]\n");
                return 2;
        }
        base_seconds = seconds;
        setvbuf(stdout, NULL, _IOLBF, 0); /* a table row as soon as its run is over */
        const char *skip = test_need_root_psi();
        if (skip) {
                fprintf(stderr, "multicache-bench: %s\n", skip);
                return 77;
        }
        char path[700];
        snprintf(path, sizeof(path), "%s/multicache-bench.csv", out_dir ? out_dir : ".");
        FILE *csv = fopen(path, "we");
        if (csv)
                fprintf(csv, "workload,policy,t,steep_bytes,flat_bytes,scan_bytes\n");
        static const char *const names[] = { "steady", "swap" };
        double vs_best[2], vs_prop[2], stall[2];
        only = getenv("MULTICACHE_BENCH_ONLY");
        const char *workload = getenv("MULTICACHE_BENCH_WORKLOAD");
        for (int w = 0; w < (only ? 1 : 2); w++) {
                if (workload && strcmp(workload, names[w]) != 0) {
                        vs_best[w] = vs_prop[w] = stall[w] = 0;
                        continue;
                }
                swap = w == 1;
                run_workload(names[w], repeat, swap ? 2 * seconds : seconds, csv, out_dir ? out_dir : ".", &vs_best[w],
                             &vs_prop[w], &stall[w]);
        }
        if (csv)
                fclose(csv);
        for (int w = 0; w < (only ? 1 : 2); w++)
                if (!workload || strcmp(workload, names[w]) == 0)
                        printf("multicache %s: value-aware miss cost %.2fx the best static split, %.2fx proportional; "
                               "stall %.1f ms/s\n",
                               names[w], vs_best[w], vs_prop[w], stall[w]);
        return 0;
}
