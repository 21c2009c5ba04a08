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
#include "log.h"
#include "node_monitor.h"
#include "protocol.h"
#include "psi.h"
#include "scope_id.h"
#include "scope_env.h"
#include "shortage.h"

struct scope;

/* Per-observer data hung on a scope (subscriptions' watch list, reclaim's episode...). */
#define SCOPE_SLOTS_MAX 10

/* struct scope is scope.c's; everyone else, its registry included, reads it through these. */
enum level scope_level(const struct scope *s);
enum level scope_previous(const struct scope *s); /* before the last change */
enum level_source scope_source(const struct scope *s);
enum scope_type scope_get_type(const struct scope *s);
const char *scope_name(const struct scope *s);     /* "system", "node:N" or the cgroup path: for logs */
const char *scope_cgroup(const struct scope *s);   /* SCOPE_CGROUP: its v2 path; NULL otherwise */
size_t scope_node_index(const struct scope *s);    /* SCOPE_NODE: its index in the node monitor */
uint64_t scope_reclaim_target(const struct scope *s);
const char *scope_reason(const struct scope *s);   /* why it is at its level ("" at ok) */
bool scope_is_gone(const struct scope *s);
/* How far the scope is past its low headroom threshold, as last read (scope_refresh_headroom()). */
uint64_t scope_headroom_over_bytes(const struct scope *s);
/* How far the scope's nearest limited group is from its low headroom threshold, as last read
 * (scope_refresh_headroom()): 0 when past it, UINT64_MAX when no limit is known or not looked at. */
uint64_t scope_headroom_room_bytes(const struct scope *s);
/* SCOPE_CGROUP: every memory limit on its way to the root (its own and its ancestors') holds less than
 * half of what it allows, read now: no limit can be what makes it stall. False without a limit, or for
 * the system and nodes. */
bool scope_far_below_limits(struct scope *s);
/* The cumulative "some" stall in µs as last read (scope_refresh()); false for a scope without PSI. */
bool scope_some_total(const struct scope *s, uint64_t *ret);
/* A node scope's free pages short of its high watermarks (0: none), as last sampled; false without node
 * figures. */
bool scope_node_pages_short(const struct scope *s, uint64_t *ret);
/* Far from its headroom thresholds: looked at only with the node sample (scope_check_headroom()). */
bool scope_rides_node_sample(const struct scope *s);
/* What its memory grew by between the last two readings of its anonymous memory (0: it shrank), and
 * that memory as last read. */
uint64_t scope_anon_bytes(const struct scope *s);
/* The kernel's counts of memory events (memory.events) as last read; false when there are none. */
bool scope_event_counts(const struct scope *s, uint64_t ret[_MEMORY_EVENT_MAX]);
/* Observer slot k (scope_registry_add_observer()): the observer's own data on this scope. Observers read
 * and write it through accessors of their own type, SCOPE_SLOT_ACCESSORS(name, type): name_get(s, k) and
 * name_set(s, k, value), so nobody casts a slot by hand. */
void *scope_slot_get(const struct scope *s, int k);
void scope_slot_set(struct scope *s, int k, void *value);
#define SCOPE_SLOT_ACCESSORS(name, type)                                                                   \
        static inline type *name##_get(const struct scope *s, int k) {                                     \
                return scope_slot_get(s, k);                                                               \
        }                                                                                                  \
        static inline void name##_set(struct scope *s, int k, type *value) {                               \
                scope_slot_set(s, k, value);                                                               \
        }

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

/* References: a new scope has one (its registry's). Another holder takes one with scope_ref() and gives
 * it back with scope_registry_release(), which drops it with scope_unref(): true when it was the last. */
struct scope *scope_ref(struct scope *s);
bool scope_unref(struct scope *s);
/* Whether anybody still holds it (the registry frees it from the loop once nobody does). */
bool scope_is_held(const struct scope *s);
/* Read the cumulative "some" stall now (one pread of the pressure file); false for a scope without PSI. */
bool scope_read_some_total(struct scope *s, uint64_t *ret);
/* Whether the scope's stall is for memory that is short where it is (the machine's, or a limit on its way
 * to the root), as the level decides it: otherwise it is someone else's to answer (docs/levels.md). */
bool scope_stall_is_own(struct scope *s, uint64_t now_usec);
/* Reads the limits' event counts on the way up, so that the next stall is judged against counts from
 * just before it (the regulator, on quiet looks): a first count can only tell by usage. Returns whether
 * a memory limit is on the cgroup's way up at all. */
bool scope_note_limits(struct scope *s, uint64_t now_usec);
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
