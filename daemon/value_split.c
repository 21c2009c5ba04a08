/* SPDX-License-Identifier: MIT */
#include "value_split.h"

#include <assert.h>
#include <stdbool.h>

#include "macro.h"
#include "shrink_policy.h"

bool value_split_applies(const struct value_member *m, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (m[i].value > 0)
                        return true;
        return false;
}

/* a before b: by arena, then lowest value first, ties in member order (the split must not depend on a
 * sort's instability). */
static bool before(const struct value_member *m, size_t a, size_t b) {
        if (m[a].arena != m[b].arena)
                return m[a].arena < m[b].arena;
        if (m[a].value != m[b].value)
                return m[a].value < m[b].value;
        return a < b;
}

/* Insertion sort: a round's shrinkers are few. */
static void sort_members(const struct value_member *m, size_t *idx, size_t k) {
        for (size_t i = 1; i < k; i++) {
                size_t x = idx[i], j = i;
                for (; j > 0 && before(m, x, idx[j - 1]); j--)
                        idx[j] = idx[j - 1];
                idx[j] = x;
        }
}

/* One arena's valued members, idx[0..k), lowest value first: their pool asked again by value. */
static void split_arena(struct value_member *m, const size_t *idx, size_t k) {
        uint64_t left = 0;
        for (size_t i = 0; i < k; i++)
                left = sat_add(left, m[idx[i]].proportional);
        for (size_t i = 0; i < k; i++) {
                struct value_member *x = &m[idx[i]];
                x->share = MIN(left, mul_div(x->bytes, VALUE_STEP_NUM, VALUE_STEP_DEN));
                left -= x->share;
        }
        for (size_t i = 0; left > 0 && i < k; i++) {
                struct value_member *x = &m[idx[i]];
                uint64_t more = MIN(MIN(x->proportional, x->bytes - MIN(x->bytes, x->share)), left);
                x->share += more;
                left -= more;
        }
}

size_t value_moves(const struct value_candidate *c, size_t n, uint64_t step, uint64_t floor, struct value_move *ret,
                   size_t max) {
        assert(c || n == 0);
        assert(ret || max == 0);

        size_t k = 0;
        for (size_t i = 0; i < n && k < max; i++) {
                if (!(c[i].value > 0))
                        continue;
                /* The first valued candidate of its arena finds the arena's lowest and highest. */
                bool first = true;
                for (size_t j = 0; j < i && first; j++)
                        first = !(c[j].value > 0 && c[j].arena == c[i].arena);
                if (!first)
                        continue;
                /* The giver: the lowest value among those that can give a whole step above their floor (one
                 * near its floor has given what it may, and the next one up gives now: a crumb a look is no
                 * move at all, nobody is told it); the taker: the highest. */
                size_t lo = SIZE_MAX, hi = i;
                for (size_t j = i; j < n; j++) {
                        if (!(c[j].value > 0) || c[j].arena != c[i].arena)
                                continue;
                        if (c[j].share >= sat_add(floor, step) && (lo == SIZE_MAX || c[j].value < c[lo].value))
                                lo = j;
                        if (c[j].value > c[hi].value)
                                hi = j;
                }
                if (lo == SIZE_MAX || lo == hi || c[hi].value <= c[lo].value * VALUE_MOVE_RATIO)
                        continue;
                ret[k++] = (struct value_move){ .from = c[lo].id, .to = c[hi].id, .bytes = step };
        }
        return k;
}

void value_split(struct value_member *m, size_t n, size_t *scratch) {
        assert(m || n == 0);
        assert(scratch || n == 0);

        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                m[i].share = m[i].proportional;
                if (m[i].value > 0)
                        scratch[k++] = i;
        }
        sort_members(m, scratch, k);
        for (size_t first = 0, end; first < k; first = end) {
                for (end = first + 1; end < k && m[scratch[end]].arena == m[scratch[first]].arena; end++)
                        ;
                split_arena(m, scratch + first, end - first);
        }
}
