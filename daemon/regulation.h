/* SPDX-License-Identifier: MIT */
#pragma once

/* The regulator's arithmetic (pure): from a scope's cumulative `some` stall, read once per interval,
 * whether to ask the shrinkers in it for a step, and how large. The stall budget is a rate (µs of stall
 * per second); a step is a fraction of what the shrinkers hold, proportional to how far the rate is over
 * the budget, between a floor and a cap (as CacheLib gives back at most 5% of its band per step). Under
 * the budget nothing is asked beyond the growth limit (below), and caches grow back on their own. Two
 * brakes keep it from oscillating or emptying a cache for nothing:
 *   - settling: right after a step, a rate that is already falling is given an interval to show where it
 *     lands before the next step (the stall answers a step with a delay);
 *   - boost and back-off: steps that do not lower the rate either meet caches that grow back as fast as
 *     they give (then each step is twice the last, up to a quarter of what they hold), or have taken
 *     three quarters of what they held for nothing (the stall is someone else's): then steps are spaced
 *     further and further apart, doubling up to 32 intervals, as Senpai backs off.
 *   - the growth limiter: the stall of a cache growing into a neighbour's working set is a cliff (0 ms/s,
 *     then hundreds), so a regulator that waits for it falls off it again and again. The size at which the
 *     stall rose is the edge; at the rise they are asked at once for what is above a tenth below it (as
 *     TCP cuts its window at a loss), and held there while the stall lasts; if it outlasts the kernel's
 *     lag, the limit comes down by a step each look, or by a quarter at once where the stall is a cliff
 *     (a phase change moves the edge lower, by an amount no figure says). Under the
 *     budget the limit rises from there as TCP CUBIC's window does after a loss, as a function of time,
 *     to a plateau short of the edge, and faster and faster past the edge, so that a neighbour who is
 *     still there is met rarely and one who has gone gives its room back within seconds. Far enough
 *     above it, the edge says nothing any more and is forgotten.
 * regulator.c reads the kernel's figures and runs the rounds; this file only decides. */

#include <stdbool.h>
#include <stdint.h>

struct regulation_params {
        uint64_t budget;             /* µs of `some` stall per second allowed (1000: 1 ms/s); 0: off */
        unsigned step_min_permille;  /* the smallest step, of what the shrinkers hold */
        unsigned step_max_permille;  /* the largest */
        unsigned step_gain_permille; /* the step at twice the budget; it grows linearly with the excess */
        uint64_t window_usec;        /* over only when the rate over at least this long is too (0: the look's) */
};

/* The control law's constants, each with its unit and why. Times are of the clock, not counts of looks:
 * the regulator looks four times as often at a cgroup scope, and the law must not care. The runs that
 * chose them are in docs/performance-history.md. */

/* Steps, in thousandths of what the shrinkers in scope hold. */
#define REGULATION_STEP_GAIN_PERMILLE 10      /* at twice the budget; linear in the excess */
#define REGULATION_STEP_MIN_PERMILLE 5        /* the smallest (the largest is regulate_step_max, 5%) */
#define REGULATION_STEP_HARD_MAX_PERMILLE 250 /* never more at once, boosted or cut to a limit */

/* Brakes. */
#define REGULATION_SETTLING_PERMILLE 750 /* a rate below this share of the one that stepped is falling: wait */
#define REGULATION_FELL_PERMILLE 900     /* a streak of steps ends when the rate fell below this share */
#define REGULATION_BOOST_AFTER 2         /* steps in a streak before each is twice the last... */
#define REGULATION_BOOST_MAX 3           /* ...up to 2^3 times the proportional one */
/* A streak that took all but this share of what they held without lowering the rate is futile (the
 * stall is someone else's): the spacing of its steps doubles, up to 2^REGULATION_BACKOFF_MAX looks. Not
 * sooner: a limit's stall is a cliff that does not fall until the caches are below the neighbour's
 * working set, which after a phase change can take 70% of them. */
#define REGULATION_FUTILE_PERMILLE 250
#define REGULATION_BACKOFF_MAX 5

/* What counts as over. A look is over the budget only when the stall of the last second is over it too:
 * at 1 ms/s a look of 250 ms is over with one read from disk, and such a blip is no edge. A cliff (tens
 * to hundreds of ms/s) is over within its first look either way. */
#define REGULATION_WINDOW_USEC (1000 * 1000ULL)
#define REGULATION_MARKS 8 /* readings remembered for the window: 2 s at the fastest looks */
/* A stall back within this of the last look over is the same stall (a group's stall comes in bursts over
 * looks of a few hundred ms): no rise, and its brakes stand. The shortest return is the natural bound:
 * no limit can be back at the edge sooner. */
