/* SPDX-License-Identifier: MIT */
/* memcached (text protocol): the cap is cache_memlimit (MiB), but lowering it frees nothing by itself
 * (measured with 1.6.18, docs/adapters.md): memcached hands a page back to the kernel only when it moves
 * one to its global pool while it holds more than the limit. So a scan lowers the limit and then moves
 * pages ("slabs reassign <class> 0"), one MiB each, from the classes with the most pages; the items on a
 * moved page are evicted, whatever their age. Needs slab_reassign (on by default since 1.4.25). */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adapter.h"
#include "text.h"
#include "time-util.h"

#define MC_PAGE (1024u * 1024u) /* memcached's slab page */
#define MC_MIN_LIMIT (8u * MC_PAGE) /* cache_memlimit refuses less (MEMLIMIT_TOO_SMALL) */
#define MC_REPLY_MAX 65536      /* "stats slabs" of every class fits */
#define MC_GIVE_BACK_USEC 500000ull /* page moves per scan call at most, whatever the request's deadline */

/* What the adapter keeps of memcached's (a->server): the reply of the last command, which the caller
 * reads before the next. */
struct mc_state {
        char reply[MC_REPLY_MAX];
};

static char *reply_of(const struct adapter *a) {
        return ((struct mc_state *) a->server)->reply;
}

/* One command; its reply in reply_of(a). An error line is -EIO, said. */
static int mc(struct adapter *a, const char *cmd, bool multiline) {
        if (!a->connected || !a->server)
                return -ENOTCONN;
        char *reply = reply_of(a);
        int k = text_command(&a->conn, cmd, multiline, reply, MC_REPLY_MAX);
        if (k < 0) {
                a->connected = false;
                say(a, 0, "lost %s (%s) during %.*s", a->address, strerror(-k), (int) strcspn(cmd, "\r\n"), cmd);
                return k;
        }
        if (strncmp(reply, "ERROR", 5) == 0 || strncmp(reply, "CLIENT_ERROR", 12) == 0 ||
            strncmp(reply, "SERVER_ERROR", 12) == 0) {
                say(a, 0, "%s refused %.*s: %.*s", a->address, (int) strcspn(cmd, "\r\n"), cmd,
                    (int) strcspn(reply, "\r\n"), reply);
                return -EIO;
        }
        return 0;
}

static int stat_of(struct adapter *a, const char *cmd, const char *name, unsigned long long *ret) {
        int k = mc(a, cmd, true);
        if (k >= 0 && text_stat_u64(reply_of(a), name, ret) < 0)
                k = -EPROTO;
        return k;
}

static int mc_reach(struct adapter *a) {
        unsigned long long pid = 0, limit = 0;
        if (!a->server && !(a->server = calloc(1, sizeof(struct mc_state))))
                return -ENOMEM;
        const char *reply = reply_of(a);
        int k = conn_open(a->address, 700, &a->conn);
        if (k < 0)
                return k;
        a->connected = true;
        k = mc(a, "stats settings\r\n", true);
        if (k >= 0 && !strstr(reply, "STAT slab_reassign yes\r\n")) {
                say(a, 0, "%s runs without slab_reassign: a lower cache_memlimit would free nothing. Start it "
                          "with -o slab_reassign to adapt it.", a->address);
                return -EPERM;
        }
        if (k >= 0)
                k = mc(a, "stats\r\n", true);
        if (k >= 0 && (text_stat_u64(reply, "pid", &pid) < 0 || text_stat_u64(reply, "limit_maxbytes", &limit) < 0 ||
                       pid == 0 || pid > INT_MAX))
                k = -EPROTO;
        if (k < 0)
                return k;
        k = adapter_learn_original(a, (pid_t) pid, limit);
        if (k < 0)
                return k;
        say(a, 1, "%s: pid %d, cache_memlimit %llu MiB (its own %" PRIu64 " MiB)", a->address, a->server_pid,
            limit >> 20, a->original >> 20);
        return 0;
}

/* What memcached holds is its slab pages (total_malloced); its RSS from /proc. */
static int mc_held(struct adapter *a, uint64_t *used, uint64_t *rss) {
        unsigned long long m;
        int k = stat_of(a, "stats slabs\r\n", "total_malloced", &m);
        if (k < 0)
                return k;
        *used = m;
        if (rss && proc_rss(a->server_pid, rss) < 0)
                *rss = 0;
        return 0;
}

