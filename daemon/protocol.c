/* SPDX-License-Identifier: MIT */
#include "protocol.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "manager.h"
#include "reclaim.h"

int protocol_parse_scope_ref(struct json_object *o, struct scope_ref *ret, const char **ret_field) {
        struct scope_ref r = { .node = -1 };
        struct json_object *type = NULL, *node = NULL, *cgroup = NULL;

        *ret_field = "scopes";
        if (!json_object_is_type(o, json_type_object))
                return -EINVAL;
        json_object_object_foreach(o, key, val) {
                if (streq(key, "type"))
                        type = val;
                else if (streq(key, "node"))
                        node = val;
                else if (streq(key, "cgroup"))
                        cgroup = val;
                else {
                        *ret_field = "scopes";
                        return -EINVAL;
                }
        }

        *ret_field = "type";
        if (!type || !json_object_is_type(type, json_type_string))
                return -EINVAL;
        int t = scope_type_from_string(json_object_get_string(type));
        if (t < 0)
                return -EINVAL;
        r.type = t;

        if (node && !json_object_is_type(node, json_type_null)) {
                *ret_field = "node";
                if (t != SCOPE_NODE || !json_object_is_type(node, json_type_int))
                        return -EINVAL;
                int64_t v = json_object_get_int64(node);
                if (v < 0 || v > INT_MAX)
                        return -EINVAL;
                r.node = (int) v;
        }
        if (cgroup && !json_object_is_type(cgroup, json_type_null)) {
                *ret_field = "cgroup";
                if (t != SCOPE_CGROUP || !json_object_is_type(cgroup, json_type_string))
                        return -EINVAL;
                r.cgroup = json_object_get_string(cgroup);
        }
        if (t == SCOPE_NODE && r.node < 0) {
                *ret_field = "node";
                return -EINVAL;
        }
        if (t == SCOPE_CGROUP && !r.cgroup) {
                *ret_field = "cgroup";
                return -EINVAL;
        }
        *ret = r;
        return 0;
}

struct json_object *protocol_scope_ref(const struct scope *s) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "type", json_object_new_string(scope_type_to_string(s->type)));
        if (s->type == SCOPE_NODE)
                json_object_object_add(o, "node", json_object_new_int(s->node));
        else if (s->type == SCOPE_CGROUP)
                json_object_object_add(o, "cgroup", json_object_new_string(s->cgroup));
        return o;
}

/* PSI averages have two decimals in the kernel's text; keep them so rather than as binary noise. */
static struct json_object *percent(double v) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.2f", v);
        return json_object_new_double_s(v, buf);
}

static struct json_object *stall(const struct psi_line *l) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "avg10", percent(l->avg10));
        json_object_object_add(o, "avg60", percent(l->avg60));
        json_object_object_add(o, "avg300", percent(l->avg300));
        json_object_object_add(o, "total", json_object_new_int64((int64_t) l->total));
        return o;
}

static void add_figures(struct json_object *o, const struct scope *s) {
        if (s->type != SCOPE_NODE && s->have_psi) {
                struct json_object *p = json_object_new_object();
                json_object_object_add(p, "some", stall(&s->psi.line[PSI_SOME]));
                if (s->psi.has_full)
                        json_object_object_add(p, "full", stall(&s->psi.line[PSI_FULL]));
                json_object_object_add(o, "pressure", p);
        }
        if (s->type == SCOPE_NODE && s->manager->nodes) {
                const struct node_monitor *nm = s->manager->nodes;
                const struct node_sample *n = &nm->cur[s->node_index];
                uint64_t page = (uint64_t) nm->page_size;
                struct json_object *mem = json_object_new_object();
                json_object_object_add(mem, "total", json_object_new_int64((int64_t) (n->mem_total_kb * 1024)));
                json_object_object_add(mem, "free", json_object_new_int64((int64_t) (n->mem_free_kb * 1024)));
                json_object_object_add(mem, "watermark_min", json_object_new_int64((int64_t) (n->min_pages * page)));
                json_object_object_add(mem, "watermark_low", json_object_new_int64((int64_t) (n->low_pages * page)));
                json_object_object_add(mem, "watermark_high", json_object_new_int64((int64_t) (n->high_pages * page)));
                json_object_object_add(mem, "numa_foreign", json_object_new_int64((int64_t) n->numa_foreign));
                json_object_object_add(mem, "refault_anon", json_object_new_int64((int64_t) n->refault_anon));
                json_object_object_add(mem, "refault_file", json_object_new_int64((int64_t) n->refault_file));
                json_object_object_add(o, "memory", mem);
        }
        if (s->type == SCOPE_CGROUP && s->usage_bytes > 0) {
                struct json_object *mem = json_object_new_object();
                json_object_object_add(mem, "usage", json_object_new_int64((int64_t) s->usage_bytes));
                if (s->limit_bytes != UINT64_MAX)
                        json_object_object_add(mem, "limit", json_object_new_int64((int64_t) s->limit_bytes));
                json_object_object_add(o, "cgroup_memory", mem);
        }
        json_object_object_add(o, "reclaim_target", json_object_new_int64((int64_t) s->reclaim_target));
}

