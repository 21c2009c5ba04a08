/* SPDX-License-Identifier: MIT */
#include "pressure-gen.h"
#include "test-util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "test-util.h"

#define CHUNK (1u << 20)
#define FILE_SIZE (256u << 20)

static int write_str(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, s, strlen(s));
        int r = n < 0 ? -errno : 0;
        close(fd);
        return r;
}

static bool file_has_word(const char *path, const char *word) {
        char buf[512];
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                if (strcmp(t, word) == 0)
                        return true;
        return false;
}

int pressure_gen_create(struct pressure_gen *g, const char *dir, uint64_t limit_bytes) {
        struct cgroup_layout l;
        char path[600], limit[32];
        int r;

        memset(g, 0, sizeof(*g));
        r = cgroup_layout_discover(&l);
        if (r < 0)
                return r;
        if (!l.memory_root) {
                cgroup_layout_done(&l);
                return -EOPNOTSUPP;
        }

        /* A name of its own each time: a group that a failed case left behind (a client it could not stop
         * still in it, holding more than the next limit) must not fail every case after it. */
        static unsigned serial;
        snprintf(g->cgroup, sizeof(g->cgroup), "/pressured-test-%d-%u", (int) getpid(), serial++);
        snprintf(g->v2_dir, sizeof(g->v2_dir), "%s%s", l.v2_root, g->cgroup);
        snprintf(g->mem_dir, sizeof(g->mem_dir), "%s%s", l.memory_root, g->cgroup);
        snprintf(g->file, sizeof(g->file), "%s/pressured-gen-%d.dat", dir, (int) getpid());
        snprintf(limit, sizeof(limit), "%llu", (unsigned long long) limit_bytes);

        if (l.memory_v2) {
                /* The memory controller must be on for the root's children. */
                snprintf(path, sizeof(path), "%s/cgroup.controllers", l.v2_root);
                if (!file_has_word(path, "memory")) {
                        cgroup_layout_done(&l);
                        return -EOPNOTSUPP;
                }
                snprintf(path, sizeof(path), "%s/cgroup.subtree_control", l.v2_root);
                (void) write_str(path, "+memory");
        }

        if (mkdir(g->v2_dir, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                goto fail;
        }
        if (!l.memory_v2 && mkdir(g->mem_dir, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                goto fail;
        }
        /* Anonymous mode (no disk to write back to, e.g. in a VM on a read-only root): memory.high
         * throttles a group that keeps touching more than it may hold; v2 only. */
        g->anon = getenv("PRESSURE_GEN_ANON") != NULL;
        if (g->anon && !l.memory_v2) {
                r = -EOPNOTSUPP;
                goto fail;
        }
        snprintf(path, sizeof(path), "%s/%s", g->mem_dir,
                 g->anon ? "memory.high" : l.memory_v2 ? "memory.max" : "memory.limit_in_bytes");
        g->limit = limit_bytes;
        r = write_str(path, limit);
        if (r < 0)
                goto fail;
        if (l.memory_v2)
                g->mem_dir[0] = 0; /* the same directory as v2_dir: nothing extra to join or remove */
        cgroup_layout_done(&l);
        return 0;

fail:
        cgroup_layout_done(&l);
        pressure_gen_destroy(g);
        return r;
}

static void writer(const struct pressure_gen *g) {
        static char buf[CHUNK];
        char path[600];
        char pid[32];

        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        snprintf(path, sizeof(path), "%s/cgroup.procs", g->v2_dir);
        if (write_str(path, pid) < 0)
                _exit(2);
        if (g->mem_dir[0]) {
                snprintf(path, sizeof(path), "%s/cgroup.procs", g->mem_dir);
                if (write_str(path, pid) < 0)
                        _exit(2);
        }

        if (g->anon) {
                size_t size = (size_t) g->limit * 2;
                char *mem = malloc(size);
                if (!mem)
                        _exit(5);
                for (unsigned char v = 0;; v++)
                        for (size_t i = 0; i < size; i += 4096)
                                mem[i] = (char) v;
        }
        memset(buf, 0x5a, sizeof(buf));
        for (;;) {
                int fd = open(g->file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0)
                        _exit(3);
                for (size_t done = 0; done < FILE_SIZE; done += CHUNK)
                        if (write(fd, buf, CHUNK) < 0)
                                _exit(4);
                close(fd);
        }
}

int pressure_gen_start(struct pressure_gen *g) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* Die with the test, whatever happens to it. */
                signal(SIGTERM, SIG_DFL);
                writer(g);
        }
        g->pid = pid;
        return 0;
}

