/* SPDX-License-Identifier: MIT */
#include "reclaim.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "macro.h"

struct reclaim {
        sd_event *event;
        const struct config *config;
        struct scope_registry *scopes;
        struct shrink_registry *shrinkers;
        struct round_engine *engine;
        struct regulator *regulator; /* the steps below the levels */
        int slot; /* on each scope: its episode */
        struct {
                uid_t uid;
                uint64_t usec;
        } recent[64]; /* registrations that started rounds, by uid */
        uint64_t last_goal_id;
};

struct reclaim_episode {
        struct reclaim *rc;
        struct scope *scope;
        sd_event_source *timer;
        struct shrink_round *round;
        uint64_t target;     /* the goal: bytes to release (0: no estimate, the kernel's sizing alone) */
        uint64_t freed_bytes; /* released towards it (as credited) */
        uint64_t goal_id;     /* names the goal to the rounds, which keep each shrinker's part of it */
        unsigned rounds;
        unsigned shortfalls; /* goals met with the scope still above ok: each doubles the next goal */
        int priority;        /* of the next round */
        bool paused;         /* target reached: waiting to see whether the pressure goes */
        bool quiet;          /* paused, and the stall went below the low threshold meanwhile */
        /* the stall, to see whether rounds help: PSI scopes from the cumulative total */
        uint64_t mark_total, mark_usec;
        double stall_avg; /* recent rounds' stall, smoothed; < 0: none yet */
        double goal_stall; /* the stall when the goal began; < 0: not known */
        uint64_t anchor_bytes; /* quiet or futile: the scope's anonymous memory to hold it at; 0: none */
};

/* Growth held against a quiet or futile spell's anchor below this is noise, not a goal: heaps, stacks and
 * page tables of the processes in scope move by that much on their own, and rounds for a few pages each
 * only cost every shrinker in scope requests (seen: a goal of 4 KiB every other round interval). Growth
 * is measured against the anchor, so that a slow creep still adds up to a goal. */
#define GROWTH_MIN_BYTES (256u * 1024u)

static void episode_set_goal(struct reclaim_episode *e, uint64_t target) {
        e->target = target;
        e->freed_bytes = 0;
        e->goal_id = ++e->rc->last_goal_id;
}

static const struct config *episode_config(const struct reclaim_episode *e) {
        return e->rc->config;
}

/* ---- episodes: rounds while a scope is above ok ---- */

SCOPE_SLOT_ACCESSORS(episode_slot, struct reclaim_episode);

static struct reclaim_episode *scope_episode(const struct reclaim *rc, const struct scope *s) {
        return episode_slot_get(s, rc->slot);
}

static void episode_round_done(const struct round_outcome *o, void *userdata);

/* A round over the scope's shrinkers at the episode's priority, with a budget. */
static struct round_spec episode_round_spec(const struct reclaim_episode *e) {
        const struct scope *s = e->scope;
        return (struct round_spec){
                .type = scope_get_type(s),
                .node_index = scope_node_index(s),
                .cgroup = scope_cgroup(s),
                .priority = e->priority,
                .share_sets_priority = true,
                .floor = episode_config(e)->priorities.floor[scope_level(s)],
                .budget = true,
                .level = scope_level(s),
        };
}

static void episode_start_round(struct reclaim_episode *e) {
        struct scope *s = e->scope;
        uint64_t want = e->target > e->freed_bytes ? e->target - e->freed_bytes : 0;
        struct shrink_round *r = round_new(e->rc->engine, scope_name(s), episode_round_done, e);

        if (!r) {
                log_oom();
                return;
        }
        e->round = r;
        e->rounds++;
        log_debug("%s: reclaim round %u at priority %d for %llu bytes.", scope_name(s), e->rounds, e->priority,
                  (unsigned long long) want);
        struct round_spec spec = episode_round_spec(e);
        spec.want = want;
        spec.goal = e->target;
        spec.goal_id = e->target > 0 ? e->goal_id : 0;
        round_run(r, &spec); /* it may be over before this returns */
}

/* Whether a scope's level calls for rounds. The system's level already means the machine is short (global
 * reclaim, a tight node, little available: scope.c), as in the kernel, where everyone is asked only then. */
