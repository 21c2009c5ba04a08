/* SPDX-License-Identifier: MIT */
#pragma once

/* When scopes are sampled: every sample_interval while some scope is active (above ok, falling, or just
 * triggered), the node figures every node_interval otherwise, and not at all when there is nothing to
 * watch. An observer of the scope registry: a trigger that fires brings the next sample forward. */

#include <systemd/sd-event.h>

#include "config.h"
#include "node_monitor.h"
#include "scope_registry.h"

struct sampler;

/* nodes may be NULL; the sampler reads it, the scopes see what it read. */
int sampler_new(sd_event *event, const struct config *config, struct scope_registry *reg, struct node_monitor *nodes,
                struct sampler **ret);
struct sampler *sampler_free(struct sampler *sp);

/* Read the node figures now and pass them to the node scopes. */
int sampler_sample_nodes(struct sampler *sp);
/* Set the timer for what the scopes need now (start-up, reload). */
void sampler_arm(struct sampler *sp);
