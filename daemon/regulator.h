/* SPDX-License-Identifier: MIT */
#pragma once

/* The regulator: below the levels, what client shrinkers feel first. Every regulate_interval (a quarter
 * of it while a cgroup scope's caches grow or it stalls at all, or a scope has a growth limit), for each
 * scope that has client shrinkers in it (a client's own cgroup and the limited groups above it, and the
 * system), it reads the scope's cumulative `some` stall with one pread; while the stall rate is over the
 * scope's budget, the shrinkers in it are asked for a step (regulation.c sizes it), through the round
 * engine like any round. Under the budget they are held to the growth limit, and grow back on their own
 * as it rises. Levels and subscribers are untouched: they stay the alarm; but a level raised by the stall
 * of a scope the regulator follows asks no rounds of its own (regulator_owns()). With no client
 * shrinker, its timer is off. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "protocol.h"
#include "round.h"
#include "scope_registry.h"
#include "shrinker.h"

struct regulator;

int regulator_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                  struct shrink_registry *shrinkers, struct round_engine *engine, struct regulator **ret);
/* After the shrink registry (its clients take their told limits along), before the round engine. */
struct regulator *regulator_free(struct regulator *g);

/* Whether the regulator answers scope s's stall: it follows s (client shrinkers are in it) with a budget.
 * Then a level raised by that stall asks no rounds of its own (reclaim.c): one owner of what is still
 * wanted, where the level's episode and the regulator's steps both asked, on top of each other. */
bool regulator_owns(const struct regulator *g, const struct scope *s);

/* What the regulator did, over the daemon's life: intervals with a step, and the bytes they asked. */
struct regulator_stats {
        uint64_t ticks, steps, asked_bytes, freed_bytes;
};
void regulator_get_stats(const struct regulator *g, struct regulator_stats *ret);

/* The regulator's state in scope s (-ENOENT: it does not follow s, or has not looked yet). cgroup and
 * state point into the scope and static text: valid until the scope changes. */
int regulator_scope_info(const struct regulator *g, const struct scope *s, struct regulation_snapshot *ret);
/* The same for the scope that holds client cl back: the tightest growth limit among the scopes it is
 * watched in, else the first of them. */
int regulator_client_info(const struct regulator *g, const struct shrink_client *cl, struct regulation_snapshot *ret);
/* The growth limit shrinker sh was last told (its share; told to a client that asked for limits), in
 * bytes; 0: none. */
uint64_t regulator_shrinker_limit(const struct regulator *g, const struct shrinker *sh);
