/* SPDX-License-Identifier: MIT */
#pragma once

/* Whose stall a scope's PSI holds. A task stalled by its own group's limit counts in that group's
 * memory.pressure and in every ancestor's, up to /proc/pressure/memory: a user thrashing inside its own
 * 32 MiB limit raised the system level on a busy machine, and made a full ancestor's regulator ask a
 * neighbour's cache. This follows the groups below a scope and counts, as "explained", the stall of
 * those whose own limit is reclaiming (their limit events grew: cgroup_limit_events()); the scope keeps
 * the rest as its own. A group whose own limit is quiet is looked into, a few levels down, for such
 * groups of its own. Bounded: at most LIMIT_STALL_READS_MAX groups read per look, and only groups whose
 * stall grew are looked into. */

#include <stdbool.h>
#include <stdint.h>

#include "cgroup.h"

#define LIMIT_STALL_READS_MAX 128
#define LIMIT_STALL_DEPTH_MAX 4
#define LIMIT_STALL_TRACKED_MAX 256 /* per scope: a few hundred bytes each, over every watched scope */
/* A scope looks at the groups below it at most this often. */
#define LIMIT_STALL_LOOK_USEC 250000
/* A group's limit counts as reclaiming this long after its events last grew. */
#define LIMIT_STALL_RECENT_USEC (10 * 1000000ULL)

struct limit_stall_group; /* one group below, as last read */

struct limit_stall {
        struct hashmap *by_path;
        struct limit_stall_group **groups;
        size_t n_groups;
        uint64_t look;          /* count of updates, to drop groups not seen for a while */
        uint64_t some, full;    /* explained stall, cumulative µs */
        uint64_t below_some, below_full; /* what the groups below explained, summed, uncapped */
        uint64_t scope_some, scope_full; /* what the scope itself stalled meanwhile */
        uint64_t last_some;     /* explained in the last update */
        bool primed;            /* one update done: deltas mean something */
};

int limit_stall_init(struct limit_stall *ls);
void limit_stall_done(struct limit_stall *ls);

/* Read the groups below cgroup ("/" for the whole machine) and add what their own limits explain since
 * the last update, at most what the scope itself stalled since then (own_some_delta, own_full_delta). */
void limit_stall_update(struct limit_stall *ls, const struct cgroup_layout *l, const char *cgroup, uint64_t now,
                        uint64_t own_some_delta, uint64_t own_full_delta);

/* What a walk found in one group, for the pure step (tests): its stall since the last look, and
 * whether its own limit reclaimed lately. The stall the group explains: all of its own if its
 * limit reclaimed, else what its children explain (at most its own). */
uint64_t limit_stall_explains(uint64_t stall_delta, bool limit_reclaimed, uint64_t children_explain);
