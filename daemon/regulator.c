/* SPDX-License-Identifier: MIT */
#include "regulator.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "format.h"
#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "regulation.h"
#include "value_split.h"

/* How much more often scopes are looked at than regulate_interval while one is hot (below). */
#define HOT_LOOKS_PER_INTERVAL 4
/* What they refilled between two looks is remembered as a maximum that loses a quarter a look. */
#define REFILL_DECAY_PERMILLE 250
/* A quiet scope's limit events are counted afresh at least this often (every look while it stalls at
 * all), so that its first look over the budget compares with a count from within the recent window the
 * gate judges by (10 s at least). */
#define LIMITS_NOTE_USEC (5 * USEC_PER_SEC)
/* ...and a group with no limit on its way up is looked at for one this often: only a limited group's
 * caches are followed as they grow, and an idle machine's hundred groups cost nothing more. */
#define UNLIMITED_NOTE_USEC (30 * USEC_PER_SEC)
/* Clients in a limited group that grew this much between two looks are a cache filling it: looked at as
 * often as a scope with a growth limit (there is often no stall at all before the cliff). */
#define GROWING_BYTES (1024u * 1024u)
/* A shrinker is told its growth limit again when it moved by more than this share of what it was last
 * told (1/32): a limit rising 8% a second is told about three times a second, not at every look. */
#define LIMIT_TELL_SHIFT 5
/* Limits told to one client in one message, at most (a client has at most 64 shrinkers). */
#define LIMITS_PER_MESSAGE 64
/* Value: moves of growth limit per scope and look (one per arena), and the shrinkers of a scope looked at
 * for them (more are held by what they hold alone). */
#define VALUE_MOVES_MAX 4
#define VALUE_CANDIDATES_MAX 256

struct regulator {
        sd_event *event;
        const struct config *config;
        struct scope_registry *scopes;
        struct shrink_registry *shrinkers;
        struct round_engine *engine;
        int slot; /* on each scope: its struct regulated */
        sd_event_source *timer;
        uint64_t tick;
        bool hot; /* a limited group that grows, a stall, or a growth limit: caches fill or regrow fast, look 4x as often */
        bool any_limit; /* some scope has a growth limit (as of the last look) */
        /* What each shrinker was last told it may hold, keyed by its id: a side table, as the round
         * engine keeps its counts (struct told_limit). */
        struct hashmap *told;
        struct regulator_stats stats;
};

struct told_limit {
        uint64_t bytes; /* 0: no limit */
};

/* A scope with shrinkers in it, as the regulator follows it: in the scope's slot. */
struct regulated {
        struct regulator *g;
        struct scope *scope;
        struct regulation reg;
        enum regulation_verdict verdict; /* the last look's */
        struct shrink_round *round; /* the last step's, while it runs */
        uint64_t seen_tick;         /* the tick that last found shrinkers in it */
        /* A run of intervals over the budget, for the two lines the log gets per run. */
        bool in_run;
        uint64_t limits_noted_usec; /* when its limit events were last counted on a quiet look */
        bool limited;               /* a memory limit is on its cgroup's way up (as last noted) */
        bool growing;               /* its clients grew by GROWING_BYTES or more since the last look */
        uint64_t resident_counted; /* its clients' memory at the growth limit's last count */
        uint64_t resident_seen;    /* ...and at the last look */
        uint64_t refill;           /* how much they grew between two looks lately (decaying maximum) */
        uint64_t limit_held;       /* what the shrinkers in it held at their last counts, while it has a limit */
        /* What they may hold before the group's headroom falls to its low threshold: what they counted and
         * the room left (0: no such bound). A cache growing back fast after a burst went past its room
         * into the group's OOM killer: with nobody left reading files, nothing stalls on the way. */
        uint64_t room_cap;
        /* Value: this look's moves of growth limit down the gradient (value_split.h); under a limit its
         * shrinkers are counted every VALUE_RECOUNT_USEC, since a value changes with the load, not the size. */
        struct value_move moves[VALUE_MOVES_MAX];
        size_t n_moves;
        uint64_t value_counted_usec;
        uint64_t run_steps, run_asked, run_freed;
        double run_peak;
};

