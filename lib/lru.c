/* SPDX-License-Identifier: MIT */
/* pressure_lru: a per-NUMA-node LRU list with the shrinker built in (after the kernel's list_lru). */

#include <assert.h>
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "pressure.h"
#include "shadow.h"

#define EXPORT __attribute__((visibility("default")))

/* One per node, on its own cache line: the locks of different nodes never share one. */
struct lru_sublist {
        pthread_mutex_t lock;
        struct pressure_lru_node head; /* sentinel: head.next is the oldest, head.prev the newest */
        uint64_t count;                /* written under the lock, read without it */
} __attribute__((aligned(64)));

struct pressure_lru {
        int n_nodes;
        struct lru_sublist *nodes;

        /* the built-in shrinker */
        int has_shrinker;
        size_t object_size;
        pressure_lru_isolate_t isolate;
        pressure_lru_free_t free_fn;
        void *userdata;
        uint64_t limit_objects; /* the daemon's growth limit, in objects (0: none); atomic */

        /* shadow entries of what walks evict (pressure_lru_set_shadow()), under shadow_lock, which is
         * taken inside a node's lock, never around one */
        pthread_mutex_t shadow_lock;
        struct shadow *shadow;
        pressure_lru_key_t key_fn;
        void *key_userdata;
        size_t shadow_object_size; /* 0: the built-in shrinker's */
};

EXPORT void pressure_lru_node_init(struct pressure_lru_node *item) {
        item->prev = item->next = NULL;
        __atomic_store_n(&item->referenced, 0, __ATOMIC_RELAXED);
        /* Last, and released: an add() that sees "on no list" sees the rest too. Done by the holder of a
         * dispose list, it races with add() and del() on other threads, which only read nid. */
        __atomic_store_n(&item->nid, -1, __ATOMIC_RELEASE);
}

EXPORT int pressure_lru_new(int n_nodes, struct pressure_lru **ret) {
        if (!ret)
                return -EINVAL;
        if (n_nodes <= 0)
                n_nodes = numa_available() >= 0 ? numa_max_node() + 1 : 1;

        struct pressure_lru *lru = calloc(1, sizeof(*lru));
        if (!lru)
                return -ENOMEM;
        if (posix_memalign((void **) &lru->nodes, 64, (size_t) n_nodes * sizeof(struct lru_sublist)) != 0) {
                free(lru);
                return -ENOMEM;
        }
        lru->n_nodes = n_nodes;
        pthread_mutex_init(&lru->shadow_lock, NULL);
        for (int i = 0; i < n_nodes; i++) {
                struct lru_sublist *l = &lru->nodes[i];
                pthread_mutex_init(&l->lock, NULL);
                l->head.next = l->head.prev = &l->head;
                l->head.nid = i;
                l->count = 0;
        }
        *ret = lru;
        return 0;
}

EXPORT struct pressure_lru *pressure_lru_free(struct pressure_lru *lru) {
        if (!lru)
                return NULL;
        for (int i = 0; i < lru->n_nodes; i++)
                pthread_mutex_destroy(&lru->nodes[i].lock);
        shadow_free(lru->shadow);
        pthread_mutex_destroy(&lru->shadow_lock);
        free(lru->nodes);
        free(lru);
        return NULL;
}

EXPORT int pressure_lru_get_n_nodes(const struct pressure_lru *lru) {
        return lru ? lru->n_nodes : 0;
}

EXPORT int pressure_lru_node_of(const void *addr) {
        int node = -1;
        if (addr && get_mempolicy(&node, NULL, 0, (void *) addr, MPOL_F_NODE | MPOL_F_ADDR) == 0 && node >= 0)
                return node;
        int cpu = sched_getcpu();
        if (cpu >= 0 && numa_available() >= 0) {
                node = numa_node_of_cpu(cpu);
                if (node >= 0)
                        return node;
        }
        return 0;
}

static void link_tail(struct lru_sublist *l, struct pressure_lru_node *item) {
        item->prev = l->head.prev;
        item->next = &l->head;
        l->head.prev->next = item;
        l->head.prev = item;
}

static void unlink_item(struct pressure_lru_node *item) {
        item->prev->next = item->next;
        item->next->prev = item->prev;
        item->prev = item->next = NULL;
}

