/* SPDX-License-Identifier: MIT */
/* kvcache: a small key-value cache server whose values live on a pressure_lru, so that pressured can
 * shrink it when memory gets tight in its cgroup or on its NUMA node.
 *
 * Protocol, one request per line on a unix stream socket:
 *   SET <key> <length>\n<length bytes>   ->  STORED
 *   GET <key> [<miss cost, us>]          ->  VALUE <length>\n<bytes>   or   MISS
 *   STATS                                ->  items=<n> bytes=<n> hits=<n> misses=<n> evicted=<n> ...
 *                                               shadow_hits=<n> value=<x>
 *
 * Usage: kvcache --listen PATH [--pressured SOCKET] [--max-bytes N | --drop-on-warning] [--miss-cost USEC]
 *                [--no-value]
 *
 * Every miss is reported to the list (pressure_lru_miss(), with --miss-cost what one costs to make up
 * for, or what the GET says), which keeps shadow entries of what it evicted: the shrinker's counts then
 * carry the value of the cache's last bytes, and pressured asks caches of lower value first. --no-value:
 * no shadow entries and no value (the proportional split, for the benchmarks). 
 *
 * By default the values are the shrinker's to trim. Two other policies exist for comparison (the
 * benchmark bench/kvcache-bench.c runs all of them): --max-bytes keeps the values under a fixed size
 * (oldest first, with the same second chance), --drop-on-warning registers no shrinker and drops every
 * value whenever its cgroup's level rises (what applications do on a low-memory warning today).
 *
 * Everything runs on one thread: one poll() loop serves the clients and calls
 * pressure_client_dispatch() when pressured asks something, so the shrinker's callbacks never race with
 * requests. */

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pressure.h"

#define MAX_CLIENTS 64
#define MAX_VALUE (16u << 20)
#define HASH_BUCKETS 65536

struct entry {
        struct pressure_lru_node lru; /* first: the LRU hands back this pointer */
        struct entry *hash_next;
        size_t len;
        char *key;
        char value[];
};

static struct entry *table[HASH_BUCKETS];
static struct pressure_lru *lru;
static unsigned long n_items, n_bytes, hits, misses, evicted, evicted_bytes, drops;
static unsigned long max_bytes; /* --max-bytes; 0: no cap */
static unsigned long miss_cost;  /* --miss-cost, microseconds; 0: not known */
static unsigned long shadow_hits;

static unsigned hash(const char *s) {
        unsigned h = 2166136261u;
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 16777619u;
        return h % HASH_BUCKETS;
}

/* The key's hash for shadow entries: 64 bits, so that two keys rarely share one. */
static uint64_t key_hash(const char *s) {
        uint64_t h = 14695981039346656037ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

static uint64_t entry_key_hash(const struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        return key_hash(((const struct entry *) n)->key);
}

static struct entry **find_slot(const char *key) {
        struct entry **p = &table[hash(key)];
        while (*p && strcmp((*p)->key, key) != 0)
                p = &(*p)->hash_next;
        return p;
}

static void entry_drop(struct entry *e) {
        struct entry **p = find_slot(e->key);
        if (*p == e)
                *p = e->hash_next;
        n_items--;
        n_bytes -= e->len;
        free(e->key);
        free(e);
}

/* Called by the LRU's shrinker, on this thread, for each value it evicted. */
static void evict(struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        evicted++;
        evicted_bytes += ((struct entry *) n)->len;
        entry_drop((struct entry *) n);
}

static enum pressure_lru_status second_chance(struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        return pressure_lru_test_and_clear_referenced(n) ? PRESSURE_LRU_ROTATE : PRESSURE_LRU_REMOVED;
}

static enum pressure_lru_status take_all(struct pressure_lru_node *n, void *userdata) {
        (void) n;
        (void) userdata;
        return PRESSURE_LRU_REMOVED;
}

/* Evict up to nr values from every node through isolate. */
static void evict_walk(pressure_lru_isolate_t isolate, uint64_t nr) {
        for (int nid = 0; nid < pressure_lru_get_n_nodes(lru); nid++) {
                struct pressure_lru_node *dispose = NULL, *next;
                uint64_t budget = nr;
                (void) pressure_lru_walk_node(lru, nid, isolate, NULL, &budget, &dispose);
                for (; dispose; dispose = next) {
                        next = dispose->next;
                        evict(dispose, NULL);
                }
        }
}

/* --max-bytes: the oldest values go (a referenced one gets a second pass) until the rest fits. */
static void enforce_cap(void) {
        while (max_bytes > 0 && n_bytes > max_bytes && n_items > 0)
                evict_walk(second_chance, 16);
}

/* --drop-on-warning: the level of our cgroup rose; everything goes, and goes back to the kernel. */
static void on_level(struct pressure_client *client, const struct pressure_scope *scope, int is_initial,
                     void *userdata) {
        (void) client;
        (void) userdata;
        enum pressure_level level = pressure_scope_get_level(scope);
        if (is_initial || level < PRESSURE_LEVEL_LOW || level <= pressure_scope_get_previous_level(scope))
                return;
        drops++;
        evict_walk(take_all, UINT64_MAX);
        (void) malloc_trim(0);
}

/* Our own cgroup's v2 path, from /proc/self/cgroup ("0::/path"). */
static int own_cgroup(char *buf, size_t size) {
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[1024];
        int r = -ENOENT;
        while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = 0;
                        snprintf(buf, size, "%s", line + 3);
                        r = 0;
                }
        if (f)
                fclose(f);
        return r;
}

