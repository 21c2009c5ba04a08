/* SPDX-License-Identifier: MIT */
/* pressure-gen: make real memory pressure in a fresh cgroup until interrupted.
 * Usage: pressure-gen [DIR [LIMIT_MIB]]; prints the cgroup's v2 path. */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pressure-gen.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
        (void) sig;
        stop = 1;
}

int main(int argc, char *argv[]) {
        struct pressure_gen g;
        const char *dir = argc > 1 ? argv[1] : ".";
        unsigned long mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 16;

        int r = pressure_gen_create(&g, dir, (uint64_t) mib << 20);
        if (r < 0) {
                fprintf(stderr, "pressure-gen: cannot create cgroup: %s\n", strerror(-r));
                return 1;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        r = pressure_gen_start(&g);
        if (r < 0) {
                fprintf(stderr, "pressure-gen: cannot start writer: %s\n", strerror(-r));
                pressure_gen_destroy(&g);
                return 1;
        }
        printf("%s\n", g.cgroup);
        fflush(stdout);
        while (!stop)
                pause();
        pressure_gen_destroy(&g);
        return 0;
}
