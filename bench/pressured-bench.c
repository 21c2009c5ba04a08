/* SPDX-License-Identifier: MIT */
/* pressured-bench: what the daemon costs and how fast it answers, each scenario against a baseline
 * measured in the same run.
 *
 *   latency    real pressure in a cgroup; the benchmark holds its own PSI trigger on the same cgroup with
 *              the same threshold (what an application gets on its own): the delay the daemon adds
 *              between that POLLPRI and a subscriber's receipt of the event
 *   fanout     1, 100, 1000, 10000 subscribers of one scope: time until the last has the event, the
 *              daemon's CPU time for it, against one subscriber
 *   rounds     1, 100, 1000 clients with 4 shrinkers each: one full count+scan round, against the same
 *              callbacks called in-process
 *   footprint  RSS, CPU and wake-ups idle for 60 s and with 1000 clients connected
 *   flood      another client's GetStatus round trips while one connection floods oneway calls
 *   deep       root's GetStatus round trips while nobody loops connect/Serve/close from a cgroup 1,000 deep
 *   fairness   an honest shrinker's requests per second under real pressure, alone, beside honest peers
 *              and beside hostile clients (one answering each scan just before its deadline, one
 *              stopped, one lying about what it holds and frees, a Serve spammer)
 *
 * Usage: pressured-bench [SCENARIO...] (as root; run from the build's tests/ directory by bench/run). */

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <sys/prctl.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "psi.h"
#include "test-util.h"

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static uint64_t percentile(uint64_t *v, size_t n, double p) {
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(*v), cmp_u64);
        size_t i = (size_t) (p * (double) (n - 1) + 0.5);
        return v[i];
}

/* ---- a peer: a nonblocking unix connection with a read buffer ---- */

struct peer {
        int fd;
        char *buf;
        size_t len, cap;
        char token[64];
        int answer_fd;
};

static int peer_connect(struct peer *p, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        memset(p, 0, sizeof(*p));
        p->fd = p->answer_fd = -1;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (p->fd < 0 || connect(p->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return 0;
}

static void peer_close(struct peer *p) {
        if (p->fd >= 0)
                close(p->fd);
        if (p->answer_fd >= 0)
                close(p->answer_fd);
        free(p->buf);
        p->fd = p->answer_fd = -1;
        p->buf = NULL;
}

static int send_all(int fd, const char *text) {
        size_t len = strlen(text) + 1; /* with the NUL */
        while (len > 0) {
                ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN) {
                                struct pollfd w = { .fd = fd, .events = POLLOUT };
                                poll(&w, 1, 1000);
                                continue;
                        }
                        return -errno;
                }
                text += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Read what is there; returns <0 on close. */
static int peer_fill(struct peer *p) {
        if (p->cap - p->len < 65536) {
                p->cap = p->cap ? p->cap * 2 : 131072;
                p->buf = realloc(p->buf, p->cap);
        }
        ssize_t n = recv(p->fd, p->buf + p->len, p->cap - p->len, MSG_DONTWAIT);
        if (n == 0)
                return -ECONNRESET;
        if (n < 0)
                return errno == EAGAIN ? 0 : -errno;
        p->len += (size_t) n;
        return 1;
}

/* Next whole message (parsed), or NULL. */
static struct json_object *peer_next(struct peer *p) {
        char *nul = p->len ? memchr(p->buf, 0, p->len) : NULL;
        if (!nul)
                return NULL;
        struct json_object *o = json_tokener_parse(p->buf);
        size_t used = (size_t) (nul - p->buf) + 1;
        memmove(p->buf, p->buf + used, p->len - used);
        p->len -= used;
        return o;
}

static struct json_object *jget(struct json_object *o, const char *k) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* Blocking: one message within timeout. */
static struct json_object *peer_wait(struct peer *p, int timeout_ms) {
        uint64_t end = now_us() + (uint64_t) timeout_ms * 1000;
        for (;;) {
                struct json_object *o = peer_next(p);
                if (o)
                        return o;
                uint64_t t = now_us();
                if (t >= end)
                        return NULL;
                struct pollfd pf = { .fd = p->fd, .events = POLLIN };
                if (poll(&pf, 1, (int) ((end - t) / 1000) + 1) > 0 && peer_fill(p) < 0)
                        return NULL;
        }
}

/* ---- the daemon ---- */

static struct test_daemon daemon_;

static int daemon_up(const char *const *args) {
        if (!getenv("BENCH_LOG"))
                setenv("PRESSURED_TEST_NO_LOG", "1", 1);
        return test_daemon_start(&daemon_, args);
}

/* ---- fan-out ---- */

static char root[128];

static int set_node1_free(unsigned long pages) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "awk -v free=%lu '/^Node 1, zone +Normal/{n1=1} /^Node 1, zone +Movable/{n1=0} "
                 "n1 && $1==\"pages\" && $2==\"free\" {print \"  pages free     \" free; next} {print}' "
                 "%s/proc/zoneinfo.in > %s/proc/zoneinfo.tmp && mv %s/proc/zoneinfo.tmp %s/proc/zoneinfo",
                 pages, root, root, root, root);
        return system(cmd) == 0 ? 0 : -EIO;
}

