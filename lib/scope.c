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

#define get json_get
#define get_u64 json_get_u64

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

uint64_t json_get_u64(struct json_object *o, const char *key) {
        struct json_object *v = json_get(o, key);
        if (!v || !json_object_is_type(v, json_type_int))
                return 0;
        int64_t i = json_object_get_int64(v);
        return i > 0 ? (uint64_t) i : 0;
}

static int get_level(struct json_object *o, const char *key) {
        struct json_object *v = get(o, key);
        return v && json_object_is_type(v, json_type_string) ? pressure_level_from_string(json_object_get_string(v))
                                                              : -EINVAL;
}

static void parse_stall(struct json_object *o, struct pressure_stall *ret, bool *have) {
        if (!o || !json_object_is_type(o, json_type_object))
                return;
        ret->avg10 = json_object_get_double(get(o, "avg10"));
        ret->avg60 = json_object_get_double(get(o, "avg60"));
        ret->avg300 = json_object_get_double(get(o, "avg300"));
        ret->total = get_u64(o, "total");
        *have = true;
}

/* The ScopeRef: its type and its name for people. */
static int scope_ref_parse(struct json_object *ref, struct pressure_scope *s) {
        const char *type = json_object_get_string(get(ref, "type"));
        if (!type)
                return -EPROTO;
        if (streq(type, "system")) {
                s->type = PRESSURE_SCOPE_SYSTEM;
                snprintf(s->name, sizeof(s->name), "system");
        } else if (streq(type, "node")) {
                s->type = PRESSURE_SCOPE_NODE;
                s->node = (int) get_u64(ref, "node");
                snprintf(s->name, sizeof(s->name), "node:%d", s->node);
        } else if (streq(type, "cgroup")) {
                s->type = PRESSURE_SCOPE_CGROUP;
                s->cgroup = json_object_get_string(get(ref, "cgroup"));
                if (!s->cgroup)
                        return -EPROTO;
                snprintf(s->name, sizeof(s->name), "%s", s->cgroup);
        } else
                return -EPROTO;
        return 0;
}

/* NodeMemory and CgroupMemory, where the scope has them. */
static void memory_parse(struct json_object *o, struct pressure_scope *s) {
        struct json_object *mem = get(o, "memory");
        if (mem) {
                s->mem_total = get_u64(mem, "total");
                s->mem_free = get_u64(mem, "free");
                s->have_memory = true;
                s->have_watermarks = json_get(mem, "watermark_high") != NULL;
                s->wmark_min = get_u64(mem, "watermark_min");
                s->wmark_low = get_u64(mem, "watermark_low");
                s->wmark_high = get_u64(mem, "watermark_high");
        }
        struct json_object *cgm = get(o, "cgroup_memory");
        if (json_object_is_type(cgm, json_type_object)) {
                s->have_cgroup_memory = true;
                s->cg_usage = get_u64(cgm, "usage");
                s->have_limit = json_get(cgm, "limit") != NULL;
                s->cg_limit = s->have_limit ? get_u64(cgm, "limit") : UINT64_MAX;
        }
}

/* A ScopeState or a LevelChange; the message was checked against the interface (reply_check()). */
int scope_parse(struct json_object *o, struct pressure_scope *ret) {
        struct pressure_scope s = { .obj = o, .node = -1 };

        if (!o || !json_object_is_type(o, json_type_object) || scope_ref_parse(get(o, "scope"), &s) < 0)
                return -EPROTO;
        int l = get_level(o, "level");
        if (l < 0)
                return -EPROTO;
        s.level = l;
        int p = get_level(o, "previous");
        s.previous = p >= 0 ? p : l;

        struct json_object *pressure = get(o, "pressure");
        parse_stall(get(pressure, "some"), &s.stall[PRESSURE_STALL_SOME], &s.have_stall[PRESSURE_STALL_SOME]);
        parse_stall(get(pressure, "full"), &s.stall[PRESSURE_STALL_FULL], &s.have_stall[PRESSURE_STALL_FULL]);

        memory_parse(o, &s);
        s.reclaim_target = get_u64(o, "reclaim_target");
        s.timestamp = get_u64(o, "timestamp");
        if (!s.timestamp)
                s.timestamp = get_u64(o, "since");
        s.coalesced = (unsigned) get_u64(o, "coalesced");
        s.removed = json_object_get_boolean(get(o, "removed"));
        struct json_object *source = get(o, "source"), *h = get(o, "headroom");
        if (json_object_is_type(source, json_type_string))
                s.source = json_object_get_string(source);
        if (json_object_is_type(h, json_type_object)) {
                s.have_headroom = true;
                s.headroom_limit = get_u64(h, "limit");
                s.headroom_unreclaimable = get_u64(h, "unreclaimable");
        }
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
