/* SPDX-License-Identifier: MIT */
/* Headroom and memory events of a scope: how near its cgroup (and every limited ancestor) is to its
 * limit, looked at on a timer that runs faster the nearer it gets, or told by the kernel (v2
 * memory.events, v1 usage thresholds on an eventfd); the OOM kills it counts. The level it gives is fed
 * to scope.c's gate like PSI's (its headroom_watch_ops). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "headroom.h"
#include "kmsg.h"
#include "log.h"
#include "macro.h"
#include "scope-private.h"

void headroom_watch_init(struct headroom_watch *hw, const struct headroom_watch_ops *ops) {
        assert(hw);
        assert(ops);
        *hw = (struct headroom_watch){
                .ops = ops,
                .headroom.limit = UINT64_MAX,
                .events_fd = -EBADF,
                .v1_eventfd = -EBADF,
        };
}

void headroom_watch_done(struct headroom_watch *hw) {
        assert(hw);
        free(hw->binding);
        hw->binding = NULL;
}

static void scope_unwatch_v1(struct scope *s) {
        if (s->hw.v1_eventfd < 0)
                return;
        s->hw.events_source = sd_event_source_disable_unref(s->hw.events_source);
        close(s->hw.v1_eventfd); /* the kernel drops the notifications with it */
        s->hw.v1_eventfd = -EBADF;
        for (size_t i = 0; i < s->hw.n_v1_watched; i++)
                close(s->hw.v1_watched[i]);
        s->hw.n_v1_watched = s->hw.n_v1_limits = 0;
}

void scope_unwatch_headroom(struct scope *s) {
        assert(s);

        scope_unwatch_v1(s);
        s->hw.timer = sd_event_source_disable_unref(s->hw.timer);
        s->hw.events_source = sd_event_source_disable_unref(s->hw.events_source);
        if (s->hw.events_fd >= 0)
                close(s->hw.events_fd);
        s->hw.events_fd = -EBADF;
        s->hw.rides_node_sample = false;
}

/* ---- headroom and memory events ---- */


static void scope_watch_v1(struct scope *s);

/* The system as one group: MemTotal its limit, what is not available its usage. Only without swap:
 * with swap, anonymous memory can go there and MemAvailable does not say how close the OOM killer is. */
static int system_headroom(struct scope *s, struct headroom_group *ret, size_t *ret_n) {
        _cleanup_free_ char *path = NULL;
        char buf[8192];
        uint64_t total, avail, swap = 0;

        if (asprintf(&path, "%s/proc/meminfo", config_of(s)->sysfs_root) < 0)
                return -ENOMEM;
        int r = read_file_start(path, buf, sizeof(buf));
        if (r < 0)
                return r;
        if (headroom_parse_field(buf, "MemTotal", &total) < 0 || headroom_parse_field(buf, "MemAvailable", &avail) < 0)
                return -EINVAL;
        (void) headroom_parse_field(buf, "SwapTotal", &swap);
        *ret_n = 0;
        if (swap > 0 || total == 0)
                return 0;
        *ret = (struct headroom_group){ .usage = total > avail ? total - avail : 0, .limit = total };
        *ret_n = 1;
        return 0;
}

static void scope_read_headroom(struct scope *s) {
        struct headroom_group groups[HEADROOM_GROUPS_MAX];
        char *paths[HEADROOM_GROUPS_MAX] = {};
        size_t n = 0;
        int r;

        if (s->type == SCOPE_CGROUP)
                r = cgroup_headroom_groups(s->env->layout, s->cgroup, groups, paths, HEADROOM_GROUPS_MAX, &n);
        else
                r = system_headroom(s, groups, &n);
        if (r < 0)
                return; /* keep what was seen last; a group removed is found by its trigger */
        headroom_evaluate(groups, n, &config_of(s)->headroom_at, &s->hw.headroom);
        /* v1: thresholds set for limits that changed since (or for a tree that changed) tell nothing. */
        if (s->hw.v1_eventfd >= 0) {
                bool same = s->hw.n_v1_limits == MIN(n, ELEMENTSOF(s->hw.v1_limits));
                for (size_t i = 0; same && i < s->hw.n_v1_limits; i++)
                        same = s->hw.v1_limits[i] == groups[i].limit;
                if (!same) {
                        scope_unwatch_v1(s);
                        scope_watch_v1(s);
                }
        }
        free(s->hw.binding);
        s->hw.binding = NULL;
        if (s->hw.headroom.limit != UINT64_MAX && n > 0)
                s->hw.binding = TAKE_PTR(paths[s->hw.headroom.binding]);
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
        s->hw.raw = config_of(s)->headroom ? s->hw.headroom.level : LEVEL_OK;
}

