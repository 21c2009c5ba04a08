/* SPDX-License-Identifier: MIT */
/* The system level means the machine: a limited cgroup's stall under the real pressure generator raises
 * that cgroup's scope and leaves the system's silent, also while the machine reclaims as a whole (a
 * fixture /proc whose global reclaim counters grow, beside the real stall): the group's own limit
 * explains its stall. And the daemon
 * starts on a machine already past every threshold, from a fixture and for real. */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "pressure.h"
#include "test-util.h"

static struct test_daemon daemon_;

static int write_conf(char *path, size_t size, const char *text) {
        snprintf(path, size, "/tmp/pressured-syslevel-%d.conf", (int) getpid());
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        test_cleanup_path(path, false);
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -errno;
}

static int start_daemon(const char *conf_text) {
        char conf[128];
        int r = write_conf(conf, sizeof(conf), conf_text);
        if (r < 0)
                return r;
        const char *const args[] = { "--config", conf, NULL };
        r = test_daemon_start(&daemon_, args);
        unlink(conf);
        return r;
}

/* The system scope's level and source as GetStatus has them now. */
static int system_state(enum pressure_level *level, char *source, size_t size, double *some10) {
        struct pressure_client *c;
        struct pressure_status *st;
        struct pressure_stall stall = {};
        int r = pressure_client_new(daemon_.socket, &c);
        if (r < 0)
                return r;
        r = pressure_client_get_status(c, &st);
        if (r >= 0) {
                const struct pressure_scope *sys = pressure_status_get_system(st);
                *level = pressure_scope_get_level(sys);
                if (source)
                        snprintf(source, size, "%s", pressure_scope_get_source(sys) ?: "");
                (void) pressure_scope_get_stall(sys, PRESSURE_STALL_SOME, &stall);
                if (some10)
                        *some10 = stall.avg10;
                pressure_status_unref(st);
        }
        pressure_client_unref(c);
        return r;
}

/* A raw Subscribe to the system and one cgroup at min_level low; the connection. */
static int subscribe_both(const char *cgroup) {
        char scopes[400];
        snprintf(scopes, sizeof(scopes), "{\"type\":\"system\"},{\"type\":\"cgroup\",\"cgroup\":\"%s\"}", cgroup);
        return test_subscribe_scopes(daemon_.socket, scopes);
}

/* Whether any event of the system scope came, whoever waited for what. */
static bool system_event_seen;

/* The next event for `scope` ("system" or a cgroup path) within timeout_ms: its new level in level. */
static int next_event(int fd, const char *scope, int timeout_ms, char *level, size_t size) {
        uint64_t end = test_now_ms() + (uint64_t) timeout_ms;
        while (test_now_ms() < end) {
                char *text;
                int r = test_recv_msg(fd, (int) (end - test_now_ms()), &text);
                if (r <= 0)
                        return r < 0 ? r : -EPIPE;
                const char *ev = strstr(text, "\"event\":");
                bool mine = ev && (strcmp(scope, "system") == 0 ? strstr(ev, "\"type\":\"system\"") != NULL
                                                                : strstr(ev, scope) != NULL);
                const char *l = ev ? strstr(ev, "\"level\":\"") : NULL;
                if (ev && strstr(ev, "\"type\":\"system\""))
                        system_event_seen = true;
                if (mine && l) {
                        snprintf(level, size, "%.*s", (int) strcspn(l + 9, "\""), l + 9);
                        free(text);
                        return 0;
                }
                free(text);
        }
        return -ETIMEDOUT;
}

/* The sum of the machine's global reclaim counters, as the daemon reads them. */
static uint64_t host_global_reclaim(void) {
        char name[64];
        unsigned long long v, sum = 0;
        FILE *f = fopen("/proc/vmstat", "re");
        if (!f)
                return 0;
        while (fscanf(f, "%63s %llu", name, &v) == 2)
                if ((strncmp(name, "pgscan_kswapd", 13) == 0 || strncmp(name, "pgscan_direct", 13) == 0 ||
                     strncmp(name, "pgscan_khugepaged", 17) == 0) &&
                    strcmp(name, "pgscan_direct_throttle") != 0)
                        sum += v;
        fclose(f);
        return sum;
}

