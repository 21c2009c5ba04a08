/* SPDX-License-Identifier: MIT */
/* Fuzz target: what a Redis or memcached server sends pressure-adapt (tools/adapt/resp.c): replies of any
 * shape, INFO text and memcached's stats text. A reply parsed must account for no more bytes than there are, strings must end where their
 * length says, and nothing may crash, leak or read out of bounds. The first byte picks the parser.
 * Replayed over its corpus as a unit test; built for libFuzzer with -Dfuzzer=true. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct resp_reply *r, int depth) {
        assert(depth <= RESP_MAX_DEPTH);
        if (r->str)
                assert(strlen(r->str) <= r->len && r->str[r->len] == 0);
        assert(r->n_elements <= RESP_MAX_ELEMENTS);
        for (size_t i = 0; i < r->n_elements; i++)
                check(&r->elements[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        char *text = malloc(size); /* the rest, NUL-terminated, and nothing after it to read */
        if (!text)
                return 0;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = 0;
        if (data[0] & 2) {
                /* memcached's text replies: a complete one never ends past the text. */
                unsigned long long v;
                size_t n = strlen(text);
                assert(text_reply_complete(text, n, true) <= n);
                assert(text_reply_complete(text, n, false) <= n);
                (void) text_stat_u64(text, "total_malloced", &v);
                (void) text_stat_u64(text, "pid", &v);
        } else if (data[0] & 1) {
                unsigned long long v;
                (void) resp_info_u64(text, "used_memory", &v);
                (void) resp_info_u64(text, "process_id", &v);
        } else {
                /* Replies one after another, as they would come on one connection. */
                size_t off = 0;
                while (off < size - 1) {
                        struct resp_reply r;
                        size_t used = 0;
                        int k = resp_parse(text + off, size - 1 - off, &r, &used);
                        if (k < 0) {
                                assert(k == -EAGAIN || k == -EPROTO || k == -ENOMEM);
                                break;
                        }
                        assert(used > 0 && used <= size - 1 - off);
                        check(&r, 0);
                        /* The same reply fed in pieces of (data[0] >> 2) + 1 bytes, as a connection gets
                         * it: the same length taken, whatever the split. */
                        size_t step = (size_t) (data[0] >> 2) + 1, fed = 0;
                        struct resp_parser p;
                        resp_parser_init(&p);
                        int pk = 0;
                        while (pk == 0 && fed < used) {
                                size_t take = 0, piece = step < used - fed ? step : used - fed;
                                pk = resp_parser_feed(&p, text + off + fed, piece, &take);
                                assert(take <= piece);
                                fed += take;
                                if (pk == 0 && take < piece) {
                                        /* part of a line stays: given again with what follows */
                                        size_t more = 0;
                                        pk = resp_parser_feed(&p, text + off + fed, used - fed, &more);
                                        fed += more;
                                }
                        }
                        assert(pk == 1 && fed == used);
                        assert(p.root.type == r.type && p.root.n_elements == r.n_elements);
                        resp_reply_done(&p.root);
                        resp_reply_done(&r);
                        off += used;
                }
        }
        free(text);
        return 0;
}