static void set(const char *key, const char *value, size_t len) {
        struct entry **p = find_slot(key);
        if (*p) {
                pressure_lru_del(lru, &(*p)->lru);
                entry_drop(*p);
                p = find_slot(key);
        }
        struct entry *e = malloc(sizeof(*e) + len);
        if (!e)
                return;
        e->key = strdup(key);
        e->len = len;
        memcpy(e->value, value, len);
        e->hash_next = NULL;
        *p = e;
        n_items++;
        n_bytes += len;
        pressure_lru_node_init(&e->lru);
        pressure_lru_add(lru, &e->lru, -1); /* the node its memory is on */
        enforce_cap();
        /* Within pressured's growth limit, if it set one: a refill does not run past the group's edge. */
        (void) pressure_lru_trim(lru);
}

struct client {
        int fd;
        char *buf;
        size_t len, alloc;
};

static void reply(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN) {
                                struct pollfd w = { .fd = fd, .events = POLLOUT };
                                poll(&w, 1, 1000);
                                continue;
                        }
                        return;
                }
                p += n;
                len -= (size_t) n;
        }
}

/* Handle every complete request in the buffer. Returns -1 to drop the client. */
static int serve(struct client *c) {
        for (;;) {
                char *nl = memchr(c->buf, '\n', c->len);
                if (!nl)
                        return c->len > 4096 ? -1 : 0;
                size_t head = (size_t) (nl - c->buf) + 1;
                char line[4200], key[256];
                size_t len;
                memcpy(line, c->buf, head - 1);
                line[head - 1] = 0;

                size_t used = head;
                unsigned long cost = 0;
                int got;
                if (sscanf(line, "SET %255s %zu", key, &len) == 2) {
                        if (len > MAX_VALUE)
                                return -1;
                        if (c->len < head + len)
                                return 0; /* the value is still coming */
                        set(key, c->buf + head, len);
                        used += len;
                        reply(c->fd, "STORED\n", 7);
                } else if ((got = sscanf(line, "GET %255s %lu", key, &cost)) >= 1) {
                        struct entry *e = *find_slot(key);
                        if (e) {
                                char hdr[64];
                                int n = snprintf(hdr, sizeof(hdr), "VALUE %zu\n", e->len);
                                pressure_lru_touch(&e->lru);
                                hits++;
                                reply(c->fd, hdr, (size_t) n);
                                reply(c->fd, e->value, e->len);
                        } else {
                                misses++;
                                shadow_hits += pressure_lru_miss(lru, key_hash(key), got == 2 ? cost : miss_cost) > 0;
                                reply(c->fd, "MISS\n", 5);
                        }
                } else if (strcmp(line, "STATS") == 0) {
                        char out[320];
                        int n = snprintf(out, sizeof(out),
                                         "items=%lu bytes=%lu hits=%lu misses=%lu evicted=%lu evicted_bytes=%lu drops=%lu "
                                         "shadow_hits=%lu value=%.3f\n",
                                         n_items, n_bytes, hits, misses, evicted, evicted_bytes, drops, shadow_hits,
                                         pressure_lru_get_value(lru));
                        reply(c->fd, out, (size_t) n);
                } else
                        reply(c->fd, "ERROR\n", 6);
                memmove(c->buf, c->buf + used, c->len - used);
                c->len -= used;
        }
}

static int listen_on(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -1;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        unlink(path);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 16) < 0)
                return -1;
        return fd;
}