/* The kernel's counters of the group's memory events: every increment since the last reading is
 * reported (the first reading only sets the mark). */
/* The kernel's log names the victim; memory.events only counts. Looked up at most once a second for all
 * scopes together (scope_env's oom_lookups: a group that is killed over and over must not have the daemon
 * read the whole log each time), in the last minute of the log, and at most so many records. */
#define OOM_LOOKUP_SPAN_USEC (60ULL * 1000 * 1000)
#define OOM_LOOKUP_MAX_RECORDS 20000
static void scope_log_oom_kill(struct scope *s, uint64_t n) {
        struct oom_kill_record r;
        uint64_t now = event_now(s->env->event);
        int e = -EBUSY;
        char why[96];

        /* One limit for the registry's scopes together: the log is the machine's, not the scope's. */
        unsigned skipped;
        if (ratelimit_below(&s->env->oom_lookups, now, &skipped)) {
                e = kmsg_find_oom_kill("/dev/kmsg", s->cgroup, now > OOM_LOOKUP_SPAN_USEC ? now - OOM_LOOKUP_SPAN_USEC : 0,
                                       OOM_LOOKUP_MAX_RECORDS, &r);
        }
        if (e >= 0) {
                if (n > 1)
                        log_client(s->owner_uid, LOG_WARNING,
                                   "%s: the kernel's OOM killer killed %llu processes in this cgroup, the last %s (pid %d, "
                                   "uid %d, in %s).",
                                   s->name, (unsigned long long) n, r.task, (int) r.pid, (int) r.uid, r.task_memcg);
                else
                        log_client(s->owner_uid, LOG_WARNING,
                                   "%s: the kernel's OOM killer killed %s (pid %d, uid %d, in %s) in this cgroup.", s->name,
                                   r.task, (int) r.pid, (int) r.uid, r.task_memcg);
                return;
        }
        snprintf(why, sizeof(why), "%s", e == -EBUSY  ? "looked up at most once a second"
                                         : e == -ENOENT ? "no oom-kill line of it in the kernel log"
                                                        : strerror(-e));
        log_client(s->owner_uid, LOG_WARNING, "%s: the kernel's OOM killer killed %llu process%s in this cgroup (which: %s).",
                   s->name, (unsigned long long) n, n == 1 ? "" : "es", why);
}

static void scope_read_event_counts(struct scope *s) {
        char buf[1024];
        struct cgroup_memory_events e;

        if (s->hw.events_fd < 0)
                return;
        ssize_t n = pread(s->hw.events_fd, buf, sizeof(buf) - 1, 0);
        if (n < 0) {
                if (errno == ENODEV || errno == ENOENT)
                        s->hw.ops->gone(s);
                return;
        }
        buf[n] = 0;
        if (cgroup_parse_memory_events(buf, &e) < 0)
                return;
        const uint64_t now[_MEMORY_EVENT_MAX] = { [MEMORY_EVENT_MAX] = e.max, [MEMORY_EVENT_OOM_KILL] = e.oom_kill };
        bool had = s->hw.have_event_counts;
        s->hw.have_event_counts = true;
        for (int k = 0; k < _MEMORY_EVENT_MAX; k++) {
                uint64_t before = s->hw.event_counts[k];
                s->hw.event_counts[k] = now[k];
                if (!had || now[k] <= before)
                        continue;
                if (k == MEMORY_EVENT_OOM_KILL)
                        scope_log_oom_kill(s, now[k] - before);
                if (s->env->events && events_of(s)->memory_event)
                        events_of(s)->memory_event(s, k, now[k] - before, s->env->userdata);
        }
}

