/* SPDX-License-Identifier: MIT */
/* What users may hold of the server, without a socket: admission and whose buffers go. */
#include <CUnit/CUnit.h>

#include "macro.h"
#include "test-util.h"
#include "listener.h"
#include "varlink_policy.h"

static void test_admit(void) {
        const struct varlink_limits l = { .max_connections = 10, .max_connections_per_uid = 2 };
        CU_ASSERT_PTR_NULL(varlink_policy_admit(&l, 0, 0, 1000));
        CU_ASSERT_STRING_EQUAL(varlink_policy_admit(&l, 3, 2, 1000), "max_connections_per_uid");
        CU_ASSERT_PTR_NULL(varlink_policy_admit(&l, 3, 2, 0)); /* root: only the caps of all */
        CU_ASSERT_STRING_EQUAL(varlink_policy_admit(&l, 10, 0, 0), "max_connections");
        /* The quota both sockets share: full for everyone at max; users other than root and the system
         * services together stop at 7/8 of it, whatever their number of uids. */
        struct connection_quota q = { .max = 16 };
        for (uid_t u = 100000; u < 100014; u++)
                CU_ASSERT_TRUE(connection_quota_take(&q, u));
        CU_ASSERT_FALSE(connection_quota_take(&q, 100014));
        CU_ASSERT_PTR_NOT_NULL(strstr(connection_quota_refusal(&q, 65534), "root's and the system services'"));
        CU_ASSERT_TRUE(connection_quota_take(&q, 0));
        CU_ASSERT_TRUE(connection_quota_take(&q, 61200)); /* a DynamicUser= service */
        CU_ASSERT_STRING_EQUAL(connection_quota_refusal(&q, 0), "the connections both sockets may have");
        connection_quota_put(&q, 100003);
        CU_ASSERT_TRUE(connection_quota_take(&q, 100020));
        connection_quota_put(&q, 0);
        CU_ASSERT_FALSE(connection_quota_take(&q, 100021)); /* root's place stays root's */
        const struct varlink_limits none = {};
        CU_ASSERT_PTR_NULL(varlink_policy_admit(&none, 100000, 100000, 1000));
}

static void test_share(void) {
        /* max 400: a user other than root may hold 100 */
        const struct varlink_limits l = { .max_buffered = 400 };
        const struct varlink_holder h[] = { { 1000, 60 }, { 1000, 30 }, { 1000, 20 }, { 0, 90 }, { 2000, 99 } };
        size_t v[ELEMENTSOF(h)];
        enum varlink_overflow why[ELEMENTSOF(h)];
        /* 1000 holds 110: its biggest goes, nobody else's */
        CU_ASSERT_EQUAL(varlink_policy_overflow(&l, h, ELEMENTSOF(h), 1000, v, why), 1u);
        CU_ASSERT_EQUAL(v[0], 0u);
        CU_ASSERT_EQUAL(why[0], VARLINK_OVER_SHARE);
        /* root has no share */
        const struct varlink_holder r[] = { { 0, 300 } };
        CU_ASSERT_EQUAL(varlink_policy_overflow(&l, r, 1, 0, v, why), 0u);
        /* no cap: nothing */
        const struct varlink_limits none = {};
        CU_ASSERT_EQUAL(varlink_policy_overflow(&none, h, ELEMENTSOF(h), 1000, v, why), 0u);
}

static void test_cap(void) {
        /* 500 held under a cap of 400 (shares of 100, all within): the user holding the most pays, from its
         * biggest connection, not root with the single largest */
        const struct varlink_limits l = { .max_buffered = 400 };
        const struct varlink_holder h[] = { { 0, 150 }, { 1000, 90 }, { 2000, 50 }, { 2000, 50 }, { 3000, 80 },
                                            { 0, 80 } };
        size_t v[ELEMENTSOF(h)];
        enum varlink_overflow why[ELEMENTSOF(h)];
        size_t n = varlink_policy_overflow(&l, h, ELEMENTSOF(h), 2000, v, why);
        CU_ASSERT_EQUAL_FATAL(n, 1u);
        CU_ASSERT_EQUAL(v[0], 0u); /* root holds 230 in all: the most */
        CU_ASSERT_EQUAL(why[0], VARLINK_OVER_CAP);

        const struct varlink_holder g[] = { { 1000, 90 }, { 2000, 95 }, { 3000, 99 }, { 4000, 98 }, { 5000, 97 } };
        n = varlink_policy_overflow(&l, g, ELEMENTSOF(g), 1000, v, why);
        CU_ASSERT_EQUAL_FATAL(n, 1u); /* 479 -> 380 */
        CU_ASSERT_EQUAL(v[0], 2u);
}

static void test_idle(void) {
        const struct varlink_limits l = { .idle_timeout_usec = 1000 };
        CU_ASSERT_FALSE(varlink_policy_idle(&l, 5000, 5999));
        CU_ASSERT_TRUE(varlink_policy_idle(&l, 5000, 6000));
        const struct varlink_limits none = {};
        CU_ASSERT_FALSE(varlink_policy_idle(&none, 0, UINT64_MAX));
}

int main(void) {
        static const struct test_case cases[] = {
                { "admission", test_admit },
                { "a user's share of the buffers", test_share },
                { "the cap of all buffers", test_cap },
                { "idle connections", test_idle },
                {},
        };
        return test_run("varlink-policy", cases, NULL);
}
