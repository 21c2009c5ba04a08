/* SPDX-License-Identifier: MIT */
#pragma once

/* The regulator's arithmetic (pure): from a scope's cumulative `some` stall, read once per interval,
 * whether to ask the shrinkers in it for a step, and how large. The stall budget is a rate (µs of stall
 * per second); a step is a fraction of what the shrinkers hold, proportional to how far the rate is over
 * the budget, between a floor and a cap (as CacheLib gives back at most 5% of its band per step). Under
 * the budget nothing is asked, and caches grow back on their own. Two brakes keep it from oscillating or
 * emptying a cache for nothing:
 *   - settling: right after a step, a rate that is already falling is given an interval to show where it
 *     lands before the next step (the stall answers a step with a delay);
 *   - boost and back-off: steps that do not lower the rate either meet caches that grow back as fast as
 *     they give (then each step is twice the last, up to a quarter of what they hold), or have taken a
 *     quarter of what they held for nothing (the stall is someone else's): then steps are spaced further
 *     and further apart, doubling up to 32 intervals, as Senpai backs off.
 *   - the growth limiter: the stall of a cache growing into a neighbour's working set is a cliff (0 ms/s,
 *     then hundreds), so a regulator that waits for it falls off it again and again. The size at which the
 *     stall last rose is remembered; under the budget the shrinkers are held a tenth below it, and the
 *     limit creeps up by 0.1% per look (as Senpai probes upwards) so that a cache regains room it may have.
 * regulator.c reads the kernel's figures and runs the rounds; this file only decides. */

#include <stdbool.h>
#include <stdint.h>

struct regulation_params {
        uint64_t budget;             /* µs of `some` stall per second allowed (1000: 1 ms/s); 0: off */
        unsigned step_min_permille;  /* the smallest step, of what the shrinkers hold */
        unsigned step_max_permille;  /* the largest */
        unsigned step_gain_permille; /* the step at twice the budget; it grows linearly with the excess */
};

#define REGULATION_BACKOFF_MAX 5     /* spacing of at most 2^5 = 32 intervals */
#define REGULATION_BOOST_MAX 3       /* steps up to 2^3 times the proportional one... */
#define REGULATION_STEP_HARD_MAX_PERMILLE 250 /* ...and never more than a quarter of what is held */
/* The growth limit's edge rises by a thousandth per look under the budget: at the four looks per interval
 * of a scope with a limit, the tenth it is held below the edge comes back in about 25 intervals. Each
 * rise of the stall sets the edge to what is held then, a tenth or more lower: a creep of a
 * ten-thousandth per look (the first version) lost that much faster than it came back, and the limit
 * ratcheted down to 33 of the 44 MiB a fixed cap serves best (docs/performance-history.md,
 * 2026-12-06). */
#define REGULATION_CREEP_PER_LOOK 1000

enum regulation_verdict {
        REGULATION_FIRST,       /* the first reading (or the counter went back): nothing to compare yet */
        REGULATION_UNDER,       /* at or under the budget: nothing asked */
        REGULATION_NOT_OWN,     /* over, but the stall is not for memory this scope's caches hold */
        REGULATION_SETTLING,    /* over, falling since the last step: wait an interval */
        REGULATION_BACKING_OFF, /* over, and steps did not help lately: not this interval */
        REGULATION_STEP,        /* ask for *ret_bytes (0: nothing is known of what they hold: count first) */
        _REGULATION_VERDICT_MAX,
};

const char *regulation_verdict_to_string(enum regulation_verdict v);

struct regulation {
        bool have_mark;
        bool first;                     /* the last reading had nothing to compare with */
        uint64_t mark_total, mark_usec; /* the last reading */
        double rate;                    /* the stall over the last interval, µs per second */
        double stepped_rate;            /* the rate that made the last step (< 0: the last interval did not step) */
        unsigned streak;                /* steps since the rate last fell by a tenth */
        double streak_rate;             /* the rate when that streak began */
        uint64_t streak_held;           /* what the shrinkers held then */
        unsigned boost;                 /* log2 of the factor on the proportional step (caches that regrow) */
        unsigned backoff;               /* log2 of the spacing of steps */
        unsigned skip;                  /* intervals still to skip */
        /* The growth limiter: what the shrinkers held when the stall last rose over the budget from under
         * it, the edge of the cliff (0: not seen). Under the budget they are held a tenth below it, and
         * it creeps up by REGULATION_CREEP_PER_LOOK, so that they find room again when the neighbour's
         * working set shrinks. */
        uint64_t knee;
        bool was_over;
        uint64_t steps, asked_bytes;    /* for the log and ListShrinkers */
};

void regulation_init(struct regulation *r);

/* One reading of the cumulative stall total_usec at now_usec. Returns whether it is over the budget,
 * the rate in *ret_rate (µs/s; 0 on the first reading). */
bool regulation_measure(struct regulation *r, const struct regulation_params *p, uint64_t total_usec,
                        uint64_t now_usec, double *ret_rate);

/* After regulation_measure(): what to do. own: the stall is for memory the scope's caches share (the
 * caller's gate, asked only when over); held: bytes the shrinkers in scope hold at their last counts. */
enum regulation_verdict regulation_decide(struct regulation *r, const struct regulation_params *p, bool over,
                                          bool own, uint64_t held, uint64_t *ret_bytes);

/* Under the budget: what the shrinkers may hold (0: no limit known). Above it, the regulator asks for
 * the difference (after a fresh count). */
uint64_t regulation_limit(const struct regulation *r);

/* The step for a rate over the budget, of held bytes (exposed for tests and documentation). */
uint64_t regulation_step_bytes(const struct regulation_params *p, double rate, uint64_t held);

/* Proactive reclaim (proactive.c) the other way round: a group the admin named is probed while its stall
 * is under the budget. Each interval it is asked for a step of what reclaim could take from it: the
 * largest step (step_max_permille) scaled down as the stall nears the budget, as Senpai probes, so that
 * cold pages go first and the steps fade where the working set begins to refault. Over the budget
 * nothing is taken and probes are spaced 2, 4 ... 32 intervals apart; a probe the kernel could not fill
 * (memory.reclaim's EAGAIN: nothing cheap is left) is spaced out the same way. */
enum probe_verdict {
        PROBE_FIRST, /* the first reading: nothing to compare yet */
        PROBE_OVER,  /* over the budget: nothing taken, and the next probes spaced further apart */
        PROBE_WAIT,  /* under, but backing off: not this interval */
        PROBE_SMALL, /* under, but the step is too small to be worth a write */
        PROBE_STEP,  /* take *ret_bytes */
        _PROBE_VERDICT_MAX,
};

/* Steps below this are not taken: near the budget the step shrinks towards nothing. */
#define PROBE_STEP_MIN_BYTES (256u * 1024u)

struct probe {
        unsigned backoff, skip; /* as in struct regulation */
        uint64_t steps, asked_bytes;
};

const char *probe_verdict_to_string(enum probe_verdict v);
void probe_init(struct probe *pr);
/* After regulation_measure() on the group's stall (first: it had nothing to compare with). */
enum probe_verdict probe_decide(struct probe *pr, const struct regulation_params *p, bool first, double rate,
                                uint64_t reclaimable, uint64_t *ret_bytes);
/* The kernel reclaimed less than a step asked (EAGAIN). */
void probe_fell_short(struct probe *pr);
