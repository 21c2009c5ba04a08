/* SPDX-License-Identifier: MIT */
/* The Varlink protocol as a raw client sees it, against the real daemon on a real socket: the standard
 * service interface, the call rules, and bad input that must never hurt the daemon or other clients. */

#include <errno.h>
#include <stdbool.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test-util.h"

static struct test_daemon daemon_;

static int connect_daemon(void) {
        int fd = test_connect(daemon_.socket);
        CU_ASSERT(fd >= 0);
        return fd;
}

/* Send text plus its NUL and parse the one reply. */
static struct json_object *call(int fd, const char *text) {
        char *reply = NULL;
        if (test_send_raw(fd, text, strlen(text) + 1) < 0)
                return NULL;
        if (test_recv_msg(fd, 5000, &reply) != 1)
                return NULL;
        struct json_object *o = json_tokener_parse(reply);
        free(reply);
        return o;
}

static const char *field_str(struct json_object *o, const char *a, const char *b) {
        struct json_object *v;
        if (!o || !json_object_object_get_ex(o, a, &v))
                return NULL;
        if (b && !json_object_object_get_ex(v, b, &v))
                return NULL;
        return json_object_get_string(v);
}

static const char *error_of(struct json_object *o) {
        return field_str(o, "error", NULL);
}

/* After a protocol violation: one error naming it, then the connection is closed. */
static void assert_closed_with_violation(int fd) {
        char *msg = NULL;
        int r = test_recv_msg(fd, 5000, &msg);
        CU_ASSERT_EQUAL(r, 1);
        if (r == 1) {
                struct json_object *o = json_tokener_parse(msg);
                CU_ASSERT_STRING_EQUAL(error_of(o), "io.pressured.ProtocolViolation");
                json_object_put(o);
                free(msg);
        }
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 0);
}

/* The daemon still serves others: a fresh client gets a status. */
static void assert_daemon_serves(void) {
        int fd = connect_daemon();
        struct json_object *o = call(fd, "{\"method\":\"io.pressured.GetStatus\"}");
        CU_ASSERT_PTR_NOT_NULL(o);
        CU_ASSERT_PTR_NULL(error_of(o));
        const char *level = field_str(json_object_object_get(o, "parameters"), "system", "level");
        CU_ASSERT_PTR_NOT_NULL(level);
        json_object_put(o);
        close(fd);
        CU_ASSERT(test_daemon_alive(&daemon_));
}

static void test_get_info(void) {
        int fd = connect_daemon();
        struct json_object *o = call(fd, "{\"method\":\"org.varlink.service.GetInfo\"}");
        struct json_object *p = json_object_object_get(o, "parameters"), *ifaces;
        CU_ASSERT_PTR_NULL(error_of(o));
        CU_ASSERT_STRING_EQUAL(field_str(p, "product", NULL), "pressured");
        CU_ASSERT_TRUE(json_object_object_get_ex(p, "interfaces", &ifaces));
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(ifaces); i++)
                if (strcmp(json_object_get_string(json_object_array_get_idx(ifaces, i)), "io.pressured") == 0)
                        found = true;
        CU_ASSERT_TRUE(found);
        json_object_put(o);

        o = call(fd, "{\"method\":\"org.varlink.service.GetInterfaceDescription\",\"parameters\":{\"interface\":\"io.pressured\"}}");
        const char *d = field_str(o, "parameters", "description");
        CU_ASSERT_PTR_NOT_NULL(d);
        if (d) {
                CU_ASSERT_PTR_NOT_NULL(strstr(d, "interface io.pressured\n"));
                CU_ASSERT_PTR_NOT_NULL(strstr(d, "method Subscribe("));
        }
        json_object_put(o);

        o = call(fd, "{\"method\":\"org.varlink.service.GetInterfaceDescription\",\"parameters\":{\"interface\":\"no.such\"}}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.InterfaceNotFound");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "interface"), "no.such");
        json_object_put(o);
        close(fd);
}

