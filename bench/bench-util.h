/* SPDX-License-Identifier: MIT */
#pragma once

/* What the benchmarks that drive the example cache (examples/kvcache.c) share. */

#include <stddef.h>
#include <sys/types.h>

/* The number after key ("bytes=") in a line, 0 when it is not there. */
unsigned long long bench_field(const char *line, const char *key);
/* One STATS line from a kvcache connection; -1 once it is gone. */
int bench_stats(int fd, char *line, size_t size);
/* CPU seconds of a live process (utime and stime of /proc/PID/stat), 0 if unreadable. */
double bench_proc_cpu_s(pid_t pid);
/* Reap a child, returning its CPU seconds; *status as waitpid's. */
double bench_reap(pid_t pid, int *status);
/* A unix stream connection to path, or -1. */
int bench_connect(const char *path);
