/* SPDX-License-Identifier: MIT */
#include "shrinker.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "pidref.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

static int make_token(char token[static 33]) {
        unsigned char raw[16];
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, raw, sizeof(raw));
        close(fd);
        if (n != (ssize_t) sizeof(raw))
                return -EIO;
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(token + 2 * i, 3, "%02x", raw[i]);
        return 0;
}

static struct shrink_registry *shrinker_registry(const struct shrinker *sh) {
        return sh->client->registry;
}

static void shrinker_free(struct shrinker *sh) {
        if (!sh)
                return;
        if (sh->counted)
                (void) hashmap_count_add_u64(shrinker_registry(sh)->per_uid, sh->client->uid, -1);
        free(sh->name);
        free(sh->deferred);
        free(sh);
}

/* Tell the owner to end the client (it closes the connection, which frees it), once. */
static void client_end(struct shrink_client *cl) {
        struct shrink_registry *reg = cl->registry;
        if (cl->ending)
                return;
        cl->ending = true;
        cl->pidfd_source = sd_event_source_disable_unref(cl->pidfd_source);
        cl->caller_source = sd_event_source_disable_unref(cl->caller_source);
        if (reg->on_exit)
                reg->on_exit(cl, reg->exit_userdata);
}

/* The process exited (or, for_pid, the one serving for it): its connection may linger (inherited by a
 * child), its shrinkers must not. */
static int on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct shrink_client *cl = userdata;
        (void) fd;
        (void) revents;
        if (s == cl->caller_source)
                log_debug("Shrinker client pid %d, which serves for pid %d, exited.", (int) cl->pid, (int) cl->measured_pid);
        else if (cl->measured_pid != cl->pid)
                log_debug("Pid %d, which shrinker client pid %d serves for, exited.", (int) cl->measured_pid, (int) cl->pid);
        else
                log_debug("Shrinker client pid %d exited.", (int) cl->pid);
        client_end(cl);
        return 0;
}

/* Its watched scopes back (at the end, or when its process moved to another group). */
static void client_unwatch(struct shrink_client *cl) {
        for (size_t i = 0; i < cl->n_watched; i++)
                scope_registry_release_for(cl->registry->scopes, cl->uid, cl->watched[i]);
        free(cl->watched);
        cl->watched = NULL;
        cl->n_watched = 0;
}

/* Everything a client holds; also for one that was never fully set up. */
static void client_destroy(struct shrink_client *cl) {
        client_unwatch(cl);
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                shrinker_free(cl->shrinkers[i]);
        free(cl->shrinkers);
        sd_event_source_disable_unref(cl->pidfd_source);
        sd_event_source_disable_unref(cl->caller_source);
        if (cl->pidfd >= 0)
                close(cl->pidfd);
        if (cl->caller_pidfd >= 0)
                close(cl->caller_pidfd);
        if (cl->statm_fd >= 0)
                close(cl->statm_fd);
        free(cl->cgroup);
        free(cl);
}

/* Whose memory the client frees must stay the client's user's: checked at registration, each recheck
 * and before each measure, as a set-user-ID program it runs may make it root's at any time. */
static int client_check_measured(const struct shrink_client *cl) {
        if (cl->measured_pid == cl->pid || cl->uid == 0)
                return pidfd_alive(cl->pidfd) ? 0 : -ESRCH;
        return pidfd_check_uid(cl->pidfd, cl->measured_pid, cl->uid);
}

/* For a client serving for another process: pin the caller too, and end the client when it exits, so
 * that a connection passed on or inherited cannot serve for anyone once its process is gone. */
static int client_pin_caller(struct shrink_client *cl, int caller_pidfd) {
        if (cl->measured_pid == cl->pid)
                return 0;
        if (caller_pidfd < 0)
                return -ESRCH;
        cl->caller_pidfd = fcntl(caller_pidfd, F_DUPFD_CLOEXEC, 3);
        if (cl->caller_pidfd < 0)
                return -errno;
        if (!pidfd_alive(cl->caller_pidfd))
                return -ESRCH;
        int r = sd_event_add_io(cl->registry->event, &cl->caller_source, cl->caller_pidfd, EPOLLIN, on_pidfd, cl);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(cl->caller_source, "shrinker-caller-pidfd");
        return 0;
}

