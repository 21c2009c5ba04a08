/* SPDX-License-Identifier: MIT */
/* pressure-gen: make real memory pressure in a fresh cgroup until interrupted.
 * Usage: pressure-gen [DIR [LIMIT_MIB [--hold]]]; prints the cgroup's v2 path.
 * With --hold it prints "CGROUP V2_DIR MEM_DIR" (MEM_DIR "-" where it is V2_DIR: pure v2), so that a test
 * can place its own processes in the group first, and the writer starts at SIGUSR1 and stops at SIGUSR2.
 * SIGINT or SIGTERM stops everything and removes the group. */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pressure-gen.h"

static volatile sig_atomic_t stop, start_writer, stop_writer;

static void on_signal(int sig) {
        if (sig == SIGUSR1)
                start_writer = 1;
        else if (sig == SIGUSR2)
                stop_writer = 1;
        else
                stop = 1;
}

int main(int argc, char *argv[]) {
        struct pressure_gen g;
        const char *dir = argc > 1 ? argv[1] : ".";
        unsigned long mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 16;
        int hold = argc > 3 && strcmp(argv[3], "--hold") == 0;

        int r = pressure_gen_create(&g, dir, (uint64_t) mib << 20);
        if (r < 0) {
                fprintf(stderr, "pressure-gen: cannot create cgroup: %s\n", strerror(-r));
                return 1;
        }
        /* The signals wait blocked between the checks and sigsuspend(): none is lost between them. */
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGUSR1);
        sigaddset(&block, SIGUSR2);
        sigprocmask(SIG_BLOCK, &block, &old);
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
        start_writer = !hold;
        if (hold)
                printf("%s %s %s\n", g.cgroup, g.v2_dir, g.mem_dir[0] ? g.mem_dir : "-");
        else
                printf("%s\n", g.cgroup);
        fflush(stdout);
        while (!stop) {
                if (start_writer) {
                        start_writer = 0;
                        r = g.pid > 0 ? 0 : pressure_gen_start(&g);
                        if (r < 0) {
                                fprintf(stderr, "pressure-gen: cannot start writer: %s\n", strerror(-r));
                                break;
                        }
                }
                if (stop_writer) {
                        stop_writer = 0;
                        (void) pressure_gen_stop(&g);
                }
                if (!start_writer && !stop_writer && !stop)
                        sigsuspend(&old);
        }
        pressure_gen_destroy(&g);
        return r < 0 ? 1 : 0;
}
