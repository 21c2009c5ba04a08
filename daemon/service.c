/* SPDX-License-Identifier: MIT */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "protocol.h"
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
        scope_refresh_psi(m->system);
        json_object_object_add(p, "system", protocol_scope_state(m->system));

        struct json_object *nodes = json_object_new_array();
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                json_object_array_add(nodes, protocol_scope_state(m->node_scopes[i]));
        json_object_object_add(p, "nodes", nodes);

        struct json_object *cgroups = json_object_new_array();
        for (struct scope *s = m->cgroups; s; s = s->next) {
                scope_refresh_psi(s);
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

static const struct varlink_method pressured_methods[] = {
        { "GetStatus", method_get_status },
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
