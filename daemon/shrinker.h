/* SPDX-License-Identifier: MIT */
#pragma once

/* The registry of client shrinkers. A client is one serving connection (a streaming io.pressured.Serve
 * call); who it is comes from the connection (SO_PEERCRED), held with a pidfd so that a recycled pid can
 * never be mistaken for it, never from the message. Closing the connection or the process exiting
 * removes the client and its shrinkers at once. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "shrink_policy.h"

struct manager;
struct varlink_connection;
struct shrink_request;
struct shrink_job;

struct shrinker_stats {
        uint64_t calls, scanned, freed, bytes_freed;
        uint64_t timeouts, stops, empty;
        uint64_t last_latency_usec, worst_latency_usec;
};

struct shrinker {
        struct shrink_client *client;
        uint64_t id;
        char *name;
        unsigned flags;
        unsigned seeks, batch;

        /* Per node (index in the node monitor; one entry for shrinkers that are not NUMA_AWARE). */
        size_t n_nodes;
        uint64_t *last_count;
        uint64_t *last_bytes;
        uint64_t *deferred;

        struct shrinker_stats stats;
        struct shrink_health health;

        /* Work queued for this shrinker: one request in flight at a time, jobs run in order. */
        struct shrink_job *jobs_head, *jobs_tail;
};

struct shrink_client {
        struct manager *manager;
        struct shrink_client *prev, *next;
        struct varlink_connection *conn; /* the serving connection */
        pid_t pid;
        uid_t uid;
        int pidfd;
        sd_event_source *pidfd_source;
        char *cgroup; /* v2 path */
        char token[33];
        uint64_t rejected; /* answers refused: unknown, duplicate, impossible */
        struct shrinker **shrinkers;
        size_t n_shrinkers;
        struct shrink_request *requests; /* in flight */
        struct scope **watched; /* its cgroup and the ancestors, watched for MEMCG_AWARE shrinkers */
        size_t n_watched;
        bool dead;
};

struct shrinker_spec {
        const char *name;
        unsigned flags;
        unsigned seeks, batch;
};

/* Register the client behind connection c (the caller has validated the specs). */
int shrink_client_new(struct manager *m, struct varlink_connection *c, const struct shrinker_spec *specs,
                      size_t n, struct shrink_client **ret);
/* Unregister: cancels its requests and jobs; the shrinkers are gone when this returns. */
void shrink_client_free(struct shrink_client *cl);

struct shrink_client *shrink_client_by_token(struct manager *m, const char *token);
struct shrinker *shrinker_by_id(struct manager *m, uint64_t id);

/* Index into a shrinker's per-node arrays for node index i of the node monitor. */
static inline size_t shrinker_node_slot(const struct shrinker *s, size_t node_index) {
        return s->n_nodes > 1 ? node_index : 0;
}