/* Pin the process first, then read its cgroup and open its statm, then check the pin still holds: the
 * cgroup and the memory figures belong to the process that owns the connection, not to a recycled pid
 * (an open proc file keeps reading its own process, and fails once that is gone). */
static int client_pin(struct shrink_client *cl, int pidfd, int caller_pidfd) {
        char path[64];
        int r = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 3) : pidfd_open(cl->measured_pid);
        if (r < 0)
                return pidfd >= 0 ? -errno : r;
        cl->pidfd = r;
        r = client_pin_caller(cl, caller_pidfd);
        if (r < 0)
                return r;
        r = cgroup_pid_get_path(cl->measured_pid, &cl->cgroup);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/statm", (int) cl->measured_pid);
        cl->statm_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (cl->statm_fd < 0)
                return -errno;
        const struct cgroup_layout *layout = scope_registry_layout(cl->registry->scopes);
        cl->own_cgroup = layout && cgroup_only_process(layout, cl->cgroup, cl->measured_pid) > 0;
        r = client_check_measured(cl);
        if (r < 0)
                return r;
        r = sd_event_add_io(cl->registry->event, &cl->pidfd_source, cl->pidfd, EPOLLIN, on_pidfd, cl);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(cl->pidfd_source, "shrinker-client-pidfd");
        return 0;
}

static int shrinker_new(struct shrink_client *cl, const struct shrinker_spec *spec, struct shrinker **ret) {
        struct shrink_registry *reg = cl->registry;
        /* Each is memory and work in every round: one user's thousands would be everyone's cost. */
        if (cl->uid != 0 && reg->max_shrinkers_per_uid > 0 &&
            hashmap_count_get_u64(reg->per_uid, cl->uid) >= reg->max_shrinkers_per_uid)
                return -EDQUOT;
        size_t n_nodes = shrink_registry_n_nodes(cl->registry);
        struct shrinker *sh = calloc(1, sizeof(*sh));
        if (!sh)
                return -ENOMEM;
        sh->client = cl;
        sh->flags = spec->flags;
        sh->seeks = spec->seeks;
        sh->batch = spec->batch;
        sh->n_nodes = (sh->flags & SHRINKER_NUMA_AWARE) ? n_nodes : 1;
        sh->name = strdup(spec->name);
        sh->deferred = calloc(sh->n_nodes, sizeof(uint64_t));
        if (!sh->name || !sh->deferred ||
            hashmap_count_add_u64(reg->per_uid, cl->uid, +1) < 0) {
                shrinker_free(sh);
                return -ENOMEM;
        }
        sh->counted = true;
        *ret = sh;
        return 0;
}

static int client_add_shrinkers(struct shrink_client *cl, const struct shrinker_spec *specs, size_t n) {
        cl->shrinkers = calloc(MAX(n, 1u), sizeof(struct shrinker *));
        if (!cl->shrinkers)
                return -ENOMEM;
        cl->max_shrinkers = MAX(n, 1u);
        for (size_t i = 0; i < n; i++) {
                int r = shrinker_new(cl, &specs[i], &cl->shrinkers[cl->n_shrinkers]);
                if (r < 0)
                        return r;
                cl->n_shrinkers++;
        }
        return 0;
}

/* A limit on the client's cgroup or on an ancestor makes reclaim in that cgroup: watch the client's own
 * group and the nearest limited ancestors, so that MEMCG_AWARE shrinkers are asked whichever of them runs
 * short. Only those: an ancestor without a limit is short only when the machine is, which the system
 * scope tells, and a chain of a thousand delegated groups must not cost a thousand triggers. Each counts
 * against the user's budget of watched cgroups. */
