/* SPDX-License-Identifier: MIT */
#pragma once

/* Whose memory is short. /proc/pressure/memory counts every task stalled on memory, also one stalled only
 * by its own cgroup's limit: a 16 MiB group reclaiming against its limit gives the whole machine 5 to 30%
 * `some` stall while 99% of it is free. The kernel tells the two apart in /proc/vmstat: pgscan_kswapd,
 * pgscan_direct and pgscan_khugepaged count only global reclaim (reclaim forced by a cgroup's limit is
 * counted in that cgroup's memory.stat). So the machine is short when global reclaim ran recently; where
 * a kernel has none of those counters, when less than half its memory is available (GLib's rule).
 * Parsers and the decision are pure; shortage_read() reads the two files below a root (fixtures in tests). */

#include <stdbool.h>
#include <stdint.h>

#include "level.h"

struct shortage {
        uint64_t scanned;   /* the global reclaim counters, summed */
        uint64_t read_usec; /* CLOCK_MONOTONIC of the last reading (0: never) */
        uint64_t grew_usec; /* when they were last seen growing (0: never) */
        bool have_counters; /* the kernel has them */
        bool have_available;
        double available;   /* MemAvailable / MemTotal at the last reading */
};

/* Sum of the global reclaim scan counters of a /proc/vmstat text; -ENODATA when it has none of them. */
int shortage_parse_vmstat(const char *text, uint64_t *ret);

/* Feed one reading (scanned < 0: no counters; available < 0: unknown). */
void shortage_feed(struct shortage *s, uint64_t now_usec, int64_t scanned, double available);

/* Read <root>/proc/vmstat and <root>/proc/meminfo, at most every min_interval_usec. */
void shortage_read(struct shortage *s, const char *root, uint64_t now_usec, uint64_t min_interval_usec);

/* Whether the machine as a whole was short of memory within the last recent_usec. */
bool shortage_machine(const struct shortage *s, uint64_t now_usec, uint64_t recent_usec);

/* Whether a limit of the group's own or of an ancestor's is where its stall comes from: the group's whole
 * usage is within a tenth of its limit (the kernel reclaims from a group at its limit). */
bool shortage_limit_binds(uint64_t usage, uint64_t limit);

/* One look at the limits on a cgroup's way to the root (its own and its limited ancestors'). */
struct limit_reading {
        uint64_t events;  /* their limit events (memory.events max and high, v1 failcnt), summed */
        bool have_events; /* every one of them could be read */
        bool near;        /* one of them has usage (or its recorded peak) within a tenth of its limit */
};

/* What a scope remembers of its limits' events between looks: written by shortage_limit_update() only. */
struct limit_watch {
        uint64_t events;
        uint64_t grew_usec; /* when their sum last grew (0: never seen to) */
        bool have;
};

/* Whether a limit on the way up is reclaiming now, from this look and the last ones. The kernel's word
 * for it is the limits' events growing within recent_usec; usage near a limit is not (page cache fills a
 * group to 95% of its limit and stays there, while a child thrashes inside a limit of its own). Where
 * the events cannot be read, usage is all there is to tell by. A scope's first look (first_look: it
 * judges a stall over the last 10 s with no count from before) goes by usage too. */
bool shortage_limit_update(struct limit_watch *w, const struct limit_reading *r, uint64_t now_usec,
                           uint64_t recent_usec, bool first_look);

/* The gate: a stall counts where the memory it waits for is short. A node's always; the system's when the
 * machine is short; a cgroup's when the machine is, or a limit on its way up binds (false for others).
 * raw otherwise falls to LEVEL_OK: the stall is another's, and shows in its own group. */
enum level shortage_gate(enum level raw, bool node, bool machine_short, bool cgroup_limit_binds);
