/* SPDX-License-Identifier: MIT */
/* pressure-adapt: a shrinker for a cache that never linked libpressure, registered on its behalf. For
 * Redis: count is what Redis uses above a floor; a scan lowers maxmemory by what is asked, so that Redis
 * evicts by its own policy, then MEMORY PURGE gives the pages back; once nothing has been asked for a
 * while, the cap is raised again step by step to what Redis had. Redis's own setting is restored when the
 * adapter stops. The shrinker is registered for Redis's pid (Serve's for_pid): the daemon places it in
 * Redis's cgroup and measures Redis's memory, not the adapter's. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "pressure-private.h"
#include "resp.h"
#include "time-util.h"

#define UNIT (64u * 1024u) /* bytes per object: Redis frees in keys, we count in 64 KiB */
#define EXIT_USAGE 2

struct adapter {
        const char *address;
        char *password, *user;
        uint64_t floor, ceiling; /* ceiling 0: Redis's own maxmemory when we started */
        uint64_t quiet_usec, regrow_usec;
        int verbose;

        struct resp_conn conn;
        bool connected;
        pid_t server_pid;
        uint64_t original; /* Redis's maxmemory before us (0: none) */
        bool have_original;
        uint64_t cap;       /* what we set; 0: nothing of ours in force */
        uint64_t last_scan_usec;
        uint64_t claimed, measured; /* bytes: what Redis said it freed, how far its RSS fell */
};

