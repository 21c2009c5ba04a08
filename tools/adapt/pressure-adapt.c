/* SPDX-License-Identifier: MIT */
/* pressure-adapt: a shrinker for a cache that never linked libpressure, registered on its behalf. Count
 * is what the server holds above a floor; a scan lowers the server's own cap by what is asked, so that it
 * evicts by its own policy, and has it give the pages back (redis.c, memcached.c); once nothing has been
 * asked for a while, the cap is raised again step by step to what the server had. Its own setting is
 * restored when the adapter stops. The shrinker is registered for the server's pid (Serve's for_pid):
 * the daemon places it in the server's cgroup and measures the server's memory, not the adapter's. */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "adapter.h"
#include "pressure.h"
#include "resp.h"
#include "time-util.h"

#define UNIT (64u * 1024u) /* bytes per object: servers free in keys or pages, we count in 64 KiB */
#define EXIT_USAGE 2
/* What an answer needs to reach the daemon: the server's work in a scan ends this long before the
 * request's deadline. */
#define ANSWER_MARGIN_USEC (100 * USEC_PER_MSEC)
/* A growth limit comes with no request: the command that sets it ends within this. */
#define LIMIT_COMMAND_USEC (500 * USEC_PER_MSEC)

void say(const struct adapter *a, int verbose, const char *fmt, ...) {
        if (verbose > a->verbose)
                return;
        va_list ap;
        va_start(ap, fmt);
        /* The journal stamps its lines itself; by hand, ours say when. */
        if (!getenv("JOURNAL_STREAM")) {
                struct timespec ts;
                struct tm tm;
                char when[32];
                clock_gettime(CLOCK_REALTIME, &ts);
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&ts.tv_sec, &tm));
                fprintf(stderr, "%s.%03ld ", when, ts.tv_nsec / 1000000);
        }
        fputs("pressure-adapt: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

/* The state file: "<kind> <pid> <own cap>", written while our cap is in force, removed once the server's
 * own is back. Whoever could write or plant it would choose what cap we give the server "back", or have
 * root's write follow a symlink: it lives in a directory only our user may write (checked at start), is
 * written through a new file (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over it, and one we do not own is not
 * read. */
static void state_save(const struct adapter *a) {
        char tmp[PATH_MAX];
        if (!a->state_file || snprintf(tmp, sizeof(tmp), "%s.tmp", a->state_file) >= (int) sizeof(tmp))
                return;
        (void) unlink(tmp); /* a leftover of ours: the directory is ours alone */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
                say(a, 0, "cannot write %s: %s", tmp, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return;
        }
        if (fprintf(f, "%s %d %" PRIu64 "\n", a->ops->kind, (int) a->server_pid, a->original) < 0 ||
            fclose(f) != 0 || rename(tmp, a->state_file) < 0) {
                say(a, 0, "cannot write %s: %s", a->state_file, strerror(errno));
                (void) unlink(tmp);
        }
}

static void state_clear(const struct adapter *a) {
        if (a->state_file && unlink(a->state_file) < 0 && errno != ENOENT)
                say(a, 0, "cannot remove %s: %s", a->state_file, strerror(errno));
}

/* What an earlier adapter left for the same server: its own cap, and ours in force (1), or nothing (0). */
static int state_load(const struct adapter *a, pid_t pid, uint64_t *ret_original) {
        char kind[32];
        int file_pid;
        unsigned long long original;
        struct stat st;
        int fd = a->state_file ? open(a->state_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (fd < 0)
                return 0;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022)) {
                say(a, 0, "%s is not a file of ours that only we may write: not read", a->state_file);
                close(fd);
                return 0;
        }
        FILE *f = fdopen(fd, "r");
        if (!f) {
                close(fd);
                return 0;
        }
        int n = fscanf(f, "%31s %d %llu", kind, &file_pid, &original);
        fclose(f);
        if (n != 3 || strcmp(kind, a->ops->kind) != 0 || file_pid != pid) {
                state_clear(a); /* another server, or this one restarted since: what it has is its own */
                return 0;
        }
        *ret_original = original;
        return 1;
}

/* The state file's directory must be ours (or root's, for root) and writable by nobody else; 0 or -EPERM
 * (said why). */
