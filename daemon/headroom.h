/* SPDX-License-Identifier: MIT */
#pragma once

/* The second source of a level: how close a scope is to the limit that will act on it. PSI measures
 * time stalled in reclaim; a group of anonymous memory without swap has nothing to reclaim, barely
 * stalls, and meets the OOM killer at its limit. Headroom sees it coming: the part of the usage that
 * the kernel cannot reclaim (usage minus file pages), as a fraction of the limit.
 * Pure: numbers in, level and bytes out (docs/levels.md). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "level.h"

/* Where each level starts, in the unreclaimable share of a limit: a fraction of it, rising from low to
 * critical, or, where left[l] is not 0, a size of room left under it (headroom_low=512M: low once less
 * than 512 MiB is left, as earlyoom's -M takes a size). [LEVEL_OK] is unused. */
struct headroom_thresholds {
        double f[_LEVEL_MAX];
        uint64_t left[_LEVEL_MAX];
};

void headroom_thresholds_default(struct headroom_thresholds *ret);
/* Each fraction in (0, 1], each size above 0, rising with the level among those of one kind (a size
 * and a fraction compare only against a limit). -EINVAL otherwise. */
int headroom_thresholds_check(const struct headroom_thresholds *t);
/* The usage (unreclaimable) at which level l starts under a limit. */
uint64_t headroom_threshold_used(const struct headroom_thresholds *t, enum level l, uint64_t limit);

/* One group on the way from a scope's cgroup to the root that has a limit: its own usage, its limit
 * (the lower of memory.high and memory.max on v2, memory.limit_in_bytes on v1) and what the kernel can
 * take back (file pages, active and inactive, its descendants' included). For the system scope: MemTotal as
 * the limit, MemTotal - MemAvailable as the usage, reclaimable 0. */
struct headroom_group {
        uint64_t usage, limit, reclaimable;
        uint64_t peak; /* the highest usage the kernel recorded (memory.peak, v1 max_usage_in_bytes); usage where unknown */
};

/* A group's limit binds its descendants: of the scope's own group and its ancestors, the one nearest to
 * its limit (the highest unreclaimable fraction) decides. */
struct headroom {
        enum level level;    /* before hysteresis */
        size_t binding;      /* index of the deciding group; meaningless when n == 0 */
        double fraction;     /* its unreclaimable part over its limit; 0 with no limit at all */
        uint64_t left;       /* its room left under its limit (UINT64_MAX with no limit at all) */
        uint64_t limit;      /* its limit; UINT64_MAX: no limit anywhere */
        uint64_t over_bytes; /* how far it is past the low threshold: what brings it back to ok */
        uint64_t room_bytes; /* how far the nearest group is from the low threshold (0 when past it) */
};

void headroom_evaluate(const struct headroom_group *groups, size_t n, const struct headroom_thresholds *t,
                       struct headroom *ret);

/* When to look again at a scope below its low threshold: half the time the nearest group needs to reach
 * it at its measured growth (bytes per second), assuming at least floor_per_mille of its limit per second,
 * so that a group that has not grown yet is not forgotten; within [min_usec, max_usec]. */
uint64_t headroom_next_check_usec(const struct headroom *h, uint64_t growth_per_sec, unsigned floor_per_mille,
                                  uint64_t min_usec, uint64_t max_usec);

/* A field of a memory.stat or /proc/meminfo text ("key value" lines; meminfo's "key: value kB" too,
 * returned in bytes). -ENODATA when the key is not there, -EINVAL when its value is not a number. */
int headroom_parse_field(const char *text, const char *key, uint64_t *ret);
