/* SPDX-License-Identifier: MIT */
#include "lowmem.h"

#include <errno.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>

#include "log.h"
#include "macro.h"

#define LMM_NAME "org.freedesktop.LowMemoryMonitor"
#define LMM_PATH "/org/freedesktop/LowMemoryMonitor"
#define LMM_INTERFACE "org.freedesktop.LowMemoryMonitor"

struct lowmem {
        sd_event *event;
        const struct config *config;
        sd_bus *bus;
        sd_bus_slot *vtable_slot, *name_slot;
        bool owner;                        /* the name is ours */
        uint64_t last_sent[_LEVEL_MAX];    /* CLOCK_MONOTONIC µs of each level's last signal */
};

unsigned lowmem_level_byte(enum level l) {
        /* GMemoryMonitorWarningLevel: LOW 50, MEDIUM 100, CRITICAL 255. */
        static const unsigned bytes[_LEVEL_MAX] = { 0, 50, 100, 255 };
        return l >= 0 && l < _LEVEL_MAX ? bytes[l] : 0;
}

/* No methods, no properties: introspection and Properties.GetAll ({}) come from sd-bus. */
static const sd_bus_vtable lowmem_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_SIGNAL("LowMemoryWarning", "y", 0),
        SD_BUS_VTABLE_END,
};

static void on_level_changed(struct scope *s, void *userdata) {
        struct lowmem *lm = userdata;
        uint64_t now = 0;

        if (s->type != SCOPE_SYSTEM || s->level.level <= s->previous || !lm->owner)
                return;
        (void) sd_event_now(lm->event, CLOCK_MONOTONIC, &now);
        /* Every threshold crossed, lowest first, as the kernel triggers of low-memory-monitor would fire;
         * each level at most once per repeat interval while the pressure comes and goes. */
        for (enum level l = s->previous + 1; l <= s->level.level; l++) {
                if (lm->last_sent[l] > 0 && now - lm->last_sent[l] < lm->config->low_memory_monitor_repeat_usec)
                        continue;
                int r = sd_bus_emit_signal(lm->bus, LMM_PATH, LMM_INTERFACE, "LowMemoryWarning", "y",
                                           (uint8_t) lowmem_level_byte(l));
                if (r < 0) {
                        log_warning_errno(r, "Failed to send LowMemoryWarning: %m");
                        return;
                }
                lm->last_sent[l] = now;
        }
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
};

static int on_name(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        struct lowmem *lm = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        (void) ret_error;

        if (e) {
                /* low-memory-monitor, most likely: it stays the one GLib listens to. */
                log_notice("Cannot own %s on the system bus (%s): not sending LowMemoryWarning.", LMM_NAME,
                           e->message ? e->message : e->name);
                return 0;
        }
        uint32_t ret = 0;
        (void) sd_bus_message_read(reply, "u", &ret);
        lm->owner = ret == 1 /* PRIMARY_OWNER */ || ret == 4 /* ALREADY_OWNER */;
        if (lm->owner)
                log_info("Owning %s on the system bus: GLib applications hear of system memory pressure.", LMM_NAME);
        else
                log_notice("%s belongs to another service on the system bus: not sending LowMemoryWarning.", LMM_NAME);
        return 0;
}

int lowmem_new(sd_event *event, const struct config *config, struct scope_registry *scopes, struct lowmem **ret) {
        *ret = NULL;
        if (!config->low_memory_monitor)
                return 0;
        struct lowmem *lm = calloc(1, sizeof(*lm));
        if (!lm)
                return -ENOMEM;
        lm->event = event;
        lm->config = config;

        int r = sd_bus_open_system_with_description(&lm->bus, "pressured-lowmem");
        if (r < 0) {
                /* No system bus (a container, a test): nothing to offer, nothing wrong. */
                log_debug_errno(r, "No system bus, not offering %s: %m", LMM_NAME);
                free(lm);
                return 0;
        }
        r = sd_bus_attach_event(lm->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_add_object_vtable(lm->bus, &lm->vtable_slot, LMM_PATH, LMM_INTERFACE, lowmem_vtable, lm);
        if (r >= 0)
                r = sd_bus_request_name_async(lm->bus, &lm->name_slot, LMM_NAME, 0, on_name, lm);
        if (r >= 0)
                r = scope_registry_add_observer(scopes, &observer, lm);
        if (r < 0) {
                log_warning_errno(r, "Failed to offer %s on the system bus, going on without it: %m", LMM_NAME);
                lowmem_free(lm);
                return 0;
        }
        *ret = lm;
        return 0;
}

struct lowmem *lowmem_free(struct lowmem *lm) {
        if (!lm)
                return NULL;
        sd_bus_slot_unref(lm->name_slot);
        sd_bus_slot_unref(lm->vtable_slot);
        sd_bus_flush_close_unref(lm->bus);
        free(lm);
        return NULL;
}
