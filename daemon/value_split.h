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

/* Set every member's share: for members without a value, their proportional one; for the others, arena
 * by arena, the sum of their proportional shares asked again, lowest value first, each at most
 * VALUE_STEP of its bytes, and what that leaves from each again up to its proportional share (and its
 * bytes). The sum of each arena's shares is its proportional sum, as far as its members hold it.
 * scratch: n entries. */
void value_split(struct value_member *m, size_t n, size_t *scratch);