SCOPE_SLOT_ACCESSORS(regulated_slot, struct regulated);

static struct regulated *scope_regulated(const struct regulator *g, const struct scope *s) {
        return regulated_slot_get(s, g->slot);
}

static void regulated_free(struct regulator *g, struct scope *s) {
        struct regulated *st = scope_regulated(g, s);
        if (!st)
                return;
        if (st->round)
                round_detach(st->round); /* it finishes on its own */
        free(st);
        regulated_slot_set(s, g->slot, NULL);
}

static struct regulated *regulated_get(struct regulator *g, struct scope *s) {
        struct regulated *found = scope_regulated(g, s);
        if (found || scope_is_gone(s))
                return found; /* a removed group is not regulated again */
        struct regulated *st = calloc(1, sizeof(*st));
        if (!st) {
                log_oom();
                return NULL;
        }
        st->g = g;
        st->scope = s;
        regulation_init(&st->reg);
        regulated_slot_set(s, g->slot, st);
        return st;
}

/* What the shrinkers in scope may hold now: the growth limit, or the room under the group's headroom if
 * that is less (0: neither). */
static uint64_t regulated_limit(const struct regulated *st) {
        uint64_t limit = regulation_limit(&st->reg);
        if (st->room_cap > 0 && (limit == 0 || st->room_cap < limit))
                return st->room_cap;
        return limit;
}

static struct regulation_params regulated_params(const struct regulated *st) {
        const struct config *c = st->g->config;
        return (struct regulation_params){
                .budget = config_regulate_budget(c, scope_cgroup(st->scope)),
                .step_min_permille = MIN((unsigned) REGULATION_STEP_MIN_PERMILLE, c->regulate_step_max_permille),
                .step_max_permille = c->regulate_step_max_permille,
                .step_gain_permille = REGULATION_STEP_GAIN_PERMILLE,
                .window_usec = REGULATION_WINDOW_USEC,
        };
}

static void on_step_done(const struct round_outcome *o, void *userdata) {
        struct regulated *st = userdata;
        st->round = NULL;
        st->run_freed = sat_add(st->run_freed, o->freed_bytes);
        st->g->stats.freed_bytes = sat_add(st->g->stats.freed_bytes, o->freed_bytes);
        log_debug("%s: regulation step: %u shrinkers freed %llu of %llu bytes asked.", scope_name(st->scope), o->n_asked,
                  (unsigned long long) o->freed_bytes, (unsigned long long) o->want);
}

/* A round over the scope's shrinkers, with the usual budget so that a slow client delays nobody: a step
 * for bytes (split by weight, at the gentlest priority that covers each share; 0: nothing is known of
 * what they hold yet, and the kernel's gentlest sizing asks a token amount after the count), or, with
 * count_only, their counts. on_done is called when it is over, possibly before this returns. */
static void regulated_round(struct regulated *st, uint64_t bytes, bool count_only, const char *why, round_done_fn on_done) {
        struct scope *s = st->scope;
        char label[256];
        /* The label names the reason in the lines about the round (release.c: "...claimed to free"). */
        snprintf(label, sizeof(label), "%s (%s)", scope_name(s), why);
        struct shrink_round *r = round_new(st->g->engine, label, on_done, st);
        if (!r) {
                log_oom();
                return;
        }
        st->round = r;
        round_run(r, &(struct round_spec){
                .type = scope_get_type(s),
                .node_index = scope_node_index(s),
                .cgroup = scope_cgroup(s),
                .priority = SHRINK_PRIORITY_MAX,
                .want = bytes,
                .share_sets_priority = !count_only,
                .floor = 0,
                .budget = true,
                .dry_run = count_only,
                .level = scope_level(s),
        });
}

static void regulated_step(struct regulated *st, uint64_t bytes, const char *why) {
        regulated_round(st, bytes, false, why, on_step_done);
}

/* Under the budget, with a growth limit known: counted afresh, shrinkers in scope holding more than the
 * limit are asked for the difference (at most a quarter of what they hold). */