void scope_refresh_headroom(struct scope *s) {
        if (s->hw.watched && !s->gone)
                scope_read_headroom(s);
}

static void scope_schedule_headroom(struct scope *s, uint64_t now) {
        const struct config *c = s->env->config;
        uint64_t next = c->headroom_interval_usec;

        if (!s->hw.timer)
                return;
        /* Far from every threshold: back off, as far as the nearest group could grow meanwhile (a group
         * by a tenth of its limit per second at least; the whole system, which PSI and the watermarks
         * watch too, by a hundredth of its memory). */
        s->hw.rides_node_sample = false;
        if (s->level.level == LEVEL_OK && s->hw.raw == LEVEL_OK) {
                bool sys = s->type == SCOPE_SYSTEM;
                /* v1 groups are looked at by this timer too, not only when the kernel signals a crossing
                 * of the low threshold: a notification read late, or a limit changed since it was
                 * registered, left the scope blind until the node sample (30 s), and a grower at 7 MiB/s
                 * filled its 64 MiB group in that time without a level being raised (test-headroom,
                 * 2026-12-05). The notification only makes the look come sooner. */
                next = headroom_next_check_usec(&s->hw.headroom, s->demand_bytes, sys ? 10 : 100, c->headroom_interval_usec,
                                                sys ? MAX(c->headroom_max_interval_usec, c->node_interval_usec)
                                                    : c->headroom_max_interval_usec);
                /* The system is also looked at with every node sample: no wake-up of its own that late. */
                if (sys && s->env->nodes && c->node_interval_usec > 0 && next >= c->node_interval_usec) {
                        s->hw.rides_node_sample = true;
                        (void) sd_event_source_set_enabled(s->hw.timer, SD_EVENT_OFF);
                        return;
                }
        }
        (void) sd_event_source_set_time_accuracy(s->hw.timer, MAX(next / 10, 1000u));
        (void) sd_event_source_set_time(s->hw.timer, now + next);
        (void) sd_event_source_set_enabled(s->hw.timer, SD_EVENT_ONESHOT);
}

void scope_check_headroom(struct scope *s, uint64_t now) {
        if (s->gone)
                return;
        scope_read_event_counts(s);
        if (s->gone || !s->hw.watched)
                return;
        enum level before = s->hw.raw;
        scope_read_headroom(s);
        s->hw.ops->looked(s, now); /* the growth that sets the next look, the reclaim target, the level */
        /* Headroom left ok: the scope is active now, and whoever samples active scopes must know. */
        if (before == LEVEL_OK && s->hw.raw > LEVEL_OK && s->env->events && events_of(s)->triggered)
                events_of(s)->triggered(s, s->env->userdata);
        scope_schedule_headroom(s, now);
}

static int on_headroom_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct scope *s = userdata;
        (void) src;
        (void) usec;
        scope_check_headroom(s, event_now(s->env->event));
        return 0;
}

/* Something happened at a limit (v2 memory.events changed, or a v1 notification): look now, unless a
 * look was just taken, then at the next quick interval (a usage hovering at a v1 threshold signals at
 * every crossing). */
static void scope_memory_news(struct scope *s) {
        uint64_t now = event_now(s->env->event), due = 0;
        int enabled = SD_EVENT_OFF;

        if (!s->hw.timer) {
                scope_read_event_counts(s);
                return;
        }
        (void) sd_event_source_get_enabled(s->hw.timer, &enabled);
        if (enabled == SD_EVENT_OFF || (sd_event_source_get_time(s->hw.timer, &due) >= 0 &&
                                        due > now + config_of(s)->headroom_interval_usec))
                scope_check_headroom(s, now);
}

static int on_memory_events(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct scope *s = userdata;
        (void) src;
        (void) fd;
        if (revents & EPOLLERR && !(revents & EPOLLPRI)) {
                s->hw.ops->gone(s);
                return 0;
        }
        /* Reading the file (scope_read_event_counts) is what re-arms its poll. */
        scope_read_event_counts(s);
        scope_memory_news(s);
        return 0;
}

