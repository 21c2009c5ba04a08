/* SPDX-License-Identifier: MIT */
#include "scope.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "headroom_watch.h"
#include "format.h"
#include "kmsg.h"
#include "level_reason.h"
#include "clock.h"
#include "log.h"
#include "limit_stall.h"
#include "macro.h"


/* A scope: written by this file alone (build-aux/check-owners); everyone else reads it through scope.h. */
struct scope {
        struct scope_env *env;
        enum scope_type type;
        int node;          /* SCOPE_NODE: the node's id */
        size_t node_index; /* SCOPE_NODE: index in the node monitor */
        char *cgroup;      /* SCOPE_CGROUP: the v2 path */
        uint64_t cgroup_ino; /* SCOPE_CGROUP: its directory's inode, the cgroup's id: a group made anew
                              * under the same path has another */
        char *name;        /* "system", "node:N" or the cgroup path: for logs */
        uid_t owner_uid;   /* SCOPE_CGROUP: who owns its directory (a delegated subtree's user), whose log
                            * lines its removals and kills count as (log_client()) */
        unsigned n_refs;

        /* PSI scopes */
        char *pressure_path;
        int trigger_fd;
        sd_event_source *trigger_source;
        struct psi_trigger trigger; /* as armed */
        struct psi_stats psi;      /* as the kernel shows it */
        bool have_psi;
        struct limit_stall explained; /* the part of it that limits of groups below explain */
        uint64_t explained_usec;      /* when that was last looked at */
        struct psi_stats explained_at; /* psi then */
        struct psi_stats own;         /* psi less what is explained: the totals the levels and the regulator read */
        struct level_samples samples; /* of own */
        struct limit_watch limits;    /* the limit events of its group and limited ancestors (shortage.c's) */
        uint64_t triggered_usec; /* last POLLPRI */

        /* memory figures behind the reclaim target */
        uint64_t usage_bytes, limit_bytes; /* SCOPE_CGROUP; limit UINT64_MAX when none */
        uint64_t anon_bytes, anon_usec; /* SCOPE_CGROUP: the last reading of its anonymous memory, and when */
        uint64_t demand_bytes;          /* its growth per second between the last two readings */
        uint64_t growth_bytes;          /* its growth between the last two readings (0: it shrank) */

        enum level psi_raw;
        struct headroom_watch hw; /* headroom_watch.c's: the second source of the level */

        struct level_state level;
        enum level_source source; /* what raised the level last */
        enum level previous;
        uint64_t changed_usec; /* CLOCK_MONOTONIC of the last change */
        bool first_look;       /* deciding from the kernel's averages, before samples of its own */
        char reason[256];      /* why it is at its level, in words, as of the last change ("" at ok) */
        uint64_t reclaim_target;
        bool gone;
        bool announced; /* its owner has it: level changes are reported from now on */

        void *slots[SCOPE_SLOTS_MAX];
};

/* What the registry gave every scope. */
static inline const struct config *config_of(const struct scope *s) {
        return s->env->config;
}

static inline const struct scope_events *events_of(const struct scope *s) {
        return s->env->events;
}

static inline const struct node_monitor *nodes_of(const struct scope *s) {
        return s->env->nodes;
}

/* What headroom_watch.c reports back. */
static struct headroom_pace scope_headroom_looked(struct scope *s, uint64_t now);
static const struct headroom_watch_ops headroom_ops = {
        .looked = scope_headroom_looked,
        .gone = scope_mark_gone,
};

static struct scope *scope_alloc(struct scope_env *env, enum scope_type type) {
        struct scope *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->env = env;
        s->type = type;
        s->n_refs = 1; /* the registry's: the system and node scopes live as long as it does */
        s->trigger_fd = -EBADF;
        headroom_watch_init(&s->hw, &headroom_ops);
        s->limit_bytes = UINT64_MAX;
        s->owner_uid = (uid_t) -1;
        if (limit_stall_init(&s->explained) < 0) {
                free(s);
                return NULL;
        }
        return s;
}

struct scope *scope_free(struct scope *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->trigger_source);
        if (s->trigger_fd >= 0)
                close(s->trigger_fd);
        headroom_watch_stop(&s->hw);
        headroom_watch_done(&s->hw);
        limit_stall_done(&s->explained);
        free(s->pressure_path);
        free(s->cgroup);
        free(s->name);
        free(s);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct scope *, scope_free);

