/* SPDX-License-Identifier: MIT */
#include "subscription.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "protocol.h"
#include "scope.h"
#include "varlink.h"

#define ERROR_SCOPE_REMOVED "io.pressured.ScopeRemoved"

struct subscription {
        struct manager *manager;
        struct varlink_connection *conn;
        enum level min_level;
        size_t n_watches, n_live;
        struct watch watches[];
};

static void watch_detach(struct watch *w) {
        struct scope *s = w->scope;
        if (!s)
                return;
        if (w->scope_prev)
                w->scope_prev->scope_next = w->scope_next;
        else
                s->watches = w->scope_next;
        if (w->scope_next)
                w->scope_next->scope_prev = w->scope_prev;
        w->scope = NULL;
        w->scope_prev = w->scope_next = NULL;
        w->sub->n_live--;
        manager_release_scope(w->sub->manager, s);
}

static void subscription_free(void *p) {
        struct subscription *sub = p;
        if (!sub)
                return;
        for (size_t i = 0; i < sub->n_watches; i++)
                watch_detach(&sub->watches[i]);
        free(sub);
}

static int watch_send(struct watch *w) {
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "event", protocol_level_change(w->scope, w->last_sent, w->coalesced));
        w->last_sent = w->scope->level.level;
        w->pending = 0;
        w->coalesced = 0;
        return varlink_notify(w->sub->conn, p);
}

/* A change matters to a subscriber when the scope reaches its level or drops back below it. */
static bool watch_wants(const struct watch *w) {
        const struct scope *s = w->scope;
        return s->level.level >= w->sub->min_level || s->previous >= w->sub->min_level;
}

static void watch_changed(struct watch *w) {
        if (!watch_wants(w))
                return;
        if (w->pending) {
                w->coalesced++;
                return;
        }
        if (varlink_connection_queued(w->sub->conn) >= SUBSCRIPTION_QUEUE_LIMIT) {
                w->pending = 1;
                return;
        }
        (void) watch_send(w);
}

/* The client read what we had queued: send what was held back, the latest state per scope with the
 * number of changes folded into it (even if the level is back where the client last saw it: it missed
 * something). */
static void on_drain(struct varlink_connection *c, void *data) {
        struct subscription *sub = data;
        (void) c;
        for (size_t i = 0; i < sub->n_watches; i++) {
                struct watch *w = &sub->watches[i];
                if (!w->pending || !w->scope)
                        continue;
                if (varlink_connection_queued(sub->conn) >= SUBSCRIPTION_QUEUE_LIMIT)
                        return;
                (void) watch_send(w);
        }
}

void subscription_scope_changed(struct scope *s) {
        /* One event text per "previous level": most subscribers share it, so encode it once, not once per
         * subscriber (10,000 subscribers of one scope is a case we measure). */
        struct json_object *cached[_LEVEL_MAX] = {};
        const char *text[_LEVEL_MAX] = {};
        size_t len[_LEVEL_MAX] = {};

        for (struct watch *w = s->watches, *next; w; w = next) {
                next = w->scope_next;
                if (!watch_wants(w) || w->pending || w->coalesced > 0 || w->last_sent >= _LEVEL_MAX ||
                    varlink_connection_queued(w->sub->conn) >= SUBSCRIPTION_QUEUE_LIMIT) {
                        watch_changed(w);
                        continue;
                }
                enum level prev = w->last_sent;
                if (!text[prev]) {
                        cached[prev] = json_object_new_object();
                        json_object_object_add(cached[prev], "event", protocol_level_change(s, prev, 0));
                        text[prev] = json_object_to_json_string_length(
                                cached[prev], JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len[prev]);
                }
                w->last_sent = s->level.level;
                (void) varlink_notify_serialized(w->sub->conn, text[prev], len[prev]);
        }
        for (int l = 0; l < _LEVEL_MAX; l++)
                json_object_put(cached[l]);
}

void subscription_scope_gone(struct scope *s) {
        /* Hold a reference so that detaching the last watch does not free the scope under us. */
        s->n_refs++;
        for (struct watch *w = s->watches, *next; w; w = next) {
                next = w->scope_next;
                struct subscription *sub = w->sub;

                if (sub->n_live > 1) {
                        /* Others remain: one last event for this scope, never held back. */
                        struct json_object *p = json_object_new_object();
                        json_object_object_add(p, "event", protocol_level_change(s, w->last_sent, w->coalesced));
                        (void) varlink_notify(sub->conn, p);
                        watch_detach(w);
                } else {
                        /* Nothing left to watch: end the call; this frees the subscription. */
                        struct json_object *p = json_object_new_object();
                        json_object_object_add(p, "scope", protocol_scope_ref(s));
                        (void) varlink_error(sub->conn, ERROR_SCOPE_REMOVED, p);
                }
        }
        manager_release_scope(s->manager, s);
}

int subscription_start(struct manager *m, struct varlink_connection *c, struct scope **scopes, size_t n_scopes,
                       enum level min_level) {
        struct subscription *sub = calloc(1, sizeof(*sub) + n_scopes * sizeof(struct watch));
        if (!sub) {
                for (size_t i = 0; i < n_scopes; i++)
                        manager_release_scope(m, scopes[i]);
                return -ENOMEM;
        }
        sub->manager = m;
        sub->conn = c;
        sub->min_level = min_level;
        sub->n_watches = sub->n_live = n_scopes;

        struct json_object *states = json_object_new_array();
        for (size_t i = 0; i < n_scopes; i++) {
                struct watch *w = &sub->watches[i];
                struct scope *s = scopes[i];
                w->sub = sub;
                w->scope = s;
                w->last_sent = s->level.level;
                w->scope_next = s->watches;
                if (s->watches)
                        s->watches->scope_prev = w;
                s->watches = w;
                json_object_array_add(states, protocol_scope_state(s));
        }
        varlink_connection_set_call_data(c, sub, subscription_free);
        varlink_connection_set_drain_handler(c, on_drain);

        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "state", states);
        return varlink_notify(c, p);
}

static void shutdown_scope(struct scope *s) {
        /* Ending a call frees its subscription and detaches its watches: always take the first. */
        while (s && s->watches) {
                struct subscription *sub = s->watches->sub;
                (void) varlink_error(sub->conn, "io.pressured.ShuttingDown", NULL);
        }
}

void subscription_shutdown_all(struct manager *m) {
        shutdown_scope(m->system);
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                shutdown_scope(m->node_scopes[i]);
        for (struct scope *s = m->cgroups; s; s = s->next)
                shutdown_scope(s);
}
