/* SPDX-License-Identifier: MIT */
#pragma once

/* Subscribers: one streaming Subscribe call each, watching one or more scopes. Where a client is told:
 * level changes are sent at once while the client keeps up; for a client that stops reading, events are
 * coalesced to the latest state per scope, so its cost stays bounded. */

#include <stddef.h>

#include "level.h"

struct manager;
struct scope;
struct subscription;
struct varlink_connection;

struct watch {
        struct subscription *sub;
        struct scope *scope; /* NULL once the scope is gone */
        struct watch *scope_prev, *scope_next;
        enum level last_sent; /* what this subscriber was last told */
        unsigned coalesced;   /* changes folded into the pending one */
        int pending;
};

/* Start streaming on c for the given scopes (the subscription takes over the references), sending the
 * current state first. */
int subscription_start(struct manager *m, struct varlink_connection *c, struct scope **scopes, size_t n_scopes,
                       enum level min_level);

/* Called by a scope when its level changed, or when it went away. */
void subscription_scope_changed(struct scope *s);
void subscription_scope_gone(struct scope *s);

/* Shutting down: end every subscription with io.pressured.ShuttingDown. */
void subscription_shutdown_all(struct manager *m);

/* Above this much unsent output, a subscriber's events are held back and coalesced. */
#define SUBSCRIPTION_QUEUE_LIMIT (64u * 1024u)
