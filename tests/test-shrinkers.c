/* SPDX-License-Identifier: MIT */
/* Client shrinkers end to end: the real daemon, real client processes (tests/shrinker-client.c, built on
 * libpressure) in different cgroups, real memory pressure in one of them, explicit scans through
 * pressurectl, clients that are slow or die. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <grp.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pressure-gen.h"
#include "pressure-private.h"
#include "macro.h"
#include "test-util.h"

static struct test_daemon daemon_;
/* client_trust of a client whose claims count in full */
#define TRUST_FULL 1000
static char conf_path[128];

/* ---- client processes ---- */


/* Start shrinker-client in cgroup dir (NULL: stay here), optionally as nobody, and wait for "ready". */
static int client_start(struct test_child *cl, const char *cgroup_dir, bool as_nobody, const char *const *extra) {
        int p[2];
        const char *bin = getenv("SHRINKER_CLIENT_BIN");
        if (!bin)
                bin = "./shrinker-client";
        if (pipe(p) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                close(p[0]);
                if (cgroup_dir) {
                        char path[700], me[32];
                        snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup_dir);
                        snprintf(me, sizeof(me), "%d", (int) getpid());
                        FILE *f = fopen(path, "we");
                        if (!f || fputs(me, f) < 0 || fclose(f) != 0)
                                _exit(3);
                }
                const char *argv[32];
                int n = 0;
                if (as_nobody) {
                        argv[n++] = "setpriv";
                        argv[n++] = "--reuid=nobody";
                        argv[n++] = "--regid=nogroup";
                        argv[n++] = "--clear-groups";
                }
                argv[n++] = bin;
                argv[n++] = "--socket";
                argv[n++] = daemon_.socket;
                for (int i = 0; extra && extra[i] && n < 30; i++)
                        argv[n++] = extra[i];
                argv[n] = NULL;
                execvp(argv[0], (char *const *) argv);
                _exit(127);
        }
        close(p[1]);
        test_child_adopt(cl, pid, p[0]);
        return 0;
}

/* Start shrinker-client inside a generator's group (the v2 group and, on hybrid systems, the v1 memory
 * group too, before it allocates anything). */
static int client_start_in(struct test_child *cl, const struct pressure_gen *g, const char *const *extra) {
        int p[2];
        const char *bin = getenv("SHRINKER_CLIENT_BIN");
        const char *argv[32] = { bin ? bin : "./shrinker-client", "--socket", daemon_.socket };
        int n = 3;
        for (int i = 0; extra && extra[i] && n < 30; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        if (pipe(p) < 0)
                return -errno;
        pid_t pid = pressure_gen_spawn(g, argv, p[1]);
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return (int) pid;
        }
        test_child_adopt(cl, pid, p[0]);
        return 0;
}

static int client_line(struct test_child *cl, int timeout_ms, char *line, size_t size) {
        return test_lines_next(&cl->lines, timeout_ms, line, size);
}

/* Wait for a line starting with prefix (others are skipped). */
static int client_wait(struct test_child *cl, const char *prefix, int timeout_ms, char *line, size_t size) {
        uint64_t deadline = test_now_ms() + (uint64_t) timeout_ms;
        while (test_now_ms() < deadline) {
                int r = client_line(cl, (int) (deadline - test_now_ms()), line, size);
                if (r < 0)
                        return r;
                if (strncmp(line, prefix, strlen(prefix)) == 0)
                        return 0;
        }
        return -ETIMEDOUT;
}

/* ---- the daemon's view ---- */

static struct json_object *call_json(const char *method, const char *params) {
        struct pressure_client *c;
        char *reply = NULL;
        if (pressure_client_new(daemon_.socket, &c) < 0)
                return NULL;
        pressure_client_set_timeout(c, 20000);
        int r = pressure_client_call_json(c, method, params, &reply, NULL);
        pressure_client_unref(c);
        if (r < 0)
                return NULL;
        struct json_object *o = json_tokener_parse(reply);
        free(reply);
        return o;
}

static struct json_object *jget(struct json_object *o, const char *key) {
        struct json_object *v;
        return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The first shrinker of a pid in ListShrinkers, as a new reference, or NULL. */
static struct json_object *shrinker_of(pid_t pid) {
        struct json_object *all = call_json("io.pressured.ListShrinkers", NULL), *found = NULL;
        struct json_object *list = jget(all, "shrinkers");
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                struct json_object *s = json_object_array_get_idx(list, i);
                if (json_object_get_int(jget(s, "pid")) == pid) {
                        found = json_object_get(s);
                        break;
                }
        }
        json_object_put(all);
        return found;
}

static int64_t shrinker_stat(pid_t pid, const char *key) {
        struct json_object *s = shrinker_of(pid);
        int64_t v = s ? json_object_get_int64(jget(s, key)) : -1;
        json_object_put(s);
        return v;
}

