/* SPDX-License-Identifier: MIT */
#pragma once

/* The registry of client shrinkers. A client is one serving connection (a streaming io.pressured.Serve
 * call); who it is comes from the connection's peer credentials, held with a pidfd so that a recycled
 * pid can never be mistaken for it, never from the message. The registry knows the client's connection
 * only as an opaque owner pointer: when the process exits it tells the owner (who closes the
 * connection), and whoever removes a client tells the observers (client_added/client_removed). Tokens and
 * shrinker ids are looked up in hash tables. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "hashmap.h"
#include "log.h"
#include "node_monitor.h"
#include "protocol.h"
#include "scope_registry.h"
#include "shrink_policy.h"

struct shrink_client;

struct shrinker {
        struct shrink_client *client;
        uint64_t id;
        char *name;
        unsigned flags;
        unsigned seeks, batch;
        bool counted; /* in the registry's per-uid count */

        /* Per node (index in the node monitor; one entry for shrinkers that are not NUMA_AWARE): the
         * work deferred to the next pass, as the kernel keeps nr_deferred in its shrinker. Written
         * through shrinker_set_deferred() by whoever runs the passes. Everything else a pass learns
         * (counts, goals, statistics, health) is round.c's, in its own table keyed by id. */
        size_t n_nodes;
        uint64_t *deferred;
};

struct shrink_client {
        struct shrink_registry *registry;
        struct shrink_client *prev, *next;
        void *owner; /* the serving connection, to whoever registered the client */
        pid_t pid;          /* the process that registered: it answers, and its connection is the client's */
        pid_t measured_pid; /* whose memory the shrinkers free: pid, or a server it serves for (for_pid) */
        uid_t uid;
        int pidfd;          /* measured_pid's pin */
        sd_event_source *pidfd_source;
        int caller_pidfd; /* pid's pin when it serves for another (for_pid), else -EBADF */
        sd_event_source *caller_source;
        bool ending;      /* the owner was told to end it (on_exit) */
        int statm_fd; /* /proc/PID/statm, opened under the pin */
        bool own_cgroup; /* alone in its cgroup: measured by the cgroup's memory, not its RSS */
        char *cgroup; /* v2 path */
        char token[33];
        struct shrinker **shrinkers;
        size_t n_shrinkers, max_shrinkers;
        struct scope **watched; /* its cgroup and the ancestors, watched for MEMCG_AWARE shrinkers */
        size_t n_watched;
};

struct shrink_registry_observer {
        void (*client_added)(struct shrink_client *cl, void *userdata);
        void (*client_removed)(struct shrink_client *cl, void *userdata); /* its shrinkers still there */
        /* One shrinker added to or removed from a client that was started (AddShrinker, RemoveShrinker). */
        void (*shrinker_added)(struct shrinker *sh, void *userdata);
        void (*shrinker_removed)(struct shrinker *sh, void *userdata); /* still in its client */
};

#define SHRINK_REGISTRY_OBSERVERS_MAX 4

struct shrink_registry {
        sd_event *event;
        struct scope_registry *scopes;
        const struct node_monitor *nodes; /* NULL: one node */
        struct shrink_client *clients;    /* list, newest first */
        size_t n_clients;
        struct hashmap *by_token, *by_id;
        struct hashmap *per_uid;        /* uid -> shrinkers registered */
        unsigned max_shrinkers_per_uid; /* for users other than root; 0: no cap (shrink_registry_set_max_per_uid()) */
        uint64_t last_shrinker_id;
        sd_event_source *recheck; /* follows each client's process: its cgroup, for_pid's uids */
        /* The client's process exited: its connection may linger (inherited by a child); the owner
         * should close it, which unregisters the client. */
        void (*on_exit)(struct shrink_client *cl, void *userdata);
        void *exit_userdata;
        struct {
                const struct shrink_registry_observer *ops;
                void *userdata;
        } observers[SHRINK_REGISTRY_OBSERVERS_MAX];
        size_t n_observers;
};

int shrink_registry_new(sd_event *event, struct scope_registry *scopes, const struct node_monitor *nodes,
                        struct shrink_registry **ret);
