/* SPDX-License-Identifier: MIT */
#include "shrink_policy.h"
#include "shrink_share.h"
#include "test-util.h"
#include "value_split.h"

/* Run a whole pass the way the daemon does, every call scanning what it was asked. */
static uint64_t run_pass(uint64_t freeable, int priority, unsigned seeks, unsigned batch, uint64_t *deferred,
                         unsigned *calls) {
        struct shrink_plan p;
        uint64_t nr, total = 0;
        *calls = 0;
        shrink_plan_start(&p, freeable, priority, seeks, *deferred);
        while (shrink_plan_next(&p, batch, &nr)) {
                CU_ASSERT(nr <= batch);
                shrink_plan_scanned(&p, nr);
                total += nr;
                (*calls)++;
        }
        *deferred = shrink_plan_finish(&p);
        return total;
}

/* Worked by hand from do_shrink_slab: delta = (freeable >> priority) * 4 / seeks. */
static void test_sizing_by_hand(void) {
        struct shrink_plan p;

        /* 1,000,000 objects, priority 12, seeks 2: 1000000 >> 12 = 244; * 4 = 976; / 2 = 488. */
        shrink_plan_start(&p, 1000000, 12, 2, 0);
        CU_ASSERT_EQUAL(p.delta, 488u);
        CU_ASSERT_EQUAL(p.total_scan, 488u);

        /* priority 6: 1000000 >> 6 = 15625; * 4 / 2 = 31250. */
        shrink_plan_start(&p, 1000000, 6, 2, 0);
        CU_ASSERT_EQUAL(p.total_scan, 31250u);

        /* priority 0: 4,000,000 / 2 = 2,000,000 = 2 * freeable: the cap. */
        shrink_plan_start(&p, 1000000, 0, 2, 0);
        CU_ASSERT_EQUAL(p.total_scan, 2000000u);

        /* seeks 0: half, whatever the priority. */
        shrink_plan_start(&p, 1000, 12, 0, 0);
        CU_ASSERT_EQUAL(p.delta, 500u);

        /* seeks 8 (expensive objects): 1000000 >> 12 = 244 * 4 / 8 = 122. */
        shrink_plan_start(&p, 1000000, 12, 8, 0);
        CU_ASSERT_EQUAL(p.delta, 122u);

        /* deferred work enters shifted by priority: 100000 >> 12 = 24, + 488. */
        shrink_plan_start(&p, 1000000, 12, 2, 100000);
        CU_ASSERT_EQUAL(p.total_scan, 24u + 488u);
}

static void test_batches(void) {
        uint64_t deferred = 0;
        unsigned calls;

        /* 31250 at batch 128: 244 full batches (31232), the last 18 are less than a batch and less than
         * freeable: deferred, as the kernel does. */
        uint64_t scanned = run_pass(1000000, 6, 2, 128, &deferred, &calls);
        CU_ASSERT_EQUAL(scanned, 31232u);
        CU_ASSERT_EQUAL(calls, 244u);
        CU_ASSERT_EQUAL(deferred, 18u);

        /* A small cache (freeable < batch) is still scanned while total_scan >= freeable. 50 objects at
         * priority 0: delta 100 = the cap, one call of 100. */
        deferred = 0;
        scanned = run_pass(50, 0, 2, 128, &deferred, &calls);
        CU_ASSERT_EQUAL(scanned, 100u);
        CU_ASSERT_EQUAL(calls, 1u);
        CU_ASSERT_EQUAL(deferred, 0u);

        /* 100 objects at priority 0: total 200; one batch of 128, then 72 is below both the batch and
         * freeable, so it is deferred, not scanned. */
        deferred = 0;
        scanned = run_pass(100, 0, 2, 128, &deferred, &calls);
        CU_ASSERT_EQUAL(scanned, 128u);
        CU_ASSERT_EQUAL(calls, 1u);
        CU_ASSERT_EQUAL(deferred, 72u);

        /* Gentle pressure on a small cache: 100 >> 12 = 0: nothing now, nothing deferred. */
        deferred = 0;
        scanned = run_pass(100, 12, 2, 128, &deferred, &calls);
        CU_ASSERT_EQUAL(scanned, 0u);
        CU_ASSERT_EQUAL(deferred, 0u);
}

