/* SPDX-License-Identifier: MIT */
#pragma once

/* Helpers shared by the tests: a CUnit runner with the exit codes meson expects, a real daemon on a
 * temporary socket, and cleanup that also runs when a test fails or is interrupted. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <CUnit/CUnit.h>

#define EXIT_TEST_SKIP 77

struct test_case {
        const char *name;
        void (*fn)(void);
};

/* Run the cases as one suite; exit status 0, 1 on any failed assertion, 77 if skip_reason is set. */
int test_run(const char *suite, const struct test_case *cases, const char *skip_reason);

/* Path of a fixture below tests/fixtures (from $PRESSURED_FIXTURES, set by meson). */
const char *test_fixture(const char *rel);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t test_now_ms(void);

/* Skip reasons for tests that need the real machine; NULL when the test can run. */
const char *test_need_root_psi(void);

struct test_daemon {
        pid_t pid;
        char dir[64];     /* temporary directory holding the socket */
        char socket[128]; /* the Varlink socket */
        char log[128];    /* the daemon's stderr */
};

/* How many lines of the daemon's log contain `needle`. */
int test_daemon_log_count(struct test_daemon *d, const char *needle);
/* Lines with `needle` and, after it, `then` (a figure between them may vary). */
int test_daemon_log_count_both(struct test_daemon *d, const char *needle, const char *then);
/* Wait up to timeout_ms for at least n such lines; returns the count seen last. */
int test_daemon_log_wait(struct test_daemon *d, const char *needle, const char *then, int n, int timeout_ms);

/* Whether this process has CAP_SYS_RESOURCE in its effective set. */
bool test_have_cap_sys_resource(void);

/* Start the daemon with extra arguments (NULL-terminated) and wait for its READY=1 on a notify socket
 * the test listens on. Returns 0 or a negative errno. */
int test_daemon_start(struct test_daemon *d, const char *const *extra_args);
/* Start it again on the same socket path (a restart). */
int test_daemon_restart(struct test_daemon *d, const char *const *extra_args);
/* SIGTERM, wait, remove the directory. Returns the daemon's exit status, or -1 if it was killed by a
 * signal. */
int test_daemon_stop(struct test_daemon *d);
/* Whether the daemon process is still running. */
bool test_daemon_alive(struct test_daemon *d);

/* Register a process to be killed and reaped, or a directory/file to be removed, at exit (also after a
 * failed assertion or SIGINT/SIGTERM). */
void test_cleanup_pid(pid_t pid);
void test_cleanup_forget_pid(pid_t pid);
void test_cleanup_path(const char *path, bool is_dir);
/* A directory tree (a fixture copy, a cgroup subtree), removed deepest first at exit. */
void test_cleanup_tree(const char *path);

/* Lines from a child's pipe, read as they come. */
struct test_lines {
        int fd;
        size_t len;
        char buf[65536];
};

/* The next line (without its newline) within timeout_ms. Returns 0, -ETIMEDOUT, or -EPIPE when the
 * writer is gone. */
int test_lines_next(struct test_lines *l, int timeout_ms, char *line, size_t size);

/* A child process whose stdout the test reads line by line; lines.fd is -1 while there is none. */
struct test_child {
        pid_t pid;
        struct test_lines lines;
};

/* Take over a started child and the read end of its stdout pipe; it is killed at exit if still there. */
void test_child_adopt(struct test_child *c, pid_t pid, int fd);
/* Kill and reap it, close its pipe. */
void test_child_stop(struct test_child *c);

/* Connect to the daemon at socket and Subscribe to one cgroup ("more": true); the replies are the
 * caller's to read. Returns the connection, or a negative errno. */
int test_subscribe_cgroup(const char *socket, const char *cgroup);
/* The same for a list of ScopeRef objects as JSON text ("{...},{...}"). */
int test_subscribe_scopes(const char *socket, const char *scopes);

/* A raw unix stream connection to a socket, blocking. */
int test_connect(const char *path);
/* Send bytes exactly as given. */
int test_send_raw(int fd, const void *data, size_t len);
/* A small text file's start into buf, terminated: its length, or a negative errno. */
int test_read_text(const char *path, char *buf, size_t size);
/* Receive one NUL-terminated message within timeout_ms into a malloc()ed string. Returns 1, 0 on
 * orderly close, -ETIMEDOUT, or a negative errno. */
int test_recv_msg(int fd, int timeout_ms, char **ret);

/* A process's CPU time (user + system), resident memory and voluntary context switches, from /proc; 0
 * for what cannot be read. */
void test_proc_stat(pid_t pid, uint64_t *cpu_ms, uint64_t *rss_kb, uint64_t *vctx);

/* Fork a process that connects, registers a shrinker (io.pressured.Serve), and closes, again and again,
 * as fast as the daemon at socket_path answers: the registration flood of a hostile client. Kill it. */
pid_t test_serve_flood(const char *socket_path);
/* The same loop in the calling process; never returns. */
_Noreturn void test_serve_loop(const char *socket_path);

/* Poll a libpressure client's fd and dispatch until cond holds, for at most 10 s; the value of cond. */
#define TEST_DISPATCH_UNTIL(c, cond)                                                                       \
        ({                                                                                                 \
                uint64_t _end = test_now_ms() + 10000;                                                     \
                while (!(cond) && test_now_ms() < _end) {                                                  \
                        struct pollfd _p = { .fd = pressure_client_get_fd(c), .events = POLLIN };          \
                        (void) poll(&_p, 1, 100);                                                          \
                        (void) pressure_client_dispatch(c);                                                \
                }                                                                                          \
                (cond);                                                                                    \
        })

/* A private copy of a fixture tree below tests/fixtures (for --sysfs-root), removed at exit; its path in
 * ret. Returns 0 or a negative errno. */
int test_fixture_copy(const char *rel, char *ret, size_t size);
/* Write <root>/proc/vmstat with the global reclaim counters at `scanned` (the machine reclaiming when it
 * grows, as kswapd would make it). */
int test_fixture_set_global_reclaim(const char *root, uint64_t scanned);
/* A process that makes the fixture's global reclaim grow every 200 ms until killed (cleaned up at exit). */
pid_t test_global_reclaim_start(const char *root);
