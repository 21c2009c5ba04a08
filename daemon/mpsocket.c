/* SPDX-License-Identifier: MIT */
#include "mpsocket.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "hashmap.h"
#include "list.h"
#include "log.h"
#include "pidref.h"
#include "macro.h"
#include "sockets.h"

/* What a client may write in all before it is closed. */
#define MPSOCKET_MAX_RECEIVED 4096u

struct mp_client {
        struct mpsocket *owner;
        struct mp_client *prev, *next;             /* all clients */
        struct mp_client *scope_prev, *scope_next; /* the clients of its scope (the scope's slot) */
        struct scope *scope;                       /* NULL once it went away: the connection stays */
        int fd;
        uid_t uid;
        size_t received; /* bytes it wrote: its threshold, and nothing more is expected */
        sd_event_source *source;
};

struct mpsocket {
        sd_event *event;
        const struct config *config;
        struct scope_registry *scopes;
        int slot;
        int listen_fd;
        struct listener *listener;
        struct connection_quota *quota; /* shared with the Varlink socket */
        char *path;
        struct mp_client *clients;
        size_t n_clients;
        struct hashmap *per_uid;
        struct ratelimit refuse_log;
};

SCOPE_SLOT_ACCESSORS(clients_slot, struct mp_client);

/* The head of the scope's client list. */
static struct mp_client *scope_clients(const struct mpsocket *mp, const struct scope *s) {
        return clients_slot_get(s, mp->slot);
}

static void client_detach(struct mp_client *c) {
        if (!c->scope)
                return;
        struct mp_client *head = scope_clients(c->owner, c->scope);
        LIST_REMOVE_F(scope_prev, scope_next, head, c);
        clients_slot_set(c->scope, c->owner->slot, head);
        scope_registry_release_for(c->owner->scopes, c->uid, c->scope);
        c->scope = NULL;
}

static void client_free(struct mp_client *c) {
        struct mpsocket *mp = c->owner;
        client_detach(c);
        sd_event_source_disable_unref(c->source);
        close(c->fd);
        LIST_REMOVE(mp->clients, c);
        mp->n_clients--;
        connection_quota_put(mp->quota, c->uid);
        (void) hashmap_count_add_u64(mp->per_uid, c->uid, -1);
        free(c);
}

/* What the client writes (its threshold) is read and dropped; its end is ours. */
static int on_client(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct mp_client *c = userdata;
        char buf[256];
        (void) src;

        /* A bounded read per wake-up: a client that keeps writing is read on at the next one, the others
         * served in between. */
        for (int i = 0; i < 64; i++) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n > 0) {
                        /* sd-event writes its threshold (MEMORY_PRESSURE_WRITE, a few dozen bytes) once:
                         * who writes more is not a client of this protocol, and costs no more than this. */
                        c->received += (size_t) n;
                        if (c->received > MPSOCKET_MAX_RECEIVED)
                                break;
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR) && !(revents & (EPOLLHUP | EPOLLERR)))
                        return 0;
                client_free(c); /* the client closed (or died): now it may go */
                return 0;
        }
        if (c->received > MPSOCKET_MAX_RECEIVED) {
                log_client(c->uid, LOG_NOTICE, "Memory pressure socket: closing a connection of uid %u that wrote "
                           "more than %u bytes.", (unsigned) c->uid, MPSOCKET_MAX_RECEIVED);
                client_free(c);
        }
        return 0;
}

/* The scope rose to the configured level: a line to each of its clients. A client that does not read
 * has data waiting already, which says the same: nothing is queued beyond what the socket holds. */
