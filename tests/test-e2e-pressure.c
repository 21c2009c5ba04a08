/* SPDX-License-Identifier: MIT */
/* End to end against the real kernel: the real daemon, a subscriber in another process using
 * libpressure, and real memory pressure in a fresh cgroup. */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "pressure.h"
#include "test-util.h"

#define LIMIT_BYTES (16u << 20)

static struct test_daemon daemon_;

/* ---- a subscriber process: reports what it is told, one line per callback, on a pipe ---- */


static void on_event(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        FILE *out = userdata;
        (void) c;
        if (initial)
                fprintf(out, "initial %s %s\n", pressure_scope_get_name(s),
                        pressure_level_to_string(pressure_scope_get_level(s)));
        else
                fprintf(out, "event %s %s %s %s %llu\n", pressure_scope_get_name(s),
                        pressure_level_to_string(pressure_scope_get_previous_level(s)),
                        pressure_level_to_string(pressure_scope_get_level(s)),
                        pressure_scope_is_removed(s) ? "removed" : "present",
                        (unsigned long long) pressure_scope_get_reclaim_target(s));
        fflush(out);
}

static void on_end(struct pressure_subscription *s, int error, void *userdata) {
        FILE *out = userdata;
        (void) s;
        fprintf(out, "end %d\n", error);
        fflush(out);
        _exit(0);
}

/* A subscriber process on the subscription API: its first states and its end come from dispatch. */
static int subscriber_start(struct test_child *sub, const char *scope, const char *scope2) {
        int p[2];
        if (pipe(p) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                close(p[0]);
                FILE *out = fdopen(p[1], "w");
                struct pressure_client *c;
                int r = pressure_client_new(daemon_.socket, &c);
                if (r < 0) {
                        fprintf(out, "error connect %d\n", r);
                        fflush(out);
                        _exit(1);
                }
                const char *scopes[] = { scope, scope2, NULL };
                struct pressure_subscription *s;
                r = pressure_subscription_new(c, scopes, PRESSURE_LEVEL_LOW, on_event, out, &s);
                if (r >= 0)
                        r = pressure_subscription_set_end_handler(s, on_end, out);
                if (r < 0) {
                        fprintf(out, "error subscribe %d\n", r);
                        fflush(out);
                        _exit(1);
                }
                for (;;) {
                        struct pollfd pf = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                        if (poll(&pf, 1, -1) >= 0)
                                (void) pressure_client_dispatch(c);
                }
        }
        close(p[1]);
        test_child_adopt(sub, pid, p[0]);
        return 0;
}

/* The next line from the subscriber, waiting at most timeout_ms. */
static int subscriber_line(struct test_child *sub, int timeout_ms, char *line, size_t size) {
        return test_lines_next(&sub->lines, timeout_ms, line, size);
}

/* The daemon as an administrator would run it: a configuration file that watches the test's cgroup from
 * start-up, short hold time, and a 1 s trigger window, which the kernel here refuses without
 * CAP_SYS_RESOURCE so that the daemon has to move it to 2 s. */
static int start_daemon(const char *watched_cgroup) {
        char conf[200];
        int r;

        snprintf(conf, sizeof(conf), "/tmp/pressured-test-%d.conf", (int) getpid());
        FILE *f = fopen(conf, "we");
        if (!f)
                return -errno;
        test_cleanup_path(conf, false);
        fprintf(f, "[pressured]\nlow=some 50ms 1s\nhold=1s\nsample_interval=500ms\n");
        if (watched_cgroup)
                fprintf(f, "cgroup=%s\n", watched_cgroup);
        fclose(f);

        const char *const args[] = { "--config", conf, NULL };
        r = test_daemon_start(&daemon_, args);
        unlink(conf);
        return r;
}

/* ---- the tests ---- */

