/* SPDX-License-Identifier: MIT */
/* Fuzz target: every text the daemon parses that does not come from a client's message: the kernel's
 * files (PSI lines, node lists, a node's meminfo and vmstat, /proc/zoneinfo, a cgroup's memory.stat) and
 * the configuration file with its durations and thresholds, and cgroup paths from clients. The first
 * byte picks the parser, the rest is its text. Nothing may crash, leak or read out of bounds, whatever
 * the text. Replayed over its corpus as a unit test; built for libFuzzer with -Dfuzzer=true. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "cgroup_reclaim.h"
#include "config.h"
#include "node_monitor.h"
#include "kmsg.h"
#include "pidref.h"
#include "psi.h"
#include "shortage.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
        TEXT_PSI,
        TEXT_NODE_LIST,
        TEXT_MEMINFO,
        TEXT_VMSTAT,
        TEXT_ZONEINFO,
        TEXT_MEMORY_STAT,
        TEXT_CONFIG,
        TEXT_DURATION,
        TEXT_THRESHOLD,
        TEXT_CGROUP_PATH,
        TEXT_MEMORY_EVENTS, /* memory.events, memory.oom_control */
        TEXT_FIELD,         /* a key of memory.stat or /proc/meminfo, for headroom */
        TEXT_GLOBAL_RECLAIM, /* /proc/vmstat, its global reclaim counters (shortage.h) */
        TEXT_PROC_STAT,     /* /proc/PID/stat, its start time (pidref.h) */
        TEXT_UTF8,          /* a cgroup directory's name, however the kernel has it */
        TEXT_KMSG,          /* a /dev/kmsg record, the kernel's oom-kill line (kmsg.h) */
        _TEXT_MAX,
};

static void parse(unsigned which, const char *text) {
        switch (which) {
        case TEXT_PSI: {
                struct psi_stats st;
                (void) psi_parse(text, &st);
                break;
        }
        case TEXT_NODE_LIST: {
                int *ids = NULL;
                size_t n = 0;
                if (node_parse_list(text, &ids, &n) >= 0)
                        free(ids);
                break;
        }
        case TEXT_MEMINFO: {
                struct node_sample s = {};
                (void) node_parse_meminfo(text, 1, &s);
                break;
        }
        case TEXT_VMSTAT: {
                struct node_sample s = {};
                (void) node_parse_vmstat(text, &s);
                break;
        }
        case TEXT_ZONEINFO: {
                struct node_sample nodes[2] = { { .id = 0 }, { .id = 1 } };
                (void) node_parse_zoneinfo(text, nodes, 2);
                break;
        }
        case TEXT_MEMORY_STAT: {
                uint64_t bytes;
                (void) cgroup_parse_anon(text, true, &bytes);
                (void) cgroup_parse_anon(text, false, &bytes);
                (void) cgroup_parse_reclaimable(text, 0, &bytes);
                (void) cgroup_parse_reclaimable(text, UINT64_MAX, &bytes);
                break;
        }
        case TEXT_CONFIG: {
                struct config c;
                char *error = NULL;
                config_init(&c);
                if (config_parse(&c, text, "fuzz.conf", NULL, NULL, &error) >= 0)
                        (void) config_verify(&c, &error);
                free(error);
                config_done(&c);
                break;
        }
        case TEXT_DURATION: {
                uint64_t usec;
                (void) config_parse_duration(text, &usec);
                break;
        }
        case TEXT_THRESHOLD: {
                struct psi_trigger t;
                if (config_parse_threshold(text, &t) >= 0) {
                        char buf[64];
                        (void) psi_trigger_format(&t, buf, sizeof(buf));
                }
                break;
        }
        case TEXT_CGROUP_PATH: {
                char *p = NULL;
                if (cgroup_path_normalize(text, &p) >= 0)
                        free(p);
                break;
        }
        case TEXT_MEMORY_EVENTS: {
                struct cgroup_memory_events e;
                (void) cgroup_parse_memory_events(text, &e);
                break;
        }
        case TEXT_FIELD: {
                uint64_t v;
                (void) headroom_parse_field(text, "MemAvailable", &v);
                (void) headroom_parse_field(text, "inactive_file", &v);
                break;
        }
        case TEXT_GLOBAL_RECLAIM: {
                uint64_t v;
                (void) shortage_parse_vmstat(text, &v);
                break;
        }
        case TEXT_PROC_STAT: {
                uint64_t v;
                (void) pidref_parse_stat(text, &v);
                uid_t u[4];
                (void) proc_status_parse_uids(text, u);
                break;
        }
        case TEXT_KMSG: {
                struct oom_kill_record r;
                if (kmsg_parse_oom_kill(text, strlen(text), &r) >= 0 &&
                    (strnlen(r.task, sizeof(r.task)) == sizeof(r.task) || !kmsg_memcg_in(r.task_memcg, r.task_memcg)))
                        abort();
                break;
        }
        case TEXT_UTF8: {
                char *e = utf8_escape_invalid(text);
                if (e && !utf8_is_valid(e))
                        abort();
                free(e);
                break;
        }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 65536)
                return 0;
        char *text = malloc(size);
        if (!text)
                return 0;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = 0; /* the parsers take C strings, as read from a file */
        parse(data[0] % _TEXT_MAX, text);
        free(text);
        return 0;
}
