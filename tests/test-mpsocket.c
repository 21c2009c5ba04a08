/* SPDX-License-Identifier: MIT */
/* systemd's memory pressure protocol with a real sd-event program (libsystemd 254 from
 * bookworm-backports, fetched and built by tests/sd-event/build): the program runs in a cgroup under the
 * suite's pressure generator with $MEMORY_PRESSURE_WATCH naming pressured's socket. Each rise of the
 * cgroup to low must give one callback, and a level that holds none. Then the daemon restarts the way
 * systemd restarts it: the test plays the service manager, keeps what the daemon puts in its descriptor
 * store (FDSTORE=1) and passes it back (LISTEN_FDS, LISTEN_FDNAMES); the program must see no callback
 * through the restart (a closed connection makes it spin) and one for the next rise. Skips when the
 * packages cannot be fetched. */

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

#include "macro.h"
#include "pressure-gen.h"
#include "test-util.h"

/* ---- the service manager's part: notify socket, descriptor store, LISTEN_FDS ---- */

struct manager_sim {
        char dir[64], socket[128], notify[128], log[128];
        int notify_fd;
        pid_t pid;
        int stored[64];
        size_t n_stored;
};

static struct manager_sim sim = { .notify_fd = -1 };

/* One notification: READY=1 seen (1), FDSTORE fds kept, 0 for anything else, -ETIMEDOUT. */
static int sim_receive(int timeout_ms) {
        struct pollfd p = { .fd = sim.notify_fd, .events = POLLIN };
        if (poll(&p, 1, timeout_ms) <= 0)
                return -ETIMEDOUT;
        char buf[512];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 16)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        ssize_t n = recvmsg(sim.notify_fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return 0;
        buf[n] = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *fds = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < k; i++) {
                                if (strstr(buf, "FDSTORE=1") && strstr(buf, "FDNAME=mpclient") &&
                                    sim.n_stored < ELEMENTSOF(sim.stored))
                                        sim.stored[sim.n_stored++] = fds[i];
                                else
                                        close(fds[i]);
                        }
                }
        return strstr(buf, "READY=1") ? 1 : 0;
}

/* listen_fd: a listening socket to pass as pressured-memory-pressure.socket would (-1: none). */
static int sim_start(const char *conf, int listen_fd) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char nfds[24], pidstr[16], names[80 * 9] = "";
                /* The passed sockets at 3, 4, ...: out of the way first, then in place. */
                int tmp[65];
                size_t n = 0;
                if (listen_fd >= 0)
                        tmp[n++] = fcntl(listen_fd, F_DUPFD, 100);
                for (size_t i = 0; i < sim.n_stored; i++)
                        tmp[n++] = fcntl(sim.stored[i], F_DUPFD, 100);
                for (size_t i = 0; i < n; i++) {
                        dup2(tmp[i], 3 + (int) i);
                        if (i > 0)
                                strcat(names, ":");
                        strcat(names, i == 0 && listen_fd >= 0 ? "memory-pressure" : "mpclient");
                }
                if (n > 0) {
                        snprintf(nfds, sizeof(nfds), "%zu", n);
                        snprintf(pidstr, sizeof(pidstr), "%d", (int) getpid());
                        setenv("LISTEN_FDS", nfds, 1);
                        setenv("LISTEN_PID", pidstr, 1);
                        setenv("LISTEN_FDNAMES", names, 1);
                }
                setenv("NOTIFY_SOCKET", sim.notify, 1);
                int lfd = open(sim.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (lfd >= 0)
                        dup2(lfd, STDERR_FILENO);
                execl(getenv("PRESSURED_BIN"), "pressured", "--socket", sim.socket, "--config", conf, (char *) NULL);
                _exit(127);
        }
        sim.pid = pid;
        test_cleanup_pid(pid);
        for (uint64_t end = test_now_ms() + 10000; test_now_ms() < end;)
                if (sim_receive(100) == 1)
                        return 0;
        return -ETIMEDOUT;
}

static void sim_stop(void) {
        if (sim.pid <= 0)
                return;
        kill(sim.pid, SIGTERM);
        waitpid(sim.pid, NULL, 0);
        test_cleanup_forget_pid(sim.pid);
        sim.pid = 0;
}

