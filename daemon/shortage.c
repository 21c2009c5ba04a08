/* SPDX-License-Identifier: MIT */
#include "shortage.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "headroom.h"
#include "macro.h"

/* Global reclaim only: kswapd, direct reclaim by an allocating task, khugepaged. Older kernels split
 * them by zone (pgscan_kswapd_normal...): a prefix takes those too; pgscan_direct_throttle counts
 * throttling, not pages, and pgscan_anon/pgscan_file count limit reclaim as well. */
static const char *const global_scan[] = { "pgscan_kswapd", "pgscan_direct", "pgscan_khugepaged" };

int shortage_parse_vmstat(const char *text, uint64_t *ret) {
        assert(ret);

        uint64_t sum = 0;
        bool found = false;

        for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                const char *sp = strchr(line, ' ');
                const char *eol = strchr(line, '\n');
                if (!sp || (eol && sp > eol))
                        continue;
                size_t klen = (size_t) (sp - line);
                if (klen == strlen("pgscan_direct_throttle") && strncmp(line, "pgscan_direct_throttle", klen) == 0)
                        continue;
                bool want = false;
                for (size_t i = 0; i < ELEMENTSOF(global_scan); i++)
                        if (klen >= strlen(global_scan[i]) && strncmp(line, global_scan[i], strlen(global_scan[i])) == 0)
                                want = true;
                if (!want)
                        continue;
                char *end;
                errno = 0;
                unsigned long long v = strtoull(sp + 1, &end, 10);
                if (errno != 0 || end == sp + 1 || (*end != '\n' && *end != 0))
                        return -EINVAL;
                if (__builtin_add_overflow(sum, (uint64_t) v, &sum))
                        sum = UINT64_MAX;
                found = true;
        }
        if (!found)
                return -ENODATA;
        *ret = sum;
        return 0;
}

void shortage_feed(struct shortage *s, uint64_t now, int64_t scanned, double available) {
        if (scanned >= 0) {
                /* The first reading only sets the mark: what ran before the daemon looked is not news. */
                if (s->have_counters && (uint64_t) scanned > s->scanned)
                        s->grew_usec = now;
                s->scanned = (uint64_t) scanned;
                s->have_counters = true;
        } else
                s->have_counters = false;
        s->have_available = available >= 0;
        if (s->have_available)
                s->available = available;
        s->read_usec = now;
}

static int read_text(const char *root, const char *name, char *buf, size_t size) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/proc/%s", root, name) < 0)
                return -ENOMEM;
        return read_file_start(path, buf, size);
}

void shortage_read(struct shortage *s, const char *root, uint64_t now, uint64_t min_interval) {
        assert(s);

        char buf[16384]; /* /proc/vmstat is about 6 KiB on 6.x */
        uint64_t scanned, total, avail;
        int64_t sc = -1;
        double av = -1;

        if (s->read_usec > 0 && now - s->read_usec < min_interval)
                return;
        if (read_text(root, "vmstat", buf, sizeof(buf)) >= 0 && shortage_parse_vmstat(buf, &scanned) >= 0)
                sc = (int64_t) MIN(scanned, (uint64_t) INT64_MAX);
        if (read_text(root, "meminfo", buf, sizeof(buf)) >= 0 && headroom_parse_field(buf, "MemTotal", &total) >= 0 &&
            headroom_parse_field(buf, "MemAvailable", &avail) >= 0 && total > 0)
                av = (double) MIN(avail, total) / (double) total;
        shortage_feed(s, now, sc, av);
}

bool shortage_machine(const struct shortage *s, uint64_t now, uint64_t recent) {
        assert(s);

        if (s->have_counters)
                return s->grew_usec > 0 && now - s->grew_usec <= recent;
        if (s->have_available)
                return s->available < 0.5;
        return true; /* nothing to tell by: the stall is all there is */
}

bool shortage_limit_binds(uint64_t usage, uint64_t limit) {
        return limit != UINT64_MAX && limit > 0 && usage >= limit - limit / 10;
}

bool shortage_limit_update(struct limit_watch *w, const struct limit_reading *r, uint64_t now_usec,
                           uint64_t recent_usec, bool first_look) {
        assert(w);
        assert(r);

        if (r->have_events && w->have && r->events > w->events)
                w->grew_usec = now_usec;
        bool first = !w->have;
        w->events = r->events;
        w->have = r->have_events;
        if (!r->have_events)
                return r->near;
        if (first)
                return first_look && r->near;
        return w->grew_usec > 0 && now_usec - w->grew_usec <= recent_usec;
}

enum level shortage_gate(enum level raw, bool node, bool machine_short, bool cgroup_limit_binds) {
        if (raw == LEVEL_OK || node || machine_short || cgroup_limit_binds)
                return raw;
        return LEVEL_OK;
}
