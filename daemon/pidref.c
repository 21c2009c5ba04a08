/* SPDX-License-Identifier: MIT */
#include "pidref.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int pidfd_open(pid_t pid) {
        long fd = syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : (int) fd;
}

bool pidfd_alive(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        return poll(&p, 1, 0) == 0;
}

int proc_status_parse_uids(const char *text, uid_t ret[4]) {
        assert(text);
        assert(ret);

        const char *p = strstr(text, "\nUid:");
        unsigned long long v[4];
        if (!p || sscanf(p + 5, "%llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]) != 4)
                return -EINVAL;
        for (int i = 0; i < 4; i++) {
                if (v[i] > UINT32_MAX)
                        return -EINVAL;
                ret[i] = (uid_t) v[i];
        }
        return 0;
}

int pidfd_check_uid(int pidfd, pid_t pid, uid_t uid) {
        char path[64], buf[4096];
        uid_t uids[4];

        /* Read after the pin, checked alive after the read: the status read is the pinned process's. */
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        int r = read_file_start(path, buf, sizeof(buf));
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        if (proc_status_parse_uids(buf, uids) < 0)
                return -EIO;
        if (!pidfd_alive(pidfd))
                return -ESRCH;
        if (uid != 0)
                for (int i = 0; i < 4; i++)
                        if (uids[i] != uid)
                                return -EPERM;
        return 0;
}

int pidfd_open_for_uid(pid_t pid, uid_t uid, int *ret_pidfd) {
        assert(ret_pidfd);

        if (pid <= 0)
                return -ESRCH;
        _cleanup_close_ int pidfd = pidfd_open(pid);
        if (pidfd < 0)
                return pidfd == -EINVAL ? -ESRCH : pidfd;
        int r = pidfd_check_uid(pidfd, pid, uid);
        if (r < 0)
                return r;
        *ret_pidfd = TAKE_FD(pidfd);
        return 0;
}

int pidref_parse_stat(const char *text, uint64_t *ret) {
        assert(ret);

        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count from the last ')'.
         * The state is field 3, the start time field 22. */
        const char *p = strrchr(text, ')');
        if (!p)
                return -EINVAL;
        p++;
        for (int field = 3; field < 22; field++) {
                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EINVAL;
                p += strcspn(p, " ");
        }
        while (*p == ' ')
                p++;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno != 0 || end == p || (*end != ' ' && *end != '\n' && *end != 0))
                return -EINVAL;
        *ret = v;
        return 0;
}

static int read_start(int dirfd, uint64_t *ret) {
        char buf[1024];
        _cleanup_close_ int fd = openat(dirfd, "stat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        buf[n] = 0;
        return pidref_parse_stat(buf, ret);
}

static int open_proc(pid_t pid) {
        char path[32];
        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%d", (int) pid);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        return fd;
}

int pidref_set(struct pidref *p, pid_t pid) {
        assert(p);

        *p = (struct pidref){ .pid = pid };
        _cleanup_close_ int fd = open_proc(pid);
        if (fd < 0)
                return fd;
        return read_start(fd, &p->start);
}

int pidref_open_proc(const struct pidref *p) {
        assert(p);

        uint64_t start;
        if (p->start == 0)
                return -ESRCH;
        int fd = open_proc(p->pid);
        if (fd < 0)
                return fd;
        int r = read_start(fd, &start);
        if (r < 0 || start != p->start) {
                close(fd);
                return r < 0 && r != -EINVAL ? r : -ESRCH;
        }
        return fd;
}

int pidref_open_proc_of_uid(pid_t pid, uid_t uid) {
        struct stat st;
        int fd = open_proc(pid);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0 || st.st_uid != uid) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}

int pidref_open_proc_pidfd(int pidfd, pid_t pid) {
        if (!pidfd_alive(pidfd))
                return -ESRCH;
        int fd = open_proc(pid);
        if (fd < 0)
                return fd;
        /* Alive after the open: the number was its all along, and the directory is its. */
        if (!pidfd_alive(pidfd)) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}
