/* SPDX-License-Identifier: MIT */
/* A plain poll() program on libpressure's subscription API: watch scopes, print their levels, keep
 * going through restarts of the daemon, stop on SIGINT or SIGTERM.
 *
 *   poll-watch [--socket PATH] [SCOPE...]     SCOPE: system (default), node:N, /cgroup/path
 */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <pressure.h>

static void on_level(struct pressure_client *client, const struct pressure_scope *scope, int is_initial,
                     void *userdata) {
        (void) client;
        (void) userdata;
        /* The first states come here too, from dispatch, like every change after them. */
        printf("%s %s%s\n", pressure_scope_get_name(scope), pressure_level_to_string(pressure_scope_get_level(scope)),
               is_initial ? " (initial)" : "");
        fflush(stdout);
}

static void on_connection(struct pressure_client *client, int connected, void *userdata) {
        (void) client;
        (void) userdata;
        printf("daemon %s\n", connected ? "connected" : "away: waiting for it");
        fflush(stdout);
}

static int exit_code = -1;

static void on_end(struct pressure_subscription *subscription, int error, void *userdata) {
        (void) subscription;
        (void) userdata;
        fprintf(stderr, "poll-watch: the daemon ended the subscription: %s\n", strerror(-error));
        exit_code = EXIT_FAILURE;
}

int main(int argc, char **argv) {
        const char *socket_path = NULL;
        struct pressure_client *client = NULL;
        struct pressure_subscription *subscription = NULL;
        int r;

        if (argc > 2 && strcmp(argv[1], "--socket") == 0) {
                socket_path = argv[2];
                argv += 2;
                argc -= 2;
        }
        /* The scopes: the rest of argv, which is NULL-terminated as the API wants. */
        const char *const *scopes = argc > 1 ? (const char *const *) argv + 1 : NULL;

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return EXIT_FAILURE;
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                perror("poll-watch: signalfd");
                return EXIT_FAILURE;
        }

        /* Made whether or not the daemon runs: it is reached in the background. */
        r = pressure_client_new(socket_path, &client);
        if (r < 0) {
                fprintf(stderr, "poll-watch: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        r = pressure_client_set_connection_handler(client, on_connection, NULL);
        if (r >= 0)
                r = pressure_subscription_new(client, scopes, PRESSURE_LEVEL_LOW, on_level, NULL, &subscription);
        if (r >= 0)
                r = pressure_subscription_set_end_handler(subscription, on_end, NULL);
        if (r < 0) {
                fprintf(stderr, "poll-watch: cannot subscribe: %s\n", strerror(-r));
                pressure_subscription_unref(subscription);
                pressure_client_unref(client);
                return r == -EINVAL ? 2 : EXIT_FAILURE;
        }

        while (exit_code < 0) {
                struct pollfd fds[2] = {
                        { .fd = pressure_client_get_fd(client), .events = POLLIN },
                        { .fd = sfd, .events = POLLIN },
                };
                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        perror("poll-watch: poll");
                        exit_code = EXIT_FAILURE;
                        break;
                }
                if (fds[1].revents)
                        exit_code = EXIT_SUCCESS;
                else if (fds[0].revents)
                        (void) pressure_client_dispatch(client); /* never waits */
        }

        pressure_subscription_unref(subscription); /* unsubscribes */
        pressure_client_unref(client);
        close(sfd);
        return exit_code;
}