static void test_deferred_accumulates_and_caps(void) {
        struct shrink_plan p;

        /* A shrinker that stops at once: the whole delta is deferred... */
        shrink_plan_start(&p, 1000, 0, 2, 0);
        CU_ASSERT_EQUAL(p.total_scan, 2000u);
        CU_ASSERT_EQUAL(shrink_plan_finish(&p), 2000u);

        /* ...and deferred work never exceeds 2 * freeable, however much piles up. */
        shrink_plan_start(&p, 1000, 0, 2, 1000000000ull);
        CU_ASSERT_EQUAL(p.total_scan, 2000u);
        CU_ASSERT_EQUAL(shrink_plan_finish(&p), 2000u);

        /* Partly done: nr_deferred + delta - scanned. */
        shrink_plan_start(&p, 1000000, 12, 2, 512);
        shrink_plan_scanned(&p, 128);
        CU_ASSERT_EQUAL(shrink_plan_finish(&p), 512u + 488u - 128u);

        /* Scanned more than asked (nr_scanned set by the shrinker): no negative deferral. */
        shrink_plan_start(&p, 1000, 12, 2, 0);
        shrink_plan_scanned(&p, 5000);
        CU_ASSERT_EQUAL(shrink_plan_finish(&p), 0u);
        CU_ASSERT_EQUAL(p.total_scan, 0u);
}

static void test_priorities(void) {
        struct shrink_priorities pr;
        shrink_priorities_default(&pr);
        CU_ASSERT_EQUAL(pr.at[LEVEL_LOW], 12);
        CU_ASSERT_EQUAL(pr.at[LEVEL_MEDIUM], 9);
        CU_ASSERT_EQUAL(pr.at[LEVEL_CRITICAL], 6);
        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                CU_ASSERT(pr.floor[l] <= pr.at[l]);
        /* At low a seeks-2 cache is never asked for more than 2/2^floor of itself in a round: 1/8. */
        CU_ASSERT_EQUAL(pr.floor[LEVEL_LOW], 4);
        CU_ASSERT_EQUAL(pr.floor[LEVEL_CRITICAL], 0);
}

/* The split of a target, worked by hand. */
static void test_split(void) {
        /* weight: the kernel's delta at priority 0, in bytes */
        CU_ASSERT_EQUAL(shrink_weight(1000, 2), 2000u);
        CU_ASSERT_EQUAL(shrink_weight(1000, 4), 1000u);
        CU_ASSERT_EQUAL(shrink_weight(1000, 0), 500u);
        /* 1 MB wanted; weights 3:1; 4 KiB objects: 750,000 bytes = 183.1 objects -> 184 */
        CU_ASSERT_EQUAL(shrink_target_objects(1000000, 3, 4, 4096000), 184u);
        CU_ASSERT_EQUAL(shrink_target_objects(1000000, 1, 4, 4096000), 62u); /* 250,000 / 4096 = 61.04 */
        /* exact: no rounding up */
        CU_ASSERT_EQUAL(shrink_target_objects(4096, 1, 1, 4096000), 1u);
        CU_ASSERT_EQUAL(shrink_target_objects(1000, 1, 0, 1000), 0u);
        CU_ASSERT_EQUAL(shrink_target_objects(1000, 1, 1, 0), 0u);
        /* a weight above the total (a liar) gets the whole want, not more */
        CU_ASSERT_EQUAL(shrink_target_objects(1000, 50, 10, 1000), 1000u);
        CU_ASSERT_EQUAL(shrink_target_objects(INT64_MAX, UINT64_MAX, UINT64_MAX, 1), UINT64_MAX);
}

/* Escalation only without progress, within [floor, start]. */
static void test_next_priority(void) {
        CU_ASSERT_EQUAL(shrink_next_priority(9, 9, 2, true, false), 7);   /* short, stall steady */
        CU_ASSERT_EQUAL(shrink_next_priority(3, 9, 2, true, false), 2);   /* not below the floor */
        CU_ASSERT_EQUAL(shrink_next_priority(9, 9, 2, false, false), 9);  /* released what it wanted */
        CU_ASSERT_EQUAL(shrink_next_priority(2, 9, 2, true, false), 2);   /* at the floor */
        CU_ASSERT_EQUAL(shrink_next_priority(5, 9, 2, true, true), 6);    /* the stall fell: ease off */
        CU_ASSERT_EQUAL(shrink_next_priority(9, 9, 2, false, true), 9);   /* not above the start */
}