static int state_dir_check(const char *file) {
        char dir[PATH_MAX];
        struct stat st;
        snprintf(dir, sizeof(dir), "%s", file);
        char *slash = strrchr(dir, '/');
        if (!slash)
                snprintf(dir, sizeof(dir), ".");
        else if (slash == dir)
                dir[1] = 0;
        else
                *slash = 0;
        if (stat(dir, &st) < 0) {
                fprintf(stderr, "pressure-adapt: the state file's directory %s: %s\n", dir, strerror(errno));
                return -errno;
        }
        if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 0022)) {
                fprintf(stderr,
                        "pressure-adapt: the state file's directory %s may be written by other users: anyone could plant "
                        "the cap we give back there. Choose a directory only uid %u can write.\n",
                        dir, (unsigned) geteuid());
                return -EPERM;
        }
        return 0;
}

/* Where the state file goes unless --state-file says: systemd's RuntimeDirectory=, /run/pressure-adapt as
 * root, $XDG_RUNTIME_DIR/pressure-adapt otherwise (both made 0700 if missing), named after the server;
 * NULL when there is none of them (then a killed adapter leaves the server with our cap). */
static const char *state_default(const struct adapter *a, char *buf, size_t size) {
        const char *rt = getenv("RUNTIME_DIRECTORY"); /* systemd's RuntimeDirectory= (the first of them) */
        if (rt && rt[0] == '/')
                return snprintf(buf, size, "%.*s/state", (int) strcspn(rt, ":"), rt) < (int) size ? buf : NULL;
        char dir[PATH_MAX];
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (geteuid() == 0)
                snprintf(dir, sizeof(dir), "/run/pressure-adapt");
        else if (xdg && xdg[0] == '/')
                snprintf(dir, sizeof(dir), "%s/pressure-adapt", xdg);
        else
                return NULL;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return NULL;
        /* One file per server: the address with what is not a plain character as %XX. */
        int n = snprintf(buf, size, "%s/%s@", dir, a->ops->kind);
        for (const unsigned char *p = (const unsigned char *) a->address; *p && n > 0 && (size_t) n + 4 < size; p++)
                n += isalnum(*p) || *p == '.' || *p == '_' || *p == '-' ? snprintf(buf + n, size - (size_t) n, "%c", *p)
                                                                       : snprintf(buf + n, size - (size_t) n, "%%%02X", *p);
        return n > 0 && (size_t) n + 7 < size && snprintf(buf + n, size - (size_t) n, ".state") > 0 ? buf : NULL;
}

int adapter_learn_original(struct adapter *a, pid_t pid, uint64_t cap) {
        /* A server that names another process (root's, say) would have us register for it. */
        int r = peer_is_pid(a->conn.fd, pid);
        if (r < 0) {
                say(a, 0, "%s says it is pid %d, but %s: not serving it", a->address, (int) pid,
                    r == -EPERM ? "that process is not the one at the other end of the connection"
                                : strerror(-r));
                return -EPERM;
        }
        /* A server we see for the first time, or again after a restart (its own setting again): what it
         * has now is its own, unless an adapter before us left word that the cap in force is ours. The
         * same server after a lost connection still has our cap. */
        if (!a->have_original || pid != a->server_pid) {
                uint64_t own;
                bool ours = !a->have_original && state_load(a, pid, &own) > 0;
                a->original = ours ? own : cap;
                a->cap = ours ? cap : 0;
                a->have_original = true;
                if (ours)
                        say(a, 0, "%s: the cap in force (%" PRIu64 ") was set by an adapter before us; its own is %" PRIu64,
                            a->address, cap, own);
        }
        a->server_pid = pid;
        return 0;
}

