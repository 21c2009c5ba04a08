/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node_monitor.h"
#include "test-util.h"

static void test_parse_list(void) {
        int *ids = NULL;
        size_t n = 0;
        CU_ASSERT_EQUAL(node_parse_list("0\n", &ids, &n), 0);
        CU_ASSERT_EQUAL(n, 1u);
        CU_ASSERT_EQUAL(ids[0], 0);
        free(ids);
        CU_ASSERT_EQUAL(node_parse_list("0-1,3,5-6\n", &ids, &n), 0);
        CU_ASSERT_EQUAL(n, 5u);
        CU_ASSERT_EQUAL(ids[2], 3);
        CU_ASSERT_EQUAL(ids[4], 6);
        free(ids);
        CU_ASSERT_EQUAL(node_parse_list("\n", &ids, &n), 0);
        CU_ASSERT_EQUAL(n, 0u);
        free(ids);
        CU_ASSERT_EQUAL(node_parse_list("1-0", &ids, &n), -EINVAL);
        CU_ASSERT_EQUAL(node_parse_list("a", &ids, &n), -EINVAL);
        CU_ASSERT_EQUAL(node_parse_list("0,,1", &ids, &n), -EINVAL);
}

static void test_parse_meminfo(void) {
        struct node_sample s = {};
        const char *text = "Node 1 MemTotal:        4060000 kB\nNode 1 MemFree:           12000 kB\n"
                           "Node 1 MemUsed:        4048000 kB\n";
        CU_ASSERT_EQUAL(node_parse_meminfo(text, 1, &s), 0);
        CU_ASSERT_EQUAL(s.mem_total_kb, 4060000u);
        CU_ASSERT_EQUAL(s.mem_free_kb, 12000u);
        /* Lines of another node do not count. */
        CU_ASSERT_EQUAL(node_parse_meminfo(text, 0, &s), -EINVAL);
        CU_ASSERT_EQUAL(node_parse_meminfo("garbage\n", 0, &s), -EINVAL);
}

static void test_parse_vmstat_by_name(void) {
        struct node_sample s = {};
        /* Order and the set of counters differ between kernels: only names matter. */
        CU_ASSERT_EQUAL(node_parse_vmstat("workingset_refault_file 10\nsomething_new 5\nnuma_foreign 3\n"
                                          "nr_free_pages 99\n",
                                          &s),
                        0);
        CU_ASSERT_EQUAL(s.refault_file, 10u);
        CU_ASSERT_EQUAL(s.numa_foreign, 3u);
        CU_ASSERT_EQUAL(s.nr_free_pages, 99u);
        CU_ASSERT_EQUAL(s.refault_anon, 0u); /* absent on this "kernel" */
        CU_ASSERT_EQUAL(node_parse_vmstat("", &s), -EINVAL);
}

static void test_two_node_fixture(void) {
        struct node_monitor *m;
        const char *root = test_fixture("sysfs-2node");

        CU_ASSERT_EQUAL_FATAL(node_monitor_new(root, &m), 0);
        CU_ASSERT_EQUAL(m->n_nodes, 2u);
        CU_ASSERT_EQUAL(node_monitor_sample(m, 1000), 0);

        const struct node_sample *n0 = &m->cur[0], *n1 = &m->cur[1];
        CU_ASSERT_EQUAL(n0->id, 0);
        CU_ASSERT_EQUAL(n1->id, 1);
        CU_ASSERT_EQUAL(n1->mem_total_kb, 4060000u);
        CU_ASSERT_EQUAL(n1->mem_free_kb, 12000u);
        /* Node 1: one Normal zone (and an empty Movable one). */
        CU_ASSERT_EQUAL(n1->free_pages, 3000u);
        CU_ASSERT_EQUAL(n1->min_pages, 2000u);
        CU_ASSERT_EQUAL(n1->low_pages, 2500u);
        CU_ASSERT_EQUAL(n1->high_pages, 3000u);
        CU_ASSERT_EQUAL(n1->numa_foreign, 777u);
        CU_ASSERT_EQUAL(n1->refault_file, 4242u);
        /* Node 0: DMA + DMA32 + Normal + Movable as recorded on a 6.18 kernel. */
        CU_ASSERT_EQUAL(n0->free_pages, 3840u + 772818u + 227432u);
        CU_ASSERT_EQUAL(n0->min_pages, 62u + 12569u + 4263u + 32u);
        CU_ASSERT_EQUAL(n0->high_pages, 92u + 18853u + 6393u + 32u);

        struct level_node_thresholds t;
        struct node_figures f;
        level_node_thresholds_default(&t);
        node_monitor_figures(m, 0, &f);
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_OK);
        node_monitor_figures(m, 1, &f);
        CU_ASSERT_EQUAL(f.foreign_delta, 0u); /* no previous sample yet */
        CU_ASSERT_EQUAL(level_from_node(&f, &t), LEVEL_LOW);

        node_monitor_free(m);
}

static void test_one_node_recorded(void) {
        struct node_monitor *m;
        CU_ASSERT_EQUAL_FATAL(node_monitor_new(test_fixture("sysfs-1node"), &m), 0);
        CU_ASSERT_EQUAL(m->n_nodes, 1u);
        CU_ASSERT_EQUAL(node_monitor_sample(m, 1), 0);
        CU_ASSERT(m->cur[0].mem_total_kb > 0);
        CU_ASSERT(m->cur[0].high_pages > m->cur[0].low_pages);
        CU_ASSERT(m->cur[0].low_pages > m->cur[0].min_pages);
        node_monitor_free(m);
}

static void test_missing_tree(void) {
        struct node_monitor *m;
        CU_ASSERT(node_monitor_new("/nonexistent-root", &m) < 0);
}

/* The running system: the nodes this process may use (Mems_allowed_list) and sysfs agree, and the
 * figures are sane. */
static void test_live(void) {
        struct node_monitor *m;
        int *ids = NULL;
        size_t n = 0;

        CU_ASSERT_EQUAL_FATAL(node_monitor_new("", &m), 0);
        CU_ASSERT(m->n_nodes >= 1);
        CU_ASSERT_EQUAL(node_monitor_sample(m, 1), 0);
        for (size_t i = 0; i < m->n_nodes; i++) {
                CU_ASSERT(m->cur[i].mem_total_kb >= m->cur[i].mem_free_kb);
                CU_ASSERT(m->cur[i].high_pages > 0);
        }

        /* sysfs enumeration through a root of "/" read the long way must name the same nodes. */
        FILE *f = fopen("/sys/devices/system/node/has_memory", "re");
        if (f) {
                char buf[256] = "";
                if (fgets(buf, sizeof(buf), f))
                        CU_ASSERT_EQUAL(node_parse_list(buf, &ids, &n), 0);
                fclose(f);
                CU_ASSERT_EQUAL(n, m->n_nodes);
                for (size_t i = 0; i < n && i < m->n_nodes; i++)
                        CU_ASSERT_EQUAL(ids[i], m->cur[i].id);
                free(ids);
        }
        node_monitor_free(m);
}

int main(void) {
        static const struct test_case cases[] = {
                { "node list", test_parse_list },
                { "meminfo", test_parse_meminfo },
                { "vmstat counters by name", test_parse_vmstat_by_name },
                { "two-node fixture", test_two_node_fixture },
                { "one-node recorded tree", test_one_node_recorded },
                { "missing tree", test_missing_tree },
                { "live system", test_live },
                {},
        };
        return test_run("node-monitor", cases, NULL);
}
