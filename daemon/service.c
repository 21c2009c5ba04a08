/* SPDX-License-Identifier: MIT */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "protocol.h"
#include "reclaim.h"
#include "shrinker.h"
#include "subscription.h"

#define ERROR_NO_SUCH_CGROUP "io.pressured.NoSuchCgroup"
#define ERROR_NO_SUCH_NODE "io.pressured.NoSuchNode"

/* Scopes named in one Subscribe call. */
#define SUBSCRIBE_MAX_SCOPES 256

static int method_get_status(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        static const char *const known[] = { NULL };
        struct manager *m = userdata;
        (void) flags;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;

        struct json_object *p = json_object_new_object();
        scope_refresh(m->system);
        json_object_object_add(p, "system", protocol_scope_state(m->system));

        struct json_object *nodes = json_object_new_array();
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                json_object_array_add(nodes, protocol_scope_state(m->node_scopes[i]));
        json_object_object_add(p, "nodes", nodes);

        struct json_object *cgroups = json_object_new_array();
        for (struct scope *s = m->cgroups; s; s = s->next) {
                scope_refresh(s);
                if (!s->gone)
                        json_object_array_add(cgroups, protocol_scope_state(s));
        }
        json_object_object_add(p, "cgroups", cgroups);
        return varlink_reply(c, p);
}

static int reply_no_such_cgroup(struct varlink_connection *c, const char *path) {
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "cgroup", json_object_new_string(path));
        return varlink_error(c, ERROR_NO_SUCH_CGROUP, p);
}

static int reply_no_such_node(struct varlink_connection *c, int node) {
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "node", json_object_new_int(node));
        return varlink_error(c, ERROR_NO_SUCH_NODE, p);
}

static void release_all(struct manager *m, struct scope **scopes, size_t n) {
        for (size_t i = 0; i < n; i++)
                manager_release_scope(m, scopes[i]);
}

static int method_subscribe(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        static const char *const known[] = { "scopes", "min_level", NULL };
        struct manager *m = userdata;
        struct json_object *v;
        enum level min_level = LEVEL_LOW;
        size_t n = 0;
        int r;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;

        if (json_object_object_get_ex(params, "min_level", &v) && !json_object_is_type(v, json_type_null)) {
                int l = json_object_is_type(v, json_type_string) ? level_from_string(json_object_get_string(v)) : -EINVAL;
                if (l < 0)
                        return varlink_error_invalid_parameter(c, "min_level");
                min_level = MAX(l, LEVEL_LOW); /* ok is not a level one waits for */
        }

        struct json_object *list = NULL;
        if (json_object_object_get_ex(params, "scopes", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_array))
                        return varlink_error_invalid_parameter(c, "scopes");
                list = v;
        }
        size_t n_refs = list ? json_object_array_length(list) : 0;
        if (n_refs > SUBSCRIBE_MAX_SCOPES)
                return varlink_error_invalid_parameter(c, "scopes");

        /* Check every reference before taking any: a bad one changes nothing. */
        struct scope_ref refs[SUBSCRIBE_MAX_SCOPES];
        for (size_t i = 0; i < n_refs; i++) {
                const char *field;
                if (protocol_parse_scope_ref(json_object_array_get_idx(list, i), &refs[i], &field) < 0)
                        return varlink_error_invalid_parameter(c, field);
        }

        if (!(flags & VARLINK_CALL_MORE))
                return varlink_error(c, VARLINK_ERROR_EXPECTED_MORE, NULL);

        _cleanup_free_ struct scope **scopes = calloc(MAX(n_refs, 1u), sizeof(struct scope *));
        if (!scopes)
                return -ENOMEM;

        if (n_refs == 0) {
                m->system->n_refs++;
                scopes[n++] = m->system;
        }
        for (size_t i = 0; i < n_refs; i++) {
                struct scope *s = NULL;
                bool dup = false;

                switch (refs[i].type) {
                case SCOPE_SYSTEM:
                        m->system->n_refs++;
                        s = m->system;
                        break;
                case SCOPE_NODE:
                        r = manager_acquire_node(m, refs[i].node, &s);
                        if (r < 0) {
                                release_all(m, scopes, n);
                                return reply_no_such_node(c, refs[i].node);
                        }
                        break;
                case SCOPE_CGROUP:
                        r = manager_acquire_cgroup(m, refs[i].cgroup, &s);
                        if (r == -EINVAL) {
                                release_all(m, scopes, n);
                                return varlink_error_invalid_parameter(c, "cgroup");
                        }
                        if (r == -ENOENT) {
                                release_all(m, scopes, n);
                                return reply_no_such_cgroup(c, refs[i].cgroup);
                        }
                        if (r < 0) {
                                release_all(m, scopes, n);
                                log_warning_errno(r, "Failed to watch cgroup %s: %m", refs[i].cgroup);
                                struct json_object *p = json_object_new_object();
                                json_object_object_add(p, "cgroup", json_object_new_string(refs[i].cgroup));
                                json_object_object_add(p, "errno", json_object_new_int(-r));
                                return varlink_error(c, "io.pressured.CgroupNotWatchable", p);
                        }
                        break;
                default:
                        abort();
                }
                /* The same scope twice is one watch. */
                for (size_t k = 0; k < n; k++)
                        if (scopes[k] == s)
                                dup = true;
                if (dup)
                        manager_release_scope(m, s);
                else
                        scopes[n++] = s;
        }

        return subscription_start(m, c, scopes, n, min_level);
}

