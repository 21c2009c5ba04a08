/* SPDX-License-Identifier: MIT */
#include "varlink_policy.h"

#include <assert.h>
#include <stdlib.h>

#include "hashmap.h"

const char *varlink_policy_admit(const struct varlink_limits *l, size_t n, size_t n_of_uid, uid_t uid) {
        assert(l);

        if (l->max_connections > 0 && n >= l->max_connections)
                return "max_connections";
        /* A service running many shrinker clients as root is no attack. */
        if (l->max_connections_per_uid > 0 && uid != 0 && n_of_uid >= l->max_connections_per_uid)
                return "max_connections_per_uid";
        return NULL;
}

static size_t uid_bytes(const struct varlink_holder *h, size_t n, const bool *gone, uid_t uid) {
        size_t sum = 0;
        for (size_t i = 0; i < n; i++)
                if (!gone[i] && h[i].uid == uid)
                        sum += h[i].bytes;
        return sum;
}

/* The biggest connection of uid still open; n when there is none. */
static size_t biggest_of(const struct varlink_holder *h, size_t n, const bool *gone, uid_t uid) {
        size_t big = n;
        for (size_t i = 0; i < n; i++)
                if (!gone[i] && h[i].uid == uid && (big == n || h[i].bytes > h[big].bytes))
                        big = i;
        return big;
}

static size_t pick(size_t i, enum varlink_overflow why, bool *gone, size_t *ret, enum varlink_overflow *ret_why,
                   size_t k) {
        gone[i] = true;
        ret[k] = i;
        if (ret_why)
                ret_why[k] = why;
        return k + 1;
}

size_t varlink_policy_overflow(const struct varlink_limits *l, const struct varlink_holder *h, size_t n, uid_t uid,
                               size_t *ret, enum varlink_overflow *ret_why) {
        assert(l);
        assert(ret);

        size_t k = 0, total = 0;
        if (l->max_buffered == 0 || n == 0)
                return 0;
        bool *gone = calloc(n, sizeof(bool));
        if (!gone)
                return 0; /* nothing closed now; the next count tries again */
        size_t share = l->max_buffered / VARLINK_BUFFERED_SHARE_DIVISOR;
        for (size_t held = uid_bytes(h, n, gone, uid); uid != 0 && held > share;) {
                size_t big = biggest_of(h, n, gone, uid);
                if (big == n)
                        break;
                held -= h[big].bytes;
                k = pick(big, VARLINK_OVER_SHARE, gone, ret, ret_why, k);
        }
        struct hashmap *per_uid = NULL;
        for (size_t i = 0; i < n; i++)
                total += gone[i] ? 0 : h[i].bytes;
        if (total > l->max_buffered && hashmap_new(HASHMAP_KEY_U64, &per_uid) >= 0)
                for (size_t i = 0; i < n; i++)
                        if (!gone[i])
                                (void) hashmap_count_add_u64(per_uid, h[i].uid, (int) h[i].bytes);
        /* Over the cap: the user whose connections hold the most pays, not the one with the single
         * largest reply (root's ListShrinkers, say). */
        while (per_uid && total > l->max_buffered) {
                size_t top = n, top_bytes = 0;
                for (size_t i = 0; i < n; i++) {
                        size_t b = gone[i] ? 0 : hashmap_count_get_u64(per_uid, h[i].uid);
                        if (!gone[i] && (top == n || b > top_bytes)) {
                                top = i;
                                top_bytes = b;
                        }
                }
                size_t big = top == n ? n : biggest_of(h, n, gone, h[top].uid);
                if (big == n)
                        break;
                total -= h[big].bytes;
                (void) hashmap_count_add_u64(per_uid, h[big].uid, -(int) h[big].bytes);
                k = pick(big, VARLINK_OVER_CAP, gone, ret, ret_why, k);
        }
        hashmap_free(per_uid);
        free(gone);
        return k;
}

bool varlink_policy_idle(const struct varlink_limits *l, uint64_t last_active_usec, uint64_t now_usec) {
        assert(l);

        return l->idle_timeout_usec > 0 && now_usec - last_active_usec >= l->idle_timeout_usec;
}
