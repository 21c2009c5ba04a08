/* SPDX-License-Identifier: MIT */
#pragma once

/* The io.pressured wire format, as declared in io.pressured.varlink and shown in docs/protocol.md: a
 * codec between JSON and snapshots, plain structs that the daemon fills from its state. It knows no
 * daemon state: what a scope, a request or a shrinker is to the daemon stays behind the snapshot.
 * Decoded strings point into the JSON they came from; decoded arrays are allocated, free() them.
 * Encoders return NULL when an allocation failed (nothing half-built is returned, see json_build.h). */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "json_build.h"
#include "level.h"
#include "params.h"
#include "psi.h"
#include "scope_id.h"
#include "shrink_policy.h"

/* NodeMemory, in bytes, and the node's vmstat counters. */
struct node_memory {
        uint64_t total, free;
        uint64_t watermark_min, watermark_low, watermark_high;
        uint64_t numa_foreign, refault_anon, refault_file;
};

/* A ScopeState, or a LevelChange with its `previous`. */
/* Regulation: the regulator's state for one scope with client shrinkers in it. */
struct regulation_snapshot {
        const char *cgroup;    /* NULL: the system */
        uint64_t budget;       /* µs of `some` stall per second allowed */
        uint64_t stall;        /* µs/s over the last interval */
        const char *state;     /* the last look's verdict (regulation_verdict_to_string()) */
        uint64_t limit;        /* what the shrinkers may hold under the budget; 0: no limit */
        uint64_t edge;         /* what they held where the stall rose; 0: none known */
        uint64_t edge_found;   /* CLOCK_REALTIME µs it was found; 0: none */
        unsigned rising;       /* how fast the limit rises, per mille of itself per second */
        uint64_t return_usec;  /* how long the limit takes to come back to the edge */
        uint64_t steps, asked; /* steps in this scope and the bytes they asked */
};

struct scope_snapshot {
        struct scope_id id;
        enum level level;
        bool have_psi;
        struct psi_stats psi;
        bool have_node_memory;
        struct node_memory node;
        bool have_cgroup_memory;
        uint64_t usage, limit; /* limit UINT64_MAX: none */
        uint64_t reclaim_target;
        uint64_t since; /* CLOCK_MONOTONIC µs of the last change; 0: none */
        bool removed;
        enum level_source source;        /* what raised the level */
        bool have_headroom;              /* a limit binds the scope */
        uint64_t headroom_limit;         /* the limit nearest to being reached */
        uint64_t headroom_unreclaimable; /* what its group holds that reclaim cannot take (usage minus file pages) */
        const char *headroom_cgroup;     /* the group whose limit it is; NULL for the system */
        const char *reason;              /* why the scope is at its level, for people; NULL or "": none */
        bool have_regulation;            /* ScopeState only */
        struct regulation_snapshot regulation;
};

/* A MemoryEvent: the kernel counted `count` more of `kind` in the scope. */
struct memory_event_snapshot {
        struct scope_id id;
        enum memory_event kind;
        uint64_t count;
        uint64_t timestamp; /* CLOCK_MONOTONIC µs */
};

/* A Request on a serving connection. */
struct shrink_request_snapshot {
        uint64_t id, shrinker;
        enum shrink_op op;
        int node;
        const char *cgroup;
        uint64_t nr_to_scan; /* scan only */
        int priority;
        uint64_t deadline;
        enum scope_type scope_type; /* of the round's scope */
        int level;                  /* the scope's level; -1 for an explicit Shrink */
};

/* One shrinker's line in the results of an explicit Shrink. */
struct shrink_result {
        uint64_t shrinker;
        const char *name;
        int node;
        const char *cgroup;
        uint64_t scanned, freed, bytes_freed;
        bool have_released;      /* the Shrink asked for a measurement */
        uint64_t released_bytes; /* how far the client's resident memory fell around the Shrink */
        bool have_count;         /* a dry run: what the count said, nothing scanned */
        uint64_t count;
        bool stopped, timed_out, empty, quarantined, rejected;
};

