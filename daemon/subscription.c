/* SPDX-License-Identifier: MIT */
#include "subscription.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "json_build.h"
#include "list.h"
#include "time-util.h"
#include "log.h"
#include "macro.h"
#include "protocol.h"


struct subscriptions {
        struct scope_registry *registry;
        const struct subscription_sink *sink;
        int slot; /* on each scope: the head of its watch list */
        size_t n_subscriptions;
};

struct subscription;

struct watch {
        struct subscription *sub;
        struct scope *scope; /* NULL once the scope is gone */
        struct watch *scope_prev, *scope_next;
        enum level last_sent; /* what this subscriber was last told */
        unsigned coalesced;   /* changes folded into the pending one */
        bool pending;
};

struct subscription {
        struct subscriptions *subs;
        const struct subscription_sink *sink;
        void *endpoint; /* the sink's: where this subscriber's events go */
        uid_t uid;
        enum level min_level;
        size_t n_watches, n_live;
        struct watch watches[];
};

SCOPE_SLOT_ACCESSORS(watches_slot, struct watch);

/* The head of the scope's watch list. */
static struct watch *scope_watches(const struct subscriptions *subs, const struct scope *s) {
        return watches_slot_get(s, subs->slot);
}

static void watch_detach(struct watch *w) {
        struct scope *s = w->scope;
        if (!s)
                return;
        struct subscriptions *subs = w->sub->subs;
        struct watch *head = scope_watches(subs, s);
        LIST_REMOVE_F(scope_prev, scope_next, head, w);
        watches_slot_set(s, subs->slot, head);
        w->scope = NULL;
        w->sub->n_live--;
        scope_registry_release_for(subs->registry, w->sub->uid, s);
}

void subscription_free(struct subscription *sub) {
        if (!sub)
                return;
        for (size_t i = 0; i < sub->n_watches; i++)
                watch_detach(&sub->watches[i]);
        sub->subs->n_subscriptions--;
        free(sub);
}

/* Sending goes through the sink, as serialized parameters. A notification that cannot be built or sent
 * is the sink's to act on (the Varlink sink drops the connection): a subscriber never silently misses
 * an event and carries on. */
static int sub_send_serialized(struct subscription *sub, const char *text, size_t len) {
        return sub->sink->send(sub->endpoint, text, len);
}

static int sub_send(struct subscription *sub, struct json_object *params) {
        _cleanup_(json_text_done) struct json_text t = {};
        int r = params ? json_text_append_value(&t, params) : -ENOMEM;
        json_object_put(params);
        return sub_send_serialized(sub, r < 0 ? NULL : t.data, r < 0 ? 0 : t.len);
}

static void sub_end(struct subscription *sub, const char *error, struct json_object *params) {
        sub->sink->end(sub->endpoint, error, params);
}

static struct json_object *level_change_params(const struct scope *s, enum level previous, unsigned coalesced) {
        struct scope_snapshot snap;
        scope_snapshot(s, &snap);
        return jb_object_with("event", protocol_encode_level_change(&snap, previous, coalesced));
}

static int watch_send(struct watch *w) {
        struct json_object *p = level_change_params(w->scope, w->last_sent, w->coalesced);
        w->last_sent = scope_level(w->scope);
        w->pending = false;
        w->coalesced = 0;
        return sub_send(w->sub, p);
}

/* A change matters to a subscriber when the scope reaches its level or drops back below it, and when it
 * is back at ok while the subscriber was last told something else: one that fell through two levels
 * (critical, then medium, then ok, for a critical subscriber) is told of the medium and must hear of
 * the ok too. */
static bool watch_wants(const struct watch *w) {
        const struct scope *s = w->scope;
        if (scope_level(s) >= w->sub->min_level || scope_previous(s) >= w->sub->min_level)
                return true;
        return scope_level(s) == LEVEL_OK && w->last_sent < _LEVEL_MAX && w->last_sent != LEVEL_OK;
}

static bool sub_backlogged(const struct subscription *sub) {
        return sub->sink->queued(sub->endpoint) >= SUBSCRIPTION_QUEUE_LIMIT;
}

static bool watch_backlogged(const struct watch *w) {
        return sub_backlogged(w->sub);
}

static void watch_changed(struct watch *w) {
        if (!watch_wants(w))
                return;
        if (w->pending) {
                w->coalesced++;
                return;
        }
        if (watch_backlogged(w)) {
                w->pending = true;
                return;
        }
        (void) watch_send(w);
}

/* The client read what we had queued: send what was held back, the latest state per scope with the
 * number of changes folded into it (even if the level is back where the client last saw it: it missed
 * something). */
void subscription_drained(struct subscription *sub) {
        assert(sub);

        for (size_t i = 0; i < sub->n_watches; i++) {
                struct watch *w = &sub->watches[i];
                if (!w->pending || !w->scope)
                        continue;
                if (watch_backlogged(w))
                        return;
                (void) watch_send(w);
        }
}

/* One event text per "previous level": most subscribers share it, so encode it once, not once per
 * subscriber (10,000 subscribers of one scope is a case we measure). */
struct event_cache {
        struct json_text text[_LEVEL_MAX];
};

/* NULL when encoding failed: that fails the notification, and the subscriber's connection goes rather
 * than miss an event without knowing. */
static const char *event_cache_get(struct event_cache *c, const struct scope *s, enum level prev, size_t *ret_len) {
        struct json_text *t = &c->text[prev];
        if (t->len == 0) {
                struct json_object *p = level_change_params(s, prev, 0);
                if (!p || json_text_append_value(t, p) < 0)
                        json_text_done(t);
                json_object_put(p);
        }
        *ret_len = t->len;
        return t->data;
}

