/* SPDX-License-Identifier: MIT */
#include "level.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "macro.h"

static const char *const level_names[_LEVEL_MAX] = { "ok", "low", "medium", "critical" };

const char *level_to_string(enum level l) {
        return l >= 0 && l < _LEVEL_MAX ? level_names[l] : NULL;
}

int level_from_string(const char *s) {
        for (int l = 0; l < _LEVEL_MAX; l++)
                if (s && streq(s, level_names[l]))
                        return l;
        return -EINVAL;
}

static const char *const source_names[_LEVEL_SOURCE_MAX] = { "pressure", "headroom", "watermark" };
static const char *const event_names[_MEMORY_EVENT_MAX] = { "max", "oom_kill" };

const char *level_source_to_string(enum level_source src) {
        return src >= 0 && src < _LEVEL_SOURCE_MAX ? source_names[src] : NULL;
}

int level_source_from_string(const char *s) {
        for (int i = 0; i < _LEVEL_SOURCE_MAX; i++)
                if (s && streq(s, source_names[i]))
                        return i;
        return -EINVAL;
}

const char *memory_event_to_string(enum memory_event e) {
        return e >= 0 && e < _MEMORY_EVENT_MAX ? event_names[e] : NULL;
}

int memory_event_from_string(const char *s) {
        for (int i = 0; i < _MEMORY_EVENT_MAX; i++)
                if (s && streq(s, event_names[i]))
                        return i;
        return -EINVAL;
}

void level_psi_thresholds_default(struct level_psi_thresholds *ret) {
        assert(ret);

        /* 5% "some" stall is where systemd's MemoryPressureWatch= default (200 ms / 2 s = 10%) would
         * still be quiet: low is an early hint. Medium is a clear slow-down of some tasks; critical means
         * all non-idle tasks of the scope stalled together a fifth of the time. */
        *ret = (struct level_psi_thresholds){
                .t = {
                        [LEVEL_LOW] = { PSI_SOME, 100000, 2000000 },
                        [LEVEL_MEDIUM] = { PSI_SOME, 300000, 2000000 },
                        [LEVEL_CRITICAL] = { PSI_FULL, 400000, 2000000 },
                },
        };
}

void level_node_thresholds_default(struct level_node_thresholds *ret) {
        assert(ret);

        /* kswapd wakes below the low watermark and stops above high; direct reclaim starts below min. */
        *ret = (struct level_node_thresholds){
                .low_factor = 1.0,
                .medium_factor = 1.0,
                .critical_factor = 1.0,
                .foreign_raises = true,
        };
}

static double fraction(const struct psi_trigger *t) {
        return (double) t->stall_usec / (double) t->window_usec;
}

int level_psi_thresholds_check(const struct level_psi_thresholds *t) {
        assert(t);

        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                if (!psi_trigger_valid(&t->t[l]))
                        return -EINVAL;
        /* Within one kind, higher levels must ask for more stall. */
        for (int l = LEVEL_MEDIUM; l < _LEVEL_MAX; l++)
                for (int k = LEVEL_LOW; k < l; k++)
                        if (t->t[k].kind == t->t[l].kind && fraction(&t->t[k]) > fraction(&t->t[l]))
                                return -EINVAL;
        return 0;
}

void level_samples_reset(struct level_samples *r) {
        assert(r);

        r->first = r->n = 0;
}

void level_samples_push(struct level_samples *r, uint64_t usec, const struct psi_stats *st) {
        assert(r);

        struct level_sample s = { .usec = usec };
        for (int k = 0; k < _PSI_KIND_MAX; k++)
                s.total[k] = st->line[k].total;

        if (r->n == LEVEL_SAMPLES_MAX) {
                r->first = (r->first + 1) % LEVEL_SAMPLES_MAX;
                r->n--;
        }
        r->s[(r->first + r->n) % LEVEL_SAMPLES_MAX] = s;
        r->n++;
}