struct shrinker_ref {
        uint64_t id;
        const char *name;
};

/* The first reply to Serve. */
struct shrink_registration {
        const char *token;
        size_t n_shrinkers;
        struct shrinker_ref *shrinkers;
};

/* A growth limit told to a client (Serve's "limits"): what one shrinker's objects may hold now. */
struct shrinker_limit {
        uint64_t shrinker;
        uint64_t bytes; /* 0: no limit any more */
};

struct shrinker_stats {
        uint64_t calls, scanned, freed, bytes_freed;
        uint64_t timeouts, stops, empty;
        uint64_t rejected; /* answers to its requests refused as impossible */
        uint64_t last_latency_usec, worst_latency_usec;
};

struct shrinker_node_figures {
        int node;
        uint64_t objects, bytes, deferred;
        double value; /* its last count's (0: none given) */
};

/* A ShrinkerInfo for ListShrinkers. */
struct shrinker_info_snapshot {
        uint64_t id;
        const char *name;
        pid_t pid;
        pid_t for_pid; /* 0: the shrinkers free pid's own memory */
        uid_t uid;
        const char *cgroup;
        unsigned flags; /* SHRINKER_NUMA_AWARE, SHRINKER_MEMCG_AWARE */
        unsigned seeks, batch;
        size_t n_nodes;
        struct shrinker_node_figures *nodes;
        struct shrinker_stats stats; /* `empty` is not on the wire; `rejected` is rejected_answers */
        uint64_t client_claimed_bytes, client_released_bytes; /* measured per client, not per shrinker */
        bool client_measured_by_cgroup; /* "client_measured": "cgroup" (alone in its own), or "resident" */
        unsigned client_trust;          /* per mille of its claims credited */
        bool quarantined;
        bool have_regulation;           /* the regulated scope its client is held in */
        struct regulation_snapshot regulation;
        uint64_t limit;                 /* its share of a growth limit, as last told; 0: none */
};

/* ScopeRef. Decoding names the offending field in *ret_field on -EINVAL. */
struct json_object *protocol_encode_scope_ref(const struct scope_id *id);
int protocol_decode_scope_ref(struct json_object *o, struct scope_id *ret, const char **ret_field);

struct json_object *protocol_encode_regulation(const struct regulation_snapshot *r);
int protocol_decode_regulation(struct json_object *o, struct regulation_snapshot *ret);

struct json_object *protocol_encode_scope_state(const struct scope_snapshot *s);
int protocol_decode_scope_state(struct json_object *o, struct scope_snapshot *ret);

/* `previous` is the level this subscriber was last told; `coalesced` the changes folded into this one. */
struct json_object *protocol_encode_level_change(const struct scope_snapshot *s, enum level previous,
                                                 unsigned coalesced);
int protocol_decode_level_change(struct json_object *o, struct scope_snapshot *ret, enum level *ret_previous,
                                 unsigned *ret_coalesced);

struct json_object *protocol_encode_memory_event(const struct memory_event_snapshot *e);
int protocol_decode_memory_event(struct json_object *o, struct memory_event_snapshot *ret);

struct json_object *protocol_encode_shrink_request(const struct shrink_request_snapshot *q);
/* The same JSON as protocol_encode_shrink_request() produces, appended as text without building json-c
 * objects (rounds send thousands of requests; the objects cost more than the sending). */
int protocol_text_append_shrink_request(struct json_text *t, const struct shrink_request_snapshot *q);
int protocol_decode_shrink_request(struct json_object *o, struct shrink_request_snapshot *ret);

struct json_object *protocol_encode_shrink_result(const struct shrink_result *r);
int protocol_decode_shrink_result(struct json_object *o, struct shrink_result *ret);

