/* SPDX-License-Identifier: MIT */
#include "format.h"

#include <stdio.h>

#include "macro.h"

char *format_bytes(char *buf, size_t size, uint64_t bytes) {
        static const char *const units[] = { "B", "K", "M", "G", "T", "P" };
        double v = (double) bytes;
        size_t u = 0;
        while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                u++;
        }
        snprintf(buf, size, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
        return buf;
}

char *format_usec(char *buf, size_t size, uint64_t usec) {
        static const struct {
                const char *unit;
                uint64_t usec;
        } units[] = {
                { "d", 86400000000ULL }, { "h", 3600000000ULL }, { "min", 60000000 },
                { "s", 1000000 },        { "ms", 1000 },         { "us", 1 },
        };
        if (usec == 0) {
                snprintf(buf, size, "0");
                return buf;
        }
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (usec % units[i].usec == 0) {
                        snprintf(buf, size, "%llu%s", (unsigned long long) (usec / units[i].usec), units[i].unit);
                        return buf;
                }
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (usec >= units[i].usec) {
                        snprintf(buf, size, "%.1f%s", (double) usec / (double) units[i].usec, units[i].unit);
                        return buf;
                }
        return buf; /* not reached: usec >= 1 */
}
