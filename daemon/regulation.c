/* SPDX-License-Identifier: MIT */
#include "regulation.h"

#include <assert.h>
#include <math.h>

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

/* The rate since the newest reading at least window_usec old (the oldest one if none is). */
static double window_rate(struct regulation *r, uint64_t window_usec, uint64_t total_usec, uint64_t now_usec) {
        const unsigned n = ELEMENTSOF(r->marks);
        uint64_t t = now_usec, tot = total_usec;
        for (unsigned i = 1; i <= r->n_marks; i++) {
                unsigned k = (r->next_mark + n - i) % n;
                t = r->marks[k].usec;
                tot = r->marks[k].total;
                if (now_usec - t >= window_usec)
                        break;
        }
        return now_usec > t && total_usec >= tot ? (double) (total_usec - tot) * 1e6 / (double) (now_usec - t) : 0;
}

bool regulation_measure(struct regulation *r, const struct regulation_params *p, uint64_t total_usec,
                        uint64_t now_usec, double *ret_rate) {
        assert(r && p && ret_rate);
        bool first = !r->have_mark || now_usec <= r->mark_usec || total_usec < r->mark_total;
        r->first = first;
        if (first)
                r->n_marks = r->next_mark = 0; /* a counter that went back: the window starts again */
        double rate = first ? 0 : (double) (total_usec - r->mark_total) * 1e6 / (double) (now_usec - r->mark_usec);
        r->window_rate = first ? 0 : p->window_usec > 0 ? window_rate(r, p->window_usec, total_usec, now_usec) : rate;
        r->marks[r->next_mark].usec = now_usec;
        r->marks[r->next_mark].total = total_usec;
        r->next_mark = (r->next_mark + 1) % ELEMENTSOF(r->marks);
        r->n_marks = MIN(r->n_marks + 1, (unsigned) ELEMENTSOF(r->marks));
        r->have_mark = true;
        r->prev_usec = first ? now_usec : r->mark_usec;
        r->mark_total = total_usec;
        r->mark_usec = now_usec;
        r->rate = rate;
        *ret_rate = rate;
        return !first && p->budget > 0 && rate > (double) p->budget && r->window_rate > (double) p->budget;
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

/* CUBIC's window as a function of time, in units of the edge E, from a margin m below it at t = 0: a
 * concave rise to a plateau halfway up at the return time K, flat there, back at the edge at 2K, and
 * convex past it, faster and faster, since the edge has moved. TCP's plateau is at the loss point itself;
 * a cache's plateau there meets the edge with every refill between two looks. With d = (t - K) / K:
 * 1 - m/2 + m/2 d^3 up to the edge, 1 + m (d^3 - 1) beyond. */
static double cubic_of_edge(double t, double K) {
        const double m = REGULATION_EDGE_MARGIN_PERMILLE / 1000.0;
        double d = (t - K) / K, d3 = d * d * d;
        return d <= 1 ? 1 - m / 2 + m / 2 * d3 : 1 + m * (d3 - 1);
}

/* Its slope, in units of the edge per second. */
static double cubic_slope(double t, double K) {
        const double m = REGULATION_EDGE_MARGIN_PERMILLE / 1000.0;
        double d = (t - K) / K;
        return (d <= 1 ? m / 2 : m) * 3 * d * d / K;
}

static double return_seconds(unsigned shift) {
        return (double) (REGULATION_EDGE_RETURN_USEC << MIN(shift, (unsigned) REGULATION_EDGE_RETURN_SHIFT_MAX)) / 1e6;
}

uint64_t regulation_rise_factor_ppm(uint64_t usec, unsigned return_shift) {
        double K = return_seconds(return_shift);
        double f = cubic_of_edge((double) usec / 1e6, K) / cubic_of_edge(0, K);
        return f >= 1e12 ? UINT64_C(1000000000000000000) : (uint64_t) (f * 1e6);
}

unsigned regulation_rise_permille(const struct regulation *r) {
        assert(r);
        if (r->limit == 0 || r->quiet_usec == 0 || r->mark_usec < r->quiet_usec)
                return 0;
        const double K = return_seconds(r->return_shift);
        double t = (double) (r->mark_usec - r->quiet_usec) / 1e6;
        double rise = 1000 * cubic_slope(t, K) / cubic_of_edge(t, K);
        return rise >= 1e9 ? 1000000000u : (unsigned) rise;
}

uint64_t regulation_edge_return_usec(const struct regulation *r) {
        assert(r);
        return REGULATION_EDGE_RETURN_USEC << MIN(r->return_shift, (unsigned) REGULATION_EDGE_RETURN_SHIFT_MAX);
}

static uint64_t below_edge(uint64_t edge) {
        const uint64_t keep = 1000 - REGULATION_EDGE_MARGIN_PERMILLE;
        return edge > UINT64_MAX / 1000 ? edge / 1000 * keep : edge * keep / 1000;
}

static uint64_t above_limit(uint64_t limit) {
        const uint64_t keep = 1000 - REGULATION_EDGE_MARGIN_PERMILLE;
        return limit > UINT64_MAX / 1000 ? limit / keep * 1000 : limit * 1000 / keep;
}

/* The edge came down far below the room (a neighbour came): the short return, until it has stayed long. */
static void regulation_came_down(struct regulation *r) {
        if (!r->came_down)
                r->came_down_usec = r->mark_usec;
        r->came_down = true;
}

/* The return's shift while the edge is down: none for the first REGULATION_CAME_DOWN_STAY_FACTOR short
 * returns of the stay, then one more for each doubling of it. */
unsigned regulation_stay_shift(uint64_t stayed_usec) {
        const uint64_t first = REGULATION_CAME_DOWN_STAY_FACTOR * REGULATION_EDGE_RETURN_USEC;
        unsigned shift = 0;
        for (uint64_t t = first; stayed_usec >= t && shift < REGULATION_EDGE_RETURN_SHIFT_MAX; t *= 2)
                shift++;
        return shift;
}

/* The stall rose over the budget, the caches' own, with held bytes in them: the edge is where it rose,
 * and the limit a margin below it. */
static void regulation_edge_rise(struct regulation *r, uint64_t held) {
        r->cut_usec = r->mark_usec;
        if (held > 0 && r->backoff == 0) {
                /* Risen again where it last rose (within the margin): a neighbour who stays. The limit
                 * takes twice as long to come back next time (up to 40 s), as Senpai backs off; a rise
                 * somewhere else halves it. */
                uint64_t m = r->rise_held / 1000 * REGULATION_EDGE_MARGIN_PERMILLE;
                bool again = r->rise_held > 0 && held + m >= r->rise_held && held <= r->rise_held + m;
                if (again)
                        r->return_shift = MIN(r->return_shift + 1, (unsigned) REGULATION_EDGE_RETURN_SHIFT_MAX);
                else
                        r->return_shift = MAX(r->return_shift, 3u) - 1;
                /* A rise far below the last one is the same neighbour's arrival seen again (a burst that
                 * rises in waves): the size before it is what the room was, and stays the mark. */
                if (r->rise_held > 0 && held < r->rise_held / 1000 * REGULATION_CAME_DOWN_PERMILLE)
                        regulation_came_down(r);
                else
                        r->rise_held = held;
        }
        if (held > 0 && r->backoff == 0) {
                r->edge = held;
                r->edge_usec = r->mark_usec;
        }
        r->quiet_usec = 0;
        r->limit = r->edge > 0 ? below_edge(r->edge) : 0;
}

/* The stall stays over the budget with no step still settling: the cliff is below the limit (a phase
 * change: the neighbour's working set grew; or the stall of the overshoot lasts). The limit comes down by
 * the step, from itself or from what they hold if that is less, and the edge with it, a margin above. The
 * caches are held to it while the stall lasts, as under it: steps alone, asked of a cache that refills
 * between two looks, do not bring it down. */
static void regulation_edge_follow(struct regulation *r, uint64_t held, uint64_t step) {
        r->quiet_usec = 0;
        if (held == 0 || r->backoff > 0)
                return;
        if (r->edge == 0) {
                regulation_edge_rise(r, held); /* it rose before any count: the first one is the edge */
                return;
        }
        uint64_t base = r->limit > 0 ? MIN(r->limit, held) : held;
        r->limit = base > step ? base - step : 0;
        r->edge = MIN(r->edge, above_limit(r->limit));
        r->edge_usec = r->mark_usec;
}

/* Under the budget: the limit rises from a tenth below the edge as CUBIC's window does (cubic_of_edge()). */
static void regulation_edge_quiet(struct regulation *r) {
        if (r->edge == 0)
                return;
        if (r->quiet_usec == 0) {
                r->quiet_usec = r->prev_usec; /* the interval just measured was quiet from its start */
                r->limit_base = below_edge(r->edge);
                /* The edge came down by more than a quarter from where the stall rose: not the neighbour
                 * who stays, but one who came (a burst, a phase change) and may go: the short return. */
                if (r->came_down || r->edge < r->rise_held / 1000 * REGULATION_CAME_DOWN_PERMILLE) {
                        regulation_came_down(r);
                        r->return_shift = regulation_stay_shift(r->mark_usec - r->came_down_usec);
                }
        }
        uint64_t f = regulation_rise_factor_ppm(r->mark_usec - r->quiet_usec, r->return_shift);
        if (f >= (uint64_t) REGULATION_EDGE_FORGET_FACTOR * 1000000) {
                regulation_forget_edge(r);
                return;
        }
        r->limit = r->limit_base / 1000000 * f + r->limit_base % 1000000 * f / 1000000;
        if (r->came_down && r->limit >= r->rise_held)
                r->came_down = false; /* the room is back */
}

void regulation_forget_edge(struct regulation *r) {
        assert(r);
        r->edge = r->edge_usec = r->quiet_usec = r->limit = r->limit_base = r->rise_held = r->came_down_usec = 0;
        r->return_shift = 0;
        r->came_down = false;
}

/* Nothing to do this interval: the streak of steps is over, the brakes are released. */
static void regulation_rest(struct regulation *r) {
        r->stepped_rate = -1;
        r->streak = 0;
        r->streak_rate = -1;
        r->backoff = 0;
        r->skip = 0;
}

/* Under the budget, or someone else's stall (which says nothing of the caches' edge): a quiet look. The
 * stall is over once it has stayed away as long as no limit could come back; until then the streak and
 * its brakes stand. */
static void regulation_quiet(struct regulation *r) {
        if (!r->was_over || r->mark_usec - r->over_usec >= REGULATION_SAME_STALL_USEC) {
                regulation_rest(r);
                r->was_over = false;
        } else
                r->stepped_rate = -1;
        regulation_edge_quiet(r);
}

/* One more step in the streak. A streak of steps that has not lowered the rate by a tenth is one of two
 * things. Either the caches grow back as fast as they give (what they hold did not fall): the steps are
 * too small, and each further one is twice as large, up to a quarter of what they hold. Or three quarters
 * of what they held are gone and the stall stays: it is not theirs to answer (the edge learnt from it is
 * forgotten), and each further step doubles the spacing of the next. */
static void regulation_streak(struct regulation *r, uint64_t held) {
        bool fell = r->streak_rate >= 0 && r->rate < r->streak_rate * REGULATION_FELL_PERMILLE / 1000;
        if (r->streak_rate < 0 || fell) {
                r->streak = 0;
                r->streak_rate = r->rate;
                r->streak_held = held;
                r->backoff = r->boost = 0;
        } else if (held < r->streak_held / 1000 * REGULATION_FUTILE_PERMILLE) {
                r->boost = 0;
                regulation_forget_edge(r);
                r->backoff = MIN(r->backoff + 1, (unsigned) REGULATION_BACKOFF_MAX);
        } else if (r->streak >= REGULATION_BOOST_AFTER)
                r->boost = MIN(r->boost + 1, (unsigned) REGULATION_BOOST_MAX);
        r->skip = (1u << r->backoff) - 1;
        r->streak++;
        r->stepped_rate = r->rate;
}

enum regulation_verdict regulation_decide(struct regulation *r, const struct regulation_params *p, bool over,
                                          bool own, uint64_t held, uint64_t *ret_bytes) {
        assert(r && p && ret_bytes);
        const uint64_t hard_max = held / 1000 * REGULATION_STEP_HARD_MAX_PERMILLE;
        *ret_bytes = 0;
        if (!r->have_mark || r->first)
                return REGULATION_FIRST;
        if (!over || !own) {
                regulation_quiet(r);
                return over ? REGULATION_NOT_OWN : REGULATION_UNDER;
        }
        bool rise = !r->was_over;
        r->was_over = true;
        r->over_usec = r->mark_usec;
        if (rise)
                regulation_edge_rise(r, held);
        else
                r->quiet_usec = 0;
        /* The last step is still showing: a rate a quarter below the one that made it is on its way down.
         * Or the limit was cut at once less than a second ago (at the rise, or at a cliff): the kernel
         * answers with a lag (the neighbour reads back what the overshoot pushed out). Meanwhile the caches
         * are held to the limit. */
        uint64_t to_limit = r->limit > 0 && held > r->limit ? MIN(held - r->limit, hard_max) : 0;
        if (r->stepped_rate >= 0 && r->rate < r->stepped_rate * REGULATION_SETTLING_PERMILLE / 1000) {
                r->stepped_rate = -1;
                *ret_bytes = to_limit;
                return REGULATION_SETTLING;
        }
        if (!rise && r->limit > 0 && r->mark_usec - r->cut_usec < REGULATION_RISE_LAG_USEC) {
                *ret_bytes = to_limit;
                return REGULATION_SETTLING;
        }
        if (r->skip > 0) {
                r->skip--;
                r->stepped_rate = -1;
                return REGULATION_BACKING_OFF;
        }
        regulation_streak(r, held);
        uint64_t bytes = MIN(regulation_step_bytes(p, r->rate, held) << r->boost, hard_max);
        if (!rise) {
                if (r->limit > 0 && r->backoff == 0 && r->rate >= (double) p->budget * REGULATION_CLIFF_FACTOR) {
                        bytes = hard_max; /* a cliff past the lag: the largest cut, then the lag again */
                        r->cut_usec = r->mark_usec;
                }
                regulation_edge_follow(r, held, bytes);
        }
        /* Over the limit: down to it at once, as TCP halves its window at a loss, not by a few percent a
         * look while the cache refills past it. */
        if (r->limit > 0 && held > r->limit)
                bytes = MAX(bytes, held - r->limit);
        *ret_bytes = MIN(bytes, hard_max);
        r->steps++;
        r->asked_bytes += *ret_bytes;
        return REGULATION_STEP;
}

uint64_t regulation_share(uint64_t limit, uint64_t scope_held, uint64_t client_held, uint64_t client_raw,
                          uint64_t shrinker_bytes) {
        if (limit == 0 || scope_held == 0 || client_raw == 0)
                return limit;
        double share = (double) MIN(shrinker_bytes, client_raw) / (double) client_raw *
                       (double) MIN(client_held, scope_held) / (double) scope_held;
        return MAX((uint64_t) ((double) limit * share), (uint64_t) 1);
}

uint64_t regulation_limit(const struct regulation *r) {
        assert(r);
        return r->limit;
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

/* ---- the kernel's value of a named group's page cache ---- */

void refault_value_add(struct refault_value *v, uint64_t refaulted, uint64_t reclaimed, uint64_t now) {
        assert(v);

        if (v->at > 0 && now > v->at) {
                double f = exp(-(double) (now - v->at) / (double) REFAULT_DECAY_USEC);
                v->refaulted *= f;
                v->reclaimed *= f;
        }
        v->at = MAX(v->at, now);
        v->refaulted += (double) refaulted;
        v->reclaimed += (double) reclaimed;
}

unsigned refault_value_permille(const struct refault_value *v) {
        assert(v);

        if (v->reclaimed < (double) REFAULT_MIN_RECLAIMED_BYTES)
                return 0;
        double share = v->refaulted / v->reclaimed;
        return share >= 1 ? 1000u : (unsigned) (share * 1000);
}

uint64_t refault_scale_step(uint64_t bytes, unsigned permille) {
        return permille >= 1000 ? 0 : bytes / 1000 * (1000 - permille) + bytes % 1000 * (1000 - permille) / 1000;
}
