/* SPDX-License-Identifier: MIT */
#ifndef PRESSURE_H
#define PRESSURE_H

/**
 * libpressure: the client library of pressured.
 *
 * Ask how tight memory is (system-wide, per NUMA node, per cgroup) and subscribe to be told when it gets
 * tight and when it recovers. All objects are opaque and reference-counted; functions that can fail return
 * 0 or a negative errno and write their out-parameters only on success.
 *
 * Event-loop integration: pressure_client_get_fd() returns one fd that becomes readable whenever
 * pressure_client_dispatch() has work; callbacks run inside dispatch, on the caller's thread (or on the
 * library's thread after pressure_client_start_thread()). Dispatch never waits: it reads what the
 * sockets hold, sends what they take, and runs the callbacks.
 *
 * The daemon need not be there: a client is made without connecting. Subscriptions and shrinkers are
 * sent to the daemon in the background, and again, by themselves, whenever the daemon comes back after
 * going away (retried after 0.1 s, doubling up to 2 s). pressure_client_set_connection_handler() tells
 * the application when it goes and when everything is registered again. The calls that wait for an
 * answer (pressure_client_get_status()) say so in their names' documentation and have an _async
 * variant; they fail with the connect errno (-ENOENT, -ECONNREFUSED) while the daemon is away.
 *
 * Threads: every function may be called from any thread, at any time, for any object (each client has
 * one internal lock, never held while a callback of the application runs, so a callback may call any
 * function of the library and an application lock held around a library call cannot deadlock against
 * a callback that takes it). Callbacks of one client never run at the same time: one thread dispatches
 * at a time (a second gets -EBUSY). References are atomic. After fork(), the child must not use the
 * parent's clients (their sockets are shared with the parent): it makes its own.
 *
 * ABI: functions are versioned (LIBPRESSURE_x.y nodes) and never removed or changed in a release.
 * Structures the library hands out (pressure_shrink_control) may grow at their end; never allocate or
 * copy one. struct pressure_lru_node and struct pressure_stall are embedded by the application and
 * frozen: their size and fields do not change. docs/abi.md has the rules.
 *
 * Scope names, used wherever a scope is given as a string:
 *   "system"        the whole machine (/proc/pressure/memory)
 *   "node:N"        NUMA node N
 *   "/a/b"          a cgroup, by its cgroup v2 path (as in the "0::" line of /proc/PID/cgroup)
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* pid_t */

