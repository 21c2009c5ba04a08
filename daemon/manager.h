/* SPDX-License-Identifier: MIT */
#pragma once

/* The manager owns the event loop and everything hanging off it: the scopes, the sampling timer, the node
 * monitor and the Varlink server. */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "cgroup.h"
#include "config.h"
#include "node_monitor.h"
#include "scope.h"

struct varlink_server;

struct manager {
        sd_event *event;
        struct config config;
        struct cgroup_layout layout;
        bool have_layout;
        struct node_monitor *nodes;

        struct scope *system;
        struct scope **node_scopes; /* one per node monitor entry */
        struct scope *cgroups;      /* list */
        size_t n_cgroups;

        bool psi_unprivileged;   /* the kernel wants 2 s window steps from us */
        bool window_adjust_logged;

        sd_event_source *sample_timer;
        sd_event_source *gc_source; /* frees cgroup scopes nobody watches */
        sd_event_source *sigterm_source, *sigint_source, *sighup_source;
        struct scope **config_scopes; /* cgroups watched because the configuration lists them */
        size_t n_config_scopes;
        /* Reads the configuration again (file, then command line) for SIGHUP. */
        int (*reload)(struct config *ret, char **ret_error);
        struct varlink_server *server;

        struct shrink_client *shrink_clients; /* registered client shrinkers */
        uint64_t last_shrinker_id, last_request_id;
        int listen_fd; /* passed by systemd, or -EBADF */
};

int manager_new(struct config *config, struct manager **ret); /* takes over *config */
struct manager *manager_free(struct manager *m);

/* Discover the machine, arm the system trigger, watch the configured cgroups, listen. */
int manager_start(struct manager *m, int listen_fd);

/* Re-arm the sampling timer after something became active (a trigger fired). */
void manager_schedule_sampling(struct manager *m);

/* Scopes for subscribers. A cgroup scope is created on first use and freed with its last reference,
 * which closes its trigger. Returns -ENOENT for a cgroup that does not exist, -EINVAL for a bad path,
 * -ENXIO for an unknown node. */
int manager_acquire_cgroup(struct manager *m, const char *path, struct scope **ret);
int manager_acquire_node(struct manager *m, int node, struct scope **ret);
void manager_release_scope(struct manager *m, struct scope *s);

/* Tell the service manager the system's level (STATUS=). */
void manager_notify_status(struct manager *m);

/* Apply a new configuration without dropping clients. Takes over *config on success. */
int manager_reload(struct manager *m, struct config *config);

/* The log line for a window the kernel refused, once per daemon. */
void manager_note_window_adjust(struct manager *m, const struct psi_trigger *want, const struct psi_trigger *used);