static void scenario_fanout(void) {
        static const int counts[] = { 1, 100, 1000, 10000 };
        char cmd[600];
        snprintf(root, sizeof(root), "/tmp/pressured-bench-XXXXXX");
        if (!mkdtemp(root))
                return;
        snprintf(cmd, sizeof(cmd), "cp -r %s/. %s/ && cp %s/proc/zoneinfo %s/proc/zoneinfo.in",
                 test_fixture("sysfs-2node"), root, root, root);
        if (system(cmd) != 0 || set_node1_free(100000) < 0)
                return;
        const char *const args[] = { "--sysfs-root", root, "--hold", "0", "--sample-interval", "20ms",
                                     "--node-interval", "20ms", "--quiet", NULL };
        if (daemon_up(args) < 0) {
                fprintf(stderr, "fanout: cannot start the daemon\n");
                return;
        }

        printf("== fan-out: one level change of node 1 to N subscribers (5 changes each, medians) ==\n");
        printf("%8s %14s %14s %16s %12s\n", "subs", "first (us)", "last (us)", "daemon cpu ms", "vs 1 sub");
        double base_last = 0;
        unsigned long level_free[2] = { 3000, 100000 }; /* low, ok */
        int change = 0; /* alternates across all rows, so that every set_node1_free() is a change */
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                int n = counts[ci];
                struct peer *subs = calloc((size_t) n, sizeof(*subs));
                int ep = epoll_create1(EPOLL_CLOEXEC);
                int ok = 1;
                for (int i = 0; i < n && ok; i++) {
                        if (peer_connect(&subs[i], daemon_.socket) < 0 ||
                            send_all(subs[i].fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"node\",\"node\":1}]},\"more\":true}") < 0)
                                ok = 0;
                        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t) i };
                        epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &ev);
                }
                for (int i = 0; i < n && ok; i++) {
                        struct json_object *o = peer_wait(&subs[i], 10000);
                        if (!o)
                                ok = 0;
                        json_object_put(o);
                }
                if (!ok) {
                        printf("%8d  could not set up the subscribers\n", n);
                        break;
                }

                uint64_t firsts[5], lasts[5], cpus[5];
                for (int rep = 0; rep < 5; rep++) {
                        uint64_t cpu0, cpu1, rss, vctx;
                        test_proc_stat(daemon_.pid, &cpu0, &rss, &vctx);
                        set_node1_free(level_free[change++ % 2]);
                        int got = 0;
                        uint64_t ts = 0, first = 0, last = 0;
                        uint64_t end = now_us() + 10000000;
                        while (got < n && now_us() < end) {
                                struct epoll_event evs[256];
                                int k = epoll_wait(ep, evs, 256, 1000);
                                uint64_t t = now_us();
                                for (int e = 0; e < k; e++) {
                                        /* Cheap on purpose: this process shares the machine with the daemon.
                                         * Count whole messages; decode only the first one for its timestamp. */
                                        struct peer *p = &subs[evs[e].data.u32];
                                        char buf[8192];
                                        ssize_t r = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
                                        for (ssize_t i = 0; i < r; i++)
                                                if (buf[i] == 0) {
                                                        if (!first) {
                                                                first = t;
                                                                const char *tsp = strstr(buf, "\"timestamp\":");
                                                                if (tsp)
                                                                        ts = strtoull(tsp + 12, NULL, 10);
                                                        }
                                                        last = t;
                                                        got++;
                                                }
                                }
                        }
                        test_proc_stat(daemon_.pid, &cpu1, &rss, &vctx);
                        firsts[rep] = first > ts ? first - ts : 0;
                        lasts[rep] = last > ts ? last - ts : 0;
                        cpus[rep] = cpu1 - cpu0;
                        if (got < n)
                                printf("  (only %d of %d got change %d)\n", got, n, rep);
                }
                uint64_t f = percentile(firsts, 5, 0.5), l = percentile(lasts, 5, 0.5), c = percentile(cpus, 5, 0.5);
                if (ci == 0)
                        base_last = (double) l;
                printf("%8d %14llu %14llu %16llu %11.1fx\n", n, (unsigned long long) f, (unsigned long long) l,
                       (unsigned long long) c, base_last > 0 ? (double) l / base_last : 0);
                for (int i = 0; i < n; i++)
                        peer_close(&subs[i]);
                close(ep);
                free(subs);
        }
        printf("(times from the daemon's event timestamp, taken when it starts handling the change, to receipt; "
               "daemon cpu in clock ticks of 10 ms)\n\n");
        test_daemon_stop(&daemon_);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        (void) system(cmd);
}

/* ---- reclaim rounds ---- */

#define SHRINKERS_PER_CLIENT 4
#define OBJECTS 256
#define ROUND_REPEAT 5

static volatile uint64_t sink;

static uint64_t cb_count(void) {
        sink++;
        return OBJECTS;
}

static uint64_t cb_scan(uint64_t nr) {
        sink += nr;
        return nr;
}

/* As libpressure does: every request read now, answered in one call. Returns how many. */
static unsigned answer_all(struct peer *p) {
        char a[65536];
        size_t len = (size_t) snprintf(a, sizeof(a), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\",\"answers\":[", p->token);
        unsigned n = 0;
        struct json_object *o;
        while ((o = peer_next(p))) {
                struct json_object *list = jget(jget(o, "parameters"), "requests");
                for (size_t i = 0; list && i < json_object_array_length(list) && len < sizeof(a) - 128; i++) {
                        struct json_object *r = json_object_array_get_idx(list, i);
                        const char *op = json_object_get_string(jget(r, "op"));
                        long long id = (long long) json_object_get_int64(jget(r, "id"));
                        if (op && strcmp(op, "count") == 0)
                                len += (size_t) snprintf(a + len, sizeof(a) - len, "%s{\"request\":%lld,\"count\":%llu}",
                                                         n ? "," : "", id, (unsigned long long) cb_count());
                        else
                                len += (size_t) snprintf(a + len, sizeof(a) - len, "%s{\"request\":%lld,\"freed\":%llu}",
                                                         n ? "," : "", id,
                                                         (unsigned long long) cb_scan((uint64_t) json_object_get_int64(jget(r, "nr_to_scan"))));
                        n++;
                }
                json_object_put(o);
        }
        if (n) {
                snprintf(a + len, sizeof(a) - len, "]},\"oneway\":true}");
                send_all(p->answer_fd, a);
        }
        return n;
}

