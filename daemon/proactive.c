/* SPDX-License-Identifier: MIT */
#include "proactive.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup_reclaim.h"
#include "clock.h"
#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "psi.h"
#include "regulation.h"

/* One write to memory.reclaim reclaims in the daemon's own context before it returns: a step is written
 * in chunks of this size, one per turn of the event loop at idle priority, so that clients' calls are
 * served between them. 2 MiB of clean page cache takes about a millisecond. */
#define CHUNK_BYTES (2u * 1024u * 1024u)

/* A named group, as it is followed here. */
struct reclaimed {
        char *cgroup;      /* its v2 path, the key */
        int pressure_fd;   /* memory.pressure, read with pread */
        uint64_t ino;      /* its directory: a group removed and made again is followed afresh */
        uid_t owner;       /* its delegation's owner (cgroup_glob()), 0 for root's: its log lines and places */
        struct regulation reg; /* its stall's rate (regulation_measure) */
        struct probe probe;
        uint64_t seen_tick;
        uint64_t pending;  /* bytes of this interval's step still to write */
        bool over;         /* the last reading was over the budget (for the log's transitions) */
        bool warned;       /* an unexpected error was logged */
        uint64_t reclaimed;
        /* The kernel's value of its page cache (regulation.h): the refaults and the reclaimed bytes seen
         * at the last look, and their decayed sums since. */
        struct refault_value value;
        uint64_t refaulted_seen, reclaimed_seen;
        bool value_started;
};

struct proactive {
        sd_event *event;
        const struct config *config;
        const struct cgroup_layout *layout;
        sd_event_source *timer, *writer;
        struct hashmap *by_path;
        struct hashmap *per_owner; /* owner -> groups followed (root's not counted) */
        struct reclaimed **groups; /* the same, in the order found */
        size_t n_groups;
        size_t cursor;             /* the writer's turn */
        uint64_t tick;
        uint64_t swap_free;        /* read once per look */
        bool told_off;             /* "cannot here" was said (until the configuration changes) */
        bool told_truncated;
        struct proactive_stats stats;
};

static void reclaimed_free(struct reclaimed *g) {
        if (!g)
                return;
        if (g->pressure_fd >= 0)
                close(g->pressure_fd);
        free(g->cgroup);
        free(g);
}

static void proactive_drop(struct proactive *p, size_t i, const char *why) {
        struct reclaimed *g = p->groups[i];
        if (why)
                log_client(g->owner, LOG_INFO, "%s: proactive reclaim ends (%s); it reclaimed %llu bytes.", g->cgroup, why,
                           (unsigned long long) g->reclaimed);
        hashmap_remove_string(p->by_path, g->cgroup);
        if (g->owner != 0)
                (void) hashmap_count_add_u64(p->per_owner, g->owner, -1);
        p->groups[i] = p->groups[--p->n_groups];
        reclaimed_free(g);
        p->stats.groups = p->n_groups;
}

static void proactive_drop_all(struct proactive *p) {
        while (p->n_groups > 0)
                proactive_drop(p, p->n_groups - 1, NULL);
}

static int group_ino(const struct proactive *p, const char *cgroup, uint64_t *ret) {
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        if (cgroup_file_path(p->layout, cgroup, "", &dir) < 0)
                return -ENOMEM;
        if (stat(dir, &st) < 0)
                return -errno;
        *ret = (uint64_t) st.st_ino;
        return 0;
}