/* ---- client shrinkers ---- */

#define SERVE_MAX_SHRINKERS 64
#define SHRINKER_NAME_MAX 64

static bool get_uint(struct json_object *params, const char *key, uint64_t max, uint64_t *ret, bool *present) {
        struct json_object *v;
        *present = false;
        if (!json_object_object_get_ex(params, key, &v) || json_object_is_type(v, json_type_null))
                return true;
        if (!json_object_is_type(v, json_type_int))
                return false;
        int64_t i = json_object_get_int64(v);
        if (i < 0 || (uint64_t) i > max)
                return false;
        *ret = (uint64_t) i;
        *present = true;
        return true;
}

static bool get_bool(struct json_object *params, const char *key, bool *ret) {
        struct json_object *v;
        if (!json_object_object_get_ex(params, key, &v) || json_object_is_type(v, json_type_null))
                return true;
        if (!json_object_is_type(v, json_type_boolean))
                return false;
        *ret = json_object_get_boolean(v);
        return true;
}

static bool name_ok(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > SHRINKER_NAME_MAX)
                return false;
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static void serve_free(void *data) {
        shrink_client_free(data);
}

static int method_serve(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        static const char *const known[] = { "shrinkers", NULL };
        static const char *const spec_known[] = { "name", "numa_aware", "memcg_aware", "seeks", "batch", NULL };
        struct manager *m = userdata;
        struct shrinker_spec specs[SERVE_MAX_SHRINKERS];
        struct json_object *list;
        int r;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;
        if (!json_object_object_get_ex(params, "shrinkers", &list) || !json_object_is_type(list, json_type_array) ||
            json_object_array_length(list) == 0 || json_object_array_length(list) > SERVE_MAX_SHRINKERS)
                return varlink_error_invalid_parameter(c, "shrinkers");

        size_t n = json_object_array_length(list);
        for (size_t i = 0; i < n; i++) {
                struct json_object *o = json_object_array_get_idx(list, i), *v;
                bool numa = false, memcg = false, present;
                uint64_t seeks = SHRINK_DEFAULT_SEEKS, batch = SHRINK_DEFAULT_BATCH;

                if (!json_object_is_type(o, json_type_object))
                        return varlink_error_invalid_parameter(c, "shrinkers");
                if (varlink_check_fields(c, o, spec_known) < 0)
                        return 0;
                if (!json_object_object_get_ex(o, "name", &v) || !json_object_is_type(v, json_type_string) ||
                    !name_ok(json_object_get_string(v)))
                        return varlink_error_invalid_parameter(c, "name");
                if (!get_bool(o, "numa_aware", &numa))
                        return varlink_error_invalid_parameter(c, "numa_aware");
                if (!get_bool(o, "memcg_aware", &memcg))
                        return varlink_error_invalid_parameter(c, "memcg_aware");
                if (!get_uint(o, "seeks", 1000, &seeks, &present))
                        return varlink_error_invalid_parameter(c, "seeks");
                if (!get_uint(o, "batch", 1u << 20, &batch, &present) || (present && batch == 0))
                        return varlink_error_invalid_parameter(c, "batch");
                specs[i] = (struct shrinker_spec){
                        .name = json_object_get_string(v),
                        .flags = (numa ? SHRINKER_NUMA_AWARE : 0) | (memcg ? SHRINKER_MEMCG_AWARE : 0),
                        .seeks = (unsigned) seeks,
                        .batch = (unsigned) batch,
                };
        }
        if (!(flags & VARLINK_CALL_MORE))
                return varlink_error(c, VARLINK_ERROR_EXPECTED_MORE, NULL);

        struct shrink_client *cl;
        r = shrink_client_new(m, c, specs, n, &cl);
        if (r < 0) {
                log_warning_errno(r, "Cannot register shrinkers of pid %d: %m", (int) varlink_connection_peer(c)->pid);
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, NULL);
        }
        varlink_connection_set_call_data(c, cl, serve_free);

        struct json_object *p = json_object_new_object(), *reg = json_object_new_object(),
                           *ids = json_object_new_array();
        json_object_object_add(reg, "token", json_object_new_string(cl->token));
        for (size_t i = 0; i < cl->n_shrinkers; i++) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "id", json_object_new_int64((int64_t) cl->shrinkers[i]->id));
                json_object_object_add(o, "name", json_object_new_string(cl->shrinkers[i]->name));
                json_object_array_add(ids, o);
        }
        json_object_object_add(reg, "shrinkers", ids);
        json_object_object_add(p, "registered", reg);
        r = varlink_notify(c, p);
        reclaim_clients_changed(m);
        return r;
}

