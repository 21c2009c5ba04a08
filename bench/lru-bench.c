/* SPDX-License-Identifier: MIT */
/* LRU speed: pressure_lru against the baseline an application would write itself, a plain doubly-linked
 * list under one mutex, in the same run. Operations: add+delete pairs, and touch (mark used) of objects on
 * the list, on 1 and 2 threads. Prints a table with millions of operations per second and the ratio.
 * Then value: a full list's eviction (add one, evict the oldest) and its hits (touch), with shadow
 * entries and without, and a miss looked up in them; and what the shadow table holds against the list. */

#include <pthread.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pressure.h"

#define OBJECTS 65536
#define OPS (4u * 1000 * 1000)

struct plain_node {
        struct plain_node *prev, *next;
        int on;
};

struct plain_list {
        pthread_mutex_t lock;
        struct plain_node head;
};

struct obj {
        struct pressure_lru_node lru;
        struct plain_node plain;
};

static struct pressure_lru *lru;
static struct plain_list plain = { .lock = PTHREAD_MUTEX_INITIALIZER };
static struct obj *objs;

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void plain_add(struct plain_node *n) {
        pthread_mutex_lock(&plain.lock);
        if (!n->on) {
                n->prev = plain.head.prev;
                n->next = &plain.head;
                plain.head.prev->next = n;
                plain.head.prev = n;
                n->on = 1;
        }
        pthread_mutex_unlock(&plain.lock);
}

static void plain_del(struct plain_node *n) {
        pthread_mutex_lock(&plain.lock);
        if (n->on) {
                n->prev->next = n->next;
                n->next->prev = n->prev;
                n->on = 0;
        }
        pthread_mutex_unlock(&plain.lock);
}

/* A touch in a plain list is the classic move-to-front under the lock. */
static void plain_touch(struct plain_node *n) {
        pthread_mutex_lock(&plain.lock);
        if (n->on) {
                n->prev->next = n->next;
                n->next->prev = n->prev;
                n->prev = plain.head.prev;
                n->next = &plain.head;
                plain.head.prev->next = n;
                plain.head.prev = n;
        }
        pthread_mutex_unlock(&plain.lock);
}

struct job {
        int kind; /* 0 lru add+del, 1 lru touch, 2 plain add+del, 3 plain touch */
        int thread, threads;
};

static void *run(void *arg) {
        struct job *j = arg;
        unsigned per = OPS / (unsigned) j->threads;
        /* Each thread works on its own slice of objects, on its own node's sublist when it can. */
        unsigned base = (unsigned) j->thread * (OBJECTS / (unsigned) j->threads), span = OBJECTS / (unsigned) j->threads;
        int nid = j->thread % pressure_lru_get_n_nodes(lru);
        for (unsigned i = 0; i < per; i++) {
                struct obj *o = &objs[base + (i * 7919u) % span];
                switch (j->kind) {
                case 0:
                        pressure_lru_add(lru, &o->lru, nid);
                        pressure_lru_del(lru, &o->lru);
                        break;
                case 1: pressure_lru_touch(&o->lru); break;
                case 2:
                        plain_add(&o->plain);
                        plain_del(&o->plain);
                        break;
                default: plain_touch(&o->plain);
                }
        }
        return NULL;
}

static double measure(int kind, int threads) {
        pthread_t t[8];
        struct job j[8];
        double start = now();
        for (int i = 0; i < threads; i++) {
                j[i] = (struct job){ .kind = kind, .thread = i, .threads = threads };
                pthread_create(&t[i], NULL, run, &j[i]);
        }
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        return (double) OPS / (now() - start) / 1e6;
}

/* What giving memory back costs next to the scan it follows: free half of 65,536 values of 1 KiB
 * (every other one, so that the heap is full of holes), then malloc_trim(0) as libpressure does after
 * scans. The baseline is the frees themselves. */
static void measure_trim(void) {
        enum { N = 65536, SIZE = 1024 };
        static void *v[N];
        double free_s = 0, trim_s = 0;
        for (int rep = 0; rep < 5; rep++) {
                for (int i = 0; i < N; i++)
                        memset(v[i] = malloc(SIZE), 1, SIZE);
                double t0 = now();
                for (int i = 0; i < N; i += 2)
                        free(v[i]);
                double t1 = now();
                malloc_trim(0);
                double t2 = now();
                free_s += t1 - t0;
                trim_s += t2 - t1;
                for (int i = 1; i < N; i += 2)
                        free(v[i]);
                malloc_trim(0);
        }
        printf("\n%-30s %12s %12s %8s\n", "give memory back", "free (us)", "trim (us)", "ratio");
        printf("%-30s %12.0f %12.0f %7.2fx\n", "64 MiB heap, every other freed", free_s / 5 * 1e6, trim_s / 5 * 1e6,
               trim_s / free_s);
}

/* Value: the same list with shadow entries and without. Each eviction makes one; each miss looks one
 * up; a hit (touch) never goes near them. */
static uint64_t obj_key(const struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        return (uint64_t) (uintptr_t) n * 0x9e3779b97f4a7c15ULL;
}

