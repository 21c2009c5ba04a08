/* SPDX-License-Identifier: MIT */
/* Shadow entries of evicted objects, and the value of a list's last bytes (shadow.h). */
#include "shadow.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

/* Distances by powers of two: bucket b holds 2^b .. 2^(b+1)-1. */
#define SHADOW_BUCKETS 32
/* How long a found miss counts for the value: about this long (exponential decay). */
#define SHADOW_DECAY_USEC (10ULL * 1000 * 1000)

struct shadow {
        size_t n;          /* ring entries, a power of two */
        uint64_t *ring;    /* hash of eviction e at e % n; 0: consumed or none */
        uint32_t *index;   /* 2n slots: ring position + 1 (0: empty), linear probing by hash */
        size_t index_mask;
        uint32_t *live;    /* Fenwick tree over ring positions: 1 for each entry that is still out */
        uint64_t evictions, misses, hits;
        double cost[SHADOW_BUCKETS]; /* decayed cost of found misses, per distance bucket */
        uint64_t cost_usec;          /* when cost was decayed to */
};

struct shadow *shadow_new(size_t n) {
        size_t size = 64;
        while (size < n && size < ((size_t) 1 << 30))
                size <<= 1;
        struct shadow *sh = calloc(1, sizeof(*sh));
        if (!sh)
                return NULL;
        sh->n = size;
        sh->ring = calloc(size, sizeof(*sh->ring));
        sh->index = calloc(2 * size, sizeof(*sh->index));
        sh->index_mask = 2 * size - 1;
        sh->live = calloc(size + 1, sizeof(*sh->live));
        if (!sh->ring || !sh->index || !sh->live) {
                shadow_free(sh);
                return NULL;
        }
        return sh;
}

void shadow_free(struct shadow *sh) {
        if (!sh)
                return;
        free(sh->ring);
        free(sh->index);
        free(sh->live);
        free(sh);
}

/* Applications' hashes may be poor (small integers): spread them over the index. */
static size_t slot_of(const struct shadow *sh, uint64_t hash) {
        hash ^= hash >> 33;
        hash *= 0xff51afd7ed558ccdULL;
        hash ^= hash >> 33;
        return (size_t) hash & sh->index_mask;
}

/* The index slot that holds ring position pos (whose hash is hash), or SIZE_MAX. */
static size_t index_find(const struct shadow *sh, uint64_t hash, size_t pos) {
        for (size_t i = slot_of(sh, hash);; i = (i + 1) & sh->index_mask) {
                uint32_t v = sh->index[i];
                if (v == 0)
                        return SIZE_MAX;
                if (v - 1 == pos)
                        return i;
        }
}

/* The ring position whose entry has hash, or SIZE_MAX. */
static size_t index_lookup(const struct shadow *sh, uint64_t hash) {
        for (size_t i = slot_of(sh, hash);; i = (i + 1) & sh->index_mask) {
                uint32_t v = sh->index[i];
                if (v == 0)
                        return SIZE_MAX;
                if (sh->ring[v - 1] == hash)
                        return v - 1;
        }
}

/* Empty slot i, moving back the entries after it that would no longer be found (no tombstones). */
static void index_delete(struct shadow *sh, size_t i) {
        size_t j = i;
        for (;;) {
                sh->index[i] = 0;
                for (;;) {
                        j = (j + 1) & sh->index_mask;
                        uint32_t v = sh->index[j];
                        if (v == 0)
                                return;
                        size_t home = slot_of(sh, sh->ring[v - 1]);
                        /* v may stay at j only if its home lies cyclically in (i, j]. */
                        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
                        if (!stays)
                                break;
                }
                sh->index[i] = sh->index[j];
                i = j;
        }
}

static void live_add(struct shadow *sh, size_t pos, int delta) {
        for (size_t i = pos + 1; i <= sh->n; i += i & -i)
                sh->live[i] += (uint32_t) delta;
}