/* What was released: the drop in resident memory, plus what the client would have grown meanwhile. */
static void test_release_estimate(void) {
        const uint64_t M = 1 << 20, S = 1000000;
        /* Flat before, 8 MiB down after: 8 MiB (of 10 claimed). */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 92 * M, 11 * S, 100 * M, 9 * S), 8 * M);
        /* Capped at the claim. */
        CU_ASSERT_EQUAL(shrink_release_estimate(2 * M, 100 * M, 10 * S, 92 * M, 11 * S, 0, 0), 2 * M);
        /* Grew 4 MiB/s before; flat over the second after the round began: it gave back 4 MiB. */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 100 * M, 11 * S, 96 * M, 9 * S), 4 * M);
        /* A liar: flat all along, nothing released. */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 100 * M, 11 * S, 100 * M, 9 * S), 0);
        /* Grew further than its rate: nothing released, never negative. */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 120 * M, 11 * S, 100 * M, 9 * S), 0);
        /* A previous reading too old (over 30 s) or out of order gives no rate. */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 50 * S, 100 * M, 51 * S, 10 * M, 9 * S), 0);
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 100 * M, 11 * S, 10 * M, 12 * S), 0);
        /* Shrunk before the round: that is no rate of growth. */
        CU_ASSERT_EQUAL(shrink_release_estimate(10 * M, 100 * M, 10 * S, 100 * M, 11 * S, 200 * M, 9 * S), 0);
        /* Huge numbers saturate. */
        CU_ASSERT_EQUAL(shrink_release_estimate(UINT64_MAX, UINT64_MAX, 10 * S, 0, 11 * S, 0, 9 * S), UINT64_MAX);
}

/* Trust: half the old, half what the last measured round showed; small claims say nothing. */
static void test_trust(void) {
        const uint64_t M = 1 << 20;
        unsigned t = SHRINK_TRUST_FULL;
        for (int i = 0; i < 4; i++)
                t = shrink_trust_update(t, 8 * M, 0); /* a liar */
        CU_ASSERT(t <= SHRINK_TRUST_FULL / 16 + 1);
        CU_ASSERT_EQUAL(shrink_trust_credit(t, 16 * M), mul_div(16 * M, 2 * t, 1000));
        CU_ASSERT_EQUAL(shrink_trust_credit(600, 16 * M), 16 * M); /* the benefit of the doubt down to half */
        CU_ASSERT_EQUAL(shrink_trust_credit(250, 16 * M), 8 * M);
        t = shrink_trust_update(t, 8 * M, 8 * M);
        t = shrink_trust_update(t, 8 * M, 8 * M);
        t = shrink_trust_update(t, 8 * M, 8 * M);
        CU_ASSERT(t >= 880); /* it gave back what it claimed: trusted again */
        CU_ASSERT_EQUAL(shrink_trust_update(500, 100 * 1024, 0), 500);  /* too small to tell */
        CU_ASSERT_EQUAL(shrink_trust_update(1000, 8 * M, 4 * M), 750); /* half of it */
        CU_ASSERT_EQUAL(shrink_trust_update(5000, 8 * M, 16 * M), 1000); /* never above full */
        CU_ASSERT_EQUAL(shrink_trust_credit(SHRINK_TRUST_FULL, UINT64_MAX), UINT64_MAX);
        CU_ASSERT_EQUAL(shrink_trust_credit(0, 8 * M), 0);
}

static void test_cgroup_within(void) {
        CU_ASSERT_TRUE(shrink_cgroup_within("/a", "/a"));
        CU_ASSERT_TRUE(shrink_cgroup_within("/a/b/c", "/a"));
        CU_ASSERT_TRUE(shrink_cgroup_within("/a/b", "/"));
        CU_ASSERT_FALSE(shrink_cgroup_within("/ab", "/a"));
        CU_ASSERT_FALSE(shrink_cgroup_within("/a", "/a/b"));
        CU_ASSERT_FALSE(shrink_cgroup_within(NULL, "/a"));
}