enum level scope_level(const struct scope *s) {
        assert(s);

        return s->level.level;
}

enum level scope_previous(const struct scope *s) {
        assert(s);

        return s->previous;
}

enum level_source scope_source(const struct scope *s) {
        assert(s);

        return s->source;
}

enum scope_type scope_get_type(const struct scope *s) {
        assert(s);

        return s->type;
}

const char *scope_name(const struct scope *s) {
        assert(s);

        return s->name;
}

const char *scope_cgroup(const struct scope *s) {
        assert(s);

        return s->cgroup;
}

size_t scope_node_index(const struct scope *s) {
        assert(s);

        return s->node_index;
}

uint64_t scope_reclaim_target(const struct scope *s) {
        assert(s);

        return s->reclaim_target;
}

const char *scope_reason(const struct scope *s) {
        assert(s);

        return s->reason;
}

bool scope_is_gone(const struct scope *s) {
        assert(s);

        return s->gone;
}

uint64_t scope_headroom_over_bytes(const struct scope *s) {
        assert(s);

        return s->hw.headroom.over_bytes;
}

uint64_t scope_headroom_room_bytes(const struct scope *s) {
        assert(s);

        return s->hw.watched && s->hw.headroom.limit != UINT64_MAX ? s->hw.headroom.room_bytes : UINT64_MAX;
}

bool scope_some_total(const struct scope *s, uint64_t *ret) {
        assert(ret);

        if (s->type == SCOPE_NODE || !s->have_psi)
                return false;
        *ret = s->own.line[PSI_SOME].total;
        return true;
}

bool scope_node_pages_short(const struct scope *s, uint64_t *ret) {
        assert(ret);

        const struct node_monitor *nm = nodes_of(s);
        if (s->type != SCOPE_NODE || !nm)
                return false;
        const struct node_sample *n = &nm->cur[s->node_index];
        *ret = n->high_pages > n->free_pages ? n->high_pages - n->free_pages : 0;
        return true;
}

bool scope_rides_node_sample(const struct scope *s) {
        assert(s);

        return s->hw.rides_node_sample;
}

uint64_t scope_anon_bytes(const struct scope *s) {
        assert(s);

        return s->anon_bytes;
}

bool scope_event_counts(const struct scope *s, uint64_t ret[_MEMORY_EVENT_MAX]) {
        if (!s->hw.have_event_counts)
                return false;
        memcpy(ret, s->hw.event_counts, sizeof(s->hw.event_counts));
        return true;
}

void *scope_slot_get(const struct scope *s, int k) {
        assert(s);
        assert(k >= 0 && k < SCOPE_SLOTS_MAX);
        return s->slots[k];
}

void scope_slot_set(struct scope *s, int k, void *value) {
        assert(s);
        assert(k >= 0 && k < SCOPE_SLOTS_MAX);
        s->slots[k] = value;
}

struct scope_id scope_get_id(const struct scope *s) {
        assert(s);

        return (struct scope_id){ .type = s->type, .node = s->type == SCOPE_NODE ? s->node : -1, .cgroup = s->cgroup };
}

void scope_snapshot(const struct scope *s, struct scope_snapshot *ret) {
        assert(s);
        assert(ret);

        const struct node_monitor *nm = s->env->nodes;

        *ret = (struct scope_snapshot){
                .id = scope_get_id(s),
                .level = s->level.level,
                .have_psi = s->type != SCOPE_NODE && s->have_psi,
                .psi = s->psi,
                .have_cgroup_memory = s->type == SCOPE_CGROUP && s->usage_bytes > 0,
                .usage = s->usage_bytes,
                .limit = s->limit_bytes,
                .reclaim_target = s->reclaim_target,
                .since = s->changed_usec,
                .removed = s->gone,
                .source = s->type == SCOPE_NODE ? LEVEL_SOURCE_WATERMARK : s->source,
                .have_headroom = s->hw.watched && s->hw.headroom.limit != UINT64_MAX,
                .headroom_limit = s->hw.headroom.limit,
                .headroom_unreclaimable = (uint64_t) (s->hw.headroom.fraction * (double) s->hw.headroom.limit),
                .headroom_cgroup = s->hw.binding,
                .reason = s->reason,
        };
        if (s->type == SCOPE_NODE && nm) {
                const struct node_sample *n = &nm->cur[s->node_index];
                uint64_t page = (uint64_t) nm->page_size;
                ret->have_node_memory = true;
                ret->node = (struct node_memory){
                        .total = n->mem_total_kb * 1024,
                        .free = n->mem_free_kb * 1024,
                        .watermark_min = n->min_pages * page,
                        .watermark_low = n->low_pages * page,
                        .watermark_high = n->high_pages * page,
                        .numa_foreign = n->numa_foreign,
                        .refault_anon = n->refault_anon,
                        .refault_file = n->refault_file,
                };
        }
}