static void scenario_rounds(void) {
        static const int counts[] = { 1, 100, 1000 };
        const char *const args[] = { "--config", "/dev/null", "--quiet", NULL };
        if (daemon_up(args) < 0) {
                fprintf(stderr, "rounds: cannot start the daemon\n");
                return;
        }
        printf("== reclaim rounds: N clients x %d shrinkers of %d objects, one Shrink (count, then scan all) ==\n",
               SHRINKERS_PER_CLIENT, OBJECTS);
        printf("%8s %10s %12s %14s %14s %16s %12s\n", "clients", "requests", "round (ms)", "requests/s",
               "daemon cpu ms", "in-process (us)", "ratio");
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                int n = counts[ci];
                struct peer *cl = calloc((size_t) n, sizeof(*cl));
                int ep = epoll_create1(EPOLL_CLOEXEC), ok = 1;
                char serve[1024];
                snprintf(serve, sizeof(serve), "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":["
                                               "{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\"}],\"batched\":true},\"more\":true}");
                for (int i = 0; i < n && ok; i++) {
                        struct peer ans;
                        if (peer_connect(&cl[i], daemon_.socket) < 0 || send_all(cl[i].fd, serve) < 0 ||
                            peer_connect(&ans, daemon_.socket) < 0) {
                                ok = 0;
                                break;
                        }
                        cl[i].answer_fd = ans.fd;
                        struct json_object *o = peer_wait(&cl[i], 10000);
                        const char *tok = json_object_get_string(jget(jget(jget(o, "parameters"), "registered"), "token"));
                        if (!tok)
                                ok = 0;
                        else
                                snprintf(cl[i].token, sizeof(cl[i].token), "%s", tok);
                        json_object_put(o);
                        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t) i };
                        epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev);
                }
                struct peer ctl;
                if (!ok || peer_connect(&ctl, daemon_.socket) < 0) {
                        printf("%8d  could not set up the clients\n", n);
                        break;
                }
                struct epoll_event cev = { .events = EPOLLIN, .data.u32 = UINT32_MAX };
                epoll_ctl(ep, EPOLL_CTL_ADD, ctl.fd, &cev);

                /* Several Shrinks, the median reported: one round is short enough to catch the machine busy. */
                uint64_t times[ROUND_REPEAT], cpus[ROUND_REPEAT], requests = 0;
                int done = 0;
                for (int rep = 0; rep < ROUND_REPEAT; rep++) {
                        uint64_t cpu0, cpu1, rss, vctx;
                        test_proc_stat(daemon_.pid, &cpu0, &rss, &vctx);
                        uint64_t t0 = now_us();
                        requests = 0;
                        done = 0;
                        send_all(ctl.fd, "{\"method\":\"io.pressured.Shrink\"}");
                        while (!done && now_us() - t0 < 60000000) {
                                struct epoll_event evs[256];
                                int k = epoll_wait(ep, evs, 256, 1000);
                                for (int e = 0; e < k; e++) {
                                        if (evs[e].data.u32 == UINT32_MAX) {
                                                peer_fill(&ctl);
                                                struct json_object *o = peer_next(&ctl);
                                                if (o) {
                                                        done = 1;
                                                        json_object_put(o);
                                                }
                                                continue;
                                        }
                                        struct peer *p = &cl[evs[e].data.u32];
                                        peer_fill(p);
                                        requests += answer_all(p);
                                }
                        }
                        times[rep] = now_us() - t0;
                        test_proc_stat(daemon_.pid, &cpu1, &rss, &vctx);
                        cpus[rep] = cpu1 - cpu0;
                }
                uint64_t dt = percentile(times, ROUND_REPEAT, 0.5), cpu = percentile(cpus, ROUND_REPEAT, 0.5);

                /* The floor: the same callbacks, called in-process, with the same batching. */
                uint64_t f0 = now_us();
                for (int i = 0; i < n * SHRINKERS_PER_CLIENT; i++) {
                        uint64_t left = cb_count();
                        while (left > 0) {
                                uint64_t nr = left < 128 ? left : 128;
                                left -= cb_scan(nr);
                        }
                }
                uint64_t floor_us = now_us() - f0;
                printf("%8d %10llu %12.2f %14.0f %14llu %16llu %11.0fx%s\n", n, (unsigned long long) requests,
                       (double) dt / 1000, (double) requests * 1e6 / (double) dt, (unsigned long long) cpu,
                       (unsigned long long) floor_us,
                       (double) dt / (double) (floor_us ? floor_us : 1), done ? "" : " (timed out)");
                peer_close(&ctl);
                for (int i = 0; i < n; i++)
                        peer_close(&cl[i]);
                close(ep);
                free(cl);
        }
        printf("\n");
        test_daemon_stop(&daemon_);
}

/* ---- footprint ---- */

