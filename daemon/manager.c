/* SPDX-License-Identifier: MIT */
#include "manager.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "lowmem.h"
#include "metrics.h"
#include "mpsocket.h"
#include "macro.h"
#include "notifier.h"
#include "proactive.h"
#include "reclaim.h"
#include "sampler.h"
#include "scope_registry.h"
#include "service.h"
#include "shrinker.h"
#include "subscription.h"
#include "varlink.h"

#ifndef PRESSURED_VERSION
#define PRESSURED_VERSION "0"
#endif

int manager_new(struct config *config, struct manager **ret) {
        assert(config);

        struct manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        m->config = *config;
        *config = (struct config){};
        m->mp_listen_fd = -EBADF;

        r = sd_event_default(&m->event);
        if (r < 0) {
                manager_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

struct manager *manager_free(struct manager *m) {
        if (!m)
                return NULL;
        /* Connections first: their subscriptions and clients hold references to scopes. Then the scope
         * registry, which tells its observers about every scope it frees; then the observers. */
        m->server = varlink_server_free(m->server); /* removes the socket */
        m->mpsocket = mpsocket_free(m->mpsocket);    /* and this one */
        for (size_t i = 0; i < m->n_stored_fds; i++)
                if (m->stored_fds[i] >= 0)
                        close(m->stored_fds[i]);
        free(m->stored_fds);
        if (m->mp_listen_fd >= 0)
                close(m->mp_listen_fd);
        if (m->socket_dir) {
                (void) rmdir(m->socket_dir); /* made by us, and empty unless someone put something there */
                free(m->socket_dir);
        }
        m->lowmem = lowmem_free(m->lowmem); /* its bus peers hold scopes */
        m->shrinkers = shrink_registry_free(m->shrinkers);
        m->scopes = scope_registry_free(m->scopes);
        m->metrics = metrics_free(m->metrics); /* after the scopes: it lets go of their slots as they go */
        m->reclaim = reclaim_free(m->reclaim);
        m->proactive = proactive_free(m->proactive);
        m->service = service_free(m->service);
        m->sampler = sampler_free(m->sampler);
        m->notifier = notifier_free(m->notifier);
        m->subscriptions = subscriptions_free(m->subscriptions);
        node_monitor_free(m->nodes);
        sd_event_source_disable_unref(m->sigterm_source);
        sd_event_source_disable_unref(m->sigint_source);
        sd_event_source_disable_unref(m->sighup_source);
        if (m->have_layout)
                cgroup_layout_done(&m->layout);
        config_done(&m->config);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

bool manager_has_psi(const struct manager *m) {
        assert(m);

        return m->scopes && m->scopes->system;
}

bool manager_adopt_fd(struct manager *m, int fd, const char *name) {
        assert(m);

        if (name && streq(name, MPSOCKET_LISTEN_FDNAME) && m->mp_listen_fd < 0) {
                m->mp_listen_fd = fd;
                return true;
        }
        if (!name || !streq(name, MPSOCKET_FDNAME))
                return false;
        int *a = realloc(m->stored_fds, (m->n_stored_fds + 1) * sizeof(int));
        if (!a) {
                close(fd);
                return true;
        }
        m->stored_fds = a;
        m->stored_fds[m->n_stored_fds++] = fd;
        return true;
}

void manager_set_reload(struct manager *m, int (*reload)(struct config *ret, char **ret_error)) {
        assert(m);
        m->reload = reload;
}

/* ---- signals and reload ---- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        (void) s;
        log_info("Received %s, shutting down.", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        (void) sd_notify(0, "STOPPING=1");
        /* Subscribers get a last word rather than a bare close. */
        subscriptions_shutdown(m->subscriptions);
        return sd_event_exit(m->event, 0);
}

/* Keep what cannot change while running (config_restart_only_changed() names it); take everything else. */
static void config_take_reloadable(struct config *cur, struct config *c) {
        _cleanup_free_ char *kept = NULL;
        if (config_restart_only_changed(cur, c, &kept) < 0)
                log_oom();
        if (kept)
                log_notice("Configuration reloaded, but a change of %s takes effect only when pressured restarts.",
                           kept);
        else
                log_info("Configuration reloaded.");

        config_take(cur, c);
}

/* Descriptors kept for the daemon's own work beyond its connections: triggers of watched cgroups, the
 * files it reads, shrink clients' pidfds and statm files, the journal. */
#define FDS_RESERVED 256

/* Connections fit the descriptors the daemon may have, with its own work's reserve kept free of them:
 * a crowd of clients must not leave it unable to open a PSI file. */
static unsigned connections_that_fit(unsigned wanted) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return wanted;
        rlim_t room = rl.rlim_cur > 2 * FDS_RESERVED ? rl.rlim_cur - FDS_RESERVED : rl.rlim_cur / 2;
        if (room >= wanted)
                return wanted;
        log_notice("max_connections lowered from %u to %llu: RLIMIT_NOFILE is %llu and %u descriptors are kept for "
                   "the daemon's own work.",
                   wanted, (unsigned long long) room, (unsigned long long) rl.rlim_cur, FDS_RESERVED);
        return (unsigned) room;
}

static void manager_set_server_limits(struct manager *m) {
        /* Both sockets' connections together fit what is left after the reserve. */
        connection_quota_set_max(&m->quota, connections_that_fit(m->config.max_connections));
        if (m->shrinkers)
                shrink_registry_set_max_per_uid(m->shrinkers, m->config.max_shrinkers_per_uid);
        varlink_server_set_max_message_size(m->server, m->config.max_message_size);
        varlink_server_set_quota(m->server, &m->quota);
        (void) varlink_server_set_limits(m->server, &(struct varlink_limits){
                .max_connections = m->quota.max,
                .max_connections_per_uid = m->config.max_connections_per_uid,
                .idle_timeout_usec = m->config.idle_timeout_usec,
                .max_buffered = m->config.max_buffered,
        });
}

int manager_reload(struct manager *m, struct config *c) {
        assert(m);

        bool rearm = memcmp(&c->psi.t[LEVEL_LOW], &m->config.psi.t[LEVEL_LOW], sizeof(struct psi_trigger)) != 0;

        /* Every module reads the configuration through m->config: replacing it in place is the reload.
         * The level first, so that the reload's own lines follow it (and a SetLogLevel ends here). */
        log_set_max_level(c->log_level);
        config_take_reloadable(&m->config, c);
        manager_set_server_limits(m);
        (void) metrics_set_directory(m->metrics, m->config.metrics_directory);
        if (rearm)
                scope_registry_rearm(m->scopes);
        scope_registry_watch_configured(m->scopes);
        sampler_arm(m->sampler);
        proactive_reconfigure(m->proactive);
        return 0;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        struct config c;
        _cleanup_free_ char *err = NULL;
        (void) s;
        (void) si;

        (void) sd_notify(0, "RELOADING=1");
        if (!m->reload || m->reload(&c, &err) < 0) {
                log_error("Configuration not reloaded, the old one stays in force: %s", err ? err : "no reload hook");
                (void) sd_notify(0, "READY=1");
                return 0;
        }
        manager_reload(m, &c);
        config_done(&c);
        (void) sd_notify(0, "READY=1");
        notifier_status(m->notifier);
        return 0;
}

static int setup_signals(struct manager *m) {
        sigset_t ss;
        int r;

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGHUP);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        r = sd_event_add_signal(m->event, &m->sigterm_source, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, &m->sigint_source, SIGINT, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, &m->sighup_source, SIGHUP, on_sighup, m);
        /* WATCHDOG=1 pings at half of WatchdogSec=, when the service manager asks for them. */
        if (r >= 0)
                r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");
        return 0;
}