/* ---- reclaim target ---- */

static void scope_update_target(struct scope *s) {
        const struct node_monitor *nm = s->env->nodes;
        uint64_t page = nm ? (uint64_t) nm->page_size : 4096;
        uint64_t size = 0, excess = 0;

        if (s->type == SCOPE_CGROUP && s->limit_bytes != UINT64_MAX) {
                size = s->limit_bytes;
                excess = s->usage_bytes > s->limit_bytes ? s->usage_bytes - s->limit_bytes : 0;
        } else if (nm) {
                /* A node, or a scope only bounded by the machine: the shortfall below kswapd's goal. */
                for (size_t i = 0; i < nm->n_nodes; i++) {
                        if (s->type == SCOPE_NODE && i != s->node_index)
                                continue;
                        const struct node_sample *n = &nm->cur[i];
                        size += n->mem_total_kb * 1024;
                        if (n->high_pages > n->free_pages)
                                excess += (n->high_pages - n->free_pages) * page;
                }
        }
        /* Raised by headroom: what brings the group that decides back under its low threshold. */
        if (s->source == LEVEL_SOURCE_HEADROOM && s->hw.headroom.limit != UINT64_MAX) {
                size = s->hw.headroom.limit;
                excess = MAX(excess, s->hw.headroom.over_bytes);
        }
        s->reclaim_target = level_reclaim_target(s->level.level, size, excess, s->demand_bytes);
}

/* Growth of anonymous memory per second, from readings at least GROWTH_MIN_USEC apart; none after a
 * gap of more than GROWTH_MAX_USEC (the scope was idle). The first reading is taken when the scope is
 * made: with a window of 5 s the benchmark's cache, growing since its registration, was seen only
 * after its first level change, whose goal was then 1% of the limit (it survived 8 of 16 runs; with
 * 30 s, 7 of 7). */
#define GROWTH_MIN_USEC (200 * 1000)
#define GROWTH_MAX_USEC (30 * 1000 * 1000)
static void scope_read_growth(struct scope *s) {
        uint64_t bytes, now = 0;

        now = event_now(s->env->event);
        if (s->anon_usec > 0 && now - s->anon_usec < GROWTH_MIN_USEC)
                return;
        if (cgroup_anon(s->env->layout, s->cgroup, &bytes) < 0)
                return;
        uint64_t dt = now - s->anon_usec;
        if (s->anon_usec == 0 || dt > GROWTH_MAX_USEC || bytes <= s->anon_bytes)
                s->demand_bytes = s->growth_bytes = 0;
        else {
                s->growth_bytes = bytes - s->anon_bytes;
                s->demand_bytes = mul_div(s->growth_bytes, 1000000, dt);
        }
        s->anon_bytes = bytes;
        s->anon_usec = now;
}

static void scope_read_memory(struct scope *s) {
        if (s->type != SCOPE_CGROUP || !s->env->layout)
                return;
        uint64_t usage, limit;
        if (cgroup_memory(s->env->layout, s->cgroup, &usage, &limit) >= 0) {
                s->usage_bytes = usage;
                s->limit_bytes = limit;
        }
        scope_read_growth(s);
}

/* ---- level changes ---- */

