/* SPDX-License-Identifier: MIT */
#pragma once

/* Subscribers: one streaming Subscribe call each, watching one or more scopes. Where a client is told of
 * a level change: at once while the client keeps up; for a client that stops reading, events are
 * coalesced to the latest state per scope, so its cost stays bounded. An observer of the scope registry;
 * its watches hang in its slot on each scope. */

#include <stddef.h>
#include <sys/types.h>

#include "level.h"
#include "scope_registry.h"

struct subscriptions;
struct varlink_connection;

int subscriptions_new(struct scope_registry *reg, struct subscriptions **ret);
struct subscriptions *subscriptions_free(struct subscriptions *subs);

/* Start streaming on c for the given scopes (the subscription takes over the references), sending the
 * current state first. */
int subscription_start(struct subscriptions *subs, struct varlink_connection *c, struct scope **scopes,
                       size_t n_scopes, enum level min_level);

/* Subscribe calls in progress. */
size_t subscriptions_count(const struct subscriptions *subs);

/* Shutting down: end every subscription with io.pressured.ShuttingDown. */
void subscriptions_shutdown(struct subscriptions *subs);

/* Above this much unsent output, a subscriber's events are held back and coalesced. */
#define SUBSCRIPTION_QUEUE_LIMIT (64u * 1024u)