static int on_v1_eventfd(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct scope *s = userdata;
        uint64_t v;
        (void) src;
        (void) revents;
        /* Drain the counter; a spurious wake-up (EAGAIN) still looks. */
        if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_debug_errno(-errno, "%s: reading the v1 notification: %m", s->name);
        scope_read_event_counts(s);
        scope_memory_news(s);
        return 0;
}

/* v1 tells of its limits by notification: OOM in the group, and usage crossing the low threshold of
 * each limited group up the tree. Best effort: without them the timer still looks. */
static void scope_watch_v1(struct scope *s) {
        const struct cgroup_layout *l = s->env->layout;
        struct headroom_group groups[ELEMENTSOF(s->hw.v1_watched) - 1];
        char *paths[ELEMENTSOF(s->hw.v1_watched) - 1] = {};
        size_t n = 0;

        s->hw.v1_eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->hw.v1_eventfd < 0)
                return;
        int fd = cgroup_v1_notify(l, s->cgroup, s->hw.v1_eventfd, UINT64_MAX);
        if (fd >= 0)
                s->hw.v1_watched[s->hw.n_v1_watched++] = fd;
        bool all = cgroup_headroom_groups(l, s->cgroup, groups, paths, ELEMENTSOF(groups), &n) >= 0;
        for (size_t i = 0; all && i < n; i++) {
                uint64_t at = headroom_threshold_used(&config_of(s)->headroom_at, LEVEL_LOW, groups[i].limit);
                fd = cgroup_v1_notify(l, paths[i], s->hw.v1_eventfd, at);
                if (fd >= 0)
                        s->hw.v1_watched[s->hw.n_v1_watched++] = fd;
                all = all && fd >= 0;
                s->hw.v1_limits[s->hw.n_v1_limits++] = groups[i].limit;
        }
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
        if (s->hw.n_v1_watched == 0 ||
            sd_event_add_io(s->env->event, &s->hw.events_source, s->hw.v1_eventfd, EPOLLIN, on_v1_eventfd, s) < 0) {
                log_debug("%s: no v1 memory notifications, looking at its headroom by timer only.", s->name);
                return;
        }
        (void) sd_event_source_set_description(s->hw.events_source, "memcg-v1-events");
}

int scope_watch_headroom(struct scope *s) {
        assert(s);

        const struct cgroup_layout *l = s->env->layout;
        _cleanup_free_ char *events = NULL;
        int r;

        if (s->type == SCOPE_CGROUP) {
                if (!l || !l->memory_root)
                        return 0;
                /* The counters of memory events: v2's memory.events reports changes to poll(); v1's
                 * memory.oom_control is read when its notification comes. */
                if (cgroup_memory_events_path(l, s->cgroup, &events) >= 0)
                        s->hw.events_fd = open(events, O_RDONLY | O_CLOEXEC);
                if (s->hw.events_fd >= 0 && l->memory_v2) {
                        r = sd_event_add_io(s->env->event, &s->hw.events_source, s->hw.events_fd, EPOLLPRI, on_memory_events, s);
                        if (r < 0)
                                return r;
                        (void) sd_event_source_set_description(s->hw.events_source, "memory-events");
                } else if (s->hw.events_fd >= 0)
                        scope_watch_v1(s);
                scope_read_event_counts(s);
        } else if (s->type == SCOPE_SYSTEM) {
                struct headroom_group g;
                size_t n = 0;
                if (system_headroom(s, &g, &n) < 0 || n == 0)
                        return 0; /* swap, or no meminfo: PSI only */
        } else
                return 0;

        if (!config_of(s)->headroom)
                return 0;
        s->hw.watched = true;
        r = sd_event_add_time(s->env->event, &s->hw.timer, CLOCK_MONOTONIC, 0, 0, on_headroom_timer, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->hw.timer, "headroom");
        scope_check_headroom(s, event_now(s->env->event));
        return 0;
}

