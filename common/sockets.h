/* SPDX-License-Identifier: MIT */
#pragma once

/* The unix stream sockets the daemon listens on: the Varlink socket and the memory pressure socket. */

#include <sys/types.h>

/* A listening, non-blocking, close-on-exec socket bound at path with mode. A socket file already there
 * is replaced only if nobody answers on it: a running daemon's is never stolen (-EADDRINUSE). Returns
 * the descriptor or a negative errno. */
int unix_listen(const char *path, mode_t mode);

/* Switch a descriptor to non-blocking (one passed by the service manager). 0 or a negative errno. */
int fd_set_nonblock(int fd);
