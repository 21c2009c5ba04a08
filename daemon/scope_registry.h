/* SPDX-License-Identifier: MIT */
#pragma once

/* Every scope the daemon watches: the system, one per NUMA node with memory, and the cgroups someone asked
 * for. Cgroup scopes are reference counted: acquired by subscribers, configured cgroups and MEMCG_AWARE
 * clients, and freed from the event loop once nobody holds them (which closes their trigger). What the
 * scopes report is passed to the observers in the order they registered; each observer owns one slot on
 * every scope for its own data. */

#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "config.h"
#include "hashmap.h"
#include "node_monitor.h"
#include "scope.h"

struct scope_observer {
        void (*level_changed)(struct scope *s, void *userdata);
        void (*gone)(struct scope *s, void *userdata);          /* the cgroup went away */
        void (*became_active)(struct scope *s, void *userdata); /* its trigger fired, or headroom left ok */
        void (*memory_event)(struct scope *s, enum memory_event e, uint64_t count, void *userdata);
        void (*freed)(struct scope *s, void *userdata);         /* about to be freed: let go of the slot */
};

/* The registry's place of one cgroup scope, beside it (struct scope is scope.c's alone). */
struct registry_entry {
        struct scope *scope;
        struct registry_entry *prev, *next;
};

struct scope_registry {
        struct scope_env env;
        struct scope *system;
        struct scope **nodes; /* one per node monitor entry */
        size_t n_nodes;
        struct registry_entry *cgroups; /* newest first */
        struct hashmap *entries;        /* struct registry_entry by its scope's address */
        size_t n_cgroups;
        struct hashmap *by_cgroup; /* live (not gone) cgroup scopes by path */
        struct hashmap *held_per_uid; /* uid -> cgroup scope references taken on its behalf */
        size_t held_by_users;         /* all of those together */
        sd_event_source *gc_source;
        struct scope **configured; /* cgroups watched because the configuration lists them */
        size_t n_configured;
        struct {
                const struct scope_observer *ops;
                void *userdata;
        } observers[SCOPE_SLOTS_MAX];
        size_t n_observers;
};

/* layout and nodes may be NULL (no cgroup v2, no node figures); all three outlive the registry. */
int scope_registry_new(sd_event *event, const struct config *config, const struct cgroup_layout *layout,
                       const struct node_monitor *nodes, struct scope_registry **ret);
struct scope_registry *scope_registry_free(struct scope_registry *reg);

struct scope *scope_registry_system(const struct scope_registry *reg);
/* The cgroup scopes, from prev (NULL: the first); gone ones included. */
struct scope *scope_registry_next_cgroup(const struct scope_registry *reg, const struct scope *prev);
const struct config *scope_registry_config(const struct scope_registry *reg);
const struct cgroup_layout *scope_registry_layout(const struct scope_registry *reg); /* NULL: no cgroup v2 */
size_t scope_registry_n_cgroups(const struct scope_registry *reg);

/* Returns the observer's slot index on every scope, or -ENOSPC. */
int scope_registry_add_observer(struct scope_registry *reg, const struct scope_observer *ops, void *userdata);

/* Before start: the PSI file the system scope watches instead of /proc/pressure/memory (a live file:
 * a trigger cannot be armed on a plain one). Tests point it at a cgroup nobody runs in, so that the host's
 * own stall cannot start the system's episodes among theirs. path outlives the registry. */
void scope_registry_set_system_pressure(struct scope_registry *reg, const char *path);

/* Arm the system trigger and create the node scopes. -ENOENT/-EOPNOTSUPP: the kernel has no PSI. */
int scope_registry_start(struct scope_registry *reg);

/* Watch the cgroups the configuration lists (again, after a reload): the old set is released only after
 * the new one is acquired, so that a cgroup in both keeps its trigger. */
void scope_registry_watch_configured(struct scope_registry *reg);

/* Take a reference. -ENXIO for an unknown node; for a cgroup -EINVAL (bad path), -ENOENT (no such
 * cgroup) or what arming its trigger failed with. */
int scope_registry_acquire(struct scope_registry *reg, const struct scope_id *id, struct scope **ret);
void scope_registry_release(struct scope_registry *reg, struct scope *s);

/* On behalf of a user: every cgroup scope a user's requests hold (subscriptions, shrinker clients' groups
 * and their limited ancestors, memory-pressure clients, bus peers) counts against one budget,
 * max_cgroups_per_uid, since each is a kernel trigger and descriptors of the daemon's, and all users
 * together against max_cgroups_users (one account can be many uids). -EDQUOT past either, before anything
 * is armed. Root is not counted. The system and nodes cost nothing. */
int scope_registry_acquire_for(struct scope_registry *reg, uid_t uid, const struct scope_id *id, struct scope **ret);
void scope_registry_release_for(struct scope_registry *reg, uid_t uid, struct scope *s);
/* How many cgroup references uid holds, and how many more it may take. */
size_t scope_registry_held_by(const struct scope_registry *reg, uid_t uid);
size_t scope_registry_budget_left(const struct scope_registry *reg, uid_t uid);

/* The node scope for node id `node` (no reference taken), or NULL. */
struct scope *scope_registry_find_node(const struct scope_registry *reg, int node);
/* The watched scope of a cgroup (path normalised), or NULL: nothing is armed by looking. */
struct scope *scope_registry_find_cgroup(const struct scope_registry *reg, const char *path);

/* Every scope: the system, the nodes, then the cgroups (gone ones included until they are freed). */
struct scope *scope_registry_next(const struct scope_registry *reg, const struct scope *prev);
#define SCOPE_REGISTRY_FOREACH(s, reg)                                                                     \
        for (struct scope *s = scope_registry_next((reg), NULL); s; s = scope_registry_next((reg), s))

/* Arm every trigger again after the low threshold changed. */
void scope_registry_rearm(struct scope_registry *reg);
