/* SPDX-License-Identifier: MIT */
#include "service.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json_build.h"
#include "log.h"
#include "macro.h"
#include "params.h"
#include "protocol.h"
#include "varlink_service.h"


/* Scopes named in one Subscribe call. */
#define SUBSCRIBE_MAX_SCOPES 256
#define SERVE_MAX_SHRINKERS 64
#define SHRINKER_NAME_MAX 64

struct service {
        struct scope_registry *scopes;
        struct subscriptions *subscriptions;
        struct shrink_registry *shrinkers;
        struct reclaim *reclaim;
        const struct cgroup_layout *layout;
        const struct config *config;
        /* Serving calls with requests not sent yet, and the deferred source that sends them: requests
         * made for one client in one turn of the loop leave in one message (a round asks all of a
         * client's shrinkers at once, and answers in one call make its next requests at once). */
        struct serve_call *outbox;
        sd_event_source *flush;
};

/* One streaming Serve call: the shrink client's owner. */
struct serve_call {
        struct service *svc;
        struct varlink_connection *conn;
        struct shrink_client *client;
        bool batched;                /* the client takes "requests", a list, in one reply */
        bool limits;                 /* the client takes growth limits */
        struct json_text queued; /* the reply being put together: requests not sent yet */
        struct serve_call *outbox_next;
};

static int parse_params(struct varlink_connection *c, struct json_object *params, const struct param *table,
                        void *out) {
        return varlink_parse_params(c, params, table, out);
}

static const struct param no_params[] = { {} };

static struct json_object *scope_state(const struct service *svc, const struct scope *s) {
        struct scope_snapshot snap;
        scope_snapshot(s, &snap);
        snap.have_regulation = reclaim_regulation(svc->reclaim, s, &snap.regulation) >= 0;
        return protocol_encode_scope_state(&snap);
}

static int reply_error_with(struct varlink_connection *c, const char *error, const char *key,
                            struct json_object *value) {
        return varlink_error(c, error, jb_object_with(key, value));
}

/* ---- GetStatus ---- */

/* Pieces of a reply written as text (varlink_reply_serialized()). */
static int text_put(struct json_text *t, const char *s) {
        return json_text_append(t, s, strlen(s));
}

/* The value's text, and the value is gone: one piece's tree at a time. */
static int text_put_value(struct json_text *t, struct json_object *v) {
        if (!v)
                return -ENOMEM;
        int r = json_text_append_value(t, v);
        json_object_put(v);
        return r;
}

static int method_get_status(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        struct service *svc = userdata;
        struct scope_registry *reg = svc->scopes;
        (void) flags;

        if (parse_params(c, params, no_params, NULL) < 0)
                return 0;

        /* Written a scope at a time: no tree of the whole, however many cgroups are watched. */
        _cleanup_(json_text_done) struct json_text t = {};
        scope_refresh(reg->system); /* PSI figures as of the call */
        int r = text_put(&t, protocol_status_envelope[PROTOCOL_STATUS_SYSTEM]);
        if (r >= 0)
                r = text_put_value(&t, scope_state(svc, reg->system));
        if (r >= 0)
                r = text_put(&t, protocol_status_envelope[PROTOCOL_STATUS_NODES]);
        for (size_t i = 0; i < reg->n_nodes && r >= 0; i++) {
                r = text_put(&t, i > 0 ? "," : "");
                if (r >= 0)
                        r = text_put_value(&t, scope_state(svc, reg->nodes[i]));
        }
        if (r >= 0)
                r = text_put(&t, protocol_status_envelope[PROTOCOL_STATUS_CGROUPS]);
        bool first = true;
        for (struct scope *s = scope_registry_next_cgroup(reg, NULL); s && r >= 0; s = scope_registry_next_cgroup(reg, s)) {
                scope_refresh(s);
                if (scope_is_gone(s))
                        continue;
                r = text_put(&t, first ? "" : ",");
                if (r >= 0)
                        r = text_put_value(&t, scope_state(svc, s));
                first = false;
        }
        if (r >= 0)
                r = text_put(&t, protocol_status_envelope[PROTOCOL_STATUS_END]);
        return varlink_reply_serialized(c, r >= 0 ? t.data : NULL, t.len);
}

/* ---- GetConfiguration ---- */

static int method_get_configuration(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                    void *userdata) {
        struct service *svc = userdata;
        (void) flags;
        if (parse_params(c, params, no_params, NULL) < 0)
                return 0;
        struct configuration_snapshot conf;
        struct json_object *reply = NULL;
        if (protocol_configuration_of(svc->config, log_level_to_string(log_get_max_level()), &conf) >= 0) {
                reply = protocol_encode_configuration(&conf);
                protocol_configuration_done(&conf);
        }
        return varlink_reply(c, reply); /* NULL: out of memory, the connection goes */
}