static int mc_set_cap(struct adapter *a, uint64_t bytes) {
        char cmd[64];
        uint64_t mib = (bytes < MC_MIN_LIMIT ? MC_MIN_LIMIT : bytes) >> 20;
        snprintf(cmd, sizeof(cmd), "cache_memlimit %" PRIu64 "\r\n", mib);
        int k = mc(a, cmd, false);
        if (k >= 0 && strncmp(reply_of(a), "OK\r\n", 4) != 0)
                k = -EPROTO;
        return k;
}

/* The class with the most pages, not in skip (a class that said NOSPARE). 0: none. */
static unsigned fullest_class(const char *stats, const bool *skip) {
        unsigned best = 0;
        unsigned long long most = 0;
        for (const char *l = stats; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                char *end;
                if (strncmp(l, "STAT ", 5) != 0)
                        continue;
                unsigned long id = strtoul(l + 5, &end, 10);
                if (end == l + 5 || id == 0 || id > 255 || strncmp(end, ":total_pages ", 13) != 0 || skip[id])
                        continue;
                unsigned long long pages = strtoull(end + 13, NULL, 10);
                if (pages > most) {
                        most = pages;
                        best = (unsigned) id;
                }
        }
        return best;
}

static void sleep_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = (long) ms * 1000000L };
        nanosleep(&ts, NULL);
}

/* The mover runs in a thread of memcached's: after "OK" it may not even have started. Wait until the
 * pages it holds fall below before (the page was freed), or the deadline. */
static void wait_freed(struct adapter *a, unsigned long long before, uint64_t deadline) {
        unsigned long long now = before;
        while (clock_now_usec(CLOCK_MONOTONIC) < deadline &&
               stat_of(a, "stats slabs\r\n", "total_malloced", &now) >= 0 && now >= before)
                sleep_ms(2);
}

/* One page of the fullest class to the global pool, and its release waited for. */
static int move_page(struct adapter *a, bool *skip, uint64_t deadline) {
        char cmd[64];
        while (clock_now_usec(CLOCK_MONOTONIC) < deadline) {
                unsigned long long before;
                if (stat_of(a, "stats slabs\r\n", "total_malloced", &before) < 0)
                        return -EIO;
                const char *reply = reply_of(a);
                unsigned id = fullest_class(reply, skip);
                if (id == 0)
                        return -ENOSPC;
                snprintf(cmd, sizeof(cmd), "slabs reassign %u 0\r\n", id);
                if (mc(a, cmd, false) < 0)
                        return -EIO;
                if (strncmp(reply, "NOSPARE", 7) == 0)
                        skip[id] = true;
                else if (strncmp(reply, "BUSY", 4) == 0)
                        sleep_ms(5); /* an earlier move (ours, or its own automover's) */
                else if (strncmp(reply, "OK", 2) == 0) {
                        wait_freed(a, before, deadline);
                        return 0;
                } else
                        return -EPROTO; /* BADCLASS, SAME: not what we asked */
        }
        return -ETIMEDOUT;
}

static void mc_give_back(struct adapter *a, uint64_t bytes, uint64_t deadline) {
        bool skip[256] = {};
        uint64_t most = clock_now_usec(CLOCK_MONOTONIC) + MC_GIVE_BACK_USEC;
        if (deadline == 0 || deadline > most)
                deadline = most;
        unsigned pages = (unsigned) ((bytes + MC_PAGE - 1) / MC_PAGE), moved = 0;
        while (moved < pages && clock_now_usec(CLOCK_MONOTONIC) < deadline && move_page(a, skip, deadline) == 0)
                moved++;
        say(a, 2, "%s: moved %u of %u pages to the global pool", a->address, moved, pages);
}

static int mc_ping(struct adapter *a) {
        return mc(a, "version\r\n", false);
}

static void mc_done(struct adapter *a) {
        free(a->server);
        a->server = NULL;
}

const struct server_ops memcached_ops = {
        .kind = "memcached",
        .auth = false, /* SASL is the binary protocol's; the text protocol has none */
        .reach = mc_reach,
        .held = mc_held,
        .set_cap = mc_set_cap,
        .give_back = mc_give_back,
        .ping = mc_ping,
        .done = mc_done,
};
