/* SPDX-License-Identifier: MIT */
#include "release.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"

/* One client of a round. The client may be gone by the time it is measured: it is found again by
 * token, never by pointer. */
struct release_entry {
        char token[sizeof(((struct shrink_client *) NULL)->token)];
        uint64_t before, before_usec, claimed, released;
        bool by_cgroup; /* before is its cgroup's usage, not its RSS */
};

struct release_sample {
        uint64_t round_id;
        struct release_entry *entries;
        size_t n, n_alloc;
        /* while pending */
        struct release_meter *meter;
        struct release_sample *next;
        sd_event_source *timer;
        char *what;
        release_done_fn done;
        void *userdata;
};

struct release_meter {
        sd_event *event;
        struct shrink_registry *shrinkers;
        uint64_t settle_usec;
        struct release_sample *pending;
};

struct release_sample *release_sample_new(uint64_t round_id) {
        struct release_sample *s = calloc(1, sizeof(*s));
        if (s)
                s->round_id = round_id;
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

static struct release_entry *entry_of(struct release_sample *s, const struct shrink_client *cl) {
        if (cl->measure_round != s->round_id || cl->measure_index >= s->n)
                return NULL;
        return &s->entries[cl->measure_index];
}

void release_sample_begin(struct release_sample *s, struct shrink_client *cl, uint64_t resident, uint64_t usec) {
        if (!s || entry_of(s, cl))
                return;
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
        cl->measure_round = s->round_id;
        cl->measure_index = s->n++;
}

void release_sample_claim(struct release_sample *s, struct shrink_client *cl, uint64_t bytes) {
        struct release_entry *e = s ? entry_of(s, cl) : NULL;
        if (e)
                e->claimed = sat_add(e->claimed, bytes);
}

/* The client's trust after this round: its claim against what its memory showed, allowing for what it
 * grew at before the round. */
static void client_judge(struct shrink_client *cl, const struct release_entry *e, uint64_t after, uint64_t now) {
        uint64_t est = shrink_release_estimate(e->claimed, e->before, e->before_usec, after, now, cl->last_after,
                                               cl->last_after_usec);
        unsigned trust = shrink_trust_update(cl->trust, e->claimed, est);
        if (trust < SHRINK_TRUST_FULL / 4 && cl->trust >= SHRINK_TRUST_FULL / 4)
                log_client(cl->uid, LOG_NOTICE, "Client pid %d claimed to free %llu bytes, its memory showed %llu: its claims count for "
                           "%u per mille now.", (int) cl->pid, (unsigned long long) e->claimed,
                           (unsigned long long) est, trust);
        cl->trust = trust;
        cl->last_after = after;
        cl->last_after_usec = now;
}

static void measure(struct release_meter *m, struct release_sample *s) {
        uint64_t claimed = 0, released = 0, now = 0;
        size_t n = 0;

        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        for (size_t i = 0; i < s->n; i++) {
                struct release_entry *e = &s->entries[i];
                struct shrink_client *cl = shrink_client_by_token(m->shrinkers, e->token);
                uint64_t after;
                if (!cl || shrink_client_resident(cl, &after) < 0)
                        continue; /* gone: whatever it held is released, but not by shrinking */
                if (cl->own_cgroup != e->by_cgroup) {
                        cl->last_after_usec = 0; /* nor does its last reading */
                        continue;                /* no longer alone in its cgroup: the figures do not compare */
                }
                uint64_t r = e->before > after ? e->before - after : 0;
                e->released = r;
                client_judge(cl, e, after, now);
                cl->released_bytes = sat_add(cl->released_bytes, r);
                cl->claimed_bytes = sat_add(cl->claimed_bytes, e->claimed);
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
        (void) usec;
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
        release_meter_submit_then(m, s, what, NULL, NULL);
}

int release_meter_new(sd_event *event, struct shrink_registry *shrinkers, uint64_t settle_usec,
                      struct release_meter **ret) {
        struct release_meter *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *m = (struct release_meter){ .event = event, .shrinkers = shrinkers, .settle_usec = settle_usec };
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
        free(m);
        return NULL;
}