static void on_limit_counted(const struct round_outcome *o, void *userdata) {
        struct regulated *st = userdata;
        struct scope *s = st->scope;
        (void) o;
        st->round = NULL;
        uint64_t limit = regulated_limit(st);
        uint64_t held = round_engine_held_bytes(st->g->engine, scope_get_type(s), scope_cgroup(s), scope_node_index(s));
        if (limit == 0 || held <= limit)
                return;
        /* Down to the limit less what they refill before the next look: asked for the difference alone, a
         * cache refilling at several MiB/s sat 1 to 4 MiB over its limit, and at the edge that was past it. */
        uint64_t target = limit > st->refill ? limit - st->refill : 0;
        uint64_t bytes = MIN(held - target, held / 1000 * REGULATION_STEP_HARD_MAX_PERMILLE);
        /* With what the kernel showed of their memory when the count began: what they say they hold and
         * what the group feels can drift apart. */
        log_debug("%s: regulation: holding %llu (resident %llu), over the growth limit of %llu: asking for %llu.",
                  scope_name(s), (unsigned long long) held, (unsigned long long) st->resident_counted,
                  (unsigned long long) limit, (unsigned long long) bytes);
        st->g->stats.steps++;
        st->g->stats.asked_bytes = sat_add(st->g->stats.asked_bytes, bytes);
        char why[160], f_held[32], f_limit[32];
        snprintf(why, sizeof(why), "regulation: holding %s, over the growth limit of %s", format_bytes(f_held, sizeof(f_held), held),
                 format_bytes(f_limit, sizeof(f_limit), limit));
        regulated_step(st, bytes, why);
}

/* What client cl's shrinkers in scope s last counted (each count is capped by the client's memory
 * already), and at most what the kernel shows of its memory (resident: -1 not read yet, read here): a
 * client with many shrinkers cannot claim its memory once for each and so draw the shares of other
 * clients' limits onto itself. *ret_raw: the uncapped sum. false: none of its shrinkers is in s. */
static bool client_held_in(const struct regulator *g, struct shrink_client *cl, const struct scope *s,
                           int64_t *resident, uint64_t *ret_held, uint64_t *ret_raw) {
        uint64_t raw = 0;
        bool any = false;
        for (size_t i = 0; i < cl->n_shrinkers; i++) {
                bool all_nodes;
                const char *cg;
                if (!shrink_select(scope_get_type(s), scope_cgroup(s), cl->shrinkers[i]->flags, cl->cgroup, &all_nodes, &cg))
                        continue;
                any = true;
                raw = sat_add(raw, round_engine_shrinker_bytes(g->engine, cl->shrinkers[i]));
        }
        if (any && *resident < 0) {
                uint64_t r;
                *resident = shrink_client_resident(cl, &r) >= 0 ? (int64_t) MIN(r, (uint64_t) INT64_MAX) : 0;
        }
        *ret_raw = raw;
        *ret_held = any ? MIN(raw, (uint64_t) *resident) : 0;
        return any;
}

/* What the kernel shows of the memory of the clients with shrinkers in the scope (a cheap read each:
 * statm or their cgroup's usage, so that caches that did not grow are not even asked to count), and
 * what they counted, each client at most its memory (client_held_in()). */
static void scope_clients_sum(const struct regulator *g, const struct scope *s, uint64_t *ret_resident, uint64_t *ret_held) {
        uint64_t resident = 0, held = 0;
        for (struct shrink_client *cl = g->shrinkers->clients; cl; cl = cl->next) {
                int64_t r = -1;
                uint64_t h, raw;
                if (!client_held_in(g, cl, s, &r, &h, &raw))
                        continue;
                resident = sat_add(resident, (uint64_t) r);
                held = sat_add(held, h);
        }
        *ret_resident = resident;
        *ret_held = held;
}

/* Growth below this since the last count is not worth a round of counts. */
#define LIMIT_RECOUNT_BYTES (256u * 1024u)

static void regulated_count(struct regulated *st) {
        regulated_round(st, 0, true, "regulation: counted for the growth limit", on_limit_counted);
}

