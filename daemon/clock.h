/* SPDX-License-Identifier: MIT */
#pragma once

/* "Now" for the daemon's modules: the event loop's time of this wake-up, CLOCK_MONOTONIC. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "time-util.h"

static inline uint64_t event_now(sd_event *e) {
        uint64_t t = 0;
        if (!e || sd_event_now(e, CLOCK_MONOTONIC, &t) < 0)
                return clock_now_usec(CLOCK_MONOTONIC);
        return t;
}
