/* SPDX-License-Identifier: MIT */
#include "json_build.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "utf8.h"

void jb_set(struct json_object **o, const char *key, struct json_object *v) {
        if (*o && v && json_object_object_add_ex(*o, key, v, JSON_C_OBJECT_ADD_CONSTANT_KEY) == 0)
                return;
        json_object_put(v);
        json_object_put(*o);
        *o = NULL;
}

void jb_append(struct json_object **array, struct json_object *v) {
        if (*array && v && json_object_array_add(*array, v) == 0)
                return;
        json_object_put(v);
        json_object_put(*array);
        *array = NULL;
}

void jb_set_u64(struct json_object **o, const char *key, uint64_t v) {
        jb_set(o, key, json_object_new_int64((int64_t) MIN(v, (uint64_t) INT64_MAX)));
}

void jb_set_int(struct json_object **o, const char *key, int v) {
        jb_set(o, key, json_object_new_int(v));
}

struct json_object *jb_new_string(const char *v) {
        v = v ? v : "";
        if (utf8_is_valid(v))
                return json_object_new_string(v);
        _cleanup_free_ char *e = utf8_escape_invalid(v);
        return e ? json_object_new_string(e) : NULL;
}

void jb_set_string(struct json_object **o, const char *key, const char *v) {
        jb_set(o, key, jb_new_string(v));
}

void jb_set_true(struct json_object **o, const char *key, bool v) {
        if (v)
                jb_set(o, key, json_object_new_boolean(1));
}

struct json_object *jb_object_with(const char *key, struct json_object *v) {
        struct json_object *o = json_object_new_object();
        jb_set(&o, key, v);
        return o;
}

int json_text_append(struct json_text *t, const char *s, size_t n) {
        if (t->size - t->len < n + 1) {
                size_t size = t->size ? t->size : 256;
                while (size - t->len < n + 1)
                        size *= 2;
                char *p = realloc(t->data, size);
                if (!p)
                        return -ENOMEM;
                t->data = p;
                t->size = size;
        }
        memcpy(t->data + t->len, s, n);
        t->len += n;
        t->data[t->len] = 0;
        return 0;
}

void json_text_truncate(struct json_text *t, size_t len) {
        assert(t);
        assert(len <= t->len);

        t->len = len;
        if (t->data)
                t->data[len] = 0;
}

void json_text_done(struct json_text *t) {
        free(t->data);
        *t = (struct json_text){};
}

int json_text_append_string(struct json_text *t, const char *s, size_t n) {
        static const char short_esc[] = { ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r' };
        size_t run = 0;
        int r = json_text_append(t, "\"", 1);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                unsigned char ch = (unsigned char) s[i];
                if (ch >= 0x20 && ch != '"' && ch != '\\')
                        continue;
                char esc[8];
                if (ch < sizeof(short_esc) && short_esc[ch])
                        snprintf(esc, sizeof(esc), "\\%c", short_esc[ch]);
                else if (ch < 0x20)
                        snprintf(esc, sizeof(esc), "\\u%04x", ch);
                else
                        snprintf(esc, sizeof(esc), "\\%c", ch);
                r = json_text_append(t, s + run, i - run);
                if (r >= 0)
                        r = json_text_append(t, esc, strlen(esc));
                run = i + 1;
        }
        if (r >= 0)
                r = json_text_append(t, s + run, n - run);
        return r < 0 ? r : json_text_append(t, "\"", 1);
}

static int append_value(struct json_text *t, struct json_object *v) {
        char buf[64];
        int r, n;

        switch (json_object_get_type(v)) {
        case json_type_null:
                return json_text_append(t, "null", 4);
        case json_type_boolean:
                return json_object_get_boolean(v) ? json_text_append(t, "true", 4) : json_text_append(t, "false", 5);
        case json_type_int:
                n = snprintf(buf, sizeof(buf), "%" PRId64, json_object_get_int64(v));
                return json_text_append(t, buf, (size_t) n);
        case json_type_double: {
                /* Made by json_object_new_double_s(): the text it was given is its userdata. */
                const char *text = json_object_get_userdata(v);
                if (text)
                        return json_text_append(t, text, strlen(text));
                n = snprintf(buf, sizeof(buf), "%.17g", json_object_get_double(v));
                return json_text_append(t, buf, (size_t) n);
        }
        case json_type_string:
                return json_text_append_string(t, json_object_get_string(v), (size_t) json_object_get_string_len(v));
        case json_type_array:
                r = json_text_append(t, "[", 1);
                for (size_t i = 0; r >= 0 && i < json_object_array_length(v); i++) {
                        if (i > 0)
                                r = json_text_append(t, ",", 1);
                        if (r >= 0)
                                r = append_value(t, json_object_array_get_idx(v, i));
                }
                return r < 0 ? r : json_text_append(t, "]", 1);
        case json_type_object: {
                bool first = true;
                r = json_text_append(t, "{", 1);
                json_object_object_foreach(v, key, val) {
                        if (r < 0)
                                break;
                        if (!first)
                                r = json_text_append(t, ",", 1);
                        first = false;
                        if (r >= 0)
                                r = json_text_append_string(t, key, strlen(key));
                        if (r >= 0)
                                r = json_text_append(t, ":", 1);
                        if (r >= 0)
                                r = append_value(t, val);
                }
                return r < 0 ? r : json_text_append(t, "}", 1);
        }
        }
        return -EINVAL;
}

int json_text_append_value(struct json_text *t, struct json_object *v) {
        size_t len = t->len;
        int r = append_value(t, v);
        if (r < 0 && t->data) {
                t->len = len;
                t->data[len] = 0;
        }
        return r;
}