static void regulated_log_run(struct regulated *st, enum regulation_verdict v, double rate, uint64_t budget,
                              uint64_t held) {
        const char *name = scope_name(st->scope);
        if (v == REGULATION_STEP && !st->in_run) {
                st->in_run = true;
                st->run_steps = st->run_asked = st->run_freed = 0;
                st->run_peak = rate;
                log_info("%s: stall %.2f ms/s, over its budget of %.2f ms/s: asking its shrinkers (holding %llu bytes) for "
                         "a step each interval while it stays over.",
                         name, rate / 1000, (double) budget / 1000, (unsigned long long) held);
        } else if ((v == REGULATION_UNDER || v == REGULATION_NOT_OWN) && st->in_run) {
                st->in_run = false;
                log_info("%s: stall %.2f ms/s, %s after %llu steps (peak %.2f ms/s) that asked %llu bytes and freed %llu.",
                         name, rate / 1000, v == REGULATION_UNDER ? "back under its budget" : "no longer for its own memory",
                         (unsigned long long) st->run_steps, st->run_peak / 1000, (unsigned long long) st->run_asked,
                         (unsigned long long) st->run_freed);
        }
        st->run_peak = MAX(st->run_peak, rate);
}

/* In a limited group, the room under its headroom bounds what they may hold: read again when they grew
 * (or while it binds), as the headroom watch reads it (usage less file pages, of each limited group on
 * the way up). Not with headroom=no. */
static void regulated_follow_room(struct regulated *st, uint64_t held, bool grew) {
        struct scope *s = st->scope;
        const struct config *c = st->g->config;
        if (!c->headroom || scope_get_type(s) != SCOPE_CGROUP || !st->limited) {
                st->room_cap = 0;
                return;
        }
        if (!grew && st->room_cap == 0)
                return;
        scope_refresh_headroom(s);
        uint64_t room = scope_headroom_room_bytes(s);
        st->room_cap = room == UINT64_MAX ? 0 : MAX(sat_add(held, room), (uint64_t) 1);
}

/* After a look: what the shrinkers held (for the shares of the limit each is told, regulator_tell_limits()),
 * and how fast they grow: for what to ask under a limit (the last look's growth, its maximum decaying),
 * and, in a group, whether to look more often (a cache growing into a limit). */
static void regulated_follow(struct regulated *st) {
        struct regulator *g = st->g;
        struct scope *s = st->scope;
        bool limit = regulation_limit(&st->reg) > 0 || st->room_cap > 0;

        st->limit_held = 0;
        if (!limit && !(scope_get_type(s) == SCOPE_CGROUP && st->limited)) {
                st->growing = false; /* no limit on its way up any more */
                st->room_cap = 0;
                return;
        }
        uint64_t resident, held;
        scope_clients_sum(g, s, &resident, &held);
        uint64_t grew = st->resident_seen > 0 && resident > st->resident_seen ? resident - st->resident_seen : 0;
        regulated_follow_room(st, held, grew > 0);
        st->limit_held = regulated_limit(st) > 0 ? held : 0;
        st->refill = MAX(st->refill - st->refill / 1000 * REFILL_DECAY_PERMILLE, grew);
        st->growing = grew >= GROWING_BYTES;
        st->resident_seen = resident;
}

/* Where its shrinkers' values differ, a step of the limit moves from the one worth least to the one
 * worth most, within each arena (value_moves()). */
static void regulated_plan_moves(struct regulated *st) {
        struct regulator *g = st->g;
        uint64_t limit = regulated_limit(st);
        struct value_candidate c[VALUE_CANDIDATES_MAX];
        size_t n = 0;

        st->n_moves = 0;
        if (limit == 0 || st->limit_held == 0)
                return;
        for (struct shrink_client *cl = g->shrinkers->clients; cl && n < ELEMENTSOF(c); cl = cl->next) {
                int64_t resident = -1;
                uint64_t held, raw;
                if (!client_held_in(g, cl, st->scope, &resident, &held, &raw) || raw == 0)
                        continue;
                uint64_t arena = config_value_shared(g->config, cl->cgroup) ? VALUE_ARENA_SHARED : (uint64_t) cl->uid;
                for (size_t i = 0; i < cl->n_shrinkers && n < ELEMENTSOF(c); i++) {
                        const struct shrinker *sh = cl->shrinkers[i];
                        c[n++] = (struct value_candidate){
                                .id = sh->id,
                                .value = round_engine_shrinker_value(g->engine, sh),
                                .arena = arena,
                                .share = regulation_share(limit, st->limit_held, held, raw,
                                                          round_engine_shrinker_bytes(g->engine, sh)),
                        };
                }
        }
        st->n_moves = value_moves(c, n, limit / VALUE_MOVE_STEP_DIV, limit / VALUE_FLOOR_DIV, st->moves,
                                  ELEMENTSOF(st->moves));
        for (size_t i = 0; i < st->n_moves; i++)
                log_debug("%s: growth limit by value: %llu bytes from shrinker %llu to %llu.", scope_name(st->scope),
                          (unsigned long long) st->moves[i].bytes, (unsigned long long) st->moves[i].from,
                          (unsigned long long) st->moves[i].to);
}