static int sim_setup(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sim.dir, sizeof(sim.dir), "/tmp/pressured-mp-XXXXXX");
        if (!mkdtemp(sim.dir))
                return -errno;
        test_cleanup_path(sim.dir, true);
        snprintf(sim.socket, sizeof(sim.socket), "%s/io.pressured", sim.dir);
        snprintf(sim.notify, sizeof(sim.notify), "%s/notify", sim.dir);
        snprintf(sim.log, sizeof(sim.log), "%s/log", sim.dir);
        test_cleanup_path(sim.notify, false);
        test_cleanup_path(sim.log, false);
        sim.notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        strcpy(sa.sun_path, sim.notify);
        if (sim.notify_fd < 0 || bind(sim.notify_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return 0;
}

static void sim_dump_log(void) {
        char line[512];
        FILE *f = fopen(sim.log, "re");
        while (f && fgets(line, sizeof(line), f))
                printf("    %s", line);
        if (f)
                fclose(f);
}

static char client[512];

static const char *need(void) {
        const char *skip = test_need_root_psi();
        if (skip)
                return skip;
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s/tests/sd-event/build %s/tests", getenv("PRESSURED_SOURCE_ROOT"),
                 getenv("PRESSURED_BUILD_ROOT"));
        FILE *p = popen(cmd, "r");
        if (!p || !fgets(client, sizeof(client), p)) {
                if (p)
                        pclose(p);
                return "no libsystemd 254 to build a real sd-event client against (bookworm-backports unreachable)";
        }
        client[strcspn(client, "\n")] = 0;
        return pclose(p) == 0 ? NULL : "building the sd-event client failed";
}

/* The cgroup's next level change: its level and whether it rose to low or above from below. */
static int next_change(int sub, char *level, size_t size, bool *ret_rise_to_low) {
        char *text;
        int r = test_recv_msg(sub, 60000, &text);
        if (r <= 0)
                return r < 0 ? r : -EPIPE;
        const char *l = strstr(text, "\"level\":\""), *p = strstr(text, "\"previous\":\"");
        snprintf(level, size, "%.*s", l ? (int) strcspn(l + 9, "\"") : 0, l ? l + 9 : "");
        *ret_rise_to_low = p && strncmp(p + 12, "ok\"", 3) == 0 && strcmp(level, "ok") != 0;
        free(text);
        return 0;
}

/* Subscribed, the current state read. */
static int subscribe(const char *cgroup) {
        char *text;
        int sub = test_subscribe_cgroup(sim.socket, cgroup);
        if (sub < 0 || test_recv_msg(sub, 10000, &text) != 1) {
                if (sub >= 0)
                        close(sub);
                return -EIO;
        }
        free(text);
        return sub;
}

/* Pressure until the cgroup rises to low: one callback; then calm until it is back at ok: no more. */
static void one_round(struct pressure_gen *g, int sub, struct test_child *app) {
        char level[32], line[128];
        bool rise = false, back = false;
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(g), 0);
        test_cleanup_pid(g->pid);
        while (!rise && next_change(sub, level, sizeof(level), &rise) == 0)
                ;
        CU_ASSERT_FATAL(rise);
        CU_ASSERT_EQUAL(test_lines_next(&app->lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "pressure");
        test_cleanup_forget_pid(g->pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(g), 0);
        unsigned rises = 0;
        while (!back && next_change(sub, level, sizeof(level), &rise) == 0) {
                back = strcmp(level, "ok") == 0;
                rises += rise;
        }
        CU_ASSERT(back);
        CU_ASSERT_EQUAL(rises, 0u);
        /* Lines the daemon sent came with the changes, long seen on the subscription. */
        CU_ASSERT_EQUAL(test_lines_next(&app->lines, 500, line, sizeof(line)), -ETIMEDOUT);
}

