/* SPDX-License-Identifier: MIT */
/* Redis (RESP): the cap is maxmemory, which Redis enforces at once by evicting under its own policy;
 * MEMORY PURGE then hands jemalloc's free pages back to the kernel. Only allkeys-* policies are adapted:
 * under noeviction a lower cap makes writes fail, under volatile-* it does once the keys with a TTL are
 * gone. */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapter.h"
#include "resp.h"
#include "time-util.h"

/* One command; the reply in *ret (resp_reply_done() it). An error reply is -EIO, with its text said. */
static int command(struct adapter *a, struct resp_reply *ret, const char *const *argv) {
        struct resp_reply r = {};
        if (!a->connected)
                return -ENOTCONN;
        int k = resp_command(&a->conn, &r, argv);
        if (k < 0) {
                a->connected = false;
                say(a, 0, "lost %s (%s) during %s", a->address, strerror(-k), argv[0]);
                return k;
        }
        if (r.type == RESP_ERROR) {
                /* The command's first word only: AUTH's arguments are secrets. */
                say(a, 0, "%s refused %s: %s", a->address, argv[0], r.str);
                resp_reply_done(&r);
                return -EIO;
        }
        *ret = r;
        return 0;
}

static int config_get(struct adapter *a, const char *key, char *buf, size_t size) {
        struct resp_reply r = {};
        int k = command(a, &r, (const char *const[]){ "CONFIG", "GET", key, NULL });
        if (k < 0)
                return k;
        k = r.type == RESP_ARRAY && r.n_elements == 2 && r.elements[1].type == RESP_BULK && r.elements[1].str ? 0 : -EPROTO;
        if (k == 0)
                snprintf(buf, size, "%s", r.elements[1].str);
        resp_reply_done(&r);
        return k;
}

static int redis_set_cap(struct adapter *a, uint64_t bytes) {
        char v[32];
        struct resp_reply r = {};
        snprintf(v, sizeof(v), "%" PRIu64, bytes);
        int k = command(a, &r, (const char *const[]){ "CONFIG", "SET", "maxmemory", v, NULL });
        resp_reply_done(&r);
        return k;
}

static int redis_held(struct adapter *a, uint64_t *used, uint64_t *rss) {
        struct resp_reply r = {};
        unsigned long long u = 0;
        int k = command(a, &r, (const char *const[]){ "INFO", "memory", NULL });
        if (k < 0)
                return k;
        k = r.type == RESP_BULK && r.str ? 0 : -EPROTO;
        if (k == 0)
                k = resp_info_u64(r.str, "used_memory", &u);
        resp_reply_done(&r);
        if (k < 0)
                return -EPROTO;
        /* Its RSS from the kernel, now: used_memory_rss is Redis's own sample, taken every 100 ms, and
         * still said the RSS before a purge right after it (every line said "RSS 0 less"). */
        if (rss && proc_rss(a->server_pid, rss) < 0)
                return -EPROTO;
        *used = u;
        return 0;
}

static int redis_auth(struct adapter *a) {
        struct resp_reply r = {};
        const char *const with_user[] = { "AUTH", a->user, a->password, NULL };
        const char *const plain[] = { "AUTH", a->password, NULL };
        int k = command(a, &r, a->user ? with_user : plain);
        resp_reply_done(&r);
        if (k == -EIO) {
                conn_close(&a->conn);
                a->connected = false;
                return -EACCES;
        }
        return k;
}

static int redis_reach(struct adapter *a) {
        char policy[64], max[32];
        struct resp_reply r = {};
        int k = conn_open(a->address, 700, &a->conn); /* per command: a callback has 1 s */
        if (k < 0)
                return k;
        a->connected = true;
        if (a->password && (k = redis_auth(a)) < 0)
                return k;
        k = config_get(a, "maxmemory-policy", policy, sizeof(policy));
        if (k >= 0 && strncmp(policy, "allkeys-", 8) != 0) {
                say(a, 0, "%s has maxmemory-policy %s: a lower maxmemory would make its writes fail where it "
                          "has nothing it may evict. Set an allkeys-* policy to adapt it.", a->address, policy);
                return -EPERM;
        }
        if (k >= 0)
                k = config_get(a, "maxmemory", max, sizeof(max));
        if (k < 0)
                return k;
        k = command(a, &r, (const char *const[]){ "INFO", "server", NULL });
        unsigned long long pid = 0;
        if (k >= 0 && (r.type != RESP_BULK || !r.str || resp_info_u64(r.str, "process_id", &pid) < 0 || pid == 0 ||
                       pid > INT_MAX))
                k = -EPROTO;
        resp_reply_done(&r);
        if (k < 0)
                return k;
        k = adapter_learn_original(a, (pid_t) pid, strtoull(max, NULL, 10));
        if (k < 0)
                return k;
        say(a, 1, "%s: pid %d, maxmemory %s (its own %" PRIu64 "), policy %s", a->address, a->server_pid, max,
            a->original, policy);
        return 0;
}

/* Redis evicted down to the new cap as it took it; jemalloc keeps the pages until a purge. */
static void redis_give_back(struct adapter *a, uint64_t bytes, uint64_t deadline) {
        struct resp_reply r = {};
        (void) bytes;
        if (clock_now_usec(CLOCK_MONOTONIC) < deadline && command(a, &r, (const char *const[]){ "MEMORY", "PURGE", NULL }) >= 0)
                resp_reply_done(&r);
}

static int redis_ping(struct adapter *a) {
        struct resp_reply r = {};
        int k = command(a, &r, (const char *const[]){ "PING", NULL });
        if (k >= 0)
                resp_reply_done(&r);
        return k;
}

const struct server_ops redis_ops = {
        .kind = "redis",
        .auth = true,
        .reach = redis_reach,
        .held = redis_held,
        .set_cap = redis_set_cap,
        .give_back = redis_give_back,
        .ping = redis_ping,
};
