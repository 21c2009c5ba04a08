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
#include "shrink_job.h"
#include "value_split.h"

/* libpressure gives freed memory back at most every 100 ms after its answers: measure well after that. */
#define RELEASE_SETTLE_USEC (300 * 1000)


struct round_engine {
        sd_event *event;
        const struct config *config;
        struct shrink_registry *shrinkers;
        const struct reclaim_transport *transport;
        void *userdata;
        struct release_meter *meter;
        struct job_engine *jobs;
        uint64_t last_round_id;
};

/* A job's place in its round, while the round waits for it. */
struct round_member {
        struct round_member *prev, *next;
        struct shrink_job *job;
        struct shrinker *shrinker;
        size_t node_index;
        uint64_t weight;   /* in the split when the round began (0: never counted) */
        bool have_plan;    /* its share was planned by value (round_plan_by_value()) */
        uint64_t planned;
};

/* One round. A job leaves its round early when the round's budget runs out (it is cut: it goes on by
 * itself, the round no longer waits for it) or never joins it (the count that probes a quarantined
 * shrinker): a round never waits for a shrinker that is slow. */
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
        struct round_member *jobs; /* still counting here */
        unsigned n_jobs;           /* not finished yet */
        uint64_t want;             /* bytes to release; 0: the kernel's sizing alone */
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

static const struct config *round_config(const struct shrink_round *r) {
        return r->rc->config;
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

static void round_add_result(struct shrink_round *r, const struct job_outcome *j) {
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
                .quarantined = j->probe,
                .rejected = j->end == JOB_END_REJECTED,
                .have_count = r->dry_run && j->answered,
                .count = j->count,
        };
}

static void round_note_share(void *userdata, bool given) {
        struct shrink_round *r = userdata;
        assert(r);
        r->n_share_jobs++;
        if (given)
                r->n_shares_in++;
}

static void round_note_freed(void *userdata, uint64_t bytes) {
        struct shrink_round *r = userdata;
        assert(r);
        r->freed_bytes = sat_add(r->freed_bytes, bytes);
}

/* A job left the round: done, or cut. */
static void round_job_done(void *userdata, void *member, const struct job_outcome *o) {
        struct shrink_round *r = userdata;
        struct round_member *m = member;
        assert(r && m);

        LIST_REMOVE(r->jobs, m);
        free(m);
        r->freed = sat_add(r->freed, o->freed);
        r->scanned = sat_add(r->scanned, o->scanned);
        if (r->explicit && r->caller)
                round_add_result(r, o);
        if (--r->n_jobs == 0)
                round_complete(r);
}

static void round_split(void *userdata, struct shrink_split *ret) {
        const struct shrink_round *r = userdata;
        *ret = (struct shrink_split){
                .want = r->want, .in_goal = r->goal_id > 0, .goal = r->goal,
                .known_weight = r->known_weight, .n_known = r->n_known, .n_unknown = r->n_unknown,
        };
}

static bool round_planned(void *userdata, void *member, uint64_t *ret_share) {
        const struct round_member *m = member;
        (void) userdata;
        if (m->have_plan)
                *ret_share = m->planned;
        return m->have_plan;
}

static bool round_satisfied(void *userdata) {
        const struct shrink_round *r = userdata;
        return r->want > 0 && r->freed_bytes >= r->want;
}

static const struct job_round_ops round_job_ops = {
        .split = round_split,
        .planned = round_planned,
        .satisfied = round_satisfied,
        .share = round_note_share,
        .freed = round_note_freed,
        .done = round_job_done,
};

/* A shrinker in scope that the round does not ask (busy, quarantined) still weighs what it held at its
 * last count: the others' shares are of the goal as if it had been asked, so that what it does not
 * deliver is nobody else's to make up. */
