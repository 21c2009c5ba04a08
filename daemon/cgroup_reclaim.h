/* SPDX-License-Identifier: MIT */
#pragma once

/* A cgroup's reclaimable memory as the kernel shows it, and memory.reclaim (cgroup v2, Linux 5.19 and
 * later), which reclaims from a group the bytes written to it in the writer's context: what the
 * daemon's own shrinker of a group counts and scans (proactive.c). Also the groups a glob names. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"

/* What reclaim could take from a group, from its memory.stat text: its file pages (active_file +
 * inactive_file), and its anonymous pages (active_anon + inactive_anon) up to swap_free, where there is
 * swap to put them. -ENODATA when a field is missing. */
int cgroup_parse_reclaimable(const char *stat_text, uint64_t swap_free, uint64_t *ret);

/* Swap that anonymous pages could go to: /proc/meminfo's SwapFree under sysfs_root, 0 when swappiness is
 * 0 (the kernel then reclaims no anonymous pages from a group). */
int cgroup_swap_free(const char *sysfs_root, uint64_t *ret);

/* The file pages read back after their eviction, from a group's memory.stat text: workingset_refault_file
 * (Linux 5.9 and later; workingset_refault before), in pages. 0 when neither is there. */
uint64_t cgroup_parse_refaults(const char *stat_text);

/* What proactive reclaim reads of a group at each look. */
struct cgroup_reclaim_figures {
        uint64_t reclaimable;    /* cgroup_parse_reclaimable() of its memory.stat */
        uint64_t current;        /* memory.current */
        uint64_t refaulted_file; /* cgroup_parse_refaults(), in bytes, cumulative */
};
int cgroup_reclaimable(const struct cgroup_layout *l, const char *cgroup, uint64_t swap_free,
                       struct cgroup_reclaim_figures *ret);

/* Write bytes to the group's memory.reclaim: the kernel reclaims that much from it before the write
 * returns. 0; -EAGAIN when it could not reclaim all of it (what it could is gone); -ENOENT when the group
 * is gone; -EOPNOTSUPP when the kernel has no memory.reclaim or the memory controller is not on v2. */
int cgroup_reclaim(const struct cgroup_layout *l, const char *cgroup, uint64_t bytes);

/* What one expansion of a glob may take and read. A user may make thousands of groups in its delegated
 * subtree: its groups cannot take the places of another's, and listing them costs a fixed share of the
 * walk. An owner is a delegation: the owner of the topmost group on the path that is not root's (groups
 * below it chowned to other uids, as a user namespace may, are still its). Root's groups count against
 * the totals only. */
struct cgroup_glob_limits {
        size_t max;               /* groups in all */
        size_t max_per_owner;     /* groups of one owner */
        size_t entries;           /* directory entries read in all */
        size_t entries_per_owner; /* ... from one owner's directories */
};
#define CGROUP_GLOB_MAX 1024
#define CGROUP_GLOB_LIMITS_DEFAULT { .max = CGROUP_GLOB_MAX, .max_per_owner = 64, .entries = 16384, .entries_per_owner = 512 }

/* The cgroups (v2 paths) that exist now and match pattern, one fnmatch() per path component (a '*'
 * never crosses a '/'), sorted; ret: a NULL-terminated array, free each and it; ret_owners (may be NULL):
 * each one's owner as above (0: root's), free it. Returns how many, or a negative errno. Past a limit of
 * lim (NULL: the defaults) the rest is left out and *ret_truncated set. */
int cgroup_glob(const struct cgroup_layout *l, const char *pattern, const struct cgroup_glob_limits *lim, char ***ret,
                uid_t **ret_owners, bool *ret_truncated);
