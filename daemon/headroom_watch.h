/* SPDX-License-Identifier: MIT */
#pragma once

/* A scope's headroom, the second source of its level (cgroup and system scopes): how near its group and
 * every limited ancestor are to their limits, looked at on a timer or told by the kernel, and the memory
 * events it counts. Embedded in struct scope and written by headroom_watch.c alone
 * (build-aux/check-owners); it knows the scope only as the subject it was given, and reports back
 * through its ops. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "headroom.h"
#include "level.h"
#include "scope_env.h"
#include "scope_id.h"

/* The limited groups a scope looks at: its own and its ancestors, nearest first. */
#define HEADROOM_GROUPS_MAX 16

/* How fast to look again, as the scope sees itself after a look. */
struct headroom_pace {
        enum level level;      /* the scope's level */
        uint64_t demand_bytes; /* its growth per second */
};

/* How the watch tells its scope what it saw (set at init): the scope reads its memory, decides its
 * level anew and says how fast to look next; a group that is gone is the scope's to mark. */
struct headroom_watch_ops {
        struct headroom_pace (*looked)(struct scope *s, uint64_t now);
        void (*gone)(struct scope *s);
};

/* What is watched, given at start: borrowed from the scope, which outlives the watch. */
struct headroom_subject {
        struct scope_env *env;
        struct scope *scope; /* passed back through the ops and the registry's events */
        enum scope_type type;
        const char *cgroup; /* SCOPE_CGROUP */
        const char *name;
        uid_t owner_uid;
};

struct headroom_watch {
        const struct headroom_watch_ops *ops;
        struct headroom_subject subject;
        bool watched;             /* the daemon looks at it: a cgroup, or the system without swap */
        bool gone;                /* its group was removed: never looked at again */
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

void headroom_watch_init(struct headroom_watch *hw, const struct headroom_watch_ops *ops);
/* Timers and the kernel's notifications, as the subject needs. */
int headroom_watch_start(struct headroom_watch *hw, const struct headroom_subject *subject);
/* All of them; hw stays readable. */
void headroom_watch_stop(struct headroom_watch *hw);
/* The group was removed: stopped, and never looked at again. */
void headroom_watch_gone(struct headroom_watch *hw);
void headroom_watch_done(struct headroom_watch *hw);
/* Read the headroom figures now, without telling the scope. */
void headroom_watch_refresh(struct headroom_watch *hw);
/* Look now: the event counts, the headroom, then the scope is told; reschedules the next look. */
void headroom_watch_check(struct headroom_watch *hw, uint64_t now);
