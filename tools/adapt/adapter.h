/* SPDX-License-Identifier: MIT */
#pragma once

/* pressure-adapt's model of a server it adapts: one struct adapter, and a table of operations per kind
 * of server (redis.c, memcached.c) through which the shrinker's count and scan, the regrowth and the
 * restore reach it. Everything the server says is outside input: parsed with bounds, numbers checked. */

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"

struct pressure_shrinker;

struct adapter;

struct server_ops {
        const char *kind; /* "redis", "memcached": the shrinker is named "<kind>:<address>" */
        bool auth;        /* takes --password-file */
        /* Connect (and authenticate), learn the server's pid, its own cap (a->original, when a server is
         * seen for the first time or has a new pid) and whether it can be adapted: -EPERM when not (said
         * why), -EACCES for a refused password, another negative errno when unreachable. */
        int (*reach)(struct adapter *a);
        /* What the server holds that a lower cap can take (bytes), and its resident memory (bytes; rss
         * may be NULL). */
        int (*held)(struct adapter *a, uint64_t *ret_used, uint64_t *ret_rss);
        /* Set its cap to bytes: what it may hold from now on. */
        int (*set_cap)(struct adapter *a, uint64_t bytes);
        /* After a lower cap: make the server hand the bytes back to the kernel (Redis's MEMORY PURGE,
         * memcached's page moves), by deadline (CLOCK_MONOTONIC microseconds: the request's, less the
         * time its answer needs). */
        void (*give_back)(struct adapter *a, uint64_t bytes, uint64_t deadline);
        /* Is it still there (once a second)? */
        int (*ping)(struct adapter *a);
        /* Frees a->server (may be NULL: nothing of its own). */
        void (*done)(struct adapter *a);
};

extern const struct server_ops redis_ops, memcached_ops;

struct adapter {
        const struct server_ops *ops;
        const char *address;
        char *password, *user;
        uint64_t floor, ceiling; /* ceiling 0: the server's own cap when we started */
        uint64_t quiet_usec;
        int verbose;

        struct conn conn;
        void *server; /* the kind's own state (its reply buffer, say): written by its ops alone */
        bool connected;
        pid_t server_pid;
        uint64_t original; /* the server's own cap before us (Redis: 0 for none) */
        bool have_original;
        uint64_t cap;      /* what we set; 0: nothing of ours in force */
        uint64_t told;     /* the daemon's growth limit as a cap (floor + its limit); 0: none */
        uint64_t last_scan_usec;
        uint64_t claimed, measured; /* bytes: what the server said it freed, how far its RSS fell */
        /* Where the server's own cap is kept while ours is in force (NULL: nowhere), so that an adapter
         * killed without its restore, and started again, still knows what to give back. */
        const char *state_file;
        struct pressure_shrinker *shrinker; /* ours, once registered with the library */
        char shrinker_name[64];
        bool serving; /* the daemon took the registration, and has not dropped it since */
};

void say(const struct adapter *a, int verbose, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The server says it is pid: checked against our connection's peer (peer_is_pid()), then, if that pid is
 * new or the first, what it has now is its own. -EPERM (said why) when the peer is not pid. */
int adapter_learn_original(struct adapter *a, pid_t pid, uint64_t cap);

/* Whether pid is the process at the other end of socket fd: a Unix socket's listener (SO_PEERCRED), or
 * over TCP a process holding the socket listening on the port reached. 0, or -EPERM when it is not (or
 * cannot be told), or another negative errno. */
int peer_is_pid(int fd, pid_t pid);

/* Resident memory of pid from /proc/PID/statm, in bytes. */
int proc_rss(pid_t pid, uint64_t *ret);
