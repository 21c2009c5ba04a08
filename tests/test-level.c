/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "level.h"
#include "level_reason.h"
#include "test-util.h"

#define S 1000000ULL /* one second in microseconds */

static void push(struct level_samples *r, uint64_t t, uint64_t some, uint64_t full) {
        struct psi_stats st = { .line[PSI_SOME].total = some, .line[PSI_FULL].total = full, .has_full = true };
        level_samples_push(r, t, &st);
}

static void test_names(void) {
        CU_ASSERT_STRING_EQUAL(level_to_string(LEVEL_OK), "ok");
        CU_ASSERT_STRING_EQUAL(level_to_string(LEVEL_CRITICAL), "critical");
        CU_ASSERT_PTR_NULL(level_to_string(_LEVEL_MAX));
        CU_ASSERT_EQUAL(level_from_string("medium"), LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(level_from_string("Medium"), -EINVAL);
        CU_ASSERT_EQUAL(level_from_string(NULL), -EINVAL);
}

static void test_fraction(void) {
        struct level_samples r;
        double f;

        level_samples_reset(&r);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 2 * S, &f), -ENODATA);
        push(&r, 10 * S, 1000, 0);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 2 * S, &f), -ENODATA);

        /* 250 ms of stall in one second: 25%. */
        push(&r, 11 * S, 1000 + 250000, 0);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 2 * S, &f), 0);
        CU_ASSERT_DOUBLE_EQUAL(f, 0.25, 1e-9);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_FULL, 2 * S, &f), 0);
        CU_ASSERT_DOUBLE_EQUAL(f, 0.0, 1e-9);

        /* With three samples a second apart, a 2 s window spans all three. */
        push(&r, 12 * S, 1000 + 250000 + 50000, 0);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 2 * S, &f), 0);
        CU_ASSERT_DOUBLE_EQUAL(f, 0.15, 1e-9);
        /* A 1 s window only the last second. */
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 1 * S, &f), 0);
        CU_ASSERT_DOUBLE_EQUAL(f, 0.05, 1e-9);

        /* A total that goes backwards (the cgroup was re-created) gives no data rather than nonsense. */
        push(&r, 13 * S, 10, 0);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 1 * S, &f), -ENODATA);
}

static void test_ring_wraps(void) {
        struct level_samples r;
        double f;
        level_samples_reset(&r);
        for (unsigned i = 0; i < 3 * LEVEL_SAMPLES_MAX; i++)
                push(&r, i * S / 10, i * 10000, 0); /* 10% all along */
        CU_ASSERT_EQUAL(r.n, LEVEL_SAMPLES_MAX);
        CU_ASSERT_EQUAL(level_samples_fraction(&r, PSI_SOME, 2 * S, &f), 0);
        CU_ASSERT_DOUBLE_EQUAL(f, 0.10, 1e-9);
}

static void test_from_samples_defaults(void) {
        struct level_psi_thresholds t;
        struct level_samples r;
        level_psi_thresholds_default(&t);

        struct {
                uint64_t some, full; /* stall over 2 s */
                enum level want;
        } cases[] = {
                { 0, 0, LEVEL_OK },
                { 99999, 0, LEVEL_OK },
                { 100000, 0, LEVEL_LOW },      /* 5% some */
                { 300000, 0, LEVEL_MEDIUM },   /* 15% some */
                { 1000000, 399999, LEVEL_MEDIUM },
                { 1000000, 400000, LEVEL_CRITICAL }, /* 20% full */
                { 50000, 400000, LEVEL_CRITICAL },   /* full alone is enough */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                level_samples_reset(&r);
                push(&r, 100 * S, 5000, 7000);
                push(&r, 102 * S, 5000 + cases[i].some, 7000 + cases[i].full);
                CU_ASSERT_EQUAL(level_from_samples(&r, &t), cases[i].want);
        }
}

static void test_thresholds_check(void) {
        struct level_psi_thresholds t;
        level_psi_thresholds_default(&t);
        CU_ASSERT_EQUAL(level_psi_thresholds_check(&t), 0);
        t.t[LEVEL_MEDIUM].stall_usec = 50000; /* medium below low */
        CU_ASSERT_EQUAL(level_psi_thresholds_check(&t), -EINVAL);
        level_psi_thresholds_default(&t);
        t.t[LEVEL_LOW].window_usec = 0;
        CU_ASSERT_EQUAL(level_psi_thresholds_check(&t), -EINVAL);
}