struct json_object *protocol_encode_registration(const struct shrink_registration *g);
/* Decoded: free the array with protocol_registration_done(). */
int protocol_decode_registration(struct json_object *o, struct shrink_registration *ret);
void protocol_registration_done(struct shrink_registration *g);
int protocol_decode_shrinker_ref(struct json_object *o, struct shrinker_ref *ret);

struct json_object *protocol_encode_shrinker_info(const struct shrinker_info_snapshot *i);

struct json_object *protocol_encode_shrinker_limit(const struct shrinker_limit *l);
int protocol_decode_shrinker_limit(struct json_object *o, struct shrinker_limit *ret);

/* Reply envelopes (every key of an io.pressured reply is written in protocol.c; test-interface holds them
 * to the IDL with a real daemon). GetStatus and ListShrinkers are written as text a piece at a time, so
 * that no tree of the whole is built: their envelopes are the texts between the pieces. */
enum protocol_status_part {
        PROTOCOL_STATUS_SYSTEM,  /* then the system's ScopeState */
        PROTOCOL_STATUS_NODES,   /* then the nodes', comma-separated */
        PROTOCOL_STATUS_CGROUPS, /* then the cgroups' */
        PROTOCOL_STATUS_END,
        _PROTOCOL_STATUS_PARTS,
};
extern const char *const protocol_status_envelope[_PROTOCOL_STATUS_PARTS];
extern const char *const protocol_shrinkers_envelope[2]; /* around the ShrinkerInfo list */
struct json_object *protocol_reply_registered(const struct shrink_registration *g); /* Serve's first */
struct json_object *protocol_reply_added_shrinker(const struct shrinker_ref *r);    /* AddShrinker's */
struct json_object *protocol_reply_shrink(const struct shrink_result *results, size_t n);
struct json_object *protocol_reply_limits(const struct shrinker_limit *limits, size_t n); /* Serve's, to a client that asked */
int protocol_decode_shrinker_info(struct json_object *o, struct shrinker_info_snapshot *ret);

/* Whole replies, for readers such as pressurectl: every part decoded by the codec above, or -EINVAL
 * (-ENOMEM). The arrays are allocated; strings point into o. */
struct status_snapshot { /* GetStatus */
        struct scope_snapshot system;
        struct scope_snapshot *nodes, *cgroups;
        size_t n_nodes, n_cgroups;
};
int protocol_decode_status(struct json_object *o, struct status_snapshot *ret);
void protocol_status_done(struct status_snapshot *s);
/* ListShrinkers: free with protocol_shrinker_infos_free(). */
int protocol_decode_shrinkers_reply(struct json_object *o, struct shrinker_info_snapshot **ret, size_t *ret_n);
void protocol_shrinker_infos_free(struct shrinker_info_snapshot *infos, size_t n);
/* Shrink: free() the array. */
int protocol_decode_shrink_reply(struct json_object *o, struct shrink_result **ret, size_t *ret_n);

/* An answer from a client, numbers as the client sent them (negative ones are refused here, not by the
 * parser, so that they count as impossible answers). Fields not given are SHRINK_ANSWER_ABSENT. */
#define SHRINK_ANSWER_ABSENT INT64_MIN
struct shrink_answer {
        int64_t request; /* the request's id */
        int64_t count, bytes, freed, scanned;
        bool empty, stop;
        double value; /* count: the value of its last bytes (docs/shrinkers.md); 0: not known, or not given */
};

/* The most a value may claim (miss cost per second per MiB): past it, an answer is impossible. */
#define PROTOCOL_VALUE_MAX 1e9

/* The parameters of an Answer call: its token, and one answer in the call's own fields or a list of up
 * to PROTOCOL_ANSWERS_MAX in "answers" (every item well-formed, or the call is refused). Returns 0 with
 * *ret_items (the call's own answer, or a list to free) and *ret_n; -EINVAL with the offending
 * parameter in *ret_bad (*ret_token is set whenever the call had one, so that the refusal can be
 * counted against its client); -ENOMEM. */
