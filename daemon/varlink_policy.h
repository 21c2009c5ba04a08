/* SPDX-License-Identifier: MIT */
#pragma once

/* What local users may hold of the Varlink server, decided apart from the sockets: whether a new
 * connection is let in, and whose connections go when buffers take too much. Pure: the server hands in
 * its figures, this says what to do (and test-varlink-policy checks it without a socket). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct varlink_limits {
        size_t max_connections;
        size_t max_connections_per_uid;
        uint64_t idle_timeout_usec;
        /* All connections' read and write buffers together; over it, the connections holding the most
         * are closed until the rest fits (0: no cap). */
        size_t max_buffered;
};

/* A user other than root may hold at most this share of max_buffered: one user's connections cannot take
 * the memory every other client's replies need. */
#define VARLINK_BUFFERED_SHARE_DIVISOR 4

/* Whether a connection of uid may be let in, given the server's connections (n) and those of uid
 * (n_of_uid). NULL: yes; otherwise the limit reached, in words. Root is the machine's administrator,
 * bound by the caps of all connections only. The quota both sockets share, with its reserve for root
 * and the system's services, is listener.h's. */
const char *varlink_policy_admit(const struct varlink_limits *l, size_t n, size_t n_of_uid, uid_t uid);

/* One connection's buffers, as the server last counted them. */
struct varlink_holder {
        uid_t uid;
        size_t bytes;
};

/* Which connections to close, after uid's connections changed what they hold: first uid's own biggest
 * ones while uid (not root) holds more than its share, then, while all together hold more than
 * max_buffered, the biggest of the user holding the most. Writes the indexes into ret (room for n) in
 * the order to close them, with why in ret_why (room for n, may be NULL); returns how many. */
enum varlink_overflow {
        VARLINK_OVER_SHARE, /* its user's connections hold more than their share */
        VARLINK_OVER_CAP,   /* all together hold more than max_buffered */
};
size_t varlink_policy_overflow(const struct varlink_limits *l, const struct varlink_holder *h, size_t n, uid_t uid,
                               size_t *ret, enum varlink_overflow *ret_why);

/* Whether a connection with no call open, last active at last_active_usec, has been idle too long. */
bool varlink_policy_idle(const struct varlink_limits *l, uint64_t last_active_usec, uint64_t now_usec);
