/* SPDX-License-Identifier: MIT */
#pragma once

/* struct scope, for its owners only: scope.c, which writes it, and scope_registry.c, which keeps the
 * list. Every other module reads a scope through scope.h's getters and scope_snapshot()
 * (build-aux/check-owners checks that nobody else includes this). */

#include "limit_stall.h"
#include "scope.h"

/* The limited groups a scope looks at: its own and its ancestors, nearest first. */
#define HEADROOM_GROUPS_MAX 16

/* A scope's headroom, the second source of its level (cgroup and system scopes): embedded in struct scope,
 * written by headroom_watch.c alone (build-aux/check-owners); scope.c reads it. */
struct scope;

/* How headroom_watch.c tells its scope what it saw (set by scope.c at init): the scope's part is to
 * read its memory and decide its level anew; a group that is gone is marked so. */
struct headroom_watch_ops {
        void (*looked)(struct scope *s, uint64_t now);
        void (*gone)(struct scope *s);
};

struct headroom_watch {
        const struct headroom_watch_ops *ops;
        bool watched;             /* the daemon looks at it: a cgroup, or the system without swap */
        struct headroom headroom; /* as last evaluated */
        char *binding;            /* the cgroup whose limit decides; NULL for the system or none */
        enum level raw;           /* the level the headroom alone gives */
        sd_event_source *timer;
        int events_fd; /* v2 memory.events, v1 memory.oom_control */
        sd_event_source *events_source;
        int v1_eventfd;     /* v1: signalled by the kernel on OOM and usage thresholds */
        int v1_watched[4];  /* v1: the files those notifications watch (open as long as wanted) */
        size_t n_v1_watched;
        uint64_t v1_limits[3]; /* v1: the limits the usage thresholds were set for, nearest first */
        size_t n_v1_limits;
        bool rides_node_sample; /* the system, far from its threshold: looked at only with the node sample, no
                                 * timer of its own */
        uint64_t event_counts[_MEMORY_EVENT_MAX];
        bool have_event_counts;
};

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
        struct psi_stats psi;      /* as the kernel shows it */
        bool have_psi;
        struct limit_stall explained; /* the part of it that limits of groups below explain */
        uint64_t explained_usec;      /* when that was last looked at */
        struct psi_stats explained_at; /* psi then */
        struct psi_stats own;         /* psi less what is explained: the totals the levels and the regulator read */
        struct level_samples samples; /* of own */
        struct limit_watch limits;    /* the limit events of its group and limited ancestors (shortage.c's) */
        uint64_t triggered_usec; /* last POLLPRI */

        /* memory figures behind the reclaim target */
        uint64_t usage_bytes, limit_bytes; /* SCOPE_CGROUP; limit UINT64_MAX when none */
        uint64_t anon_bytes, anon_usec; /* SCOPE_CGROUP: the last reading of its anonymous memory, and when */
        uint64_t demand_bytes;          /* its growth per second between the last two readings */
        uint64_t growth_bytes;          /* its growth between the last two readings (0: it shrank) */

        enum level psi_raw;
        struct headroom_watch hw; /* headroom_watch.c's: the second source of the level */

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

/* What the registry gave every scope. */
static inline const struct config *config_of(const struct scope *s) {
        return s->env->config;
}

static inline const struct scope_events *events_of(const struct scope *s) {
        return s->env->events;
}

static inline const struct node_monitor *nodes_of(const struct scope *s) {
        return s->env->nodes;
}

/* headroom_watch.c's, for scope.c */
void headroom_watch_init(struct headroom_watch *hw, const struct headroom_watch_ops *ops);
int scope_watch_headroom(struct scope *s);   /* timers and the kernel's notifications, as the scope needs */
void scope_unwatch_headroom(struct scope *s); /* all of them; hw stays readable */
void headroom_watch_done(struct headroom_watch *hw);