static const struct level_sample *sample_at(const struct level_samples *r, unsigned i) {
        return &r->s[(r->first + i) % LEVEL_SAMPLES_MAX];
}

int level_samples_fraction(const struct level_samples *r, enum psi_kind kind, uint64_t window_usec,
                           double *ret) {
        assert(r);
        assert(ret);

        if (r->n < 2)
                return -ENODATA;

        const struct level_sample *last = sample_at(r, r->n - 1);
        /* The newest sample that is at least a window older than the last one, or the oldest. */
        unsigned i = r->n - 2;
        while (i > 0 && last->usec - sample_at(r, i)->usec < window_usec)
                i--;
        const struct level_sample *from = sample_at(r, i);

        if (last->usec <= from->usec)
                return -ENODATA;
        /* Totals only grow; a drop means the source was replaced (a cgroup re-created): no data. */
        if (last->total[kind] < from->total[kind])
                return -ENODATA;

        double f = (double) (last->total[kind] - from->total[kind]) / (double) (last->usec - from->usec);
        *ret = MIN(f, 1.0);
        return 0;
}

enum level level_from_samples(const struct level_samples *r, const struct level_psi_thresholds *t) {
        assert(r);

        for (int l = LEVEL_CRITICAL; l > LEVEL_OK; l--) {
                double f;
                if (level_samples_fraction(r, t->t[l].kind, t->t[l].window_usec, &f) < 0)
                        continue;
                if (f >= fraction(&t->t[l]))
                        return l;
        }
        return LEVEL_OK;
}

enum level level_from_averages(const struct psi_stats *st, const struct level_psi_thresholds *t) {
        for (int l = LEVEL_CRITICAL; l > LEVEL_OK; l--) {
                enum psi_kind k = t->t[l].kind;
                if (k == PSI_FULL && !st->has_full)
                        continue;
                if (st->line[k].avg10 / 100 >= fraction(&t->t[l]))
                        return l;
        }
        return LEVEL_OK;
}

enum level level_from_node(const struct node_figures *f, const struct level_node_thresholds *t) {
        assert(f);

        enum level l = LEVEL_OK;

        if (f->high_pages == 0) /* no zone with watermarks: a memoryless node */
                return LEVEL_OK;

        if ((double) f->free_pages <= (double) f->min_pages * t->critical_factor)
                l = LEVEL_CRITICAL;
        else if ((double) f->free_pages <= (double) f->low_pages * t->medium_factor)
                l = LEVEL_MEDIUM;
        else if ((double) f->free_pages <= (double) f->high_pages * t->low_factor)
                l = LEVEL_LOW;

        if (t->foreign_raises && f->foreign_delta > 0 && l < LEVEL_LOW)
                l = LEVEL_LOW;
        return l;
}

bool level_update(struct level_state *s, enum level raw, uint64_t now_usec, uint64_t hold_usec) {
        assert(s);

        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++) {
                if ((int) raw >= l)
                        s->below_since[l] = 0;
                else if (s->below_since[l] == 0)
                        s->below_since[l] = now_usec ? now_usec : 1;
        }

        enum level new = raw;
        /* Falling: keep the highest level whose quiet period has not lasted hold_usec yet. */
        for (int l = s->level; l > (int) raw; l--)
                if (now_usec - s->below_since[l] < hold_usec) {
                        new = l;
                        break;
                }

        if (new == s->level)
                return false;
        s->level = new;
        return true;
}

uint64_t level_reclaim_target(enum level l, uint64_t size_bytes, uint64_t excess_bytes, uint64_t demand_bytes) {
        static const unsigned percent[_LEVEL_MAX] = { 0, 1, 3, 5 };

        if (l <= LEVEL_OK || l >= _LEVEL_MAX)
                return 0;
        uint64_t share = size_bytes / 100 * percent[l];
        uint64_t t = excess_bytes + (demand_bytes > share ? demand_bytes : share);
        return t < excess_bytes ? UINT64_MAX : t;
}
