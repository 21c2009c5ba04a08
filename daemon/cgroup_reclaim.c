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
#include "hashmap.h"
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

uint64_t cgroup_parse_refaults(const char *stat_text) {
        assert(stat_text);

        uint64_t pages = 0;
        if (headroom_parse_field(stat_text, "workingset_refault_file", &pages) < 0 &&
            headroom_parse_field(stat_text, "workingset_refault", &pages) < 0)
                return 0;
        return pages;
}

int cgroup_reclaimable(const struct cgroup_layout *l, const char *cgroup, uint64_t swap_free,
                       struct cgroup_reclaim_figures *ret) {
        _cleanup_free_ char *stat = NULL, *current = NULL;
        char buf[8192], cur[32];
        struct cgroup_reclaim_figures f = {};

        assert(l && cgroup && ret);
        if (!l->memory_v2)
                return -EOPNOTSUPP;
        if (cgroup_file_path(l, cgroup, "memory.stat", &stat) < 0 ||
            cgroup_file_path(l, cgroup, "memory.current", &current) < 0)
                return -ENOMEM;
        int r = read_file_start(stat, buf, sizeof(buf));
        if (r >= 0)
                r = cgroup_parse_reclaimable(buf, swap_free, &f.reclaimable);
        if (r >= 0)
                r = read_file_start(current, cur, sizeof(cur));
        if (r < 0)
                return r;
        f.refaulted_file = sat_mul(cgroup_parse_refaults(buf), (uint64_t) sysconf(_SC_PAGESIZE));
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cur, &end, 10);
        if (errno || end == cur)
                return -EINVAL;
        f.current = v;
        *ret = f;
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

/* Every group under a delegation is its delegate's: the owner of the topmost directory on its path that
 * is not root's. A user who chowns groups of its subtree to the many uids of a user namespace still
 * spends one budget. 0: root's so far. */
struct glob_walk {
        const struct cgroup_layout *l;
        const struct cgroup_glob_limits *lim;
        size_t n, entries;
        char **found;
        uid_t *owners;
        struct hashmap *found_of, *entries_of; /* delegate -> groups found, directory entries read */
        bool truncated;
};

static int glob_found(struct glob_walk *w, const char *path, uid_t owner) {
        if (w->n >= w->lim->max ||
            (owner != 0 && hashmap_count_get_u64(w->found_of, owner) >= w->lim->max_per_owner)) {
                w->truncated = true;
                return 0;
        }
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        if (owner != 0 && hashmap_count_add_u64(w->found_of, owner, +1) < 0) {
                free(p);
                return -ENOMEM;
        }
        w->owners[w->n] = owner;
        w->found[w->n++] = p;
        return 0;
}

/* One more entry read from a directory of owner's: false once the walk or that owner has read its
 * budget (what is left of the directory is not read). */
static bool glob_entry(struct glob_walk *w, uid_t owner) {
        if (w->entries >= w->lim->entries ||
            (owner != 0 && hashmap_count_get_u64(w->entries_of, owner) >= w->lim->entries_per_owner)) {
                w->truncated = true;
                return false;
        }
        w->entries++;
        if (owner != 0)
                (void) hashmap_count_add_u64(w->entries_of, owner, +1);
        return true;
}

/* Groups below prefix (a v2 path, "" for the root; owner its delegate) that match the components in rest. */
static int glob_walk(struct glob_walk *w, const char *prefix, uid_t owner, const char *rest, unsigned depth) {
        if (!*rest)
                return glob_found(w, prefix, owner);
        if (depth >= CGROUP_WALK_MAX_DEPTH || w->n >= w->lim->max)
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
        for (struct dirent *de; r >= 0 && glob_entry(w, owner) && (de = readdir(d));) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.' || fnmatch(component, de->d_name, FNM_PERIOD) != 0)
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone since it was listed */
                _cleanup_free_ char *child = NULL;
                if (asprintf(&child, "%s/%s", prefix, de->d_name) < 0)
                        r = -ENOMEM;
                else
                        r = glob_walk(w, child, owner != 0 ? owner : st.st_uid, next, depth + 1);
        }
        closedir(d);
        return r;
}

struct glob_match {
        char *path;
        uid_t owner;
};

static int cmp_match(const void *a, const void *b) {
        return strcmp(((const struct glob_match *) a)->path, ((const struct glob_match *) b)->path);
}

static void glob_walk_done(struct glob_walk *w) {
        hashmap_free(w->found_of);
        hashmap_free(w->entries_of);
}

int cgroup_glob(const struct cgroup_layout *l, const char *pattern, const struct cgroup_glob_limits *lim, char ***ret,
                uid_t **ret_owners, bool *ret_truncated) {
        assert(l && pattern && ret);

        static const struct cgroup_glob_limits defaults = CGROUP_GLOB_LIMITS_DEFAULT;
        if (!lim)
                lim = &defaults;
        if (pattern[0] != '/' || lim->max == 0)
                return -EINVAL;
        struct glob_walk w = { .l = l, .lim = lim, .found = calloc(lim->max + 1, sizeof(char *)),
                               .owners = calloc(lim->max + 1, sizeof(uid_t)) };
        int r = w.found && w.owners ? hashmap_new(HASHMAP_KEY_U64, &w.found_of) : -ENOMEM;
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &w.entries_of);
        if (r >= 0)
                r = glob_walk(&w, "", 0, pattern + 1, 0);
        glob_walk_done(&w);
        if (r < 0) {
                for (size_t i = 0; i < w.n; i++)
                        free(w.found[i]);
                free(w.found);
                free(w.owners);
                return r;
        }
        /* Sorted by path, the owners with them. */
        struct glob_match *m = calloc(MAX(w.n, 1u), sizeof(*m));
        if (!m) {
                for (size_t i = 0; i < w.n; i++)
                        free(w.found[i]);
                free(w.found);
                free(w.owners);
                return -ENOMEM;
        }
        for (size_t i = 0; i < w.n; i++)
                m[i] = (struct glob_match){ w.found[i], w.owners[i] };
        qsort(m, w.n, sizeof(*m), cmp_match);
        for (size_t i = 0; i < w.n; i++) {
                w.found[i] = m[i].path;
                w.owners[i] = m[i].owner;
        }
        free(m);
        *ret = w.found;
        if (ret_owners)
                *ret_owners = w.owners;
        else
                free(w.owners);
        if (ret_truncated)
                *ret_truncated = w.truncated;
        return (int) MIN(w.n, (size_t) INT32_MAX);
}