static int reclaimed_new(struct proactive *p, const char *cgroup, uint64_t ino, uid_t owner) {
        _cleanup_free_ char *path = NULL;
        struct reclaimed *g = calloc(1, sizeof(*g));
        if (!g || !(g->cgroup = strdup(cgroup)) || cgroup_file_path(p->layout, cgroup, "memory.pressure", &path) < 0) {
                reclaimed_free(g);
                return -ENOMEM;
        }
        g->ino = ino;
        g->owner = owner;
        regulation_init(&g->reg);
        probe_init(&g->probe);
        g->pressure_fd = open(path, O_RDONLY | O_CLOEXEC);
        struct reclaimed **a = g->pressure_fd >= 0 ? realloc(p->groups, (p->n_groups + 1) * sizeof(*a)) : NULL;
        int r = g->pressure_fd < 0 ? -errno : !a ? -ENOMEM : hashmap_put_string(p->by_path, g->cgroup, g);
        if (a)
                p->groups = a;
        if (r >= 0 && owner != 0 && (r = hashmap_count_add_u64(p->per_owner, owner, +1)) < 0)
                hashmap_remove_string(p->by_path, g->cgroup);
        if (r < 0) {
                reclaimed_free(g);
                return r;
        }
        g->seen_tick = p->tick;
        p->groups[p->n_groups++] = g;
        p->stats.groups = p->n_groups;
        log_client(owner, LOG_INFO, "%s: reclaimed proactively through memory.reclaim while its stall stays under %.2f ms/s.",
                   cgroup, (double) config_regulate_budget(p->config, cgroup) / 1000);
        return 0;
}

/* One group a pattern named, found again or new. */
static void proactive_see(struct proactive *p, const char *cgroup, uid_t owner) {
        uint64_t ino = 0;
        if (group_ino(p, cgroup, &ino) < 0)
                return; /* gone since the glob saw it */
        struct reclaimed *g = hashmap_get_string(p->by_path, cgroup);
        if (g && g->ino != ino) {
                for (size_t i = 0; i < p->n_groups; i++)
                        if (p->groups[i] == g) {
                                proactive_drop(p, i, "the group was made again");
                                break;
                        }
                g = NULL;
        }
        if (g) {
                g->seen_tick = p->tick;
                return;
        }
        /* Across patterns too: one owner's groups never take more than its share of the places. */
        static const struct cgroup_glob_limits lim = CGROUP_GLOB_LIMITS_DEFAULT;
        if (p->n_groups >= lim.max || (owner != 0 && hashmap_count_get_u64(p->per_owner, owner) >= lim.max_per_owner)) {
                if (!p->told_truncated)
                        log_warning("reclaim_cgroup= names more groups than are taken (%zu in all, %zu of one owner): the "
                                    "rest are left alone.", lim.max, lim.max_per_owner);
                p->told_truncated = true;
                return;
        }
        int r = reclaimed_new(p, cgroup, ino, owner);
        if (r < 0)
                log_warning_errno(r, "%s: cannot follow it for proactive reclaim: %m", cgroup);
}

/* Expand every pattern; groups no pattern names any more are dropped. */
static void proactive_find(struct proactive *p) {
        const struct config *c = p->config;
        for (size_t i = 0; i < c->n_reclaim_cgroups; i++) {
                char **found = NULL;
                uid_t *owners = NULL;
                bool truncated = false;
                int n = cgroup_glob(p->layout, c->reclaim_cgroups[i], NULL, &found, &owners, &truncated);
                if (n < 0) {
                        log_debug_errno(n, "reclaim_cgroup=%s: %m", c->reclaim_cgroups[i]);
                        continue;
                }
                for (int j = 0; j < n; j++) {
                        proactive_see(p, found[j], owners[j]);
                        free(found[j]);
                }
                free(found);
                free(owners);
                if (truncated && !p->told_truncated) {
                        log_warning("reclaim_cgroup=%s: some groups were left out of a look (at most %u in all, 64 of "
                                    "one owner, and 512 directory entries of one owner read).",
                                    c->reclaim_cgroups[i], CGROUP_GLOB_MAX);
                        p->told_truncated = true;
                }
        }
        for (size_t i = p->n_groups; i > 0; i--)
                if (p->groups[i - 1]->seen_tick != p->tick)
                        proactive_drop(p, i - 1, "it is gone, or no reclaim_cgroup= names it any more");
}

static struct regulation_params group_params(const struct proactive *p, const struct reclaimed *g) {
        return (struct regulation_params){
                .budget = config_regulate_budget(p->config, g->cgroup),
                .step_max_permille = p->config->regulate_step_max_permille,
        };
}

