/* SPDX-License-Identifier: MIT */
#include "cgroup.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libcgroup.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static bool is_cgroup2(const char *path) {
        struct statfs s;
        return statfs(path, &s) == 0 && (unsigned long) s.f_type == CGROUP2_SUPER_MAGIC;
}

/* libcgroup only lists hierarchies that carry a controller; on hybrid systems the v2 hierarchy often has
 * none, so it is found in mountinfo. */
static int find_cgroup2_mount(char **ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return -errno;

        _cleanup_free_ char *line = NULL;
        size_t n = 0;
        while (getline(&line, &n, f) > 0) {
                /* id parent major:minor root mountpoint options [optional...] - fstype source superopts */
                char root[PATH_MAX], mnt[PATH_MAX], fstype[64];
                const char *dash = strstr(line, " - ");
                if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
                    sscanf(dash + 3, "%63s", fstype) != 1)
                        continue;
                if (streq(fstype, "cgroup2") && streq(root, "/")) {
                        char *p = strdup(mnt);
                        if (!p)
                                return -ENOMEM;
                        *ret = p;
                        return 0;
                }
        }
        return -ENOENT;
}

int cgroup_layout_discover(struct cgroup_layout *ret) {
        assert(ret);

        struct cgroup_layout l = {};
        char *mp = NULL;

        if (cgroup_init() == 0 && cgroup_get_subsys_mount_point("memory", &mp) == 0 && mp) {
                l.memory_root = mp;
                l.memory_v2 = is_cgroup2(mp);
        }

        if (l.memory_v2)
                l.v2_root = strdup(l.memory_root);
        else {
                int r = find_cgroup2_mount(&l.v2_root);
                if (r < 0) {
                        cgroup_layout_done(&l);
                        return r;
                }
        }
        if (!l.v2_root) {
                cgroup_layout_done(&l);
                return -ENOMEM;
        }
        *ret = l;
        return 0;
}

void cgroup_layout_done(struct cgroup_layout *l) {
        assert(l);

        free(l->v2_root);
        free(l->memory_root);
        *l = (struct cgroup_layout){};
}

int cgroup_path_normalize(const char *path, char **ret) {
        if (!path || path[0] != '/' || strlen(path) >= PATH_MAX / 2)
                return -EINVAL;

        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
                p[--len] = 0;

        for (const char *c = p; *c; c++)
                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        return -EINVAL;

        if (!streq(p, "/")) {
                const char *s = p + 1;
                for (;;) {
                        const char *e = strchrnul(s, '/');
                        size_t n = (size_t) (e - s);
                        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                                return -EINVAL;
                        if (!*e)
                                break;
                        s = e + 1;
                }
        }
        *ret = TAKE_PTR(p);
        return 0;
}

static int join(const char *root, const char *cgroup, const char *file, char **ret) {
        const char *sep = streq(cgroup, "/") ? "" : cgroup;
        if (asprintf(ret, "%s%s/%s", root, sep, file) < 0)
                return -ENOMEM;
        return 0;
}

int cgroup_file_path(const struct cgroup_layout *l, const char *cgroup, const char *file, char **ret) {
        assert(l);

        return join(l->v2_root, cgroup, file, ret);
}

int cgroup_check(const struct cgroup_layout *l, const char *cgroup) {
        assert(l);

        _cleanup_free_ char *p = NULL;
        int r = cgroup_file_path(l, cgroup, "memory.pressure", &p);
        if (r < 0)
                return r;
        if (access(p, R_OK) < 0)
                return -errno;
        return 0;
}

/* As the kernel decides (acl aside): the owner's bits for the owner, the group's for a member. */
static bool mode_lets_write(const struct stat *st, uid_t uid, const gid_t *gids, size_t n_gids) {
        if (st->st_uid == uid)
                return st->st_mode & S_IWUSR;
        for (size_t i = 0; i < n_gids; i++)
                if (st->st_gid == gids[i])
                        return st->st_mode & S_IWGRP;
        return st->st_mode & S_IWOTH;
}

