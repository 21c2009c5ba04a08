/* SPDX-License-Identifier: MIT */
#include "params.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "level.h"
#include "macro.h"
#include "utf8.h"

static const struct param *find(const struct param *table, const char *name) {
        for (const struct param *p = table; p->name; p++)
                if (streq(p->name, name))
                        return p;
        return NULL;
}

static int dispatch_one(const struct param *p, struct json_object *v, void *field) {
        switch (p->type) {
        case PARAM_INT: {
                int64_t max = p->max > 0 ? p->max : INT64_MAX;
                if (!json_object_is_type(v, json_type_int))
                        return -EINVAL;
                int64_t i = json_object_get_int64(v);
                /* json-c saturates what does not fit in an int64: a huge value is refused, not clipped. */
                if (i < p->min || i > max || (i == INT64_MAX && json_object_get_uint64(v) != (uint64_t) INT64_MAX))
                        return -EINVAL;
                *(int64_t *) field = i;
                return 0;
        }
        case PARAM_BOOL:
                if (!json_object_is_type(v, json_type_boolean))
                        return -EINVAL;
                *(bool *) field = json_object_get_boolean(v);
                return 0;
        case PARAM_STRING:
                /* Names and paths go back out in replies and metrics: valid UTF-8 only. */
                if (!json_object_is_type(v, json_type_string) || !utf8_is_valid(json_object_get_string(v)))
                        return -EINVAL;
                *(const char **) field = json_object_get_string(v);
                return 0;
        case PARAM_ARRAY:
        case PARAM_OBJECT:
                if (!json_object_is_type(v, p->type == PARAM_ARRAY ? json_type_array : json_type_object))
                        return -EINVAL;
                *(struct json_object **) field = v;
                return 0;
        case PARAM_FLOAT: {
                if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                        return -EINVAL;
                double d = json_object_get_double(v);
                if (!isfinite(d))
                        return -EINVAL;
                *(double *) field = d;
                return 0;
        }
        case PARAM_LEVEL: {
                int l = json_object_is_type(v, json_type_string) ? level_from_string(json_object_get_string(v)) : -EINVAL;
                if (l < 0)
                        return -EINVAL;
                *(int *) field = l;
                return 0;
        }
        }
        return -EINVAL;
}

int params_dispatch(struct json_object *params, const struct param *table, void *out, const char **ret_bad) {
        assert(table);

        if (!json_object_is_type(params, json_type_object)) {
                *ret_bad = table->name ? table->name : "parameters";
                return -EINVAL;
        }
        json_object_object_foreach(params, key, val) {
                (void) val;
                if (!find(table, key)) {
                        *ret_bad = key;
                        return -EINVAL;
                }
        }
        for (const struct param *p = table; p->name; p++) {
                struct json_object *v;
                if (!json_object_object_get_ex(params, p->name, &v) || json_object_is_type(v, json_type_null)) {
                        if (p->mandatory) {
                                *ret_bad = p->name;
                                return -EINVAL;
                        }
                        continue;
                }
                if (dispatch_one(p, v, (char *) out + p->offset) < 0) {
                        *ret_bad = p->name;
                        return -EINVAL;
                }
        }
        return 0;
}
