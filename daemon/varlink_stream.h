/* SPDX-License-Identifier: MIT */
#pragma once

/* One connection's transport: its socket, the frames read and still to write, and what it is registered
 * for in the server's epoll set. It knows nothing of calls or states and calls nobody back: whoever owns
 * it (varlink.c's connection) asks and decides (as sd-varlink's JsonStream serves sd-varlink). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"

struct varlink_stream {
        int fd;
        int epoll_fd;        /* the server's set, where it is registered with data.ptr = owner */
        void *owner;
        struct frame_reader in;
        struct frame_writer out;
        uint32_t events; /* as registered */
};

void varlink_stream_init(struct varlink_stream *st, int fd, int epoll_fd, void *owner, size_t max_message);
/* Out of the epoll set, the socket closed, the buffers freed. */
void varlink_stream_done(struct varlink_stream *st);
/* Into the epoll set (edge-triggered, input only, as a new connection wants). */
int varlink_stream_register(struct varlink_stream *st);

/* A message framed into the output; nothing is written yet. */
int varlink_stream_put(struct varlink_stream *st, const char *msg, size_t len);
/* Write what is queued as far as the socket takes it: 0 (the rest waits for EPOLLOUT), 1 when all of it
 * is out, or a negative errno (the connection is broken). */
int varlink_stream_flush(struct varlink_stream *st);
static inline size_t varlink_stream_queued(const struct varlink_stream *st) {
        return frame_writer_queued(&st->out);
}

/* Read what the socket has: bytes read, 0 at the end of the peer's output, -EAGAIN, or an error. */
ssize_t varlink_stream_read(struct varlink_stream *st);
/* The next whole message read (1), none (0), or one past the size limit (-EMSGSIZE). */
int varlink_stream_next(struct varlink_stream *st, const char **ret, size_t *ret_len);
void varlink_stream_trim(struct varlink_stream *st);

/* The largest message it reads from now on. */
void varlink_stream_set_max_message(struct varlink_stream *st, size_t size);

/* The memory its buffers hold. */
size_t varlink_stream_buffered(const struct varlink_stream *st);

/* Register for input (if want_input) and for output (while some is queued), edge-triggered. Unchanged
 * interest is not registered again unless rearm: renewing it makes the kernel report data that is there
 * already. A negative errno if epoll refused. */
int varlink_stream_watch(struct varlink_stream *st, bool want_input, bool rearm);