int cgroup_may_watch(const struct cgroup_layout *l, const char *cgroup, uid_t uid, const gid_t *gids, size_t n_gids) {
        assert(l);

        _cleanup_free_ char *file = NULL, *dir = NULL;
        struct stat st;
        int r;

        if (uid == 0)
                return 1;
        r = cgroup_file_path(l, cgroup, "memory.pressure", &file);
        if (r < 0)
                return r;
        if (stat(file, &st) < 0)
                return -errno;
        if (mode_lets_write(&st, uid, gids, n_gids))
                return 1;
        r = cgroup_file_path(l, cgroup, "", &dir);
        if (r < 0)
                return r;
        if (stat(dir, &st) < 0)
                return -errno;
        return st.st_uid == uid;
}

static int read_u64(const char *path, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char buf[64];
        if (!fgets(buf, sizeof(buf), f))
                return -EIO;
        buf[strcspn(buf, "\n")] = 0;
        if (streq(buf, "max")) {
                *ret = UINT64_MAX;
                return 0;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

int cgroup_memory(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret_usage, uint64_t *ret_limit) {
        _cleanup_free_ char *cur = NULL, *max = NULL, *high = NULL;
        uint64_t usage, limit = UINT64_MAX, v;
        int r;

        if (!l->memory_root)
                return -EOPNOTSUPP;

        if (l->memory_v2) {
                if (join(l->memory_root, cgroup, "memory.current", &cur) < 0 ||
                    join(l->memory_root, cgroup, "memory.max", &max) < 0 ||
                    join(l->memory_root, cgroup, "memory.high", &high) < 0)
                        return -ENOMEM;
        } else if (join(l->memory_root, cgroup, "memory.usage_in_bytes", &cur) < 0 ||
                   join(l->memory_root, cgroup, "memory.limit_in_bytes", &max) < 0)
                return -ENOMEM;

        r = read_u64(cur, &usage);
        if (r < 0)
                return r; /* the root of v2 has no memory.current; no such v1 group: -ENOENT */
        if (read_u64(max, &v) >= 0)
                limit = MIN(limit, v);
        if (high && read_u64(high, &v) >= 0)
                limit = MIN(limit, v);
        /* v1 spells "no limit" as a huge page-aligned number. */
        if (limit >= (UINT64_MAX >> 2))
                limit = UINT64_MAX;

        *ret_usage = usage;
        *ret_limit = limit;
        return 0;
}

int cgroup_parse_anon(const char *text, bool v2, uint64_t *ret_bytes) {
        assert(ret_bytes);

        return headroom_parse_field(text, v2 ? "anon" : "total_rss", ret_bytes);
}

int cgroup_anon(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret_bytes) {
        _cleanup_free_ char *path = NULL;
        char buf[8192];

        if (!l->memory_root)
                return -EOPNOTSUPP;
        if (join(l->memory_root, cgroup, "memory.stat", &path) < 0)
                return -ENOMEM;
        int r = read_file_start(path, buf, sizeof(buf));
        return r < 0 ? r : cgroup_parse_anon(buf, l->memory_v2, ret_bytes);
}

int cgroup_only_process(const struct cgroup_layout *l, const char *cgroup, pid_t pid) {
        assert(l);

        _cleanup_free_ char *path = NULL;
        char buf[64]; /* one pid and a newline fit; anything longer is more than one process */

        if (streq(cgroup, "/"))
                return 0;
        if (cgroup_file_path(l, cgroup, "cgroup.procs", &path) < 0)
                return -ENOMEM;
        int r = read_file_start(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        char *end;
        long v = strtol(buf, &end, 10);
        return end != buf && *end == '\n' && end[1] == 0 && v == (long) pid;
}

int cgroup_proc_get_path(int proc_dirfd, char **ret) {
        int fd = openat(proc_dirfd, "cgroup", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        _cleanup_fclose_ FILE *f = fdopen(fd, "re");
        if (!f) {
                close(fd);
                return -errno;
        }

        _cleanup_free_ char *line = NULL;
        size_t n = 0;
        for (errno = 0; getline(&line, &n, f) > 0; errno = 0) {
                if (strncmp(line, "0::", 3) != 0)
                        continue;
                line[strcspn(line, "\n")] = 0;
                return cgroup_path_normalize(line + 3, ret);
        }
        /* getline() says ENOMEM when it cannot grow the line: not an answer about the process; ESRCH when
         * the process behind the directory is gone. */
        return errno == ENOMEM || errno == ESRCH ? -errno : -ENOENT;
}

int cgroup_pid_get_path(pid_t pid, char **ret) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return cgroup_proc_get_path(fd, ret);
}

static int group_limit(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret) {
        _cleanup_free_ char *max = NULL, *high = NULL;
        uint64_t limit = UINT64_MAX, v;

        if (join(l->memory_root, cgroup, l->memory_v2 ? "memory.max" : "memory.limit_in_bytes", &max) < 0 ||
            (l->memory_v2 && join(l->memory_root, cgroup, "memory.high", &high) < 0))
                return -ENOMEM;
        int r = read_u64(max, &v);
        if (r == -ENOMEM)
                return r;
        if (r >= 0)
                limit = v;
        else if (r == -ENOENT) {
                /* No memory.max: the controller is not enabled for the group (no limit), or no group. */
                _cleanup_free_ char *dir = NULL;
                if (join(l->memory_root, cgroup, "", &dir) < 0)
                        return -ENOMEM;
                if (access(dir, F_OK) < 0)
                        return -errno;
        }
        if (high && read_u64(high, &v) >= 0)
                limit = MIN(limit, v);
        if (limit >= (UINT64_MAX >> 2))
                limit = UINT64_MAX;
        *ret = limit;
        return 0;
}

static int group_figures(const struct cgroup_layout *l, const char *cgroup, struct headroom_group *g) {
        _cleanup_free_ char *cur = NULL, *stat = NULL;
        char buf[8192];

        if (join(l->memory_root, cgroup, l->memory_v2 ? "memory.current" : "memory.usage_in_bytes", &cur) < 0 ||
            join(l->memory_root, cgroup, "memory.stat", &stat) < 0)
                return -ENOMEM;
        int r = read_u64(cur, &g->usage);
        if (r < 0)
                return r;
        /* Kernels before 5.19 have no v2 memory.peak: the usage stands in. */
        _cleanup_free_ char *peak = NULL;
        if (join(l->memory_root, cgroup, l->memory_v2 ? "memory.peak" : "memory.max_usage_in_bytes", &peak) < 0)
                return -ENOMEM;
        if (read_u64(peak, &g->peak) < 0)
                g->peak = g->usage;
        r = read_file_start(stat, buf, sizeof(buf));
        if (r < 0)
                return r;
        /* File pages, active ones too: the OOM killer comes only once those are gone as well. Counting
         * the inactive ones alone made a group's file working set look like a cache about to be killed
         * (the closed loop then kept 1% of its cache, where PSI alone kept 9 to 38%); a working set
         * squeezed by the cache is what PSI sees, as stall. Shared memory is on the anonymous lists. */
        uint64_t active = 0, inactive = 0;
        (void) headroom_parse_field(buf, l->memory_v2 ? "active_file" : "total_active_file", &active);
        (void) headroom_parse_field(buf, l->memory_v2 ? "inactive_file" : "total_inactive_file", &inactive);
        g->reclaimable = active + inactive;
        return 0;
}

int cgroup_headroom_groups(const struct cgroup_layout *l, const char *cgroup, struct headroom_group *ret, char **ret_paths,
                           size_t max, size_t *ret_n) {
        assert(ret);

        size_t n = 0;
        int r = 0;

        if (!l->memory_root)
                return -EOPNOTSUPP;
        _cleanup_free_ char *p = strdup(cgroup);
        if (!p)
                return -ENOMEM;
        /* The root has no limit of its own (v1's is "unlimited", v2's has no memory.max). The walk is
         * bounded: a user may nest its delegated groups a thousand deep, and this runs in the loop. */
        for (unsigned depth = 0; n < max && !streq(p, "/") && depth < CGROUP_WALK_MAX_DEPTH; depth++) {
                struct headroom_group g = {};
                r = group_limit(l, p, &g.limit);
                if (r < 0)
                        break;
                if (g.limit != UINT64_MAX) {
                        r = group_figures(l, p, &g);
                        if (r < 0)
                                break;
                        if (ret_paths && !(ret_paths[n] = strdup(p))) {
                                r = -ENOMEM;
                                break;
                        }
                        ret[n++] = g;
                }
                char *slash = strrchr(p, '/');
                if (slash == p)
                        p[1] = 0;
                else
                        *slash = 0;
        }
        if (r < 0) {
                for (size_t i = 0; ret_paths && i < n; i++)
                        free(ret_paths[i]);
                return r;
        }
        *ret_n = n;
        return 0;
}

int cgroup_parse_memory_events(const char *text, struct cgroup_memory_events *ret) {
        assert(ret);

        struct cgroup_memory_events e = {};
        int r = headroom_parse_field(text, "oom_kill", &e.oom_kill);
        if (r < 0 && r != -ENODATA)
                return r;
        r = headroom_parse_field(text, "max", &e.max);
        if (r < 0 && r != -ENODATA)
                return r;
        *ret = e;
        return 0;
}

int cgroup_parse_limit_events(const char *text, uint64_t *ret) {
        assert(ret);

        uint64_t high = 0, max = 0;
        int r = headroom_parse_field(text, "high", &high);
        if (r < 0 && r != -ENODATA)
                return r;
        r = headroom_parse_field(text, "max", &max);
        if (r < 0 && r != -ENODATA)
                return r;
        *ret = sat_add(high, max);
        return 0;
}

int cgroup_limit_events(const struct cgroup_layout *l, const char *cgroup, uint64_t *ret) {
        assert(l && cgroup && ret);

        char buf[1024];
        if (!l->memory_root)
                return -EOPNOTSUPP;
        if (streq(cgroup, "/"))
                return -ENOENT;
        if (!l->memory_v2) {
                _cleanup_free_ char *failcnt = NULL;
                if (join(l->memory_root, cgroup, "memory.failcnt", &failcnt) < 0)
                        return -ENOMEM;
                return read_u64(failcnt, ret);
        }
        /* The group's own, not its descendants' (memory.events counts theirs too since 5.x). */
        _cleanup_free_ char *local = NULL, *all = NULL;
        if (join(l->memory_root, cgroup, "memory.events.local", &local) < 0 ||
            join(l->memory_root, cgroup, "memory.events", &all) < 0)
                return -ENOMEM;
        int r = read_file_start(local, buf, sizeof(buf));
        if (r == -ENOENT)
                r = read_file_start(all, buf, sizeof(buf));
        return r < 0 ? r : cgroup_parse_limit_events(buf, ret);
}

int cgroup_memory_events_path(const struct cgroup_layout *l, const char *cgroup, char **ret) {
        if (!l->memory_root)
                return -EOPNOTSUPP;
        if (l->memory_v2 && streq(cgroup, "/"))
                return -ENOENT; /* the root has no memory.events */
        return join(l->memory_root, cgroup, l->memory_v2 ? "memory.events" : "memory.oom_control", ret);
}

int cgroup_v1_notify(const struct cgroup_layout *l, const char *cgroup, int efd, uint64_t threshold) {
        _cleanup_free_ char *watched = NULL, *control = NULL;
        char line[64];

        if (!l->memory_root || l->memory_v2)
                return -EOPNOTSUPP;
        if (join(l->memory_root, cgroup, threshold == UINT64_MAX ? "memory.oom_control" : "memory.usage_in_bytes",
                 &watched) < 0 ||
            join(l->memory_root, cgroup, "cgroup.event_control", &control) < 0)
                return -ENOMEM;
        int fd = open(watched, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (threshold == UINT64_MAX)
                snprintf(line, sizeof(line), "%d %d", efd, fd);
        else
                snprintf(line, sizeof(line), "%d %d %llu", efd, fd, (unsigned long long) threshold);
        _cleanup_close_ int cfd = open(control, O_WRONLY | O_CLOEXEC);
        if (cfd < 0 || write(cfd, line, strlen(line)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}