static void test_cgroup_pressure_reported_and_recovers(void) {
        struct pressure_gen g;
        struct test_child sub = { .lines.fd = -1 };
        char line[512], want[256];
        int r;

        char cwd[400];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
        r = pressure_gen_create(&g, cwd, LIMIT_BYTES);
        CU_ASSERT_EQUAL_FATAL(r, 0);
        test_cleanup_path(g.v2_dir, true);
        if (g.mem_dir[0])
                test_cleanup_path(g.mem_dir, true);
        test_cleanup_path(g.file, false);

        CU_ASSERT_EQUAL_FATAL(start_daemon(g.cgroup), 0);

        /* The configured cgroup is watched before anyone subscribes. */
        struct pressure_client *c;
        struct pressure_status *st;
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_get_status(c, &st), 0);
        CU_ASSERT_EQUAL(pressure_status_get_n_cgroups(st), 1u);
        if (pressure_status_get_n_cgroups(st) == 1)
                CU_ASSERT_STRING_EQUAL(pressure_scope_get_cgroup(pressure_status_get_cgroup(st, 0)), g.cgroup);
        pressure_status_unref(st);
        pressure_client_unref(c);

        CU_ASSERT_EQUAL_FATAL(subscriber_start(&sub, g.cgroup, NULL), 0);
        /* The first reply: the subscription is in place and the group is calm. */
        CU_ASSERT_EQUAL_FATAL(subscriber_line(&sub, 10000, line, sizeof(line)), 0);
        snprintf(want, sizeof(want), "initial %s ok", g.cgroup);
        CU_ASSERT_STRING_EQUAL(line, want);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        /* Leaving ok: the first event names the cgroup and comes from ok, with a reclaim target. */
        r = subscriber_line(&sub, 60000, line, sizeof(line));
        CU_ASSERT_EQUAL(r, 0);
        char name[256], prev[16], level[16], removed[16];
        unsigned long long target = 0;
        int n = sscanf(line, "event %255s %15s %15s %15s %llu", name, prev, level, removed, &target);
        CU_ASSERT_EQUAL(n, 5);
        CU_ASSERT_STRING_EQUAL(name, g.cgroup);
        CU_ASSERT_STRING_EQUAL(prev, "ok");
        CU_ASSERT_STRING_NOT_EQUAL(level, "ok");
        CU_ASSERT(target > 0);

        test_cleanup_forget_pid(g.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&g), 0);

        /* Back to ok once the writer is gone (after the hold time), possibly through lower levels. */
        bool back = false;
        while (!back && subscriber_line(&sub, 60000, line, sizeof(line)) == 0) {
                n = sscanf(line, "event %255s %15s %15s", name, prev, level);
                CU_ASSERT_EQUAL(n, 3);
                if (n == 3 && strcmp(level, "ok") == 0)
                        back = true;
        }
        CU_ASSERT(back);
        CU_ASSERT(test_daemon_alive(&daemon_));

        test_child_stop(&sub);
        pressure_gen_destroy(&g);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);

        /* Two triggers (system, cgroup) were armed with a 1 s window; a refusal is logged exactly once. */
        int adjusted = test_daemon_log_count(&daemon_, "refused a PSI window");
        CU_ASSERT_EQUAL(adjusted, test_have_cap_sys_resource() ? 0 : 1);
}

static bool status_lists_cgroup(struct pressure_client *c, const char *cgroup) {
        struct pressure_status *st;
        bool found = false;
        if (pressure_client_get_status(c, &st) < 0)
                return false;
        for (size_t i = 0; i < pressure_status_get_n_cgroups(st); i++)
                if (strcmp(pressure_scope_get_cgroup(pressure_status_get_cgroup(st, i)), cgroup) == 0)
                        found = true;
        pressure_status_unref(st);
        return found;
}

/* Make an empty cgroup next to where the generator would put its own. */
static int make_empty_cgroup(const char *suffix, char *cgroup, size_t cgroup_size, char *dir, size_t dir_size) {
        struct pressure_gen probe;
        char cwd[400];
        if (!getcwd(cwd, sizeof(cwd)) || pressure_gen_create(&probe, cwd, LIMIT_BYTES) < 0)
                return -EIO;
        snprintf(cgroup, cgroup_size, "%s-%s", probe.cgroup, suffix);
        snprintf(dir, dir_size, "%s-%s", probe.v2_dir, suffix);
        pressure_gen_destroy(&probe);
        if (mkdir(dir, 0755) < 0)
                return -errno;
        test_cleanup_path(dir, true);
        return 0;
}

