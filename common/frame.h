/* SPDX-License-Identifier: MIT */
#pragma once

/* Varlink framing: messages are JSON texts terminated by a NUL byte on a stream socket.
 * frame_reader collects bytes and hands out whole messages; frame_writer queues outgoing bytes for a
 * non-blocking socket. Neither knows about JSON, so both are shared by the daemon and the library. */

#include <stddef.h>
#include <sys/types.h>

#define FRAME_DEFAULT_MAX_SIZE (64u * 1024u)

struct frame_reader {
        char *buf;
        size_t start;    /* first byte not yet handed out */
        size_t len;      /* bytes in buf */
        size_t scanned;  /* bytes after start already known to hold no NUL */
        size_t alloc;
        size_t max_size; /* largest message accepted, NUL included */
};

void frame_reader_init(struct frame_reader *r, size_t max_size);
void frame_reader_done(struct frame_reader *r);

/* Append bytes as if read from the socket. Returns 0 or -ENOMEM. */
int frame_reader_feed(struct frame_reader *r, const void *data, size_t n);

/* One read() from a non-blocking fd. Returns bytes read (> 0), 0 on end of file, -EAGAIN, or another
 * negative errno. */
ssize_t frame_reader_read_fd(struct frame_reader *r, int fd);

/* Next complete message. Returns 1 and the NUL-terminated text in *ret (valid until the next call that
 * changes the reader), 0 when no complete message is buffered, -EMSGSIZE when the message being collected
 * is already larger than max_size (the stream cannot be resynchronised: close it). */
int frame_reader_next(struct frame_reader *r, const char **ret, size_t *ret_len);

/* Bytes buffered that do not yet form a message. */
size_t frame_reader_pending(const struct frame_reader *r);

/* Give the buffer back when nothing is pending (idle connections then cost no buffer). */
void frame_reader_trim(struct frame_reader *r);

struct frame_writer {
        char *buf;
        size_t start;
        size_t len;
        size_t alloc;
};

void frame_writer_init(struct frame_writer *w);
void frame_writer_done(struct frame_writer *w);

/* Queue one message; a terminating NUL is appended. */
int frame_writer_put(struct frame_writer *w, const char *msg, size_t len);

/* Send as much as the socket takes. Returns 0 once everything is sent, -EAGAIN while bytes remain, or a
 * negative errno (e.g. -EPIPE) when the peer is gone. Never raises SIGPIPE. */
int frame_writer_flush(struct frame_writer *w, int fd);

static inline size_t frame_writer_queued(const struct frame_writer *w) {
        return w->len - w->start;
}