/* A shrinker's share of the scope's limit, after this look's moves by value. */
static uint64_t regulated_share_by_value(const struct regulated *st, uint64_t id, uint64_t share) {
        for (size_t i = 0; i < st->n_moves; i++) {
                if (st->moves[i].from == id)
                        share -= MIN(share - MIN(share, 1u), st->moves[i].bytes);
                else if (st->moves[i].to == id)
                        share = sat_add(share, st->moves[i].bytes);
        }
        return share;
}

static void regulated_tick(struct regulated *st, uint64_t now) {
        struct regulator *g = st->g;
        struct scope *s = st->scope;
        struct regulation_params p = regulated_params(st);
        uint64_t total, bytes;
        double rate;

        /* The read may find the group gone: nothing more to decide for it (its state goes next look). */
        if (p.budget == 0 || scope_is_gone(s) || !scope_read_some_total(s, &total) || scope_is_gone(s))
                return;
        bool over = regulation_measure(&st->reg, &p, total, now, &rate);
        /* Whose stall it is costs more reads: only asked when there is something to decide. Otherwise
         * the limits' counts are kept fresh, so that the first look over the budget can tell. */
        bool own = over && scope_stall_is_own(s, now);
        if (!over && (rate > 0 || now - st->limits_noted_usec >= (st->limited ? LIMITS_NOTE_USEC : UNLIMITED_NOTE_USEC))) {
                st->limited = scope_note_limits(s, now);
                st->limits_noted_usec = now;
        }
        /* What they hold matters only to a step: the sum walks every client. */
        uint64_t held = over ? round_engine_held_bytes(g->engine, scope_get_type(s), scope_cgroup(s), scope_node_index(s)) : 0;
        enum regulation_verdict v = regulation_decide(&st->reg, &p, over, own, held, &bytes);
        st->verdict = v;
        if (v != REGULATION_FIRST)
                log_debug("%s: regulation: stall %.2f ms/s against %.2f, %s, holding %llu, step %llu.", scope_name(s),
                          rate / 1000, (double) p.budget / 1000, regulation_verdict_to_string(v),
                          (unsigned long long) held, (unsigned long long) bytes);
        regulated_log_run(st, v, rate, p.budget, held);
        regulated_follow(st);
        regulated_plan_moves(st);
        if (v == REGULATION_UNDER && regulated_limit(st) > 0 && !st->round) {
                uint64_t resident = st->resident_seen;
                /* Counted again when they grew or shrank, and every so often for their values. */
                if (resident > sat_add(st->resident_counted, LIMIT_RECOUNT_BYTES) || resident < st->resident_counted ||
                    now - st->value_counted_usec >= VALUE_RECOUNT_USEC) {
                        st->resident_counted = resident;
                        st->value_counted_usec = now;
                        regulated_count(st);
                }
                return;
        }
        if (v != REGULATION_STEP && !(v == REGULATION_SETTLING && bytes > 0))
                return;
        if (st->round)
                return; /* the last step is still out (its budget ends it soon) */
        /* Held to a limit: down to it less what they refill before the next look, as under the budget. */
        uint64_t limit = regulated_limit(st);
        if (limit > 0 && held > limit && bytes >= held - limit)
                bytes = MIN(held - (limit > st->refill ? limit - st->refill : 0), held / 1000 * REGULATION_STEP_HARD_MAX_PERMILLE);
        st->run_steps++;
        st->run_asked = sat_add(st->run_asked, bytes);
        g->stats.steps++;
        g->stats.asked_bytes = sat_add(g->stats.asked_bytes, bytes);
        char why[160];
        snprintf(why, sizeof(why), "regulation: stall %.2f ms/s over its budget of %.2f", rate / 1000, (double) p.budget / 1000);
        regulated_step(st, bytes, why);
}

