/* SPDX-License-Identifier: MIT */
#pragma once

/* Reclaim rounds: where clients are asked to free memory. A scope above ok starts an episode of rounds;
 * a round sends count and scan requests to the shrinkers in scope, sized by shrink_policy, and never
 * waits on a client: requests to different clients are in flight together, each with a deadline, and
 * one shrinker has one request in flight at a time. Explicit io.pressured.Shrink calls run as a round
 * too. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "shrinker.h"

struct manager;
struct scope;
struct varlink_connection;

struct shrink_request {
        struct shrink_request *prev, *next; /* in the client's list */
        uint64_t id;
        struct shrink_job *job;
        enum shrink_op op;
        uint64_t nr_to_scan;
        uint64_t sent_usec, deadline_usec;
        sd_event_source *timer;
};

struct shrink_round;

struct shrink_job {
        struct shrink_job *next; /* in the shrinker's queue */
        struct shrinker *shrinker;
        struct shrink_round *round;
        size_t node_index;
        int node;
        char *cgroup;
        int priority;
        bool explicit_nr;  /* io.pressured.Shrink with nr_to_scan: scan exactly that, no count */
        bool explicit_all; /* io.pressured.Shrink without nr_to_scan: count, then scan all of it */
        uint64_t explicit_left;
        bool probe_only; /* quarantined: a count to see whether it answers again */
        struct shrink_plan plan;
        uint64_t freeable, bytes_per_object_x1000;
        uint64_t freed, scanned, bytes_freed;
        bool stopped, timed_out, empty, started;
        struct shrink_request *req;
};

/* An answer from a client. Fields not given are -1. */
struct shrink_answer {
        int64_t count, bytes, freed, scanned;
        int empty, stop;
};

/* Scope levels drive episodes of rounds. */
void reclaim_scope_changed(struct scope *s);
void reclaim_scope_free(struct scope *s);
/* A client registered: scopes already above ok start asking at once. */
void reclaim_clients_changed(struct manager *m);

/* io.pressured.Shrink: one round over the shrinkers the scope selects (optionally just one shrinker),
 * answering c when every job is done. nr_to_scan 0: count first and scan everything freeable. */
int reclaim_shrink_now(struct manager *m, struct varlink_connection *c, enum scope_type type, int node_index,
                       const char *cgroup, uint64_t nr_to_scan, struct shrinker *only);

/* Apply an answer from a client. Returns 0, -ENOENT for an unknown (or already answered, or expired)
 * request, -EINVAL with *ret_reason for impossible values. */
int reclaim_answer(struct shrink_client *cl, uint64_t request_id, const struct shrink_answer *a,
                   const char **ret_reason);

/* The client is going away: drop its requests and jobs. */
void reclaim_client_gone(struct shrink_client *cl);
