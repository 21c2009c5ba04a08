/* SPDX-License-Identifier: MIT */
#pragma once

/* The one clock helper: microseconds of a clock (CLOCK_MONOTONIC unless said otherwise). The daemon
 * reads its event loop's cached time instead (daemon/clock.h), so that one wake-up sees one "now". */

#include <stdint.h>
#include <time.h>

#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL

static inline uint64_t timespec_to_usec(const struct timespec *ts) {
        return (uint64_t) ts->tv_sec * USEC_PER_SEC + (uint64_t) ts->tv_nsec / 1000;
}

static inline uint64_t clock_now_usec(clockid_t clock) {
        struct timespec ts;
        if (clock_gettime(clock, &ts) < 0)
                return 0;
        return timespec_to_usec(&ts);
}