static void test_standard_errors(void) {
        int fd = connect_daemon();
        struct json_object *o;

        o = call(fd, "{\"method\":\"io.nothing.Here\"}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.InterfaceNotFound");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.NoSuchMethod\"}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.MethodNotFound");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "method"), "io.pressured.NoSuchMethod");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.GetStatus\",\"parameters\":{\"verbose\":true}}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.InvalidParameter");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "verbose");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"min_level\":\"dire\"},\"more\":true}");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "min_level");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"node\"}]},\"more\":true}");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "node");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"cgroup\",\"cgroup\":\"/../etc\"}]},\"more\":true}");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "cgroup");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"cgroup\",\"cgroup\":\"/no/such/group\"}]},\"more\":true}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "io.pressured.NoSuchCgroup");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "cgroup"), "/no/such/group");
        json_object_put(o);

        o = call(fd, "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"node\",\"node\":4000}]},\"more\":true}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "io.pressured.NoSuchNode");
        json_object_put(o);

        /* A stream needs "more". */
        o = call(fd, "{\"method\":\"io.pressured.Subscribe\"}");
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.ExpectedMore");
        json_object_put(o);

        /* Nothing above changed the connection: it still answers. */
        o = call(fd, "{\"method\":\"io.pressured.GetStatus\"}");
        CU_ASSERT_PTR_NULL(error_of(o));
        json_object_put(o);
        close(fd);
}

static void test_parameters_absent_null_empty(void) {
        static const char *const forms[] = {
                "{\"method\":\"io.pressured.GetStatus\"}",
                "{\"method\":\"io.pressured.GetStatus\",\"parameters\":null}",
                "{\"method\":\"io.pressured.GetStatus\",\"parameters\":{}}",
                "{\"method\":\"io.pressured.GetStatus\",\"more\":false,\"oneway\":false}",
        };
        int fd = connect_daemon();
        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
                struct json_object *o = call(fd, forms[i]);
                CU_ASSERT_PTR_NOT_NULL(o);
                CU_ASSERT_PTR_NULL(error_of(o));
                CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "system") ? "has" : "none", "has");
                json_object_put(o);
        }
        close(fd);
}

static void test_split_and_pipelined(void) {
        int fd = connect_daemon();
        const char *m = "{\"method\":\"org.varlink.service.GetInfo\"}";
        char *reply = NULL;

        /* One byte per write. */
        for (size_t i = 0; i <= strlen(m); i++)
                CU_ASSERT_EQUAL(test_send_raw(fd, m + i, 1), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &reply), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(reply ?: "", "\"product\""));
        free(reply);

        /* Three calls in one write, the first oneway: exactly two replies, in order. */
        const char three[] = "{\"method\":\"io.pressured.GetStatus\",\"oneway\":true}\0"
                             "{\"method\":\"io.pressured.NoSuch\"}\0"
                             "{\"method\":\"org.varlink.service.GetInfo\"}";
        CU_ASSERT_EQUAL(test_send_raw(fd, three, sizeof(three)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &reply), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(reply ?: "", "MethodNotFound"));
        free(reply);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &reply), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(reply ?: "", "\"product\""));
        free(reply);
        close(fd);
}

static void test_violations_close(void) {
        static const struct {
                const char *text;
                size_t len; /* 0: strlen + NUL */
        } bad[] = {
                { "{\"method\":\"io.pressured.GetStatus\"", 0 },                         /* broken JSON */
                { "[1,2,3]", 0 },                                                       /* not an object */
                { "\"just a string\"", 0 },                                             /* not an object */
                { "{\"parameters\":{}}", 0 },                                           /* no method */
                { "{\"method\":42}", 0 },                                               /* wrong type */
                { "{\"method\":\"io.pressured.GetStatus\",\"parameters\":[]}", 0 },     /* wrong type */
                { "{\"method\":\"io.pressured.GetStatus\",\"more\":\"yes\"}", 0 },      /* flag not a bool */
                { "{\"method\":\"io.pressured.GetStatus\",\"more\":true,\"oneway\":true}", 0 },
                { "{\"method\":\"io.pressured.GetStatus\",\"extra\":1}", 0 },           /* unknown key */
                { "{\"method\":\"io.pressured.GetStatus\"} trailing", 0 },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                int fd = connect_daemon();
                CU_ASSERT_EQUAL(test_send_raw(fd, bad[i].text, bad[i].len ? bad[i].len : strlen(bad[i].text) + 1), 0);
                assert_closed_with_violation(fd);
                close(fd);
        }
        assert_daemon_serves();
}

