/* SPDX-License-Identifier: MIT */
/* A real sd-event program (libsystemd 254 or later): sd_event_add_memory_pressure() with the environment
 * systemd would give it ($MEMORY_PRESSURE_WATCH, $MEMORY_PRESSURE_WRITE). One "pressure" line per
 * callback, "ready" once the source is in place. Built by tests/sd-event/build against a newer
 * libsystemd than the machine's (Debian 12 has 252). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-event.h>

static int on_pressure(sd_event_source *s, void *userdata) {
        (void) s;
        (void) userdata;
        printf("pressure\n");
        fflush(stdout);
        return 0;
}

int main(void) {
        sd_event *e = NULL;
        int r = sd_event_default(&e);
        if (r >= 0)
                r = sd_event_add_memory_pressure(e, NULL, on_pressure, NULL);
        if (r < 0) {
                fprintf(stderr, "memory-pressure-client: %s\n", strerror(-r));
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        return sd_event_loop(e) < 0;
}
