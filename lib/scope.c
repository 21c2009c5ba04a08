/* SPDX-License-Identifier: MIT */
/* Replies of the daemon as scopes and statuses: parsing and the accessors. No I/O, no state. */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "macro.h"
#include "protocol.h"

#define get json_get

struct pressure_status {
        int n_ref;
        struct json_object *reply;
        struct pressure_scope system;
        struct pressure_scope *nodes, *cgroups;
        size_t n_nodes, n_cgroups;
};

/* Statuses are handed to whoever asked and may go to another thread: atomic references. */
/* ---- small helpers ---- */

static const char *const level_names[] = { "ok", "low", "medium", "critical" };

EXPORT const char *pressure_level_to_string(enum pressure_level level) {
        return (int) level >= 0 && (size_t) level < ELEMENTSOF(level_names) ? level_names[level] : NULL;
}

EXPORT int pressure_level_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(level_names); i++)
                if (streq(s, level_names[i]))
                        return (int) i;
        return -EINVAL;
}

EXPORT int pressure_default_socket_path(char **ret) {
        /* A set-uid program must not be pointed at another socket by whoever runs it. */
        const char *env = secure_getenv("PRESSURED_SOCKET");
        char *p = NULL;

        if (!ret)
                return -EINVAL;
        const char *rt = secure_getenv("XDG_RUNTIME_DIR");
        if (env && env[0] == '/')
                p = strdup(env);
        else if (geteuid() != 0 && rt && rt[0] == '/') {
                /* A user's own daemon where one listens, the system's otherwise. */
                if (asprintf(&p, "%s/pressured/io.pressured", rt) < 0)
                        p = NULL;
                else if (access(p, F_OK) < 0) {
                        free(p);
                        p = strdup("/run/pressured/io.pressured");
                }
        } else
                p = strdup("/run/pressured/io.pressured");
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}


int reply_to_errno(struct json_object *reply) {
        struct json_object *e;
        if (!json_object_object_get_ex(reply, "error", &e))
                return 0;
        const char *name = json_object_get_string(e);
        if (!name)
                return -EPROTO;
        if (streq(name, "io.pressured.NoSuchCgroup"))
                return -ENOENT;
        if (streq(name, "io.pressured.NoSuchNode"))
                return -ENXIO;
        if (streq(name, "io.pressured.CgroupNotWatchable"))
                return -EACCES;
        if (streq(name, "org.varlink.service.InvalidParameter"))
                return -EINVAL;
        if (streq(name, "org.varlink.service.PermissionDenied"))
                return -EPERM;
        if (streq(name, "io.pressured.NoSuchShrinker"))
                return -ENOENT;
        if (streq(name, "io.pressured.ScopeRemoved") || streq(name, "io.pressured.ShuttingDown"))
                return -ECONNRESET;
        if (streq(name, "org.varlink.service.MethodNotFound") || streq(name, "org.varlink.service.InterfaceNotFound"))
                return -EOPNOTSUPP;
        return -EPROTO;
}

/* ---- parsing replies ---- */

struct json_object *json_get(struct json_object *o, const char *key) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The codec's enums and the public ones are the same values in the same order. */
_Static_assert((int) PRESSURE_LEVEL_OK == (int) LEVEL_OK && (int) PRESSURE_LEVEL_CRITICAL == (int) LEVEL_CRITICAL,
               "levels differ");
_Static_assert((int) PRESSURE_STALL_SOME == (int) PSI_SOME && (int) PRESSURE_STALL_FULL == (int) PSI_FULL,
               "stall kinds differ");

static enum pressure_scope_type scope_type_public(enum scope_type t) {
        return t == SCOPE_CGROUP ? PRESSURE_SCOPE_CGROUP : t == SCOPE_NODE ? PRESSURE_SCOPE_NODE : PRESSURE_SCOPE_SYSTEM;
}

static void stall_public(const struct psi_line *l, struct pressure_stall *ret) {
        *ret = (struct pressure_stall){ .avg10 = l->avg10, .avg60 = l->avg60, .avg300 = l->avg300, .total = l->total };
}

/* What a scope state carries beside its level: stall, memory, headroom. */
static void figures_public(const struct scope_snapshot *snap, struct pressure_scope *s) {
        if (snap->have_psi) {
                stall_public(&snap->psi.line[PSI_SOME], &s->stall[PRESSURE_STALL_SOME]);
                s->have_stall[PRESSURE_STALL_SOME] = true;
                if (snap->psi.has_full) {
                        stall_public(&snap->psi.line[PSI_FULL], &s->stall[PRESSURE_STALL_FULL]);
                        s->have_stall[PRESSURE_STALL_FULL] = true;
                }
        }
        if (snap->have_node_memory) {
                s->have_memory = s->have_watermarks = true;
                s->mem_total = snap->node.total;
                s->mem_free = snap->node.free;
                s->wmark_min = snap->node.watermark_min;
                s->wmark_low = snap->node.watermark_low;
                s->wmark_high = snap->node.watermark_high;
        }
        if (snap->have_cgroup_memory) {
                s->have_cgroup_memory = true;
                s->cg_usage = snap->usage;
                s->have_limit = snap->limit != UINT64_MAX;
                s->cg_limit = snap->limit;
        }
        if (snap->have_headroom) {
                s->have_headroom = true;
                s->headroom_limit = snap->headroom_limit;
                s->headroom_unreclaimable = snap->headroom_unreclaimable;
        }
}

