/* SPDX-License-Identifier: MIT */
#pragma once

/* Why a scope is at its level, in words: the figure that raised it and the threshold it was held
 * against. scope.c gathers the figures; which figure explains a level, and how it reads, is decided
 * here, pure, so that every kind of rise has a unit test. A rise is only ever explained by the figure
 * that raised it: a PSI trigger the daemon's own samples do not (yet) show is explained by the trigger,
 * not by a sample below the threshold with the text of a held level. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "level.h"

enum level_reason_kind {
        LEVEL_REASON_WATERMARK,  /* a node: its free pages against a watermark times a factor */
        LEVEL_REASON_HEADROOM,   /* a cgroup: the room left under its limit */
        LEVEL_REASON_FIRST_LOOK, /* PSI at the first look: the kernel's avg10 */
        LEVEL_REASON_TRIGGER,    /* PSI: the kernel's trigger fired; the daemon's samples do not show it */
        LEVEL_REASON_SAMPLES,    /* PSI: the daemon's samples over the trigger's window */
        _LEVEL_REASON_MAX,
};

struct level_reason {
        enum level_reason_kind kind;
        enum level level;
        /* LEVEL_REASON_WATERMARK */
        const char *mark;    /* "high", "low", "min" */
        double factor;       /* of the watermark */
        uint64_t free_bytes, threshold_bytes;
        /* LEVEL_REASON_HEADROOM */
        double room;              /* the fraction of the limit left, 0..1 */
        uint64_t left, limit;     /* bytes */
        const char *binding;      /* the group whose limit binds, or NULL */
        uint64_t at_left;         /* the level's threshold as bytes left (0: as a fraction) */
        double at_fraction;       /* ...or as the fraction used */
        /* PSI */
        enum psi_kind psi;
        double fraction;                 /* the stall measured: avg10 at a first look, the samples' otherwise */
        uint64_t stall_usec, window_usec; /* the level's trigger */
};

/* Which PSI figure explains level l. first_look: no samples of the daemon's own yet; have_samples: they
 * cover the trigger's window; rise: l is above the level before. */
enum level_reason_kind level_reason_psi_kind(bool first_look, bool have_samples, bool rise, double fraction,
                                             uint64_t stall_usec, uint64_t window_usec);

/* The words, into buf (always terminated); "" at ok. */
void level_reason_format(const struct level_reason *r, char *buf, size_t size);