/* ---- SetLogLevel ---- */

struct set_log_level_params {
        const char *level;
};

static const struct param set_log_level_table[] = {
        { "level", PARAM_STRING, offsetof(struct set_log_level_params, level), .mandatory = true },
        {}
};

/* As systemd's io.systemd.service.SetLogLevel: root only, until the next reload or restart. */
static int method_set_log_level(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                void *userdata) {
        struct set_log_level_params p = {};
        (void) flags;
        (void) userdata;
        if (parse_params(c, params, set_log_level_table, &p) < 0)
                return 0;
        if (varlink_connection_peer(c)->uid != 0)
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        int level = log_level_from_string(p.level);
        if (level < 0)
                return varlink_error_invalid_parameter(c, "level");
        if (level != log_get_max_level())
                log_notice("Log level set to %s by pid %d.", log_level_to_string(level),
                           (int) varlink_connection_peer(c)->pid);
        log_set_max_level(level);
        return varlink_reply(c, json_object_new_object());
}

/* ---- Subscribe ---- */

static int reply_no_such_cgroup(struct varlink_connection *c, const char *path) {
        return reply_error_with(c, PROTOCOL_ERROR_NO_SUCH_CGROUP, "cgroup", jb_new_string(path));
}

static int reply_no_such_node(struct varlink_connection *c, int node) {
        return reply_error_with(c, PROTOCOL_ERROR_NO_SUCH_NODE, "node", json_object_new_int(node));
}

/* The reply for a scope that cannot be acquired. */
static int reply_acquire_error(struct varlink_connection *c, const struct scope_id *id, int r) {
        if (r == -ENOMEM)
                return r; /* the daemon's trouble, not an answer about the cgroup: the connection goes */
        if (id->type == SCOPE_NODE)
                return reply_no_such_node(c, id->node);
        if (r == -EINVAL)
                return varlink_error_invalid_parameter(c, "cgroup");
        if (r == -ENOENT)
                return reply_no_such_cgroup(c, id->cgroup);
        if (r != -EACCES && r != -EDQUOT) /* refused for the caller: its doing, not the daemon's fault */
                log_client_errno(varlink_connection_peer(c)->uid, LOG_WARNING, r, "Failed to watch cgroup %s: %m",
                                 id->cgroup);
        struct json_object *p = json_object_new_object();
        jb_set_string(&p, "cgroup", id->cgroup);
        jb_set_int(&p, "errno", -r);
        return varlink_error(c, PROTOCOL_ERROR_CGROUP_NOT_WATCHABLE, p);
}

/* Watching a cgroup means arming a PSI trigger on its memory.pressure, with the daemon's privileges
 * (with CAP_SYS_RESOURCE, a trigger the kernel serves from a realtime thread). A user other than root
 * may have the daemon do that only where it could itself: it may write the file, owns the cgroup, or
 * the cgroup holds the user's own process (its ancestors' pressure is its own). A cgroup already
 * watched arms nothing new: anyone may read its state. */
static bool may_watch(const struct service *svc, struct varlink_connection *c, const struct scope_id *id) {
        const struct ucred *peer = varlink_connection_peer(c);
        _cleanup_free_ char *path = NULL, *own = NULL;
        _cleanup_free_ gid_t *gids = NULL;
        size_t n_gids = 0;

        if (id->type != SCOPE_CGROUP || peer->uid == 0)
                return true;
        if (cgroup_path_normalize(id->cgroup, &path) < 0)
                return true; /* acquiring it says what is wrong with it */
        if (scope_registry_find_cgroup(svc->scopes, path))
                return true;
        /* The cgroup of the process that connected, if that process still lives: after it exited its
         * pid may be anyone's, and so would the cgroup read through it. */
        _cleanup_close_ int pidfd = varlink_connection_peer_pidfd(c);
        _cleanup_close_ int proc = pidfd >= 0 ? pidref_open_proc_pidfd(pidfd, peer->pid)
                                              : pidref_open_proc(varlink_connection_peer_ref(c));
        if (proc >= 0 && cgroup_proc_get_path(proc, &own) >= 0 && shrink_cgroup_within(own, path))
                return true;
        if (varlink_connection_peer_groups(c, &gids, &n_gids) < 0)
                return false;
        int r = cgroup_may_watch(svc->layout, path, peer->uid, gids, n_gids);
        return r != 0; /* an error (no such cgroup) is for acquiring it to report */
}

static void release_all(struct scope_registry *reg, uid_t uid, struct scope **scopes, size_t n) {
        for (size_t i = 0; i < n; i++)
                scope_registry_release_for(reg, uid, scopes[i]);
}

