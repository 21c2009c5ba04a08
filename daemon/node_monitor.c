/* SPDX-License-Identifier: MIT */
#include "node_monitor.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

static int read_file(const char *root, const char *path, char **ret) {
        _cleanup_free_ char *full = NULL;
        if (asprintf(&full, "%s%s", root, path) < 0)
                return -ENOMEM;

        _cleanup_fclose_ FILE *f = fopen(full, "re");
        if (!f)
                return -errno;

        size_t alloc = 16384, len = 0;
        _cleanup_free_ char *buf = malloc(alloc);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                size_t n = fread(buf + len, 1, alloc - len - 1, f);
                len += n;
                if (n == 0)
                        break;
                if (alloc - len - 1 == 0) {
                        char *p = realloc(buf, alloc * 2);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        alloc *= 2;
                }
        }
        if (ferror(f))
                return -EIO;
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        return 0;
}

int node_parse_list(const char *text, int **ret_ids, size_t *ret_n) {
        assert(ret_n);

        _cleanup_free_ int *ids = NULL;
        size_t n = 0;
        const char *p = text;

        while (*p && *p != '\n') {
                char *end;
                errno = 0;
                long a = strtol(p, &end, 10), b;
                if (errno || end == p || a < 0 || a > 4095)
                        return -EINVAL;
                p = end;
                b = a;
                if (*p == '-') {
                        p++;
                        b = strtol(p, &end, 10);
                        if (errno || end == p || b < a || b > 4095)
                                return -EINVAL;
                        p = end;
                }
                for (long i = a; i <= b; i++) {
                        int *q = realloc(ids, (n + 1) * sizeof(int));
                        if (!q)
                                return -ENOMEM;
                        ids = q;
                        ids[n++] = (int) i;
                }
                if (*p == ',')
                        p++;
                else if (*p && *p != '\n')
                        return -EINVAL;
        }
        *ret_ids = TAKE_PTR(ids);
        *ret_n = n;
        return 0;
}

