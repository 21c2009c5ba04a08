/* SPDX-License-Identifier: MIT */
/* Metrics through the real node_exporter: the daemon writes its textfile into a temporary directory,
 * Debian's prometheus-node-exporter serves that directory on 127.0.0.1, and the test scrapes it over HTTP
 * while a cgroup goes through real pressure and back: the pressured_ metrics are there, the cgroup's
 * level follows, the collector reports no error, and the file is gone once the daemon stops. Skips
 * without prometheus-node-exporter. */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "test-util.h"

#define EXPORTER "/usr/bin/prometheus-node-exporter"

static struct test_daemon daemon_;
static char textdir[64];

/* A port nobody listens on now (the exporter takes it right after). */
static int free_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -1;
        close(fd);
        return ntohs(sa.sin_port);
}

/* GET /metrics: the body, malloc()ed, or NULL. */
static char *scrape(int port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (fd >= 0)
                        close(fd);
                return NULL;
        }
        static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (write(fd, req, sizeof(req) - 1) < 0) {
                close(fd);
                return NULL;
        }
        size_t size = 1 << 20, len = 0;
        char *buf = malloc(size);
        ssize_t n;
        while (buf && len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t) n;
        close(fd);
        if (!buf)
                return NULL;
        buf[len] = 0;
        char *body = strstr(buf, "\r\n\r\n");
        char *ret = body ? strdup(body + 4) : NULL;
        free(buf);
        return ret;
}

/* The value of the sample line that starts with `prefix` (name and labels), or -1. */
static double sample(const char *text, const char *prefix) {
        size_t n = strlen(prefix);
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, prefix, n) == 0 && l[n] == ' ')
                        return atof(l + n + 1);
        return -1;
}

/* Scrape until the cgroup's level sample satisfies want (the file is rewritten at most once per sample
 * interval after the event the test already waited for): a few tries, bounded. */
static double level_after_event(int port, const char *line, bool above_ok, char **ret_text) {
        double v = -1;
        for (int i = 0; i < 40; i++) {
                char *text = scrape(port);
                v = text ? sample(text, line) : -1;
                if ((above_ok && v >= 1) || (!above_ok && v == 0)) {
                        *ret_text = text;
                        return v;
                }
                free(text);
                struct pollfd none = { .fd = -1 };
                poll(&none, 0, 100); /* a rewrite is due within the daemon's sample interval */
        }
        *ret_text = NULL;
        return v;
}

static int wait_level(int sub, bool above_ok) {
        char *text;
        for (;;) {
                int r = test_recv_msg(sub, 60000, &text);
                if (r <= 0)
                        return r < 0 ? r : -EPIPE;
                bool ok = strstr(text, "\"event\"") && (strstr(text, "\"level\":\"ok\"") == NULL) == above_ok;
                free(text);
                if (ok)
                        return 0;
        }
}

