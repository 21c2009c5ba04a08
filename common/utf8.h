/* SPDX-License-Identifier: MIT */
#pragma once

/* Names and paths leave the daemon as valid UTF-8: strict JSON parsers (Python's, sd-json) refuse a whole
 * reply for one bad byte, and node_exporter drops every metric of a file that has one. What comes from
 * clients is refused when invalid; what comes from the kernel (a cgroup directory may be named with any
 * bytes) is written with U+FFFD in place of each byte that is not part of a valid sequence. */

#include <stdbool.h>
#include <stddef.h>

/* Whether s is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). */
bool utf8_is_valid(const char *s);

/* The length of the valid sequence at s (1 to 4), or 0 when s does not start one. */
size_t utf8_sequence_length(const char *s);

/* A copy of s with U+FFFD for each byte outside a valid sequence; NULL when out of memory. */
char *utf8_escape_invalid(const char *s);
