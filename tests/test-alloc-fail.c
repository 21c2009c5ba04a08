/* SPDX-License-Identifier: MIT */
/* Allocation failure, injected at every allocation in turn: the daemon's encoders and its Varlink server,
 * with json-c and libsystemd underneath, meet a malloc() that fails once, at the first allocation, then
 * at the second, and so on until a pass sees no failure. Each encoder returns the whole object or NULL;
 * the daemon answers a call whole or closes the connection (never a reply with holes); nothing leaks,
 * and the daemon answers the next connection as before.
 *
 * The program replaces malloc and its family (glibc allows it; its own strdup, json-c and libsystemd
 * then call the replacement). AddressSanitizer replaces them first, so under it the test skips. */
#include <errno.h>
#include <dlfcn.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "protocol.h"
#include "test-util.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || __has_feature(address_sanitizer) || \
        __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define REPLACED_MALLOC 0
#else
#define REPLACED_MALLOC 1
#endif

/* ---- the allocator ---- */

static long fail_at = -1; /* the allocation, counted from the arming, that fails; -1: none */
static long n_allocs;
static bool failed;
static long live; /* allocations not freed (a difference between two moments is what counts) */

static void arm(long n) {
        n_allocs = 0;
        failed = false;
        fail_at = n;
}

static void disarm(void) {
        fail_at = -1;
}

#if REPLACED_MALLOC
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static int spared; /* inside code whose allocations are not failed */

static bool fail_now(void) {
        if (fail_at < 0 || spared > 0 || n_allocs++ != fail_at)
                return false;
        failed = true;
        errno = ENOMEM;
        return true;
}

void *malloc(size_t n) {
        void *p = fail_now() ? NULL : __libc_malloc(n);
        live += !!p;
        return p;
}

void *calloc(size_t n, size_t size) {
        void *p = fail_now() ? NULL : __libc_calloc(n, size);
        live += !!p;
        return p;
}

void *realloc(void *p, size_t n) {
        if (p && n == 0) {
                free(p);
                return NULL;
        }
        void *q = fail_now() ? NULL : __libc_realloc(p, n);
        live += q && !p;
        return q;
}

void *reallocarray(void *p, size_t n, size_t size) {
        if (size && n > SIZE_MAX / size) {
                errno = ENOMEM;
                return NULL;
        }
        return realloc(p, n * size);
}

void *memalign(size_t align, size_t n) {
        void *p = fail_now() ? NULL : __libc_memalign(align, n);
        live += !!p;
        return p;
}

void *aligned_alloc(size_t align, size_t n) {
        return memalign(align, n);
}

int posix_memalign(void **ret, size_t align, size_t n) {
        void *p = memalign(align, n);
        if (!p)
                return ENOMEM;
        *ret = p;
        return 0;
}

void free(void *p) {
        live -= !!p;
        __libc_free(p);
}

#if JSON_C_VERSION_NUM < ((0 << 16) | (17 << 8))
/* json-c before 0.17 does not check the strdup() of an object key in its tokener and hashes the NULL
 * (json_tokener_error_memory came with 0.17): a parse that meets a failed allocation crashes inside
 * json-c, whoever calls it. Its allocations are spared here, so that the test finds our faults. */
struct json_object *json_tokener_parse_ex(struct json_tokener *tok, const char *str, int len) {
        static struct json_object *(*real)(struct json_tokener *, const char *, int);
        if (!real)
                real = (struct json_object * (*) (struct json_tokener *, const char *, int)) dlsym(RTLD_NEXT, "json_tokener_parse_ex");
        spared++;
        struct json_object *o = real(tok, str, len);
        spared--;
        return o;
}
#endif
#endif

/* ---- encoders ---- */

