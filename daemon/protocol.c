/* SPDX-License-Identifier: MIT */
#include "protocol.h"

#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_build.h"
#include "macro.h"
#include "params.h"
#include "utf8.h"

/* ---- helpers ---- */

/* Decoding: a missing optional key leaves *ret alone; a key of the wrong type is -EINVAL. */
static struct json_object *get(struct json_object *o, const char *key) {
        struct json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return NULL;
        return v;
}

static int get_u64(struct json_object *o, const char *key, bool mandatory, uint64_t *ret) {
        struct json_object *v = get(o, key);
        if (!v)
                return mandatory ? -EINVAL : 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return -EINVAL;
        *ret = (uint64_t) json_object_get_int64(v);
        return 1;
}

static int get_int(struct json_object *o, const char *key, bool mandatory, int *ret) {
        struct json_object *v = get(o, key);
        if (!v)
                return mandatory ? -EINVAL : 0;
        int64_t i = json_object_get_int64(v);
        if (!json_object_is_type(v, json_type_int) || i < INT_MIN || i > INT_MAX)
                return -EINVAL;
        *ret = (int) i;
        return 1;
}

static int get_string(struct json_object *o, const char *key, bool mandatory, const char **ret) {
        struct json_object *v = get(o, key);
        if (!v)
                return mandatory ? -EINVAL : 0;
        if (!json_object_is_type(v, json_type_string))
                return -EINVAL;
        *ret = json_object_get_string(v);
        return 1;
}

static int get_bool(struct json_object *o, const char *key, bool *ret) {
        struct json_object *v = get(o, key);
        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return -EINVAL;
        *ret = json_object_get_boolean(v);
        return 1;
}

static int get_level(struct json_object *o, const char *key, enum level *ret) {
        const char *s;
        int r = get_string(o, key, true, &s);
        if (r < 0)
                return r;
        int l = level_from_string(s);
        if (l < 0)
                return -EINVAL;
        *ret = l;
        return 0;
}

static int get_object(struct json_object *o, const char *key, struct json_object **ret) {
        struct json_object *v = get(o, key);
        if (!v)
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return -EINVAL;
        *ret = v;
        return 1;
}

/* Chains decoding steps: the first error wins. */
#define TRY(expr)                                                                                          \
        do {                                                                                               \
                int _r_ = (expr);                                                                          \
                if (_r_ < 0)                                                                               \
                        return _r_;                                                                        \
        } while (0)

/* The same for a step whose result is wanted: an error returns, anything else is the expression's value. */
#define TRY_VALUE(expr)                                                                                    \
        ({                                                                                                 \
                int _v_ = (expr);                                                                          \
                if (_v_ < 0)                                                                               \
                        return _v_;                                                                        \
                _v_;                                                                                       \
        })

/* ---- ScopeRef ---- */

struct json_object *protocol_encode_scope_ref(const struct scope_id *id) {
        assert(id);

        struct json_object *o = json_object_new_object();
        jb_set_string(&o, "type", scope_type_to_string(id->type));
        if (id->type == SCOPE_NODE)
                jb_set_int(&o, "node", id->node);
        else if (id->type == SCOPE_CGROUP)
                jb_set_string(&o, "cgroup", id->cgroup);
        return o;
}

int protocol_decode_scope_ref(struct json_object *o, struct scope_id *ret, const char **ret_field) {
        assert(ret);

        struct scope_id id = { .node = -1 };
        struct json_object *node = NULL, *cgroup = NULL;
        const char *type = NULL;

        *ret_field = "scopes";
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        json_object_object_foreach(o, key, val) {
                if (streq(key, "type"))
                        type = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : "";
                else if (streq(key, "node"))
                        node = val;
                else if (streq(key, "cgroup"))
                        cgroup = val;
                else
                        return -EINVAL;
        }

        *ret_field = "type";
        int t = scope_type_from_string(type);
        if (t < 0)
                return -EINVAL;
        id.type = t;

        if (node && !json_object_is_type(node, json_type_null)) {
                *ret_field = "node";
                if (t != SCOPE_NODE || !json_object_is_type(node, json_type_int))
                        return -EINVAL;
                int64_t v = json_object_get_int64(node);
                if (v < 0 || v > INT_MAX)
                        return -EINVAL;
                id.node = (int) v;
        }
        if (cgroup && !json_object_is_type(cgroup, json_type_null)) {
                *ret_field = "cgroup";
                if (t != SCOPE_CGROUP || !json_object_is_type(cgroup, json_type_string) ||
                    !utf8_is_valid(json_object_get_string(cgroup)))
                        return -EINVAL;
                id.cgroup = json_object_get_string(cgroup);
        }
        if (t == SCOPE_NODE && id.node < 0) {
                *ret_field = "node";
                return -EINVAL;
        }
        if (t == SCOPE_CGROUP && !id.cgroup) {
                *ret_field = "cgroup";
                return -EINVAL;
        }
        *ret = id;
        return 0;
}

/* ---- figures ---- */

/* PSI averages have two decimals in the kernel's text; keep them so rather than as binary noise. */
static struct json_object *percent(double v) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.2f", v);
        return json_object_new_double_s(v, buf);
}

static struct json_object *encode_stall(const struct psi_line *l) {
        struct json_object *o = json_object_new_object();
        jb_set(&o, "avg10", percent(l->avg10));
        jb_set(&o, "avg60", percent(l->avg60));
        jb_set(&o, "avg300", percent(l->avg300));
        jb_set_u64(&o, "total", l->total);
        return o;
}

static int get_percent(struct json_object *o, const char *key, double *ret) {
        struct json_object *v = get(o, key);
        if (!v || !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
                return -EINVAL;
        *ret = json_object_get_double(v);
        return 0;
}

static int decode_stall(struct json_object *o, struct psi_line *ret) {
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_percent(o, "avg10", &ret->avg10));
        TRY(get_percent(o, "avg60", &ret->avg60));
        TRY(get_percent(o, "avg300", &ret->avg300));
        TRY(get_u64(o, "total", true, &ret->total));
        return 0;
}