static int run(const char *cmd) {
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A command's standard output, at most size - 1 bytes of it. Returns its exit status. */
static int capture(const char *cmd, char *buf, size_t size) {
        FILE *f = popen(cmd, "re");
        size_t n = 0;
        if (!f)
                return -1;
        while (n + 1 < size) {
                size_t k = fread(buf + n, 1, size - 1 - n, f);
                if (k == 0)
                        break;
                n += k;
        }
        buf[n] = 0;
        int st = pclose(f);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- tests ---- */

/* Real pressure in one cgroup: only MEMCG_AWARE shrinkers in its subtree are asked, naming it. */
static void test_cgroup_pressure_asks_only_its_subtree(void) {
        struct pressure_gen g;
        struct test_child inside = { .lines.fd = -1 }, nested = { .lines.fd = -1 }, plain = { .lines.fd = -1 }, outside = { .lines.fd = -1 };
        char sub_dir[600], calm_dir[600], line[512], want[300];

        char cwd[400];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, cwd, 16u << 20), 0);
        test_cleanup_path(g.v2_dir, true);
        if (g.mem_dir[0])
                test_cleanup_path(g.mem_dir, true);
        test_cleanup_path(g.file, false);
        snprintf(sub_dir, sizeof(sub_dir), "%s/sub", g.v2_dir);
        snprintf(calm_dir, sizeof(calm_dir), "%s-calm", g.v2_dir);
        CU_ASSERT_EQUAL_FATAL(mkdir(sub_dir, 0755), 0);
        test_cleanup_path(sub_dir, true);
        CU_ASSERT_EQUAL_FATAL(mkdir(calm_dir, 0755), 0);
        test_cleanup_path(calm_dir, true);

        static const char *const memcg[] = { "--memcg", "--objects", "2000", NULL };
        static const char *const none[] = { "--objects", "2000", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&inside, g.v2_dir, false, memcg), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&nested, sub_dir, false, memcg), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&plain, g.v2_dir, false, none), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&outside, calm_dir, false, memcg), 0);
        CU_ASSERT_EQUAL(client_wait(&inside, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&nested, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&plain, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&outside, "ready", 10000, line, sizeof(line)), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        /* Both clients in the subtree are asked to scan, for the pressured cgroup. */
        snprintf(want, sizeof(want), "cgroup=%s nr=", g.cgroup);
        CU_ASSERT_EQUAL(client_wait(&inside, "scan ", 60000, line, sizeof(line)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
        CU_ASSERT_EQUAL(client_wait(&nested, "scan ", 60000, line, sizeof(line)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, want));

        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);

        CU_ASSERT(shrinker_stat(inside.pid, "freed") > 0);
        CU_ASSERT(shrinker_stat(nested.pid, "freed") > 0);
        /* Outside the subtree, or not MEMCG_AWARE: never asked. */
        CU_ASSERT_EQUAL(shrinker_stat(outside.pid, "calls"), 0);
        CU_ASSERT_EQUAL(shrinker_stat(outside.pid, "freed"), 0);
        CU_ASSERT_EQUAL(shrinker_stat(plain.pid, "calls"), 0);
        CU_ASSERT_EQUAL(shrinker_stat(plain.pid, "freed"), 0);

        test_child_stop(&inside);
        test_child_stop(&nested);
        test_child_stop(&plain);
        test_child_stop(&outside);
        rmdir(sub_dir);
        rmdir(calm_dir);
        pressure_gen_destroy(&g);
}

/* A client that sleeps in scan misses its deadlines and is quarantined while the others are still asked;
 * once it answers in time again it is back. */
static void test_slow_client_quarantined(void) {
        struct test_child slow = { .lines.fd = -1 }, fast = { .lines.fd = -1 };
        char line[512];
        static const char *const slow_args[] = { "--sleep-in-scan", "1500", "--objects", "1000", NULL };
        static const char *const fast_args[] = { "--objects", "1000", NULL };

        CU_ASSERT_EQUAL_FATAL(client_start(&slow, NULL, false, slow_args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&fast, NULL, false, fast_args), 0);
        CU_ASSERT_EQUAL(client_wait(&slow, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&fast, "ready", 10000, line, sizeof(line)), 0);

        /* Two explicit passes of 10 objects: the slow one times out twice (quarantine_after=2). */
        for (int i = 0; i < 2; i++) {
                struct json_object *r = call_json("io.pressured.Shrink", "{\"nr_to_scan\":10}");
                CU_ASSERT_PTR_NOT_NULL(r);
                json_object_put(r);
        }
        struct json_object *s = shrinker_of(slow.pid);
        CU_ASSERT_STRING_EQUAL(json_object_get_string(jget(s, "state")), "quarantined");
        CU_ASSERT(json_object_get_int64(jget(s, "timeouts")) >= 2);
        json_object_put(s);
        CU_ASSERT_EQUAL(shrinker_stat(fast.pid, "freed"), 20);

        /* While quarantined it is only probed (a count and a scan of one batch); the others are still
         * served in the same pass. Counts answered in time do not end the quarantine while its scans
         * run into their deadlines: it stays quarantined pass after pass (it used to flap). */
        struct json_object *r = NULL;
        for (int i = 0; i < 4; i++) {
                r = call_json("io.pressured.Shrink", "{\"nr_to_scan\":10}");
                CU_ASSERT_EQUAL(shrinker_stat(fast.pid, "freed"), 30 + 10 * i);
                json_object_put(r);
                s = shrinker_of(slow.pid);
                CU_ASSERT_STRING_EQUAL(json_object_get_string(jget(s, "state")), "quarantined");
                json_object_put(s);
        }

        /* It recovers: no more sleeping; the next probe is answered in time. The probe may still meet
         * the backlog of the late requests, so allow a few passes. */
        kill(slow.pid, SIGUSR1);
        bool active = false;
        for (int i = 0; i < 10 && !active; i++) {
                r = call_json("io.pressured.Shrink", "{\"nr_to_scan\":10}");
                json_object_put(r);
                s = shrinker_of(slow.pid);
                active = s && strcmp(json_object_get_string(jget(s, "state")), "active") == 0;
                json_object_put(s);
        }
        CU_ASSERT_TRUE(active);

        test_child_stop(&slow);
        test_child_stop(&fast);
}

/* A client killed in the middle of a scan is removed; the pass completes and the daemon goes on. */
static void test_client_dies_mid_scan(void) {
        struct test_child doomed = { .lines.fd = -1 }, other = { .lines.fd = -1 };
        char line[512];
        static const char *const doomed_args[] = { "--die-in-scan", NULL };
        static const char *const other_args[] = { "--objects", "500", NULL };

        CU_ASSERT_EQUAL_FATAL(client_start(&doomed, NULL, false, doomed_args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&other, NULL, false, other_args), 0);
        CU_ASSERT_EQUAL(client_wait(&doomed, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&other, "ready", 10000, line, sizeof(line)), 0);
        pid_t doomed_pid = doomed.pid;
        struct json_object *before = shrinker_of(doomed_pid);
        CU_ASSERT_PTR_NOT_NULL(before);
        json_object_put(before);

        struct json_object *r = call_json("io.pressured.Shrink", "{\"nr_to_scan\":5}");
        CU_ASSERT_PTR_NOT_NULL(r);
        json_object_put(r);
        CU_ASSERT_EQUAL(client_wait(&doomed, "dying", 10000, line, sizeof(line)), 0);
        waitpid(doomed.pid, NULL, 0);
        test_cleanup_forget_pid(doomed.pid);
        doomed.pid = 0;

        /* The daemon learns of the exit from the connection and the pidfd; ask until it has (bounded). */
        bool gone = false;
        for (uint64_t end = test_now_ms() + 5000; !gone && test_now_ms() < end;) {
                struct json_object *s = shrinker_of(doomed_pid);
                gone = s == NULL;
                json_object_put(s);
        }
        CU_ASSERT_TRUE(gone);
        CU_ASSERT(test_daemon_alive(&daemon_));
        CU_ASSERT_EQUAL(shrinker_stat(other.pid, "freed"), 5);

        test_child_stop(&doomed);
        test_child_stop(&other);
}

/* pressurectl shrink: root may, the owner of a shrinker may, anyone else is refused. */
static void test_shrink_permissions(void) {
        struct test_child mine = { .lines.fd = -1 }, roots = { .lines.fd = -1 };
        char line[512], cmd[1024];
        const char *ctl = getenv("PRESSURECTL_BIN");
        static const char *const args[] = { "--objects", "100", NULL };

        if (!ctl)
                ctl = "./pressurectl";
        /* The daemon's directory must be reachable for another user. */
        chmod(daemon_.dir, 0755);
        CU_ASSERT_EQUAL_FATAL(client_start(&mine, NULL, true, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&roots, NULL, false, args), 0);
        CU_ASSERT_EQUAL(client_wait(&mine, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&roots, "ready", 10000, line, sizeof(line)), 0);

        struct json_object *s = shrinker_of(mine.pid);
        CU_ASSERT_EQUAL_FATAL(json_object_get_int64(jget(s, "uid")), 65534);
        int64_t mine_id = json_object_get_int64(jget(s, "id"));
        json_object_put(s);
        s = shrinker_of(roots.pid);
        int64_t roots_id = json_object_get_int64(jget(s, "id"));
        json_object_put(s);

        const char *as_nobody = "setpriv --reuid=nobody --regid=nogroup --clear-groups";
        /* The owner shrinks its own shrinker. */
        snprintf(cmd, sizeof(cmd), "%s %s --socket %s shrink --shrinker %lld --nr 7 >/dev/null", as_nobody, ctl,
                 daemon_.socket, (long long) mine_id);
        CU_ASSERT_EQUAL(run(cmd), 0);
        CU_ASSERT_EQUAL(shrinker_stat(mine.pid, "freed"), 7);
        /* Someone else's shrinker, or everything: refused, exit 3, nothing scanned. */
        snprintf(cmd, sizeof(cmd), "%s %s --socket %s shrink --shrinker %lld --nr 7 2>/dev/null", as_nobody, ctl,
                 daemon_.socket, (long long) roots_id);
        CU_ASSERT_EQUAL(run(cmd), 3);
        snprintf(cmd, sizeof(cmd), "%s %s --socket %s shrink --all 2>/dev/null", as_nobody, ctl, daemon_.socket);
        CU_ASSERT_EQUAL(run(cmd), 3);
        CU_ASSERT_EQUAL(shrinker_stat(roots.pid, "freed"), 0);
        /* Root may shrink anyone's. */
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrink --shrinker %lld --nr 3 >/dev/null", ctl, daemon_.socket,
                 (long long) mine_id);
        CU_ASSERT_EQUAL(run(cmd), 0);
        CU_ASSERT_EQUAL(shrinker_stat(mine.pid, "freed"), 10);

        /* pressurectl shrinkers shows both, with their owners' pids. */
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrinkers | grep -q ' %d '", ctl, daemon_.socket, (int) mine.pid);
        CU_ASSERT_EQUAL(run(cmd), 0);

        /* A dry run counts and frees nothing: roots' shrinker holds its 100, mine its 90. */
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrink --dry-run --json >%s/dry.json", ctl, daemon_.socket, daemon_.dir);
        CU_ASSERT_EQUAL(run(cmd), 0);
        char path[512];
        snprintf(path, sizeof(path), "%s/dry.json", daemon_.dir);
        struct json_object *dry = json_object_from_file(path), *results = jget(dry, "results");
        unlink(path); /* the daemon's directory is removed only when empty */
        int64_t counted = 0, freed = 0;
        for (size_t i = 0; results && i < json_object_array_length(results); i++) {
                counted += json_object_get_int64(jget(json_object_array_get_idx(results, i), "count"));
                freed += json_object_get_int64(jget(json_object_array_get_idx(results, i), "freed"));
        }
        CU_ASSERT_EQUAL(counted, 190);
        CU_ASSERT_EQUAL(freed, 0);
        json_object_put(dry);
        CU_ASSERT_EQUAL(shrinker_stat(roots.pid, "freed"), 0);
        CU_ASSERT_EQUAL(shrinker_stat(mine.pid, "freed"), 10);
        /* And what it counted shows in COUNTED/NODE, where a shrinker never scanned showed "-". The dry
         * run's own table has no FREED column (its header was "-"). */
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrinkers | grep -E '^[0-9]+ .* %d .* 0:100 '", ctl, daemon_.socket,
                 (int) roots.pid);
        CU_ASSERT_EQUAL(run(cmd), 0);
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrink --dry-run | head -1 | grep -qE '^ID +NAME +NODE +CGROUP +COUNTED +NOTE$'",
                 ctl, daemon_.socket);
        CU_ASSERT_EQUAL(run(cmd), 0);
        /* As anyone else: refused like any other shrink of everything. */
        snprintf(cmd, sizeof(cmd), "setpriv --reuid=nobody --regid=nogroup --clear-groups %s --socket %s shrink --dry-run 2>/dev/null",
                 ctl, daemon_.socket);
        CU_ASSERT_EQUAL(run(cmd), 3);

        test_child_stop(&mine);
        test_child_stop(&roots);
}