static void test_select(void) {
        bool all;
        const char *cg;
        const unsigned N = SHRINKER_NUMA_AWARE, M = SHRINKER_MEMCG_AWARE;

        /* System: everyone; NUMA_AWARE per node; MEMCG_AWARE for its own cgroup, others for the root. */
        CU_ASSERT_TRUE(shrink_select(SCOPE_SYSTEM, NULL, 0, "/x", &all, &cg));
        CU_ASSERT_FALSE(all);
        CU_ASSERT_STRING_EQUAL(cg, "/");
        CU_ASSERT_TRUE(shrink_select(SCOPE_SYSTEM, NULL, N | M, "/x/y", &all, &cg));
        CU_ASSERT_TRUE(all);
        CU_ASSERT_STRING_EQUAL(cg, "/x/y");

        /* Node: only NUMA_AWARE. */
        CU_ASSERT_FALSE(shrink_select(SCOPE_NODE, NULL, M, "/x", &all, &cg));
        CU_ASSERT_TRUE(shrink_select(SCOPE_NODE, NULL, N, "/x", &all, &cg));
        CU_ASSERT_FALSE(all);

        /* Cgroup /a: MEMCG_AWARE shrinkers of processes in /a's subtree, naming /a. */
        CU_ASSERT_TRUE(shrink_select(SCOPE_CGROUP, "/a", M, "/a", &all, &cg));
        CU_ASSERT_STRING_EQUAL(cg, "/a");
        CU_ASSERT_TRUE(shrink_select(SCOPE_CGROUP, "/a", M | N, "/a/b/c", &all, &cg));
        CU_ASSERT_TRUE(all);
        CU_ASSERT_STRING_EQUAL(cg, "/a");
        CU_ASSERT_FALSE(shrink_select(SCOPE_CGROUP, "/a", M, "/b", &all, &cg));
        CU_ASSERT_FALSE(shrink_select(SCOPE_CGROUP, "/a", M, "/ab", &all, &cg));
        CU_ASSERT_FALSE(shrink_select(SCOPE_CGROUP, "/a", N, "/a", &all, &cg)); /* not MEMCG_AWARE */
        CU_ASSERT_FALSE(shrink_select(SCOPE_CGROUP, "/a/b", M, "/a", &all, &cg)); /* a parent is not inside */
}

/* Counts come from clients: 2^62 objects at priority 0 must ask for the cap (2 * freeable), not wrap to
 * nothing; deferred work near the top saturates. */
static void test_huge_numbers(void) {
        struct shrink_plan p;
        uint64_t huge = 1ULL << 62;

        shrink_plan_start(&p, huge, 0, 2, 0);
        CU_ASSERT_EQUAL(p.total_scan, 2 * huge);
        shrink_plan_start(&p, huge, 0, 1, UINT64_MAX);
        CU_ASSERT_EQUAL(p.total_scan, 2 * huge);
        CU_ASSERT_EQUAL(shrink_plan_finish(&p), 2 * huge);
        shrink_plan_start(&p, INT64_MAX, 0, 2, 0);
        CU_ASSERT(p.total_scan > (uint64_t) INT64_MAX);
        CU_ASSERT_EQUAL(sat_add(UINT64_MAX, 1), UINT64_MAX);
        CU_ASSERT_EQUAL(sat_mul(1ULL << 40, 1ULL << 40), UINT64_MAX);
        CU_ASSERT_EQUAL(mul_div(INT64_MAX, 1000, 1), UINT64_MAX);
        CU_ASSERT_EQUAL(mul_div(INT64_MAX, 1000, 1000), (uint64_t) INT64_MAX);
}

static void test_quarantine(void) {
        struct shrink_health h = {};
        CU_ASSERT_FALSE(shrink_health_timeout(&h, 3));
        CU_ASSERT_FALSE(shrink_health_timeout(&h, 3));
        /* An answer in between starts the count again. */
        CU_ASSERT_FALSE(shrink_health_answer(&h));
        CU_ASSERT_FALSE(shrink_health_timeout(&h, 3));
        CU_ASSERT_FALSE(shrink_health_timeout(&h, 3));
        CU_ASSERT_TRUE(shrink_health_timeout(&h, 3));
        CU_ASSERT_TRUE(h.quarantined);
        CU_ASSERT_FALSE(shrink_health_timeout(&h, 3)); /* already */
        CU_ASSERT_TRUE(shrink_health_answer(&h));       /* recovered */
        CU_ASSERT_FALSE(h.quarantined);
        CU_ASSERT_EQUAL(h.consecutive_timeouts, 0u);
}

#define NONE SHRINK_ANSWER_ABSENT

