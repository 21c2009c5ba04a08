/* SPDX-License-Identifier: MIT */
/* One definition of the interface: io.pressured.varlink. The daemon's parameter tables, its errors, what
 * its codec writes and the replies recorded in docs/protocol.md are all held to it, both ways: a field
 * the IDL has and the code does not (or the other way round) fails here. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "pressure.h"
#include "service.h"
#include "test-util.h"
#include "varlink_idl.h"

extern const char protocol_interface_description[];

static struct idl_interface *idl;

static void test_parses(void) {
        char *err = NULL;
        CU_ASSERT_EQUAL_FATAL(idl_parse(protocol_interface_description, &idl, &err), 0);
        if (err)
                printf("\n    %s\n", err);
        free(err);
        CU_ASSERT_STRING_EQUAL(idl->name, "io.pressured");
        CU_ASSERT_PTR_NOT_NULL(idl_method(idl, "GetStatus"));
        CU_ASSERT_TRUE(idl_type(idl, "Level")->is_enum);

        /* and refuses what is not a definition */
        struct idl_interface *bad = NULL;
        CU_ASSERT_EQUAL(idl_parse("interface x\ntype T (a: int,\nb: ?[]nope\n", &bad, &err), -EINVAL);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "line 4"));
        if (err && !strstr(err, "line 4"))
                printf("\n    %s", err);
        free(err);
}

/* ---- parameter tables ---- */

static const char *param_type_name(enum param_type t) {
        static const char *const names[] = { [PARAM_INT] = "int", [PARAM_BOOL] = "bool", [PARAM_STRING] = "string",
                                             [PARAM_ARRAY] = "array", [PARAM_OBJECT] = "object", [PARAM_LEVEL] = "Level",
                                             [PARAM_FLOAT] = "float" };
        return names[t];
}

/* What the IDL says the field is, in the table's terms. */
static const char *idl_field_as_param(const struct idl_field *f) {
        if (f->array)
                return "array";
        switch (f->kind) {
        case IDL_INT: return "int";
        case IDL_BOOL: return "bool";
        case IDL_STRING: return "string";
        case IDL_OBJECT: return "object";
        case IDL_FLOAT: return "float";
        case IDL_NAMED: break;
        }
        const struct idl_struct *t = idl_type(idl, f->type_name);
        if (t && t->is_enum)
                return streq(f->type_name, "Level") ? "Level" : "string";
        return "object";
}

/* The table and the IDL's struct name the same fields, with the same types and optionality. */
static unsigned table_disagreements(const char *what, const struct param *table, const struct idl_struct *s) {
        unsigned n = 0;
        for (const struct param *p = table; p->name; p++) {
                const struct idl_field *f = idl_field(s, p->name);
                if (!f) {
                        printf("\n    %s: parameter %s is not in the IDL", what, p->name);
                        n++;
                        continue;
                }
                if (!streq(param_type_name(p->type), idl_field_as_param(f))) {
                        printf("\n    %s.%s: parsed as %s, the IDL says %s", what, p->name, param_type_name(p->type),
                               idl_field_as_param(f));
                        n++;
                }
                if (p->mandatory == f->optional) {
                        printf("\n    %s.%s: %s in the table, %s in the IDL", what, p->name,
                               p->mandatory ? "mandatory" : "optional", f->optional ? "optional" : "mandatory");
                        n++;
                }
        }
        for (size_t i = 0; i < s->n_fields; i++) {
                bool found = false;
                for (const struct param *p = table; p->name; p++)
                        found = found || streq(p->name, s->fields[i].name);
                if (!found) {
                        printf("\n    %s: the IDL's %s is not parsed", what, s->fields[i].name);
                        n++;
                }
        }
        return n;
}

static void test_method_tables(void) {
        CU_ASSERT_FATAL(idl != NULL);
        const struct varlink_interface *iface = NULL;
        for (size_t i = 0; i < service_n_interfaces; i++)
                if (streq(service_interfaces[i].name, idl->name))
                        iface = &service_interfaces[i];
        CU_ASSERT_PTR_NOT_NULL_FATAL(iface);
        unsigned bad = 0;
        for (size_t i = 0; i < iface->n_methods; i++) {
                const struct varlink_method *m = &iface->methods[i];
                const struct idl_method *im = idl_method(idl, m->name);
                if (!im) {
                        printf("\n    method %s is served but not in the IDL", m->name);
                        bad++;
                        continue;
                }
                CU_ASSERT_PTR_NOT_NULL_FATAL(m->params);
                bad += table_disagreements(m->name, m->params, &im->in);
        }
        for (size_t i = 0; i < idl->n_methods; i++) {
                bool served = false;
                for (size_t k = 0; k < iface->n_methods; k++)
                        served = served || streq(iface->methods[k].name, idl->methods[i].in.name);
                if (!served) {
                        printf("\n    method %s is in the IDL but not served", idl->methods[i].in.name);
                        bad++;
                }
        }
        bad += table_disagreements("ShrinkerSpec", service_shrinker_spec_params, idl_type(idl, "ShrinkerSpec"));
        bad += table_disagreements("ShrinkAnswer", protocol_answer_item_params, idl_type(idl, "ShrinkAnswer"));
        CU_ASSERT_EQUAL(bad, 0u);
}

static void test_errors(void) {
        CU_ASSERT_FATAL(idl != NULL);
        unsigned bad = 0;
        for (const char *const *e = protocol_errors; *e; e++) {
                const char *dot = strrchr(*e, '.');
                if (!idl_error(idl, dot + 1) || strncmp(*e, "io.pressured.", 13) != 0) {
                        printf("\n    error %s is sent but not in the IDL", *e);
                        bad++;
                }
        }
        for (size_t i = 0; i < idl->n_errors; i++) {
                bool sent = false;
                for (const char *const *e = protocol_errors; *e; e++)
                        sent = sent || streq(strrchr(*e, '.') + 1, idl->errors[i].name);
                if (!sent) {
                        printf("\n    error %s is in the IDL but the daemon has no name for it", idl->errors[i].name);
                        bad++;
                }
        }
        CU_ASSERT_EQUAL(bad, 0u);
}