static void test_oversized_closes(void) {
        /* The daemon runs with a 4 KiB limit: 8 KiB without a NUL must end the connection. */
        int fd = connect_daemon();
        static char junk[8192];
        memset(junk, ' ', sizeof(junk));
        junk[0] = '{';
        (void) test_send_raw(fd, junk, sizeof(junk));
        assert_closed_with_violation(fd);
        close(fd);

        /* Just under the limit, padded with whitespace, is still a valid call. */
        fd = connect_daemon();
        char ok[4096];
        const char *m = "{\"method\":\"io.pressured.GetStatus\"";
        memset(ok, ' ', sizeof(ok));
        memcpy(ok, m, strlen(m));
        ok[sizeof(ok) - 2] = '}';
        ok[sizeof(ok) - 1] = 0;
        struct json_object *o = NULL;
        char *reply = NULL;
        CU_ASSERT_EQUAL(test_send_raw(fd, ok, sizeof(ok)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &reply), 1);
        o = reply ? json_tokener_parse(reply) : NULL;
        CU_ASSERT_PTR_NULL(error_of(o));
        json_object_put(o);
        free(reply);
        close(fd);
        assert_daemon_serves();
}

static void test_streaming_blocks_other_calls(void) {
        int fd = connect_daemon();
        char *msg = NULL;
        const char sub[] = "{\"method\":\"io.pressured.Subscribe\",\"more\":true}";

        CU_ASSERT_EQUAL(test_send_raw(fd, sub, sizeof(sub)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 1);
        struct json_object *o = msg ? json_tokener_parse(msg) : NULL;
        CU_ASSERT_PTR_NOT_NULL(json_object_object_get(json_object_object_get(o, "parameters"), "state"));
        CU_ASSERT_TRUE(json_object_get_boolean(json_object_object_get(o, "continues")));
        json_object_put(o);
        free(msg);

        /* A call on a streaming connection is not processed: no reply comes back while the stream lives,
         * and the connection is not broken either. (A bounded wait for something that must not happen.) */
        const char status[] = "{\"method\":\"io.pressured.GetStatus\"}";
        CU_ASSERT_EQUAL(test_send_raw(fd, status, sizeof(status)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 300, &msg), -ETIMEDOUT);
        close(fd);
        assert_daemon_serves();
}

/* A peer that shuts down its sending side with a call in progress is still answered: the call goes on
 * (here a subscription) until the peer closes. The GetStatus on another connection is the daemon's
 * word that it has seen the shutdown: epoll reports ready connections in the order they became ready. */
static void test_half_closed_call_goes_on(void) {
        int fd = connect_daemon();
        char *msg = NULL, c;
        const char sub[] = "{\"method\":\"io.pressured.Subscribe\",\"more\":true}";

        CU_ASSERT_EQUAL(test_send_raw(fd, sub, sizeof(sub)), 0);
        CU_ASSERT_EQUAL(shutdown(fd, SHUT_WR), 0);
        assert_daemon_serves();
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 1);
        CU_ASSERT_PTR_NOT_NULL(msg ? strstr(msg, "\"continues\":true") : NULL);
        free(msg);
        /* Still open: whatever events came meanwhile, no end. */
        ssize_t k;
        while ((k = recv(fd, &c, 1, MSG_DONTWAIT)) > 0)
                ;
        CU_ASSERT(k < 0 && errno == EAGAIN);
        close(fd);
        assert_daemon_serves();
}

static void test_client_dies_mid_stream(void) {
        /* Many subscribers that vanish without a word; the daemon drops them and goes on. */
        for (int i = 0; i < 50; i++) {
                int fd = connect_daemon();
                const char sub[] = "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"system\"},{\"type\":\"node\",\"node\":0}]},\"more\":true}";
                (void) test_send_raw(fd, sub, sizeof(sub));
                close(fd);
        }
        assert_daemon_serves();
}

/* One message from fd, parsed (NULL on timeout). */
static struct json_object *next_msg(int fd) {
        char *msg = NULL;
        if (test_recv_msg(fd, 5000, &msg) != 1)
                return NULL;
        struct json_object *o = json_tokener_parse(msg);
        free(msg);
        return o;
}

static int64_t field_int(struct json_object *o, const char *key) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : -1;
}

