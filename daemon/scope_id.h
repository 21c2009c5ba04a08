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

/* "system", "node:N" or the cgroup path: how scopes are named in logs and on the command line. */
int scope_id_to_string(const struct scope_id *id, char **ret);
/* The reverse: "system", "node:N", or an absolute path. ret->cgroup points into s. -EINVAL otherwise. */
int scope_id_from_string(const char *s, struct scope_id *ret);