static void scenario_footprint(void) {
        const char *const args[] = { "--config", "/dev/null", "--quiet", NULL };
        if (daemon_up(args) < 0) {
                fprintf(stderr, "footprint: cannot start the daemon\n");
                return;
        }
        uint64_t cpu0, rss0, v0, cpu1, rss1, v1;
        printf("== footprint (default configuration) ==\n");
        test_proc_stat(daemon_.pid, &cpu0, &rss0, &v0);
        /* Idle: wait a minute without a word to the daemon. */
        struct pollfd none = { .fd = -1 };
        poll(&none, 0, 60000);
        test_proc_stat(daemon_.pid, &cpu1, &rss1, &v1);
        printf("idle 60 s:            RSS %llu KiB, CPU %llu ms, %llu voluntary wake-ups (%.1f per minute)\n",
               (unsigned long long) rss1, (unsigned long long) (cpu1 - cpu0), (unsigned long long) (v1 - v0),
               (double) (v1 - v0));

        enum { N = 1000 };
        static struct peer subs[N];
        int ok = 0;
        for (int i = 0; i < N; i++) {
                if (peer_connect(&subs[i], daemon_.socket) < 0)
                        break;
                send_all(subs[i].fd, "{\"method\":\"io.pressured.Subscribe\",\"more\":true}");
                ok++;
        }
        for (int i = 0; i < ok; i++)
                json_object_put(peer_wait(&subs[i], 5000));
        test_proc_stat(daemon_.pid, &cpu0, &rss0, &v0);
        printf("with %d subscribers: RSS %llu KiB (%.1fx idle)\n", ok, (unsigned long long) rss0,
               (double) rss0 / (double) (rss1 ? rss1 : 1));
        for (int i = 0; i < ok; i++)
                peer_close(&subs[i]);
        test_daemon_stop(&daemon_);

        /* Headroom's idle cost: a watched cgroup with a 64 MiB limit and nothing in it (far from its
         * threshold), with headroom and, as the baseline in the same run, without. */
        struct pressure_gen g;
        char cwd[400], conf[128];
        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, 64u << 20) < 0) {
                fprintf(stderr, "footprint: cannot create the cgroup\n");
                return;
        }
        snprintf(conf, sizeof(conf), "/tmp/pressured-bench-%d.conf", (int) getpid());
        double per_min[2] = { 0, 0 };
        int done = 0;
        for (int headroom = 1; headroom >= 0; headroom--) {
                FILE *f = fopen(conf, "we");
                if (!f)
                        break;
                fprintf(f, "[pressured]\nheadroom=%s\ncgroup=%s\n", headroom ? "yes" : "no", g.cgroup);
                fclose(f);
                const char *const cargs[] = { "--config", conf, "--quiet", NULL };
                if (daemon_up(cargs) < 0) {
                        fprintf(stderr, "footprint: cannot start the daemon watching %s\n", g.cgroup);
                        break;
                }
                done++;
                test_proc_stat(daemon_.pid, &cpu0, &rss0, &v0);
                poll(&none, 0, 30000);
                test_proc_stat(daemon_.pid, &cpu1, &rss1, &v1);
                per_min[headroom] = (double) (v1 - v0) * 2;
                printf("idle 30 s, one %s cgroup watched (64 MiB limit, empty), headroom=%s: CPU %llu ms, %llu wake-ups "
                       "(%.1f per minute)\n",
                       g.mem_dir[0] && strcmp(g.mem_dir, g.v2_dir) != 0 ? "v1-memory" : "v2", headroom ? "yes" : "no",
                       (unsigned long long) (cpu1 - cpu0), (unsigned long long) (v1 - v0), per_min[headroom]);
                test_daemon_stop(&daemon_);
        }
        unlink(conf);
        pressure_gen_destroy(&g);
        if (done < 2)
                printf("(no ratio: a run with a watched cgroup did not start)\n\n");
        else if (per_min[0] == 0 && per_min[1] == 0)
                printf("ratio: wake-ups with headroom / without: 1.0x (none either way)\n\n");
        else
                printf("ratio: wake-ups with headroom / without: %.1fx\n\n", per_min[1] / (per_min[0] > 0 ? per_min[0] : 1));
}

/* The regulator's idle cost: 100 cgroups, each with one client holding a MEMCG_AWARE shrinker and
 * nothing allocating, for 30 s with the regulator on (the default) and, as the baseline in the same run,
 * off (regulate_budget=0). */
enum { IDLE_GROUPS = 100 };

static int start_idle_clients(const char *parent, const char *socket, pid_t *pids, int *fds) {
        int n = 0;
        for (int i = 0; i < IDLE_GROUPS; i++) {
                char dir[700], procs[760], me[32];
                snprintf(dir, sizeof(dir), "%s/g%d", parent, i);
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        break;
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        break;
                pid_t pid = fork();
                if (pid == 0) {
                        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
                        snprintf(me, sizeof(me), "%d", (int) getpid());
                        FILE *f = fopen(procs, "we");
                        if (!f || fputs(me, f) < 0 || fclose(f) != 0)
                                _exit(3);
                        dup2(p[1], STDOUT_FILENO);
                        execl("./shrinker-client", "shrinker-client", "--socket", socket, "--memcg", "--objects", "100",
                              (char *) NULL);
                        _exit(127);
                }
                close(p[1]);
                pids[n] = pid;
                fds[n++] = p[0];
        }
        /* Each says "ready ... pid=" once the daemon has its shrinker. */
        for (int i = 0; i < n; i++) {
                char buf[256];
                struct pollfd pf = { .fd = fds[i], .events = POLLIN };
                if (poll(&pf, 1, 10000) <= 0 || read(fds[i], buf, sizeof(buf)) <= 0)
                        return -1;
        }
        return n;
}

static void stop_idle_clients(const char *parent, pid_t *pids, int *fds, int n) {
        for (int i = 0; i < n; i++) {
                kill(pids[i], SIGTERM);
                waitpid(pids[i], NULL, 0);
                close(fds[i]);
        }
        for (int i = 0; i < IDLE_GROUPS; i++) {
                char dir[700];
                snprintf(dir, sizeof(dir), "%s/g%d", parent, i);
                (void) rmdir(dir);
        }
}