int pressure_gen_unexplained(struct pressure_gen *g) {
        char v2[sizeof(g->v2_dir)];
        if (!g->mem_dir[0] || strcmp(g->mem_dir, g->v2_dir) == 0)
                return -EOPNOTSUPP;
        if (snprintf(v2, sizeof(v2), "%s-elsewhere", g->v2_dir) >= (int) sizeof(v2))
                return -ENAMETOOLONG;
        if (mkdir(v2, 0755) < 0 && errno != EEXIST)
                return -errno;
        (void) rmdir(g->v2_dir);
        snprintf(g->v2_dir, sizeof(g->v2_dir), "%s", v2);
        strncat(g->cgroup, "-elsewhere", sizeof(g->cgroup) - strlen(g->cgroup) - 1);
        return 0;
}

pid_t pressure_gen_spawn(const struct pressure_gen *g, const char *const *argv, int out_fd) {
        pid_t pid = fork();
        if (pid != 0)
                return pid;
        char path[700], me[32];
        snprintf(me, sizeof(me), "%d", (int) getpid());
        const char *dirs[] = { g->v2_dir, g->mem_dir[0] ? g->mem_dir : NULL };
        for (int i = 0; i < 2; i++) {
                if (!dirs[i])
                        continue;
                snprintf(path, sizeof(path), "%s/cgroup.procs", dirs[i]);
                if (write_str(path, me) < 0)
                        _exit(3);
        }
        if (out_fd >= 0)
                dup2(out_fd, STDOUT_FILENO);
        execv(argv[0], (char *const *) argv);
        _exit(127);
}

int pressure_gen_stop(struct pressure_gen *g) {
        int status = 0;
        if (g->pid <= 0)
                return 0;
        kill(g->pid, SIGKILL);
        waitpid(g->pid, &status, 0);
        g->pid = 0;
        /* Exit codes 2..4 mean the writer could not even start. */
        return WIFEXITED(status) ? -EIO : 0;
}

int pressure_gen_create_child(const struct pressure_gen *parent, const char *name, uint64_t limit_bytes,
                              struct pressure_gen *g) {
        char path[700], limit[32];
        *g = (struct pressure_gen){ .anon = parent->anon, .limit = limit_bytes };
        if (snprintf(g->cgroup, sizeof(g->cgroup), "%s/%s", parent->cgroup, name) >= (int) sizeof(g->cgroup) ||
            snprintf(g->v2_dir, sizeof(g->v2_dir), "%s/%s", parent->v2_dir, name) >= (int) sizeof(g->v2_dir) ||
            (parent->mem_dir[0] &&
             snprintf(g->mem_dir, sizeof(g->mem_dir), "%s/%s", parent->mem_dir, name) >= (int) sizeof(g->mem_dir)) ||
            snprintf(g->file, sizeof(g->file), "%s.%s", parent->file, name) >= (int) sizeof(g->file))
                return -ENAMETOOLONG;
        /* Pure v2: the parent hands the memory controller down (it holds no process itself). */
        if (!parent->mem_dir[0]) {
                snprintf(path, sizeof(path), "%s/cgroup.subtree_control", parent->v2_dir);
                (void) write_str(path, "+memory");
        }
        if (mkdir(g->v2_dir, 0755) < 0 || (g->mem_dir[0] && mkdir(g->mem_dir, 0755) < 0)) {
                int r = -errno;
                pressure_gen_destroy(g);
                return r;
        }
        snprintf(path, sizeof(path), "%s/%s", g->mem_dir[0] ? g->mem_dir : g->v2_dir,
                 g->anon ? "memory.high" : g->mem_dir[0] ? "memory.limit_in_bytes" : "memory.max");
        snprintf(limit, sizeof(limit), "%llu", (unsigned long long) limit_bytes);
        int r = write_str(path, limit);
        if (r < 0)
                pressure_gen_destroy(g);
        return r;
}

