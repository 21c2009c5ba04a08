/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int max_level = LOG_INFO;
static int prefix_priority = 0;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_open(void) {
        /* systemd sets JOURNAL_STREAM when stderr goes to the journal; then "<N>" carries the priority. */
        prefix_priority = getenv("JOURNAL_STREAM") != NULL;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        int saved = errno;
        char msg[2048];
        va_list ap;

        (void) file;
        (void) line;

        /* Make %m print the error we were handed, not whatever errno happens to be. */
        errno = abs(error);
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        if (prefix_priority)
                fprintf(stderr, "<%d>%s\n", level, msg);
        else
                fprintf(stderr, "pressured: %s\n", msg);

        errno = saved;
        return -abs(error);
}