/* Every client must have been freed. */
struct shrink_registry *shrink_registry_free(struct shrink_registry *reg);
int shrink_registry_add_observer(struct shrink_registry *reg, const struct shrink_registry_observer *ops,
                                 void *userdata);
/* Who is told that a client's process exited (its connection's owner, which should close it). */
void shrink_registry_set_exit_handler(struct shrink_registry *reg,
                                      void (*on_exit)(struct shrink_client *cl, void *userdata), void *userdata);
/* The most shrinkers a user other than root may hold (0: no cap); those registered stay. */
void shrink_registry_set_max_per_uid(struct shrink_registry *reg, unsigned max);

struct shrinker_spec {
        const char *name;
        unsigned flags;
        unsigned seeks, batch;
};

/* How often the registry looks again at each client's process: a process that moved to another cgroup
 * takes its shrinkers with it, and one served for (for_pid) that is no longer all its client's uid's
 * (it ran a set-user-ID program) ends the client. */
#define SHRINK_RECHECK_USEC (1 * USEC_PER_SEC)

/* Register process pid (of uid, as the kernel vouched for it) with its shrinkers (the caller has
 * validated the specs). measured_pid: whose memory they free, pid itself or a process pid serves for
 * (the caller checked pid may); its cgroup places the shrinkers and its memory is measured, and its exit
 * ends the client. pidfd: the kernel's pidfd of measured_pid where there is one (borrowed; it is
 * duplicated), else -EBADF and the pid is pinned now, which a pid reused since it was read would fool.
 * caller_pidfd: pid's pin (borrowed), needed when measured_pid is another process: the client also ends
 * when pid exits, even if its connection lives on in a child. -ESRCH when a process cannot be pinned
 * (it exited); -EPERM when measured_pid is no longer uid's. */
int shrink_client_new(struct shrink_registry *reg, pid_t pid, pid_t measured_pid, int pidfd, int caller_pidfd,
                      uid_t uid, void *owner, const struct shrinker_spec *specs, size_t n,
                      struct shrink_client **ret);
/* Tell the observers that the client is there (reclaim may send it requests at once). Separate from
 * shrink_client_new() so that the owner can first tell the client its token and ids. */
void shrink_client_start(struct shrink_client *cl);
/* Unregister: observers drop its work; the shrinkers are gone when this returns. */
void shrink_client_free(struct shrink_client *cl);

/* One more shrinker for a started client, with a new id, unless it has max already (-E2BIG). */
int shrink_client_add_shrinker(struct shrink_client *cl, const struct shrinker_spec *spec, size_t max,
                               struct shrinker **ret);
/* Unregister one shrinker: observers drop its work; it is freed when this returns. */
void shrink_client_remove_shrinker(struct shrink_client *cl, struct shrinker *sh);

struct shrink_client *shrink_client_by_token(const struct shrink_registry *reg, const char *token);
struct shrinker *shrinker_by_id(const struct shrink_registry *reg, uint64_t id);

/* What the kernel shows of the client's memory now: its cgroup's usage (memory.current, v1
 * memory.usage_in_bytes) while it is alone in a cgroup of its own, otherwise its resident memory (RSS,
 * /proc/PID/statm); an error once it is gone. */
int shrink_client_resident(struct shrink_client *cl, uint64_t *ret);

/* What the registry knows of the shrinker as ListShrinkers shows it (identity, spec, deferred work);
 * ret->nodes is allocated, free() it. The rest is filled by round_engine_shrinker_info(). */
int shrinker_info(const struct shrinker *sh, struct shrinker_info_snapshot *ret);

void shrinker_set_deferred(struct shrinker *sh, size_t node_index, uint64_t nr);

/* The node id of node index i (0 without node figures). */
int shrink_registry_node_id(const struct shrink_registry *reg, size_t node_index);
size_t shrink_registry_n_nodes(const struct shrink_registry *reg);

/* Index into a shrinker's per-node arrays for node index i of the node monitor. */
static inline size_t shrinker_node_slot(const struct shrinker *s, size_t node_index) {
        return s->n_nodes > 1 ? node_index : 0;
}
