/* SPDX-License-Identifier: MIT */
#pragma once

/* The arithmetic of one job's part in a round, apart from the engine that runs it (pure): whether an
 * answer can be taken, a shrinker's share of a round's goal, and what a claim is credited. */

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h"
#include "shrink_policy.h"

/* What is wrong with answer a to a request (op, asking nr_to_scan for a scan), or NULL: everything is
 * checked before anything changes. Counts are answered with count, bytes or empty; scans with freed,
 * scanned, bytes or stop; no number negative, freed and scanned at most twice nr_to_scan. */
const char *shrink_answer_check(enum shrink_op op, uint64_t nr_to_scan, const struct shrink_answer *a);

/* How a round splits its want over its shrinkers: by weight (shrink_weight()), those that have not
 * counted yet weighing what the others did on average (or, none known, as much as the one asking). */
struct shrink_split {
        uint64_t want;         /* bytes this round is to release */
        bool in_goal;          /* the round is part of an episode's goal... */
        uint64_t goal;         /* ...of this many bytes in all */
        uint64_t known_weight; /* the weights of the round's shrinkers known when it began */
        unsigned n_known, n_unknown;
};

/* The share of a shrinker that weighs w now and weighed start_weight when the round began (0: not
 * known then): of the whole goal when there is one (MAX(goal, want)), else of want. */
uint64_t shrink_share(const struct shrink_split *sp, uint64_t w, uint64_t start_weight);

/* What a shrinker may scan for a share: twice its objects (an LRU with a second chance frees about half
 * of what it looks at when the cache is in use). */
uint64_t shrink_share_scan_budget(uint64_t share_bytes, uint64_t bytes_per_object_x1000);

/* A claim of bytes freed, against what the client may still claim in the round (*credit_left, lowered
 * by what is taken): returns the part of it that counts towards goals at its trust, the part taken in
 * *ret_claim. */
uint64_t shrink_claim_credit(uint64_t bytes, uint64_t *credit_left, unsigned trust, uint64_t *ret_claim);