/* Why the scope is at level l: the figures the decision used, worded by level_reason.c. */
static void scope_explain(const struct scope *s, enum level l, char *buf, size_t size) {
        const struct config *c = s->env->config;
        struct level_reason r = { .level = l };

        if (l == LEVEL_OK) {
                buf[0] = 0;
                return;
        }
        if (s->type == SCOPE_NODE && s->env->nodes) {
                struct node_figures f;
                uint64_t page = (uint64_t) nodes_of(s)->page_size;
                node_monitor_figures(s->env->nodes, s->node_index, &f);
                const struct {
                        const char *name;
                        uint64_t pages;
                        double factor;
                } mark[_LEVEL_MAX] = {
                        [LEVEL_LOW] = { "high", f.high_pages, c->node.low_factor },
                        [LEVEL_MEDIUM] = { "low", f.low_pages, c->node.medium_factor },
                        [LEVEL_CRITICAL] = { "min", f.min_pages, c->node.critical_factor },
                };
                r.kind = LEVEL_REASON_WATERMARK;
                r.mark = mark[l].name;
                r.factor = mark[l].factor;
                r.free_bytes = f.free_pages * page;
                r.threshold_bytes = (uint64_t) ((double) mark[l].pages * mark[l].factor) * page;
        } else if (s->source == LEVEL_SOURCE_HEADROOM && s->hw.headroom.limit != UINT64_MAX) {
                r.kind = LEVEL_REASON_HEADROOM;
                r.room = s->hw.headroom.fraction < 1 ? 1 - s->hw.headroom.fraction : 0;
                r.left = s->hw.headroom.left;
                r.limit = s->hw.headroom.limit;
                r.binding = s->hw.binding;
                r.at_left = c->headroom_at.left[l];
                r.at_fraction = c->headroom_at.f[l];
        } else {
                const struct psi_trigger *t = &c->psi.t[l];
                double fraction = 0;
                bool have = !s->first_look && level_samples_fraction(&s->samples, t->kind, t->window_usec, &fraction) >= 0;
                r.psi = t->kind;
                r.stall_usec = t->stall_usec;
                r.window_usec = t->window_usec;
                r.fraction = s->first_look ? s->psi.line[t->kind].avg10 / 100 : fraction;
                r.kind = level_reason_psi_kind(s->first_look, have, l > s->previous, fraction, t->stall_usec, t->window_usec);
        }
        level_reason_format(&r, buf, size);
}

/* psi_raw: the level the scope's own measure shows now (PSI, or a node's watermarks); headroom's is
 * kept beside it, and the higher of the two goes through the hysteresis. */
static void scope_apply(struct scope *s, enum level psi_raw, uint64_t now) {
        enum level old = s->level.level;
        s->psi_raw = psi_raw;
        enum level raw = MAX(psi_raw, s->hw.raw);

        if (!level_update(&s->level, raw, now, config_of(s)->hold_usec)) {
                if (s->level.level != LEVEL_OK)
                        scope_update_target(s);
                return;
        }

        s->previous = old;
        s->changed_usec = now;
        s->source = s->type == SCOPE_NODE ? LEVEL_SOURCE_WATERMARK
                    : s->hw.raw > psi_raw ? LEVEL_SOURCE_HEADROOM
                                                : LEVEL_SOURCE_PRESSURE;
        scope_explain(s, s->level.level, s->reason, sizeof(s->reason));
        scope_update_target(s);

        if (s->announced && s->env->events && events_of(s)->level_changed)
                events_of(s)->level_changed(s, s->env->userdata);
}

/* The headroom was read again: the memory behind the reclaim target and the next look, then the level. */
static struct headroom_pace scope_headroom_looked(struct scope *s, uint64_t now) {
        if (s->type == SCOPE_CGROUP)
                scope_read_memory(s);
        scope_apply(s, s->psi_raw, now);
        return (struct headroom_pace){ .level = s->level.level, .demand_bytes = s->demand_bytes };
}

static int scope_watch_headroom(struct scope *s) {
        const struct headroom_subject subject = {
                .env = s->env,
                .scope = s,
                .type = s->type,
                .cgroup = s->cgroup,
                .name = s->name,
                .owner_uid = s->owner_uid,
        };
        return headroom_watch_start(&s->hw, &subject);
}

void scope_refresh_headroom(struct scope *s) {
        assert(s);

        headroom_watch_refresh(&s->hw);
}

void scope_check_headroom(struct scope *s, uint64_t now) {
        assert(s);

        headroom_watch_check(&s->hw, now);
}

