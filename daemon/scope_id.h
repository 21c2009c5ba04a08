/* SPDX-License-Identifier: MIT */
#pragma once

/* What names a scope: its type, and the node or cgroup it stands for. Pure: shared by the codec, the
 * shrink policy and the scopes themselves. */

enum scope_type {
        SCOPE_SYSTEM,
        SCOPE_NODE,
        SCOPE_CGROUP,
        _SCOPE_TYPE_MAX,
};

struct scope_id {
        enum scope_type type;
        int node;           /* SCOPE_NODE: the node's number */
        const char *cgroup; /* SCOPE_CGROUP: the v2 path; not owned */
};

const char *scope_type_to_string(enum scope_type t);
int scope_type_from_string(const char *s);

/* A scope named as on the command line: "system", "node:N", or an absolute path. ret->cgroup points into s.
 * -EINVAL otherwise. */
int scope_id_from_string(const char *s, struct scope_id *ret);