/* Acquire every scope named, the same one once. On failure nothing stays acquired and the returned
 * index says which reference failed. */
static int acquire_scopes(struct scope_registry *reg, uid_t uid, const struct scope_id *ids, size_t n_ids,
                          struct scope **scopes, size_t *ret_n, size_t *ret_failed) {
        size_t n = 0;
        for (size_t i = 0; i < n_ids; i++) {
                struct scope *s;
                int r = scope_registry_acquire_for(reg, uid, &ids[i], &s);
                if (r < 0) {
                        release_all(reg, uid, scopes, n);
                        *ret_failed = i;
                        return r;
                }
                bool dup = false;
                for (size_t k = 0; k < n; k++)
                        dup = dup || scopes[k] == s;
                if (dup)
                        scope_registry_release_for(reg, uid, s);
                else
                        scopes[n++] = s;
        }
        *ret_n = n;
        return 0;
}

struct subscribe_params {
        struct json_object *scopes;
        int min_level;
};

static const struct param subscribe_table[] = {
        { "min_level", PARAM_LEVEL, offsetof(struct subscribe_params, min_level) },
        { "scopes", PARAM_ARRAY, offsetof(struct subscribe_params, scopes) },
        {}
};

static void subscription_free_void(void *p) {
        subscription_free(p);
}

static void on_subscription_drain(struct varlink_connection *c, void *data) {
        (void) c;
        subscription_drained(data);
}

static int method_subscribe(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        struct service *svc = userdata;
        struct subscribe_params p = { .min_level = LEVEL_LOW };
        struct scope_id ids[SUBSCRIBE_MAX_SCOPES] = { { .type = SCOPE_SYSTEM } };
        size_t n_ids = 1, n, failed;

        if (parse_params(c, params, subscribe_table, &p) < 0)
                return 0;
        if (p.scopes) {
                n_ids = json_object_array_length(p.scopes);
                if (n_ids > SUBSCRIBE_MAX_SCOPES)
                        return varlink_error_invalid_parameter(c, "scopes");
                /* Check every reference before taking any: a bad one changes nothing. */
                for (size_t i = 0; i < n_ids; i++) {
                        const char *field;
                        if (protocol_decode_scope_ref(json_object_array_get_idx(p.scopes, i), &ids[i], &field) < 0)
                                return varlink_error_invalid_parameter(c, field);
                }
                if (n_ids == 0) {
                        ids[0] = (struct scope_id){ .type = SCOPE_SYSTEM };
                        n_ids = 1;
                }
        }
        if (!(flags & VARLINK_CALL_MORE))
                return varlink_error(c, VARLINK_ERROR_EXPECTED_MORE, json_object_new_object());
        const struct ucred *peer = varlink_connection_peer(c);
        size_t left = scope_registry_budget_left(svc->scopes, peer->uid);
        for (size_t i = 0; i < n_ids; i++) {
                if (!may_watch(svc, c, &ids[i]))
                        return reply_acquire_error(c, &ids[i], -EACCES);
                /* Each is a trigger and a file descriptor: a user with a delegated subtree of thousands
                 * of cgroups would take the daemon's descriptors from everyone. The whole call fits in
                 * the user's budget, or nothing is taken. */
                if (ids[i].type == SCOPE_CGROUP && left-- == 0)
                        return reply_acquire_error(c, &ids[i], -EDQUOT);
        }

        _cleanup_free_ struct scope **scopes = calloc(n_ids, sizeof(struct scope *));
        if (!scopes)
                return -ENOMEM;
        int r = acquire_scopes(svc->scopes, peer->uid, ids, n_ids, scopes, &n, &failed);
        if (r < 0)
                return reply_acquire_error(c, &ids[failed], r);
        /* ok is not a level one waits for */
        struct subscription *sub;
        r = subscription_start(svc->subscriptions, c, peer->uid, scopes, n, MAX(p.min_level, LEVEL_LOW), &sub);
        if (r < 0)
                return r;
        /* The call holds it: it goes when the call ends, however that happens. */
        varlink_connection_set_call_data(c, sub, subscription_free_void);
        varlink_connection_set_drain_handler(c, on_subscription_drain);
        return subscription_send_state(sub);
}

/* Subscriptions reach their subscriber through the Subscribe call. */
static int sink_send(void *endpoint, const char *params, size_t len) {
        return varlink_notify_serialized(endpoint, params, len);
}

static size_t sink_queued(void *endpoint) {
        return varlink_connection_queued(endpoint);
}

static void sink_end(void *endpoint, const char *error, struct json_object *params) {
        (void) varlink_error(endpoint, error, params);
}

