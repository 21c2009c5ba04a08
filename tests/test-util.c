/* SPDX-License-Identifier: MIT */
#include "test-util.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLEANUP 256

static pid_t cleanup_pids[MAX_CLEANUP];
static struct {
        char path[256];
        bool is_dir, tree;
} cleanup_paths[MAX_CLEANUP];
static int n_paths;
static bool cleanup_installed;

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        (void) (type == FTW_DP ? rmdir(path) : unlink(path));
        return 0;
}

static void run_cleanup(void) {
        for (int i = 0; i < MAX_CLEANUP; i++)
                if (cleanup_pids[i] > 0) {
                        kill(cleanup_pids[i], SIGKILL);
                        waitpid(cleanup_pids[i], NULL, 0);
                        cleanup_pids[i] = 0;
                }
        /* Newest first: files inside directories go before the directories. */
        for (int i = n_paths - 1; i >= 0; i--) {
                if (!cleanup_paths[i].path[0])
                        continue;
                if (cleanup_paths[i].tree)
                        (void) nftw(cleanup_paths[i].path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
                else if (cleanup_paths[i].is_dir) {
                        /* A cgroup may take a moment to empty after its last process was reaped. */
                        for (int k = 0; k < 100 && rmdir(cleanup_paths[i].path) < 0 && errno == EBUSY; k++)
                                usleep(10000);
                } else
                        unlink(cleanup_paths[i].path);
                cleanup_paths[i].path[0] = 0;
        }
        n_paths = 0;
}

static void on_fatal_signal(int sig) {
        run_cleanup();
        signal(sig, SIG_DFL);
        raise(sig);
}

static void install_cleanup(void) {
        if (cleanup_installed)
                return;
        cleanup_installed = true;
        atexit(run_cleanup);
        signal(SIGINT, on_fatal_signal);
        signal(SIGTERM, on_fatal_signal);
        signal(SIGPIPE, SIG_IGN);
}

void test_cleanup_pid(pid_t pid) {
        install_cleanup();
        for (int i = 0; i < MAX_CLEANUP; i++)
                if (cleanup_pids[i] == 0) {
                        cleanup_pids[i] = pid;
                        return;
                }
}

void test_cleanup_forget_pid(pid_t pid) {
        for (int i = 0; i < MAX_CLEANUP; i++)
                if (cleanup_pids[i] == pid)
                        cleanup_pids[i] = 0;
}

void test_cleanup_path(const char *path, bool is_dir) {
        install_cleanup();
        if (n_paths >= MAX_CLEANUP)
                return;
        snprintf(cleanup_paths[n_paths].path, sizeof(cleanup_paths[n_paths].path), "%s", path);
        cleanup_paths[n_paths].is_dir = is_dir;
        cleanup_paths[n_paths].tree = false;
        n_paths++;
}

void test_cleanup_tree(const char *path) {
        test_cleanup_path(path, true);
        if (n_paths > 0 && strcmp(cleanup_paths[n_paths - 1].path, path) == 0)
                cleanup_paths[n_paths - 1].tree = true;
}

int test_run(const char *suite_name, const struct test_case *cases, const char *skip_reason) {
        if (skip_reason) {
                printf("SKIP %s: %s\n", suite_name, skip_reason);
                return EXIT_TEST_SKIP;
        }
        install_cleanup();
        if (CU_initialize_registry() != CUE_SUCCESS)
                return 1;
        CU_pSuite s = CU_add_suite(suite_name, NULL, NULL);
        /* PRESSURED_TEST_ONLY=text: only the cases whose name holds it (a developer's shortcut). */
        const char *only = getenv("PRESSURED_TEST_ONLY");
        for (const struct test_case *c = cases; c->name; c++)
                if (!only || strstr(c->name, only))
                        CU_add_test(s, c->name, c->fn);
        CU_basic_set_mode(CU_BRM_VERBOSE);
        CU_basic_run_tests();
        unsigned failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
        unsigned run = CU_get_number_of_tests_run();
        CU_cleanup_registry();
        run_cleanup();
        return failures > 0 || run == 0 ? 1 : 0;
}

const char *test_fixture(const char *rel) {
        static char buf[4][512];
        static int i;
        const char *base = getenv("PRESSURED_FIXTURES");
        i = (i + 1) % 4;
        snprintf(buf[i], sizeof(buf[i]), "%s/%s", base ? base : "tests/fixtures", rel);
        return buf[i];
}

uint64_t test_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

const char *test_need_root_psi(void) {
        if (geteuid() != 0)
                return "needs root (cgroups and PSI triggers on cgroup files)";
        if (access("/proc/pressure/memory", R_OK) < 0)
                return "the kernel has no PSI (/proc/pressure/memory missing)";
        return NULL;
}

static const char *daemon_path(void) {
        const char *p = getenv("PRESSURED_BIN");
        return p ? p : "./pressured";
}

static int daemon_spawn(struct test_daemon *d, const char *const *extra_args);

int test_daemon_start(struct test_daemon *d, const char *const *extra_args) {
        install_cleanup();
        memset(d, 0, sizeof(*d));
        snprintf(d->dir, sizeof(d->dir), "/tmp/pressured-test-XXXXXX");
        if (!mkdtemp(d->dir))
                return -errno;
        /* A tree: a daemon killed before it could clean up leaves its memory pressure socket in it (11
         * directories were left in /tmp so). */
        test_cleanup_tree(d->dir);
        snprintf(d->socket, sizeof(d->socket), "%s/io.pressured", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
        test_cleanup_path(d->log, false);
        test_cleanup_path(d->socket, false);
        return daemon_spawn(d, extra_args);
}

int test_daemon_restart(struct test_daemon *d, const char *const *extra_args) {
        if (d->pid > 0)
                return -EBUSY;
        return daemon_spawn(d, extra_args);
}

static int daemon_spawn(struct test_daemon *d, const char *const *extra_args) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char notify_path[160];
        int r;

        snprintf(notify_path, sizeof(notify_path), "%s/notify", d->dir);
        unlink(notify_path);
        test_cleanup_path(notify_path, false);

        int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (nfd < 0)
                return -errno;
        strcpy(sa.sun_path, notify_path);
        if (bind(nfd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                close(nfd);
                return r;
        }

        const char *argv[32];
        int n = 0;
        argv[n++] = daemon_path();
        argv[n++] = "--socket";
        argv[n++] = d->socket;
        argv[n++] = "--config";
        argv[n++] = "/dev/null";
        for (int i = 0; extra_args && extra_args[i] && n < 30; i++)
                argv[n++] = extra_args[i];
        argv[n] = NULL;

        pid_t pid = fork();
        if (pid < 0) {
                close(nfd);
                return -errno;
        }
        if (pid == 0) {
                setenv("NOTIFY_SOCKET", notify_path, 1);
                int lfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (lfd >= 0)
                        dup2(lfd, STDERR_FILENO);
                execv(argv[0], (char *const *) argv);
                _exit(127);
        }
        d->pid = pid;
        test_cleanup_pid(pid);

        /* Wait for READY=1: an event, not a guess at start-up time. */
        uint64_t deadline = test_now_ms() + 30000; /* ASan in a TCG guest on a busy host took over 10 s */
        r = -ETIMEDOUT;
        while (test_now_ms() < deadline) {
                struct pollfd p = { .fd = nfd, .events = POLLIN };
                if (poll(&p, 1, 100) <= 0) {
                        if (waitpid(pid, NULL, WNOHANG) == pid) {
                                test_cleanup_forget_pid(pid);
                                d->pid = 0;
                                r = -ECHILD;
                                break;
                        }
                        continue;
                }
                char buf[512];
                ssize_t k = recv(nfd, buf, sizeof(buf) - 1, 0);
                if (k <= 0)
                        continue;
                buf[k] = 0;
                if (strstr(buf, "READY=1")) {
                        r = 0;
                        break;
                }
        }
        close(nfd);
        return r;
}

static void dump_log(const struct test_daemon *d) {
        char line[1024];
        if (getenv("PRESSURED_TEST_NO_LOG"))
                return;
        FILE *f = fopen(d->log, "re");
        if (!f)
                return;
        printf("\n    --- daemon log ---\n");
        while (fgets(line, sizeof(line), f))
                printf("    %s", line);
        fclose(f);
}

int test_daemon_stop(struct test_daemon *d) {
        int status = 0;
        if (d->pid <= 0)
                return -1;
        kill(d->pid, SIGTERM);
        waitpid(d->pid, &status, 0);
        test_cleanup_forget_pid(d->pid);
        d->pid = 0;
        dump_log(d);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int test_daemon_log_count(struct test_daemon *d, const char *needle) {
        return test_daemon_log_count_both(d, needle, NULL);
}

int test_daemon_log_count_both(struct test_daemon *d, const char *needle, const char *then) {
        char line[1024];
        int n = 0;
        FILE *f = fopen(d->log, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                const char *p = strstr(line, needle);
                if (p && (!then || strstr(p + strlen(needle), then)))
                        n++;
        }
        fclose(f);
        return n;
}

int test_daemon_log_wait(struct test_daemon *d, const char *needle, const char *then, int n, int timeout_ms) {
        for (uint64_t end = test_now_ms() + (uint64_t) timeout_ms;;) {
                int k = test_daemon_log_count_both(d, needle, then);
                if (k >= n || test_now_ms() >= end)
                        return k;
                usleep(50 * 1000); /* a log file has no event to wait for */
        }
}

bool test_have_cap_sys_resource(void) {
        char line[256];
        unsigned long long eff = 0;
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "CapEff: %llx", &eff) == 1)
                        break;
        fclose(f);
        return eff & (1ULL << 24); /* CAP_SYS_RESOURCE */
}

bool test_daemon_alive(struct test_daemon *d) {
        return d->pid > 0 && waitpid(d->pid, NULL, WNOHANG) == 0;
}

int test_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int test_read_text(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        size_t n = fread(buf, 1, size - 1, f);
        fclose(f);
        buf[n] = 0;
        return (int) n;
}

int test_send_raw(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int test_recv_msg(int fd, int timeout_ms, char **ret) {
        /* A message is taken whole or not at all. The timeout bounds the wait for its first byte; once it
         * has begun, its rest is in flight and is waited for. Giving up in its middle (an emulated VM
         * takes that long over a few KiB) would lose it and start the next call inside it. Bytes are
         * peeked, and only those up to the message's NUL are taken: the next message stays in the socket. */
        const uint64_t rest_ms = 60000;
        size_t alloc = 4096, len = 0;
        char *buf = malloc(alloc);
        uint64_t deadline = test_now_ms() + (uint64_t) timeout_ms;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                uint64_t now = test_now_ms();
                if (now >= deadline) {
                        free(buf);
                        return -ETIMEDOUT;
                }
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int k = poll(&p, 1, (int) (deadline - now));
                if (k < 0 && errno != EINTR) {
                        int r = -errno;
                        free(buf);
                        return r;
                }
                if (k <= 0)
                        continue;
                if (len + 1 >= alloc) {
                        char *q = realloc(buf, alloc *= 2);
                        if (!q) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = q;
                }
                ssize_t n = recv(fd, buf + len, alloc - len, MSG_PEEK | MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : 0;
                        free(buf);
                        return r == -ECONNRESET ? 0 : r;
                }
                char *z = memchr(buf + len, 0, (size_t) n);
                size_t take = z ? (size_t) (z - (buf + len)) + 1 : (size_t) n;
                ssize_t got = recv(fd, buf + len, take, MSG_DONTWAIT);
                if (got != (ssize_t) take) {
                        free(buf);
                        return got < 0 ? -errno : -EIO;
                }
                len += take;
                if (z) {
                        *ret = buf;
                        return 1;
                }
                deadline = test_now_ms() + rest_ms;
        }
}

int test_lines_next(struct test_lines *l, int timeout_ms, char *line, size_t size) {
        uint64_t deadline = test_now_ms() + (uint64_t) timeout_ms;
        for (;;) {
                char *nl = memchr(l->buf, '\n', l->len);
                if (nl) {
                        size_t n = (size_t) (nl - l->buf);
                        snprintf(line, size, "%.*s", (int) n, l->buf);
                        memmove(l->buf, nl + 1, l->len - n - 1);
                        l->len -= n + 1;
                        return 0;
                }
                uint64_t now = test_now_ms();
                if (now >= deadline || l->len >= sizeof(l->buf) - 1)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = l->fd, .events = POLLIN };
                if (poll(&p, 1, (int) (deadline - now)) <= 0)
                        continue;
                ssize_t k = read(l->fd, l->buf + l->len, sizeof(l->buf) - l->len - 1);
                if (k <= 0)
                        return -EPIPE;
                l->len += (size_t) k;
        }
}

