/* SPDX-License-Identifier: MIT */
#pragma once

/* systemd's memory pressure protocol, served: a stream socket a program names in $MEMORY_PRESSURE_WATCH
 * (sd_event_add_memory_pressure(), systemd 254 and later). The program connects and writes a PSI
 * threshold; from then on any data it can read means "memory is tight" (by default it trims its caches).
 * pressured watches the cgroup of the connecting process (its pid from SO_PEERCRED) and writes one short
 * line each time that scope rises to the configured level: once per rise, where a kernel trigger would
 * wake it every window while the pressure lasts. Nothing on falls. A connection is never closed while
 * its client lives (an sd-event client spins on a closed one): the cgroup going away only stops the
 * lines. The threshold the client writes is read and not used: the daemon's levels decide. */

#include <systemd/sd-event.h>

#include "config.h"
#include "listener.h"
#include "scope_registry.h"

struct mpsocket;

/* The name of its connections in the service manager's descriptor store (FDSTORE=1). */
#define MPSOCKET_FDNAME "mpclient"

/* The name of its listening socket when the service manager passes it (FileDescriptorName=). */
#define MPSOCKET_LISTEN_FDNAME "memory-pressure"

/* Listen on listen_fd (passed by the service manager), or where it is negative on path (mode 0666). */
int mpsocket_new(sd_event *event, const struct config *config, struct scope_registry *scopes,
                 struct connection_quota *quota, int listen_fd, const char *path, struct mpsocket **ret);
/* Closes every connection and removes the socket file. */
struct mpsocket *mpsocket_free(struct mpsocket *mp);
/* A connection of an earlier run, given back by the service manager: served again as it was. */
void mpsocket_adopt(struct mpsocket *mp, int fd);