static void encode_figures(struct json_object **o, const struct scope_snapshot *s) {
        if (s->have_psi) {
                struct json_object *p = json_object_new_object();
                jb_set(&p, "some", encode_stall(&s->psi.line[PSI_SOME]));
                if (s->psi.has_full)
                        jb_set(&p, "full", encode_stall(&s->psi.line[PSI_FULL]));
                jb_set(o, "pressure", p);
        }
        if (s->have_node_memory) {
                const struct node_memory *n = &s->node;
                struct json_object *mem = json_object_new_object();
                jb_set_u64(&mem, "total", n->total);
                jb_set_u64(&mem, "free", n->free);
                jb_set_u64(&mem, "watermark_min", n->watermark_min);
                jb_set_u64(&mem, "watermark_low", n->watermark_low);
                jb_set_u64(&mem, "watermark_high", n->watermark_high);
                jb_set_u64(&mem, "numa_foreign", n->numa_foreign);
                jb_set_u64(&mem, "refault_anon", n->refault_anon);
                jb_set_u64(&mem, "refault_file", n->refault_file);
                jb_set(o, "memory", mem);
        }
        if (s->have_cgroup_memory) {
                struct json_object *mem = json_object_new_object();
                jb_set_u64(&mem, "usage", s->usage);
                if (s->limit != UINT64_MAX)
                        jb_set_u64(&mem, "limit", s->limit);
                jb_set(o, "cgroup_memory", mem);
        }
        jb_set_u64(o, "reclaim_target", s->reclaim_target);
        if (s->level != LEVEL_OK)
                jb_set_string(o, "source", level_source_to_string(s->source));
        if (s->reason && s->reason[0])
                jb_set_string(o, "reason", s->reason);
        if (s->have_headroom) {
                struct json_object *h = json_object_new_object();
                jb_set_u64(&h, "limit", s->headroom_limit);
                jb_set_u64(&h, "unreclaimable", s->headroom_unreclaimable);
                /* The headroom itself: what is left under the limit. */
                jb_set_u64(&h, "room", s->headroom_limit > s->headroom_unreclaimable
                                               ? s->headroom_limit - s->headroom_unreclaimable
                                               : 0);
                if (s->headroom_cgroup)
                        jb_set_string(&h, "cgroup", s->headroom_cgroup);
                jb_set(o, "headroom", h);
        }
}

static int decode_figures(struct json_object *o, struct scope_snapshot *s) {
        struct json_object *p = NULL, *mem = NULL, *cg = NULL;

        TRY(get_object(o, "pressure", &p));
        if (p) {
                struct json_object *full = get(p, "full");
                s->have_psi = true;
                TRY(decode_stall(get(p, "some"), &s->psi.line[PSI_SOME]));
                if (full) {
                        s->psi.has_full = true;
                        TRY(decode_stall(full, &s->psi.line[PSI_FULL]));
                }
        }
        TRY(get_object(o, "memory", &mem));
        if (mem) {
                struct node_memory *n = &s->node;
                s->have_node_memory = true;
                TRY(get_u64(mem, "total", true, &n->total));
                TRY(get_u64(mem, "free", true, &n->free));
                TRY(get_u64(mem, "watermark_min", true, &n->watermark_min));
                TRY(get_u64(mem, "watermark_low", true, &n->watermark_low));
                TRY(get_u64(mem, "watermark_high", true, &n->watermark_high));
                TRY(get_u64(mem, "numa_foreign", false, &n->numa_foreign));
                TRY(get_u64(mem, "refault_anon", false, &n->refault_anon));
                TRY(get_u64(mem, "refault_file", false, &n->refault_file));
        }
        s->limit = UINT64_MAX;
        TRY(get_object(o, "cgroup_memory", &cg));
        if (cg) {
                s->have_cgroup_memory = true;
                TRY(get_u64(cg, "usage", true, &s->usage));
                TRY(get_u64(cg, "limit", false, &s->limit));
        }
        TRY(get_u64(o, "reclaim_target", true, &s->reclaim_target));
        const char *source = NULL;
        TRY(get_string(o, "source", false, &source));
        if (source) {
                int src = level_source_from_string(source);
                if (src < 0)
                        return -EINVAL;
                s->source = src;
        }
        struct json_object *h = NULL;
        TRY(get_object(o, "headroom", &h));
        if (h) {
                s->have_headroom = true;
                TRY(get_u64(h, "limit", true, &s->headroom_limit));
                TRY(get_u64(h, "unreclaimable", true, &s->headroom_unreclaimable));
                TRY(get_string(h, "cgroup", false, &s->headroom_cgroup));
        }
        TRY(get_string(o, "reason", false, &s->reason));
        return 0;
}

static int decode_scope(struct json_object *o, struct scope_snapshot *s) {
        const char *field;
        struct json_object *ref = get(o, "scope");
        if (!ref)
                return -EINVAL;
        TRY(protocol_decode_scope_ref(ref, &s->id, &field));
        return get_level(o, "level", &s->level);
}

/* ---- Regulation ---- */

struct json_object *protocol_encode_regulation(const struct regulation_snapshot *r) {
        assert(r);

        struct json_object *o = json_object_new_object();
        if (r->cgroup)
                jb_set_string(&o, "cgroup", r->cgroup);
        jb_set_u64(&o, "budget", r->budget);
        jb_set_u64(&o, "stall", r->stall);
        jb_set_string(&o, "state", r->state ? r->state : "first");
        if (r->limit > 0)
                jb_set_u64(&o, "limit", r->limit);
        if (r->edge > 0) {
                jb_set_u64(&o, "edge", r->edge);
                jb_set_u64(&o, "edge_found", r->edge_found);
                jb_set_u64(&o, "return_usec", r->return_usec);
        }
        if (r->limit > 0)
                jb_set_u64(&o, "rising", r->rising);
        jb_set_u64(&o, "steps", r->steps);
        jb_set_u64(&o, "asked", r->asked);
        return o;
}

int protocol_decode_regulation(struct json_object *o, struct regulation_snapshot *ret) {
        assert(ret);

        struct regulation_snapshot r = {};
        uint64_t rising = 0;
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_string(o, "cgroup", false, &r.cgroup));
        TRY(get_u64(o, "budget", true, &r.budget));
        TRY(get_u64(o, "stall", true, &r.stall));
        TRY(get_string(o, "state", true, &r.state));
        TRY(get_u64(o, "limit", false, &r.limit));
        TRY(get_u64(o, "edge", false, &r.edge));
        TRY(get_u64(o, "edge_found", false, &r.edge_found));
        TRY(get_u64(o, "return_usec", false, &r.return_usec));
        TRY(get_u64(o, "rising", false, &rising));
        r.rising = (unsigned) MIN(rising, (uint64_t) UINT_MAX);
        TRY(get_u64(o, "steps", true, &r.steps));
        TRY(get_u64(o, "asked", true, &r.asked));
        *ret = r;
        return 0;
}

/* ---- ScopeState, LevelChange ---- */

struct json_object *protocol_encode_scope_state(const struct scope_snapshot *s) {
        assert(s);