void test_child_adopt(struct test_child *c, pid_t pid, int fd) {
        c->pid = pid;
        c->lines.fd = fd;
        c->lines.len = 0;
        test_cleanup_pid(pid);
}

void test_child_stop(struct test_child *c) {
        if (c->pid > 0) {
                kill(c->pid, SIGKILL);
                waitpid(c->pid, NULL, 0);
                test_cleanup_forget_pid(c->pid);
        }
        if (c->lines.fd >= 0)
                close(c->lines.fd);
        c->pid = 0;
        c->lines.fd = -1;
}

void test_proc_stat(pid_t pid, uint64_t *cpu_ms, uint64_t *rss_kb, uint64_t *vctx) {
        char path[64], buf[4096];
        *cpu_ms = *rss_kb = *vctx = 0;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (f) {
                size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                buf[n] = 0;
                fclose(f);
                const char *p = strrchr(buf, ')');
                unsigned long long ut = 0, st = 0;
                if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
                        *cpu_ms = (ut + st) * 1000 / (uint64_t) sysconf(_SC_CLK_TCK);
        }
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        while (f && fgets(buf, sizeof(buf), f)) {
                unsigned long long v;
                if (sscanf(buf, "VmRSS: %llu", &v) == 1)
                        *rss_kb = v;
                if (sscanf(buf, "voluntary_ctxt_switches: %llu", &v) == 1)
                        *vctx = v;
        }
        if (f)
                fclose(f);
}

