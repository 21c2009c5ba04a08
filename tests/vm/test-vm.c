/* SPDX-License-Identifier: MIT */
/* Inside the VM of tests/vm/run: two real NUMA nodes, pure cgroup v2, root with CAP_SYS_RESOURCE. The real
 * daemon, real pressure, against what the guest's kernel shows. */

#include <errno.h>
#include <numa.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "pressure-private.h"
#include "test-util.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static struct test_daemon daemon_;

static uint64_t sysfs_node_kb(int node, const char *key) {
        char path[128], line[256];
        unsigned long long v = 0;
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f)) {
                char k[64];
                int id;
                unsigned long long x;
                if (sscanf(line, "Node %d %63[^:]: %llu", &id, k, &x) == 3 && strcmp(k, key) == 0)
                        v = x;
        }
        if (f)
                fclose(f);
        return v;
}

/* A process bound to node 1 that keeps the node's free memory between its low and high watermarks.
 * kswapd cannot reclaim anonymous memory here (no swap) but does reclaim the node's page cache, so the
 * filler tops up for as long as it runs; never past the watermarks (bound memory does not spill to node 0,
 * it gets OOM-killed). Sized from the zone figures. */
static uint64_t zoneinfo_node_sum(int node, const char *key) {
        char line[256];
        uint64_t sum = 0;
        int cur = -1;
        FILE *f = fopen("/proc/zoneinfo", "re");
        while (f && fgets(line, sizeof(line), f)) {
                int id;
                char k[32];
                unsigned long long v;
                if (sscanf(line, "Node %d, zone", &id) == 1)
                        cur = id;
                else if (cur == node && sscanf(line, " %31s %llu", k, &v) == 2 && strcmp(k, key) == 0)
                        sum += v;
        }
        if (f)
                fclose(f);
        return sum * 4096;
}

static pid_t fill_node1(void) {
        uint64_t high = zoneinfo_node_sum(1, "high"), low = zoneinfo_node_sum(1, "low");
        uint64_t target = low + (high - low) / 2;
        pid_t pid = fork();
        if (pid == 0) {
                struct bitmask *mask = numa_allocate_nodemask();
                numa_bitmask_setbit(mask, 1);
                numa_set_membind(mask);
                for (;;) {
                        uint64_t free_now = sysfs_node_kb(1, "MemFree") * 1024;
                        if (free_now > target) {
                                size_t chunk = (size_t) MIN(free_now - target, (uint64_t) 64 << 20);
                                char *p = malloc(chunk);
                                for (size_t i = 0; p && i < chunk; i += 4096)
                                        p[i] = 1;
                        }
                        struct pollfd none = { .fd = -1 };
                        poll(&none, 0, 50); /* a load generator's pace, not a synchronisation */
                }
        }
        test_cleanup_pid(pid);
        return pid;
}

static void test_two_nodes_in_status(void) {
        struct pressure_client *c;
        struct pressure_status *st;
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
        CU_ASSERT_EQUAL(pressure_status_get_n_nodes(st), 2u);
        for (size_t i = 0; i < pressure_status_get_n_nodes(st) && i < 2; i++) {
                const struct pressure_scope *n = pressure_status_get_node(st, i);
                uint64_t total = 0, free_b = 0;
                CU_ASSERT_EQUAL(pressure_scope_get_node(n), (int) i);
                CU_ASSERT_EQUAL(pressure_scope_get_memory(n, &total, &free_b), 0);
                CU_ASSERT_EQUAL(total, sysfs_node_kb((int) i, "MemTotal") * 1024);
                printf("\n    node %zu: %llu MiB, %llu MiB free", i, (unsigned long long) (total >> 20),
                       (unsigned long long) (free_b >> 20));
        }
        pressure_status_unref(st);
        pressure_client_unref(c);
}

static void test_fine_windows_accepted(void) {
        /* Root here has CAP_SYS_RESOURCE: the 1 s window of the configuration is taken as it is. */
        CU_ASSERT_TRUE(test_have_cap_sys_resource());
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, "refused a PSI window"), 0);
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, "armed as configured: some 50 ms per 1000 ms window"), 1);
}

struct seen {
        const char *scope;
        enum pressure_level level;
        int left_ok, back_ok;
};

static void on_event(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        struct seen *seen = userdata;
        (void) c;
        if (strcmp(pressure_scope_get_name(s), seen->scope) != 0)
                return;
        seen->level = pressure_scope_get_level(s);
        if (!initial && seen->level != PRESSURE_LEVEL_OK)
                seen->left_ok = 1;
        if (!initial && seen->left_ok && seen->level == PRESSURE_LEVEL_OK)
                seen->back_ok = 1;
}

static int wait_for(struct pressure_client *c, int *flag, int timeout_ms) {
        uint64_t end = test_now_ms() + (uint64_t) timeout_ms;
        while (!*flag && test_now_ms() < end) {
                struct pollfd p = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                if (poll(&p, 1, 1000) > 0 && pressure_client_dispatch(c) < 0)
                        return -ECONNRESET;
        }
        return *flag ? 0 : -ETIMEDOUT;
}

