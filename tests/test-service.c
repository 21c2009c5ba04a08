/* SPDX-License-Identifier: MIT */
/* The daemon as a systemd service sees it: the notify protocol (READY=1, STATUS=, WATCHDOG=1, RELOADING=1)
 * on a NOTIFY_SOCKET this test listens on, and SIGHUP reloading the configuration without dropping
 * clients, keeping the old one when the new file is bad. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure.h"
#include "test-util.h"

static char dir[64], sock[128], notify_path[128], conf[128], logp[128], cgroup_dir[600], cgroup[160];
static int nfd = -1;
static pid_t daemon_pid;

static int write_conf(const char *text) {
        FILE *f = fopen(conf, "we");
        if (!f)
                return -errno;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -EIO;
}

/* Wait for a datagram containing `want`; collects what it saw in seen (appended). */
static int wait_notify(const char *want, int timeout_ms, char *seen, size_t seen_size) {
        uint64_t deadline = test_now_ms() + (uint64_t) timeout_ms;
        while (test_now_ms() < deadline) {
                struct pollfd p = { .fd = nfd, .events = POLLIN };
                if (poll(&p, 1, (int) (deadline - test_now_ms())) <= 0)
                        continue;
                char buf[1024];
                ssize_t n = recv(nfd, buf, sizeof(buf) - 1, 0);
                if (n <= 0)
                        continue;
                buf[n] = 0;
                if (seen && strlen(seen) + (size_t) n + 2 < seen_size) {
                        strcat(seen, buf);
                        strcat(seen, "\n");
                }
                if (strstr(buf, want))
                        return 0;
        }
        return -ETIMEDOUT;
}

static int count_in_log(const char *needle) {
        char line[1024];
        int n = 0;
        FILE *f = fopen(logp, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strstr(line, needle))
                        n++;
        fclose(f);
        return n;
}

static bool status_lists(const char *path) {
        struct pressure_client *c;
        struct pressure_status *st;
        bool found = false;
        if (pressure_client_new(sock, &c) < 0)
                return false;
        if (pressure_client_get_status(c, &st) == 0) {
                for (size_t i = 0; i < pressure_status_get_n_cgroups(st); i++)
                        if (strcmp(pressure_scope_get_cgroup(pressure_status_get_cgroup(st, i)), path) == 0)
                                found = true;
                pressure_status_unref(st);
        }
        pressure_client_unref(c);
        return found;
}

static void test_notify_protocol(void) {
        char seen[8192] = "";
        /* Started in main(): READY=1 came with the first PSI readings; STATUS= names the system level;
         * the watchdog is pinged at half of WATCHDOG_USEC (200 ms). */
        CU_ASSERT_EQUAL(wait_notify("READY=1", 10000, seen, sizeof(seen)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(seen, "STATUS=Watching memory pressure; system level "));
        CU_ASSERT_EQUAL(wait_notify("WATCHDOG=1", 2000, seen, sizeof(seen)), 0);
        CU_ASSERT_EQUAL(wait_notify("WATCHDOG=1", 2000, seen, sizeof(seen)), 0);
}

static void test_reload(void) {
        char seen[8192] = "", text[512];

        /* A client that must keep being served across every reload. */
        struct pressure_client *sub;
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(sock, &sub), 0);

        CU_ASSERT_FALSE(status_lists(cgroup));

        /* A bad file: reported with file and line, the old configuration stays. */
        CU_ASSERT_EQUAL(write_conf("hold=2s\nlow=some 5s 2s\n"), 0);
        CU_ASSERT_EQUAL(kill(daemon_pid, SIGHUP), 0);
        CU_ASSERT_EQUAL(wait_notify("RELOADING=1", 5000, seen, sizeof(seen)), 0);
        CU_ASSERT_EQUAL(wait_notify("READY=1", 5000, seen, sizeof(seen)), 0);
        char where[200];
        snprintf(where, sizeof(where), "%s:2: low:", conf);
        CU_ASSERT_EQUAL(count_in_log(where), 1);
        CU_ASSERT_EQUAL(count_in_log("old one stays in force"), 1);

        /* A file each of whose lines parses, but which start-up would refuse as a whole: refused too. */
        CU_ASSERT_EQUAL(write_conf("priority_low=6\npriority_floor_low=8\n"), 0);
        CU_ASSERT_EQUAL(kill(daemon_pid, SIGHUP), 0);
        CU_ASSERT_EQUAL(wait_notify("READY=1", 5000, seen, sizeof(seen)), 0);
        CU_ASSERT_EQUAL(count_in_log("priority_floor_low is above priority_low"), 1);
        CU_ASSERT_EQUAL(count_in_log("old one stays in force"), 2);

        /* A good file that watches a cgroup: after the reload it is watched, and the subscriber is still
         * there. */
        snprintf(text, sizeof(text), "cgroup=%s\nhold=3s\n", cgroup);
        CU_ASSERT_EQUAL(write_conf(text), 0);
        CU_ASSERT_EQUAL(kill(daemon_pid, SIGHUP), 0);
        CU_ASSERT_EQUAL(wait_notify("RELOADING=1", 5000, seen, sizeof(seen)), 0);
        CU_ASSERT_EQUAL(wait_notify("READY=1", 5000, seen, sizeof(seen)), 0);
        CU_ASSERT_TRUE(status_lists(cgroup));
        CU_ASSERT_EQUAL(count_in_log("Configuration reloaded."), 1);

        /* And dropping it from the file stops watching it. */
        CU_ASSERT_EQUAL(write_conf("hold=3s\n"), 0);
        CU_ASSERT_EQUAL(kill(daemon_pid, SIGHUP), 0);
        CU_ASSERT_EQUAL(wait_notify("READY=1", 5000, seen, sizeof(seen)), 0);
        bool gone = false;
        for (uint64_t end = test_now_ms() + 5000; !gone && test_now_ms() < end;)
                gone = !status_lists(cgroup);
        CU_ASSERT_TRUE(gone);

        /* The client connected before all this still gets answers. */
        struct pressure_status *st;
        CU_ASSERT_EQUAL(pressure_client_get_status(sub, &st), 0);
        pressure_status_unref(st);
        pressure_client_unref(sub);
}

