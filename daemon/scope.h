/* SPDX-License-Identifier: MIT */
#pragma once

/* A watched scope: the whole system, one NUMA node, or one cgroup. PSI scopes (system, cgroup) hold a
 * kernel trigger that wakes the daemon; while above ok they are sampled to find their level and to see
 * them fall. Node scopes get their figures from the node monitor. A level change is passed on to every
 * watch (subscription) attached to the scope. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "level.h"
#include "psi.h"
#include "scope_id.h"

struct manager;
struct watch;

struct scope {
        struct manager *manager;
        struct scope *prev, *next; /* the manager's cgroup scopes */
        enum scope_type type;
        int node;          /* SCOPE_NODE: the node's id */
        size_t node_index; /* SCOPE_NODE: index in the node monitor */
        char *cgroup;      /* SCOPE_CGROUP: the v2 path */
        char *name;        /* "system", "node:N" or the cgroup path: for logs */
        unsigned n_refs;   /* watches; a configured cgroup holds one more */

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

        struct level_state level;
        enum level previous;
        uint64_t changed_usec; /* CLOCK_MONOTONIC of the last change */
        uint64_t reclaim_target;
        bool gone;

        struct watch *watches;
        struct reclaim_episode *reclaim; /* rounds of client shrinkers while above ok */
};

/* The system scope (/proc/pressure/memory). Fails with a clear log when PSI is missing. */
int scope_new_system(struct manager *m, struct scope **ret);
int scope_new_node(struct manager *m, size_t node_index, struct scope **ret);
/* A cgroup scope with its trigger armed; -ENOENT when there is no such cgroup. */
int scope_new_cgroup(struct manager *m, const char *cgroup, struct scope **ret);
struct scope *scope_free(struct scope *s);

/* Whether the scope needs sampling now (above ok, falling, or recently triggered). */
bool scope_is_active(const struct scope *s, uint64_t now_usec);

/* Take a PSI sample (PSI scopes) and re-evaluate the level. */
void scope_sample(struct scope *s, uint64_t now_usec);
/* Re-evaluate a node scope from the node monitor's latest sample. */
void scope_update_node(struct scope *s, uint64_t now_usec);
/* Read the current PSI figures without changing the level. */
void scope_refresh_psi(struct scope *s);
/* PSI and memory figures, for a status request. */
void scope_refresh(struct scope *s);

/* Arm the trigger again after the low threshold changed (configuration reload). */
int scope_rearm(struct scope *s);

/* The source went away (cgroup removed): tell the watches and stop watching. */
void scope_mark_gone(struct scope *s);
