/* SPDX-License-Identifier: MIT */
#include "varlink_stream.h"

#include <assert.h>
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

void varlink_stream_init(struct varlink_stream *st, int fd, int epoll_fd, void *owner, size_t max_message) {
        assert(st);

        *st = (struct varlink_stream){ .fd = fd, .epoll_fd = epoll_fd, .owner = owner };
        frame_reader_init(&st->in, max_message);
        frame_writer_init(&st->out);
}

void varlink_stream_done(struct varlink_stream *st) {
        assert(st);

        if (st->fd >= 0) {
                (void) epoll_ctl(st->epoll_fd, EPOLL_CTL_DEL, st->fd, NULL); /* ENOENT if it never got there */
                close(st->fd);
        }
        st->fd = -1;
        frame_reader_done(&st->in);
        frame_writer_done(&st->out);
}

int varlink_stream_register(struct varlink_stream *st) {
        assert(st);

        st->events = EPOLLIN | EPOLLET;
        struct epoll_event e = { .events = st->events, .data.ptr = st->owner };
        return epoll_ctl(st->epoll_fd, EPOLL_CTL_ADD, st->fd, &e) < 0 ? -errno : 0;
}

int varlink_stream_put(struct varlink_stream *st, const char *msg, size_t len) {
        assert(st);

        return frame_writer_put(&st->out, msg, len);
}

int varlink_stream_flush(struct varlink_stream *st) {
        assert(st);

        int r = frame_writer_flush(&st->out, st->fd);
        return r == -EAGAIN ? 0 : r < 0 ? r : 1;
}

ssize_t varlink_stream_read(struct varlink_stream *st) {
        assert(st);

        return frame_reader_read_fd(&st->in, st->fd);
}

int varlink_stream_next(struct varlink_stream *st, const char **ret, size_t *ret_len) {
        assert(st);

        return frame_reader_next(&st->in, ret, ret_len);
}

void varlink_stream_trim(struct varlink_stream *st) {
        assert(st);

        frame_reader_trim(&st->in);
}

void varlink_stream_set_max_message(struct varlink_stream *st, size_t size) {
        assert(st);

        st->in.max_size = size;
}

size_t varlink_stream_buffered(const struct varlink_stream *st) {
        assert(st);

        return st->in.alloc + st->out.alloc;
}

/* Edge-triggered: with level-triggered sockets every wake-up would report again every connection that
 * has data waiting (O(n) per event with n busy clients). So each wake-up reads until EAGAIN, and whenever
 * the connection is ready for more input again the registration is renewed, which makes the kernel
 * report data that is already there. */
int varlink_stream_watch(struct varlink_stream *st, bool want_input, bool rearm) {
        assert(st);

        uint32_t ev = EPOLLET;
        if (want_input)
                ev |= EPOLLIN;
        if (varlink_stream_queued(st) > 0)
                ev |= EPOLLOUT;
        if (ev == st->events && !rearm)
                return 0;
        st->events = ev;
        struct epoll_event e = { .events = ev, .data.ptr = st->owner };
        return epoll_ctl(st->epoll_fd, EPOLL_CTL_MOD, st->fd, &e) < 0 ? -errno : 0;
}
