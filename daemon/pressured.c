/* SPDX-License-Identifier: MIT */
/* pressured: options, configuration, start-up and the main loop. Everything else lives in the manager. */

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "mpsocket.h"
#include "scope_registry.h"

#ifndef PRESSURED_VERSION
#define PRESSURED_VERSION "0"
#endif

/* Exit codes, documented in pressured(8) and the README. */
enum {
        EXIT_USAGE = 2,   /* bad command line or configuration */
        EXIT_NO_PSI = 3,  /* the kernel has no PSI */
        EXIT_STARTUP = 4, /* anything else that stops start-up */
};

static void help(void) {
        printf("Usage: pressured [OPTIONS]\n"
               "\n"
               "Watches memory pressure (PSI) system-wide, per cgroup and per NUMA node and tells\n"
               "subscribers over Varlink when memory gets tight and when it recovers.\n"
               "\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "  -c --config=PATH          Configuration file (default " CONFIG_DEFAULT_PATH ")\n"
               "     --socket=PATH          Listen on PATH (default /run/pressured/io.pressured as root,\n"
               "                            $XDG_RUNTIME_DIR/pressured/io.pressured otherwise)\n"
               "     --cgroup=PATH          Watch this cgroup (v2 path) from start-up; repeatable\n"
               "     --low=SPEC --medium=SPEC --critical=SPEC\n"
               "                            Level thresholds, e.g. \"some 100ms 2s\"\n"
               "     --hold=DURATION        Time pressure must stay below a level before it falls\n"
               "     --sample-interval=DURATION  Sampling period while a scope is above ok\n"
               "     --node-interval=DURATION    Node sampling period while all is ok (0: off)\n"
               "     --max-message-size=BYTES    Largest Varlink message accepted\n"
               "     --sysfs-root=PATH      Read /proc and /sys node files below PATH (testing)\n"
               "     --system-pressure=PATH The system scope's PSI file instead of /proc/pressure/memory\n"
               "                            (testing: an empty group's memory.pressure hears nobody)\n"
               "     --log-level=LEVEL      Log messages up to LEVEL: err, warning, notice, info (default),\n"
               "                            debug\n"
               "  -v --verbose              Log debug messages (--log-level=debug)\n"
               "  -q --quiet                Log warnings and errors only (--log-level=warning)\n");
}

enum {
        ARG_VERSION = 0x100,
        ARG_SOCKET,
        ARG_CGROUP,
        ARG_LOW,
        ARG_MEDIUM,
        ARG_CRITICAL,
        ARG_HOLD,
        ARG_SAMPLE_INTERVAL,
        ARG_NODE_INTERVAL,
        ARG_MAX_MESSAGE_SIZE,
        ARG_SYSFS_ROOT,
        ARG_SYSTEM_PRESSURE,
        ARG_LOG_LEVEL,
};

static const struct option options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        { "config", required_argument, NULL, 'c' },
        { "socket", required_argument, NULL, ARG_SOCKET },
        { "cgroup", required_argument, NULL, ARG_CGROUP },
        { "low", required_argument, NULL, ARG_LOW },
        { "medium", required_argument, NULL, ARG_MEDIUM },
        { "critical", required_argument, NULL, ARG_CRITICAL },
        { "hold", required_argument, NULL, ARG_HOLD },
        { "sample-interval", required_argument, NULL, ARG_SAMPLE_INTERVAL },
        { "node-interval", required_argument, NULL, ARG_NODE_INTERVAL },
        { "max-message-size", required_argument, NULL, ARG_MAX_MESSAGE_SIZE },
        { "sysfs-root", required_argument, NULL, ARG_SYSFS_ROOT },
        { "system-pressure", required_argument, NULL, ARG_SYSTEM_PRESSURE },
        { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
        { "verbose", no_argument, NULL, 'v' },
        { "quiet", no_argument, NULL, 'q' },
        {},
};

static const char *option_key(int c) {
        switch (c) {
        case ARG_SOCKET: return "socket";
        case ARG_CGROUP: return "cgroup";
        case ARG_LOW: return "low";
        case ARG_MEDIUM: return "medium";
        case ARG_CRITICAL: return "critical";
        case ARG_HOLD: return "hold";
        case ARG_SAMPLE_INTERVAL: return "sample_interval";
        case ARG_NODE_INTERVAL: return "node_interval";
        case ARG_MAX_MESSAGE_SIZE: return "max_message_size";
        case ARG_SYSFS_ROOT: return "sysfs_root";
        case ARG_SYSTEM_PRESSURE: return "system_pressure";
        case ARG_LOG_LEVEL: return "log_level";
        case 'v': return "log_level";
        case 'q': return "log_level";
        default: return NULL;
        }
}

/* The configuration's message about a key, as about the option: "--sample-interval must be 10ms..60s". */
static const char *option_message(int c, const char *msg, int r) {
        static char buf[512];
        const char *key = option_key(c), *name = key;
        for (const struct option *o = options; o->name; o++)
                if (o->val == c)
                        name = o->name;
        if (!msg) {
                snprintf(buf, sizeof(buf), "--%s: %s", name, strerror(-r));
                return buf;
        }
        const char *at = strstr(msg, key);
        if (at)
                snprintf(buf, sizeof(buf), "%.*s--%s%s", (int) (at - msg), msg, name, at + strlen(key));
        else
                snprintf(buf, sizeof(buf), "--%s: %s", name, msg);
        return buf;
}

