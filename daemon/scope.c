/* SPDX-License-Identifier: MIT */
#include "scope.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "reclaim.h"
#include "subscription.h"

static struct scope *scope_alloc(struct manager *m, enum scope_type type) {
        struct scope *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->manager = m;
        s->type = type;
        s->trigger_fd = -EBADF;
        s->limit_bytes = UINT64_MAX;
        return s;
}

struct scope *scope_free(struct scope *s) {
        if (!s)
                return NULL;
        reclaim_scope_free(s);
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

static uint64_t now_usec(struct manager *m) {
        uint64_t t = 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &t);
        return t;
}

/* ---- reclaim target ---- */

static void scope_update_target(struct scope *s) {
        struct manager *m = s->manager;
        struct node_monitor *nm = m->nodes;
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
        s->reclaim_target = level_reclaim_target(s->level.level, size, excess);
}

static void scope_read_memory(struct scope *s) {
        if (s->type != SCOPE_CGROUP || !s->manager->have_layout)
                return;
        uint64_t usage, limit;
        if (cgroup_memory(&s->manager->layout, s->cgroup, &usage, &limit) >= 0) {
                s->usage_bytes = usage;
                s->limit_bytes = limit;
        }
}

/* ---- level changes ---- */

static void scope_apply(struct scope *s, enum level raw, uint64_t now) {
        enum level old = s->level.level;

        if (!level_update(&s->level, raw, now, s->manager->config.hold_usec)) {
                if (s->level.level != LEVEL_OK)
                        scope_update_target(s);
                return;
        }

        s->previous = old;
        s->changed_usec = now;
        scope_update_target(s);

        /* Subscribers first: they are what the latency of an event is measured by; logging can wait. */
        subscription_scope_changed(s);
        char f_level[32], f_prev[32], f_target[48];
        snprintf(f_level, sizeof(f_level), "PRESSURED_LEVEL=%s", level_to_string(s->level.level));
        snprintf(f_prev, sizeof(f_prev), "PRESSURED_PREVIOUS_LEVEL=%s", level_to_string(old));
        snprintf(f_target, sizeof(f_target), "PRESSURED_RECLAIM_TARGET=%llu", (unsigned long long) s->reclaim_target);
        const char *const fields[] = { f_level, f_prev, f_target, NULL };
        log_struct(s->level.level > old ? LOG_NOTICE : LOG_INFO, PRESSURED_MESSAGE_LEVEL_CHANGE, s->name, fields,
                   "%s: memory pressure %s -> %s (some avg10=%.2f full avg10=%.2f), reclaim target %llu bytes",
                   s->name, level_to_string(old), level_to_string(s->level.level), s->psi.line[PSI_SOME].avg10,
                   s->psi.line[PSI_FULL].avg10, (unsigned long long) s->reclaim_target);
        if (s->type == SCOPE_SYSTEM)
                manager_notify_status(s->manager);

        reclaim_scope_changed(s);
}

bool scope_is_active(const struct scope *s, uint64_t now) {
        if (s->gone)
                return false;
        if (s->level.level != LEVEL_OK)
                return true;
        return s->triggered_usec > 0 && now - s->triggered_usec < s->trigger.window_usec + 1000000;
}

void scope_refresh_psi(struct scope *s) {
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

void scope_sample(struct scope *s, uint64_t now) {
        if (s->type == SCOPE_NODE) {
                scope_update_node(s, now);
                return;
        }
        scope_refresh_psi(s);
        if (s->gone || !s->have_psi)
                return;

        level_samples_push(&s->samples, now, &s->psi);
        enum level raw = level_from_samples(&s->samples, &s->manager->config.psi);
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
        node_monitor_figures(s->manager->nodes, s->node_index, &f);
        scope_apply(s, level_from_node(&f, &s->manager->config.node), now);
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
        reclaim_scope_free(s);
        subscription_scope_gone(s);
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
                uint64_t now = now_usec(s->manager);
                log_debug("%s: PSI trigger fired.", s->name);
                s->triggered_usec = now;
                scope_sample(s, now);
                manager_schedule_sampling(s->manager);
        }
        return 0;
}

static int scope_arm(struct scope *s) {
        struct manager *m = s->manager;
        const struct psi_trigger *want = &m->config.psi.t[LEVEL_LOW];
        bool was_unpriv = m->psi_unprivileged;
        int r;

        r = psi_trigger_open(s->pressure_path, want, &m->psi_unprivileged, &s->trigger);
        if (r < 0)
                return r;
        s->trigger_fd = r;
        if (m->psi_unprivileged && !was_unpriv)
                manager_note_window_adjust(m, want, &s->trigger);
        else if (!m->psi_unprivileged && !m->window_adjust_logged) {
                /* Say once which kind of windows the kernel takes from us. */
                m->window_adjust_logged = true;
                log_info("PSI triggers armed as configured: %s %llu ms per %llu ms window (the kernel accepts "
                         "windows that are not multiples of 2 s from this process).",
                         psi_kind_to_string(s->trigger.kind), (unsigned long long) (s->trigger.stall_usec / 1000),
                         (unsigned long long) (s->trigger.window_usec / 1000));
        }

        r = sd_event_add_io(m->event, &s->trigger_source, s->trigger_fd, EPOLLPRI, on_trigger, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->trigger_source, "psi-trigger");
        scope_refresh_psi(s);
        return 0;
}

int scope_rearm(struct scope *s) {
        if (s->type == SCOPE_NODE || s->gone)
                return 0;
        s->trigger_source = sd_event_source_disable_unref(s->trigger_source);
        if (s->trigger_fd >= 0)
                close(s->trigger_fd);
        s->trigger_fd = -EBADF;
        return scope_arm(s);
}

int scope_new_system(struct manager *m, struct scope **ret) {
        _cleanup_(scope_freep) struct scope *s = scope_alloc(m, SCOPE_SYSTEM);
        int r;

        if (!s || !(s->name = strdup("system")))
                return -ENOMEM;
        /* Always the live file: a trigger cannot be armed on a fixture. */
        if (!(s->pressure_path = strdup("/proc/pressure/memory")))
                return -ENOMEM;
        r = scope_arm(s);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int scope_new_node(struct manager *m, size_t node_index, struct scope **ret) {
        struct scope *s = scope_alloc(m, SCOPE_NODE);
        if (!s)
                return -ENOMEM;
        s->node_index = node_index;
        s->node = m->nodes->cur[node_index].id;
        if (asprintf(&s->name, "node:%d", s->node) < 0) {
                s->name = NULL;
                scope_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

int scope_new_cgroup(struct manager *m, const char *cgroup, struct scope **ret) {
        _cleanup_(scope_freep) struct scope *s = scope_alloc(m, SCOPE_CGROUP);
        int r;

        if (!s || !(s->cgroup = strdup(cgroup)) || !(s->name = strdup(cgroup)))
                return -ENOMEM;
        r = cgroup_file_path(&m->layout, cgroup, "memory.pressure", &s->pressure_path);
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