static bool scope_wants_reclaim(const struct reclaim *rc, const struct scope *s) {
        (void) rc;
        return scope_level(s) != LEVEL_OK && !scope_is_gone(s);
}

/* A goal from figures read now, not from the last sample: the scope's reclaim target, doubled for every
 * goal of this level change that was met while the pressure stayed (at most three times), and, once
 * doubled, never more than half of what the caches in scope hold: a goal met again and again while the
 * stall stays (the kernel reclaiming a file working set, say) must not empty them. */
static uint64_t episode_goal(struct reclaim_episode *e) {
        scope_refresh_target(e->scope);
        uint64_t goal = sat_mul(scope_reclaim_target(e->scope), 1ULL << MIN(e->shortfalls, 3u));
        const struct scope *sc = e->scope;
        uint64_t held = round_engine_held_bytes(e->rc->engine, scope_get_type(sc), scope_cgroup(sc), scope_node_index(sc));
        if (e->shortfalls > 0 && held > 0)
                goal = MAX(MIN(goal, held / 2), scope_reclaim_target(e->scope));
        return goal;
}

/* How much the scope stalls now: for PSI scopes the fraction of time stalled since the last call (from
 * the cumulative "some" total, read now), for nodes the pages short of the high watermarks, for a scope
 * its headroom raised the bytes past the low headroom threshold. < 0: not known yet. */
static double episode_stall(struct reclaim_episode *e) {
        struct scope *s = e->scope;

        if (scope_source(s) == LEVEL_SOURCE_HEADROOM) {
                scope_refresh_headroom(s);
                return (double) scope_headroom_over_bytes(s);
        }

        if (scope_get_type(s) == SCOPE_NODE) {
                uint64_t pages;
                return scope_node_pages_short(s, &pages) ? (double) pages : -1;
        }
        scope_refresh(s);
        uint64_t now = event_now(e->rc->event), total;
        if (!scope_some_total(s, &total))
                return -1;
        double stall = -1;
        if (e->mark_usec > 0 && now > e->mark_usec && total >= e->mark_total)
                stall = (double) (total - e->mark_total) / (double) (now - e->mark_usec);
        e->mark_total = total;
        e->mark_usec = now;
        return stall;
}

/* Whether the scope stalls less than its low threshold now: the pressure that raised the level has
 * gone, and the level is only held by its hysteresis. A node is quiet above its high watermarks. */
static bool episode_quiet(struct reclaim_episode *e, double *ret_stall) {
        double stall = episode_stall(e);
        *ret_stall = stall;
        if (stall < 0)
                return false;
        if (scope_get_type(e->scope) == SCOPE_NODE || scope_source(e->scope) == LEVEL_SOURCE_HEADROOM)
                return stall == 0;
        const struct psi_trigger *low = &episode_config(e)->psi.t[LEVEL_LOW];
        return stall < (double) low->stall_usec / (double) low->window_usec;
}

/* What raised the level is gone, though the hysteresis holds it: a group now below half of every limit on
 * its way up (the kernel's OOM killer emptied it: 19 rounds took 11.5 MiB from a cache after a kill,
 * before this), or headroom back above its low threshold. Subscribers still hear the level; nobody is
 * asked for it. */
static bool episode_cause_gone(struct reclaim_episode *e) {
        struct scope *s = e->scope;
        if (scope_source(s) == LEVEL_SOURCE_HEADROOM) {
                scope_refresh_headroom(s);
                return scope_headroom_over_bytes(s) == 0;
        }
        return scope_far_below_limits(s);
}

/* A level raised by the stall of a scope the regulator answers: its steps are the one owner of what the
 * caches in it still owe (regulator.h). The level still reaches subscribers; a headroom or a node level
 * is not the regulator's, and keeps its rounds. */
static bool episode_regulated(const struct reclaim_episode *e) {
        return scope_source(e->scope) == LEVEL_SOURCE_PRESSURE && e->rc->regulator &&
               regulator_owns(e->rc->regulator, e->scope);
}

/* Paused as after a goal met in a quiet spell: only growth is taken from here. Looked at again each round
 * interval (the level's source may change). */