void scope_announce(struct scope *s) {
        if (s->announced)
                return;
        s->announced = true;
        if (s->level.level == LEVEL_OK || !s->env->events)
                return;
        s->previous = LEVEL_OK;
        if (events_of(s)->level_changed)
                events_of(s)->level_changed(s, s->env->userdata);
        if (events_of(s)->triggered)
                events_of(s)->triggered(s, s->env->userdata);
}

/* How long global reclaim counts as news for the stall: the longest window a threshold looks at, and
 * at least 10 s (the kernel's averages move every 2 s, and stall lags the reclaim that causes it). */
static uint64_t shortage_recent_usec(const struct config *c) {
        uint64_t r = 10000000u;
        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                r = MAX(r, c->psi.t[l].window_usec);
        return r;
}

/* Whether the machine as a whole is short: a node below its watermarks, or global reclaim lately. */
static bool scope_machine_short(struct scope *s, uint64_t now) {
        struct scope_env *env = s->env;
        if (env->nodes)
                for (size_t i = 0; i < env->nodes->n_nodes; i++) {
                        struct node_figures f;
                        node_monitor_figures(env->nodes, i, &f);
                        if (level_from_node(&f, &env->config->node) > LEVEL_OK)
                                return true;
                }
        shortage_read(&env->machine, env->config->sysfs_root, now, 500000u);
        return shortage_machine(&env->machine, now, shortage_recent_usec(env->config));
}

/* Whether a limit of the group's own or of an ancestor's is reclaiming: then its stall is its own. Read
 * here, decided by shortage_limit_update(). */
static bool scope_limit_binds_n(struct scope *s, uint64_t now, size_t *ret_n) {
        struct headroom_group groups[HEADROOM_GROUPS_MAX];
        char *paths[HEADROOM_GROUPS_MAX] = {};
        size_t n = 0;
        *ret_n = 0;
        if (!s->env->layout || cgroup_headroom_groups(s->env->layout, s->cgroup, groups, paths, ELEMENTSOF(groups), &n) < 0)
                return true; /* cannot tell: the stall is all there is */
        *ret_n = n;
        struct limit_reading r = { .have_events = n > 0 };
        for (size_t i = 0; i < n; i++) {
                uint64_t e;
                if (cgroup_limit_events(s->env->layout, paths[i], &e) >= 0)
                        r.events = sat_add(r.events, e);
                else
                        r.have_events = false;
                r.near = r.near || shortage_limit_binds(MAX(groups[i].usage, groups[i].peak), groups[i].limit);
                free(paths[i]);
        }
        return shortage_limit_update(&s->limits, &r, now, shortage_recent_usec(config_of(s)), s->first_look);
}

static bool scope_limit_binds(struct scope *s, uint64_t now) {
        size_t n;
        return scope_limit_binds_n(s, now, &n);
}

bool scope_far_below_limits(struct scope *s) {
        assert(s);

        struct headroom_group groups[HEADROOM_GROUPS_MAX];
        char *paths[HEADROOM_GROUPS_MAX] = {};
        size_t n = 0;
        if (s->type != SCOPE_CGROUP || s->gone || !s->env->layout ||
            cgroup_headroom_groups(s->env->layout, s->cgroup, groups, paths, ELEMENTSOF(groups), &n) < 0)
                return false;
        bool far = n > 0;
        for (size_t i = 0; i < n; i++) {
                far = far && groups[i].limit > 0 && groups[i].usage < groups[i].limit / 2;
                free(paths[i]);
        }
        return far;
}

/* A stall counts where the memory it waits for is short: for the system, the machine's; for a cgroup, the
 * machine's or that of a limit on its way to the root. Everyone else's stall shows in the PSI of their
 * ancestors and of the whole machine, and is theirs (docs/levels.md). */
static enum level scope_gate_psi(struct scope *s, enum level raw, uint64_t now) {
        bool node = s->type == SCOPE_NODE;
        /* Read only as far as the decision needs: the machine first, then the limits. */
        bool machine = raw != LEVEL_OK && !node && scope_machine_short(s, now);
        bool limit = raw != LEVEL_OK && !node && !machine && s->type == SCOPE_CGROUP && scope_limit_binds(s, now);
        enum level gated = shortage_gate(raw, node, machine, limit);
        if (gated != raw)
                log_debug("%s: stall at %s counts as nobody's here: the machine is not short%s.", s->name, level_to_string(raw),
                          s->type == SCOPE_CGROUP ? " and no limit on its way up reclaimed lately" : "");
        return gated;
}