#define PROTOCOL_ANSWERS_MAX 4096
/* The errors of io.pressured, each declared in io.pressured.varlink (test-interface checks both ways). */
#define PROTOCOL_ERROR_NO_SUCH_CGROUP "io.pressured.NoSuchCgroup"
#define PROTOCOL_ERROR_NO_SUCH_NODE "io.pressured.NoSuchNode"
#define PROTOCOL_ERROR_NO_SUCH_SHRINKER "io.pressured.NoSuchShrinker"
#define PROTOCOL_ERROR_CGROUP_NOT_WATCHABLE "io.pressured.CgroupNotWatchable"
#define PROTOCOL_ERROR_UNKNOWN_REQUEST "io.pressured.UnknownRequest"
#define PROTOCOL_ERROR_INVALID_ANSWER "io.pressured.InvalidAnswer"
#define PROTOCOL_ERROR_SCOPE_REMOVED "io.pressured.ScopeRemoved"
#define PROTOCOL_ERROR_SHUTTING_DOWN "io.pressured.ShuttingDown"
#define PROTOCOL_ERROR_PROTOCOL_VIOLATION "io.pressured.ProtocolViolation"
extern const char *const protocol_errors[]; /* all of them, NULL-terminated */

/* The tables the Answer call and each item of its "answers" are parsed with (params.h). */
extern const struct param protocol_answer_params[], protocol_answer_item_params[];
int protocol_decode_answer_call(struct json_object *params, const char **ret_token, struct shrink_answer **ret_items,
                                size_t *ret_n, const char **ret_bad);

/* The interface definition, compiled in from io.pressured.varlink. */
extern const char protocol_interface_description[];

/* LevelThresholds: what raises one level. */
struct level_thresholds {
        enum level level;
        struct psi_trigger pressure;
        bool have_headroom;      /* headroom is on */
        uint64_t headroom_bytes; /* raised with this little left; 0: at headroom_percent */
        double headroom_percent;
        double node_factor; /* of the node watermark the level is raised at */
};

/* RegulatedCgroup: a subtree's own stall budget. */
struct regulated_cgroup {
        const char *pattern;
        uint64_t budget_usec; /* 0: not regulated */
};

/* GetConfiguration's reply: the thresholds and intervals in effect. Decoded strings point into the JSON;
 * the decoded arrays are allocated, protocol_configuration_done() frees them. */
#define PROTOCOL_LEVELS (_LEVEL_MAX - LEVEL_LOW) /* low, medium, critical */
struct configuration_snapshot {
        struct level_thresholds levels[PROTOCOL_LEVELS];
        uint64_t hold_usec, sample_interval_usec, round_interval_usec, request_timeout_usec;
        const char *const *cgroups;
        size_t n_cgroups;
        enum level memory_pressure_level;
        bool low_memory_monitor;
        bool have_regulator; /* false: a daemon from before the regulator */
        uint64_t regulate_budget_usec, regulate_interval_usec;
        double regulate_step_max_percent;
        const struct regulated_cgroup *regulate_cgroups;
        size_t n_regulate_cgroups;
        const char *const *reclaim_cgroups;
        size_t n_reclaim_cgroups;
        bool have_value_cgroups; /* false: a daemon from before value-aware reclaim */
        const char *const *value_cgroups;
        size_t n_value_cgroups;
        const char *log_level; /* what is logged now */
};

struct json_object *protocol_encode_configuration(const struct configuration_snapshot *c);
int protocol_decode_configuration(struct json_object *o, struct configuration_snapshot *ret);
void protocol_configuration_done(struct configuration_snapshot *c);

/* The daemon's configuration as GetConfiguration shows it. log_level: what is logged now (SetLogLevel
 * may have changed it since the configuration was read). The snapshot points into c and owns an array:
 * protocol_configuration_done() it. -ENOMEM. */
struct config;
int protocol_configuration_of(const struct config *c, const char *log_level, struct configuration_snapshot *ret);
