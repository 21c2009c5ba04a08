/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure.h"
#include "test-util.h"

struct obj {
        int key;
        int freed; /* the concurrency test: times the holder of a dispose list "freed" it */
        struct pressure_lru_node lru;
};

#define OBJ(n) PRESSURE_LRU_ENTRY(n, struct obj, lru)

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
        /* Isolated: the dispose list's holder owns them; add() and del() say so and change nothing. */
        CU_ASSERT_EQUAL(o[0].lru.nid, PRESSURE_LRU_ISOLATED);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[0].lru, 0), -EBUSY);
        CU_ASSERT_EQUAL(pressure_lru_del(lru, &o[0].lru), -EBUSY);
        CU_ASSERT_PTR_EQUAL(dispose, &o[0].lru);
        CU_ASSERT_PTR_EQUAL(o[0].lru.next, &o[1].lru);
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

        /* Given back by its holder, an isolated object may be added again. */
        pressure_lru_node_init(&o[0].lru);
        CU_ASSERT_EQUAL(pressure_lru_add(lru, &o[0].lru, 0), 1);
        CU_ASSERT_EQUAL(pressure_lru_del(lru, &o[0].lru), 1);
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

/* What the header allows, and nothing more: mutators add, delete and touch any object from any thread
 * with no lock of their own; walkers run the built-in shrinker's walk (second chance, then "free" what
 * they isolated: here, give it back to the pool with pressure_lru_node_init()). Nobody else ever frees an
 * object, so a del() that returns -EBUSY is the header's word that the walker owns it. */
#define THREADS 4
#define PER_THREAD 2000
#define ROUNDS 200

static struct pressure_lru *shared;
static struct obj *pool;
static unsigned long busy_answers;

static void *mutator(void *arg) {
        int t = (int) (long) arg;
        unsigned seed = (unsigned) t;
        unsigned long busy = 0;
        for (int r = 0; r < ROUNDS; r++)
                for (int i = 0; i < PER_THREAD; i++) {
                        /* any object, also those other threads work on */
                        struct obj *o = &pool[rand_r(&seed) % (THREADS * PER_THREAD)];
                        int op = rand_r(&seed) % 3, nid = rand_r(&seed) % 2, ret;
                        if (op == 2) {
                                pressure_lru_touch(&o->lru); /* the hot path takes no lock */
                                continue;
                        }
                        ret = op == 0 ? pressure_lru_add(shared, &o->lru, nid) : pressure_lru_del(shared, &o->lru);
                        CU_ASSERT(ret == 0 || ret == 1 || ret == -EBUSY);
                        busy += ret == -EBUSY;
                }
        __atomic_add_fetch(&busy_answers, busy, __ATOMIC_RELAXED);
        return NULL;
}

static enum pressure_lru_status second_chance_any(struct pressure_lru_node *n, void *ud) {
        (void) ud;
        return pressure_lru_test_and_clear_referenced(n) ? PRESSURE_LRU_ROTATE : PRESSURE_LRU_REMOVED;
}

/* The holder of a dispose list frees what is on it: each exactly once, and each still isolated. */
static void free_dispose(struct pressure_lru_node *d) {
        while (d) {
                struct pressure_lru_node *next = d->next;
                CU_ASSERT_EQUAL(__atomic_load_n(&d->nid, __ATOMIC_ACQUIRE), PRESSURE_LRU_ISOLATED);
                __atomic_add_fetch(&OBJ(d)->freed, 1, __ATOMIC_RELAXED);
                pressure_lru_node_init(d);
                d = next;
        }
}

static volatile int stop_walkers;

static void *walker(void *arg) {
        int nid = (int) (long) arg;
        /* A thousand walks at least, however the threads are scheduled: on a busy machine the mutators
         * may be done before a walker first runs. */
        for (unsigned walks = 0; walks < 1000 || !__atomic_load_n(&stop_walkers, __ATOMIC_RELAXED); walks++) {
                struct pressure_lru_node *d;
                uint64_t budget = 64;
                pressure_lru_walk_node(shared, nid, second_chance_any, NULL, &budget, &d);
                for (int k = 0; k < 20; k++)
                        sched_yield(); /* hold them a moment: the mutators meet isolated objects */
                free_dispose(d);
        }
        return NULL;
}