const struct subscription_sink service_subscription_sink = {
        .send = sink_send,
        .queued = sink_queued,
        .end = sink_end,
};

/* ---- Serve ---- */

struct spec_params {
        const char *name;
        bool numa_aware, memcg_aware;
        int64_t seeks, batch;
};

const struct param service_shrinker_spec_params[] = {
        { "name", PARAM_STRING, offsetof(struct spec_params, name), .mandatory = true },
        { "numa_aware", PARAM_BOOL, offsetof(struct spec_params, numa_aware) },
        { "memcg_aware", PARAM_BOOL, offsetof(struct spec_params, memcg_aware) },
        { "seeks", PARAM_INT, offsetof(struct spec_params, seeks), .max = 1000 },
        { "batch", PARAM_INT, offsetof(struct spec_params, batch), .min = 1, .max = 1 << 20 },
        {}
};

struct serve_params {
        struct json_object *shrinkers;
        bool batched;
        int64_t for_pid;
        bool limits;
};

static const struct param serve_table[] = {
        { "shrinkers", PARAM_ARRAY, offsetof(struct serve_params, shrinkers), .mandatory = true },
        { "batched", PARAM_BOOL, offsetof(struct serve_params, batched) },
        { "for_pid", PARAM_INT, offsetof(struct serve_params, for_pid), .min = 1, .max = INT32_MAX },
        { "limits", PARAM_BOOL, offsetof(struct serve_params, limits) },
        {}
};

static bool name_ok(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > SHRINKER_NAME_MAX)
                return false;
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

/* Parse one shrinker spec; on error the reply is sent and -EINVAL returned. */
static int parse_spec(struct varlink_connection *c, struct json_object *o, struct shrinker_spec *ret) {
        struct spec_params p = { .seeks = SHRINK_DEFAULT_SEEKS, .batch = SHRINK_DEFAULT_BATCH };

        if (!json_object_is_type(o, json_type_object)) {
                (void) varlink_error_invalid_parameter(c, "shrinkers");
                return -EINVAL;
        }
        if (parse_params(c, o, service_shrinker_spec_params, &p) < 0)
                return -EINVAL;
        if (!name_ok(p.name)) {
                (void) varlink_error_invalid_parameter(c, "name");
                return -EINVAL;
        }
        *ret = (struct shrinker_spec){
                .name = p.name,
                .flags = (p.numa_aware ? SHRINKER_NUMA_AWARE : 0) | (p.memcg_aware ? SHRINKER_MEMCG_AWARE : 0),
                .seeks = (unsigned) p.seeks,
                .batch = (unsigned) p.batch,
        };
        return 0;
}