        struct json_object *o = json_object_new_object();
        jb_set(&o, "scope", protocol_encode_scope_ref(&s->id));
        jb_set_string(&o, "level", level_to_string(s->level));
        encode_figures(&o, s);
        jb_set_u64(&o, "since", s->since);
        if (s->have_regulation)
                jb_set(&o, "regulation", protocol_encode_regulation(&s->regulation));
        return o;
}

int protocol_decode_scope_state(struct json_object *o, struct scope_snapshot *ret) {
        assert(ret);

        struct scope_snapshot s = {};
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(decode_scope(o, &s));
        TRY(decode_figures(o, &s));
        TRY(get_u64(o, "since", true, &s.since));
        struct json_object *reg = NULL;
        TRY(get_object(o, "regulation", &reg));
        if (reg) {
                s.have_regulation = true;
                TRY(protocol_decode_regulation(reg, &s.regulation));
        }
        *ret = s;
        return 0;
}

struct json_object *protocol_encode_level_change(const struct scope_snapshot *s, enum level previous,
                                                 unsigned coalesced) {
        assert(s);

        struct json_object *o = json_object_new_object();
        jb_set(&o, "scope", protocol_encode_scope_ref(&s->id));
        jb_set_string(&o, "previous", level_to_string(previous));
        jb_set_string(&o, "level", level_to_string(s->level));
        encode_figures(&o, s);
        jb_set_u64(&o, "timestamp", s->since);
        if (coalesced > 0)
                jb_set_int(&o, "coalesced", (int) MIN(coalesced, (unsigned) INT_MAX));
        jb_set_true(&o, "removed", s->removed);
        return o;
}

int protocol_decode_level_change(struct json_object *o, struct scope_snapshot *ret, enum level *ret_previous,
                                 unsigned *ret_coalesced) {
        assert(ret);

        struct scope_snapshot s = {};
        enum level previous;
        int coalesced = 0;

        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(decode_scope(o, &s));
        TRY(get_level(o, "previous", &previous));
        TRY(decode_figures(o, &s));
        TRY(get_u64(o, "timestamp", true, &s.since));
        TRY(get_int(o, "coalesced", false, &coalesced));
        TRY(get_bool(o, "removed", &s.removed));
        if (coalesced < 0)
                return -EINVAL;
        *ret = s;
        *ret_previous = previous;
        *ret_coalesced = (unsigned) coalesced;
        return 0;
}

/* ---- MemoryEvent ---- */

struct json_object *protocol_encode_memory_event(const struct memory_event_snapshot *e) {
        assert(e);

        struct json_object *o = json_object_new_object();
        jb_set(&o, "scope", protocol_encode_scope_ref(&e->id));
        jb_set_string(&o, "kind", memory_event_to_string(e->kind));
        jb_set_u64(&o, "count", e->count);
        jb_set_u64(&o, "timestamp", e->timestamp);
        return o;
}

int protocol_decode_memory_event(struct json_object *o, struct memory_event_snapshot *ret) {
        assert(ret);

        struct memory_event_snapshot e = {};
        const char *field, *kind;
        struct json_object *ref = get(o, "scope");

        if (!json_object_is_type(o, json_type_object) || !ref)
                return -EINVAL;
        TRY(protocol_decode_scope_ref(ref, &e.id, &field));
        TRY(get_string(o, "kind", true, &kind));
        int k = memory_event_from_string(kind);
        if (k < 0)
                return -EINVAL;
        e.kind = k;
        TRY(get_u64(o, "count", true, &e.count));
        TRY(get_u64(o, "timestamp", true, &e.timestamp));
        *ret = e;
        return 0;
}

/* ---- shrinkers ---- */

static const char *op_to_string(enum shrink_op op) {
        return op == SHRINK_OP_COUNT ? "count" : "scan";
}

struct json_object *protocol_encode_shrink_request(const struct shrink_request_snapshot *q) {
        assert(q);

        struct json_object *o = json_object_new_object();
        jb_set_u64(&o, "id", q->id);
        jb_set_u64(&o, "shrinker", q->shrinker);
        jb_set_string(&o, "op", op_to_string(q->op));
        jb_set_int(&o, "node", q->node);
        jb_set_string(&o, "cgroup", q->cgroup);
        if (q->op == SHRINK_OP_SCAN)
                jb_set_u64(&o, "nr_to_scan", q->nr_to_scan);
        jb_set_int(&o, "priority", q->priority);
        jb_set_u64(&o, "deadline", q->deadline);
        jb_set_string(&o, "scope", scope_type_to_string(q->scope_type));
        if (q->level >= 0)
                jb_set_string(&o, "level", level_to_string(q->level));
        return o;
}

int protocol_text_append_shrink_request(struct json_text *t, const struct shrink_request_snapshot *q) {
        assert(t);

        char buf[160];
        /* Numbers saturate at INT64_MAX, as jb_set_u64() has them. */
        int n = snprintf(buf, sizeof(buf), "{\"id\":%" PRIu64 ",\"shrinker\":%" PRIu64 ",\"op\":\"%s\",\"node\":%d,\"cgroup\":",
                         MIN(q->id, (uint64_t) INT64_MAX), MIN(q->shrinker, (uint64_t) INT64_MAX), op_to_string(q->op), q->node);
        int r = json_text_append(t, buf, (size_t) n);
        if (r >= 0)
                r = json_text_append_string(t, q->cgroup, strlen(q->cgroup));
        if (r < 0)
                return r;
        n = q->op == SHRINK_OP_SCAN ? snprintf(buf, sizeof(buf), ",\"nr_to_scan\":%" PRIu64, MIN(q->nr_to_scan, (uint64_t) INT64_MAX)) : 0;
        n += snprintf(buf + n, sizeof(buf) - (size_t) n, ",\"priority\":%d,\"deadline\":%" PRIu64 ",\"scope\":\"%s\"",
                      q->priority, MIN(q->deadline, (uint64_t) INT64_MAX), scope_type_to_string(q->scope_type));
        if (q->level >= 0)
                n += snprintf(buf + n, sizeof(buf) - (size_t) n, ",\"level\":\"%s\"", level_to_string(q->level));
        buf[n++] = '}';
        return json_text_append(t, buf, (size_t) n);
}

