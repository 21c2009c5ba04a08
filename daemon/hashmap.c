/* SPDX-License-Identifier: MIT */
#include "hashmap.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "macro.h"

struct entry {
        struct entry *next;
        uint64_t hash;
        union {
                uint64_t u64;
                const char *string;
        } key;
        void *value;
};

struct hashmap {
        enum hashmap_key_type type;
        uint64_t seed;
        struct entry **buckets;
        size_t n_buckets; /* a power of two */
        size_t n_entries;
};

/* The finaliser of splitmix64: every input bit reaches every output bit. */
static uint64_t mix(uint64_t x) {
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

static uint64_t hash_u64(const struct hashmap *h, uint64_t key) {
        return mix(key ^ h->seed);
}

static uint64_t hash_string(const struct hashmap *h, const char *s) {
        uint64_t x = h->seed;
        for (; *s; s++)
                x = mix(x ^ (unsigned char) *s);
        return x;
}

int hashmap_new(enum hashmap_key_type type, struct hashmap **ret) {
        struct hashmap *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->type = type;
        h->n_buckets = 16;
        h->buckets = calloc(h->n_buckets, sizeof(struct entry *));
        if (!h->buckets) {
                free(h);
                return -ENOMEM;
        }
        if (getrandom(&h->seed, sizeof(h->seed), GRND_NONBLOCK) != (ssize_t) sizeof(h->seed))
                h->seed = mix((uint64_t) time(NULL) ^ (uintptr_t) h);
        *ret = h;
        return 0;
}

struct hashmap *hashmap_free(struct hashmap *h) {
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->n_buckets; i++)
                for (struct entry *e = h->buckets[i], *next; e; e = next) {
                        next = e->next;
                        free(e);
                }
        free(h->buckets);
        free(h);
        return NULL;
}

size_t hashmap_size(const struct hashmap *h) {
        return h ? h->n_entries : 0;
}

static bool key_equal(const struct hashmap *h, const struct entry *e, uint64_t u64, const char *string) {
        return h->type == HASHMAP_KEY_U64 ? e->key.u64 == u64 : streq(e->key.string, string);
}

static struct entry **find(const struct hashmap *h, uint64_t hash, uint64_t u64, const char *string) {
        struct entry **p = &h->buckets[hash & (h->n_buckets - 1)];
        for (; *p; p = &(*p)->next)
                if ((*p)->hash == hash && key_equal(h, *p, u64, string))
                        return p;
        return p;
}

/* Keep chains short: double at a load of one. A failed allocation leaves the table as it was. */
static void grow(struct hashmap *h) {
        size_t n = h->n_buckets * 2;
        struct entry **b = calloc(n, sizeof(struct entry *));
        if (!b)
                return;
        for (size_t i = 0; i < h->n_buckets; i++)
                for (struct entry *e = h->buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (n - 1)];
                        b[e->hash & (n - 1)] = e;
                }
        free(h->buckets);
        h->buckets = b;
        h->n_buckets = n;
}

static int put(struct hashmap *h, uint64_t hash, uint64_t u64, const char *string, void *value) {
        struct entry **p = find(h, hash, u64, string);
        if (*p)
                return -EEXIST;
        struct entry *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->hash = hash;
        if (h->type == HASHMAP_KEY_U64)
                e->key.u64 = u64;
        else
                e->key.string = string;
        e->value = value;
        *p = e;
        h->n_entries++;
        if (h->n_entries > h->n_buckets)
                grow(h);
        return 0;
}

static void *get(const struct hashmap *h, uint64_t hash, uint64_t u64, const char *string) {
        struct entry *e = *find(h, hash, u64, string);
        return e ? e->value : NULL;
}

static void *take(struct hashmap *h, uint64_t hash, uint64_t u64, const char *string) {
        struct entry **p = find(h, hash, u64, string), *e = *p;
        if (!e)
                return NULL;
        void *v = e->value;
        *p = e->next;
        free(e);
        h->n_entries--;
        return v;
}

int hashmap_put_u64(struct hashmap *h, uint64_t key, void *value) {
        assert(h->type == HASHMAP_KEY_U64);
        return put(h, hash_u64(h, key), key, NULL, value);
}

void *hashmap_get_u64(const struct hashmap *h, uint64_t key) {
        assert(h->type == HASHMAP_KEY_U64);
        return get(h, hash_u64(h, key), key, NULL);
}

void *hashmap_remove_u64(struct hashmap *h, uint64_t key) {
        assert(h->type == HASHMAP_KEY_U64);
        return take(h, hash_u64(h, key), key, NULL);
}

int hashmap_put_string(struct hashmap *h, const char *key, void *value) {
        assert(h->type == HASHMAP_KEY_STRING && key);
        return put(h, hash_string(h, key), 0, key, value);
}

void *hashmap_get_string(const struct hashmap *h, const char *key) {
        assert(h->type == HASHMAP_KEY_STRING);
        return key ? get(h, hash_string(h, key), 0, key) : NULL;
}

void *hashmap_remove_string(struct hashmap *h, const char *key) {
        assert(h->type == HASHMAP_KEY_STRING);
        return key ? take(h, hash_string(h, key), 0, key) : NULL;
}

size_t hashmap_count_get_u64(const struct hashmap *h, uint64_t key) {
        assert(h);

        return (size_t) (uintptr_t) hashmap_get_u64(h, key);
}

int hashmap_count_add_u64(struct hashmap *h, uint64_t key, int delta) {
        assert(h);

        size_t n = hashmap_count_get_u64(h, key);
        n = delta < 0 ? (n > (size_t) -delta ? n - (size_t) -delta : 0) : n + (size_t) delta;
        (void) hashmap_remove_u64(h, key); /* put() replaces nothing in place */
        return n == 0 ? 0 : hashmap_put_u64(h, key, (void *) (uintptr_t) n);
}