bool scope_is_active(const struct scope *s, uint64_t now) {
        if (s->gone)
                return false;
        if (s->level.level != LEVEL_OK || s->hw.raw != LEVEL_OK)
                return true;
        return s->triggered_usec > 0 && now - s->triggered_usec < s->trigger.window_usec + 1000000;
}

static void scope_refresh_psi(struct scope *s) {
        struct psi_stats st;

        if (s->type == SCOPE_NODE || s->gone)
                return;
        int r = s->trigger_fd >= 0 ? psi_read_fd(s->trigger_fd, &st) : psi_read_path(s->pressure_path, &st);
        if (r < 0) {
                if (r == -ENODEV || r == -ENOENT)
                        scope_mark_gone(s);
                return;
        }
        /* Whose stall it is: what the limits of groups below explain is theirs (limit_stall.h). Looked
         * at once per LIMIT_STALL_LOOK_USEC at most: the sampler and the regulator both read. */
        uint64_t now = event_now(s->env->event);
        if (s->explained_usec == 0 || now - s->explained_usec >= LIMIT_STALL_LOOK_USEC) {
                /* The scope's own stall since the last look, the most the groups below can explain. */
                uint64_t dsome = st.line[PSI_SOME].total - MIN(st.line[PSI_SOME].total, s->explained_at.line[PSI_SOME].total);
                uint64_t dfull = st.line[PSI_FULL].total - MIN(st.line[PSI_FULL].total, s->explained_at.line[PSI_FULL].total);
                limit_stall_update(&s->explained, s->env->layout, s->type == SCOPE_SYSTEM ? "/" : s->cgroup, now, dsome,
                                   dfull);
                s->explained_usec = now;
                s->explained_at = st;
        }
        s->psi = st;
        /* As of the last look: between two, the stall that came since is not known to be its own yet. */
        s->own = st;
        for (int k = PSI_SOME; k <= PSI_FULL; k++)
                s->own.line[k].total = s->explained_at.line[k].total - MIN(k == PSI_SOME ? s->explained.some : s->explained.full,
                                                                            s->explained_at.line[k].total);
        s->have_psi = true;
}

void scope_refresh(struct scope *s) {
        scope_refresh_psi(s);
        if (!s->gone)
                scope_read_memory(s);
}

bool scope_read_some_total(struct scope *s, uint64_t *ret) {
        assert(s);
        assert(ret);

        scope_refresh_psi(s);
        return scope_some_total(s, ret);
}

bool scope_stall_is_own(struct scope *s, uint64_t now) {
        assert(s);

        return scope_gate_psi(s, LEVEL_LOW, now) != LEVEL_OK;
}

bool scope_note_limits(struct scope *s, uint64_t now) {
        assert(s);

        size_t n = 0;
        if (s->type == SCOPE_CGROUP && !s->gone)
                (void) scope_limit_binds_n(s, now, &n);
        return n > 0;
}

void scope_refresh_target(struct scope *s) {
        assert(s);

        if (s->gone)
                return;
        scope_read_memory(s);
        scope_update_target(s);
}

void scope_sample(struct scope *s, uint64_t now) {
        if (s->type == SCOPE_NODE) {
                scope_update_node(s, now);
                return;
        }
        scope_refresh_psi(s);
        if (s->gone || !s->have_psi)
                return;

        level_samples_push(&s->samples, now, &s->own);
        enum level raw = level_from_samples(&s->samples, &config_of(s)->psi);
        /* The kernel said the low threshold was crossed within the last window; trust it until the
         * samples cover a window of their own, unless limits below explained stall lately (the trigger
         * counts theirs too). */
        if (raw < LEVEL_LOW && s->triggered_usec > 0 && now - s->triggered_usec <= s->trigger.window_usec &&
            s->explained.last_some == 0)
                raw = LEVEL_LOW;
        scope_apply(s, scope_gate_psi(s, raw, now), now);
        /* After telling subscribers, not before: a change reaches them sooner, and its reclaim target
         * uses the memory figures of the previous sample, which differ little. */
        scope_read_memory(s);

        if (!scope_is_active(s, now))
                level_samples_reset(&s->samples); /* idle again: the next wake-up starts afresh */
}

