/* SPDX-License-Identifier: MIT */
/* Headroom and memory events of a scope: how near its cgroup (and every limited ancestor) is to its
 * limit, looked at on a timer that runs faster the nearer it gets, or told by the kernel (v2
 * memory.events, v1 usage thresholds on an eventfd); the OOM kills it counts. The level it gives is fed
 * to scope.c's gate like PSI's (its headroom_watch_ops). */
#include "headroom_watch.h"

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

/* What the registry gave every scope. */
static const struct config *config_of(const struct headroom_watch *hw) {
        return hw->subject.env->config;
}

static const struct scope_events *events_of(const struct headroom_watch *hw) {
        return hw->subject.env->events;
}

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

static void unwatch_v1(struct headroom_watch *hw) {
        if (hw->v1_eventfd < 0)
                return;
        hw->events_source = sd_event_source_disable_unref(hw->events_source);
        close(hw->v1_eventfd); /* the kernel drops the notifications with it */
        hw->v1_eventfd = -EBADF;
        for (size_t i = 0; i < hw->n_v1_watched; i++)
                close(hw->v1_watched[i]);
        hw->n_v1_watched = hw->n_v1_limits = 0;
}

void headroom_watch_gone(struct headroom_watch *hw) {
        assert(hw);

        hw->gone = true;
        headroom_watch_stop(hw);
}

void headroom_watch_stop(struct headroom_watch *hw) {
        assert(hw);

        unwatch_v1(hw);
        hw->timer = sd_event_source_disable_unref(hw->timer);
        hw->events_source = sd_event_source_disable_unref(hw->events_source);
        if (hw->events_fd >= 0)
                close(hw->events_fd);
        hw->events_fd = -EBADF;
        hw->rides_node_sample = false;
}

/* ---- headroom and memory events ---- */


static void watch_v1(struct headroom_watch *hw);

/* The system as one group: MemTotal its limit, what is not available its usage. Only without swap:
 * with swap, anonymous memory can go there and MemAvailable does not say how close the OOM killer is. */
