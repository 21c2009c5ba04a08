/* SPDX-License-Identifier: MIT */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "macro.h"

int read_file_start(const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return 0;
}