#define WATCH_LIMITED_MAX 3
static void watch_ancestors(struct shrink_client *cl) {
        struct scope_registry *scopes = cl->registry->scopes;
        struct headroom_group groups[WATCH_LIMITED_MAX + 1];
        char *paths[WATCH_LIMITED_MAX + 1] = {};
        size_t n = 0;
        bool memcg = false;

        for (size_t i = 0; i < cl->n_shrinkers; i++)
                if (cl->shrinkers[i]->flags & SHRINKER_MEMCG_AWARE)
                        memcg = true;
        if (!memcg || cl->watched || streq(cl->cgroup, "/"))
                return;
        cl->watched = calloc(1 + ELEMENTSOF(paths), sizeof(struct scope *));
        if (!cl->watched)
                return;
        if (!scopes->env.layout ||
            cgroup_headroom_groups(scopes->env.layout, cl->cgroup, groups, paths, ELEMENTSOF(paths), &n) < 0)
                n = 0;
        for (size_t i = 0; i <= n; i++) {
                /* Its own group first, then the limited ones up the tree (its own again if limited). */
                const char *path = i == 0 ? cl->cgroup : paths[i - 1];
                if (i > 0 && streq(path, cl->cgroup))
                        continue;
                struct scope_id id = { .type = SCOPE_CGROUP, .cgroup = path };
                struct scope *s;
                int r = scope_registry_acquire_for(scopes, cl->uid, &id, &s);
                if (r >= 0)
                        cl->watched[cl->n_watched++] = s;
                else
                        log_debug_errno(r, "Cannot watch cgroup %s for shrinkers of pid %d: %m", path, (int) cl->pid);
        }
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
}

/* Ids and token go into the tables last: a client is findable only when complete. */
static int client_index(struct shrink_client *cl) {
        struct shrink_registry *reg = cl->registry;
        size_t i;
        int r;

        for (i = 0; i < cl->n_shrinkers; i++) {
                cl->shrinkers[i]->id = ++reg->last_shrinker_id;
                r = hashmap_put_u64(reg->by_id, cl->shrinkers[i]->id, cl->shrinkers[i]);
                if (r < 0)
                        goto fail;
        }
        /* 128 random bits cannot collide in practice; if they do, the client fails rather than shadows. */
        r = hashmap_put_string(reg->by_token, cl->token, cl);
        if (r >= 0)
                return 0;
fail:
        while (i > 0)
                hashmap_remove_u64(reg->by_id, cl->shrinkers[--i]->id);
        return r;
}

int shrink_client_new(struct shrink_registry *reg, pid_t pid, pid_t measured_pid, int pidfd, int caller_pidfd,
                      uid_t uid, void *owner, const struct shrinker_spec *specs, size_t n,
                      struct shrink_client **ret) {
        assert(reg);

        int r;

        if (pid <= 0 || measured_pid <= 0)
                return -ESRCH;
        struct shrink_client *cl = calloc(1, sizeof(*cl));
        if (!cl)
                return -ENOMEM;
        cl->registry = reg;
        cl->owner = owner;
        cl->pid = pid;
        cl->measured_pid = measured_pid;
        cl->uid = uid;
        cl->pidfd = -EBADF;
        cl->caller_pidfd = -EBADF;
        cl->statm_fd = -EBADF;

        r = client_pin(cl, pidfd, caller_pidfd);
        if (r >= 0)
                r = make_token(cl->token);
        if (r >= 0)
                r = client_add_shrinkers(cl, specs, n);
        if (r >= 0)
                r = client_index(cl);
        if (r < 0) {
                client_destroy(cl);
                return r;
        }
        watch_ancestors(cl);

        LIST_PREPEND(reg->clients, cl);
        reg->n_clients++;
        (void) sd_event_source_set_enabled(reg->recheck, SD_EVENT_ON);
        if (cl->measured_pid != cl->pid)
                log_client(cl->uid, LOG_INFO, "pid %d (uid %u) registered %zu shrinker%s for pid %d (cgroup %s).",
                           (int) cl->pid, (unsigned) cl->uid, n, n == 1 ? "" : "s", (int) cl->measured_pid, cl->cgroup);
        else
                log_client(cl->uid, LOG_INFO, "pid %d (uid %u, cgroup %s) registered %zu shrinker%s.", (int) cl->pid,
                           (unsigned) cl->uid, cl->cgroup, n, n == 1 ? "" : "s");
        *ret = cl;
        return 0;
}

