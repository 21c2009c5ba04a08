/* SPDX-License-Identifier: MIT */
#pragma once

/* Accepting connections on a listening socket, for the Varlink socket and the memory pressure socket
 * alike: at most 64 per wake-up (the rest of the loop is not starved), and when accept() fails for want
 * of resources (descriptors, socket buffers, memory) no listening for a while, longer each time it happens
 * again (50 ms doubling up to 2 s), so that a socket that stays readable does not spin the loop. Both
 * sockets also share one quota of connections: together they fit the descriptors left after the
 * daemon's own reserve. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "log.h"

/* The connections of every listener together. max 0: no cap. Users other than root and the system's
 * services hold at most max less a reserve, together: one account can be many uids (a rootless
 * container's subordinate range holds 65,536), and a limit per uid alone let eight of them lock root out
 * of both sockets. */
struct connection_quota {
        unsigned max, n;
        unsigned n_users; /* of those, the connections of uids not reserved */
};
#define CONNECTION_QUOTA_RESERVE_DIVISOR 8
/* Root, the system's accounts (Debian's SYS_UID_MAX, 999) and systemd's dynamic service users
 * (61184..65519): the uids the reserve is for. Any other may be one of many a single user holds. */
bool connection_uid_reserved(uid_t uid);
/* Why a connection of uid may not be let in now, in words; NULL: it may. */
const char *connection_quota_refusal(const struct connection_quota *q, uid_t uid);
/* The cap on connections (0: none); those already in stay. */
void connection_quota_set_max(struct connection_quota *q, unsigned max);
/* Take a place (false: full for uid) and give it back when the connection closes. */
bool connection_quota_take(struct connection_quota *q, uid_t uid);
void connection_quota_put(struct connection_quota *q, uid_t uid);

/* Called with each accepted descriptor (non-blocking, close-on-exec), which it owns from then on. */
typedef void (*listener_accept_fn)(int fd, void *userdata);

struct listener {
        sd_event *event;
        int fd; /* not owned */
        sd_event_source *source, *retry;
        uint64_t backoff_usec;
        struct ratelimit log;
        const char *what; /* for the log and the sources' descriptions */
        listener_accept_fn accept;
        void *userdata;
};

int listener_new(sd_event *event, int fd, const char *what, listener_accept_fn accept, void *userdata,
                 struct listener **ret);
struct listener *listener_free(struct listener *l);