/* The growth limit shrinker sh of cl is told: its share of the tightest limit among the scopes that hold
 * it (its client's cgroup, the limited groups above it, the system), split by what each client there
 * last counted, each at most its memory, and within a client by what each shrinker counted. 0: none;
 * also for a shrinker that has counted nothing yet (a new cache is not held to nothing: it is counted,
 * and told, as it grows). resident: the client's memory, read once for all its shrinkers (-1: not yet). */
static uint64_t shrinker_limit(const struct regulator *g, struct shrink_client *cl, const struct shrinker *sh,
                               int64_t *resident) {
        uint64_t mine = round_engine_shrinker_bytes(g->engine, sh), best = 0;
        if (mine == 0)
                return 0;
        struct scope *sys = scope_registry_system(g->scopes);
        for (size_t i = 0; i <= cl->n_watched; i++) {
                struct scope *s = i < cl->n_watched ? cl->watched[i] : sys;
                const struct regulated *st = s ? scope_regulated(g, s) : NULL;
                uint64_t held, raw;
                if (!st || regulated_limit(st) == 0 || st->limit_held == 0 ||
                    !client_held_in(g, cl, s, resident, &held, &raw) || raw == 0)
                        continue;
                uint64_t bytes = regulated_share_by_value(st, sh->id,
                                                          regulation_share(regulated_limit(st), st->limit_held, held, raw, mine));
                best = best ? MIN(best, bytes) : bytes;
        }
        return best;
}

static bool limit_moved(uint64_t told, uint64_t now) {
        if ((told == 0) != (now == 0))
                return true;
        return (told > now ? told - now : now - told) > told >> LIMIT_TELL_SHIFT;
}

/* Remember what sh is told now; false if that is what it was told last (nothing to send). */
static bool told_update(struct regulator *g, const struct shrinker *sh, uint64_t bytes) {
        struct told_limit *t = hashmap_get_u64(g->told, sh->id);
        if (!t && bytes == 0)
                return false;
        if (t && !limit_moved(t->bytes, bytes))
                return false;
        if (!t) {
                t = calloc(1, sizeof(*t));
                if (!t || hashmap_put_u64(g->told, sh->id, t) < 0) {
                        free(t);
                        return false; /* told next look */
                }
        }
        t->bytes = bytes;
        if (bytes == 0)
                free(hashmap_remove_u64(g->told, sh->id));
        return true;
}

/* Each client's shrinkers are told their growth limits when they moved, so that a cache that keeps
 * within its own does not refill past the edge between two looks (the count and the step after it
 * come a look late, 2 to 4 MiB past the limit at a refill of several MiB/s). */
static void regulator_tell_limits(struct regulator *g) {
        if (!g->any_limit && hashmap_size(g->told) == 0)
                return;
        for (struct shrink_client *cl = g->shrinkers->clients; cl; cl = cl->next) {
                struct shrinker_limit v[LIMITS_PER_MESSAGE];
                size_t n = 0;
                int64_t resident = -1;
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        const struct shrinker *sh = cl->shrinkers[i];
                        uint64_t bytes = g->any_limit ? shrinker_limit(g, cl, sh, &resident) : 0;
                        if (!told_update(g, sh, bytes))
                                continue;
                        log_debug("Shrinker %llu of pid %d: growth limit %llu bytes.", (unsigned long long) sh->id,
                                  (int) cl->pid, (unsigned long long) bytes);
                        v[n++] = (struct shrinker_limit){ .shrinker = sh->id, .bytes = bytes };
                        if (n == LIMITS_PER_MESSAGE) {
                                (void) round_engine_send_limits(g->engine, cl, v, n);
                                n = 0;
                        }
                }
                if (n > 0)
                        (void) round_engine_send_limits(g->engine, cl, v, n);
        }
}