static void test_node_exporter_serves_levels(void) {
        struct pressure_gen g;
        char conf[128], arg_dir[128], arg_listen[64], line[512], prefix[300];

        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, 16u << 20), 0);

        snprintf(textdir, sizeof(textdir), "/tmp/pressured-metrics-XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(textdir));
        test_cleanup_path(textdir, true);
        snprintf(conf, sizeof(conf), "%s.conf", textdir);
        FILE *f = fopen(conf, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        test_cleanup_path(conf, false);
        fprintf(f, "[pressured]\nmetrics_directory=%s\ncgroup=%s\nhold=1s\nsample_interval=500ms\n", textdir, g.cgroup);
        fclose(f);
        const char *const args[] = { "--config", conf, NULL };
        CU_ASSERT_EQUAL_FATAL(test_daemon_start(&daemon_, args), 0);

        /* The exporter, with only the textfile collector; it says when it listens. */
        int port = free_port();
        CU_ASSERT_FATAL(port > 0);
        snprintf(arg_dir, sizeof(arg_dir), "--collector.textfile.directory=%s", textdir);
        snprintf(arg_listen, sizeof(arg_listen), "--web.listen-address=127.0.0.1:%d", port);
        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        pid_t ex = fork();
        CU_ASSERT_FATAL(ex >= 0);
        if (ex == 0) {
                dup2(p[1], STDERR_FILENO);
                execl(EXPORTER, EXPORTER, "--collector.disable-defaults", "--collector.textfile", arg_dir, arg_listen,
                      (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        struct test_child exporter = { .lines.fd = -1 };
        test_child_adopt(&exporter, ex, p[0]);
        bool listening = false;
        while (!listening && test_lines_next(&exporter.lines, 10000, line, sizeof(line)) == 0)
                listening = strstr(line, "Listening on") != NULL;
        CU_ASSERT_FATAL(listening);

        char *text;
        int sub = test_subscribe_cgroup(daemon_.socket, g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        CU_ASSERT_FATAL(test_recv_msg(sub, 10000, &text) == 1);
        free(text);

        /* Calm: every family is there, the cgroup at 0, and the collector is content. */
        snprintf(prefix, sizeof(prefix), "pressured_level{scope=\"%s\"}", g.cgroup);
        CU_ASSERT_EQUAL(level_after_event(port, prefix, false, &text), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        CU_ASSERT_EQUAL(sample(text, "node_textfile_scrape_error"), 0);
        CU_ASSERT(sample(text, "pressured_level{scope=\"system\"}") >= 0);
        CU_ASSERT(sample(text, "pressured_node_memory_bytes{kind=\"total\",node=\"0\"}") > 0);
        CU_ASSERT(sample(text, "pressured_subscriptions") >= 0); /* written before the subscription: not yet 1 */
        CU_ASSERT(strstr(text, "# TYPE pressured_level_changes_total counter") != NULL);
        free(text);

        /* Under pressure, and back. */
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        CU_ASSERT_EQUAL_FATAL(wait_level(sub, true), 0);
        CU_ASSERT(level_after_event(port, prefix, true, &text) >= 1);
        if (text) {
                CU_ASSERT_EQUAL(sample(text, "node_textfile_scrape_error"), 0);
                snprintf(prefix, sizeof(prefix), "pressured_level_changes_total{scope=\"%s\"}", g.cgroup);
                CU_ASSERT(sample(text, prefix) >= 1);
                snprintf(prefix, sizeof(prefix), "pressured_level{scope=\"%s\"}", g.cgroup);
        }
        free(text);
        test_cleanup_forget_pid(g.pid);
        CU_ASSERT_EQUAL(pressure_gen_stop(&g), 0);
        CU_ASSERT_EQUAL(wait_level(sub, false), 0);
        CU_ASSERT_EQUAL(level_after_event(port, prefix, false, &text), 0);
        free(text);
        close(sub);

        /* Stopped, the daemon takes its file with it: no stale levels. */
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        struct stat st;
        char path[128];
        snprintf(path, sizeof(path), "%s/pressured.prom", textdir);
        CU_ASSERT(stat(path, &st) < 0 && errno == ENOENT);
        test_child_stop(&exporter);
        pressure_gen_destroy(&g);
        (void) rmdir(textdir);
}

static bool file_exists(const char *dir, const char *name) {
        char path[300];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return access(path, F_OK) == 0;
}

/* Entries of a directory other than . and .. */
static int entries(const char *dir) {
        DIR *d = opendir(dir);
        int n = 0;
        if (!d)
                return -1;
        for (struct dirent *e; (e = readdir(d));)
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        closedir(d);
        return n;
}

static bool wait_file(const char *dir, const char *name, bool present) {
        for (uint64_t end = test_now_ms() + 10000; test_now_ms() < end; (void) poll(NULL, 0, 50))
                if (file_exists(dir, name) == present)
                        return true;
        return false;
}

/* Whoever owns the metrics directory's parent may swap the directory for a symlink: root's writes stay in
 * the directory opened at start (they followed the link before). A reload moves the file to a new
 * directory, and an emptied setting removes it and writes nowhere (temporary files went to / before). */
static void test_directory_swapped_and_reloaded(void) {
        char parent[64], dir[128], moved[128], target[128], other[128], conf[160];
        snprintf(parent, sizeof(parent), "/tmp/pressured-metrics-XXXXXX");
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(parent));
        test_cleanup_tree(parent);
        snprintf(dir, sizeof(dir), "%s/textfile", parent);
        snprintf(moved, sizeof(moved), "%s/textfile.moved", parent);
        snprintf(target, sizeof(target), "%s/elsewhere", parent);
        snprintf(other, sizeof(other), "%s/other", parent);
        snprintf(conf, sizeof(conf), "%s/pressured.conf", parent);
        CU_ASSERT_FATAL(mkdir(dir, 0755) == 0 && mkdir(target, 0755) == 0 && mkdir(other, 0755) == 0);
        FILE *f = fopen(conf, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f, "[pressured]\nmetrics_directory=%s\nnode_interval=1s\n", dir);
        fclose(f);
        const char *const args[] = { "--config", conf, NULL };
        CU_ASSERT_EQUAL_FATAL(test_daemon_start(&daemon_, args), 0);
        CU_ASSERT(wait_file(dir, "pressured.prom", true));

        /* The swap: the directory moves away, a symlink to another takes its name. */
        CU_ASSERT_EQUAL(rename(dir, moved), 0);
        CU_ASSERT_EQUAL(symlink(target, dir), 0);
        char old_file[200];
        snprintf(old_file, sizeof(old_file), "%s/pressured.prom", moved);
        CU_ASSERT_EQUAL(unlink(old_file), 0);
        CU_ASSERT(wait_file(moved, "pressured.prom", true)); /* the next write, where it always was */
        CU_ASSERT_EQUAL(entries(target), 0);

        /* A reload to another directory: the old file goes, the new one comes. */
        f = fopen(conf, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f, "[pressured]\nmetrics_directory=%s\nnode_interval=1s\n", other);
        fclose(f);
        CU_ASSERT_EQUAL(kill(daemon_.pid, SIGHUP), 0);
        CU_ASSERT(wait_file(other, "pressured.prom", true));
        CU_ASSERT(wait_file(moved, "pressured.prom", false));

        /* Emptied: removed, and nothing written anywhere (the root directory included). */
        int in_root = entries("/");
        f = fopen(conf, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f, "[pressured]\nmetrics_directory=\nnode_interval=1s\n");
        fclose(f);
        CU_ASSERT_EQUAL(kill(daemon_.pid, SIGHUP), 0);
        CU_ASSERT(wait_file(other, "pressured.prom", false));
        CU_ASSERT_EQUAL(entries(other), 0);
        CU_ASSERT_EQUAL(entries("/"), in_root);
        CU_ASSERT(test_daemon_alive(&daemon_));
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        (void) unlink(dir);
}

int main(void) {
        static const struct test_case cases[] = {
                { "node_exporter serves the levels of a cgroup under real pressure", test_node_exporter_serves_levels },
                { "the metrics directory swapped for a symlink, moved and emptied", test_directory_swapped_and_reloaded },
                {},
        };
        const char *skip = test_need_root_psi();
        if (!skip && access(EXPORTER, X_OK) < 0)
                skip = "prometheus-node-exporter is not installed (build-aux/install-deps installs it)";
        return test_run("metrics", cases, skip);
}
