/* SPDX-License-Identifier: MIT */
#pragma once

/* /etc/pressured.conf and the command-line options that override it. Keys are documented in
 * docs/configuration.md; parsing is pure so it is unit-tested. */

#include <stddef.h>
#include <stdint.h>

#include "headroom.h"
#include "level.h"
#include "shrink_policy.h"

#define CONFIG_DEFAULT_PATH "/etc/pressured.conf"

struct config {
        char *socket_path; /* NULL: the default for the user the daemon runs as */
        size_t max_message_size;
        /* what local users may hold of the server: see varlink_server_set_limits() */
        unsigned max_connections, max_connections_per_uid;
        size_t max_buffered; /* all connections' buffers together */
        unsigned max_cgroups_per_uid; /* cgroups one user other than root may have watched */
        unsigned max_cgroups_users;   /* and all users other than root together */
        unsigned max_shrinkers_per_uid; /* shrinkers one user other than root may register */
        uint64_t idle_timeout_usec; /* 0: never */
        uint64_t sample_interval_usec; /* sampling while a scope is above ok */
        uint64_t node_interval_usec;   /* sampling of node figures while everything is ok; 0: never */
        uint64_t hold_usec;            /* hysteresis: how long pressure must stay below a level to fall */
        struct level_psi_thresholds psi;
        struct level_node_thresholds node;
        /* headroom, the second source of cgroup and system levels (docs/levels.md) */
        bool headroom;                          /* on (default) */
        struct headroom_thresholds headroom_at; /* fractions of the nearest limit */
        uint64_t headroom_interval_usec;        /* the quickest look while a group nears its threshold */
        uint64_t headroom_max_interval_usec;    /* the slowest, far from it */
        char **cgroups; /* watched from start-up */
        size_t n_cgroups;
        char *sysfs_root; /* prefix for /proc and /sys node files; "" for the running system */
        char *system_pressure; /* the PSI file of the system scope; "": /proc/pressure/memory (tests: a quiet one) */

        /* client shrinkers */
        uint64_t round_interval_usec;  /* between reclaim rounds while a scope stays above ok */
        uint64_t round_budget_usec;    /* a round's jobs still unfinished after this are cut; 0: none */
        uint64_t request_timeout_usec; /* deadline of one count or scan request */
        unsigned quarantine_after;     /* timeouts in a row before a shrinker is quarantined */
        uint64_t empty_backoff_usec;   /* a shrinker that answered EMPTY is not asked in rounds for this long */
        struct shrink_priorities priorities;
        /* the regulator (docs/shrinkers.md): between alarms, while a scope's stall is over its budget,
         * the shrinkers in it are asked for small steps */
        uint64_t regulate_budget_usec;       /* µs of `some` stall per second; 0: no regulation */
        uint64_t regulate_interval_usec;     /* how often the stall of a scope with shrinkers is read */
        unsigned regulate_step_max_permille; /* the largest step, of what the shrinkers in scope hold */
        struct config_regulate_cgroup {
                char *pattern; /* a cgroup v2 path or an fnmatch() glob; a path covers its subtree */
                uint64_t budget_usec;
        } *regulate_cgroups; /* in file order: the last that matches wins */
        size_t n_regulate_cgroups;
        /* proactive reclaim (docs/adapters.md): cgroups (v2 paths or globs) whose reclaimable memory the
         * daemon takes through memory.reclaim, in steps, while their stall is under their budget */
        char **reclaim_cgroups;
        size_t n_reclaim_cgroups;
        /* value_cgroup=: paths or globs (each covering its subtree) whose shrinkers' values are compared
         * across uids (value_split.h); elsewhere only one uid's shrinkers with each other */
        char **value_cgroups;
        size_t n_value_cgroups;

        int log_level;    /* LOG_ERR ... LOG_DEBUG: what is logged (SetLogLevel changes it until a reload) */
        bool lock_memory; /* mlockall() at start-up */
        char *metrics_directory; /* a Prometheus textfile collector's directory; NULL or "": no metrics */
        /* systemd's $MEMORY_PRESSURE_WATCH endpoint: NULL, the Varlink socket's directory; "": none */
        char *memory_pressure_socket;
        enum level memory_pressure_level; /* a line to its clients on each rise to this level */
        bool low_memory_monitor;                 /* org.freedesktop.LowMemoryMonitor on the system bus */
        uint64_t low_memory_monitor_repeat_usec; /* the same LowMemoryWarning level at most this often */
};

void config_init(struct config *c);
void config_done(struct config *c);

/* Set one key as the file would. On error returns a negative errno and, if ret_error is set, a message. */
int config_set(struct config *c, const char *key, const char *value, char **ret_error);

/* What is taken but probably not meant (a key set twice, a section of someone else's): "<file>:<line>: ...". */
typedef void (*config_warn_t)(const char *message, void *userdata);

/* Parse a whole file's text; errors are reported as "<filename>:<line>: <message>", warnings through w
 * (may be NULL). */
int config_parse(struct config *c, const char *text, const char *filename, config_warn_t w, void *userdata,
                 char **ret_error);

/* Load a file, then its drop-ins: PATH.d/NAME.conf in lexical order, each line over what came before (a
 * list key adds to the list). A missing file is fine when must_exist is 0 (defaults, and the drop-ins
 * still apply). The keys are checked together once the last one is read. */
int config_load(struct config *c, const char *path, int must_exist, config_warn_t w, void *userdata,
                char **ret_error);

/* Keys that take effect only when pressured starts: a reload keeps their old values. Writes the names of
 * those that differ between cur and next, comma-separated, to ret (NULL when none). */
int config_restart_only_changed(const struct config *cur, const struct config *next, char **ret);
/* A reload: cur takes next's settings, except those that take effect only at a restart (the sockets,
 * the sysfs root, lock_memory, low_memory_monitor: config_restart_only_changed() names them), and next is
 * left empty. */
void config_take(struct config *cur, struct config *next);

/* Cross-key checks (thresholds rise with the level, intervals non-zero). */
int config_verify(const struct config *c, char **ret_error);

/* The stall budget of a cgroup scope (NULL: the system's): the last regulate_cgroup= that covers it, or
 * regulate_budget. */
uint64_t config_regulate_budget(const struct config *c, const char *cgroup);
/* Whether a shrinker whose client is in cgroup has its value compared across uids (value_cgroup=). */
bool config_value_shared(const struct config *c, const char *cgroup);

/* systemd's time spans: "100ms", "2s", "1h 30min", "2d"; no suffix means milliseconds. */
int config_parse_duration(const char *s, uint64_t *ret_usec);
/* A size in bytes: "512M", "1.5G", "64KiB" (K, M, G, T, powers of 1024, with an optional B or iB); a bare
 * number is bytes unless need_suffix. -EINVAL otherwise. */
int config_parse_bytes(const char *s, bool need_suffix, uint64_t *ret);
/* "some 100ms 2s" */
int config_parse_threshold(const char *s, struct psi_trigger *ret);