/* ---- the codec ---- */

/* Every field seen in samples of each type, to find fields the codec never writes. */
#define SEEN_MAX 512
static char *seen[SEEN_MAX];
static size_t n_seen;

static void see(const char *type, const char *field) {
        char key[256];
        snprintf(key, sizeof(key), "%s.%s", type, field);
        for (size_t i = 0; i < n_seen; i++)
                if (streq(seen[i], key))
                        return;
        if (n_seen < SEEN_MAX)
                seen[n_seen++] = strdup(key);
}

static bool was_seen(const char *type, const char *field) {
        char key[256];
        snprintf(key, sizeof(key), "%s.%s", type, field);
        for (size_t i = 0; i < n_seen; i++)
                if (streq(seen[i], key))
                        return true;
        return false;
}

static void mark(const struct idl_struct *s, struct json_object *o) {
        if (!s || s->is_enum || !json_object_is_type(o, json_type_object))
                return;
        json_object_object_foreach(o, key, val) {
                const struct idl_field *f = idl_field(s, key);
                if (!f)
                        continue;
                see(s->name, key);
                const struct idl_struct *t = f->kind == IDL_NAMED ? idl_type(idl, f->type_name) : NULL;
                if (f->array)
                        for (size_t k = 0; val && k < json_object_array_length(val); k++)
                                mark(t, json_object_array_get_idx(val, k));
                else
                        mark(t, val);
        }
}

/* o must be valid for the type; its fields count as written. Takes o. */
static void sample(const char *type, struct json_object *o) {
        const struct idl_struct *s = idl_type(idl, type);
        char *err = NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int r = idl_validate(idl, s, o, 0, &err);
        if (r < 0)
                printf("\n    %s as the codec writes it: %s", type, err);
        CU_ASSERT_EQUAL(r, 0);
        free(err);
        mark(s, o);
        json_object_put(o);
}

static struct regulation_snapshot full_regulation(void) {
        return (struct regulation_snapshot){ .cgroup = "/a", .budget = 1000, .stall = 12, .state = "under", .limit = 100,
                                             .edge = 110, .edge_found = 5, .rising = 8, .return_usec = 2500000, .steps = 3,
                                             .asked = 40 };
}

static struct scope_snapshot full_scope(struct scope_id id) {
        struct scope_snapshot s = {
                .id = id,
                .level = LEVEL_MEDIUM,
                .have_psi = true,
                .have_node_memory = id.type == SCOPE_NODE,
                .node = { .total = 1 << 30, .free = 1 << 20, .watermark_high = 3 },
                .have_cgroup_memory = id.type == SCOPE_CGROUP,
                .usage = 100,
                .limit = 200,
                .reclaim_target = 5,
                .since = 7,
                .removed = true,
                .source = LEVEL_SOURCE_HEADROOM,
                .have_headroom = true,
                .headroom_limit = 200,
                .headroom_unreclaimable = 50,
                .headroom_cgroup = "/a",
                .reason = "why",
                .have_regulation = true,
                .regulation = full_regulation(),
        };
        s.psi.has_full = true;
        return s;
}

/* A reply's parameters as protocol.c writes them, held to method name's output: 0 or -EINVAL (said). */
static int reply_valid(const char *name, struct json_object *params) {
        const struct idl_method *m = idl_method(idl, name);
        char *err = NULL;
        int r = m ? idl_validate(idl, &m->out, params, 0, &err) : -EINVAL;
        if (r < 0)
                printf("\n    %s's reply as the codec writes it: %s", name, err ? err : "no such method");
        free(err);
        return r < 0 ? -EINVAL : 0;
}