static void test_concurrent(void) {
        pthread_t m[THREADS], w[2];
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &shared), 0);
        pool = objs_new(THREADS * PER_THREAD);
        stop_walkers = 0;
        busy_answers = 0;
        for (long i = 0; i < 2; i++)
                pthread_create(&w[i], NULL, walker, (void *) i);
        for (long i = 0; i < THREADS; i++)
                pthread_create(&m[i], NULL, mutator, (void *) i);
        for (int i = 0; i < THREADS; i++)
                pthread_join(m[i], NULL);
        __atomic_store_n(&stop_walkers, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < 2; i++)
                pthread_join(w[i], NULL);
        printf("(%lu add/del answered busy) ", busy_answers);

        /* Every object is on exactly the list its nid says, none is left isolated, the counts add up,
         * and the walkers freed something. */
        uint64_t on[2] = { 0, 0 }, freed = 0;
        for (int i = 0; i < THREADS * PER_THREAD; i++) {
                CU_ASSERT(pool[i].lru.nid >= -1 && pool[i].lru.nid <= 1);
                if (pool[i].lru.nid >= 0)
                        on[pool[i].lru.nid]++;
                freed += (uint64_t) pool[i].freed;
        }
        CU_ASSERT(freed > 0);
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 0), on[0]);
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 1), on[1]);
        /* Walking everything away leaves both lists empty and consistent. */
        for (int nid = 0; nid < 2; nid++) {
                struct pressure_lru_node *d;
                uint64_t budget = UINT64_MAX, got = 0;
                for (int pass = 0; pass < 3; pass++) {
                        got += pressure_lru_walk_node(shared, nid, second_chance_any, NULL, &budget, &d);
                        free_dispose(d);
                }
                CU_ASSERT_EQUAL(got, on[nid]);
                CU_ASSERT_EQUAL(pressure_lru_count_node(shared, nid), 0u);
        }
        pressure_lru_free(shared);
        free(pool);
}

/* Two threads adding the same objects to different nodes at once: each is linked once. */
static void *adder(void *arg) {
        int nid = (int) (long) arg;
        for (int r = 0; r < 50; r++)
                for (int i = 0; i < THREADS * PER_THREAD; i++)
                        if (pressure_lru_add(shared, &pool[i].lru, nid) < 0)
                                CU_FAIL("add of an object on no list failed");
        return NULL;
}

static void *deleter(void *arg) {
        (void) arg;
        for (int r = 0; r < 50; r++)
                for (int i = 0; i < THREADS * PER_THREAD; i++)
                        (void) pressure_lru_del(shared, &pool[i].lru);
        return NULL;
}

static void test_concurrent_add(void) {
        pthread_t t[3];
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &shared), 0);
        pool = objs_new(THREADS * PER_THREAD);
        pthread_create(&t[0], NULL, adder, (void *) 0L);
        pthread_create(&t[1], NULL, adder, (void *) 1L);
        pthread_create(&t[2], NULL, deleter, NULL);
        for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        uint64_t on[2] = { 0, 0 };
        for (int i = 0; i < THREADS * PER_THREAD; i++)
                if (pool[i].lru.nid >= 0)
                        on[pool[i].lru.nid]++;
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 0), on[0]);
        CU_ASSERT_EQUAL(pressure_lru_count_node(shared, 1), on[1]);
        for (int i = 0; i < THREADS * PER_THREAD; i++)
                (void) pressure_lru_del(shared, &pool[i].lru);
        CU_ASSERT_EQUAL(pressure_lru_count(shared), 0u);
        pressure_lru_free(shared);
        free(pool);
}

/* An isolate callback that answers something the header does not name is a programming error: the walk
 * aborts rather than skip it silently. */
static enum pressure_lru_status nonsense(struct pressure_lru_node *n, void *ud) {
        (void) n;
        (void) ud;
        return (enum pressure_lru_status) 42;
}

