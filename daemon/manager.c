/* SPDX-License-Identifier: MIT */
#include "manager.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "service.h"
#include "subscription.h"
#include "varlink.h"

#ifndef PRESSURED_VERSION
#define PRESSURED_VERSION "0"
#endif

static uint64_t now_usec(struct manager *m) {
        uint64_t t = 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &t);
        return t;
}

int manager_new(struct config *config, struct manager **ret) {
        struct manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return -ENOMEM;
        m->config = *config;
        *config = (struct config){};
        m->listen_fd = -EBADF;

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
        /* Connections first: their subscriptions hold references to scopes. */
        m->server = varlink_server_free(m->server);
        while (m->cgroups) {
                struct scope *s = m->cgroups;
                m->cgroups = s->next;
                scope_free(s);
        }
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                scope_free(m->node_scopes[i]);
        free(m->node_scopes);
        scope_free(m->system);
        node_monitor_free(m->nodes);
        sd_event_source_disable_unref(m->sample_timer);
        sd_event_source_disable_unref(m->gc_source);
        sd_event_source_disable_unref(m->sigterm_source);
        sd_event_source_disable_unref(m->sigint_source);
        sd_event_source_disable_unref(m->sighup_source);
        free(m->config_scopes);
        if (m->have_layout)
                cgroup_layout_done(&m->layout);
        config_done(&m->config);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

void manager_note_window_adjust(struct manager *m, const struct psi_trigger *want, const struct psi_trigger *used) {
        if (m->window_adjust_logged)
                return;
        m->window_adjust_logged = true;
        log_notice("The kernel refused a PSI window of %llu ms (no CAP_SYS_RESOURCE?); using %s %llu ms per %llu ms "
                   "windows instead, evaluated every 2 s.",
                   (unsigned long long) (want->window_usec / 1000), psi_kind_to_string(used->kind),
                   (unsigned long long) (used->stall_usec / 1000), (unsigned long long) (used->window_usec / 1000));
}

/* ---- sampling ---- */

static bool manager_any_active(struct manager *m, uint64_t now) {
        if (scope_is_active(m->system, now))
                return true;
        for (struct scope *s = m->cgroups; s; s = s->next)
                if (scope_is_active(s, now))
                        return true;
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                if (scope_is_active(m->node_scopes[i], now))
                        return true;
        return false;
}

static void manager_sample_nodes(struct manager *m, uint64_t now) {
        if (!m->nodes)
                return;
        int r = node_monitor_sample(m->nodes, now);
        if (r < 0) {
                log_warning_errno(r, "Failed to read node memory figures, ignoring: %m");
                return;
        }
        for (size_t i = 0; i < m->nodes->n_nodes; i++)
                scope_update_node(m->node_scopes[i], now);
}

/* Sampling under pressure wants its period; the idle node sample may slip by a tenth of its period so
 * that the kernel can batch it with other wake-ups. */
static void manager_set_timer(struct manager *m, uint64_t period, uint64_t now) {
        (void) sd_event_source_set_time_accuracy(m->sample_timer, MAX(period / 10, 1u));
        (void) sd_event_source_set_time(m->sample_timer, now + period);
}

static void manager_arm_timer(struct manager *m, uint64_t now) {
        if (manager_any_active(m, now))
                manager_set_timer(m, m->config.sample_interval_usec, now);
        else if (m->config.node_interval_usec > 0 && m->nodes)
                manager_set_timer(m, m->config.node_interval_usec, now);
        else {
                (void) sd_event_source_set_enabled(m->sample_timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_enabled(m->sample_timer, SD_EVENT_ONESHOT);
}

static int on_sample_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        (void) s;
        (void) usec;
        uint64_t now = now_usec(m);

        manager_sample_nodes(m, now);
        if (scope_is_active(m->system, now))
                scope_sample(m->system, now);
        for (struct scope *c = m->cgroups, *next; c; c = next) {
                next = c->next;
                if (scope_is_active(c, now))
                        scope_sample(c, now);
        }
        manager_arm_timer(m, now);
        return 0;
}

void manager_schedule_sampling(struct manager *m) {
        uint64_t now = now_usec(m), when = 0;
        int enabled = 0;

        /* Keep an earlier wake-up that is already set. */
        (void) sd_event_source_get_enabled(m->sample_timer, &enabled);
        if (enabled && sd_event_source_get_time(m->sample_timer, &when) >= 0 &&
            when <= now + m->config.sample_interval_usec)
                return;
        manager_set_timer(m, m->config.sample_interval_usec, now);
        (void) sd_event_source_set_enabled(m->sample_timer, SD_EVENT_ONESHOT);
}

/* ---- scopes ---- */

int manager_acquire_node(struct manager *m, int node, struct scope **ret) {
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                if (m->node_scopes[i]->node == node) {
                        m->node_scopes[i]->n_refs++;
                        *ret = m->node_scopes[i];
                        return 0;
                }
        return -ENXIO;
}

int manager_acquire_cgroup(struct manager *m, const char *path, struct scope **ret) {
        _cleanup_free_ char *p = NULL;
        struct scope *s;
        int r;

        r = cgroup_path_normalize(path, &p);
        if (r < 0)
                return r;
        if (!m->have_layout)
                return -ENOENT;

        for (s = m->cgroups; s; s = s->next)
                if (!s->gone && streq(s->cgroup, p)) {
                        s->n_refs++;
                        *ret = s;
                        return 0;
                }

        r = scope_new_cgroup(m, p, &s);
        if (r < 0)
                return r;
        s->n_refs = 1;
        s->next = m->cgroups;
        if (s->next)
                s->next->prev = s;
        m->cgroups = s;
        m->n_cgroups++;
        log_debug("Watching cgroup %s.", p);
        *ret = s;
        return 0;
}

/* Scopes are freed from the loop, never inside the call that dropped the last reference: a trigger's
 * POLLERR or a status read may find a cgroup gone while someone up the stack still holds the scope. */
static int on_gc(sd_event_source *src, void *userdata) {
        struct manager *m = userdata;
        (void) src;

        for (struct scope *s = m->cgroups, *next; s; s = next) {
                next = s->next;
                if (s->n_refs > 0)
                        continue;
                if (s->prev)
                        s->prev->next = s->next;
                else
                        m->cgroups = s->next;
                if (s->next)
                        s->next->prev = s->prev;
                m->n_cgroups--;
                log_debug("No longer watching cgroup %s.", s->name);
                scope_free(s);
        }
        return 0;
}

void manager_release_scope(struct manager *m, struct scope *s) {
        if (!s)
                return;
        if (s->n_refs > 0)
                s->n_refs--;
        if (s->n_refs == 0 && s->type == SCOPE_CGROUP)
                (void) sd_event_source_set_enabled(m->gc_source, SD_EVENT_ONESHOT);
}

/* ---- start-up ---- */

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        (void) s;
        log_info("Received %s, shutting down.", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        (void) sd_notify(0, "STOPPING=1");
        /* Subscribers get a last word rather than a bare close. */
        subscription_shutdown_all(m);
        return sd_event_exit(m->event, 0);
}

void manager_notify_status(struct manager *m) {
        (void) sd_notifyf(0, "STATUS=Watching memory pressure; system level %s, %zu cgroup%s watched, %zu client%s.",
                          level_to_string(m->system->level.level), m->n_cgroups, m->n_cgroups == 1 ? "" : "s",
                          m->server ? varlink_server_n_connections(m->server) : 0,
                          m->server && varlink_server_n_connections(m->server) == 1 ? "" : "s");
}

static void watch_config_cgroups(struct manager *m) {
        struct scope **list = calloc(MAX(m->config.n_cgroups, 1u), sizeof(struct scope *));
        size_t n = 0;
        if (!list) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < m->config.n_cgroups; i++) {
                struct scope *s;
                int r = manager_acquire_cgroup(m, m->config.cgroups[i], &s);
                if (r < 0)
                        log_warning_errno(r, "Cannot watch configured cgroup %s, ignoring: %m", m->config.cgroups[i]);
                else
                        list[n++] = s;
        }
        /* Release the old set only now: a cgroup in both keeps its trigger. */
        for (size_t i = 0; i < m->n_config_scopes; i++)
                manager_release_scope(m, m->config_scopes[i]);
        free(m->config_scopes);
        m->config_scopes = list;
        m->n_config_scopes = n;
}

int manager_reload(struct manager *m, struct config *c) {
        bool rearm = memcmp(&c->psi.t[LEVEL_LOW], &m->config.psi.t[LEVEL_LOW], sizeof(struct psi_trigger)) != 0;

        if ((c->socket_path || m->config.socket_path) &&
            (!c->socket_path || !m->config.socket_path || !streq(c->socket_path, m->config.socket_path)))
                log_notice("The socket path changes only when pressured restarts.");
        if (!streq(c->sysfs_root, m->config.sysfs_root))
                log_notice("sysfs_root changes only when pressured restarts.");

        /* Keep what cannot change while running; take everything else. */
        struct config old = m->config;
        m->config = *c;
        *c = (struct config){};
        free(m->config.socket_path);
        m->config.socket_path = old.socket_path;
        old.socket_path = NULL;
        free(m->config.sysfs_root);
        m->config.sysfs_root = old.sysfs_root;
        old.sysfs_root = NULL;
        config_done(&old);

        varlink_server_set_max_message_size(m->server, m->config.max_message_size);
        if (rearm) {
                int r = scope_rearm(m->system);
                if (r < 0)
                        log_warning_errno(r, "Failed to re-arm the system trigger: %m");
                for (struct scope *s = m->cgroups; s; s = s->next)
                        if ((r = scope_rearm(s)) < 0)
                                log_warning_errno(r, "Failed to re-arm the trigger of %s: %m", s->name);
        }
        watch_config_cgroups(m);
        manager_arm_timer(m, now_usec(m));
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
        log_info("Configuration reloaded.");
        (void) sd_notify(0, "READY=1");
        manager_notify_status(m);
        return 0;
}

/* A memory-pressure daemon must not itself be paged out under the pressure it reports. */
static void lock_memory(void) {
        if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
                log_warning_errno(-errno, "Cannot lock the daemon's memory (mlockall), carrying on: %m");
}

static int manager_default_socket(char **ret) {
        if (geteuid() == 0)
                return (*ret = strdup("/run/pressured/io.pressured")) ? 0 : -ENOMEM;
        const char *rt = getenv("XDG_RUNTIME_DIR");
        if (!rt || rt[0] != '/')
                return -ENXIO;
        return asprintf(ret, "%s/pressured/io.pressured", rt) < 0 ? -ENOMEM : 0;
}

static int mkdir_parent(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int manager_start(struct manager *m, int listen_fd) {
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

        /* PSI first: without it there is nothing to do. */
        r = scope_new_system(m, &m->system);
        if (r == -ENOENT || r == -EOPNOTSUPP)
                return log_error_errno(r, "Pressure Stall Information is not available (/proc/pressure/memory: %m). "
                                          "pressured needs a kernel built with CONFIG_PSI=y, and booted with psi=1 if "
                                          "it was built with CONFIG_PSI_DEFAULT_DISABLED=y.");
        if (r < 0)
                return log_error_errno(r, "Failed to watch system memory pressure: %m");
        m->system->n_refs = 1;

        if (m->config.lock_memory)
                lock_memory();

        /* One fd per client connection: take what the hard limit allows, as systemd does for services. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }

        r = cgroup_layout_discover(&m->layout);
        if (r < 0)
                log_warning_errno(r, "No cgroup v2 hierarchy found, cgroup scopes are unavailable: %m");
        else {
                m->have_layout = true;
                log_debug("cgroup v2 at %s, memory controller %s%s.", m->layout.v2_root,
                          m->layout.memory_root ? m->layout.memory_root : "not mounted",
                          m->layout.memory_root ? (m->layout.memory_v2 ? " (v2)" : " (v1)") : "");
        }

        r = node_monitor_new(m->config.sysfs_root, &m->nodes);
        if (r < 0)
                log_warning_errno(r, "Cannot enumerate NUMA nodes, node scopes are unavailable: %m");
        else {
                m->node_scopes = calloc(m->nodes->n_nodes, sizeof(struct scope *));
                if (!m->node_scopes)
                        return log_oom();
                for (size_t i = 0; i < m->nodes->n_nodes; i++) {
                        r = scope_new_node(m, i, &m->node_scopes[i]);
                        if (r < 0)
                                return log_oom();
                }
                r = node_monitor_sample(m->nodes, now_usec(m));
                if (r < 0)
                        return log_error_errno(r, "Failed to read node memory figures: %m");
                for (size_t i = 0; i < m->nodes->n_nodes; i++)
                        scope_update_node(m->node_scopes[i], now_usec(m));
        }

        watch_config_cgroups(m);

        r = sd_event_add_defer(m->event, &m->gc_source, on_gc, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add event source: %m");
        (void) sd_event_source_set_enabled(m->gc_source, SD_EVENT_OFF);

        r = sd_event_add_time(m->event, &m->sample_timer, CLOCK_MONOTONIC, 0, 0, on_sample_timer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add sampling timer: %m");
        (void) sd_event_source_set_description(m->sample_timer, "sample-timer");
        manager_arm_timer(m, now_usec(m));

        static const struct varlink_info info = {
                .vendor = "pressured",
                .product = "pressured",
                .version = PRESSURED_VERSION,
                .url = "",
        };
        r = varlink_server_new(m->event, service_interfaces, service_n_interfaces, &info, m, &m->server);
        if (r < 0)
                return log_oom();
        varlink_server_set_max_message_size(m->server, m->config.max_message_size);

        if (listen_fd >= 0) {
                r = varlink_server_listen_fd(m->server, listen_fd);
                if (r < 0)
                        return log_error_errno(r, "Failed to serve on the passed socket: %m");
                log_info("Serving on the socket passed by the service manager.");
        } else {
                _cleanup_free_ char *path = NULL;
                if (m->config.socket_path)
                        path = strdup(m->config.socket_path);
                else {
                        r = manager_default_socket(&path);
                        if (r == -ENXIO)
                                return log_error_errno(r, "Not running as root and XDG_RUNTIME_DIR is not set: "
                                                          "give a socket path with --socket.");
                }
                if (!path)
                        return log_oom();
                r = mkdir_parent(path);
                if (r < 0)
                        return log_error_errno(r, "Failed to create the directory of %s: %m", path);
                r = varlink_server_listen_path(m->server, path, 0666);
                if (r == -EADDRINUSE)
                        return log_error_errno(r, "Another pressured is already serving on %s.", path);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on %s: %m", path);
                log_info("Listening on %s.", path);
        }
        return 0;
}