/* The scopes with shrinkers in them now: each client's own cgroup and the limited groups above it (the
 * scopes it is watched in), and the system for everyone. Others lose their state. */
static void regulator_mark(struct regulator *g) {
        bool any = false;
        for (struct shrink_client *cl = g->shrinkers->clients; cl; cl = cl->next) {
                if (cl->n_shrinkers == 0)
                        continue;
                any = true;
                for (size_t i = 0; i < cl->n_watched; i++) {
                        struct regulated *st = regulated_get(g, cl->watched[i]);
                        if (st)
                                st->seen_tick = g->tick;
                }
        }
        struct scope *sys = any ? scope_registry_system(g->scopes) : NULL;
        struct regulated *st = sys ? regulated_get(g, sys) : NULL;
        if (st)
                st->seen_tick = g->tick;
}

static void regulator_arm(struct regulator *g) {
        if (!g->shrinkers->clients) {
                (void) sd_event_source_set_enabled(g->timer, SD_EVENT_OFF);
                return;
        }
        /* Regulation turned off: a look once a minute, for a reload that turns it on again. */
        bool off = g->config->regulate_budget_usec == 0 && g->config->n_regulate_cgroups == 0;
        uint64_t period = off ? 60 * USEC_PER_SEC : g->config->regulate_interval_usec / (g->hot ? HOT_LOOKS_PER_INTERVAL : 1);
        (void) sd_event_source_set_time(g->timer, event_now(g->event) + period);
        (void) sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT);
}

static int on_tick(sd_event_source *src, uint64_t usec, void *userdata) {
        struct regulator *g = userdata;
        (void) src;
        (void) usec;
        uint64_t now = event_now(g->event);

        g->tick++;
        g->stats.ticks++;
        regulator_mark(g);
        g->hot = false;
        g->any_limit = false;
        SCOPE_REGISTRY_FOREACH(s, g->scopes) {
                struct regulated *st = scope_regulated(g, s);
                if (!st)
                        continue;
                if (st->seen_tick != g->tick || scope_is_gone(s)) {
                        regulated_free(g, s);
                        continue;
                }
                regulated_tick(st, now);
                /* A cache growing into a group's limit fills it at several MiB/s: a look a second lets it
                 * far past the edge before the first step. A limited group whose caches grow, or that is
                 * in a stall, is looked at as often as one with a growth limit; a quiet one once an
                 * interval, so that idle groups cost no more wake-ups. */
                g->hot = g->hot || regulated_limit(st) > 0 ||
                         (scope_get_type(s) == SCOPE_CGROUP && (st->growing || st->reg.was_over));
                g->any_limit = g->any_limit || regulated_limit(st) > 0;
        }
        regulator_tell_limits(g);
        regulator_arm(g);
        return 0;
}

static void on_client_added(struct shrink_client *cl, void *userdata) {
        struct regulator *g = userdata;
        int enabled = SD_EVENT_OFF;
        (void) cl;
        if (sd_event_source_get_enabled(g->timer, &enabled) >= 0 && enabled == SD_EVENT_OFF)
                regulator_arm(g);
}

static void on_shrinker_removed(struct shrinker *sh, void *userdata) {
        struct regulator *g = userdata;
        free(hashmap_remove_u64(g->told, sh->id));
}

static void on_client_removed(struct shrink_client *cl, void *userdata) {
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                on_shrinker_removed(cl->shrinkers[i], userdata);
}

static const struct shrink_registry_observer shrink_observer = {
        .client_added = on_client_added,
        .client_removed = on_client_removed,
        .shrinker_removed = on_shrinker_removed,
};

static void on_scope_freed(struct scope *s, void *userdata) {
        regulated_free(userdata, s);
}

/* A group found removed: its state goes at the next look, not now. The finding may come from a read in
 * the middle of this scope's own look (scope_read_some_total() and the reads after it), which goes on
 * using the state (ASan in the VM: a use after free in regulation_measure()). */
static void on_scope_gone(struct scope *s, void *userdata) {
        (void) s;
        (void) userdata;
}

static const struct scope_observer scope_observer = {
        .gone = on_scope_gone,
        .freed = on_scope_freed,
};