#define REGULATION_SAME_STALL_USEC REGULATION_EDGE_RETURN_USEC

/* The growth limit. */
/* Held this far below the edge, in thousandths of it: the edge is noisy, and a cache held right at it
 * touches it with every burst of its load. */
#define REGULATION_EDGE_MARGIN_PERMILLE 100
/* After the cut at a rise, not cut again for this long while the stall stays: the kernel answers the cut
 * with a lag (the neighbour reads back what the overshoot pushed out). Past it, each look over cuts the
 * limit by a step, or by a quarter at a cliff (below), so that a phase change is followed down within
 * seconds. */
#define REGULATION_RISE_LAG_USEC REGULATION_WINDOW_USEC
/* A stall this many times the budget that outlasts that lag is a cliff below the limit, not the tail of
 * the overshoot: the neighbour's working set grew (a phase change, a burst), and by how much no figure
 * says. The limit is cut by the largest step (REGULATION_STEP_HARD_MAX_PERMILLE) at once, as TCP cuts its
 * window at a loss, and the lag is waited out again before the next cut. Proportional steps of a few
 * percent a look left the cache over the new edge for 2 to 2.5 s, long enough for the neighbour's second
 * pass to meet it again (a second wave at 300 to 450 ms/s in the benchmark's phase change). */
#define REGULATION_CLIFF_FACTOR 10
/* The return (CUBIC's K): on the plateau halfway between the margin and the edge after K, at the edge
 * after 2K, faster and faster past it (cubic_of_edge()). K is this after an edge that came down (a
 * burst or a phase change: a neighbour who came and may go), so that a cache cut to a quarter of its
 * room may have 90% of it again within 10 s of the stall going. */
#define REGULATION_EDGE_RETURN_USEC (2500 * 1000ULL)
/* After a first rise K is 4 times that; each rise again where the last one was doubles it, up to 2^4
 * times (40 s: a neighbour who stays is met every 80 s, each touch costing 50 to 200 ms of stall); a
 * rise elsewhere halves it, down to 10 s. */
#define REGULATION_EDGE_RETURN_SHIFT_MAX 4
/* An edge or a rise below this share of where the stall last rose came down: a neighbour who came and
 * may go, not one who stays (the short return). */
#define REGULATION_CAME_DOWN_PERMILLE 750
/* ...until it has stayed this many short returns (40 s): from then on each doubling of its stay doubles
 * the return, up to the longest. A neighbour who came and stays (a phase change) was otherwise met again
 * every 5.5 s while the new edge stayed under three quarters of the room, at 100 to 135 ms of stall each
 * time (20 ms/s, for good); one who leaves after a burst of 20 s still gives the room back within 10 s. */
#define REGULATION_CAME_DOWN_STAY_FACTOR 16
/* An edge the limit has risen this many times past is forgotten: the caches may grow until a stall finds
 * the next one. */
#define REGULATION_EDGE_FORGET_FACTOR 16

enum regulation_verdict {
        REGULATION_FIRST,       /* the first reading (or the counter went back): nothing to compare yet */
        REGULATION_UNDER,       /* at or under the budget: nothing asked */
        REGULATION_NOT_OWN,     /* over, but the stall is not for memory this scope's caches hold */
        REGULATION_SETTLING,    /* over, falling since the last step or the limit cut lately: wait, held to
                                 * the limit meanwhile (*ret_bytes, often 0) */
        REGULATION_BACKING_OFF, /* over, and steps did not help lately: not this interval */
        REGULATION_STEP,        /* ask for *ret_bytes (0: nothing is known of what they hold: count first) */
        _REGULATION_VERDICT_MAX,
};

const char *regulation_verdict_to_string(enum regulation_verdict v);