static void test_hysteresis(void) {
        struct level_state s = {};
        const uint64_t hold = 10 * S;

        /* Rises at once. */
        CU_ASSERT_TRUE(level_update(&s, LEVEL_MEDIUM, 100 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_MEDIUM);
        CU_ASSERT_FALSE(level_update(&s, LEVEL_MEDIUM, 101 * S, hold));

        /* Pressure gone: stays until it has been below medium for the hold time. */
        CU_ASSERT_FALSE(level_update(&s, LEVEL_OK, 102 * S, hold));
        CU_ASSERT_FALSE(level_update(&s, LEVEL_OK, 111 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_MEDIUM);
        /* 10 s after 102 s, medium and low have both been quiet for the hold time: straight to ok. */
        CU_ASSERT_TRUE(level_update(&s, LEVEL_OK, 112 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_OK);
}

static void test_hysteresis_steps_down(void) {
        struct level_state s = {};
        const uint64_t hold = 10 * S;

        level_update(&s, LEVEL_CRITICAL, 0 + 1, hold);
        /* Falls to low: critical and medium must each stay quiet for the hold time. */
        CU_ASSERT_FALSE(level_update(&s, LEVEL_LOW, 5 * S, hold));
        CU_ASSERT_TRUE(level_update(&s, LEVEL_LOW, 15 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_LOW);

        /* A blip back to medium resets medium's quiet period... */
        CU_ASSERT_TRUE(level_update(&s, LEVEL_MEDIUM, 16 * S, hold));
        CU_ASSERT_FALSE(level_update(&s, LEVEL_OK, 17 * S, hold));
        CU_ASSERT_FALSE(level_update(&s, LEVEL_OK, 26 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_MEDIUM);
        CU_ASSERT_TRUE(level_update(&s, LEVEL_OK, 27 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_OK);
}

static void test_hysteresis_partial(void) {
        struct level_state s = {};
        const uint64_t hold = 10 * S;

        level_update(&s, LEVEL_CRITICAL, 1, hold);
        /* Pressure drops to medium for a while, then to ok: critical falls to medium first. */
        level_update(&s, LEVEL_MEDIUM, 1 * S, hold);
        CU_ASSERT_TRUE(level_update(&s, LEVEL_OK, 11 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_MEDIUM);
        CU_ASSERT_TRUE(level_update(&s, LEVEL_OK, 21 * S, hold));
        CU_ASSERT_EQUAL(s.level, LEVEL_OK);
}

static void test_hysteresis_zero_hold(void) {
        struct level_state s = {};
        CU_ASSERT_TRUE(level_update(&s, LEVEL_CRITICAL, 5, 0));
        CU_ASSERT_TRUE(level_update(&s, LEVEL_OK, 6, 0));
        CU_ASSERT_EQUAL(s.level, LEVEL_OK);
}

static void test_node_level(void) {
        struct level_node_thresholds t;
        level_node_thresholds_default(&t);
        struct node_figures f = { .min_pages = 100, .low_pages = 125, .high_pages = 150 };

        f.free_pages = 10000;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_OK);
        f.free_pages = 150;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_LOW);
        f.free_pages = 125;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_MEDIUM);
        f.free_pages = 90;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_CRITICAL);

        /* Allocations leaving a node with plenty free still say it is wanted beyond what it has. */
        f.free_pages = 10000;
        f.foreign_delta = 3;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_LOW);
        t.foreign_raises = false;
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_OK);

        /* A memoryless node has no watermarks and is never tight. */
        struct node_figures empty = {};
        CU_ASSERT_EQUAL(level_from_node(&empty, &t), LEVEL_OK);

        /* Factors move the thresholds. */
        level_node_thresholds_default(&t);
        t.low_factor = 2.0;
        f = (struct node_figures){ .free_pages = 290, .min_pages = 100, .low_pages = 125, .high_pages = 150 };
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_LOW);
}

static void test_reclaim_target(void) {
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_OK, 1000000, 5000, 0), 0u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_OK, 1000000, 0, 99999), 0u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_LOW, 1000000, 0, 0), 10000u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_MEDIUM, 1000000, 0, 0), 30000u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_CRITICAL, 1000000, 7, 0), 50007u);
        /* Refaults beyond the level's share are what is asked; below it they change nothing. */
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_LOW, 1000000, 0, 400000), 400000u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_LOW, 1000000, 5, 9999), 10005u);
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_LOW, 1000000, UINT64_MAX - 1, UINT64_MAX), UINT64_MAX);
        /* A 16 MiB cgroup at critical: 5% of its limit. */
        CU_ASSERT_EQUAL(level_reclaim_target(LEVEL_CRITICAL, 16u << 20, 0, 0), (16u << 20) / 100 * 5);
}

/* A first look from the kernel's 10 s averages, against the default thresholds (5%, 15% some; 20% full). */
static void test_from_averages(void) {
        struct level_psi_thresholds t;
        struct psi_stats st = { .has_full = true };
        level_psi_thresholds_default(&t);
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_OK);
        st.line[PSI_SOME].avg10 = 4.99;
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_OK);
        st.line[PSI_SOME].avg10 = 5.0;
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_LOW);
        st.line[PSI_SOME].avg10 = 30;
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_MEDIUM);
        st.line[PSI_FULL].avg10 = 20;
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_CRITICAL);
        st.has_full = false; /* no full line: critical cannot be seen */
        CU_ASSERT_EQUAL(level_from_averages(&st, &t), LEVEL_MEDIUM);
}

