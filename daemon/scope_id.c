/* SPDX-License-Identifier: MIT */
#include "scope_id.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static const char *const scope_type_names[_SCOPE_TYPE_MAX] = { "system", "node", "cgroup" };

const char *scope_type_to_string(enum scope_type t) {
        return t >= 0 && t < _SCOPE_TYPE_MAX ? scope_type_names[t] : NULL;
}

int scope_type_from_string(const char *s) {
        for (int t = 0; t < _SCOPE_TYPE_MAX; t++)
                if (s && streq(s, scope_type_names[t]))
                        return t;
        return -EINVAL;
}

int scope_id_from_string(const char *s, struct scope_id *ret) {
        assert(ret);

        if (!s)
                return -EINVAL;
        if (streq(s, "system")) {
                *ret = (struct scope_id){ .type = SCOPE_SYSTEM, .node = -1 };
                return 0;
        }
        if (strncmp(s, "node:", 5) == 0) {
                char *end;
                errno = 0;
                long n = strtol(s + 5, &end, 10);
                if (errno != 0 || end == s + 5 || *end || n < 0 || n > INT_MAX)
                        return -EINVAL;
                *ret = (struct scope_id){ .type = SCOPE_NODE, .node = (int) n };
                return 0;
        }
        if (s[0] == '/') {
                *ret = (struct scope_id){ .type = SCOPE_CGROUP, .node = -1, .cgroup = s };
                return 0;
        }
        return -EINVAL;
}
