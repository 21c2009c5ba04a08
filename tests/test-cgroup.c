/* SPDX-License-Identifier: MIT */
/* cgroup.c's memory.stat reading: the parser against recorded files of both hierarchies and bad text,
 * and the real file of a real group with a process that grows its anonymous memory. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "pressure-gen.h"
#include "test-util.h"

static char *fixture(const char *name) {
        char path[512];
        snprintf(path, sizeof(path), "%s/memory-stat/%s", getenv("PRESSURED_FIXTURES"), name);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = calloc(1, 65536);
        size_t n = buf ? fread(buf, 1, 65535, f) : 0;
        (void) n;
        fclose(f);
        return buf;
}

static void test_parse_recorded(void) {
        uint64_t v = 0;
        char *v2 = fixture("v2"), *v1 = fixture("v1");
        CU_ASSERT_PTR_NOT_NULL_FATAL(v2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
        CU_ASSERT_EQUAL(cgroup_parse_anon(v2, true, &v), 0);
        CU_ASSERT_EQUAL(v, 16723968u);
        /* v1: the hierarchical figure (total_rss), not the group's own (rss). */
        CU_ASSERT_EQUAL(cgroup_parse_anon(v1, false, &v), 0);
        CU_ASSERT_EQUAL(v, 33554432u);
        /* The other hierarchy's spelling is not there. */
        CU_ASSERT_EQUAL(cgroup_parse_anon(v2, false, &v), -ENODATA);
        free(v2);
        free(v1);
}

static void test_parse_bad(void) {
        uint64_t v = 7;
        CU_ASSERT_EQUAL(cgroup_parse_anon("", true, &v), -ENODATA);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon_thp 5\nfile 3\n", true, &v), -ENODATA); /* a prefix is not the key */
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon x\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon 12abc\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(cgroup_parse_anon("anon 99999999999999999999999\n", true, &v), -EINVAL);
        CU_ASSERT_EQUAL(v, 7u);
        CU_ASSERT_EQUAL(cgroup_parse_anon("file 1\nanon 42", true, &v), 0); /* no final newline */
        CU_ASSERT_EQUAL(v, 42u);
}

/* A real group: its anonymous memory grows by what a process in it touches. */
static void test_live(void) {
        struct cgroup_layout l = {};
        struct pressure_gen g;
        char cwd[400];
        uint64_t before = 0, after = 0;

        CU_ASSERT_EQUAL_FATAL(cgroup_layout_discover(&l), 0);
        CU_ASSERT_FATAL(getcwd(cwd, sizeof(cwd)) != NULL);
        CU_ASSERT_EQUAL_FATAL(pressure_gen_create(&g, cwd, 256u << 20), 0);
        int p[2];
        CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
        /* This program again: 32 MiB touched, then it waits to be killed. */
        char self[512];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        CU_ASSERT_FATAL(n > 0);
        self[n] = 0;
        const char *const argv[] = { self, "--grow", NULL };
        CU_ASSERT_EQUAL(cgroup_anon(&l, g.cgroup, &before), 0);
        pid_t pid = pressure_gen_spawn(&g, argv, p[1]);
        close(p[1]);
        struct test_lines lines = { .fd = p[0] };
        char line[64] = "";
        CU_ASSERT_EQUAL(test_lines_next(&lines, 20000, line, sizeof(line)), 0);
        CU_ASSERT_STRING_EQUAL(line, "grown");
        CU_ASSERT_EQUAL(cgroup_anon(&l, g.cgroup, &after), 0);
        CU_ASSERT(after >= before + (30u << 20));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        pressure_gen_destroy(&g);
        cgroup_layout_done(&l);
}

int main(int argc, char *argv[]) {
        if (argc == 2 && strcmp(argv[1], "--grow") == 0) {
                size_t size = 32u << 20;
                char *p = malloc(size);
                if (!p)
                        return 1;
                memset(p, 1, size);
                printf("grown\n");
                fflush(stdout);
                pause();
                return p[size - 1];
        }
        static const struct test_case cases[] = {
                { "memory.stat as recorded", test_parse_recorded },
                { "bad memory.stat text", test_parse_bad },
                { "a real group's anonymous memory", test_live },
                {},
        };
        return test_run("cgroup", cases, NULL);
}