static enum pressure_lru_status evict_one(struct pressure_lru_node *n, void *userdata) {
        (void) n, (void) userdata;
        return PRESSURE_LRU_REMOVED;
}

/* OPS evictions from a full list of OBJECTS / 2: add the next object, evict the oldest. */
static double measure_evict(struct pressure_lru *l, struct obj *o) {
        for (int i = 0; i < OBJECTS / 2; i++)
                pressure_lru_add(l, &o[i].lru, 0);
        double start = now();
        for (unsigned i = 0; i < OPS; i++) {
                struct pressure_lru_node *dispose;
                uint64_t budget = 1;
                pressure_lru_add(l, &o[(OBJECTS / 2 + i) % OBJECTS].lru, 0);
                if (pressure_lru_walk_node(l, 0, evict_one, NULL, &budget, &dispose) == 1)
                        pressure_lru_node_init(dispose);
        }
        double rate = (double) OPS / (now() - start) / 1e6;
        struct pressure_lru_node *dispose;
        uint64_t all = UINT64_MAX;
        if (pressure_lru_walk_node(l, 0, evict_one, NULL, &all, &dispose) > 0)
                for (struct pressure_lru_node *n = dispose, *next; n; n = next) {
                        next = n->next;
                        pressure_lru_node_init(n);
                }
        return rate;
}

static double measure_touch(struct obj *o) {
        double start = now();
        for (unsigned i = 0; i < OPS; i++)
                pressure_lru_touch(&o[(i * 7919u) % OBJECTS].lru);
        return (double) OPS / (now() - start) / 1e6;
}

static void measure_value(void) {
        struct pressure_lru *with, *without;
        struct obj *o = calloc(OBJECTS, sizeof(*o)), *p = calloc(OBJECTS, sizeof(*p));
        if (!o || !p || pressure_lru_new(1, &with) < 0 || pressure_lru_new(1, &without) < 0 ||
            pressure_lru_set_shadow(with, obj_key, NULL, 0, 4096) < 0)
                return;
        for (int i = 0; i < OBJECTS; i++) {
                pressure_lru_node_init(&o[i].lru);
                pressure_lru_node_init(&p[i].lru);
        }
        printf("\n%-30s %14s %14s %8s\n", "value (1 thread)", "shadow", "none", "ratio");
        double a = measure_evict(with, o), b = measure_evict(without, p);
        printf("%-30s %11.1f M/s %11.1f M/s %7.2fx\n", "evict from a full list", a, b, a / b);
        for (int i = 0; i < OBJECTS; i++) {
                pressure_lru_add(with, &o[i].lru, 0);
                pressure_lru_add(without, &p[i].lru, 0);
        }
        a = measure_touch(o), b = measure_touch(p);
        printf("%-30s %11.1f M/s %11.1f M/s %7.2fx\n", "hit (touch)", a, b, a / b);
        double start = now();
        for (unsigned i = 0; i < OPS; i++)
                (void) pressure_lru_miss(with, (uint64_t) i * 0x9e3779b97f4a7c15ULL, 0);
        printf("%-30s %11.1f M/s\n", "miss looked up", (double) OPS / (now() - start) / 1e6);
        struct pressure_lru_shadow_stats st;
        if (pressure_lru_get_shadow_stats(with, &st, sizeof(st)) == 0)
                printf("shadow table: %llu entries, %llu KiB (20 bytes each): %.2f%% of a list of %d objects of 4 KiB\n",
                       (unsigned long long) st.entries, (unsigned long long) st.entries * 20 / 1024,
                       100.0 * (double) st.entries * 20 / ((double) OBJECTS * 4096), OBJECTS);
        pressure_lru_free(with);
        pressure_lru_free(without);
        free(o);
        free(p);
}

int main(void) {
        /* Two sublists even on a one-node machine, so that two threads can use one each, as they would on
         * two nodes. */
        if (pressure_lru_new(2, &lru) < 0)
                return 1;
        plain.head.next = plain.head.prev = &plain.head;
        objs = calloc(OBJECTS, sizeof(*objs));
        for (int i = 0; i < OBJECTS; i++)
                pressure_lru_node_init(&objs[i].lru);

        printf("%-14s %8s %14s %14s %8s\n", "operation", "threads", "pressure_lru", "mutex list", "ratio");
        for (int threads = 1; threads <= 2; threads++) {
                double a = measure(0, threads), b = measure(2, threads);
                printf("%-14s %8d %11.1f M/s %11.1f M/s %7.2fx\n", "add+delete", threads, a, b, a / b);
        }
        /* Touch needs the objects on the lists. */
        for (int i = 0; i < OBJECTS; i++) {
                pressure_lru_add(lru, &objs[i].lru, (i / (OBJECTS / 2)) % 2);
                plain_add(&objs[i].plain);
        }
        for (int threads = 1; threads <= 2; threads++) {
                double a = measure(1, threads), b = measure(3, threads);
                printf("%-14s %8d %11.1f M/s %11.1f M/s %7.2fx\n", "touch", threads, a, b, a / b);
        }
        measure_trim();
        measure_value();
        return 0;
}
