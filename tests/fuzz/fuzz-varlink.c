/* SPDX-License-Identifier: MIT */
/* Fuzz target: the daemon as a client meets it. One real daemon (the manager with every module: the
 * Varlink server, the io.pressured service, subscriptions, shrinkers, reclaim) runs inside the fuzzer on
 * a socket in a temporary directory; each input is sent on a new connection as it is (NUL-separated
 * messages, any bytes), the daemon's loop runs until it has nothing left to do, the replies are read and
 * the connection closed. Every method with every parameter the input makes, the envelope, the framing,
 * the order of calls: nothing may crash, leak or hang the daemon. Replayed over its corpus as a unit test
 * (an error-free run, the daemon still answering); built for libFuzzer with -Dfuzzer=true. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "manager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct manager *daemon_;
static char dir[64], sock_path[96];
static uint64_t received; /* bytes of replies ($FUZZ_VARLINK_REPORT): a sign the daemon answered */

static void teardown(void) {
        if (getenv("FUZZ_VARLINK_REPORT"))
                fprintf(stderr, "fuzz-varlink: %llu bytes of replies\n", (unsigned long long) received);
        daemon_ = manager_free(daemon_);
        if (dir[0])
                (void) rmdir(dir);
}

static int setup(void) {
        struct config c;
        snprintf(dir, sizeof(dir), "/tmp/pressured-fuzz-XXXXXX");
        if (!mkdtemp(dir))
                return -errno;
        snprintf(sock_path, sizeof(sock_path), "%s/io.pressured", dir);
        log_set_max_level(LOG_CRIT); /* the daemon's warnings about bad clients are the point here */
        config_init(&c);
        c.lock_memory = false;
        c.socket_path = strdup(sock_path);
        if (!c.socket_path || manager_new(&c, &daemon_) < 0)
                return -ENOMEM;
        atexit(teardown);
        return manager_start(daemon_, -1);
}

/* Run the daemon's loop until it has nothing to do now (bounded: timers that are due keep coming). */
static void settle(void) {
        for (int i = 0; i < 256 && sd_event_run(daemon_->event, 0) > 0; i++)
                ;
}

static void drain(int fd) {
        char buf[65536];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
                received += (uint64_t) n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int ready;
        if (!ready) {
                if (setup() < 0)
                        abort();
                ready = 1;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                /* The daemon stopped taking connections (a full backlog while its listening socket rests,
                 * or descriptors run out in this process, the daemon's too): that is a finding too. Say
                 * which, with the descriptors open. */
                int e = errno;
                unsigned n_fds = 0;
                DIR *d = opendir("/proc/self/fd");
                for (struct dirent *de; d && (de = readdir(d));)
                        n_fds += de->d_name[0] != '.';
                if (d)
                        closedir(d);
                fprintf(stderr, "fuzz-varlink: cannot connect to the daemon: %s (%u descriptors open)\n", strerror(e),
                        n_fds);
                abort();
        }
        for (size_t off = 0; off < size;) {
                ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
                if (n <= 0) {
                        if (n < 0 && errno != EAGAIN)
                                break; /* closed by the daemon (a protocol violation) */
                        settle();
                        drain(fd);
                        if (n < 0 && errno == EAGAIN)
                                continue;
                        break;
                }
                off += (size_t) n;
        }
        (void) shutdown(fd, SHUT_WR);
        settle();
        drain(fd);
        close(fd);
        settle();
        return 0;
}
