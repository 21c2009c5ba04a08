/* SPDX-License-Identifier: MIT */
#include "cgroup_reclaim.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "headroom.h"
#include "macro.h"

int cgroup_parse_reclaimable(const char *stat_text, uint64_t swap_free, uint64_t *ret) {
        assert(stat_text);
        assert(ret);

        uint64_t af, inf, aa = 0, ia = 0;
        int r = headroom_parse_field(stat_text, "active_file", &af);
        if (r >= 0)
                r = headroom_parse_field(stat_text, "inactive_file", &inf);
        if (r >= 0 && swap_free > 0) {
                r = headroom_parse_field(stat_text, "active_anon", &aa);
                if (r >= 0)
                        r = headroom_parse_field(stat_text, "inactive_anon", &ia);
        }
        if (r < 0)
                return r;
        *ret = sat_add(sat_add(af, inf), MIN(sat_add(aa, ia), swap_free));
        return 0;
}

int cgroup_swap_free(const char *sysfs_root, uint64_t *ret) {
        _cleanup_free_ char *meminfo = NULL, *swappiness = NULL;
        char buf[8192], sw[32];
        uint64_t free_bytes = 0;

        assert(ret);
        if (asprintf(&meminfo, "%s/proc/meminfo", sysfs_root) < 0 ||
            asprintf(&swappiness, "%s/proc/sys/vm/swappiness", sysfs_root) < 0)
                return -ENOMEM;
        int r = read_file_start(meminfo, buf, sizeof(buf));
        if (r < 0)
                return r;
        (void) headroom_parse_field(buf, "SwapFree", &free_bytes);
        if (free_bytes > 0 && read_file_start(swappiness, sw, sizeof(sw)) >= 0 && atoi(sw) == 0)
                free_bytes = 0;
        *ret = free_bytes;
        return 0;
}

int cgroup_reclaimable(const struct cgroup_layout *l, const char *cgroup, uint64_t swap_free, uint64_t *ret_reclaimable,
                       uint64_t *ret_current) {
        _cleanup_free_ char *stat = NULL, *current = NULL;
        char buf[8192], cur[32];

        assert(l && cgroup && ret_reclaimable && ret_current);
        if (!l->memory_v2)
                return -EOPNOTSUPP;
        if (cgroup_file_path(l, cgroup, "memory.stat", &stat) < 0 ||
            cgroup_file_path(l, cgroup, "memory.current", &current) < 0)
                return -ENOMEM;
        int r = read_file_start(stat, buf, sizeof(buf));
        if (r >= 0)
                r = cgroup_parse_reclaimable(buf, swap_free, ret_reclaimable);
        if (r >= 0)
                r = read_file_start(current, cur, sizeof(cur));
        if (r < 0)
                return r;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cur, &end, 10);
        if (errno || end == cur)
                return -EINVAL;
        *ret_current = v;
        return 0;
}

int cgroup_reclaim(const struct cgroup_layout *l, const char *cgroup, uint64_t bytes) {
        _cleanup_free_ char *path = NULL;
        char text[32];

        assert(l && cgroup);
        if (!l->memory_v2)
                return -EOPNOTSUPP;
        if (cgroup_file_path(l, cgroup, "memory.reclaim", &path) < 0)
                return -ENOMEM;
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno != ENOENT)
                        return -errno;
                /* No file: the group is gone, or the kernel predates memory.reclaim. */
                return cgroup_check(l, cgroup) == -ENOENT ? -ENOENT : -EOPNOTSUPP;
        }
        int n = snprintf(text, sizeof(text), "%llu", (unsigned long long) bytes);
        ssize_t w = write(fd, text, (size_t) n);
        int r = w < 0 ? -errno : 0;
        close(fd);
        return r == -ENODEV ? -ENOENT : r;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

struct glob_walk {
        const struct cgroup_layout *l;
        size_t max, n;
        char **found;
        bool truncated;
};

static int glob_found(struct glob_walk *w, const char *path) {
        if (w->n >= w->max) {
                w->truncated = true;
                return 0;
        }
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        w->found[w->n++] = p;
        return 0;
}

/* Groups below prefix (a v2 path, "" for the root) that match the components in rest. */
static int glob_walk(struct glob_walk *w, const char *prefix, const char *rest, unsigned depth) {
        if (!*rest)
                return glob_found(w, prefix);
        if (depth >= CGROUP_WALK_MAX_DEPTH || w->truncated)
                return 0;
        const char *slash = strchrnul(rest, '/');
        _cleanup_free_ char *component = strndup(rest, (size_t) (slash - rest));
        const char *next = *slash ? slash + 1 : slash;
        _cleanup_free_ char *dirpath = NULL;
        if (!component || asprintf(&dirpath, "%s%s", w->l->v2_root, prefix) < 0)
                return -ENOMEM;

        DIR *d = opendir(dirpath);
        if (!d)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.' || fnmatch(component, de->d_name, FNM_PERIOD) != 0)
                        continue;
                _cleanup_free_ char *child = NULL;
                if (asprintf(&child, "%s/%s", prefix, de->d_name) < 0)
                        r = -ENOMEM;
                else
                        r = glob_walk(w, child, next, depth + 1);
        }
        closedir(d);
        return r;
}

int cgroup_glob(const struct cgroup_layout *l, const char *pattern, size_t max, char ***ret, bool *ret_truncated) {
        assert(l && pattern && ret);

        if (pattern[0] != '/' || max == 0)
                return -EINVAL;
        struct glob_walk w = { .l = l, .max = max, .found = calloc(max + 1, sizeof(char *)) };
        if (!w.found)
                return -ENOMEM;
        int r = glob_walk(&w, "", pattern + 1, 0);
        if (r < 0) {
                for (size_t i = 0; i < w.n; i++)
                        free(w.found[i]);
                free(w.found);
                return r;
        }
        qsort(w.found, w.n, sizeof(char *), cmp_str);
        *ret = w.found;
        if (ret_truncated)
                *ret_truncated = w.truncated;
        return (int) MIN(w.n, (size_t) INT32_MAX);
}
