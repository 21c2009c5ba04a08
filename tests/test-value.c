/* SPDX-License-Identifier: MIT */
/* Value end to end, on a real daemon: the example cache (examples/kvcache.c) reports its misses, its list
 * finds the ones it evicted lately, and its counts carry the value of its last bytes, which ListShrinkers
 * and pressurectl show; a value no count could honestly carry is refused. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "test-util.h"

static struct test_daemon daemon_;

/* A call on fd and its reply, parsed (NULL on none within 10 s). */
static struct json_object *call(int fd, const char *text) {
        char *reply = NULL;
        if (test_send_raw(fd, text, strlen(text) + 1) < 0 || test_recv_msg(fd, 10000, &reply) != 1)
                return NULL;
        struct json_object *o = json_tokener_parse(reply);
        free(reply);
        return o;
}

static struct json_object *path(struct json_object *o, const char *a, const char *b) {
        struct json_object *x = NULL, *y = NULL;
        if (!o || !json_object_object_get_ex(o, a, &x))
                return NULL;
        if (!b)
                return x;
        return json_object_object_get_ex(x, b, &y) ? y : NULL;
}

/* The shrinker named name in ListShrinkers, as a new reference (NULL: none). */
static struct json_object *list_shrinker(const char *name) {
        int fd = test_connect(daemon_.socket);
        struct json_object *reply = fd >= 0 ? call(fd, "{\"method\":\"io.pressured.ListShrinkers\"}") : NULL, *found = NULL;
        struct json_object *list = path(reply, "parameters", "shrinkers");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                struct json_object *sh = json_object_array_get_idx(list, i);
                if (streq(json_object_get_string(path(sh, "name", NULL)) ?: "", name))
                        found = json_object_get(sh);
        }
        json_object_put(reply);
        if (fd >= 0)
                close(fd);
        return found;
}

/* The largest value over the shrinker's nodes (0: none given). */
static double shrinker_value(struct json_object *sh) {
        struct json_object *nodes = path(sh, "nodes", NULL);
        double best = 0;
        for (size_t k = 0; nodes && k < json_object_array_length(nodes); k++) {
                struct json_object *v = path(json_object_array_get_idx(nodes, k), "value", NULL);
                if (v)
                        best = MAX(best, json_object_get_double(v));
        }
        return best;
}

static int shrink(const char *params) {
        char text[512];
        int fd = test_connect(daemon_.socket);
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Shrink\",\"parameters\":{%s}}", params);
        struct json_object *reply = fd >= 0 ? call(fd, text) : NULL;
        int r = reply && !path(reply, "error", NULL) ? 0 : -EIO;
        json_object_put(reply);
        if (fd >= 0)
                close(fd);
        return r;
}

/* kvcache's line protocol: one request, its first line of reply. */
static int kv_request(int fd, const char *req, size_t len, char *line, size_t size) {
        if (test_send_raw(fd, req, len) < 0)
                return -EIO;
        size_t n = 0;
        while (n + 1 < size) {
                ssize_t k = read(fd, line + n, 1);
                if (k <= 0)
                        return -EIO;
                if (line[n] == '\n')
                        break;
                n++;
        }
        line[n] = 0;
        return 0;
}

static int kv_set(int fd, int key) {
        static char req[64 + 4096];
        char line[64];
        int n = snprintf(req, 64, "SET k%d 4096\n", key);
        memset(req + n, 'v', 4096);
        return kv_request(fd, req, (size_t) n + 4096, line, sizeof(line)) < 0 || !streq(line, "STORED") ? -EIO : 0;
}

/* GET: 1 a hit (its value read and dropped), 0 a miss. */
static int kv_get(int fd, int key) {
        char req[64], line[64];
        int n = snprintf(req, sizeof(req), "GET k%d\n", key);
        if (kv_request(fd, req, (size_t) n, line, sizeof(line)) < 0)
                return -EIO;
        if (streq(line, "MISS"))
                return 0;
        size_t len = 0;
        if (sscanf(line, "VALUE %zu", &len) != 1)
                return -EIO;
        char buf[4096];
        while (len > 0) {
                ssize_t k = read(fd, buf, MIN(len, sizeof(buf)));
                if (k <= 0)
                        return -EIO;
                len -= (size_t) k;
        }
        return 1;
}