static void say(const struct adapter *a, int verbose, const char *fmt, ...) {
        if (verbose > a->verbose)
                return;
        va_list ap;
        va_start(ap, fmt);
        fputs("pressure-adapt: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

/* One command; the reply in *ret (resp_reply_done() it). An error reply is -EIO, with its text said. */
static int command(struct adapter *a, struct resp_reply *ret, const char *const *argv) {
        struct resp_reply r = {};
        if (!a->connected)
                return -ENOTCONN;
        int k = resp_command(&a->conn, &r, argv);
        if (k < 0) {
                a->connected = false;
                say(a, 0, "lost %s (%s) during %s", a->address, strerror(-k), argv[0]);
                return k;
        }
        if (r.type == RESP_ERROR) {
                /* The command's first word only: AUTH's arguments are secrets. */
                say(a, 0, "%s refused %s: %s", a->address, argv[0], r.str);
                resp_reply_done(&r);
                return -EIO;
        }
        *ret = r;
        return 0;
}

static int config_get(struct adapter *a, const char *key, char *buf, size_t size) {
        struct resp_reply r = {};
        int k = command(a, &r, (const char *const[]){ "CONFIG", "GET", key, NULL });
        if (k < 0)
                return k;
        k = r.type == RESP_ARRAY && r.n_elements == 2 && r.elements[1].type == RESP_BULK && r.elements[1].str ? 0 : -EPROTO;
        if (k == 0)
                snprintf(buf, size, "%s", r.elements[1].str);
        resp_reply_done(&r);
        return k;
}

static int set_maxmemory(struct adapter *a, uint64_t bytes) {
        char v[32];
        struct resp_reply r = {};
        snprintf(v, sizeof(v), "%" PRIu64, bytes);
        int k = command(a, &r, (const char *const[]){ "CONFIG", "SET", "maxmemory", v, NULL });
        resp_reply_done(&r);
        return k;
}

static int info_memory(struct adapter *a, unsigned long long *used, unsigned long long *rss) {
        struct resp_reply r = {};
        int k = command(a, &r, (const char *const[]){ "INFO", "memory", NULL });
        if (k < 0)
                return k;
        k = r.type == RESP_BULK && r.str ? 0 : -EPROTO;
        if (k == 0)
                k = resp_info_u64(r.str, "used_memory", used);
        if (k == 0 && rss)
                k = resp_info_u64(r.str, "used_memory_rss", rss);
        resp_reply_done(&r);
        return k < 0 ? -EPROTO : 0;
}

/* Connect, authenticate and learn what Redis is set to. -EPERM: it cannot be adapted (said why). */
static int server_reach(struct adapter *a) {
        char policy[64], max[32];
        struct resp_reply r = {};
        int k = resp_connect(a->address, 700, &a->conn); /* per command: a callback has 1 s */
        if (k < 0)
                return k;
        a->connected = true;
        if (a->password) {
                const char *const with_user[] = { "AUTH", a->user, a->password, NULL };
                const char *const plain[] = { "AUTH", a->password, NULL };
                k = command(a, &r, a->user ? with_user : plain);
                resp_reply_done(&r);
                if (k == -EIO) {
                        resp_close(&a->conn);
                        a->connected = false;
                        return -EACCES;
                }
                if (k < 0)
                        return k;
        }
        k = config_get(a, "maxmemory-policy", policy, sizeof(policy));
        /* Only a policy that may evict any key: under noeviction a lower cap makes writes fail, and under
         * volatile-* it does as soon as the keys with a TTL are gone. */
        if (k >= 0 && strncmp(policy, "allkeys-", 8) != 0) {
                say(a, 0, "%s has maxmemory-policy %s: a lower maxmemory would make its writes fail where it "
                          "has nothing it may evict. Set an allkeys-* policy to adapt it.", a->address, policy);
                return -EPERM;
        }
        if (k >= 0)
                k = config_get(a, "maxmemory", max, sizeof(max));
        if (k < 0)
                return k;
        uint64_t now_max = strtoull(max, NULL, 10);
        k = command(a, &r, (const char *const[]){ "INFO", "server", NULL });
        unsigned long long pid = 0;
        if (k >= 0 && (r.type != RESP_BULK || !r.str || resp_info_u64(r.str, "process_id", &pid) < 0 || pid == 0 ||
                       pid > INT_MAX))
                k = -EPROTO;
        resp_reply_done(&r);
        if (k < 0)
                return k;
        /* A server we see for the first time, or again after a restart (its own setting again): what it
         * has now is its own. The same server after a lost connection still has our cap. */
        if (!a->have_original || (pid_t) pid != a->server_pid) {
                a->original = now_max;
                a->have_original = true;
                a->cap = 0;
        }
        a->server_pid = (pid_t) pid;
        say(a, 1, "%s: pid %d, maxmemory %" PRIu64 " (its own %" PRIu64 "), policy %s", a->address, a->server_pid,
            now_max, a->original, policy);
        return 0;
}

/* Redis's own setting back, if ours is in force. */
static void server_restore(struct adapter *a) {
        if (!a->connected || a->cap == 0)
                return;
        if (set_maxmemory(a, a->original) >= 0) {
                say(a, 1, "%s: maxmemory %" PRIu64 " again, its own", a->address, a->original);
                a->cap = 0;
        }
}

static uint64_t ceiling_of(const struct adapter *a) {
        return a->ceiling > 0 ? a->ceiling : a->original; /* 0: no limit */
}

static uint64_t count_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct adapter *a = userdata;
        unsigned long long used;
        (void) s;
        if (info_memory(a, &used, NULL) < 0)
                return 0; /* cannot tell now: skip me */
        if (used <= a->floor)
                return PRESSURE_SHRINK_EMPTY;
        uint64_t n = (used - a->floor) / UNIT;
        sc->nr_bytes = n * UNIT;
        return n;
}

static uint64_t scan_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct adapter *a = userdata;
        unsigned long long used, rss, used_after, rss_after;
        (void) s;
        if (info_memory(a, &used, &rss) < 0)
                return PRESSURE_SHRINK_STOP;
        uint64_t ask = sc->nr_to_scan > UINT64_MAX / UNIT ? UINT64_MAX : sc->nr_to_scan * UNIT;
        uint64_t target = used > a->floor + ask ? used - ask : a->floor;
        if (a->cap > 0 && a->cap < target)
                target = a->cap; /* never up in a scan */
        if (target >= used)
                return 0;
        if (set_maxmemory(a, target) < 0)
                return PRESSURE_SHRINK_STOP;
        a->cap = target;
        a->last_scan_usec = clock_now_usec(CLOCK_MONOTONIC);
        /* Redis evicted down to the new cap as it took it; the pages go back to the kernel with a purge
         * (jemalloc keeps them otherwise). */
        struct resp_reply r = {};
        if (command(a, &r, (const char *const[]){ "MEMORY", "PURGE", NULL }) >= 0)
                resp_reply_done(&r);
        if (info_memory(a, &used_after, &rss_after) < 0)
                return PRESSURE_SHRINK_STOP;
        uint64_t freed = used > used_after ? used - used_after : 0;
        uint64_t fell = rss > rss_after ? rss - rss_after : 0;
        a->claimed += freed;
        a->measured += fell;
        say(a, 1, "%s: asked %" PRIu64 " bytes, maxmemory %" PRIu64 ": used_memory fell %" PRIu64 ", RSS %" PRIu64
                  " (in all %" PRIu64 " claimed, %" PRIu64 " measured)",
            a->address, ask, target, freed, fell, a->claimed, a->measured);
        sc->nr_bytes = freed;
        return (freed + UNIT - 1) / UNIT;
}

