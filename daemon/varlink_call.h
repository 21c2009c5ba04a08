/* SPDX-License-Identifier: MIT */
#pragma once

/* A call's envelope, as a peer sends it: one JSON object with the method, its parameters and at most one
 * of the flags. Pure (json-c only): what comes off the socket is judged here, before anything runs. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#define VARLINK_CALL_MORE (1u << 0)
#define VARLINK_CALL_ONEWAY (1u << 1)

struct varlink_call {
        const char *method;
        struct json_object *params; /* NULL: none */
        unsigned flags;             /* VARLINK_CALL_MORE, VARLINK_CALL_ONEWAY */
        bool upgrade;
};

/* One whole JSON object, nothing after it; NULL otherwise, with what is wrong in *ret_bad (NULL: out of
 * memory, not the peer's fault). */
struct json_object *varlink_call_parse_object(const char *text, size_t len, const char **ret_bad);

/* The call in msg (strings point into it). Returns what is wrong, or NULL. */
const char *varlink_call_parse(struct json_object *msg, struct varlink_call *ret);
