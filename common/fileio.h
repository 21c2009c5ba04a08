/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* The start of a small file, NUL-terminated: one read of at most size - 1 bytes (what the kernel's seq
 * files hand out at once). 0 or a negative errno. */
int read_file_start(const char *path, char *buf, size_t size);
