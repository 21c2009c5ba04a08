/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "hashmap.h"
#include "test-util.h"

static void test_u64(void) {
        struct hashmap *h;
        static int values[5000];

        CU_ASSERT_EQUAL_FATAL(hashmap_new(HASHMAP_KEY_U64, &h), 0);
        for (uint64_t i = 0; i < 5000; i++)
                CU_ASSERT_EQUAL(hashmap_put_u64(h, i * 7919, &values[i]), 0);
        CU_ASSERT_EQUAL(hashmap_size(h), 5000u);
        CU_ASSERT_EQUAL(hashmap_put_u64(h, 7919, &values[0]), -EEXIST);
        CU_ASSERT_PTR_EQUAL(hashmap_get_u64(h, 7919), &values[1]); /* unchanged */
        for (uint64_t i = 0; i < 5000; i++)
                CU_ASSERT_PTR_EQUAL(hashmap_get_u64(h, i * 7919), &values[i]);
        CU_ASSERT_PTR_NULL(hashmap_get_u64(h, 1));
        for (uint64_t i = 0; i < 5000; i += 2)
                CU_ASSERT_PTR_EQUAL(hashmap_remove_u64(h, i * 7919), &values[i]);
        CU_ASSERT_PTR_NULL(hashmap_remove_u64(h, 0));
        CU_ASSERT_EQUAL(hashmap_size(h), 2500u);
        for (uint64_t i = 0; i < 5000; i++)
                CU_ASSERT_PTR_EQUAL(hashmap_get_u64(h, i * 7919), i % 2 ? &values[i] : NULL);
        hashmap_free(h);
}

static void test_string(void) {
        struct hashmap *h;
        char keys[1000][16];

        CU_ASSERT_EQUAL_FATAL(hashmap_new(HASHMAP_KEY_STRING, &h), 0);
        for (int i = 0; i < 1000; i++) {
                snprintf(keys[i], sizeof(keys[i]), "/a/%d", i);
                CU_ASSERT_EQUAL(hashmap_put_string(h, keys[i], keys[i]), 0);
        }
        CU_ASSERT_EQUAL(hashmap_put_string(h, "/a/5", keys[0]), -EEXIST);
        CU_ASSERT_PTR_EQUAL(hashmap_get_string(h, "/a/5"), keys[5]);
        CU_ASSERT_PTR_NULL(hashmap_get_string(h, "/a/1000"));
        CU_ASSERT_PTR_NULL(hashmap_get_string(h, NULL));
        CU_ASSERT_PTR_EQUAL(hashmap_remove_string(h, "/a/999"), keys[999]);
        CU_ASSERT_PTR_NULL(hashmap_get_string(h, "/a/999"));
        CU_ASSERT_EQUAL(hashmap_size(h), 999u);
        hashmap_free(h);
}

int main(void) {
        static const struct test_case cases[] = {
                { "u64 keys", test_u64 },
                { "string keys", test_string },
                {},
        };
        return test_run("hashmap", cases, NULL);
}
