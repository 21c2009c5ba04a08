/* SPDX-License-Identifier: MIT */
#pragma once

/* The engine's insides, for round.c (rounds, the engine) and shrink_job.c (jobs, their requests and
 * the answers) only. */

#include <stdbool.h>
#include <stdint.h>

#include "round.h"
#include "shrink_share.h"

/* The requests in flight (shrink_job.c's): by id, and in deadline order (every request gets the same
 * timeout, so this is send order) with one timer for all of them, at or before the first deadline: no
 * timer per request. */
struct request_queue {
        struct hashmap *by_id;
        struct shrink_request *first, *last;
        sd_event_source *deadline_timer;
        uint64_t timer_usec; /* when it is set to fire; 0: off */
        uint64_t last_id;
};

struct round_engine {
        sd_event *event;
        const struct config *config;
        struct shrink_registry *shrinkers;
        const struct reclaim_transport *transport;
        void *userdata;
        struct request_queue queue;
        struct hashmap *states;   /* struct shrinker_state by shrinker id */
        struct hashmap *credits;  /* struct client_credit by client (its address, while registered) */
        struct release_meter *meter;
        uint64_t last_round_id;
};

/* Per node: what its last count said, its EMPTY back-off, and its part in goal goal_id (an episode's
 * goal, over its rounds). */
struct shrinker_node_state {
        uint64_t last_count, last_bytes;
        uint64_t empty_until; /* answered EMPTY: not asked in rounds before this time */
        uint64_t goal_share;  /* its share of the whole goal, from its last count */
        uint64_t goal_freed;  /* released towards it (as credited) */
        unsigned goal_asks;   /* rounds of the goal that asked it for its share */
};

/* round.c's state of one shrinker, beside the registry's struct shrinker as the kernel keeps a memcg's
 * shrinker_info: keyed by shrinker id, made when a round first needs it, dropped with the shrinker. */
struct shrinker_state {
        struct shrinker *shrinker;
        struct shrink_job *head, *tail; /* its queue: one request in flight at a time, jobs run in order */
        uint64_t goal_id;
        struct shrinker_stats stats;
        struct shrink_health health;
        size_t n_nodes;
        struct shrinker_node_state node[];
};

/* round.c's state of one client: its memory as read once in round credit_round (when), the cap on what
 * it may say it holds, and the bytes it may still claim to have freed in that round; and its answers to
 * requests it does not have (unknown, another client's, answered already). */
struct client_credit {
        uint64_t credit_round, resident, resident_usec, credit_left;
        uint64_t rejected;
};

struct shrink_request {
        struct round_engine *rc;
        uint64_t id;
        struct shrink_job *job;
        enum shrink_op op;
        uint64_t nr_to_scan;
        uint64_t sent_usec, deadline_usec;
        struct shrink_request *prev, *next; /* in deadline order */
};

/* What a job asks of its shrinker. The count's answer may turn one kind into another: an episode's job
 * into a share of the goal, an explicit "everything" into a scan of what the count reported. */
enum job_kind {
        JOB_EPISODE,       /* count, then scan as the kernel sizes it at the round's priority */
        JOB_EPISODE_SHARE, /* counted: scan for its share of the episode's goal (job_ask_share()) */
        JOB_EXPLICIT_NR,   /* io.pressured.Shrink with nr_to_scan: scan exactly that, no count */
        JOB_EXPLICIT_ALL,  /* io.pressured.Shrink without nr_to_scan: count, then scan all of it */
        JOB_DRY_RUN,       /* a dry run's: the count is the result */
        JOB_PROBE,         /* quarantined: a count to see whether it answers again */
};

