/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "test-util.h"

static void test_split_over_many_reads(void) {
        struct frame_reader r;
        const char msg[] = "{\"method\":\"io.pressured.GetStatus\"}";
        const char *out;
        size_t len;

        frame_reader_init(&r, 1024);
        /* One byte per read, NUL included. */
        for (size_t i = 0; i < sizeof(msg) - 1; i++) {
                CU_ASSERT_EQUAL(frame_reader_feed(&r, msg + i, 1), 0);
                CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 0);
        }
        CU_ASSERT_EQUAL(frame_reader_feed(&r, "", 1), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_EQUAL(len, strlen(msg));
        CU_ASSERT_STRING_EQUAL(out, msg);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 0);
        CU_ASSERT_EQUAL(frame_reader_pending(&r), 0u);
        frame_reader_done(&r);
}

static void test_several_in_one_read(void) {
        struct frame_reader r;
        const char data[] = "{\"a\":1}\0{\"b\":2}\0{\"c\":"; /* two whole, one started */
        const char *out;
        size_t len;

        frame_reader_init(&r, 1024);
        CU_ASSERT_EQUAL(frame_reader_feed(&r, data, sizeof(data) - 1), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_STRING_EQUAL(out, "{\"a\":1}");
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_STRING_EQUAL(out, "{\"b\":2}");
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 0);
        CU_ASSERT_EQUAL(frame_reader_feed(&r, "3}", 3), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_STRING_EQUAL(out, "{\"c\":3}");
        frame_reader_done(&r);
}

static void test_oversized(void) {
        struct frame_reader r;
        char big[200];
        const char *out;
        size_t len;

        memset(big, 'x', sizeof(big));
        frame_reader_init(&r, 100);
        /* No NUL within the limit: the stream cannot be trusted any more. */
        CU_ASSERT_EQUAL(frame_reader_feed(&r, big, 99), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 0);
        CU_ASSERT_EQUAL(frame_reader_feed(&r, big, 1), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), -EMSGSIZE);
        frame_reader_done(&r);

        /* A whole message one byte over the limit is refused too; one at the limit passes. */
        frame_reader_init(&r, 100);
        big[99] = 0;
        CU_ASSERT_EQUAL(frame_reader_feed(&r, big, 100), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_EQUAL(len, 99u);
        memset(big, 'x', sizeof(big));
        big[100] = 0;
        CU_ASSERT_EQUAL(frame_reader_feed(&r, big, 101), 0);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), -EMSGSIZE);
        frame_reader_done(&r);
}

static void test_socket_roundtrip(void) {
        int sv[2];
        struct frame_writer w;
        struct frame_reader r;
        const char *out;
        size_t len;

        CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        frame_writer_init(&w);
        frame_reader_init(&r, 4096);
        CU_ASSERT_EQUAL(frame_writer_put(&w, "{\"x\":1}", 7), 0);
        CU_ASSERT_EQUAL(frame_writer_put(&w, "{\"y\":2}", 7), 0);
        CU_ASSERT_EQUAL(frame_writer_queued(&w), 16u);
        CU_ASSERT_EQUAL(frame_writer_flush(&w, sv[0]), 0);
        CU_ASSERT_EQUAL(frame_writer_queued(&w), 0u);
        CU_ASSERT_EQUAL(frame_reader_read_fd(&r, sv[1]), 16);
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_STRING_EQUAL(out, "{\"x\":1}");
        CU_ASSERT_EQUAL(frame_reader_next(&r, &out, &len), 1);
        CU_ASSERT_STRING_EQUAL(out, "{\"y\":2}");

        /* A peer that is gone: an error, never SIGPIPE. */
        close(sv[1]);
        CU_ASSERT_EQUAL(frame_writer_put(&w, "{}", 2), 0);
        CU_ASSERT_EQUAL(frame_writer_flush(&w, sv[0]), -EPIPE);
        close(sv[0]);
        frame_writer_done(&w);
        frame_reader_done(&r);
}

static void test_writer_keeps_what_socket_refuses(void) {
        int sv[2];
        struct frame_writer w;
        static char chunk[65536];

        CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        frame_writer_init(&w);
        memset(chunk, 'a', sizeof(chunk) - 1);
        /* Far more than a socket buffer holds: flush says EAGAIN and keeps the rest. */
        int r = 0;
        for (int i = 0; i < 64 && r == 0; i++) {
                CU_ASSERT_EQUAL(frame_writer_put(&w, chunk, sizeof(chunk) - 1), 0);
                r = frame_writer_flush(&w, sv[0]);
        }
        CU_ASSERT_EQUAL(r, -EAGAIN);
        CU_ASSERT(frame_writer_queued(&w) > 0);
        close(sv[0]);
        close(sv[1]);
        frame_writer_done(&w);
}

int main(void) {
        static const struct test_case cases[] = {
                { "a message split over many reads", test_split_over_many_reads },
                { "several messages in one read", test_several_in_one_read },
                { "oversized messages", test_oversized },
                { "socket round trip", test_socket_roundtrip },
                { "writer keeps what the socket refuses", test_writer_keeps_what_socket_refuses },
                {},
        };
        return test_run("frame", cases, NULL);
}
