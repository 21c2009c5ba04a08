/* SPDX-License-Identifier: MIT */
/* pressure-adapt's RESP parser on replies as Redis writes them, cut short, and malformed; and INFO text. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"
#include "text.h"
#include "test-util.h"

static int parse(const char *text, struct resp_reply *r, size_t *used) {
        return resp_parse(text, strlen(text), r, used);
}

static void test_replies(void) {
        struct resp_reply r;
        size_t used;
        CU_ASSERT_EQUAL(parse("+OK\r\n", &r, &used), 0);
        CU_ASSERT(r.type == RESP_STATUS && strcmp(r.str, "OK") == 0 && used == 5);
        resp_reply_done(&r);
        CU_ASSERT_EQUAL(parse("-ERR wrong\r\n:1\r\n", &r, &used), 0);
        CU_ASSERT(r.type == RESP_ERROR && strcmp(r.str, "ERR wrong") == 0 && used == 12); /* the next stays */
        resp_reply_done(&r);
        CU_ASSERT_EQUAL(parse(":-42\r\n", &r, &used), 0);
        CU_ASSERT(r.type == RESP_INTEGER && r.integer == -42);
        resp_reply_done(&r);
        CU_ASSERT_EQUAL(parse("$-1\r\n", &r, &used), 0);
        CU_ASSERT(r.type == RESP_BULK && r.integer == -1 && !r.str);
        resp_reply_done(&r);
        CU_ASSERT_EQUAL(parse("$4\r\na\r\nb\r\n", &r, &used), 0); /* a bulk holds CRLF */
        CU_ASSERT(r.type == RESP_BULK && r.len == 4 && memcmp(r.str, "a\r\nb", 4) == 0 && used == 10);
        resp_reply_done(&r);
        /* CONFIG GET maxmemory */
        CU_ASSERT_EQUAL(parse("*2\r\n$9\r\nmaxmemory\r\n$8\r\n20971520\r\n", &r, &used), 0);
        CU_ASSERT_EQUAL_FATAL(r.n_elements, 2u);
        CU_ASSERT_STRING_EQUAL(r.elements[1].str, "20971520");
        resp_reply_done(&r);
        CU_ASSERT_EQUAL(parse("*0\r\n", &r, &used), 0);
        CU_ASSERT(r.type == RESP_ARRAY && r.n_elements == 0);
        resp_reply_done(&r);
}

