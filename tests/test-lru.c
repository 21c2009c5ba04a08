/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pressure.h"
#include "test-util.h"

struct obj {
        int key;
        int busy; /* the concurrency test's object lock: who may link or unlink it */
        struct pressure_lru_node lru;
};

#define OBJ(n) ((struct obj *) ((char *) (n) - offsetof(struct obj, lru)))

static struct obj *objs_new(int n) {
        struct obj *o = calloc((size_t) n, sizeof(*o));
        for (int i = 0; i < n; i++) {
                o[i].key = i;
                pressure_lru_node_init(&o[i].lru);
        }
        return o;
}

static void test_add_del(void) {
        struct pressure_lru *lru;
        struct obj *o = objs_new(4);

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &lru), 0);
        CU_ASSERT_EQUAL(pressure_lru_get_n_nodes(lru), 2);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[0].lru, 0), 1);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[0].lru, 0), 0); /* already on */
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[0].lru, 1), 0); /* on a list is on a list */
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[1].lru, 1), 1);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[2].lru, 1), 1);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[3].lru, 2), -EINVAL);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 0), 1u);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 1), 2u);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 7), 0u);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 3u);
        CU_ASSERT_EQUAL(o[1].lru.nid, 1);

        CU_ASSERT_EQUAL(pressure_lru_del(lru, &o[1].lru), 1);
        CU_ASSERT_EQUAL(pressure_lru_del(lru, &o[1].lru), 0);
        CU_ASSERT_EQUAL(pressure_lru_del(lru, &o[3].lru), 0); /* never added */
        CU_ASSERT_EQUAL(o[1].lru.nid, -1);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 2u);
        /* Re-adding after a delete works, to another node too. */
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[1].lru, 0), 1);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 0), 2u);

        pressure_lru_free(lru);
        free(o);
}

static enum pressure_lru_status remove_all(struct pressure_lru_node *n, void *ud) {
        (void) n;
        (*(int *) ud)++;
        return PRESSURE_LRU_REMOVED;
}

static enum pressure_lru_status by_key(struct pressure_lru_node *n, void *ud) {
        (*(int *) ud)++;
        switch (OBJ(n)->key % 4) {
        case 0: return PRESSURE_LRU_REMOVED;
        case 1: return PRESSURE_LRU_ROTATE;
        case 2: return PRESSURE_LRU_SKIP;
        default: return PRESSURE_LRU_REMOVED;
        }
}

static enum pressure_lru_status stop_at_3(struct pressure_lru_node *n, void *ud) {
        (void) ud;
        return OBJ(n)->key == 3 ? PRESSURE_LRU_STOP : PRESSURE_LRU_REMOVED;
}

static int keys(struct pressure_lru_node *d, int *out, int max) {
        int n = 0;
        for (; d && n < max; d = d->next)
                out[n++] = OBJ(d)->key;
        return n;
}

static void test_walk(void) {
        struct pressure_lru *lru;
        struct pressure_lru_node *dispose;
        struct obj *o = objs_new(8);
        int calls = 0, k[8];
        uint64_t budget;

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        for (int i = 0; i < 8; i++)
                pressure_lru_add(lru, &o[i].lru, 0);

        /* Oldest first, within the budget; the budget is spent per object visited. */
        budget = 3;
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, remove_all, &calls, &budget, &dispose), 3u);
        CU_ASSERT_EQUAL(budget, 0u);
        CU_ASSERT_EQUAL(calls, 3);
        CU_ASSERT_EQUAL(keys(dispose, k, 8), 3);
        CU_ASSERT(k[0] == 0 && k[1] == 1 && k[2] == 2);
        CU_ASSERT_EQUAL(o[0].lru.nid, -1);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 5u);

        /* Keys 3..7: 3 removed, 4 removed, 5 rotated, 6 skipped, 7 removed; the walk then stops at 5, which
         * went behind 7. */
        calls = 0;
        budget = 100;
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, by_key, &calls, &budget, &dispose), 3u);
        CU_ASSERT_EQUAL(calls, 5);
        CU_ASSERT_EQUAL(budget, 95u);
        CU_ASSERT_EQUAL(keys(dispose, k, 8), 3);
        CU_ASSERT(k[0] == 3 && k[1] == 4 && k[2] == 7);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 2u); /* 6, then 5 */

        /* STOP leaves the object and ends the walk. */
        struct obj *p = objs_new(5);
        for (int i = 0; i < 5; i++)
                pressure_lru_add(lru, &p[i].lru, 0);
        budget = 100;
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, stop_at_3, NULL, &budget, &dispose), 5u); /* 6, 5, 0, 1, 2 */
        CU_ASSERT_EQUAL(p[3].lru.nid, 0);

        /* Bad node: nothing. */
        budget = 5;
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 3, remove_all, &calls, &budget, &dispose), 0u);
        CU_ASSERT_PTR_NULL(dispose);
        pressure_lru_free(lru);
        free(o);
        free(p);
}

