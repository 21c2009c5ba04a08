/* SPDX-License-Identifier: MIT */
#pragma once

/* A small chained hash table for lookups by id or by name (request ids, shrinker ids, client tokens,
 * cgroup paths). It stores pointers and never copies keys: a string key must live in the value it maps
 * to. Iteration order is not kept; callers that iterate keep their own list. The hash is seeded per
 * table so that keys a client chooses (cgroup paths) cannot be picked to collide. */

#include <stddef.h>
#include <stdint.h>

enum hashmap_key_type {
        HASHMAP_KEY_U64,
        HASHMAP_KEY_STRING,
};

struct hashmap;

int hashmap_new(enum hashmap_key_type type, struct hashmap **ret);
struct hashmap *hashmap_free(struct hashmap *h); /* frees the table, not the values */

size_t hashmap_size(const struct hashmap *h);

/* -EEXIST when the key is already there (nothing changes), -ENOMEM. */
int hashmap_put_u64(struct hashmap *h, uint64_t key, void *value);
void *hashmap_get_u64(const struct hashmap *h, uint64_t key);
void *hashmap_remove_u64(struct hashmap *h, uint64_t key); /* the value, or NULL */

/* A table of counts (a uid's connections, say): the count is kept in the value, no allocation per key.
 * Adding to a count of 0 creates it, taking one from 1 removes it. */
size_t hashmap_count_get_u64(const struct hashmap *h, uint64_t key);
int hashmap_count_add_u64(struct hashmap *h, uint64_t key, int delta);

int hashmap_put_string(struct hashmap *h, const char *key, void *value);
void *hashmap_get_string(const struct hashmap *h, const char *key);
void *hashmap_remove_string(struct hashmap *h, const char *key);
