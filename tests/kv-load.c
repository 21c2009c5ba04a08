/* SPDX-License-Identifier: MIT */
/* kv-load: keep a kvcache growing while reading a file-backed working set, as an application would.
 * Usage: kv-load SOCKET WORKING_SET_FILE SECONDS MIB_PER_SECOND
 * Prints "survived sets=<n> reads=<n>" and exits 0 if the cache answered to the end, or
 * "lost after=<seconds> sets=<n>" and exits 1 if its connection broke (the cache died). */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define VALUE 4096

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int expect(int fd, const char *want) {
        char buf[64];
        size_t n = 0, len = strlen(want);
        while (n < len) {
                ssize_t k = read(fd, buf + n, len - n);
                if (k <= 0)
                        return -1;
                n += (size_t) k;
        }
        return memcmp(buf, want, len) == 0 ? 0 : -1;
}

int main(int argc, char *argv[]) {
        if (argc != 5) {
                fprintf(stderr, "usage: kv-load SOCKET WORKING_SET_FILE SECONDS MIB_PER_SECOND\n");
                return 2;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                perror("kv-load: connect");
                return 2;
        }
        int wfd = open(argv[2], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (wfd < 0 || fstat(wfd, &st) < 0) {
                perror("kv-load: working set");
                return 2;
        }
        double seconds = atof(argv[3]), rate = atof(argv[4]) * 1024 * 1024 / VALUE; /* sets per second */
        static char value[VALUE], chunk[65536];
        memset(value, 'v', sizeof(value));

        double start = now();
        unsigned long sets = 0, reads = 0;
        off_t pos = 0;
        while (now() - start < seconds) {
                /* Keep to the rate: SETs owed by now, then a slice of the working set. */
                unsigned long due = (unsigned long) ((now() - start) * rate);
                while (sets < due) {
                        char hdr[64];
                        int n = snprintf(hdr, sizeof(hdr), "SET k%lu %d\n", sets, VALUE);
                        if (send(fd, hdr, (size_t) n, MSG_NOSIGNAL) != n ||
                            send(fd, value, VALUE, MSG_NOSIGNAL) != VALUE || expect(fd, "STORED\n") < 0) {
                                printf("lost after=%.1f sets=%lu reads=%lu\n", now() - start, sets, reads);
                                return 1;
                        }
                        sets++;
                }
                for (int i = 0; i < 16; i++) {
                        if (pread(wfd, chunk, sizeof(chunk), pos) <= 0)
                                pos = 0;
                        else
                                pos = (pos + (off_t) sizeof(chunk)) % st.st_size;
                        reads++;
                }
        }
        /* The cache must still answer. */
        if (send(fd, "STATS\n", 6, MSG_NOSIGNAL) != 6) {
                printf("lost after=%.1f sets=%lu reads=%lu\n", now() - start, sets, reads);
                return 1;
        }
        char stats[256];
        ssize_t k = read(fd, stats, sizeof(stats) - 1);
        if (k <= 0) {
                printf("lost after=%.1f sets=%lu reads=%lu\n", now() - start, sets, reads);
                return 1;
        }
        stats[k] = 0;
        printf("survived sets=%lu reads=%lu %s", sets, reads, stats);
        return 0;
}
