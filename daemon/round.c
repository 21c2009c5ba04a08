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
#include "round-private.h"

/* libpressure gives freed memory back at most every 100 ms after its answers: measure well after that. */
#define RELEASE_SETTLE_USEC (300 * 1000)

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

static void round_note_share(struct shrink_round *r, bool given) {
        assert(r);
        r->n_share_jobs++;
        if (given)
                r->n_shares_in++;
}

static void round_note_freed(struct shrink_round *r, uint64_t bytes) {
        assert(r);
        r->freed_bytes = sat_add(r->freed_bytes, bytes);
}

static void round_job_done(struct shrink_round *r, struct shrink_job *j) {
        assert(r);

        LIST_REMOVE_F(in_round.prev, in_round.next, r->jobs, j);
        j->in_round.round = NULL;
        r->freed = sat_add(r->freed, j->freed);
        r->scanned = sat_add(r->scanned, j->scanned);
        if (r->explicit && r->caller)
                round_add_result(r, j);
        if (--r->n_jobs == 0)
                round_complete(r);
}

static const struct round_reports round_reports = {
        .share = round_note_share,
        .freed = round_note_freed,
        .done = round_job_done,
};

/* A shrinker has done its part in the round's goal: it released its share, or it was asked for it in
 * GOAL_ASKS_MAX rounds of the goal (one that cannot or will not deliver, or whose claims its memory does
 * not bear out, holds the goal open, and with it everyone else's next goal, no longer than that). */
#define GOAL_ASKS_MAX 3u
static bool goal_done_for(const struct shrink_round *r, struct shrinker_state *ss, size_t node_index) {
        if (r->explicit || r->goal_id == 0 || ss->goal_id != r->goal_id)
                return false;
        const struct shrinker_node_state *g = shrinker_state_node(ss, node_index);
        return (g->goal_share > 0 && g->goal_freed >= g->goal_share) || g->goal_asks >= GOAL_ASKS_MAX;
}

/* A shrinker in scope that the round does not ask (busy, quarantined) still weighs what it held at its
 * last count: the others' shares are of the goal as if it had been asked, so that what it does not
 * deliver is nobody else's to make up. */
static void round_weigh_absent(struct shrink_round *r, struct shrinker_state *ss, size_t node_index) {
        uint64_t w = shrink_weight(shrinker_state_node(ss, node_index)->last_bytes, ss->shrinker->seeks);
        if (w == 0)
                return;
        r->known_weight = sat_add(r->known_weight, w);
        r->n_known++;
}

/* What a job of this round does (a quarantined shrinker's is a probe whatever this says: job_new()). */
static enum job_kind round_job_kind(const struct shrink_round *r, uint64_t nr_to_scan) {
        if (r->dry_run)
                return JOB_DRY_RUN;
        if (r->explicit)
                return nr_to_scan > 0 ? JOB_EXPLICIT_NR : JOB_EXPLICIT_ALL;
        return JOB_EPISODE;
}

/* A job joins the round, weighing in the split what its shrinker counted last (0: not known). */
static void round_take_job(struct shrink_round *r, struct shrink_job *j, uint64_t weight) {
        j->in_round.start_weight = weight;
        if (weight > 0) {
                r->known_weight = sat_add(r->known_weight, weight);
                r->n_known++;
        } else
                r->n_unknown++;
        j->in_round.round = r;
        LIST_PREPEND_F(in_round.prev, in_round.next, r->jobs, j);
        r->n_jobs++;
}

/* Queue the jobs of one shrinker: one per node the scope selects. */
static void round_add_shrinker(struct shrink_round *r, struct shrinker *sh, enum scope_type type, size_t node_index,
                               bool all_nodes, const char *cgroup, int priority, uint64_t nr_to_scan) {
        size_t n_nodes = shrink_registry_n_nodes(r->rc->shrinkers);
        size_t first = type == SCOPE_NODE ? node_index : 0;
        size_t last = type == SCOPE_NODE ? node_index : all_nodes ? n_nodes - 1 : 0;

        uint64_t now = event_now(r->rc->event);
        struct shrinker_state *qu = shrinker_state_get(r->rc, sh);
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
                if (!r->explicit && now < shrinker_state_node(qu, k)->empty_until)
                        continue; /* said EMPTY a moment ago */
                if (goal_done_for(r, qu, k)) {
                        /* Not even counted: it has done its part in this goal, and others' answers (or
                         * silence) must not make it asked more often than it would be alone. */
                        round_note_share(r, true);
                        continue;
                }
                struct shrink_job *j = job_new(r, sh, k, cgroup, priority, round_job_kind(r, nr_to_scan), nr_to_scan);
                if (!j) {
                        log_oom();
                        continue;
                }
                job_enqueue(j);
                /* A probe of a quarantined shrinker runs beside an episode's round, not in it (its part of
                 * the goal stays its own). An explicit Shrink keeps it, to report it. */
                if (j->kind == JOB_PROBE && !r->explicit)
                        round_weigh_absent(r, qu, k);
                else
                        round_take_job(r, j, shrink_weight(shrinker_state_node(qu, k)->last_bytes, sh->seeks));
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
        r->reports = &round_reports;
        r->id = ++rc->last_round_id;
        r->sample = release_sample_new(rc->meter, r->id);
        return r;
}

