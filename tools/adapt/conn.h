/* SPDX-License-Identifier: MIT */
#pragma once

/* A blocking connection to a server an adapter talks to, Redis's or memcached's alike: connect, send and
 * wait, each bounded by a deadline, so that a server that stops answering costs a shrinker callback at
 * most that. The protocols on top are resp.h and text.h. */

#include <stddef.h>
#include <stdint.h>

struct conn {
        int fd;
        int timeout_ms; /* what one command may take */
        /* CLOCK_MONOTONIC microseconds (0: none): the daemon's request being answered ends then, and no
         * command runs past it. */
        uint64_t request_deadline;
        char buf[16384]; /* read ahead by the protocol on top */
        size_t start, end; /* unread bytes of buf */
};

/* "unix:/path", "/path" (a Unix socket) or "host:port" (TCP). 0 or a negative errno. */
int conn_open(const char *address, int timeout_ms, struct conn *ret);
void conn_close(struct conn *c);

/* Commands from now on end by usec (the request's deadline), or by their own timeout alone (0). */
void conn_set_request_deadline(struct conn *c, uint64_t usec);
/* When a command started now must end: its timeout, or the request's deadline if that comes first. */
uint64_t conn_command_deadline(const struct conn *c);

/* Wait until the descriptor is ready for events (POLLIN, POLLOUT): 0, or -ETIMEDOUT at the deadline. */
int conn_wait(const struct conn *c, short events, uint64_t deadline);
/* All of data, or a negative errno (-ETIMEDOUT at the deadline). */
int conn_send(struct conn *c, const char *data, size_t n, uint64_t deadline);