static void test_codec_against_idl(void) {
        CU_ASSERT_FATAL(idl != NULL);
        const struct scope_id ids[] = { { .type = SCOPE_SYSTEM }, { .type = SCOPE_NODE, .node = 1 },
                                        { .type = SCOPE_CGROUP, .cgroup = "/a" } };
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                struct scope_snapshot s = full_scope(ids[i]);
                sample("ScopeState", protocol_encode_scope_state(&s));
                sample("LevelChange", protocol_encode_level_change(&s, LEVEL_LOW, 3));
        }
        sample("MemoryEvent", protocol_encode_memory_event(&(struct memory_event_snapshot){
                                      .id = ids[2], .kind = MEMORY_EVENT_OOM_KILL, .count = 1, .timestamp = 9 }));
        sample("Request", protocol_encode_shrink_request(&(struct shrink_request_snapshot){
                                  .id = 1, .shrinker = 2, .op = SHRINK_OP_SCAN, .cgroup = "/", .nr_to_scan = 128,
                                  .priority = 12, .deadline = 5, .scope_type = SCOPE_CGROUP, .level = LEVEL_LOW }));
        sample("ShrinkResult", protocol_encode_shrink_result(&(struct shrink_result){
                                       .shrinker = 1, .name = "n", .cgroup = "/", .have_released = true,
                                       .have_count = true, .stopped = true, .timed_out = true, .empty = true,
                                       .quarantined = true, .rejected = true }));
        struct shrinker_ref refs[] = { { .id = 1, .name = "n" } };
        sample("Registration", protocol_encode_registration(&(struct shrink_registration){
                                       .token = "t", .n_shrinkers = 1, .shrinkers = refs }));
        sample("ShrinkerLimit", protocol_encode_shrinker_limit(&(struct shrinker_limit){ .shrinker = 1, .bytes = 2 }));
        /* Serve's reply with growth limits: the live daemon sends one only under a stall it regulates. */
        struct json_object *limits = protocol_reply_limits(&(struct shrinker_limit){ .shrinker = 1, .bytes = 2 }, 1);
        CU_ASSERT_EQUAL(reply_valid("Serve", limits), 0);
        json_object_put(limits);
        struct shrinker_node_figures nodes[] = { { .node = 0, .objects = 1, .bytes = 2, .deferred = 3, .value = 12.5 } };
        sample("ShrinkerInfo", protocol_encode_shrinker_info(&(struct shrinker_info_snapshot){
                                       .id = 1, .name = "n", .for_pid = 2, .cgroup = "/", .flags = SHRINKER_NUMA_AWARE | SHRINKER_MEMCG_AWARE,
                                       .n_nodes = 1, .nodes = nodes, .client_trust = 900, .have_regulation = true,
                                       .regulation = full_regulation(), .limit = 5 }));

        /* GetConfiguration's reply is the codec's whole: held to the method's output. */
        struct config c;
        config_init(&c);
        CU_ASSERT_EQUAL(config_set(&c, "cgroup", "/a", NULL), 0);
        CU_ASSERT_EQUAL(config_set(&c, "regulate_cgroup", "/a/* 5ms", NULL), 0);
        CU_ASSERT_EQUAL(config_set(&c, "headroom_critical", "64M", NULL), 0);
        struct configuration_snapshot snap;
        CU_ASSERT_EQUAL_FATAL(protocol_configuration_of(&c, log_level_to_string(LOG_INFO), &snap), 0);
        struct json_object *conf = protocol_encode_configuration(&snap);
        protocol_configuration_done(&snap);
        const struct idl_method *m = idl_method(idl, "GetConfiguration");
        CU_ASSERT_EQUAL(reply_valid("GetConfiguration", conf), 0);
        for (size_t i = 0; i < m->out.n_fields; i++)
                CU_ASSERT_TRUE(json_object_object_get_ex(conf, m->out.fields[i].name, NULL));
        mark(idl_type(idl, "LevelThresholds"), json_object_array_get_idx(json_object_object_get(conf, "levels"), 0));
        mark(idl_type(idl, "LevelThresholds"), json_object_array_get_idx(json_object_object_get(conf, "levels"), 2));
        mark(idl_type(idl, "RegulatedCgroup"),
             json_object_array_get_idx(json_object_object_get(conf, "regulate_cgroups"), 0));
        json_object_put(conf);
        config_done(&c);

        /* Every field of every type the codec writes appears in some sample: a field added to the IDL
         * and not to the codec fails here. */
        static const char *const written[] = { "ScopeState", "LevelChange", "MemoryEvent", "Request", "ShrinkResult",
                                               "Registration", "ShrinkerInfo", "ScopeRef", "Pressure", "Stall",
                                               "NodeMemory", "CgroupMemory", "Headroom", "ShrinkerNode",
                                               "RegisteredShrinker", "LevelThresholds", "PsiThreshold", "RegulatedCgroup",
                                               "Regulation", "ShrinkerLimit" };
        unsigned missing = 0;
        for (size_t i = 0; i < ELEMENTSOF(written); i++) {
                const struct idl_struct *s = idl_type(idl, written[i]);
                CU_ASSERT_PTR_NOT_NULL_FATAL(s);
                for (size_t k = 0; k < s->n_fields; k++)
                        if (!was_seen(s->name, s->fields[k].name)) {
                                printf("\n    %s.%s is in the IDL but the codec never writes it", s->name,
                                       s->fields[k].name);
                                missing++;
                        }
        }
        CU_ASSERT_EQUAL(missing, 0u);
}

/* The codec's decoders take what its encoders write (the daemon's own tests and tools read replies so). */
static void test_codec_round_trip(void) {
        struct scope_snapshot s = full_scope((struct scope_id){ .type = SCOPE_CGROUP, .cgroup = "/a" }), back;
        enum level previous;
        unsigned coalesced;
        struct json_object *o = protocol_encode_level_change(&s, LEVEL_LOW, 3);
        CU_ASSERT_EQUAL(protocol_decode_level_change(o, &back, &previous, &coalesced), 0);
        CU_ASSERT_EQUAL(back.level, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(previous, LEVEL_LOW);
        CU_ASSERT_EQUAL(coalesced, 3u);
        CU_ASSERT_EQUAL(back.headroom_limit, 200u);
        json_object_put(o);
        o = protocol_encode_scope_state(&s);
        CU_ASSERT_EQUAL(protocol_decode_scope_state(o, &back), 0);
        CU_ASSERT_TRUE(back.have_regulation);
        CU_ASSERT_EQUAL(back.regulation.limit, 100u);
        CU_ASSERT_EQUAL(back.regulation.rising, 8u);
        CU_ASSERT_STRING_EQUAL(back.regulation.state, "under");
        json_object_put(o);

        /* a mandatory field missing is refused, not read as 0 */
        o = protocol_encode_scope_state(&s);
        json_object_object_del(o, "reclaim_target");
        CU_ASSERT(protocol_decode_scope_state(o, &back) < 0);
        char *err = NULL;
        CU_ASSERT_EQUAL(idl_validate(idl, idl_type(idl, "ScopeState"), o, 0, &err), -EPROTO);
        CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "reclaim_target: missing"));
        free(err);
        json_object_put(o);
}

/* ---- docs/protocol.md ---- */

/* A file of the source tree (PRESSURED_SOURCE_ROOT), opened for reading, or NULL. */
static FILE *open_source(const char *rel) {
        const char *root = getenv("PRESSURED_SOURCE_ROOT");
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", root ? root : ".", rel);
        return fopen(path, "re");
}