struct json_object *protocol_scope_state(const struct scope *s) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "scope", protocol_scope_ref(s));
        json_object_object_add(o, "level", json_object_new_string(level_to_string(s->level.level)));
        add_figures(o, s);
        json_object_object_add(o, "since", json_object_new_int64((int64_t) s->changed_usec));
        return o;
}

struct json_object *protocol_level_change(const struct scope *s, enum level previous, unsigned coalesced) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "scope", protocol_scope_ref(s));
        json_object_object_add(o, "previous", json_object_new_string(level_to_string(previous)));
        json_object_object_add(o, "level", json_object_new_string(level_to_string(s->level.level)));
        add_figures(o, s);
        json_object_object_add(o, "timestamp", json_object_new_int64((int64_t) s->changed_usec));
        if (coalesced > 0)
                json_object_object_add(o, "coalesced", json_object_new_int((int) MIN(coalesced, (unsigned) INT_MAX)));
        if (s->gone)
                json_object_object_add(o, "removed", json_object_new_boolean(1));
        return o;
}

struct json_object *protocol_shrink_request(const struct shrink_request *q) {
        const struct shrink_job *j = q->job;
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_int64((int64_t) q->id));
        json_object_object_add(o, "shrinker", json_object_new_int64((int64_t) j->shrinker->id));
        json_object_object_add(o, "op", json_object_new_string(q->op == SHRINK_OP_COUNT ? "count" : "scan"));
        json_object_object_add(o, "node", json_object_new_int(j->node));
        json_object_object_add(o, "cgroup", json_object_new_string(j->cgroup));
        if (q->op == SHRINK_OP_SCAN)
                json_object_object_add(o, "nr_to_scan", json_object_new_int64((int64_t) q->nr_to_scan));
        json_object_object_add(o, "priority", json_object_new_int(j->priority));
        json_object_object_add(o, "deadline", json_object_new_int64((int64_t) q->deadline_usec));
        return o;
}

struct json_object *protocol_shrinker_info(const struct shrinker *sh) {
        const struct shrink_client *cl = sh->client;
        const struct node_monitor *nm = cl->manager->nodes;
        struct json_object *o = json_object_new_object(), *flags = json_object_new_array();

        json_object_object_add(o, "id", json_object_new_int64((int64_t) sh->id));
        json_object_object_add(o, "name", json_object_new_string(sh->name));
        json_object_object_add(o, "pid", json_object_new_int((int) cl->pid));
        json_object_object_add(o, "uid", json_object_new_int64((int64_t) cl->uid));
        json_object_object_add(o, "cgroup", json_object_new_string(cl->cgroup));
        if (sh->flags & SHRINKER_NUMA_AWARE)
                json_object_array_add(flags, json_object_new_string("numa_aware"));
        if (sh->flags & SHRINKER_MEMCG_AWARE)
                json_object_array_add(flags, json_object_new_string("memcg_aware"));
        json_object_object_add(o, "flags", flags);
        json_object_object_add(o, "seeks", json_object_new_int((int) sh->seeks));
        json_object_object_add(o, "batch", json_object_new_int((int) sh->batch));

        struct json_object *nodes = json_object_new_array();
        for (size_t i = 0; i < sh->n_nodes; i++) {
                struct json_object *n = json_object_new_object();
                json_object_object_add(n, "node", json_object_new_int(nm ? nm->cur[i].id : 0));
                json_object_object_add(n, "objects", json_object_new_int64((int64_t) sh->last_count[i]));
                json_object_object_add(n, "bytes", json_object_new_int64((int64_t) sh->last_bytes[i]));
                json_object_object_add(n, "deferred", json_object_new_int64((int64_t) sh->deferred[i]));
                json_object_array_add(nodes, n);
        }
        json_object_object_add(o, "nodes", nodes);

        const struct shrinker_stats *st = &sh->stats;
        json_object_object_add(o, "calls", json_object_new_int64((int64_t) st->calls));
        json_object_object_add(o, "scanned", json_object_new_int64((int64_t) st->scanned));
        json_object_object_add(o, "freed", json_object_new_int64((int64_t) st->freed));
        json_object_object_add(o, "bytes_freed", json_object_new_int64((int64_t) st->bytes_freed));
        json_object_object_add(o, "timeouts", json_object_new_int64((int64_t) st->timeouts));
        json_object_object_add(o, "stops", json_object_new_int64((int64_t) st->stops));
        json_object_object_add(o, "last_latency_usec", json_object_new_int64((int64_t) st->last_latency_usec));
        json_object_object_add(o, "worst_latency_usec", json_object_new_int64((int64_t) st->worst_latency_usec));
        json_object_object_add(o, "rejected_answers", json_object_new_int64((int64_t) cl->rejected));
        json_object_object_add(o, "state", json_object_new_string(sh->health.quarantined ? "quarantined" : "active"));
        return o;
}
