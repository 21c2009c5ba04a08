/* SPDX-License-Identifier: MIT */
#pragma once

/* Figures for people: "241.1M", "1.5s", "2min". One spelling for the log, the CLI and the docs. */

#include <stddef.h>
#include <stdint.h>

#define FORMAT_BYTES_MAX 16
#define FORMAT_USEC_MAX 24

/* Binary units, one decimal above a KiB: "512B", "241.1M", "3.0G". Returns buf. */
char *format_bytes(char *buf, size_t size, uint64_t bytes);

/* The largest unit that divides the span exactly, else one decimal: "100ms", "2s", "1.5s", "10min", "1h".
 * Returns buf. */
char *format_usec(char *buf, size_t size, uint64_t usec);
