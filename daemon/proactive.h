/* SPDX-License-Identifier: MIT */
#pragma once

/* Proactive reclaim: the daemon's own shrinker for cgroups the admin names (reclaim_cgroup=), for
 * memory no client can give back itself, above all a service's page cache. It counts what reclaim could
 * take from a group (file pages, and anonymous pages where there is swap) and scans by writing bytes to
 * the group's memory.reclaim. Each regulate_interval it reads the group's `some` stall: while it is under
 * the group's budget (the regulator's, regulate_budget and regulate_cgroup=), a step is taken, sized by
 * regulation.c's probe; over it, nothing, and the probes space out. Cold pages go, and the steps stop
 * where the working set starts to refault. Needs the memory controller on cgroup v2 and Linux 5.19 or
 * later; elsewhere it says so once and does nothing. Nothing here is reachable by clients. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "config.h"

struct proactive;

/* layout: NULL when there is no cgroup v2 hierarchy. */
int proactive_new(sd_event *event, const struct config *config, const struct cgroup_layout *layout,
                  struct proactive **ret);
struct proactive *proactive_free(struct proactive *p);

/* The configuration was replaced (a reload): look at the patterns again now. */
void proactive_reconfigure(struct proactive *p);

struct proactive_stats {
        uint64_t groups;          /* reclaimed from now */
        uint64_t steps;           /* probes taken */
        uint64_t reclaimed_bytes; /* written to memory.reclaim and reclaimed in full */
        uint64_t short_writes;    /* writes the kernel could not fill (EAGAIN) */
        uint64_t refault_backoffs; /* probes not taken: half of what was reclaimed lately came back */
};
void proactive_get_stats(const struct proactive *p, struct proactive_stats *ret);