/* The machine's cumulative `some` memory stall (/proc/pressure/memory total=), in microseconds. */
static uint64_t host_some_total(void) {
        return pressure_gen_psi_total("/proc/pressure/memory");
}

/* Stall of the machine that the group's does not account for since the marks (the machine's `some` is
 * the union of everyone's; less the group's, what only others stalled). Others stalling at all on a
 * busy machine (a build beside the suite) may raise the system level of their own: the negative
 * assertions hold only when they did not, by the low threshold's 20 ms. */
static bool others_stalled(const struct pressure_gen *g, uint64_t host0, uint64_t group0) {
        uint64_t host = host_some_total() - host0, group = pressure_gen_some_total(g) - group0;
        uint64_t others = host > group ? host - group : 0;
        if (others >= 20000)
                fprintf(stderr, "Others on the machine stalled %llu ms meanwhile: the system level was free to rise.\n",
                        (unsigned long long) others / 1000);
        return others >= 20000;
}

/* Thresholds the generator's stall crosses in the system's PSI as well (it gives the machine 5 to 30%). */
#define LOW_THRESHOLDS "low=some 20ms 2s\nmedium=some 60ms 2s\ncritical=some 200ms 2s\nhold=1s\nsample_interval=250ms\n"

/* Drive one limited group under the generator; its scope must rise; then, while it stalls and the
 * system's PSI shows it, the system scope must still be ok. */
static void limited_group_stays_its_own(const char *root) {
        char conf[1024], level[32];
        struct pressure_gen g;
        enum pressure_level sys_level = PRESSURE_LEVEL_CRITICAL;
        double some10 = 0;

        snprintf(conf, sizeof(conf), "[pressured]\n" LOW_THRESHOLDS "%s%s\n", root ? "sysfs_root=" : "", root ? root : "");
        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 16u << 20), 0);
        CU_ASSERT_EQUAL_FATAL(start_daemon(conf), 0);
        int sub = subscribe_both(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        char *text;
        CU_ASSERT_FATAL(test_recv_msg(sub, 10000, &text) == 1); /* the initial states */
        free(text);

        uint64_t reclaim_before = host_global_reclaim(), host0 = host_some_total(), group0 = pressure_gen_some_total(&g);
        system_event_seen = false;
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        /* The group's own scope rises (its own events say so; the system's would come first if it did). */
        CU_ASSERT_EQUAL(next_event(sub, g.cgroup, 60000, level, sizeof(level)), 0);
        CU_ASSERT_STRING_NOT_EQUAL(level, "ok");
        /* Until the system's own PSI is past the low threshold: its stall is there, and not its level. */
        uint64_t end = test_now_ms() + 30000;
        while (test_now_ms() < end && system_state(&sys_level, NULL, 0, &some10) >= 0 && some10 < 2.0)
                (void) poll(NULL, 0, 250);
        CU_ASSERT(some10 >= 2.0);
        /* Any event of the system so far, or within two more samples, is the false alarm. */
        int r = next_event(sub, "system", 1000, level, sizeof(level));
        bool host_reclaimed = host_global_reclaim() != reclaim_before;
        if ((root || !host_reclaimed) && !others_stalled(&g, host0, group0)) {
                CU_ASSERT_EQUAL(r, -ETIMEDOUT);
                CU_ASSERT_FALSE(system_event_seen);
                CU_ASSERT_EQUAL(system_state(&sys_level, NULL, 0, NULL), 0);
                CU_ASSERT_EQUAL(sys_level, PRESSURE_LEVEL_OK);
        } else if (host_reclaimed)
                fprintf(stderr, "The host reclaimed globally during the test: the system level was free to rise.\n");

        if (root) {
                /* The machine reclaims as a whole (kswapd scanning all the time, as with page cache
                 * filling memory): that says the machine reclaims, not whose stall the system's PSI
                 * holds. The group's own limit explains this stall (its limit events grow), so the
                 * system stays ok; before, the gate let it through and the system rose to critical.
                 * Watched over 3 s of samples of the group's stall. */
                host0 = host_some_total();
                group0 = pressure_gen_some_total(&g);
                system_event_seen = false;
                pid_t bumper = test_global_reclaim_start(root);
                CU_ASSERT_FATAL(bumper > 0);
                test_cleanup_pid(bumper); /* killed and reaped at exit too */
                r = next_event(sub, "system", 3000, level, sizeof(level));
                CU_ASSERT_EQUAL(system_state(&sys_level, NULL, 0, &some10), 0);
                if (!others_stalled(&g, host0, group0)) {
                        CU_ASSERT_EQUAL(r, -ETIMEDOUT);
                        CU_ASSERT_FALSE(system_event_seen);
                        CU_ASSERT_EQUAL(sys_level, PRESSURE_LEVEL_OK);
                }
                /* It was there to see: the machine's own PSI shows the group's stall. */
                fprintf(stderr, "  (the machine's some avg10 %.1f%%, its level ok)\n", some10);
                CU_ASSERT(some10 >= 1.0);
                kill(bumper, SIGKILL);
        }
        test_cleanup_forget_pid(g.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&g), 0);
        close(sub);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
}