static void episode_rest(struct reclaim_episode *e, const char *why) {
        struct reclaim *rc = e->rc;
        if (!e->paused || !e->quiet)
                log_debug("%s: %s: no reclaim rounds for the level.", scope_name(e->scope), why);
        e->paused = e->quiet = true;
        (void) sd_event_source_set_time(e->timer, event_now(rc->event) + rc->config->round_interval_usec);
        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
}

/* The goal was released and the scope looked at again. While it is quiet, or the goal did not help, no
 * new one: only its growth since is taken (returns false: nothing more this time). Otherwise the next
 * goal (returns true). */
static bool episode_resume(struct reclaim_episode *e) {
        struct reclaim *rc = e->rc;
        /* Reclaiming on while only the hysteresis holds the level would empty the caches for nothing. */
        double stall;
        bool quiet = episode_quiet(e, &stall);
        /* Still stalled, but no less than when the goal began: what was released did not help (the stall
         * comes from elsewhere, a file working set that does not fit, say): like a quiet spell. */
        bool futile = !quiet && !e->quiet && stall >= 0 && e->goal_stall >= 0 && stall >= e->goal_stall * 0.9;
        if (quiet || futile) {
                e->quiet = quiet;
                /* Except for what the scope grew since: a cache that grows on while the level is held
                 * brings the stall back, or, with little left to reclaim beside it, the OOM killer before
                 * any stall. What it holds beyond where it was when this began is the goal then: that
                 * holds it there. */
                scope_refresh_target(e->scope);
                uint64_t anon = scope_anon_bytes(e->scope);
                if (e->anchor_bytes == 0)
                        e->anchor_bytes = anon;
                if (anon > sat_add(e->anchor_bytes, GROWTH_MIN_BYTES)) {
                        e->paused = false;
                        episode_set_goal(e, anon - e->anchor_bytes);
                        episode_start_round(e);
                        return false;
                }
                (void) sd_event_source_set_time(e->timer, event_now(rc->event) + rc->config->round_interval_usec);
                (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
                return false;
        }
        /* Still stalled, less than before: the goal helped and was short, and the next one is twice as
         * large, up to eight times the target. After a quiet spell the stall is new: the plain target. */
        e->shortfalls = e->quiet ? 0 : MIN(e->shortfalls + 1, 3u);
        e->quiet = false;
        e->paused = false;
        e->anchor_bytes = 0;
        e->goal_stall = stall;
        episode_set_goal(e, episode_goal(e));
        return true;
}

static int on_episode_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct reclaim_episode *e = userdata;
        (void) src;
        (void) usec;
        if (e->round || !scope_wants_reclaim(e->rc, e->scope))
                return 0;
        if (episode_regulated(e)) {
                e->anchor_bytes = 0;
                episode_rest(e, "its stall is the regulator's to answer");
                return 0;
        }
        if (episode_cause_gone(e)) {
                episode_rest(e, "what raised the level is gone (held by its hysteresis)");
                return 0;
        }
        if (e->paused && !episode_resume(e))
                return 0;
        if (e->target == 0 || e->freed_bytes < e->target)
                episode_start_round(e);
        return 0;
}

static void episode_log_round(const struct reclaim_episode *e, const struct round_outcome *r) {
        const struct scope *s = e->scope;
        char f_freed[48], f_bytes[48], f_round[32], f_priority[32], f_want[48];

        snprintf(f_round, sizeof(f_round), "PRESSURED_ROUND=%u", e->rounds);
        snprintf(f_freed, sizeof(f_freed), "PRESSURED_FREED=%llu", (unsigned long long) r->freed);
        snprintf(f_bytes, sizeof(f_bytes), "PRESSURED_FREED_BYTES=%llu", (unsigned long long) r->freed_bytes);
        snprintf(f_priority, sizeof(f_priority), "PRESSURED_PRIORITY=%d", e->priority);
        snprintf(f_want, sizeof(f_want), "PRESSURED_WANT_BYTES=%llu", (unsigned long long) r->want);
        const char *const fields[] = { f_round, f_freed, f_bytes, f_priority, f_want, NULL };
        log_struct(r->freed > 0 ? LOG_INFO : LOG_DEBUG, PRESSURED_MESSAGE_RECLAIM_ROUND, scope_name(s), fields,
                   "%s: reclaim round %u at priority %d: %u shrinkers scanned %llu and freed %llu objects (%llu of "
                   "%llu bytes wanted; %llu of %llu this goal).",
                   scope_name(s), e->rounds, e->priority, r->n_asked, (unsigned long long) r->scanned,
                   (unsigned long long) r->freed, (unsigned long long) r->freed_bytes, (unsigned long long) r->want,
                   (unsigned long long) e->freed_bytes, (unsigned long long) e->target);
}

