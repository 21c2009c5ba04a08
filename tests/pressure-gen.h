/* SPDX-License-Identifier: MIT */
#pragma once

/* Real memory pressure for tests and benchmarks: a fresh cgroup with a small memory limit and a process in
 * it that keeps writing a file, so reclaim has to wait for dirty pages to be written back. Works with the
 * memory controller on cgroup v2 (memory.max) and on a v1 hierarchy beside v2 (memory.limit_in_bytes;
 * PSI then comes from the v2 group of the same name). */

#include <stdint.h>
#include <sys/types.h>

struct pressure_gen {
        char cgroup[128];   /* the v2 path, e.g. "/pressured-test-1234" */
        char v2_dir[512];   /* its directory in the v2 hierarchy */
        char mem_dir[512];  /* the memory controller's directory (v1 or the same as v2_dir) */
        char file[512];     /* the file being written */
        pid_t pid;          /* the writer, 0 when stopped */
        int anon;           /* $PRESSURE_GEN_ANON: touch anonymous memory under memory.high instead */
        uint64_t limit;
};

/* Create the cgroup with the limit (memory.high in anonymous mode). `dir` is where the writer's file goes (a disk-backed directory). */
int pressure_gen_create(struct pressure_gen *g, const char *dir, uint64_t limit_bytes);
/* Start the writer inside the cgroup. */
int pressure_gen_start(struct pressure_gen *g);
/* Stop the writer (the cgroup stays). */
int pressure_gen_stop(struct pressure_gen *g);
/* Run argv in the cgroup (v2 group and, on hybrid systems, the v1 memory group), its stdout on out_fd
 * (unless negative). Returns the pid. */
pid_t pressure_gen_spawn(const struct pressure_gen *g, const char *const *argv, int out_fd);

/* pressure_gen_spawn() with the child's stderr on /dev/null (benchmarks keep their tables clean). */
pid_t pressure_gen_spawn_quiet(const struct pressure_gen *g, const char *const *argv, int out_fd);
/* The group's cumulative "some" memory stall in microseconds (memory.pressure total=), 0 if unreadable. */
uint64_t pressure_gen_some_total(const struct pressure_gen *g);
/* The cumulative `some` stall of a PSI file (the first total=, µs), 0 if unreadable. */
uint64_t pressure_gen_psi_total(const char *path);
/* The same of io.pressure: the group's time waiting on IO. */
uint64_t pressure_gen_io_some_total(const struct pressure_gen *g);
/* The group's file pages read again after their eviction (memory.stat workingset_refault_file, v1 or v2), 0
 * if unreadable. */
uint64_t pressure_gen_file_refaults(const struct pressure_gen *g);
/* A file of mib MiB at path, written and then dropped from the page cache, so that whoever reads it
 * next (a process in the group) has it charged to its own cgroup: a file working set. */
int pressure_gen_working_set(const char *path, unsigned mib);

/* For tests: a generator's cgroup in the working directory with the given limit, removed at exit with
 * its file also when the test fails (test-util.h's cleanup). Returns 0 or a negative errno. */
int test_pressure_group(struct pressure_gen *g, uint64_t limit_bytes);

/* Read the whole file from the calling process: its page cache is charged to the caller's cgroup, and
 * a reader in a generator's group finds it cached (a working set charged outside the group). */
int pressure_gen_charge_outside(const char *path);

/* A generator in a child group `name` of parent's with its own limit (its writer starts with
 * pressure_gen_start()); destroy it before the parent. */
int pressure_gen_create_child(const struct pressure_gen *parent, const char *name, uint64_t limit_bytes,
                              struct pressure_gen *g);

/* A stall no limit explains, for tests of what the machine's own shortage does: on a hybrid hierarchy,
 * the writer's v2 group (where its PSI is) takes another name than its v1 memory group (where its limit
 * is), so that no v2 group's limit events account for its stall (limit_stall.h), as no limit would for a
 * machine short of memory. Before pressure_gen_start(). -EOPNOTSUPP on pure v2. */
int pressure_gen_unexplained(struct pressure_gen *g);

/* The memory.pressure of an empty cgroup made for this process (removed at exit): a live PSI file in which
 * nobody ever stalls, for unit tests whose system scope must not hear the host's pressure
 * (scope_registry_set_system_pressure()). NULL when there is no cgroup v2 with PSI. */
const char *test_quiet_pressure_path(void);

/* Stop and remove the cgroup and the file. */
void pressure_gen_destroy(struct pressure_gen *g);
