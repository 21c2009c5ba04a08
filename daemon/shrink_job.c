/* SPDX-License-Identifier: MIT */
/* Jobs, their requests and the answers: checked, credited and accounted here (shrink_job.h). */
#include "shrink_job.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "hashmap.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "release.h"

/* The requests in flight: by id, and in deadline order (every request gets the same timeout, so this is
 * send order) with one timer for all of them, at or before the first deadline: no timer per request. */
struct request_queue {
        struct hashmap *by_id;
        struct shrink_request *first, *last;
        sd_event_source *deadline_timer;
        uint64_t timer_usec; /* when it is set to fire; 0: off */
        uint64_t last_id;
};

struct job_engine {
        sd_event *event;
        const struct config *config;
        struct shrink_registry *shrinkers;
        const struct reclaim_transport *transport;
        void *userdata;
        struct release_meter *meter; /* the round engine's */
        struct request_queue queue;
        struct hashmap *states;  /* struct shrinker_state by shrinker id */
        struct hashmap *credits; /* struct client_credit by client (its address, while registered) */
};

/* The engine's state of one shrinker, beside the registry's struct shrinker as the kernel keeps a
 * memcg's shrinker_info: keyed by shrinker id, made when a job first needs it, dropped with the shrinker. */
struct shrinker_state {
        struct shrinker *shrinker;
        struct shrink_job *head, *tail; /* its queue: one request in flight at a time, jobs run in order */
        uint64_t goal_id;
        struct shrinker_stats stats;
        struct shrink_health health;
        size_t n_nodes;
        struct shrinker_node_state node[];
};

/* The engine's state of one client: its memory as read once in round credit_round (when), the cap on
 * what it may say it holds, and the bytes it may still claim to have freed in that round; and its
 * answers to requests it does not have (unknown, another client's, answered already). */
struct client_credit {
        uint64_t credit_round, resident, resident_usec, credit_left;
        uint64_t rejected;
};

struct shrink_request {
        struct job_engine *je;
        uint64_t id;
        struct shrink_job *job;
        enum shrink_op op;
        uint64_t nr_to_scan;
        uint64_t sent_usec, deadline_usec;
        struct shrink_request *prev, *next; /* in deadline order */
};

/* Where a job is: QUEUED -> RUNNING (a request in flight or being decided) -> ENDED (retired at once). */
enum job_state {
        JOB_QUEUED,
        JOB_RUNNING,
        JOB_ENDED,
};