/* Each reply recorded there ("<- {...}") is valid for the call before it ("-> {...}"). */
static void test_recorded_replies(void) {
        char line[16384], method[128] = "";
        FILE *f = open_source("docs/protocol.md");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        unsigned n = 0, bad = 0, lineno = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                if (strncmp(line, "```", 3) == 0)
                        method[0] = 0; /* a new transcript */
                if (strncmp(line, "-> {", 4) == 0) {
                        struct json_object *call = json_tokener_parse(line + 3), *m;
                        method[0] = 0;
                        if (call && json_object_object_get_ex(call, "method", &m))
                                snprintf(method, sizeof(method), "%s", json_object_get_string(m));
                        json_object_put(call);
                        continue;
                }
                if (strncmp(line, "<- {", 4) != 0)
                        continue;
                struct json_object *reply = json_tokener_parse(line + 3), *params = NULL, *error = NULL;
                if (!reply) {
                        printf("\n    protocol.md:%u: not JSON", lineno);
                        bad++;
                        continue;
                }
                (void) json_object_object_get_ex(reply, "parameters", &params);
                const struct idl_struct *s = NULL;
                if (json_object_object_get_ex(reply, "error", &error)) {
                        const char *name = json_object_get_string(error);
                        if (strncmp(name, "io.pressured.", 13) == 0 && !(s = idl_error(idl, name + 13))) {
                                printf("\n    protocol.md:%u: error %s is not in the IDL", lineno, name);
                                bad++;
                        }
                } else if (!method[0]) {
                        /* An excerpt without its call: a reply of some method. */
                        for (size_t k = 0; !s && params && k < idl->n_methods; k++)
                                if (idl_validate(idl, &idl->methods[k].out, params, 0, NULL) == 0)
                                        s = &idl->methods[k].out;
                        if (!s) {
                                printf("\n    protocol.md:%u: a reply of no method", lineno);
                                bad++;
                        }
                } else if (strncmp(method, "io.pressured.", 13) == 0) {
                        const struct idl_method *m = idl_method(idl, method + 13);
                        s = m ? &m->out : NULL;
                        if (!s) {
                                printf("\n    protocol.md:%u: method %s is not in the IDL", lineno, method);
                                bad++;
                        }
                }
                char *err = NULL;
                if (s && idl_validate(idl, s, params, 0, &err) < 0) {
                        printf("\n    protocol.md:%u: reply to %s: %s", lineno, method, err);
                        bad++;
                }
                free(err);
                n += s != NULL;
                json_object_put(reply);
        }
        fclose(f);
        CU_ASSERT(n >= 8); /* every io.pressured reply the page records */
        CU_ASSERT_EQUAL(bad, 0u);
}

/* ---- what pressurectl reads ---- */

/* pressurectl reads the daemon's replies only through the codec (protocol_decode_*), which test-codec
 * holds to the documented replies and test_live_replies to a real daemon's: it reads no key of its own,
 * so a key renamed on either side cannot pass unnoticed there. */
static void test_pressurectl_decodes(void) {
        static const char *const own_reads[] = { "json_object_object_get", "json_object_get_", "jget(",
                                                 "json_object_array_get_idx" };
        static const char *const decoders[] = { "protocol_decode_configuration(", "protocol_decode_status(",
                                                "protocol_decode_scope_state(", "protocol_decode_shrinkers_reply(",
                                                "protocol_decode_shrink_reply(" };
        bool used[ELEMENTSOF(decoders)] = {};
        char line[4096];
        FILE *f = open_source("tools/pressurectl.c");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        unsigned bad = 0, lineno = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                for (size_t i = 0; i < ELEMENTSOF(own_reads); i++)
                        if (strstr(line, own_reads[i])) {
                                printf("\n    pressurectl.c:%u: reads a reply by itself (%s), not through the codec",
                                       lineno, own_reads[i]);
                                bad++;
                        }
                for (size_t i = 0; i < ELEMENTSOF(decoders); i++)
                        used[i] = used[i] || strstr(line, decoders[i]);
        }
        fclose(f);
        CU_ASSERT_EQUAL(bad, 0u);
        for (size_t i = 0; i < ELEMENTSOF(decoders); i++)
                if (!used[i]) {
                        printf("\n    pressurectl.c does not call %s", decoders[i]);
                        CU_FAIL("a decoder unused");
                }
}

/* ---- every method, answered by a real daemon ---- */

static struct test_daemon live;
static unsigned n_live_bad;
static const char *live_sampled[32];
static size_t n_live_sampled;

/* Send a call on fd (its reply is read with live_reply()). */
static void live_call(int fd, const char *call) {
        CU_ASSERT_FATAL(test_send_raw(fd, call, strlen(call) + 1) == 0);
}

/* The next message on fd, as the reply of method `name`: its parameters validated strictly (no field
 * the IDL lacks, every mandatory one there). Returns them (the caller puts them), or NULL. */
static struct json_object *live_reply(int fd, const char *name) {
        char *text = NULL;
        struct json_object *reply = NULL, *params = NULL, *error = NULL;
        int r = test_recv_msg(fd, 10000, &text);
        CU_ASSERT_EQUAL(r, 1);
        if (r == 1)
                reply = json_tokener_parse(text);
        CU_ASSERT_PTR_NOT_NULL(reply);
        if (!reply) {
                free(text);
                n_live_bad++;
                return NULL;
        }
        if (json_object_object_get_ex(reply, "error", &error)) {
                printf("\n    %s: error %s", name, text);
                n_live_bad++;
        }
        (void) json_object_object_get_ex(reply, "parameters", &params);
        const struct idl_method *m = idl_method(idl, name);
        char *err = NULL;
        CU_ASSERT_PTR_NOT_NULL(m);
        if (m && idl_validate(idl, &m->out, params, 0, &err) < 0) {
                printf("\n    %s: the reply is not what the IDL says: %s\n    %s", name, err, text);
                n_live_bad++;
        }
        free(err);
        free(text);
        if (n_live_sampled < ELEMENTSOF(live_sampled))
                live_sampled[n_live_sampled++] = name;
        struct json_object *ret = params ? json_object_get(params) : NULL;
        json_object_put(reply);
        return ret;
}

static int64_t live_int(struct json_object *o, const char *a, const char *b) {
        struct json_object *x = NULL, *y = NULL;
        if (!o || !json_object_object_get_ex(o, a, &x))
                return -1;
        if (b && !json_object_object_get_ex(x, b, &y))
                return -1;
        return json_object_get_int64(b ? y : x);
}

