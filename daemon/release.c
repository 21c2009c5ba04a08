/* SPDX-License-Identifier: MIT */
#include "release.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"

/* The second look, when the first shows a client short of its claim: this many settle times later. */
#define RELEASE_LOOK_AGAIN_FACTOR 3

/* One client of a round. The client may be gone by the time it is measured: it is found again by
 * token, never by pointer. */
struct release_entry {
        char token[sizeof(((struct shrink_client *) NULL)->token)];
        uint64_t before, before_usec, claimed, released;
        bool by_cgroup; /* before is its cgroup's usage, not its RSS */
};

/* release.c's own record of a client, keyed by its token: what it claimed and what its memory showed
 * over all measured rounds, and how far its claims are believed. */
struct release_client {
        char token[sizeof(((struct shrink_client *) NULL)->token)];
        uint64_t measure_round; /* its entry in the sample of this round... */
        size_t measure_index;   /* ...at this index */
        uint64_t claimed_bytes, released_bytes;
        uint64_t last_after, last_after_usec; /* the last reading after a round (for its growth rate) */
        unsigned trust;                       /* per mille of its claims credited */
};

struct release_sample {
        struct release_meter *owner; /* whose client records it fills */
        uint64_t round_id;
        struct release_entry *entries;
        size_t n, n_alloc;
        /* while pending */
        struct release_meter *meter;
        struct release_sample *next;
        sd_event_source *timer;
        bool looked_again; /* the settle time was not enough for some client: measured once more, later */
        char *what;
        release_done_fn done;
        void *userdata;
};

struct release_meter {
        sd_event *event;
        struct shrink_registry *shrinkers;
        uint64_t settle_usec;
        struct release_sample *pending;
        struct hashmap *clients; /* struct release_client by token */
};

static struct release_client *client_find(const struct release_meter *m, const struct shrink_client *cl) {
        return m ? hashmap_get_string(m->clients, cl->token) : NULL;
}

/* Made on its first measured round: a client never measured has its full trust. */
static struct release_client *client_get(struct release_meter *m, const struct shrink_client *cl) {
        struct release_client *c = client_find(m, cl);
        if (c)
                return c;
        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        memcpy(c->token, cl->token, sizeof(c->token));
        c->trust = SHRINK_TRUST_FULL;
        if (hashmap_put_string(m->clients, c->token, c) < 0) {
                free(c);
                return NULL;
        }
        return c;
}

void release_meter_drop_client(struct release_meter *m, const struct shrink_client *cl) {
        free(m ? hashmap_remove_string(m->clients, cl->token) : NULL);
}

unsigned release_meter_trust(const struct release_meter *m, const struct shrink_client *cl) {
        assert(m);

        const struct release_client *c = client_find(m, cl);
        return c ? c->trust : SHRINK_TRUST_FULL;
}

void release_meter_client_info(const struct release_meter *m, const struct shrink_client *cl,
                               struct shrinker_info_snapshot *info) {
        assert(m);

        const struct release_client *c = client_find(m, cl);
        info->client_claimed_bytes = c ? c->claimed_bytes : 0;
        info->client_released_bytes = c ? c->released_bytes : 0;
        info->client_trust = c ? c->trust : SHRINK_TRUST_FULL;
}

struct release_sample *release_sample_new(struct release_meter *m, uint64_t round_id) {
        assert(m);

        struct release_sample *s = calloc(1, sizeof(*s));
        if (s) {
                s->owner = m;
                s->round_id = round_id;
        }
        return s;
}

void release_sample_free(struct release_sample *s) {
        if (!s)
                return;
        if (s->done)
                s->done(s, false, s->userdata);
        sd_event_source_disable_unref(s->timer);
        free(s->entries);
        free(s->what);
        free(s);
}

static struct release_entry *entry_of(struct release_sample *s, const struct release_client *c) {
        if (!c || c->measure_round != s->round_id || c->measure_index >= s->n)
                return NULL;
        return &s->entries[c->measure_index];
}

