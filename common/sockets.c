/* SPDX-License-Identifier: MIT */
#include "sockets.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"

int unix_listen(const char *path, mode_t mode) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (errno != EADDRINUSE)
                        return -errno;
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        return -EADDRINUSE;
                (void) unlink(path); /* stale: an earlier run's */
                if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                        return -errno;
        }
        (void) chmod(path, mode);
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int fd_set_nonblock(int fd) {
        int flags = fcntl(fd, F_GETFL);
        return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}
