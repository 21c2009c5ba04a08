/* SPDX-License-Identifier: MIT */
#include "scope_registry.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "log.h"
#include "macro.h"

/* ---- what scopes report, passed on in observer order ---- */

static void on_level_changed(struct scope *s, void *userdata) {
        struct scope_registry *reg = userdata;
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->level_changed)
                        reg->observers[i].ops->level_changed(s, reg->observers[i].userdata);
}

static void on_gone(struct scope *s, void *userdata) {
        struct scope_registry *reg = userdata;

        hashmap_remove_string(reg->by_cgroup, scope_cgroup(s));
        /* Observers let go of the scope as they are told: keep it alive until all are. */
        scope_ref(s);
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->gone)
                        reg->observers[i].ops->gone(s, reg->observers[i].userdata);
        scope_registry_release(reg, s);
}

static void on_triggered(struct scope *s, void *userdata) {
        struct scope_registry *reg = userdata;
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->became_active)
                        reg->observers[i].ops->became_active(s, reg->observers[i].userdata);
}

static void on_memory_event(struct scope *s, enum memory_event e, uint64_t count, void *userdata) {
        struct scope_registry *reg = userdata;
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->memory_event)
                        reg->observers[i].ops->memory_event(s, e, count, reg->observers[i].userdata);
}

static const struct scope_events registry_events = {
        .level_changed = on_level_changed,
        .gone = on_gone,
        .triggered = on_triggered,
        .memory_event = on_memory_event,
};

static void registry_free_scope(struct scope_registry *reg, struct scope *s) {
        if (!s)
                return;
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->freed)
                        reg->observers[i].ops->freed(s, reg->observers[i].userdata);
        scope_free(s);
}

/* ---- life cycle ---- */

/* Scopes are freed from the loop, never inside the call that dropped the last reference: a trigger's
 * POLLERR or a status read may find a cgroup gone while someone up the stack still holds the scope. */
static int on_gc(sd_event_source *src, void *userdata) {
        struct scope_registry *reg = userdata;
        (void) src;

        for (struct registry_entry *e = reg->cgroups, *next; e; e = next) {
                next = e->next;
                struct scope *s = e->scope;
                if (scope_is_held(s))
                        continue;
                LIST_REMOVE(reg->cgroups, e);
                hashmap_remove_u64(reg->entries, (uintptr_t) s);
                free(e);
                reg->n_cgroups--;
                if (!scope_is_gone(s))
                        hashmap_remove_string(reg->by_cgroup, scope_cgroup(s));
                log_debug("No longer watching cgroup %s.", scope_name(s));
                registry_free_scope(reg, s);
        }
        return 0;
}

int scope_registry_new(sd_event *event, const struct config *config, const struct cgroup_layout *layout,
                       const struct node_monitor *nodes, struct scope_registry **ret) {
        assert(event);

        struct scope_registry *reg = calloc(1, sizeof(*reg));
        int r;

        if (!reg)
                return -ENOMEM;
        reg->env = (struct scope_env){
                .event = event,
                .config = config,
                .layout = layout,
                .nodes = nodes,
                .oom_lookups = { .interval_usec = OOM_LOOKUP_INTERVAL_USEC, .burst = 1 },
                .events = &registry_events,
                .userdata = reg,
        };
        r = hashmap_new(HASHMAP_KEY_STRING, &reg->by_cgroup);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &reg->held_per_uid);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &reg->entries);
        if (r >= 0)
                r = sd_event_add_defer(event, &reg->gc_source, on_gc, reg);
        if (r < 0) {
                scope_registry_free(reg);
                return r;
        }
        (void) sd_event_source_set_enabled(reg->gc_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(reg->gc_source, "scope-gc");
        *ret = reg;
        return 0;
}

struct scope_registry *scope_registry_free(struct scope_registry *reg) {
        if (!reg)
                return NULL;
        while (reg->cgroups) {
                struct registry_entry *e = reg->cgroups;
                reg->cgroups = e->next;
                registry_free_scope(reg, e->scope);
                free(e);
        }
        for (size_t i = 0; i < reg->n_nodes; i++)
                registry_free_scope(reg, reg->nodes[i]);
        free(reg->nodes);
        registry_free_scope(reg, reg->system);
        free(reg->configured);
        hashmap_free(reg->by_cgroup);
        hashmap_free(reg->held_per_uid);
        hashmap_free(reg->entries);
        sd_event_source_disable_unref(reg->gc_source);
        free(reg);
        return NULL;
}