static int method_answer(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        static const char *const known[] = { "token", "request", "count", "bytes", "empty", "freed", "scanned", "stop", NULL };
        struct manager *m = userdata;
        struct json_object *v;
        (void) flags;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;
        if (!json_object_object_get_ex(params, "token", &v) || !json_object_is_type(v, json_type_string))
                return varlink_error_invalid_parameter(c, "token");
        struct shrink_client *cl = shrink_client_by_token(m, json_object_get_string(v));
        const struct ucred *peer = varlink_connection_peer(c);
        /* The token alone is not enough: the answer must come from the process that registered. */
        if (!cl || peer->uid != cl->uid || peer->pid != cl->pid)
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, NULL);

        uint64_t request = 0, count = 0, bytes = 0, freed = 0, scanned = 0;
        bool has_request, has_count, has_bytes, has_freed, has_scanned, empty = false, stop = false;
        const char *bad = NULL;
        if (!get_uint(params, "request", UINT64_MAX >> 1, &request, &has_request) || !has_request)
                bad = "request";
        else if (!get_uint(params, "count", INT64_MAX, &count, &has_count))
                bad = "count";
        else if (!get_uint(params, "bytes", INT64_MAX, &bytes, &has_bytes))
                bad = "bytes";
        else if (!get_uint(params, "freed", INT64_MAX, &freed, &has_freed))
                bad = "freed";
        else if (!get_uint(params, "scanned", INT64_MAX, &scanned, &has_scanned))
                bad = "scanned";
        else if (!get_bool(params, "empty", &empty))
                bad = "empty";
        else if (!get_bool(params, "stop", &stop))
                bad = "stop";
        if (bad) {
                cl->rejected++;
                return varlink_error_invalid_parameter(c, bad);
        }

        struct shrink_answer a = {
                .count = has_count ? (int64_t) count : -1,
                .bytes = has_bytes ? (int64_t) bytes : -1,
                .freed = has_freed ? (int64_t) freed : -1,
                .scanned = has_scanned ? (int64_t) scanned : -1,
                .empty = empty,
                .stop = stop,
        };
        const char *reason = NULL;
        int r = reclaim_answer(cl, request, &a, &reason);
        if (r == -ENOENT) {
                struct json_object *p = json_object_new_object();
                json_object_object_add(p, "request", json_object_new_int64((int64_t) request));
                return varlink_error(c, "io.pressured.UnknownRequest", p);
        }
        if (r == -EINVAL) {
                struct json_object *p = json_object_new_object();
                json_object_object_add(p, "reason", json_object_new_string(reason));
                return varlink_error(c, "io.pressured.InvalidAnswer", p);
        }
        return varlink_reply(c, NULL);
}

