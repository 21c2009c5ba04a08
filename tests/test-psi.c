/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "psi.h"
#include "test-util.h"

static void test_parse_recorded(void) {
        struct psi_stats s;
        CU_ASSERT_EQUAL(psi_read_path(test_fixture("psi/writer-16M"), &s), 0);
        CU_ASSERT_DOUBLE_EQUAL(s.line[PSI_SOME].avg10, 23.46, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(s.line[PSI_SOME].avg60, 5.64, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(s.line[PSI_FULL].avg300, 1.24, 1e-9);
        CU_ASSERT_EQUAL(s.line[PSI_SOME].total, 4074494u);
        CU_ASSERT(s.has_full);

        CU_ASSERT_EQUAL(psi_read_path(test_fixture("psi/idle"), &s), 0);
        CU_ASSERT_EQUAL(s.line[PSI_FULL].total, 0u);

        /* Old kernels had no "full" line for cpu; a memory file without one still parses. */
        CU_ASSERT_EQUAL(psi_read_path(test_fixture("psi/some-only"), &s), 0);
        CU_ASSERT_FALSE(s.has_full);
        CU_ASSERT_EQUAL(s.line[PSI_SOME].total, 31337u);
}

static void test_parse_live(void) {
        struct psi_stats s;
        if (access("/proc/pressure/memory", R_OK) < 0)
                return;
        CU_ASSERT_EQUAL(psi_read_path("/proc/pressure/memory", &s), 0);
        CU_ASSERT(s.has_full);
}

static void test_parse_malformed(void) {
        static const char *const bad[] = {
                "",
                "\n",
                "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", /* no some line */
                "some avg10=0.00 avg60=0.00 avg300=0.00\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=-5\n",
                "some avg10=x avg60=0.00 avg300=0.00 total=0\n",
                "some avg60=0.00 avg10=0.00 avg300=0.00 total=0\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=0 extra=1\n",
                "some avg10=101.00 avg60=0.00 avg300=0.00 total=0\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=12abc\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=99999999999999999999999\n",
                "someavg10=0.00\n",
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull garbage\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct psi_stats s = { .line[PSI_SOME].total = 4242 };
                CU_ASSERT_EQUAL(psi_parse(bad[i], &s), -EINVAL);
                CU_ASSERT_EQUAL(s.line[PSI_SOME].total, 4242u); /* untouched on failure */
        }
        CU_ASSERT_EQUAL(psi_parse(NULL, &(struct psi_stats){}), -EINVAL);
}

static void test_parse_unknown_line_kind(void) {
        struct psi_stats s;
        CU_ASSERT_EQUAL(psi_parse("some avg10=1.00 avg60=0.00 avg300=0.00 total=7\n"
                                  "future avg10=1 whatever\n",
                                  &s),
                        0);
        CU_ASSERT_EQUAL(s.line[PSI_SOME].total, 7u);
}

static void test_window_adjust(void) {
        struct psi_trigger t;

        /* Already a multiple of 2 s: unchanged. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 100000, 2000000 });
        CU_ASSERT_EQUAL(t.window_usec, 2000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 100000u);

        /* 1 s -> 2 s, the stall keeps its 15% share. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 150000, 1000000 });
        CU_ASSERT_EQUAL(t.window_usec, 2000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 300000u);
        CU_ASSERT_EQUAL(t.kind, PSI_SOME);

        /* 500 ms rounds up to the 2 s minimum. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_FULL, 50000, 500000 });
        CU_ASSERT_EQUAL(t.window_usec, 2000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 200000u);

        /* 5 s -> nearest multiple: 6 s (5 s is exactly between 4 and 6; rounds up). */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 500000, 5000000 });
        CU_ASSERT_EQUAL(t.window_usec, 6000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 600000u);

        /* 4.9 s -> 4 s. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 490000, 4900000 });
        CU_ASSERT_EQUAL(t.window_usec, 4000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 400000u);

        /* 10 s is the kernel's maximum and already valid. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 10000000, 10000000 });
        CU_ASSERT_EQUAL(t.window_usec, 10000000u);
        CU_ASSERT_EQUAL(t.stall_usec, 10000000u);

        /* A tiny stall stays at least 1 us. */
        t = psi_trigger_unprivileged((struct psi_trigger){ PSI_SOME, 1, 1000 });
        CU_ASSERT_EQUAL(t.window_usec, 2000000u);
        CU_ASSERT(t.stall_usec >= 1 && t.stall_usec <= t.window_usec);
        CU_ASSERT(psi_trigger_valid(&t));
}

