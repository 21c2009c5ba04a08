/* SPDX-License-Identifier: MIT */
#pragma once

/* Pressure Stall Information: parsing the "some"/"full" lines, and kernel triggers.
 * Parsing is pure; psi_trigger_open() is the only function here that talks to the kernel. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum psi_kind {
        PSI_SOME,
        PSI_FULL,
        _PSI_KIND_MAX,
};

struct psi_line {
        double avg10, avg60, avg300; /* percent of wall time stalled */
        uint64_t total;              /* cumulative stall, microseconds */
};

struct psi_stats {
        struct psi_line line[_PSI_KIND_MAX];
        bool has_full;
};

const char *psi_kind_to_string(enum psi_kind k);
int psi_kind_from_string(const char *s);

/* Parse the text of a pressure file. Unknown lines are ignored (future kernels); a "some" line is required.
 * Returns 0 or -EINVAL. */
int psi_parse(const char *text, struct psi_stats *ret);

/* Read and parse a pressure file by path, or from an open fd (read from offset 0). */
int psi_read_path(const char *path, struct psi_stats *ret);
int psi_read_fd(int fd, struct psi_stats *ret);

struct psi_trigger {
        enum psi_kind kind;
        uint64_t stall_usec;
        uint64_t window_usec;
};

#define PSI_WINDOW_MIN_USEC 1ULL
#define PSI_WINDOW_MAX_USEC (10ULL * 1000 * 1000)
#define PSI_UNPRIV_WINDOW_STEP_USEC (2ULL * 1000 * 1000)

/* Without CAP_SYS_RESOURCE the kernel accepts only windows that are multiples of 2 s. Returns the trigger
 * moved to the nearest such window (2 s..10 s), with the stall scaled so that the same fraction of the
 * window is asked for. */
struct psi_trigger psi_trigger_unprivileged(struct psi_trigger t);

/* Whether t satisfies the kernel's limits (0 < stall <= window, window within 1 us..10 s). */
bool psi_trigger_valid(const struct psi_trigger *t);

/* The string written to the pressure file, e.g. "some 100000 2000000". Returns its length or -ENOBUFS. */
int psi_trigger_format(const struct psi_trigger *t, char *buf, size_t size);

/* Open `path` and arm the trigger. If the kernel refuses the window with EINVAL and *unprivileged is
 * false, retries with psi_trigger_unprivileged() and, if that works, sets *unprivileged so that later
 * callers start from the valid form. Returns the fd (O_NONBLOCK|O_CLOEXEC; wait for POLLPRI) or a
 * negative errno; *ret_used is the trigger actually armed. */
int psi_trigger_open(const char *path, const struct psi_trigger *want, bool *unprivileged,
                     struct psi_trigger *ret_used);