void shrink_client_start(struct shrink_client *cl) {
        assert(cl);

        struct shrink_registry *reg = cl->registry;
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->client_added)
                        reg->observers[i].ops->client_added(cl, reg->observers[i].userdata);
}

void shrink_client_free(struct shrink_client *cl) {
        if (!cl)
                return;
        struct shrink_registry *reg = cl->registry;

        /* Out of the tables first: nothing an observer does can find it again. */
        hashmap_remove_string(reg->by_token, cl->token);
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                hashmap_remove_u64(reg->by_id, cl->shrinkers[i]->id);
        LIST_REMOVE(reg->clients, cl);
        reg->n_clients--;
        if (reg->n_clients == 0)
                (void) sd_event_source_set_enabled(reg->recheck, SD_EVENT_OFF);
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->client_removed)
                        reg->observers[i].ops->client_removed(cl, reg->observers[i].userdata);

        if (cl->n_shrinkers == 0)
                log_client(cl->uid, LOG_INFO, "pid %d left; it had no shrinker registered any more.", (int) cl->pid);
        else
                log_client(cl->uid, LOG_INFO, "pid %d left; its %zu shrinker%s unregistered.", (int) cl->pid,
                           cl->n_shrinkers, cl->n_shrinkers == 1 ? " is" : "s are");
        client_destroy(cl);
}