static void test_trigger_valid_and_format(void) {
        char buf[64];
        CU_ASSERT_FALSE(psi_trigger_valid(&(struct psi_trigger){ PSI_SOME, 0, 1000000 }));
        CU_ASSERT_FALSE(psi_trigger_valid(&(struct psi_trigger){ PSI_SOME, 2000, 1000 }));
        CU_ASSERT_FALSE(psi_trigger_valid(&(struct psi_trigger){ PSI_SOME, 1000, 11000000 }));
        CU_ASSERT_TRUE(psi_trigger_valid(&(struct psi_trigger){ PSI_FULL, 1, 1 }));

        CU_ASSERT_EQUAL(psi_trigger_format(&(struct psi_trigger){ PSI_FULL, 400000, 2000000 }, buf, sizeof(buf)), 19);
        CU_ASSERT_STRING_EQUAL(buf, "full 400000 2000000");
        CU_ASSERT_EQUAL(psi_trigger_format(&(struct psi_trigger){ PSI_FULL, 400000, 2000000 }, buf, 8), -ENOBUFS);
}

/* Against the real kernel: a 1 s window is refused here without CAP_SYS_RESOURCE and must be moved to
 * 2 s; with the capability it is accepted as is. Either way a trigger is armed. */
static void test_trigger_open_live(void) {
        struct psi_trigger used;
        bool unpriv = false;

        if (access("/proc/pressure/memory", W_OK) < 0)
                return;
        int fd = psi_trigger_open("/proc/pressure/memory", &(struct psi_trigger){ PSI_SOME, 150000, 1000000 },
                                  &unpriv, &used);
        CU_ASSERT(fd >= 0);
        if (fd < 0)
                return;
        if (unpriv) {
                CU_ASSERT_EQUAL(used.window_usec, 2000000u);
                CU_ASSERT_EQUAL(used.stall_usec, 300000u);
        } else
                CU_ASSERT_EQUAL(used.window_usec, 1000000u);

        /* The same fd reads the figures. */
        struct psi_stats s;
        CU_ASSERT_EQUAL(psi_read_fd(fd, &s), 0);
        close(fd);

        /* A second daemon-wide call starts from the valid form when the first learnt it. */
        fd = psi_trigger_open("/proc/pressure/memory", &(struct psi_trigger){ PSI_SOME, 150000, 1000000 }, &unpriv,
                              &used);
        CU_ASSERT(fd >= 0);
        if (fd >= 0)
                close(fd);

        /* Invalid triggers never reach the kernel. */
        CU_ASSERT_EQUAL(psi_trigger_open("/proc/pressure/memory", &(struct psi_trigger){ PSI_SOME, 0, 1000000 },
                                         &unpriv, &used),
                        -EINVAL);
        /* A missing file is reported as such. */
        CU_ASSERT_EQUAL(psi_trigger_open("/nonexistent/memory.pressure",
                                         &(struct psi_trigger){ PSI_SOME, 1000, 2000000 }, &unpriv, &used),
                        -ENOENT);
}

int main(void) {
        static const struct test_case cases[] = {
                { "parse recorded lines", test_parse_recorded },
                { "parse the live file", test_parse_live },
                { "reject malformed lines", test_parse_malformed },
                { "skip unknown line kinds", test_parse_unknown_line_kind },
                { "window adjustment without CAP_SYS_RESOURCE", test_window_adjust },
                { "trigger limits and format", test_trigger_valid_and_format },
                { "arm a real trigger", test_trigger_open_live },
                {},
        };
        return test_run("psi", cases, NULL);
}