int proc_rss(pid_t pid, uint64_t *ret) {
        char path[64];
        unsigned long long size, resident;
        snprintf(path, sizeof(path), "/proc/%d/statm", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        int n = fscanf(f, "%llu %llu", &size, &resident);
        fclose(f);
        if (n != 2)
                return -EPROTO;
        *ret = resident * (uint64_t) sysconf(_SC_PAGESIZE);
        return 0;
}

/* The server's own setting back, if ours is in force. */
static void server_restore(struct adapter *a) {
        if (!a->connected || a->cap == 0)
                return;
        if (a->ops->set_cap(a, a->original) >= 0) {
                say(a, 1, "%s: its own cap of %" PRIu64 " again", a->address, a->original);
                a->cap = 0;
                state_clear(a);
        }
}

static uint64_t ceiling_of(const struct adapter *a) {
        return a->ceiling > 0 ? a->ceiling : a->original; /* 0: no limit */
}

/* When the server's work for a request must end: the request's deadline less the answer's time. */
static uint64_t work_deadline(const struct pressure_shrink_control *sc) {
        return sc->deadline > ANSWER_MARGIN_USEC ? sc->deadline - ANSWER_MARGIN_USEC : sc->deadline;
}

static uint64_t count_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct adapter *a = userdata;
        uint64_t used;
        (void) s;
        conn_set_request_deadline(&a->conn, work_deadline(sc));
        int r = a->ops->held(a, &used, NULL);
        conn_set_request_deadline(&a->conn, 0);
        if (r < 0)
                return 0; /* cannot tell now: skip me */
        if (used <= a->floor)
                return PRESSURE_SHRINK_EMPTY;
        uint64_t n = (used - a->floor) / UNIT;
        sc->nr_bytes = n * UNIT;
        return n;
}

/* The scan itself; every command to the server ends by work_deadline() (set by scan_objects). */
static uint64_t scan_server(struct adapter *a, struct pressure_shrink_control *sc) {
        uint64_t used, rss, used_after, rss_after;
        if (a->ops->held(a, &used, &rss) < 0)
                return PRESSURE_SHRINK_STOP;
        uint64_t ask = sc->nr_to_scan > UINT64_MAX / UNIT ? UINT64_MAX : sc->nr_to_scan * UNIT;
        uint64_t target = used > a->floor + ask ? used - ask : a->floor;
        if (a->cap > 0 && a->cap < target)
                target = a->cap; /* never up in a scan */
        if (target >= used)
                return 0;
        if (a->cap == 0)
                state_save(a); /* before the server has our cap */
        if (a->ops->set_cap(a, target) < 0)
                return PRESSURE_SHRINK_STOP;
        a->cap = target;
        a->last_scan_usec = clock_now_usec(CLOCK_MONOTONIC);
        a->ops->give_back(a, used - target, work_deadline(sc));
        if (a->ops->held(a, &used_after, &rss_after) < 0)
                return PRESSURE_SHRINK_STOP;
        uint64_t freed = used > used_after ? used - used_after : 0;
        uint64_t fell = rss > rss_after ? rss - rss_after : 0;
        a->claimed += freed;
        a->measured += fell;
        say(a, 1, "%s: asked %" PRIu64 " bytes, cap %" PRIu64 ": it holds %" PRIu64 " less, RSS %" PRIu64
                  " less (in all %" PRIu64 " claimed, %" PRIu64 " measured)",
            a->address, ask, target, freed, fell, a->claimed, a->measured);
        sc->nr_bytes = freed;
        return (freed + UNIT - 1) / UNIT;
}

static uint64_t scan_objects(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct adapter *a = userdata;
        (void) s;
        conn_set_request_deadline(&a->conn, work_deadline(sc));
        uint64_t n = scan_server(a, sc);
        conn_set_request_deadline(&a->conn, 0);
        return n;
}

/* The daemon's growth limit for our shrinker: the server may hold the floor and that much. A lower one
 * caps it at once (the server evicts as it fills, instead of being asked back a look later); a higher one
 * only bounds the regrowth below, and a lifted one (0) leaves the regrowth to its ceiling. */
