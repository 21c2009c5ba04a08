/* SPDX-License-Identifier: MIT */
#pragma once

/* Rounds of requests to client shrinkers: where a client is asked. A round queues one job per
 * (shrinker, node) its scope selects; each shrinker has one request in flight at a time and every
 * request a deadline; answers are checked and applied here (count, then scans sized by shrink_policy
 * and narrowed to a share of the round's goal); a round never waits on a slow client (its budget cuts
 * unfinished jobs). The engine reaches clients only through a transport. reclaim.c decides when rounds
 * run and what they want; this file runs them. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "protocol.h"
#include "shrink_job.h"
#include "shrinker.h"

struct round_engine;
struct shrink_round;

int round_engine_new(sd_event *event, const struct config *config, struct shrink_registry *shrinkers,
                     const struct reclaim_transport *transport, void *userdata, struct round_engine **ret);
struct round_engine *round_engine_free(struct round_engine *rc);

/* Apply an answer from client cl. Returns 0, -ENOENT for a request that is unknown, not cl's, already
 * answered or expired (counted on cl), -EINVAL with *ret_reason for impossible values: that ends the
 * request's job as if it had answered stop, and is counted on its shrinker, not as a timeout. */
int round_engine_answer(struct round_engine *rc, struct shrink_client *cl, const struct shrink_answer *a,
                        const char **ret_reason);

/* The client is going: its jobs end (their rounds go on without them), its requests are dropped. */
/* The shrinker as ListShrinkers shows it: the registry's part, then what the rounds learnt of it (its
 * last counts, statistics, health) and what its client's memory showed. ret->nodes: free() it. */
int round_engine_shrinker_info(const struct round_engine *rc, const struct shrinker *sh,
                               struct shrinker_info_snapshot *ret);
/* The bytes the shrinker said it holds on node index node_index at its last count (0: never counted). */
uint64_t round_engine_last_bytes(const struct round_engine *rc, const struct shrinker *sh, size_t node_index);
/* What its last counts said its last bytes are worth (the most over its nodes; 0: not known). */
double round_engine_shrinker_value(const struct round_engine *rc, const struct shrinker *sh);
/* What the shrinker's objects held at its last counts, over all its nodes. */
uint64_t round_engine_shrinker_bytes(const struct round_engine *rc, const struct shrinker *sh);
/* Tell cl the growth limits of its shrinkers, through the transport. */
int round_engine_send_limits(struct round_engine *rc, struct shrink_client *cl, const struct shrinker_limit *limits,
                             size_t n);

/* The bytes the shrinkers a scope selects (shrink_select()) said they hold at their last counts. */
uint64_t round_engine_held_bytes(const struct round_engine *rc, enum scope_type type, const char *cgroup,
                                 size_t node_index);

/* For tests and debugging: answers of cl to requests it does not have; rounds of the current goal that
 * asked the shrinker for its share on a node. */
uint64_t round_engine_client_rejected(const struct round_engine *rc, const struct shrink_client *cl);
unsigned round_engine_goal_asks(const struct round_engine *rc, const struct shrinker *sh, size_t node_index);

void round_engine_drop_client(struct round_engine *rc, struct shrink_client *cl);
void round_engine_drop_shrinker(struct round_engine *rc, const struct shrinker *sh);

/* What a round did, for its owner. */
struct round_outcome {
        uint64_t id;
        uint64_t want;        /* its goal in bytes (0: none) */
        uint64_t freed, scanned;
        uint64_t freed_bytes; /* as credited */
        bool shares_in;       /* every shrinker counted had released its share of the goal already */
        unsigned n_asked;     /* shrinkers */
        unsigned n_busy;      /* shrinkers in scope left out: still busy with an earlier round */
};
typedef void (*round_done_fn)(const struct round_outcome *o, void *userdata);

struct round_spec {
        enum scope_type type;
        size_t node_index;  /* SCOPE_NODE */
        const char *cgroup; /* SCOPE_CGROUP */
        int priority;
        uint64_t want;       /* bytes to release, split over the shrinkers by weight; 0: the kernel's sizing */
        /* With want: a share the kernel's sizing at priority would not cover is asked at the gentlest
         * priority that covers it, down to floor (the level's cap on how much one round may ask). */
        bool share_sets_priority;
        int floor;
        /* The episode's goal this round is part of (goal_id 0: none): a shrinker's share is of the
         * whole goal, less what it released towards it in earlier rounds, so that one that does not
         * deliver its share makes nobody else give more than theirs. */
        uint64_t goal, goal_id;
        uint64_t nr_to_scan; /* explicit rounds: exactly this much each (0: count, then all of it) */
        const struct shrinker *only;
        const struct shrink_client *only_client;
        /* What the requests tell the client the round is about: the scope's level (-1 for an explicit
         * Shrink, which has none) */
        int level;
        bool budget;  /* cut unfinished jobs after round_budget */
        bool measure; /* explicit rounds: answer with what each client released (a moment later) */
        bool dry_run; /* explicit rounds: count only, and answer with the counts */
};

/* A round of an episode: on_done is called when it is over (possibly within round_run()), then it is
 * freed. label names it in the log. */
struct shrink_round *round_new(struct round_engine *rc, const char *label, round_done_fn on_done, void *userdata);
/* How long an explicit Shrink may run before its unfinished jobs are cut. */
#define ROUND_EXPLICIT_BUDGET_USEC (10 * 1000000ULL)
/* A round for an explicit Shrink: the transport's shrink_done(caller, ...) when it is over. Its jobs are
 * cut when its caller leaves (round_detach) or after ROUND_EXPLICIT_BUDGET_USEC. */
struct shrink_round *round_new_explicit(struct round_engine *rc, void *caller);
void round_run(struct shrink_round *r, const struct round_spec *spec);
/* Its owner is gone: the round finishes without telling anyone. */
void round_detach(struct shrink_round *r);
