/* SPDX-License-Identifier: MIT */
#include "regulation.h"

#include <assert.h>

#include "macro.h"

static const char *const verdict_names[_REGULATION_VERDICT_MAX] = {
        [REGULATION_FIRST] = "first",
        [REGULATION_UNDER] = "under",
        [REGULATION_NOT_OWN] = "not-own",
        [REGULATION_SETTLING] = "settling",
        [REGULATION_BACKING_OFF] = "backing-off",
        [REGULATION_STEP] = "step",
};

const char *regulation_verdict_to_string(enum regulation_verdict v) {
        return v >= 0 && v < _REGULATION_VERDICT_MAX ? verdict_names[v] : NULL;
}

void regulation_init(struct regulation *r) {
        assert(r);
        *r = (struct regulation){ .stepped_rate = -1, .streak_rate = -1 };
}

bool regulation_measure(struct regulation *r, const struct regulation_params *p, uint64_t total_usec,
                        uint64_t now_usec, double *ret_rate) {
        assert(r && p && ret_rate);
        bool first = !r->have_mark || now_usec <= r->mark_usec || total_usec < r->mark_total;
        r->first = first;
        double rate = first ? 0 : (double) (total_usec - r->mark_total) * 1e6 / (double) (now_usec - r->mark_usec);
        r->have_mark = true;
        r->mark_total = total_usec;
        r->mark_usec = now_usec;
        r->rate = rate;
        *ret_rate = rate;
        return !first && p->budget > 0 && rate > (double) p->budget;
}

uint64_t regulation_step_bytes(const struct regulation_params *p, double rate, uint64_t held) {
        assert(p && p->budget > 0);
        double excess = rate / (double) p->budget - 1;
        if (excess <= 0)
                return 0;
        double permille = excess * p->step_gain_permille;
        permille = MAX(permille, (double) p->step_min_permille);
        permille = MIN(permille, (double) p->step_max_permille);
        return (uint64_t) ((double) held * permille / 1000);
}

/* Nothing to do this interval: the streak of steps is over, the brakes are released. */
static void regulation_rest(struct regulation *r) {
        r->stepped_rate = -1;
        r->streak = 0;
        r->streak_rate = -1;
        r->backoff = 0;
        r->skip = 0;
}

enum regulation_verdict regulation_decide(struct regulation *r, const struct regulation_params *p, bool over,
                                          bool own, uint64_t held, uint64_t *ret_bytes) {
        assert(r && p && ret_bytes);
        *ret_bytes = 0;
        if (!r->have_mark || r->first)
                return REGULATION_FIRST;
        if (!over) {
                regulation_rest(r);
                r->was_over = false;
                r->knee += MIN(r->knee / REGULATION_CREEP_PER_LOOK, UINT64_MAX - r->knee);
                return REGULATION_UNDER;
        }
        if (own && !r->was_over && held > 0 && r->backoff == 0)
                r->knee = r->knee == 0 ? held : MIN(r->knee, held);
        r->was_over = own;
        if (!own) {
                regulation_rest(r);
                return REGULATION_NOT_OWN;
        }
        /* The last step is still showing: a rate a quarter below the one that made it is on its way down. */
        if (r->stepped_rate >= 0 && r->rate < r->stepped_rate * 0.75) {
                r->stepped_rate = -1;
                return REGULATION_SETTLING;
        }
        if (r->skip > 0) {
                r->skip--;
                r->stepped_rate = -1;
                return REGULATION_BACKING_OFF;
        }
        /* A streak of steps that has not lowered the rate by a tenth is one of two things. Either the
         * caches grow back as fast as they give (what they hold did not fall): the steps are too small,
         * and each further one is twice as large, up to a quarter of what they hold. Or a quarter of what
         * they held is gone and the stall stays: it is not theirs to answer, and each further step doubles
         * the spacing of the next, up to 32 intervals. */
        bool fell = r->streak_rate >= 0 && r->rate < r->streak_rate * 0.9;
        if (r->streak_rate < 0 || fell) {
                r->streak = 0;
                r->streak_rate = r->rate;
                r->streak_held = held;
                r->backoff = r->boost = 0;
        } else if (held < r->streak_held - r->streak_held / 4) {
                /* ...and the edge learnt from this stall is no edge of theirs: forget it. */
                r->boost = 0;
                r->knee = 0;
                r->backoff = MIN(r->backoff + 1, (unsigned) REGULATION_BACKOFF_MAX);
        } else if (r->streak >= 2)
                r->boost = MIN(r->boost + 1, (unsigned) REGULATION_BOOST_MAX);
        r->skip = (1u << r->backoff) - 1;
        r->streak++;
        r->stepped_rate = r->rate;
        uint64_t bytes = regulation_step_bytes(p, r->rate, held) << r->boost;
        *ret_bytes = MIN(bytes, held / 1000 * REGULATION_STEP_HARD_MAX_PERMILLE);
        r->steps++;
        r->asked_bytes += *ret_bytes;
        return REGULATION_STEP;
}

uint64_t regulation_limit(const struct regulation *r) {
        assert(r);
        return r->knee - r->knee / 10;
}

static const char *const probe_names[_PROBE_VERDICT_MAX] = {
        [PROBE_FIRST] = "first reading", [PROBE_OVER] = "over the budget", [PROBE_WAIT] = "backing off",
        [PROBE_SMALL] = "step too small", [PROBE_STEP] = "probe",
};

const char *probe_verdict_to_string(enum probe_verdict v) {
        return v >= 0 && v < _PROBE_VERDICT_MAX ? probe_names[v] : NULL;
}

void probe_init(struct probe *pr) {
        assert(pr);
        *pr = (struct probe){};
}

static void probe_back_off(struct probe *pr) {
        pr->backoff = MIN(pr->backoff + 1, (unsigned) REGULATION_BACKOFF_MAX);
        pr->skip = (1u << pr->backoff) - 1;
}

enum probe_verdict probe_decide(struct probe *pr, const struct regulation_params *p, bool first, double rate,
                                uint64_t reclaimable, uint64_t *ret_bytes) {
        assert(pr && p && ret_bytes && p->budget > 0);
        *ret_bytes = 0;
        if (first)
                return PROBE_FIRST;
        if (rate > (double) p->budget) {
                probe_back_off(pr);
                return PROBE_OVER;
        }
        if (pr->skip > 0) {
                pr->skip--;
                return PROBE_WAIT;
        }
        double permille = (double) p->step_max_permille * (1 - rate / (double) p->budget);
        uint64_t bytes = (uint64_t) ((double) reclaimable * permille / 1000) & ~(uint64_t) 4095;
        if (bytes < PROBE_STEP_MIN_BYTES)
                return PROBE_SMALL;
        /* Well under the budget again: the spacing comes back down, one notch per probe. */
        if (pr->backoff > 0 && rate * 2 <= (double) p->budget)
                pr->backoff--;
        pr->steps++;
        pr->asked_bytes = sat_add(pr->asked_bytes, bytes);
        *ret_bytes = bytes;
        return PROBE_STEP;
}

void probe_fell_short(struct probe *pr) {
        assert(pr);
        probe_back_off(pr);
}