static void round_weigh_absent(struct shrink_round *r, const struct shrinker *sh, size_t node_index) {
        const struct shrinker_node_state *ns = job_engine_node(r->rc->jobs, sh, node_index);
        uint64_t w = ns ? shrink_weight(ns->last_bytes, sh->seeks) : 0;
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

/* A job of the round for one node of sh. It joins the round, weighing in the split what its shrinker
 * counted last (0: not known), unless it is a probe of a quarantined shrinker in an episode's round:
 * that runs beside it (its part of the goal stays its own); an explicit Shrink keeps it, to report it. */
static int round_add_job(struct shrink_round *r, struct shrinker *sh, size_t k, const char *cgroup, int priority,
                         uint64_t nr_to_scan) {
        const struct shrinker_node_state *ns = job_engine_node(r->rc->jobs, sh, k);
        uint64_t weight = ns ? shrink_weight(ns->last_bytes, sh->seeks) : 0;
        bool beside = !r->explicit && job_engine_quarantined(r->rc->jobs, sh);
        struct round_member *m = NULL;

        if (!beside && !(m = calloc(1, sizeof(*m))))
                return -ENOMEM;
        const struct job_spec spec = {
                .shrinker = sh,
                .node_index = k,
                .cgroup = cgroup,
                .priority = priority,
                .kind = round_job_kind(r, nr_to_scan),
                .nr_to_scan = nr_to_scan,
                .round_id = r->id,
                .scope_type = r->type,
                .level = r->level,
                .want = r->want,
                .goal_id = r->goal_id,
                .share_sets_priority = r->share_sets_priority,
                .floor = r->floor,
                .start_weight = weight,
                .ops = &round_job_ops,
                .round = beside ? NULL : r,
                .member = m,
                .sample = beside ? NULL : r->sample,
        };
        struct shrink_job *j = job_new(r->rc->jobs, &spec);
        if (!j) {
                free(m);
                return -ENOMEM;
        }
        if (beside) {
                round_weigh_absent(r, sh, k);
                return 0;
        }
        m->job = j;
        m->shrinker = sh;
        m->node_index = k;
        m->weight = weight;
        if (weight > 0) {
                r->known_weight = sat_add(r->known_weight, weight);
                r->n_known++;
        } else
                r->n_unknown++;
        LIST_PREPEND(r->jobs, m);
        r->n_jobs++;
        return 0;
}

/* Queue the jobs of one shrinker: one per node the scope selects. */
static void round_add_shrinker(struct shrink_round *r, struct shrinker *sh, enum scope_type type, size_t node_index,
                               bool all_nodes, const char *cgroup, int priority, uint64_t nr_to_scan) {
        size_t n_nodes = shrink_registry_n_nodes(r->rc->shrinkers);
        size_t first = type == SCOPE_NODE ? node_index : 0;
        size_t last = type == SCOPE_NODE ? node_index : all_nodes ? n_nodes - 1 : 0;
        uint64_t now = event_now(r->rc->event);

        /* Paced on its own: a shrinker still busy with an earlier round's work is not asked again yet. Its
         * part of the goal stays its own: it weighs in the split as if it were asked. */
        if (!r->explicit && job_engine_busy(r->rc->jobs, sh)) {
                r->n_busy++;
                for (size_t k = first; k <= last; k++)
                        round_weigh_absent(r, sh, k);
                return;
        }
        for (size_t k = first; k <= last; k++) {
                const struct shrinker_node_state *ns = job_engine_node(r->rc->jobs, sh, k);
                if (!r->explicit && ns && now < ns->empty_until)
                        continue; /* said EMPTY a moment ago */
                if (!r->explicit && job_engine_goal_done(r->rc->jobs, sh, k, r->goal_id)) {
                        /* Not even counted: it has done its part in this goal, and others' answers (or
                         * silence) must not make it asked more often than it would be alone. */
                        round_note_share(r, true);
                        continue;
                }
                if (round_add_job(r, sh, k, cgroup, priority, nr_to_scan) < 0)
                        log_oom();
        }
        r->n_asked++;
}

static pid_t cl_pid(const struct shrinker *sh) {
        return sh->client->pid;
}

/* Where the counts carry values, the goal's shares of the members that counted before are planned by
 * value (value_split.h): the cache whose last bytes are worth least gives first, values compared
 * within one uid, or across uids in root's value_cgroup= groups. Without values, nothing changes. */
static void round_plan_by_value(struct shrink_round *r) {
        if (r->explicit || r->want == 0 || r->n_jobs <= 2) /* n_jobs counts the seal's hold too */
                return;
        size_t n = 0;
        for (struct round_member *m = r->jobs; m; m = m->next)
                n++;
        struct value_member *vm = calloc(n, sizeof(*vm));
        size_t *scratch = calloc(n, sizeof(*scratch)), i = 0;
        if (!vm || !scratch) {
                free(vm);
                free(scratch);
                return; /* the proportional split stands */
        }
        struct shrink_split split;
        round_split(r, &split);
        for (struct round_member *m = r->jobs; m; m = m->next, i++) {
                const struct shrinker_node_state *ns = job_engine_node(r->rc->jobs, m->shrinker, m->node_index);
                const struct shrink_client *cl = m->shrinker->client;
                vm[i] = (struct value_member){
                        .proportional = shrink_share(&split, m->weight, m->weight),
                        .bytes = ns ? ns->last_bytes : 0,
                        .value = ns && m->weight > 0 ? ns->last_value : 0,
                        .arena = config_value_shared(r->rc->config, cl->cgroup) ? VALUE_ARENA_SHARED : (uint64_t) cl->uid,
                };
        }
        if (value_split_applies(vm, n)) {
                value_split(vm, n, scratch);
                i = 0;
                for (struct round_member *m = r->jobs; m; m = m->next, i++) {
                        m->have_plan = vm[i].value > 0;
                        m->planned = vm[i].share;
                        if (m->have_plan)
                                log_debug("Reclaim round %llu: shrinker %s of pid %d, of value %.3g, is asked %llu bytes "
                                          "(%llu by what it holds).", (unsigned long long) r->id, m->shrinker->name,
                                          (int) cl_pid(m->shrinker), vm[i].value, (unsigned long long) vm[i].share,
                                          (unsigned long long) vm[i].proportional);
                }
        }
        free(vm);
        free(scratch);
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
        round_plan_by_value(r);
        /* Start only after everything is queued: a job may finish at once. */
        job_engine_start(r->rc->jobs);
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
                struct round_member *m = r->jobs;
                struct job_outcome o;
                job_leave_round(m->job, &o);
                round_job_done(r, m, &o);
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
                round_arm_budget(r, round_config(r)->round_budget_usec);
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

        job_engine_drop_shrinker(rc->jobs, sh);
}

int round_engine_answer(struct round_engine *rc, struct shrink_client *cl, const struct shrink_answer *a,
                        const char **ret_reason) {
        assert(rc);

        return job_engine_answer(rc->jobs, cl, a, ret_reason);
}

int round_engine_shrinker_info(const struct round_engine *rc, const struct shrinker *sh,
                               struct shrinker_info_snapshot *ret) {
        assert(rc);
        assert(ret);

        int r = shrinker_info(sh, ret);
        if (r < 0)
                return r;
        job_engine_info(rc->jobs, sh, ret);
        release_meter_client_info(rc->meter, sh->client, ret);
        return 0;
}

uint64_t round_engine_client_rejected(const struct round_engine *rc, const struct shrink_client *cl) {
        assert(rc);

        return job_engine_rejected(rc->jobs, cl);
}

unsigned round_engine_goal_asks(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        assert(rc);

        const struct shrinker_node_state *ns = job_engine_node(rc->jobs, sh, node_index);
        return ns ? ns->goal_asks : 0;
}

uint64_t round_engine_last_bytes(const struct round_engine *rc, const struct shrinker *sh, size_t node_index) {
        assert(rc);

        const struct shrinker_node_state *ns = job_engine_node(rc->jobs, sh, node_index);
        return ns ? ns->last_bytes : 0;
}

double round_engine_shrinker_value(const struct round_engine *rc, const struct shrinker *sh) {
        assert(rc && sh);

        double best = 0;
        for (size_t k = 0; k < sh->n_nodes; k++) {
                const struct shrinker_node_state *ns = job_engine_node(rc->jobs, sh, k);
                if (ns && ns->last_value > best)
                        best = ns->last_value;
        }
        return best;
}

uint64_t round_engine_shrinker_bytes(const struct round_engine *rc, const struct shrinker *sh) {
        assert(rc && sh);

        uint64_t sum = 0;
        for (size_t k = 0; k < sh->n_nodes; k++)
                sum = sat_add(sum, round_engine_last_bytes(rc, sh, k));
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
        job_engine_drop_client(rc->jobs, cl);
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
        r = release_meter_new(event, shrinkers, RELEASE_SETTLE_USEC, &rc->meter);
        if (r >= 0)
                r = job_engine_new(event, config, shrinkers, transport, userdata, rc->meter, &rc->jobs);
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
        job_engine_free(rc->jobs);
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
