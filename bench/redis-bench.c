/* SPDX-License-Identifier: MIT */
/* redis-bench: an unmodified Redis (Debian's) in a cgroup with a 128 MiB limit and no maxmemory, under
 * kv-zipf's load (Zipf GETs over more keys than fit; a miss costs 250 us and SETs the value), run once
 * per policy, each with a fresh group, server and daemon:
 *   none      no maxmemory: Redis grows until the OOM killer takes it;
 *   cap N     a fixed maxmemory of N MiB (allkeys-lru): the operator's guess, several in the same run;
 *   adapter   no maxmemory, pressured and `pressure-adapt redis` beside it.
 * Prints one row per policy: survived or killed, hit rate over the whole run and over its last two
 * thirds, requests/s, the group's stall, Redis's memory at the end; then the adapter's steady hit rate
 * against the best fixed cap that survived. With the adapter, after the load it waits for maxmemory to
 * rise again (its --quiet is 5 s here) and checks that Redis's own setting is back once it stops.
 *
 *   redis-bench BUILD_DIR [SECONDS]          (as root; REDIS_BENCH_ONLY=none|cap|adapter, REDIS_BENCH_CAPS="48 64")
 *   REDIS_BENCH_PHASE=1: half way through, a neighbour in the same group starts reading a 48 MiB file
 *   over and over (its page cache needs room Redis holds), as in the kvcache matrix's phase change; the
 *   best fixed cap is then the best among those under which the group's steady stall stays within
 *   2 ms/s, and the neighbour's reads per second are shown. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/adapt/resp.h"
#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_MIB 128
#define KEYS "100000"
#define VALUE_BYTES "4000"
#define MISS_US "250"

struct run {
        char name[32];
        unsigned cap_mib; /* 0: none */
        bool adapter;
        bool survived;
        double seconds;
        unsigned long long requests, hits;
        unsigned long long st_gets, st_hits; /* Redis's keyspace counters over the last two thirds */
        double stall_ms_s, st_stall_ms_s; /* the whole run, the last two thirds */
        double ws_reads_s;                 /* the neighbour's reads of 64 KiB per second (phase) */
        unsigned long long used_end, maxmemory_end;
        bool regrew, restored; /* adapter: maxmemory rose after the load; Redis's own came back */
        bool at_limit;         /* adapter: or it stood at the daemon's growth limit (the group's room) */
        unsigned limits_told;  /* adapter: growth limits the daemon told it */
};

static const char *build;
static char redis_bin[600];

