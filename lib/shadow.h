/* SPDX-License-Identifier: MIT */
#pragma once

/* Shadow entries: what a list evicted lately, by key hash, and how far back (after the kernel's
 * mm/workingset.c). A ring of the last n evictions' hashes, indexed by an open-addressed table, so that a
 * miss finds its entry at once; and a Fenwick tree of the entries still live, so that its distance is
 * exact: not the evictions since (the kernel's refault distance, which also counts objects that came
 * back meanwhile and were evicted again) but one more than the objects evicted since that are still out,
 * which is by how many objects a larger LRU would have kept it (Mattson's stack distance less the list's
 * size). 20 bytes per entry. The cost of the misses that found one is kept per distance (powers of two),
 * decayed with time, for the value of the list's last bytes. Not locked: its owner (lru.c) holds a lock
 * around every call. */

#include <stddef.h>
#include <stdint.h>

struct shadow;

/* n entries (a power of two at least; at most 2^30). NULL: no memory. */
struct shadow *shadow_new(size_t n);
void shadow_free(struct shadow *sh);

/* An object with key hash was evicted. */
void shadow_evicted(struct shadow *sh, uint64_t hash);
/* A miss of hash at now_usec costing cost (0: one): its distance (1: evicted last) when an entry had it,
 * which is consumed, else 0. */
uint64_t shadow_miss(struct shadow *sh, uint64_t hash, uint64_t cost, uint64_t now_usec);
/* The cost per second of the misses found at distances up to about window objects (rounded down to the
 * buckets' edges, at least 1), decayed to now_usec; *ret_window: the distances covered. */
double shadow_rate(struct shadow *sh, uint64_t window, uint64_t now_usec, uint64_t *ret_window);

struct shadow_counts {
        uint64_t evictions, misses, hits, entries;
};
void shadow_counts(const struct shadow *sh, struct shadow_counts *ret);