/* Quiet for a while: raise the cap by a tenth of the room to the ceiling per step, and give Redis its
 * own setting back once it is reached. */
static void regrow(struct adapter *a) {
        if (a->cap == 0 || !a->connected || clock_now_usec(CLOCK_MONOTONIC) - a->last_scan_usec < a->quiet_usec)
                return;
        uint64_t ceiling = ceiling_of(a);
        unsigned long long used;
        if (info_memory(a, &used, NULL) < 0)
                return;
        uint64_t step = ceiling > a->cap ? (ceiling - a->cap) / 10 : 0;
        if (ceiling == 0) /* no limit of its own: a tenth of what it uses, at least 1 MiB */
                step = used / 10 > (1u << 20) ? used / 10 : (1u << 20);
        uint64_t next = a->cap + step;
        if (ceiling > 0 && (next >= ceiling || step < UNIT)) {
                server_restore(a);
                return;
        }
        if (ceiling == 0 && next > used + used / 2) { /* well above what it uses: lift the cap */
                server_restore(a);
                return;
        }
        if (set_maxmemory(a, next) >= 0) {
                a->cap = next;
                say(a, 1, "%s: quiet, maxmemory raised to %" PRIu64, a->address, next);
        }
}

static char *read_secret(const char *path) {
        char buf[1024];
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *line = fgets(buf, sizeof(buf), f);
        fclose(f);
        if (!line)
                return NULL;
        buf[strcspn(buf, "\r\n")] = 0;
        return strdup(buf);
}

static int parse_bytes(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || s[0] == '-')
                return -EINVAL;
        unsigned long long m = 1;
        if (*end == 'K' || *end == 'k')
                m = 1024ull;
        else if (*end == 'M')
                m = 1024ull * 1024;
        else if (*end == 'G')
                m = 1024ull * 1024 * 1024;
        else if (*end != 0)
                return -EINVAL;
        if (m > 1 && end[1] != 0)
                return -EINVAL;
        if (v > UINT64_MAX / m)
                return -ERANGE;
        *ret = v * m;
        return 0;
}

