/* SPDX-License-Identifier: MIT */
/* What the benchmarks that drive the example cache share (bench-util.h). */
#include "bench-util.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-util.h"

unsigned long long bench_field(const char *line, const char *key) {
        const char *p = strstr(line, key);
        return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* One STATS line from the cache; -1 once it is gone. */
int bench_stats(int fd, char *line, size_t size) {
        if (fd < 0 || send(fd, "STATS\n", 6, MSG_NOSIGNAL) != 6)
                return -1;
        size_t n = 0;
        while (n < size - 1) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 2000) <= 0)
                        return -1;
                ssize_t k = read(fd, line + n, 1);
                if (k <= 0)
                        return -1;
                if (line[n++] == '\n')
                        break;
        }
        line[n] = 0;
        return 0;
}

/* CPU seconds of a live process (utime and stime of /proc/PID/stat), 0 if unreadable. */
double bench_proc_cpu_s(pid_t pid) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        if (test_read_text(path, buf, sizeof(buf)) < 0)
                return 0;
        const char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        /* after the name: state, then ten fields before utime and stime */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return 0;
        return (double) (ut + st) / (double) sysconf(_SC_CLK_TCK);
}

/* Reap a child, returning its CPU seconds; *status as waitpid's. */
double bench_reap(pid_t pid, int *status) {
        struct rusage ru = {};
        int st = 0;
        if (pid <= 0 || wait4(pid, &st, 0, &ru) != pid)
                return 0;
        if (status)
                *status = st;
        return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 + (double) ru.ru_stime.tv_sec +
               (double) ru.ru_stime.tv_usec / 1e6;
}

int bench_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -1;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}