static char *text_of(struct json_object *o) {
        return strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

/* Fail each allocation of build() in turn: a result is NULL, or the very object built without failures. */
static void check_encoder(const char *name, struct json_object *(*build)(void)) {
        struct json_object *o = build();
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        char *want = text_of(o);
        json_object_put(o);

        unsigned n_null = 0;
        long n;
        for (n = 0;; n++) {
                long before = live;
                arm(n);
                o = build();
                disarm();
                if (!failed) {
                        json_object_put(o);
                        break;
                }
                bool same = true;
                if (o) {
                        char *got = text_of(o);
                        same = streq(got, want);
                        if (!same)
                                fprintf(stderr, "%s, allocation %ld failed: %s\n", name, n, got);
                        free(got);
                } else
                        n_null++;
                json_object_put(o);
                long leaked = live - before; /* before any assertion, which allocates when it fails */
                if (leaked != 0)
                        fprintf(stderr, "%s, allocation %ld failed: %ld allocations leaked\n", name, n, leaked);
                CU_ASSERT(same);
                CU_ASSERT_EQUAL(leaked, 0);
        }
        fprintf(stderr, "%s: %ld allocations, %u failures reported\n", name, n, n_null);
        CU_ASSERT(n > 0);
        CU_ASSERT(n_null > 0);
        free(want);
}

static const struct scope_snapshot full_state = {
        .id = { .type = SCOPE_CGROUP, .node = -1, .cgroup = "/a/b" },
        .level = LEVEL_MEDIUM,
        .have_psi = true,
        .psi = { .has_full = true, .line = { { 12.5, 3.25, 1, 123456 }, { 1.5, 0.25, 0, 654 } } },
        .have_node_memory = true,
        .node = { 1 << 30, 1 << 20, 1000, 2000, 3000, 4, 5, 6 },
        .have_cgroup_memory = true,
        .usage = 1 << 24,
        .limit = 1 << 25,
        .reclaim_target = 4096,
        .since = 99,
        .removed = true,
};

static struct json_object *build_state(void) {
        return protocol_encode_scope_state(&full_state);
}

static struct json_object *build_change(void) {
        return protocol_encode_level_change(&full_state, LEVEL_LOW, 3);
}

static struct json_object *build_info(void) {
        struct shrinker_node_figures nodes[] = { { 0, 10, 100, 1 }, { 1, 20, 200, 2 } };
        const struct shrinker_info_snapshot i = {
                .id = 7, .name = "cache", .pid = 42, .uid = 1000, .cgroup = "/u", .flags = SHRINKER_NUMA_AWARE | SHRINKER_MEMCG_AWARE,
                .seeks = 2, .batch = 128, .n_nodes = 2, .nodes = nodes, .stats = { .calls = 3, .rejected = 1 },
                .client_trust = 500,
        };
        return protocol_encode_shrinker_info(&i);
}

static struct json_object *build_result(void) {
        const struct shrink_result r = { .shrinker = 1, .name = "x", .cgroup = "/", .scanned = 5, .freed = 4,
                                         .have_released = true, .released_bytes = 9, .stopped = true, .rejected = true };
        return protocol_encode_shrink_result(&r);
}

static struct json_object *build_registration(void) {
        struct shrinker_ref refs[] = { { 1, "one" }, { 2, "two" } };
        const struct shrink_registration g = { .token = "t", .n_shrinkers = 2, .shrinkers = refs };
        return protocol_encode_registration(&g);
}

static void test_encoders(void) {
        check_encoder("ScopeState", build_state);
        check_encoder("LevelChange", build_change);
        check_encoder("ShrinkerInfo", build_info);
        check_encoder("ShrinkResult", build_result);
        check_encoder("Registration", build_registration);
}

/* ---- the daemon ---- */

static struct manager *daemon_;
static char dir[64], sock_path[96];

static void daemon_stop(void) {
        daemon_ = manager_free(daemon_);
        if (dir[0])
                (void) rmdir(dir);
}

static void settle(void) {
        for (int i = 0; i < 256 && sd_event_run(daemon_->event, 0) > 0; i++)
                ;
}

/* Send one message on a new connection, run the daemon with allocation `n` failing (-1: none), and read
 * what comes back until the daemon has nothing more to say. *ret_closed: the daemon closed it. */
static char *exchange(const char *msg, long n, bool *ret_closed) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        CU_ASSERT_FATAL(fd >= 0);
        CU_ASSERT_FATAL(connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
        CU_ASSERT_FATAL(send(fd, msg, strlen(msg) + 1, MSG_NOSIGNAL) == (ssize_t) strlen(msg) + 1);

        arm(n);
        settle();
        disarm();
        settle(); /* what the failure left to do: closing, freeing */

        char *buf = calloc(1, 1 << 20);
        size_t len = 0;
        ssize_t k;
        while (len < (1 << 20) - 1 && (k = recv(fd, buf + len, (1 << 20) - 1 - len, MSG_DONTWAIT)) > 0)
                len += (size_t) k;
        /* A connection closed with our message unread is reset rather than ended. */
        *ret_closed = k == 0 || (k < 0 && errno == ECONNRESET);
        close(fd);
        settle();
        /* Messages are NUL-separated: make them lines for comparing. */
        for (size_t i = 0; i < len; i++)
                if (!buf[i])
                        buf[i] = '\n';
        return buf;
}

/* The shape of a reply: the error (or none) and the parameters' keys of its first message. */
static char *shape(const char *text) {
        const char *nl = strchr(text, '\n');
        char *first = strndup(text, nl ? (size_t) (nl - text) : strlen(text));
        struct json_object *o = json_tokener_parse(first), *e = NULL, *p = NULL;
        char out[1024] = "";
        if (!o)
                snprintf(out, sizeof(out), "(no whole message: \"%.80s\")", first);
        else {
                json_object_object_get_ex(o, "error", &e);
                json_object_object_get_ex(o, "parameters", &p);
                snprintf(out, sizeof(out), "%s:", e ? json_object_get_string(e) : "reply");
                json_object_object_foreach(p, key, val) {
                        (void) val;
                        strncat(out, key, sizeof(out) - strlen(out) - 2);
                        strcat(out, ",");
                }
        }
        json_object_put(o);
        free(first);
        return strdup(out);
}

static void check_call(const char *msg) {
        bool closed;
        char *want_text = exchange(msg, -1, &closed);
        char *want = shape(want_text);
        /* Twice without failures: what the first call allocated once and keeps is not a leak. */
        free(exchange(msg, -1, &closed));

        unsigned n_closed = 0;
        long n;
        for (n = 0;; n++) {
                long before = live;
                char *got_text = exchange(msg, n, &closed);
                if (!failed) {
                        free(got_text);
                        break;
                }
                /* Whatever came is whole: the same answer as without the failure. Or nothing came, and
                 * then the connection is gone if an answer was due. */
                char *got = got_text[0] ? shape(got_text) : NULL;
                bool whole = got ? streq(got, want) : closed || !want_text[0];
                if (!whole)
                        fprintf(stderr, "%s, allocation %ld failed: %s\n", msg, n, got_text[0] ? got_text : "(open, silent)");
                n_closed += !got_text[0];
                free(got);
                free(got_text);

                /* And the daemon goes on: a new connection is answered. */
                char *again = exchange(msg, -1, &closed), *again_shape = shape(again);
                bool goes_on = streq(again_shape, want);
                free(again);
                free(again_shape);

                /* Counted before any assertion: CUnit allocates to record a failed one. */
                long leaked = live - before;
                if (leaked != 0)
                        fprintf(stderr, "%s, allocation %ld failed: %ld allocations leaked\n", msg, n, leaked);
                CU_ASSERT(whole);
                CU_ASSERT(goes_on);
                CU_ASSERT_EQUAL(leaked, 0);
        }
        fprintf(stderr, "%s: %ld allocations, %u times closed without an answer\n", msg, n, n_closed);
        CU_ASSERT(n > 0);
        free(want);
        free(want_text);
}

static void test_daemon_calls(void) {
        struct config c;
        snprintf(dir, sizeof(dir), "/tmp/pressured-allocfail-XXXXXX");
        CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
        test_cleanup_path(dir, true);
        snprintf(sock_path, sizeof(sock_path), "%s/io.pressured", dir);
        log_set_max_level(LOG_CRIT); /* failures are the point here */
        config_init(&c);
        c.lock_memory = false;
        c.socket_path = strdup(sock_path);
        CU_ASSERT_FATAL(c.socket_path && manager_new(&c, &daemon_) >= 0);
        atexit(daemon_stop);
        CU_ASSERT_FATAL(manager_start(daemon_, -1) >= 0);

        check_call("{\"method\":\"org.varlink.service.GetInfo\"}");
        check_call("{\"method\":\"org.varlink.service.GetInterfaceDescription\",\"parameters\":{\"interface\":\"io.pressured\"}}");
        check_call("{\"method\":\"io.pressured.GetStatus\"}");
        check_call("{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"system\"},{\"type\":\"node\",\"node\":0}]},\"more\":true}");
        check_call("{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":[{\"name\":\"a\"},{\"name\":\"b\",\"numa_aware\":true}]},\"more\":true}");
        check_call("{\"method\":\"io.pressured.ListShrinkers\"}");
        check_call("{\"method\":\"io.pressured.GetStatus\",\"parameters\":{\"bogus\":1}}");
        check_call("{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"cgroup\",\"cgroup\":\"/no/such/group\"}]},\"more\":true}");
        check_call("{\"method\":\"io.pressured.NoSuchMethod\"}");
        check_call("{\"method\":\"io.pressured.GetStatus\",\"oneway\":true}");
        check_call("{\"method\":17}");
        check_call("not json at all");
}

int main(void) {
        static const struct test_case cases[] = {
                { "encoders give all or nothing", test_encoders },
                { "the daemon answers whole or closes, and goes on", test_daemon_calls },
                {},
        };
        return test_run("alloc-fail", cases, REPLACED_MALLOC ? NULL : "the sanitizer replaces malloc itself");
}