int protocol_decode_shrink_request(struct json_object *o, struct shrink_request_snapshot *ret) {
        assert(ret);

        struct shrink_request_snapshot q = {};
        const char *op;

        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_u64(o, "id", true, &q.id));
        TRY(get_u64(o, "shrinker", true, &q.shrinker));
        TRY(get_string(o, "op", true, &op));
        if (streq(op, "count"))
                q.op = SHRINK_OP_COUNT;
        else if (streq(op, "scan"))
                q.op = SHRINK_OP_SCAN;
        else
                return -EINVAL;
        TRY(get_int(o, "node", true, &q.node));
        TRY(get_string(o, "cgroup", true, &q.cgroup));
        TRY(get_u64(o, "nr_to_scan", q.op == SHRINK_OP_SCAN, &q.nr_to_scan));
        TRY(get_int(o, "priority", true, &q.priority));
        TRY(get_u64(o, "deadline", true, &q.deadline));
        const char *scope = NULL, *level = NULL;
        TRY(get_string(o, "scope", false, &scope));
        TRY(get_string(o, "level", false, &level));
        q.scope_type = SCOPE_SYSTEM;
        if (scope && scope_type_from_string(scope) < 0)
                return -EINVAL;
        if (scope)
                q.scope_type = scope_type_from_string(scope);
        q.level = level ? level_from_string(level) : -1;
        if (level && q.level < 0)
                return -EINVAL;
        *ret = q;
        return 0;
}

struct json_object *protocol_encode_shrink_result(const struct shrink_result *r) {
        assert(r);

        struct json_object *o = json_object_new_object();
        jb_set_u64(&o, "shrinker", r->shrinker);
        jb_set_string(&o, "name", r->name);
        jb_set_int(&o, "node", r->node);
        jb_set_string(&o, "cgroup", r->cgroup);
        jb_set_u64(&o, "scanned", r->scanned);
        jb_set_u64(&o, "freed", r->freed);
        jb_set_u64(&o, "bytes_freed", r->bytes_freed);
        if (r->have_released)
                jb_set_u64(&o, "released_bytes", r->released_bytes);
        if (r->have_count)
                jb_set_u64(&o, "count", r->count);
        jb_set_true(&o, "stopped", r->stopped);
        jb_set_true(&o, "timed_out", r->timed_out);
        jb_set_true(&o, "empty", r->empty);
        jb_set_true(&o, "quarantined", r->quarantined);
        jb_set_true(&o, "rejected", r->rejected);
        return o;
}

int protocol_decode_shrink_result(struct json_object *o, struct shrink_result *ret) {
        assert(ret);

        struct shrink_result r = {};
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_u64(o, "shrinker", true, &r.shrinker));
        TRY(get_string(o, "name", true, &r.name));
        TRY(get_int(o, "node", true, &r.node));
        TRY(get_string(o, "cgroup", true, &r.cgroup));
        TRY(get_u64(o, "scanned", true, &r.scanned));
        TRY(get_u64(o, "freed", true, &r.freed));
        TRY(get_u64(o, "bytes_freed", true, &r.bytes_freed));
        int have = get_u64(o, "released_bytes", false, &r.released_bytes);
        TRY(have);
        r.have_released = have > 0;
        have = get_u64(o, "count", false, &r.count);
        TRY(have);
        r.have_count = have > 0;
        TRY(get_bool(o, "stopped", &r.stopped));
        TRY(get_bool(o, "timed_out", &r.timed_out));
        TRY(get_bool(o, "empty", &r.empty));
        TRY(get_bool(o, "quarantined", &r.quarantined));
        TRY(get_bool(o, "rejected", &r.rejected));
        *ret = r;
        return 0;
}

static struct json_object *encode_shrinker_ref(const struct shrinker_ref *r) {
        struct json_object *s = json_object_new_object();
        jb_set_u64(&s, "id", r->id);
        jb_set_string(&s, "name", r->name);
        return s;
}

struct json_object *protocol_encode_registration(const struct shrink_registration *g) {
        assert(g);

        struct json_object *o = json_object_new_object(), *list = json_object_new_array();
        jb_set_string(&o, "token", g->token);
        for (size_t i = 0; i < g->n_shrinkers; i++)
                jb_append(&list, encode_shrinker_ref(&g->shrinkers[i]));
        jb_set(&o, "shrinkers", list);
        return o;
}

/* ---- reply envelopes: the keys of every io.pressured reply are written here ---- */

const char *const protocol_status_envelope[_PROTOCOL_STATUS_PARTS] = {
        [PROTOCOL_STATUS_SYSTEM] = "{\"system\":",
        [PROTOCOL_STATUS_NODES] = ",\"nodes\":[",
        [PROTOCOL_STATUS_CGROUPS] = "],\"cgroups\":[",
        [PROTOCOL_STATUS_END] = "]}",
};

const char *const protocol_shrinkers_envelope[2] = { "{\"shrinkers\":[", "]}" };

struct json_object *protocol_reply_registered(const struct shrink_registration *g) {
        return jb_object_with("registered", protocol_encode_registration(g));
}

struct json_object *protocol_reply_limits(const struct shrinker_limit *limits, size_t n) {
        assert(limits || n == 0);

        struct json_object *list = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                jb_append(&list, protocol_encode_shrinker_limit(&limits[i]));
        return jb_object_with("limits", list);
}

struct json_object *protocol_reply_added_shrinker(const struct shrinker_ref *r) {
        assert(r);
        return jb_object_with("shrinker", encode_shrinker_ref(r));
}

struct json_object *protocol_reply_shrink(const struct shrink_result *results, size_t n) {
        assert(results || n == 0);

        struct json_object *list = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                jb_append(&list, protocol_encode_shrink_result(&results[i]));
        return jb_object_with("results", list);
}

/* An array of objects, each decoded into an element of a freshly allocated array. */
static int decode_array(struct json_object *o, const char *key, size_t size, int (*fn)(struct json_object *, void *),
                        void **ret, size_t *ret_n) {
        struct json_object *list = get(o, key);
        if (!list || !json_object_is_type(list, json_type_array))
                return -EINVAL;
        size_t n = json_object_array_length(list);
        char *a = calloc(MAX(n, 1u), size);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(list, i);
                int r = json_object_is_type(e, json_type_object) ? fn(e, a + i * size) : -EINVAL;
                if (r < 0) {
                        free(a);
                        return r;
                }
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int protocol_decode_shrinker_ref(struct json_object *o, struct shrinker_ref *ret) {
        assert(ret);

        struct shrinker_ref s = {};
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_u64(o, "id", true, &s.id));
        TRY(get_string(o, "name", true, &s.name));
        *ret = s;
        return 0;
}

static int decode_shrinker_ref(struct json_object *o, void *p) {
        return protocol_decode_shrinker_ref(o, p);
}

int protocol_decode_registration(struct json_object *o, struct shrink_registration *ret) {
        assert(ret);

        struct shrink_registration g = {};
        void *list;
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_string(o, "token", true, &g.token));
        TRY(decode_array(o, "shrinkers", sizeof(struct shrinker_ref), decode_shrinker_ref, &list, &g.n_shrinkers));
        g.shrinkers = list;
        *ret = g;
        return 0;
}