/* Parse the shrinker specs of a Serve call; on error the reply is sent and -EINVAL returned. */
static int parse_specs(struct varlink_connection *c, struct json_object *list, struct shrinker_spec *specs,
                       size_t *ret_n) {
        size_t n = json_object_array_length(list);
        if (n == 0 || n > SERVE_MAX_SHRINKERS) {
                (void) varlink_error_invalid_parameter(c, "shrinkers");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                if (parse_spec(c, json_object_array_get_idx(list, i), &specs[i]) < 0)
                        return -EINVAL;
        *ret_n = n;
        return 0;
}

static void serve_free(void *data) {
        struct serve_call *call = data;
        struct service *svc = call->svc;

        for (struct serve_call **p = &svc->outbox; *p; p = &(*p)->outbox_next)
                if (*p == call) {
                        *p = call->outbox_next;
                        break;
                }
        json_text_done(&call->queued);
        shrink_client_free(call->client);
        free(call);
}

/* Pin the caller: the kernel's pidfd of the peer, or (before Linux 6.5) its pid pinned now and checked
 * to be the process that connected. -EPERM when that process is gone (its socket passed on or
 * inherited): a connection nobody holds as its own registers nothing. */
static int pin_caller(struct varlink_connection *c, int *ret_pidfd) {
        const struct ucred *peer = varlink_connection_peer(c);
        int pidfd = varlink_connection_peer_pidfd(c);
        if (pidfd < 0) {
                pidfd = pidfd_open(peer->pid);
                _cleanup_close_ int proc = pidfd >= 0 ? pidref_open_proc(varlink_connection_peer_ref(c)) : -ESRCH;
                if (proc < 0) {
                        if (pidfd >= 0)
                                close(pidfd);
                        return -EPERM;
                }
        } else if (!pidfd_alive(pidfd)) {
                close(pidfd);
                return -EPERM;
        }
        *ret_pidfd = pidfd;
        return 0;
}

/* Pin the process whose memory the shrinkers free, and the caller. The caller itself, or another
 * process (for_pid: an adapter for a server that cannot link libpressure): only one the caller could
 * signal itself, so that nobody places shrinkers in, or is measured by, another user's process; the
 * registry checks that again as long as the client lives. -EPERM: not the caller's to name, or the
 * caller is gone; -ESRCH: no such process. */
static int serve_pin(struct varlink_connection *c, pid_t measured, int *ret_pidfd, int *ret_caller_pidfd) {
        const struct ucred *peer = varlink_connection_peer(c);
        _cleanup_close_ int caller = -EBADF;
        int r = pin_caller(c, &caller);
        if (r < 0)
                return r;
        if (measured != peer->pid) {
                r = pidfd_open_for_uid(measured, peer->uid, ret_pidfd);
                if (r < 0)
                        return r;
                *ret_caller_pidfd = TAKE_FD(caller);
                return 0;
        }
        *ret_pidfd = TAKE_FD(caller);
        *ret_caller_pidfd = -EBADF;
        return 0;
}

static int method_serve(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        struct service *svc = userdata;
        struct shrinker_spec specs[SERVE_MAX_SHRINKERS];
        struct serve_params p = {};
        struct shrink_client *cl;
        size_t n;

        if (parse_params(c, params, serve_table, &p) < 0 || parse_specs(c, p.shrinkers, specs, &n) < 0)
                return 0;
        if (!(flags & VARLINK_CALL_MORE))
                return varlink_error(c, VARLINK_ERROR_EXPECTED_MORE, json_object_new_object());

        const struct ucred *peer = varlink_connection_peer(c);
        pid_t measured = p.for_pid > 0 ? (pid_t) p.for_pid : peer->pid;
        _cleanup_close_ int pidfd = -EBADF, caller_pidfd = -EBADF;
        int r = serve_pin(c, measured, &pidfd, &caller_pidfd);
        if (r < 0)
                log_client_errno(peer->uid, LOG_WARNING, r, "Cannot register shrinkers of pid %d%s: %m", (int) peer->pid,
                                 measured != peer->pid ? " for another process" : "");
        if (r < 0)
                return r == -EPERM ? varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object())
                                   : varlink_error_invalid_parameter(c, "for_pid");
        struct serve_call *call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (struct serve_call){ .svc = svc, .conn = c, .batched = p.batched, .limits = p.limits };
        r = shrink_client_new(svc->shrinkers, peer->pid, measured, pidfd, caller_pidfd, peer->uid, call, specs,
                              n, &cl);
        if (r < 0) {
                free(call);
                if (r == -ENOMEM)
                        return r; /* the connection closes: this is the daemon's trouble, not a refusal */
                log_client_errno(peer->uid, LOG_WARNING, r, "Cannot register shrinkers of pid %d: %m", (int) peer->pid);
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        }
        call->client = cl;
        varlink_connection_set_call_data(c, call, serve_free);

        struct shrinker_ref refs[SERVE_MAX_SHRINKERS];
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                refs[i] = (struct shrinker_ref){ .id = cl->shrinkers[i]->id, .name = cl->shrinkers[i]->name };
        const struct shrink_registration g = { .token = cl->token, .n_shrinkers = cl->n_shrinkers, .shrinkers = refs };
        r = varlink_notify(c, protocol_reply_registered(&g));
        if (r < 0)
                return r; /* the connection goes, and the client with it */
        shrink_client_start(cl);
        return 0;
}

/* The client's process exited: close its serving connection, which unregisters it. */
static void on_client_exit(struct shrink_client *cl, void *userdata) {
        struct serve_call *call = cl->owner;
        (void) userdata;
        varlink_connection_close(call->conn);
}

/* ---- Answer ---- */

/* The token alone is not enough: the answer must come from the process that registered. */
static struct shrink_client *answer_client(struct service *svc, struct varlink_connection *c, const char *token) {
        struct shrink_client *cl = token ? shrink_client_by_token(svc->shrinkers, token) : NULL;
        const struct ucred *peer = varlink_connection_peer(c);
        return cl && peer->uid == cl->uid && peer->pid == cl->pid ? cl : NULL;
}