/* A bad answer is refused and counted; it changes nothing. */
static void test_bad_answers(void) {
        struct test_child c1 = { .lines.fd = -1 };
        char line[512];
        static const char *const args[] = { "--objects", "100", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&c1, NULL, false, args), 0);
        CU_ASSERT_EQUAL(client_wait(&c1, "ready", 10000, line, sizeof(line)), 0);

        /* This process is not the client: its answers are refused whatever the token. */
        struct pressure_client *c;
        char *reply = NULL, *error = NULL;
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.Answer", "{\"token\":\"00\",\"request\":1,\"freed\":1}",
                                                  &reply, &error),
                        -EPERM);
        free(error);
        error = NULL;
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.Serve", "{\"shrinkers\":[]}", &reply, &error), -EINVAL);
        free(error);
        error = NULL;
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.Serve", "{\"shrinkers\":[{\"name\":\"x\",\"batch\":0}]}",
                                                  &reply, &error),
                        -EINVAL);
        free(error);
        error = NULL;
        CU_ASSERT_EQUAL(pressure_client_call_json(c, "io.pressured.Shrink", "{\"shrinker\":999999}", &reply, &error),
                        -ENOENT);
        free(error);
        pressure_client_unref(c);
        CU_ASSERT_EQUAL(shrinker_stat(c1.pid, "freed"), 0);
        test_child_stop(&c1);
}

static uint64_t resident_of(pid_t pid) {
        char path[64];
        unsigned long long size, resident = 0;
        snprintf(path, sizeof(path), "/proc/%d/statm", (int) pid);
        FILE *f = fopen(path, "re");
        if (f) {
                if (fscanf(f, "%llu %llu", &size, &resident) != 2)
                        resident = 0;
                fclose(f);
        }
        return resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

/* Shrink every object of the client's one shrinker; returns its RSS before. */
static uint64_t shrink_all_of(struct test_child *cl) {
        char params[64], line[512];
        uint64_t before = resident_of(cl->pid);
        snprintf(params, sizeof(params), "{\"shrinker\":%lld}", (long long) shrinker_stat(cl->pid, "id"));
        struct json_object *r = call_json("io.pressured.Shrink", params);
        CU_ASSERT_PTR_NOT_NULL(r);
        json_object_put(r);
        /* Its last scan line ends with "left=0". */
        line[0] = 0;
        for (uint64_t end = test_now_ms() + 10000; test_now_ms() < end;)
                if (client_line(cl, (int) (end - test_now_ms()), line, sizeof(line)) < 0 || strstr(line, " left=0"))
                        break;
        CU_ASSERT_PTR_NOT_NULL(strstr(line, " left=0"));
        return before;
}

/* Freed objects leave holes in glibc's heap (each is followed by a small object that stays): only
 * trimming gives their pages back. The library trims after scans by default; with the release hook set
 * to nothing, the pages stay. */
static void test_release_gives_memory_back(void) {
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer's allocator replaces glibc's: malloc_trim() has nothing to trim. */
        printf("skipped under AddressSanitizer ");
        return;
#endif
        struct test_child c1 = { .lines.fd = -1 }, c2 = { .lines.fd = -1 };
        char line[512];
        static const char *const trims[] = { "--objects", "2000", "--size", "16384", "--pin", NULL };
        static const char *const keeps[] = { "--objects", "2000", "--size", "16384", "--pin", "--no-release", NULL };
        const uint64_t cache = 2000 * 16384;

        CU_ASSERT_EQUAL_FATAL(client_start(&c1, NULL, false, trims), 0);
        CU_ASSERT_EQUAL(client_wait(&c1, "ready", 10000, line, sizeof(line)), 0);
        uint64_t before = shrink_all_of(&c1);
        uint64_t after = resident_of(c1.pid);
        for (uint64_t end = test_now_ms() + 10000; after + cache / 2 > before && test_now_ms() < end;)
                after = resident_of(c1.pid); /* the trim runs once the answers are out */
        CU_ASSERT(after + cache / 2 <= before);
        /* The daemon saw it too: it measures the client's resident memory around the round (once, a
         * moment after it: a coarser figure than the one above). */
        int64_t released = 0;
        for (uint64_t end = test_now_ms() + 10000; released < (int64_t) (cache / 4) && test_now_ms() < end;)
                released = shrinker_stat(c1.pid, "client_released_bytes");
        CU_ASSERT(released >= (int64_t) (cache / 4));
        CU_ASSERT(shrinker_stat(c1.pid, "client_claimed_bytes") >= (int64_t) (cache / 2));
        test_child_stop(&c1);

        CU_ASSERT_EQUAL_FATAL(client_start(&c2, NULL, false, keeps), 0);
        CU_ASSERT_EQUAL(client_wait(&c2, "ready", 10000, line, sizeof(line)), 0);
        before = shrink_all_of(&c2);
        CU_ASSERT(resident_of(c2.pid) + cache / 2 > before);
        test_child_stop(&c2);
}

/* A client alone in a cgroup of its own is measured by the cgroup's memory, one that shares its cgroup by
 * its resident memory; either way what it gave back shows. */
static void test_release_measured_by_own_cgroup(void) {
#if defined(__SANITIZE_ADDRESS__)
        printf("skipped under AddressSanitizer ");
        return;
#endif
        struct test_child c1 = { .lines.fd = -1 };
        struct pressure_gen g;
        char cwd[400], line[512];
        static const char *const args[] = { "--objects", "2000", "--size", "16384", "--pin", NULL };
        const uint64_t cache = 2000 * 16384;

        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, cwd, 512ULL << 20), 0);
        test_cleanup_path(g.v2_dir, true);
        if (g.mem_dir[0])
                test_cleanup_path(g.mem_dir, true);
        CU_ASSERT_EQUAL_FATAL(client_start_in(&c1, &g, args), 0);
        CU_ASSERT_EQUAL(client_wait(&c1, "ready", 10000, line, sizeof(line)), 0);
        struct json_object *info = shrinker_of(c1.pid);
        CU_ASSERT_STRING_EQUAL(json_object_get_string(jget(info, "client_measured")), "cgroup");
        json_object_put(info);

        (void) shrink_all_of(&c1);
        int64_t released = 0;
        for (uint64_t end = test_now_ms() + 10000; released < (int64_t) (cache / 4) && test_now_ms() < end;)
                released = shrinker_stat(c1.pid, "client_released_bytes");
        CU_ASSERT(released >= (int64_t) (cache / 4));
        test_child_stop(&c1);
        pressure_gen_destroy(&g);

        /* In this test's own cgroup, beside the test itself: its resident memory. */
        CU_ASSERT_EQUAL_FATAL(client_start(&c1, NULL, false, args), 0);
        CU_ASSERT_EQUAL(client_wait(&c1, "ready", 10000, line, sizeof(line)), 0);
        info = shrinker_of(c1.pid);
        CU_ASSERT_STRING_EQUAL(json_object_get_string(jget(info, "client_measured")), "resident");
        json_object_put(info);
        test_child_stop(&c1);
}

/* The daemon restarts: the client (its library, on its own thread here) reconnects and registers again. */
static void test_client_survives_restart(void) {
        struct test_child c1 = { .lines.fd = -1 };
        char line[512];
        static const char *const args[] = { "--thread", "--objects", "100", NULL };

        CU_ASSERT_EQUAL_FATAL(client_start(&c1, NULL, false, args), 0);
        CU_ASSERT_EQUAL(client_wait(&c1, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT(shrinker_stat(c1.pid, "id") > 0);

        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        const char *const dargs[] = { "--config", conf_path, NULL };
        CU_ASSERT_EQUAL_FATAL(test_daemon_restart(&daemon_, dargs), 0);

        /* The library retries (0.1 s, doubling up to 2 s): wait until the new daemon lists it (bounded). */
        int64_t id = -1;
        for (uint64_t end = test_now_ms() + 10000; id <= 0 && test_now_ms() < end;)
                id = shrinker_stat(c1.pid, "id");
        CU_ASSERT(id > 0);

        /* And it is served: an explicit scan reaches it. */
        struct json_object *r = call_json("io.pressured.Shrink", "{\"nr_to_scan\":4}");
        json_object_put(r);
        CU_ASSERT_EQUAL(shrinker_stat(c1.pid, "freed"), 4);
        CU_ASSERT_EQUAL(client_wait(&c1, "scan ", 10000, line, sizeof(line)), 0);
        test_child_stop(&c1);
}

/* Restart the daemon with a configuration of its own (the file is removed at exit). */
static void daemon_restart_with(const char *name, const char *conf) {
        char path[160];
        snprintf(path, sizeof(path), "%s.%s", conf_path, name);
        FILE *f = fopen(path, "we");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        test_cleanup_path(path, false);
        fputs(conf, f);
        fclose(f);
        const char *const dargs[] = { "--config", path, NULL };
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        CU_ASSERT_EQUAL_FATAL(test_daemon_restart(&daemon_, dargs), 0);
}

/* A generator's group with the limit (its writer not started yet), removed at exit with its file also
 * when the test fails. */
static void group_create_limited(struct pressure_gen *g, uint64_t limit) {
        char cwd[400];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof(cwd)));
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(g, cwd, limit), 0);
        test_cleanup_path(g->v2_dir, true);
        if (g->mem_dir[0])
                test_cleanup_path(g->mem_dir, true);
        test_cleanup_path(g->file, false);
}

/* The same, of 16 MiB. */
static void group_create(struct pressure_gen *g) {
        group_create_limited(g, 16ULL << 20);
}