int node_parse_meminfo(const char *text, int node, struct node_sample *s) {
        assert(s);

        bool have_total = false, have_free = false;
        const char *line = text;

        while (line && *line) {
                int id;
                char key[64];
                unsigned long long v;
                if (sscanf(line, "Node %d %63[^:]: %llu", &id, key, &v) == 3 && id == node) {
                        if (streq(key, "MemTotal")) {
                                s->mem_total_kb = v;
                                have_total = true;
                        } else if (streq(key, "MemFree")) {
                                s->mem_free_kb = v;
                                have_free = true;
                        }
                }
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        return have_total && have_free ? 0 : -EINVAL;
}

int node_parse_vmstat(const char *text, struct node_sample *s) {
        assert(s);

        static const struct {
                const char *name;
                size_t offset;
        } fields[] = {
                { "nr_free_pages", offsetof(struct node_sample, nr_free_pages) },
                { "numa_foreign", offsetof(struct node_sample, numa_foreign) },
                { "numa_miss", offsetof(struct node_sample, numa_miss) },
                { "workingset_refault_anon", offsetof(struct node_sample, refault_anon) },
                { "workingset_refault_file", offsetof(struct node_sample, refault_file) },
        };
        const char *line = text;
        unsigned seen = 0;

        while (line && *line) {
                char name[64];
                unsigned long long v;
                if (sscanf(line, "%63s %llu", name, &v) == 2) {
                        seen++;
                        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                                if (streq(name, fields[i].name))
                                        *(uint64_t *) ((char *) s + fields[i].offset) = v;
                }
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        return seen > 0 ? 0 : -EINVAL;
}

static struct node_sample *find_node(struct node_sample *nodes, size_t n, int id) {
        for (size_t i = 0; i < n; i++)
                if (nodes[i].id == id)
                        return &nodes[i];
        return NULL;
}

int node_parse_zoneinfo(const char *text, struct node_sample *nodes, size_t n_nodes) {
        assert(nodes);

        struct node_sample *cur = NULL;
        bool any = false;
        const char *line = text;

        for (size_t i = 0; i < n_nodes; i++)
                nodes[i].free_pages = nodes[i].min_pages = nodes[i].low_pages = nodes[i].high_pages =
                        nodes[i].managed_pages = 0;

        while (line && *line) {
                int id;
                char key[32];
                unsigned long long v;

                if (sscanf(line, "Node %d, zone %31s", &id, key) == 2) {
                        cur = find_node(nodes, n_nodes, id);
                        any = true;
                } else if (cur && sscanf(line, " pages free %llu", &v) == 1) {
                        cur->free_pages += v;
                } else if (cur && sscanf(line, " %31s %llu", key, &v) == 2) {
                        /* Only the watermark lines of a zone have exactly these names. */
                        if (streq(key, "min"))
                                cur->min_pages += v;
                        else if (streq(key, "low"))
                                cur->low_pages += v;
                        else if (streq(key, "high"))
                                cur->high_pages += v;
                        else if (streq(key, "managed"))
                                cur->managed_pages += v;
                }
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        return any ? 0 : -EINVAL;
}

static bool root_is_live(const char *root) {
        return !root || !*root || streq(root, "/");
}

/* The nodes this process may allocate on, from the kernel's own word for it. Not from libnuma: its
 * constructor probes set_mempolicy(), which the service's system call filter (@resources) refuses. */
static int mems_allowed(int **ret_ids, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        int k = read_file("", "/proc/self/status", &text);
        if (k < 0)
                return k;
        const char *line = strstr(text, "\nMems_allowed_list:");
        if (!line)
                return -ENODATA;
        line += strlen("\nMems_allowed_list:");
        line += strspn(line, " \t");
        _cleanup_free_ char *list = strndup(line, strcspn(line, "\n"));
        if (!list)
                return -ENOMEM;
        return node_parse_list(list, ret_ids, ret_n);
}

int node_monitor_enumerate(const char *root, int **ret_ids, size_t *ret_n) {
        assert(ret_n);

        if (root_is_live(root)) {
                _cleanup_free_ int *ids = NULL;
                size_t n = 0;
                if (mems_allowed(&ids, &n) >= 0 && n > 0) {
                        *ret_ids = TAKE_PTR(ids);
                        *ret_n = n;
                        return 0;
                }
        }

        const char *r = root_is_live(root) ? "" : root;
        _cleanup_free_ char *text = NULL;
        int k = read_file(r, "/sys/devices/system/node/has_memory", &text);
        if (k == -ENOENT)
                k = read_file(r, "/sys/devices/system/node/online", &text);
        if (k < 0)
                return k;
        return node_parse_list(text, ret_ids, ret_n);
}

int node_monitor_new(const char *root, struct node_monitor **ret) {
        _cleanup_free_ int *ids = NULL;
        size_t n = 0;

        const char *r = root_is_live(root) ? "" : root;
        int k = node_monitor_enumerate(r, &ids, &n);
        if (k < 0)
                return k;
        if (n == 0)
                return -ENODEV;

        struct node_monitor *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->root = strdup(r);
        m->cur = calloc(n, sizeof(struct node_sample));
        m->prev = calloc(n, sizeof(struct node_sample));
        if (!m->root || !m->cur || !m->prev) {
                node_monitor_free(m);
                return -ENOMEM;
        }
        m->n_nodes = n;
        m->page_size = sysconf(_SC_PAGESIZE);
        for (size_t i = 0; i < n; i++)
                m->cur[i].id = m->prev[i].id = ids[i];
        *ret = m;
        return 0;
}

struct node_monitor *node_monitor_free(struct node_monitor *m) {
        if (!m)
                return NULL;
        free(m->root);
        free(m->cur);
        free(m->prev);
        free(m);
        return NULL;
}

int node_monitor_sample(struct node_monitor *m, uint64_t now_usec) {
        assert(m);

        _cleanup_free_ char *zoneinfo = NULL;
        int r;

        memcpy(m->prev, m->cur, m->n_nodes * sizeof(struct node_sample));
        m->prev_usec = m->sampled_usec;

        r = read_file(m->root, "/proc/zoneinfo", &zoneinfo);
        if (r < 0)
                return r;
        r = node_parse_zoneinfo(zoneinfo, m->cur, m->n_nodes);
        if (r < 0)
                return r;

        for (size_t i = 0; i < m->n_nodes; i++) {
                struct node_sample *s = &m->cur[i];
                char path[128];
                _cleanup_free_ char *meminfo = NULL, *vmstat = NULL;

                snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", s->id);
                r = read_file(m->root, path, &meminfo);
                if (r >= 0)
                        r = node_parse_meminfo(meminfo, s->id, s);
                if (r < 0)
                        return r;

                snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/vmstat", s->id);
                /* Old kernels have no per-node vmstat: the counters then stay 0. */
                if (read_file(m->root, path, &vmstat) >= 0)
                        (void) node_parse_vmstat(vmstat, s);
                s->valid = true;
        }
        m->sampled_usec = now_usec;
        return 0;
}

void node_monitor_figures(const struct node_monitor *m, size_t i, struct node_figures *ret) {
        assert(m);
        assert(ret);

        const struct node_sample *c = &m->cur[i], *p = &m->prev[i];
        *ret = (struct node_figures){
                .free_pages = c->free_pages,
                .min_pages = c->min_pages,
                .low_pages = c->low_pages,
                .high_pages = c->high_pages,
                .foreign_delta = p->valid && c->numa_foreign > p->numa_foreign ? c->numa_foreign - p->numa_foreign : 0,
        };
}
