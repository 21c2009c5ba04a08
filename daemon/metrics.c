/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "proactive.h"
#include "utf8.h"

#define METRICS_FILE "pressured.prom"

struct metrics {
        sd_event *event;
        const struct config *config;
        struct metrics_sources src;
        int slot; /* on each scope: its count of level changes (a uint64_t, allocated) */
        sd_event_source *timer;
        bool due;           /* something changed since the last write */
        uint64_t last_usec; /* of the last write */
        char *path;         /* the directory, for the log; NULL: off */
        int dir_fd;         /* the directory as it was opened: writes never follow a symlink put there later */
        struct ratelimit log_limit;
};

void metrics_write_label(FILE *f, const char *value) {
        assert(f);

        for (const char *p = value ? value : ""; *p; p++) {
                size_t n = utf8_sequence_length(p);
                if (n == 0) { /* a kernel-made name: node_exporter drops the whole file for one bad byte */
                        fputs("\xef\xbf\xbd", f);
                        continue;
                }
                if (n > 1) {
                        fwrite(p, 1, n, f);
                        p += n - 1;
                        continue;
                }
                if (*p == '\\' || *p == '"')
                        fputc('\\', f);
                if (*p == '\n') {
                        fputs("\\n", f);
                        continue;
                }
                fputc(*p, f);
        }
}

