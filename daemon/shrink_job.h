/* SPDX-License-Identifier: MIT */
#pragma once

/* Jobs: one (shrinker, node) that a round asks, run as the kernel's do_shrink_slab() runs a shrinker: a
 * count, then scans in batches of its size, each a request to the client with a deadline. The job
 * engine owns the jobs, the requests in flight (one deadline timer for all) and what it learnt of each
 * shrinker (its queue, last counts, EMPTY back-off, goal shares, statistics, health) and of each client
 * (its credit in a round). round.c makes jobs and hears from them only through the link it gives each
 * (struct job_round_ops), so that this file knows nothing of rounds. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "protocol.h"
#include "shrink_share.h"
#include "shrinker.h"

struct release_meter;
struct release_sample;

/* How jobs talk to clients: service.c implements it over Varlink, the unit tests with a fake. */
struct reclaim_transport {
        /* Send a request to the client that serves the shrinker. A failure is logged; the request then
         * runs into its deadline unless the client goes away first. */
        int (*send_request)(struct shrink_client *cl, const struct shrink_request_snapshot *q, void *userdata);
        /* Tell the client the growth limits of some of its shrinkers (a client that did not ask for them
         * is told nothing). NULL: limits are not sent. */
        int (*send_limits)(struct shrink_client *cl, const struct shrinker_limit *limits, size_t n, void *userdata);
        /* An explicit Shrink ended: its results, one per (shrinker, node) asked. Not called for a round
         * whose caller left. */
        void (*shrink_done)(void *caller, const struct shrink_result *results, size_t n_results, void *userdata);
};

/* What a job asks of its shrinker. The count's answer may turn one kind into another: an episode's job
 * into a share of the goal, an explicit "everything" into a scan of what the count reported. */
enum job_kind {
        JOB_EPISODE,       /* count, then scan as the kernel sizes it at the round's priority */
        JOB_EPISODE_SHARE, /* counted: scan for its share of the episode's goal */
        JOB_EXPLICIT_NR,   /* io.pressured.Shrink with nr_to_scan: scan exactly that, no count */
        JOB_EXPLICIT_ALL,  /* io.pressured.Shrink without nr_to_scan: count, then scan all of it */
        JOB_DRY_RUN,       /* a dry run's: the count is the result */
        JOB_PROBE,         /* quarantined: a count to see whether it answers again */
};

/* Why a job ended; DONE also for one that ran out of work or was cut. */
enum job_end {
        JOB_END_NONE,
        JOB_END_DONE,
        JOB_END_STOPPED,   /* answered stop */
        JOB_END_TIMED_OUT, /* a request missed its deadline */
        JOB_END_EMPTY,     /* answered empty */
        JOB_END_REJECTED,  /* answered with impossible values */
};

/* Per node of a shrinker: what its last count said, its EMPTY back-off, and its part in goal goal_id
 * (an episode's goal, over its rounds). Read by round.c through job_engine_node(). */
struct shrinker_node_state {
        uint64_t last_count, last_bytes;
        double last_value; /* what the last count said its last bytes are worth (0: not known) */
        uint64_t empty_until; /* answered EMPTY: not asked in rounds before this time */
        uint64_t goal_share;  /* its share of the whole goal, from its last count */
        uint64_t goal_freed;  /* released towards it (as credited) */
        unsigned goal_asks;   /* rounds of the goal that asked it for its share */
};

/* What a job did, told to its round when it leaves it (strings borrowed for the call). */
struct job_outcome {
        const struct shrinker *shrinker;
        int node;
        const char *cgroup;
        enum job_end end;
        bool probe;
        bool answered; /* at least once in time */
        uint64_t count; /* what its count said (freeable) */
        uint64_t freed, scanned, bytes_freed;
};

/* How a job reports to its round: round.c's. round and member are the round's own, handed back. */
struct job_round_ops {
        void (*split)(void *round, struct shrink_split *ret); /* the split of its goal, as it stands */
        /* Its share of the goal planned by value when the round began (value_split.h); false: none,
         * the split's proportional share stands. */
        bool (*planned)(void *round, void *member, uint64_t *ret_share);
        bool (*satisfied)(void *round);                       /* it has released what it wants */
        void (*share)(void *round, bool given); /* asked for its share; given: it had given it already */
        void (*freed)(void *round, uint64_t bytes); /* released towards the round, as credited */
        void (*done)(void *round, void *member, const struct job_outcome *o); /* left the round */
};

/* A job to make: what to ask, and of which round it is a part. */
struct job_spec {
        struct shrinker *shrinker;
        size_t node_index;
        const char *cgroup;
        int priority;
        enum job_kind kind;   /* JOB_PROBE instead when the shrinker is quarantined */
        uint64_t nr_to_scan;  /* JOB_EXPLICIT_NR */
        uint64_t round_id;
        enum scope_type scope_type; /* told to the client, with the level (-1: none) */
        int level;
        /* The round's goal, fixed when it runs: want 0 is the kernel's sizing alone. */
        uint64_t want, goal_id;
        bool share_sets_priority;
        int floor;
        uint64_t start_weight; /* its weight in the split when the round began (0: not known) */
        /* Its round; round NULL for a job that runs beside it (a probe of a quarantined shrinker). */
        const struct job_round_ops *ops;
        void *round, *member;
        struct release_sample *sample;
};

struct job_engine;
struct shrink_job;

int job_engine_new(sd_event *event, const struct config *config, struct shrink_registry *shrinkers,
                   const struct reclaim_transport *transport, void *userdata, struct release_meter *meter,
                   struct job_engine **ret);
/* After every client is gone: no job or request is left then. */
struct job_engine *job_engine_free(struct job_engine *je);

/* A job, queued behind its shrinker's earlier ones; it runs from job_engine_start(). NULL: no memory. */
struct shrink_job *job_new(struct job_engine *je, const struct job_spec *spec);
bool job_is_probe(const struct shrink_job *j);
/* Its round no longer waits for it: it goes on at its shrinker's pace and reports nothing more. ret: what
 * it did so far. */
void job_leave_round(struct shrink_job *j, struct job_outcome *ret);
/* Start every shrinker's queue that has a job waiting and none running. */
void job_engine_start(struct job_engine *je);

/* Apply an answer: as round_engine_answer(). */
int job_engine_answer(struct job_engine *je, struct shrink_client *cl, const struct shrink_answer *a,
                      const char **ret_reason);

/* What the engine knows of a shrinker. */
bool job_engine_busy(const struct job_engine *je, const struct shrinker *sh); /* a job queued or running */
bool job_engine_quarantined(const struct job_engine *je, const struct shrinker *sh);
/* NULL: never asked. */
const struct shrinker_node_state *job_engine_node(const struct job_engine *je, const struct shrinker *sh,
                                                  size_t node_index);
/* It has done its part in goal goal_id on the node: released its share, or was asked for it in enough of
 * the goal's rounds. */
bool job_engine_goal_done(const struct job_engine *je, const struct shrinker *sh, size_t node_index, uint64_t goal_id);
/* Its last counts per node, statistics and health, into ret (made by shrinker_info()). */
void job_engine_info(const struct job_engine *je, const struct shrinker *sh, struct shrinker_info_snapshot *ret);
/* Answers of cl to requests it does not have. */
uint64_t job_engine_rejected(const struct job_engine *je, const struct shrink_client *cl);

/* Finish every job of the shrinker (their rounds are told), forget it. */
void job_engine_drop_shrinker(struct job_engine *je, const struct shrinker *sh);
/* Forget the client's credit (after its shrinkers were dropped). */
void job_engine_drop_client(struct job_engine *je, const struct shrink_client *cl);