int shrink_client_add_shrinker(struct shrink_client *cl, const struct shrinker_spec *spec, size_t max,
                               struct shrinker **ret) {
        assert(cl);

        struct shrink_registry *reg = cl->registry;
        struct shrinker *sh;
        int r;

        if (cl->n_shrinkers >= max)
                return -E2BIG;
        if (cl->n_shrinkers == cl->max_shrinkers) {
                size_t m = MIN(MAX(cl->max_shrinkers * 2, 4u), max);
                struct shrinker **a = reallocarray(cl->shrinkers, m, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                cl->shrinkers = a;
                cl->max_shrinkers = m;
        }
        r = shrinker_new(cl, spec, &sh);
        if (r < 0)
                return r;
        sh->id = ++reg->last_shrinker_id;
        r = hashmap_put_u64(reg->by_id, sh->id, sh);
        if (r < 0) {
                shrinker_free(sh);
                return r;
        }
        cl->shrinkers[cl->n_shrinkers++] = sh;
        watch_ancestors(cl);
        for (size_t i = 0; i < reg->n_observers; i++)
                if (reg->observers[i].ops->shrinker_added)
                        reg->observers[i].ops->shrinker_added(sh, reg->observers[i].userdata);
        *ret = sh;
        return 0;
}

void shrink_client_remove_shrinker(struct shrink_client *cl, struct shrinker *sh) {
        assert(cl);

        struct shrink_registry *reg = cl->registry;
        size_t i;

        assert(sh->client == cl);
        for (i = 0; i < cl->n_shrinkers && cl->shrinkers[i] != sh; i++)
                ;
        assert(i < cl->n_shrinkers);
        hashmap_remove_u64(reg->by_id, sh->id);
        for (size_t k = 0; k < reg->n_observers; k++)
                if (reg->observers[k].ops->shrinker_removed)
                        reg->observers[k].ops->shrinker_removed(sh, reg->observers[k].userdata);
        /* Keep the order: ListShrinkers shows a client's shrinkers as registered. */
        memmove(&cl->shrinkers[i], &cl->shrinkers[i + 1], (cl->n_shrinkers - i - 1) * sizeof(*cl->shrinkers));
        cl->n_shrinkers--;
        shrinker_free(sh);
}

struct shrink_client *shrink_client_by_token(const struct shrink_registry *reg, const char *token) {
        assert(reg);

        return hashmap_get_string(reg->by_token, token);
}

struct shrinker *shrinker_by_id(const struct shrink_registry *reg, uint64_t id) {
        assert(reg);

        return hashmap_get_u64(reg->by_id, id);
}

int shrink_client_resident(struct shrink_client *cl, uint64_t *ret) {
        assert(cl);
        assert(ret);

        char buf[128];
        const struct cgroup_layout *layout = scope_registry_layout(cl->registry->scopes);
        int r = client_check_measured(cl);
        if (r < 0)
                return r;

        /* Its own cgroup sees what the RSS does not: memory it freed but the heap kept, page cache it
         * dropped. Checked again each time (cgroup.procs of a group of one is a few bytes): a child or
         * a second process makes the group no longer the client's alone. */
        if (cl->own_cgroup && cgroup_only_process(layout, cl->cgroup, cl->measured_pid) > 0) {
                uint64_t usage, limit;
                if (cgroup_memory(layout, cl->cgroup, &usage, &limit) >= 0 && pidfd_alive(cl->pidfd)) {
                        *ret = usage;
                        return 0;
                }
        }
        cl->own_cgroup = false;
        /* Rounds read this for every client they ask to scan: one pread, no open, no stdio. */
        ssize_t n = pread(cl->statm_fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = 0;
        char *end;
        errno = 0;
        (void) strtoull(buf, &end, 10); /* size */
        unsigned long long resident = strtoull(end, &end, 10);
        if (errno != 0 || *end != ' ')
                return -EIO;
        *ret = sat_mul(resident, (uint64_t) sysconf(_SC_PAGESIZE));
        return 0;
}

size_t shrink_registry_n_nodes(const struct shrink_registry *reg) {
        assert(reg);

        return reg->nodes ? reg->nodes->n_nodes : 1;
}

int shrink_registry_node_id(const struct shrink_registry *reg, size_t node_index) {
        assert(reg);

        return reg->nodes && node_index < reg->nodes->n_nodes ? reg->nodes->cur[node_index].id : 0;
}

int shrinker_info(const struct shrinker *sh, struct shrinker_info_snapshot *ret) {
        assert(sh);
        assert(ret);

        const struct shrink_client *cl = sh->client;
        struct shrinker_node_figures *nodes = calloc(MAX(sh->n_nodes, 1u), sizeof(*nodes));
        if (!nodes)
                return -ENOMEM;
        for (size_t i = 0; i < sh->n_nodes; i++)
                nodes[i] = (struct shrinker_node_figures){
                        .node = shrink_registry_node_id(cl->registry, i),
                        .deferred = sh->deferred[i],
                };
        *ret = (struct shrinker_info_snapshot){
                .id = sh->id,
                .name = sh->name,
                .pid = cl->pid,
                .for_pid = cl->measured_pid != cl->pid ? cl->measured_pid : 0,
                .uid = cl->uid,
                .cgroup = cl->cgroup,
                .flags = sh->flags,
                .seeks = sh->seeks,
                .batch = sh->batch,
                .n_nodes = sh->n_nodes,
                .nodes = nodes,
                .client_measured_by_cgroup = cl->own_cgroup,
                .client_trust = SHRINK_TRUST_FULL,
        };
        return 0;
}

void shrinker_set_deferred(struct shrinker *sh, size_t node_index, uint64_t nr) {
        assert(sh);

        sh->deferred[shrinker_node_slot(sh, node_index)] = nr;
}

/* The process may have moved to another cgroup since it was last read: its shrinkers follow it, and are
 * watched in its new group and that group's limited ancestors. */
static void client_follow(struct shrink_client *cl) {
        _cleanup_free_ char *path = NULL;
        if (cgroup_pid_get_path(cl->measured_pid, &path) < 0 || !pidfd_alive(cl->pidfd) || streq(path, cl->cgroup))
                return;
        log_client(cl->uid, LOG_INFO, "pid %d moved from cgroup %s to %s; the shrinkers of pid %d follow it.",
                   (int) cl->measured_pid, cl->cgroup, path, (int) cl->pid);
        free(cl->cgroup);
        cl->cgroup = TAKE_PTR(path);
        const struct cgroup_layout *layout = scope_registry_layout(cl->registry->scopes);
        cl->own_cgroup = layout && cgroup_only_process(layout, cl->cgroup, cl->measured_pid) > 0;
        client_unwatch(cl);
        watch_ancestors(cl);
}

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata) {
        struct shrink_registry *reg = userdata;
        struct shrink_client *next;
        for (struct shrink_client *cl = reg->clients; cl; cl = next) {
                next = cl->next; /* ending one may free it */
                if (cl->ending)
                        continue;
                int r = client_check_measured(cl);
                if (r == -EPERM) {
                        log_client(cl->uid, LOG_NOTICE,
                                   "pid %d, which pid %d serves for, is no longer all uid %u's; its shrinkers are unregistered.",
                                   (int) cl->measured_pid, (int) cl->pid, (unsigned) cl->uid);
                        client_end(cl);
                } else if (r >= 0)
                        client_follow(cl);
        }
        (void) sd_event_source_set_time(s, usec + SHRINK_RECHECK_USEC);
        return 0;
}

int shrink_registry_new(sd_event *event, struct scope_registry *scopes, const struct node_monitor *nodes,
                        struct shrink_registry **ret) {
        assert(event);

        struct shrink_registry *reg = calloc(1, sizeof(*reg));
        int r;

        if (!reg)
                return -ENOMEM;
        reg->event = event;
        reg->scopes = scopes;
        reg->nodes = nodes;
        r = hashmap_new(HASHMAP_KEY_STRING, &reg->by_token);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &reg->by_id);
        if (r >= 0)
                r = hashmap_new(HASHMAP_KEY_U64, &reg->per_uid);
        if (r >= 0)
                r = sd_event_add_time_relative(event, &reg->recheck, CLOCK_MONOTONIC, SHRINK_RECHECK_USEC,
                                               100 * USEC_PER_MSEC, on_recheck, reg);
        if (r >= 0) {
                (void) sd_event_source_set_description(reg->recheck, "shrinker-recheck");
                r = sd_event_source_set_enabled(reg->recheck, SD_EVENT_OFF);
        }
        if (r < 0) {
                shrink_registry_free(reg);
                return r;
        }
        *ret = reg;
        return 0;
}

struct shrink_registry *shrink_registry_free(struct shrink_registry *reg) {
        if (!reg)
                return NULL;
        while (reg->clients)
                shrink_client_free(reg->clients);
        hashmap_free(reg->by_token);
        hashmap_free(reg->by_id);
        hashmap_free(reg->per_uid);
        sd_event_source_disable_unref(reg->recheck);
        free(reg);
        return NULL;
}

void shrink_registry_set_exit_handler(struct shrink_registry *reg,
                                      void (*on_exit)(struct shrink_client *cl, void *userdata), void *userdata) {
        assert(reg);
        reg->on_exit = on_exit;
        reg->exit_userdata = userdata;
}

void shrink_registry_set_max_per_uid(struct shrink_registry *reg, unsigned max) {
        assert(reg);
        reg->max_shrinkers_per_uid = max;
}

int shrink_registry_add_observer(struct shrink_registry *reg, const struct shrink_registry_observer *ops,
                                 void *userdata) {
        assert(reg);

        if (reg->n_observers >= SHRINK_REGISTRY_OBSERVERS_MAX)
                return -ENOSPC;
        reg->observers[reg->n_observers].ops = ops;
        reg->observers[reg->n_observers].userdata = userdata;
        reg->n_observers++;
        return 0;
}
