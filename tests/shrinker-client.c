/* SPDX-License-Identifier: MIT */
/* A real client for the tests: a cache of malloc()ed objects behind shrinkers registered with
 * libpressure. It prints one line per event on stdout so that a test can follow it:
 *   ready <id> [<id>...]
 *   count <id> node=<n> cgroup=<path> -> <objects>
 *   scan <id> node=<n> cgroup=<path> nr=<n> freed=<n> left=<n>
 *
 * Usage: shrinker-client --socket PATH [--objects N] [--size BYTES] [--shrinkers K] [--numa] [--memcg]
 *                        [--sleep-in-scan MS] [--die-in-scan] [--thread] [--refill] [--lie] [--value V]
 *
 * --refill: every object a scan frees is allocated again after it (a cache in use, never empty).
 * --endless: counts claim 2^62 objects of no stated size; every scan claims to have freed all it was asked
 *        to, and frees nothing: an explicit Shrink of "everything" would never end.
 * --lie: counts claim a cache of 1 TiB (in the same number of objects); every scan claims to have freed
 *        all it was asked to, and frees nothing.
 * --grow MS: one more object every MS milliseconds, for ever: a cache that grows until its shrinker is
 *        asked, or the OOM killer comes (with --shrinkers 0 nobody can ask).
 * --max N: with --grow, a cache in use whose room is N objects: it grows back towards N after each scan,
 *        and prints "full <n>" each time it gets there again.
 * --value V: every count says one more MiB of the cache would save V (ShrinkAnswer.value).
 * --limits: the shrinkers take growth limits; the cache keeps within the last one (trimmed when it is
 *        told a lower one, grown only up to it), and prints "limit <id> bytes=<n> left=<n>" for each, and
 *        with --grow "capped <n>" once each time its growth stops at a limit.
 */

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pressure-private.h"

struct cache {
        void **objects;
        size_t n, allocated;
        size_t size;
};

static struct cache cache;

/* One more object, written (resident), or -ENOMEM. */
static int cache_add(void) {
        if (cache.n == cache.allocated) {
                size_t a = cache.allocated ? cache.allocated * 2 : 64;
                void **p = realloc(cache.objects, a * sizeof(void *));
                if (!p)
                        return -ENOMEM;
                cache.objects = p;
                cache.allocated = a;
        }
        void *o = malloc(cache.size);
        if (!o)
                return -ENOMEM;
        memset(o, 0x11, cache.size);
        cache.objects[cache.n++] = o;
        return 0;
}

/* The growth limit last told (0: none): the cache grows only up to it. */
static uint64_t limit_bytes;

static bool within_limit(size_t n) {
        return limit_bytes == 0 || (uint64_t) n * cache.size <= limit_bytes;
}

static void on_limit(struct pressure_shrinker *s, uint64_t bytes, void *userdata) {
        (void) userdata;
        limit_bytes = bytes;
        while (cache.n > 0 && !within_limit(cache.n))
                free(cache.objects[--cache.n]);
        printf("limit %llu bytes=%llu left=%zu\n", (unsigned long long) pressure_shrinker_get_id(s),
               (unsigned long long) bytes, cache.n);
        fflush(stdout);
}

static volatile sig_atomic_t sleep_ms;
static int die_in_scan, refill, lie, endless;
static double value;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* SIGUSR1: stop being slow (a quarantined client that recovers). */
static void on_usr1(int sig) {
        (void) sig;
        sleep_ms = 0;
}

static uint64_t count_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        (void) userdata;
        uint64_t n = endless ? 1ULL << 62 : cache.n;
        sc->nr_bytes = lie ? 1ULL << 40 : endless ? 0 : n * cache.size;
        sc->value = value;
        printf("count %llu node=%d cgroup=%s -> %llu\n", (unsigned long long) pressure_shrinker_get_id(s), sc->node,
               sc->cgroup, (unsigned long long) n);
        fflush(stdout);
        return n == 0 ? PRESSURE_SHRINK_EMPTY : n;
}

