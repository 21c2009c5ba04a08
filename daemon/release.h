/* SPDX-License-Identifier: MIT */
#pragma once

/* What clients really released. A client's answers say how many bytes it freed; the daemon does not take
 * that on its word. Around a round it reads what the kernel shows of each client asked to scan (its
 * cgroup's usage while it is alone in a cgroup of its own, its resident memory otherwise: see
 * shrink_client_resident()), when the round first asks it and again a moment after the round
 * (once the client has had time to give freed memory back: libpressure trims its heap after scans;
 * once more, later, if some client shows less than half its claim then: a busy machine runs it late),
 * and reports claimed and released bytes side by side: in the journal, and per client in ListShrinkers.
 * A client that keeps allocating while it is shrunk shows less released than it freed: the figure is
 * what the kernel saw, not a verdict. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "shrinker.h"

struct release_meter;
struct release_sample;

/* settle_usec: how long after a round its clients are measured again. */
int release_meter_new(sd_event *event, struct shrink_registry *shrinkers, uint64_t settle_usec,
                      struct release_meter **ret);
struct release_meter *release_meter_free(struct release_meter *m);

/* A sample of round round_id, whose clients' records m keeps. */
struct release_sample *release_sample_new(struct release_meter *m, uint64_t round_id);
void release_sample_free(struct release_sample *s);

/* The round asks cl to scan for the first time: what it has resident now. */
void release_sample_begin(struct release_sample *s, const struct shrink_client *cl, uint64_t resident, uint64_t usec);
/* cl claims to have freed bytes in this round (up to what it had resident). After the round, the claims
 * are held against what its memory showed, and the client's trust follows (shrink_trust_update()). */
void release_sample_claim(struct release_sample *s, const struct shrink_client *cl, uint64_t bytes);

/* The round is over: measure its clients again after the settle time and report it under `what` (a
 * scope's name, "Shrink"). Takes over s; an empty sample is dropped. */
void release_meter_submit(struct release_meter *m, struct release_sample *s, const char *what);

/* The same, then call done(s, true, userdata) before s is freed (or done(s, false, userdata) if the meter
 * goes first), so that a caller can be answered with the figures. An empty sample calls done at once. */
typedef void (*release_done_fn)(const struct release_sample *s, bool measured, void *userdata);
void release_meter_submit_then(struct release_meter *m, struct release_sample *s, const char *what,
                               release_done_fn done, void *userdata);

/* After measuring: how far cl's resident memory fell around the round (0 if it was not asked). */
uint64_t release_sample_released(const struct release_sample *s, const struct shrink_client *cl);

/* The meter's record of a client: how far its claims are believed (per mille; SHRINK_TRUST_FULL for one
 * never measured), and what it claimed and released over all measured rounds (into info's client_*). */
unsigned release_meter_trust(const struct release_meter *m, const struct shrink_client *cl);
void release_meter_client_info(const struct release_meter *m, const struct shrink_client *cl,
                               struct shrinker_info_snapshot *info);
/* The client is gone: forget it. */
void release_meter_drop_client(struct release_meter *m, const struct shrink_client *cl);
