/* SPDX-License-Identifier: MIT */
#pragma once

/* The io.pressured wire format: scope references, scope states and level-change events as JSON, as
 * declared in io.pressured.varlink. */

#include <json-c/json.h>

#include "level.h"
#include "scope.h"

struct scope_ref {
        enum scope_type type;
        int node;
        const char *cgroup; /* points into the parsed JSON */
};

/* Parse a ScopeRef. On failure returns -EINVAL and the name of the offending field in *ret_field. */
int protocol_parse_scope_ref(struct json_object *o, struct scope_ref *ret, const char **ret_field);

struct json_object *protocol_scope_ref(const struct scope *s);
/* A ScopeState: level, PSI figures, memory figures, reclaim target. */
struct json_object *protocol_scope_state(const struct scope *s);
/* A LevelChange as a subscriber sees it: `previous` is the level this subscriber was last told. */
struct json_object *protocol_level_change(const struct scope *s, enum level previous, unsigned coalesced);

struct shrink_request;
struct shrinker;
/* A Request as the client sees it on its serving connection. */
struct json_object *protocol_shrink_request(const struct shrink_request *q);
/* A ShrinkerInfo for ListShrinkers. */
struct json_object *protocol_shrinker_info(const struct shrinker *sh);

/* The interface definition, compiled in from io.pressured.varlink. */
extern const char protocol_interface_description[];