void protocol_registration_done(struct shrink_registration *g) {
        free(g->shrinkers);
        *g = (struct shrink_registration){};
}

struct json_object *protocol_encode_shrinker_limit(const struct shrinker_limit *l) {
        assert(l);

        struct json_object *o = json_object_new_object();
        jb_set_u64(&o, "shrinker", l->shrinker);
        jb_set_u64(&o, "bytes", l->bytes);
        return o;
}

int protocol_decode_shrinker_limit(struct json_object *o, struct shrinker_limit *ret) {
        assert(ret);

        struct shrinker_limit l = {};
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_u64(o, "shrinker", true, &l.shrinker));
        TRY(get_u64(o, "bytes", true, &l.bytes));
        *ret = l;
        return 0;
}

struct json_object *protocol_encode_shrinker_info(const struct shrinker_info_snapshot *i) {
        assert(i);

        struct json_object *o = json_object_new_object(), *flags = json_object_new_array();

        jb_set_u64(&o, "id", i->id);
        jb_set_string(&o, "name", i->name);
        jb_set_int(&o, "pid", (int) i->pid);
        if (i->for_pid > 0)
                jb_set_int(&o, "for_pid", (int) i->for_pid);
        jb_set_u64(&o, "uid", i->uid);
        jb_set_string(&o, "cgroup", i->cgroup);
        if (i->flags & SHRINKER_NUMA_AWARE)
                jb_append(&flags, json_object_new_string("numa_aware"));
        if (i->flags & SHRINKER_MEMCG_AWARE)
                jb_append(&flags, json_object_new_string("memcg_aware"));
        jb_set(&o, "flags", flags);
        jb_set_int(&o, "seeks", (int) i->seeks);
        jb_set_int(&o, "batch", (int) i->batch);

        struct json_object *nodes = json_object_new_array();
        for (size_t k = 0; k < i->n_nodes; k++) {
                struct json_object *n = json_object_new_object();
                jb_set_int(&n, "node", i->nodes[k].node);
                jb_set_u64(&n, "objects", i->nodes[k].objects);
                jb_set_u64(&n, "bytes", i->nodes[k].bytes);
                jb_set_u64(&n, "deferred", i->nodes[k].deferred);
                if (i->nodes[k].value > 0)
                        jb_set(&n, "value", json_object_new_double(i->nodes[k].value));
                jb_append(&nodes, n);
        }
        jb_set(&o, "nodes", nodes);

        const struct shrinker_stats *st = &i->stats;
        jb_set_u64(&o, "calls", st->calls);
        jb_set_u64(&o, "scanned", st->scanned);
        jb_set_u64(&o, "freed", st->freed);
        jb_set_u64(&o, "bytes_freed", st->bytes_freed);
        jb_set_u64(&o, "timeouts", st->timeouts);
        jb_set_u64(&o, "stops", st->stops);
        jb_set_u64(&o, "last_latency_usec", st->last_latency_usec);
        jb_set_u64(&o, "worst_latency_usec", st->worst_latency_usec);
        jb_set_u64(&o, "rejected_answers", st->rejected);
        jb_set_u64(&o, "client_claimed_bytes", i->client_claimed_bytes);
        jb_set_u64(&o, "client_released_bytes", i->client_released_bytes);
        jb_set_string(&o, "client_measured", i->client_measured_by_cgroup ? "cgroup" : "resident");
        jb_set_int(&o, "client_trust", (int) i->client_trust);
        jb_set_string(&o, "state", i->quarantined ? "quarantined" : "active");
        if (i->have_regulation)
                jb_set(&o, "regulation", protocol_encode_regulation(&i->regulation));
        if (i->limit > 0)
                jb_set_u64(&o, "limit", i->limit);
        return o;
}

static int decode_node_figures(struct json_object *o, void *p) {
        struct shrinker_node_figures *n = p;
        TRY(get_int(o, "node", true, &n->node));
        TRY(get_u64(o, "objects", true, &n->objects));
        TRY(get_u64(o, "bytes", true, &n->bytes));
        TRY(get_u64(o, "deferred", true, &n->deferred));
        n->value = 0;
        if (get(o, "value") && (get_percent(o, "value", &n->value) < 0 || !(n->value >= 0 && n->value <= PROTOCOL_VALUE_MAX)))
                return -EINVAL;
        return 0;
}

static int decode_flags(struct json_object *o, unsigned *ret) {
        struct json_object *list = get(o, "flags");
        unsigned f = 0;
        if (!list || !json_object_is_type(list, json_type_array))
                return -EINVAL;
        for (size_t k = 0; k < json_object_array_length(list); k++) {
                const char *s = json_object_get_string(json_object_array_get_idx(list, k));
                if (!json_object_is_type(json_object_array_get_idx(list, k), json_type_string))
                        return -EINVAL;
                if (streq(s, "numa_aware"))
                        f |= SHRINKER_NUMA_AWARE;
                else if (streq(s, "memcg_aware"))
                        f |= SHRINKER_MEMCG_AWARE;
                /* others: a newer daemon's flags, not ours to know */
        }
        *ret = f;
        return 0;
}

static int decode_shrinker_stats(struct json_object *o, struct shrinker_stats *st) {
        TRY(get_u64(o, "calls", true, &st->calls));
        TRY(get_u64(o, "scanned", true, &st->scanned));
        TRY(get_u64(o, "freed", true, &st->freed));
        TRY(get_u64(o, "bytes_freed", true, &st->bytes_freed));
        TRY(get_u64(o, "timeouts", true, &st->timeouts));
        TRY(get_u64(o, "stops", true, &st->stops));
        TRY(get_u64(o, "last_latency_usec", true, &st->last_latency_usec));
        TRY(get_u64(o, "worst_latency_usec", true, &st->worst_latency_usec));
        TRY(get_u64(o, "rejected_answers", true, &st->rejected));
        return 0;
}

/* What the daemon measured of the client: its claims, the release behind them, and its trust. */
static int decode_client_figures(struct json_object *o, struct shrinker_info_snapshot *i) {
        const char *measured = "resident";
        int trust = 1000;
        TRY(get_u64(o, "client_claimed_bytes", false, &i->client_claimed_bytes));
        TRY(get_u64(o, "client_released_bytes", false, &i->client_released_bytes));
        TRY(get_string(o, "client_measured", false, &measured));
        if (!streq(measured, "resident") && !streq(measured, "cgroup"))
                return -EINVAL;
        i->client_measured_by_cgroup = streq(measured, "cgroup");
        TRY(get_int(o, "client_trust", false, &trust));
        if (trust < 0 || trust > 1000)
                return -EINVAL;
        i->client_trust = (unsigned) trust;
        return 0;
}