struct shrink_job {
        struct shrink_job *next;   /* in the shrinker's queue */
        struct shrinker_state *ss; /* its shrinker's */
        struct shrinker *shrinker;
        struct job_engine *je;
        struct job_spec spec;      /* as made; spec.round NULL once it left its round */
        size_t node_index;
        int node;
        char *cgroup;
        int priority;
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

static const struct config *engine_config(const struct job_engine *je) {
        return je->config;
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

/* What the kernel shows of the client's memory, read once per round, the first time the round needs it:
 * a cache cannot hold more than that, nor free more in one round. 0 once the client is gone. */
static struct client_credit *credit_of(struct job_engine *je, const struct shrink_client *cl) {
        uint64_t key = (uint64_t) (uintptr_t) cl;
        struct client_credit *c = hashmap_get_u64(je->credits, key);
        if (c)
                return c;
        c = calloc(1, sizeof(*c));
        if (c && hashmap_put_u64(je->credits, key, c) < 0) {
                free(c);
                return NULL;
        }
        return c;
}

/* The client's credit in the job's round, its memory read on the round's first use. NULL when there is
 * no memory for its record: it is then credited nothing. */
static struct client_credit *job_credit(struct shrink_job *j) {
        struct shrink_client *cl = j->shrinker->client;
        struct client_credit *c = credit_of(j->je, cl);
        if (c && c->credit_round != j->spec.round_id) {
                uint64_t resident;
                c->credit_round = j->spec.round_id;
                c->resident = shrink_client_resident(cl, &resident) >= 0 ? resident : 0;
                c->resident_usec = event_now(j->je->event);
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
        struct job_engine *je = q->je;
        hashmap_remove_u64(je->queue.by_id, q->id);
        /* The timer may stay set for a deadline that has gone: it then finds nothing due and moves on. */
        LIST_REMOVE_TAIL_F(prev, next, je->queue.first, je->queue.last, q);
        if (q->job)
                q->job->req = NULL;
        free(q);
}

static void deadline_timer_set(struct request_queue *rq, uint64_t usec) {
        if (sd_event_source_set_time(rq->deadline_timer, usec) < 0 ||
            sd_event_source_set_enabled(rq->deadline_timer, SD_EVENT_ONESHOT) < 0) {
                /* Cannot happen for an existing timer source; without it requests would never expire. */
                log_error("Cannot set the shrink request deadline timer.");
                return;
        }
        rq->timer_usec = usec;
}

static void request_expire(struct shrink_request *q) {
        struct shrink_job *j = q->job;
        struct shrinker *sh = j->shrinker;

        j->ss->stats.timeouts++;
        job_end_with(j, JOB_END_TIMED_OUT);
        if (shrink_health_timeout(&j->ss->health, engine_config(q->je)->quarantine_after))
                log_client(sh->client->uid, LOG_WARNING,
                           "Shrinker %s (id %llu) of pid %d did not answer %u requests in time: quarantined.",
                            sh->name, (unsigned long long) sh->id, (int) sh->client->pid,
                            j->ss->health.consecutive_timeouts);
        request_free(q);
        job_finish(j);
}

static int requests_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        assert(s);

        struct job_engine *je = userdata;
        uint64_t now = event_now(je->event); /* usec is when the timer was set for, the loop's time may be later */
        (void) s;
        (void) usec;

        struct request_queue *rq = &je->queue;
        rq->timer_usec = 0;
        /* Expiring a request may send the next job's request: it goes to the end, with a later deadline. */
        while (rq->first && rq->first->deadline_usec <= now)
                request_expire(rq->first);
        if (rq->first)
                deadline_timer_set(rq, rq->first->deadline_usec);
        return 0;
}

/* Into deadline order: from the end, where a request with the usual timeout belongs. */
static void request_link(struct request_queue *rq, struct shrink_request *q) {
        struct shrink_request *after = rq->last;
        while (after && after->deadline_usec > q->deadline_usec)
                after = after->prev;
        LIST_INSERT_AFTER_TAIL_F(prev, next, rq->first, rq->last, after, q);
        if (rq->timer_usec == 0 || q->deadline_usec < rq->timer_usec)
                deadline_timer_set(rq, q->deadline_usec);
}

static int request_queue_init(struct job_engine *je) {
        struct request_queue *rq = &je->queue;
        int r = hashmap_new(HASHMAP_KEY_U64, &rq->by_id);
        if (r >= 0)
                r = sd_event_add_time(je->event, &rq->deadline_timer, CLOCK_MONOTONIC, 0, 1000, requests_on_deadline, je);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(rq->deadline_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(rq->deadline_timer, "shrink-deadlines");
        return 0;
}

static void request_queue_done(struct request_queue *rq) {
        assert(hashmap_size(rq->by_id) == 0);
        hashmap_free(rq->by_id);
        rq->by_id = NULL;
        rq->deadline_timer = sd_event_source_disable_unref(rq->deadline_timer);
}

static int request_send(struct shrink_job *j, enum shrink_op op, uint64_t nr_to_scan) {
        struct job_engine *je = j->je;
        struct shrinker *sh = j->shrinker;
        uint64_t now = event_now(je->event);
        int r;

        struct shrink_request *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (struct shrink_request){
                .je = je,
                .id = ++je->queue.last_id,
                .job = j,
                .op = op,
                .nr_to_scan = nr_to_scan,
                .sent_usec = now,
                .deadline_usec = now + je->config->request_timeout_usec,
        };
        r = hashmap_put_u64(je->queue.by_id, q->id, q);
        if (r < 0) {
                free(q);
                return r;
        }
        request_link(&je->queue, q);
        j->req = q;

        if (op == SHRINK_OP_SCAN) {
                j->ss->stats.calls++;
                /* Measured around the round from the first time it is asked to scan in it. */
                const struct client_credit *c = job_credit(j);
                if (j->spec.round && c)
                        release_sample_begin(j->spec.sample, sh->client, c->resident, c->resident_usec);
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
                .scope_type = j->spec.scope_type,
                .level = j->spec.level,
        };
        r = je->transport->send_request(sh->client, &snap, je->userdata);
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
        return j->spec.round && j->spec.want > 0 && j->spec.ops->satisfied(j->spec.round);
}

static void job_next_scan(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;
        uint64_t nr;

        if (j->kind == JOB_PROBE) {
                /* One batch, asked once: answered in time, it ends the quarantine. */
                if (j->explicit_left == 0 || j->scan_answered) {
                        job_finish(j);
                        return;
                }
                if (request_send(j, SHRINK_OP_SCAN, j->explicit_left) < 0)
                        job_finish(j);
                return;
        }
        if (job_goal_met(j)) {
                job_finish(j);
                return;
        }
        if (j->kind == JOB_EXPLICIT_NR) {
                /* Cut from an explicit Shrink (its caller left, or its time is up): nobody wants the rest.
                 * Every job of an explicit Shrink is in its round until then. */
                if (j->explicit_left == 0 || !j->spec.round) {
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
        assert(j);

        struct shrinker_state *qu = j->ss;

        assert(qu->head == j);
        request_free(j->req);
        QUEUE_POP(qu->head, qu->tail);
        if (j->spec.round) {
                struct job_outcome o;
                void *round = j->spec.round, *member = j->spec.member;
                job_leave_round(j, &o);
                j->spec.ops->done(round, member, &o);
        }
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
            (j->kind != JOB_PROBE || j->scan_answered) && shrink_health_answer(&j->ss->health))
                log_client(sh->client->uid, LOG_INFO, "Shrinker %s (id %llu) of pid %d answers again: out of quarantine.",
                           sh->name,
                         (unsigned long long) sh->id, (int) sh->client->pid);
        /* Jobs finish in queue order: this is the head. */
        job_retire(j);
        if (qu->head && qu->head->state == JOB_QUEUED)
                job_run(qu->head);
}

static struct shrinker_state *shrinker_state_get(struct job_engine *je, struct shrinker *sh) {
        struct shrinker_state *ss = hashmap_get_u64(je->states, sh->id);
        if (ss)
                return ss;
        ss = calloc(1, sizeof(*ss) + sh->n_nodes * sizeof(ss->node[0]));
        if (!ss)
                return NULL;
        ss->shrinker = sh;
        ss->n_nodes = sh->n_nodes;
        if (hashmap_put_u64(je->states, sh->id, ss) < 0) {
                free(ss);
                return NULL;
        }
        return ss;
}

static struct shrinker_node_state *shrinker_state_node(struct shrinker_state *ss, size_t node_index) {
        return &ss->node[shrinker_node_slot(ss->shrinker, node_index)];
}

struct shrink_job *job_new(struct job_engine *je, const struct job_spec *spec) {
        assert(je);
        assert(spec && spec->shrinker && spec->cgroup);
        assert(!spec->round || spec->ops);

        struct shrinker *sh = spec->shrinker;
        struct shrinker_state *ss = shrinker_state_get(je, sh);
        if (!ss)
                return NULL;
        struct shrink_job *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        j->ss = ss;
        j->shrinker = sh;
        j->je = je;
        j->spec = *spec;
        j->spec.floor = MAX(0, MIN(spec->floor, 12));
        j->node_index = spec->node_index;
        j->node = shrink_registry_node_id(je->shrinkers, spec->node_index);
        j->priority = spec->priority;
        j->kind = ss->health.quarantined ? JOB_PROBE : spec->kind; /* a count, whatever was asked */
        if (j->kind == JOB_EXPLICIT_NR)
                j->explicit_left = spec->nr_to_scan;
        j->cgroup = strdup(spec->cgroup);
        if (!j->cgroup) {
                free(j);
                return NULL;
        }
        j->spec.cgroup = j->cgroup; /* the caller's goes */
        QUEUE_APPEND(ss->head, ss->tail, j);
        return j;
}

bool job_is_probe(const struct shrink_job *j) {
        assert(j);

        return j->kind == JOB_PROBE;
}

void job_leave_round(struct shrink_job *j, struct job_outcome *ret) {
        assert(j);
        assert(ret);

        *ret = (struct job_outcome){
                .shrinker = j->shrinker,
                .node = j->node,
                .cgroup = j->cgroup,
                .end = j->end,
                .probe = j->kind == JOB_PROBE,
                .answered = j->n_answers > 0,
                .count = j->freeable,
                .freed = j->freed,
                .scanned = j->scanned,
                .bytes_freed = j->bytes_freed,
        };
        j->spec.round = j->spec.member = NULL;
        j->spec.sample = NULL;
}

void job_engine_start(struct job_engine *je) {
        assert(je);

        for (struct shrink_client *cl = je->shrinkers->clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        struct shrinker_state *qu = hashmap_get_u64(je->states, cl->shrinkers[i]->id);
                        if (qu && qu->head && qu->head->state == JOB_QUEUED)
                                job_run(qu->head);
                }
}

/* ---- answers ---- */

static bool given(int64_t v) {
        return v != SHRINK_ANSWER_ABSENT;
}

/* In an episode with a goal, a shrinker that says how many bytes it holds is asked for its share of what
 * is still to release, in proportion to its weight among the round's shrinkers, and never more than the
 * kernel's sizing at the round's priority allows, or, where the round says so, at the gentlest priority
 * down to its floor that covers the share: a round does not spend passes on a priority known to be too
 * gentle for what is needed. Shrinkers not counted yet weigh what they did last time, or, never counted,
 * as much as this one. */
static void job_ask_share(struct shrink_job *j, uint64_t bytes) {
        const struct job_spec *r = &j->spec;
        if (!r->round || r->want == 0 || bytes == 0 || j->bytes_per_object_x1000 == 0)
                return;
        struct shrink_split split;
        uint64_t full;
        r->ops->split(r->round, &split);
        if (!r->ops->planned(r->round, r->member, &full))
                full = shrink_share(&split, shrink_weight(bytes, j->shrinker->seeks), r->start_weight);
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
                struct shrinker_node_state *g = shrinker_state_node(ss, j->node_index);
                /* Its share of the whole goal, less what it gave towards it in the goal's earlier rounds:
                 * what another shrinker did not deliver is nobody else's to make up. */
                g->goal_share = full;
                g->goal_asks++;
                j->share_bytes = full > g->goal_freed ? full - g->goal_freed : 0;
                j->share_bytes = MIN(j->share_bytes, r->want);
                r->ops->share(r->round, j->share_bytes == 0);
                if (j->share_bytes == 0) {
                        j->kind = JOB_EPISODE_SHARE;
                        j->plan.total_scan = 0;
                        return;
                }
        } else
                j->share_bytes = full;
        uint64_t nr = shrink_share_scan_budget(j->share_bytes, j->bytes_per_object_x1000);
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

        struct shrinker_node_state *ns = shrinker_state_node(j->ss, j->node_index);
        ns->last_count = count;
        ns->last_bytes = bytes;
        ns->last_value = a->empty ? 0 : a->value;
        if (a->empty) {
                /* As the kernel skips a memcg's shrinker with no objects, rounds skip it for a while. */
                j->ss->stats.empty++;
                ns->empty_until = event_now(j->je->event) + engine_config(j->je)->empty_backoff_usec;
                job_end_with(j, JOB_END_EMPTY);
        }
        j->freeable = count;
        /* 0 means "skip me this time", EMPTY "nothing here": either way nothing to scan now. */
        if (count == 0 || j->kind == JOB_DRY_RUN) {
                job_finish(j);
                return;
        }
        if (j->kind == JOB_PROBE) {
                /* A quarantined shrinker is probed with a scan of one batch: a count answered in time
                 * says nothing of the scans it let run into their deadlines. */
                j->explicit_left = MIN((uint64_t) sh->batch, count);
                job_next_scan(j);
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
        uint64_t none = 0, claim;
        uint64_t credited = shrink_claim_credit(bytes, c ? &c->credit_left : &none,
                                                release_meter_trust(j->je->meter, cl), &claim);
        if (j->spec.round)
                release_sample_claim(j->spec.sample, cl, claim);
        return credited;
}

/* A scan: account what was freed, go on with the plan. */
static void job_scanned(struct shrink_job *j, const struct shrink_answer *a, uint64_t nr_to_scan) {
        j->scan_answered = true;

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
        if (j->spec.round)
                j->spec.ops->freed(j->spec.round, bytes);
        struct shrinker_stats *st = &j->ss->stats;
        st->freed = sat_add(st->freed, freed);
        st->scanned = sat_add(st->scanned, scanned);
        st->bytes_freed = sat_add(st->bytes_freed, bytes);
        j->freed = sat_add(j->freed, freed);
        j->scanned = sat_add(j->scanned, scanned);
        j->bytes_freed = sat_add(j->bytes_freed, bytes);
        if (j->spec.round && j->spec.goal_id > 0 && j->ss->goal_id == j->spec.goal_id) {
                struct shrinker_node_state *g = shrinker_state_node(j->ss, j->node_index);
                g->goal_freed = sat_add(g->goal_freed, bytes);
        }
        if (j->kind == JOB_PROBE) {
                job_finish(j);
                return;
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

int job_engine_answer(struct job_engine *je, struct shrink_client *cl, const struct shrink_answer *a,
                      const char **ret_reason) {
        assert(je);

        struct shrink_request *q = a->request >= 0 ? hashmap_get_u64(je->queue.by_id, (uint64_t) a->request) : NULL;

        /* Another client's request is as unknown to this one as a request that never was. */
        if (!q || job_client(q->job) != cl) {
                struct client_credit *c = credit_of(je, cl);
                if (c)
                        c->rejected++;
                return -ENOENT;
        }
        struct shrink_job *j = q->job;
        const char *bad = shrink_answer_check(q->op, q->nr_to_scan, a);
        if (bad) {
                /* The request is over: the shrinker said something, just nothing usable. */
                j->ss->stats.rejected++;
                job_end_with(j, JOB_END_REJECTED);
                request_free(q);
                job_finish(j);
                *ret_reason = bad;
                return -EINVAL;
        }

        uint64_t latency = event_now(je->event) - q->sent_usec;
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


/* ---- the engine ---- */

int job_engine_new(sd_event *event, const struct config *config, struct shrink_registry *shrinkers,
                   const struct reclaim_transport *transport, void *userdata, struct release_meter *meter,
                   struct job_engine **ret) {
        assert(event && config && shrinkers && transport && meter);

        struct job_engine *je = calloc(1, sizeof(*je));
        if (!je)
                return -ENOMEM;
        *je = (struct job_engine){
                .event = event,
                .config = config,
                .shrinkers = shrinkers,
                .transport = transport,
                .userdata = userdata,
                .meter = meter,
        };
        int r = request_queue_init(je);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &je->states);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &je->credits);
        if (r < 0) {
                job_engine_free(je);
                return r;
        }
        *ret = je;
        return 0;
}

struct job_engine *job_engine_free(struct job_engine *je) {
        if (!je)
                return NULL;
        request_queue_done(&je->queue);
        assert(hashmap_size(je->states) == 0 && hashmap_size(je->credits) == 0);
        hashmap_free(je->states);
        hashmap_free(je->credits);
        free(je);
        return NULL;
}

static const struct shrinker_state *state_of(const struct job_engine *je, const struct shrinker *sh) {
        return hashmap_get_u64(je->states, sh->id);
}

bool job_engine_busy(const struct job_engine *je, const struct shrinker *sh) {
        assert(je && sh);

        const struct shrinker_state *ss = state_of(je, sh);
        return ss && ss->head;
}

bool job_engine_quarantined(const struct job_engine *je, const struct shrinker *sh) {
        assert(je && sh);

        const struct shrinker_state *ss = state_of(je, sh);
        return ss && ss->health.quarantined;
}

const struct shrinker_node_state *job_engine_node(const struct job_engine *je, const struct shrinker *sh,
                                                  size_t node_index) {
        assert(je && sh);

        const struct shrinker_state *ss = state_of(je, sh);
        return ss ? &ss->node[shrinker_node_slot(sh, node_index)] : NULL;
}

/* A shrinker has done its part in a goal: it released its share, or it was asked for it in
 * GOAL_ASKS_MAX rounds of the goal (one that cannot or will not deliver, or whose claims its memory does
 * not bear out, holds the goal open, and with it everyone else's next goal, no longer than that). */
#define GOAL_ASKS_MAX 3u
bool job_engine_goal_done(const struct job_engine *je, const struct shrinker *sh, size_t node_index, uint64_t goal_id) {
        assert(je && sh);

        const struct shrinker_state *ss = state_of(je, sh);
        if (goal_id == 0 || !ss || ss->goal_id != goal_id)
                return false;
        const struct shrinker_node_state *g = &ss->node[shrinker_node_slot(sh, node_index)];
        return (g->goal_share > 0 && g->goal_freed >= g->goal_share) || g->goal_asks >= GOAL_ASKS_MAX;
}

void job_engine_info(const struct job_engine *je, const struct shrinker *sh, struct shrinker_info_snapshot *ret) {
        assert(je && sh && ret);

        const struct shrinker_state *ss = state_of(je, sh);
        if (!ss)
                return;
        for (size_t k = 0; k < ss->n_nodes && k < ret->n_nodes; k++) {
                ret->nodes[k].objects = ss->node[k].last_count;
                ret->nodes[k].bytes = ss->node[k].last_bytes;
                ret->nodes[k].value = ss->node[k].last_value;
        }
        ret->stats = ss->stats;
        ret->quarantined = ss->health.quarantined;
}

uint64_t job_engine_rejected(const struct job_engine *je, const struct shrink_client *cl) {
        assert(je);

        const struct client_credit *c = hashmap_get_u64(je->credits, (uint64_t) (uintptr_t) cl);
        return c ? c->rejected : 0;
}

void job_engine_drop_shrinker(struct job_engine *je, const struct shrinker *sh) {
        assert(je && sh);

        struct shrinker_state *qu = hashmap_get_u64(je->states, sh->id);
        if (!qu)
                return;
        while (qu->head)
                job_retire(qu->head);
        hashmap_remove_u64(je->states, sh->id);
        free(qu);
}

void job_engine_drop_client(struct job_engine *je, const struct shrink_client *cl) {
        assert(je);

        free(hashmap_remove_u64(je->credits, (uint64_t) (uintptr_t) cl));
}