int regulator_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                  struct shrink_registry *shrinkers, struct round_engine *engine, struct regulator **ret) {
        struct regulator *g = calloc(1, sizeof(*g));
        int r;

        assert(event && config && scopes && shrinkers && engine && ret);
        if (!g)
                return -ENOMEM;
        *g = (struct regulator){
                .event = event, .config = config, .scopes = scopes, .shrinkers = shrinkers, .engine = engine, .slot = -1,
        };
        r = hashmap_new(HASHMAP_KEY_U64, &g->told);
        if (r >= 0)
                r = sd_event_add_time(event, &g->timer, CLOCK_MONOTONIC, 0, 10000, on_tick, g);
        if (r >= 0) {
                (void) sd_event_source_set_enabled(g->timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(g->timer, "regulator");
                r = g->slot = scope_registry_add_observer(scopes, &scope_observer, g);
        }
        if (r >= 0)
                r = shrink_registry_add_observer(shrinkers, &shrink_observer, g);
        if (r < 0) {
                regulator_free(g);
                return r;
        }
        *ret = g;
        return 0;
}

struct regulator *regulator_free(struct regulator *g) {
        if (!g)
                return NULL;
        sd_event_source_disable_unref(g->timer);
        /* Empty: the registry was freed first, and each client's entries went with it (on_client_removed()). */
        hashmap_free(g->told);
        free(g);
        return NULL;
}

static void regulated_snapshot(const struct regulated *st, struct regulation_snapshot *ret) {
        const struct regulation *r = &st->reg;
        struct regulation_params p = regulated_params(st);
        uint64_t mono = event_now(st->g->event), real = clock_now_usec(CLOCK_REALTIME);
        *ret = (struct regulation_snapshot){
                .cgroup = scope_get_type(st->scope) == SCOPE_CGROUP ? scope_cgroup(st->scope) : NULL,
                .budget = p.budget,
                .stall = (uint64_t) MAX(r->rate, 0.0),
                .state = regulation_verdict_to_string(st->verdict),
                .limit = regulated_limit(st),
                .edge = r->edge,
                .edge_found = r->edge > 0 && mono >= r->edge_usec && real >= mono - r->edge_usec ? real - (mono - r->edge_usec) : 0,
                .rising = regulation_rise_permille(r),
                .return_usec = regulation_edge_return_usec(r),
                .steps = r->steps,
                .asked = r->asked_bytes,
        };
}

bool regulator_owns(const struct regulator *g, const struct scope *s) {
        assert(g && s);

        const struct regulated *st = scope_regulated(g, s);
        return st && scope_get_type(s) != SCOPE_NODE && regulated_params(st).budget > 0;
}

int regulator_scope_info(const struct regulator *g, const struct scope *s, struct regulation_snapshot *ret) {
        assert(g && s && ret);

        const struct regulated *st = scope_regulated(g, s);
        if (!st || !st->reg.have_mark)
                return -ENOENT;
        regulated_snapshot(st, ret);
        return 0;
}

int regulator_client_info(const struct regulator *g, const struct shrink_client *cl, struct regulation_snapshot *ret) {
        assert(g && cl && ret);

        /* The scope that holds it back: the tightest limit among those it is watched in; else its own. */
        const struct regulated *best = NULL;
        for (size_t i = 0; i < cl->n_watched; i++) {
                const struct regulated *st = scope_regulated(g, cl->watched[i]);
                if (!st || !st->reg.have_mark)
                        continue;
                uint64_t l = regulated_limit(st), bl = best ? regulated_limit(best) : 0;
                if (!best || (l > 0 && (bl == 0 || l < bl)))
                        best = st;
        }
        if (!best)
                return -ENOENT;
        regulated_snapshot(best, ret);
        return 0;
}

uint64_t regulator_shrinker_limit(const struct regulator *g, const struct shrinker *sh) {
        assert(g && sh);

        const struct told_limit *t = hashmap_get_u64(g->told, sh->id);
        return t ? t->bytes : 0;
}

void regulator_get_stats(const struct regulator *g, struct regulator_stats *ret) {
        assert(g);
        assert(ret);

        *ret = g->stats;
}
