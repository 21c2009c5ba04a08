/* SPDX-License-Identifier: MIT */
/* Whether the process a server names as itself is the one at the other end of our connection: what a
 * server says is outside input, and the adapter registers a shrinker for that pid (the daemon places it
 * in that process's cgroup and measures that process). */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "adapter.h"

#define PEER_MAX_INODES 64
#define PEER_MAX_FDS 65536

/* The inodes of the TCP sockets listening on port, from one of /proc/net/tcp and tcp6. */
static void listening_inodes(const char *table, unsigned port, unsigned long *inodes, size_t *n) {
        char line[512];
        FILE *f = fopen(table, "re");
        if (!f)
                return;
        (void) fgets(line, sizeof(line), f); /* the header */
        while (*n < PEER_MAX_INODES && fgets(line, sizeof(line), f)) {
                char local[64];
                unsigned state;
                unsigned long inode;
                /* "sl local rem st tx:rx tr:when retrnsmt uid timeout inode" */
                if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %*u %*u %lu", local, &state, &inode) != 3)
                        continue;
                const char *colon = strrchr(local, ':');
                if (state == 0x0A && colon && strtoul(colon + 1, NULL, 16) == port && inode != 0)
                        inodes[(*n)++] = inode;
        }
        fclose(f);
}

/* Over TCP: whether pid holds a socket listening on the port we reached. A server on another machine,
 * or in another network namespace, cannot be checked and is refused. */
static int tcp_peer_is(int fd, pid_t pid) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);
        if (getpeername(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        unsigned port = sa.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *) &sa)->sin_port)
                        : sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *) &sa)->sin6_port)
                                                   : 0;
        if (port == 0)
                return -EPERM;
        unsigned long inodes[PEER_MAX_INODES];
        size_t n = 0;
        listening_inodes("/proc/net/tcp", port, inodes, &n);
        listening_inodes("/proc/net/tcp6", port, inodes, &n);
        if (n == 0)
                return -EPERM;

        char dir[64];
        snprintf(dir, sizeof(dir), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? -EPERM : -errno;
        int r = -EPERM;
        unsigned seen = 0;
        for (struct dirent *e; r == -EPERM && seen < PEER_MAX_FDS && (e = readdir(d)); seen++) {
                char link[320], target[64];
                if (e->d_name[0] == '.')
                        continue;
                snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
                ssize_t k = readlink(link, target, sizeof(target) - 1);
                if (k <= 0)
                        continue;
                target[k] = 0;
                unsigned long inode;
                if (sscanf(target, "socket:[%lu]", &inode) != 1)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (inodes[i] == inode)
                                r = 0;
        }
        closedir(d);
        return r;
}

int peer_is_pid(int fd, pid_t pid) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);
        if (pid <= 0)
                return -EPERM;
        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        if (sa.ss_family == AF_UNIX) {
                /* The kernel's word: the process that listened on the socket we reached. */
                struct ucred peer;
                len = sizeof(peer);
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0)
                        return -errno;
                return peer.pid == pid ? 0 : -EPERM;
        }
        return tcp_peer_is(fd, pid);
}