static unsigned long long field(const char *line, const char *key) {
        const char *p = strstr(line, key);
        return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static int redis_info(const char *sock, const char *section, const char *key, unsigned long long *ret) {
        struct conn c;
        struct resp_reply r;
        int k = conn_open(sock, 700, &c);
        if (k < 0)
                return k;
        k = resp_command(&c, &r, (const char *const[]){ "INFO", section, NULL });
        if (k >= 0) {
                k = r.type == RESP_BULK && r.str ? resp_info_u64(r.str, key, ret) : -EPROTO;
                resp_reply_done(&r);
        }
        conn_close(&c);
        return k;
}

static int redis_maxmemory(const char *sock, unsigned long long *ret) {
        struct conn c;
        struct resp_reply r;
        int k = conn_open(sock, 700, &c);
        if (k < 0)
                return k;
        k = resp_command(&c, &r, (const char *const[]){ "CONFIG", "GET", "maxmemory", NULL });
        if (k >= 0) {
                k = r.type == RESP_ARRAY && r.n_elements == 2 && r.elements[1].str ? 0 : -EPROTO;
                if (k >= 0)
                        *ret = strtoull(r.elements[1].str, NULL, 10);
                resp_reply_done(&r);
        }
        conn_close(&c);
        return k;
}

static void keyspace(const char *sock, unsigned long long *gets, unsigned long long *hits) {
        unsigned long long h = 0, m = 0;
        (void) redis_info(sock, "stats", "keyspace_hits", &h);
        (void) redis_info(sock, "stats", "keyspace_misses", &m);
        *gets = h + m;
        *hits = h;
}

static bool wait_socket(const char *sock, int tenths) {
        unsigned long long v;
        for (int i = 0; i < tenths; i++) {
                if (redis_info(sock, "server", "process_id", &v) == 0)
                        return true;
                usleep(100000);
        }
        return false;
}

/* kv-zipf against the Redis for seconds; its one line in out. */
static pid_t start_load(const char *sock, double seconds, const char *seed, int out_fd) {
        char zipf[600], addr[520], secs[32];
        snprintf(zipf, sizeof(zipf), "%s/kv-zipf", build);
        snprintf(addr, sizeof(addr), "redis:%s", sock);
        snprintf(secs, sizeof(secs), "%g", seconds);
        pid_t pid = fork();
        if (pid == 0) {
                dup2(out_fd, STDOUT_FILENO);
                execl(zipf, zipf, addr, secs, KEYS, VALUE_BYTES, seed, MISS_US, (char *) NULL);
                _exit(127);
        }
        return pid;
}

static void read_load(int fd, struct run *r) {
        char out[512];
        ssize_t n = read(fd, out, sizeof(out) - 1);
        out[n > 0 ? n : 0] = 0;
        r->survived = strncmp(out, "survived", 8) == 0;
        r->seconds = strstr(out, "seconds=") ? atof(strstr(out, "seconds=") + 8) : 0;
        r->requests = field(out, "requests=");
        r->hits = field(out, "hits=");
}

/* The neighbour of the phase change: a reader of a file working set in the group. */
static pid_t start_reader(struct pressure_gen *g, const char *ws, double seconds, int out_fd) {
        char zipf[600], secs[32];
        snprintf(zipf, sizeof(zipf), "%s/kv-zipf", build);
        snprintf(secs, sizeof(secs), "%g", seconds);
        const char *argv[] = { zipf, "--read", ws, secs, NULL };
        return pressure_gen_spawn_quiet(g, argv, out_fd);
}

/* The load; Redis's keyspace counters and the group's stall read after the first third; with a phase
 * change, the neighbour from half way. */
static void run_load(struct run *r, struct pressure_gen *g, const char *sock, double seconds) {
        bool phase = getenv("REDIS_BENCH_PHASE") != NULL;
        unsigned long long gets0 = 0, hits0 = 0, gets1, hits1;
        uint64_t stall0 = pressure_gen_some_total(g), t0 = test_now_ms(), stall_warm, t_warm;
        char ws[600] = "";
        int p[2], rp[2] = { -1, -1 };
        pid_t reader = -1;
        if (pipe2(p, O_CLOEXEC) < 0)
                return;
        pid_t ld = start_load(sock, seconds, "1", p[1]);
        close(p[1]);
        usleep((useconds_t) (seconds / 3 * 1e6));
        keyspace(sock, &gets0, &hits0);
        stall_warm = pressure_gen_some_total(g);
        t_warm = test_now_ms();
        if (phase && getcwd(ws, sizeof(ws) - 32) && pipe2(rp, O_CLOEXEC) == 0) {
                strcat(ws, "/redis-bench-ws.dat");
                usleep((useconds_t) (seconds / 6 * 1e6));
                if (pressure_gen_working_set(ws, 48) >= 0)
                        reader = start_reader(g, ws, seconds / 2 + 5, rp[1]);
                close(rp[1]);
        }
        waitpid(ld, NULL, 0);
        read_load(p[0], r);
        close(p[0]);
        keyspace(sock, &gets1, &hits1);
        if (gets1 >= gets0) {
                r->st_gets = gets1 - gets0;
                r->st_hits = hits1 - hits0;
        }
        uint64_t now = test_now_ms(), stall = pressure_gen_some_total(g);
        r->stall_ms_s = now > t0 ? (double) (stall - stall0) / (double) (now - t0) : 0;
        r->st_stall_ms_s = now > t_warm ? (double) (stall - stall_warm) / (double) (now - t_warm) : 0;
        if (reader > 0) {
                char line[256];
                kill(reader, SIGTERM);
                waitpid(reader, NULL, 0);
                ssize_t n = read(rp[0], line, sizeof(line) - 1);
                line[n > 0 ? n : 0] = 0;
                double secs = strstr(line, "seconds=") ? atof(strstr(line, "seconds=") + 8) : 0;
                r->ws_reads_s = secs > 0 ? (double) field(line, "reads=") / secs : 0;
        }
        if (rp[0] >= 0)
                close(rp[0]);
        if (ws[0])
                unlink(ws);
}

static pid_t start_adapter(const char *daemon_sock, const char *sock, int log_fd) {
        char adapt[600], socket_arg[200];
        snprintf(adapt, sizeof(adapt), "%s/pressure-adapt", build);
        snprintf(socket_arg, sizeof(socket_arg), "--socket=%s", daemon_sock);
        pid_t pid = fork();
        if (pid == 0) {
                dup2(log_fd, STDERR_FILENO);
                execl(adapt, adapt, "redis", socket_arg, "--quiet=5", "-v", sock, (char *) NULL);
                _exit(127);
        }
        return pid;
}

/* The cap the adapter's last growth limit sets (its floor, 16 MiB by default, and the limit), from its
 * log; 0 when it was told none, or the last lifted it. */
static unsigned long long told_cap(const char *log) {
        FILE *f = fopen(log, "re");
        char line[1024];
        unsigned long long cap = 0;
        const char *p;
        while (f && fgets(line, sizeof(line), f))
                if ((p = strstr(line, "growth limit ")))
                        cap = strtoull(p + 13, NULL, 10);
        if (f)
                fclose(f);
        return cap > 0 ? cap + (16ULL << 20) : 0;
}

/* After the load: maxmemory rises again within 30 s, unless it stands at the daemon's growth limit (the
 * room under the group's headroom, which Redis has filled); at SIGTERM Redis's own 0 comes back. */
static void adapter_after(struct run *r, const char *sock, pid_t adapter, const char *log) {
        unsigned long long low = r->maxmemory_end, now = low;
        for (int i = 0; i < 300 && low > 0 && !r->regrew && !r->at_limit; i++) {
                usleep(100000);
                r->regrew = redis_maxmemory(sock, &now) == 0 && (now > low || now == 0);
                r->at_limit = !r->regrew && now > 0 && now == told_cap(log);
        }
        kill(adapter, SIGTERM);
        waitpid(adapter, NULL, 0);
        r->restored = redis_maxmemory(sock, &now) == 0 && now == 0;
}

/* Lines of a small log file that contain needle. */
static unsigned count_lines(const char *path, const char *needle) {
        FILE *f = fopen(path, "re");
        char line[1024];
        unsigned n = 0;
        while (f && fgets(line, sizeof(line), f))
                n += strstr(line, needle) != NULL;
        if (f)
                fclose(f);
        return n;
}

static void dump_file(const char *path) {
        FILE *f = fopen(path, "re");
        char line[1024];
        while (f && fgets(line, sizeof(line), f))
                fputs(line, stderr);
        if (f)
                fclose(f);
}

static int run_policy(struct run *r, double seconds) {
        struct pressure_gen g;
        struct test_daemon d = {};
        char cwd[400], sock[500], maxmem[32];
        pid_t adapter = -1;
        char alog[64] = "";

        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, (uint64_t) LIMIT_MIB << 20) < 0)
                return -EIO;
        snprintf(sock, sizeof(sock), "/tmp/redis-bench-%d.sock", (int) getpid());
        snprintf(maxmem, sizeof(maxmem), "%umb", r->cap_mib);
        const char *argv[] = { redis_bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
                               "--maxmemory-policy", "allkeys-lru", "--maxmemory", r->cap_mib ? maxmem : "0", NULL };
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        pid_t redis = pressure_gen_spawn_quiet(&g, argv, devnull);
        if (redis < 0 || !wait_socket(sock, 100)) {
                fprintf(stderr, "redis-bench: Redis did not start\n");
                if (redis > 0) {
                        kill(redis, SIGKILL);
                        waitpid(redis, NULL, 0);
                }
                close(devnull);
                pressure_gen_destroy(&g);
                return -EIO;
        }
        if (r->adapter) {
                const char *conf = getenv("REDIS_BENCH_CONFIG");
                const char *const args[] = { "--config", conf ? conf : "/dev/null", NULL };
                if (test_daemon_start(&d, args) < 0) {
                        fprintf(stderr, "redis-bench: the daemon did not start (PRESSURED_BIN=%s)\n", getenv("PRESSURED_BIN"));
                        kill(redis, SIGKILL);
                        waitpid(redis, NULL, 0);
                        close(devnull);
                        pressure_gen_destroy(&g);
                        return -ECHILD;
                }
                /* Its log is kept to count the growth limits it was told (and shown with REDIS_BENCH_LOG). */
                snprintf(alog, sizeof(alog), "/tmp/redis-bench-adapt-%d.log", (int) getpid());
                int log = open(alog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                adapter = start_adapter(d.socket, sock, log >= 0 ? log : devnull);
                if (log >= 0)
                        close(log);
                /* Registered: the daemon lists the shrinker (its log says so). */
                for (int i = 0; i < 100 && test_daemon_log_count(&d, "registered 1 shrinker for pid") == 0; i++)
                        usleep(100000);
        }
        run_load(r, &g, sock, seconds);
        (void) redis_info(sock, "memory", "used_memory", &r->used_end);
        (void) redis_maxmemory(sock, &r->maxmemory_end);
        int status = 0;
        r->survived = r->survived && waitpid(redis, &status, WNOHANG) == 0;
        if (adapter > 0) {
                if (r->survived)
                        adapter_after(r, sock, adapter, alog);
                else {
                        kill(adapter, SIGTERM);
                        waitpid(adapter, NULL, 0);
                }
                test_daemon_stop(&d);
                r->limits_told = count_lines(alog, "growth limit");
                if (getenv("REDIS_BENCH_LOG"))
                        dump_file(alog);
                unlink(alog);
        }
        kill(redis, SIGKILL);
        waitpid(redis, NULL, 0);
        close(devnull);
        unlink(sock);
        pressure_gen_destroy(&g);
        return 0;
}