static void test_unknown_status_aborts(void) {
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
                struct pressure_lru *lru;
                struct obj *o = objs_new(1);
                struct pressure_lru_node *d;
                uint64_t budget = 1;
                signal(SIGABRT, SIG_DFL);
                if (pressure_lru_new(1, &lru) < 0 || pressure_lru_add(lru, &o->lru, 0) != 1)
                        _exit(3);
                (void) close(STDERR_FILENO); /* the assertion's message */
                pressure_lru_walk_node(lru, 0, nonsense, NULL, &budget, &d);
                _exit(0);
        }
        int status;
        CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
        CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void count_and_free(struct pressure_lru_node *n, void *ud) {
        (*(unsigned *) ud)++;
        CU_ASSERT_EQUAL(n->nid, PRESSURE_LRU_ISOLATED);
        free(OBJ(n));
}

/* Draining hands every object on every node to the free callback, once, and leaves the lists empty. */
static void test_drain(void) {
        struct pressure_lru *lru;
        unsigned freed = 0;
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(3, &lru), 0);
        for (int i = 0; i < 30; i++) {
                struct obj *o = calloc(1, sizeof(*o));
                pressure_lru_node_init(&o->lru);
                CU_ASSERT_EQUAL(pressure_lru_add(lru, &o->lru, i % 3), 1);
        }
        CU_ASSERT_EQUAL(pressure_lru_drain(lru, count_and_free, &freed), 30u);
        CU_ASSERT_EQUAL(freed, 30u);
        CU_ASSERT_EQUAL(pressure_lru_count(lru), 0u);
        CU_ASSERT_EQUAL(pressure_lru_drain(lru, count_and_free, &freed), 0u);
        CU_ASSERT_EQUAL(pressure_lru_drain(NULL, count_and_free, &freed), 0u);
        pressure_lru_free(lru);
}

/* The helpers for shrinkers of one's own walk the request's node for its nr_to_scan and say how many
 * they looked at. */
static void test_shrink_helpers(void) {
        struct pressure_lru *lru;
        struct pressure_lru_node *d;
        unsigned freed = 0;
        int calls = 0;
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &lru), 0);
        for (int i = 0; i < 10; i++) {
                struct obj *o = calloc(1, sizeof(*o));
                pressure_lru_node_init(&o->lru);
                CU_ASSERT_EQUAL(pressure_lru_add(lru, &o->lru, 1), 1);
        }
        struct pressure_shrink_control sc = { .node = 1, .nr_to_scan = 4 };
        CU_ASSERT_EQUAL(pressure_lru_shrink_count(lru, &sc), 10u);
        CU_ASSERT_EQUAL(pressure_lru_shrink_walk(lru, &sc, remove_all, &calls, &d), 4u);
        CU_ASSERT_EQUAL(sc.nr_scanned, 4u);
        for (struct pressure_lru_node *next; d; d = next) {
                next = d->next;
                count_and_free(d, &freed);
        }
        CU_ASSERT_EQUAL(pressure_lru_shrink_count(lru, &sc), 6u);
        sc.nr_to_scan = 100; /* more than there is: scanned says what was */
        CU_ASSERT_EQUAL(pressure_lru_shrink_walk(lru, &sc, remove_all, &calls, &d), 6u);
        CU_ASSERT_EQUAL(sc.nr_scanned, 6u);
        for (struct pressure_lru_node *next; d; d = next) {
                next = d->next;
                count_and_free(d, &freed);
        }
        sc.node = 7; /* no such node: nothing */
        CU_ASSERT_EQUAL(pressure_lru_shrink_count(lru, &sc), 0u);
        CU_ASSERT_EQUAL(pressure_lru_shrink_walk(lru, &sc, remove_all, &calls, &d), 0u);
        CU_ASSERT_PTR_NULL(d);
        CU_ASSERT_EQUAL(freed, 10u);
        pressure_lru_free(lru);
}

/* A list has one shrinker at a time, and may get another once it is freed. No daemon is needed to make
 * one: the client registers in the background. */