/* What came back of what was reclaimed since the last look (the first look only takes note). */
static unsigned group_refaults(struct reclaimed *g, const struct cgroup_reclaim_figures *f, uint64_t now) {
        if (g->value_started)
                refault_value_add(&g->value, f->refaulted_file > g->refaulted_seen ? f->refaulted_file - g->refaulted_seen : 0,
                                  g->reclaimed - g->reclaimed_seen, now);
        g->value_started = true;
        g->refaulted_seen = f->refaulted_file;
        g->reclaimed_seen = g->reclaimed;
        return refault_value_permille(&g->value);
}

static void group_tick(struct proactive *p, struct reclaimed *g, uint64_t now) {
        struct regulation_params params = group_params(p, g);
        struct cgroup_reclaim_figures f;
        struct psi_stats psi;
        uint64_t bytes;
        double rate;

        g->pending = 0; /* what the last step did not write in an interval is not carried over */
        if (params.budget == 0 || psi_read_fd(g->pressure_fd, &psi) < 0)
                return;
        bool over = regulation_measure(&g->reg, &params, psi.line[PSI_SOME].total, now, &rate);
        if (cgroup_reclaimable(p->layout, g->cgroup, p->swap_free, &f) < 0)
                return;
        unsigned back = group_refaults(g, &f, now);
        enum probe_verdict v = probe_decide(&g->probe, &params, g->reg.first, rate, f.reclaimable, &bytes);
        if (v == PROBE_STEP && back >= REFAULT_BACKOFF_PERMILLE) {
                /* What it takes comes back: working set, not cold pages. As after an EAGAIN. */
                probe_fell_short(&g->probe);
                p->stats.refault_backoffs++;
                v = PROBE_WAIT;
        } else if (v == PROBE_STEP)
                bytes = refault_scale_step(bytes, back);
        if (v != PROBE_FIRST)
                log_debug("%s: proactive reclaim: stall %.2f ms/s against %.2f, memory %llu, reclaimable %llu, "
                          "refaulted %.1f%%: %s %llu.",
                          g->cgroup, rate / 1000, (double) params.budget / 1000, (unsigned long long) f.current,
                          (unsigned long long) f.reclaimable, (double) back / 10, probe_verdict_to_string(v),
                          (unsigned long long) (v == PROBE_STEP ? bytes : 0));
        if (over != g->over && v != PROBE_FIRST)
                log_debug("%s: proactive reclaim %s (stall %.2f ms/s, budget %.2f).", g->cgroup,
                          over ? "backs off" : "resumes", rate / 1000, (double) params.budget / 1000);
        g->over = over;
        if (v != PROBE_STEP || bytes < PROBE_STEP_MIN_BYTES)
                return;
        g->pending = bytes;
        p->stats.steps++;
        (void) sd_event_source_set_enabled(p->writer, SD_EVENT_ON);
}

/* Why nothing can be done here, said once; true when it cannot. */
static bool proactive_cannot(struct proactive *p) {
        if (p->layout && p->layout->memory_v2)
                return false;
        if (!p->told_off)
                log_warning("reclaim_cgroup= is set, but proactive reclaim needs the memory controller on cgroup v2 "
                            "(memory.reclaim), and it is %s here: the named groups are left alone.",
                            !p->layout ? "without a cgroup v2 hierarchy" : p->layout->memory_root ? "on cgroup v1" : "not mounted");
        p->told_off = true;
        return true;
}

