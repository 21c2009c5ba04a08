/* SPDX-License-Identifier: MIT */
#pragma once

/* Tells the system what the scopes do: a journal entry per level change (with PRESSURED_* fields) and
 * the service manager's STATUS= line for the system level. An observer of the scope registry. */

#include <stddef.h>

#include "scope_registry.h"

struct notifier;

/* n_clients says how many clients are connected, for the status line. */
int notifier_new(struct scope_registry *reg, size_t (*n_clients)(void *userdata), void *userdata,
                 struct notifier **ret);
struct notifier *notifier_free(struct notifier *n);

/* Send the STATUS= line now (start-up, reload). */
void notifier_status(struct notifier *n);
