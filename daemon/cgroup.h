/* SPDX-License-Identifier: MIT */
#pragma once

/* Where cgroups live on this machine. Scopes name a cgroup by its cgroup v2 path (as in the "0::" line of
 * /proc/PID/cgroup); its pressure comes from the v2 hierarchy, its memory limit from wherever the memory
 * controller is mounted: v2 on pure cgroup v2 systems, a v1 hierarchy on hybrid ones. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "headroom.h"

struct cgroup_layout {
        char *v2_root;     /* mount point of the cgroup2 hierarchy */
        char *memory_root; /* mount point of the memory controller (v1 or v2); NULL when not mounted */
        bool memory_v2;    /* the memory controller is on the v2 hierarchy */
};

int cgroup_layout_discover(struct cgroup_layout *ret);
void cgroup_layout_done(struct cgroup_layout *l);

/* A cgroup path a client may name: absolute, no empty, "." or ".." components, printable. Normalises a
 * trailing slash away. Returns 0 or -EINVAL. */
int cgroup_path_normalize(const char *path, char **ret);

/* v2_root + path + "/" + file */
int cgroup_file_path(const struct cgroup_layout *l, const char *cgroup, const char *file, char **ret);

/* Whether the cgroup exists and reports memory pressure. Returns 0, -ENOENT, or another negative errno. */
int cgroup_check(const struct cgroup_layout *l, const char *cgroup);

/* Whether user uid (in groups gids[0..n_gids), its primary group among them) could arm a PSI trigger on
 * the cgroup's memory.pressure itself: the file's mode lets it write (as owner, group or other), or it
 * owns the cgroup's directory (and so could make the file its own). 1 or 0; a negative errno when the
 * files cannot be looked at. Root's answer is always 1. */
int cgroup_may_watch(const struct cgroup_layout *l, const char *cgroup, uid_t uid, const gid_t *gids, size_t n_gids);

/* Memory use and the limit that reclaim works against (v2: the lower of memory.high and memory.max; v1:
 * memory.limit_in_bytes at the same path in the memory hierarchy). *ret_limit is UINT64_MAX when there is
 * no limit. */
int cgroup_memory(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret_usage, uint64_t *ret_limit);

/* Anonymous memory of the group and its descendants (memory.stat "anon" on v2, "total_rss" on v1), in
 * bytes: what reclaim cannot take back without swap. cgroup_parse_anon() takes the text of a memory.stat
 * file; -ENODATA when the field is not there. */
int cgroup_parse_anon(const char *stat_text, bool v2, uint64_t *ret_bytes);
int cgroup_anon(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret_bytes);

/* How far up the tree limits are looked for: groups more than this many levels below a limit do not see
 * it (systemd's trees are about five deep). */
#define CGROUP_WALK_MAX_DEPTH 32

/* The groups from cgroup up to the root that have a memory limit, nearest first, at most max of them
 * (ret_paths: their paths, optional, free() each): usage, limit and file pages (descendants
 * included). v2: memory.current, the lower of memory.high and memory.max, memory.stat active_file +
 * inactive_file; v1: memory.usage_in_bytes, memory.limit_in_bytes, memory.stat total_(in)active_file. */
int cgroup_headroom_groups(const struct cgroup_layout *l, const char *cgroup, struct headroom_group *ret, char **ret_paths,
                           size_t max, size_t *ret_n);

/* Counters of memory.events (v2) or memory.oom_control (v1, oom_kill only: v1 has no "max" counter). */
struct cgroup_memory_events {
        uint64_t max, oom_kill;
};
int cgroup_parse_memory_events(const char *text, struct cgroup_memory_events *ret);

/* How often the group reached a limit of its own: high + max of v2's memory.events.local (memory.events on
 * kernels without it), v1's memory.failcnt. A count that grows is the kernel's word that the group's own
 * limit is reclaiming; usage near the limit is not (page cache fills a group and stays). */
int cgroup_parse_limit_events(const char *text, uint64_t *ret);
int cgroup_limit_events(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret);

/* The file that tells of memory events: memory.events on v2 (poll() reports changes), memory.oom_control
 * on v1 (through cgroup.event_control). */
int cgroup_memory_events_path(const struct cgroup_layout *l, const char *cgroup, char **ret);
/* v1: ask the kernel to signal efd when the group's usage crosses threshold bytes (either way), or, with
 * threshold UINT64_MAX, when it runs out of memory (memory.oom_control). Returns the fd of the file
 * watched, which must stay open as long as the notification is wanted. */
int cgroup_v1_notify(const struct cgroup_layout *l, const char *cgroup, int efd, uint64_t threshold);

/* Whether pid is the only process in the cgroup (its cgroup.procs lists nothing else). The root is
 * never anybody's own. Returns 1, 0, or a negative errno. */
int cgroup_only_process(const struct cgroup_layout *l, const char *cgroup, pid_t pid);

/* The v2 path of a process, from the "0::" line of /proc/PID/cgroup. */
int cgroup_pid_get_path(pid_t pid, char **ret);
/* The same, read through a /proc/PID directory descriptor (pidref.h): -ESRCH once that process is gone. */
int cgroup_proc_get_path(int proc_dirfd, char **ret);