static void test_removed_cgroup_ends_subscription(void) {
        struct test_child sub = { .lines.fd = -1 }, both = { .lines.fd = -1 };
        char dir[600], cgroup[160], line[512], want[300];
        struct pressure_client *c;

        CU_ASSERT_EQUAL_FATAL(start_daemon(NULL), 0);
        CU_ASSERT_EQUAL_FATAL(make_empty_cgroup("gone", cgroup, sizeof(cgroup), dir, sizeof(dir)), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_FALSE(status_lists_cgroup(c, cgroup));

        /* Two subscribers: one watches only the cgroup, one the system as well. */
        CU_ASSERT_EQUAL_FATAL(subscriber_start(&sub, cgroup, NULL), 0);
        CU_ASSERT_EQUAL_FATAL(subscriber_line(&sub, 10000, line, sizeof(line)), 0);
        snprintf(want, sizeof(want), "initial %s ok", cgroup);
        CU_ASSERT_STRING_EQUAL(line, want);
        CU_ASSERT_EQUAL_FATAL(subscriber_start(&both, "system", cgroup), 0);
        CU_ASSERT_EQUAL_FATAL(subscriber_line(&both, 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(subscriber_line(&both, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, want);

        /* Watched while someone subscribes. */
        CU_ASSERT_TRUE(status_lists_cgroup(c, cgroup));

        /* The kernel reports POLLERR on the trigger. The subscriber that watched only this cgroup sees its
         * call end; the other one gets a "removed" event and stays subscribed. */
        CU_ASSERT_EQUAL(rmdir(dir), 0);
        CU_ASSERT_EQUAL(subscriber_line(&sub, 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(strncmp(line, "end ", 4), 0);
        CU_ASSERT_EQUAL(subscriber_line(&both, 10000, line, sizeof(line)), 0);
        snprintf(want, sizeof(want), "event %s ok ok removed", cgroup);
        CU_ASSERT_EQUAL(strncmp(line, want, strlen(want)), 0);
        CU_ASSERT_FALSE(status_lists_cgroup(c, cgroup));

        /* A new subscription to it is refused, while the daemon serves on. */
        const char *scopes[] = { cgroup, NULL };
        CU_ASSERT_EQUAL(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_event, stderr), -ENOENT);
        CU_ASSERT_TRUE(test_daemon_alive(&daemon_));

        test_child_stop(&sub);
        test_child_stop(&both);
        pressure_client_unref(c);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

/* The trigger of a cgroup lives as long as its last subscriber. */
static void test_cgroup_watch_is_reference_counted(void) {
        struct test_child a = { .lines.fd = -1 }, b = { .lines.fd = -1 };
        char dir[600], cgroup[160], line[512];
        struct pressure_client *c;

        CU_ASSERT_EQUAL_FATAL(start_daemon(NULL), 0);
        CU_ASSERT_EQUAL_FATAL(make_empty_cgroup("ref", cgroup, sizeof(cgroup), dir, sizeof(dir)), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);

        CU_ASSERT_EQUAL_FATAL(subscriber_start(&a, cgroup, NULL), 0);
        CU_ASSERT_EQUAL(subscriber_line(&a, 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(subscriber_start(&b, cgroup, NULL), 0);
        CU_ASSERT_EQUAL(subscriber_line(&b, 10000, line, sizeof(line)), 0);
        CU_ASSERT_TRUE(status_lists_cgroup(c, cgroup));

        test_child_stop(&a);
        /* One subscriber left: still watched, whenever the daemon has seen the first one go. */
        CU_ASSERT_TRUE(status_lists_cgroup(c, cgroup));
        test_child_stop(&b);
        /* The daemon learns of the close asynchronously: ask until it has (bounded). */
        bool gone = false;
        for (uint64_t end = test_now_ms() + 5000; !gone && test_now_ms() < end;)
                gone = !status_lists_cgroup(c, cgroup);
        CU_ASSERT_TRUE(gone);
        CU_ASSERT_EQUAL(rmdir(dir), 0);

        pressure_client_unref(c);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "cgroup pressure reported and recovers", test_cgroup_pressure_reported_and_recovers },
                { "removed cgroup ends subscription", test_removed_cgroup_ends_subscription },
                { "cgroup watch is reference-counted", test_cgroup_watch_is_reference_counted },
                {},
        };
        return test_run("e2e-pressure", cases, test_need_root_psi());
}