/* Register shrinkers a and b on fd (batched or not) and copy the token; 0 or -1. */
static int serve_ab(int fd, bool batched, char *tok, size_t size) {
        char reg[256];
        snprintf(reg, sizeof(reg), "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":[{\"name\":\"a\"},"
                 "{\"name\":\"b\"}]%s},\"more\":true}", batched ? ",\"batched\":true" : "");
        if (test_send_raw(fd, reg, strlen(reg) + 1) < 0)
                return -1;
        struct json_object *o = next_msg(fd);
        const char *token = field_str(json_object_object_get(o, "parameters"), "registered", "token");
        int r = token ? 0 : -1;
        if (token)
                snprintf(tok, size, "%s", token);
        json_object_put(o);
        return r;
}

/* A batched client: the requests of one round come in one reply, the answers go in one call, and each
 * answer of a list stands on its own; a malformed list changes nothing. */
static void test_batched_serve_and_answers(void) {
        int serve = connect_daemon(), answer = connect_daemon(), ctl = connect_daemon();
        char text[1024], tok[64];
        CU_ASSERT_EQUAL_FATAL(serve_ab(serve, true, tok, sizeof(tok)), 0);
        struct json_object *o;

        /* Shrink everything: both shrinkers are counted, in one message. */
        const char shrink[] = "{\"method\":\"io.pressured.Shrink\"}";
        CU_ASSERT_EQUAL(test_send_raw(ctl, shrink, sizeof(shrink)), 0);
        o = next_msg(serve);
        struct json_object *params = json_object_object_get(o, "parameters");
        struct json_object *reqs = json_object_object_get(params, "requests");
        CU_ASSERT_PTR_NULL(json_object_object_get(params, "request"));
        CU_ASSERT_EQUAL_FATAL(reqs ? json_object_array_length(reqs) : 0, 2);
        int64_t id_a = -1, id_b = -1;
        for (size_t i = 0; i < 2; i++) {
                struct json_object *q = json_object_array_get_idx(reqs, i);
                CU_ASSERT_STRING_EQUAL(field_str(q, "op", NULL), "count");
                if (field_int(q, "shrinker") == 1)
                        id_a = field_int(q, "id");
                else
                        id_b = field_int(q, "id");
        }
        json_object_put(o);
        CU_ASSERT_FATAL(id_a > 0 && id_b > 0);

        /* A list with one malformed item is refused whole, as is a list beside a single answer. */
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                 "\"answers\":[{\"request\":%lld,\"count\":3},{\"request\":\"x\"}]}}", tok, (long long) id_a);
        o = call(answer, text);
        CU_ASSERT_STRING_EQUAL(error_of(o), "org.varlink.service.InvalidParameter");
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "answers");
        json_object_put(o);
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\",\"request\":%lld,"
                 "\"answers\":[{\"request\":%lld,\"count\":3}]}}", tok, (long long) id_a, (long long) id_a);
        o = call(answer, text);
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "answers");
        json_object_put(o);

        /* Nothing of that was applied: a's request is still open. Now a good answer and an impossible
         * one in one list: a counts 3, b's job ends, the error names b's request. */
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                 "\"answers\":[{\"request\":%lld,\"count\":3},{\"request\":%lld,\"count\":-1}]}}",
                 tok, (long long) id_a, (long long) id_b);
        o = call(answer, text);
        CU_ASSERT_STRING_EQUAL(error_of(o), "io.pressured.InvalidAnswer");
        CU_ASSERT_EQUAL(field_int(json_object_object_get(o, "parameters"), "request"), id_b);
        json_object_put(o);

        /* a is asked to scan its 3 objects, again as a list. */
        o = next_msg(serve);
        reqs = json_object_object_get(json_object_object_get(o, "parameters"), "requests");
        CU_ASSERT_EQUAL_FATAL(reqs ? json_object_array_length(reqs) : 0, 1);
        struct json_object *q = json_object_array_get_idx(reqs, 0);
        CU_ASSERT_STRING_EQUAL(field_str(q, "op", NULL), "scan");
        CU_ASSERT_EQUAL(field_int(q, "nr_to_scan"), 3);
        int64_t id_scan = field_int(q, "id");
        json_object_put(o);
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                 "\"answers\":[{\"request\":%lld,\"freed\":3}]}}", tok, (long long) id_scan);
        o = call(answer, text);
        CU_ASSERT_PTR_NULL(error_of(o));
        json_object_put(o);

        /* The Shrink's results: a freed 3, b nothing (its answer was refused). */
        o = next_msg(ctl);
        struct json_object *results = json_object_object_get(json_object_object_get(o, "parameters"), "results");
        CU_ASSERT_EQUAL(results ? json_object_array_length(results) : 0, 2);
        for (size_t i = 0; results && i < json_object_array_length(results); i++) {
                struct json_object *res = json_object_array_get_idx(results, i);
                CU_ASSERT_EQUAL(field_int(res, "freed"), field_int(res, "shrinker") == 1 ? 3 : 0);
        }
        json_object_put(o);

        /* The same answer again is unknown now. */
        o = call(answer, text);
        CU_ASSERT_STRING_EQUAL(error_of(o), "io.pressured.UnknownRequest");
        json_object_put(o);
        close(serve);
        close(answer);
        close(ctl);
        assert_daemon_serves();
}