static int method_list_shrinkers(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                 void *userdata) {
        static const char *const known[] = { NULL };
        struct manager *m = userdata;
        (void) flags;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;
        struct json_object *list = json_object_new_array();
        for (struct shrink_client *cl = m->shrink_clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++)
                        json_object_array_add(list, protocol_shrinker_info(cl->shrinkers[i]));
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "shrinkers", list);
        return varlink_reply(c, p);
}

static int method_shrink(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        static const char *const known[] = { "scope", "nr_to_scan", "shrinker", NULL };
        struct manager *m = userdata;
        struct scope_ref ref = { .type = SCOPE_SYSTEM };
        struct json_object *v;
        uint64_t nr = 0, id = 0;
        bool has_nr, has_id;
        int node_index = 0;
        (void) flags;

        if (varlink_check_fields(c, params, known) < 0)
                return 0;
        if (json_object_object_get_ex(params, "scope", &v) && !json_object_is_type(v, json_type_null)) {
                const char *field;
                if (protocol_parse_scope_ref(v, &ref, &field) < 0)
                        return varlink_error_invalid_parameter(c, field);
        }
        if (!get_uint(params, "nr_to_scan", INT64_MAX, &nr, &has_nr) || (has_nr && nr == 0))
                return varlink_error_invalid_parameter(c, "nr_to_scan");
        if (!get_uint(params, "shrinker", INT64_MAX, &id, &has_id))
                return varlink_error_invalid_parameter(c, "shrinker");

        struct shrinker *only = NULL;
        if (has_id) {
                only = shrinker_by_id(m, id);
                if (!only) {
                        struct json_object *p = json_object_new_object();
                        json_object_object_add(p, "shrinker", json_object_new_int64((int64_t) id));
                        return varlink_error(c, "io.pressured.NoSuchShrinker", p);
                }
        }
        /* Like writing to shrinker debugfs: root, or the owner of the one shrinker named. */
        uid_t uid = varlink_connection_peer(c)->uid;
        if (uid != 0 && (!only || only->client->uid != uid))
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, NULL);

        _cleanup_free_ char *cgroup = NULL;
        if (ref.type == SCOPE_NODE) {
                struct scope *s;
                if (manager_acquire_node(m, ref.node, &s) < 0)
                        return reply_no_such_node(c, ref.node);
                node_index = (int) s->node_index;
                manager_release_scope(m, s);
        } else if (ref.type == SCOPE_CGROUP) {
                if (cgroup_path_normalize(ref.cgroup, &cgroup) < 0)
                        return varlink_error_invalid_parameter(c, "cgroup");
                if (!m->have_layout || cgroup_check(&m->layout, cgroup) < 0)
                        return reply_no_such_cgroup(c, ref.cgroup);
        }
        return reclaim_shrink_now(m, c, ref.type, node_index, cgroup, nr, only);
}

static const struct varlink_method pressured_methods[] = {
        { "Answer", method_answer },
        { "GetStatus", method_get_status },
        { "ListShrinkers", method_list_shrinkers },
        { "Serve", method_serve },
        { "Shrink", method_shrink },
        { "Subscribe", method_subscribe },
};

const struct varlink_interface service_interfaces[] = {
        {
                .name = "io.pressured",
                .description = protocol_interface_description,
                .methods = pressured_methods,
                .n_methods = ELEMENTSOF(pressured_methods),
        },
};

const size_t service_n_interfaces = ELEMENTSOF(service_interfaces);