static void test_answer_check(void) {
        const struct shrink_answer count = { .count = 10, .bytes = NONE, .freed = NONE, .scanned = NONE };
        const struct shrink_answer empty = { .count = NONE, .bytes = NONE, .freed = NONE, .scanned = NONE, .empty = true };
        const struct shrink_answer freed = { .count = NONE, .bytes = NONE, .freed = 128, .scanned = NONE };
        const struct shrink_answer stop = { .count = NONE, .bytes = NONE, .freed = NONE, .scanned = NONE, .stop = true };
        CU_ASSERT_PTR_NULL(shrink_answer_check(SHRINK_OP_COUNT, 0, &count));
        CU_ASSERT_PTR_NULL(shrink_answer_check(SHRINK_OP_COUNT, 0, &empty));
        CU_ASSERT_PTR_NULL(shrink_answer_check(SHRINK_OP_SCAN, 64, &freed)); /* twice is the most */
        CU_ASSERT_PTR_NULL(shrink_answer_check(SHRINK_OP_SCAN, 64, &stop));
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_SCAN, 63, &freed), "freed exceeds twice nr_to_scan");
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_COUNT, 0, &freed),
                               "a count request is answered with count, bytes or empty");
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_SCAN, 64, &count),
                               "a scan request is answered with freed, scanned, bytes or stop");
        const struct shrink_answer nothing = { .count = NONE, .bytes = NONE, .freed = NONE, .scanned = NONE };
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_COUNT, 0, &nothing), "count missing");
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_SCAN, 64, &nothing), "freed missing");
        const struct shrink_answer negative = { .count = -1, .bytes = NONE, .freed = NONE, .scanned = NONE };
        CU_ASSERT_STRING_EQUAL(shrink_answer_check(SHRINK_OP_COUNT, 0, &negative), "negative numbers");
}

static void test_share_of_goal(void) {
        /* two known shrinkers of 100 and 300, a third unknown: it weighs their average (200) */
        struct shrink_split sp = { .want = 6000, .known_weight = 400, .n_known = 2, .n_unknown = 1 };
        CU_ASSERT_EQUAL(shrink_share(&sp, 200, 0), 2000u);
        /* the one that weighed 100 when the round began and 300 now: 300 of 400 - 100 + 200 + 300 */
        CU_ASSERT_EQUAL(shrink_share(&sp, 300, 100), 2250u);
        /* in a goal bigger than this round's want, the share is of the goal */
        sp.in_goal = true;
        sp.goal = 12000;
        CU_ASSERT_EQUAL(shrink_share(&sp, 200, 0), 4000u);
        /* alone: all of it */
        const struct shrink_split alone = { .want = 500, .n_unknown = 1 };
        CU_ASSERT_EQUAL(shrink_share(&alone, 7, 0), 500u);
        /* a scan budget of twice the objects */
        CU_ASSERT_EQUAL(shrink_share_scan_budget(4000, 1000 * 1000), 8u);
}

static void test_claim_credit(void) {
        uint64_t left = 1000, claim;
        CU_ASSERT_EQUAL(shrink_claim_credit(600, &left, SHRINK_TRUST_FULL, &claim), 600u);
        CU_ASSERT_EQUAL(claim, 600u);
        CU_ASSERT_EQUAL(left, 400u);
        /* no more than it had resident, whatever it says */
        CU_ASSERT_EQUAL(shrink_claim_credit(UINT64_MAX, &left, SHRINK_TRUST_FULL, &claim), 400u);
        CU_ASSERT_EQUAL(left, 0u);
        CU_ASSERT_EQUAL(shrink_claim_credit(5, &left, SHRINK_TRUST_FULL, &claim), 0u);
        /* at half trust, half counts */
        left = 1000;
        CU_ASSERT_EQUAL(shrink_claim_credit(1000, &left, SHRINK_TRUST_FULL / 2, &claim), shrink_trust_credit(SHRINK_TRUST_FULL / 2, 1000));
        CU_ASSERT_EQUAL(claim, 1000u);
}

/* ---- value ---- */

#define SPLIT(m) value_split((m), ELEMENTSOF(m), scratch)