/* A ScopeState or a LevelChange, decoded by the daemon's own codec (protocol.c): a field the interface
 * makes mandatory and the message lacks, or one of the wrong type, refuses the whole message (-EPROTO)
 * rather than reading as 0. Strings point into o. */
int scope_parse(struct json_object *o, struct pressure_scope *ret) {
        struct scope_snapshot snap;
        enum level previous;
        unsigned coalesced = 0;
        int r;

        if (!o || !json_object_is_type(o, json_type_object))
                return -EPROTO;
        if (get(o, "previous"))
                r = protocol_decode_level_change(o, &snap, &previous, &coalesced);
        else {
                r = protocol_decode_scope_state(o, &snap);
                previous = snap.level;
        }
        if (r < 0)
                return -EPROTO;

        struct pressure_scope s = {
                .obj = o,
                .type = scope_type_public(snap.id.type),
                .node = snap.id.type == SCOPE_NODE ? snap.id.node : -1,
                .cgroup = snap.id.type == SCOPE_CGROUP ? snap.id.cgroup : NULL,
                .level = (enum pressure_level) snap.level,
                .previous = (enum pressure_level) previous,
                .reclaim_target = snap.reclaim_target,
                .timestamp = snap.since,
                .coalesced = coalesced,
                .removed = snap.removed,
                .source = snap.level != LEVEL_OK ? level_source_to_string(snap.source) : NULL,
        };
        switch (snap.id.type) {
        case SCOPE_NODE:
                snprintf(s.name, sizeof(s.name), "node:%d", s.node);
                break;
        case SCOPE_CGROUP:
                snprintf(s.name, sizeof(s.name), "%s", s.cgroup);
                break;
        default:
                snprintf(s.name, sizeof(s.name), "system");
        }
        figures_public(&snap, &s);
        *ret = s;
        return 0;
}

static int scope_array_parse(struct json_object *a, struct pressure_scope **ret, size_t *ret_n) {
        if (!a || !json_object_is_type(a, json_type_array))
                return -EPROTO;
        size_t n = json_object_array_length(a);
        struct pressure_scope *s = calloc(MAX(n, 1u), sizeof(*s));
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (scope_parse(json_object_array_get_idx(a, i), &s[i]) < 0) {
                        free(s);
                        return -EPROTO;
                }
        *ret = s;
        *ret_n = n;
        return 0;
}

/* The status owns the reply; its scopes point into it. */
int status_from_reply(struct json_object *reply, struct pressure_status **ret) {
        struct pressure_status *s = calloc(1, sizeof(*s));
        if (!s) {
                json_object_put(reply);
                return -ENOMEM;
        }
        s->n_ref = 1;
        s->reply = reply;
        struct json_object *p = get(reply, "parameters");
        int r = reply_check(NULL, reply, "GetStatus");
        if (r >= 0)
                r = scope_parse(get(p, "system"), &s->system);
        if (r >= 0)
                r = scope_array_parse(get(p, "nodes"), &s->nodes, &s->n_nodes);
        if (r >= 0)
                r = scope_array_parse(get(p, "cgroups"), &s->cgroups, &s->n_cgroups);
        if (r < 0) {
                pressure_status_unref(s);
                return r;
        }
        *ret = s;
        return 0;
}

EXPORT struct pressure_status *pressure_status_ref(struct pressure_status *s) {
        if (s)
                __atomic_add_fetch(&s->n_ref, 1, __ATOMIC_RELAXED);
        return s;
}

