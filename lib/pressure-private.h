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
 * receives the error's name. A reply of an io.pressured method that breaks the interface (a mandatory
 * field missing, one of the wrong type: io.pressured.varlink) is -EPROTO too; fields a later daemon added
 * pass.
 */
int pressure_client_call_json(struct pressure_client *client, const char *method, const char *parameters,
                              char **ret, char **ret_error);