/* Each answer of a list stands on its own: the good ones are applied, the reply names the first bad. */
static int method_answer(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        struct service *svc = userdata;
        _cleanup_free_ struct shrink_answer *items = NULL;
        const char *token = NULL, *bad = NULL, *reason = NULL, *first_reason = NULL;
        int64_t first_unknown = -1, first_invalid = -1;
        size_t n = 0;
        (void) flags;

        int r = protocol_decode_answer_call(params, &token, &items, &n, &bad);
        if (r == -ENOMEM)
                return r;
        /* An unknown parameter, or no token: nothing to count it against. */
        if (r < 0 && !token)
                return varlink_error_invalid_parameter(c, bad);
        struct shrink_client *cl = answer_client(svc, c, token);
        if (!cl)
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        if (r < 0)
                return varlink_error_invalid_parameter(c, bad);

        for (size_t i = 0; i < n; i++) {
                const struct shrink_answer *a = &items[i];
                r = reclaim_answer(svc->reclaim, cl, a, &reason);
                if (r == -ENOENT && first_unknown < 0)
                        first_unknown = a->request;
                if (r == -EINVAL && first_invalid < 0) {
                        first_invalid = a->request;
                        first_reason = reason;
                }
        }
        if (first_invalid >= 0) {
                struct json_object *e = json_object_new_object();
                jb_set_string(&e, "reason", first_reason);
                jb_set(&e, "request", json_object_new_int64(first_invalid));
                return varlink_error(c, PROTOCOL_ERROR_INVALID_ANSWER, e);
        }
        if (first_unknown >= 0)
                return reply_error_with(c, PROTOCOL_ERROR_UNKNOWN_REQUEST, "request", json_object_new_int64(first_unknown));
        return varlink_reply(c, json_object_new_object());
}

/* ---- AddShrinker, RemoveShrinker: one shrinker of a serving client, the others untouched ---- */

struct add_shrinker_params {
        const char *token;
        struct json_object *shrinker;
};

static const struct param add_shrinker_table[] = {
        { "token", PARAM_STRING, offsetof(struct add_shrinker_params, token), .mandatory = true },
        { "shrinker", PARAM_OBJECT, offsetof(struct add_shrinker_params, shrinker), .mandatory = true },
        {}
};

static int method_add_shrinker(struct varlink_connection *c, struct json_object *params, unsigned flags,
                               void *userdata) {
        struct service *svc = userdata;
        struct add_shrinker_params p = {};
        struct shrinker_spec spec;
        struct shrinker *sh;
        (void) flags;

        if (parse_params(c, params, add_shrinker_table, &p) < 0 || parse_spec(c, p.shrinker, &spec) < 0)
                return 0;
        struct shrink_client *cl = answer_client(svc, c, p.token);
        if (!cl)
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        int r = shrink_client_add_shrinker(cl, &spec, SERVE_MAX_SHRINKERS, &sh);
        if (r == -E2BIG || r == -EDQUOT) /* this connection's, or this user's, are as many as may be */
                return varlink_error_invalid_parameter(c, "shrinker");
        if (r < 0)
                return r;
        return varlink_reply(c, protocol_reply_added_shrinker(&(const struct shrinker_ref){ .id = sh->id, .name = sh->name }));
}

struct remove_shrinker_params {
        const char *token;
        int64_t shrinker;
};

static const struct param remove_shrinker_table[] = {
        { "token", PARAM_STRING, offsetof(struct remove_shrinker_params, token), .mandatory = true },
        { "shrinker", PARAM_INT, offsetof(struct remove_shrinker_params, shrinker), .min = 1, .mandatory = true },
        {}
};

static int method_remove_shrinker(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                  void *userdata) {
        struct service *svc = userdata;
        struct remove_shrinker_params p = {};
        (void) flags;

        if (parse_params(c, params, remove_shrinker_table, &p) < 0)
                return 0;
        struct shrink_client *cl = answer_client(svc, c, p.token);
        if (!cl)
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        struct shrinker *sh = shrinker_by_id(svc->shrinkers, (uint64_t) p.shrinker);
        /* Another client's shrinker is as unknown to this one as a removed one. */
        if (!sh || sh->client != cl)
                return reply_error_with(c, PROTOCOL_ERROR_NO_SUCH_SHRINKER, "shrinker", json_object_new_int64(p.shrinker));
        shrink_client_remove_shrinker(cl, sh);
        return varlink_reply(c, json_object_new_object());
}

/* ---- ListShrinkers ---- */

static int method_list_shrinkers(struct varlink_connection *c, struct json_object *params, unsigned flags,
                                 void *userdata) {
        struct service *svc = userdata;
        (void) flags;

        if (parse_params(c, params, no_params, NULL) < 0)
                return 0;
        /* Written a shrinker at a time: no tree of the whole. */
        _cleanup_(json_text_done) struct json_text t = {};
        int r = text_put(&t, protocol_shrinkers_envelope[0]);
        bool first = true;
        for (struct shrink_client *cl = svc->shrinkers->clients; cl && r >= 0; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers && r >= 0; i++) {
                        struct shrinker_info_snapshot info;
                        r = reclaim_shrinker_info(svc->reclaim, cl->shrinkers[i], &info);
                        if (r < 0)
                                break;
                        r = text_put(&t, first ? "" : ",");
                        if (r >= 0)
                                r = text_put_value(&t, protocol_encode_shrinker_info(&info));
                        free(info.nodes);
                        first = false;
                }
        if (r >= 0)
                r = text_put(&t, protocol_shrinkers_envelope[1]);
        return varlink_reply_serialized(c, r >= 0 ? t.data : NULL, t.len);
}