static void on_level_changed(struct scope *s, void *userdata) {
        struct mpsocket *mp = userdata;
        enum level at = mp->config->memory_pressure_level;
        static const char line[] = "memory pressure\n";

        if (!(scope_previous(s) < at && scope_level(s) >= at))
                return;
        for (struct mp_client *c = scope_clients(mp, s); c; c = c->scope_next)
                (void) send(c->fd, line, sizeof(line) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* The cgroup went away: the clients stay connected, told nothing more (closing would make an sd-event
 * client spin). */
static void on_gone(struct scope *s, void *userdata) {
        struct mpsocket *mp = userdata;
        for (struct mp_client *c; (c = scope_clients(mp, s));)
                client_detach(c);
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
        .gone = on_gone,
};

/* The scope a peer watches: its own cgroup (a process may always watch that), which counts against its
 * user's budget of watched cgroups; past it, the system's. */
static int client_scope(struct mpsocket *mp, const struct ucred *peer, struct scope **ret) {
        _cleanup_free_ char *cgroup = NULL;
        struct scope_id id = { .type = SCOPE_SYSTEM, .node = -1 };
        _cleanup_close_ int proc = pidref_open_proc_of_uid(peer->pid, peer->uid); /* not a successor's pid */
        if (proc >= 0 && cgroup_proc_get_path(proc, &cgroup) >= 0 && !streq(cgroup, "/"))
                id = (struct scope_id){ .type = SCOPE_CGROUP, .node = -1, .cgroup = cgroup };
        int r = scope_registry_acquire_for(mp->scopes, peer->uid, &id, ret);
        if (r < 0 && id.type == SCOPE_CGROUP) {
                log_debug_errno(r, "Memory pressure socket: cannot watch %s, the system's pressure instead: %m", cgroup);
                id = (struct scope_id){ .type = SCOPE_SYSTEM, .node = -1 };
                r = scope_registry_acquire_for(mp->scopes, peer->uid, &id, ret);
        }
        return r;
}

/* fresh: just accepted, so handed to the service manager's descriptor store (systemd keeps a copy, and
 * gives it back at the next start: the client's connection outlives a restart; the store drops a copy
 * once its peer hangs up). Adopted ones came from the store and are there already. */
static void client_new(struct mpsocket *mp, int fd, bool fresh) {
        struct ucred peer = { .pid = 0, .uid = (uid_t) -1 };
        socklen_t len = sizeof(peer);
        unsigned suppressed;
        uint64_t now = 0;
        const struct config *cfg = mp->config;

        (void) getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len);
        (void) sd_event_now(mp->event, CLOCK_MONOTONIC, &now);
        /* The same caps as the Varlink socket's: a connection is a descriptor and a watch. */
        if ((cfg->max_connections_per_uid > 0 && peer.uid != 0 &&
             hashmap_count_get_u64(mp->per_uid, peer.uid) >= cfg->max_connections_per_uid) ||
            !connection_quota_take(mp->quota, peer.uid)) {
                if (ratelimit_below(&mp->refuse_log, now, &suppressed))
                        log_notice("Memory pressure socket: refusing a connection of uid %u, over its limit.", (unsigned) peer.uid);
                close(fd);
                return;
        }

        struct scope *s = NULL;
        int r = client_scope(mp, &peer, &s);
        struct mp_client *c = r >= 0 ? calloc(1, sizeof(*c)) : NULL;
        if (!c || hashmap_count_add_u64(mp->per_uid, peer.uid, +1) < 0) {
                connection_quota_put(mp->quota, peer.uid);
                scope_registry_release_for(mp->scopes, peer.uid, s);
                free(c);
                close(fd);
                return;
        }
        *c = (struct mp_client){ .owner = mp, .scope = s, .fd = fd, .uid = peer.uid };
        if (sd_event_add_io(mp->event, &c->source, fd, EPOLLIN | EPOLLRDHUP, on_client, c) < 0) {
                (void) hashmap_count_add_u64(mp->per_uid, peer.uid, -1);
                connection_quota_put(mp->quota, peer.uid);
                scope_registry_release_for(mp->scopes, peer.uid, s);
                close(fd);
                free(c);
                return;
        }
        (void) sd_event_source_set_description(c->source, "memory-pressure-client");
        if (fresh && getenv("NOTIFY_SOCKET")) {
                r = sd_pid_notify_with_fds(0, false, "FDSTORE=1\nFDNAME=" MPSOCKET_FDNAME, &fd, 1);
                if (r <= 0)
                        log_debug_errno(r, "Memory pressure socket: cannot store a connection with the service manager, "
                                           "it will not outlive a restart: %m");
        }
        LIST_PREPEND(mp->clients, c);
        mp->n_clients++;
        struct mp_client *head = scope_clients(mp, s);
        LIST_PREPEND_F(scope_prev, scope_next, head, c);
        clients_slot_set(s, mp->slot, head);
        log_debug("Memory pressure socket: pid %d (uid %u) watches %s.", (int) peer.pid, (unsigned) peer.uid, scope_name(s));
}

static void on_accept(int fd, void *userdata) {
        client_new(userdata, fd, true);
}

int mpsocket_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                 struct connection_quota *quota, int listen_fd, const char *path, struct mpsocket **ret) {
        assert(event);

        struct mpsocket *mp = calloc(1, sizeof(*mp));
        if (!mp)
                return -ENOMEM;
        *mp = (struct mpsocket){ .event = event, .config = config, .scopes = scopes, .quota = quota, .listen_fd = -EBADF,
                                 .refuse_log = { .interval_usec = 10 * 1000000ULL, .burst = 5 } };
        int r = hashmap_new(HASHMAP_KEY_U64, &mp->per_uid);
        if (r >= 0 && listen_fd >= 0) {
                /* The service manager's: it made the file and removes it. */
                mp->listen_fd = listen_fd;
                r = fd_set_nonblock(listen_fd);
        } else if (r >= 0 && !(mp->path = strdup(path)))
                r = -ENOMEM;
        if (r >= 0 && listen_fd < 0) {
                /* A socket left by an earlier run is replaced; a live daemon's is not. */
                mp->listen_fd = r = unix_listen(path, 0666);
        }
        if (r >= 0)
                r = listener_new(event, mp->listen_fd, "memory-pressure-listen", on_accept, mp, &mp->listener);
        if (r >= 0)
                r = mp->slot = scope_registry_add_observer(scopes, &observer, mp);
        if (r < 0) {
                mpsocket_free(mp);
                return r;
        }
        *ret = mp;
        return 0;
}

struct mpsocket *mpsocket_free(struct mpsocket *mp) {
        if (!mp)
                return NULL;
        while (mp->clients)
                client_free(mp->clients);
        listener_free(mp->listener);
        if (mp->listen_fd >= 0) {
                close(mp->listen_fd);
                if (mp->path)
                        (void) unlink(mp->path);
        }
        hashmap_free(mp->per_uid);
        free(mp->path);
        free(mp);
        return NULL;
}

void mpsocket_adopt(struct mpsocket *mp, int fd) {
        assert(mp);

        (void) fd_set_nonblock(fd);
        client_new(mp, fd, false);
}