/* A stopped client delays nobody: under real pressure in one cgroup, with a deadline of 20 s, a client
 * that was SIGSTOPped keeps its one request in flight while the honest client beside it is asked round
 * after round. (With a barrier at the end of each round, the honest one would wait the 20 s.) */
static void test_stopped_client_delays_nobody(void) {
        struct test_child honest = { .lines.fd = -1 }, stopped = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];

        daemon_restart_with("stopped", "hold=1s\nsample_interval=250ms\nround_interval=100ms\nrequest_timeout=20s\n"
                                       "regulate_interval=500ms\n");
        group_create(&g);
        static const char *const args[] = { "--memcg", "--objects", "100000", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&honest, g.v2_dir, false, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&stopped, g.v2_dir, false, args), 0);
        CU_ASSERT_EQUAL(client_wait(&honest, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&stopped, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(kill(stopped.pid, SIGSTOP), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        /* Four rounds' counts for the honest client, each well within the stopped one's deadline. */
        for (int i = 0; i < 4; i++)
                CU_ASSERT_EQUAL(client_wait(&honest, "count ", 15000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(shrinker_stat(stopped.pid, "timeouts"), 0);
        CU_ASSERT(shrinker_stat(honest.pid, "freed") > 0);

        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        kill(stopped.pid, SIGCONT);
        test_child_stop(&honest);
        test_child_stop(&stopped);
        pressure_gen_destroy(&g);
}

/* Read whatever lines a child has written, so that it never blocks on a full pipe. */
static void drain(struct test_child *cl) {
        char line[512];
        while (client_line(cl, 0, line, sizeof(line)) == 0)
                ;
}

/* Hostile clients beside an honest one, all in a cgroup under real pressure: one that claims a huge cache
 * and to free what it keeps, one that answers each scan just before its deadline, a stopped one, and a loop of Serve
 * calls. The liar weighs no more than its memory in the split (else the honest one's share would be
 * nothing), and its claims soon count for little (its memory never falls), so they cannot end the
 * goals: the honest shrinker goes on being asked to scan, and keeps its trust. */
static void test_hostile_clients(void) {
        struct test_child honest = { .lines.fd = -1 }, liar = { .lines.fd = -1 }, edge = { .lines.fd = -1 },
                          stopped = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];

        daemon_restart_with("hostile", "hold=1s\nsample_interval=250ms\nround_interval=100ms\nrequest_timeout=1s\n");
        group_create(&g);
        static const char *const honest_args[] = { "--memcg", "--objects", "100000", NULL };
        static const char *const liar_args[] = { "--memcg", "--objects", "100000", "--lie", NULL };
        static const char *const edge_args[] = { "--memcg", "--objects", "100000", "--sleep-in-scan", "900", NULL };
        static const char *const stopped_args[] = { "--memcg", "--objects", "1000", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&honest, g.v2_dir, false, honest_args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&liar, g.v2_dir, false, liar_args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&edge, g.v2_dir, false, edge_args), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&stopped, g.v2_dir, false, stopped_args), 0);
        struct test_child *all[] = { &honest, &liar, &edge, &stopped };
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                CU_ASSERT_EQUAL(client_wait(all[i], "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(kill(stopped.pid, SIGSTOP), 0);
        pid_t spam = test_serve_flood(daemon_.socket);
        CU_ASSERT_FATAL(spam > 0);
        test_cleanup_pid(spam);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        uint64_t t0 = test_now_ms();
        /* The liar is asked for its share and claims it, round after round; its memory says otherwise. */
        int64_t trust = TRUST_FULL;
        for (uint64_t end = test_now_ms() + 60000; trust >= TRUST_FULL / 4 && test_now_ms() < end;) {
                (void) client_line(&honest, 250, line, sizeof(line)); /* the pause between looks */
                drain(&liar);
                drain(&edge);
                trust = shrinker_stat(liar.pid, "client_trust");
        }
        CU_ASSERT(trust >= 0 && trust < TRUST_FULL / 4);
        printf("(liar distrusted after %.1f s) ", (double) (test_now_ms() - t0) / 1000);
        /* Its claims no longer end the goals, and its weight is what it has resident, not its 1 TiB: the
         * honest shrinker is asked for a real share again (weighed against 1 TiB, a share is an object a
         * goal). */
        drain(&honest); /* what it did before */
        unsigned long long freed = 0;
        for (uint64_t end = test_now_ms() + 30000; freed < 256 && test_now_ms() < end;) {
                const char *p;
                if (client_line(&honest, 250, line, sizeof(line)) == 0 && strncmp(line, "scan ", 5) == 0 &&
                    (p = strstr(line, " freed=")))
                        freed += strtoull(p + 7, NULL, 10);
                drain(&liar);
                drain(&edge);
        }
        CU_ASSERT(freed >= 256);
        printf("(the honest one freed %llu objects after %.1f s) ", freed, (double) (test_now_ms() - t0) / 1000);
#if !defined(__SANITIZE_ADDRESS__)
        /* (AddressSanitizer's allocator keeps freed memory in quarantine: the honest client's RSS would
         * not fall either, and the daemon would rightly trust it as little.) */
        CU_ASSERT(shrinker_stat(honest.pid, "client_trust") >= TRUST_FULL / 2);
#endif
        CU_ASSERT(test_daemon_alive(&daemon_));

        kill(spam, SIGKILL);
        waitpid(spam, NULL, 0);
        test_cleanup_forget_pid(spam);
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        kill(stopped.pid, SIGCONT);
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                test_child_stop(all[i]);
        pressure_gen_destroy(&g);
}

/* A client that counts 2^62 objects of no stated size and claims every scan freed all it was asked: root's
 * Shrink of everything returned never before (and the round went on at 45% of a core after root gave up).
 * Now the job ends at what the client could hold, or the explicit budget at the latest; and a Shrink
 * whose caller leaves ends with it. */
static void test_endless_client(void) {
        struct test_child liar = { .lines.fd = -1 };
        char line[512], params[64];
        static const char *const args[] = { "--endless", NULL };
        unsigned long long id = 0;

        CU_ASSERT_EQUAL_FATAL(client_start(&liar, NULL, false, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&liar, "ready", 10000, line, sizeof(line)), 0);
        struct json_object *sh = shrinker_of(liar.pid);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
        id = (unsigned long long) json_object_get_int64(jget(sh, "id"));
        json_object_put(sh);
        CU_ASSERT_FATAL(id > 0);
        snprintf(params, sizeof(params), "{\"shrinker\":%llu}", id);

        /* The whole of it: a reply comes (call_json gives up after 20 s). */
        struct json_object *r = call_json("io.pressured.Shrink", params);
        CU_ASSERT_PTR_NOT_NULL(r);
        CU_ASSERT_PTR_NOT_NULL(jget(r, "results"));
        json_object_put(r);
        while (client_line(&liar, 0, line, sizeof(line)) == 0)
                ; /* what it printed so far */

        /* The caller leaves while the liar is asked: the requests stop (within the budget's half). */
        int fd = test_connect(daemon_.socket);
        CU_ASSERT_FATAL(fd >= 0);
        char call[128];
        int n = snprintf(call, sizeof(call), "{\"method\":\"io.pressured.Shrink\",\"parameters\":%s}", params);
        CU_ASSERT_FATAL(test_send_raw(fd, call, (size_t) n + 1) >= 0);
        CU_ASSERT_EQUAL(client_wait(&liar, "scan", 10000, line, sizeof(line)), 0);
        close(fd);
        uint64_t end = test_now_ms() + 5000;
        bool quiet = false;
        while (!quiet && test_now_ms() < end)
                quiet = client_line(&liar, 1000, line, sizeof(line)) == -ETIMEDOUT;
        CU_ASSERT_TRUE(quiet);
        CU_ASSERT(test_daemon_alive(&daemon_));
        test_child_stop(&liar);
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        unlink(conf_path);
}

/* Lines of the daemon's log with needle (and then, after it), waited for until there are at least n (bounded). */
static int log_wait_both(const char *needle, const char *then, int n, int timeout_ms) {
        return test_daemon_log_wait(&daemon_, needle, then, n, timeout_ms);
}

/* The regulator: in a group whose stall is over the budget (1 ms/s) but far below low (set to 95% over 10 s here, far past what the generator gives even on a busy machine,
 * and no headroom levels), the shrinker is asked for steps, each at most a quarter of what it counted
 * (scanned within twice that),
 * while the level stays ok; once the group is quiet it is asked nothing. */
static void test_regulator_steps_below_the_levels(void) {
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512], needle[300];

        char metrics_dir[] = "/tmp/pressured-test-metrics-XXXXXX", conf[512];
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(metrics_dir));
        test_cleanup_tree(metrics_dir);
        snprintf(conf, sizeof(conf), "log_level=debug\nheadroom=no\nlow=some 9500ms 10s\nmedium=some 9700ms 10s\n"
                                     "critical=some 9900ms 10s\nregulate_interval=500ms\nrequest_timeout=5s\n"
                                     "metrics_directory=%s\nnode_interval=1s\n", metrics_dir);
        daemon_restart_with("regulate", conf);
        group_create(&g);
        static const char *const args[] = { "--memcg", "--objects", "20000", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&c, g.v2_dir, false, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        /* Three rounds with scans: a count, then scans that add up to at most a quarter of it (and a batch
         * of rounding). */
        unsigned long long count = 0, scanned = 0;
        unsigned rounds = 0;
        for (uint64_t end = test_now_ms() + 60000; rounds < 3 && test_now_ms() < end;) {
                if (client_line(&c, (int) (end - test_now_ms()), line, sizeof(line)) < 0)
                        break;
                const char *p;
                if (strncmp(line, "count ", 6) == 0 && (p = strstr(line, "-> "))) {
                        if (scanned > 0) {
                                rounds++;
                                /* A step is at most a quarter of what it holds; a share may be scanned
                                 * twice over where what is freed is not all credited (its memory did not
                                 * fall: AddressSanitizer keeps what is freed), and a batch rounds up. */
                                CU_ASSERT(scanned <= 2 * (count / 4) + 128);
                        }
                        count = strtoull(p + 3, NULL, 10);
                        scanned = 0;
                } else if (strncmp(line, "scan ", 5) == 0 && (p = strstr(line, " nr=")))
                        scanned += strtoull(p + 4, NULL, 10);
        }
        CU_ASSERT_EQUAL(rounds, 3u);
        snprintf(needle, sizeof(needle), "%s: stall", g.cgroup);
        CU_ASSERT(test_daemon_log_count(&daemon_, needle) >= 1); /* "...over its budget..." */
        /* What it does is there to see: in status SCOPE, in shrinkers, and in the log line of each step. */
        const char *ctl = getenv("PRESSURECTL_BIN");
        char cmd[1024], out[16384];
        snprintf(cmd, sizeof(cmd), "%s --socket %s status %s", ctl ? ctl : "./pressurectl", daemon_.socket, g.cgroup);
        CU_ASSERT_EQUAL(capture(cmd, out, sizeof(out)), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "Regulator:  budget 1.00 ms/s, stall "));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, " steps asked "));
        if (!strstr(out, "Regulator:"))
                printf("\n%s", out);
        snprintf(cmd, sizeof(cmd), "%s --socket %s shrinkers", ctl ? ctl : "./pressurectl", daemon_.socket);
        CU_ASSERT_EQUAL(capture(cmd, out, sizeof(out)), 0);
        snprintf(needle, sizeof(needle), "  %s: budget 1.00 ms/s", g.cgroup);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, needle));
        snprintf(needle, sizeof(needle), "%s (regulation: ", g.cgroup);
        CU_ASSERT(log_wait_both(needle, "claimed to free", 1, 10000) >= 1);
        /* And in the metrics: the scope's budget (the file is rewritten each node_interval). */
        char prom[600], want[700];
        snprintf(prom, sizeof(prom), "%s/pressured.prom", metrics_dir);
        snprintf(want, sizeof(want), "pressured_regulator_budget{scope=\"%s\"} 0.001000", g.cgroup);
        bool seen = false;
        for (uint64_t end = test_now_ms() + 10000; !seen && test_now_ms() < end;) {
                FILE *f = fopen(prom, "re");
                while (f && !seen && fgets(out, sizeof(out), f))
                        seen = strncmp(out, want, strlen(want)) == 0;
                if (f)
                        fclose(f);
                if (!seen)
                        usleep(100 * 1000); /* a file has no event to wait for */
        }
        CU_ASSERT(seen);
        snprintf(needle, sizeof(needle), "%s: memory pressure", g.cgroup);
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, needle), 0); /* the level stayed ok */

        /* Quiet: nobody in the group allocates. Once the regulator has said so and looked three more
         * times, nothing more was asked. */
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        /* Under the budget is not necessarily 0.00 ms/s: the client's own page faults may stall a little. */
        snprintf(needle, sizeof(needle), "%s: stall ", g.cgroup);
        CU_ASSERT(log_wait_both(needle, ", back under its budget after", 1, 30000) >= 1); /* runs end with it */
        /* Three looks to settle (the last step's memory going back to the kernel is one more count of
         * the growth limit), then three more in which nothing may be asked. */
        snprintf(needle, sizeof(needle), "%s: regulation: stall ", g.cgroup);
        static const char under[] = " against 1.00, under, ";
        int n = test_daemon_log_count_both(&daemon_, needle, under);
        CU_ASSERT(log_wait_both(needle, under, n + 3, 30000) >= n + 3);
        while (client_line(&c, 200, line, sizeof(line)) == 0)
                ; /* what was on its way before */
        n = test_daemon_log_count_both(&daemon_, needle, under);
        CU_ASSERT(log_wait_both(needle, under, n + 3, 30000) >= n + 3);
        CU_ASSERT_EQUAL(client_line(&c, 10, line, sizeof(line)), -ETIMEDOUT);
        test_child_stop(&c);
        pressure_gen_destroy(&g);
}

