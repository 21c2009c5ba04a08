/* SPDX-License-Identifier: MIT */
#include "shrinker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "reclaim.h"
#include "varlink.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static int pidfd_open(pid_t pid) {
        long fd = syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : (int) fd;
}

static bool pidfd_alive(int pidfd) {
        return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
}

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

static void shrinker_free(struct shrinker *sh) {
        if (!sh)
                return;
        free(sh->name);
        free(sh->last_count);
        free(sh->last_bytes);
        free(sh->deferred);
        free(sh);
}

/* The process exited: its connection may linger (inherited by a child), its shrinkers must not. */
static int on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct shrink_client *cl = userdata;
        (void) s;
        (void) fd;
        (void) revents;
        log_debug("Shrinker client pid %d exited.", (int) cl->pid);
        varlink_connection_close(cl->conn);
        return 0;
}

/* Everything a client holds; also for one that was never fully set up. */
static void client_destroy(struct shrink_client *cl) {
        for (size_t i = 0; i < cl->n_watched; i++)
                manager_release_scope(cl->manager, cl->watched[i]);
        free(cl->watched);
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                shrinker_free(cl->shrinkers[i]);
        free(cl->shrinkers);
        sd_event_source_disable_unref(cl->pidfd_source);
        if (cl->pidfd >= 0)
                close(cl->pidfd);
        free(cl->cgroup);
        free(cl);
}

/* A limit on the client's cgroup or on any ancestor makes reclaim in that cgroup: watch them all, so
 * that MEMCG_AWARE shrinkers are asked whichever of them runs short. */
static void watch_ancestors(struct shrink_client *cl) {
        bool memcg = false;
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                if (cl->shrinkers[i]->flags & SHRINKER_MEMCG_AWARE)
                        memcg = true;
        if (!memcg || streq(cl->cgroup, "/"))
                return;

        size_t depth = 0;
        for (const char *p = cl->cgroup; *p; p++)
                depth += *p == '/';
        cl->watched = calloc(depth, sizeof(struct scope *));
        if (!cl->watched)
                return;

        _cleanup_free_ char *path = strdup(cl->cgroup);
        while (path && !streq(path, "/") && *path) {
                struct scope *s;
                int r = manager_acquire_cgroup(cl->manager, path, &s);
                if (r >= 0)
                        cl->watched[cl->n_watched++] = s;
                else
                        log_debug_errno(r, "Cannot watch cgroup %s for shrinkers of pid %d: %m", path, (int) cl->pid);
                char *slash = strrchr(path, '/');
                if (!slash || slash == path)
                        break;
                *slash = 0;
        }
}

int shrink_client_new(struct manager *m, struct varlink_connection *c, const struct shrinker_spec *specs, size_t n,
                      struct shrink_client **ret) {
        const struct ucred *peer = varlink_connection_peer(c);
        int r;

        if (peer->pid <= 0)
                return -ESRCH;

        struct shrink_client *cl = calloc(1, sizeof(*cl));
        if (!cl)
                return -ENOMEM;
        cl->manager = m;
        cl->conn = c;
        cl->pid = peer->pid;
        cl->uid = peer->uid;
        cl->pidfd = -EBADF;

        /* Pin the process first, then read its cgroup, then check the pin still holds: the cgroup we read
         * belongs to the process that owns the connection, not to a recycled pid. */
        r = pidfd_open(cl->pid);
        if (r < 0)
                goto fail;
        cl->pidfd = r;
        r = cgroup_pid_get_path(cl->pid, &cl->cgroup);
        if (r < 0)
                goto fail;
        if (!pidfd_alive(cl->pidfd)) {
                r = -ESRCH;
                goto fail;
        }
        r = make_token(cl->token);
        if (r < 0)
                goto fail;
        r = sd_event_add_io(m->event, &cl->pidfd_source, cl->pidfd, EPOLLIN, on_pidfd, cl);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(cl->pidfd_source, "shrinker-client-pidfd");

        size_t n_nodes = m->nodes ? m->nodes->n_nodes : 1;
        cl->shrinkers = calloc(MAX(n, 1u), sizeof(struct shrinker *));
        if (!cl->shrinkers) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < n; i++) {
                struct shrinker *sh = calloc(1, sizeof(*sh));
                if (!sh) {
                        r = -ENOMEM;
                        goto fail;
                }
                cl->shrinkers[cl->n_shrinkers++] = sh;
                sh->client = cl;
                sh->id = ++m->last_shrinker_id;
                sh->flags = specs[i].flags;
                sh->seeks = specs[i].seeks;
                sh->batch = specs[i].batch;
                sh->n_nodes = (sh->flags & SHRINKER_NUMA_AWARE) ? n_nodes : 1;
                sh->name = strdup(specs[i].name);
                sh->last_count = calloc(sh->n_nodes, sizeof(uint64_t));
                sh->last_bytes = calloc(sh->n_nodes, sizeof(uint64_t));
                sh->deferred = calloc(sh->n_nodes, sizeof(uint64_t));
                if (!sh->name || !sh->last_count || !sh->last_bytes || !sh->deferred) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        watch_ancestors(cl);

        cl->next = m->shrink_clients;
        if (cl->next)
                cl->next->prev = cl;
        m->shrink_clients = cl;
        log_info("pid %d (uid %u, cgroup %s) registered %zu shrinker%s.", (int) cl->pid, (unsigned) cl->uid,
                 cl->cgroup, n, n == 1 ? "" : "s");
        *ret = cl;
        return 0;

fail:
        client_destroy(cl);
        return r;
}

void shrink_client_free(struct shrink_client *cl) {
        if (!cl)
                return;
        struct manager *m = cl->manager;

        cl->dead = true;
        reclaim_client_gone(cl);
        if (cl->prev)
                cl->prev->next = cl->next;
        else if (m->shrink_clients == cl)
                m->shrink_clients = cl->next;
        if (cl->next)
                cl->next->prev = cl->prev;

        log_info("pid %d unregistered %zu shrinker%s.", (int) cl->pid, cl->n_shrinkers, cl->n_shrinkers == 1 ? "" : "s");
        client_destroy(cl);
}

struct shrink_client *shrink_client_by_token(struct manager *m, const char *token) {
        for (struct shrink_client *cl = m->shrink_clients; cl; cl = cl->next)
                if (!cl->dead && streq(cl->token, token))
                        return cl;
        return NULL;
}

struct shrinker *shrinker_by_id(struct manager *m, uint64_t id) {
        for (struct shrink_client *cl = m->shrink_clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++)
                        if (cl->shrinkers[i]->id == id)
                                return cl->shrinkers[i];
        return NULL;
}