static void usage(FILE *f) {
        fputs("Usage: pressure-adapt redis [OPTIONS] ADDRESS\n"
              "\n"
              "Registers a shrinker with pressured on behalf of the Redis server at ADDRESS (a Unix socket\n"
              "path, unix:PATH, or HOST:PORT): under memory pressure its maxmemory is lowered by what is\n"
              "asked, Redis evicts by its own policy, and MEMORY PURGE gives the pages back.\n"
              "\n"
              "  -h --help                  Show this help\n"
              "     --password-file=FILE    AUTH with the first line of FILE (never on the command line)\n"
              "     --user=NAME             ...as this ACL user\n"
              "     --floor=BYTES           Never lower maxmemory below this (default 16M)\n"
              "     --ceiling=BYTES         Raise it back no higher (default: Redis's own maxmemory)\n"
              "     --quiet=SECONDS         Raise it back after this long without a scan (default 60)\n"
              "     --socket=PATH           pressured's socket (default: the system's)\n"
              "  -v --verbose               Say what is done (twice: more)\n",
              f);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "password-file", required_argument, NULL, 'P' },
                { "user", required_argument, NULL, 'U' },
                { "floor", required_argument, NULL, 'f' },
                { "ceiling", required_argument, NULL, 'c' },
                { "quiet", required_argument, NULL, 'q' },
                { "socket", required_argument, NULL, 's' },
                { "verbose", no_argument, NULL, 'v' },
                {},
        };
        struct adapter a = { .floor = 16u << 20, .quiet_usec = 60 * 1000000ull, .conn = { .fd = -1 } };
        const char *socket_path = NULL, *password_file = NULL;
        int c;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 0;
                case 'P':
                        password_file = optarg;
                        break;
                case 'U':
                        a.user = optarg;
                        break;
                case 'f':
                case 'c':
                        if (parse_bytes(optarg, c == 'f' ? &a.floor : &a.ceiling) < 0) {
                                fprintf(stderr, "pressure-adapt: --%s takes bytes (with K, M or G): %s\n",
                                        c == 'f' ? "floor" : "ceiling", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'q': {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || v == 0 || v > 86400) {
                                fprintf(stderr, "pressure-adapt: --quiet takes 1..86400 seconds: %s\n", optarg);
                                return EXIT_USAGE;
                        }
                        a.quiet_usec = v * 1000000ull;
                        break;
                }
                case 's':
                        socket_path = optarg;
                        break;
                case 'v':
                        a.verbose++;
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        if (argc - optind != 2 || strcmp(argv[optind], "redis") != 0) {
                usage(stderr);
                return EXIT_USAGE;
        }
        a.address = argv[optind + 1];
        if (a.user && !password_file) {
                fprintf(stderr, "pressure-adapt: --user needs --password-file\n");
                return EXIT_USAGE;
        }
        if (password_file && !(a.password = read_secret(password_file))) {
                fprintf(stderr, "pressure-adapt: cannot read a password from %s: %s\n", password_file, strerror(errno ? errno : EINVAL));
                return 1;
        }

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        signal(SIGPIPE, SIG_IGN);

        int r = server_reach(&a);
        if (r == -EPERM || r == -EACCES) {
                if (r == -EACCES)
                        fprintf(stderr, "pressure-adapt: %s refused the password from %s\n", a.address, password_file);
                return 1;
        }
        if (r < 0) {
                fprintf(stderr, "pressure-adapt: cannot reach Redis at %s: %s\n", a.address, strerror(-r));
                return 1;
        }

        struct pressure_client *client;
        struct pressure_shrinker *shrinker;
        char name[64];
        r = pressure_client_new(socket_path, &client);
        if (r < 0) {
                fprintf(stderr, "pressure-adapt: cannot use pressured's socket: %s\n", strerror(-r));
                return 1;
        }
        (void) pressure_client_set_release(client, NULL, NULL); /* nothing of ours to give back */
        (void) pressure_client_set_serve_for(client, a.server_pid);
        snprintf(name, sizeof(name), "redis:%.56s", a.address);
        /* MEMCG_AWARE: all of Redis's memory is in its cgroup, so it is asked when that group (or a limited
         * one above it) is short, not only when the whole machine is. */
        r = pressure_shrinker_alloc(client, PRESSURE_SHRINKER_MEMCG_AWARE, name, &shrinker);
        if (r >= 0)
                r = pressure_shrinker_set_batch(shrinker, 16); /* 1 MiB per scan call */
        if (r >= 0)
                r = pressure_shrinker_set_callbacks(shrinker, count_objects, scan_objects);
        if (r >= 0)
                r = pressure_shrinker_set_userdata(shrinker, &a, NULL);
        if (r >= 0)
                r = pressure_shrinker_register(shrinker);
        if (r < 0) {
                fprintf(stderr, "pressure-adapt: cannot register the shrinker: %s\n", strerror(-r));
                return 1;
        }
        say(&a, 0, "serving %s (pid %d) as shrinker \"%s\"", a.address, a.server_pid, name);

        /* One loop: pressured's requests, the signals, and a tick for the regrowth and reconnecting. */
        int tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = { .it_interval = { .tv_sec = 1 }, .it_value = { .tv_sec = 1 } };
        timerfd_settime(tick, 0, &its, NULL);
        unsigned backoff = 1, wait = 0;
        int status = 0;
        for (;;) {
                struct pollfd p[3] = {
                        { .fd = pressure_client_get_fd(client), .events = POLLIN },
                        { .fd = sig_fd, .events = POLLIN },
                        { .fd = tick, .events = POLLIN },
                };
                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                if (p[0].revents)
                        (void) pressure_client_dispatch(client);
                if (p[2].revents) {
                        uint64_t n;
                        (void) !read(tick, &n, sizeof(n));
                        if (a.connected) {
                                /* A server that went away is noticed here, not at the next request. */
                                struct resp_reply pong = {};
                                if (command(&a, &pong, (const char *const[]){ "PING", NULL }) >= 0)
                                        regrow(&a);
                                resp_reply_done(&pong);
                        }
                        else if (wait > 0)
                                wait--;
                        else {
                                pid_t before = a.server_pid;
                                r = server_reach(&a);
                                if (r == -EPERM || r == -EACCES) {
                                        status = 1;
                                        break;
                                }
                                if (r < 0) {
                                        backoff = backoff < 32 ? backoff * 2 : 32;
                                        wait = backoff;
                                        continue;
                                }
                                backoff = 1;
                                if (a.server_pid != before) {
                                        /* A new server: the daemon ended the old one's registration. */
                                        say(&a, 0, "%s is pid %d now; serving it", a.address, a.server_pid);
                                        (void) pressure_client_set_serve_for(client, a.server_pid);
                                }
                        }
                }
        }
        pressure_shrinker_free(shrinker);
        pressure_client_unref(client);
        if (!a.connected && a.cap > 0 && server_reach(&a) < 0)
                say(&a, 0, "cannot reach %s to give it its maxmemory %" PRIu64 " back", a.address, a.original);
        server_restore(&a);
        resp_close(&a.conn);
        free(a.password);
        return status;
}