/* ---- the process ---- */

/* A memory-pressure daemon must not itself be paged out under the pressure it reports: its code, its
 * libraries and what it set up before serving are locked (as they are faulted in). Not what clients make
 * it allocate later (MCL_FUTURE would lock that too): 800 connections with 60 KiB of unterminated input
 * each locked 115 MB of a machine short of memory. */
static void lock_memory(void) {
        if (mlockall(MCL_CURRENT | MCL_ONFAULT) < 0)
                log_warning_errno(-errno, "Cannot lock the daemon's memory (mlockall), carrying on: %m");
}

/* One fd per client connection: take what the hard limit allows, as systemd does for services. */
static void raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* ---- the machine ---- */

static void discover_cgroups(struct manager *m) {
        int r = cgroup_layout_discover(&m->layout);
        if (r < 0) {
                log_warning_errno(r, "No cgroup v2 hierarchy found, cgroup scopes are unavailable: %m");
                return;
        }
        m->have_layout = true;
        log_debug("cgroup v2 at %s, memory controller %s%s.", m->layout.v2_root,
                  m->layout.memory_root ? m->layout.memory_root : "not mounted",
                  m->layout.memory_root ? (m->layout.memory_v2 ? " (v2)" : " (v1)") : "");
}

static void discover_nodes(struct manager *m) {
        int r = node_monitor_new(m->config.sysfs_root, &m->nodes);
        if (r < 0)
                log_warning_errno(r, "Cannot enumerate NUMA nodes, node scopes are unavailable: %m");
}

