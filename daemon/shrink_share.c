/* SPDX-License-Identifier: MIT */
#include "shrink_share.h"

#include <assert.h>

#include "macro.h"

static bool given(int64_t v) {
        return v != SHRINK_ANSWER_ABSENT;
}

const char *shrink_answer_check(enum shrink_op op, uint64_t nr_to_scan, const struct shrink_answer *a) {
        if ((given(a->count) && a->count < 0) || (given(a->bytes) && a->bytes < 0) ||
            (given(a->freed) && a->freed < 0) || (given(a->scanned) && a->scanned < 0) ||
            a->value < 0)
                return "negative numbers";
        if (op == SHRINK_OP_COUNT) {
                if (given(a->freed) || given(a->scanned) || a->stop)
                        return "a count request is answered with count, bytes or empty";
                if (!given(a->count) && !a->empty)
                        return "count missing";
                if (a->value > PROTOCOL_VALUE_MAX)
                        return "value exceeds 1e9";
                return NULL;
        }
        if (a->value != 0)
                return "a value answers a count, not a scan";
        if (given(a->count) || a->empty)
                return "a scan request is answered with freed, scanned, bytes or stop";
        if (!a->stop && !given(a->freed))
                return "freed missing";
        if (given(a->freed) && (uint64_t) a->freed > 2 * nr_to_scan)
                return "freed exceeds twice nr_to_scan";
        if (given(a->scanned) && (uint64_t) a->scanned > 2 * nr_to_scan)
                return "scanned exceeds twice nr_to_scan";
        return NULL;
}

uint64_t shrink_share(const struct shrink_split *sp, uint64_t w, uint64_t start_weight) {
        assert(sp);

        uint64_t unknown = sp->n_known > 0 ? sp->known_weight / sp->n_known : w;
        uint64_t total = sat_add(sp->known_weight, sat_mul(sp->n_unknown, unknown));
        /* Its own part of the estimate is replaced by what it weighs now. */
        total = total - MIN(total, start_weight > 0 ? start_weight : unknown);
        total = sat_add(total, w);
        uint64_t of = sp->in_goal ? MAX(sp->goal, sp->want) : sp->want;
        return total > 0 ? mul_div(of, MIN(w, total), total) : 0;
}

uint64_t shrink_share_scan_budget(uint64_t share_bytes, uint64_t bytes_per_object_x1000) {
        return sat_mul(shrink_target_objects(share_bytes, 1, 1, bytes_per_object_x1000), 2);
}

uint64_t shrink_claim_credit(uint64_t bytes, uint64_t *credit_left, unsigned trust, uint64_t *ret_claim) {
        assert(credit_left);

        uint64_t claim = MIN(bytes, *credit_left);
        *credit_left -= claim;
        *ret_claim = claim;
        return shrink_trust_credit(trust, claim);
}