static enum pressure_lru_status second_chance(struct pressure_lru_node *n, void *ud) {
        (void) ud;
        return pressure_lru_test_and_clear_referenced(n) ? PRESSURE_LRU_ROTATE : PRESSURE_LRU_REMOVED;
}

static void test_touch_second_chance(void) {
        struct pressure_lru *lru;
        struct pressure_lru_node *dispose;
        struct obj *o = objs_new(4);
        int k[4];
        uint64_t budget = 4;

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        for (int i = 0; i < 4; i++)
                pressure_lru_add(lru, &o[i].lru, 0);
        pressure_lru_touch(&o[0].lru);
        pressure_lru_touch(&o[0].lru); /* idempotent */
        pressure_lru_touch(&o[2].lru);
        /* 0 rotated (mark cleared), 1 removed, 2 rotated... the walk ends at the first rotated one. */
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, second_chance, NULL, &budget, &dispose), 2u);
        CU_ASSERT_EQUAL(keys(dispose, k, 4), 2);
        CU_ASSERT(k[0] == 1 && k[1] == 3);
        CU_ASSERT_EQUAL(o[0].lru.referenced, 0);
        /* Untouched since: now they go. */
        budget = 4;
        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, second_chance, NULL, &budget, &dispose), 2u);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 0u);
        pressure_lru_free(lru);
        free(o);
}

static void test_node_of(void) {
        int n_nodes = 0;
        struct pressure_lru *lru;
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(0, &lru), 0);
        n_nodes = pressure_lru_get_n_nodes(lru);
        CU_ASSERT(n_nodes >= 1);

        /* Touched heap memory: the kernel knows its node. */
        struct obj *o = objs_new(1);
        int nid = pressure_lru_node_of(o);
        CU_ASSERT(nid >= 0 && nid < n_nodes);
        /* nid < 0: the list finds it by itself. */
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o->lru, -1), 1);
        CU_ASSERT_EQUAL(o->lru.nid, nid);
        /* No address: the node of this CPU. */
        int cpu_node = pressure_lru_node_of(NULL);
        CU_ASSERT(cpu_node >= 0 && cpu_node < n_nodes);
        pressure_lru_del(lru, &o->lru);
        pressure_lru_free(lru);
        free(o);
}

/* ---- concurrency: add/del/touch from several threads while others walk ---- */

#define THREADS 4
#define PER_THREAD 2000
#define ROUNDS 200

static struct pressure_lru *shared;
static struct obj *pool;