pid_t test_serve_flood(const char *socket_path) {
        pid_t pid = fork();
        if (pid == 0)
                test_serve_loop(socket_path);
        return pid;
}

_Noreturn void test_serve_loop(const char *socket_path) {
        static const char serve[] = "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":"
                                    "[{\"name\":\"spam\",\"memcg_aware\":true}]},\"more\":true}";
        for (;;) {
                int fd = test_connect(socket_path);
                if (fd >= 0) {
                        char *reply = NULL;
                        (void) test_send_raw(fd, serve, sizeof(serve));
                        (void) test_recv_msg(fd, 1000, &reply);
                        free(reply);
                        close(fd);
                }
        }
}

int test_subscribe_cgroup(const char *socket, const char *cgroup) {
        char scopes[400];
        snprintf(scopes, sizeof(scopes), "{\"type\":\"cgroup\",\"cgroup\":\"%s\"}", cgroup);
        return test_subscribe_scopes(socket, scopes);
}

int test_subscribe_scopes(const char *socket, const char *scopes) {
        char msg[1024];
        int fd = test_connect(socket);
        if (fd < 0)
                return fd;
        int n = snprintf(msg, sizeof(msg),
                         "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[%s]},\"more\":true}", scopes);
        if (n >= (int) sizeof(msg) || test_send_raw(fd, msg, (size_t) n + 1) < 0) {
                close(fd);
                return -EIO;
        }
        return fd;
}