static uint64_t scan_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        (void) userdata;
        if (die_in_scan) {
                printf("dying\n");
                fflush(stdout);
                _exit(9);
        }
        if (sleep_ms > 0)
                usleep((useconds_t) sleep_ms * 1000);
        if (endless) {
                sc->nr_bytes = 0;
                printf("scan %llu nr=%llu (endless)\n", (unsigned long long) pressure_shrinker_get_id(s),
                       (unsigned long long) sc->nr_to_scan);
                fflush(stdout);
                return sc->nr_to_scan;
        }
        if (lie) {
                sc->nr_bytes = sc->nr_to_scan * ((1ULL << 40) / (cache.n ? cache.n : 1));
                printf("scan %llu node=%d cgroup=%s nr=%llu freed=%llu left=%zu (lie)\n",
                       (unsigned long long) pressure_shrinker_get_id(s), sc->node, sc->cgroup,
                       (unsigned long long) sc->nr_to_scan, (unsigned long long) sc->nr_to_scan, cache.n);
                fflush(stdout);
                return sc->nr_to_scan;
        }
        uint64_t freed = 0;
        while (freed < sc->nr_to_scan && cache.n > 0) {
                free(cache.objects[--cache.n]);
                freed++;
        }
        sc->nr_bytes = freed * cache.size;
        for (uint64_t i = 0; refill && i < freed; i++)
                if (cache_add() < 0)
                        break;
        printf("scan %llu node=%d cgroup=%s nr=%llu freed=%llu left=%zu\n",
               (unsigned long long) pressure_shrinker_get_id(s), sc->node, sc->cgroup,
               (unsigned long long) sc->nr_to_scan, (unsigned long long) freed, cache.n);
        fflush(stdout);
        return freed;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "objects", required_argument, NULL, 'o' },
                { "size", required_argument, NULL, 'b' },
                { "shrinkers", required_argument, NULL, 'k' },
                { "numa", no_argument, NULL, 'n' },
                { "memcg", no_argument, NULL, 'm' },
                { "sleep-in-scan", required_argument, NULL, 'w' },
                { "die-in-scan", no_argument, NULL, 'd' },
                { "refill", no_argument, NULL, 'f' },
                { "lie", no_argument, NULL, 'l' },
                { "endless", no_argument, NULL, 'E' },
                { "thread", no_argument, NULL, 't' },
                /* a small object that stays after each cache object: freed objects leave holes that only
                 * trimming the heap gives back */
                { "pin", no_argument, NULL, 'p' },
                { "no-release", no_argument, NULL, 'r' },
                { "grow", required_argument, NULL, 'g' },
                { "max", required_argument, NULL, 'M' },
                /* as an adapter: the shrinkers free memory of this other process */
                { "serve-for", required_argument, NULL, 'F' },
                { "limits", no_argument, NULL, 'L' },
                { "value", required_argument, NULL, 'V' },
                {},
        };
        const char *socket_path = NULL;
        size_t objects = 10000, k = 1, max_objects = SIZE_MAX;
        unsigned flags = 0;
        int use_thread = 0, pin = 0, no_release = 0, grow_ms = -1, serve_for = 0, limits = 0, c;

        cache.size = 1024;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 's': socket_path = optarg; break;
                case 'o': objects = strtoul(optarg, NULL, 10); break;
                case 'b': cache.size = strtoul(optarg, NULL, 10); break;
                case 'k': k = strtoul(optarg, NULL, 10); break;
                case 'n': flags |= PRESSURE_SHRINKER_NUMA_AWARE; break;
                case 'm': flags |= PRESSURE_SHRINKER_MEMCG_AWARE; break;
                case 'w': sleep_ms = atoi(optarg); break;
                case 'd': die_in_scan = 1; break;
                case 'f': refill = 1; break;
                case 'l': lie = 1; break;
                case 'E': endless = 1; break;
                case 't': use_thread = 1; break;
                case 'p': pin = 1; break;
                case 'r': no_release = 1; break;
                case 'g': grow_ms = atoi(optarg); break;
                case 'M': max_objects = strtoul(optarg, NULL, 10); break;
                case 'F': serve_for = atoi(optarg); break;
                case 'L': limits = 1; break;
                case 'V': value = strtod(optarg, NULL); break;
                default: return 2;
                }

        signal(SIGUSR1, on_usr1);
        for (size_t i = 0; i < objects; i++) {
                if (cache_add() < 0)
                        return 1;
                if (pin)
                        memset(malloc(64), 0x22, 64); /* kept for the life of the process */
        }

        struct pressure_client *client;
        int r = pressure_client_new(socket_path, &client);
        if (r < 0) {
                fprintf(stderr, "shrinker-client: connect: %s\n", strerror(-r));
                return 1;
        }
        if (no_release)
                (void) pressure_client_set_release(client, NULL, NULL);
        if (serve_for > 0)
                (void) pressure_client_set_serve_for(client, serve_for);
        printf("ready");
        for (size_t i = 0; i < k; i++) {
                char name[32];
                struct pressure_shrinker *s;
                snprintf(name, sizeof(name), "test-cache-%zu", i);
                r = pressure_shrinker_alloc(client, flags, name, &s);
                if (r >= 0)
                        r = pressure_shrinker_set_callbacks(s, count_objects, scan_objects);
                if (r >= 0 && limits)
                        r = pressure_shrinker_set_limit_handler(s, on_limit);
                if (r >= 0)
                        r = pressure_shrinker_register(s);
                if (r < 0) {
                        fprintf(stderr, "shrinker-client: register: %s\n", strerror(-r));
                        return 1;
                }
        }
        /* Ready once the daemon has every shrinker: registration goes on in the background. */
        for (uint64_t end = now_ms() + 10000; k > 0 && pressure_client_is_connected(client) != 1;) {
                struct pollfd p = { .fd = pressure_client_get_fd(client), .events = POLLIN };
                if (now_ms() >= end) {
                        fprintf(stderr, "shrinker-client: not registered after 10 s\n");
                        return 1;
                }
                (void) poll(&p, 1, (int) (end - now_ms()));
                (void) pressure_client_dispatch(client);
        }
        printf(" pid=%d\n", (int) getpid());
        fflush(stdout);

        if (use_thread) {
                r = pressure_client_start_thread(client);
                if (r < 0)
                        return 1;
                for (;;)
                        pause();
        }
        uint64_t next_grow = grow_ms >= 0 ? now_ms() + (uint64_t) grow_ms : UINT64_MAX;
        for (;;) {
                struct pollfd p = { .fd = pressure_client_get_fd(client), .events = POLLIN };
                uint64_t now = now_ms();
                int timeout = next_grow == UINT64_MAX ? -1 : next_grow > now ? (int) (next_grow - now) : 0;
                if (poll(&p, 1, timeout) < 0 && errno != EINTR)
                        return 1;
                (void) pressure_client_dispatch(client);
                if (now_ms() >= next_grow) {
                        static uint64_t capped_at;
                        if (cache.n < max_objects && !within_limit(cache.n + 1) && capped_at != limit_bytes) {
                                capped_at = limit_bytes;
                                printf("capped %zu\n", cache.n);
                                fflush(stdout);
                        }
                        if (cache.n < max_objects && within_limit(cache.n + 1) && cache_add() == 0 && cache.n == max_objects) {
                                printf("full %zu\n", cache.n);
                                fflush(stdout);
                        }
                        next_grow += (uint64_t) grow_ms;
                }
        }
}
