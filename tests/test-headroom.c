/* SPDX-License-Identifier: MIT */
/* Headroom against the real kernel: a cgroup with a memory limit and a process in it that only grows
 * anonymous memory (no file cache in the group, no swap on the machine), so that PSI barely moves before
 * the limit. A raw Varlink subscriber must hear low, then medium, raised by headroom, before the kernel
 * acts; the OOM kill when the grower cannot shrink; and, with a shrinker registered, the grower must be
 * asked in time to outlive the time it needs to fill the group twice. Hybrid (v1 memory controller) here,
 * pure cgroup v2 in the VM. */

#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "pressure-gen.h"
#include "test-util.h"

#define LIMIT_BYTES (64u << 20)
#define OBJECT_BYTES (1u << 20) /* malloc() maps these: a freed one goes back to the kernel at once */
#define GROW_MS "150"           /* 1 MiB per 150 ms: about 6.7 MiB/s, the group full in under 10 s */

static struct test_daemon daemon_;

static int start_daemon(const char *cgroup, const char *extra) {
        char conf[200];
        snprintf(conf, sizeof(conf), "/tmp/pressured-headroom-%d.conf", (int) getpid());
        FILE *f = fopen(conf, "we");
        if (!f)
                return -errno;
        test_cleanup_path(conf, false);
        fprintf(f, "[pressured]\nhold=1s\nsample_interval=500ms\ncgroup=%s\n%s", cgroup, extra ? extra : "");
        fclose(f);
        const char *const args[] = { "--config", conf, NULL };
        int r = test_daemon_start(&daemon_, args);
        unlink(conf);
        return r;
}

static int subscribe(const char *cgroup) {
        return test_subscribe_cgroup(daemon_.socket, cgroup);
}

/* What the subscriber heard, one message at a time: a level change's level and source, or a memory
 * event's kind ("event low headroom", "memory oom_kill", "state", "other"). */
static int next_news(int fd, int timeout_ms, char *out, size_t size, uint64_t *ret_unreclaimable) {
        char *text;
        int r = test_recv_msg(fd, timeout_ms, &text);
        if (r <= 0)
                return r < 0 ? r : -EPIPE;
        struct json_object *o = json_tokener_parse(text), *p, *v, *h;
        free(text);
        snprintf(out, size, "other");
        if (o && json_object_object_get_ex(o, "parameters", &p)) {
                if (json_object_object_get_ex(p, "event", &v)) {
                        struct json_object *level = NULL, *source = NULL, *u = NULL;
                        json_object_object_get_ex(v, "level", &level);
                        json_object_object_get_ex(v, "source", &source);
                        if (json_object_object_get_ex(v, "headroom", &h) && json_object_object_get_ex(h, "unreclaimable", &u))
                                *ret_unreclaimable = (uint64_t) json_object_get_int64(u);
                        snprintf(out, size, "event %s %s", json_object_get_string(level),
                                 source ? json_object_get_string(source) : "-");
                } else if (json_object_object_get_ex(p, "memory_event", &v) && json_object_object_get_ex(v, "kind", &h))
                        snprintf(out, size, "memory %s", json_object_get_string(h));
                else if (json_object_object_get_ex(p, "state", &v))
                        snprintf(out, size, "state");
        }
        json_object_put(o);
        return 0;
}

static pid_t spawn_grower(struct pressure_gen *g, bool shrinker, int out_fd) {
        /* A few objects from the start: an empty cache answers its first count with "empty", and is left
         * alone for empty_backoff then. */
        const char *const argv[] = { getenv("SHRINKER_CLIENT_BIN"), "--socket", daemon_.socket, "--objects", "4",
                                     "--size", "1048576", "--grow", GROW_MS, "--shrinkers", shrinker ? "1" : "0",
                                     "--memcg", NULL };
        return pressure_gen_spawn(g, argv, out_fd);
}