/* ---- Shrink ---- */

struct shrink_params {
        struct json_object *scope;
        int64_t nr_to_scan, shrinker;
        bool measure, dry_run;
};

static const struct param shrink_table[] = {
        { "scope", PARAM_OBJECT, offsetof(struct shrink_params, scope) },
        { "nr_to_scan", PARAM_INT, offsetof(struct shrink_params, nr_to_scan), .min = 1 },
        { "shrinker", PARAM_INT, offsetof(struct shrink_params, shrinker) },
        { "measure", PARAM_BOOL, offsetof(struct shrink_params, measure) },
        { "dry_run", PARAM_BOOL, offsetof(struct shrink_params, dry_run) },
        {}
};

/* Where a Shrink goes: node index or normalised cgroup. On error the reply is sent and <0 returned. */
static int shrink_resolve_scope(struct service *svc, struct varlink_connection *c, const struct scope_id *id,
                                struct shrink_target *t, char **ret_cgroup) {
        t->type = id->type;
        if (id->type == SCOPE_NODE) {
                struct scope *s = scope_registry_find_node(svc->scopes, id->node);
                if (!s) {
                        (void) reply_no_such_node(c, id->node);
                        return -ENXIO;
                }
                t->node_index = scope_node_index(s);
        } else if (id->type == SCOPE_CGROUP) {
                if (cgroup_path_normalize(id->cgroup, ret_cgroup) < 0) {
                        (void) varlink_error_invalid_parameter(c, "cgroup");
                        return -EINVAL;
                }
                if (!svc->layout || cgroup_check(svc->layout, *ret_cgroup) < 0) {
                        (void) reply_no_such_cgroup(c, id->cgroup);
                        return -ENOENT;
                }
                t->cgroup = *ret_cgroup;
        }
        return 0;
}

static void shrink_call_free(void *round) {
        reclaim_shrink_detach(round);
}

static int method_shrink(struct varlink_connection *c, struct json_object *params, unsigned flags, void *userdata) {
        struct service *svc = userdata;
        struct shrink_params p = { .nr_to_scan = 0, .shrinker = -1 };
        struct scope_id id = { .type = SCOPE_SYSTEM };
        struct shrink_target t = {};
        _cleanup_free_ char *cgroup = NULL;
        (void) flags;

        if (parse_params(c, params, shrink_table, &p) < 0)
                return 0;
        if (p.scope) {
                const char *field;
                if (protocol_decode_scope_ref(p.scope, &id, &field) < 0)
                        return varlink_error_invalid_parameter(c, field);
        }
        if (p.shrinker >= 0) {
                t.only = shrinker_by_id(svc->shrinkers, (uint64_t) p.shrinker);
                if (!t.only)
                        return reply_error_with(c, PROTOCOL_ERROR_NO_SUCH_SHRINKER, "shrinker", json_object_new_int64(p.shrinker));
        }
        /* Like writing to shrinker debugfs: root, or the owner of the one shrinker named. */
        uid_t uid = varlink_connection_peer(c)->uid;
        if (uid != 0 && (!t.only || t.only->client->uid != uid))
                return varlink_error(c, VARLINK_ERROR_PERMISSION_DENIED, json_object_new_object());
        if (shrink_resolve_scope(svc, c, &id, &t, &cgroup) < 0)
                return 0;
        t.nr_to_scan = (uint64_t) p.nr_to_scan;
        t.measure = p.measure;
        t.dry_run = p.dry_run;

        struct shrink_round *round;
        int r = reclaim_shrink_new(svc->reclaim, c, &round);
        if (r < 0)
                return r;
        /* Held by the call: if the caller goes first, the round finishes without it. */
        varlink_connection_set_call_data(c, round, shrink_call_free);
        reclaim_shrink_start(round, &t);
        return 0;
}

/* ---- reclaim's transport ---- */

/* Send what is queued for each serving call. */
static int on_flush(sd_event_source *source, void *userdata) {
        struct service *svc = userdata;
        (void) source;

        while (svc->outbox) {
                struct serve_call *call = svc->outbox;
                svc->outbox = call->outbox_next;
                call->outbox_next = NULL;
                int r = json_text_append(&call->queued, "]}", 2);
                if (r >= 0)
                        r = varlink_notify_serialized(call->conn, call->queued.data, call->queued.len);
                json_text_done(&call->queued);
                if (r < 0)
                        log_debug_errno(r, "Cannot send requests to pid %d: %m", (int) call->client->pid);
        }
        return 0;
}

