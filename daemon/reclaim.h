/* SPDX-License-Identifier: MIT */
#pragma once

/* Reclaim: where it is decided when clients are asked to free memory, and how much. A scope above ok
 * starts an episode: a goal in bytes from the scope's reclaim target, rounds (round.c) at a priority
 * that escalates only while rounds fall short and the stall stays, a pause once the goal is released.
 * Explicit io.pressured.Shrink calls run as a round too. Reclaim observes the scope registry (levels
 * start and end episodes) and the shrink registry (clients come and go). */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "protocol.h"
#include "regulator.h"
#include "round.h"
#include "scope_registry.h"
#include "shrinker.h"

struct reclaim;
struct shrink_round;

int reclaim_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                struct shrink_registry *shrinkers, const struct reclaim_transport *transport, void *userdata,
                struct reclaim **ret);
struct reclaim *reclaim_free(struct reclaim *rc);

/* Apply an answer from client cl. Returns 0, -ENOENT for a request that is unknown, not cl's, already
 * answered or expired (counted on cl), -EINVAL with *ret_reason for impossible values: that ends the
 * request's job as if it had answered stop, and is counted on its shrinker, not as a timeout. */
int reclaim_answer(struct reclaim *rc, struct shrink_client *cl, const struct shrink_answer *a,
                   const char **ret_reason);

/* io.pressured.Shrink: one round over the shrinkers the target selects (optionally just one shrinker).
 * nr_to_scan 0: count first and scan everything freeable. */
struct shrink_target {
        enum scope_type type;
        size_t node_index;  /* SCOPE_NODE */
        const char *cgroup; /* SCOPE_CGROUP, normalised */
        uint64_t nr_to_scan;
        struct shrinker *only;
        bool measure; /* answer only once the clients' resident memory was read again */
        bool dry_run; /* count only: say what each would give, free nothing */
};

/* Two steps, so that the caller can hold the round before any job may finish: create, then start.
 * transport->shrink_done(caller, ...) is called once the last job is done, possibly from within
 * reclaim_shrink_start(); the round is freed after it. */
int reclaim_shrink_new(struct reclaim *rc, void *caller, struct shrink_round **ret);
void reclaim_shrink_start(struct shrink_round *r, const struct shrink_target *t);
/* The caller went away: the round finishes without telling anyone. */
void reclaim_shrink_detach(struct shrink_round *r);

/* The shrinker as ListShrinkers shows it (round_engine_shrinker_info()); ret->nodes: free() it. */
int reclaim_shrinker_info(const struct reclaim *rc, const struct shrinker *sh, struct shrinker_info_snapshot *ret);
/* The regulator's state in scope s; -ENOENT: it does not follow s. */
int reclaim_regulation(const struct reclaim *rc, const struct scope *s, struct regulation_snapshot *ret);
/* What the regulator (regulator.h) did so far. */
void reclaim_regulator_stats(const struct reclaim *rc, struct regulator_stats *ret);
/* The round engine, for what reclaim does not wrap (round.h's getters). */
const struct round_engine *reclaim_engine(const struct reclaim *rc);