static int system_headroom(struct headroom_watch *hw, struct headroom_group *ret, size_t *ret_n) {
        _cleanup_free_ char *path = NULL;
        char buf[8192];
        uint64_t total, avail, swap = 0;

        if (asprintf(&path, "%s/proc/meminfo", config_of(hw)->sysfs_root) < 0)
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

static void read_headroom(struct headroom_watch *hw) {
        struct headroom_group groups[HEADROOM_GROUPS_MAX];
        char *paths[HEADROOM_GROUPS_MAX] = {};
        size_t n = 0;
        int r;

        if (hw->subject.type == SCOPE_CGROUP)
                r = cgroup_headroom_groups(hw->subject.env->layout, hw->subject.cgroup, groups, paths, HEADROOM_GROUPS_MAX, &n);
        else
                r = system_headroom(hw, groups, &n);
        if (r < 0)
                return; /* keep what was seen last; a group removed is found by its trigger */
        headroom_evaluate(groups, n, &config_of(hw)->headroom_at, &hw->headroom);
        /* v1: thresholds set for limits that changed since (or for a tree that changed) tell nothing. */
        if (hw->v1_eventfd >= 0) {
                bool same = hw->n_v1_limits == MIN(n, ELEMENTSOF(hw->v1_limits));
                for (size_t i = 0; same && i < hw->n_v1_limits; i++)
                        same = hw->v1_limits[i] == groups[i].limit;
                if (!same) {
                        unwatch_v1(hw);
                        watch_v1(hw);
                }
        }
        free(hw->binding);
        hw->binding = NULL;
        if (hw->headroom.limit != UINT64_MAX && n > 0)
                hw->binding = TAKE_PTR(paths[hw->headroom.binding]);
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
        hw->raw = config_of(hw)->headroom ? hw->headroom.level : LEVEL_OK;
}

/* The kernel's counters of the group's memory events: every increment since the last reading is
 * reported (the first reading only sets the mark). */
/* The kernel's log names the victim; memory.events only counts. Looked up at most once a second for all
 * scopes together (scope_env's oom_lookups: a group that is killed over and over must not have the daemon
 * read the whole log each time), in the last minute of the log, and at most so many records. */
#define OOM_LOOKUP_SPAN_USEC (60ULL * 1000 * 1000)
#define OOM_LOOKUP_MAX_RECORDS 20000
static void log_oom_kill(struct headroom_watch *hw, uint64_t n) {
        struct oom_kill_record r;
        uint64_t now = event_now(hw->subject.env->event);
        int e = -EBUSY;
        char why[96];

        /* One limit for the registry's scopes together: the log is the machine's, not the scope's. */
        unsigned skipped;
        if (ratelimit_below(&hw->subject.env->oom_lookups, now, &skipped)) {
                e = kmsg_find_oom_kill("/dev/kmsg", hw->subject.cgroup, now > OOM_LOOKUP_SPAN_USEC ? now - OOM_LOOKUP_SPAN_USEC : 0,
                                       OOM_LOOKUP_MAX_RECORDS, &r);
        }
        if (e >= 0) {
                if (n > 1)
                        log_client(hw->subject.owner_uid, LOG_WARNING,
                                   "%s: the kernel's OOM killer killed %llu processes in this cgroup, the last %s (pid %d, "
                                   "uid %d, in %s).",
                                   hw->subject.name, (unsigned long long) n, r.task, (int) r.pid, (int) r.uid, r.task_memcg);
                else
                        log_client(hw->subject.owner_uid, LOG_WARNING,
                                   "%s: the kernel's OOM killer killed %s (pid %d, uid %d, in %s) in this cgroup.", hw->subject.name,
                                   r.task, (int) r.pid, (int) r.uid, r.task_memcg);
                return;
        }
        snprintf(why, sizeof(why), "%s", e == -EBUSY  ? "looked up at most once a second"
                                         : e == -ENOENT ? "no oom-kill line of it in the kernel log"
                                                        : strerror(-e));
        log_client(hw->subject.owner_uid, LOG_WARNING, "%s: the kernel's OOM killer killed %llu process%s in this cgroup (which: %s).",
                   hw->subject.name, (unsigned long long) n, n == 1 ? "" : "es", why);
}

static void read_event_counts(struct headroom_watch *hw) {
        char buf[1024];
        struct cgroup_memory_events e;

        if (hw->events_fd < 0)
                return;
        ssize_t n = pread(hw->events_fd, buf, sizeof(buf) - 1, 0);
        if (n < 0) {
                if (errno == ENODEV || errno == ENOENT)
                        hw->ops->gone(hw->subject.scope);
                return;
        }
        buf[n] = 0;
        if (cgroup_parse_memory_events(buf, &e) < 0)
                return;
        const uint64_t now[_MEMORY_EVENT_MAX] = { [MEMORY_EVENT_MAX] = e.max, [MEMORY_EVENT_OOM_KILL] = e.oom_kill };
        bool had = hw->have_event_counts;
        hw->have_event_counts = true;
        for (int k = 0; k < _MEMORY_EVENT_MAX; k++) {
                uint64_t before = hw->event_counts[k];
                hw->event_counts[k] = now[k];
                if (!had || now[k] <= before)
                        continue;
                if (k == MEMORY_EVENT_OOM_KILL)
                        log_oom_kill(hw, now[k] - before);
                if (events_of(hw) && events_of(hw)->memory_event)
                        events_of(hw)->memory_event(hw->subject.scope, k, now[k] - before, hw->subject.env->userdata);
        }
}

void headroom_watch_refresh(struct headroom_watch *hw) {
        if (hw->watched && !hw->gone)
                read_headroom(hw);
}

static void schedule_look(struct headroom_watch *hw, const struct headroom_pace *pace, uint64_t now) {
        const struct config *c = config_of(hw);
        uint64_t next = c->headroom_interval_usec;

        if (!hw->timer)
                return;
        /* Far from every threshold: back off, as far as the nearest group could grow meanwhile (a group
         * by a tenth of its limit per second at least; the whole system, which PSI and the watermarks
         * watch too, by a hundredth of its memory). */
        hw->rides_node_sample = false;
        if (pace->level == LEVEL_OK && hw->raw == LEVEL_OK) {
                bool sys = hw->subject.type == SCOPE_SYSTEM;
                /* v1 groups are looked at by this timer too, not only when the kernel signals a crossing
                 * of the low threshold: a notification read late, or a limit changed since it was
                 * registered, left the scope blind until the node sample (30 s), and a grower at 7 MiB/s
                 * filled its 64 MiB group in that time without a level being raised (test-headroom,
                 * 2026-12-05). The notification only makes the look come sooner. */
                next = headroom_next_check_usec(&hw->headroom, pace->demand_bytes, sys ? 10 : 100, c->headroom_interval_usec,
                                                sys ? MAX(c->headroom_max_interval_usec, c->node_interval_usec)
                                                    : c->headroom_max_interval_usec);
                /* The system is also looked at with every node sample: no wake-up of its own that late. */
                if (sys && hw->subject.env->nodes && c->node_interval_usec > 0 && next >= c->node_interval_usec) {
                        hw->rides_node_sample = true;
                        (void) sd_event_source_set_enabled(hw->timer, SD_EVENT_OFF);
                        return;
                }
        }
        (void) sd_event_source_set_time_accuracy(hw->timer, MAX(next / 10, 1000u));
        (void) sd_event_source_set_time(hw->timer, now + next);
        (void) sd_event_source_set_enabled(hw->timer, SD_EVENT_ONESHOT);
}

void headroom_watch_check(struct headroom_watch *hw, uint64_t now) {
        if (hw->gone)
                return;
        read_event_counts(hw);
        if (hw->gone || !hw->watched)
                return;
        enum level before = hw->raw;
        read_headroom(hw);
        /* The scope reads the growth that sets the next look, the reclaim target, the level. */
        struct headroom_pace pace = hw->ops->looked(hw->subject.scope, now);
        /* Headroom left ok: the scope is active now, and whoever samples active scopes must know. */
        if (before == LEVEL_OK && hw->raw > LEVEL_OK && events_of(hw) && events_of(hw)->triggered)
                events_of(hw)->triggered(hw->subject.scope, hw->subject.env->userdata);
        schedule_look(hw, &pace, now);
}

static int on_headroom_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct headroom_watch *hw = userdata;
        (void) src;
        (void) usec;
        headroom_watch_check(hw, event_now(hw->subject.env->event));
        return 0;
}