/* A client that did not ask for batches gets one request per reply and answers one per call. */
static void test_unbatched_serve(void) {
        int serve = connect_daemon(), answer = connect_daemon(), ctl = connect_daemon();
        char text[1024], tok[64];
        CU_ASSERT_EQUAL_FATAL(serve_ab(serve, false, tok, sizeof(tok)), 0);
        struct json_object *o;

        const char shrink[] = "{\"method\":\"io.pressured.Shrink\",\"parameters\":{\"nr_to_scan\":3}}";
        CU_ASSERT_EQUAL(test_send_raw(ctl, shrink, sizeof(shrink)), 0);
        /* Two shrinkers asked at once: two replies of one request each. */
        for (int i = 0; i < 2; i++) {
                o = next_msg(serve);
                struct json_object *params = json_object_object_get(o, "parameters");
                struct json_object *q = json_object_object_get(params, "request");
                CU_ASSERT_PTR_NULL(json_object_object_get(params, "requests"));
                CU_ASSERT_PTR_NOT_NULL_FATAL(q);
                CU_ASSERT_STRING_EQUAL(field_str(q, "op", NULL), "scan");
                CU_ASSERT_EQUAL(field_int(q, "nr_to_scan"), 3);
                snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                         "\"request\":%lld,\"freed\":%d}}", tok, (long long) field_int(q, "id"), i + 1);
                json_object_put(o);
                o = call(answer, text);
                CU_ASSERT_PTR_NULL(error_of(o));
                json_object_put(o);
        }
        /* A call's own answer and a list are one or the other. */
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\",\"freed\":1}}", tok);
        o = call(answer, text);
        CU_ASSERT_STRING_EQUAL(field_str(o, "parameters", "parameter"), "request");
        json_object_put(o);

        o = next_msg(ctl);
        struct json_object *results = json_object_object_get(json_object_object_get(o, "parameters"), "results");
        CU_ASSERT_EQUAL(results ? json_object_array_length(results) : 0, 2);
        int64_t freed = 0;
        for (size_t i = 0; results && i < json_object_array_length(results); i++)
                freed += field_int(json_object_array_get_idx(results, i), "freed");
        CU_ASSERT_EQUAL(freed, 3);
        json_object_put(o);
        close(serve);
        close(answer);
        close(ctl);
        assert_daemon_serves();
}

static void test_clean_shutdown(void) {
        int fd = connect_daemon();
        char *msg = NULL;
        const char sub[] = "{\"method\":\"io.pressured.Subscribe\",\"more\":true}";
        CU_ASSERT_EQUAL(test_send_raw(fd, sub, sizeof(sub)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 1);
        free(msg);

        /* SIGTERM: exit status 0, the subscriber gets a last reply and then the end of the connection,
         * the socket file is gone. */
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg ? msg : "", "\"error\":\"io.pressured.ShuttingDown\""));
        free(msg);
        msg = NULL;
        CU_ASSERT_EQUAL(test_recv_msg(fd, 5000, &msg), 0);
        CU_ASSERT_EQUAL(access(daemon_.socket, F_OK), -1);
        close(fd);
}

int main(void) {
        static const struct test_case cases[] = {
                { "GetInfo and GetInterfaceDescription", test_get_info },
                { "standard and interface errors", test_standard_errors },
                { "parameters absent, null and empty", test_parameters_absent_null_empty },
                { "split and pipelined calls", test_split_and_pipelined },
                { "protocol violations close the connection", test_violations_close },
                { "oversized messages close the connection", test_oversized_closes },
                { "a streaming connection takes no other call", test_streaming_blocks_other_calls },
                { "clients that die mid-stream", test_client_dies_mid_stream },
                { "a half-closed connection's call goes on", test_half_closed_call_goes_on },
                { "batched requests and answers", test_batched_serve_and_answers },
                { "one request per reply without batching", test_unbatched_serve },
                { "clean shutdown", test_clean_shutdown },
                {},
        };
        const char *skip = access("/proc/pressure/memory", R_OK) < 0 ? "no PSI on this kernel" : NULL;
        if (!skip) {
                /* Thresholds out of reach: a subscription hears nothing of the host's live pressure
                 * while a test waits for a message that must not come. */
                static const char *const args[] = { "--max-message-size", "4096", "--low", "some 1900ms 2s",
                                                    "--medium", "some 1950ms 2s", "--critical", "full 1990ms 2s",
                                                    NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        return 1;
                }
        }
        return test_run("protocol", cases, skip);
}