/* Pure cgroup v2: memory.high on a fresh group and an anonymous workload twice its size. */
static void test_cgroup_v2_pressure(void) {
        struct pressure_gen g;
        struct pressure_client *c;
        struct seen seen = {};

        setenv("PRESSURE_GEN_ANON", "1", 1);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, "/tmp", 32u << 20), 0);
        test_cleanup_path(g.v2_dir, true);
        seen.scope = g.cgroup;
        const char *scopes[] = { g.cgroup, NULL };
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_event, &seen), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        CU_ASSERT_EQUAL(wait_for(c, &seen.left_ok, 120000), 0);
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        CU_ASSERT_EQUAL(wait_for(c, &seen.back_ok, 120000), 0);
        pressure_client_unref(c);
        pressure_gen_destroy(&g);
}

/* A process whose memory is bound to node 1 fills it below its high watermark: node 1 leaves ok, node 0
 * stays ok; when the process ends node 1 comes back. */
static void test_node1_pressure(void) {
        struct pressure_client *c;
        struct seen seen = { .scope = "node:1" };
        const char *scopes[] = { "node:1", "node:0", NULL };

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_event, &seen), 0);
        CU_ASSERT_EQUAL(seen.level, PRESSURE_LEVEL_OK);

        pid_t pid = fill_node1();
        CU_ASSERT_EQUAL(wait_for(c, &seen.left_ok, 60000), 0);

        /* Node 0 is still fine. */
        struct pressure_status *st;
        CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
        CU_ASSERT_EQUAL(pressure_scope_get_level(pressure_status_get_node(st, 0)), PRESSURE_LEVEL_OK);
        CU_ASSERT_NOT_EQUAL(pressure_scope_get_level(pressure_status_get_node(st, 1)), PRESSURE_LEVEL_OK);
        pressure_status_unref(st);

        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        test_cleanup_forget_pid(pid);
        CU_ASSERT_EQUAL(wait_for(c, &seen.back_ok, 60000), 0);
        pressure_client_unref(c);
}

/* ---- with client shrinkers: the group's MEMCG_AWARE shrinker is asked, another group's is not ---- */

static pid_t client_in(const char *v2_dir, int out[2]) {
        const char *bin = getenv("SHRINKER_CLIENT_BIN");
        if (pipe(out) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                char path[700], me[32];
                snprintf(path, sizeof(path), "%s/cgroup.procs", v2_dir);
                snprintf(me, sizeof(me), "%d", (int) getpid());
                FILE *f = fopen(path, "we");
                if (!f || fputs(me, f) < 0 || fclose(f) != 0)
                        _exit(3);
                dup2(out[1], STDOUT_FILENO);
                execl(bin, "shrinker-client", "--socket", daemon_.socket, "--memcg", "--objects", "2000", (char *) NULL);
                _exit(127);
        }
        close(out[1]);
        test_cleanup_pid(pid);
        return pid;
}

/* The next line from fd starting with prefix, within timeout_ms. */
static int line_with(int fd, const char *prefix, int timeout_ms) {
        char buf[512];
        size_t len = 0;
        uint64_t end = test_now_ms() + (uint64_t) timeout_ms;
        while (test_now_ms() < end) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, 1000) <= 0)
                        continue;
                char ch;
                if (read(fd, &ch, 1) != 1)
                        return -EPIPE;
                if (ch != '\n') {
                        if (len < sizeof(buf) - 1)
                                buf[len++] = ch;
                        continue;
                }
                buf[len] = 0;
                len = 0;
                if (strncmp(buf, prefix, strlen(prefix)) == 0)
                        return 0;
        }
        return -ETIMEDOUT;
}

static void test_shrinkers_in_v2_group(void) {
        struct pressure_gen g;
        char other[600];
        int in[2], out[2];

        if (!getenv("SHRINKER_CLIENT_BIN")) {
                CU_FAIL("SHRINKER_CLIENT_BIN not set");
                return;
        }
        setenv("PRESSURE_GEN_ANON", "1", 1);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, "/tmp", 32u << 20), 0);
        test_cleanup_path(g.v2_dir, true);
        snprintf(other, sizeof(other), "%s-other", g.v2_dir);
        CU_ASSERT_EQUAL_FATAL(mkdir(other, 0755), 0);
        test_cleanup_path(other, true);

        pid_t a = client_in(g.v2_dir, in), b = client_in(other, out);
        CU_ASSERT_EQUAL(line_with(in[0], "ready", 30000), 0);
        CU_ASSERT_EQUAL(line_with(out[0], "ready", 30000), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        /* The client in the group is asked to scan... */
        CU_ASSERT_EQUAL(line_with(in[0], "scan ", 120000), 0);
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        /* ...the one in the other group never was. */
        struct pressure_client *c;
        char *reply = NULL;
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.ListShrinkers", NULL, &reply, NULL), 0);
        pressure_client_unref(c);
        char want_b[64];
        snprintf(want_b, sizeof(want_b), "\"pid\":%d,", (int) b);
        const char *sb = reply ? strstr(reply, want_b) : NULL;
        CU_ASSERT_PTR_NOT_NULL(sb);
        if (sb)
                CU_ASSERT_PTR_NOT_NULL(strstr(sb, "\"calls\":0,"));
        free(reply);

        kill(a, SIGKILL);
        kill(b, SIGKILL);
        waitpid(a, NULL, 0);
        waitpid(b, NULL, 0);
        test_cleanup_forget_pid(a);
        test_cleanup_forget_pid(b);
        close(in[0]);
        close(out[0]);
        rmdir(other);
        pressure_gen_destroy(&g);
}