static void scenario_regulator_idle(void) {
        struct pressure_gen g;
        char cwd[400], conf[128];
        static pid_t pids[IDLE_GROUPS];
        static int fds[IDLE_GROUPS];
        double per_min[2] = { -1, -1 };

        printf("== the regulator's idle cost: %d cgroups, each with a client holding a MEMCG_AWARE shrinker ==\n",
               IDLE_GROUPS);
        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, 1u << 30) < 0) {
                fprintf(stderr, "footprint: cannot create the cgroup\n");
                return;
        }
        snprintf(conf, sizeof(conf), "/tmp/pressured-bench-%d.conf", (int) getpid());
        for (int on = 1; on >= 0; on--) {
                FILE *f = fopen(conf, "we");
                if (!f)
                        break;
                fprintf(f, "regulate_budget=%s\nmax_shrinkers_per_uid=1000\n", on ? "1ms" : "0");
                fclose(f);
                const char *const cargs[] = { "--config", conf, "--quiet", NULL };
                if (daemon_up(cargs) < 0)
                        break;
                int n = start_idle_clients(g.v2_dir, daemon_.socket, pids, fds);
                if (n == IDLE_GROUPS) {
                        uint64_t cpu0, rss0, v0, cpu1, rss1, v1;
                        struct pollfd none = { .fd = -1 };
                        test_proc_stat(daemon_.pid, &cpu0, &rss0, &v0);
                        poll(&none, 0, 30000);
                        test_proc_stat(daemon_.pid, &cpu1, &rss1, &v1);
                        per_min[on] = (double) (v1 - v0) * 2;
                        printf("idle 30 s, regulator %s: CPU %llu ms, %llu wake-ups (%.1f per minute)\n", on ? "on" : "off",
                               (unsigned long long) (cpu1 - cpu0), (unsigned long long) (v1 - v0), per_min[on]);
                } else
                        fprintf(stderr, "footprint: only %d of %d clients started\n", n < 0 ? 0 : n, IDLE_GROUPS);
                stop_idle_clients(g.v2_dir, pids, fds, n < 0 ? IDLE_GROUPS : n);
                test_daemon_stop(&daemon_);
        }
        unlink(conf);
        pressure_gen_destroy(&g);
        if (per_min[0] >= 0 && per_min[1] >= 0)
                printf("wake-ups per minute with the regulator on: %.0f, off: %.0f (%.1fx)\n\n", per_min[1], per_min[0],
                       per_min[1] / (per_min[0] > 0 ? per_min[0] : 1));
}

/* ---- latency ---- */

static void scenario_latency(void) {
        struct pressure_gen g;
        char cwd[400], path[700];
        enum { CYCLES = 10 };

        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, 16u << 20) < 0) {
                fprintf(stderr, "latency: cannot create the cgroup\n");
                return;
        }
        /* The baseline: our own trigger, same file, same threshold as the daemon's low level. */
        struct psi_trigger want = { PSI_SOME, 100000, 2000000 }, used;
        bool unpriv = false;
        snprintf(path, sizeof(path), "%s/memory.pressure", g.v2_dir);
        int tfd = psi_trigger_open(path, &want, &unpriv, &used);
        const char *const args[] = { "--config", "/dev/null", "--hold", "0", "--sample-interval", "100ms", "--quiet",
                                     NULL };
        if (tfd < 0 || daemon_up(args) < 0) {
                fprintf(stderr, "latency: cannot set up\n");
                pressure_gen_destroy(&g);
                return;
        }
        struct peer sub;
        char msg[512];
        snprintf(msg, sizeof(msg), "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"cgroup\",\"cgroup\":\"%s\"}]},\"more\":true}", g.cgroup);
        if (peer_connect(&sub, daemon_.socket) < 0 || send_all(sub.fd, msg) < 0) {
                pressure_gen_destroy(&g);
                return;
        }
        json_object_put(peer_wait(&sub, 5000));

        uint64_t added[CYCLES], wake[CYCLES];
        size_t n = 0, early = 0;
        for (int cycle = 0; cycle < CYCLES; cycle++) {
                pressure_gen_start(&g);
                /* Our trigger fires, then the daemon's event arrives. */
                uint64_t t_trigger = 0, t_event = 0, ts = 0;
                uint64_t end = now_us() + 30000000;
                while ((!t_trigger || !t_event) && now_us() < end) {
                        struct pollfd pf[2] = { { .fd = tfd, .events = POLLPRI }, { .fd = sub.fd, .events = POLLIN } };
                        if (poll(pf, 2, 1000) <= 0)
                                continue;
                        uint64_t t = now_us();
                        if ((pf[0].revents & POLLPRI) && !t_trigger)
                                t_trigger = t;
                        if (pf[1].revents & POLLIN) {
                                peer_fill(&sub);
                                struct json_object *o;
                                while ((o = peer_next(&sub))) {
                                        struct json_object *ev = jget(jget(o, "parameters"), "event");
                                        const char *lvl = json_object_get_string(jget(ev, "level"));
                                        if (ev && lvl && strcmp(lvl, "ok") != 0 && !t_event) {
                                                t_event = t;
                                                ts = (uint64_t) json_object_get_int64(jget(ev, "timestamp"));
                                        }
                                        json_object_put(o);
                                }
                        }
                }
                pressure_gen_stop(&g);
                if (t_trigger && t_event && t_event >= t_trigger) {
                        added[n] = t_event - t_trigger;
                        wake[n] = ts > t_trigger ? ts - t_trigger : 0;
                        n++;
                } else if (t_trigger && t_event)
                        early++;
                /* Wait for ok before the next cycle; drain our trigger. */
                end = now_us() + 30000000;
                bool back = false;
                while (!back && now_us() < end) {
                        struct pollfd pf[2] = { { .fd = tfd, .events = POLLPRI }, { .fd = sub.fd, .events = POLLIN } };
                        if (poll(pf, 2, 1000) <= 0)
                                continue;
                        if (pf[1].revents & POLLIN) {
                                peer_fill(&sub);
                                struct json_object *o;
                                while ((o = peer_next(&sub))) {
                                        const char *lvl = json_object_get_string(jget(jget(jget(o, "parameters"), "event"), "level"));
                                        if (lvl && strcmp(lvl, "ok") == 0)
                                                back = true;
                                        json_object_put(o);
                                }
                        }
                }
                /* Let the daemon go idle (it samples for a window after its last trigger), so that the
                 * next change reaches it through its trigger, as ours does, and not through sampling. */
                struct pollfd none = { .fd = -1 };
                poll(&none, 0, 4000);
                struct pollfd drain = { .fd = tfd, .events = POLLPRI };
                poll(&drain, 1, 0);
        }
        printf("== event latency: real pressure in a cgroup, %zu of %d cycles measured ==\n", n, CYCLES);
        if (early)
                printf("(%zu cycles where the event came before our trigger fired: the daemon was still sampling)\n", early);
        printf("baseline: the benchmark's own trigger on the same cgroup (%s %llu ms per %llu ms window)\n",
               psi_kind_to_string(used.kind), (unsigned long long) used.stall_usec / 1000,
               (unsigned long long) used.window_usec / 1000);
        uint64_t w50 = percentile(wake, n, 0.5), w99 = percentile(wake, n, 0.99);
        uint64_t a50 = percentile(added, n, 0.5), a99 = percentile(added, n, 0.99);
        printf("%-48s %10s %10s\n", "", "p50 (us)", "p99 (us)");
        printf("%-48s %10llu %10llu\n", "daemon handles the change after our POLLPRI", (unsigned long long) w50,
               (unsigned long long) w99);
        printf("%-48s %10llu %10llu\n", "subscriber has the event after our POLLPRI", (unsigned long long) a50,
               (unsigned long long) a99);
        printf("\n");
        peer_close(&sub);
        close(tfd);
        test_daemon_stop(&daemon_);
        pressure_gen_destroy(&g);
}

