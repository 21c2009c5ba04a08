/* SPDX-License-Identifier: MIT */
/* Jobs: one (shrinker, node) of a round, run as the kernel's do_shrink_slab() runs a shrinker: a count,
 * then scans in batches of its size, each a request to the client with a deadline; the answers are
 * checked, credited and accounted here. */
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
#include "round-private.h"

const struct config *round_engine_config(const struct round_engine *rc) {
        assert(rc);

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
        hashmap_remove_u64(rc->queue.by_id, q->id);
        /* The timer may stay set for a deadline that has gone: it then finds nothing due and moves on. */
        LIST_REMOVE_TAIL_F(prev, next, rc->queue.first, rc->queue.last, q);
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
        if (shrink_health_timeout(&j->ss->health, round_engine_config(q->rc)->quarantine_after))
                log_client(sh->client->uid, LOG_WARNING,
                           "Shrinker %s (id %llu) of pid %d did not answer %u requests in time: quarantined.",
                            sh->name, (unsigned long long) sh->id, (int) sh->client->pid,
                            j->ss->health.consecutive_timeouts);
        request_free(q);
        job_finish(j);
}

static int requests_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        assert(s);

        struct round_engine *rc = userdata;
        uint64_t now = event_now(rc->event); /* usec is when the timer was set for, the loop's time may be later */
        (void) s;
        (void) usec;

        struct request_queue *rq = &rc->queue;
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

int request_queue_init(struct round_engine *rc) {
        struct request_queue *rq = &rc->queue;
        int r = hashmap_new(HASHMAP_KEY_U64, &rq->by_id);
        if (r >= 0)
                r = sd_event_add_time(rc->event, &rq->deadline_timer, CLOCK_MONOTONIC, 0, 1000, requests_on_deadline, rc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(rq->deadline_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(rq->deadline_timer, "shrink-deadlines");
        return 0;
}

void request_queue_done(struct request_queue *rq) {
        assert(hashmap_size(rq->by_id) == 0);
        hashmap_free(rq->by_id);
        rq->by_id = NULL;
        rq->deadline_timer = sd_event_source_disable_unref(rq->deadline_timer);
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
                .id = ++rc->queue.last_id,
                .job = j,
                .op = op,
                .nr_to_scan = nr_to_scan,
                .sent_usec = now,
                .deadline_usec = now + rc->config->request_timeout_usec,
        };
        r = hashmap_put_u64(rc->queue.by_id, q->id, q);
        if (r < 0) {
                free(q);
                return r;
        }
        request_link(&rc->queue, q);
        j->req = q;

        if (op == SHRINK_OP_SCAN) {
                j->ss->stats.calls++;
                /* Measured around the round from the first time it is asked to scan in it. */
                const struct client_credit *c = job_credit(j);
                if (j->in_round.round && c)
                        release_sample_begin(j->in_round.round->sample, sh->client, c->resident, c->resident_usec);
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
        const struct shrink_round *r = j->in_round.round;
        return r && r->want > 0 && r->freed_bytes >= r->want;
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
                if (j->explicit_left == 0 || !j->in_round.round) {
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

void job_run(struct shrink_job *j) {
        assert(j->state == JOB_QUEUED);
        j->state = JOB_RUNNING;
        if (j->kind == JOB_EXPLICIT_NR)
                job_next_scan(j);
        else if (request_send(j, SHRINK_OP_COUNT, 0) < 0)
                job_finish(j);
}

/* Take the job at the head of its shrinker's queue off it, report it to its round, free it. */
void job_retire(struct shrink_job *j) {
        assert(j);

        struct shrinker_state *qu = j->ss;

        assert(qu->head == j);
        request_free(j->req);
        QUEUE_POP(qu->head, qu->tail);
        struct shrink_round *r = j->in_round.round;
        if (r)
                r->reports->done(r, j);
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

struct shrinker_state *shrinker_state_get(struct round_engine *rc, struct shrinker *sh) {
        assert(rc);

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

struct shrinker_node_state *shrinker_state_node(struct shrinker_state *ss, size_t node_index) {
        assert(ss);

        return &ss->node[shrinker_node_slot(ss->shrinker, node_index)];
}

void job_enqueue(struct shrink_job *j) {
        assert(j);

        QUEUE_APPEND(j->ss->head, j->ss->tail, j);
}

struct shrink_job *job_new(struct shrink_round *r, struct shrinker *sh, size_t node_index, const char *cgroup,
                           int priority, enum job_kind kind, uint64_t nr_to_scan) {
        assert(r);

        struct shrinker_state *ss = shrinker_state_get(r->rc, sh);
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
        j->kind = ss->health.quarantined ? JOB_PROBE : kind; /* a count, whatever was asked */
        if (j->kind == JOB_EXPLICIT_NR)
                j->explicit_left = nr_to_scan;
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

/* In an episode with a goal, a shrinker that says how many bytes it holds is asked for its share of what
 * is still to release, in proportion to its weight among the round's shrinkers, and never more than the
 * kernel's sizing at the round's priority allows, or, where the round says so, at the gentlest priority
 * down to its floor that covers the share: a round does not spend passes on a priority known to be too
 * gentle for what is needed. Shrinkers not counted yet weigh what they did last time, or, never counted,
 * as much as this one. */
static void job_ask_share(struct shrink_job *j, uint64_t bytes) {
        struct shrink_round *r = j->in_round.round;
        if (!r || r->want == 0 || bytes == 0 || j->bytes_per_object_x1000 == 0)
                return;
        const struct shrink_split split = {
                .want = r->want, .in_goal = r->goal_id > 0, .goal = r->goal,
                .known_weight = r->known_weight, .n_known = r->n_known, .n_unknown = r->n_unknown,
        };
        uint64_t full = shrink_share(&split, shrink_weight(bytes, j->shrinker->seeks), j->in_round.start_weight);
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
                r->reports->share(r, j->share_bytes == 0);
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
        if (a->empty) {
                /* As the kernel skips a memcg's shrinker with no objects, rounds skip it for a while. */
                j->ss->stats.empty++;
                ns->empty_until = event_now(j->rc->event) + round_engine_config(j->rc)->empty_backoff_usec;
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
                                                release_meter_trust(j->rc->meter, cl), &claim);
        if (j->in_round.round)
                release_sample_claim(j->in_round.round->sample, cl, claim);
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
        struct shrink_round *r = j->in_round.round;
        if (r)
                r->reports->freed(r, bytes);
        struct shrinker_stats *st = &j->ss->stats;
        st->freed = sat_add(st->freed, freed);
        st->scanned = sat_add(st->scanned, scanned);
        st->bytes_freed = sat_add(st->bytes_freed, bytes);
        j->freed = sat_add(j->freed, freed);
        j->scanned = sat_add(j->scanned, scanned);
        j->bytes_freed = sat_add(j->bytes_freed, bytes);
        if (j->in_round.round && j->in_round.round->goal_id > 0 && j->ss->goal_id == j->in_round.round->goal_id) {
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

int round_engine_answer(struct round_engine *rc, struct shrink_client *cl, const struct shrink_answer *a,
                        const char **ret_reason) {
        assert(rc);

        struct shrink_request *q = a->request >= 0 ? hashmap_get_u64(rc->queue.by_id, (uint64_t) a->request) : NULL;

        /* Another client's request is as unknown to this one as a request that never was. */
        if (!q || job_client(q->job) != cl) {
                struct client_credit *c = credit_of(rc, cl);
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