struct shrink_round *round_new(struct round_engine *rc, const char *label, round_done_fn on_done, void *userdata) {
        assert(rc);

        struct shrink_round *r = round_alloc(rc);
        if (!r)
                return NULL;
        r->label = label ? strdup(label) : NULL;
        r->on_done = on_done;
        r->userdata = userdata;
        return r;
}

struct shrink_round *round_new_explicit(struct round_engine *rc, void *caller) {
        assert(rc);

        struct shrink_round *r = round_alloc(rc);
        if (!r)
                return NULL;
        r->explicit = true;
        r->caller = caller;
        return r;
}

void round_run(struct shrink_round *r, const struct round_spec *s) {
        assert(r);

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
                round_arm_budget(r, round_engine_config(r->rc)->round_budget_usec);
        round_seal(r);
}

void round_detach(struct shrink_round *r) {
        assert(r);

        r->on_done = NULL;
        r->caller = NULL;
        /* Nobody waits for an explicit Shrink any more: its work ends with its caller. */
        if (r->explicit)
                round_cut(r);
}

/* Finish every job of the shrinker: in-flight requests are dropped, rounds get their count. */
void round_engine_drop_shrinker(struct round_engine *rc, const struct shrinker *sh) {
        assert(rc);

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
        assert(rc);
        assert(ret);

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
        assert(rc);

        const struct client_credit *c = hashmap_get_u64(rc->credits, (uint64_t) (uintptr_t) cl);
        return c ? c->rejected : 0;
}

unsigned round_engine_goal_asks(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        assert(rc);

        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        return ss ? ss->node[shrinker_node_slot(sh, node_index)].goal_asks : 0;
}

uint64_t round_engine_last_bytes(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        assert(rc);

        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        return ss ? ss->node[shrinker_node_slot(sh, node_index)].last_bytes : 0;
}

uint64_t round_engine_shrinker_bytes(const struct round_engine *rc, const struct shrinker *sh) {
        assert(rc && sh);

        const struct shrinker_state *ss = hashmap_get_u64(rc->states, sh->id);
        uint64_t sum = 0;
        for (size_t k = 0; ss && k < sh->n_nodes; k++)
                sum = sat_add(sum, ss->node[k].last_bytes);
        return sum;
}

int round_engine_send_limits(struct round_engine *rc, struct shrink_client *cl, const struct shrinker_limit *limits,
                             size_t n) {
        assert(rc && cl);

        return rc->transport->send_limits ? rc->transport->send_limits(cl, limits, n, rc->userdata) : 0;
}

void round_engine_drop_client(struct round_engine *rc, struct shrink_client *cl) {
        assert(rc);

        for (size_t i = 0; i < cl->n_shrinkers; i++)
                round_engine_drop_shrinker(rc, cl->shrinkers[i]);
        free(hashmap_remove_u64(rc->credits, (uint64_t) (uintptr_t) cl));
        release_meter_drop_client(rc->meter, cl);
}

int round_engine_new(sd_event *event, const struct config *config, struct shrink_registry *shrinkers,
                     const struct reclaim_transport *transport, void *userdata, struct round_engine **ret) {
        assert(event);

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
        r = request_queue_init(rc);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &rc->states);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &rc->credits);
        if (r >= 0)
                r = release_meter_new(event, shrinkers, RELEASE_SETTLE_USEC, &rc->meter);
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
        request_queue_done(&rc->queue);
        assert(hashmap_size(rc->states) == 0 && hashmap_size(rc->credits) == 0);
        hashmap_free(rc->states);
        hashmap_free(rc->credits);
        release_meter_free(rc->meter);
        free(rc);
        return NULL;
}

uint64_t round_engine_held_bytes(const struct round_engine *rc, enum scope_type type, const char *cgroup,
                                 size_t node_index) {
        assert(rc);

        uint64_t sum = 0;
        for (struct shrink_client *cl = rc->shrinkers->clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        const struct shrinker *sh = cl->shrinkers[i];
                        bool all_nodes;
                        const char *cg;
                        if (!shrink_select(type, cgroup, sh->flags, cl->cgroup, &all_nodes, &cg))
                                continue;
                        for (size_t k = 0; k < sh->n_nodes; k++)
                                if (type != SCOPE_NODE || k == shrinker_node_slot(sh, node_index))
                                        sum = sat_add(sum, round_engine_last_bytes(rc, sh, k));
                }
        return sum;
}
