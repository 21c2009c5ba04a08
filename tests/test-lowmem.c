/* SPDX-License-Identifier: MIT */
/* org.freedesktop.LowMemoryMonitor against the real things: a private dbus-daemon configured as a system
 * bus with the shipped policy file, the daemon owning the name, and a real GLib application (GMemoryMonitor
 * through PyGObject) running as nobody. Under the suite's pressure generator, with a fixture /proc that
 * says the machine reclaims as a whole, the system scope rises through low, medium and critical
 * (thresholds lowered for the test, so that a 16 MiB writer is enough); the application hears 50, 100 and
 * 255, and nothing once memory recovered. With the machine not reclaiming, the same stall is the limited
 * group's alone and the application hears nothing. Skips without dbus-daemon or PyGObject. */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "test-util.h"

#define PYTHON "/usr/bin/python3"
#define DBUS_DAEMON "/usr/bin/dbus-daemon"

/* The application: GMemoryMonitor's warnings on stdout; on "sync" from stdin a round trip to the daemon
 * over the bus (its earlier signals arrive before the answer), with what introspection and
 * Properties.GetAll say. */
static const char client_py[] =
        "import sys\n"
        "import gi\n"
        "gi.require_version('Gio', '2.0')\n"
        "from gi.repository import Gio, GLib\n"
        "m = Gio.MemoryMonitor.dup_default()\n"
        "m.connect('low-memory-warning', lambda mon, level: print('warning', int(level), flush=True))\n"
        "bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)\n"
        "def sync():\n"
        "    x = bus.call_sync('org.freedesktop.LowMemoryMonitor', '/org/freedesktop/LowMemoryMonitor',\n"
        "        'org.freedesktop.DBus.Introspectable', 'Introspect', None, GLib.VariantType('(s)'), 0, -1, None)\n"
        "    p = bus.call_sync('org.freedesktop.LowMemoryMonitor', '/org/freedesktop/LowMemoryMonitor',\n"
        "        'org.freedesktop.DBus.Properties', 'GetAll', GLib.Variant('(s)', ('org.freedesktop.LowMemoryMonitor',)),\n"
        "        GLib.VariantType('(a{sv})'), 0, -1, None)\n"
        "    print('synced', 'LowMemoryWarning' in x.unpack()[0], len(p.unpack()[0]), flush=True)\n"
        "def on_stdin(ch, cond):\n"
        "    line = sys.stdin.readline()\n"
        "    if not line:\n"
        "        loop.quit()\n"
        "        return False\n"
        "    sync()\n"
        "    return True\n"
        "import os\n"
        "if not os.environ.get('LMM_NO_STDIN'):\n"
        "    GLib.io_add_watch(GLib.IOChannel.unix_new(0), GLib.IO_IN | GLib.IO_HUP, on_stdin)\n"
        "bus.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetId', None, None, 0, -1, None)\n"
        "print('ready', type(m).__name__, flush=True)\n"
        "loop = GLib.MainLoop()\n"
        "loop.run()\n";

static struct test_daemon daemon_;

static const char *need(void) {
        const char *skip = test_need_root_psi();
        if (skip)
                return skip;
        if (access(DBUS_DAEMON, X_OK) < 0)
                return "dbus-daemon is not installed";
        if (system(PYTHON " -c 'import gi; gi.require_version(\"Gio\", \"2.0\"); from gi.repository import Gio; "
                   "Gio.MemoryMonitor' 2>/dev/null") != 0)
                return "PyGObject with Gio (python3-gi, gir1.2-glib-2.0) is not installed";
        return NULL;
}