static void test_headroom(void) {
        struct pressure_gen g;
        char news[128];
        uint64_t unreclaimable = 0;

        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, LIMIT_BYTES), 0);
        CU_ASSERT_EQUAL_FATAL(start_daemon(g.cgroup, NULL), 0);

        int sub = subscribe(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        CU_ASSERT_EQUAL_FATAL(next_news(sub, 10000, news, sizeof(news), &unreclaimable), 0);
        CU_ASSERT_STRING_EQUAL(news, "state");

        /* A second subscriber through libpressure: pressurectl watch, which prints memory events. */
        int w[2];
        CU_ASSERT_FATAL(pipe(w) == 0);
        pid_t watcher = fork();
        CU_ASSERT_FATAL(watcher >= 0);
        if (watcher == 0) {
                dup2(w[1], STDOUT_FILENO);
                execl(getenv("PRESSURECTL_BIN"), "pressurectl", "--socket", daemon_.socket, "watch", g.cgroup, (char *) NULL);
                _exit(127);
        }
        close(w[1]);
        struct test_child watch = { .lines.fd = -1 };
        test_child_adopt(&watch, watcher, w[0]);
        char line[256];
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&watch.lines, 10000, line, sizeof(line)), 0); /* the current state */

        /* 1. Nobody frees: the levels come before the limit, then the kill. */
        pid_t grower = spawn_grower(&g, false, -1);
        CU_ASSERT_FATAL(grower > 0);
        test_cleanup_pid(grower);
        bool low = false, medium = false, killed = false;
        uint64_t low_at = 0, medium_at = 0;
        while (!killed && next_news(sub, 60000, news, sizeof(news), &unreclaimable) == 0) {
                fprintf(stderr, "  heard: %s (unreclaimable %llu)\n", news, (unsigned long long) unreclaimable);
                if (streq(news, "event low headroom") && !low) {
                        low = true;
                        low_at = unreclaimable;
                } else if (streq(news, "event medium headroom") && !medium) {
                        medium = true;
                        medium_at = unreclaimable;
                } else if (streq(news, "memory oom_kill")) {
                        killed = true;
                        CU_ASSERT(low);
                        CU_ASSERT(medium); /* both before the kill */
                }
        }
        CU_ASSERT(low && medium && killed);
        /* Raised at the thresholds (85% and 92% of the limit), before the limit. */
        CU_ASSERT(low_at >= LIMIT_BYTES / 100 * 85 && low_at < LIMIT_BYTES);
        CU_ASSERT(medium_at >= LIMIT_BYTES / 100 * 92 && medium_at < LIMIT_BYTES);
        /* The library's subscriber heard of the kill too (after its level changes). */
        bool watch_killed = false;
        while (!watch_killed && test_lines_next(&watch.lines, 10000, line, sizeof(line)) == 0)
                watch_killed = strstr(line, " oom_kill x") != NULL;
        CU_ASSERT(watch_killed);
        test_child_stop(&watch);

        int status = 0;
        CU_ASSERT_EQUAL(waitpid(grower, &status, 0), grower);
        CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        test_cleanup_forget_pid(grower);
        /* The log names the victim, from the kernel's own oom-kill line (it was logged before the event
         * went out). */
        char victim[256];
        snprintf(victim, sizeof(victim), " (pid %d, uid 0, in %s) in this cgroup.", (int) grower, g.cgroup);
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, victim), 1);

#ifdef __SANITIZE_ADDRESS__
        /* AddressSanitizer keeps what the grower frees in its quarantine: freeing cannot save it here. The
         * plain build runs this part. */
        fprintf(stderr, "  (the shrinking grower is left out under AddressSanitizer)\n");
        close(sub);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
        return;
#endif
        /* 2. The same grower with a shrinker that frees: asked in time, it outlives twice the time it
         * needs to fill the group. */
        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        grower = spawn_grower(&g, true, p[1]);
        close(p[1]);
        CU_ASSERT_FATAL(grower > 0);
        struct test_child child = { .lines.fd = -1 };
        test_child_adopt(&child, grower, p[0]);
        unsigned scans = 0;
        uint64_t end = test_now_ms() + 2 * (LIMIT_BYTES / OBJECT_BYTES) * 150;
        while (test_now_ms() < end) {
                int r = test_lines_next(&child.lines, 500, line, sizeof(line));
                if (r == -EPIPE)
                        break;
                if (r == 0 && strncmp(line, "scan ", 5) == 0)
                        scans++;
        }
        CU_ASSERT(waitpid(grower, &status, WNOHANG) == 0); /* still alive */
        CU_ASSERT(scans > 0);
        fprintf(stderr, "  the shrinking grower was asked %u times in %u s\n", scans,
                (unsigned) (2 * (LIMIT_BYTES / OBJECT_BYTES) * 150 / 1000));
        /* And the kernel killed nobody this time. */
        while (next_news(sub, 0, news, sizeof(news), &unreclaimable) == 0)
                CU_ASSERT_STRING_NOT_EQUAL(news, "memory oom_kill");
        test_child_stop(&child);

        close(sub);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
}

/* headroom_low=40M: low once less than 40 MiB is left under the 64 MiB limit (24 MiB used), where 15%
 * would wait for 54 MiB; the reason says the size. */
static void test_headroom_as_size(void) {
        struct pressure_gen g;
        char news[128];
        uint64_t unreclaimable = 0;

        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, LIMIT_BYTES), 0);
        CU_ASSERT_EQUAL_FATAL(start_daemon(g.cgroup, "headroom_low=40M\nheadroom_medium=16M\n"), 0);
        int sub = subscribe(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        CU_ASSERT_EQUAL_FATAL(next_news(sub, 10000, news, sizeof(news), &unreclaimable), 0);
        CU_ASSERT_STRING_EQUAL(news, "state");
        pid_t grower = spawn_grower(&g, false, -1);
        CU_ASSERT_FATAL(grower > 0);
        test_cleanup_pid(grower);
        bool low = false;
        while (!low && next_news(sub, 60000, news, sizeof(news), &unreclaimable) == 0)
                low = streq(news, "event low headroom");
        CU_ASSERT(low);
        fprintf(stderr, "  low with %llu MiB unreclaimable\n", (unsigned long long) (unreclaimable >> 20));
        CU_ASSERT(unreclaimable >= LIMIT_BYTES - (40u << 20) && unreclaimable < LIMIT_BYTES / 100 * 85);
        char needle[300];
        snprintf(needle, sizeof(needle), "%s: memory pressure ok -> low: headroom", g.cgroup);
        CU_ASSERT(test_daemon_log_wait(&daemon_, needle, "at or below low's 40.0M", 1, 10000) >= 1);
        kill(grower, SIGKILL);
        waitpid(grower, NULL, 0);
        test_cleanup_forget_pid(grower);
        close(sub);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
}