static void test_live_replies(void) {
        const char *skip = test_need_root_psi();
        if (skip) {
                printf("\n    not run: %s", skip);
                return;
        }
        CU_ASSERT_FATAL(test_daemon_start(&live, NULL) == 0);
        int a = test_connect(live.socket), sub = test_connect(live.socket), srv = test_connect(live.socket),
            ans = test_connect(live.socket);
        CU_ASSERT_FATAL(a >= 0 && sub >= 0 && srv >= 0 && ans >= 0);
        char call[512];

        /* What pressurectl decodes with the codec decodes from the live replies, and encodes back to them. */
        live_call(a, "{\"method\":\"io.pressured.GetStatus\"}");
        struct json_object *status = live_reply(a, "GetStatus"), *sys = NULL;
        struct scope_snapshot snap;
        CU_ASSERT_FATAL(json_object_object_get_ex(status, "system", &sys));
        CU_ASSERT_EQUAL(protocol_decode_scope_state(sys, &snap), 0);
        json_object_put(status);
        live_call(a, "{\"method\":\"io.pressured.GetConfiguration\"}");
        struct json_object *live_conf = live_reply(a, "GetConfiguration");
        struct configuration_snapshot decoded;
        CU_ASSERT_EQUAL_FATAL(protocol_decode_configuration(live_conf, &decoded), 0);
        struct json_object *again = protocol_encode_configuration(&decoded);
        CU_ASSERT_STRING_EQUAL(json_object_to_json_string(again), json_object_to_json_string(live_conf));
        json_object_put(again);
        protocol_configuration_done(&decoded);
        json_object_put(live_conf);
        live_call(a, "{\"method\":\"io.pressured.SetLogLevel\",\"parameters\":{\"level\":\"info\"}}");
        json_object_put(live_reply(a, "SetLogLevel"));
        live_call(sub, "{\"method\":\"io.pressured.Subscribe\",\"more\":true}");
        json_object_put(live_reply(sub, "Subscribe"));
        /* Nothing registered yet: a Shrink's results are empty, but the envelope is there. */
        live_call(a, "{\"method\":\"io.pressured.Shrink\",\"parameters\":{\"nr_to_scan\":1}}");
        json_object_put(live_reply(a, "Shrink"));

        live_call(srv, "{\"method\":\"io.pressured.Serve\",\"parameters\":{\"shrinkers\":[{\"name\":\"iface\"}],"
                       "\"limits\":true},\"more\":true}");
        struct json_object *reg = live_reply(srv, "Serve"), *token = NULL, *x = NULL;
        if (reg && json_object_object_get_ex(reg, "registered", &x))
                (void) json_object_object_get_ex(x, "token", &token);
        CU_ASSERT_PTR_NOT_NULL_FATAL(token);
        char tok[128];
        snprintf(tok, sizeof(tok), "%s", json_object_get_string(token));
        json_object_put(reg);

        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.AddShrinker\",\"parameters\":{\"token\":\"%s\","
                 "\"shrinker\":{\"name\":\"iface2\"}}}", tok);
        live_call(ans, call); /* the serving connection is busy with Serve: another of the same process */
        struct json_object *added = live_reply(ans, "AddShrinker");
        int64_t id = live_int(added, "shrinker", "id");
        json_object_put(added);
        CU_ASSERT_FATAL(id > 0);
        live_call(a, "{\"method\":\"io.pressured.ListShrinkers\"}");
        json_object_put(live_reply(a, "ListShrinkers"));

        /* A scan of the new shrinker: its request comes on the serving connection as the Serve call's
         * next reply, its answer on another connection, and then the Shrink's reply. */
        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.Shrink\",\"parameters\":{\"shrinker\":%lld,"
                 "\"nr_to_scan\":1}}", (long long) id);
        live_call(a, call);
        struct json_object *req = live_reply(srv, "Serve");
        int64_t rid = live_int(req, "request", "id");
        json_object_put(req);
        CU_ASSERT(rid > 0);
        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.Answer\",\"parameters\":{\"token\":\"%s\","
                 "\"request\":%lld,\"freed\":1}}", tok, (long long) rid);
        live_call(ans, call);
        json_object_put(live_reply(ans, "Answer"));
        json_object_put(live_reply(a, "Shrink"));

        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.RemoveShrinker\",\"parameters\":{\"token\":\"%s\","
                 "\"shrinker\":%lld}}", tok, (long long) id);
        live_call(ans, call);
        json_object_put(live_reply(ans, "RemoveShrinker"));

        /* Every method of the IDL was called and its reply held to it. */
        for (size_t k = 0; k < idl->n_methods; k++) {
                bool sampled = false;
                for (size_t i = 0; i < n_live_sampled; i++)
                        sampled = sampled || streq(live_sampled[i], idl->methods[k].out.name);
                if (!sampled)
                        printf("\n    %s: not sampled from the daemon", idl->methods[k].out.name);
                CU_ASSERT(sampled);
        }
        CU_ASSERT_EQUAL(n_live_bad, 0u);
        close(a);
        close(sub);
        close(srv);
        close(ans);
        CU_ASSERT_EQUAL(test_daemon_stop(&live), 0);
}

/* ---- the library's calls, relayed to a real daemon ---- */

/* A relay between libpressure and a real daemon that holds every io.pressured call the library writes to
 * the IDL's inputs, strictly: a key renamed in one of the library's encoders fails here, whether or not
 * the daemon would have minded. Its thread writes the record under the lock; the test reads it. */
#define RELAY_PAIRS 8
struct relay {
        int listen_fd, stop[2];
        char path[128];
        const char *daemon;
        pthread_t thread;
        pthread_mutex_t lock;
        const char *seen[16]; /* methods, short names from the IDL */
        size_t n_seen;
        unsigned n_bad;
        struct {
                int c, d;
                char *buf; /* what the client wrote, up to its last NUL */
                size_t len;
        } pair[RELAY_PAIRS];
        size_t n_pairs;
};

static void relay_check(struct relay *rl, const char *frame) {
        struct json_object *call = json_tokener_parse(frame), *method = NULL, *params = NULL;
        const char *name = NULL, *why = NULL;
        char *err = NULL;

        if (!call || !json_object_object_get_ex(call, "method", &method))
                why = "not a call";
        else if (strncmp((name = json_object_get_string(method)), "io.pressured.", 13) != 0)
                goto out; /* org.varlink.service's */
        json_object_object_foreach(call, key, v) {
                (void) v;
                if (!why && !streq(key, "method") && !streq(key, "parameters") && !streq(key, "more") &&
                    !streq(key, "oneway"))
                        why = "a key outside the call's envelope";
        }
        const struct idl_method *m = name ? idl_method(idl, name + 13) : NULL;
        if (!why && !m)
                why = "a method the IDL does not have";
        if (!why) {
                (void) json_object_object_get_ex(call, "parameters", &params);
                struct json_object *none = json_object_new_object();
                if (idl_validate(idl, &m->in, params ?: none, 0, &err) < 0)
                        why = err;
                json_object_put(none);
        }
        pthread_mutex_lock(&rl->lock);
        if (why) {
                printf("\n    the client wrote %s: %s", frame, why);
                rl->n_bad++;
        } else {
                bool known = false;
                for (size_t i = 0; i < rl->n_seen; i++)
                        known = known || streq(rl->seen[i], m->in.name);
                if (!known && rl->n_seen < ELEMENTSOF(rl->seen))
                        rl->seen[rl->n_seen++] = m->in.name;
        }
        pthread_mutex_unlock(&rl->lock);
out:
        free(err);
        json_object_put(call);
}

