/* SPDX-License-Identifier: MIT */
#pragma once

/* What the scopes of one registry share, and how they report to it: below scope.c and headroom_watch.c,
 * which both read it. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "config.h"
#include "log.h"
#include "node_monitor.h"
#include "shortage.h"

struct scope;

/* What a scope reports, to the registry that owns it. */
struct scope_events {
        void (*level_changed)(struct scope *s, void *userdata);
        void (*gone)(struct scope *s, void *userdata);      /* the cgroup was removed */
        void (*triggered)(struct scope *s, void *userdata); /* the kernel's trigger fired, or headroom left ok */
        void (*memory_event)(struct scope *s, enum memory_event e, uint64_t count, void *userdata);
};

/* What every scope of one registry shares. */
/* The kernel log is searched for an OOM kill's victim at most once a second, for all scopes together. */
#define OOM_LOOKUP_INTERVAL_USEC (1000 * 1000)

/* What the kernel takes from us as PSI windows, learnt by the first scope armed: scope.c's. */
struct scope_psi_windows {
        bool unprivileged; /* the kernel wants 2 s window steps from us */
        bool logged;       /* the kind of windows was logged */
};

/* What every scope shares: made by the registry (scope_registry.c writes it), read by the scopes; the
 * parts that change have owners of their own (scope.c, shortage.c, log.c's rate limit). */
struct scope_env {
        sd_event *event;
        const struct config *config;
        const struct cgroup_layout *layout; /* NULL: no cgroup v2 hierarchy */
        const struct node_monitor *nodes;   /* NULL: no node figures */
        const char *system_pressure_path;   /* /proc/pressure/memory */
        struct scope_psi_windows psi;
        struct shortage machine;       /* whether the machine as a whole is short (shortage.h) */
        struct ratelimit oom_lookups;  /* of the kernel log for an OOM kill's victim: the log is the machine's */
        const struct scope_events *events;
        void *userdata;
};