static void test_limited_group_real_machine(void) {
        limited_group_stays_its_own(NULL);
}

static void test_limited_group_then_global_reclaim(void) {
        char root[64];
        CU_ASSERT_EQUAL_FATAL(test_fixture_copy("sysfs-1node", root, sizeof(root)), 0);
        limited_group_stays_its_own(root);
}

/* Up to the limit that binds, not above: a writer in a 16 MiB group below a parent with a 1 GiB limit
 * (far from it) raises the child's scope; the parent's own memory.pressure shows the same stall, and the
 * parent stays ok (it rose with the child before). */
static void test_parent_above_the_binding_limit(void) {
        struct pressure_gen outer, inner;
        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&outer, 1u << 30), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create_child(&outer, "inner", 16u << 20, &inner), 0);
        test_cleanup_path(inner.v2_dir, true);
        if (inner.mem_dir[0])
                test_cleanup_path(inner.mem_dir, true);
        test_cleanup_path(inner.file, false);
        CU_ASSERT_EQUAL_FATAL(start_daemon("[pressured]\n" LOW_THRESHOLDS), 0);

        char scopes[600];
        snprintf(scopes, sizeof(scopes), "{\"type\":\"cgroup\",\"cgroup\":\"%s\"},{\"type\":\"cgroup\",\"cgroup\":\"%s\"}",
                 outer.cgroup, inner.cgroup);
        int fd = test_subscribe_scopes(daemon_.socket, scopes);
        CU_ASSERT_FATAL(fd >= 0);
        char *text;
        CU_ASSERT_FATAL(test_recv_msg(fd, 10000, &text) == 1);
        free(text);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&inner), 0);
        test_cleanup_pid(inner.pid);
        /* The child's own event; any event of the parent's in between is the false alarm. */
        char want_inner[200], want_outer[200];
        snprintf(want_inner, sizeof(want_inner), "\"cgroup\":\"%s\"}", inner.cgroup);
        snprintf(want_outer, sizeof(want_outer), "\"cgroup\":\"%s\"}", outer.cgroup);
        bool parent_moved = false, child_rose = false;
        /* Until the child's own event, and two samples more for the parent to show what it would. */
        uint64_t end = test_now_ms() + 60000;
        while (test_now_ms() < end) {
                char *t = NULL;
                if (test_recv_msg(fd, (int) (end - test_now_ms()), &t) != 1)
                        break;
                const char *ev = strstr(t, "\"event\":");
                if (ev && strstr(ev, want_inner) && !child_rose) {
                        child_rose = true;
                        end = test_now_ms() + 1500;
                } else if (ev && strstr(ev, want_outer))
                        parent_moved = true;
                free(t);
        }
        CU_ASSERT_TRUE(child_rose);
        CU_ASSERT_FALSE(parent_moved);

        test_cleanup_forget_pid(inner.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&inner), 0);
        close(fd);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&inner);
        pressure_gen_destroy(&outer);
}