/* A cache regains its room after the stall stops: a cache of 8 MiB that grows back after each scan shares
 * a 32 MiB group with the suite's writer; the regulator cuts it while the writer stalls the group, and once
 * the writer stops, the growth limit lets it back to its whole room ("full" from the client). Awaited, not
 * timed: the time it took and what it was asked to free meanwhile are printed (bench/ measures them). */
static void regulator_gives_room_back(bool limits) {
#if defined(__SANITIZE_ADDRESS__)
        /* Its allocator keeps what is freed in quarantine: a cache that frees and refills grows its
         * memory until the group's limit OOM-kills it (seen in CI: 23 to 36 MiB resident in 32). */
        printf("skipped under AddressSanitizer ");
        return;
#endif
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];
        enum { ROOM = 128 }; /* objects of 64 KiB */

        daemon_restart_with("regain", "log_level=debug\nheadroom=no\nlow=some 9500ms 10s\nmedium=some 9700ms 10s\n"
                                      "critical=some 9900ms 10s\nregulate_interval=500ms\nrequest_timeout=5s\n");
        group_create_limited(&g, 32ULL << 20);
        static const char *const args[] = { "--memcg", "--objects", "128", "--size", "65536", "--grow", "40", "--max", "128", NULL };
        static const char *const args_limits[] = { "--memcg", "--objects", "128", "--size", "65536", "--grow", "40", "--max",
                                                   "128", "--limits", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start_in(&c, &g, limits ? args_limits : args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        /* Cut to half its room or less while the writer stalls the group: by scans, or by the growth
         * limit it is told (then a limit of half its room or less comes). */
        unsigned long long left = ROOM, limit = 0;
        for (uint64_t end = test_now_ms() + 90000; (left > ROOM / 2 || (limits && limit == 0)) && test_now_ms() < end;) {
                const char *p;
                if (client_line(&c, (int) (end - test_now_ms()), line, sizeof(line)) < 0)
                        break;
                if ((strncmp(line, "scan ", 5) == 0 || strncmp(line, "limit ", 6) == 0) && (p = strstr(line, " left=")))
                        left = strtoull(p + 6, NULL, 10);
                if (strncmp(line, "limit ", 6) == 0 && (p = strstr(line, " bytes=")) && strtoull(p + 7, NULL, 10) > 0)
                        limit = strtoull(p + 7, NULL, 10);
        }
        CU_ASSERT_FATAL(left <= ROOM / 2);
        if (limits) {
                fprintf(stderr, "  told a growth limit of %llu bytes (its room: %d)\n", limit, ROOM * 65536);
                CU_ASSERT_FATAL(limit > 0 && limit < (unsigned long long) ROOM * 65536);
        }

        /* The writer stops; the cache grows back to its room. */
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        uint64_t stopped = test_now_ms();
        unsigned long long freed = 0;
        bool full = false;
        unsigned long long raised = 0;
        for (uint64_t end = stopped + 120000; !full && test_now_ms() < end;) {
                const char *p;
                if (client_line(&c, (int) (end - test_now_ms()), line, sizeof(line)) < 0)
                        break;
                full = strncmp(line, "full ", 5) == 0;
                if (strncmp(line, "limit ", 6) == 0 && (p = strstr(line, " bytes=")))
                        raised = strtoull(p + 7, NULL, 10);
                if (strncmp(line, "scan ", 5) == 0 && (p = strstr(line, " freed=")))
                        freed += strtoull(p + 7, NULL, 10);
        }
        fprintf(stderr, "  cut to %llu of %d objects; whole again %.1f s after the writer stopped, %llu objects freed meanwhile\n",
                left, ROOM, (double) (test_now_ms() - stopped) / 1000, freed);
        /* How long it took and what it was asked meanwhile depend on the machine's load (7 to 8.5 s and
         * about one room on a quiet one; 30 s and five rooms in one run of six beside a build and the
         * suite; 118 s and 22 rooms when bursts of stall counted as rises): printed, not asserted. */
        CU_ASSERT(full);
        /* Whole again only if the limit it keeps to rose to its room, or was lifted. */
        if (limits)
                CU_ASSERT(raised == 0 || raised >= (unsigned long long) ROOM * 65536);
        test_child_stop(&c);
        pressure_gen_destroy(&g);
}

static void test_regulator_gives_room_back(void) {
        regulator_gives_room_back(false);
}

/* A cache that grows without end in a limited group where nothing stalls (no file is read): it meets
 * no stall before the OOM killer. With growth limits it is told the room under the group's headroom
 * (its low threshold, 15% of the limit left by default) and stops there, alive; with headroom=no (the
 * control) nothing bounds it and the kernel kills it. */
static void room_under_headroom(bool headroom) {
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];

        daemon_restart_with(headroom ? "room" : "room-off",
                            headroom ? "log_level=debug\nlow=some 9500ms 10s\nmedium=some 9700ms 10s\ncritical=some 9900ms 10s\n"
                                       "regulate_interval=500ms\nrequest_timeout=5s\n"
                                     : "log_level=debug\nheadroom=no\nregulate_interval=500ms\nrequest_timeout=5s\n");
        group_create_limited(&g, 32ULL << 20);
        /* 64 KiB every 10 ms, up to 64 MiB: twice the group's limit. */
        static const char *const args[] = { "--memcg", "--objects", "16", "--size", "65536", "--grow", "10", "--max", "1024",
                                            "--limits", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start_in(&c, &g, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        int r = client_wait(&c, headroom ? "capped " : "full ", 60000, line, sizeof(line));
        if (headroom) {
                CU_ASSERT_EQUAL_FATAL(r, 0);
                unsigned long n = strtoul(line + 7, NULL, 10);
                fprintf(stderr, "  capped at %lu objects of 64 KiB in a 32 MiB group\n", n);
                CU_ASSERT(n > 16 && n * 65536 < (32UL << 20));
                /* ListShrinkers (pressurectl's LIMIT) shows the share it was told. */
                int64_t told = shrinker_stat(c.pid, "limit");
                CU_ASSERT(told > 0 && (uint64_t) told < (32ULL << 20));
                /* Still running, not killed (a zombie's state is Z). */
                char path[64], stat[256];
                snprintf(path, sizeof(path), "/proc/%d/stat", (int) c.pid);
                CU_ASSERT(test_read_text(path, stat, sizeof(stat)) > 0 && strstr(stat, ") Z ") == NULL);
        } else {
                /* Killed before it was full: its stdout ended. */
                CU_ASSERT_EQUAL(r, -EPIPE);
        }
        test_child_stop(&c);
        pressure_gen_destroy(&g);
}

static void test_room_under_headroom(void) {
        room_under_headroom(true);
}

static void test_room_under_headroom_control(void) {
        room_under_headroom(false);
}

/* The same for a cache that takes growth limits: the regulator tells it a limit while the writer stalls
 * the group, and raises or lifts it once the writer stops. */
static void test_regulator_limits_room(void) {
        regulator_gives_room_back(true);
}

/* One owner of what is still wanted: the suite's writer raises its group's level, with a client's cache
 * beside it. Where the regulator follows the group, the level reaches subscribers but its episode starts
 * no reclaim rounds, and the regulator's steps are what the cache is asked; with the regulator off for
 * the group (the control), the episode asks. */
static void level_beside_regulator(bool regulated) {
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512], needle[300];

        daemon_restart_with(regulated ? "owner" : "owner-off",
                            regulated ? "log_level=debug\nheadroom=no\nhold=2s\nrequest_timeout=5s\n"
                                      : "log_level=debug\nheadroom=no\nhold=2s\nrequest_timeout=5s\nregulate_budget=0\n");
        group_create(&g);
        static const char *const args[] = { "--memcg", "--objects", "20000", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&c, g.v2_dir, false, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        if (regulated) {
                /* The regulator follows the group once it has looked at it (its first look only marks). */
                snprintf(needle, sizeof(needle), "%s: regulation: stall ", g.cgroup);
                CU_ASSERT_FATAL(log_wait_both(needle, NULL, 1, 20000) >= 1);
        }
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);

        snprintf(needle, sizeof(needle), "%s: memory pressure ok -> ", g.cgroup);
        CU_ASSERT_FATAL(log_wait_both(needle, NULL, 1, 60000) >= 1);
        char rounds[300];
        snprintf(rounds, sizeof(rounds), "%s: reclaim round ", g.cgroup);
        if (regulated) {
                snprintf(needle, sizeof(needle), "%s: its stall is the regulator's to answer", g.cgroup);
                CU_ASSERT(log_wait_both(needle, NULL, 1, 30000) >= 1);
                snprintf(needle, sizeof(needle), "%s (regulation: ", g.cgroup);
                CU_ASSERT(log_wait_both(needle, "claimed to free", 1, 30000) >= 1);
                /* ...and a few more looks of the regulator while the level stands. */
                snprintf(needle, sizeof(needle), "%s: regulation: stall ", g.cgroup);
                int n = test_daemon_log_count(&daemon_, needle);
                CU_ASSERT(log_wait_both(needle, NULL, n + 8, 30000) >= n + 8);
                CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, rounds), 0);
        } else
                CU_ASSERT(log_wait_both(rounds, NULL, 1, 30000) >= 1);
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        test_child_stop(&c);
        pressure_gen_destroy(&g);
}

