/* SPDX-License-Identifier: MIT */
#include "psi.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

static const char *const kind_names[_PSI_KIND_MAX] = { "some", "full" };

const char *psi_kind_to_string(enum psi_kind k) {
        return k >= 0 && k < _PSI_KIND_MAX ? kind_names[k] : NULL;
}

int psi_kind_from_string(const char *s) {
        for (int k = 0; k < _PSI_KIND_MAX; k++)
                if (s && streq(s, kind_names[k]))
                        return k;
        return -EINVAL;
}

static int parse_double(const char *s, const char *key, double *ret) {
        size_t n = strlen(key);
        if (strncmp(s, key, n) != 0 || s[n] != '=')
                return -EINVAL;
        char *end;
        errno = 0;
        double v = strtod(s + n + 1, &end);
        if (errno != 0 || end == s + n + 1 || *end != 0 || v < 0 || v > 100)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_line(char *line, struct psi_line *ret) {
        char *save = NULL, *tok[4];
        for (int i = 0; i < 4; i++) {
                tok[i] = strtok_r(i == 0 ? line : NULL, " \t", &save);
                if (!tok[i])
                        return -EINVAL;
        }
        if (strtok_r(NULL, " \t", &save))
                return -EINVAL;

        struct psi_line l;
        if (parse_double(tok[0], "avg10", &l.avg10) < 0 || parse_double(tok[1], "avg60", &l.avg60) < 0 ||
            parse_double(tok[2], "avg300", &l.avg300) < 0)
                return -EINVAL;
        if (strncmp(tok[3], "total=", 6) != 0 || !tok[3][6] || tok[3][6] == '-')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long t = strtoull(tok[3] + 6, &end, 10);
        if (errno != 0 || *end != 0)
                return -EINVAL;
        l.total = t;
        *ret = l;
        return 0;
}

int psi_parse(const char *text, struct psi_stats *ret) {
        assert(ret);

        struct psi_stats s = {};
        bool have_some = false;

        if (!text)
                return -EINVAL;

        _cleanup_free_ char *copy = strdup(text);
        if (!copy)
                return -ENOMEM;

        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *sp = strchr(line, ' ');
                if (!sp)
                        return -EINVAL;
                *sp = 0;
                int k = psi_kind_from_string(line);
                if (k < 0)
                        continue; /* a line kind this parser does not know yet */
                if (parse_line(sp + 1, &s.line[k]) < 0)
                        return -EINVAL;
                if (k == PSI_SOME)
                        have_some = true;
                else
                        s.has_full = true;
        }
        if (!have_some)
                return -EINVAL;
        *ret = s;
        return 0;
}

int psi_read_fd(int fd, struct psi_stats *ret) {
        assert(ret);

        char buf[512];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return psi_parse(buf, ret);
}

int psi_read_path(const char *path, struct psi_stats *ret) {
        assert(ret);

        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return psi_read_fd(fd, ret);
}

bool psi_trigger_valid(const struct psi_trigger *t) {
        assert(t);

        return t->kind >= 0 && t->kind < _PSI_KIND_MAX && t->window_usec >= PSI_WINDOW_MIN_USEC &&
               t->window_usec <= PSI_WINDOW_MAX_USEC && t->stall_usec > 0 && t->stall_usec <= t->window_usec;
}

struct psi_trigger psi_trigger_unprivileged(struct psi_trigger t) {
        const uint64_t step = PSI_UNPRIV_WINDOW_STEP_USEC;
        uint64_t w = (t.window_usec + step / 2) / step * step;
        w = MAX(w, step);
        w = MIN(w, PSI_WINDOW_MAX_USEC);

        if (w != t.window_usec && t.window_usec > 0) {
                /* Keep the fraction: stall/window stays what the caller asked for. */
                unsigned __int128 s = (unsigned __int128) t.stall_usec * w / t.window_usec;
                t.stall_usec = (uint64_t) s;
        }
        t.window_usec = w;
        t.stall_usec = MAX(t.stall_usec, 1u);
        t.stall_usec = MIN(t.stall_usec, w);
        return t;
}

int psi_trigger_format(const struct psi_trigger *t, char *buf, size_t size) {
        assert(t);

        int n = snprintf(buf, size, "%s %" PRIu64 " %" PRIu64, psi_kind_to_string(t->kind), t->stall_usec,
                         t->window_usec);
        if (n < 0 || (size_t) n >= size)
                return -ENOBUFS;
        return n;
}

static int arm(const char *path, const struct psi_trigger *t) {
        char buf[64];
        int n = psi_trigger_format(t, buf, sizeof(buf));
        if (n < 0)
                return n;

        _cleanup_close_ int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* The kernel wants the terminating NUL as part of the write. */
        if (write(fd, buf, (size_t) n + 1) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int psi_trigger_open(const char *path, const struct psi_trigger *want, bool *unprivileged,
                     struct psi_trigger *ret_used) {
        assert(want);

        struct psi_trigger t = *want;

        if (!psi_trigger_valid(&t))
                return -EINVAL;
        if (unprivileged && *unprivileged)
                t = psi_trigger_unprivileged(t);

        int fd = arm(path, &t);
        if (fd == -EINVAL && unprivileged && !*unprivileged) {
                struct psi_trigger u = psi_trigger_unprivileged(t);
                if (u.window_usec != t.window_usec) {
                        fd = arm(path, &u);
                        if (fd >= 0) {
                                *unprivileged = true;
                                t = u;
                        }
                }
        }
        if (fd < 0)
                return fd;
        if (ret_used)
                *ret_used = t;
        return fd;
}