static void test_one_callback_per_rise(void) {
        struct pressure_gen g;
        char conf[128], watch[256], line[128];

        CU_ASSERT_EQUAL_FATAL(sim_setup(), 0);
        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 16u << 20), 0);

        snprintf(conf, sizeof(conf), "%s/pressured.conf", sim.dir);
        test_cleanup_path(conf, false);
        FILE *f = fopen(conf, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        /* The socket where the daemon puts it unless told: beside its Varlink socket. */
        fprintf(f, "[pressured]\nhold=1s\nsample_interval=500ms\nmemory_pressure_level=low\ncgroup=%s\n", g.cgroup);
        fclose(f);
        CU_ASSERT_EQUAL_FATAL(sim_start(conf, -1), 0);
        snprintf(watch, sizeof(watch), "%s/memory-pressure", sim.dir);
        test_cleanup_path(watch, false);
        int sub = subscribe(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);

        /* The program in the cgroup, with what systemd would put in its environment ("some 200000
         * 2000000" and a NUL, base64). */
        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        setenv("MEMORY_PRESSURE_WATCH", watch, 1);
        setenv("MEMORY_PRESSURE_WRITE", "c29tZSAyMDAwMDAgMjAwMDAwMAA=", 1);
        const char *const argv[] = { client, NULL };
        pid_t pid = pressure_gen_spawn(&g, argv, p[1]);
        unsetenv("MEMORY_PRESSURE_WATCH");
        unsetenv("MEMORY_PRESSURE_WRITE");
        close(p[1]);
        CU_ASSERT_FATAL(pid > 0);
        struct test_child app = { .lines.fd = -1 };
        test_child_adopt(&app, pid, p[0]);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&app.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "ready");
        /* The daemon accepted it and gave the connection to the descriptor store. */
        while (sim.n_stored == 0 && sim_receive(10000) != -ETIMEDOUT)
                ;
        CU_ASSERT_EQUAL_FATAL(sim.n_stored, 1u);

        one_round(&g, sub, &app);
        /* The new daemon's first look at the group reads the kernel's 10 s average: wait until round one's
         * stall has left it, or the group starts above ok and round two's rise is no rise from ok (it
         * raced a busy machine). A counter with no event to wait on. */
        char pressure[600], text[256];
        snprintf(pressure, sizeof(pressure), "%s/memory.pressure", g.v2_dir);
        for (uint64_t end = test_now_ms() + 30000; test_now_ms() < end;) {
                double avg10 = 100;
                FILE *pf = fopen(pressure, "re");
                if (pf && fgets(text, sizeof(text), pf))
                        (void) sscanf(text, "some avg10=%lf", &avg10);
                if (pf)
                        fclose(pf);
                if (avg10 < 1.0)
                        break;
                usleep(200 * 1000);
        }

        /* A restart, as systemd does one: the connection lives on in the store, the new daemon takes
         * it back. The program sees nothing meanwhile (a closed connection would make it spin). */
        close(sub);
        sim_stop();
        CU_ASSERT_EQUAL(test_lines_next(&app.lines, 500, line, sizeof(line)), -ETIMEDOUT);
        /* This time the listening socket comes from the service manager too, as
         * pressured-memory-pressure.socket passes it: a second program connects there. */
        char passed[96];
        snprintf(passed, sizeof(passed), "%s/passed-memory-pressure", sim.dir);
        test_cleanup_path(passed, false);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", passed);
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CU_ASSERT_FATAL(lfd >= 0 && bind(lfd, (struct sockaddr *) &sa, sizeof(sa)) == 0 && listen(lfd, 16) == 0);
        CU_ASSERT_EQUAL_FATAL(sim_start(conf, lfd), 0);
        close(lfd);
        CU_ASSERT_EQUAL(test_lines_next(&app.lines, 500, line, sizeof(line)), -ETIMEDOUT);
        CU_ASSERT_FATAL(pipe(p) == 0);
        setenv("MEMORY_PRESSURE_WATCH", passed, 1);
        setenv("MEMORY_PRESSURE_WRITE", "c29tZSAyMDAwMDAgMjAwMDAwMAA=", 1);
        pid_t pid2 = pressure_gen_spawn(&g, argv, p[1]);
        unsetenv("MEMORY_PRESSURE_WATCH");
        unsetenv("MEMORY_PRESSURE_WRITE");
        close(p[1]);
        CU_ASSERT_FATAL(pid2 > 0);
        struct test_child app2 = { .lines.fd = -1 };
        test_child_adopt(&app2, pid2, p[0]);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&app2.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "ready");
        size_t stored = sim.n_stored;
        while (sim.n_stored == stored && sim_receive(10000) != -ETIMEDOUT)
                ;
        CU_ASSERT_EQUAL(sim.n_stored, stored + 1); /* accepted, and stored in its turn */

        sub = subscribe(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        one_round(&g, sub, &app);
        /* The second program had its callback with the same rise. */
        CU_ASSERT_EQUAL(test_lines_next(&app2.lines, 5000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "pressure");
        CU_ASSERT_EQUAL(test_lines_next(&app2.lines, 500, line, sizeof(line)), -ETIMEDOUT);
        CU_ASSERT_EQUAL(kill(pid, 0), 0); /* alive, never cut off */

        test_child_stop(&app2);
        test_child_stop(&app);
        close(sub);
        sim_stop();
        if (CU_get_number_of_failures() > 0)
                sim_dump_log();
        for (size_t i = 0; i < sim.n_stored; i++)
                close(sim.stored[i]);
        close(sim.notify_fd);
        pressure_gen_destroy(&g);
        unlink(conf);
        unlink(sim.log);
        unlink(sim.notify);
        unlink(passed);
        rmdir(sim.dir);
}

int main(void) {
        static const struct test_case cases[] = {
                { "an sd-event program gets one callback per rise", test_one_callback_per_rise },
                {},
        };
        return test_run("mpsocket", cases, need());
}