static void proactive_arm(struct proactive *p) {
        if (p->config->n_reclaim_cgroups == 0 || proactive_cannot(p)) {
                (void) sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(p->timer, event_now(p->event) + p->config->regulate_interval_usec);
        (void) sd_event_source_set_enabled(p->timer, SD_EVENT_ONESHOT);
}

static int on_tick(sd_event_source *src, uint64_t usec, void *userdata) {
        struct proactive *p = userdata;
        (void) src;
        (void) usec;

        p->tick++;
        if (cgroup_swap_free(p->config->sysfs_root, &p->swap_free) < 0)
                p->swap_free = 0;
        proactive_find(p);
        uint64_t now = event_now(p->event);
        for (size_t i = 0; i < p->n_groups; i++)
                group_tick(p, p->groups[i], now);
        proactive_arm(p);
        return 0;
}

/* One chunk of one group's step: the write blocks while the kernel reclaims it. */
static void group_write(struct proactive *p, struct reclaimed *g) {
        uint64_t chunk = MIN(g->pending, (uint64_t) CHUNK_BYTES);
        int r = cgroup_reclaim(p->layout, g->cgroup, chunk);
        if (r >= 0) {
                g->pending -= chunk;
                g->reclaimed = sat_add(g->reclaimed, chunk);
                p->stats.reclaimed_bytes = sat_add(p->stats.reclaimed_bytes, chunk);
                return;
        }
        g->pending = 0;
        if (r == -EAGAIN) {
                /* What it could take is gone; the rest would cost refaults. */
                p->stats.short_writes++;
                probe_fell_short(&g->probe);
                log_debug("%s: proactive reclaim: the kernel could not reclaim %llu more bytes; probing less often.",
                          g->cgroup, (unsigned long long) chunk);
        } else if (r == -EOPNOTSUPP) {
                if (!p->told_off)
                        log_warning("%s: no memory.reclaim: it needs Linux 5.19 or later, and the memory controller "
                                    "enabled for the group (its parent's cgroup.subtree_control). Proactive reclaim "
                                    "does nothing.", g->cgroup);
                p->told_off = true;
        } else if (r != -ENOENT && !g->warned) {
                log_warning_errno(r, "%s: writing memory.reclaim failed: %m", g->cgroup);
                g->warned = true;
        }
}

static int on_write(sd_event_source *src, void *userdata) {
        struct proactive *p = userdata;
        (void) src;

        for (size_t n = 0; n < p->n_groups; n++) {
                struct reclaimed *g = p->groups[(p->cursor + n) % p->n_groups];
                if (g->pending == 0)
                        continue;
                p->cursor = (p->cursor + n + 1) % p->n_groups;
                group_write(p, g);
                return 0;
        }
        (void) sd_event_source_set_enabled(p->writer, SD_EVENT_OFF);
        return 0;
}

int proactive_new(sd_event *event, const struct config *config, const struct cgroup_layout *layout,
                  struct proactive **ret) {
        assert(event && config && ret);

        struct proactive *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct proactive){ .event = event, .config = config, .layout = layout };
        int r = hashmap_new(HASHMAP_KEY_STRING, &p->by_path);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &p->per_owner);
        if (r >= 0)
                r = sd_event_add_time(event, &p->timer, CLOCK_MONOTONIC, 0, 10000, on_tick, p);
        if (r >= 0)
                r = sd_event_add_defer(event, &p->writer, on_write, p);
        if (r >= 0)
                r = sd_event_source_set_priority(p->writer, SD_EVENT_PRIORITY_IDLE);
        if (r < 0) {
                proactive_free(p);
                return r;
        }
        (void) sd_event_source_set_description(p->timer, "proactive-reclaim");
        (void) sd_event_source_set_description(p->writer, "proactive-reclaim-write");
        (void) sd_event_source_set_enabled(p->writer, SD_EVENT_OFF);
        proactive_arm(p);
        *ret = p;
        return 0;
}

struct proactive *proactive_free(struct proactive *p) {
        if (!p)
                return NULL;
        proactive_drop_all(p);
        free(p->groups);
        hashmap_free(p->by_path);
        hashmap_free(p->per_owner);
        sd_event_source_disable_unref(p->timer);
        sd_event_source_disable_unref(p->writer);
        free(p);
        return NULL;
}

void proactive_reconfigure(struct proactive *p) {
        assert(p);

        p->told_off = p->told_truncated = false;
        if (p->config->n_reclaim_cgroups == 0 && p->n_groups > 0) {
                log_info("No reclaim_cgroup= any more: proactive reclaim ends.");
                proactive_drop_all(p);
        }
        proactive_arm(p);
}

void proactive_get_stats(const struct proactive *p, struct proactive_stats *ret) {
        assert(p && ret);
        *ret = p->stats;
}