static void test_short_and_bad(void) {
        struct resp_reply r;
        size_t used;
        static const char *const short_[] = { "", "+OK", "+OK\r", "$5\r\nabc", "$5\r\nabcde\r", "*2\r\n:1\r\n", ":12" };
        for (size_t i = 0; i < sizeof(short_) / sizeof(short_[0]); i++)
                CU_ASSERT_EQUAL(parse(short_[i], &r, &used), -EAGAIN);
        static const char *const bad[] = {
                "\r\n", "?x\r\n", ":12a\r\n", ":\r\n", "$-2\r\n", "$3\r\nabcd\r\n", "*-5\r\n", "*1025\r\n",
                "$99999999999\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", /* deeper than 4 */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CU_ASSERT_EQUAL(parse(bad[i], &r, &used), -EPROTO);
        /* A status line with a NUL: the copy is as long as the line (a fuzzer found the short copy). */
        CU_ASSERT_EQUAL(resp_parse("+a\0b\r\n", 6, &r, &used), 0);
        CU_ASSERT(r.len == 3 && r.str[3] == 0);
        resp_reply_done(&r);
}

/* Bounds over the whole reply, whatever its shape, and a reply fed a byte at a time. */
static void test_bounds(void) {
        static char buf[(2u << 20) + 64];
        struct resp_reply r;
        size_t used, n;
        /* Four levels of 1,024 elements: past the reply's 1,024 items at the second level. */
        n = (size_t) snprintf(buf, sizeof(buf), "*1024\r\n*1024\r\n");
        for (int i = 0; i < 1100; i++)
                n += (size_t) snprintf(buf + n, sizeof(buf) - n, ":1\r\n");
        CU_ASSERT_EQUAL(resp_parse(buf, n, &r, &used), -EPROTO);
        n = (size_t) snprintf(buf, sizeof(buf), "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"); /* five deep */
        CU_ASSERT_EQUAL(resp_parse(buf, n, &r, &used), -EPROTO);
        n = (size_t) snprintf(buf, sizeof(buf), "$%u\r\n", (3u << 20));
        CU_ASSERT_EQUAL(resp_parse(buf, n, &r, &used), -EPROTO); /* refused at its header */
        /* Two bulks of 600 KiB: each within RESP_MAX_BULK, together past RESP_MAX_REPLY. */
        n = (size_t) snprintf(buf, sizeof(buf), "*2\r\n$%u\r\n", 600u << 10);
        memset(buf + n, 'x', 600u << 10);
        n += 600u << 10;
        n += (size_t) snprintf(buf + n, sizeof(buf) - n, "\r\n$%u\r\n", 600u << 10);
        CU_ASSERT_EQUAL(resp_parse(buf, n, &r, &used), -EPROTO);
        /* A header line that never ends. */
        memset(buf, '+', RESP_MAX_LINE + 10);
        CU_ASSERT_EQUAL(resp_parse(buf, RESP_MAX_LINE + 10, &r, &used), -EPROTO);

        /* A byte at a time: each byte is taken once, the line that is not whole waits. */
        static const char reply[] = "*3\r\n$5\r\nhello\r\n:42\r\n*1\r\n+OK\r\n";
        struct resp_parser p;
        resp_parser_init(&p);
        size_t have = 0, start = 0;
        int k = 0;
        for (size_t i = 0; k == 0 && i < sizeof(reply) - 1; i++) {
                have = i + 1;
                size_t take = 0;
                k = resp_parser_feed(&p, reply + start, have - start, &take);
                start += take;
        }
        CU_ASSERT_EQUAL(k, 1);
        CU_ASSERT_EQUAL(start, sizeof(reply) - 1);
        CU_ASSERT(p.root.type == RESP_ARRAY && p.root.n_elements == 3);
        CU_ASSERT(p.root.n_elements == 3 && strcmp(p.root.elements[0].str, "hello") == 0 &&
                  p.root.elements[1].integer == 42 && strcmp(p.root.elements[2].elements[0].str, "OK") == 0);
        resp_reply_done(&p.root);
}

static void test_info(void) {
        static const char info[] = "# Memory\r\nused_memory:63487152\r\nused_memory_human:60.55M\r\n"
                                   "used_memory_rss:76906496\r\nused_memory_peak:1\r\n";
        unsigned long long v;
        CU_ASSERT_EQUAL(resp_info_u64(info, "used_memory", &v), 0);
        CU_ASSERT_EQUAL(v, 63487152u);
        CU_ASSERT_EQUAL(resp_info_u64(info, "used_memory_rss", &v), 0);
        CU_ASSERT_EQUAL(v, 76906496u);
        CU_ASSERT_EQUAL(resp_info_u64(info, "used_memory_human", &v), -EINVAL);
        CU_ASSERT_EQUAL(resp_info_u64(info, "process_id", &v), -ENOENT);
        CU_ASSERT_EQUAL(resp_info_u64("used_memory:-5\r\n", "used_memory", &v), -EINVAL);
        CU_ASSERT_EQUAL(resp_info_u64("used_memory:99999999999999999999999\r\n", "used_memory", &v), -EINVAL);
}

static void test_text(void) {
        static const char stats[] = "STAT pid 24151\r\nSTAT limit_maxbytes 67108864\r\nSTAT total_malloced 4\r\n"
                                    "STAT 18:total_pages 64\r\nEND\r\n";
        unsigned long long v = 0;
        size_t n = strlen(stats);
        CU_ASSERT_EQUAL(text_reply_complete(stats, n, true), n);
        CU_ASSERT_EQUAL(text_reply_complete(stats, n - 1, true), 0u); /* no END line yet */
        CU_ASSERT_EQUAL(text_reply_complete(stats, n, false), 16u);  /* one line */
        CU_ASSERT_EQUAL(text_reply_complete("CLIENT_ERROR bad\r\nmore", 23, true), 18u);
        CU_ASSERT_EQUAL(text_reply_complete("ENDING\r\nEND\r\n", 13, true), 13u); /* a line only "END" ends it */
        CU_ASSERT_EQUAL(text_stat_u64(stats, "pid", &v), 0);
        CU_ASSERT_EQUAL(v, 24151u);
        CU_ASSERT_EQUAL(text_stat_u64(stats, "18:total_pages", &v), 0);
        CU_ASSERT_EQUAL(v, 64u);
        CU_ASSERT_EQUAL(text_stat_u64(stats, "total", &v), -ENOENT); /* a prefix is not the name */
        CU_ASSERT_EQUAL(text_stat_u64("STAT pid -1\r\n", "pid", &v), -EINVAL);
        CU_ASSERT_EQUAL(text_stat_u64("STAT pid 12x\r\n", "pid", &v), -EINVAL);
        CU_ASSERT_EQUAL(text_stat_u64("STAT pid 99999999999999999999999\r\n", "pid", &v), -EINVAL);
}

int main(void) {
        static const struct test_case cases[] = {
                { "replies as Redis writes them", test_replies },
                { "memcached's text replies", test_text },
                { "replies cut short, and malformed", test_short_and_bad },
                { "INFO fields", test_info },
                { "bounds over a whole reply, and a byte at a time", test_bounds },
                {},
        };
        return test_run("resp", cases, NULL);
}
