/* SPDX-License-Identifier: MIT */
#pragma once

/* Value-aware shares of a round (pure). A round splits what it wants over its shrinkers in proportion to
 * what they hold, as the kernel does; that is blind to what a byte is worth in each cache. Where counts
 * carry values (what one more MiB would save: ShrinkAnswer.value), the proportional shares of the
 * shrinkers that have one are taken again from the one of lowest value up, moving down the gradient as
 * Cliffhanger does, each step bounded so that no cache is emptied at once: the cache whose last bytes
 * are worth least gives first, and once it has shrunk, its value rises (its tail is now what it uses)
 * and the next round asks the next.
 *
 * A value is a claim. Claims are compared only within an arena: by default one uid's shrinkers, so that
 * a service arbitrates its own caches, and every uid still gives its proportional share, whatever its
 * shrinkers say; root may name cgroups (value_cgroup=) whose shrinkers share one arena across uids.
 * Shrinkers without a value keep their proportional share. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One shrinker (one node of it) in a round. */
struct value_member {
        uint64_t proportional; /* its share by what it holds, as shrink_share() gives it */
        uint64_t share;        /* out: its share by value */
        uint64_t bytes; /* what its last count said it holds */
        double value;   /* what its last count said its last bytes are worth; 0: not known */
        uint64_t arena; /* whose claims it is compared with: its uid, or VALUE_ARENA_SHARED */
};

#define VALUE_ARENA_SHARED UINT64_MAX

/* The most of its bytes one round asks of a cache by value: half. A cache of low value gives at most
 * this much at once; the rest of its arena's shares goes back to the others in proportion. */
#define VALUE_STEP_NUM 1u
#define VALUE_STEP_DEN 2u

/* Whether any member has a value: otherwise the proportional shares stand, untouched. */
bool value_split_applies(const struct value_member *m, size_t n);

/* ---- growth limits by value ----
 *
 * Between rounds, a limited group's caches are held by the growth limits the regulator tells them, each
 * its share of the group's limit by what it holds: whatever each held when the group filled, it keeps.
 * Where values differ, each look moves a step of limit from the cache whose last bytes are worth least
 * to the one whose are worth most (Cliffhanger's credits), within one arena, until their values meet
 * (the highest no more than VALUE_MOVE_RATIO times the lowest) or the giver is down to its floor, when the
 * next lowest gives. The
 * giver trims at once; the taker grows into the room as its load brings values. */

/* A shrinker in a limited scope: its share of the limit now, and what its last count said. */
struct value_candidate {
        uint64_t id;
        double value; /* 0: not known */
        uint64_t arena;
        uint64_t share;
};

/* step bytes of limit from shrinker from to shrinker to, this look. */
struct value_move {
        uint64_t from, to, bytes;
};

#define VALUE_MOVE_RATIO 1.5      /* values closer than this are noise: nothing moves */
/* A look moves a 32nd of the scope's limit: per look, not per second, since a step only takes effect when
 * its giver is told (a limit moved by more than a 32nd of what it was told) and its holdings then follow;
 * a scope whose caches grow is looked at up to four times an interval, and then moves faster. */
#define VALUE_MOVE_STEP_DIV 32u
#define VALUE_FLOOR_DIV 16u       /* ...and never takes a cache below a 16th of it */
#define VALUE_RECOUNT_USEC (5ULL * 1000 * 1000) /* values are counted again this often while they matter */

/* One move per arena whose values differ enough: step bytes from the lowest that holds a step above its
 * floor to the highest; in ret (at most max). Returns how many. */
size_t value_moves(const struct value_candidate *c, size_t n, uint64_t step, uint64_t floor, struct value_move *ret,
                   size_t max);

/* Set every member's share: for members without a value, their proportional one; for the others, arena
 * by arena, the sum of their proportional shares asked again, lowest value first, each at most
 * VALUE_STEP of its bytes, and what that leaves from each again up to its proportional share (and its
 * bytes). The sum of each arena's shares is its proportional sum, as far as its members hold it.
 * scratch: n entries. */
void value_split(struct value_member *m, size_t n, size_t *scratch);