static int transport_send_request(struct shrink_client *cl, const struct shrink_request_snapshot *q, void *userdata) {
        struct service *svc = userdata;
        struct serve_call *call = cl->owner;

        int r;

        if (!call->batched) {
                _cleanup_(json_text_done) struct json_text t = {};
                r = json_text_append(&t, "{\"request\":", 11);
                if (r >= 0)
                        r = protocol_text_append_shrink_request(&t, q);
                if (r >= 0)
                        r = json_text_append(&t, "}", 1);
                return r < 0 ? r : varlink_notify_serialized(call->conn, t.data, t.len);
        }
        size_t mark = call->queued.len;
        bool first = mark == 0;
        r = json_text_append(&call->queued, first ? "{\"requests\":[" : ",", first ? 13 : 1);
        if (r >= 0)
                r = protocol_text_append_shrink_request(&call->queued, q);
        if (r < 0) {
                /* Unsent (the request runs into its deadline); what is queued stays whole. */
                json_text_truncate(&call->queued, mark);
                return r;
        }
        if (first) {
                call->outbox_next = svc->outbox;
                svc->outbox = call;
                r = sd_event_source_set_enabled(svc->flush, SD_EVENT_ONESHOT);
        }
        return r;
}

/* Growth limits go in a reply of their own, at once: a cache told a lower limit trims before the
 * requests queued beside it arrive. Only to a client that asked for them. */
static int transport_send_limits(struct shrink_client *cl, const struct shrinker_limit *limits, size_t n, void *userdata) {
        struct serve_call *call = cl->owner;
        (void) userdata;

        if (!call->limits || n == 0)
                return 0;
        return varlink_notify(call->conn, protocol_reply_limits(limits, n));
}

static void transport_shrink_done(void *caller, const struct shrink_result *results, size_t n, void *userdata) {
        (void) userdata;
        (void) varlink_reply(caller, protocol_reply_shrink(results, n));
}

const struct reclaim_transport service_reclaim_transport = {
        .send_request = transport_send_request,
        .send_limits = transport_send_limits,
        .shrink_done = transport_shrink_done,
};

/* ---- the interface ---- */

static const struct varlink_method pressured_methods[] = {
        { "AddShrinker", method_add_shrinker, add_shrinker_table },
        { "Answer", method_answer, protocol_answer_params },
        { "GetConfiguration", method_get_configuration, no_params },
        { "GetStatus", method_get_status, no_params },
        { "ListShrinkers", method_list_shrinkers, no_params },
        { "RemoveShrinker", method_remove_shrinker, remove_shrinker_table },
        { "Serve", method_serve, serve_table },
        { "SetLogLevel", method_set_log_level, set_log_level_table },
        { "Shrink", method_shrink, shrink_table },
        { "Subscribe", method_subscribe, subscribe_table },
};

const struct varlink_interface service_interfaces[] = {
        VARLINK_SERVICE_INTERFACE,
        {
                .name = "io.pressured",
                .description = protocol_interface_description,
                .methods = pressured_methods,
                .n_methods = ELEMENTSOF(pressured_methods),
        },
};

const size_t service_n_interfaces = ELEMENTSOF(service_interfaces);

int service_new(struct scope_registry *scopes, struct subscriptions *subscriptions, struct shrink_registry *shrinkers,
                const struct cgroup_layout *layout, const struct config *config, struct service **ret) {
        assert(scopes);

        struct service *svc = calloc(1, sizeof(*svc));
        if (!svc)
                return -ENOMEM;
        *svc = (struct service){
                .scopes = scopes,
                .subscriptions = subscriptions,
                .shrinkers = shrinkers,
                .layout = layout,
                .config = config,
        };
        int r = sd_event_add_defer(shrinkers->event, &svc->flush, on_flush, svc);
        if (r < 0) {
                free(svc);
                return r;
        }
        (void) sd_event_source_set_enabled(svc->flush, SD_EVENT_OFF);
        (void) sd_event_source_set_description(svc->flush, "shrink-requests");
        shrink_registry_set_exit_handler(shrinkers, on_client_exit, svc);
        *ret = svc;
        return 0;
}

struct service *service_free(struct service *svc) {
        if (!svc)
                return NULL;
        /* The serving calls are gone by now (the server is freed first); nothing is queued. */
        sd_event_source_disable_unref(svc->flush);
        free(svc);
        return NULL;
}

void service_set_reclaim(struct service *svc, struct reclaim *rc) {
        assert(svc);

        svc->reclaim = rc;
}