/* Live entries at ring positions 0 .. pos. */
static uint64_t live_upto(const struct shadow *sh, size_t pos) {
        uint64_t sum = 0;
        for (size_t i = pos + 1; i > 0; i -= i & -i)
                sum += sh->live[i];
        return sum;
}

/* Live entries evicted after the one at pos (up to the newest, at newest), around the ring. */
static uint64_t live_after(const struct shadow *sh, size_t pos, size_t newest) {
        if (pos == newest)
                return 0;
        if (pos < newest)
                return live_upto(sh, newest) - live_upto(sh, pos);
        return live_upto(sh, sh->n - 1) - live_upto(sh, pos) + live_upto(sh, newest);
}

static void entry_drop(struct shadow *sh, size_t pos) {
        uint64_t hash = sh->ring[pos];
        if (hash == 0)
                return;
        live_add(sh, pos, -1);
        size_t i = index_find(sh, hash, pos);
        if (i != SIZE_MAX)
                index_delete(sh, i);
        sh->ring[pos] = 0;
}

void shadow_evicted(struct shadow *sh, uint64_t hash) {
        hash = hash ? hash : 1; /* 0 marks an empty entry */
        /* Evicted again without a miss between (it came back some other way): the older entry is stale. */
        size_t old = index_lookup(sh, hash);
        if (old != SIZE_MAX)
                entry_drop(sh, old);
        size_t pos = (size_t) (sh->evictions & (sh->n - 1));
        entry_drop(sh, pos);
        sh->ring[pos] = hash;
        size_t i = slot_of(sh, hash);
        while (sh->index[i] != 0)
                i = (i + 1) & sh->index_mask;
        sh->index[i] = (uint32_t) pos + 1;
        live_add(sh, pos, +1);
        sh->evictions++;
}

static void decay(struct shadow *sh, uint64_t now_usec) {
        if (now_usec <= sh->cost_usec)
                return;
        double f = exp(-(double) (now_usec - sh->cost_usec) / (double) SHADOW_DECAY_USEC);
        for (int b = 0; b < SHADOW_BUCKETS; b++)
                sh->cost[b] *= f;
        sh->cost_usec = now_usec;
}

static int bucket_of(uint64_t distance) {
        int b = 63 - __builtin_clzll(distance);
        return b < SHADOW_BUCKETS ? b : SHADOW_BUCKETS - 1;
}

uint64_t shadow_miss(struct shadow *sh, uint64_t hash, uint64_t cost, uint64_t now_usec) {
        hash = hash ? hash : 1;
        sh->misses++;
        size_t pos = index_lookup(sh, hash);
        if (pos == SIZE_MAX)
                return 0;
        size_t newest = (size_t) ((sh->evictions - 1) & (sh->n - 1));
        uint64_t distance = 1 + live_after(sh, pos, newest);
        entry_drop(sh, pos);
        sh->hits++;
        decay(sh, now_usec);
        sh->cost[bucket_of(distance)] += (double) (cost ? cost : 1);
        return distance;
}

double shadow_rate(struct shadow *sh, uint64_t window, uint64_t now_usec, uint64_t *ret_window) {
        decay(sh, now_usec);
        uint64_t covered = sh->evictions < sh->n ? sh->evictions : sh->n;
        window = window < covered ? window : covered;
        double sum = 0;
        uint64_t upto = 0;
        /* Whole buckets only: bucket b ends at 2^(b+1) - 1. */
        for (int b = 0; b < SHADOW_BUCKETS && (((uint64_t) 2 << b) - 1) <= window; b++) {
                sum += sh->cost[b];
                upto = ((uint64_t) 2 << b) - 1;
        }
        *ret_window = upto;
        /* A decayed sum of events over a time constant T is their rate times T. */
        return upto > 0 ? sum * 1e6 / (double) SHADOW_DECAY_USEC : 0;
}

void shadow_counts(const struct shadow *sh, struct shadow_counts *ret) {
        *ret = (struct shadow_counts){
                .evictions = sh->evictions,
                .misses = sh->misses,
                .hits = sh->hits,
                .entries = sh->n,
        };
}