/* The client side of pair i wrote: pass it on, and check each whole call. */
static bool relay_from_client(struct relay *rl, size_t i) {
        char chunk[65536];
        ssize_t n = read(rl->pair[i].c, chunk, sizeof(chunk));
        if (n <= 0 || test_send_raw(rl->pair[i].d, chunk, (size_t) n) < 0)
                return false;
        char *b = realloc(rl->pair[i].buf, rl->pair[i].len + (size_t) n);
        if (!b)
                return false;
        memcpy(b + rl->pair[i].len, chunk, (size_t) n);
        rl->pair[i].buf = b;
        rl->pair[i].len += (size_t) n;
        size_t start = 0;
        for (size_t k = 0; k < rl->pair[i].len; k++)
                if (b[k] == 0) {
                        relay_check(rl, b + start);
                        start = k + 1;
                }
        memmove(b, b + start, rl->pair[i].len - start);
        rl->pair[i].len -= start;
        return true;
}

static bool relay_from_daemon(struct relay *rl, size_t i) {
        char chunk[65536];
        ssize_t n = read(rl->pair[i].d, chunk, sizeof(chunk));
        return n > 0 && test_send_raw(rl->pair[i].c, chunk, (size_t) n) == 0;
}

static void relay_drop(struct relay *rl, size_t i) {
        close(rl->pair[i].c);
        close(rl->pair[i].d);
        free(rl->pair[i].buf);
        rl->pair[i] = rl->pair[--rl->n_pairs];
}