static void *mutator(void *arg) {
        int t = (int) (long) arg;
        struct obj *mine = pool + t * PER_THREAD;
        unsigned seed = (unsigned) t;
        for (int r = 0; r < ROUNDS; r++)
                for (int i = 0; i < PER_THREAD; i++) {
                        struct obj *o = &mine[rand_r(&seed) % PER_THREAD];
                        int op = rand_r(&seed) % 3, nid = rand_r(&seed) % 2;
                        if (op == 2) {
                                pressure_lru_touch(&o->lru); /* the hot path takes no lock */
                                continue;
                        }
                        /* As a cache would: hold the object while linking or unlinking it. A walk that
                         * isolated it holds it until it is done with it. */
                        if (__atomic_exchange_n(&o->busy, 1, __ATOMIC_ACQUIRE))
                                continue;
                        if (op == 0)
                                pressure_lru_add(shared, &o->lru, nid);
                        else
                                pressure_lru_del(shared, &o->lru);
                        __atomic_store_n(&o->busy, 0, __ATOMIC_RELEASE);
                }
        return NULL;
}

static enum pressure_lru_status count_removed(struct pressure_lru_node *n, void *ud) {
        struct obj *o = OBJ(n);
        (void) ud;
        if (__atomic_exchange_n(&o->busy, 1, __ATOMIC_ACQUIRE))
                return PRESSURE_LRU_SKIP; /* someone is working on it */
        if (pressure_lru_test_and_clear_referenced(n)) {
                __atomic_store_n(&o->busy, 0, __ATOMIC_RELEASE);
                return PRESSURE_LRU_ROTATE;
        }
        return PRESSURE_LRU_REMOVED; /* stays held until the walker lets go */
}

static void release_dispose(struct pressure_lru_node *d) {
        while (d) {
                struct pressure_lru_node *next = d->next;
                __atomic_store_n(&OBJ(d)->busy, 0, __ATOMIC_RELEASE);
                d = next;
        }
}

static volatile int stop_walkers;

static void *walker(void *arg) {
        int nid = (int) (long) arg;
        while (!__atomic_load_n(&stop_walkers, __ATOMIC_RELAXED)) {
                struct pressure_lru_node *d;
                uint64_t budget = 64;
                pressure_lru_walk_node(shared, nid, count_removed, NULL, &budget, &d);
                /* Isolated objects are ours; "free" them: off the list, free for the mutators again. */
                release_dispose(d);
        }
        return NULL;
}

static void test_concurrent(void) {
        pthread_t m[THREADS], w[2];
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &shared), 0);
        pool = objs_new(THREADS * PER_THREAD);
        stop_walkers = 0;
        for (long i = 0; i < 2; i++)
                pthread_create(&w[i], NULL, walker, (void *) i);
        for (long i = 0; i < THREADS; i++)
                pthread_create(&m[i], NULL, mutator, (void *) i);
        for (int i = 0; i < THREADS; i++)
                pthread_join(m[i], NULL);
        __atomic_store_n(&stop_walkers, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < 2; i++)
                pthread_join(w[i], NULL);

        /* Every object is on exactly the list its nid says, and the counts add up. */
        uint64_t on[2] = { 0, 0 };
        for (int i = 0; i < THREADS * PER_THREAD; i++)
                if (pool[i].lru.nid >= 0)
                        on[pool[i].lru.nid]++;
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 0), on[0]);
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 1), on[1]);
        /* Walking everything away leaves both lists empty and consistent. */
        for (int nid = 0; nid < 2; nid++) {
                struct pressure_lru_node *d;
                uint64_t budget = UINT64_MAX, got = 0;
                for (int pass = 0; pass < 3; pass++) {
                        got += pressure_lru_walk_node(shared, nid, count_removed, NULL, &budget, &d);
                        release_dispose(d);
                }
                CU_ASSERT_EQUAL(got, on[nid]);
                CU_ASSERT_EQUAL(pressure_lru_count_node(shared, nid), 0u);
        }
        pressure_lru_free(shared);
        free(pool);
}

int main(void) {
        static const struct test_case cases[] = {
                { "add and delete", test_add_del },
                { "walk: removed, rotate, skip, stop, budget", test_walk },
                { "touch and second chance", test_touch_second_chance },
                { "node detection", test_node_of },
                { "concurrent add, delete, touch and walk", test_concurrent },
                {},
        };
        return test_run("lru", cases, NULL);
}