static void on_limit(struct pressure_shrinker *s, uint64_t bytes, void *userdata) {
        struct adapter *a = userdata;
        (void) s;
        a->told = bytes > 0 ? (bytes > UINT64_MAX - a->floor ? UINT64_MAX : a->floor + bytes) : 0;
        say(a, 1, "%s: growth limit %" PRIu64 " bytes", a->address, bytes);
        if (a->told == 0 || !a->connected || (a->cap > 0 && a->cap <= a->told))
                return;
        uint64_t ceiling = ceiling_of(a);
        if (ceiling > 0 && a->told >= ceiling)
                return; /* the server's own cap is lower */
        conn_set_request_deadline(&a->conn, clock_now_usec(CLOCK_MONOTONIC) + LIMIT_COMMAND_USEC);
        if (a->cap == 0)
                state_save(a); /* before the server has our cap */
        if (a->ops->set_cap(a, a->told) >= 0)
                a->cap = a->told;
        conn_set_request_deadline(&a->conn, 0);
}

/* Quiet for a while: raise the cap by a tenth of the room to the ceiling per step, and give the server
 * its own setting back once it is reached; never past the daemon's growth limit. */
static void regrow(struct adapter *a) {
        if (a->cap == 0 || !a->connected || clock_now_usec(CLOCK_MONOTONIC) - a->last_scan_usec < a->quiet_usec)
                return;
        uint64_t ceiling = ceiling_of(a);
        uint64_t used;
        if (a->told > 0 && a->cap >= a->told)
                return;
        if (a->ops->held(a, &used, NULL) < 0)
                return;
        uint64_t step = ceiling > a->cap ? (ceiling - a->cap) / 10 : 0;
        if (ceiling == 0) /* no limit of its own: a tenth of what it uses, at least 1 MiB */
                step = used / 10 > (1u << 20) ? used / 10 : (1u << 20);
        uint64_t next = a->cap + step;
        if (a->told > 0 && next >= a->told && (ceiling == 0 || a->told < ceiling)) {
                if (a->ops->set_cap(a, a->told) >= 0)
                        a->cap = a->told;
                return;
        }
        /* Within a twentieth (at least 1 MiB) of the ceiling: the rest of the way at once, rather than a
         * tail of ever smaller steps. */
        uint64_t near = ceiling / 20 > (1u << 20) ? ceiling / 20 : (1u << 20);
        if (ceiling > 0 && (next >= ceiling || ceiling - next < near)) {
                server_restore(a);
                return;
        }
        if (ceiling == 0 && next > used + used / 2) { /* well above what it uses: lift the cap */
                server_restore(a);
                return;
        }
        if (a->ops->set_cap(a, next) >= 0) {
                a->cap = next;
                say(a, 1, "%s: quiet, cap raised to %" PRIu64, a->address, next);
        }
}

/* "serving" once the daemon took the registration (after each return of the daemon too), not when it
 * was only sent: a refused one is said by the library's log line instead. */
static void on_connection(struct pressure_client *client, int connected, void *userdata) {
        struct adapter *a = userdata;
        (void) client;
        if (connected && a->shrinker && pressure_shrinker_get_id(a->shrinker) != 0) {
                say(a, 0, "serving %s (pid %d) as shrinker \"%s\"", a->address, (int) a->server_pid,
                    a->shrinker_name);
                a->serving = true;
        } else if (!connected && a->serving) {
                say(a, 0, "no longer registered with pressured; registering again when it takes us");
                a->serving = false;
        }
}

static void on_library_log(struct pressure_client *client, int priority, const char *message, void *userdata) {
        (void) client;
        (void) priority;
        say(userdata, 0, "%s", message);
}

static char *read_secret(const char *path) {
        char buf[1024];
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *line = fgets(buf, sizeof(buf), f);
        fclose(f);
        if (!line)
                return NULL;
        buf[strcspn(buf, "\r\n")] = 0;
        return strdup(buf);
}

static int parse_bytes(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || s[0] == '-')
                return -EINVAL;
        unsigned long long m = 1;
        if (*end == 'K' || *end == 'k')
                m = 1024ull;
        else if (*end == 'M')
                m = 1024ull * 1024;
        else if (*end == 'G')
                m = 1024ull * 1024 * 1024;
        else if (*end != 0)
                return -EINVAL;
        if (m > 1 && end[1] != 0)
                return -EINVAL;
        if (v > UINT64_MAX / m)
                return -ERANGE;
        *ret = v * m;
        return 0;
}

/* 1..86400 whole seconds, in microseconds. */
static int parse_seconds(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno != 0 || *end || end == s || s[0] == '-' || v == 0 || v > 86400)
                return -EINVAL;
        *ret = v * USEC_PER_SEC;
        return 0;
}