static void episode_round_done(const struct round_outcome *r, void *userdata) {
        struct reclaim_episode *e = userdata;
        struct reclaim *rc = e->rc;

        struct scope *s = e->scope;
        const struct shrink_priorities *p = &rc->config->priorities;

        e->round = NULL;
        e->freed_bytes = sat_add(e->freed_bytes, r->freed_bytes);
        if (r->n_asked > 0)
                episode_log_round(e, r);
        /* Nobody in scope: wait for a level change or a new client rather than wake up for nothing. (Every
         * shrinker still busy with an earlier round is not nobody: try again next round.) */
        if (!scope_wants_reclaim(rc, s) || (r->n_asked == 0 && r->n_busy == 0))
                return;
        if (r->n_asked == 0) {
                (void) sd_event_source_set_time(e->timer, event_now(rc->event) + rc->config->round_interval_usec);
                (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
                return;
        }

        /* Escalate only when the round fell short and the stall did not fall; ease off when it fell. The
         * stall of one round is noisy: it is held against the recent rounds' average, and a fall is a
         * quarter below it. */
        double stall = episode_stall(e);
        bool short_of_goal = r->want == 0 || r->freed_bytes < r->want;
        /* A stall that fell while the round released nothing fell by itself (or is noise: a node's free
         * pages swing around its watermarks): no reason to ease off a priority too high to ask for
         * anything. */
        bool fell = r->freed_bytes > 0 && stall >= 0 && e->stall_avg >= 0 && stall < e->stall_avg * 0.75;
        if (stall >= 0)
                e->stall_avg = e->stall_avg < 0 ? stall : (e->stall_avg + stall) / 2;
        e->priority = shrink_next_priority(e->priority, p->at[scope_level(s)], p->floor[scope_level(s)],
                                           short_of_goal, fell);

        uint64_t next = rc->config->round_interval_usec;
        /* Met, or as far as it fairly goes: every shrinker asked had given its share already, and what
         * the others did not deliver is nobody's to make up within this goal. */
        if (e->target > 0 && (e->freed_bytes >= e->target || r->shares_in)) {
                /* Give the stall a moment to show the effect before going on: two round intervals (the
                 * stall is read afresh then, not from the sampler). */
                e->paused = true;
                next = 2 * rc->config->round_interval_usec;
        }
        (void) sd_event_source_set_time(e->timer, event_now(rc->event) + next);
        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
}

static void episode_free(struct reclaim *rc, struct scope *s) {
        struct reclaim_episode *e = scope_episode(rc, s);
        if (!e)
                return;
        if (e->round)
                round_detach(e->round); /* it finishes on its own */
        sd_event_source_disable_unref(e->timer);
        free(e);
        episode_slot_set(s, rc->slot, NULL);
}

static struct reclaim_episode *episode_get(struct reclaim *rc, struct scope *s) {
        struct reclaim_episode *found = scope_episode(rc, s);
        if (found)
                return found;
        struct reclaim_episode *e = calloc(1, sizeof(*e));
        if (!e) {
                log_oom();
                return NULL;
        }
        e->rc = rc;
        e->scope = s;
        e->priority = rc->config->priorities.at[scope_level(s)];
        e->stall_avg = e->goal_stall = -1;
        if (sd_event_add_time(rc->event, &e->timer, CLOCK_MONOTONIC, 0, 1000, on_episode_timer, e) < 0) {
                free(e);
                return NULL;
        }
        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(e->timer, "reclaim-episode");
        episode_slot_set(s, rc->slot, e);
        return e;
}

static void scope_changed(struct reclaim *rc, struct scope *s) {
        if (!scope_wants_reclaim(rc, s)) {
                episode_free(rc, s);
                return;
        }
        if (!rc->shrinkers->clients)
                return; /* nobody to ask; an episode starts with the next change */

        struct reclaim_episode *e = episode_get(rc, s);
        if (!e)
                return;
        /* Every change while above ok sets a new goal. A fall means the last rounds were enough: start
         * again at the level's priority; a rise keeps an escalation already under way. */
        const struct shrink_priorities *p = &rc->config->priorities;
        enum level l = scope_level(s);
        e->priority = scope_level(s) < scope_previous(s) ? p->at[l] : MIN(e->priority, p->at[l]);
        e->priority = MAX(e->priority, p->floor[l]);
        e->shortfalls = 0;
        e->anchor_bytes = 0;
        e->goal_stall = e->stall_avg;
        episode_set_goal(e, episode_goal(e));
        e->paused = false;
        e->quiet = false;
        if (scope_level(s) < scope_previous(s)) {
                /* A fall: the level's new goal waits until the stall says it is needed. */
                e->paused = e->quiet = true;
                if (!e->round) {
                        (void) sd_event_source_set_time(e->timer, event_now(rc->event) + rc->config->round_interval_usec);
                        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
                }
                return;
        }
        if (e->round)
                return;
        if (episode_regulated(e))
                episode_rest(e, "its stall is the regulator's to answer");
        else if (episode_cause_gone(e))
                episode_rest(e, "what raised the level is gone (held by its hysteresis)");
        else
                episode_start_round(e);
}

static void on_level_changed(struct scope *s, void *userdata) {
        scope_changed(userdata, s);
}

static void on_scope_gone(struct scope *s, void *userdata) {
        episode_free(userdata, s);
}

static const struct scope_observer scope_observer = {
        .level_changed = on_level_changed,
        .gone = on_scope_gone,
        .freed = on_scope_gone,
};

/* Whether a registration by uid may start rounds now: once per round interval per uid, so that a loop
 * of connect/Serve/close makes no more work than one client. A small table of the uids seen last. */
static bool registration_may_ask(struct reclaim *rc, uid_t uid) {
        uint64_t now = event_now(rc->event);
        size_t oldest = 0;
        for (size_t i = 0; i < ELEMENTSOF(rc->recent); i++) {
                if (rc->recent[i].usec > 0 && rc->recent[i].uid == uid) {
                        if (now - rc->recent[i].usec < rc->config->round_interval_usec)
                                return false;
                        rc->recent[i].usec = now;
                        return true;
                }
                if (rc->recent[i].usec < rc->recent[oldest].usec)
                        oldest = i;
        }
        rc->recent[oldest].uid = uid;
        rc->recent[oldest].usec = now;
        return true;
}

/* A round for one new client's shrinkers in a scope whose episode is running: at the episode's
 * priority, outside its accounting, so that its target, escalation and pause stay as they were. */
static void side_round(struct reclaim *rc, struct scope *s, const struct reclaim_episode *e,
                       const struct shrink_client *cl, const struct shrinker *only) {
        struct shrink_round *r = round_new(rc->engine, scope_name(s), NULL, NULL);
        if (!r) {
                log_oom();
                return;
        }
        struct round_spec spec = episode_round_spec(e);
        spec.only_client = cl;
        spec.only = only;
        round_run(r, &spec);
}

/* A newcomer (a client, or one shrinker of it): scopes already above ok ask it at once, and only it.
 * Where no episode runs yet (nobody was there to ask), one starts. */
static void ask_newcomer(struct reclaim *rc, const struct shrink_client *cl, const struct shrinker *only) {
        bool wanted = false;

        SCOPE_REGISTRY_FOREACH(s, rc->scopes)
                wanted = wanted || scope_wants_reclaim(rc, s);
        if (!wanted || !registration_may_ask(rc, cl->uid))
                return; /* nothing to do, or the next regular round asks it */
        SCOPE_REGISTRY_FOREACH(s, rc->scopes) {
                if (!scope_wants_reclaim(rc, s))
                        continue;
                struct reclaim_episode *e = scope_episode(rc, s);
                if (!e)
                        scope_changed(rc, s);
                else if (e->rounds > 0 && !episode_regulated(e))
                        side_round(rc, s, e, cl, only);
        }
}

static void on_client_added(struct shrink_client *cl, void *userdata) {
        ask_newcomer(userdata, cl, NULL);
}

static void on_client_removed(struct shrink_client *cl, void *userdata) {
        struct reclaim *rc = userdata;
        round_engine_drop_client(rc->engine, cl);
}

/* A shrinker added to a registered client (AddShrinker): asked as a new client is. */
static void on_shrinker_added(struct shrinker *sh, void *userdata) {
        ask_newcomer(userdata, sh->client, sh);
}

static void on_shrinker_removed(struct shrinker *sh, void *userdata) {
        struct reclaim *rc = userdata;
        round_engine_drop_shrinker(rc->engine, sh);
}

static const struct shrink_registry_observer shrink_observer = {
        .client_added = on_client_added,
        .client_removed = on_client_removed,
        .shrinker_added = on_shrinker_added,
        .shrinker_removed = on_shrinker_removed,
};

/* ---- the public face: answers and explicit Shrinks go to the rounds ---- */

int reclaim_answer(struct reclaim *rc, struct shrink_client *cl, const struct shrink_answer *a,
                   const char **ret_reason) {
        assert(rc);

        return round_engine_answer(rc->engine, cl, a, ret_reason);
}

int reclaim_shrink_new(struct reclaim *rc, void *caller, struct shrink_round **ret) {
        assert(rc);

        struct shrink_round *r = round_new_explicit(rc->engine, caller);
        if (!r)
                return -ENOMEM;
        *ret = r;
        return 0;
}

void reclaim_shrink_start(struct shrink_round *r, const struct shrink_target *t) {
        assert(r);

        round_run(r, &(struct round_spec){
                .type = t->type,
                .node_index = t->node_index,
                .cgroup = t->cgroup,
                .priority = 0,
                .nr_to_scan = t->nr_to_scan,
                .only = t->only,
                .measure = t->measure,
                .dry_run = t->dry_run,
                .level = -1,
        });
}

void reclaim_shrink_detach(struct shrink_round *r) {
        assert(r);

        round_detach(r);
}

int reclaim_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                struct shrink_registry *shrinkers, const struct reclaim_transport *transport, void *userdata,
                struct reclaim **ret) {
        assert(event);

        struct reclaim *rc = calloc(1, sizeof(*rc));
        int r;

        if (!rc)
                return -ENOMEM;
        *rc = (struct reclaim){
                .event = event,
                .config = config,
                .scopes = scopes,
                .shrinkers = shrinkers,
                .slot = -1,
        };
        r = round_engine_new(event, config, shrinkers, transport, userdata, &rc->engine);
        if (r >= 0)
                r = regulator_new(event, config, scopes, shrinkers, rc->engine, &rc->regulator);
        if (r >= 0)
                r = rc->slot = scope_registry_add_observer(scopes, &scope_observer, rc);
        if (r >= 0)
                r = shrink_registry_add_observer(shrinkers, &shrink_observer, rc);
        if (r < 0) {
                reclaim_free(rc);
                return r;
        }
        *ret = rc;
        return 0;
}