void release_sample_begin(struct release_sample *s, const struct shrink_client *cl, uint64_t resident, uint64_t usec) {
        struct release_client *c = s ? client_get(s->owner, cl) : NULL;
        if (!c || entry_of(s, c))
                return; /* unmeasured (out of memory), or measured already */
        if (s->n == s->n_alloc) {
                size_t n = MAX(s->n_alloc * 2, 8u);
                struct release_entry *a = realloc(s->entries, n * sizeof(*a));
                if (!a)
                        return; /* this client goes unmeasured */
                s->entries = a;
                s->n_alloc = n;
        }
        struct release_entry *e = &s->entries[s->n];
        *e = (struct release_entry){ .before = resident, .before_usec = usec, .by_cgroup = cl->own_cgroup };
        memcpy(e->token, cl->token, sizeof(e->token));
        c->measure_round = s->round_id;
        c->measure_index = s->n++;
}

void release_sample_claim(struct release_sample *s, const struct shrink_client *cl, uint64_t bytes) {
        struct release_entry *e = s ? entry_of(s, client_find(s->owner, cl)) : NULL;
        if (e)
                e->claimed = sat_add(e->claimed, bytes);
}

/* The client's trust after this round: its claim against what its memory showed, allowing for what it
 * grew at before the round. */
static void client_judge(const struct shrink_client *cl, struct release_client *c, const struct release_entry *e,
                         uint64_t after, uint64_t now) {
        uint64_t est = shrink_release_estimate(e->claimed, e->before, e->before_usec, after, now, c->last_after,
                                               c->last_after_usec);
        unsigned trust = shrink_trust_update(c->trust, e->claimed, est);
        if (trust < SHRINK_TRUST_FULL / 4 && c->trust >= SHRINK_TRUST_FULL / 4)
                log_client(cl->uid, LOG_NOTICE, "Client pid %d claimed to free %llu bytes, its memory showed %llu: its claims count for "
                           "%u per mille now.", (int) cl->pid, (unsigned long long) e->claimed,
                           (unsigned long long) est, trust);
        c->trust = trust;
        c->last_after = after;
        c->last_after_usec = now;
}

static void measure(struct release_meter *m, struct release_sample *s) {
        uint64_t claimed = 0, released = 0, now = 0;
        size_t n = 0;

        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        for (size_t i = 0; i < s->n; i++) {
                struct release_entry *e = &s->entries[i];
                struct shrink_client *cl = shrink_client_by_token(m->shrinkers, e->token);
                struct release_client *c = cl ? client_find(m, cl) : NULL;
                uint64_t after;
                if (!c || shrink_client_resident(cl, &after) < 0)
                        continue; /* gone: whatever it held is released, but not by shrinking */
                if (cl->own_cgroup != e->by_cgroup) {
                        c->last_after_usec = 0; /* nor does its last reading */
                        continue;                /* no longer alone in its cgroup: the figures do not compare */
                }
                uint64_t r = e->before > after ? e->before - after : 0;
                e->released = r;
                client_judge(cl, c, e, after, now);
                c->released_bytes = sat_add(c->released_bytes, r);
                c->claimed_bytes = sat_add(c->claimed_bytes, e->claimed);
                claimed = sat_add(claimed, e->claimed);
                released = sat_add(released, r);
                n++;
        }
        if (n == 0)
                return;
        char f_claimed[48], f_released[48];
        snprintf(f_claimed, sizeof(f_claimed), "PRESSURED_CLAIMED_BYTES=%llu", (unsigned long long) claimed);
        snprintf(f_released, sizeof(f_released), "PRESSURED_RELEASED_BYTES=%llu", (unsigned long long) released);
        const char *const fields[] = { f_claimed, f_released, NULL };
        log_struct(claimed > 0 ? LOG_INFO : LOG_DEBUG, PRESSURED_MESSAGE_RELEASE, s->what, fields,
                   "%s: %zu client%s claimed to free %llu bytes; their resident memory fell by %llu bytes.", s->what,
                   n, n == 1 ? "" : "s", (unsigned long long) claimed, (unsigned long long) released);
}