/* ---- with pressure_lru: objects whose memory is on node 1 are freed when node 1 is tight ---- */

struct item {
        struct pressure_lru_node lru;
        int node;
};

static unsigned long freed_on[2];

static void free_item(struct pressure_lru_node *n, void *userdata) {
        struct item *it = (struct item *) n;
        (void) userdata;
        __atomic_add_fetch(&freed_on[it->node], 1, __ATOMIC_RELAXED);
        numa_free(it, 4096);
}

/* The system's level, now. */
static enum pressure_level system_level(struct pressure_client *c) {
        struct pressure_status *st = NULL;
        enum pressure_level l = PRESSURE_LEVEL_CRITICAL;
        if (pressure_client_get_status(c, &st) >= 0)
                l = pressure_scope_get_level(pressure_status_get_system(st));
        pressure_status_unref(st);
        return l;
}

static void test_lru_frees_node1_objects(void) {
        struct pressure_client *c;
        struct pressure_lru *lru;
        struct pressure_shrinker *sh;
        enum { PER_NODE = 500 };

        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(0, &lru), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_get_n_nodes(lru), 2);
        /* Objects in memory of either node; the list finds their node from their address. */
        for (int nid = 0; nid < 2; nid++)
                for (int i = 0; i < PER_NODE; i++) {
                        struct item *it = numa_alloc_onnode(4096, nid);
                        CU_ASSERT_PTR_NOT_NULL_FATAL(it);
                        memset(it, 0, 4096);
                        pressure_lru_node_init(&it->lru);
                        it->node = nid;
                        CU_ASSERT_EQUAL(pressure_lru_add(lru, &it->lru, -1), 1);
                }
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 0), (uint64_t) PER_NODE);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 1), (uint64_t) PER_NODE);

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        /* The earlier tests' pressure may still hold the system above ok (its hysteresis): system
         * pressure asks every node, which is right, and not what this test is about. Wait it out. */
        for (uint64_t end = test_now_ms() + 60000; system_level(c) != PRESSURE_LEVEL_OK && test_now_ms() < end;) {
                struct pollfd none = { .fd = -1 };
                poll(&none, 0, 200);
        }
        CU_ASSERT_EQUAL_FATAL(system_level(c), PRESSURE_LEVEL_OK);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_shrinker_new(lru, c, "vm-node-cache", 0, 4096, NULL, free_item, NULL, &sh), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_start_thread(c), 0);

        pid_t filler = fill_node1();
        /* The library thread frees; look at its progress (bounded). */
        uint64_t end = test_now_ms() + 60000;
        while (__atomic_load_n(&freed_on[1], __ATOMIC_RELAXED) == 0 && test_now_ms() < end) {
                struct pollfd none = { .fd = -1 };
                poll(&none, 0, 100);
        }
        kill(filler, SIGKILL);
        waitpid(filler, NULL, 0);
        test_cleanup_forget_pid(filler);
        CU_ASSERT(__atomic_load_n(&freed_on[1], __ATOMIC_RELAXED) > 0);
        CU_ASSERT_EQUAL(__atomic_load_n(&freed_on[0], __ATOMIC_RELAXED), 0ul);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 0), (uint64_t) PER_NODE);

        pressure_shrinker_free(sh);
        pressure_client_unref(c);
        pressure_lru_free(lru); /* the objects still on it are left to the process's end */
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "GetStatus lists both nodes with the guest's sizes", test_two_nodes_in_status },
                { "1 s PSI windows are accepted with CAP_SYS_RESOURCE", test_fine_windows_accepted },
                { "pure cgroup v2 pressure (memory.high) is reported and recovers", test_cgroup_v2_pressure },
                { "node 1 filled: node 1 leaves ok, node 0 stays ok", test_node1_pressure },
                { "a MEMCG_AWARE shrinker in the group is asked, one in another group is not", test_shrinkers_in_v2_group },
                { "node 1 tight: a pressure_lru frees node-1 objects only", test_lru_frees_node1_objects },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = test_need_root_psi();
        if (!skip && (numa_available() < 0 || numa_max_node() < 1))
                skip = "needs two NUMA nodes (run it through tests/vm/run)";
        if (!skip) {
                static const char *const args[] = { "--low", "some 50ms 1s", "--hold", "1s", "--sample-interval",
                                                    "250ms", "--node-interval", "250ms", NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        return 1;
                }
        }
        return test_run("vm", cases, skip);
}