/* Something happened at a limit (v2 memory.events changed, or a v1 notification): look now, unless a
 * look was just taken, then at the next quick interval (a usage hovering at a v1 threshold signals at
 * every crossing). */
static void memory_news(struct headroom_watch *hw) {
        uint64_t now = event_now(hw->subject.env->event), due = 0;
        int enabled = SD_EVENT_OFF;

        if (!hw->timer) {
                read_event_counts(hw);
                return;
        }
        (void) sd_event_source_get_enabled(hw->timer, &enabled);
        if (enabled == SD_EVENT_OFF || (sd_event_source_get_time(hw->timer, &due) >= 0 &&
                                        due > now + config_of(hw)->headroom_interval_usec))
                headroom_watch_check(hw, now);
}

static int on_memory_events(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct headroom_watch *hw = userdata;
        (void) src;
        (void) fd;
        if (revents & EPOLLERR && !(revents & EPOLLPRI)) {
                hw->ops->gone(hw->subject.scope);
                return 0;
        }
        /* Reading the file (read_event_counts) is what re-arms its poll. */
        read_event_counts(hw);
        memory_news(hw);
        return 0;
}

static int on_v1_eventfd(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct headroom_watch *hw = userdata;
        uint64_t v;
        (void) src;
        (void) revents;
        /* Drain the counter; a spurious wake-up (EAGAIN) still looks. */
        if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                log_debug_errno(-errno, "%s: reading the v1 notification: %m", hw->subject.name);
        read_event_counts(hw);
        memory_news(hw);
        return 0;
}

