/* SPDX-License-Identifier: MIT */
#pragma once

/* One watched scope: the whole system, one NUMA node, or one cgroup. PSI scopes (system, cgroup) hold a
 * kernel trigger that wakes the daemon; while above ok they are sampled to find their level and to see
 * them fall. Node scopes get their figures from the node monitor. A scope decides its own level and
 * reclaim target and reports what happened through the events its owner set (struct scope_events); it
 * calls nothing above it. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "config.h"
#include "level.h"
#include "node_monitor.h"
#include "protocol.h"
#include "psi.h"
#include "scope_id.h"
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
struct scope_env {
        sd_event *event;
        const struct config *config;
        const struct cgroup_layout *layout; /* NULL: no cgroup v2 hierarchy */
        const struct node_monitor *nodes;   /* NULL: no node figures */
        const char *system_pressure_path;   /* /proc/pressure/memory */
        bool psi_unprivileged;              /* the kernel wants 2 s window steps from us */
        bool psi_logged;                    /* the kind of windows was logged */
        struct shortage machine;            /* whether the machine as a whole is short (shortage.h) */
        const struct scope_events *events;
        void *userdata;
};

/* Per-observer data hung on a scope (subscriptions' watch list, reclaim's episode...). */
#define SCOPE_SLOTS_MAX 8

struct scope {
        struct scope_env *env;
        struct scope *prev, *next; /* the registry's cgroup scopes */
        enum scope_type type;
        int node;          /* SCOPE_NODE: the node's id */
        size_t node_index; /* SCOPE_NODE: index in the node monitor */
        char *cgroup;      /* SCOPE_CGROUP: the v2 path */
        uint64_t cgroup_ino; /* SCOPE_CGROUP: its directory's inode, the cgroup's id: a group made anew
                              * under the same path has another */
        char *name;        /* "system", "node:N" or the cgroup path: for logs */
        uid_t owner_uid;   /* SCOPE_CGROUP: who owns its directory (a delegated subtree's user), whose log
                            * lines its removals and kills count as (log_client()) */
        unsigned n_refs;

        /* PSI scopes */
        char *pressure_path;
        int trigger_fd;
        sd_event_source *trigger_source;
        struct psi_trigger trigger; /* as armed */
        struct psi_stats psi;
        bool have_psi;
        struct level_samples samples;
        uint64_t triggered_usec; /* last POLLPRI */

        /* memory figures behind the reclaim target */
        uint64_t usage_bytes, limit_bytes; /* SCOPE_CGROUP; limit UINT64_MAX when none */
        uint64_t anon_bytes, anon_usec; /* SCOPE_CGROUP: the last reading of its anonymous memory, and when */
        uint64_t demand_bytes;          /* its growth per second between the last two readings */
        uint64_t growth_bytes;          /* its growth between the last two readings (0: it shrank) */

        /* headroom (cgroup and system scopes): the second source of the level */
        bool headroom_watched;      /* the daemon looks at it: a cgroup, or the system without swap */
        struct headroom headroom;   /* as last evaluated */
        char *headroom_binding;     /* the cgroup whose limit decides; NULL for the system or none */
        enum level psi_raw, headroom_raw;
        sd_event_source *headroom_timer;
        int events_fd;              /* v2 memory.events, v1 memory.oom_control */
        sd_event_source *events_source;
        int v1_eventfd;             /* v1: signalled by the kernel on OOM and usage thresholds */
        int v1_watched[4];          /* v1: the files those notifications watch (open as long as wanted) */
        size_t n_v1_watched;
        uint64_t v1_limits[3];      /* v1: the limits the usage thresholds were set for, nearest first */
        size_t n_v1_limits;
        bool v1_thresholds;         /* v1: every limited group up the tree has its threshold */
        bool below_thresholds;      /* every limited group's whole usage is below its low threshold */
        bool rides_node_sample;     /* far, and told by the kernel when that changes: looked at only with
                                     * the node sample, no timer of its own */
        uint64_t event_counts[_MEMORY_EVENT_MAX];
        bool have_event_counts;

        struct level_state level;
        enum level_source source; /* what raised the level last */
        enum level previous;
        uint64_t changed_usec; /* CLOCK_MONOTONIC of the last change */
        bool first_look;       /* deciding from the kernel's averages, before samples of its own */
        char reason[256];      /* why it is at its level, in words, as of the last change ("" at ok) */
        uint64_t reclaim_target;
        bool gone;
        bool announced; /* its owner has it: level changes are reported from now on */

        void *slots[SCOPE_SLOTS_MAX];
};

/* The system scope, with its trigger armed. */
int scope_new_system(struct scope_env *env, struct scope **ret);
int scope_new_node(struct scope_env *env, size_t node_index, struct scope **ret);
/* A cgroup scope with its trigger armed; -ENOENT when there is no such cgroup. */
int scope_new_cgroup(struct scope_env *env, const char *cgroup, struct scope **ret);
struct scope *scope_free(struct scope *s);
/* The owner has the scope now: from here on it reports. A scope made past a threshold (a busy machine at
 * start) reports its first level now, as a change from ok. */
void scope_announce(struct scope *s);

struct scope_id scope_get_id(const struct scope *s);
/* The scope as the protocol shows it. */
void scope_snapshot(const struct scope *s, struct scope_snapshot *ret);

/* Whether the scope needs sampling now (above ok, falling, or recently triggered). */
bool scope_is_active(const struct scope *s, uint64_t now_usec);

/* Take a PSI sample (PSI scopes) and re-evaluate the level. */
void scope_sample(struct scope *s, uint64_t now_usec);
/* Re-evaluate a node scope from the node monitor's latest sample. */
void scope_update_node(struct scope *s, uint64_t now_usec);
/* Feed a level measured elsewhere, through hysteresis, as a sample would. */
void scope_feed_level(struct scope *s, enum level raw, uint64_t now_usec);
/* PSI and memory figures, for a status request. */
void scope_refresh(struct scope *s);
/* Read the memory figures now and compute the reclaim target from them (for a decision that must not
 * use the last sample's). */
void scope_refresh_target(struct scope *s);

/* Read the headroom figures now, without re-evaluating the level (for a decision about it). */
void scope_refresh_headroom(struct scope *s);
/* Look at the scope's headroom now and re-evaluate the level; reschedules the next look. */
void scope_check_headroom(struct scope *s, uint64_t now_usec);

/* Arm the trigger again after the low threshold changed (configuration reload). */
int scope_rearm(struct scope *s);

/* Whether a cgroup scope still watches the group its path names now: false when the group was removed,
 * or removed and made again (a restarted service's), before the kernel's POLLERR was seen. */
bool scope_is_current(const struct scope *s);

/* The source went away (cgroup removed): stop watching and report it. */
void scope_mark_gone(struct scope *s);
