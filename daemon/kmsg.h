/* SPDX-License-Identifier: MIT */
#pragma once

/* Who the kernel's OOM killer killed, from its own log (/dev/kmsg): memory.events counts kills but does
 * not name them. The kernel writes one "oom-kill:" line per kill (since 4.19) with the victim's memcg,
 * command and pid. Parsing is pure and fuzzed; reading is bounded. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct oom_kill_record {
        uint64_t usec;        /* the record's time: microseconds since boot, as CLOCK_MONOTONIC roughly */
        char task_memcg[256]; /* the victim's memory cgroup, as the kernel names it */
        char task[64];        /* its command (comm) */
        pid_t pid;
        uid_t uid;
};

/* One /dev/kmsg record ("PRIO,SEQ,USEC,FLAGS;MESSAGE..."). Returns 0 for an oom-kill line, -ENOMSG for any
 * other record, -EINVAL for a malformed one. */
int kmsg_parse_oom_kill(const char *record, size_t size, struct oom_kill_record *ret);

/* Whether a memcg path is the cgroup or below it. */
bool kmsg_memcg_in(const char *memcg, const char *cgroup);

/* The last kill recorded at or after since_usec of a task in cgroup or below it, from the log at path
 * (/dev/kmsg). Reads at most max_records records. Returns 0, -ENOENT for none, or a negative errno. */
int kmsg_find_oom_kill(const char *path, const char *cgroup, uint64_t since_usec, unsigned max_records,
                       struct oom_kill_record *ret);