static void test_value_split(void) {
        size_t scratch[8];
        /* No values: the proportional shares stand. */
        struct value_member none[] = { { .proportional = 60, .bytes = 1000, .arena = 1 },
                                       { .proportional = 40, .bytes = 500, .arena = 2 } };
        CU_ASSERT(!value_split_applies(none, ELEMENTSOF(none)));
        SPLIT(none);
        CU_ASSERT_EQUAL(none[0].share, 60u);
        CU_ASSERT_EQUAL(none[1].share, 40u);

        /* One uid's two caches: the one of lower value gives the pair's whole share, listed first or not. */
        struct value_member two[] = { { .proportional = 50, .bytes = 1000, .value = 10, .arena = 1000 },
                                      { .proportional = 50, .bytes = 1000, .value = 1, .arena = 1000 } };
        CU_ASSERT(value_split_applies(two, ELEMENTSOF(two)));
        SPLIT(two);
        CU_ASSERT_EQUAL(two[0].share, 0u);
        CU_ASSERT_EQUAL(two[1].share, 100u);

        /* At most half of what it holds in one round; the rest from the next, lowest first. */
        struct value_member bound[] = { { .proportional = 300, .bytes = 1000, .value = 1, .arena = 7 },
                                        { .proportional = 300, .bytes = 1000, .value = 5, .arena = 7 } };
        SPLIT(bound);
        CU_ASSERT_EQUAL(bound[0].share, 500u);
        CU_ASSERT_EQUAL(bound[1].share, 100u);

        /* Past every step the proportional split takes over again, each at most what it holds: the round
         * still gets what it wants. */
        struct value_member over[] = { { .proportional = 500, .bytes = 1000, .value = 1, .arena = 7 },
                                       { .proportional = 500, .bytes = 600, .value = 5, .arena = 7 } };
        SPLIT(over);
        CU_ASSERT_EQUAL(over[0].share, 700u);
        CU_ASSERT_EQUAL(over[1].share, 300u);
        CU_ASSERT_EQUAL(over[0].share + over[1].share, 1000u);

        /* A shrinker without a value keeps its proportional share; the valued ones move theirs. */
        struct value_member mixed[] = { { .proportional = 100, .bytes = 1000, .value = 1, .arena = 1 },
                                        { .proportional = 100, .bytes = 1000, .arena = 1 },
                                        { .proportional = 100, .bytes = 1000, .value = 10, .arena = 1 } };
        SPLIT(mixed);
        CU_ASSERT_EQUAL(mixed[0].share, 200u);
        CU_ASSERT_EQUAL(mixed[1].share, 100u);
        CU_ASSERT_EQUAL(mixed[2].share, 0u);
}

/* Growth limits by value: a step from the lowest to the highest of each arena, while they differ. */
static void test_value_moves(void) {
        struct value_move mv[4];
        const struct value_candidate c[] = {
                { .id = 1, .value = 2, .arena = 1000, .share = 40 },
                { .id = 2, .value = 50, .arena = 1000, .share = 30 },
                { .id = 3, .value = 10, .arena = 1000, .share = 30 },
                { .id = 4, .value = 1, .arena = 1001, .share = 10 }, /* alone in its arena */
                { .id = 5, .arena = 1000, .share = 10 },             /* no value: not moved */
        };
        CU_ASSERT_EQUAL_FATAL(value_moves(c, ELEMENTSOF(c), 8, 4, mv, ELEMENTSOF(mv)), 1u);
        CU_ASSERT_EQUAL(mv[0].from, 1u);
        CU_ASSERT_EQUAL(mv[0].to, 2u);
        CU_ASSERT_EQUAL(mv[0].bytes, 8u);
        /* Less than a step above its floor: nothing, and the next lowest gives instead. */
        const struct value_candidate near[] = { { .id = 1, .value = 1, .arena = 7, .share = 12 },
                                                { .id = 2, .value = 9, .arena = 7, .share = 90 } };
        CU_ASSERT_EQUAL_FATAL(value_moves(near, 2, 8, 4, mv, 4), 1u);
        CU_ASSERT_EQUAL(mv[0].bytes, 8u);
        CU_ASSERT_EQUAL(value_moves(near, 2, 8, 6, mv, 4), 0u);
        const struct value_candidate next[] = { { .id = 1, .value = 1, .arena = 7, .share = 6 },
                                                { .id = 2, .value = 3, .arena = 7, .share = 40 },
                                                { .id = 3, .value = 30, .arena = 7, .share = 50 } };
        CU_ASSERT_EQUAL_FATAL(value_moves(next, 3, 8, 6, mv, 4), 1u);
        CU_ASSERT(mv[0].from == 2 && mv[0].to == 3 && mv[0].bytes == 8);
        /* Values within the ratio are noise. */
        const struct value_candidate close[] = { { .id = 1, .value = 10, .arena = 7, .share = 50 },
                                                 { .id = 2, .value = 14, .arena = 7, .share = 50 } };
        CU_ASSERT_EQUAL(value_moves(close, 2, 8, 4, mv, 4), 0u);
        /* Two arenas, a move in each. */
        const struct value_candidate two[] = { { .id = 1, .value = 1, .arena = 1, .share = 50 },
                                               { .id = 2, .value = 9, .arena = 2, .share = 50 },
                                               { .id = 3, .value = 9, .arena = 1, .share = 50 },
                                               { .id = 4, .value = 1, .arena = 2, .share = 50 } };
        CU_ASSERT_EQUAL_FATAL(value_moves(two, 4, 8, 4, mv, 4), 2u);
        CU_ASSERT(mv[0].from == 1 && mv[0].to == 3);
        CU_ASSERT(mv[1].from == 4 && mv[1].to == 2);
}

