/* SPDX-License-Identifier: MIT */
#pragma once

/* The composition root: the event loop, the configuration, the machine's layout, and the modules wired
 * together (registries, observers, reclaim, the Varlink service and server). It holds no domain state of
 * its own; signals and reloads are its only decisions. */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "listener.h"
#include "cgroup.h"
#include "config.h"
#include "node_monitor.h"

struct scope_registry;
struct shrink_registry;
struct subscriptions;
struct notifier;
struct sampler;
struct lowmem;
struct mpsocket;
struct metrics;
struct reclaim;
struct proactive;
struct service;
struct varlink_server;

struct manager {
        sd_event *event;
        struct config config;
        struct cgroup_layout layout;
        bool have_layout;
        char *socket_dir; /* the socket's directory, when the daemon made it: removed at exit */
        struct node_monitor *nodes;

        struct scope_registry *scopes;
        struct shrink_registry *shrinkers;
        struct subscriptions *subscriptions;
        struct notifier *notifier;
        struct metrics *metrics;
        struct lowmem *lowmem;
        struct mpsocket *mpsocket;
        struct sampler *sampler;
        struct reclaim *reclaim;
        struct proactive *proactive; /* reclaim_cgroup= */
        struct service *service;
        struct varlink_server *server;
        struct connection_quota quota; /* the connections of both sockets together */

        /* connections of the memory pressure socket from the service manager's descriptor store */
        int *stored_fds;
        size_t n_stored_fds;
        int mp_listen_fd; /* its listening socket, from pressured-memory-pressure.socket; -1: none */

        sd_event_source *sigterm_source, *sigint_source, *sighup_source;
        /* Reads the configuration again (file, then command line) for SIGHUP. */
        int (*reload)(struct config *ret, char **ret_error);
};

int manager_new(struct config *config, struct manager **ret); /* takes over *config */
struct manager *manager_free(struct manager *m);

/* Discover the machine, arm the system trigger, watch the configured cgroups, listen on listen_fd (passed
 * by the service manager) or, when it is negative, on the configured path. Returns -ENOENT or -EOPNOTSUPP
 * with manager_has_psi() false when the kernel has no PSI. */
int manager_start(struct manager *m, int listen_fd);
bool manager_has_psi(const struct manager *m);
/* A descriptor the service manager passed, by its name: the memory pressure socket's listener
 * (MPSOCKET_LISTEN_FDNAME) or a connection of it kept from the last run (MPSOCKET_FDNAME) is the
 * manager's from now on (true; closed if it cannot be kept); another is the caller's (false). */
bool manager_adopt_fd(struct manager *m, int fd, const char *name);
/* How SIGHUP reads the configuration again. */
void manager_set_reload(struct manager *m, int (*reload)(struct config *ret, char **ret_error));

/* Apply a new configuration without dropping clients. Takes over *config. */
int manager_reload(struct manager *m, struct config *config);