int scope_registry_add_observer(struct scope_registry *reg, const struct scope_observer *ops, void *userdata) {
        assert(reg);

        if (reg->n_observers >= SCOPE_SLOTS_MAX)
                return -ENOSPC;
        reg->observers[reg->n_observers].ops = ops;
        reg->observers[reg->n_observers].userdata = userdata;
        return (int) reg->n_observers++;
}

static int registry_add_nodes(struct scope_registry *reg, const struct node_monitor *nm);

void scope_registry_set_system_pressure(struct scope_registry *reg, const char *path) {
        assert(reg);
        assert(!reg->system);

        reg->env.system_pressure_path = path;
}

int scope_registry_start(struct scope_registry *reg) {
        const struct node_monitor *nm = reg->env.nodes;
        int r;

        assert(!reg->system);
        r = scope_new_system(&reg->env, &reg->system);
        if (r < 0)
                return r;

        if (nm)
                r = registry_add_nodes(reg, nm);
        /* Only now may observers hear of them: they find the system and the nodes where they look. */
        for (size_t i = 0; i < reg->n_nodes; i++)
                scope_announce(reg->nodes[i]);
        scope_announce(reg->system);
        return r;
}

static int registry_add_nodes(struct scope_registry *reg, const struct node_monitor *nm) {
        int r;

        reg->nodes = calloc(MAX(nm->n_nodes, 1u), sizeof(struct scope *));
        if (!reg->nodes)
                return -ENOMEM;
        for (; reg->n_nodes < nm->n_nodes; reg->n_nodes++) {
                r = scope_new_node(&reg->env, reg->n_nodes, &reg->nodes[reg->n_nodes]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- references ---- */

void scope_registry_release(struct scope_registry *reg, struct scope *s) {
        assert(reg);

        if (!s)
                return;
        if (scope_unref(s) && scope_get_type(s) == SCOPE_CGROUP)
                (void) sd_event_source_set_enabled(reg->gc_source, SD_EVENT_ONESHOT);
}

struct scope *scope_registry_find_node(const struct scope_registry *reg, int node) {
        assert(reg);

        for (size_t i = 0; i < reg->n_nodes; i++)
                if (scope_get_id(reg->nodes[i]).node == node)
                        return reg->nodes[i];
        return NULL;
}

struct scope *scope_registry_find_cgroup(const struct scope_registry *reg, const char *path) {
        assert(reg);

        return hashmap_get_string(reg->by_cgroup, path);
}

static int acquire_cgroup(struct scope_registry *reg, const char *path, struct scope **ret) {
        _cleanup_free_ char *p = NULL;
        struct scope *s;
        int r;

        r = cgroup_path_normalize(path, &p);
        if (r < 0)
                return r;
        s = hashmap_get_string(reg->by_cgroup, p);
        /* The group may have been removed and made again since (systemd does that on every restart of a
         * service) without its removal seen yet: that scope watches nothing any more. */
        if (s && !scope_is_current(s))
                scope_mark_gone(s); /* out of by_cgroup, its watchers told */
        else if (s) {
                *ret = scope_ref(s);
                return 0;
        }

        r = scope_new_cgroup(&reg->env, p, &s);
        if (r < 0)
                return r;
        struct registry_entry *e = calloc(1, sizeof(*e));
        if (!e) {
                scope_free(s);
                return -ENOMEM;
        }
        e->scope = s;
        r = hashmap_put_u64(reg->entries, (uintptr_t) s, e);
        if (r >= 0) {
                r = hashmap_put_string(reg->by_cgroup, scope_cgroup(s), s);
                if (r < 0)
                        hashmap_remove_u64(reg->entries, (uintptr_t) s);
        }
        if (r < 0) {
                free(e);
                scope_free(s);
                return r;
        }
        LIST_PREPEND(reg->cgroups, e);
        reg->n_cgroups++;
        log_debug("Watching cgroup %s.", p);
        scope_announce(s);
        *ret = s;
        return 0;
}

int scope_registry_acquire(struct scope_registry *reg, const struct scope_id *id, struct scope **ret) {
        assert(reg);

        struct scope *s;

        switch (id->type) {
        case SCOPE_SYSTEM:
                *ret = scope_ref(reg->system);
                return 0;
        case SCOPE_NODE:
                s = scope_registry_find_node(reg, id->node);
                if (!s)
                        return -ENXIO;
                *ret = scope_ref(s);
                return 0;
        case SCOPE_CGROUP:
                return acquire_cgroup(reg, id->cgroup, ret);
        default:
                return -EINVAL;
        }
}

size_t scope_registry_held_by(const struct scope_registry *reg, uid_t uid) {
        assert(reg);

        return hashmap_count_get_u64(reg->held_per_uid, uid);
}

size_t scope_registry_budget_left(const struct scope_registry *reg, uid_t uid) {
        assert(reg);

        if (uid == 0)
                return SIZE_MAX;
        const struct config *c = reg->env.config;
        size_t held = scope_registry_held_by(reg, uid), max = c->max_cgroups_per_uid;
        size_t own = held < max ? max - held : 0;
        size_t all = reg->held_by_users < c->max_cgroups_users ? c->max_cgroups_users - reg->held_by_users : 0;
        return MIN(own, all);
}

int scope_registry_acquire_for(struct scope_registry *reg, uid_t uid, const struct scope_id *id, struct scope **ret) {
        assert(reg);

        bool counted = id->type == SCOPE_CGROUP && uid != 0;
        if (counted && scope_registry_budget_left(reg, uid) == 0)
                return -EDQUOT;
        int r = scope_registry_acquire(reg, id, ret);
        if (r < 0 || !counted)
                return r;
        r = hashmap_count_add_u64(reg->held_per_uid, uid, +1);
        if (r < 0) {
                scope_registry_release(reg, *ret);
                *ret = NULL;
                return r;
        }
        reg->held_by_users++;
        return 0;
}

void scope_registry_release_for(struct scope_registry *reg, uid_t uid, struct scope *s) {
        assert(reg);

        if (!s)
                return;
        if (scope_get_type(s) == SCOPE_CGROUP && uid != 0) {
                (void) hashmap_count_add_u64(reg->held_per_uid, uid, -1);
                if (reg->held_by_users > 0)
                        reg->held_by_users--;
        }
        scope_registry_release(reg, s);
}

void scope_registry_watch_configured(struct scope_registry *reg) {
        assert(reg);

        const struct config *c = reg->env.config;
        struct scope **list = calloc(MAX(c->n_cgroups, 1u), sizeof(struct scope *));
        size_t n = 0;

        if (!list) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < c->n_cgroups; i++) {
                struct scope_id id = { .type = SCOPE_CGROUP, .cgroup = c->cgroups[i] };
                int r = scope_registry_acquire(reg, &id, &list[n]);
                if (r == -ENOENT && reg->env.layout)
                        log_warning("Cannot watch configured cgroup %s: there is no %s%s (cgroup paths are relative to "
                                    "the cgroup v2 mount), ignoring.",
                                    c->cgroups[i], reg->env.layout->v2_root, c->cgroups[i]);
                else if (r < 0)
                        log_warning_errno(r, "Cannot watch configured cgroup %s, ignoring: %m", c->cgroups[i]);
                else
                        n++;
        }
        for (size_t i = 0; i < reg->n_configured; i++)
                scope_registry_release(reg, reg->configured[i]);
        free(reg->configured);
        reg->configured = list;
        reg->n_configured = n;
}

/* ---- iteration ---- */

struct scope *scope_registry_next(const struct scope_registry *reg, const struct scope *prev) {
        assert(reg);

        if (!prev)
                return reg->system;
        enum scope_type type = scope_get_type(prev);
        if (type == SCOPE_CGROUP)
                return scope_registry_next_cgroup(reg, prev);
        size_t i = type == SCOPE_NODE ? scope_node_index(prev) + 1 : 0;
        return i < reg->n_nodes ? reg->nodes[i] : scope_registry_next_cgroup(reg, NULL);
}

struct scope *scope_registry_next_cgroup(const struct scope_registry *reg, const struct scope *prev) {
        assert(reg);

        const struct registry_entry *e = prev ? hashmap_get_u64(reg->entries, (uintptr_t) prev) : NULL;
        assert(!prev || e); /* a cgroup scope of this registry's */
        const struct registry_entry *next = e ? e->next : reg->cgroups;
        return next ? next->scope : NULL;
}

void scope_registry_rearm(struct scope_registry *reg) {
        assert(reg);

        SCOPE_REGISTRY_FOREACH(s, reg) {
                int r = scope_rearm(s);
                if (r < 0)
                        log_warning_errno(r, "Failed to re-arm the trigger of %s: %m", scope_name(s));
        }
}

struct scope *scope_registry_system(const struct scope_registry *reg) {
        assert(reg);

        return reg->system;
}

const struct config *scope_registry_config(const struct scope_registry *reg) {
        assert(reg);

        return reg->env.config;
}

const struct cgroup_layout *scope_registry_layout(const struct scope_registry *reg) {
        assert(reg);

        return reg->env.layout;
}

size_t scope_registry_n_cgroups(const struct scope_registry *reg) {
        assert(reg);

        return reg->n_cgroups;
}
