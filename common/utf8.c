/* SPDX-License-Identifier: MIT */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_sequence_length(const char *str) {
        const unsigned char *s = (const unsigned char *) str;
        uint32_t cp;
        size_t n;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, cp = s[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0; /* also the terminating NUL */
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

bool utf8_is_valid(const char *s) {
        while (*s) {
                size_t n = utf8_sequence_length(s);
                if (n == 0)
                        return false;
                s += n;
        }
        return true;
}

char *utf8_escape_invalid(const char *s) {
        static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
        char *out = malloc(strlen(s) * 3 + 1), *p = out;
        if (!out)
                return NULL;
        while (*s) {
                size_t n = utf8_sequence_length(s);
                if (n == 0) {
                        memcpy(p, replacement, 3);
                        p += 3;
                        s++;
                } else {
                        memcpy(p, s, n);
                        p += n;
                        s += n;
                }
        }
        *p = 0;
        return out;
}