static void test_level_beside_regulator(void) {
        level_beside_regulator(false);
        level_beside_regulator(true);
}

/* A group's memory usage (v1 memory.usage_in_bytes on hybrid systems, v2 memory.current). */
static uint64_t group_usage(const struct pressure_gen *g) {
        char path[700];
        uint64_t v = 0;
        bool v1 = g->mem_dir[0] && !streq(g->mem_dir, g->v2_dir);
        snprintf(path, sizeof(path), "%s/%s", v1 ? g->mem_dir : g->v2_dir, v1 ? "memory.usage_in_bytes" : "memory.current");
        FILE *f = fopen(path, "re");
        if (f && fscanf(f, "%" SCNu64, &v) != 1)
                v = 0;
        if (f)
                fclose(f);
        return v;
}

/* some avg10 of a group's memory.pressure, as the kernel shows it. */
static double group_some_avg10(const struct pressure_gen *g) {
        char path[700], line[256];
        double v = -1;
        snprintf(path, sizeof(path), "%s/memory.pressure", g->v2_dir);
        FILE *f = fopen(path, "re");
        if (f && fgets(line, sizeof(line), f))
                (void) sscanf(line, "some avg10=%lf", &v);
        if (f)
                fclose(f);
        return v;
}

/* A full ancestor does not make its children's stalls its own. /P (64 MiB) holds /P/a, a writer
 * thrashing inside its own 4 MiB limit, and /P/b, a cache of 55 MiB: /P is above 90% of its limit but
 * its limit never reclaims (its limit events do not grow). /P's stall is a's, and the regulator asks b's
 * cache nothing for it. Before, "usage within a tenth of the limit" made /P's stall its own, and b's
 * cache was asked for step after step. */
static void test_full_ancestor_asks_nothing(void) {
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen p, a, b;
        char line[512], needle[300];

#ifdef __SANITIZE_ADDRESS__
        /* AddressSanitizer's redzones and quarantine make b's 55 MiB cache outgrow /P's 64 MiB: the plain
         * build runs this. */
        fprintf(stderr, "(skipped under AddressSanitizer) ");
        return;
#endif
        daemon_restart_with("ancestor", "log_level=debug\nheadroom=no\nlow=some 9500ms 10s\nmedium=some 9700ms 10s\n"
                                        "critical=some 9900ms 10s\nregulate_interval=500ms\nrequest_timeout=5s\n");
        group_create_limited(&p, 64ULL << 20);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create_child(&p, "a", 4ULL << 20, &a), 0);
        test_cleanup_path(a.v2_dir, true);
        if (a.mem_dir[0] && !streq(a.mem_dir, a.v2_dir))
                test_cleanup_path(a.mem_dir, true);
        test_cleanup_path(a.file, false);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create_child(&p, "b", 64ULL << 20, &b), 0);
        test_cleanup_path(b.v2_dir, true);
        if (b.mem_dir[0] && !streq(b.mem_dir, b.v2_dir))
                test_cleanup_path(b.mem_dir, true);

        char over[300];
        snprintf(over, sizeof(over), "%s: stall", p.cgroup);
        int over_before = test_daemon_log_count_both(&daemon_, over, "over its budget");
        static const char *const args[] = { "--memcg", "--objects", "14080", "--size", "4096", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start_in(&c, &b, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&a), 0);
        test_cleanup_pid(a.pid);

        /* /P past 90% of its limit (what "usage within a tenth" took for a binding limit): a's page cache
         * comes and goes under its 4 MiB, so wait for it. */
        uint64_t usage = 0, limit = 64ULL << 20;
        for (uint64_t end = test_now_ms() + 15000; test_now_ms() < end && (usage = group_usage(&p)) < limit - limit / 10;)
                usleep(100 * 1000); /* a counter with no event to wait on */
        CU_ASSERT(usage >= limit - limit / 10);
        /* The regulator looks at /P every 500 ms: wait for ten looks with a's stall in /P's PSI. */
        snprintf(needle, sizeof(needle), "%s: regulation: stall ", p.cgroup);
        int n = test_daemon_log_count(&daemon_, needle);
        CU_ASSERT(test_daemon_log_wait(&daemon_, needle, NULL, n + 10, 30000) >= n + 10);
        double stall = group_some_avg10(&p);
        fprintf(stderr, "  (/P at %.0f%% of its limit: a %" PRIu64 " KiB, b %" PRIu64 " KiB; some avg10 %.1f%%)\n",
                100.0 * (double) group_usage(&p) / (double) limit, group_usage(&a) >> 10, group_usage(&b) >> 10, stall);
        CU_ASSERT(stall >= 1.0); /* a's stall is in /P's PSI */
        unsigned scans = 0;
        while (client_line(&c, 10, line, sizeof(line)) == 0)
                scans += strncmp(line, "scan ", 5) == 0;
        CU_ASSERT_EQUAL(scans, 0u);
        CU_ASSERT_EQUAL(test_daemon_log_count_both(&daemon_, over, "over its budget"), over_before);

        test_cleanup_forget_pid(a.pid);
        pressure_gen_stop(&a);
        test_child_stop(&c);
        pressure_gen_destroy(&b);
        pressure_gen_destroy(&a);
        pressure_gen_destroy(&p);
}

