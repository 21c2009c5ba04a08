/* SPDX-License-Identifier: MIT */
#include "kmsg.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

/* The value of ",KEY=" (or "KEY=" at the start) in a comma-separated list, up to the next comma. */
static bool field(const char *list, const char *end, const char *key, char *buf, size_t size) {
        size_t klen = strlen(key);
        for (const char *p = list; p < end;) {
                const char *comma = memchr(p, ',', (size_t) (end - p));
                const char *stop = comma ? comma : end;
                if ((size_t) (stop - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '=') {
                        size_t n = (size_t) (stop - p) - klen - 1;
                        if (n >= size)
                                return false;
                        memcpy(buf, p + klen + 1, n);
                        buf[n] = 0;
                        return true;
                }
                p = stop + 1;
        }
        return false;
}

static bool number(const char *s, unsigned long long max, unsigned long long *ret) {
        char *e;
        if (*s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &e, 10);
        if (errno || *e || v > max)
                return false;
        *ret = v;
        return true;
}

int kmsg_parse_oom_kill(const char *record, size_t size, struct oom_kill_record *ret) {
        assert(ret);

        static const char tag[] = "oom-kill:";
        const char *semi = memchr(record, ';', size);
        char head[64], buf[32];
        unsigned long long prio, seq, usec, v;

        if (!semi || (size_t) (semi - record) >= sizeof(head))
                return -EINVAL;
        memcpy(head, record, (size_t) (semi - record));
        head[semi - record] = 0;
        if (sscanf(head, "%llu,%llu,%llu", &prio, &seq, &usec) != 3)
                return -EINVAL;
        const char *msg = semi + 1, *end = record + size;
        const char *nl = memchr(msg, '\n', (size_t) (end - msg)); /* continuation lines follow */
        if (nl)
                end = nl;
        if ((size_t) (end - msg) < sizeof(tag) - 1 || memcmp(msg, tag, sizeof(tag) - 1) != 0)
                return -ENOMSG;
        msg += sizeof(tag) - 1;

        struct oom_kill_record r = { .usec = usec };
        /* The command may hold a comma: it is what lies between ",task=" and the last ",pid=". */
        const char *task = NULL, *pid = NULL;
        for (const char *p = msg; p + 6 <= end; p++) {
                if (!task && memcmp(p, ",task=", 6) == 0)
                        task = p + 6;
                if (p + 5 <= end && memcmp(p, ",pid=", 5) == 0 && task && p >= task)
                        pid = p;
        }
        if (!task || !pid || (size_t) (pid - task) >= sizeof(r.task))
                return -EINVAL;
        memcpy(r.task, task, (size_t) (pid - task));
        r.task[pid - task] = 0;
        if (!field(msg, task - 6, "task_memcg", r.task_memcg, sizeof(r.task_memcg)))
                return -EINVAL;
        if (!field(pid + 1, end, "pid", buf, sizeof(buf)) || !number(buf, INT32_MAX, &v))
                return -EINVAL;
        r.pid = (pid_t) v;
        r.uid = (uid_t) -1;
        if (field(pid + 1, end, "uid", buf, sizeof(buf)) && number(buf, UINT32_MAX - 1, &v))
                r.uid = (uid_t) v;
        *ret = r;
        return 0;
}

bool kmsg_memcg_in(const char *memcg, const char *cgroup) {
        size_t n = strlen(cgroup);
        if (streq(cgroup, "/"))
                return memcg[0] == '/';
        return strncmp(memcg, cgroup, n) == 0 && (memcg[n] == 0 || memcg[n] == '/');
}

int kmsg_find_oom_kill(const char *path, const char *cgroup, uint64_t since_usec, unsigned max_records,
                       struct oom_kill_record *ret) {
        assert(ret);

        _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        char buf[8192];
        bool found = false;

        if (fd < 0)
                return -errno;
        for (unsigned i = 0; i < max_records; i++) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                if (n < 0 && errno == EPIPE) /* overwritten while we read: go on with the next */
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                struct oom_kill_record r;
                if (kmsg_parse_oom_kill(buf, (size_t) n, &r) < 0 || r.usec < since_usec ||
                    !kmsg_memcg_in(r.task_memcg, cgroup))
                        continue;
                *ret = r;
                found = true;
        }
        return found ? 0 : -ENOENT;
}