static void usage(FILE *f) {
        fputs("Usage: pressure-adapt [OPTIONS] redis|memcached ADDRESS\n"
              "\n"
              "Registers a shrinker with pressured on behalf of the server at ADDRESS (a Unix socket path,\n"
              "unix:PATH, or HOST:PORT): under memory pressure its cap is lowered by what is asked and it\n"
              "gives the memory back: Redis's maxmemory and MEMORY PURGE, memcached's cache_memlimit and\n"
              "page moves to its global pool.\n"
              "\n"
              "  -h --help                  Show this help\n"
              "     --version               Show the version\n"
              "     --password-file=FILE    Redis: AUTH with the first line of FILE (never on the command line)\n"
              "     --user=NAME             ...as this ACL user\n"
              "     --floor=BYTES           Never lower the cap below this (default 16M)\n"
              "     --ceiling=BYTES         Raise it back no higher (default: Redis's own maxmemory)\n"
              "     --quiet=SECONDS         Raise it back after this long without a scan (default 60)\n"
              "     --socket=PATH           pressured's socket (default: the system's)\n"
              "     --state-file=PATH       Keep the server's own cap here while ours is in force, for an\n"
              "                             adapter started after one that was killed (default:\n"
              "                             $RUNTIME_DIRECTORY/state under systemd, else a file named\n"
              "                             after the server in /run/pressure-adapt as root or\n"
              "                             $XDG_RUNTIME_DIR/pressure-adapt; its directory must be\n"
              "                             writable by this user alone)\n"
              "  -v --verbose               Say what is done (twice: more)\n",
              f);
}

struct options {
        const char *socket_path, *password_file;
};

/* KIND ADDRESS: 0, or -1 (the usage said). */
static int parse_server(int n, char *args[], struct adapter *a) {
        if (n == 2 && strcmp(args[0], "redis") == 0)
                a->ops = &redis_ops;
        else if (n == 2 && strcmp(args[0], "memcached") == 0)
                a->ops = &memcached_ops;
        else {
                usage(stderr);
                return -1;
        }
        a->address = args[1];
        return 0;
}

/* The state file and the password: 0, or the exit status (said why). */
static int prepare(struct adapter *a, const struct options *o, char *default_state, size_t size) {
        if (!a->state_file && !(a->state_file = state_default(a, default_state, size)))
                say(a, 0, "no state file (no $RUNTIME_DIRECTORY nor $XDG_RUNTIME_DIR): if this adapter is killed, "
                          "%s keeps our cap until an adapter is told its own with --ceiling", a->address);
        if (a->state_file && state_dir_check(a->state_file) < 0)
                return EXIT_USAGE;
        if (o->password_file && !a->ops->auth) {
                fprintf(stderr, "pressure-adapt: %s takes no password (its text protocol has no authentication)\n",
                        a->ops->kind);
                return EXIT_USAGE;
        }
        if (a->user && !o->password_file) {
                fprintf(stderr, "pressure-adapt: --user needs --password-file\n");
                return EXIT_USAGE;
        }
        if (o->password_file && !(a->password = read_secret(o->password_file))) {
                fprintf(stderr, "pressure-adapt: cannot read a password from %s: %s\n", o->password_file,
                        strerror(errno ? errno : EINVAL));
                return 1;
        }
        return 0;
}

/* SIGTERM and SIGINT on a descriptor, or -1 (said why): without one they must stay deliverable, or only
 * SIGKILL would stop the adapter and the server's cap would never be restored. */