/* Put pid into the group (its v2 directory). Done by the test itself, not by the child after fork():
 * when this returns the kernel has moved it, whatever the machine is busy with. */
static int move_to(const struct pressure_gen *g, pid_t pid) {
        char path[700], me[32];
        snprintf(path, sizeof(path), "%s/cgroup.procs", g->v2_dir);
        snprintf(me, sizeof(me), "%d", (int) pid);
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        int r = fputs(me, f) < 0 ? -EIO : 0;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        return r;
}

static pid_t sleeper(void) {
        pid_t pid = fork();
        if (pid == 0)
                for (;;)
                        pause();
        if (pid > 0)
                test_cleanup_pid(pid);
        return pid;
}

static void child_group(const struct pressure_gen *parent, const char *name, struct pressure_gen *g) {
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create_child(parent, name, 16ULL << 20, g), 0);
        test_cleanup_path(g->v2_dir, true);
        if (g->mem_dir[0] && !streq(g->mem_dir, g->v2_dir))
                test_cleanup_path(g->mem_dir, true);
}

/* The cgroup ListShrinkers shows for the client, once it is want (up to timeout_ms): the daemon looks
 * at a served process's group once a second. */
static bool wait_shrinker_cgroup(pid_t client, const char *want, int timeout_ms) {
        uint64_t end = test_now_ms() + (uint64_t) timeout_ms;
        for (;;) {
                struct json_object *sh = shrinker_of(client);
                bool ok = sh && streq(json_object_get_string(jget(sh, "cgroup")), want);
                json_object_put(sh);
                if (ok || test_now_ms() >= end)
                        return ok;
                usleep(100 * 1000);
        }
}

/* An adapter's client: shrinker-client serving for a sleeping "server" in a group of its own. The
 * shrinkers are placed in the server's cgroup and listed with it, follow it when it moves to another
 * group, and when the server exits, they are unregistered (the daemon ends the call) and the client keeps
 * trying, refused, without crashing. */
static void test_serve_for_another_process(void) {
        struct test_child c = { .lines.fd = -1 };
        struct pressure_gen g, a, b;
        char line[512], arg[32];

        group_create(&g);
        child_group(&g, "a", &a);
        child_group(&g, "b", &b);
        pid_t server = sleeper();
        CU_ASSERT_FATAL(server > 0);
        CU_ASSERT_EQUAL_FATAL(move_to(&a, server), 0);
        snprintf(arg, sizeof(arg), "%d", (int) server);
        const char *const args[] = { "--serve-for", arg, NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&c, NULL, false, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);

        struct json_object *sh = shrinker_of(c.pid);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
        CU_ASSERT_EQUAL(json_object_get_int(jget(sh, "for_pid")), server);
        CU_ASSERT_STRING_EQUAL(json_object_get_string(jget(sh, "cgroup")), a.cgroup);
        json_object_put(sh);

        /* The server moves: the registration follows it. */
        CU_ASSERT_EQUAL_FATAL(move_to(&b, server), 0);
        CU_ASSERT(wait_shrinker_cgroup(c.pid, b.cgroup, 10000));
        char needle[600];
        snprintf(needle, sizeof(needle), "pid %d moved from cgroup %s to %s", (int) server, a.cgroup, b.cgroup);
        CU_ASSERT_EQUAL(test_daemon_log_count(&daemon_, needle), 1);

        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        test_cleanup_forget_pid(server);
        snprintf(needle, sizeof(needle), "pid %d left", (int) c.pid);
        CU_ASSERT(log_wait_both(needle, NULL, 1, 10000) >= 1);
        sh = shrinker_of(c.pid);
        CU_ASSERT_PTR_NULL(sh);
        json_object_put(sh);
        CU_ASSERT_EQUAL(kill(c.pid, 0), 0); /* refused since, and still there */
        test_child_stop(&c);
        pressure_gen_destroy(&b);
        pressure_gen_destroy(&a);
        pressure_gen_destroy(&g);
}

/* A copy of sleep(1), set-user-ID root, in the build directory. */
static int setuid_sleep(char *ret, size_t size) {
        char cwd[400];
        if (!getcwd(cwd, sizeof(cwd)))
                return -errno;
        snprintf(ret, size, "%s/suid-sleep-%d", cwd, (int) getpid());
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "install -o root -m 4755 \"$(command -v sleep)\" %s", ret);
        if (run(cmd) != 0)
                return -EIO;
        test_cleanup_path(ret, false);
        return 0;
}

/* Every moment, not only at Serve: a served process of nobody's that runs a set-user-ID program is no
 * longer nobody's to serve for, and the registration ends; a connection whose process has exited (passed
 * on to, or inherited by, another) cannot register through for_pid. */