/* ---- wiring ---- */

static size_t count_connections(void *userdata) {
        struct manager *m = userdata;
        return m->server ? varlink_server_n_connections(m->server) : 0;
}

static size_t count_subscriptions(void *userdata) {
        struct manager *m = userdata;
        return m->subscriptions ? subscriptions_count(m->subscriptions) : 0;
}

/* Observers see a level change in the order they are added: subscribers first (event latency is what
 * they measure), then the journal and STATUS=, then reclaim; the sampler only cares about triggers. */
static int wire_modules(struct manager *m) {
        const struct cgroup_layout *layout = m->have_layout ? &m->layout : NULL;
        int r;

        r = scope_registry_new(m->event, &m->config, layout, m->nodes, &m->scopes);
        if (r >= 0 && m->config.system_pressure[0])
                scope_registry_set_system_pressure(m->scopes, m->config.system_pressure);
        if (r >= 0)
                r = subscriptions_new(m->scopes, &service_subscription_sink, &m->subscriptions);
        if (r >= 0)
                r = notifier_new(m->scopes, count_connections, m, &m->notifier);
        if (r >= 0)
                r = shrink_registry_new(m->event, m->scopes, m->nodes, &m->shrinkers);
        if (r >= 0)
                r = service_new(m->scopes, m->subscriptions, m->shrinkers, layout, &m->config, &m->service);
        if (r >= 0)
                r = reclaim_new(m->event, &m->config, m->scopes, m->shrinkers, &service_reclaim_transport, m->service,
                                &m->reclaim);
        if (r >= 0)
                r = sampler_new(m->event, &m->config, m->scopes, m->nodes, &m->sampler);
        if (r >= 0)
                r = proactive_new(m->event, &m->config, layout, &m->proactive);
        if (r >= 0) {
                const struct metrics_sources src = { .scopes = m->scopes, .nodes = m->nodes, .shrinkers = m->shrinkers, .reclaim = m->reclaim,
                                                     .proactive = m->proactive,
                                                     .n_subscriptions = count_subscriptions,
                                                     .n_connections = count_connections, .userdata = m };
                r = metrics_new(m->event, &m->config, &src, &m->metrics);
        }
        if (r >= 0)
                r = lowmem_new(m->event, &m->config, m->scopes, &m->lowmem);
        if (r < 0)
                return log_error_errno(r, "Failed to set up: %m");
        service_set_reclaim(m->service, m->reclaim);
        return 0;
}

static int start_scopes(struct manager *m) {
        /* PSI first: without it there is nothing to do. */
        int r = scope_registry_start(m->scopes);
        if (r == -ENOENT || r == -EOPNOTSUPP)
                return log_error_errno(r, "Pressure Stall Information is not available (/proc/pressure/memory: %m). "
                                          "pressured needs a kernel built with CONFIG_PSI=y, and booted with psi=1 if "
                                          "it was built with CONFIG_PSI_DEFAULT_DISABLED=y.");
        if (r < 0)
                return log_error_errno(r, "Failed to watch system memory pressure: %m");

        r = sampler_sample_nodes(m->sampler);
        if (r < 0)
                return log_error_errno(r, "Failed to read node memory figures: %m");
        scope_registry_watch_configured(m->scopes);
        sampler_arm(m->sampler);
        return 0;
}

/* ---- listening ---- */

static int default_socket_path(char **ret) {
        if (geteuid() == 0)
                return (*ret = strdup("/run/pressured/io.pressured")) ? 0 : -ENOMEM;
        const char *rt = getenv("XDG_RUNTIME_DIR");
        if (!rt || rt[0] != '/')
                return -ENXIO;
        return asprintf(ret, "%s/pressured/io.pressured", rt) < 0 ? -ENOMEM : 0;
}