static double steady_hit_rate(const struct run *r) {
        return r->st_gets ? (double) r->st_hits / (double) r->st_gets : 0;
}

static void print_row(const struct run *r) {
        char fate[32];
        snprintf(fate, sizeof(fate), r->survived ? "survived" : "killed at %.0f s", r->seconds);
        char ws[32] = "";
        if (getenv("REDIS_BENCH_PHASE"))
                snprintf(ws, sizeof(ws), " %7.0f |", r->ws_reads_s);
        printf("| %-10s | %-8s | %6.3f | %6.3f | %7.0f | %7.2f | %7.2f |%s %7.1f | %s |\n", r->name, fate,
               r->requests ? (double) r->hits / (double) r->requests : 0, steady_hit_rate(r),
               r->seconds > 0 ? (double) r->requests / r->seconds : 0, r->stall_ms_s, r->st_stall_ms_s, ws,
               (double) r->used_end / 1048576,
               !r->adapter ? "" : !r->survived ? "" : r->regrew && r->restored ? "rose again; restored" :
               r->at_limit && r->restored ? "at the daemon's limit; restored" :
               r->regrew ? "rose again; NOT restored" : r->restored ? "did not rise; restored" : "did not rise; NOT restored");
        fflush(stdout);
}

static bool wanted(const char *policy) {
        const char *only = getenv("REDIS_BENCH_ONLY");
        return !only || strstr(only, policy);
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: redis-bench BUILD_DIR [SECONDS]\n");
                return 2;
        }
        build = argv[1];
        char daemon_bin[600];
        snprintf(daemon_bin, sizeof(daemon_bin), "%s/pressured", build);
        setenv("PRESSURED_BIN", daemon_bin, 0);
        setenv("PRESSURED_TEST_NO_LOG", "1", 0); /* the daemon's log stays out of the table */
        double seconds = argc > 2 ? atof(argv[2]) : 60;
        if (access("/usr/bin/redis-server", X_OK) == 0)
                snprintf(redis_bin, sizeof(redis_bin), "/usr/bin/redis-server");
        else if (access("/usr/bin/redis-check-rdb", X_OK) == 0) {
                /* Debian's redis-tools ships the server as redis-check-rdb: it serves when called so. */
                snprintf(redis_bin, sizeof(redis_bin), "/tmp/redis-bench-%d-redis-server", (int) getpid());
                if (symlink("/usr/bin/redis-check-rdb", redis_bin) < 0)
                        return 2;
        } else {
                fprintf(stderr, "redis-bench: no redis-server (build-aux/install-deps installs redis-tools)\n");
                return 77;
        }
        const char *caps_env = getenv("REDIS_BENCH_CAPS");
        char caps[128];
        snprintf(caps, sizeof(caps), "%s", caps_env ? caps_env : "64 80 96 112 120");

        struct run runs[16] = {};
        size_t n = 0;
        if (wanted("none"))
                snprintf(runs[n++].name, sizeof(runs[0].name), "none");
        for (char *save, *t = wanted("cap") ? strtok_r(caps, " ", &save) : NULL; t && n < 15; t = strtok_r(NULL, " ", &save)) {
                runs[n].cap_mib = (unsigned) atoi(t);
                snprintf(runs[n++].name, sizeof(runs[0].name), "cap %s", t);
        }
        if (wanted("adapter")) {
                runs[n].adapter = true;
                snprintf(runs[n++].name, sizeof(runs[0].name), "adapter");
        }
        printf("Redis in a %u MiB group, %s keys of %s bytes, Zipf 0.99, %s us per miss, %g s per policy%s\n\n",
               LIMIT_MIB, KEYS, VALUE_BYTES, MISS_US, seconds,
               getenv("REDIS_BENCH_PHASE") ? "; half way a neighbour starts reading 48 MiB of files in the group" : "");
        bool phase = getenv("REDIS_BENCH_PHASE") != NULL;
        printf("| policy     | Redis    | hits   | steady | req/s   | stall ms/s | steady stall |%s used MiB | maxmemory after |\n",
               phase ? " neighbour reads/s |" : "");
        printf("|---|---|---|---|---|---|---|---|---|%s\n", phase ? "---|" : "");
        const struct run *best = NULL, *adapter = NULL;
        for (size_t i = 0; i < n; i++) {
                if (run_policy(&runs[i], seconds) < 0)
                        continue;
                print_row(&runs[i]);
                /* With the phase change, a cap that leaves the neighbour thrashing is no candidate. */
                bool fits = !phase || runs[i].st_stall_ms_s <= 2.0;
                if (runs[i].cap_mib && runs[i].survived && fits && (!best || steady_hit_rate(&runs[i]) > steady_hit_rate(best)))
                        best = &runs[i];
                if (runs[i].adapter)
                        adapter = &runs[i];
        }
        if (best && adapter && steady_hit_rate(best) > 0)
                printf("\nadapter against the best fixed cap%s (%s): steady hit rate %.3f / %.3f = %.2fx\n",
                       phase ? " whose steady stall stays within 2 ms/s" : "", best->name,
                       steady_hit_rate(adapter), steady_hit_rate(best), steady_hit_rate(adapter) / steady_hit_rate(best));
        else if (adapter && phase)
                printf("\nno fixed cap kept the group's steady stall within 2 ms/s\n");
        if (adapter)
                printf("adapter: told %u growth limits by the daemon\n", adapter->limits_told);
        if (redis_bin[0] == '/' && strncmp(redis_bin, "/tmp/", 5) == 0)
                unlink(redis_bin);
        return 0;
}
