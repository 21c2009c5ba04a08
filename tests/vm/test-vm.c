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
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "pressure.h"
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

        /* Keep node 1's free memory between its low and high watermarks. kswapd cannot reclaim anonymous
         * memory here (no swap) but does reclaim the node's page cache, so the filler tops up for as long
         * as it runs. Sized from the node's own figures; never past them (bound memory does not spill, it
         * gets OOM-killed). */
        struct pressure_status *st;
        CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
        char *json = strdup(pressure_scope_to_json(pressure_status_get_node(st, 1)));
        pressure_status_unref(st);
        const char *h = strstr(json, "\"watermark_high\":"), *lo = strstr(json, "\"watermark_low\":");
        uint64_t high = h ? strtoull(h + 17, NULL, 10) : 0, low = lo ? strtoull(lo + 16, NULL, 10) : 0;
        free(json);
        CU_ASSERT_FATAL(high > low && low > 0);
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
        CU_ASSERT_EQUAL(wait_for(c, &seen.left_ok, 60000), 0);

        /* Node 0 is still fine. */
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

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "GetStatus lists both nodes with the guest's sizes", test_two_nodes_in_status },
                { "1 s PSI windows are accepted with CAP_SYS_RESOURCE", test_fine_windows_accepted },
                { "pure cgroup v2 pressure (memory.high) is reported and recovers", test_cgroup_v2_pressure },
                { "node 1 filled: node 1 leaves ok, node 0 stays ok", test_node1_pressure },
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