/* The socket's directory; *ret_created is set to it when this call made it (removed again at exit). */
static int mkdir_parent(const char *path, char **ret_created) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        if (mkdir(dir, 0755) < 0)
                return errno == EEXIST ? 0 : -errno;
        *ret_created = TAKE_PTR(dir);
        return 0;
}

/* The $MEMORY_PRESSURE_WATCH socket: where configured, or beside the Varlink socket. */
static int start_mpsocket(struct manager *m, const char *varlink_path) {
        _cleanup_free_ char *path = NULL;
        const char *conf = m->config.memory_pressure_socket;

        if (m->mp_listen_fd >= 0)
                path = strdup("(passed by the service manager)");
        else if (conf && !conf[0])
                return 0;
        else if (conf)
                path = strdup(conf);
        else if (varlink_path) {
                /* Beside the socket: "memory-pressure" next to the usual name, "<socket>-memory-pressure"
                 * next to any other, so that two daemons sharing a directory do not collide. */
                const char *slash = strrchr(varlink_path, '/');
                int n = streq(slash + 1, "io.pressured")
                                ? asprintf(&path, "%.*s/memory-pressure", (int) (slash - varlink_path), varlink_path)
                                : asprintf(&path, "%s-memory-pressure", varlink_path);
                if (n < 0)
                        path = NULL;
        } else
                path = strdup(geteuid() == 0 ? "/run/pressured/memory-pressure" : "");
        if (!path)
                return log_oom();
        if (!path[0])
                return 0;
        int r = mpsocket_new(m->event, &m->config, m->scopes, &m->quota, m->mp_listen_fd, path, &m->mpsocket);
        if (r >= 0)
                m->mp_listen_fd = -EBADF; /* the mpsocket's now */
        if (r < 0) {
                /* Programs still get the kernel's own triggers: not a reason to stop. */
                log_warning_errno(r, "Failed to listen for memory pressure clients on %s, going on without: %m", path);
                return 0;
        }
        for (size_t i = 0; i < m->n_stored_fds; i++)
                mpsocket_adopt(m->mpsocket, TAKE_FD(m->stored_fds[i]));
        log_info("Memory pressure clients ($MEMORY_PRESSURE_WATCH) on %s%s", path,
                 m->n_stored_fds > 0 ? ", with the connections of the last run." : ".");
        return 0;
}

static int listen_path(struct manager *m) {
        _cleanup_free_ char *path = NULL;
        int r = 0;

        if (m->config.socket_path)
                path = strdup(m->config.socket_path);
        else
                r = default_socket_path(&path);
        if (r == -ENXIO)
                return log_error_errno(r, "Not running as root and XDG_RUNTIME_DIR is not set: give a socket path "
                                          "with --socket.");
        if (!path)
                return log_oom();
        r = mkdir_parent(path, &m->socket_dir);
        if (r < 0)
                return log_error_errno(r, "Failed to create the directory of %s: %m", path);
        r = varlink_server_listen_path(m->server, path, 0666);
        if (r == -EADDRINUSE)
                return log_error_errno(r, "Another pressured is already serving on %s.", path);
        if (r < 0)
                return log_error_errno(r, "Failed to listen on %s: %m", path);
        log_info("Listening on %s.", path);
        return start_mpsocket(m, path);
}

static int start_server(struct manager *m, int listen_fd) {
        static const struct varlink_info info = {
                .vendor = "pressured",
                .product = "pressured",
                .version = PRESSURED_VERSION,
                .url = "",
        };
        int r = varlink_server_new(m->event, service_interfaces, service_n_interfaces, &info, m->service, &m->server);
        if (r < 0)
                return log_oom();
        manager_set_server_limits(m);

        if (listen_fd < 0)
                return listen_path(m);
        r = varlink_server_listen_fd(m->server, listen_fd);
        if (r < 0)
                return log_error_errno(r, "Failed to serve on the passed socket: %m");
        log_info("Serving on the socket passed by the service manager.");
        return start_mpsocket(m, NULL);
}

int manager_start(struct manager *m, int listen_fd) {
        assert(m);

        int r;

        r = setup_signals(m);
        if (r < 0)
                return r;
        discover_cgroups(m);
        discover_nodes(m);
        r = wire_modules(m);
        if (r < 0)
                return r;
        r = start_scopes(m);
        if (r < 0)
                return r;
        if (m->config.lock_memory)
                lock_memory();
        raise_fd_limit();
        return start_server(m, listen_fd);
}
