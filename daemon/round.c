/* SPDX-License-Identifier: MIT */
#include "round.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "list.h"
#include "clock.h"
#include "log.h"
#include "macro.h"
#include "release.h"

struct round_engine {
        sd_event *event;
        const struct config *config;
        struct shrink_registry *shrinkers;
        const struct reclaim_transport *transport;
        void *userdata;
        struct hashmap *requests; /* in flight, by id */
        /* In flight in deadline order (every request gets the same timeout, so this is send order) and
         * one timer for all of them, at or before the first deadline: no timer per request. */
        struct shrink_request *first, *last;
        sd_event_source *deadline_timer;
        uint64_t timer_usec; /* when it is set to fire; 0: off */
        struct hashmap *states;   /* struct shrinker_state by shrinker id */
        struct hashmap *credits;  /* struct client_credit by client (its address, while registered) */
        struct release_meter *meter;
        uint64_t last_request_id, last_round_id;
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

/* One (shrinker, node) of a round. A job leaves its round early when the round's budget runs out (it is
 * cut: it goes on by itself, the round no longer waits for it) or never joins it (the count that probes
 * a quarantined shrinker): a round never waits for a shrinker that is slow. */
struct shrink_job {
        struct shrink_job *next; /* in the shrinker's queue */
        struct shrink_job *round_prev, *round_next; /* in its round, while it counts there */
        struct shrinker_state *ss; /* its shrinker's */
        struct shrinker *shrinker;
        struct round_engine *rc;
        uint64_t round_id;
        struct shrink_round *round; /* NULL once cut from it, or for a probe */
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
        uint64_t explicit_left; /* JOB_EXPLICIT_NR: objects still to scan */
        struct shrink_plan plan;
        uint64_t share_bytes;  /* JOB_EPISODE_SHARE: its share; plan.total_scan is what it may scan for it */
        uint64_t start_weight; /* its weight from the last count, when the round began */
        uint64_t freeable, bytes_per_object_x1000;
        uint64_t freed, scanned, bytes_freed;
        struct shrink_request *req;
};

struct shrink_round {
        struct round_engine *rc;
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

/* libpressure gives freed memory back at most every 100 ms after its answers: measure well after that. */
#define RELEASE_SETTLE_USEC (300 * 1000)

static const struct config *engine_config(const struct round_engine *rc) {
        return rc->config;
}

static const struct shrink_client *job_client(const struct shrink_job *j) {
        return j->shrinker->client;
}

static void job_finish(struct shrink_job *j);

/* The first reason given is the one reported. */
static void job_end_with(struct shrink_job *j, enum job_end end) {
        if (j->end == JOB_END_NONE)
                j->end = end;
}
static void round_job_done(struct shrink_round *r, struct shrink_job *j);

/* What the kernel shows of the client's memory, read once per round, the first time the round needs it:
 * a cache cannot hold more than that, nor free more in one round. 0 once the client is gone. */
static struct client_credit *credit_of(struct round_engine *rc, const struct shrink_client *cl) {
        uint64_t key = (uint64_t) (uintptr_t) cl;
        struct client_credit *c = hashmap_get_u64(rc->credits, key);
        if (c)
                return c;
        c = calloc(1, sizeof(*c));
        if (c && hashmap_put_u64(rc->credits, key, c) < 0) {
                free(c);
                return NULL;
        }
        return c;
}

/* The client's credit in the job's round, its memory read on the round's first use. NULL when there is
 * no memory for its record: it is then credited nothing. */
static struct client_credit *job_credit(struct shrink_job *j) {
        struct shrink_client *cl = j->shrinker->client;
        struct client_credit *c = credit_of(j->rc, cl);
        if (c && c->credit_round != j->round_id) {
                uint64_t resident;
                c->credit_round = j->round_id;
                c->resident = shrink_client_resident(cl, &resident) >= 0 ? resident : 0;
                c->resident_usec = event_now(j->rc->event);
                c->credit_left = c->resident;
        }
        return c;
}

static uint64_t client_round_resident(struct shrink_job *j) {
        const struct client_credit *c = job_credit(j);
        return c ? c->resident : 0;
}

/* ---- requests ---- */

static void request_free(struct shrink_request *q) {
        if (!q)
                return;
        struct round_engine *rc = q->rc;
        hashmap_remove_u64(rc->requests, q->id);
        /* The timer may stay set for a deadline that has gone: it then finds nothing due and moves on. */
        LIST_REMOVE_TAIL_F(prev, next, rc->first, rc->last, q);
        if (q->job)
                q->job->req = NULL;
        free(q);
}

static void deadline_timer_set(struct round_engine *rc, uint64_t usec) {
        if (sd_event_source_set_time(rc->deadline_timer, usec) < 0 ||
            sd_event_source_set_enabled(rc->deadline_timer, SD_EVENT_ONESHOT) < 0) {
                /* Cannot happen for an existing timer source; without it requests would never expire. */
                log_error("Cannot set the shrink request deadline timer.");
                return;
        }
        rc->timer_usec = usec;
}

static void request_expire(struct shrink_request *q) {
        struct shrink_job *j = q->job;
        struct shrinker *sh = j->shrinker;

        j->ss->stats.timeouts++;
        job_end_with(j, JOB_END_TIMED_OUT);
        if (shrink_health_timeout(&j->ss->health, engine_config(q->rc)->quarantine_after))
                log_client(sh->client->uid, LOG_WARNING,
                           "Shrinker %s (id %llu) of pid %d did not answer %u requests in time: quarantined.",
                            sh->name, (unsigned long long) sh->id, (int) sh->client->pid,
                            j->ss->health.consecutive_timeouts);
        request_free(q);
        job_finish(j);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct round_engine *rc = userdata;
        uint64_t now = event_now(rc->event); /* usec is when the timer was set for, the loop's time may be later */
        (void) s;
        (void) usec;

        rc->timer_usec = 0;
        /* Expiring a request may send the next job's request: it goes to the end, with a later deadline. */
        while (rc->first && rc->first->deadline_usec <= now)
                request_expire(rc->first);
        if (rc->first)
                deadline_timer_set(rc, rc->first->deadline_usec);
        return 0;
}

/* Into deadline order: from the end, where a request with the usual timeout belongs. */
static void request_link(struct round_engine *rc, struct shrink_request *q) {
        struct shrink_request *after = rc->last;
        while (after && after->deadline_usec > q->deadline_usec)
                after = after->prev;
        LIST_INSERT_AFTER_TAIL_F(prev, next, rc->first, rc->last, after, q);
        if (rc->timer_usec == 0 || q->deadline_usec < rc->timer_usec)
                deadline_timer_set(rc, q->deadline_usec);
}

static int request_send(struct shrink_job *j, enum shrink_op op, uint64_t nr_to_scan) {
        struct round_engine *rc = j->rc;
        struct shrinker *sh = j->shrinker;
        uint64_t now = event_now(rc->event);
        int r;

        struct shrink_request *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (struct shrink_request){
                .rc = rc,
                .id = ++rc->last_request_id,
                .job = j,
                .op = op,
                .nr_to_scan = nr_to_scan,
                .sent_usec = now,
                .deadline_usec = now + rc->config->request_timeout_usec,
        };
        r = hashmap_put_u64(rc->requests, q->id, q);
        if (r < 0) {
                free(q);
                return r;
        }
        request_link(rc, q);
        j->req = q;

        if (op == SHRINK_OP_SCAN) {
                j->ss->stats.calls++;
                /* Measured around the round from the first time it is asked to scan in it. */
                const struct client_credit *c = job_credit(j);
                if (j->round && c)
                        release_sample_begin(j->round->sample, sh->client, c->resident, c->resident_usec);
        }
        const struct shrink_request_snapshot snap = {
                .id = q->id,
                .shrinker = sh->id,
                .op = op,
                .node = j->node,
                .cgroup = j->cgroup,
                .nr_to_scan = nr_to_scan,
                .priority = j->priority,
                .deadline = q->deadline_usec,
                .scope_type = j->scope_type,
                .level = j->level,
        };
        r = rc->transport->send_request(sh->client, &snap, rc->userdata);
        if (r < 0)
                log_debug_errno(r, "Cannot send request to pid %d: %m", (int) sh->client->pid);
        return 0;
}

/* ---- jobs ---- */

static void job_free(struct shrink_job *j) {
        if (!j)
                return;
        request_free(j->req);
        free(j->cgroup);
        free(j);
}

/* The round's goal is released: its jobs stop at their next step. */
static bool job_goal_met(const struct shrink_job *j) {
        const struct shrink_round *r = j->round;
        return r && r->want > 0 && r->freed_bytes >= r->want;
}

static void job_next_scan(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;
        uint64_t nr;

        if (job_goal_met(j)) {
                job_finish(j);
                return;
        }
        if (j->kind == JOB_EXPLICIT_NR) {
                /* Cut from an explicit Shrink (its caller left, or its time is up): nobody wants the rest.
                 * Every job of an explicit Shrink is in its round until then. */
                if (j->explicit_left == 0 || !j->round) {
                        job_finish(j);
                        return;
                }
                nr = MIN((uint64_t) sh->batch, j->explicit_left);
        } else if (j->kind == JOB_EPISODE_SHARE) {
                /* What is still missing of its share, to the object; a scan that frees less than it
                 * looked at (referenced objects get a second chance) is followed by another, within
                 * the scan budget. */
                if (j->plan.total_scan == 0 || j->bytes_freed >= j->share_bytes) {
                        job_finish(j);
                        return;
                }
                uint64_t missing = shrink_target_objects(j->share_bytes - j->bytes_freed, 1, 1, j->bytes_per_object_x1000);
                nr = MIN(MIN((uint64_t) sh->batch, j->plan.total_scan), MAX(missing, 1u));
        } else if (!shrink_plan_next(&j->plan, sh->batch, &nr)) {
                job_finish(j);
                return;
        }
        if (request_send(j, SHRINK_OP_SCAN, nr) < 0)
                job_finish(j);
}

static void job_run(struct shrink_job *j) {
        assert(j->state == JOB_QUEUED);
        j->state = JOB_RUNNING;
        if (j->kind == JOB_EXPLICIT_NR)
                job_next_scan(j);
        else if (request_send(j, SHRINK_OP_COUNT, 0) < 0)
                job_finish(j);
}

/* Take the job at the head of its shrinker's queue off it, report it to its round, free it. */
static void job_retire(struct shrink_job *j) {
        struct shrinker_state *qu = j->ss;

        assert(qu->head == j);
        request_free(j->req);
        QUEUE_POP(qu->head, qu->tail);
        if (j->round)
                round_job_done(j->round, j);
        job_free(j);
}

/* Done with this job: settle deferred work, retire it, start the shrinker's next one. */
static void job_finish(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;
        struct shrinker_state *qu = j->ss;

        /* Only reclaim that was sized by the kernel's rules carries work over (a dry run changes nothing). */
        if ((j->kind == JOB_EPISODE || j->kind == JOB_EPISODE_SHARE) && j->freeable > 0)
                shrinker_set_deferred(sh, j->node_index, shrink_plan_finish(&j->plan));
        /* Health is judged per job: one that met every deadline clears the count of misses (and a
         * quarantine); answering counts in time while every scan times out does not. */
        job_end_with(j, JOB_END_DONE);
        j->state = JOB_ENDED;
        if (j->n_answers > 0 && j->end != JOB_END_TIMED_OUT && j->end != JOB_END_REJECTED &&
            shrink_health_answer(&j->ss->health))
                log_client(sh->client->uid, LOG_INFO, "Shrinker %s (id %llu) of pid %d answers again: out of quarantine.",
                           sh->name,
                         (unsigned long long) sh->id, (int) sh->client->pid);
        /* Jobs finish in queue order: this is the head. */
        job_retire(j);
        if (qu->head && qu->head->state == JOB_QUEUED)
                job_run(qu->head);
}

static struct shrinker_state *state_get(struct round_engine *rc, struct shrinker *sh) {
        struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        if (ss)
                return ss;
        ss = calloc(1, sizeof(*ss) + sh->n_nodes * sizeof(ss->node[0]));
        if (!ss)
                return NULL;
        ss->shrinker = sh;
        ss->n_nodes = sh->n_nodes;
        if (hashmap_put_u64(rc->states, sh->id, ss) < 0) {
                free(ss);
                return NULL;
        }
        return ss;
}

static struct shrinker_node_state *node_state(struct shrinker_state *ss, size_t node_index) {
        return &ss->node[shrinker_node_slot(ss->shrinker, node_index)];
}

static void job_enqueue(struct shrink_job *j) {
        QUEUE_APPEND(j->ss->head, j->ss->tail, j);
}

static struct shrink_job *job_new(struct shrink_round *r, struct shrinker *sh, size_t node_index, const char *cgroup,
                                  int priority) {
        struct shrinker_state *ss = state_get(r->rc, sh);
        if (!ss)
                return NULL;
        struct shrink_job *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        j->ss = ss;
        j->shrinker = sh;
        j->rc = r->rc;
        j->round_id = r->id;
        j->node_index = node_index;
        j->node = shrink_registry_node_id(r->rc->shrinkers, node_index);
        j->priority = priority;
        j->scope_type = r->type;
        j->level = r->level;
        j->kind = ss->health.quarantined ? JOB_PROBE : JOB_EPISODE;
        j->cgroup = strdup(cgroup);
        if (!j->cgroup) {
                free(j);
                return NULL;
        }
        return j;
}

/* ---- answers ---- */

static bool given(int64_t v) {
        return v != SHRINK_ANSWER_ABSENT;
}

/* Everything is checked before anything changes. */
static const char *answer_check(const struct shrink_request *q, const struct shrink_answer *a) {
        if ((given(a->count) && a->count < 0) || (given(a->bytes) && a->bytes < 0) ||
            (given(a->freed) && a->freed < 0) || (given(a->scanned) && a->scanned < 0))
                return "negative numbers";
        if (q->op == SHRINK_OP_COUNT) {
                if (given(a->freed) || given(a->scanned) || a->stop)
                        return "a count request is answered with count, bytes or empty";
                if (!given(a->count) && !a->empty)
                        return "count missing";
                return NULL;
        }
        if (given(a->count) || a->empty)
                return "a scan request is answered with freed, scanned, bytes or stop";
        if (!a->stop && !given(a->freed))
                return "freed missing";
        if (given(a->freed) && (uint64_t) a->freed > 2 * q->nr_to_scan)
                return "freed exceeds twice nr_to_scan";
        if (given(a->scanned) && (uint64_t) a->scanned > 2 * q->nr_to_scan)
                return "scanned exceeds twice nr_to_scan";
        return NULL;
}

/* In an episode with a goal, a shrinker that says how many bytes it holds is asked for its share of what
 * is still to release, in proportion to its weight among the round's shrinkers, and never more than the
 * kernel's sizing at the round's priority allows, or, where the round says so, at the gentlest priority
 * down to its floor that covers the share: a round does not spend passes on a priority known to be too
 * gentle for what is needed. Shrinkers not counted yet weigh what they did last time, or, never counted,
 * as much as this one. */
static void job_ask_share(struct shrink_job *j, uint64_t bytes) {
        struct shrink_round *r = j->round;
        if (!r || r->want == 0 || bytes == 0 || j->bytes_per_object_x1000 == 0)
                return;
        uint64_t w = shrink_weight(bytes, j->shrinker->seeks);
        uint64_t unknown = r->n_known > 0 ? r->known_weight / r->n_known : w;
        uint64_t total = sat_add(r->known_weight, sat_mul(r->n_unknown, unknown));
        total = total - MIN(total, j->start_weight > 0 ? j->start_weight : unknown);
        total = sat_add(total, w);
        struct shrinker *sh = j->shrinker;
        struct shrinker_state *ss = j->ss;
        if (r->goal_id > 0 && ss->goal_id != r->goal_id) {
                ss->goal_id = r->goal_id;
                for (size_t k = 0; k < ss->n_nodes; k++) {
                        ss->node[k].goal_share = ss->node[k].goal_freed = 0;
                        ss->node[k].goal_asks = 0;
                }
        }
        if (r->goal_id > 0) {
                struct shrinker_node_state *g = node_state(ss, j->node_index);
                r->n_share_jobs++;
                /* Its share of the whole goal, less what it gave towards it in the goal's earlier rounds:
                 * what another shrinker did not deliver is nobody else's to make up. */
                uint64_t full = mul_div(MAX(r->goal, r->want), MIN(w, total), total);
                g->goal_share = full;
                g->goal_asks++;
                j->share_bytes = full > g->goal_freed ? full - g->goal_freed : 0;
                j->share_bytes = MIN(j->share_bytes, r->want);
                if (j->share_bytes == 0) {
                        r->n_shares_in++;
                        j->kind = JOB_EPISODE_SHARE;
                        j->plan.total_scan = 0;
                        return;
                }
        } else
                j->share_bytes = mul_div(r->want, MIN(w, total), total);
        /* A scan budget of twice the share in objects: an LRU with a second chance frees about half of
         * what it looks at when the cache is in use. */
        uint64_t nr = sat_mul(shrink_target_objects(j->share_bytes, 1, 1, j->bytes_per_object_x1000), 2);
        j->kind = JOB_EPISODE_SHARE;
        uint64_t deferred = sh->deferred[shrinker_node_slot(sh, j->node_index)];
        for (int p = j->priority - 1; r->share_sets_priority && j->plan.total_scan < nr && p >= r->floor; p--) {
                shrink_plan_start(&j->plan, j->plan.freeable, p, sh->seeks, deferred);
                j->priority = p;
        }
        j->plan.total_scan = MIN(j->plan.total_scan, nr);
}

/* A count: plan the scan, or finish when there is nothing to do. */
static void job_counted(struct shrink_job *j, const struct shrink_answer *a) {
        struct shrinker *sh = j->shrinker;
        size_t slot = shrinker_node_slot(sh, j->node_index);
        uint64_t count = a->empty ? 0 : (uint64_t) a->count;
        /* What it says it holds is its weight in the split of a goal: never more than the kernel shows of
         * its memory, so that a client cannot draw a goal onto itself and then claim it. */
        uint64_t bytes = given(a->bytes) && !a->empty ? MIN((uint64_t) a->bytes, client_round_resident(j)) : 0;

        struct shrinker_node_state *ns = node_state(j->ss, j->node_index);
        ns->last_count = count;
        ns->last_bytes = bytes;
        if (a->empty) {
                /* As the kernel skips a memcg's shrinker with no objects, rounds skip it for a while. */
                j->ss->stats.empty++;
                ns->empty_until = event_now(j->rc->event) + engine_config(j->rc)->empty_backoff_usec;
                job_end_with(j, JOB_END_EMPTY);
        }
        j->freeable = count;
        /* 0 means "skip me this time", EMPTY "nothing here": either way nothing to scan now. */
        if (count == 0 || j->kind == JOB_PROBE || j->kind == JOB_DRY_RUN) {
                job_finish(j);
                return;
        }
        if (j->kind == JOB_EXPLICIT_ALL) {
                /* io.pressured.Shrink without nr_to_scan: everything the count reported. */
                j->kind = JOB_EXPLICIT_NR;
                j->explicit_left = count;
        }
        /* (The size of its objects is its own business: only its weight is capped.) */
        if (bytes > 0)
                j->bytes_per_object_x1000 = mul_div((uint64_t) a->bytes, 1000, count);
        shrink_plan_start(&j->plan, count, j->priority, sh->seeks, sh->deferred[slot]);
        job_ask_share(j, bytes);
        job_next_scan(j);
}

/* What a claim counts for. A client cannot have released more than it had resident in the round: its
 * claims in one round go up to that much, whatever it says. Of that, the share its trust allows counts
 * towards goals: a client whose memory did not fall by what it claimed in earlier rounds (a liar, or a
 * cache whose allocator keeps what it frees) cannot make a round look as if it reached its target, and
 * so cannot pause anyone else's reclaim. */
static uint64_t claim_credit(struct shrink_job *j, uint64_t bytes) {
        struct shrink_client *cl = j->shrinker->client;
        struct client_credit *c = job_credit(j);
        uint64_t claim = c ? MIN(bytes, c->credit_left) : 0;
        if (c)
                c->credit_left -= claim;
        if (j->round)
                release_sample_claim(j->round->sample, cl, claim);
        return shrink_trust_credit(release_meter_trust(j->rc->meter, cl), claim);
}

/* A scan: account what was freed, go on with the plan. */
static void job_scanned(struct shrink_job *j, const struct shrink_answer *a, uint64_t nr_to_scan) {

        if (a->stop) {
                j->ss->stats.stops++;
                job_end_with(j, JOB_END_STOPPED);
                job_finish(j);
                return;
        }
        uint64_t freed = (uint64_t) a->freed;
        uint64_t scanned = given(a->scanned) ? (uint64_t) a->scanned : nr_to_scan;
        uint64_t bytes = given(a->bytes) ? (uint64_t) a->bytes : mul_div(freed, j->bytes_per_object_x1000, 1000);
        bytes = claim_credit(j, bytes);
        if (j->round)
                j->round->freed_bytes = sat_add(j->round->freed_bytes, bytes);
        struct shrinker_stats *st = &j->ss->stats;
        st->freed = sat_add(st->freed, freed);
        st->scanned = sat_add(st->scanned, scanned);
        st->bytes_freed = sat_add(st->bytes_freed, bytes);
        j->freed = sat_add(j->freed, freed);
        j->scanned = sat_add(j->scanned, scanned);
        j->bytes_freed = sat_add(j->bytes_freed, bytes);
        if (j->round && j->round->goal_id > 0 && j->ss->goal_id == j->round->goal_id) {
                struct shrinker_node_state *g = node_state(j->ss, j->node_index);
                g->goal_freed = sat_add(g->goal_freed, bytes);
        }
        if (j->kind == JOB_EXPLICIT_NR)
                j->explicit_left = scanned >= j->explicit_left ? 0 : j->explicit_left - scanned;
        else
                shrink_plan_scanned(&j->plan, scanned);
        /* A shrinker that scans nothing cannot make progress: do not spin on it. Nor, when an operator
         * asked for a number, on one that frees nothing. */
        if (scanned == 0 || (j->kind == JOB_EXPLICIT_NR && freed == 0)) {
                job_finish(j);
                return;
        }
        /* Nor beyond what the client could hold: once it claimed all its memory, or scanned more objects
         * than it has bytes, an operator's "everything" is done. */
        const struct client_credit *c = job_credit(j);
        if (j->kind == JOB_EXPLICIT_NR && (!c || c->credit_left == 0 || j->scanned >= c->resident)) {
                job_finish(j);
                return;
        }
        job_next_scan(j);
}

int round_engine_answer(struct round_engine *rc, struct shrink_client *cl, const struct shrink_answer *a,
                        const char **ret_reason) {
        struct shrink_request *q = a->request >= 0 ? hashmap_get_u64(rc->requests, (uint64_t) a->request) : NULL;

        /* Another client's request is as unknown to this one as a request that never was. */
        if (!q || job_client(q->job) != cl) {
                struct client_credit *c = credit_of(rc, cl);
                if (c)
                        c->rejected++;
                return -ENOENT;
        }
        struct shrink_job *j = q->job;
        const char *bad = answer_check(q, a);
        if (bad) {
                /* The request is over: the shrinker said something, just nothing usable. */
                j->ss->stats.rejected++;
                job_end_with(j, JOB_END_REJECTED);
                request_free(q);
                job_finish(j);
                *ret_reason = bad;
                return -EINVAL;
        }

        uint64_t latency = event_now(rc->event) - q->sent_usec;
        enum shrink_op op = q->op;
        uint64_t nr_to_scan = q->nr_to_scan;

        j->ss->stats.last_latency_usec = latency;
        j->ss->stats.worst_latency_usec = MAX(j->ss->stats.worst_latency_usec, latency);
        j->n_answers++;
        request_free(q);

        if (op == SHRINK_OP_COUNT)
                job_counted(j, a);
        else
                job_scanned(j, a, nr_to_scan);
        return 0;
}

/* ---- rounds ---- */

static void round_free(struct shrink_round *r) {
        sd_event_source_disable_unref(r->budget);
        release_sample_free(r->sample);
        free(r->label);
        for (size_t i = 0; i < r->n_results; i++) {
                free((char *) r->results[i].name);
                free((char *) r->results[i].cgroup);
        }
        free(r->results);
        free(r);
}

/* Tell the explicit Shrink's caller its results. */
static void round_answer_caller(struct shrink_round *r) {
        struct round_engine *rc = r->rc;
        rc->transport->shrink_done(r->caller, r->results, r->n_results, rc->userdata);
}

/* An explicit Shrink's clients were measured: the reply says what each released. */
static void round_measured(const struct release_sample *s, bool measured, void *userdata) {
        struct shrink_round *r = userdata;
        for (size_t i = 0; measured && i < r->n_results; i++) {
                struct shrinker *sh = shrinker_by_id(r->rc->shrinkers, r->results[i].shrinker);
                r->results[i].released_bytes = sh ? release_sample_released(s, sh->client) : 0;
                r->results[i].have_released = true;
        }
        if (r->caller)
                round_answer_caller(r);
        round_free(r);
}

static void round_complete(struct shrink_round *r) {
        if (r->explicit && r->caller && r->measure) {
                /* Answered once its clients were measured (or at once if none was asked to scan). */
                release_meter_submit_then(r->rc->meter, TAKE_PTR(r->sample), "Shrink", round_measured, r);
                return;
        }
        release_meter_submit(r->rc->meter, TAKE_PTR(r->sample), r->label ? r->label : "Shrink");
        if (r->on_done) {
                const struct round_outcome o = {
                        .id = r->id,
                        .want = r->want,
                        .freed = r->freed,
                        .freed_bytes = r->freed_bytes,
                        .scanned = r->scanned,
                        .n_asked = r->n_asked,
                        .n_busy = r->n_busy,
                        .shares_in = r->n_share_jobs > 0 && r->n_shares_in == r->n_share_jobs,
                };
                r->on_done(&o, r->userdata);
        }
        if (r->explicit && r->caller)
                round_answer_caller(r);
        round_free(r);
}

static void round_add_result(struct shrink_round *r, const struct shrink_job *j) {
        if (r->n_results == r->n_alloc) {
                size_t n = MAX(r->n_alloc * 2, 8u);
                struct shrink_result *a = realloc(r->results, n * sizeof(*a));
                if (!a) {
                        log_oom();
                        return;
                }
                r->results = a;
                r->n_alloc = n;
        }
        char *name = strdup(j->shrinker->name), *cgroup = strdup(j->cgroup);
        if (!name || !cgroup) {
                free(name);
                free(cgroup);
                log_oom();
                return;
        }
        r->results[r->n_results++] = (struct shrink_result){
                .shrinker = j->shrinker->id,
                .name = name,
                .node = j->node,
                .cgroup = cgroup,
                .scanned = j->scanned,
                .freed = j->freed,
                .bytes_freed = j->bytes_freed,
                .stopped = j->end == JOB_END_STOPPED,
                .timed_out = j->end == JOB_END_TIMED_OUT,
                .empty = j->end == JOB_END_EMPTY,
                .quarantined = j->kind == JOB_PROBE,
                .rejected = j->end == JOB_END_REJECTED,
                .have_count = r->dry_run && j->n_answers > 0,
                .count = j->freeable,
        };
}

static void round_job_done(struct shrink_round *r, struct shrink_job *j) {
        LIST_REMOVE_F(round_prev, round_next, r->jobs, j);
        j->round = NULL;
        r->freed = sat_add(r->freed, j->freed);
        r->scanned = sat_add(r->scanned, j->scanned);
        if (r->explicit && r->caller)
                round_add_result(r, j);
        if (--r->n_jobs == 0)
                round_complete(r);
}

/* A shrinker has done its part in the round's goal: it released its share, or it was asked for it in
 * GOAL_ASKS_MAX rounds of the goal (one that cannot or will not deliver, or whose claims its memory does
 * not bear out, holds the goal open, and with it everyone else's next goal, no longer than that). */
#define GOAL_ASKS_MAX 3u
static bool goal_done_for(const struct shrink_round *r, struct shrinker_state *ss, size_t node_index) {
        if (r->explicit || r->goal_id == 0 || ss->goal_id != r->goal_id)
                return false;
        const struct shrinker_node_state *g = node_state(ss, node_index);
        return (g->goal_share > 0 && g->goal_freed >= g->goal_share) || g->goal_asks >= GOAL_ASKS_MAX;
}

/* A shrinker in scope that the round does not ask (busy, quarantined) still weighs what it held at its
 * last count: the others' shares are of the goal as if it had been asked, so that what it does not
 * deliver is nobody else's to make up. */
static void round_weigh_absent(struct shrink_round *r, struct shrinker_state *ss, size_t node_index) {
        uint64_t w = shrink_weight(node_state(ss, node_index)->last_bytes, ss->shrinker->seeks);
        if (w == 0)
                return;
        r->known_weight = sat_add(r->known_weight, w);
        r->n_known++;
}

/* Queue the jobs of one shrinker: one per node the scope selects. */
static void round_add_shrinker(struct shrink_round *r, struct shrinker *sh, enum scope_type type, size_t node_index,
                               bool all_nodes, const char *cgroup, int priority, uint64_t nr_to_scan) {
        size_t n_nodes = shrink_registry_n_nodes(r->rc->shrinkers);
        size_t first = type == SCOPE_NODE ? node_index : 0;
        size_t last = type == SCOPE_NODE ? node_index : all_nodes ? n_nodes - 1 : 0;

        uint64_t now = event_now(r->rc->event);
        struct shrinker_state *qu = state_get(r->rc, sh);
        if (!qu) {
                log_oom();
                return;
        }
        /* Paced on its own: a shrinker still busy with an earlier round's work is not asked again yet. Its
         * part of the goal stays its own: it weighs in the split as if it were asked. */
        if (!r->explicit && qu->head) {
                r->n_busy++;
                for (size_t k = first; k <= last; k++)
                        round_weigh_absent(r, qu, k);
                return;
        }
        for (size_t k = first; k <= last; k++) {
                if (!r->explicit && now < node_state(qu, k)->empty_until)
                        continue; /* said EMPTY a moment ago */
                if (goal_done_for(r, qu, k)) {
                        /* Not even counted: it has done its part in this goal, and others' answers (or
                         * silence) must not make it asked more often than it would be alone. */
                        r->n_share_jobs++;
                        r->n_shares_in++;
                        continue;
                }
                struct shrink_job *j = job_new(r, sh, k, cgroup, priority);
                if (!j) {
                        log_oom();
                        continue;
                }
                if (j->kind == JOB_PROBE)
                        ; /* a count, whatever was asked */
                else if (r->dry_run)
                        j->kind = JOB_DRY_RUN;
                else if (r->explicit && nr_to_scan > 0) {
                        j->kind = JOB_EXPLICIT_NR;
                        j->explicit_left = nr_to_scan;
                } else if (r->explicit)
                        j->kind = JOB_EXPLICIT_ALL;
                job_enqueue(j);
                /* A probe of a quarantined shrinker runs beside an episode's round, not in it (its part of
                 * the goal stays its own). An explicit Shrink keeps it, to report it. */
                if (j->kind == JOB_PROBE && !r->explicit) {
                        round_weigh_absent(r, qu, k);
                        continue;
                }
                j->start_weight = shrink_weight(node_state(qu, k)->last_bytes, sh->seeks);
                if (j->start_weight > 0) {
                        r->known_weight = sat_add(r->known_weight, j->start_weight);
                        r->n_known++;
                } else
                        r->n_unknown++;
                j->round = r;
                LIST_PREPEND_F(round_prev, round_next, r->jobs, j);
                r->n_jobs++;
        }
        r->n_asked++;
}

/* Queue one job per (shrinker, node) that the scope selects, then start the idle queues. The round is
 * held open (one extra count, dropped by round_seal()) while it is being filled. */
static void round_add_jobs(struct shrink_round *r, enum scope_type type, size_t node_index, const char *cgroup,
                           int priority, uint64_t nr_to_scan, const struct shrinker *only,
                           const struct shrink_client *only_client) {
        struct shrink_registry *reg = r->rc->shrinkers;

        r->n_jobs++;
        for (struct shrink_client *cl = reg->clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        struct shrinker *sh = cl->shrinkers[i];
                        bool all_nodes;
                        const char *req_cgroup;

                        if ((only && sh != only) || (only_client && cl != only_client))
                                continue;
                        if (!shrink_select(type, cgroup, sh->flags, cl->cgroup, &all_nodes, &req_cgroup))
                                continue;
                        round_add_shrinker(r, sh, type, node_index, all_nodes, req_cgroup, priority, nr_to_scan);
                }
        /* Start only after everything is queued: a job may finish at once. */
        for (struct shrink_client *cl = reg->clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        struct shrinker_state *qu = hashmap_get_u64(r->rc->states, cl->shrinkers[i]->id);
                        if (qu && qu->head && qu->head->state == JOB_QUEUED)
                                job_run(qu->head);
                }
}

/* The round's time is up: every job still in it leaves it and goes on at its shrinker's own pace (its
 * answers are still taken, and rounds leave the shrinker out while it is busy), so that the next round
 * is not held up and a slow but honest shrinker still gets through its share. */
static void round_cut(struct shrink_round *r);

static int on_round_budget(sd_event_source *src, uint64_t usec, void *userdata) {
        struct shrink_round *r = userdata;
        (void) src;
        (void) usec;

        log_debug("Reclaim round %llu out of time with %u jobs unfinished: cutting them.", (unsigned long long) r->id,
                  r->n_jobs);
        round_cut(r);
        return 0;
}

/* Cut every unfinished job: their requests are dropped, their work deferred; the round completes. */
static void round_cut(struct shrink_round *r) {
        if (!r->jobs)
                return; /* complete, or completing */
        r->n_jobs++; /* hold the round until all are out */
        while (r->jobs) {
                round_job_done(r, r->jobs);
        }
        if (--r->n_jobs == 0)
                round_complete(r);
}

static void round_arm_budget(struct shrink_round *r, uint64_t budget_usec) {
        struct round_engine *rc = r->rc;
        if (r->n_jobs <= 1 || budget_usec == 0)
                return; /* done already (only the seal's count is left), or no budget */
        if (sd_event_add_time(rc->event, &r->budget, CLOCK_MONOTONIC, event_now(rc->event) + budget_usec,
                              1000, on_round_budget, r) < 0)
                log_warning("Cannot set the budget of a reclaim round: it runs until its jobs are done.");
        else
                (void) sd_event_source_set_description(r->budget, "reclaim-round-budget");
}

static void round_seal(struct shrink_round *r) {
        if (--r->n_jobs == 0)
                round_complete(r);
}

static struct shrink_round *round_alloc(struct round_engine *rc) {
        struct shrink_round *r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->rc = rc;
        r->id = ++rc->last_round_id;
        r->sample = release_sample_new(rc->meter, r->id);
        return r;
}

struct shrink_round *round_new(struct round_engine *rc, const char *label, round_done_fn on_done, void *userdata) {
        struct shrink_round *r = round_alloc(rc);
        if (!r)
                return NULL;
        r->label = label ? strdup(label) : NULL;
        r->on_done = on_done;
        r->userdata = userdata;
        return r;
}

struct shrink_round *round_new_explicit(struct round_engine *rc, void *caller) {
        struct shrink_round *r = round_alloc(rc);
        if (!r)
                return NULL;
        r->explicit = true;
        r->caller = caller;
        return r;
}

void round_run(struct shrink_round *r, const struct round_spec *s) {
        r->want = s->want;
        r->share_sets_priority = s->share_sets_priority;
        r->goal = s->goal;
        r->goal_id = s->goal_id;
        r->floor = MAX(0, MIN(s->floor, 12));
        r->measure = s->measure;
        r->dry_run = r->explicit && s->dry_run;
        r->type = s->type;
        r->level = s->level;
        round_add_jobs(r, s->type, s->node_index, s->cgroup, s->priority, s->nr_to_scan, s->only, s->only_client);
        /* An explicit Shrink has no goal to stop at: the time it may take is bounded all the same, so
         * that a client that counts without end and claims every scan freed cannot keep the caller
         * waiting (nor the daemon working) for ever. */
        if (r->explicit)
                round_arm_budget(r, ROUND_EXPLICIT_BUDGET_USEC);
        else if (s->budget)
                round_arm_budget(r, engine_config(r->rc)->round_budget_usec);
        round_seal(r);
}

void round_detach(struct shrink_round *r) {
        r->on_done = NULL;
        r->caller = NULL;
        /* Nobody waits for an explicit Shrink any more: its work ends with its caller. */
        if (r->explicit)
                round_cut(r);
}

/* Finish every job of the shrinker: in-flight requests are dropped, rounds get their count. */
void round_engine_drop_shrinker(struct round_engine *rc, const struct shrinker *sh) {
        struct shrinker_state *qu = hashmap_get_u64(rc->states, sh->id);
        if (!qu)
                return;
        while (qu->head)
                job_retire(qu->head);
        hashmap_remove_u64(rc->states, sh->id);
        free(qu);
}

int round_engine_shrinker_info(const struct round_engine *rc, const struct shrinker *sh,
                               struct shrinker_info_snapshot *ret) {
        int r = shrinker_info(sh, ret);
        if (r < 0)
                return r;
        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        for (size_t k = 0; ss && k < ss->n_nodes && k < ret->n_nodes; k++) {
                ret->nodes[k].objects = ss->node[k].last_count;
                ret->nodes[k].bytes = ss->node[k].last_bytes;
        }
        if (ss) {
                ret->stats = ss->stats;
                ret->quarantined = ss->health.quarantined;
        }
        release_meter_client_info(rc->meter, sh->client, ret);
        return 0;
}

uint64_t round_engine_client_rejected(const struct round_engine *rc, const struct shrink_client *cl) {
        const struct client_credit *c = hashmap_get_u64(rc->credits, (uint64_t) (uintptr_t) cl);
        return c ? c->rejected : 0;
}

unsigned round_engine_goal_asks(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        return ss ? ss->node[shrinker_node_slot(sh, node_index)].goal_asks : 0;
}

uint64_t round_engine_last_bytes(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        return ss ? ss->node[shrinker_node_slot(sh, node_index)].last_bytes : 0;
}

void round_engine_drop_client(struct round_engine *rc, struct shrink_client *cl) {
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                round_engine_drop_shrinker(rc, cl->shrinkers[i]);
        free(hashmap_remove_u64(rc->credits, (uint64_t) (uintptr_t) cl));
        release_meter_drop_client(rc->meter, cl);
}

int round_engine_new(sd_event *event, const struct config *config, struct shrink_registry *shrinkers,
                     const struct reclaim_transport *transport, void *userdata, struct round_engine **ret) {
        struct round_engine *rc = calloc(1, sizeof(*rc));
        int r;

        if (!rc)
                return -ENOMEM;
        *rc = (struct round_engine){
                .event = event,
                .config = config,
                .shrinkers = shrinkers,
                .transport = transport,
                .userdata = userdata,
        };
        r = hashmap_new(HASHMAP_KEY_U64, &rc->requests);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &rc->states);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &rc->credits);
        if (r >= 0)
                r = release_meter_new(event, shrinkers, RELEASE_SETTLE_USEC, &rc->meter);
        if (r >= 0)
                r = sd_event_add_time(event, &rc->deadline_timer, CLOCK_MONOTONIC, 0, 1000, on_deadline, rc);
        if (r >= 0) {
                (void) sd_event_source_set_enabled(rc->deadline_timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(rc->deadline_timer, "shrink-deadlines");
        }
        if (r < 0) {
                round_engine_free(rc);
                return r;
        }
        *ret = rc;
        return 0;
}

/* After every client is gone: no queue, job or request is left then. */
struct round_engine *round_engine_free(struct round_engine *rc) {
        if (!rc)
                return NULL;
        assert(hashmap_size(rc->requests) == 0);
        hashmap_free(rc->requests);
        assert(hashmap_size(rc->states) == 0 && hashmap_size(rc->credits) == 0);
        hashmap_free(rc->states);
        hashmap_free(rc->credits);
        sd_event_source_disable_unref(rc->deadline_timer);
        release_meter_free(rc->meter);
        free(rc);
        return NULL;
}