static void test_shrinker_again_after_free(void) {
        struct pressure_lru *lru;
        struct pressure_client *c;
        struct pressure_shrinker *s, *t;
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new("/nonexistent/pressured-test.sock", &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_shrinker_alloc(lru, c, "again", 0, 64, NULL, count_and_free, NULL, &s), 0);
        CU_ASSERT_EQUAL(pressure_lru_shrinker_alloc(lru, c, "again", 0, 64, NULL, count_and_free, NULL, &t), -EBUSY);
        CU_ASSERT_EQUAL(pressure_shrinker_set_seeks(s, 0), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_seeks(s, 1001), -EINVAL);
        CU_ASSERT_EQUAL(pressure_shrinker_set_batch(s, 0), -EINVAL);
        CU_ASSERT_EQUAL(pressure_shrinker_set_batch(s, PRESSURE_SHRINKER_DEFAULT), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_batch(s, 32), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_register(s), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_get_id(s), 0u); /* no daemon there */
        CU_ASSERT_PTR_EQUAL(pressure_shrinker_get_client(s), c);
        pressure_shrinker_free(s);
        CU_ASSERT_EQUAL(pressure_lru_shrinker_new(lru, c, "again", 0, 64, NULL, count_and_free, NULL, &t), 0);
        pressure_shrinker_free(t);
        pressure_client_unref(c);
        pressure_lru_free(lru);
        /* The version the library says it is, as the build says. */
        CU_ASSERT_STRING_EQUAL(pressure_get_version(), PRESSURED_VERSION);
}

/* ---- value: shadow entries against Mattson's stack algorithm ---- */

#define MATTSON_KEYS 2000
#define MATTSON_ACCESSES 100000
#define MATTSON_CACHE 400  /* objects the list keeps */
#define MATTSON_WINDOW 128 /* the marginal hit rate over this many more */

/* A Zipf-like key (exponent about 0.8) from a fixed sequence: the same trace every run. */
static int mattson_key(uint64_t *seed) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double) (*seed >> 11) / (double) (1ULL << 53);
        int k = (int) (pow(u, 5.0) * MATTSON_KEYS); /* u^5: small keys far more often */
        return k < MATTSON_KEYS ? k : MATTSON_KEYS - 1;
}

static uint64_t key_of(const struct pressure_lru_node *item, void *userdata) {
        (void) userdata;
        return (uint64_t) OBJ(item)->key * 2654435761u;
}

static enum pressure_lru_status evict(struct pressure_lru_node *item, void *userdata) {
        (void) item, (void) userdata;
        return PRESSURE_LRU_REMOVED;
}

/* The exact stack distance of each access (1: used last; 0: first use), as Mattson's algorithm finds it:
 * a cache of C objects hits it exactly when it is at most C. */
static int stack_distance(int *stack, int *depth, int key) {
        int d = 0;
        for (int i = 0; i < *depth; i++)
                if (stack[i] == key) {
                        d = i + 1;
                        break;
                }
        int from = d > 0 ? d - 1 : (*depth)++;
        memmove(stack + 1, stack, (size_t) from * sizeof(int));
        stack[0] = key;
        return d;
}