EXPORT int pressure_lru_add(struct pressure_lru *lru, struct pressure_lru_node *item, int nid) {
        if (!lru || !item)
                return -EINVAL;
        if (nid < 0) {
                nid = pressure_lru_node_of(item);
                if (nid >= lru->n_nodes)
                        nid = 0;
        } else if (nid >= lru->n_nodes)
                return -EINVAL;

        struct lru_sublist *l = &lru->nodes[nid];
        int added = 0;
        pthread_mutex_lock(&l->lock);
        /* Claimed with a compare-and-swap, not a load and a store: two add()s of one object to two
         * nodes hold two different locks, and only one of them may link it. Whoever claims it links it
         * before dropping this node's lock, which a del() or walk of this node takes first. */
        int cur = -1;
        if (__atomic_compare_exchange_n(&item->nid, &cur, nid, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                link_tail(l, item);
                __atomic_store_n(&l->count, l->count + 1, __ATOMIC_RELAXED);
                added = 1;
        } else if (cur == PRESSURE_LRU_ISOLATED)
                added = -EBUSY;
        pthread_mutex_unlock(&l->lock);
        return added;
}

EXPORT int pressure_lru_del(struct pressure_lru *lru, struct pressure_lru_node *item) {
        if (!lru || !item)
                return -EINVAL;
        for (;;) {
                int nid = __atomic_load_n(&item->nid, __ATOMIC_ACQUIRE);
                if (nid == PRESSURE_LRU_ISOLATED)
                        return -EBUSY; /* a walk has it: its dispose list's holder frees it */
                if (nid < 0 || nid >= lru->n_nodes)
                        return 0;
                struct lru_sublist *l = &lru->nodes[nid];
                pthread_mutex_lock(&l->lock);
                /* A walk may have isolated it between our look and the lock. */
                if (__atomic_load_n(&item->nid, __ATOMIC_ACQUIRE) != nid) {
                        pthread_mutex_unlock(&l->lock);
                        continue;
                }
                unlink_item(item);
                __atomic_store_n(&item->nid, -1, __ATOMIC_RELEASE);
                __atomic_store_n(&l->count, l->count - 1, __ATOMIC_RELAXED);
                pthread_mutex_unlock(&l->lock);
                return 1;
        }
}

EXPORT void pressure_lru_touch(struct pressure_lru_node *item) {
        /* Only write when needed: a hot object's cache line stays shared between readers. */
        if (!__atomic_load_n(&item->referenced, __ATOMIC_RELAXED))
                __atomic_store_n(&item->referenced, 1, __ATOMIC_RELAXED);
}

EXPORT int pressure_lru_test_and_clear_referenced(struct pressure_lru_node *item) {
        return __atomic_exchange_n(&item->referenced, 0, __ATOMIC_RELAXED);
}

EXPORT uint64_t pressure_lru_count_node(const struct pressure_lru *lru, int nid) {
        if (!lru || nid < 0 || nid >= lru->n_nodes)
                return 0;
        return __atomic_load_n(&lru->nodes[nid].count, __ATOMIC_RELAXED);
}

EXPORT uint64_t pressure_lru_count(const struct pressure_lru *lru) {
        uint64_t n = 0;
        for (int i = 0; lru && i < lru->n_nodes; i++)
                n += pressure_lru_count_node(lru, i);
        return n;
}

/* An object a walk evicts leaves its shadow entry (under the node's lock: the object is still there). */
static void lru_evicted(struct pressure_lru *lru, const struct pressure_lru_node *item) {
        uint64_t hash = lru->key_fn(item, lru->key_userdata);
        pthread_mutex_lock(&lru->shadow_lock);
        shadow_evicted(lru->shadow, hash);
        pthread_mutex_unlock(&lru->shadow_lock);
}

static uint64_t lru_walk(struct pressure_lru *lru, int nid, pressure_lru_isolate_t isolate, void *userdata,
                         uint64_t *nr_to_walk, struct pressure_lru_node **ret_dispose, bool shadow) {
        struct pressure_lru_node *dispose = NULL, **tail = &dispose;
        uint64_t isolated = 0;

        if (ret_dispose)
                *ret_dispose = NULL;
        if (!lru || !isolate || !nr_to_walk || !ret_dispose || nid < 0 || nid >= lru->n_nodes)
                return 0;

        struct lru_sublist *l = &lru->nodes[nid];
        pthread_mutex_lock(&l->lock);
        /* Rotated objects go behind the ones still to visit; stop at the first of them. */
        struct pressure_lru_node *end = &l->head;
        struct pressure_lru_node *p = l->head.next;
        while (p != end && *nr_to_walk > 0) {
                struct pressure_lru_node *next = p->next;
                (*nr_to_walk)--; /* before the callback: retries cannot walk forever */

                enum pressure_lru_status st = isolate(p, userdata);
                if (st == PRESSURE_LRU_STOP)
                        break;
                switch (st) {
                case PRESSURE_LRU_REMOVED:
                        if (shadow && lru->shadow)
                                lru_evicted(lru, p);
                        /* Isolated, not "on no list": add() refuses it and del() says so until its holder
                         * is done with it. Chained while the lock is held, so that nobody else ever
                         * writes its pointers meanwhile. */
                        unlink_item(p);
                        __atomic_store_n(&p->nid, PRESSURE_LRU_ISOLATED, __ATOMIC_RELEASE);
                        __atomic_store_n(&l->count, l->count - 1, __ATOMIC_RELAXED);
                        *tail = p;
                        tail = &p->next;
                        isolated++;
                        break;
                case PRESSURE_LRU_ROTATE:
                        if (p->next != &l->head) {
                                unlink_item(p);
                                link_tail(l, p);
                                if (end == &l->head)
                                        end = p;
                        }
                        break;
                case PRESSURE_LRU_SKIP:
                        break;
                default:
                        assert(!"pressure_lru: the isolate callback returned an unknown status");
                        abort();
                }
                p = next;
        }
        *tail = NULL;
        pthread_mutex_unlock(&l->lock);

        *ret_dispose = dispose;
        return isolated;
}

EXPORT uint64_t pressure_lru_walk_node(struct pressure_lru *lru, int nid, pressure_lru_isolate_t isolate,
                                       void *userdata, uint64_t *nr_to_walk, struct pressure_lru_node **ret_dispose) {
        return lru_walk(lru, nid, isolate, userdata, nr_to_walk, ret_dispose, true);
}

static enum pressure_lru_status take_all(struct pressure_lru_node *item, void *userdata) {
        (void) item;
        (void) userdata;
        return PRESSURE_LRU_REMOVED;
}

EXPORT uint64_t pressure_lru_drain(struct pressure_lru *lru, pressure_lru_free_t free_fn, void *userdata) {
        uint64_t freed = 0;
        if (!lru || !free_fn)
                return 0;
        for (int nid = 0; nid < lru->n_nodes; nid++) {
                struct pressure_lru_node *dispose;
                uint64_t budget = UINT64_MAX;
                /* Not evictions: the program lets go of everything. */
                freed += lru_walk(lru, nid, take_all, NULL, &budget, &dispose, false);
                while (dispose) {
                        struct pressure_lru_node *next = dispose->next;
                        free_fn(dispose, userdata);
                        dispose = next;
                }
        }
        return freed;
}

/* ---- the built-in shrinker ---- */

static enum pressure_lru_status second_chance(struct pressure_lru_node *item, void *userdata) {
        (void) userdata;
        return pressure_lru_test_and_clear_referenced(item) ? PRESSURE_LRU_ROTATE : PRESSURE_LRU_REMOVED;
}

EXPORT uint64_t pressure_lru_shrink_count(const struct pressure_lru *lru, const struct pressure_shrink_control *sc) {
        return lru && sc ? pressure_lru_count_node(lru, sc->node) : 0;
}

EXPORT uint64_t pressure_lru_shrink_walk(struct pressure_lru *lru, struct pressure_shrink_control *sc,
                                         pressure_lru_isolate_t isolate, void *userdata,
                                         struct pressure_lru_node **ret_dispose) {
        if (!sc) {
                if (ret_dispose)
                        *ret_dispose = NULL;
                return 0;
        }
        uint64_t budget = sc->nr_to_scan;
        uint64_t isolated = pressure_lru_walk_node(lru, sc->node, isolate, userdata, &budget, ret_dispose);
        sc->nr_scanned = sc->nr_to_scan - budget;
        return isolated;
}

static uint64_t lru_count(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct pressure_lru *lru = userdata;
        (void) s;
        uint64_t n = pressure_lru_shrink_count(lru, sc);
        sc->nr_bytes = n * lru->object_size;
        sc->value = pressure_lru_get_value(lru);
        return n > 0 ? n : PRESSURE_SHRINK_EMPTY;
}

static uint64_t lru_scan(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct pressure_lru *lru = userdata;
        struct pressure_lru_node *dispose;
        (void) s;

        uint64_t freed = pressure_lru_shrink_walk(lru, sc, lru->isolate, lru->userdata, &dispose);
        /* Free outside the node lock. */
        while (dispose) {
                struct pressure_lru_node *next = dispose->next;
                lru->free_fn(dispose, lru->userdata);
                dispose = next;
        }
        sc->nr_bytes = freed * lru->object_size;
        return freed;
}

/* Evict through the built-in shrinker's isolate and free functions until the list holds at most max
 * objects, each node its share. A few passes: the first only rotates what was used since the last walk. */
static uint64_t lru_trim_to(struct pressure_lru *lru, uint64_t max) {
        uint64_t freed = 0;
        for (int pass = 0; pass < 4; pass++) {
                uint64_t count = pressure_lru_count(lru), progress = 0;
                if (count <= max)
                        break;
                for (int nid = 0; nid < lru->n_nodes; nid++) {
                        unsigned __int128 here = pressure_lru_count_node(lru, nid);
                        uint64_t budget = (uint64_t) (((count - max) * here + count - 1) / count);
                        struct pressure_lru_node *dispose;
                        progress += pressure_lru_walk_node(lru, nid, lru->isolate, lru->userdata, &budget, &dispose);
                        while (dispose) {
                                struct pressure_lru_node *next = dispose->next;
                                lru->free_fn(dispose, lru->userdata);
                                dispose = next;
                        }
                }
                freed += progress;
                if (progress == 0)
                        break;
        }
        return freed;
}

EXPORT uint64_t pressure_lru_trim(struct pressure_lru *lru) {
        if (!lru || !__atomic_load_n(&lru->has_shrinker, __ATOMIC_ACQUIRE))
                return 0;
        uint64_t max = __atomic_load_n(&lru->limit_objects, __ATOMIC_RELAXED);
        return max > 0 && pressure_lru_count(lru) > max ? lru_trim_to(lru, max) : 0;
}

/* The daemon's growth limit moved: kept, and the list trimmed to it at once. */
static void lru_limit(struct pressure_shrinker *s, uint64_t bytes, void *userdata) {
        struct pressure_lru *lru = userdata;
        (void) s;
        uint64_t max = bytes > 0 ? MAX(bytes / lru->object_size, (uint64_t) 1) : 0;
        __atomic_store_n(&lru->limit_objects, max, __ATOMIC_RELAXED);
        (void) pressure_lru_trim(lru);
}

/* The shrinker was freed: the list may get another. */
static void lru_shrinker_gone(void *userdata) {
        struct pressure_lru *lru = userdata;
        __atomic_store_n(&lru->limit_objects, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&lru->has_shrinker, 0, __ATOMIC_RELEASE);
}

EXPORT int pressure_lru_shrinker_alloc(struct pressure_lru *lru, struct pressure_client *client, const char *name,
                                       unsigned extra_flags, size_t object_size, pressure_lru_isolate_t isolate,
                                       pressure_lru_free_t free_fn, void *userdata, struct pressure_shrinker **ret) {
        struct pressure_shrinker *s;
        if (!lru || !free_fn || !ret)
                return -EINVAL;
        int expected = 0;
        if (!__atomic_compare_exchange_n(&lru->has_shrinker, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return -EBUSY;
        int r = pressure_shrinker_alloc(client, PRESSURE_SHRINKER_NUMA_AWARE | extra_flags, name, &s);
        if (r < 0) {
                lru_shrinker_gone(lru);
                return r;
        }
        lru->isolate = isolate ? isolate : second_chance;
        lru->free_fn = free_fn;
        lru->userdata = userdata;
        lru->object_size = object_size;
        (void) pressure_shrinker_set_callbacks(s, lru_count, lru_scan);
        (void) pressure_shrinker_set_userdata(s, lru, lru_shrinker_gone);
        /* Objects of no known size cannot be held to bytes. */
        if (object_size > 0)
                (void) pressure_shrinker_set_limit_handler(s, lru_limit);
        *ret = s;
        return 0;
}

EXPORT int pressure_lru_shrinker_new(struct pressure_lru *lru, struct pressure_client *client, const char *name,
                                     unsigned extra_flags, size_t object_size, pressure_lru_isolate_t isolate,
                                     pressure_lru_free_t free_fn, void *userdata, struct pressure_shrinker **ret) {
        struct pressure_shrinker *s;
        int r = pressure_lru_shrinker_alloc(lru, client, name, extra_flags, object_size, isolate, free_fn, userdata, &s);
        if (r >= 0 && (r = pressure_shrinker_register(s)) < 0)
                pressure_shrinker_free(s);
        if (r >= 0)
                *ret = s;
        return r;
}

/* ---- value ---- */

EXPORT int pressure_lru_set_shadow(struct pressure_lru *lru, pressure_lru_key_t key_fn, void *userdata,
                                   size_t max_entries, size_t object_size) {
        if (!lru || !key_fn || max_entries > ((size_t) 1 << 30))
                return -EINVAL;
        struct shadow *sh = shadow_new(max_entries > 0 ? max_entries : 4096);
        if (!sh)
                return -ENOMEM;
        pthread_mutex_lock(&lru->shadow_lock);
        bool busy = lru->shadow != NULL;
        if (!busy) {
                lru->key_fn = key_fn;
                lru->key_userdata = userdata;
                lru->shadow_object_size = object_size;
                lru->shadow = sh;
        }
        pthread_mutex_unlock(&lru->shadow_lock);
        if (busy) {
                shadow_free(sh);
                return -EBUSY;
        }
        return 0;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

EXPORT int64_t pressure_lru_miss(struct pressure_lru *lru, uint64_t hash, uint64_t cost_usec) {
        if (!lru)
                return -EINVAL;
        uint64_t t = now_usec(), distance = 0;
        pthread_mutex_lock(&lru->shadow_lock);
        if (lru->shadow)
                distance = shadow_miss(lru->shadow, hash, cost_usec, t);
        pthread_mutex_unlock(&lru->shadow_lock);
        return (int64_t) MIN(distance, (uint64_t) INT64_MAX);
}

EXPORT double pressure_lru_get_value(const struct pressure_lru *lru) {
        if (!lru)
                return 0;
        struct pressure_lru *l = (struct pressure_lru *) lru; /* the lock and the decay are not the list's state */
        /* The tail's worth: the entries evicted last, a sixteenth of the list, but never fewer than 64
         * (too few found misses to tell anything). */
        uint64_t window = MAX(pressure_lru_count(lru) / 16, (uint64_t) 64), covered = 0;
        double rate = 0;
        size_t size = 0;
        pthread_mutex_lock(&l->shadow_lock);
        if (l->shadow) {
                rate = shadow_rate(l->shadow, window, now_usec(), &covered);
                size = l->shadow_object_size ? l->shadow_object_size : l->object_size;
        }
        pthread_mutex_unlock(&l->shadow_lock);
        if (covered == 0 || size == 0)
                return 0;
        return rate / ((double) covered * (double) size / (1024.0 * 1024.0));
}

EXPORT int pressure_lru_get_shadow_stats(const struct pressure_lru *lru, struct pressure_lru_shadow_stats *ret,
                                         size_t size) {
        if (!lru || !ret || size == 0)
                return -EINVAL;
        struct pressure_lru *l = (struct pressure_lru *) lru;
        struct shadow_counts c;
        pthread_mutex_lock(&l->shadow_lock);
        bool have = l->shadow != NULL;
        if (have)
                shadow_counts(l->shadow, &c);
        pthread_mutex_unlock(&l->shadow_lock);
        if (!have)
                return -EINVAL;
        const struct pressure_lru_shadow_stats st = {
                .evictions = c.evictions,
                .misses = c.misses,
                .shadow_hits = c.hits,
                .entries = c.entries,
        };
        memcpy(ret, &st, MIN(size, sizeof(st)));
        return 0;
}