static pid_t spawn_bus(const char *dir, char *address, size_t size) {
        char conf[256], policy[512];
        snprintf(conf, sizeof(conf), "%s/bus.conf", dir);
        snprintf(policy, sizeof(policy), "%s/data/org.freedesktop.LowMemoryMonitor.conf", getenv("PRESSURED_SOURCE_ROOT"));
        FILE *f = fopen(conf, "we");
        if (!f)
                return -1;
        /* A system bus as Debian's system.conf has it, in short: everyone connects, nobody owns a name nor
         * calls a method unless a policy file says so. */
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN\" "
                "\"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig><type>system</type><listen>unix:path=%s/system_bus_socket</listen><auth>EXTERNAL</auth>\n"
                "<policy context=\"default\"><allow user=\"*\"/><deny own=\"*\"/><deny send_type=\"method_call\"/>"
                "<allow send_type=\"signal\"/><allow send_requested_reply=\"true\" send_type=\"method_return\"/>"
                "<allow send_requested_reply=\"true\" send_type=\"error\"/><allow receive_type=\"method_call\"/>"
                "<allow receive_type=\"method_return\"/><allow receive_type=\"error\"/><allow receive_type=\"signal\"/>"
                "<allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>"
                "<allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Introspectable\"/>"
                "</policy>\n<include>%s</include></busconfig>\n",
                dir, policy);
        fclose(f);
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                char fdarg[32];
                close(p[0]);
                snprintf(fdarg, sizeof(fdarg), "--print-address=%d", p[1]);
                execl(DBUS_DAEMON, DBUS_DAEMON, "--nofork", "--nopidfile", "--nosyslog", fdarg, "--config-file", conf,
                      (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        test_cleanup_pid(pid);
        /* The address comes once the bus listens. */
        struct test_lines lines = { .fd = p[0] };
        int r = test_lines_next(&lines, 10000, address, size);
        close(p[0]);
        return r == 0 ? pid : -1;
}

/* The application, as nobody, stdin a pipe for "sync", stdout read line by line. */
static pid_t spawn_app(const char *bus_address, int *ret_in, struct test_child *out) {
        int in[2], o[2];
        if (pipe(in) < 0 || pipe(o) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                struct passwd *pw = getpwnam("nobody");
                dup2(in[0], STDIN_FILENO);
                dup2(o[1], STDOUT_FILENO);
                close(in[1]);
                close(o[0]);
                if (!pw || setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
                        _exit(126);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                setenv("HOME", "/nonexistent", 1);
                unsetenv("DBUS_SESSION_BUS_ADDRESS");
                execl(PYTHON, PYTHON, "-c", client_py, (char *) NULL);
                _exit(127);
        }
        close(in[0]);
        close(o[1]);
        test_child_adopt(out, pid, o[0]);
        *ret_in = in[1];
        return pid;
}

static int next_system_event(int sub, char *level, size_t size) {
        char *text;
        int r = test_recv_msg(sub, 60000, &text);
        if (r <= 0)
                return r < 0 ? r : -EPIPE;
        const char *l = strstr(text, "\"level\":\"");
        snprintf(level, size, "%.*s", l ? (int) strcspn(l + 9, "\"") : 0, l ? l + 9 : "");
        free(text);
        return 0;
}

/* A private system bus with the daemon on it, configured with conf_text. */
struct bus_env {
        char dir[64], address[512], busconf[256], conf[128];
        pid_t bus;
};

static int bus_env_start(struct bus_env *e, const char *conf_text) {
        snprintf(e->dir, sizeof(e->dir), "/tmp/pressured-bus-XXXXXX");
        if (!mkdtemp(e->dir))
                return -errno;
        test_cleanup_path(e->dir, true);
        if (chmod(e->dir, 0755) < 0) /* nobody reaches the bus socket */
                return -errno;
        e->bus = spawn_bus(e->dir, e->address, sizeof(e->address));
        if (e->bus <= 0)
                return -ECHILD;
        snprintf(e->busconf, sizeof(e->busconf), "%s/bus.conf", e->dir);
        test_cleanup_path(e->busconf, false);
        snprintf(e->conf, sizeof(e->conf), "%s/pressured.conf", e->dir);
        test_cleanup_path(e->conf, false);
        FILE *f = fopen(e->conf, "we");
        if (!f)
                return -errno;
        fputs(conf_text, f);
        fclose(f);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", e->address, 1);
        const char *const args[] = { "--config", e->conf, NULL };
        int r = test_daemon_start(&daemon_, args);
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
        return r;
}

static void bus_env_stop(struct bus_env *e) {
        char sock[128];
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        kill(e->bus, SIGTERM);
        waitpid(e->bus, NULL, 0);
        test_cleanup_forget_pid(e->bus);
        snprintf(sock, sizeof(sock), "%s/system_bus_socket", e->dir);
        (void) unlink(sock);
        (void) unlink(e->busconf);
        (void) unlink(e->conf);
        (void) rmdir(e->dir);
}

/* The system's stall under the generator, with the machine reclaiming as a whole or not (a fixture /proc
 * whose global reclaim counters grow, or stay): a GLib application hears low, medium and critical in the
 * first case, where the stall is one no limit explains (pressure_gen_unexplained()), and nothing at all
 * in the second, where the stall is only the limited group's. */
static void glib_and_the_system(bool machine_reclaims) {
        char line[256], level[32], root[64], conf[512];
        struct pressure_gen g;
        struct bus_env env;

        CU_ASSERT_EQUAL_FATAL(test_fixture_copy("sysfs-1node", root, sizeof(root)), 0);
        /* Low thresholds of one kind, so that the generator's stall takes the system through every level;
         * the repeat interval long, so that a level comes at most once here. */
        snprintf(conf, sizeof(conf),
                 "[pressured]\nlow=some 10ms 2s\nmedium=some 20ms 2s\ncritical=some 40ms 2s\n"
                 "hold=1s\nsample_interval=250ms\nlow_memory_monitor_repeat=10min\nsysfs_root=%s\n",
                 root);
        CU_ASSERT_EQUAL_FATAL(bus_env_start(&env, conf), 0);

        int sub = test_connect(daemon_.socket);
        CU_ASSERT_FATAL(sub >= 0);
        static const char subscribe[] = "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":"
                                        "[{\"type\":\"system\"}],\"min_level\":\"low\"},\"more\":true}";
        CU_ASSERT_FATAL(test_send_raw(sub, subscribe, sizeof(subscribe)) >= 0);
        char *text;
        CU_ASSERT_FATAL(test_recv_msg(sub, 10000, &text) == 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"level\":\"ok\"")); /* the test needs a calm start */
        free(text);

        struct test_child app = { .lines.fd = -1 };
        int app_in = -1;
        CU_ASSERT_FATAL(spawn_app(env.address, &app_in, &app) > 0);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&app.lines, 20000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "ready GMemoryMonitorDBus");
        /* The name is the daemon's by now (the application's bus round trip came after the daemon's
         * request), and the object answers as the issue wants: the signal in its introspection, no
         * properties. */
        CU_ASSERT_FATAL(write(app_in, "sync\n", 5) == 5);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&app.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "synced True 0");

        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 16u << 20), 0);
        if (machine_reclaims) {
                /* The machine's own shortage: a stall no limit explains (the group's own limit would
                 * explain the generator's, and the system would rightly stay calm). */
                int r = pressure_gen_unexplained(&g);
                if (r == -EOPNOTSUPP) {
                        fprintf(stderr, "(needs a hybrid hierarchy to stall the system without a limit: skipped) ");
                        close(sub);
                        test_child_stop(&app);
                        bus_env_stop(&env);
                        pressure_gen_destroy(&g);
                        return;
                }
                CU_ASSERT_EQUAL_FATAL(r, 0);
                test_cleanup_path(g.v2_dir, true);
        }
        /* The group is watched too: its own scope says when its stall is there. */
        int own = test_subscribe_cgroup(daemon_.socket, g.cgroup);
        CU_ASSERT_FATAL(own >= 0);
        CU_ASSERT_FATAL(test_recv_msg(own, 10000, &text) == 1);
        free(text);
        pid_t bumper = machine_reclaims ? test_global_reclaim_start(root) : 0;
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        if (machine_reclaims) {
                /* Up to critical (the system scope's own events say when). */
                bool critical = false;
                while (!critical && next_system_event(sub, level, sizeof(level)) == 0)
                        critical = strcmp(level, "critical") == 0;
                CU_ASSERT_FATAL(critical);
        } else {
                /* Until the group itself is critical, and two samples more: the system says nothing. */
                bool critical = false;
                while (!critical && test_recv_msg(own, 60000, &text) == 1) {
                        critical = strstr(text, "\"event\"") && strstr(text, "\"level\":\"critical\"");
                        free(text);
                }
                CU_ASSERT_FATAL(critical);
                CU_ASSERT_EQUAL(test_recv_msg(sub, 500, &text), -ETIMEDOUT);
        }
        test_cleanup_forget_pid(g.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&g), 0);
        if (bumper > 0)
                kill(bumper, SIGKILL);

        if (machine_reclaims) {
                /* 50, 100, 255, each once, in order. */
                static const char *const want[] = { "warning 50", "warning 100", "warning 255" };
                for (size_t i = 0; i < 3; i++) {
                        CU_ASSERT_EQUAL(test_lines_next(&app.lines, 10000, line, sizeof(line)), 0);
                        CU_ASSERT_STRING_EQUAL(line, want[i]);
                }
                /* Back to ok, and then not a word: the round trip after the recovery comes back with
                 * nothing before it. */
                bool ok = false;
                while (!ok && next_system_event(sub, level, sizeof(level)) == 0)
                        ok = strcmp(level, "ok") == 0;
                CU_ASSERT(ok);
        }
        CU_ASSERT_FATAL(write(app_in, "sync\n", 5) == 5);
        CU_ASSERT_EQUAL(test_lines_next(&app.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "synced True 0");

        close(own);
        close(app_in);
        test_child_stop(&app);
        close(sub);
        bus_env_stop(&env);
        CU_ASSERT(test_daemon_log_count(&daemon_, "Owning org.freedesktop.LowMemoryMonitor") == 1);
        pressure_gen_destroy(&g);
}

