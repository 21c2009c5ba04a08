/* SPDX-License-Identifier: MIT */
#pragma once

/* Decisions about client shrinkers, kept pure so that they are tested against hand-worked numbers:
 * who is asked for which scope (the kernel's rules for NUMA_AWARE and MEMCG_AWARE), how much to ask
 * (the kernel's do_shrink_slab arithmetic with deferred work), and quarantine of shrinkers that time
 * out. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "level.h"
#include "macro.h"
#include "scope_id.h"

#define SHRINKER_NUMA_AWARE (1u << 0)
#define SHRINKER_MEMCG_AWARE (1u << 1)

#define SHRINK_DEFAULT_SEEKS 2
#define SHRINK_DEFAULT_BATCH 128
#define SHRINK_PRIORITY_MAX 12 /* the kernel's DEF_PRIORITY */

enum shrink_op {
        SHRINK_OP_COUNT,
        SHRINK_OP_SCAN,
};


/* a * b / c without overflow in between; saturates if the result does not fit. c > 0. */
static inline uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c) {
        unsigned __int128 r = (unsigned __int128) a * b / c;
        return r > UINT64_MAX ? UINT64_MAX : (uint64_t) r;
}

/* ---- how much: do_shrink_slab ---- */

struct shrink_plan {
        uint64_t freeable;
        uint64_t nr_deferred; /* taken from the shrinker when the plan started */
        uint64_t delta;       /* new work from this round's priority */
        uint64_t total_scan;  /* still to be issued */
        uint64_t scanned;     /* reported scanned so far */
};

/* Start a pass over `freeable` objects at `priority` (0..12) for a shrinker with `seeks`, taking the
 * deferred work. As the kernel: delta = (freeable >> priority) * 4 / seeks (freeable / 2 when seeks is
 * 0), total = (deferred >> priority) + delta, capped at 2 * freeable. */
void shrink_plan_start(struct shrink_plan *p, uint64_t freeable, int priority, unsigned seeks, uint64_t deferred);

/* The next call's nr_to_scan, at most `batch`; false when the pass is over. As the kernel, a remainder
 * smaller than a batch is left for later unless it covers all freeable objects. */
bool shrink_plan_next(const struct shrink_plan *p, unsigned batch, uint64_t *ret_nr_to_scan);

/* Account one answered call. */
void shrink_plan_scanned(struct shrink_plan *p, uint64_t nr_scanned);

/* End the pass: the work to defer to the next one (nr_deferred + delta - scanned, at least 0, at most
 * 2 * freeable). */
uint64_t shrink_plan_finish(const struct shrink_plan *p);

/* Priority for a level: where an episode starts, and how far its rounds may escalate (the floor). The
 * mapping is configurable; defaults start low 12, medium 9, critical 6, floors 4, 2, 0. */
struct shrink_priorities {
        int at[_LEVEL_MAX];
        int floor[_LEVEL_MAX];
};
void shrink_priorities_default(struct shrink_priorities *ret);

/* ---- how much, for a target: an episode's split ---- */

/* A shrinker's weight in the split of a target: its freeable bytes * 4 / seeks (half of them for seeks
 * 0), the kernel's delta at priority 0, so that each is asked in proportion to what it holds and to how
 * cheaply its objects are made again. */
uint64_t shrink_weight(uint64_t freeable_bytes, unsigned seeks);

/* The objects to ask of one shrinker for its share of want_bytes (want * weight / total_weight bytes,
 * rounded up to whole objects of bytes_per_object_x1000 / 1000 bytes). 0 when total_weight or the object
 * size is 0. */
uint64_t shrink_target_objects(uint64_t want_bytes, uint64_t weight, uint64_t total_weight,
                               uint64_t bytes_per_object_x1000);

/* The next round's priority. As the kernel lowers its priority only for a pass that did not reclaim
 * enough, a round escalates only when it released less than it wanted and the stall did not fall: by two
 * steps (a round is far coarser than a kernel pass), not below floor. It steps back by one (not above
 * start) when the stall fell. */
int shrink_next_priority(int priority, int start, int floor, bool short_of_target, bool stall_fell);

/* ---- what was really released: trust in a client's claims ---- */

/* A client's claims are credited in proportion to how much of what it claimed the kernel saw it give
 * back in earlier rounds: trust in per mille, 1000 for a new client. */
#define SHRINK_TRUST_FULL 1000u
/* Claims smaller than this say nothing against a resident-memory reading (pages, other allocations):
 * they leave the trust as it was. */
#define SHRINK_TRUST_MIN_CLAIM (512u * 1024u)

/* What a client released in a round, estimated from two readings of its memory (before: when the round
 * first asked it to scan; after: a moment after the round) and its growth rate before the round (from
 * the previous reading after, prev, up to before; no growth if prev_usec is 0, the readings are out of
 * order, or they lie more than 30 s apart). A client that allocates as it goes (a cache refilling on
 * misses) would otherwise seem to release nothing. Capped at claimed: the daemon credits no more than
 * was claimed. */
uint64_t shrink_release_estimate(uint64_t claimed, uint64_t before, uint64_t before_usec, uint64_t after,
                                 uint64_t after_usec, uint64_t prev, uint64_t prev_usec);

/* The trust after a measured round: half the old trust and half the share of the claim that was
 * released (an honest client misread once is back at seven eighths after two rounds, one that
 * claims what it never gives back falls to a sixteenth within four). Claims below
 * SHRINK_TRUST_MIN_CLAIM leave it unchanged. */
unsigned shrink_trust_update(unsigned trust, uint64_t claimed, uint64_t released);

/* The bytes to credit for a claim: all of it down to half trust, below that claimed * 2 * trust / 1000. */
uint64_t shrink_trust_credit(unsigned trust, uint64_t claimed);

/* ---- who: the kernel's rules ---- */

/* Is cgroup `path` inside `ancestor` (equal to it or below it)? */
bool shrink_cgroup_within(const char *path, const char *ancestor);

/* For a scope, whether a shrinker of a process in cgroup `client_cgroup` with `flags` is asked, and
 * with which cgroup in its requests (*ret_cgroup points to scope or client data). Nodes:
 *   system: NUMA_AWARE ones for every node, the others for node 0 (*ret_all_nodes = true/false);
 *   node N: only NUMA_AWARE ones, for N;
 *   cgroup X: only processes in X's subtree, and only MEMCG_AWARE ones, naming X.
 * For the system, MEMCG_AWARE shrinkers are asked for their own cgroup (where their objects are
 * charged), the others for the root "/". */
bool shrink_select(enum scope_type type, const char *scope_cgroup, unsigned flags, const char *client_cgroup,
                   bool *ret_all_nodes, const char **ret_cgroup);

/* ---- quarantine ---- */

struct shrink_health {
        unsigned consecutive_timeouts;
        bool quarantined;
};

/* A request timed out: quarantine after `limit` in a row. Returns true when it just became quarantined. */
bool shrink_health_timeout(struct shrink_health *h, unsigned limit);
/* A timely answer: clears the count and the quarantine. Returns true when it was quarantined. */
bool shrink_health_answer(struct shrink_health *h);
