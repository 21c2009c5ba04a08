/* SPDX-License-Identifier: MIT */
#include "scope.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"

static struct scope *scope_alloc(struct scope_env *env, enum scope_type type) {
        struct scope *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->env = env;
        s->type = type;
        s->trigger_fd = -EBADF;
        s->limit_bytes = UINT64_MAX;
        return s;
}

struct scope *scope_free(struct scope *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->trigger_source);
        if (s->trigger_fd >= 0)
                close(s->trigger_fd);
        free(s->pressure_path);
        free(s->cgroup);
        free(s->name);
        free(s);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct scope *, scope_free);

static uint64_t now_usec(const struct scope *s) {
        uint64_t t = 0;
        (void) sd_event_now(s->env->event, CLOCK_MONOTONIC, &t);
        return t;
}

struct scope_id scope_get_id(const struct scope *s) {
        return (struct scope_id){ .type = s->type, .node = s->type == SCOPE_NODE ? s->node : -1, .cgroup = s->cgroup };
}

void scope_snapshot(const struct scope *s, struct scope_snapshot *ret) {
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

        (void) sd_event_now(s->env->event, CLOCK_MONOTONIC, &now);
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

static void scope_apply(struct scope *s, enum level raw, uint64_t now) {
        enum level old = s->level.level;

        if (!level_update(&s->level, raw, now, s->env->config->hold_usec)) {
                if (s->level.level != LEVEL_OK)
                        scope_update_target(s);
                return;
        }

        s->previous = old;
        s->changed_usec = now;
        scope_update_target(s);

        if (s->env->events && s->env->events->level_changed)
                s->env->events->level_changed(s, s->env->userdata);
}

bool scope_is_active(const struct scope *s, uint64_t now) {
        if (s->gone)
                return false;
        if (s->level.level != LEVEL_OK)
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
        s->psi = st;
        s->have_psi = true;
}

void scope_refresh(struct scope *s) {
        scope_refresh_psi(s);
        if (!s->gone)
                scope_read_memory(s);
}

void scope_refresh_target(struct scope *s) {
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

        level_samples_push(&s->samples, now, &s->psi);
        enum level raw = level_from_samples(&s->samples, &s->env->config->psi);
        /* The kernel said the low threshold was crossed within the last window; trust it until the
         * samples cover a window of their own. */
        if (raw < LEVEL_LOW && s->triggered_usec > 0 && now - s->triggered_usec <= s->trigger.window_usec)
                raw = LEVEL_LOW;
        scope_apply(s, raw, now);
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
        scope_apply(s, level_from_node(&f, &s->env->config->node), now);
}

void scope_feed_level(struct scope *s, enum level raw, uint64_t now) {
        if (!s->gone)
                scope_apply(s, raw, now);
}

void scope_mark_gone(struct scope *s) {
        if (s->gone)
                return;
        s->gone = true;
        log_info("%s: cgroup was removed, no longer watching it.", s->name);
        s->trigger_source = sd_event_source_disable_unref(s->trigger_source);
        if (s->trigger_fd >= 0) {
                close(s->trigger_fd);
                s->trigger_fd = -EBADF;
        }
        if (s->env->events && s->env->events->gone)
                s->env->events->gone(s, s->env->userdata);
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
                uint64_t now = now_usec(s);
                log_debug("%s: PSI trigger fired.", s->name);
                s->triggered_usec = now;
                scope_sample(s, now);
                if (!s->gone && s->env->events && s->env->events->triggered)
                        s->env->events->triggered(s, s->env->userdata);
        }
        return 0;
}

/* Say once which kind of windows the kernel takes from us. */
static void scope_log_windows(struct scope_env *env, const struct psi_trigger *want, const struct psi_trigger *used) {
        if (env->psi_logged)
                return;
        env->psi_logged = true;
        if (env->psi_unprivileged)
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
        bool was_unpriv = env->psi_unprivileged;
        int r;

        r = psi_trigger_open(s->pressure_path, want, &env->psi_unprivileged, &s->trigger);
        if (r < 0)
                return r;
        s->trigger_fd = r;
        if (env->psi_unprivileged && !was_unpriv)
                env->psi_logged = false; /* the notice about refused windows outranks the earlier line */
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

int scope_new_system(struct scope_env *env, struct scope **ret) {
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
        r = scope_arm(s);
        if (r == -ENOENT || r == -ENOTDIR)
                return -ENOENT;
        if (r < 0)
                return r;
        scope_read_memory(s);
        *ret = TAKE_PTR(s);
        return 0;
}