int protocol_decode_shrinker_info(struct json_object *o, struct shrinker_info_snapshot *ret) {
        assert(ret);

        struct shrinker_info_snapshot i = {};
        uint64_t uid = 0;
        int pid = 0, for_pid = 0, seeks = 0, batch = 0;
        const char *state;
        void *nodes;

        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_u64(o, "id", true, &i.id));
        TRY(get_string(o, "name", true, &i.name));
        TRY(get_int(o, "pid", true, &pid));
        TRY(get_int(o, "for_pid", false, &for_pid));
        if (for_pid < 0)
                return -EINVAL;
        TRY(get_u64(o, "uid", true, &uid));
        TRY(get_string(o, "cgroup", true, &i.cgroup));
        TRY(decode_flags(o, &i.flags));
        TRY(get_int(o, "seeks", true, &seeks));
        TRY(get_int(o, "batch", true, &batch));
        TRY(decode_shrinker_stats(o, &i.stats));
        TRY(decode_client_figures(o, &i));
        TRY(get_string(o, "state", true, &state));
        if (pid < 0 || seeks < 0 || batch < 0 || uid > UINT32_MAX)
                return -EINVAL;
        TRY(decode_array(o, "nodes", sizeof(struct shrinker_node_figures), decode_node_figures, &nodes, &i.n_nodes));
        i.nodes = nodes;
        i.pid = pid;
        i.for_pid = for_pid;
        i.uid = (uid_t) uid;
        i.seeks = (unsigned) seeks;
        i.batch = (unsigned) batch;
        i.quarantined = streq(state, "quarantined");
        struct json_object *reg = NULL;
        int r = get_u64(o, "limit", false, &i.limit);
        if (r >= 0)
                r = get_object(o, "regulation", &reg);
        if (r >= 0 && reg) {
                i.have_regulation = true;
                r = protocol_decode_regulation(reg, &i.regulation);
        }
        if (r < 0) {
                free(i.nodes);
                return r;
        }
        *ret = i;
        return 0;
}

const char *const protocol_errors[] = {
        PROTOCOL_ERROR_NO_SUCH_CGROUP,      PROTOCOL_ERROR_NO_SUCH_NODE,     PROTOCOL_ERROR_NO_SUCH_SHRINKER,
        PROTOCOL_ERROR_CGROUP_NOT_WATCHABLE, PROTOCOL_ERROR_UNKNOWN_REQUEST,  PROTOCOL_ERROR_INVALID_ANSWER,
        PROTOCOL_ERROR_SCOPE_REMOVED,       PROTOCOL_ERROR_SHUTTING_DOWN,    PROTOCOL_ERROR_PROTOCOL_VIOLATION,
        NULL,
};

/* ---- Answer ---- */

struct answer_call {
        const char *token;
        struct json_object *answers;
        struct shrink_answer one;
};

/* The numbers of one answer, alone in the call or an item of "answers". Any integer: a negative one is
 * an impossible answer (InvalidAnswer, from the round engine), not a malformed call. */
#define ANSWER_FIELDS(base)                                                                                \
        { "count", PARAM_INT, (base) + offsetof(struct shrink_answer, count), .min = INT64_MIN + 1 },     \
        { "bytes", PARAM_INT, (base) + offsetof(struct shrink_answer, bytes), .min = INT64_MIN + 1 },     \
        { "freed", PARAM_INT, (base) + offsetof(struct shrink_answer, freed), .min = INT64_MIN + 1 },     \
        { "scanned", PARAM_INT, (base) + offsetof(struct shrink_answer, scanned), .min = INT64_MIN + 1 }, \
        { "empty", PARAM_BOOL, (base) + offsetof(struct shrink_answer, empty) },                          \
        { "stop", PARAM_BOOL, (base) + offsetof(struct shrink_answer, stop) },                            \
        { "value", PARAM_FLOAT, (base) + offsetof(struct shrink_answer, value) }

const struct param protocol_answer_params[] = {
        { "token", PARAM_STRING, offsetof(struct answer_call, token), .mandatory = true },
        { "request", PARAM_INT, offsetof(struct answer_call, one.request) },
        { "answers", PARAM_ARRAY, offsetof(struct answer_call, answers) },
        ANSWER_FIELDS(offsetof(struct answer_call, one)),
        {}
};

const struct param protocol_answer_item_params[] = {
        { "request", PARAM_INT, offsetof(struct shrink_answer, request), .mandatory = true },
        ANSWER_FIELDS(0),
        {}
};

static const struct shrink_answer answer_absent = {
        .request = -1,
        .count = SHRINK_ANSWER_ABSENT,
        .bytes = SHRINK_ANSWER_ABSENT,
        .freed = SHRINK_ANSWER_ABSENT,
        .scanned = SHRINK_ANSWER_ABSENT,
};

static bool answer_has_fields(const struct shrink_answer *a) {
        return a->request >= 0 || a->count != SHRINK_ANSWER_ABSENT || a->bytes != SHRINK_ANSWER_ABSENT ||
               a->freed != SHRINK_ANSWER_ABSENT || a->scanned != SHRINK_ANSWER_ABSENT || a->empty || a->stop ||
               a->value != 0;
}

int protocol_decode_answer_call(struct json_object *params, const char **ret_token, struct shrink_answer **ret_items,
                                size_t *ret_n, const char **ret_bad) {
        assert(ret_n);

        struct answer_call call = { .one = answer_absent };
        int r = params_dispatch(params, protocol_answer_params, &call, ret_bad);
        *ret_token = call.token;
        if (r < 0)
                return r;

        size_t n = call.answers ? json_object_array_length(call.answers) : 1;
        if (call.answers ? answer_has_fields(&call.one) || n == 0 || n > PROTOCOL_ANSWERS_MAX : call.one.request < 0) {
                *ret_bad = call.answers ? "answers" : "request";
                return -EINVAL;
        }
        struct shrink_answer *items = calloc(n, sizeof(*items));
        if (!items)
                return -ENOMEM;
        if (!call.answers)
                items[0] = call.one;
        for (size_t i = 0; call.answers && i < n; i++) {
                struct json_object *o = json_object_array_get_idx(call.answers, i);
                const char *bad;
                items[i] = answer_absent;
                if (!json_object_is_type(o, json_type_object) || params_dispatch(o, protocol_answer_item_params, &items[i], &bad) < 0 ||
                    items[i].request < 0) {
                        free(items);
                        *ret_bad = "answers";
                        return -EINVAL;
                }
        }
        *ret_items = items;
        *ret_n = n;
        return 0;
}

/* ---- whole replies ---- */

static int decode_scope_state_item(struct json_object *o, void *ret) {
        return protocol_decode_scope_state(o, ret);
}