/* A level held after its cause is gone asks nobody: a cache of 8 MiB in the group, a grower beside it
 * that nobody can ask; the levels rise with the grower and the cache is asked; the kernel kills the
 * grower; during the 10 s the level is then held, no scan reaches the cache (the group is nearly empty:
 * 19 rounds took 11.5 MiB from a cache there before). */
static void nothing_asked_after_the_kill(const char *levels) {
        struct pressure_gen g;
        char news[128], line[256], conf[256];
        uint64_t unreclaimable = 0;

        CU_ASSERT_EQUAL_FATAL(test_pressure_group(&g, LIMIT_BYTES), 0);
        snprintf(conf, sizeof(conf), "hold=10s\nregulate_budget=0\nlog_level=debug\n%s", levels);
        CU_ASSERT_EQUAL_FATAL(start_daemon(g.cgroup, conf), 0);
        int sub = subscribe(g.cgroup);
        CU_ASSERT_FATAL(sub >= 0);
        CU_ASSERT_EQUAL_FATAL(next_news(sub, 10000, news, sizeof(news), &unreclaimable), 0);

        int p[2];
        CU_ASSERT_FATAL(pipe(p) == 0);
        const char *const cache_argv[] = { getenv("SHRINKER_CLIENT_BIN"), "--socket", daemon_.socket, "--objects", "8",
                                           "--size", "1048576", "--memcg", NULL };
        pid_t cache_pid = pressure_gen_spawn(&g, cache_argv, p[1]);
        close(p[1]);
        CU_ASSERT_FATAL(cache_pid > 0);
        struct test_child cache = { .lines.fd = -1 };
        test_child_adopt(&cache, cache_pid, p[0]);
        CU_ASSERT_EQUAL_FATAL(test_lines_next(&cache.lines, 10000, line, sizeof(line)), 0); /* ready */

        pid_t grower = spawn_grower(&g, false, -1);
        CU_ASSERT_FATAL(grower > 0);
        test_cleanup_pid(grower);
        bool raised = false, killed = false;
        while (!killed && next_news(sub, 60000, news, sizeof(news), &unreclaimable) == 0) {
                raised = raised || strncmp(news, "event ", 6) == 0;
                killed = streq(news, "memory oom_kill");
        }
        CU_ASSERT_FATAL(killed);
        int status = 0;
        CU_ASSERT_EQUAL(waitpid(grower, &status, 0), grower);
        test_cleanup_forget_pid(grower);
        /* What was sent before the kill may still arrive: half a second to drain it. */
        unsigned before = 0, after = 0;
        uint64_t drain = test_now_ms() + 500;
        while (test_now_ms() < drain && test_lines_next(&cache.lines, (int) (drain - test_now_ms()), line, sizeof(line)) == 0)
                before += strncmp(line, "scan ", 5) == 0;
        /* Whatever level the stall around the kill raised is held for the hold time; until the subscriber
         * hears ok (or 30 s pass), nothing more is asked. */
        bool ok = false;
        uint64_t end = test_now_ms() + 30000;
        while (!ok && test_now_ms() < end) {
                while (test_lines_next(&cache.lines, 0, line, sizeof(line)) == 0)
                        after += strncmp(line, "scan ", 5) == 0;
                if (next_news(sub, 200, news, sizeof(news), &unreclaimable) == 0) {
                        raised = raised || (strncmp(news, "event ", 6) == 0 && strncmp(news, "event ok", 8) != 0);
                        ok = raised && strncmp(news, "event ok", 8) == 0;
                }
        }
        while (test_lines_next(&cache.lines, 0, line, sizeof(line)) == 0)
                after += strncmp(line, "scan ", 5) == 0;
        fprintf(stderr, "  scans: %u draining after the kill, %u while the level was held (%s)\n", before, after,
                raised ? "a level was raised" : "no level was raised");
        CU_ASSERT(raised);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(after, 0u);
        test_child_stop(&cache);
        close(sub);
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        pressure_gen_destroy(&g);
}

static void test_nothing_asked_after_the_kill(void) {
        nothing_asked_after_the_kill("");
}

int main(void) {
        static const struct test_case cases[] = {
                { "an anonymous grower is warned before its limit, and saved when it frees", test_headroom },
                { "a headroom threshold as a size left", test_headroom_as_size },
                { "a level held after an OOM kill asks nobody", test_nothing_asked_after_the_kill },
                {},
        };
        return test_run("headroom", cases, test_need_root_psi());
}