int test_fixture_copy(const char *rel, char *ret, size_t size) {
        char cmd[1400];
        snprintf(ret, size, "/tmp/pressured-root-XXXXXX");
        if (!mkdtemp(ret))
                return -errno;
        test_cleanup_tree(ret);
        snprintf(cmd, sizeof(cmd), "cp -r '%s'/. '%s'/", test_fixture(rel), ret);
        if (system(cmd) != 0)
                return -EIO;
        return test_fixture_set_global_reclaim(ret, 1000);
}

int test_fixture_set_global_reclaim(const char *root, uint64_t scanned) {
        char path[600], tmp[620];
        snprintf(path, sizeof(path), "%s/proc/vmstat", root);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "we");
        if (!f)
                return -errno;
        /* Limit reclaim (pgscan_file) moves too, as it does under a limited group's writer. */
        fprintf(f, "nr_free_pages 1000000\npgsteal_kswapd %llu\npgsteal_direct 0\npgscan_kswapd %llu\npgscan_direct 0\n"
                   "pgscan_khugepaged 0\npgscan_direct_throttle 0\npgscan_anon 0\npgscan_file %llu\n",
                (unsigned long long) scanned / 2, (unsigned long long) scanned, (unsigned long long) scanned * 3);
        if (fclose(f) != 0)
                return -errno;
        return rename(tmp, path) < 0 ? -errno : 0; /* the daemon never reads half a file */
}

pid_t test_global_reclaim_start(const char *root) {
        pid_t pid = fork();
        if (pid == 0) {
                for (uint64_t n = 2000;; n += 1000) {
                        (void) test_fixture_set_global_reclaim(root, n);
                        usleep(200 * 1000);
                }
        }
        if (pid > 0)
                test_cleanup_pid(pid);
        return pid;
}