/* A machine already past every headroom threshold at start (a fixture /proc/meminfo: 96% of memory
 * unavailable, no swap) starts, reports its level and serves; before, the first level change reached
 * an observer that could not find the system scope yet (SIGSEGV). */
static void test_starts_past_every_threshold_fixture(void) {
        char root[64], conf[256], source[32];
        enum pressure_level level;
        CU_ASSERT_EQUAL_FATAL(test_fixture_copy("sysfs-busy", root, sizeof(root)), 0);
        snprintf(conf, sizeof(conf), "[pressured]\nsysfs_root=%s\n", root);
        CU_ASSERT_EQUAL_FATAL(start_daemon(conf), 0);
        CU_ASSERT_EQUAL(system_state(&level, source, sizeof(source), NULL), 0);
        CU_ASSERT_EQUAL(level, PRESSURE_LEVEL_MEDIUM);
        CU_ASSERT_STRING_EQUAL(source, "headroom");
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, "system: memory pressure ok -> medium"), 1);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
}

/* The some avg10 of a group's memory.pressure, or -1. */
static double group_some10(const struct pressure_gen *g) {
        char path[600];
        double v = -1;
        snprintf(path, sizeof(path), "%s/memory.pressure", g->v2_dir);
        FILE *f = fopen(path, "re");
        if (f && fscanf(f, "some avg10=%lf", &v) != 1)
                v = -1;
        if (f)
                fclose(f);
        return v;
}

/* A group that stalls before anyone watches it is not reported ok when someone starts to: its first
 * level comes from the kernel's 10 s averages, and the reason says so. */
static void test_first_look(void) {
        struct pressure_gen g;
        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 16u << 20), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        /* Until the kernel's average shows the stall past low's 5% (some 100ms per 2s by default). */
        uint64_t end = test_now_ms() + 60000;
        while (test_now_ms() < end && group_some10(&g) < 10.0)
                (void) poll(NULL, 0, 200);
        CU_ASSERT_FATAL(group_some10(&g) >= 10.0);
        CU_ASSERT_EQUAL_FATAL(start_daemon("[pressured]\n"), 0);

        char scopes[256], *text = NULL;
        snprintf(scopes, sizeof(scopes), "{\"type\":\"cgroup\",\"cgroup\":\"%s\"}", g.cgroup);
        int sub = test_subscribe_scopes(daemon_.socket, scopes);
        CU_ASSERT_FATAL(sub >= 0);
        CU_ASSERT_FATAL(test_recv_msg(sub, 10000, &text) == 1); /* the initial state */
        CU_ASSERT_PTR_NULL(strstr(text, "\"level\":\"ok\""));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"source\":\"pressure\""));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "over the last 10s (the kernel's average, a first look)"));
        if (strstr(text, "\"level\":\"ok\""))
                fprintf(stderr, "initial state: %s\n", text);
        free(text);
        close(sub);
        test_cleanup_forget_pid(g.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&g), 0);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
}

int main(void) {
        static const struct test_case cases[] = {
                { "starts past every threshold (fixture /proc)", test_starts_past_every_threshold_fixture },
                { "a limited group's stall leaves the system ok on this machine", test_limited_group_real_machine },
                { "a limited group's stall leaves the system ok while the machine reclaims globally", test_limited_group_then_global_reclaim },
                { "a parent far from its limit stays ok while its limited child stalls", test_parent_above_the_binding_limit },
                { "a group stalling before it is watched starts above ok", test_first_look },
                {},
        };
        return test_run("system-level", cases, test_need_root_psi());
}