static volatile sig_atomic_t stop;
static void on_term(int sig) {
        (void) sig;
        stop = 1;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "listen", required_argument, NULL, 'l' },
                { "pressured", required_argument, NULL, 'p' },
                { "max-bytes", required_argument, NULL, 'm' },
                { "drop-on-warning", no_argument, NULL, 'd' },
                { "miss-cost", required_argument, NULL, 'c' },
                { "no-value", no_argument, NULL, 'n' },
                {},
        };
        const char *listen_path = NULL, *pressured = NULL;
        bool drop_on_warning = false, no_value = false;
        struct client clients[MAX_CLIENTS];
        int c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'l': listen_path = optarg; break;
                case 'p': pressured = optarg; break;
                case 'm': max_bytes = strtoul(optarg, NULL, 0); break;
                case 'd': drop_on_warning = true; break;
                case 'c': miss_cost = strtoul(optarg, NULL, 0); break;
                case 'n': no_value = true; break;
                default: return 2;
                }
        if (!listen_path || (max_bytes > 0 && drop_on_warning)) {
                fprintf(stderr, "usage: kvcache --listen PATH [--pressured SOCKET] [--max-bytes N | --drop-on-warning] "
                                "[--miss-cost USEC] [--no-value]\n");
                return 2;
        }

        signal(SIGTERM, on_term);
        signal(SIGINT, on_term);
        signal(SIGPIPE, SIG_IGN);
        /* Shadow entries of 4 KiB objects, as the shrinker counts them. */
        if (pressure_lru_new(0, &lru) < 0 || (!no_value && pressure_lru_set_shadow(lru, entry_key_hash, NULL, 0, 4096) < 0))
                return 1;

        /* The whole integration: a client, and the LRU's shrinker. Without a daemon the cache still runs,
         * it just will not be asked to shrink. */
        struct pressure_client *pc = NULL;
        struct pressure_shrinker *sh = NULL;
        r = pressure_client_new(pressured, &pc);
        if (r >= 0 && drop_on_warning) {
                char cgroup[1024];
                const char *scopes[] = { cgroup, NULL };
                r = own_cgroup(cgroup, sizeof(cgroup));
                if (r >= 0)
                        r = pressure_client_subscribe(pc, scopes, PRESSURE_LEVEL_LOW, on_level, NULL);
        } else if (r >= 0 && max_bytes == 0)
                r = pressure_lru_shrinker_new(lru, pc, "kvcache", PRESSURE_SHRINKER_MEMCG_AWARE, 4096, NULL, evict,
                                              NULL, &sh);
        if (r < 0) {
                fprintf(stderr, "kvcache: running without pressured: %s\n", strerror(-r));
                pc = pressure_client_unref(pc);
        }

        int lfd = listen_on(listen_path);
        if (lfd < 0) {
                fprintf(stderr, "kvcache: cannot listen on %s: %s\n", listen_path, strerror(errno));
                return 1;
        }
        printf("kvcache: listening on %s%s\n", listen_path,
               sh ? ", shrinker registered" : drop_on_warning && pc ? ", dropping all on warnings" : "");
        fflush(stdout);

        int n_clients = 0;
        while (!stop) {
                struct pollfd p[MAX_CLIENTS + 2];
                int n = 0;
                p[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
                p[n++] = (struct pollfd){ .fd = pc ? pressure_client_get_fd(pc) : -1, .events = POLLIN };
                for (int i = 0; i < n_clients; i++)
                        p[n++] = (struct pollfd){ .fd = clients[i].fd, .events = POLLIN };
                if (poll(p, (nfds_t) n, -1) < 0)
                        continue;

                if (p[1].revents)
                        (void) pressure_client_dispatch(pc);
                if ((p[0].revents & POLLIN) && n_clients < MAX_CLIENTS) {
                        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd >= 0)
                                clients[n_clients++] = (struct client){ .fd = fd };
                }
                for (int i = n_clients - 1; i >= 0; i--) {
                        if (!p[2 + i].revents)
                                continue;
                        struct client *cl = &clients[i];
                        if (cl->alloc - cl->len < 65536) {
                                cl->alloc = cl->alloc ? cl->alloc * 2 : 131072;
                                cl->buf = realloc(cl->buf, cl->alloc);
                        }
                        ssize_t k = read(cl->fd, cl->buf + cl->len, cl->alloc - cl->len);
                        if (k > 0)
                                cl->len += (size_t) k;
                        if (k <= 0 || serve(cl) < 0) {
                                close(cl->fd);
                                free(cl->buf);
                                clients[i] = clients[--n_clients];
                        }
                }
        }

        printf("kvcache: items=%lu bytes=%lu evicted=%lu\n", n_items, n_bytes, evicted);
        pressure_shrinker_free(sh);
        pressure_client_unref(pc);
        unlink(listen_path);
        return 0;
}