EXPORT struct pressure_status *pressure_status_unref(struct pressure_status *s) {
        if (!s || __atomic_sub_fetch(&s->n_ref, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        free(s->nodes);
        free(s->cgroups);
        json_object_put(s->reply);
        free(s);
        return NULL;
}

EXPORT const struct pressure_scope *pressure_status_get_system(const struct pressure_status *s) {
        return s ? &s->system : NULL;
}

EXPORT size_t pressure_status_get_n_nodes(const struct pressure_status *s) {
        return s ? s->n_nodes : 0;
}

EXPORT const struct pressure_scope *pressure_status_get_node(const struct pressure_status *s, size_t i) {
        return s && i < s->n_nodes ? &s->nodes[i] : NULL;
}

EXPORT size_t pressure_status_get_n_cgroups(const struct pressure_status *s) {
        return s ? s->n_cgroups : 0;
}

EXPORT const struct pressure_scope *pressure_status_get_cgroup(const struct pressure_status *s, size_t i) {
        return s && i < s->n_cgroups ? &s->cgroups[i] : NULL;
}

EXPORT const char *pressure_status_to_json(const struct pressure_status *s) {
        return s ? json_object_to_json_string_ext(get(s->reply, "parameters"), JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
}

/* ---- scope accessors ---- */

EXPORT enum pressure_scope_type pressure_scope_get_type(const struct pressure_scope *s) {
        return s->type;
}

EXPORT int pressure_scope_get_node(const struct pressure_scope *s) {
        return s->type == PRESSURE_SCOPE_NODE ? s->node : -1;
}

EXPORT const char *pressure_scope_get_cgroup(const struct pressure_scope *s) {
        return s->type == PRESSURE_SCOPE_CGROUP ? s->cgroup : NULL;
}

EXPORT const char *pressure_scope_get_name(const struct pressure_scope *s) {
        return s->name;
}

EXPORT enum pressure_level pressure_scope_get_level(const struct pressure_scope *s) {
        return s->level;
}

EXPORT enum pressure_level pressure_scope_get_previous_level(const struct pressure_scope *s) {
        return s->previous;
}

EXPORT int pressure_scope_get_stall(const struct pressure_scope *s, enum pressure_stall_kind kind,
                                    struct pressure_stall *ret) {
        if (!s || !ret || (kind != PRESSURE_STALL_SOME && kind != PRESSURE_STALL_FULL))
                return -EINVAL;
        if (!s->have_stall[kind])
                return -ENODATA;
        *ret = s->stall[kind];
        return 0;
}

EXPORT int pressure_scope_get_memory(const struct pressure_scope *s, uint64_t *ret_total, uint64_t *ret_free) {
        if (!s)
                return -EINVAL;
        if (!s->have_memory)
                return -ENODATA;
        if (ret_total)
                *ret_total = s->mem_total;
        if (ret_free)
                *ret_free = s->mem_free;
        return 0;
}

EXPORT uint64_t pressure_scope_get_reclaim_target(const struct pressure_scope *s) {
        return s->reclaim_target;
}

EXPORT uint64_t pressure_scope_get_timestamp(const struct pressure_scope *s) {
        return s->timestamp;
}

EXPORT int pressure_scope_is_removed(const struct pressure_scope *s) {
        return s->removed;
}

EXPORT const char *pressure_scope_get_source(const struct pressure_scope *s) {
        return s->level == PRESSURE_LEVEL_OK ? NULL : s->source ? s->source : "pressure";
}

EXPORT int pressure_scope_get_headroom(const struct pressure_scope *s, uint64_t *ret_limit, uint64_t *ret_unreclaimable) {
        if (!s->have_headroom)
                return -ENODATA;
        if (ret_limit)
                *ret_limit = s->headroom_limit;
        if (ret_unreclaimable)
                *ret_unreclaimable = s->headroom_unreclaimable;
        return 0;
}

EXPORT unsigned pressure_scope_get_coalesced(const struct pressure_scope *s) {
        return s->coalesced;
}

EXPORT const char *pressure_scope_to_json(const struct pressure_scope *s) {
        return s ? json_object_to_json_string_ext(s->obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
}

struct json_object *scope_ref_from_name(const char *name) {
        struct json_object *o = json_object_new_object();

        if (streq(name, "system"))
                json_object_object_add(o, "type", json_object_new_string("system"));
        else if (strncmp(name, "node:", 5) == 0) {
                char *end;
                errno = 0;
                long n = strtol(name + 5, &end, 10);
                if (errno || end == name + 5 || *end || n < 0 || n > INT_MAX) {
                        json_object_put(o);
                        return NULL;
                }
                json_object_object_add(o, "type", json_object_new_string("node"));
                json_object_object_add(o, "node", json_object_new_int((int) n));
        } else if (name[0] == '/') {
                json_object_object_add(o, "type", json_object_new_string("cgroup"));
                json_object_object_add(o, "cgroup", json_object_new_string(name));
        } else {
                json_object_put(o);
                return NULL;
        }
        return o;
}

EXPORT int pressure_scope_get_watermarks(const struct pressure_scope *s, uint64_t *ret_min, uint64_t *ret_low,
                                         uint64_t *ret_high) {
        if (!s)
                return -EINVAL;
        if (!s->have_watermarks)
                return -ENODATA;
        if (ret_min)
                *ret_min = s->wmark_min;
        if (ret_low)
                *ret_low = s->wmark_low;
        if (ret_high)
                *ret_high = s->wmark_high;
        return 0;
}

EXPORT int pressure_scope_get_cgroup_memory(const struct pressure_scope *s, uint64_t *ret_usage, uint64_t *ret_limit) {
        if (!s)
                return -EINVAL;
        if (!s->have_cgroup_memory)
                return -ENODATA;
        if (ret_usage)
                *ret_usage = s->cg_usage;
        if (ret_limit)
                *ret_limit = s->cg_limit;
        return 0;
}

EXPORT const char *pressure_get_version(void) {
        return PRESSURED_VERSION;
}