/* v1 tells of its limits by notification: OOM in the group, and usage crossing the low threshold of
 * each limited group up the tree. Best effort: without them the timer still looks. */
static void watch_v1(struct headroom_watch *hw) {
        const struct cgroup_layout *l = hw->subject.env->layout;
        struct headroom_group groups[ELEMENTSOF(hw->v1_watched) - 1];
        char *paths[ELEMENTSOF(hw->v1_watched) - 1] = {};
        size_t n = 0;

        hw->v1_eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (hw->v1_eventfd < 0)
                return;
        int fd = cgroup_v1_notify(l, hw->subject.cgroup, hw->v1_eventfd, UINT64_MAX);
        if (fd >= 0)
                hw->v1_watched[hw->n_v1_watched++] = fd;
        bool all = cgroup_headroom_groups(l, hw->subject.cgroup, groups, paths, ELEMENTSOF(groups), &n) >= 0;
        for (size_t i = 0; all && i < n; i++) {
                uint64_t at = headroom_threshold_used(&config_of(hw)->headroom_at, LEVEL_LOW, groups[i].limit);
                fd = cgroup_v1_notify(l, paths[i], hw->v1_eventfd, at);
                if (fd >= 0)
                        hw->v1_watched[hw->n_v1_watched++] = fd;
                all = all && fd >= 0;
                hw->v1_limits[hw->n_v1_limits++] = groups[i].limit;
        }
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
        if (hw->n_v1_watched == 0 ||
            sd_event_add_io(hw->subject.env->event, &hw->events_source, hw->v1_eventfd, EPOLLIN, on_v1_eventfd, hw) < 0) {
                log_debug("%s: no v1 memory notifications, looking at its headroom by timer only.", hw->subject.name);
                return;
        }
        (void) sd_event_source_set_description(hw->events_source, "memcg-v1-events");
}

int headroom_watch_start(struct headroom_watch *hw, const struct headroom_subject *subject) {
        assert(hw);
        assert(subject && subject->env && subject->scope && subject->name);
        assert(!hw->timer && !hw->events_source);

        hw->subject = *subject;
        const struct cgroup_layout *l = hw->subject.env->layout;
        _cleanup_free_ char *events = NULL;
        int r;

        if (hw->subject.type == SCOPE_CGROUP) {
                if (!l || !l->memory_root)
                        return 0;
                /* The counters of memory events: v2's memory.events reports changes to poll(); v1's
                 * memory.oom_control is read when its notification comes. */
                if (cgroup_memory_events_path(l, hw->subject.cgroup, &events) >= 0)
                        hw->events_fd = open(events, O_RDONLY | O_CLOEXEC);
                if (hw->events_fd >= 0 && l->memory_v2) {
                        r = sd_event_add_io(hw->subject.env->event, &hw->events_source, hw->events_fd, EPOLLPRI, on_memory_events, hw);
                        if (r < 0)
                                return r;
                        (void) sd_event_source_set_description(hw->events_source, "memory-events");
                } else if (hw->events_fd >= 0)
                        watch_v1(hw);
                read_event_counts(hw);
        } else if (hw->subject.type == SCOPE_SYSTEM) {
                struct headroom_group g;
                size_t n = 0;
                if (system_headroom(hw, &g, &n) < 0 || n == 0)
                        return 0; /* swap, or no meminfo: PSI only */
        } else
                return 0;

        if (!config_of(hw)->headroom)
                return 0;
        hw->watched = true;
        r = sd_event_add_time(hw->subject.env->event, &hw->timer, CLOCK_MONOTONIC, 0, 0, on_headroom_timer, hw);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(hw->timer, "headroom");
        headroom_watch_check(hw, event_now(hw->subject.env->event));
        return 0;
}