/* Where a job is: QUEUED -> RUNNING (a request in flight or being decided) -> ENDED (retired at once). */
enum job_state {
        JOB_QUEUED,
        JOB_RUNNING,
        JOB_ENDED,
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

/* A job's place in its round: round.c's (round_take_job(), round_job_done()). */
struct round_member {
        struct shrink_job *prev, *next; /* in the round's list, while it counts there */
        struct shrink_round *round;     /* NULL once cut from it, or for a probe */
        uint64_t start_weight;          /* its weight from the last count, when the round began */
};

/* One (shrinker, node) of a round. A job leaves its round early when the round's budget runs out (it is
 * cut: it goes on by itself, the round no longer waits for it) or never joins it (the count that probes
 * a quarantined shrinker): a round never waits for a shrinker that is slow. */
struct shrink_job {
        struct shrink_job *next; /* in the shrinker's queue */
        struct shrinker_state *ss; /* its shrinker's */
        struct shrinker *shrinker;
        struct round_engine *rc;
        uint64_t round_id;
        struct round_member in_round;
        size_t node_index;
        int node;
        char *cgroup;
        int priority;
        enum scope_type scope_type;
        int level;
        enum job_kind kind;
        enum job_state state;
        enum job_end end;
        unsigned n_answers; /* answered in time (a count or a scan) */
        bool scan_answered; /* a scan among them: what ends a quarantine */
        uint64_t explicit_left; /* JOB_EXPLICIT_NR, JOB_PROBE: objects still to scan */
        struct shrink_plan plan;
        uint64_t share_bytes;  /* JOB_EPISODE_SHARE: its share; plan.total_scan is what it may scan for it */
        uint64_t freeable, bytes_per_object_x1000;
        uint64_t freed, scanned, bytes_freed;
        struct shrink_request *req;
};

/* How a job reports to its round: round.c's, set in every round; shrink_job.c calls through it. */
struct round_reports {
        void (*share)(struct shrink_round *r, bool given); /* asked for its share; given: it had given it */
        void (*freed)(struct shrink_round *r, uint64_t bytes); /* released towards the round, as credited */
        void (*done)(struct shrink_round *r, struct shrink_job *j); /* left the round (done, or cut) */
};

struct shrink_round {
        struct round_engine *rc;
        const struct round_reports *reports;
        uint64_t id;
        char *label;            /* for the log: the scope's name, or NULL for an explicit Shrink */
        enum scope_type type;   /* of the scope, and its level (-1: none), told to the clients */
        int level;
        round_done_fn on_done;  /* the owner (an episode), told when the round is over */
        void *userdata;
        bool explicit;
        bool measure; /* answer once the clients were measured */
        bool dry_run; /* count, scan nothing */
        void *caller; /* the Shrink call to answer; NULL once it left */
        struct shrink_result *results;
        size_t n_results, n_alloc;
        struct shrink_job *jobs; /* still counting here */
        unsigned n_jobs;         /* not finished yet */
        uint64_t want;           /* bytes to release; 0: the kernel's sizing alone */
        bool share_sets_priority;
        int floor;
        uint64_t goal, goal_id;
        unsigned n_share_jobs, n_shares_in; /* jobs asked for a share of the goal; those that had given it */
        uint64_t known_weight;   /* the split: weights of the jobs whose shrinker counted before */
        unsigned n_known, n_unknown;
        sd_event_source *budget; /* episode rounds: when unfinished jobs are cut */
        struct release_sample *sample; /* what its clients had resident, and claimed */
        uint64_t freed, freed_bytes, scanned;
        unsigned n_asked, n_busy;
};

/* shrink_job.c's, for round.c */
struct shrinker_node_state *shrinker_state_node(struct shrinker_state *ss, size_t node_index);
struct shrinker_state *shrinker_state_get(struct round_engine *rc, struct shrinker *sh);
/* A job of round r for one node of sh: kind (JOB_PROBE instead when sh is quarantined), nr_to_scan for
 * JOB_EXPLICIT_NR. */
struct shrink_job *job_new(struct shrink_round *r, struct shrinker *sh, size_t node_index, const char *cgroup,
                           int priority, enum job_kind kind, uint64_t nr_to_scan);
void job_enqueue(struct shrink_job *j);
void job_run(struct shrink_job *j);
const struct config *round_engine_config(const struct round_engine *rc);
void job_retire(struct shrink_job *j);
int request_queue_init(struct round_engine *rc);
/* Empty by then: every job ended. */
void request_queue_done(struct request_queue *rq);