static void *relay_run(void *userdata) {
        struct relay *rl = userdata;
        for (;;) {
                struct pollfd p[2 + 2 * RELAY_PAIRS] = {
                        { .fd = rl->stop[0], .events = POLLIN },
                        { .fd = rl->listen_fd, .events = POLLIN },
                };
                for (size_t i = 0; i < rl->n_pairs; i++) {
                        p[2 + 2 * i] = (struct pollfd){ .fd = rl->pair[i].c, .events = POLLIN };
                        p[3 + 2 * i] = (struct pollfd){ .fd = rl->pair[i].d, .events = POLLIN };
                }
                if (poll(p, 2 + 2 * rl->n_pairs, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                for (size_t i = rl->n_pairs; i-- > 0;) {
                        bool ok = true;
                        if (p[2 + 2 * i].revents)
                                ok = relay_from_client(rl, i);
                        if (ok && p[3 + 2 * i].revents)
                                ok = relay_from_daemon(rl, i);
                        if (!ok)
                                relay_drop(rl, i);
                }
                if (p[1].revents && rl->n_pairs < RELAY_PAIRS) {
                        int c = accept4(rl->listen_fd, NULL, NULL, SOCK_CLOEXEC), d = c >= 0 ? test_connect(rl->daemon) : -1;
                        if (c >= 0 && d >= 0)
                                rl->pair[rl->n_pairs++] = (typeof(rl->pair[0])){ .c = c, .d = d };
                        else if (c >= 0)
                                close(c);
                }
        }
        while (rl->n_pairs > 0)
                relay_drop(rl, 0);
        return NULL;
}

static int relay_start(struct relay *rl, const char *daemon_socket, const char *dir) {
        *rl = (struct relay){ .daemon = daemon_socket };
        pthread_mutex_init(&rl->lock, NULL);
        snprintf(rl->path, sizeof(rl->path), "%s/relay.sock", dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(rl->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, rl->path, strlen(rl->path) + 1);
        rl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (rl->listen_fd < 0 || bind(rl->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            listen(rl->listen_fd, 8) < 0 || pipe2(rl->stop, O_CLOEXEC) < 0)
                return -errno;
        test_cleanup_path(rl->path, false);
        return -pthread_create(&rl->thread, NULL, relay_run, rl);
}

static void relay_stop(struct relay *rl) {
        (void) !write(rl->stop[1], "x", 1);
        pthread_join(rl->thread, NULL);
        close(rl->stop[0]);
        close(rl->stop[1]);
        close(rl->listen_fd);
        unlink(rl->path);
        pthread_mutex_destroy(&rl->lock);
}

static bool relay_saw(struct relay *rl, const char *name) {
        bool saw = false;
        pthread_mutex_lock(&rl->lock);
        for (size_t i = 0; i < rl->n_seen; i++)
                saw = saw || streq(rl->seen[i], name);
        pthread_mutex_unlock(&rl->lock);
        return saw;
}

static unsigned lib_scans;

static uint64_t lib_count(struct pressure_shrinker *sh, struct pressure_shrink_control *sc, void *userdata) {
        (void) sh, (void) userdata;
        sc->nr_bytes = 4096 * 10;
        return 10;
}

static uint64_t lib_scan(struct pressure_shrinker *sh, struct pressure_shrink_control *sc, void *userdata) {
        (void) sh, (void) userdata;
        lib_scans++;
        return sc->nr_to_scan;
}

static void lib_limit(struct pressure_shrinker *sh, uint64_t bytes, void *userdata) {
        (void) sh, (void) bytes, (void) userdata;
}

static void lib_event(struct pressure_client *c, const struct pressure_scope *scope, int is_initial, void *userdata) {
        (void) c, (void) scope, (void) is_initial, (void) userdata;
}

/* Dispatch the library until done() holds or timeout_ms passed; also returns when fd (>= 0) is readable. */
static bool lib_dispatch_until(struct pressure_client *c, bool (*done)(void *), void *arg, int fd, int timeout_ms) {
        uint64_t end = test_now_ms() + (uint64_t) timeout_ms;
        while (!done(arg) && test_now_ms() < end) {
                struct pollfd p[2] = { { .fd = pressure_client_get_fd(c), .events = POLLIN }, { .fd = fd, .events = POLLIN } };
                (void) poll(p, fd >= 0 ? 2 : 1, MIN(timeout_ms, 100));
                if (p[0].revents)
                        (void) pressure_client_dispatch(c);
                if (fd >= 0 && p[1].revents)
                        return true;
        }
        return done(arg);
}

static bool shrinker_registered(void *arg) {
        return pressure_shrinker_get_id(arg) > 0;
}

static bool never(void *arg) {
        (void) arg;
        return false;
}

static struct pressure_shrinker *lib_shrinker(struct pressure_client *c, const char *name) {
        struct pressure_shrinker *sh = NULL;
        CU_ASSERT_FATAL(pressure_shrinker_alloc(c, 0, name, &sh) == 0);
        CU_ASSERT(pressure_shrinker_set_callbacks(sh, lib_count, lib_scan) == 0);
        CU_ASSERT(pressure_shrinker_set_limit_handler(sh, lib_limit) == 0);
        CU_ASSERT(pressure_shrinker_register(sh) == 0);
        CU_ASSERT(lib_dispatch_until(c, shrinker_registered, sh, -1, 10000));
        return sh;
}

static void test_library_calls(void) {
        const char *skip = test_need_root_psi();
        if (skip) {
                printf("\n    not run: %s", skip);
                return;
        }
        struct test_daemon d;
        struct relay rl;
        CU_ASSERT_FATAL(test_daemon_start(&d, NULL) == 0);
        CU_ASSERT_FATAL(relay_start(&rl, d.socket, d.dir) == 0);
        struct pressure_client *c = NULL;
        CU_ASSERT_FATAL(pressure_client_new(rl.path, &c) == 0);

        struct pressure_status *st = NULL;
        CU_ASSERT(pressure_client_get_status(c, &st) == 0);
        pressure_status_unref(st);
        const char *scopes[] = { "system", NULL };
        CU_ASSERT(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, lib_event, NULL) == 0);
        /* The first registers with Serve, the second, once Serve is up, with AddShrinker. */
        struct pressure_shrinker *a = lib_shrinker(c, "iface-a"), *b = lib_shrinker(c, "iface-b");

        /* A scan, asked on a connection of the test's own: the library answers it with Answer. */
        int raw = test_connect(d.socket);
        CU_ASSERT_FATAL(raw >= 0);
        char call[256];
        snprintf(call, sizeof(call), "{\"method\":\"io.pressured.Shrink\",\"parameters\":{\"shrinker\":%llu,"
                 "\"nr_to_scan\":4}}", (unsigned long long) pressure_shrinker_get_id(a));
        CU_ASSERT_FATAL(test_send_raw(raw, call, strlen(call) + 1) == 0);
        CU_ASSERT(lib_dispatch_until(c, never, NULL, raw, 10000)); /* the Shrink's reply: it was answered */
        CU_ASSERT(lib_scans > 0);
        close(raw);

        pressure_shrinker_free(b); /* RemoveShrinker, one way: the relay is waited for */
        uint64_t end = test_now_ms() + 10000;
        while (!relay_saw(&rl, "RemoveShrinker") && test_now_ms() < end)
                lib_dispatch_until(c, never, NULL, -1, 50);
        pressure_shrinker_free(a);
        pressure_client_unref(c);
        relay_stop(&rl);

        const char *want[] = { "GetStatus", "Subscribe", "Serve", "AddShrinker", "Answer", "RemoveShrinker" };
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                bool saw = relay_saw(&rl, want[i]);
                if (!saw)
                        printf("\n    the library sent no %s", want[i]);
                CU_ASSERT(saw);
        }
        CU_ASSERT_EQUAL(rl.n_bad, 0u);
        CU_ASSERT_EQUAL(test_daemon_stop(&d), 0);
}

/* ---- the Python client ---- */

/* The Python and the source root to run the Python client with; NULL when the build has no Python. */
static const char *python_bin(void) {
        const char *p = getenv("PRESSURED_PYTHON");
        return p && *p ? p : NULL;
}

/* An IDL field's type as text, as the IDL writes it: "?[]ScopeState". */
static void idl_type_text(const struct idl_field *f, char *buf, size_t size) {
        static const char *const kinds[] = { [IDL_BOOL] = "bool", [IDL_INT] = "int", [IDL_FLOAT] = "float",
                                             [IDL_STRING] = "string", [IDL_OBJECT] = "object" };
        snprintf(buf, size, "%s%s%s", f->optional ? "?" : "", f->array ? "[]" : "",
                 f->kind == IDL_NAMED ? f->type_name : kinds[f->kind]);
}

/* The Python's fields of one struct against the IDL's: each of its fields the IDL's, of the same type;
 * with both_ways, each of the IDL's its too. Returns the mismatches, each said. */
static unsigned python_struct_check(const char *what, const struct idl_struct *s, struct json_object *fields,
                                    bool both_ways) {
        unsigned bad = 0;
        char text[128];
        if (!s) {
                printf("\n    Python's %s: the IDL has no such type or method", what);
                return 1;
        }
        json_object_object_foreach(fields, name, type) {
                const struct idl_field *f = idl_field(s, name);
                if (!f) {
                        printf("\n    Python's %s.%s: not in the IDL", what, name);
                        bad++;
                        continue;
                }
                idl_type_text(f, text, sizeof(text));
                if (!streq(text, json_object_get_string(type))) {
                        printf("\n    Python's %s.%s is %s, the IDL's %s", what, name, json_object_get_string(type), text);
                        bad++;
                }
        }
        for (size_t i = 0; both_ways && i < s->n_fields; i++)
                if (!json_object_object_get_ex(fields, s->fields[i].name, NULL)) {
                        printf("\n    %s.%s is in the IDL but the Python client does not read it", what,
                               s->fields[i].name);
                        bad++;
                }
        return bad;
}

/* Run python with the source tree's package: its output, or NULL. */
static char *python_output(const char *args) {
        char cmd[2048], *out = calloc(1, 1 << 20);
        const char *root = getenv("PRESSURED_SOURCE_ROOT");
        snprintf(cmd, sizeof(cmd), "PYTHONPATH='%s/python' '%s' %s", root ? root : "..", python_bin(), args);
        FILE *p = popen(cmd, "r");
        if (!p || !out) {
                free(out);
                return NULL;
        }
        size_t n = fread(out, 1, (1 << 20) - 1, p);
        out[n] = 0;
        if (pclose(p) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

/* The Python client's schema (its dataclasses, the calls it writes, its enums and errors) is the IDL's:
 * every type both ways, every reply both ways, every call parameter one way (it need not send all). */
static void test_python_schema(void) {
        if (!python_bin()) {
                printf("\n    not run: no Python in this build");
                return;
        }
        char *text = python_output("-c 'import json, pressure.protocol as p, pressure.errors as e; s = p.schema(); "
                                   "s[\"errors\"] = sorted(e.ERRORS); print(json.dumps(s))'");
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        struct json_object *s = json_tokener_parse(text), *part;
        free(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        unsigned bad = 0, n = 0;
        CU_ASSERT_FATAL(json_object_object_get_ex(s, "types", &part));
        json_object_object_foreach(part, tname, tfields) {
                bad += python_struct_check(tname, idl_type(idl, tname), tfields, true);
                n++;
        }
        CU_ASSERT(n >= 20);
        CU_ASSERT_FATAL(json_object_object_get_ex(s, "replies", &part));
        json_object_object_foreach(part, rname, rfields) {
                const struct idl_method *m = idl_method(idl, rname);
                bad += python_struct_check(rname, m ? &m->out : NULL, rfields, true);
        }
        CU_ASSERT_FATAL(json_object_object_get_ex(s, "calls", &part));
        json_object_object_foreach(part, cname, cfields) {
                const struct idl_method *m = idl_method(idl, cname);
                bad += python_struct_check(cname, m ? &m->in : NULL, cfields, false);
        }
        CU_ASSERT_FATAL(json_object_object_get_ex(s, "enums", &part));
        json_object_object_foreach(part, ename, values) {
                const struct idl_struct *e = idl_type(idl, ename);
                bool same = e && e->is_enum && e->n_values == json_object_array_length(values);
                for (size_t i = 0; same && i < e->n_values; i++)
                        same = streq(e->values[i], json_object_get_string(json_object_array_get_idx(values, i)));
                if (!same) {
                        printf("\n    Python's enum %s is not the IDL's", ename);
                        bad++;
                }
        }
        /* Errors: each of io.pressured's has its exception, and each io.pressured exception is an error. */
        CU_ASSERT_FATAL(json_object_object_get_ex(s, "errors", &part));
        for (size_t i = 0; i < idl->n_errors; i++) {
                char full[128];
                bool found = false;
                snprintf(full, sizeof(full), "io.pressured.%s", idl->errors[i].name);
                for (size_t k = 0; k < json_object_array_length(part); k++)
                        found = found || streq(full, json_object_get_string(json_object_array_get_idx(part, k)));
                if (!found) {
                        printf("\n    %s has no Python exception", full);
                        bad++;
                }
        }
        for (size_t k = 0; k < json_object_array_length(part); k++) {
                const char *name = json_object_get_string(json_object_array_get_idx(part, k));
                if (strncmp(name, "io.pressured.", 13) == 0 && !idl_error(idl, name + 13)) {
                        printf("\n    the Python exception of %s names no error of the IDL", name);
                        bad++;
                }
        }
        CU_ASSERT_EQUAL(bad, 0u);
        json_object_put(s);
}

/* Every call the Python client writes, relayed to a real daemon and held to the IDL's inputs strictly. */
static void test_python_calls(void) {
        const char *skip = test_need_root_psi();
        if (!python_bin())
                skip = "no Python in this build";
        if (skip) {
                printf("\n    not run: %s", skip);
                return;
        }
        struct test_daemon d;
        struct relay rl;
        char args[512];
        const char *root = getenv("PRESSURED_SOURCE_ROOT");
        CU_ASSERT_FATAL(test_daemon_start(&d, NULL) == 0);
        CU_ASSERT_FATAL(relay_start(&rl, d.socket, d.dir) == 0);
        snprintf(args, sizeof(args), "'%s/tests/python/iface_client.py' '%s'", root ? root : "..", rl.path);
        char *out = python_output(args);
        CU_ASSERT_PTR_NOT_NULL(out);
        CU_ASSERT(out && strstr(out, "done"));
        free(out);
        relay_stop(&rl);
        const char *want[] = { "GetStatus", "GetConfiguration", "Subscribe", "Serve", "AddShrinker", "Shrink",
                               "Answer", "RemoveShrinker" };
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                bool saw = relay_saw(&rl, want[i]);
                if (!saw)
                        printf("\n    the Python client sent no %s", want[i]);
                CU_ASSERT(saw);
        }
        CU_ASSERT_EQUAL(rl.n_bad, 0u);
        CU_ASSERT_EQUAL(test_daemon_stop(&d), 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "the IDL parses", test_parses },
                { "method tables match the IDL", test_method_tables },
                { "errors match the IDL", test_errors },
                { "the codec writes what the IDL says", test_codec_against_idl },
                { "the codec reads what it writes, and refuses what is missing", test_codec_round_trip },
                { "replies recorded in docs/protocol.md", test_recorded_replies },
                { "every method's reply from a real daemon", test_live_replies },
                { "pressurectl reads replies only through the codec", test_pressurectl_decodes },
                { "the library writes only calls the IDL has", test_library_calls },
                { "the Python client reads and writes what the IDL has", test_python_schema },
                { "the Python client writes only calls the IDL has", test_python_calls },
                {},
        };
        int r = test_run("interface", cases, NULL);
        idl_free(idl);
        for (size_t i = 0; i < n_seen; i++)
                free(seen[i]);
        return r;
}
