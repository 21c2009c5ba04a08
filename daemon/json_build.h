/* SPDX-License-Identifier: MIT */
#pragma once

/* Building JSON that fails as a whole. json-c returns NULL when an allocation fails and takes NULL as
 * a value (a JSON null), so an unchecked build sends a reply with holes in it, or crashes on a NULL
 * container. These helpers poison instead: when a step fails, the container is freed and set to NULL;
 * every later step on a NULL container only frees the value it was given. A build therefore checks once,
 * at the end: NULL means -ENOMEM.
 *
 * Every helper consumes the value it is given. Keys are not copied: pass literals (or strings that
 * outlive the object). */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void jb_set(struct json_object **o, const char *key, struct json_object *v);
void jb_append(struct json_object **array, struct json_object *v);

/* Numbers above INT64_MAX saturate: JSON has no unsigned 64-bit integers in json-c. */
void jb_set_u64(struct json_object **o, const char *key, uint64_t v);
void jb_set_int(struct json_object **o, const char *key, int v);
/* NULL is sent as "". */
/* A JSON string of v (NULL: ""), valid UTF-8 whatever v holds (utf8.h); NULL when out of memory. */
struct json_object *jb_new_string(const char *v);
void jb_set_string(struct json_object **o, const char *key, const char *v);
/* The key only when true: absent means false, as the protocol has it. */
void jb_set_true(struct json_object **o, const char *key, bool v);

/* { key: v }, or NULL. */
struct json_object *jb_object_with(const char *key, struct json_object *v);

/* Text that grows, checked at every step. Messages are written with it, never with json-c's
 * json_object_to_json_string(): before 0.17 that drops pieces of the text when its buffer cannot grow
 * (a key without its colon was seen) and still returns it. Also for messages written without building
 * json-c objects at all (rounds send thousands of requests; the objects cost more than the sending). */
struct json_text {
        char *data; /* NUL-terminated once anything was appended */
        size_t len, size;
};
int json_text_append(struct json_text *t, const char *s, size_t n);
/* A JSON string of n bytes (NULs included), escaped as json-c escapes with
 * JSON_C_TO_STRING_NOSLASHESCAPE. */
int json_text_append_string(struct json_text *t, const char *s, size_t n);
/* The value as plain JSON (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE). On -ENOMEM the
 * text is left as it was. */
int json_text_append_value(struct json_text *t, struct json_object *v);
/* Back to its first len bytes (0: empty), the buffer kept. */
void json_text_truncate(struct json_text *t, size_t len);
void json_text_done(struct json_text *t);