static void event_cache_done(struct event_cache *c) {
        for (int l = 0; l < _LEVEL_MAX; l++)
                json_text_done(&c->text[l]);
}

static void on_level_changed(struct scope *s, void *userdata) {
        struct subscriptions *subs = userdata;
        struct event_cache cache = {};

        for (struct watch *w = scope_watches(subs, s), *next; w; w = next) {
                next = w->scope_next;
                /* The shared text fits only a subscriber that is up to date and reading. */
                if (!watch_wants(w) || w->pending || w->coalesced > 0 || w->last_sent >= _LEVEL_MAX ||
                    watch_backlogged(w)) {
                        watch_changed(w);
                        continue;
                }
                size_t len;
                const char *text = event_cache_get(&cache, s, w->last_sent, &len);
                w->last_sent = scope_level(s);
                (void) sub_send_serialized(w->sub, text, len);
        }
        event_cache_done(&cache);
}

static void on_gone(struct scope *s, void *userdata) {
        struct subscriptions *subs = userdata;

        for (struct watch *w = scope_watches(subs, s), *next; w; w = next) {
                next = w->scope_next;
                struct subscription *sub = w->sub;

                if (sub->n_live > 1) {
                        /* Others remain: one last event for this scope, never held back. */
                        (void) sub_send(sub, level_change_params(s, w->last_sent, w->coalesced));
                        watch_detach(w);
                } else {
                        /* Nothing left to watch: end the call; this frees the subscription. */
                        struct scope_id id = scope_get_id(s);
                        sub_end(sub, PROTOCOL_ERROR_SCOPE_REMOVED, jb_object_with("scope", protocol_encode_scope_ref(&id)));
                }
        }
}

/* The kernel hit a limit or killed in the scope: every subscriber of the scope hears of it, whatever
 * its min_level (a kill is news at any level), unless it does not read: then it is counted in the next
 * level change's coalesced changes rather than queued without bound. */
static void on_memory_event(struct scope *s, enum memory_event e, uint64_t count, void *userdata) {
        struct subscriptions *subs = userdata;
        struct memory_event_snapshot snap = {
                .id = scope_get_id(s), .kind = e, .count = count, .timestamp = clock_now_usec(CLOCK_MONOTONIC)
        };

        for (struct watch *w = scope_watches(subs, s), *next; w; w = next) {
                next = w->scope_next;
                if (watch_backlogged(w)) {
                        w->coalesced++;
                        continue;
                }
                (void) sub_send(w->sub, jb_object_with("memory_event", protocol_encode_memory_event(&snap)));
        }
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
        .gone = on_gone,
        .memory_event = on_memory_event,
};

int subscriptions_new(struct scope_registry *reg, const struct subscription_sink *sink, struct subscriptions **ret) {
        assert(reg);
        assert(sink && sink->send && sink->queued && sink->end);
        assert(ret);

        struct subscriptions *subs = calloc(1, sizeof(*subs));
        if (!subs)
                return -ENOMEM;
        subs->registry = reg;
        subs->sink = sink;
        int r = subs->slot = scope_registry_add_observer(reg, &observer, subs);
        if (r < 0) {
                free(subs);
                return r;
        }
        *ret = subs;
        return 0;
}

struct subscriptions *subscriptions_free(struct subscriptions *subs) {
        assert(subs);

        /* Subscriptions themselves belong to their connections, which are gone by now. */
        free(subs);
        return NULL;
}

int subscription_start(struct subscriptions *subs, void *endpoint, uid_t uid, struct scope **scopes, size_t n_scopes,
                       enum level min_level, struct subscription **ret) {
        assert(subs);
        assert(endpoint);
        assert(scopes || n_scopes == 0);
        assert(ret);

        struct subscription *sub = calloc(1, sizeof(*sub) + n_scopes * sizeof(struct watch));
        if (!sub) {
                for (size_t i = 0; i < n_scopes; i++)
                        scope_registry_release_for(subs->registry, uid, scopes[i]);
                return -ENOMEM;
        }
        sub->subs = subs;
        subs->n_subscriptions++;
        sub->sink = subs->sink;
        sub->endpoint = endpoint;
        sub->uid = uid;
        sub->min_level = min_level;
        sub->n_watches = sub->n_live = n_scopes;

        for (size_t i = 0; i < n_scopes; i++) {
                struct watch *w = &sub->watches[i];
                struct scope *s = scopes[i];

                w->sub = sub;
                w->scope = s;
                w->last_sent = scope_level(s);
                struct watch *head = scope_watches(subs, s);
                LIST_PREPEND_F(scope_prev, scope_next, head, w);
                watches_slot_set(s, subs->slot, head);
        }
        *ret = sub;
        return 0;
}

int subscription_send_state(struct subscription *sub) {
        assert(sub);

        struct json_object *states = json_object_new_array();
        for (size_t i = 0; i < sub->n_watches; i++) {
                struct scope_snapshot snap;
                scope_snapshot(sub->watches[i].scope, &snap);
                jb_append(&states, protocol_encode_scope_state(&snap));
        }
        return sub_send(sub, jb_object_with("state", states));
}

size_t subscriptions_count(const struct subscriptions *subs) {
        assert(subs);

        return subs->n_subscriptions;
}

void subscriptions_shutdown(struct subscriptions *subs) {
        assert(subs);

        SCOPE_REGISTRY_FOREACH(s, subs->registry) {
                /* Ending a call frees its subscription and detaches its watches: always take the first. */
                for (struct watch *w; (w = scope_watches(subs, s));)
                        sub_end(w->sub, PROTOCOL_ERROR_SHUTTING_DOWN, json_object_new_object());
        }
}
