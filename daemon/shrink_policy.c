/* SPDX-License-Identifier: MIT */
#include "shrink_policy.h"

#include <assert.h>
#include <string.h>

#include "macro.h"

void shrink_plan_start(struct shrink_plan *p, uint64_t freeable, int priority, unsigned seeks, uint64_t deferred) {
        assert(p);

        priority = MAX(0, MIN(priority, SHRINK_PRIORITY_MAX));
        uint64_t delta;

        if (seeks > 0)
                delta = mul_div(freeable >> priority, 4, seeks);
        else
                delta = freeable / 2; /* objects cheap to recreate: scan half */

        uint64_t total = sat_add(deferred >> priority, delta);
        total = MIN(total, sat_mul(2, freeable));

        *p = (struct shrink_plan){
                .freeable = freeable,
                .nr_deferred = deferred,
                .delta = delta,
                .total_scan = total,
        };
}

bool shrink_plan_next(const struct shrink_plan *p, unsigned batch, uint64_t *ret_nr_to_scan) {
        assert(p);

        if (batch == 0)
                batch = SHRINK_DEFAULT_BATCH;
        if (p->total_scan == 0 || (p->total_scan < batch && p->total_scan < p->freeable))
                return false;
        *ret_nr_to_scan = MIN((uint64_t) batch, p->total_scan);
        return true;
}

void shrink_plan_scanned(struct shrink_plan *p, uint64_t nr_scanned) {
        assert(p);

        p->total_scan = nr_scanned >= p->total_scan ? 0 : p->total_scan - nr_scanned;
        p->scanned = sat_add(p->scanned, nr_scanned);
}

uint64_t shrink_plan_finish(const struct shrink_plan *p) {
        assert(p);

        uint64_t want = sat_add(p->nr_deferred, p->delta);
        uint64_t next = want > p->scanned ? want - p->scanned : 0;
        return MIN(next, sat_mul(2, p->freeable));
}

void shrink_priorities_default(struct shrink_priorities *ret) {
        assert(ret);

        *ret = (struct shrink_priorities){
                .at = { [LEVEL_OK] = SHRINK_PRIORITY_MAX, [LEVEL_LOW] = SHRINK_PRIORITY_MAX, [LEVEL_MEDIUM] = 9,
                        [LEVEL_CRITICAL] = 6 },
                .floor = { [LEVEL_OK] = SHRINK_PRIORITY_MAX, [LEVEL_LOW] = 4, [LEVEL_MEDIUM] = 2,
                           [LEVEL_CRITICAL] = 0 },
        };
}

uint64_t shrink_weight(uint64_t freeable_bytes, unsigned seeks) {
        return seeks > 0 ? mul_div(freeable_bytes, 4, seeks) : freeable_bytes / 2;
}

uint64_t shrink_target_objects(uint64_t want_bytes, uint64_t weight, uint64_t total_weight,
                               uint64_t bytes_per_object_x1000) {
        if (total_weight == 0 || bytes_per_object_x1000 == 0)
                return 0;
        uint64_t share = mul_div(want_bytes, MIN(weight, total_weight), total_weight);
        /* objects = ceil(share * 1000 / bytes_per_object_x1000) */
        uint64_t objects = mul_div(share, 1000, bytes_per_object_x1000);
        if (mul_div(objects, bytes_per_object_x1000, 1000) < share)
                objects = sat_add(objects, 1);
        return objects;
}

uint64_t shrink_release_estimate(uint64_t claimed, uint64_t before, uint64_t before_usec, uint64_t after,
                                 uint64_t after_usec, uint64_t prev, uint64_t prev_usec) {
        enum { GROWTH_WINDOW_USEC = 30 * 1000 * 1000 };
        uint64_t growth = 0;

        /* What it would have grown to meanwhile, at the rate it grew before the round. */
        if (prev_usec > 0 && prev_usec < before_usec && before_usec - prev_usec <= GROWTH_WINDOW_USEC &&
            after_usec > before_usec && before > prev)
                growth = mul_div(before - prev, after_usec - before_usec, before_usec - prev_usec);
        uint64_t expected = sat_add(before, growth);
        uint64_t released = expected > after ? expected - after : 0;
        return MIN(released, claimed);
}

unsigned shrink_trust_update(unsigned trust, uint64_t claimed, uint64_t released) {
        trust = MIN(trust, SHRINK_TRUST_FULL);
        if (claimed < SHRINK_TRUST_MIN_CLAIM)
                return trust;
        unsigned seen = (unsigned) mul_div(MIN(released, claimed), SHRINK_TRUST_FULL, claimed);
        return (trust + seen + 1) / 2;
}

uint64_t shrink_trust_credit(unsigned trust, uint64_t claimed) {
        /* Full credit down to half trust: an honest cache whose heap gives back only part of what it
         * frees at once (measured: 0.61 of its claims in the closed loop) must not be asked for twice
         * its share and emptied; below that, in proportion. */
        return mul_div(claimed, MIN(2 * MIN(trust, SHRINK_TRUST_FULL), SHRINK_TRUST_FULL), SHRINK_TRUST_FULL);
}

int shrink_next_priority(int priority, int start, int floor, bool short_of_target, bool stall_fell) {
        if (stall_fell)
                return MIN(priority + 1, start);
        if (short_of_target)
                return MAX(priority - 2, floor);
        return priority;
}

bool shrink_cgroup_within(const char *path, const char *ancestor) {
        if (!path || !ancestor)
                return false;
        if (streq(ancestor, "/"))
                return true;
        size_t n = strlen(ancestor);
        return strncmp(path, ancestor, n) == 0 && (path[n] == 0 || path[n] == '/');
}

bool shrink_select(enum scope_type type, const char *scope_cgroup, unsigned flags, const char *client_cgroup,
                   bool *ret_all_nodes, const char **ret_cgroup) {
        assert(ret_all_nodes);

        switch (type) {
        case SCOPE_SYSTEM:
                *ret_all_nodes = flags & SHRINKER_NUMA_AWARE;
                *ret_cgroup = (flags & SHRINKER_MEMCG_AWARE) && client_cgroup ? client_cgroup : "/";
                return true;
        case SCOPE_NODE:
                *ret_all_nodes = false;
                *ret_cgroup = (flags & SHRINKER_MEMCG_AWARE) && client_cgroup ? client_cgroup : "/";
                return flags & SHRINKER_NUMA_AWARE;
        case SCOPE_CGROUP:
                *ret_all_nodes = flags & SHRINKER_NUMA_AWARE;
                *ret_cgroup = scope_cgroup;
                return (flags & SHRINKER_MEMCG_AWARE) && shrink_cgroup_within(client_cgroup, scope_cgroup);
        default:
                return false;
        }
}

bool shrink_health_timeout(struct shrink_health *h, unsigned limit) {
        h->consecutive_timeouts++;
        if (!h->quarantined && h->consecutive_timeouts >= MAX(limit, 1u)) {
                h->quarantined = true;
                return true;
        }
        return false;
}

bool shrink_health_answer(struct shrink_health *h) {
        assert(h);

        bool was = h->quarantined;
        h->consecutive_timeouts = 0;
        h->quarantined = false;
        return was;
}
