/* SPDX-License-Identifier: MIT */
/* Fuzz target: the byte stream of a connection as the daemon and the library read it, before any JSON:
 * NUL-terminated messages with a size limit, arriving in pieces of any size. The first byte sets the
 * size of the pieces (1..256), the rest is the stream. Every message taken out must be within the limit
 * and end at a NUL of the stream; an oversized one is refused with EMSGSIZE (then the stream is given up,
 * as the daemon closes such a connection).
 * Replayed over its corpus as a unit test; built for libFuzzer with -Dfuzzer=true. */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MESSAGE 1024

/* Take out every complete message; false once the stream is over its limit. */
static bool drain(struct frame_reader *r) {
        const char *msg;
        size_t len;
        for (;;) {
                int k = frame_reader_next(r, &msg, &len);
                if (k == -EMSGSIZE)
                        return false;
                if (k <= 0)
                        break;
                assert(len < MAX_MESSAGE);
                assert(memchr(msg, 0, len) == NULL && msg[len] == 0);
        }
        frame_reader_trim(r);
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct frame_reader r;
        if (size < 1)
                return 0;
        size_t piece = (size_t) data[0] + 1;
        frame_reader_init(&r, MAX_MESSAGE);
        for (size_t off = 1; off < size; off += piece) {
                size_t n = size - off < piece ? size - off : piece;
                if (frame_reader_feed(&r, data + off, n) < 0 || !drain(&r))
                        break;
        }
        frame_reader_done(&r);
        return 0;
}
