/* SPDX-License-Identifier: MIT */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 16384u

void frame_reader_init(struct frame_reader *r, size_t max_size) {
        *r = (struct frame_reader){ .max_size = max_size > 0 ? max_size : FRAME_DEFAULT_MAX_SIZE };
}

void frame_reader_done(struct frame_reader *r) {
        free(r->buf);
        *r = (struct frame_reader){ .max_size = r->max_size };
}

/* Make room for n more bytes, first dropping what was already handed out. */
static int reader_reserve(struct frame_reader *r, size_t n) {
        if (r->start > 0) {
                memmove(r->buf, r->buf + r->start, r->len - r->start);
                r->len -= r->start;
                r->start = 0;
        }
        if (r->alloc - r->len >= n)
                return 0;

        size_t want = r->len + n;
        size_t alloc = r->alloc ? r->alloc : 4096;
        while (alloc < want)
                alloc *= 2;
        char *p = realloc(r->buf, alloc);
        if (!p)
                return -ENOMEM;
        r->buf = p;
        r->alloc = alloc;
        return 0;
}

int frame_reader_feed(struct frame_reader *r, const void *data, size_t n) {
        int k = reader_reserve(r, n);
        if (k < 0)
                return k;
        memcpy(r->buf + r->len, data, n);
        r->len += n;
        return 0;
}

ssize_t frame_reader_read_fd(struct frame_reader *r, int fd) {
        /* Never read more than one message's worth past the limit: a peer cannot make us buffer more. */
        int k = reader_reserve(r, READ_CHUNK);
        if (k < 0)
                return k;
        ssize_t n;
        /* EINTR is not EAGAIN: on an edge-triggered fd, taking it for "drained" would strand the data. */
        do
                n = read(fd, r->buf + r->len, r->alloc - r->len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        r->len += (size_t) n;
        return n;
}

int frame_reader_next(struct frame_reader *r, const char **ret, size_t *ret_len) {
        if (!r->buf)
                return 0; /* nothing read since the buffer was given back (NULL + 0 is no pointer) */
        const char *base = r->buf + r->start;
        size_t avail = r->len - r->start;

        const char *nul = avail > r->scanned ? memchr(base + r->scanned, 0, avail - r->scanned) : NULL;
        if (!nul) {
                r->scanned = avail;
                if (avail >= r->max_size)
                        return -EMSGSIZE;
                return 0;
        }

        size_t len = (size_t) (nul - base);
        if (len + 1 > r->max_size)
                return -EMSGSIZE;

        *ret = base;
        if (ret_len)
                *ret_len = len;
        r->start += len + 1;
        r->scanned = 0;
        return 1;
}

size_t frame_reader_pending(const struct frame_reader *r) {
        return r->len - r->start;
}

void frame_reader_trim(struct frame_reader *r) {
        if (r->len == r->start)
                frame_reader_done(r);
}

void frame_writer_init(struct frame_writer *w) {
        *w = (struct frame_writer){};
}

void frame_writer_done(struct frame_writer *w) {
        free(w->buf);
        *w = (struct frame_writer){};
}

int frame_writer_put(struct frame_writer *w, const char *msg, size_t len) {
        if (w->start == w->len)
                w->start = w->len = 0;

        size_t need = len + 1;
        if (w->alloc - w->len < need) {
                if (w->start > 0) {
                        memmove(w->buf, w->buf + w->start, w->len - w->start);
                        w->len -= w->start;
                        w->start = 0;
                }
                if (w->alloc - w->len < need) {
                        size_t alloc = w->alloc ? w->alloc : 4096;
                        while (alloc - w->len < need)
                                alloc *= 2;
                        char *p = realloc(w->buf, alloc);
                        if (!p)
                                return -ENOMEM;
                        w->buf = p;
                        w->alloc = alloc;
                }
        }
        memcpy(w->buf + w->len, msg, len);
        w->buf[w->len + len] = 0;
        w->len += need;
        return 0;
}

int frame_writer_flush(struct frame_writer *w, int fd) {
        while (w->start < w->len) {
                ssize_t n = send(fd, w->buf + w->start, w->len - w->start, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno; /* -EAGAIN included */
                }
                w->start += (size_t) n;
        }
        /* Idle connections are most connections: keep no buffer while there is nothing to send. */
        frame_writer_done(w);
        return 0;
}