/* After every client is gone and the scope registry is freed (which freed the episodes through the
 * observer). */
struct reclaim *reclaim_free(struct reclaim *rc) {
        if (!rc)
                return NULL;
        regulator_free(rc->regulator);
        round_engine_free(rc->engine);
        free(rc);
        return NULL;
}

int reclaim_shrinker_info(const struct reclaim *rc, const struct shrinker *sh, struct shrinker_info_snapshot *ret) {
        assert(rc);
        assert(ret);

        int r = round_engine_shrinker_info(rc->engine, sh, ret);
        if (r >= 0 && rc->regulator) {
                ret->have_regulation = regulator_client_info(rc->regulator, sh->client, &ret->regulation) >= 0;
                ret->limit = regulator_shrinker_limit(rc->regulator, sh);
        }
        return r;
}

int reclaim_regulation(const struct reclaim *rc, const struct scope *s, struct regulation_snapshot *ret) {
        assert(rc);
        assert(ret);

        return rc->regulator ? regulator_scope_info(rc->regulator, s, ret) : -ENOENT;
}

void reclaim_regulator_stats(const struct reclaim *rc, struct regulator_stats *ret) {
        assert(rc);
        assert(ret);

        regulator_get_stats(rc->regulator, ret);
}

const struct round_engine *reclaim_engine(const struct reclaim *rc) {
        assert(rc);

        return rc->engine;
}