static void test_cache_value_shown(void) {
        const char *kvcache = getenv("KVCACHE_BIN"), *ctl = getenv("PRESSURECTL_BIN");
        char sock[200], line[512];
        CU_ASSERT_PTR_NOT_NULL_FATAL(kvcache);
        snprintf(sock, sizeof(sock), "%s/kv.sock", daemon_.dir);
        test_cleanup_path(sock, false);

        int p[2];
        CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
        pid_t kv = fork();
        CU_ASSERT_FATAL(kv >= 0);
        if (kv == 0) {
                dup2(p[1], STDOUT_FILENO);
                execl(kvcache, kvcache, "--listen", sock, "--pressured", daemon_.socket, "--miss-cost", "800", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        struct test_child child;
        test_child_adopt(&child, kv, p[0]);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&child.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(line, "shrinker registered"));

        int fd = test_connect(sock);
        CU_ASSERT_FATAL(fd >= 0);
        for (int k = 0; k < 300; k++)
                CU_ASSERT_EQUAL(kv_set(fd, k), 0);
        struct json_object *sh = list_shrinker("kvcache");
        CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
        char params[128];
        snprintf(params, sizeof(params), "\"shrinker\":%lld,\"nr_to_scan\":128",
                 (long long) json_object_get_int64(path(sh, "id", NULL)));
        json_object_put(sh);
        /* Evicts the 128 oldest (nothing was read, so no second chances): k0 .. k127. */
        CU_ASSERT_EQUAL(shrink(params), 0);
        int missed = 0;
        for (int k = 0; k < 128; k++)
                missed += kv_get(fd, k) == 0;
        CU_ASSERT_EQUAL(missed, 128);
        CU_ASSERT_EQUAL(kv_request(fd, "STATS\n", 6, line, sizeof(line)), 0);
        printf("\n    kvcache: %s", line);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, " shadow_hits=128 "));

        /* A count carries what the last bytes are worth now: found misses at the tail, 800 us each. */
        sh = list_shrinker("kvcache");
        CU_ASSERT_EQUAL(shrinker_value(sh), 0); /* not counted since */
        snprintf(params, sizeof(params), "\"shrinker\":%lld,\"dry_run\":true",
                 (long long) json_object_get_int64(path(sh, "id", NULL)));
        json_object_put(sh);
        CU_ASSERT_EQUAL(shrink(params), 0);
        sh = list_shrinker("kvcache");
        double value = shrinker_value(sh);
        printf("\n    its value: %.1f us/s per MiB", value);
        CU_ASSERT(value > 0);
        json_object_put(sh);

        /* pressurectl's VALUE column says the same. */
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "PRESSURED_SOCKET=%s %s shrinkers", daemon_.socket, ctl);
        FILE *out = popen(cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        bool header = false, row = false;
        while (fgets(line, sizeof(line), out)) {
                header = header || strstr(line, " VALUE ");
                if (strstr(line, " kvcache ")) {
                        char want[32];
                        snprintf(want, sizeof(want), " %.3g ", value);
                        row = strstr(line, want) != NULL;
                        if (!row)
                                printf("\n    pressurectl: %s", line);
                }
        }
        CU_ASSERT_EQUAL(pclose(out), 0);
        CU_ASSERT(header);
        CU_ASSERT(row);
        close(fd);
        test_child_stop(&child);
}

/* A serving client of the test's own answers one count; the reply to its Answer. */
static struct json_object *answer_count(int srv, int ans, const char *token, int64_t id, const char *extra) {
        char text[512];
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Shrink\",\"parameters\":{\"shrinker\":%lld,"
                 "\"dry_run\":true},\"oneway\":true}", (long long) id);
        int a = test_connect(daemon_.socket);
        if (a < 0 || test_send_raw(a, text, strlen(text) + 1) < 0) {
                if (a >= 0)
                        close(a);
                return NULL;
        }
        char *req = NULL;
        struct json_object *o = test_recv_msg(srv, 10000, &req) == 1 ? json_tokener_parse(req) : NULL;
        free(req);
        int64_t rid = json_object_get_int64(path(path(o, "parameters", NULL), "request", "id"));
        json_object_put(o);
        snprintf(text, sizeof(text), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                 "\"request\":%lld,\"count\":10,\"bytes\":40960%s}}", token, (long long) rid, extra);
        struct json_object *reply = call(ans, text);
        close(a);
        return reply;
}

static void test_value_refused(void) {
        int srv = test_connect(daemon_.socket), ans = test_connect(daemon_.socket);
        CU_ASSERT_FATAL(srv >= 0 && ans >= 0);
        struct json_object *reg = call(srv, "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":"
                                            "[{\"name\":\"valued\"}]},\"more\":true}");
        const char *t = json_object_get_string(path(path(reg, "parameters", "registered"), "token", NULL));
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        char token[128];
        snprintf(token, sizeof(token), "%s", t);
        json_object_put(reg);
        struct json_object *sh = list_shrinker("valued");
        int64_t id = json_object_get_int64(path(sh, "id", NULL));
        json_object_put(sh);

        static const char *const bad[] = { ",\"value\":-1", ",\"value\":2e9", ",\"value\":\"high\"" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct json_object *reply = answer_count(srv, ans, token, id, bad[i]);
                const char *err = json_object_get_string(path(reply, "error", NULL));
                printf("\n    value %s: %s", bad[i] + 9, err ?: "taken");
                CU_ASSERT(err && (streq(err, "io.pressured.InvalidAnswer") ||
                                  streq(err, "org.varlink.service.InvalidParameter")));
                json_object_put(reply);
        }
        sh = list_shrinker("valued");
        CU_ASSERT_EQUAL(shrinker_value(sh), 0); /* nothing of them was kept */
        json_object_put(sh);

        struct json_object *reply = answer_count(srv, ans, token, id, ",\"value\":5.5");
        CU_ASSERT_PTR_NULL(path(reply, "error", NULL));
        json_object_put(reply);
        sh = list_shrinker("valued");
        CU_ASSERT_DOUBLE_EQUAL(shrinker_value(sh), 5.5, 1e-9);
        json_object_put(sh);
        close(srv);
        close(ans);
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "a cache's counts carry the value of its last bytes, shown", test_cache_value_shown },
                { "a value no count could carry is refused", test_value_refused },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = test_need_root_psi();
        if (!skip && test_daemon_start(&daemon_, NULL) < 0)
                skip = "the daemon did not start";
        return test_run("value", cases, skip);
}