/* The file is read first and the command line applied on top, so options are parsed twice. */
static int parse_argv(int argc, char *argv[], struct config *config, const char **config_path, int apply) {
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "hc:vq", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        if (!apply) {
                                help();
                                exit(EXIT_SUCCESS);
                        }
                        break;
                case ARG_VERSION:
                        if (!apply) {
                                printf("pressured %s\n", PRESSURED_VERSION);
                                exit(EXIT_SUCCESS);
                        }
                        break;
                case 'c':
                        *config_path = optarg;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        /* The first pass already logs as asked: loading the file may have things to say. */
                        if (!apply && (c == 'v' || c == 'q'))
                                log_set_max_level(c == 'v' ? LOG_DEBUG : LOG_WARNING);
                        if (apply) {
                                _cleanup_free_ char *msg = NULL;
                                const char *value = c == 'v' ? "debug" : c == 'q' ? "warning" : optarg;
                                int r = config_set(config, option_key(c), value, &msg);
                                if (r < 0) {
                                        log_error("%s", option_message(c, msg, r));
                                        return r;
                                }
                        }
                }
        }
        if (optind < argc) {
                log_error("Unexpected argument: %s", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

static void config_warning(const char *message, void *userdata) {
        (void) userdata;
        log_warning("%s", message);
}

static int saved_argc;
static char **saved_argv;
static const char *saved_config_path;

/* SIGHUP: the file again, then the command line on top, then the same checks, exactly as at start-up:
 * a reload takes nothing that a start would refuse. */
static int reload_config(struct config *ret, char **ret_error) {
        struct config c;
        const char *path = saved_config_path;
        int r;

        config_init(&c);
        r = config_load(&c, path ? path : CONFIG_DEFAULT_PATH, path != NULL, config_warning, NULL, ret_error);
        if (r >= 0 && parse_argv(saved_argc, saved_argv, &c, &path, 1) < 0) {
                r = -EINVAL;
                if (ret_error)
                        *ret_error = strdup("bad command-line option");
        }
        if (r >= 0)
                r = config_verify(&c, ret_error);
        if (r < 0) {
                config_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

/* What the service manager passes: the Varlink socket (pressured.socket), the memory pressure socket
 * (pressured-memory-pressure.socket, named MPSOCKET_LISTEN_FDNAME), and the connections of the latter it
 * kept for us from the last run (the descriptor store, named MPSOCKET_FDNAME). Returns the Varlink
 * socket, or -EBADF for none. */
static int passed_fds(struct manager *m) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names), listen_fd = -EBADF;

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (manager_adopt_fd(m, fd, names ? names[i] : NULL))
                        continue;
                if (listen_fd < 0)
                        listen_fd = fd;
                else {
                        log_warning("Got more than one socket from the service manager, using the first.");
                        close(fd);
                }
        }
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        return listen_fd;
}

/* The command line over the configuration file over the defaults, verified: 0, or -EINVAL (said why). */
static int load_config(int argc, char *argv[], struct config *config, const char **config_path) {
        _cleanup_free_ char *err = NULL;

        if (parse_argv(argc, argv, config, config_path, 0) < 0)
                return -EINVAL;
        int r = config_load(config, *config_path ? *config_path : CONFIG_DEFAULT_PATH, *config_path != NULL,
                            config_warning, NULL, &err);
        if (r < 0) {
                log_error("Bad configuration: %s", err ? err : strerror(-r));
                return -EINVAL;
        }
        if (parse_argv(argc, argv, config, config_path, 1) < 0)
                return -EINVAL;
        free(err);
        err = NULL;
        if (config_verify(config, &err) < 0) {
                log_error("Bad configuration: %s", err ? err : "invalid");
                return -EINVAL;
        }
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(config_done) struct config config;
        const char *config_path = NULL;
        struct manager *m = NULL;
        int r, code = EXIT_SUCCESS;

        log_open();
        /* What clients make the daemon hold (max_buffered) must bound its resident memory too. glibc raises
         * its mmap threshold to the size of each large block freed, up to 32 MiB: after one client's big
         * buffer was freed, the next ones came from the heap, where freed blocks stay resident (200
         * connections that never read left 36.6 MiB resident with max_buffered at 32). A fixed threshold
         * keeps every block of 128 KiB or more in its own mapping, unmapped when freed and grown in place
         * by mremap(). */
        (void) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        config_init(&config);

        if (load_config(argc, argv, &config, &config_path) < 0)
                return EXIT_USAGE;

        log_set_max_level(config.log_level);
        saved_argc = argc;
        saved_argv = argv;
        saved_config_path = config_path;

        r = manager_new(&config, &m);
        if (r < 0) {
                log_oom();
                return EXIT_STARTUP;
        }
        manager_set_reload(m, reload_config);

        r = manager_start(m, passed_fds(m));
        if (r < 0) {
                code = (r == -ENOENT || r == -EOPNOTSUPP) && !manager_has_psi(m) ? EXIT_NO_PSI : EXIT_STARTUP;
                goto finish;
        }

        (void) sd_notifyf(0, "READY=1\nSTATUS=Watching memory pressure; system level %s.",
                          level_to_string(scope_level(scope_registry_system(m->scopes))));

        r = sd_event_loop(m->event);
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                code = EXIT_STARTUP;
        }
        (void) sd_notify(0, "STOPPING=1");

finish:
        manager_free(m);
        return code;
}