/* Every kind of rise is explained by the figure that raised it, in the words the log, subscribers and
 * pressurectl show. */
static void test_reason_kinds(void) {
        const uint64_t s2 = 2000000;
        /* PSI: which figure explains a level. */
        CU_ASSERT_EQUAL(level_reason_psi_kind(true, false, true, 0, s2 / 10, s2), LEVEL_REASON_FIRST_LOOK);
        CU_ASSERT_EQUAL(level_reason_psi_kind(false, false, true, 0, s2 / 10, s2), LEVEL_REASON_TRIGGER);
        /* a rise the samples show */
        CU_ASSERT_EQUAL(level_reason_psi_kind(false, true, true, 0.2, s2 / 10, s2), LEVEL_REASON_SAMPLES);
        /* a rise the samples do not show (the trigger fired, they lag its window): the trigger explains
         * it, never "below low's 10%, held until..." (what a subscriber was told after an OOM kill) */
        CU_ASSERT_EQUAL(level_reason_psi_kind(false, true, true, 0.005, s2 / 10, s2), LEVEL_REASON_TRIGGER);
        /* a level held (a fall to it, or a look without a change) with the samples below: held */
        CU_ASSERT_EQUAL(level_reason_psi_kind(false, true, false, 0.005, s2 / 10, s2), LEVEL_REASON_SAMPLES);

        char buf[256];
        struct level_reason r = { .kind = LEVEL_REASON_SAMPLES, .level = LEVEL_LOW, .psi = PSI_SOME, .fraction = 0.125,
                                  .stall_usec = s2 / 10, .window_usec = s2 };
        level_reason_format(&r, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "some stall 12.5% over 2s, at or above low's 10.0% (200ms per 2s)");
        r.fraction = 0.05;
        level_reason_format(&r, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "some stall 5.0% over 2s, below low's 10.0% (200ms per 2s), held until it stays below "
                                    "for the hold time");
        r.kind = LEVEL_REASON_TRIGGER;
        r.level = LEVEL_MEDIUM;
        r.psi = PSI_FULL;
        level_reason_format(&r, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "the kernel's trigger fired: full stall of 200ms within 2s (medium's threshold)");
        r.kind = LEVEL_REASON_FIRST_LOOK;
        r.fraction = 0.31;
        level_reason_format(&r, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "full stall 31.0% over the last 10s (the kernel's average, a first look), at or above "
                                    "medium's 10.0% (200ms per 2s)");

        struct level_reason h = { .kind = LEVEL_REASON_HEADROOM, .level = LEVEL_CRITICAL, .room = 0.016, .left = 1 << 20,
                                  .limit = 64 << 20, .at_fraction = 0.97 };
        level_reason_format(&h, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "headroom 1.6% (1.0M left under the 64.0M limit), at or below critical's 3%");
        h.binding = "/parent";
        h.at_left = 2 << 20;
        level_reason_format(&h, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "headroom 1.6% (1.0M left under the 64.0M limit of /parent), at or below critical's 2.0M");

        struct level_reason w = { .kind = LEVEL_REASON_WATERMARK, .level = LEVEL_LOW, .mark = "high", .factor = 1.5,
                                  .free_bytes = 100 << 20, .threshold_bytes = 120 << 20 };
        level_reason_format(&w, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "free 100.0M, at or below low's 1.50 x the high watermark (120.0M)");

        /* At ok there is nothing to explain. */
        w.level = LEVEL_OK;
        level_reason_format(&w, buf, sizeof(buf));
        CU_ASSERT_STRING_EQUAL(buf, "");
        /* A short buffer is cut, and terminated. */
        r.level = LEVEL_LOW;
        level_reason_format(&r, buf, 8);
        CU_ASSERT_EQUAL(strlen(buf), 7u);
}

int main(void) {
        static const struct test_case cases[] = {
                { "level names", test_names },
                { "stall fraction from samples", test_fraction },
                { "sample ring wraps", test_ring_wraps },
                { "raw level from samples, default thresholds", test_from_samples_defaults },
                { "first look from the kernel's averages", test_from_averages },
                { "threshold checks", test_thresholds_check },
                { "hysteresis", test_hysteresis },
                { "hysteresis steps down", test_hysteresis_steps_down },
                { "hysteresis falls to the level still seen", test_hysteresis_partial },
                { "hysteresis with no hold time", test_hysteresis_zero_hold },
                { "node level from watermarks", test_node_level },
                { "reclaim target", test_reclaim_target },
                { "each kind of rise has its reason", test_reason_kinds },
                {},
        };
        return test_run("level", cases, NULL);
}