void scope_update_node(struct scope *s, uint64_t now) {
        struct node_figures f;
        if (!s->env->nodes)
                return;
        node_monitor_figures(s->env->nodes, s->node_index, &f);
        scope_apply(s, level_from_node(&f, &config_of(s)->node), now);
}

void scope_feed_level(struct scope *s, enum level raw, uint64_t now) {
        if (!s->gone)
                scope_apply(s, raw, now);
}

void scope_mark_gone(struct scope *s) {
        if (s->gone)
                return;
        s->gone = true;
        log_client(s->owner_uid, LOG_INFO, "%s: cgroup was removed, no longer watching it.", s->name);
        s->trigger_source = sd_event_source_disable_unref(s->trigger_source);
        if (s->trigger_fd >= 0) {
                close(s->trigger_fd);
                s->trigger_fd = -EBADF;
        }
        headroom_watch_gone(&s->hw);
        if (s->env->events && events_of(s)->gone)
                events_of(s)->gone(s, s->env->userdata);
}

/* ---- triggers ---- */

static int on_trigger(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct scope *s = userdata;
        (void) src;
        (void) fd;

        if (revents & (EPOLLERR | EPOLLHUP)) {
                /* The cgroup was removed (or PSI switched off under us). */
                scope_mark_gone(s);
                return 0;
        }
        if (revents & EPOLLPRI) {
                uint64_t now = event_now(s->env->event);
                log_debug("%s: PSI trigger fired.", s->name);
                s->triggered_usec = now;
                scope_sample(s, now);
                if (!s->gone && s->env->events && events_of(s)->triggered)
                        events_of(s)->triggered(s, s->env->userdata);
        }
        return 0;
}

/* Say once which kind of windows the kernel takes from us. */
static void scope_log_windows(struct scope_env *env, const struct psi_trigger *want, const struct psi_trigger *used) {
        if (env->psi.logged)
                return;
        env->psi.logged = true;
        if (env->psi.unprivileged)
                log_notice("The kernel refused a PSI window of %llu ms (no CAP_SYS_RESOURCE?); using %s %llu ms per "
                           "%llu ms windows instead, evaluated every 2 s.",
                           (unsigned long long) (want->window_usec / 1000), psi_kind_to_string(used->kind),
                           (unsigned long long) (used->stall_usec / 1000),
                           (unsigned long long) (used->window_usec / 1000));
        else
                /* Only a window that is not a multiple of 2 s tells whether the kernel takes such windows
                 * from this process; a configured 2 s window says nothing about it. */
                log_info("PSI triggers armed as configured: %s %llu ms per %llu ms window%s.",
                         psi_kind_to_string(used->kind), (unsigned long long) (used->stall_usec / 1000),
                         (unsigned long long) (used->window_usec / 1000),
                         used->window_usec % 2000000 != 0 ? " (the kernel accepts windows that are not multiples "
                                                            "of 2 s from this process)"
                                                          : "");
}

static int scope_arm(struct scope *s) {
        struct scope_env *env = s->env;
        const struct psi_trigger *want = &env->config->psi.t[LEVEL_LOW];
        bool was_unpriv = env->psi.unprivileged;
        int r;

        r = psi_trigger_open(s->pressure_path, want, &env->psi.unprivileged, &s->trigger);
        if (r < 0)
                return r;
        s->trigger_fd = r;
        if (env->psi.unprivileged && !was_unpriv)
                env->psi.logged = false; /* the notice about refused windows outranks the earlier line */
        scope_log_windows(env, want, &s->trigger);

        r = sd_event_add_io(env->event, &s->trigger_source, s->trigger_fd, EPOLLPRI, on_trigger, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->trigger_source, "psi-trigger");
        scope_refresh_psi(s);
        return 0;
}

int scope_rearm(struct scope *s) {
        if (s->type == SCOPE_NODE || s->gone)
                return 0;
        /* The new trigger first (another open file may hold one): if it fails, the old one stays and
         * the scope is still watched. */
        sd_event_source *old_source = TAKE_PTR(s->trigger_source);
        struct psi_trigger old_trigger = s->trigger;
        int old_fd = TAKE_FD(s->trigger_fd);
        int r = scope_arm(s);
        if (r < 0) {
                s->trigger_source = sd_event_source_disable_unref(s->trigger_source);
                if (s->trigger_fd >= 0)
                        close(s->trigger_fd);
                s->trigger_source = old_source;
                s->trigger_fd = old_fd;
                s->trigger = old_trigger;
                return r;
        }
        sd_event_source_disable_unref(old_source);
        if (old_fd >= 0)
                close(old_fd);
        return 0;
}