static void test_serve_for_checked_while_it_lasts(void) {
        struct test_child c = { .lines.fd = -1 };
        char line[512], arg[32], suid[600], needle[200];

        CU_ASSERT_EQUAL_FATAL(setuid_sleep(suid, sizeof(suid)), 0);
        int go[2];
        CU_ASSERT_EQUAL_FATAL(pipe2(go, O_CLOEXEC), 0);
        pid_t server = fork();
        CU_ASSERT_FATAL(server >= 0);
        if (server == 0) {
                char b;
                if (setresgid(65534, 65534, 65534) < 0 || setgroups(0, NULL) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(3);
                close(go[1]);
                if (read(go[0], &b, 1) != 1)
                        _exit(4);
                execl(suid, suid, "600", (char *) NULL);
                _exit(127);
        }
        close(go[0]);
        test_cleanup_pid(server);
        snprintf(arg, sizeof(arg), "%d", (int) server);
        const char *const args[] = { "--serve-for", arg, NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&c, NULL, true, args), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&c, "ready", 10000, line, sizeof(line)), 0);
        struct json_object *sh = shrinker_of(c.pid);
        CU_ASSERT_PTR_NOT_NULL(sh);
        json_object_put(sh);

        CU_ASSERT_EQUAL(write(go[1], "x", 1), 1);
        close(go[1]);
        snprintf(needle, sizeof(needle), "pid %d, which pid %d serves for, is no longer all uid 65534's", (int) server,
                 (int) c.pid);
        CU_ASSERT(log_wait_both(needle, NULL, 1, 10000) >= 1);
        snprintf(needle, sizeof(needle), "pid %d left", (int) c.pid);
        CU_ASSERT(log_wait_both(needle, NULL, 1, 10000) >= 1);
        sh = shrinker_of(c.pid);
        CU_ASSERT_PTR_NULL(sh);
        json_object_put(sh);
        test_child_stop(&c);
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        test_cleanup_forget_pid(server);

        /* A connects as nobody and exits; B, its child, inherits the connection and serves for itself
         * (nobody's) through it. The peer the kernel vouched for is A, gone. */
        int res[2];
        CU_ASSERT_EQUAL_FATAL(pipe2(res, O_CLOEXEC), 0);
        pid_t a = fork();
        CU_ASSERT_FATAL(a >= 0);
        if (a == 0) {
                close(res[0]);
                if (setresgid(65534, 65534, 65534) < 0 || setgroups(0, NULL) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(3);
                int fd = test_connect(daemon_.socket);
                if (fd < 0)
                        _exit(4);
                pid_t parent = getpid();
                if (fork() != 0)
                        _exit(0);
                while (getppid() == parent)
                        usleep(1000);
                char msg[300], *reply = NULL;
                int n = snprintf(msg, sizeof(msg),
                                 "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":[{\"name\":\"x\"}],"
                                 "\"for_pid\":%d},\"more\":true}",
                                 (int) getpid());
                if (test_send_raw(fd, msg, (size_t) n + 1) < 0 || test_recv_msg(fd, 10000, &reply) < 0)
                        _exit(5);
                char verdict = strstr(reply, "PermissionDenied") ? 'd' : strstr(reply, "registered") ? 'r' : '?';
                (void) !write(res[1], &verdict, 1);
                _exit(0);
        }
        close(res[1]);
        waitpid(a, NULL, 0);
        struct pollfd p = { .fd = res[0], .events = POLLIN };
        char verdict = 0;
        if (poll(&p, 1, 15000) == 1)
                CU_ASSERT_EQUAL(read(res[0], &verdict, 1), 1);
        close(res[0]);
        CU_ASSERT_EQUAL(verdict, 'd');
}

/* ---- value ---- */

/* Two caches of 20 MB in one cgroup under real pressure, their counts saying what one more MiB of each
 * would save (NULL: nothing); the second optionally a client of nobody's (the group is then delegated to
 * nobody). Runs until they freed 4,000 objects between them, or 60 s; returns what each freed. */
static void value_scenario(const char *first_value, const char *second_value, bool second_nobody,
                           int64_t *ret_first, int64_t *ret_second) {
        struct test_child first = { .lines.fd = -1 }, second = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];

        daemon_restart_with("value", "hold=1s\nsample_interval=250ms\nround_interval=100ms\n");
        group_create(&g);
        if (second_nobody) {
                CU_ASSERT_EQUAL_FATAL(chown(g.v2_dir, 65534, 65534), 0); /* delegated to nobody */
                chmod(daemon_.dir, 0755); /* the daemon's directory reachable for nobody */
        }
        const char *a1[] = { "--memcg", "--objects", "20000", first_value ? "--value" : NULL, first_value, NULL };
        const char *a2[] = { "--memcg", "--objects", "20000", second_value ? "--value" : NULL, second_value, NULL };
        CU_ASSERT_EQUAL_FATAL(client_start(&first, g.v2_dir, false, a1), 0);
        CU_ASSERT_EQUAL_FATAL(client_start(&second, g.v2_dir, second_nobody, a2), 0);
        CU_ASSERT_EQUAL(client_wait(&first, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL(client_wait(&second, "ready", 10000, line, sizeof(line)), 0);

        CU_ASSERT_EQUAL_FATAL(pressure_gen_start(&g), 0);
        test_cleanup_pid(g.pid);
        int64_t f1 = 0, f2 = 0;
        for (uint64_t end = test_now_ms() + 60000; f1 + f2 < 4000 && test_now_ms() < end;) {
                (void) client_line(&first, 250, line, sizeof(line));
                drain(&first);
                drain(&second);
                f1 = shrinker_stat(first.pid, "freed");
                f2 = shrinker_stat(second.pid, "freed");
        }
        printf("(freed %lld and %lld objects) ", (long long) f1, (long long) f2);
        *ret_first = f1;
        *ret_second = f2;
        test_cleanup_forget_pid(g.pid);
        pressure_gen_stop(&g);
        test_child_stop(&first);
        test_child_stop(&second);
        pressure_gen_destroy(&g);
}

/* One uid's two caches: the one whose last bytes are worth least gives first, at most half of itself a
 * round, so the other is asked little. */
static void test_value_low_gives_first(void) {
        int64_t low, high;
        value_scenario("1", "1000", false, &low, &high);
        CU_ASSERT(low >= 2000);
        CU_ASSERT(high * 4 <= low);
}

/* Without values, the proportional split as before: two equal caches give alike. */
static void test_value_none_proportional(void) {
        int64_t a, b;
        value_scenario(NULL, NULL, false, &a, &b);
        CU_ASSERT(a > 0 && b > 0);
        CU_ASSERT(a * 4 >= b && b * 4 >= a);
}

/* Another uid's cache claiming the most a value may be gains nothing: it is asked its proportional share,
 * as if it had said nothing. */
static void test_value_other_uid_gains_nothing(void) {
        int64_t root, nobody;
        value_scenario("1", "1e9", true, &root, &nobody);
        CU_ASSERT(root > 0 && nobody > 0);
        CU_ASSERT(nobody * 4 >= root);
}

/* Growth limits follow value: two caches growing into a 64 MiB group where nothing stalls are held under
 * its headroom by the limits they are told; the one whose counts say its last bytes are worth 100 takes
 * limit from the other, a step a look, down to the giver's floor. Returns the limits each was told last,
 * once the one worth less holds a quarter of the other's, or after 40 s. */
static void limits_by_value(const char *low_value, int64_t *ret_low, int64_t *ret_high) {
        struct test_child low = { .lines.fd = -1 }, high = { .lines.fd = -1 };
        struct pressure_gen g;
        char line[512];

        daemon_restart_with("limits-value", "low=some 9500ms 10s\nmedium=some 9700ms 10s\ncritical=some 9900ms 10s\n"
                                            "regulate_interval=500ms\nrequest_timeout=5s\n");
        group_create_limited(&g, 64ULL << 20);
        const char *a1[] = { "--memcg", "--objects", "16", "--size", "65536", "--grow", "20", "--max", "1024", "--limits",
                             "--value", low_value, NULL };
        const char *a2[] = { "--memcg", "--objects", "16", "--size", "65536", "--grow", "20", "--max", "1024", "--limits",
                             "--value", "100", NULL };
        CU_ASSERT_EQUAL_FATAL(client_start_in(&low, &g, a1), 0);
        CU_ASSERT_EQUAL_FATAL(client_start_in(&high, &g, a2), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&low, "ready", 10000, line, sizeof(line)), 0);
        CU_ASSERT_EQUAL_FATAL(client_wait(&high, "ready", 10000, line, sizeof(line)), 0);
        /* Both held under the group's headroom first. */
        CU_ASSERT_EQUAL(client_wait(&low, "capped ", 60000, line, sizeof(line)), 0);
        int64_t l = -1, h = -1;
        for (uint64_t end = test_now_ms() + 40000; test_now_ms() < end;) {
                (void) client_line(&high, 500, line, sizeof(line));
                drain(&low);
                drain(&high);
                l = shrinker_stat(low.pid, "limit");
                h = shrinker_stat(high.pid, "limit");
                if (l > 0 && h > 0 && l * 4 <= h)
                        break;
        }
        printf("(told %lld and %lld bytes) ", (long long) l, (long long) h);
        *ret_low = l;
        *ret_high = h;
        test_child_stop(&low);
        test_child_stop(&high);
        pressure_gen_destroy(&g);
}

static void test_value_limits_move(void) {
        int64_t low, high;
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer keeps what the caches free in quarantine: trimmed to their limits, they still
         * fill the 64 MiB group, and the kernel killed both (CI's ASan pass, told -1 and -1 bytes). */
        printf("skipped under AddressSanitizer ");
        return;
#endif
        limits_by_value("1", &low, &high);
        CU_ASSERT(low > 0 && high > 0);
        CU_ASSERT(low * 4 <= high);
}

/* The control: values alike, so nothing moves; the shares stay by what each holds. */
static void test_value_limits_alike(void) {
        int64_t a, b;
#if defined(__SANITIZE_ADDRESS__)
        printf("skipped under AddressSanitizer (see the case before) ");
        return;
#endif
        limits_by_value("100", &a, &b);
        CU_ASSERT(a > 0 && b > 0);
        CU_ASSERT(a * 2 >= b && b * 2 >= a);
}

int main(void) {
        static const struct test_case cases[] = {
                { "cgroup pressure asks only its subtree", test_cgroup_pressure_asks_only_its_subtree },
                { "a slow client is quarantined and recovers", test_slow_client_quarantined },
                { "a client killed mid-scan is removed", test_client_dies_mid_scan },
                { "shrink permissions", test_shrink_permissions },
                { "bad answers and registrations", test_bad_answers },
                { "freed heap memory goes back to the kernel", test_release_gives_memory_back },
                { "a client alone in its cgroup is measured by the cgroup", test_release_measured_by_own_cgroup },
                { "a client re-registers after a daemon restart", test_client_survives_restart },
                { "a stopped client delays nobody", test_stopped_client_delays_nobody },
                { "the regulator steps below the levels", test_regulator_steps_below_the_levels },
                { "the regulator gives the room back when the stall stops", test_regulator_gives_room_back },
                { "a cache that takes growth limits is told one, and its room back", test_regulator_limits_room },
                { "a cache that grows without stall is held under its group's headroom", test_room_under_headroom },
                { "...and without headroom the kernel kills it (control)", test_room_under_headroom_control },
                { "a full ancestor asks nothing for a child's own stall", test_full_ancestor_asks_nothing },
                { "a level the regulator answers asks no rounds of its own", test_level_beside_regulator },
                { "an adapter serves for another process", test_serve_for_another_process },
                { "serving for another process is checked while it lasts", test_serve_for_checked_while_it_lasts },
                { "hostile clients cannot pause an honest one", test_hostile_clients },
                { "a client that never runs out cannot hold a Shrink", test_endless_client },
                { "value: the cache worth least gives first", test_value_low_gives_first },
                { "value: without values, the proportional split", test_value_none_proportional },
                { "value: another uid's claim gains it nothing", test_value_other_uid_gains_nothing },
                { "value: growth limits move to the cache worth more", test_value_limits_move },
                { "value: ...and stay by what each holds when values are alike", test_value_limits_alike },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = test_need_root_psi();
        if (!skip) {
                snprintf(conf_path, sizeof(conf_path), "/tmp/pressured-shrinkers-%d.conf", (int) getpid());
                FILE *f = fopen(conf_path, "we");
                if (!f)
                        return 1;
                test_cleanup_path(conf_path, false); /* also when a case fails or the run is killed */
                fprintf(f, "hold=1s\nsample_interval=250ms\nround_interval=200ms\nrequest_timeout=300ms\n"
                           "quarantine_after=2\n");
                fclose(f);
                const char *const args[] = { "--config", conf_path, NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        unlink(conf_path);
                        return 1;
                }
        }
        return test_run("shrinkers", cases, skip);
}