static void header(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_regulated(struct metrics *m, FILE *f);

static void scope_label(FILE *f, const char *name, const struct scope *s) {
        fprintf(f, "%s{scope=\"", name);
        metrics_write_label(f, scope_name(s));
        fputs("\"}", f);
}

SCOPE_SLOT_ACCESSORS(changes_slot, uint64_t);

static uint64_t *changes_of(struct metrics *m, struct scope *s) {
        return changes_slot_get(s, m->slot);
}

static void render_scopes(struct metrics *m, FILE *f) {
        header(f, "pressured_level", "gauge", "Memory pressure level of a scope: 0 ok, 1 low, 2 medium, 3 critical.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes)
                if (!scope_is_gone(s)) {
                        scope_label(f, "pressured_level", s);
                        fprintf(f, " %d\n", (int) scope_level(s));
                }
        header(f, "pressured_reclaim_target_bytes", "gauge",
               "Estimated bytes to free to bring the scope back under its threshold; 0 at ok.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes)
                if (!scope_is_gone(s)) {
                        scope_label(f, "pressured_reclaim_target_bytes", s);
                        fprintf(f, " %" PRIu64 "\n", scope_reclaim_target(s));
                }
        header(f, "pressured_level_changes_total", "counter", "Level changes of the scope since the daemon started watching it.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes) {
                uint64_t *n = changes_of(m, s);
                if (!scope_is_gone(s)) {
                        scope_label(f, "pressured_level_changes_total", s);
                        fprintf(f, " %" PRIu64 "\n", n ? *n : 0);
                }
        }
        header(f, "pressured_headroom_ratio", "gauge",
               "Room left under the nearest memory limit, as a share of it: what reclaim cannot free (usage minus "
               "file pages) subtracted.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes) {
                struct scope_snapshot snap;
                scope_snapshot(s, &snap);
                if (scope_is_gone(s) || !snap.have_headroom || snap.headroom_limit == 0)
                        continue;
                scope_label(f, "pressured_headroom_ratio", s);
                double used = (double) snap.headroom_unreclaimable / (double) snap.headroom_limit;
                fprintf(f, " %.4f\n", used < 1 ? 1 - used : 0);
        }
        header(f, "pressured_cgroup_memory_events_total", "counter",
               "The kernel's count of memory events in a watched cgroup: max (usage reached memory.max), oom_kill.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes) {
                uint64_t counts[_MEMORY_EVENT_MAX];
                for (int k = 0; !scope_is_gone(s) && scope_event_counts(s, counts) && k < _MEMORY_EVENT_MAX; k++) {
                        fputs("pressured_cgroup_memory_events_total{scope=\"", f);
                        metrics_write_label(f, scope_name(s));
                        fprintf(f, "\",kind=\"%s\"} %" PRIu64 "\n", memory_event_to_string(k), counts[k]);
                }
        }
}

static void render_nodes(struct metrics *m, FILE *f) {
        const struct node_monitor *nm = m->src.nodes;
        if (!nm || nm->n_nodes == 0)
                return;
        uint64_t page = (uint64_t) nm->page_size;
        header(f, "pressured_node_memory_bytes", "gauge", "Total and free memory of a NUMA node.");
        for (size_t i = 0; i < nm->n_nodes; i++) {
                fprintf(f, "pressured_node_memory_bytes{node=\"%d\",kind=\"total\"} %" PRIu64 "\n", nm->cur[i].id,
                        nm->cur[i].mem_total_kb * 1024);
                fprintf(f, "pressured_node_memory_bytes{node=\"%d\",kind=\"free\"} %" PRIu64 "\n", nm->cur[i].id,
                        nm->cur[i].mem_free_kb * 1024);
        }
        header(f, "pressured_node_watermark_bytes", "gauge", "Watermarks of a NUMA node, summed over its zones.");
        for (size_t i = 0; i < nm->n_nodes; i++) {
                const struct node_sample *n = &nm->cur[i];
                fprintf(f, "pressured_node_watermark_bytes{node=\"%d\",watermark=\"min\"} %" PRIu64 "\n", n->id, n->min_pages * page);
                fprintf(f, "pressured_node_watermark_bytes{node=\"%d\",watermark=\"low\"} %" PRIu64 "\n", n->id, n->low_pages * page);
                fprintf(f, "pressured_node_watermark_bytes{node=\"%d\",watermark=\"high\"} %" PRIu64 "\n", n->id, n->high_pages * page);
        }
}

static void shrinker_labels(FILE *f, const char *name, const struct shrinker_info_snapshot *sh) {
        fprintf(f, "%s{shrinker=\"%" PRIu64 "\",name=\"", name, sh->id);
        metrics_write_label(f, sh->name);
        fprintf(f, "\",pid=\"%d\"", (int) sh->pid);
}

/* One family over every shrinker: value() picks the number. */
static void render_shrinker_family(FILE *f, const struct shrinker_info_snapshot *infos, size_t n, const char *name,
                                   const char *type, const char *help,
                                   uint64_t (*value)(const struct shrinker_info_snapshot *sh)) {
        header(f, name, type, help);
        for (size_t i = 0; i < n; i++) {
                shrinker_labels(f, name, &infos[i]);
                fprintf(f, "} %" PRIu64 "\n", value(&infos[i]));
        }
}

static uint64_t v_calls(const struct shrinker_info_snapshot *sh) { return sh->stats.calls; }
static uint64_t v_freed(const struct shrinker_info_snapshot *sh) { return sh->stats.freed; }
static uint64_t v_bytes(const struct shrinker_info_snapshot *sh) { return sh->stats.bytes_freed; }
static uint64_t v_timeouts(const struct shrinker_info_snapshot *sh) { return sh->stats.timeouts; }
static uint64_t v_quarantined(const struct shrinker_info_snapshot *sh) { return sh->quarantined; }

/* Every shrinker as ListShrinkers shows it, in registry order; *ret_n of them. */
static struct shrinker_info_snapshot *shrinker_infos(struct metrics *m, size_t *ret_n) {
        size_t n = 0, k = 0;
        for (const struct shrink_client *cl = m->src.shrinkers->clients; cl; cl = cl->next)
                n += cl->n_shrinkers;
        struct shrinker_info_snapshot *infos = calloc(MAX(n, 1u), sizeof(*infos));
        for (const struct shrink_client *cl = m->src.shrinkers->clients; infos && cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++)
                        if (reclaim_shrinker_info(m->src.reclaim, cl->shrinkers[i], &infos[k]) >= 0)
                                k++;
        *ret_n = k;
        return infos;
}

/* What each client claimed and what its memory showed (the release meter keeps it per client). */
static void render_clients(struct metrics *m, FILE *f) {
        static const char *const names[] = { "pressured_client_claimed_bytes_total", "pressured_client_released_bytes_total" };
        static const char *const helps[] = { "Bytes a client's shrinkers claimed to free in measured rounds.",
                                             "How far a client's memory fell around the measured rounds (what the kernel saw)." };
        for (size_t k = 0; k < ELEMENTSOF(names); k++) {
                header(f, names[k], "counter", helps[k]);
                for (const struct shrink_client *cl = m->src.shrinkers->clients; cl; cl = cl->next) {
                        struct shrinker_info_snapshot info = {};
                        if (cl->n_shrinkers == 0 || reclaim_shrinker_info(m->src.reclaim, cl->shrinkers[0], &info) < 0)
                                continue;
                        fprintf(f, "%s{pid=\"%d\"} %" PRIu64 "\n", names[k], (int) cl->pid,
                                k == 0 ? info.client_claimed_bytes : info.client_released_bytes);
                        free(info.nodes);
                }
        }
}

/* Proactive reclaim of the groups reclaim_cgroup= names (proactive.c). */
static void render_proactive(struct metrics *m, FILE *f) {
        struct proactive_stats ps = {};
        if (m->src.proactive)
                proactive_get_stats(m->src.proactive, &ps);
        header(f, "pressured_proactive_groups", "gauge", "Groups reclaimed proactively now (reclaim_cgroup=).");
        fprintf(f, "pressured_proactive_groups %" PRIu64 "\n", ps.groups);
        header(f, "pressured_proactive_steps_total", "counter", "Steps of proactive reclaim taken while a group's stall was under its budget.");
        fprintf(f, "pressured_proactive_steps_total %" PRIu64 "\n", ps.steps);
        header(f, "pressured_proactive_reclaimed_bytes_total", "counter", "Bytes written to memory.reclaim and reclaimed in full.");
        fprintf(f, "pressured_proactive_reclaimed_bytes_total %" PRIu64 "\n", ps.reclaimed_bytes);
        header(f, "pressured_proactive_short_writes_total", "counter", "Writes to memory.reclaim the kernel could not fill (EAGAIN).");
        fprintf(f, "pressured_proactive_short_writes_total %" PRIu64 "\n", ps.short_writes);
        header(f, "pressured_proactive_refault_backoffs_total", "counter",
               "Probes not taken because half of what proactive reclaim took lately was read back (refaults).");
        fprintf(f, "pressured_proactive_refault_backoffs_total %" PRIu64 "\n", ps.refault_backoffs);
}

static void render_shrinkers(struct metrics *m, FILE *f) {
        size_t n;
        if (!m->src.shrinkers || !m->src.reclaim)
                return;
        struct shrinker_info_snapshot *infos = shrinker_infos(m, &n);
        if (!infos)
                return;
        header(f, "pressured_shrinker_objects", "gauge", "Objects a client shrinker said it holds at its last count, per node.");
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < infos[i].n_nodes; k++) {
                        shrinker_labels(f, "pressured_shrinker_objects", &infos[i]);
                        fprintf(f, ",node_index=\"%zu\"} %" PRIu64 "\n", k, infos[i].nodes[k].objects);
                }
        render_shrinker_family(f, infos, n, "pressured_shrinker_requests_total", "counter", "Count and scan requests sent.",
                               v_calls);
        render_shrinker_family(f, infos, n, "pressured_shrinker_freed_objects_total", "counter",
                               "Objects the shrinker said it freed.", v_freed);
        render_shrinker_family(f, infos, n, "pressured_shrinker_freed_bytes_total", "counter",
                               "Bytes the shrinker claimed to free (see pressured_client_released_bytes_total).", v_bytes);
        render_shrinker_family(f, infos, n, "pressured_shrinker_timeouts_total", "counter",
                               "Requests not answered by their deadline.", v_timeouts);
        render_shrinker_family(f, infos, n, "pressured_shrinker_quarantined", "gauge", "1 while the shrinker is quarantined.",
                               v_quarantined);
        for (size_t i = 0; i < n; i++)
                free(infos[i].nodes);
        free(infos);
        render_clients(m, f);
        struct regulator_stats rs;
        reclaim_regulator_stats(m->src.reclaim, &rs);
        header(f, "pressured_regulator_steps_total", "counter",
               "Steps the regulator asked of shrinkers in scopes whose stall was over its budget, or over a growth limit.");
        fprintf(f, "pressured_regulator_steps_total %" PRIu64 "\n", rs.steps);
        header(f, "pressured_regulator_asked_bytes_total", "counter", "Bytes those steps asked for.");
        fprintf(f, "pressured_regulator_asked_bytes_total %" PRIu64 "\n", rs.asked_bytes);
        header(f, "pressured_regulator_freed_bytes_total", "counter", "Bytes the shrinkers claimed to free in those steps.");
        fprintf(f, "pressured_regulator_freed_bytes_total %" PRIu64 "\n", rs.freed_bytes);
        render_regulated(m, f);
        render_proactive(m, f);
}

/* Per scope the regulator follows: its stall rate and the growth limit it holds the shrinkers to. */
static void render_regulated(struct metrics *m, FILE *f) {
        struct regulation_snapshot r;
        header(f, "pressured_regulator_stall_rate", "gauge",
               "The scope's some stall over the regulator's last interval, in seconds per second (its budget is "
               "pressured_regulator_budget).");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes)
                if (!scope_is_gone(s) && reclaim_regulation(m->src.reclaim, s, &r) >= 0) {
                        scope_label(f, "pressured_regulator_stall_rate", s);
                        fprintf(f, " %.6f\n", (double) r.stall / 1e6);
                }
        header(f, "pressured_regulator_budget", "gauge", "The scope's stall budget, in seconds of some stall per second.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes)
                if (!scope_is_gone(s) && reclaim_regulation(m->src.reclaim, s, &r) >= 0) {
                        scope_label(f, "pressured_regulator_budget", s);
                        fprintf(f, " %.6f\n", (double) r.budget / 1e6);
                }
        header(f, "pressured_regulator_limit_bytes", "gauge",
               "What the shrinkers in the scope may hold under its budget (the growth limit); absent while none is known.");
        SCOPE_REGISTRY_FOREACH(s, m->src.scopes)
                if (!scope_is_gone(s) && reclaim_regulation(m->src.reclaim, s, &r) >= 0 && r.limit > 0) {
                        scope_label(f, "pressured_regulator_limit_bytes", s);
                        fprintf(f, " %" PRIu64 "\n", r.limit);
                }
}

int metrics_render(struct metrics *m, FILE *f) {
        assert(m);

        render_scopes(m, f);
        render_nodes(m, f);
        render_shrinkers(m, f);
        header(f, "pressured_subscriptions", "gauge", "Subscribe calls in progress.");
        fprintf(f, "pressured_subscriptions %zu\n", m->src.n_subscriptions ? m->src.n_subscriptions(m->src.userdata) : 0);
        header(f, "pressured_connections", "gauge", "Varlink connections open.");
        fprintf(f, "pressured_connections %zu\n", m->src.n_connections ? m->src.n_connections(m->src.userdata) : 0);
        fflush(f);
        return ferror(f) ? -EIO : 0;
}

/* A temporary file in the same directory, renamed over the old one: a scrape sees the old text or the
 * new, never half of one. Its name does not end in .prom, so the collector never reads it. Everything is
 * relative to the directory opened at start: whoever owns its parent (Debian: prometheus) may swap the
 * directory for a symlink, and root's writes and deletes must not follow it. */
static int metrics_write(struct metrics *m) {
        char tmp[64];
        unsigned char rnd[8];
        int fd = -EBADF;

        for (int attempt = 0; fd < 0 && attempt < 16; attempt++) {
                if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t) sizeof(rnd))
                        return -EIO;
                snprintf(tmp, sizeof(tmp), ".%s.%02x%02x%02x%02x%02x%02x%02x%02x", METRICS_FILE, rnd[0], rnd[1], rnd[2],
                         rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
                fd = openat(m->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        FILE *f = fdopen(fd, "w");
        if (!f) {
                int r = -errno;
                close(fd);
                (void) unlinkat(m->dir_fd, tmp, 0);
                return r;
        }
        int r = metrics_render(m, f);
        if (r >= 0 && fchmod(fd, 0644) < 0)
                r = -errno;
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r >= 0 && renameat(m->dir_fd, tmp, m->dir_fd, METRICS_FILE) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(m->dir_fd, tmp, 0);
        return r;
}

static void schedule(struct metrics *m) {
        uint64_t next;
        if (m->dir_fd < 0)
                return (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
        if (m->due)
                next = MAX(event_now(m->event), m->last_usec + m->config->sample_interval_usec);
        else if (m->config->node_interval_usec > 0)
                next = m->last_usec + m->config->node_interval_usec; /* the figures age; the node sample wakes then too */
        else
                return (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_time(m->timer, next);
        (void) sd_event_source_set_enabled(m->timer, SD_EVENT_ONESHOT);
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct metrics *m = userdata;
        unsigned suppressed;
        (void) src;
        (void) usec;

        int r = metrics_write(m);
        if (r < 0 && ratelimit_below(&m->log_limit, event_now(m->event), &suppressed))
                log_warning_errno(r, "Failed to write metrics to %s/%s: %m", m->path, METRICS_FILE);
        m->last_usec = event_now(m->event);
        m->due = false;
        schedule(m);
        return 0;
}

static void mark_due(struct metrics *m) {
        if (m->due)
                return;
        m->due = true;
        schedule(m);
}

static void on_level_changed(struct scope *s, void *userdata) {
        struct metrics *m = userdata;
        uint64_t *n = changes_of(m, s);
        if (!n && (n = calloc(1, sizeof(*n))))
                changes_slot_set(s, m->slot, n);
        if (n)
                (*n)++;
        mark_due(m);
}

static void on_memory_event(struct scope *s, enum memory_event e, uint64_t count, void *userdata) {
        (void) s;
        (void) e;
        (void) count;
        mark_due(userdata);
}

static void on_freed(struct scope *s, void *userdata) {
        struct metrics *m = userdata;
        free(changes_of(m, s));
        changes_slot_set(s, m->slot, NULL);
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
        .memory_event = on_memory_event,
        .freed = on_freed,
};

/* The file written last goes with its directory: no stale levels once the daemon or the setting is gone. */
static void metrics_close_directory(struct metrics *m) {
        if (m->dir_fd >= 0) {
                if (m->last_usec > 0)
                        (void) unlinkat(m->dir_fd, METRICS_FILE, 0);
                close(m->dir_fd);
        }
        m->dir_fd = -EBADF;
        free(m->path);
        m->path = NULL;
        m->last_usec = 0;
}

int metrics_set_directory(struct metrics *m, const char *dir) {
        const char *want = dir && dir[0] ? dir : NULL;
        if ((!want && !m->path) || (want && m->path && streq(want, m->path)))
                return 0;
        metrics_close_directory(m);
        if (dir && dir[0]) {
                int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return log_warning_errno(-errno, "Cannot open the metrics directory %s, not writing metrics: %m", dir);
                if (!(m->path = strdup(dir))) {
                        close(fd);
                        return -ENOMEM;
                }
                m->dir_fd = fd;
                m->due = true;
        }
        schedule(m);
        return 0;
}

int metrics_new(sd_event *event, const struct config *config, const struct metrics_sources *src, struct metrics **ret) {
        assert(event);

        struct metrics *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *m = (struct metrics){ .event = event, .config = config, .src = *src, .dir_fd = -EBADF,
                               .log_limit = { .interval_usec = 60 * 1000000ULL, .burst = 1 } };
        int r = sd_event_add_time(event, &m->timer, CLOCK_MONOTONIC, 0, 0, on_timer, m);
        if (r >= 0)
                r = m->slot = scope_registry_add_observer(src->scopes, &observer, m);
        if (r < 0) {
                metrics_free(m);
                return r;
        }
        (void) sd_event_source_set_description(m->timer, "metrics");
        (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
        /* Coalesced with the node sample where it can be: a tenth of the period. */
        (void) sd_event_source_set_time_accuracy(m->timer, MAX(config->node_interval_usec / 10, 1000u));
        (void) metrics_set_directory(m, config->metrics_directory);
        *ret = m;
        return 0;
}

struct metrics *metrics_free(struct metrics *m) {
        if (!m)
                return NULL;
        sd_event_source_disable_unref(m->timer);
        metrics_close_directory(m);
        free(m);
        return NULL;
}
