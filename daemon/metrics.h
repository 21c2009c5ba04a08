/* SPDX-License-Identifier: MIT */
#pragma once

/* Metrics for Prometheus, as a file for node_exporter's textfile collector: levels, reclaim targets,
 * level changes and headroom per scope, free memory and watermarks per node, and what every client
 * shrinker holds, freed and missed. An observer of the scopes: a level change or a memory event makes
 * the file due, written at most once per sample interval; otherwise it is refreshed with the node
 * interval. Written atomically (a temporary file renamed over the old one), removed at exit so that a
 * stopped daemon leaves no stale levels behind. Every name starts with pressured_: a name of
 * node_exporter's own would silently replace the real metric. */

#include <stdio.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "node_monitor.h"
#include "scope_registry.h"
#include "reclaim.h"
#include "shrinker.h"

struct metrics;

/* What the metrics read; all outlive the metrics. */
struct metrics_sources {
        struct scope_registry *scopes;
        const struct node_monitor *nodes; /* NULL: no node figures */
        const struct shrink_registry *shrinkers;
        const struct reclaim *reclaim; /* what the rounds learnt of each shrinker; NULL: no shrinkers */
        const struct proactive *proactive; /* reclaim_cgroup=; NULL: none */
        size_t (*n_subscriptions)(void *userdata);
        size_t (*n_connections)(void *userdata);
        void *userdata;
};

/* Writes into config->metrics_directory; nothing while that is empty. */
int metrics_new(sd_event *event, const struct config *config, const struct metrics_sources *src, struct metrics **ret);
struct metrics *metrics_free(struct metrics *m);
/* Write into dir from now on (NULL or "": nowhere), the file in the old directory removed; a reload's. The
 * directory is opened once, not following a symlink, and every write is relative to it. */
int metrics_set_directory(struct metrics *m, const char *dir);

/* The text, as written to the file. */
int metrics_render(struct metrics *m, FILE *f);
/* A label value as the text format wants it: backslash, double quote and newline escaped. */
void metrics_write_label(FILE *f, const char *value);