/* ---- flood: one connection's calls against another's ---- */

/* n GetStatus calls on one connection, one after the other: their round-trip times in *us. */
static int status_times(uint64_t *us, size_t n) {
        static const char get[] = "{\"method\":\"io.pressured.GetStatus\"}";
        int fd = test_connect(daemon_.socket);
        if (fd < 0)
                return fd;
        for (size_t i = 0; i < n; i++) {
                char *reply = NULL;
                uint64_t t0 = now_us();
                if (test_send_raw(fd, get, sizeof(get)) < 0 || test_recv_msg(fd, 30000, &reply) != 1) {
                        free(reply);
                        close(fd);
                        return -EIO;
                }
                us[i] = now_us() - t0;
                free(reply);
        }
        close(fd);
        return 0;
}

/* A connection that sends oneway calls as fast as the daemon takes them, for ever. */
static pid_t flooder(void) {
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        static const char call[] = "{\"method\":\"io.pressured.GetStatus\",\"oneway\":true}";
        char buf[64 * sizeof(call)];
        for (size_t i = 0; i < 64; i++)
                memcpy(buf + i * sizeof(call), call, sizeof(call));
        int fd = test_connect(daemon_.socket);
        while (fd >= 0 && test_send_raw(fd, buf, sizeof(buf)) == 0)
                ;
        _exit(0);
}

/* Another client's GetStatus while one connection floods oneway calls, against the same calls on a
 * quiet daemon. */
static void scenario_flood(void) {
        enum { N = 300 };
        uint64_t quiet[N], flooded[N];
        const char *const args[] = { "--config", "/dev/null", NULL };
        if (daemon_up(args) < 0) {
                fprintf(stderr, "flood: cannot start the daemon\n");
                return;
        }
        int r = status_times(quiet, N);
        pid_t f = r >= 0 ? flooder() : -1;
        if (f > 0) {
                (void) poll(NULL, 0, 500); /* the flood sets in */
                r = status_times(flooded, N);
                kill(f, SIGKILL);
                waitpid(f, NULL, 0);
        }
        test_daemon_stop(&daemon_);
        if (r < 0) {
                fprintf(stderr, "flood: GetStatus failed (%d)\n", r);
                return;
        }
        printf("== flood: GetStatus on one connection while another sends oneway calls non-stop (%d calls) ==\n", N);
        uint64_t q50 = percentile(quiet, N, 0.5), q99 = percentile(quiet, N, 0.99);
        uint64_t f50 = percentile(flooded, N, 0.5), f99 = percentile(flooded, N, 0.99);
        printf("%-30s %10s %10s\n", "", "p50 us", "p99 us");
        printf("%-30s %10llu %10llu\n", "quiet daemon", (unsigned long long) q50, (unsigned long long) q99);
        printf("%-30s %10llu %10llu\n", "beside a oneway flood", (unsigned long long) f50, (unsigned long long) f99);
        printf("ratio: p50 %.1fx, p99 %.1fx (goal: p99 under 10 ms)\n\n", q50 ? (double) f50 / (double) q50 : 0,
               q99 ? (double) f99 / (double) q99 : 0);
}

/* ---- deep: registrations from a delegated subtree a thousand groups deep ---- */

/* A connect/Serve/close loop as nobody (a memcg-aware shrinker) from a leaf DEPTH groups below g, and
 * root's GetStatus meanwhile, against the quiet daemon; and how many cgroups the daemon watches then. */