/* Whether some client shows less than half of what it claimed so far. On a busy machine a client may
 * not have run its trim within the settle time (its memory fell by nothing, and an honest client lost
 * trust: test-shrinkers saw it once in five runs beside a build); it is looked at once more, later. */
static bool sample_short(const struct release_meter *m, const struct release_sample *s) {
        for (size_t i = 0; i < s->n; i++) {
                const struct release_entry *e = &s->entries[i];
                struct shrink_client *cl = e->claimed > 0 ? shrink_client_by_token(m->shrinkers, e->token) : NULL;
                uint64_t after;
                if (cl && cl->own_cgroup == e->by_cgroup && shrink_client_resident(cl, &after) == 0 &&
                    (e->before > after ? e->before - after : 0) < e->claimed / 2)
                        return true;
        }
        return false;
}

static void meter_unlink(struct release_meter *m, struct release_sample *s) {
        for (struct release_sample **p = &m->pending; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        return;
                }
}

static int on_settled(sd_event_source *src, uint64_t usec, void *userdata) {
        struct release_sample *s = userdata;
        struct release_meter *m = s->meter;
        (void) src;
        if (!s->looked_again && sample_short(m, s) &&
            sd_event_source_set_time(s->timer, usec + RELEASE_LOOK_AGAIN_FACTOR * m->settle_usec) >= 0 &&
            sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT) >= 0) {
                s->looked_again = true;
                return 0;
        }
        meter_unlink(m, s);
        measure(m, s);
        if (s->done) {
                s->done(s, true, s->userdata);
                s->done = NULL;
        }
        release_sample_free(s);
        return 0;
}

uint64_t release_sample_released(const struct release_sample *s, const struct shrink_client *cl) {
        for (size_t i = 0; s && i < s->n; i++)
                if (streq(s->entries[i].token, cl->token))
                        return s->entries[i].released;
        return 0;
}

void release_meter_submit_then(struct release_meter *m, struct release_sample *s, const char *what,
                               release_done_fn done, void *userdata) {
        assert(m);

        uint64_t now = 0;
        if (!s) {
                if (done)
                        done(NULL, false, userdata);
                return;
        }
        s->done = done;
        s->userdata = userdata;
        if (s->n == 0 || !(s->what = strdup(what ? what : "reclaim"))) {
                release_sample_free(s);
                return;
        }
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(m->event, &s->timer, CLOCK_MONOTONIC, now + m->settle_usec, 10000, on_settled, s) < 0) {
                release_sample_free(s);
                return;
        }
        (void) sd_event_source_set_description(s->timer, "release-measure");
        s->meter = m;
        s->next = m->pending;
        m->pending = s;
}

void release_meter_submit(struct release_meter *m, struct release_sample *s, const char *what) {
        assert(m);

        release_meter_submit_then(m, s, what, NULL, NULL);
}

int release_meter_new(sd_event *event, struct shrink_registry *shrinkers, uint64_t settle_usec,
                      struct release_meter **ret) {
        assert(event);

        struct release_meter *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *m = (struct release_meter){ .event = event, .shrinkers = shrinkers, .settle_usec = settle_usec };
        int r = hashmap_new(HASHMAP_KEY_STRING, &m->clients);
        if (r < 0) {
                free(m);
                return r;
        }
        *ret = m;
        return 0;
}

struct release_meter *release_meter_free(struct release_meter *m) {
        if (!m)
                return NULL;
        while (m->pending) {
                struct release_sample *s = m->pending;
                m->pending = s->next;
                release_sample_free(s);
        }
        /* Every client was dropped by now (release_meter_drop_client()). */
        assert(hashmap_size(m->clients) == 0);
        hashmap_free(m->clients);
        free(m);
        return NULL;
}