static void test_glib_hears_the_system(void) {
        glib_and_the_system(true);
}

static void test_glib_deaf_to_one_group(void) {
        glib_and_the_system(false);
}

/* A GLib application inside a cgroup that nears its limit (headroom: an anonymous grower, no stall, so
 * the system stays calm) hears of its own cgroup, unicast; one outside it hears nothing. */
static void test_glib_hears_its_cgroup(void) {
        char line[256];
        struct pressure_gen g;
        struct bus_env env;

        CU_ASSERT_EQUAL_FATAL(bus_env_start(&env, "[pressured]\nhold=1s\nlow_memory_monitor_repeat=10min\n"), 0);

        /* Outside: the application as nobody, in the test's own cgroup. */
        struct test_child outside = { .lines.fd = -1 };
        int outside_in = -1;
        CU_ASSERT_FATAL(spawn_app(env.address, &outside_in, &outside) > 0);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&outside.lines, 20000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "ready GMemoryMonitorDBus");

        /* Inside: the same application in a 64 MiB group. */
        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 64u << 20), 0);
        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", env.address, 1);
        setenv("LMM_NO_STDIN", "1", 1);
        const char *const app_argv[] = { PYTHON, "-c", client_py, NULL };
        pid_t inside_pid = pressure_gen_spawn(&g, app_argv, p[1]);
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
        unsetenv("LMM_NO_STDIN");
        close(p[1]);
        CU_ASSERT_FATAL(inside_pid > 0);
        struct test_child inside = { .lines.fd = -1 };
        test_child_adopt(&inside, inside_pid, p[0]);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&inside.lines, 20000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "ready GMemoryMonitorDBus");

        /* The grower (1 MiB per 150 ms, nothing to reclaim, nobody asked to shrink). */
        const char *const grow_argv[] = { getenv("SHRINKER_CLIENT_BIN"), "--socket", daemon_.socket, "--objects", "0",
                                          "--size", "1048576", "--grow", "150", "--shrinkers", "0", NULL };
        pid_t grower = pressure_gen_spawn(&g, grow_argv, -1);
        CU_ASSERT_FATAL(grower > 0);
        test_cleanup_pid(grower);

        CU_ASSERT_EQUAL(test_lines_next(&inside.lines, 30000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "warning 50");
        CU_ASSERT_EQUAL(test_lines_next(&inside.lines, 30000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "warning 100");
        /* The application outside heard nothing: its round trip comes back alone. */
        CU_ASSERT_FATAL(write(outside_in, "sync\n", 5) == 5);
        CU_ASSERT_EQUAL(test_lines_next(&outside.lines, 10000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "synced True 0");

        kill(grower, SIGKILL);
        waitpid(grower, NULL, 0);
        test_cleanup_forget_pid(grower);
        test_child_stop(&inside);
        close(outside_in);
        test_child_stop(&outside);
        bus_env_stop(&env);
        pressure_gen_destroy(&g);
}

int main(void) {
        static const struct test_case cases[] = {
                { "a GLib application hears low, medium, critical and then nothing", test_glib_hears_the_system },
                { "a GLib application hears nothing of one limited group's stall", test_glib_deaf_to_one_group },
                { "a GLib application in a cgroup near its limit hears of it, alone", test_glib_hears_its_cgroup },
                {},
        };
        return test_run("lowmem", cases, need());
}