/* A group that has been stalling before anyone watched it is not ok: until samples of its own cover a
 * window, its level comes from the kernel's 10 s averages (and falls, as any level, only after the hold
 * time below it). Without this, "pressurectl status" of an unwatched group showed ok at 25% stall. */
static void scope_first_look(struct scope *s) {
        scope_refresh_psi(s);
        if (s->gone || !s->have_psi)
                return;
        uint64_t now = event_now(s->env->event);
        s->first_look = true;
        scope_apply(s, scope_gate_psi(s, level_from_averages(&s->psi, &config_of(s)->psi), now), now);
        s->first_look = false;
}

struct scope *scope_ref(struct scope *s) {
        assert(s);

        s->n_refs++;
        return s;
}

bool scope_is_held(const struct scope *s) {
        assert(s);

        return s->n_refs > 0;
}

bool scope_unref(struct scope *s) {
        assert(s);
        assert(s->n_refs > 0);

        return --s->n_refs == 0;
}

int scope_new_system(struct scope_env *env, struct scope **ret) {
        assert(env);

        _cleanup_(scope_freep) struct scope *s = scope_alloc(env, SCOPE_SYSTEM);
        int r;

        if (!s || !(s->name = strdup("system")))
                return -ENOMEM;
        /* Always a live file: a trigger cannot be armed on a fixture. */
        if (!(s->pressure_path = strdup(env->system_pressure_path ? env->system_pressure_path : "/proc/pressure/memory")))
                return -ENOMEM;
        r = scope_arm(s);
        if (r < 0)
                return r;
        r = scope_watch_headroom(s);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int scope_new_node(struct scope_env *env, size_t node_index, struct scope **ret) {
        assert(env->nodes && node_index < env->nodes->n_nodes);
        struct scope *s = scope_alloc(env, SCOPE_NODE);
        if (!s)
                return -ENOMEM;
        s->node_index = node_index;
        s->node = env->nodes->cur[node_index].id;
        if (asprintf(&s->name, "node:%d", s->node) < 0) {
                s->name = NULL;
                scope_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

static int cgroup_ino(const struct scope_env *env, const char *cgroup, uint64_t *ret, uid_t *ret_owner) {
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        if (cgroup_file_path(env->layout, cgroup, ".", &dir) < 0)
                return -ENOMEM;
        if (stat(dir, &st) < 0)
                return -errno;
        *ret = (uint64_t) st.st_ino;
        if (ret_owner)
                *ret_owner = st.st_uid;
        return 0;
}

bool scope_is_current(const struct scope *s) {
        assert(s);

        uint64_t ino;
        if (s->type != SCOPE_CGROUP)
                return true;
        if (s->gone)
                return false;
        int r = cgroup_ino(s->env, s->cgroup, &ino, NULL);
        return r == -ENOMEM || (r >= 0 && ino == s->cgroup_ino);
}

int scope_new_cgroup(struct scope_env *env, const char *cgroup, struct scope **ret) {
        if (!env->layout)
                return -ENOENT;
        _cleanup_(scope_freep) struct scope *s = scope_alloc(env, SCOPE_CGROUP);
        int r;

        if (!s || !(s->cgroup = strdup(cgroup)) || !(s->name = strdup(cgroup)))
                return -ENOMEM;
        r = cgroup_file_path(env->layout, cgroup, "memory.pressure", &s->pressure_path);
        if (r < 0)
                return r;
        r = cgroup_ino(env, cgroup, &s->cgroup_ino, &s->owner_uid);
        if (r == -ENOENT || r == -ENOTDIR)
                return -ENOENT;
        if (r < 0)
                return r;
        r = scope_arm(s);
        if (r == -ENOENT || r == -ENOTDIR)
                return -ENOENT;
        if (r < 0)
                return r;
        scope_read_memory(s);
        r = scope_watch_headroom(s);
        if (r < 0)
                return r;
        scope_first_look(s);
        *ret = TAKE_PTR(s);
        return 0;
}
