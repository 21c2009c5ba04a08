/* SPDX-License-Identifier: MIT */
#pragma once

/* org.freedesktop.LowMemoryMonitor on the system bus, for GLib's GMemoryMonitor (and through
 * xdg-desktop-portal, Flatpak apps): the signal LowMemoryWarning(y) with 50 (low), 100 (medium) or 255
 * (critical) when the system scope rises to that level, the same level at most once per repeat interval;
 * nothing on falls (GLib has no word for recovery, and other bytes have crashed applications). An
 * observer of the scopes. Off, quietly, when there is no system bus or the name belongs to another
 * service (low-memory-monitor). */

#include <systemd/sd-event.h>

#include "config.h"
#include "scope_registry.h"

struct lowmem;

/* *ret NULL (and 0) when switched off or without a bus. */
int lowmem_new(sd_event *event, const struct config *config, struct scope_registry *scopes, struct lowmem **ret);
struct lowmem *lowmem_free(struct lowmem *lm);

/* The byte GLib expects for a level; 0 for ok. */
unsigned lowmem_level_byte(enum level l);
