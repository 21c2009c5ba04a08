/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a decision is made: turning PSI samples and node memory figures into ok/low/medium/critical,
 * with hysteresis, and estimating how much memory would bring a scope back under its threshold.
 * Everything here is pure: it takes numbers and times, so it is unit-tested without a kernel. */

#include <stdbool.h>
#include <stdint.h>

#include "psi.h"

enum level {
        LEVEL_OK,
        LEVEL_LOW,
        LEVEL_MEDIUM,
        LEVEL_CRITICAL,
        _LEVEL_MAX,
};

const char *level_to_string(enum level l);
int level_from_string(const char *s);

/* What raised a scope's level. */
enum level_source {
        LEVEL_SOURCE_PRESSURE,  /* PSI stall */
        LEVEL_SOURCE_HEADROOM,  /* nearness to a memory limit (headroom.h) */
        LEVEL_SOURCE_WATERMARK, /* a node's free pages against its watermarks */
        _LEVEL_SOURCE_MAX,
};
const char *level_source_to_string(enum level_source s);
int level_source_from_string(const char *s);

/* Memory events the kernel counts for a cgroup, reported as they happen. */
enum memory_event {
        MEMORY_EVENT_MAX,      /* usage reached memory.max (v2 only) */
        MEMORY_EVENT_OOM_KILL, /* the OOM killer killed a process in the group */
        _MEMORY_EVENT_MAX,
};
const char *memory_event_to_string(enum memory_event e);
int memory_event_from_string(const char *s);

/* A PSI threshold: the level is reached when `kind` stall over the last window_usec is at least
 * stall_usec (i.e. the fraction stall/window). thresholds[LEVEL_OK] is unused. */
struct level_psi_thresholds {
        struct psi_trigger t[_LEVEL_MAX];
};

/* Node thresholds, as factors of the summed zone watermarks of a node (in pages): the node is at `low`
 * when free pages <= high * low_factor, at `medium` when free <= low * medium_factor, at `critical` when
 * free <= min * critical_factor. Allocations that had to leave the node (numa_foreign growing) raise it
 * to at least `low`. */
struct level_node_thresholds {
        double low_factor, medium_factor, critical_factor;
        bool foreign_raises;
};

void level_psi_thresholds_default(struct level_psi_thresholds *ret);
void level_node_thresholds_default(struct level_node_thresholds *ret);
/* Thresholds must rise from low to critical as fractions; returns -EINVAL otherwise. */
int level_psi_thresholds_check(const struct level_psi_thresholds *t);

/* Recent (time, stall totals) samples of one PSI scope, oldest first. */
#define LEVEL_SAMPLES_MAX 64
struct level_sample {
        uint64_t usec; /* CLOCK_MONOTONIC */
        uint64_t total[_PSI_KIND_MAX];
};
struct level_samples {
        struct level_sample s[LEVEL_SAMPLES_MAX];
        unsigned first, n;
};

void level_samples_reset(struct level_samples *r);
void level_samples_push(struct level_samples *r, uint64_t usec, const struct psi_stats *st);

/* Stall fraction (0..1) of `kind` over the samples covering the last window_usec (or the longest span
 * the ring has, if shorter). Returns -ENODATA when fewer than two samples are there. */
int level_samples_fraction(const struct level_samples *r, enum psi_kind kind, uint64_t window_usec,
                           double *ret);

/* The level the samples show now, before hysteresis. */
enum level level_from_samples(const struct level_samples *r, const struct level_psi_thresholds *t);

/* A first look, before there are samples: the kernel's 10 s averages against the thresholds' fractions. */
enum level level_from_averages(const struct psi_stats *st, const struct level_psi_thresholds *t);

struct node_figures {
        uint64_t free_pages, min_pages, low_pages, high_pages; /* summed over the node's zones */
        uint64_t foreign_delta;                                /* numa_foreign growth since the last sample */
};

enum level level_from_node(const struct node_figures *f, const struct level_node_thresholds *t);

/* Hysteresis: a level rises at once and falls only after the raw level has stayed below it for
 * hold_usec. below_since[l] is when the raw level last went below l (0: it is at or above l now). */
struct level_state {
        enum level level;
        uint64_t below_since[_LEVEL_MAX];
};

/* Feed the raw level measured at now_usec. Returns true when state->level changed. */
bool level_update(struct level_state *s, enum level raw, uint64_t now_usec, uint64_t hold_usec);

/* The reclaim target: an estimate of the bytes to free to bring a scope back under its threshold.
 * size_bytes is what the scope can hold (a cgroup's limit, a node's or the system's total memory);
 * excess_bytes how far it is past the point where reclaim starts (usage above the limit, free memory
 * short of the high watermark); demand_bytes how much its unreclaimable memory grows per second.
 * The estimate is the excess plus a share of the size that grows with the level (1%, 3%, 5%), or the
 * demand where that is more: a cache growing in a group at its limit pushes the rest of the group (its
 * files) out as fast as it grows, and a fixed share would never catch up with it. */
uint64_t level_reclaim_target(enum level l, uint64_t size_bytes, uint64_t excess_bytes, uint64_t demand_bytes);