static void test_stop(void) {
        char seen[4096] = "";
        int status = 0;
        CU_ASSERT_EQUAL(kill(daemon_pid, SIGTERM), 0);
        CU_ASSERT_EQUAL(wait_notify("STOPPING=1", 5000, seen, sizeof(seen)), 0);
        waitpid(daemon_pid, &status, 0);
        test_cleanup_forget_pid(daemon_pid);
        CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CU_ASSERT_EQUAL(access(sock, F_OK), -1);
}

int main(void) {
        static const struct test_case cases[] = {
                { "notify protocol and watchdog", test_notify_protocol },
                { "SIGHUP reloads the configuration", test_reload },
                { "SIGTERM", test_stop },
                {},
        };
        const char *skip = test_need_root_psi();
        if (skip)
                return test_run("service", cases, skip);

        snprintf(dir, sizeof(dir), "/tmp/pressured-service-XXXXXX");
        if (!mkdtemp(dir))
                return 1;
        test_cleanup_path(dir, true);
        snprintf(sock, sizeof(sock), "%s/io.pressured", dir);
        snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
        snprintf(conf, sizeof(conf), "%s/pressured.conf", dir);
        snprintf(logp, sizeof(logp), "%s/log", dir);
        test_cleanup_path(sock, false);
        test_cleanup_path(notify_path, false);
        test_cleanup_path(conf, false);
        test_cleanup_path(logp, false);
        if (write_conf("# empty\n") < 0)
                return 1;

        /* A cgroup for the configuration to name. */
        FILE *m = fopen("/proc/self/mountinfo", "re");
        char line[1024], v2[512] = "";
        while (m && fgets(line, sizeof(line), m)) {
                char mnt[512];
                const char *dash = strstr(line, " - cgroup2 ");
                if (dash && sscanf(line, "%*s %*s %*s %*s %511s", mnt) == 1)
                        snprintf(v2, sizeof(v2), "%s", mnt);
        }
        if (m)
                fclose(m);
        snprintf(cgroup, sizeof(cgroup), "/pressured-service-%d", (int) getpid());
        snprintf(cgroup_dir, sizeof(cgroup_dir), "%s%s", v2, cgroup);
        if (!v2[0] || mkdir(cgroup_dir, 0755) < 0)
                return 1;
        test_cleanup_path(cgroup_dir, true);

        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        strcpy(sa.sun_path, notify_path);
        if (nfd < 0 || bind(nfd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return 1;

        daemon_pid = fork();
        if (daemon_pid == 0) {
                const char *bin = getenv("PRESSURED_BIN");
                setenv("NOTIFY_SOCKET", notify_path, 1);
                setenv("WATCHDOG_USEC", "200000", 1);
                int lfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (lfd >= 0)
                        dup2(lfd, STDERR_FILENO);
                execl(bin ? bin : "./pressured", "pressured", "--config", conf, "--socket", sock, (char *) NULL);
                _exit(127);
        }
        test_cleanup_pid(daemon_pid);
        return test_run("service", cases, NULL);
}