/* A value is a claim: another uid's, however high, moves nothing between uids. */
static void test_value_arenas(void) {
        size_t scratch[8];
        struct value_member uids[] = { { .proportional = 50, .bytes = 1000, .value = 1e9, .arena = 1000 },
                                       { .proportional = 50, .bytes = 1000, .value = 0.001, .arena = 1001 } };
        SPLIT(uids);
        CU_ASSERT_EQUAL(uids[0].share, 50u);
        CU_ASSERT_EQUAL(uids[1].share, 50u);

        /* Within uid 1000 the claim orders its own caches: its other cache gives uid 1000's share. */
        struct value_member own[] = { { .proportional = 50, .bytes = 1000, .value = 1e9, .arena = 1000 },
                                      { .proportional = 50, .bytes = 1000, .value = 0.001, .arena = 1001 },
                                      { .proportional = 50, .bytes = 1000, .value = 3, .arena = 1000 } };
        SPLIT(own);
        CU_ASSERT_EQUAL(own[0].share, 0u);
        CU_ASSERT_EQUAL(own[1].share, 50u);
        CU_ASSERT_EQUAL(own[2].share, 100u);

        /* In the cgroups root named (value_cgroup=), one arena across uids. */
        struct value_member shared[] = { { .proportional = 50, .bytes = 1000, .value = 9, .arena = VALUE_ARENA_SHARED },
                                         { .proportional = 50, .bytes = 1000, .value = 2, .arena = VALUE_ARENA_SHARED } };
        SPLIT(shared);
        CU_ASSERT_EQUAL(shared[0].share, 0u);
        CU_ASSERT_EQUAL(shared[1].share, 100u);

        /* Huge numbers saturate rather than wrap. */
        struct value_member huge[] = { { .proportional = UINT64_MAX, .bytes = UINT64_MAX, .value = 1, .arena = 1 },
                                       { .proportional = UINT64_MAX, .bytes = UINT64_MAX, .value = 2, .arena = 1 } };
        SPLIT(huge);
        CU_ASSERT_EQUAL(huge[0].share, UINT64_MAX / 2 + 1); /* half, and the last byte once both gave half */
        CU_ASSERT_EQUAL(huge[1].share, UINT64_MAX / 2);
}

int main(void) {
        static const struct test_case cases[] = {
                { "sizing worked by hand", test_sizing_by_hand },
                { "batches and the remainder", test_batches },
                { "deferred work accumulates and is capped", test_deferred_accumulates_and_caps },
                { "priorities per level", test_priorities },
                { "the split of a target", test_split },
                { "escalation", test_next_priority },
                { "what a client released", test_release_estimate },
                { "trust in claims", test_trust },
                { "cgroup subtree", test_cgroup_within },
                { "who is asked", test_select },
                { "quarantine and recovery", test_quarantine },
                { "huge numbers saturate", test_huge_numbers },
                { "answers checked", test_answer_check },
                { "a share of the goal", test_share_of_goal },
                { "claims credited", test_claim_credit },
                { "value: the split by value", test_value_split },
                { "value: claims compared within an arena", test_value_arenas },
                { "value: growth limits move down the gradient", test_value_moves },
                {},
        };
        return test_run("shrink-policy", cases, NULL);
}