static void test_value_mattson(void) {
        struct pressure_lru *lru;
        struct obj *o = objs_new(MATTSON_KEYS);
        int *stack = calloc(MATTSON_KEYS, sizeof(int)), depth = 0;
        bool *cached = calloc(MATTSON_KEYS, sizeof(bool));
        uint64_t seed = 42, exact = 0, found = 0, evictions = 0, misses = 0, found_any = 0;

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        CU_ASSERT_EQUAL(pressure_lru_get_value(lru), 0);
        CU_ASSERT_EQUAL(pressure_lru_set_shadow(lru, key_of, NULL, 1024, 4096), 0);
        CU_ASSERT_EQUAL(pressure_lru_set_shadow(lru, key_of, NULL, 1024, 4096), -EBUSY);
        for (int i = 0; i < MATTSON_ACCESSES; i++) {
                int k = mattson_key(&seed), sd = stack_distance(stack, &depth, k);
                exact += sd > MATTSON_CACHE && sd <= MATTSON_CACHE + MATTSON_WINDOW;
                if (cached[k]) {
                        CU_ASSERT(sd > 0 && sd <= MATTSON_CACHE); /* the list is an exact LRU */
                        pressure_lru_del(lru, &o[k].lru);
                        pressure_lru_add(lru, &o[k].lru, 0);
                        continue;
                }
                misses++;
                int64_t d = pressure_lru_miss(lru, key_of(&o[k].lru, NULL), 0);
                found += d > 0 && d <= MATTSON_WINDOW;
                found_any += d > 0;
                pressure_lru_add(lru, &o[k].lru, 0);
                cached[k] = true;
                if (pressure_lru_count(lru) > MATTSON_CACHE) {
                        uint64_t budget = 1;
                        struct pressure_lru_node *dispose;
                        CU_ASSERT_EQUAL(pressure_lru_walk_node(lru, 0, evict, NULL, &budget, &dispose), 1u);
                        cached[OBJ(dispose)->key] = false;
                        pressure_lru_node_init(dispose);
                        evictions++;
                }
        }
        /* The marginal hit rate of MATTSON_WINDOW more objects, per object, both ways. */
        double est = (double) found / MATTSON_ACCESSES / MATTSON_WINDOW,
               truth = (double) exact / MATTSON_ACCESSES / MATTSON_WINDOW;
        printf("\n    marginal hit rate at %d objects: %.3g per object (exact %.3g, %llu of %d accesses)", MATTSON_CACHE,
               est, truth, (unsigned long long) exact, MATTSON_ACCESSES);
        CU_ASSERT(exact > 1000); /* the trace has a slope there to measure */
        CU_ASSERT(est >= 0.9 * truth && est <= 1.1 * truth);

        struct pressure_lru_shadow_stats st;
        CU_ASSERT_EQUAL(pressure_lru_get_shadow_stats(lru, &st, sizeof(st)), 0);
        CU_ASSERT_EQUAL(st.evictions, evictions);
        CU_ASSERT_EQUAL(st.misses, misses);
        CU_ASSERT_EQUAL(st.shadow_hits, found_any);
        CU_ASSERT_EQUAL(st.entries, 1024u);
        /* Found misses at the tail (the last 64 evicted: MAX(400 / 16, 64)) make a value; each cost one. */
        CU_ASSERT(pressure_lru_get_value(lru) > 0);
        CU_ASSERT_EQUAL(pressure_lru_miss(NULL, 1, 0), -EINVAL);
        free(stack);
        free(cached);
        pressure_lru_free(lru);
        free(o);
}

/* A scan never comes back to what it evicted: nothing is found, the tail is worth nothing. A list without
 * a shadow table has no value to tell either. */
static void test_value_scan(void) {
        struct pressure_lru *lru, *plain;
        struct obj *o = objs_new(256);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &lru), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(1, &plain), 0);
        CU_ASSERT_EQUAL(pressure_lru_set_shadow(lru, key_of, NULL, 0, 4096), 0);
        for (int round = 0; round < 100; round++)
                for (int i = 0; i < 256; i++) {
                        int k = round * 256 + i; /* every key new */
                        CU_ASSERT_EQUAL(pressure_lru_miss(lru, (uint64_t) k * 2654435761u, 500), 0);
                        o[i].key = k;
                        pressure_lru_add(lru, &o[i].lru, 0);
                        uint64_t budget = 1;
                        struct pressure_lru_node *dispose;
                        if (pressure_lru_walk_node(lru, 0, evict, NULL, &budget, &dispose) == 1)
                                pressure_lru_node_init(dispose);
                }
        CU_ASSERT_EQUAL(pressure_lru_get_value(lru), 0);
        CU_ASSERT_EQUAL(pressure_lru_miss(plain, 1, 0), 0);
        CU_ASSERT_EQUAL(pressure_lru_get_value(plain), 0);
        struct pressure_lru_shadow_stats st;
        CU_ASSERT_EQUAL(pressure_lru_get_shadow_stats(plain, &st, sizeof(st)), -EINVAL);
        pressure_lru_free(lru);
        pressure_lru_free(plain);
        free(o);
}

int main(void) {
        static const struct test_case cases[] = {
                { "shrink count and walk helpers", test_shrink_helpers },
                { "a list's shrinker again after free", test_shrinker_again_after_free },
                { "add and delete", test_add_del },
                { "walk: removed, rotate, skip, stop, budget", test_walk },
                { "touch and second chance", test_touch_second_chance },
                { "node detection", test_node_of },
                { "concurrent add, delete, touch and walk", test_concurrent },
                { "concurrent adds of one object to two nodes", test_concurrent_add },
                { "an unknown isolate status aborts", test_unknown_status_aborts },
                { "drain before free", test_drain },
                { "value: found misses against Mattson's stack distances", test_value_mattson },
                { "value: a scan's tail is worth nothing", test_value_scan },
                {},
        };
        return test_run("lru", cases, NULL);
}
