/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-NUMA-node memory figures. The kernel has no per-node PSI, so a node's state is read from
 * <root>/sys/devices/system/node/nodeN/{meminfo,vmstat} and the zones' free pages and watermarks in
 * <root>/proc/zoneinfo. `root` is "" (or "/") for the running system and a fixture tree in tests. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "level.h"

struct node_sample {
        int id;
        uint64_t mem_total_kb, mem_free_kb; /* nodeN/meminfo */
        /* /proc/zoneinfo, summed over the node's zones, in pages */
        uint64_t free_pages, min_pages, low_pages, high_pages, managed_pages;
        /* nodeN/vmstat; counters the kernel does not have stay 0 */
        uint64_t nr_free_pages, numa_foreign, numa_miss, refault_anon, refault_file;
        bool valid;
};

struct node_monitor {
        char *root;
        long page_size;
        size_t n_nodes;
        struct node_sample *cur, *prev;
        uint64_t sampled_usec, prev_usec;
};

/* Pure parsers, tested on fixtures. */
int node_parse_list(const char *text, int **ret_ids, size_t *ret_n);  /* "0-1,3" */
int node_parse_meminfo(const char *text, int node, struct node_sample *s);
int node_parse_vmstat(const char *text, struct node_sample *s);
int node_parse_zoneinfo(const char *text, struct node_sample *nodes, size_t n_nodes);

/* Which nodes have memory: libnuma for the running system, sysfs under a fixture root. */
int node_monitor_enumerate(const char *root, int **ret_ids, size_t *ret_n);

int node_monitor_new(const char *root, struct node_monitor **ret);
struct node_monitor *node_monitor_free(struct node_monitor *m);

/* Read every node now. Keeps the previous sample for deltas. */
int node_monitor_sample(struct node_monitor *m, uint64_t now_usec);

/* Figures for level_from_node(): watermarks and free pages, and numa_foreign growth since the previous
 * sample. */
void node_monitor_figures(const struct node_monitor *m, size_t i, struct node_figures *ret);