#ifdef __cplusplus
extern "C" {
#endif

struct pressure_client;
struct pressure_status;
struct pressure_scope;

enum pressure_level {
        PRESSURE_LEVEL_OK = 0,
        PRESSURE_LEVEL_LOW = 1,
        PRESSURE_LEVEL_MEDIUM = 2,
        PRESSURE_LEVEL_CRITICAL = 3
};

enum pressure_scope_type {
        PRESSURE_SCOPE_SYSTEM = 0,
        PRESSURE_SCOPE_NODE = 1,
        PRESSURE_SCOPE_CGROUP = 2
};

enum pressure_stall_kind {
        PRESSURE_STALL_SOME = 0, /* some tasks stalled on memory */
        PRESSURE_STALL_FULL = 1  /* all non-idle tasks stalled at once */
};

/** One PSI line: percent of wall time stalled over 10, 60 and 300 s; total stall in microseconds. */
struct pressure_stall {
        double avg10;
        double avg60;
        double avg300;
        uint64_t total;
};

/** The library's version, e.g. "1.1.0" (the package version it was built from). Since LIBPRESSURE_0.4. */
const char *pressure_get_version(void);

/** "ok", "low", "medium", "critical"; NULL for an invalid level. */
const char *pressure_level_to_string(enum pressure_level level);

/** Parse a level name. Returns the level or -EINVAL. */
int pressure_level_from_string(const char *s);

/**
 * The socket of pressured by default: $PRESSURED_SOCKET if set; for a user other than root,
 * $XDG_RUNTIME_DIR/pressured/io.pressured if a user's own daemon has it; otherwise the system service's,
 * /run/pressured/io.pressured (both variables read with secure_getenv(): a set-uid program ignores them).
 * Returns a newly allocated string in *ret (free() it), or a negative errno.
 */
int pressure_default_socket_path(char **ret);

/**
 * A client of the pressured at socket_path (NULL: the default). Does not connect: it succeeds whether
 * or not the daemon runs. Returns 0 and the new client in *ret, or a negative errno (-ENOMEM,
 * -ENAMETOOLONG).
 */
int pressure_client_new(const char *socket_path, struct pressure_client **ret);

/**
 * Called from dispatch when the daemon went away (connected = 0: subscriptions wait, shrinker ids are 0)
 * and when every subscription and shrinker of the client is registered with it (connected = 1: the
 * first time, and after every return of the daemon). A subscription the daemon refuses then ends
 * through its end handler. Since LIBPRESSURE_0.4.
 */
typedef void (*pressure_connection_handler_t)(struct pressure_client *client, int connected, void *userdata);

/** Set (NULL: clear) the connection handler. Returns 0. Since LIBPRESSURE_0.4. */
int pressure_client_set_connection_handler(struct pressure_client *client, pressure_connection_handler_t handler,
                                           void *userdata);

/**
 * What the library has to say that no return value carries: the daemon went away (and why), the daemon
 * refused a shrinker. priority is syslog(3)'s (LOG_NOTICE, LOG_WARNING); message is valid during the
 * call. Called from dispatch. Without a handler nothing is logged: the library never writes to stderr.
 * Since LIBPRESSURE_0.4.
 */
typedef void (*pressure_log_handler_t)(struct pressure_client *client, int priority, const char *message,
                                       void *userdata);
int pressure_client_set_log_handler(struct pressure_client *client, pressure_log_handler_t handler, void *userdata);

/** 1 if the connection handler was last told connected, 0 otherwise. Since LIBPRESSURE_0.4. */
int pressure_client_is_connected(struct pressure_client *client);

/** Take a reference. Returns client. */
struct pressure_client *pressure_client_ref(struct pressure_client *client);

/** Drop a reference; the last one closes the connections. Subscriptions and shrinkers with a handle hold
 * a reference to their client. Accepts NULL. Returns NULL. */
struct pressure_client *pressure_client_unref(struct pressure_client *client);

/** The socket path this client is connected to. Valid as long as the client. */
const char *pressure_client_get_socket_path(struct pressure_client *client);

/**
 * Timeout for the calls that wait for an answer (pressure_client_get_status(),
 * pressure_client_subscribe()), in milliseconds. Default 5000; 0 or less waits forever.
 */
void pressure_client_set_timeout(struct pressure_client *client, int timeout_ms);

/**
 * Ask for the current state of the system, every NUMA node and every cgroup the daemon watches. Waits
 * (on a connection of its own, without blocking dispatch on other threads) for at most the client's
 * timeout. Returns 0 and a status in *ret (release it with pressure_status_unref()), -ENOENT or
 * -ECONNREFUSED when no daemon is there, -ETIMEDOUT, -ECONNRESET when the daemon went away, -EPROTO on
 * a bad reply.
 */
int pressure_client_get_status(struct pressure_client *client, struct pressure_status **ret);

/** The answer of pressure_client_get_status_async(): error 0 and a status (borrowed: take a reference
 * to keep it), or a negative errno as pressure_client_get_status() returns it and NULL. */
typedef void (*pressure_status_handler_t)(struct pressure_client *client, int error,
                                          struct pressure_status *status, void *userdata);

/** The same, without waiting: the handler is called from dispatch. Returns 0, or -ENOTCONN while the
 * daemon is away. Handlers still pending when the client is freed are not called.
 * Since LIBPRESSURE_0.4. */
int pressure_client_get_status_async(struct pressure_client *client, pressure_status_handler_t handler,
                                     void *userdata);

struct pressure_status *pressure_status_ref(struct pressure_status *status);
struct pressure_status *pressure_status_unref(struct pressure_status *status);

/** The system scope of a status. Owned by the status. */
const struct pressure_scope *pressure_status_get_system(const struct pressure_status *status);
size_t pressure_status_get_n_nodes(const struct pressure_status *status);
/** Node i (0 <= i < n_nodes) of a status, or NULL. Owned by the status. */
const struct pressure_scope *pressure_status_get_node(const struct pressure_status *status, size_t i);
size_t pressure_status_get_n_cgroups(const struct pressure_status *status);
/** Watched cgroup i of a status, or NULL. Owned by the status. */
const struct pressure_scope *pressure_status_get_cgroup(const struct pressure_status *status, size_t i);
/** The reply as JSON text, as the daemon sent it (for tools that print JSON). Owned by the status. */
const char *pressure_status_to_json(const struct pressure_status *status);

/**
 * A scope's state, in a status or an event. Events also carry the previous level (the level this
 * subscriber was last told) and a timestamp (CLOCK_MONOTONIC microseconds of the change).
 */
enum pressure_scope_type pressure_scope_get_type(const struct pressure_scope *scope);
/** The node number of a node scope, -1 otherwise. */
int pressure_scope_get_node(const struct pressure_scope *scope);
/** The cgroup path of a cgroup scope, NULL otherwise. */
const char *pressure_scope_get_cgroup(const struct pressure_scope *scope);
/** The scope's name: "system", "node:N" or the cgroup path. */
const char *pressure_scope_get_name(const struct pressure_scope *scope);
enum pressure_level pressure_scope_get_level(const struct pressure_scope *scope);
/** For an event, the level before the change; for a state, the current level. */
enum pressure_level pressure_scope_get_previous_level(const struct pressure_scope *scope);
/** PSI figures of a system or cgroup scope. Returns 0, or -ENODATA (nodes have no PSI). */
int pressure_scope_get_stall(const struct pressure_scope *scope, enum pressure_stall_kind kind,
                             struct pressure_stall *ret);
/** Memory of a node scope in bytes. Returns 0, or -ENODATA for other scopes. */
int pressure_scope_get_memory(const struct pressure_scope *scope, uint64_t *ret_total, uint64_t *ret_free);
/** A node's min, low and high watermarks in bytes (summed over its zones). Returns 0, or -ENODATA.
 * Since LIBPRESSURE_0.4. */
int pressure_scope_get_watermarks(const struct pressure_scope *scope, uint64_t *ret_min, uint64_t *ret_low,
                                  uint64_t *ret_high);
/** A cgroup's memory use and its limit in bytes (UINT64_MAX: none), as the daemon last read them.
 * Returns 0, or -ENODATA. Since LIBPRESSURE_0.4. */
int pressure_scope_get_cgroup_memory(const struct pressure_scope *scope, uint64_t *ret_usage, uint64_t *ret_limit);
/** Estimated bytes to free to bring the scope back under its threshold; 0 at ok. An estimate. */
uint64_t pressure_scope_get_reclaim_target(const struct pressure_scope *scope);
/** CLOCK_MONOTONIC microseconds of the scope's last level change. */
uint64_t pressure_scope_get_timestamp(const struct pressure_scope *scope);
/** 1 if this event says the scope went away (its cgroup was removed), 0 otherwise. */
int pressure_scope_is_removed(const struct pressure_scope *scope);
/** What raised the scope's level: "pressure" (PSI stall), "headroom" (near a memory limit),
 * "watermark" (a node's free pages), or a later daemon's word; NULL at ok. Since LIBPRESSURE_0.3. */
const char *pressure_scope_get_source(const struct pressure_scope *scope);
/** The memory limit nearest to being reached (of the scope's cgroup and its ancestors, or the system's
 * memory without swap) and what its group holds that reclaim cannot take, in bytes. The headroom, the
 * room left, is limit minus unreclaimable. Returns 0, or -ENODATA when no limit binds the scope.
 * Since LIBPRESSURE_0.3. */
int pressure_scope_get_headroom(const struct pressure_scope *scope, uint64_t *ret_limit, uint64_t *ret_unreclaimable);
/** Number of changes folded into this event while the subscriber did not read. */
unsigned pressure_scope_get_coalesced(const struct pressure_scope *scope);
/** The scope as JSON text. Owned by the scope. */
const char *pressure_scope_to_json(const struct pressure_scope *scope);

/**
 * Called from dispatch with each scope's current state when a subscription starts and again after
 * every return of the daemon (is_initial = 1), and for every level change (is_initial = 0). The scope
 * is valid only during the call.
 */
typedef void (*pressure_event_handler_t)(struct pressure_client *client, const struct pressure_scope *scope,
                                         int is_initial, void *userdata);

/* ---- Subscriptions ---- */

struct pressure_subscription;

/** Called from dispatch when a subscription ended for good: error -ENOENT (no such cgroup, or all its
 * scopes were removed), -ENXIO (no such node), -EACCES (the daemon may not watch that cgroup for this
 * user), -EDQUOT (this user watches as many cgroups as it may), -EPROTO. Not called for an unref, nor
 * while the daemon is away (the subscription waits for it). Since LIBPRESSURE_0.4. */
typedef void (*pressure_subscription_end_handler_t)(struct pressure_subscription *subscription, int error,
                                                    void *userdata);

/**
 * Subscribe to level changes of the given scopes (NULL-terminated array of scope names; NULL or empty for
 * the system): the handler hears when a scope reaches min_level or falls back below it, and its first
 * states, all from dispatch. Any number per client, each its own connection to the daemon. Does not
 * wait: a refusal comes to the end handler.
 *
 * With ret, the subscription lives until its last reference is dropped (pressure_subscription_unref()
 * unsubscribes); with ret NULL it is floating: the client owns it until it ends or the client is freed.
 * Returns 0, -EINVAL (bad scope name or level, no handler), -ENOMEM. Since LIBPRESSURE_0.4.
 */
int pressure_subscription_new(struct pressure_client *client, const char *const *scopes,
                              enum pressure_level min_level, pressure_event_handler_t handler, void *userdata,
                              struct pressure_subscription **ret);
struct pressure_subscription *pressure_subscription_ref(struct pressure_subscription *subscription);
/** The last reference unsubscribes: once this returns, no callback of the subscription runs (one running
 * on another thread is waited for: do not call it holding a lock the callback takes). Accepts NULL.
 * Returns NULL. */
struct pressure_subscription *pressure_subscription_unref(struct pressure_subscription *subscription);
int pressure_subscription_set_end_handler(struct pressure_subscription *subscription,
                                          pressure_subscription_end_handler_t handler, void *userdata);
/** 1 while the daemon streams its events, 0 while it is being (re)established, or the negative errno it
 * ended with. */
int pressure_subscription_get_state(struct pressure_subscription *subscription);
struct pressure_client *pressure_subscription_get_client(struct pressure_subscription *subscription);

/**
 * The first interface (0.1), kept for compatibility; new code uses pressure_subscription_new(). One
 * subscription per client, and a call that waits (for at most the
 * client's timeout) until the daemon has answered and the first states were delivered to the handler
 * (by dispatching here, or by the library's thread). Dispatch runs other callbacks meanwhile.
 *
 * Returns 0, -EBUSY (already subscribed), -ENOENT (no such cgroup), -ENXIO (no such node), -EACCES (the
 * daemon may not watch that cgroup), -EINVAL (bad scope name), -ECONNREFUSED (no daemon), -ETIMEDOUT,
 * -EPROTO. The subscription then lives as long as the client, through the daemon's restarts.
 */
int pressure_client_subscribe(struct pressure_client *client, const char *const *scopes,
                              enum pressure_level min_level, pressure_event_handler_t handler, void *userdata);

/**
 * Called from pressure_client_dispatch() when the kernel counted memory events in a subscribed cgroup
 * (once per subscription that names it),
 * whatever min_level: kind "oom_kill" (the OOM killer killed `count` processes in it) or "max" (its usage
 * reached memory.max `count` times; cgroup v2), or a later daemon's word. scope_name is the cgroup path,
 * valid only during the call.
 */
typedef void (*pressure_memory_event_handler_t)(struct pressure_client *client, const char *scope_name,
                                                const char *kind, uint64_t count, void *userdata);

/** Set (or with NULL, clear) the handler of memory events; before or after subscribing. Returns 0.
 * Since LIBPRESSURE_0.3. */
int pressure_client_set_memory_event_handler(struct pressure_client *client, pressure_memory_event_handler_t handler,
                                             void *userdata);

/* ---- Shrinkers ----
 *
 * The kernel's shrinker contract, for a cache in this process. pressured asks:
 *
 *   count(sc): how many objects could you free now? Cheap, may be stale. Return the number, 0 for
 *     "cannot tell / skip me this time", or PRESSURE_SHRINK_EMPTY for "nothing here". Optionally set
 *     sc->nr_bytes to the bytes those objects hold (lets the daemon account bytes freed).
 *   scan(sc): free up to sc->nr_to_scan objects (oldest first, as you see fit). Return the number freed,
 *     or PRESSURE_SHRINK_STOP when you cannot make progress now (lock contention, reentrancy): you will
 *     not be asked again in this round. Set sc->nr_scanned if you looked at a different number of objects
 *     than nr_to_scan, and sc->nr_bytes to the bytes freed if you know them.
 *
 * scan is called only after a non-zero count. Requests carry the NUMA node (sc->node) and the cgroup
 * (sc->cgroup) they are about; a shrinker without PRESSURE_SHRINKER_NUMA_AWARE is asked for node 0 only,
 * one without PRESSURE_SHRINKER_MEMCG_AWARE only when the whole system is under pressure. Every callback
 * must return quickly: the daemon gives each request a deadline (1 s by default) and quarantines a
 * shrinker that keeps missing it.
 *
 * Callbacks run inside pressure_client_dispatch(), on the thread that calls it (or on the library's
 * thread after pressure_client_start_thread()), without any lock of the library held.
 *
 * Made like the kernel's: pressure_shrinker_alloc(), the setters, pressure_shrinker_register(). The
 * registration is sent in the background: the shrinker's id is 0 until the daemon has it. Adding or
 * freeing one shrinker changes only that one on the daemon (its id is kept while the daemon runs). If the
 * daemon restarts, the client registers its shrinkers again by itself; ids change then.
 */

struct pressure_shrinker;

#define PRESSURE_SHRINK_STOP UINT64_MAX
#define PRESSURE_SHRINK_EMPTY (UINT64_MAX - 1)

enum pressure_shrinker_flags {
        PRESSURE_SHRINKER_NUMA_AWARE = 1 << 0,
        PRESSURE_SHRINKER_MEMCG_AWARE = 1 << 1
};

/** What a request is about, and what the callback reports back. Made by the library only: fields are
 * appended in later versions (never allocate or copy one). */
struct pressure_shrink_control {
        int node;            /* NUMA node the request is for */
        const char *cgroup;  /* cgroup v2 path the request is for ("/" for the whole system) */
        uint64_t nr_to_scan; /* scan: how many objects to scan */
        uint64_t nr_scanned; /* scan: how many were scanned; preset to nr_to_scan */
        uint64_t nr_bytes;   /* count: bytes the freeable objects hold; scan: bytes freed (optional, 0) */
        int priority;        /* 12 (gentle) .. 0 (everything), as the kernel's reclaim priority */
        /* Since LIBPRESSURE_0.4: */
        enum pressure_level level;           /* of the scope under pressure; ok for an explicit Shrink */
        enum pressure_scope_type scope_type; /* the kind of that scope */
        uint64_t deadline; /* CLOCK_MONOTONIC microseconds: an answer after it is discarded */
        /* Since LIBPRESSURE_1.3: */
        double value; /* count: what one more MiB of this cache would save, in miss cost per second (0:
                       * not known); pressure_lru_get_value() for a list with shadow entries */
};

typedef uint64_t (*pressure_count_objects_t)(struct pressure_shrinker *shrinker, struct pressure_shrink_control *sc,
                                             void *userdata);
typedef uint64_t (*pressure_scan_objects_t)(struct pressure_shrinker *shrinker, struct pressure_shrink_control *sc,
                                            void *userdata);

/** Frees a shrinker's userdata when the shrinker is freed. */
typedef void (*pressure_destroy_t)(void *userdata);

/**
 * A new shrinker, not registered yet. name: 1..64 printable characters (shown by pressurectl); flags:
 * PRESSURE_SHRINKER_*. The shrinker holds a reference to the client. Returns 0, -EINVAL or -ENOMEM.
 * Since LIBPRESSURE_0.4.
 */
int pressure_shrinker_alloc(struct pressure_client *client, unsigned flags, const char *name,
                            struct pressure_shrinker **ret);
/** The daemon's default, for seeks (2) and batch (128) alike. */
#define PRESSURE_SHRINKER_DEFAULT (-1)

/* Before pressure_shrinker_register() only (-EBUSY after); 0 or -EINVAL. Since LIBPRESSURE_0.4. */
/** Cost to recreate an object: PRESSURE_SHRINKER_DEFAULT (any negative), 0 for cheap, at most 1000. */
int pressure_shrinker_set_seeks(struct pressure_shrinker *shrinker, int seeks);
/** Most objects per scan call: PRESSURE_SHRINKER_DEFAULT (any negative), or 1..1048576. */
int pressure_shrinker_set_batch(struct pressure_shrinker *shrinker, int batch);
int pressure_shrinker_set_callbacks(struct pressure_shrinker *shrinker, pressure_count_objects_t count,
                                    pressure_scan_objects_t scan);
/** destroy (may be NULL) is called with userdata by pressure_shrinker_free(), after the last callback. */
int pressure_shrinker_set_userdata(struct pressure_shrinker *shrinker, void *userdata, pressure_destroy_t destroy);
void *pressure_shrinker_get_userdata(const struct pressure_shrinker *shrinker);
struct pressure_client *pressure_shrinker_get_client(const struct pressure_shrinker *shrinker);
/** Register with the daemon, now or once it is there (never waits). Returns 0, -EINVAL without
 * callbacks, -EBUSY if registered already. Since LIBPRESSURE_0.4. */
int pressure_shrinker_register(struct pressure_shrinker *shrinker);

/**
 * alloc, set and register in one call. seeks and batch as for the setters (batch 0 also means the
 * default here, as it did in LIBPRESSURE_0.1). Returns 0 and the shrinker in *ret (registered in the
 * background), or -EINVAL or -ENOMEM.
 * The first interface (0.1), kept for compatibility with its order: name before flags. New code uses
 * pressure_shrinker_alloc(), which has the kernel's order (flags, then name).
 */
int pressure_shrinker_new(struct pressure_client *client, const char *name, unsigned flags, int seeks, int batch,
                          pressure_count_objects_t count, pressure_scan_objects_t scan, void *userdata,
                          struct pressure_shrinker **ret);

/**
 * Growth limits. Where the regulator holds a group's caches below the size at which its stall rose, it
 * tells each shrinker its share: bytes its objects may hold now, or 0 when there is no limit any more.
 * A cache that keeps within it (evicting on insertion) does not refill past the edge between two of the
 * daemon's looks, where it costs the group stall and is asked back a look later. The handler runs on
 * the dispatching thread, as count and scan do, when the limit moved (by more than a thirty-second);
 * pressure_shrinker_get_limit() reads the last one from any thread. Set the handler before
 * pressure_shrinker_register() (-EBUSY after): the library asks for limits only for a client with such
 * a shrinker when it registers (at the latest, once it registers again). Since LIBPRESSURE_1.2.
 */
typedef void (*pressure_limit_handler_t)(struct pressure_shrinker *shrinker, uint64_t bytes, void *userdata);
int pressure_shrinker_set_limit_handler(struct pressure_shrinker *shrinker, pressure_limit_handler_t handler);
uint64_t pressure_shrinker_get_limit(const struct pressure_shrinker *shrinker);

/** Gives memory the shrinkers freed back to the kernel. */
typedef void (*pressure_release_t)(void *userdata);

/**
 * What the library does after scans that freed objects (at most every 100 ms, once the answers are
 * sent): by default glibc's malloc_trim(0), because objects freed into the heap lower neither the
 * process's RSS nor its cgroup's usage until the heap is trimmed. Programs with another allocator pass
 * their own function (jemalloc: mallctl("arena.<i>.purge"), mimalloc: mi_collect(true), their own
 * arenas); NULL does nothing. Returns 0 or -EINVAL.
 */
int pressure_client_set_release(struct pressure_client *client, pressure_release_t release, void *userdata);

/**
 * The client's shrinkers free memory of another process, pid: an adapter for a server that does not
 * link libpressure (pressure-adapt(1) for Redis and memcached). The daemon places them in that process's
 * cgroup, measures its memory, and ends the registration when it exits; only root, or a process all of
 * whose uids are the caller's, may be named. Takes effect at the next registration: set it before the
 * first shrinker registers, and again when the server was replaced (the old one's registration has
 * ended; until pid names a live process each attempt is refused and retried with the client's
 * back-off). 0: the caller's own memory. Returns 0 or -EINVAL. Since LIBPRESSURE_1.1.
 */
int pressure_client_set_serve_for(struct pressure_client *client, pid_t pid);

/** Unregister and free a shrinker, then call its destroy function. Once this returns, no callback of it
 * runs (one running on another thread is waited for: do not call it holding a lock the callbacks take;
 * called from its own callback, that callback is the last). Drops the shrinker's reference to the
 * client. Accepts NULL. */
void pressure_shrinker_free(struct pressure_shrinker *shrinker);

/** The id the daemon gave the shrinker (as in pressurectl shrinkers); 0 while not registered (yet). */
uint64_t pressure_shrinker_get_id(const struct pressure_shrinker *shrinker);

/**
 * For programs without an event loop: run pressure_client_dispatch() on a thread owned by the library
 * until the last reference to the client is dropped. Returns 0, -EBUSY if already started, or a
 * negative errno.
 */
int pressure_client_start_thread(struct pressure_client *client);

/** An fd to poll for readability (POLLIN); when readable, call pressure_client_dispatch(). */
int pressure_client_get_fd(struct pressure_client *client);

/**
 * Read what the daemon sent, send what waits, reach a daemon that was away, and run the callbacks.
 * Never waits. Returns 0, or -EBUSY when another thread is dispatching this client (or a callback
 * called it).
 */
int pressure_client_dispatch(struct pressure_client *client);

/* ---- pressure_lru: a per-NUMA-node LRU list with the shrinker built in ----
 *
 * Like the kernel's list_lru. Embed a struct pressure_lru_node in each cache object, put objects on the
 * list with pressure_lru_add() and take them off with pressure_lru_del(); mark an object used with
 * pressure_lru_touch(). One call, pressure_lru_shrinker_new(), registers a NUMA_AWARE shrinker whose count
 * is a node's length and whose scan walks that node's oldest objects, so that the daemon's requests for
 * node N free objects that live on node N.
 *
 * Structure: one sublist and one mutex per NUMA node; objects are added at the tail (newest) and walked
 * from the head (oldest).
 *
 * An object is in one of three states, kept in its node's nid under the node lock: on no list (-1), on
 * node nid's list (>= 0), or isolated (PRESSURE_LRU_ISOLATED): a walk took it off its list and put it on
 * a dispose list, whose holder now owns it (the built-in shrinker frees it with the free callback).
 *
 * Locking rules, complete:
 *  - add, del and walk take the node lock of the object's node; they may be called from any thread, at
 *    the same time, on the same objects. The list serialises them: every object is in exactly one state.
 *  - pressure_lru_add() links only an object on no list; an isolated one is refused (-EBUSY).
 *  - pressure_lru_del() unlinks an object on a list (1), says 0 for one on none, and -EBUSY for an
 *    isolated one: a walk has it, and its dispose list's holder will free it; the caller must not free it
 *    (or touch it again) itself. So an application may call del() and add() freely from any thread; what
 *    it must serialise itself is freeing: an object is freed either after a del() that returned 1 or 0,
 *    or by the holder of the dispose list it was isolated to, never both.
 *  - pressure_lru_touch() takes no lock: it sets a flag in the object (second chance). Touching an object
 *    that may be freed meanwhile is the caller's bug (look it up under the caller's own lock, and take
 *    that lock in the free callback too).
 *  - counts are read without a lock and may be stale by a few objects.
 *  - the isolate callback runs with the node lock held: it must not call add/del/walk on the same list,
 *    nor block. The dispose list is built and terminated under the lock; objects on it stay isolated
 *    until their holder frees them or gives them back with pressure_lru_node_init().
 *
 * Per-cgroup sublists (the kernel's memcg-aware list_lru) are not needed here: all memory of one process
 * is charged to the one cgroup the process is in, so every object on a process's list belongs to the
 * same cgroup and a request for that cgroup concerns all of them.
 */

struct pressure_lru;

struct pressure_lru_node {
        struct pressure_lru_node *prev, *next;
        int nid;        /* node of the list the object is on; -1 on none; PRESSURE_LRU_ISOLATED */
        int referenced; /* set by pressure_lru_touch(), cleared by the walk */
};

/** nid of an object that a walk isolated: it is on its walker's dispose list. */
#define PRESSURE_LRU_ISOLATED (-2)

/** The object that contains the embedded node ptr: PRESSURE_LRU_ENTRY(n, struct my_object, lru). */
#define PRESSURE_LRU_ENTRY(ptr, type, member) ((type *) (void *) ((char *) (ptr) - offsetof(type, member)))

/** What an isolate callback tells the walk to do with an object. Any other value is a programming error
 * (the walk aborts). */
enum pressure_lru_status {
        PRESSURE_LRU_REMOVED, /* take it off the list and hand it back on the dispose list */
        PRESSURE_LRU_ROTATE,  /* it was used: move it to the newest end, give it another pass */
        PRESSURE_LRU_SKIP,    /* leave it where it is */
        PRESSURE_LRU_STOP     /* end the walk now (the object stays) */
};

typedef enum pressure_lru_status (*pressure_lru_isolate_t)(struct pressure_lru_node *item, void *userdata);

/** Initialise an embedded node before first use (on no list). The holder of a dispose list also uses it
 * to give an isolated object back, so that it may be added again. Never on an object that is on a list. */
void pressure_lru_node_init(struct pressure_lru_node *item);

/**
 * A new list with one sublist per NUMA node: n_nodes of them, or the machine's (numa_max_node() + 1) when
 * n_nodes <= 0. Returns 0 or a negative errno.
 */
int pressure_lru_new(int n_nodes, struct pressure_lru **ret);

/** Free the list. Objects still on it are left alone (they belong to the caller). Accepts NULL. */
struct pressure_lru *pressure_lru_free(struct pressure_lru *lru);

/** Number of per-node sublists. */
int pressure_lru_get_n_nodes(const struct pressure_lru *lru);

/**
 * The NUMA node the memory at addr is on, from get_mempolicy(MPOL_F_NODE|MPOL_F_ADDR) (the page must have
 * been touched); when the kernel cannot tell, the node of the CPU the caller runs on; 0 when neither is
 * known.
 */
int pressure_lru_node_of(const void *addr);

/**
 * Put item at the newest end of node nid's sublist (nid < 0: the node of the item's own memory, see
 * pressure_lru_node_of()). Returns 1 if added, 0 if it was already on a list, -EBUSY if a walk isolated
 * it (its dispose list's holder owns it), -EINVAL for a bad node.
 */
int pressure_lru_add(struct pressure_lru *lru, struct pressure_lru_node *item, int nid);

/** Take item off its list. Returns 1 if removed, 0 if it was on none, -EBUSY if a walk isolated it: the
 * holder of the walk's dispose list (the built-in shrinker's free callback) frees it, not the caller. */
int pressure_lru_del(struct pressure_lru *lru, struct pressure_lru_node *item);

/** Mark item used: the walk gives it a second chance. Lock-free. */
void pressure_lru_touch(struct pressure_lru_node *item);

/** Clear and return the item's referenced mark (for isolate callbacks). */
int pressure_lru_test_and_clear_referenced(struct pressure_lru_node *item);

/** Objects on node nid (lock-free, may be stale); pressure_lru_count() sums all nodes. */
uint64_t pressure_lru_count_node(const struct pressure_lru *lru, int nid);
uint64_t pressure_lru_count(const struct pressure_lru *lru);

/**
 * Walk node nid from its oldest object, calling isolate for each, for at most *nr_to_walk objects (the
 * budget is decremented before each call) and not past the first object it rotated (a rotated object
 * gets its second pass in a later walk). Objects the callback answers PRESSURE_LRU_REMOVED for are
 * unlinked, marked PRESSURE_LRU_ISOLATED and chained on *ret_dispose through their next pointer (the
 * chain is complete before the lock is dropped); the caller owns them. Returns the number isolated.
 */
uint64_t pressure_lru_walk_node(struct pressure_lru *lru, int nid, pressure_lru_isolate_t isolate, void *userdata,
                                uint64_t *nr_to_walk, struct pressure_lru_node **ret_dispose);

/** Free one isolated object (the user's destructor for the object containing item). */
typedef void (*pressure_lru_free_t)(struct pressure_lru_node *item, void *userdata);

/**
 * Take every object off every node's list and call free_fn for each, outside the locks (as a walk with
 * an isolate callback that removes everything, node by node): what a program does before
 * pressure_lru_free(), which leaves objects alone. Objects added meanwhile by other threads may stay.
 * Returns the number freed. Since LIBPRESSURE_0.3.
 */
uint64_t pressure_lru_drain(struct pressure_lru *lru, pressure_lru_free_t free_fn, void *userdata);

/**
 * Register the list's built-in shrinker with the daemon: NUMA_AWARE (plus the given extra flags, e.g.
 * PRESSURE_SHRINKER_MEMCG_AWARE), count = the node's length (bytes = length * object_size when
 * object_size > 0), scan = walk the node's oldest nr_to_scan objects through isolate (NULL: second
 * chance: referenced objects are rotated once, the others removed) and free the removed ones with
 * free_fn. Returns 0 and the shrinker (release with pressure_shrinker_free() before the list), -EBUSY
 * while the list has a shrinker, or another negative errno.
 */
int pressure_lru_shrinker_new(struct pressure_lru *lru, struct pressure_client *client, const char *name,
                              unsigned extra_flags, size_t object_size, pressure_lru_isolate_t isolate,
                              pressure_lru_free_t free_fn, void *userdata, struct pressure_shrinker **ret);

/**
 * The same shrinker, allocated but not registered, so that its seeks and batch can be set
 * (pressure_shrinker_set_seeks(), _set_batch()) before pressure_shrinker_register(). A list has one
 * shrinker at a time (-EBUSY); once it is freed, the list may get another. Since LIBPRESSURE_0.4.
 */
int pressure_lru_shrinker_alloc(struct pressure_lru *lru, struct pressure_client *client, const char *name,
                                unsigned extra_flags, size_t object_size, pressure_lru_isolate_t isolate,
                                pressure_lru_free_t free_fn, void *userdata, struct pressure_shrinker **ret);

/** For shrinkers of one's own over a list (the kernel's list_lru_shrink_count/walk): the objects on the
 * request's node. Since LIBPRESSURE_0.4. */
uint64_t pressure_lru_shrink_count(const struct pressure_lru *lru, const struct pressure_shrink_control *sc);
/**
 * The built-in shrinker keeps the list within the daemon's growth limit (pressure_shrinker_set_limit_handler(),
 * in objects of object_size; none if object_size is 0): a lower limit trims the list at once, on the
 * dispatching thread. Between two limits the list grows on: call this after adding, to evict through the
 * shrinker's isolate and free functions until it fits again, on the calling thread (hold no lock that
 * free_fn takes). Returns the objects evicted; 0 at once, without a lock, when the list fits or has no
 * limit. Since LIBPRESSURE_1.2.
 */
uint64_t pressure_lru_trim(struct pressure_lru *lru);

/* ---- Value: what the last bytes of a list are worth (since LIBPRESSURE_1.3) ----
 *
 * As the kernel measures its page cache by refault distance (mm/workingset.c): an object a walk evicts
 * leaves a shadow entry, its key's hash; a miss the application reports that finds one tells that the
 * list, had it been larger by the entries evicted since, would have kept the object. The rate of such
 * misses (weighted by their cost) near the list's tail is the value of its last bytes, which pressured
 * compares to decide whose cache gives memory first (docs/shrinkers.md, "Value").
 */

/** The hash of an object's key (the same one pressure_lru_miss() is given for it). Runs in a walk, under
 * the node's lock: read the object only. */
typedef uint64_t (*pressure_lru_key_t)(const struct pressure_lru_node *item, void *userdata);

/**
 * Keep a shadow entry for each object a walk evicts (every walk but pressure_lru_drain()'s: the built-in
 * shrinker's, pressure_lru_trim()'s, and the application's own), in a table of max_entries (0: 4096) that
 * covers the last max_entries evictions, 20 bytes each. object_size (bytes per object; 0: the built-in
 * shrinker's) turns distances into bytes. Set it before other threads use the list. Returns 0, -EINVAL,
 * -EBUSY (set already) or -ENOMEM.
 */
int pressure_lru_set_shadow(struct pressure_lru *lru, pressure_lru_key_t key_fn, void *userdata, size_t max_entries,
                            size_t object_size);

/**
 * The application looked up the key with this hash and did not find it: a miss, costing cost_usec to
 * make up for (0: not known; a cache gives every miss's cost or none, since the two do not add up).
 * Returns the key's distance when a shadow entry had it: by how many objects a larger list would have
 * kept it (1 + the objects evicted after it that are still out: Mattson's stack distance less the
 * list's length, for a list kept at a fixed length); the entry is consumed. 0 when none had it, -EINVAL.
 * Thread-safe; takes the shadow table's lock only.
 */
int64_t pressure_lru_miss(struct pressure_lru *lru, uint64_t hash, uint64_t cost_usec);

/**
 * The value of the list's last bytes: the miss cost per second that one more MiB would have saved
 * (microseconds per second per MiB where misses have a cost, misses per second per MiB where not), from
 * the shadow entries found in about the last 10 seconds at distances within a sixteenth of the list (at
 * least 64 objects). 0 when not known: no shadow table, no object size, nothing evicted yet. The
 * built-in shrinker answers each count with it.
 */
double pressure_lru_get_value(const struct pressure_lru *lru);

/** The shadow table's counts since it was set. */
struct pressure_lru_shadow_stats {
        uint64_t evictions;   /* shadow entries made */
        uint64_t misses;      /* pressure_lru_miss() calls */
        uint64_t shadow_hits; /* of those, the ones a shadow entry had */
        uint64_t entries;     /* the table's size */
};
/** Fill ret (of size bytes, sizeof(*ret) as compiled: later members are left alone). 0 or -EINVAL (no
 * shadow table). */
int pressure_lru_get_shadow_stats(const struct pressure_lru *lru, struct pressure_lru_shadow_stats *ret, size_t size);

/** Walk the request's node for sc->nr_to_scan objects, as pressure_lru_walk_node(), and set
 * sc->nr_scanned to the number walked. Returns the number isolated onto *ret_dispose. Since
 * LIBPRESSURE_0.4. */
uint64_t pressure_lru_shrink_walk(struct pressure_lru *lru, struct pressure_shrink_control *sc,
                                  pressure_lru_isolate_t isolate, void *userdata,
                                  struct pressure_lru_node **ret_dispose);

#ifdef __cplusplus
}
#endif

#endif