static int take_signals(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0 || sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
                fprintf(stderr, "pressure-adapt: cannot take SIGTERM and SIGINT on a descriptor: %s\n", strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        signal(SIGPIPE, SIG_IGN);
        return fd;
}

/* The first reach of the server: 0, or the exit status (said why). */
static int first_reach(struct adapter *a, const struct options *o) {
        int r = a->ops->reach(a);
        if (r == -EACCES)
                fprintf(stderr, "pressure-adapt: %s refused the password from %s\n", a->address, o->password_file);
        else if (r < 0 && r != -EPERM) /* -EPERM: said by reach */
                fprintf(stderr, "pressure-adapt: cannot reach %s at %s: %s\n", a->ops->kind, a->address, strerror(-r));
        return r < 0 ? 1 : 0;
}

/* Our client and the shrinker, registered for the server's pid (now, or once the daemon is there). */
static int register_shrinker(struct adapter *a, const char *socket_path, struct pressure_client **ret) {
        struct pressure_client *client;
        struct pressure_shrinker *shrinker = NULL;
        int r = pressure_client_new(socket_path, &client);
        if (r < 0) {
                fprintf(stderr, "pressure-adapt: cannot use pressured's socket: %s\n", strerror(-r));
                return r;
        }
        (void) pressure_client_set_release(client, NULL, NULL); /* nothing of ours to give back */
        (void) pressure_client_set_connection_handler(client, on_connection, a);
        (void) pressure_client_set_log_handler(client, on_library_log, a);
        (void) pressure_client_set_serve_for(client, a->server_pid);
        snprintf(a->shrinker_name, sizeof(a->shrinker_name), "%s:%.50s", a->ops->kind, a->address);
        /* MEMCG_AWARE: all of the server's memory is in its cgroup, so it is asked when that group (or a
         * limited one above it) is short, not only when the whole machine is. */
        r = pressure_shrinker_alloc(client, PRESSURE_SHRINKER_MEMCG_AWARE, a->shrinker_name, &shrinker);
        if (r >= 0)
                r = pressure_shrinker_set_batch(shrinker, 16); /* 1 MiB per scan call */
        if (r >= 0)
                r = pressure_shrinker_set_callbacks(shrinker, count_objects, scan_objects);
        if (r >= 0)
                r = pressure_shrinker_set_userdata(shrinker, a, NULL);
        if (r >= 0)
                r = pressure_shrinker_set_limit_handler(shrinker, on_limit);
        if (r >= 0)
                r = pressure_shrinker_register(shrinker);
        if (r < 0) {
                fprintf(stderr, "pressure-adapt: cannot register the shrinker: %s\n", strerror(-r));
                pressure_shrinker_free(shrinker);
                pressure_client_unref(client);
                return r;
        }
        a->shrinker = shrinker;
        say(a, 1, "registering for %s (pid %d) as shrinker \"%s\"", a->address, a->server_pid, a->shrinker_name);
        *ret = client;
        return 0;
}

/* A tick once a second, for the regrowth and reconnecting: its descriptor, or -1 (said why). */
static int arm_tick(void) {
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        struct itimerspec its = { .it_interval = { .tv_sec = 1 }, .it_value = { .tv_sec = 1 } };
        if (fd < 0 || timerfd_settime(fd, 0, &its, NULL) < 0) {
                /* Without the tick neither regrowth nor reconnecting would ever happen. */
                fprintf(stderr, "pressure-adapt: cannot arm its timer: %s\n", strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

/* Reaching a server that went away again, with a back-off of 2..32 ticks. */
struct reconnect {
        unsigned backoff, wait;
};

/* Once a second: the server still there and the cap regrown, or another try to reach it. 0 to go on,
 * or the exit status when the server may not be adapted any more. */
static int on_tick(struct adapter *a, struct pressure_client *client, struct reconnect *rc) {
        if (a->connected) {
                /* A server that went away is noticed here, not at the next request. */
                if (a->ops->ping(a) >= 0)
                        regrow(a);
                return 0;
        }
        if (rc->wait > 0) {
                rc->wait--;
                return 0;
        }
        pid_t before = a->server_pid;
        int r = a->ops->reach(a);
        if (r == -EPERM || r == -EACCES)
                return 1;
        if (r < 0) {
                rc->backoff = rc->backoff < 32 ? rc->backoff * 2 : 32;
                rc->wait = rc->backoff;
                return 0;
        }
        rc->backoff = 1;
        if (a->server_pid != before) {
                /* A new server: the daemon ended the old one's registration. */
                say(a, 0, "%s is pid %d now; serving it", a->address, a->server_pid);
                (void) pressure_client_set_serve_for(client, a->server_pid);
        }
        return 0;
}

/* One loop: pressured's requests, the signals and the tick, until a signal (0) or a server we may no
 * longer adapt (1). */
static int run(struct adapter *a, struct pressure_client *client, int sig_fd, int tick) {
        struct reconnect rc = { .backoff = 1 };
        for (;;) {
                struct pollfd p[3] = {
                        { .fd = pressure_client_get_fd(client), .events = POLLIN },
                        { .fd = sig_fd, .events = POLLIN },
                        { .fd = tick, .events = POLLIN },
                };
                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        return 1;
                if (p[1].revents)
                        return 0;
                if (p[0].revents)
                        (void) pressure_client_dispatch(client);
                if (p[2].revents) {
                        uint64_t n;
                        (void) !read(tick, &n, sizeof(n));
                        int status = on_tick(a, client, &rc);
                        if (status != 0)
                                return status;
                }
        }
}

/* The command line into a and o: 0 to go on, 1 when done (--help, --version), -1 on a usage error (said). */
static int parse_options(int argc, char *argv[], struct adapter *a, struct options *o) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "password-file", required_argument, NULL, 'P' },
                { "user", required_argument, NULL, 'U' },
                { "floor", required_argument, NULL, 'f' },
                { "ceiling", required_argument, NULL, 'c' },
                { "quiet", required_argument, NULL, 'q' },
                { "socket", required_argument, NULL, 's' },
                { "state-file", required_argument, NULL, 'S' },
                { "verbose", no_argument, NULL, 'v' },
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        usage(stdout);
                        return 1;
                case 'V':
                        puts("pressure-adapt " PRESSURED_VERSION);
                        return 1;
                case 'P':
                        o->password_file = optarg;
                        break;
                case 'U':
                        a->user = optarg;
                        break;
                case 'f':
                case 'c':
                        if (parse_bytes(optarg, c == 'f' ? &a->floor : &a->ceiling) < 0) {
                                fprintf(stderr, "pressure-adapt: --%s takes bytes (with K, M or G): %s\n",
                                        c == 'f' ? "floor" : "ceiling", optarg);
                                return -1;
                        }
                        break;
                case 'q':
                        if (parse_seconds(optarg, &a->quiet_usec) < 0) {
                                fprintf(stderr, "pressure-adapt: --quiet takes 1..86400 seconds: %s\n", optarg);
                                return -1;
                        }
                        break;
                case 's':
                        o->socket_path = optarg;
                        break;
                case 'S':
                        a->state_file = optarg;
                        break;
                case 'v':
                        a->verbose++;
                        break;
                default:
                        usage(stderr);
                        return -1;
                }
        return parse_server(argc - optind, argv + optind, a);
}

int main(int argc, char *argv[]) {
        struct adapter a = { .floor = 16u << 20, .quiet_usec = 60 * 1000000ull, .conn = { .fd = -1 } };
        struct options o = {};
        char default_state[PATH_MAX];
        struct pressure_client *client = NULL;

        int r = parse_options(argc, argv, &a, &o);
        if (r != 0)
                return r > 0 ? 0 : EXIT_USAGE;
        int status = prepare(&a, &o, default_state, sizeof(default_state));
        int sig_fd = status == 0 ? take_signals() : -1;
        if (status == 0 && sig_fd < 0)
                status = 1;
        if (status == 0)
                status = first_reach(&a, &o);
        if (status == 0 && register_shrinker(&a, o.socket_path, &client) < 0)
                status = 1;
        int tick = status == 0 ? arm_tick() : -1;
        if (status == 0 && tick < 0)
                status = 1;
        if (status == 0)
                status = run(&a, client, sig_fd, tick);

        if (client) {
                pressure_shrinker_free(a.shrinker);
                pressure_client_unref(client);
                if (!a.connected && a.cap > 0 && a.ops->reach(&a) < 0)
                        say(&a, 0, "cannot reach %s to give it its own cap of %" PRIu64 " back", a.address, a.original);
                server_restore(&a);
        }
        conn_close(&a.conn);
        if (a.ops && a.ops->done)
                a.ops->done(&a);
        if (tick >= 0)
                close(tick);
        if (sig_fd >= 0)
                close(sig_fd);
        free(a.password);
        return status;
}