static int decode_shrink_result_item(struct json_object *o, void *ret) {
        return protocol_decode_shrink_result(o, ret);
}

int protocol_decode_status(struct json_object *o, struct status_snapshot *ret) {
        assert(ret);

        struct status_snapshot s = {};
        void *nodes = NULL, *cgroups = NULL;
        struct json_object *sys = NULL;
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(get_object(o, "system", &sys));
        if (!sys)
                return -EINVAL;
        TRY(protocol_decode_scope_state(sys, &s.system));
        TRY(decode_array(o, "nodes", sizeof(struct scope_snapshot), decode_scope_state_item, &nodes, &s.n_nodes));
        s.nodes = nodes;
        int r = decode_array(o, "cgroups", sizeof(struct scope_snapshot), decode_scope_state_item, &cgroups, &s.n_cgroups);
        if (r < 0) {
                free(nodes);
                return r;
        }
        s.cgroups = cgroups;
        *ret = s;
        return 0;
}

void protocol_status_done(struct status_snapshot *s) {
        if (!s)
                return;
        free(s->nodes);
        free(s->cgroups);
        *s = (struct status_snapshot){};
}

int protocol_decode_shrinkers_reply(struct json_object *o, struct shrinker_info_snapshot **ret, size_t *ret_n) {
        assert(ret);
        assert(ret_n);

        struct json_object *list = json_object_is_type(o, json_type_object) ? get(o, "shrinkers") : NULL;
        if (!list || !json_object_is_type(list, json_type_array))
                return -EINVAL;
        size_t n = json_object_array_length(list);
        struct shrinker_info_snapshot *a = calloc(MAX(n, 1u), sizeof(*a));
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = protocol_decode_shrinker_info(json_object_array_get_idx(list, i), &a[i]);
                if (r < 0) {
                        protocol_shrinker_infos_free(a, i);
                        return r;
                }
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

void protocol_shrinker_infos_free(struct shrinker_info_snapshot *infos, size_t n) {
        for (size_t i = 0; infos && i < n; i++)
                free(infos[i].nodes);
        free(infos);
}

int protocol_decode_shrink_reply(struct json_object *o, struct shrink_result **ret, size_t *ret_n) {
        assert(ret);
        assert(ret_n);

        void *results = NULL;
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        TRY(decode_array(o, "results", sizeof(struct shrink_result), decode_shrink_result_item, &results, ret_n));
        *ret = results;
        return 0;
}

/* ---- GetConfiguration ---- */

static struct json_object *string_list(const char *const *list, size_t n) {
        struct json_object *a = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                jb_append(&a, jb_new_string(list[i]));
        return a;
}

struct json_object *protocol_encode_configuration(const struct configuration_snapshot *c) {
        assert(c);

        struct json_object *o = json_object_new_object(), *levels = json_object_new_array();
        for (size_t l = 0; l < PROTOCOL_LEVELS; l++) {
                const struct level_thresholds *t = &c->levels[l];
                struct json_object *e = json_object_new_object(), *p = json_object_new_object();
                jb_set_string(&e, "level", level_to_string(t->level));
                jb_set_string(&p, "kind", psi_kind_to_string(t->pressure.kind));
                jb_set_u64(&p, "stall_usec", t->pressure.stall_usec);
                jb_set_u64(&p, "window_usec", t->pressure.window_usec);
                jb_set(&e, "pressure", p);
                if (t->have_headroom && t->headroom_bytes > 0)
                        jb_set_u64(&e, "headroom_bytes", t->headroom_bytes);
                else if (t->have_headroom)
                        jb_set(&e, "headroom_percent", percent(t->headroom_percent));
                jb_set(&e, "node_factor", percent(t->node_factor));
                jb_append(&levels, e);
        }
        jb_set(&o, "levels", levels);
        jb_set_u64(&o, "hold_usec", c->hold_usec);
        jb_set_u64(&o, "sample_interval_usec", c->sample_interval_usec);
        jb_set_u64(&o, "round_interval_usec", c->round_interval_usec);
        jb_set_u64(&o, "request_timeout_usec", c->request_timeout_usec);
        jb_set(&o, "cgroups", string_list(c->cgroups, c->n_cgroups));
        jb_set_string(&o, "memory_pressure_level", level_to_string(c->memory_pressure_level));
        jb_set(&o, "low_memory_monitor", json_object_new_boolean(c->low_memory_monitor));
        if (c->have_regulator) {
                jb_set_u64(&o, "regulate_budget_usec", c->regulate_budget_usec);
                jb_set_u64(&o, "regulate_interval_usec", c->regulate_interval_usec);
                jb_set(&o, "regulate_step_max_percent", percent(c->regulate_step_max_percent));
                struct json_object *regulated = json_object_new_array();
                for (size_t i = 0; i < c->n_regulate_cgroups; i++) {
                        struct json_object *e = json_object_new_object();
                        jb_set_string(&e, "pattern", c->regulate_cgroups[i].pattern);
                        jb_set_u64(&e, "budget_usec", c->regulate_cgroups[i].budget_usec);
                        jb_append(&regulated, e);
                }
                jb_set(&o, "regulate_cgroups", regulated);
                jb_set(&o, "reclaim_cgroups", string_list(c->reclaim_cgroups, c->n_reclaim_cgroups));
        }
        if (c->have_value_cgroups)
                jb_set(&o, "value_cgroups", string_list(c->value_cgroups, c->n_value_cgroups));
        jb_set_string(&o, "log_level", c->log_level);
        return o;
}

/* An array of strings, as an allocated array of pointers into it. Absent: 0 and nothing allocated. */
static int decode_strings(struct json_object *o, const char *key, bool mandatory, const char *const **ret,
                          size_t *ret_n) {
        struct json_object *list = get(o, key);
        if (!list)
                return mandatory ? -EINVAL : 0;
        if (!json_object_is_type(list, json_type_array))
                return -EINVAL;
        size_t n = json_object_array_length(list);
        const char **a = calloc(MAX(n, 1u), sizeof(char *));
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(list, i);
                if (!json_object_is_type(e, json_type_string)) {
                        free(a);
                        return -EINVAL;
                }
                a[i] = json_object_get_string(e);
        }
        *ret = a;
        *ret_n = n;
        return 1;
}

