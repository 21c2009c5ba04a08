/* SPDX-License-Identifier: MIT */
#pragma once

/* Not part of libpressure's stable interface: for pressurectl, the tests and the adapters built from the
 * same tree. The symbols are in the LIBPRESSURE_PRIVATE node, which may change in any release. */

#include "pressure.h"

/**
 * Call any io.pressured method with parameters given as JSON text (NULL for none) and get the reply's
 * parameters as JSON text in *ret (free() it). Waits for at most the client's timeout, on a connection
 * of its own. Returns 0, or a negative errno mapped from the daemon's error (-EPERM for
 * PermissionDenied, -ENOENT for NoSuchCgroup and NoSuchShrinker, -ENXIO for NoSuchNode, -EINVAL for
 * InvalidParameter, -EOPNOTSUPP for an unknown method, -EPROTO otherwise); then *ret_error, if given,
 * receives the error's name.
 */
int pressure_client_call_json(struct pressure_client *client, const char *method, const char *parameters,
                              char **ret, char **ret_error);

/**
 * The client's shrinkers free memory of another process, pid: an adapter for a server that does not
 * link libpressure. The daemon places them in that process's cgroup, measures its memory, and ends the
 * registration when it exits (root, or a process all of whose uids are the caller's). Takes effect at
 * the next registration: set it before the first shrinker registers, and again when the server was
 * replaced (the registration of the old one has ended; until pid names a live process each attempt is
 * refused and retried with the client's back-off). 0: the caller's own memory. Returns 0 or -EINVAL.
 */
int pressure_client_set_serve_for(struct pressure_client *client, pid_t pid);
