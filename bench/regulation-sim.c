/* SPDX-License-Identifier: MIT */
/* The regulator's law (daemon/regulation.c) over long simulated runs, where the real benchmark would take
 * hours: a cache that refills 4 MiB/s into a room of 40 MiB, held to the growth limit, looked at every
 * 250 ms, beside a neighbour whose working set sets the edge; while the cache holds more than the edge the
 * group stalls 250 ms/s (a touch). Two tables:
 *   a neighbour who comes, holds the edge at 12 MiB for a while and leaves: how often it is met while it
 *   stays, and how long the cache takes to hold 90% of its room again once it has gone;
 *   a neighbour who grows, the edge falling from 40 to 12 MiB at once, over 60 s or over 240 s, and
 *   staying: the stall per window of 110 s, and what the cache held against the edge.
 * No daemon, no cgroup: the pure law, as test-regulation drives it. docs/performance-history.md has its
 * figures and those of the law before (d2b0a41's regulation.c, built into the same program).
 * Usage: regulation-sim */

#include <stdbool.h>
#include <stdio.h>

#include "regulation.h"

#define SEC 1000000ULL
#define MIB (1024.0 * 1024.0)
#define LOOK (SEC / 4)
#define ROOM_MIB 40.0
#define EDGE_MIB 12.0
#define REFILL_MIB_S 4.0
#define TOUCH_RATE 250000.0 /* µs of stall per second while over the edge */
#define WINDOWS 6
#define WINDOW_S 110

static const struct regulation_params params = {
        .budget = 1000, .step_min_permille = 5, .step_max_permille = 50, .step_gain_permille = 10,
};

struct sim {
        struct regulation r;
        uint64_t total, now;
        double held;
        bool stalled;
};

/* One look with the edge at edge_mib: the cache refills, the group stalls if it holds more, the law
 * decides. Returns whether a stall began at this look. */
static bool look(struct sim *s, double edge_mib) {
        uint64_t limit = regulation_limit(&s->r), bytes;
        s->held += REFILL_MIB_S * MIB * LOOK / SEC;
        if (s->held > ROOM_MIB * MIB)
                s->held = ROOM_MIB * MIB;
        if (limit > 0 && s->held > (double) limit)
                s->held = (double) limit;
        double rate = s->held > edge_mib * MIB ? TOUCH_RATE : 0;
        bool began = rate > 0 && !s->stalled;
        s->stalled = rate > 0;
        s->now += LOOK;
        s->total += (uint64_t) (rate * LOOK / SEC);
        double got;
        bool over = regulation_measure(&s->r, &params, s->total, s->now, &got);
        if (regulation_decide(&s->r, &params, over, true, (uint64_t) s->held, &bytes) == REGULATION_STEP)
                s->held -= (double) bytes;
        return began;
}

static void stay_and_leave(double stay_s) {
        struct sim s = {};
        regulation_init(&s.r);
        unsigned touches = 0;
        double regained = -1;
        for (unsigned i = 0; i < 600 * SEC / LOOK; i++) {
                double t = (double) i * LOOK / SEC;
                bool there = t >= 60 && t < 60 + stay_s;
                touches += look(&s, there ? EDGE_MIB : ROOM_MIB) && there;
                if (t >= 60 + stay_s && regained < 0 && s.held >= 0.9 * ROOM_MIB * MIB)
                        regained = t - 60 - stay_s;
        }
        printf("  %5.0f s %21u   %.1f s\n", stay_s, touches, regained);
}

static void grows(double fall_s) {
        struct sim s = {};
        regulation_init(&s.r);
        double stall[WINDOWS] = {}, share[WINDOWS] = {};
        unsigned n[WINDOWS] = {};
        for (unsigned i = 0; i < WINDOWS * WINDOW_S * SEC / LOOK; i++) {
                double t = (double) i * LOOK / SEC;
                double edge = t < 60 ? ROOM_MIB : t < 60 + fall_s ? ROOM_MIB - (ROOM_MIB - EDGE_MIB) * (t - 60) / fall_s : EDGE_MIB;
                uint64_t before = s.total;
                look(&s, edge);
                unsigned w = (unsigned) (t / WINDOW_S);
                stall[w] += (double) (s.total - before);
                share[w] += s.held / (edge * MIB);
                n[w]++;
        }
        printf("  %-8s", fall_s <= 1 ? "at once" : fall_s <= 60 ? "in 60 s" : "in 240 s");
        for (unsigned w = 0; w < WINDOWS; w++)
                printf(" %5.1f (%.2f)", stall[w] / 1000 / ((double) n[w] * LOOK / SEC), share[w] / n[w]);
        printf("\n");
}

int main(void) {
        printf("a neighbour who comes (edge %.0f MiB, room %.0f MiB), stays, and leaves:\n", EDGE_MIB, ROOM_MIB);
        printf("  stay     touches while there   90%% of the room again after it left\n");
        const double stays[] = { 10, 20, 30, 40, 60, 120, 300 };
        for (size_t i = 0; i < sizeof(stays) / sizeof(stays[0]); i++)
                stay_and_leave(stays[i]);
        printf("\na neighbour who grows from 60 s (edge %.0f -> %.0f MiB) and stays: stall ms/s (held / edge) per %d s:\n",
               ROOM_MIB, EDGE_MIB, WINDOW_S);
        printf("  fall    ");
        for (unsigned w = 0; w < WINDOWS; w++)
                printf(" %4u-%-4u s  ", w * WINDOW_S, (w + 1) * WINDOW_S);
        printf("\n");
        grows(1);
        grows(60);
        grows(240);
        return 0;
}