static int decode_level_thresholds(struct json_object *o, struct level_thresholds *ret) {
        struct level_thresholds t = {};
        struct json_object *p = NULL;
        const char *kind;
        TRY(get_level(o, "level", &t.level));
        TRY(get_object(o, "pressure", &p));
        if (!p)
                return -EINVAL;
        TRY(get_string(p, "kind", true, &kind));
        int k = psi_kind_from_string(kind);
        if (k < 0)
                return -EINVAL;
        t.pressure.kind = k;
        TRY(get_u64(p, "stall_usec", true, &t.pressure.stall_usec));
        TRY(get_u64(p, "window_usec", true, &t.pressure.window_usec));
        TRY(get_u64(o, "headroom_bytes", false, &t.headroom_bytes));
        if (get(o, "headroom_percent"))
                TRY(get_percent(o, "headroom_percent", &t.headroom_percent));
        t.have_headroom = t.headroom_bytes > 0 || get(o, "headroom_percent");
        TRY(get_percent(o, "node_factor", &t.node_factor));
        *ret = t;
        return 0;
}

static int decode_regulated_cgroup(struct json_object *o, void *ret) {
        struct regulated_cgroup g = {};
        TRY(get_string(o, "pattern", true, &g.pattern));
        TRY(get_u64(o, "budget_usec", true, &g.budget_usec));
        *(struct regulated_cgroup *) ret = g;
        return 0;
}

static int decode_configuration(struct json_object *o, struct configuration_snapshot *conf) {
        struct json_object *levels = get(o, "levels");
        if (!levels || !json_object_is_type(levels, json_type_array) ||
            json_object_array_length(levels) != PROTOCOL_LEVELS)
                return -EINVAL;
        for (size_t l = 0; l < PROTOCOL_LEVELS; l++)
                TRY(decode_level_thresholds(json_object_array_get_idx(levels, l), &conf->levels[l]));
        TRY(get_u64(o, "hold_usec", true, &conf->hold_usec));
        TRY(get_u64(o, "sample_interval_usec", true, &conf->sample_interval_usec));
        TRY(get_u64(o, "round_interval_usec", true, &conf->round_interval_usec));
        TRY(get_u64(o, "request_timeout_usec", true, &conf->request_timeout_usec));
        TRY(decode_strings(o, "cgroups", true, &conf->cgroups, &conf->n_cgroups));
        TRY(get_level(o, "memory_pressure_level", &conf->memory_pressure_level));
        if (!get(o, "low_memory_monitor"))
                return -EINVAL;
        TRY(get_bool(o, "low_memory_monitor", &conf->low_memory_monitor));
        conf->have_regulator = TRY_VALUE(get_u64(o, "regulate_budget_usec", false, &conf->regulate_budget_usec)) > 0;
        if (conf->have_regulator) {
                void *regulated = NULL;
                TRY(get_u64(o, "regulate_interval_usec", true, &conf->regulate_interval_usec));
                TRY(get_percent(o, "regulate_step_max_percent", &conf->regulate_step_max_percent));
                TRY(decode_array(o, "regulate_cgroups", sizeof(struct regulated_cgroup), decode_regulated_cgroup,
                                 &regulated, &conf->n_regulate_cgroups));
                conf->regulate_cgroups = regulated;
        }
        TRY(decode_strings(o, "reclaim_cgroups", false, &conf->reclaim_cgroups, &conf->n_reclaim_cgroups));
        conf->have_value_cgroups = TRY_VALUE(decode_strings(o, "value_cgroups", false, &conf->value_cgroups,
                                                         &conf->n_value_cgroups)) > 0;
        return get_string(o, "log_level", true, &conf->log_level);
}

int protocol_decode_configuration(struct json_object *o, struct configuration_snapshot *ret) {
        assert(ret);

        struct configuration_snapshot c = {};
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        int r = decode_configuration(o, &c);
        if (r < 0) {
                protocol_configuration_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

void protocol_configuration_done(struct configuration_snapshot *c) {
        if (!c)
                return;
        free((void *) c->cgroups);
        free((void *) c->regulate_cgroups);
        free((void *) c->reclaim_cgroups);
        free((void *) c->value_cgroups);
        *c = (struct configuration_snapshot){};
}

/* A copy of a list of strings' pointers, so that the snapshot owns its arrays whatever filled it. */
static const char *const *strings_of(char *const *list, size_t n) {
        const char **a = calloc(MAX(n, 1u), sizeof(char *));
        for (size_t i = 0; a && i < n; i++)
                a[i] = list[i];
        return a;
}

int protocol_configuration_of(const struct config *c, const char *log_level, struct configuration_snapshot *ret) {
        assert(c);
        assert(ret);

        const double factors[_LEVEL_MAX] = {
                [LEVEL_LOW] = c->node.low_factor,
                [LEVEL_MEDIUM] = c->node.medium_factor,
                [LEVEL_CRITICAL] = c->node.critical_factor,
        };
        struct configuration_snapshot s = {
                .hold_usec = c->hold_usec,
                .sample_interval_usec = c->sample_interval_usec,
                .round_interval_usec = c->round_interval_usec,
                .request_timeout_usec = c->request_timeout_usec,
                .memory_pressure_level = c->memory_pressure_level,
                .low_memory_monitor = c->low_memory_monitor,
                .have_regulator = true,
                .regulate_budget_usec = c->regulate_budget_usec,
                .regulate_interval_usec = c->regulate_interval_usec,
                .regulate_step_max_percent = (double) c->regulate_step_max_permille / 10,
                .have_value_cgroups = true,
                .log_level = log_level,
        };
        for (size_t i = 0; i < PROTOCOL_LEVELS; i++) {
                enum level l = LEVEL_LOW + (enum level) i;
                s.levels[i] = (struct level_thresholds){
                        .level = l,
                        .pressure = c->psi.t[l],
                        .have_headroom = c->headroom,
                        .headroom_bytes = c->headroom_at.left[l],
                        .headroom_percent = 100 * (1 - c->headroom_at.f[l]),
                        .node_factor = factors[l],
                };
        }
        s.cgroups = strings_of(c->cgroups, s.n_cgroups = c->n_cgroups);
        s.reclaim_cgroups = strings_of(c->reclaim_cgroups, s.n_reclaim_cgroups = c->n_reclaim_cgroups);
        s.value_cgroups = strings_of(c->value_cgroups, s.n_value_cgroups = c->n_value_cgroups);
        struct regulated_cgroup *regulated = calloc(MAX(c->n_regulate_cgroups, 1u), sizeof(*regulated));
        for (size_t i = 0; regulated && i < c->n_regulate_cgroups; i++)
                regulated[i] = (struct regulated_cgroup){ c->regulate_cgroups[i].pattern, c->regulate_cgroups[i].budget_usec };
        s.regulate_cgroups = regulated;
        s.n_regulate_cgroups = c->n_regulate_cgroups;
        if (!s.cgroups || !s.reclaim_cgroups || !s.value_cgroups || !regulated) {
                protocol_configuration_done(&s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}
