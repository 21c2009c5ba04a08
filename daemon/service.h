/* SPDX-License-Identifier: MIT */
#pragma once

/* The io.pressured interface over Varlink: where a call enters the daemon. Each method parses its
 * parameters against a table, asks the registries, subscriptions or reclaim, and encodes the reply with
 * the protocol codec. It is also reclaim's transport: requests go out on the client's serving
 * connection, an explicit Shrink is answered on its caller's. */

#include <stddef.h>

#include "cgroup.h"
#include "reclaim.h"
#include "scope_registry.h"
#include "shrinker.h"
#include "subscription.h"
#include "varlink.h"

struct service;

/* layout may be NULL (no cgroup v2). The service becomes the owner of the shrink registry's clients'
 * connections: it closes a connection whose process exited. */
int service_new(struct scope_registry *scopes, struct subscriptions *subscriptions, struct shrink_registry *shrinkers,
                const struct cgroup_layout *layout, const struct config *config, struct service **ret);
struct service *service_free(struct service *svc);
void service_set_reclaim(struct service *svc, struct reclaim *rc);

/* The Subscribe call as the subscriptions' sink (the endpoint is the call's connection). */
extern const struct subscription_sink service_subscription_sink;
extern const struct reclaim_transport service_reclaim_transport;

/* The interfaces to serve, with the service as the server's userdata. */
extern const struct varlink_interface service_interfaces[];
extern const size_t service_n_interfaces;
/* How each ShrinkerSpec of Serve and AddShrinker is parsed (checked against the IDL by test-interface). */
extern const struct param service_shrinker_spec_params[];