static void scenario_deep(void) {
        enum { N = 200, DEPTH = 1000 };
        uint64_t quiet[N], flooded[N];
        static char leaf[2 * DEPTH + 600], procs[2 * DEPTH + 700];
        struct pressure_gen g;
        char cwd[400];
        const char *const args[] = { "--config", "/dev/null", NULL };

        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&g, cwd, 1ULL << 30) < 0) {
                fprintf(stderr, "deep: cannot make the cgroups\n");
                return;
        }
        size_t len = (size_t) snprintf(leaf, sizeof(leaf), "%s", g.v2_dir);
        int made = 0;
        for (; made < DEPTH; made++) {
                len += (size_t) snprintf(leaf + len, sizeof(leaf) - len, "/a");
                if (mkdir(leaf, 0755) < 0)
                        break;
        }
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
        int r = made == DEPTH && daemon_up(args) >= 0 ? 0 : -EIO;
        if (r == 0)
                (void) chmod(daemon_.dir, 0755);
        if (r == 0)
                r = status_times(quiet, N);
        pid_t spam = -1;
        if (r == 0 && (spam = fork()) == 0) {
                const struct passwd *pw = getpwnam("nobody");
                FILE *f = fopen(procs, "we");
                if (!f || fprintf(f, "%d\n", (int) getpid()) < 0 || fclose(f) != 0 || !pw || setgroups(0, NULL) < 0 ||
                    setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
                        _exit(2);
                /* Not left looping if the benchmark dies (set after setuid(), which clears it). */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                        _exit(2);
                test_serve_loop(daemon_.socket);
        }
        size_t watched = 0;
        if (spam > 0) {
                (void) poll(NULL, 0, 1000); /* the loop sets in */
                r = status_times(flooded, N);
                char *reply = NULL;
                int fd = test_connect(daemon_.socket);
                static const char get[] = "{\"method\":\"io.pressured.GetStatus\"}";
                if (fd >= 0 && test_send_raw(fd, get, sizeof(get)) >= 0 && test_recv_msg(fd, 30000, &reply) == 1)
                        for (const char *q = reply; (q = strstr(q, "\"type\":\"cgroup\"")); q++)
                                watched++;
                free(reply);
                if (fd >= 0)
                        close(fd);
                kill(spam, SIGKILL);
                waitpid(spam, NULL, 0);
        }
        test_daemon_stop(&daemon_);
        for (int i = made; i > 0; i--) {
                (void) rmdir(leaf);
                leaf[strlen(leaf) - 2] = 0;
        }
        pressure_gen_destroy(&g);
        if (r < 0) {
                fprintf(stderr, "deep: failed (%d)\n", r);
                return;
        }
        printf("== deep: root's GetStatus while nobody loops connect/Serve/close from a leaf %d groups deep (%d calls) ==\n",
               DEPTH, N);
        uint64_t q50 = percentile(quiet, N, 0.5), q99 = percentile(quiet, N, 0.99);
        uint64_t f50 = percentile(flooded, N, 0.5), f99 = percentile(flooded, N, 0.99);
        printf("%-30s %10s %10s\n", "", "p50 us", "p99 us");
        printf("%-30s %10llu %10llu\n", "quiet daemon", (unsigned long long) q50, (unsigned long long) q99);
        printf("%-30s %10llu %10llu\n", "beside the Serve loop", (unsigned long long) f50, (unsigned long long) f99);
        printf("ratio: p50 %.1fx, p99 %.1fx; cgroups watched during the loop: %zu\n\n",
               q50 ? (double) f50 / (double) q50 : 0, q99 ? (double) f99 / (double) q99 : 0, watched);
}

/* ---- fairness ---- */

/* shrinker-client in the generator's group, stdout on a pipe; SHRINKER_CLIENT_BIN or next to us. `extra`:
 * what makes it hostile (NULL: honest). */