struct regulation {
        bool have_mark;
        bool first;                     /* the last reading had nothing to compare with */
        uint64_t mark_total, mark_usec; /* the last reading */
        uint64_t prev_usec;             /* the one before it: where the interval just measured began */
        double rate;                    /* the stall over the last interval, µs per second */
        double window_rate;             /* ...and over the window (params.window_usec) */
        struct {
                uint64_t usec, total;
        } marks[REGULATION_MARKS];      /* the last readings, for the window */
        unsigned n_marks, next_mark;
        double stepped_rate;            /* the rate that made the last step (< 0: the last interval did not step) */
        unsigned streak;                /* steps since the rate last fell by a tenth */
        double streak_rate;             /* the rate when that streak began */
        uint64_t streak_held;           /* what the shrinkers held then */
        unsigned boost;                 /* log2 of the factor on the proportional step (caches that regrow) */
        unsigned backoff;               /* log2 of the spacing of steps */
        unsigned skip;                  /* intervals still to skip */
        /* The growth limiter: what the shrinkers held when the stall rose over the budget from under it,
         * and less while it stays over (0: none known). */
        uint64_t edge;
        uint64_t edge_usec;  /* when it was last set */
        uint64_t cut_usec;   /* when the limit was last cut at once (at the rise, or at a cliff) */
        uint64_t quiet_usec; /* when the quiet spell began (0: the stall is over the budget) */
        uint64_t limit;      /* what the shrinkers may hold now (0: no limit) */
        uint64_t limit_base; /* the limit when the quiet spell began */
        unsigned return_shift; /* log2 of the return time's factor: the edge was met again that often */
        uint64_t rise_held;    /* what the shrinkers held at the last rise (not one far below it) */
        bool came_down;        /* a rise or an edge far below rise_held since: a burst, not a neighbour who stays */
        uint64_t came_down_usec; /* since when */
        bool was_over;                  /* in a stall: over, or under for less than REGULATION_SAME_STALL_USEC */
        uint64_t over_usec;             /* the last look over the budget */
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

/* One shrinker's share of a scope's growth limit, in bytes (at least 1): the limit split by what each
 * client in the scope holds (scope_held: their sum; client_held: this client's, at most its memory as the
 * kernel shows it), and within the client by what its shrinkers counted (shrinker_bytes of client_raw,
 * their uncapped sum). No client's claims move another's share by more than its own memory. */
uint64_t regulation_share(uint64_t limit, uint64_t scope_held, uint64_t client_held, uint64_t client_raw,
                          uint64_t shrinker_bytes);

/* Forget the edge (and with it the limit): the caches it was learnt from are gone or were not the cause. */
void regulation_forget_edge(struct regulation *r);

/* How fast the limit rises now, in thousandths of itself per second (0: it does not: no limit, or the
 * stall is over the budget). */
unsigned regulation_rise_permille(const struct regulation *r);

/* The limit's growth over `usec` of quiet, in millionths (1000000: none yet), for a return time of
 * REGULATION_EDGE_RETURN_USEC << return_shift: pure, for tests and docs. */
uint64_t regulation_rise_factor_ppm(uint64_t usec, unsigned return_shift);

/* How long the limit takes now to come back to the edge after a stall. */
uint64_t regulation_edge_return_usec(const struct regulation *r);

/* The return's shift for a neighbour who came (the edge came down) and has stayed this long. */
unsigned regulation_stay_shift(uint64_t stayed_usec);

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

/* The value of a named group's page cache, as the kernel measures it (mm/workingset.c): of what reclaim
 * took from the group lately, how much was read back (memory.stat's workingset_refault_file, in bytes,
 * against the bytes written to memory.reclaim). Where what is taken comes back, it was working set:
 * taking it costs a read and saves nothing. Steps are scaled by the share that stays out, and once half
 * of it comes back, probing spaces out as after an EAGAIN, before the refaults show as stall (on fast
 * storage they barely do). Both sums decay as a cache's value does in libpressure. A refault counts
 * evictions by any reclaim, the group's own limit's included: a group that refaults anyway is a group
 * whose page cache is worth its room. */
struct refault_value {
        double refaulted, reclaimed; /* decayed sums, bytes */
        uint64_t at;                 /* when they were decayed to */
};

#define REFAULT_DECAY_USEC (10ULL * 1000 * 1000) /* a reclaim counts for about this long */
#define REFAULT_BACKOFF_PERMILLE 500             /* this share back: probing spaces out */
/* Below this reclaimed lately, the share says nothing (a refault or two of a first small step): 0. */
#define REFAULT_MIN_RECLAIMED_BYTES (4ULL * 1024 * 1024)

/* Add what the kernel refaulted and what was reclaimed since the last call, at now (µs). */
void refault_value_add(struct refault_value *v, uint64_t refaulted, uint64_t reclaimed, uint64_t now);
/* The share of what was reclaimed lately that came back, per mille (at most 1000). */
unsigned refault_value_permille(const struct refault_value *v);
/* A probe's step of bytes, less the share that comes back. */
uint64_t refault_scale_step(uint64_t bytes, unsigned permille);
