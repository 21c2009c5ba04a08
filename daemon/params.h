/* SPDX-License-Identifier: MIT */
#pragma once

/* Table-driven parsing of call parameters: a table says, per parameter, its name, type, where it goes
 * in the caller's struct and whether it must be there; one function checks a JSON object against it.
 * A parameter that is absent or null leaves its field as the caller initialised it. Pure: json-c only. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum param_type {
        PARAM_INT,    /* int64_t: an integer in [min, max] (max 0: INT64_MAX) */
        PARAM_BOOL,   /* bool */
        PARAM_STRING, /* const char *, pointing into the JSON */
        PARAM_ARRAY,  /* struct json_object * */
        PARAM_OBJECT, /* struct json_object * */
        PARAM_LEVEL,  /* int: an enum level by name */
        PARAM_FLOAT,  /* double: a finite number (an integer too); its range is the caller's to judge */
};

struct param {
        const char *name;
        enum param_type type;
        size_t offset;
        bool mandatory;
        int64_t min, max;
};

/* Check every key against the table (an unknown one is an error), then each entry in table order.
 * Returns 0, or -EINVAL with the name of the first offending parameter in *ret_bad. The table ends
 * with an entry whose name is NULL. */
int params_dispatch(struct json_object *params, const struct param *table, void *out, const char **ret_bad);