static pid_t fair_client(const struct pressure_gen *g, const char *const *extra, int *ret_fd) {
        const char *bin = getenv("SHRINKER_CLIENT_BIN");
        const char *argv[16] = { bin ? bin : "./shrinker-client", "--socket", daemon_.socket, "--memcg", "--objects",
                                 "2000", "--refill" }; /* 2 MB, under the group's 16 MiB limit, never empty */
        int n = 7, p[2];
        for (size_t i = 0; extra && extra[i] && n < 15; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = pressure_gen_spawn(g, argv, p[1]);
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}

/* What the honest client's pipe shows within ms: counts, scans and objects freed. The other clients'
 * pipes are read too, so that none blocks on a full one. */
struct fair_tally {
        unsigned long counts, scans, freed;
};
static struct fair_tally fair_count(struct test_lines *l, struct test_lines *others, size_t n_others, uint64_t ms) {
        char line[512];
        struct fair_tally t = {};
        for (uint64_t end = test_now_ms() + ms; test_now_ms() < end;) {
                for (size_t i = 0; i < n_others; i++)
                        while (test_lines_next(&others[i], 0, line, sizeof(line)) == 0)
                                ;
                if (test_lines_next(l, 100, line, sizeof(line)) != 0)
                        continue;
                t.counts += strncmp(line, "count ", 6) == 0;
                if (strncmp(line, "scan ", 5) == 0) {
                        const char *f = strstr(line, " freed=");
                        t.scans++;
                        t.freed += f ? strtoul(f + 7, NULL, 10) : 0;
                }
        }
        return t;
}

enum fair_company { FAIR_ALONE, FAIR_PEERS, FAIR_HOSTILE };

/* One phase on a fresh daemon and a fresh group under the generator's pressure: the honest client alone,
 * beside three honest clients of its size, or beside three hostile ones of its size (one answering each
 * scan just before its 1 s deadline, one stopped, one claiming a 1 TiB cache and freeing nothing) and a
 * Serve loop. The peers are the control: they bring the same memory into the group as the hostile
 * clients, so that what differs between the two is only how the neighbours behave. */
static int fair_phase(enum fair_company company, uint64_t window_ms, struct fair_tally *ret) {
        struct pressure_gen g;
        char cwd[400], line[512];
        const char *const args[] = { "--config", "/dev/null", NULL };
        static const char *const edge[] = { "--sleep-in-scan", "950", NULL }, *const liar[] = { "--lie", NULL };
        /* the neighbours' extra arguments; the third hostile one is honest but stopped */
        const char *const *kinds[3] = { company == FAIR_HOSTILE ? edge : NULL, company == FAIR_HOSTILE ? liar : NULL,
                                        NULL };
        struct test_lines lines[4];
        pid_t pids[4], spam = -1;
        size_t n = company == FAIR_ALONE ? 1 : 4;
        int r = 0;

        if (!getcwd(cwd, sizeof(cwd)) || daemon_up(args) < 0)
                return -EIO;
        if (pressure_gen_create(&g, cwd, 16ULL << 20) < 0) {
                test_daemon_stop(&daemon_);
                return -EIO;
        }
        for (size_t i = 0; i < n; i++) {
                int fd = -1;
                pids[i] = fair_client(&g, i == 0 ? NULL : kinds[i - 1], &fd);
                lines[i] = (struct test_lines){ .fd = fd };
                if (pids[i] < 0 || test_lines_next(&lines[i], 10000, line, sizeof(line)) < 0 ||
                    strncmp(line, "ready", 5) != 0)
                        r = -EIO;
        }
        if (r == 0 && company == FAIR_HOSTILE) {
                kill(pids[3], SIGSTOP);
                spam = test_serve_flood(daemon_.socket);
        }
        if (r == 0) {
                (void) pressure_gen_start(&g);
                (void) fair_count(&lines[0], lines + 1, n - 1, 3000); /* the pressure sets in */
                *ret = fair_count(&lines[0], lines + 1, n - 1, window_ms);
                pressure_gen_stop(&g);
        }
        if (spam > 0) {
                kill(spam, SIGKILL);
                waitpid(spam, NULL, 0);
        }
        for (size_t i = 0; i < n; i++) {
                if (pids[i] <= 0)
                        continue;
                kill(pids[i], SIGCONT);
                kill(pids[i], SIGTERM);
                waitpid(pids[i], NULL, 0);
                close(lines[i].fd);
        }
        pressure_gen_destroy(&g);
        test_daemon_stop(&daemon_);
        return r;
}

/* An honest shrinker's requests under real pressure in its cgroup: alone, beside honest peers, beside
 * hostile clients. Each phase on its own daemon and group. */
static void scenario_fairness(void) {
        enum { WINDOW_MS = 20000 };
        static const char *const names[] = { "honest shrinker alone", "beside three honest peers",
                                              "beside edge, stopped, liar and spammer" };
        struct fair_tally t[3] = {};

        printf("== fairness: an honest shrinker's requests under real pressure, %d s windows ==\n", WINDOW_MS / 1000);
        for (int c = FAIR_ALONE; c <= FAIR_HOSTILE; c++)
                if (fair_phase((enum fair_company) c, WINDOW_MS, &t[c]) < 0) {
                        fprintf(stderr, "fairness: cannot set up\n");
                        return;
                }
        printf("%-44s %10s %10s %12s\n", "", "counts/s", "scans/s", "freed/s");
        for (int c = FAIR_ALONE; c <= FAIR_HOSTILE; c++)
                printf("%-44s %10.1f %10.1f %12.1f\n", names[c], (double) t[c].counts * 1000 / WINDOW_MS,
                       (double) t[c].scans * 1000 / WINDOW_MS, (double) t[c].freed * 1000 / WINDOW_MS);
        unsigned long a = t[FAIR_ALONE].counts + t[FAIR_ALONE].scans, p = t[FAIR_PEERS].counts + t[FAIR_PEERS].scans,
                      h = t[FAIR_HOSTILE].counts + t[FAIR_HOSTILE].scans;
        printf("requests beside hostile clients: %.2fx those beside peers, %.2fx those alone (goal: within 10%%)\n",
               p ? (double) h / (double) p : 0, a ? (double) h / (double) a : 0);
        printf("objects freed beside hostile clients: %.2fx those beside peers\n\n",
               t[FAIR_PEERS].freed ? (double) t[FAIR_HOSTILE].freed / (double) t[FAIR_PEERS].freed : 0);
}

int main(int argc, char *argv[]) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        signal(SIGPIPE, SIG_IGN);
        if (geteuid() != 0) {
                fprintf(stderr, "pressured-bench: run as root (cgroups, PSI triggers on cgroup files)\n");
                return 2;
        }
        bool all = argc < 2;
        for (int i = 1; i <= argc; i++) {
                const char *s = i < argc ? argv[i] : NULL;
                if (!all && !s)
                        break;
                if (all || strcmp(s, "latency") == 0)
                        scenario_latency();
                if (all || strcmp(s, "fanout") == 0)
                        scenario_fanout();
                if (all || strcmp(s, "rounds") == 0)
                        scenario_rounds();
                if (all || strcmp(s, "footprint") == 0) {
                        scenario_footprint();
                        scenario_regulator_idle();
                }
                if (all || strcmp(s, "fairness") == 0)
                        scenario_fairness();
                if (all || strcmp(s, "flood") == 0)
                        scenario_flood();
                if (all || strcmp(s, "deep") == 0)
                        scenario_deep();
                if (all)
                        break;
        }
        return 0;
}