void pressure_gen_destroy(struct pressure_gen *g) {
        (void) pressure_gen_stop(g);
        if (g->file[0])
                unlink(g->file);
        /* A cgroup whose last process just died can be busy for a moment. */
        for (int i = 0; i < 200; i++) {
                bool busy = false;
                if (g->mem_dir[0] && rmdir(g->mem_dir) < 0 && errno == EBUSY)
                        busy = true;
                if (g->v2_dir[0] && rmdir(g->v2_dir) < 0 && errno == EBUSY)
                        busy = true;
                if (!busy)
                        break;
                usleep(10000);
        }
        g->file[0] = g->mem_dir[0] = g->v2_dir[0] = 0;
}

pid_t pressure_gen_spawn_quiet(const struct pressure_gen *g, const char *const *argv, int out_fd) {
        int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(null, STDERR_FILENO);
        pid_t pid = pressure_gen_spawn(g, argv, out_fd);
        dup2(saved, STDERR_FILENO);
        close(saved);
        close(null);
        return pid;
}

uint64_t pressure_gen_psi_total(const char *path) {
        char buf[512];
        if (test_read_text(path, buf, sizeof(buf)) < 0)
                return 0;
        const char *t = strstr(buf, "total=");
        return t ? strtoull(t + 6, NULL, 10) : 0;
}

static uint64_t pressure_gen_total(const struct pressure_gen *g, const char *resource) {
        char path[700];
        snprintf(path, sizeof(path), "%s/%s.pressure", g->v2_dir, resource);
        return pressure_gen_psi_total(path);
}

uint64_t pressure_gen_some_total(const struct pressure_gen *g) {
        return pressure_gen_total(g, "memory");
}

uint64_t pressure_gen_io_some_total(const struct pressure_gen *g) {
        return pressure_gen_total(g, "io");
}

uint64_t pressure_gen_file_refaults(const struct pressure_gen *g) {
        char path[700], line[256];
        snprintf(path, sizeof(path), "%s/memory.stat", g->mem_dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        uint64_t v = 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "workingset_refault_file ", 24) == 0) {
                        v = strtoull(line + 24, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

int pressure_gen_working_set(const char *path, unsigned mib) {
        static char buf[1 << 20];
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        for (unsigned i = 0; i < mib; i++) {
                memset(buf, 'a' + (int) (i % 26), sizeof(buf));
                if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf)) {
                        close(fd);
                        return -EIO;
                }
        }
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        return 0;
}

int pressure_gen_charge_outside(const char *path) {
        char buf[1 << 16];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        close(fd);
        return 0;
}

int test_pressure_group(struct pressure_gen *g, uint64_t limit_bytes) {
        char cwd[400];
        if (!getcwd(cwd, sizeof(cwd)))
                return -errno;
        int r = pressure_gen_create(g, cwd, limit_bytes);
        if (r < 0)
                return r;
        test_cleanup_path(g->v2_dir, true);
        if (g->mem_dir[0])
                test_cleanup_path(g->mem_dir, true);
        test_cleanup_path(g->file, false);
        return 0;
}

const char *test_quiet_pressure_path(void) {
        static char path[600];
        static bool tried;
        struct cgroup_layout l;
        char dir[500];

        if (tried)
                return path[0] ? path : NULL;
        tried = true;
        if (cgroup_layout_discover(&l) < 0)
                return NULL;
        snprintf(dir, sizeof(dir), "%s/pressured-test-quiet-%d", l.v2_root, (int) getpid());
        cgroup_layout_done(&l);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return NULL;
        test_cleanup_tree(dir);
        snprintf(path, sizeof(path), "%s/memory.pressure", dir);
        if (access(path, R_OK) < 0)
                path[0] = 0;
        return path[0] ? path : NULL;
}
