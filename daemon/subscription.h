/* SPDX-License-Identifier: MIT */
#pragma once

/* Subscribers: one streaming Subscribe call each, watching one or more scopes. Where a client is told of
 * a level change: at once while the client keeps up; for a client that stops reading, events are
 * coalesced to the latest state per scope, so its cost stays bounded. An observer of the scope registry;
 * its watches hang in its slot on each scope. */

#include <json-c/json.h>
#include <stddef.h>
#include <sys/types.h>

#include "level.h"
#include "scope_registry.h"

struct subscriptions;
struct subscription;

/* Where subscribers' events go: the Varlink call in the daemon (service.c), a recorder in the unit tests,
 * as reclaim reaches its clients through its transport. The endpoint is the sink's own handle. */
struct subscription_sink {
        /* One notification; params is the JSON text of its parameters, NULL if it could not be built. A
         * sink that cannot deliver it must end the subscriber (the Varlink one drops the connection):
         * nobody misses an event and carries on. */
        int (*send)(void *endpoint, const char *params, size_t len);
        /* Bytes sent that the subscriber has not read yet: the back-pressure that coalesces. */
        size_t (*queued)(void *endpoint);
        /* End the call with an error (takes params). The sink's owner then frees the subscription. */
        void (*end)(void *endpoint, const char *error, struct json_object *params);
};

int subscriptions_new(struct scope_registry *reg, const struct subscription_sink *sink, struct subscriptions **ret);
struct subscriptions *subscriptions_free(struct subscriptions *subs);

/* A subscription of uid's for the given scopes (it takes over the references), delivering to endpoint.
 * The caller owns it: it frees it with subscription_free() when the call ends, calls
 * subscription_drained() when the subscriber has read its backlog, and sends the current state first
 * with subscription_send_state(). */
int subscription_start(struct subscriptions *subs, void *endpoint, uid_t uid, struct scope **scopes, size_t n_scopes,
                       enum level min_level, struct subscription **ret);
int subscription_send_state(struct subscription *sub);
void subscription_drained(struct subscription *sub);
void subscription_free(struct subscription *sub);
/* Subscribe calls in progress. */
size_t subscriptions_count(const struct subscriptions *subs);

/* Shutting down: end every subscription with io.pressured.ShuttingDown. */
void subscriptions_shutdown(struct subscriptions *subs);

/* Above this much unsent output, a subscriber's events are held back and coalesced. */
#define SUBSCRIPTION_QUEUE_LIMIT (64u * 1024u)
