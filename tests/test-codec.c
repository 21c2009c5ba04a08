/* SPDX-License-Identifier: MIT */
/* The protocol codec against docs/protocol.md: every snapshot the page shows, in every recorded reply,
 * decodes, and encodes again to exactly the text the page shows. Hand-built snapshots check the
 * decoded values, and malformed objects are refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "json_build.h"
#include "protocol.h"
#include "utf8.h"
#include "test-util.h"

static char *read_docs(void) {
        const char *root = getenv("PRESSURED_SOURCE_ROOT");
        char path[4096];
        snprintf(path, sizeof(path), "%s/docs/protocol.md", root ? root : "..");
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *text = calloc(1, 1 << 20);
        size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        if (text)
                text[n] = 0;
        return text;
}

static const char *plain(struct json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Compare an encoding with the documented object, then free it. */
static void check_same(struct json_object *encoded, struct json_object *documented) {
        CU_ASSERT_STRING_EQUAL(plain(encoded), plain(documented));
        json_object_put(encoded);
}

enum kind { STATE, CHANGE, REQUEST, RESULT, REGISTRATION, INFO, MEMORY_EVENT, LIMIT, CONFIGURATION, _KIND_MAX };
static unsigned seen[_KIND_MAX];

static void round_trip(enum kind k, struct json_object *o) {
        seen[k]++;
        switch (k) {
        case STATE: {
                struct scope_snapshot s;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_scope_state(o, &s), 0);
                check_same(protocol_encode_scope_state(&s), o);
                break;
        }
        case MEMORY_EVENT: {
                struct memory_event_snapshot e;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_memory_event(o, &e), 0);
                check_same(protocol_encode_memory_event(&e), o);
                break;
        }
        case CHANGE: {
                struct scope_snapshot s;
                enum level prev;
                unsigned coalesced;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_level_change(o, &s, &prev, &coalesced), 0);
                check_same(protocol_encode_level_change(&s, prev, coalesced), o);
                break;
        }
        case REQUEST: {
                struct shrink_request_snapshot q;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_shrink_request(o, &q), 0);
                check_same(protocol_encode_shrink_request(&q), o);
                break;
        }
        case RESULT: {
                struct shrink_result r;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_shrink_result(o, &r), 0);
                check_same(protocol_encode_shrink_result(&r), o);
                break;
        }
        case REGISTRATION: {
                struct shrink_registration g;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_registration(o, &g), 0);
                check_same(protocol_encode_registration(&g), o);
                free(g.shrinkers);
                break;
        }
        case INFO: {
                struct shrinker_info_snapshot i;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_shrinker_info(o, &i), 0);
                check_same(protocol_encode_shrinker_info(&i), o);
                free(i.nodes);
                break;
        }
        case LIMIT: {
                struct shrinker_limit l;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_shrinker_limit(o, &l), 0);
                check_same(protocol_encode_shrinker_limit(&l), o);
                break;
        }
        case CONFIGURATION: {
                struct configuration_snapshot c;
                CU_ASSERT_EQUAL_FATAL(protocol_decode_configuration(o, &c), 0);
                check_same(protocol_encode_configuration(&c), o);
                protocol_configuration_done(&c);
                break;
        }
        default:
                abort();
        }
}

static void each(enum kind k, struct json_object *list) {
        for (size_t i = 0; list && i < json_object_array_length(list); i++)
                round_trip(k, json_object_array_get_idx(list, i));
}

static void check_reply(struct json_object *msg) {
        struct json_object *p, *v;
        if (!json_object_object_get_ex(msg, "parameters", &p) || !json_object_is_type(p, json_type_object))
                return;
        if (json_object_object_get_ex(msg, "error", &v))
                return;
        if (json_object_object_get_ex(p, "system", &v))
                round_trip(STATE, v);
        if (json_object_object_get_ex(p, "nodes", &v))
                each(STATE, v);
        if (json_object_object_get_ex(p, "cgroups", &v))
                each(STATE, v);
        if (json_object_object_get_ex(p, "state", &v))
                each(STATE, v);
        if (json_object_object_get_ex(p, "event", &v))
                round_trip(CHANGE, v);
        if (json_object_object_get_ex(p, "memory_event", &v))
                round_trip(MEMORY_EVENT, v);
        if (json_object_object_get_ex(p, "request", &v) && json_object_is_type(v, json_type_object))
                round_trip(REQUEST, v);
        if (json_object_object_get_ex(p, "requests", &v))
                each(REQUEST, v);
        if (json_object_object_get_ex(p, "results", &v))
                each(RESULT, v);
        if (json_object_object_get_ex(p, "registered", &v))
                round_trip(REGISTRATION, v);
        if (json_object_object_get_ex(p, "shrinkers", &v))
                each(INFO, v);
        if (json_object_object_get_ex(p, "limits", &v))
                each(LIMIT, v);
        if (json_object_object_get_ex(p, "levels", &v))
                round_trip(CONFIGURATION, p);
}

/* Every reply line of the page: "<- {...}", "S<- {...}". */
static void test_documented_replies(void) {
        char *docs = read_docs();
        CU_ASSERT_PTR_NOT_NULL_FATAL(docs);
        for (char *line = strtok(docs, "\n"); line; line = strtok(NULL, "\n")) {
                char *arrow = strstr(line, "<- {");
                if (!arrow || arrow - line > 2)
                        continue;
                struct json_object *msg = json_tokener_parse(arrow + 3);
                CU_ASSERT_PTR_NOT_NULL(msg);
                check_reply(msg);
                json_object_put(msg);
        }
        free(docs);
        CU_ASSERT(seen[STATE] >= 3);
        CU_ASSERT(seen[CHANGE] >= 2);
        CU_ASSERT(seen[REQUEST] >= 5);
        CU_ASSERT(seen[RESULT] >= 1);
        CU_ASSERT(seen[REGISTRATION] >= 1);
        CU_ASSERT(seen[INFO] >= 1);
        CU_ASSERT(seen[MEMORY_EVENT] >= 1);
        CU_ASSERT(seen[LIMIT] >= 1);
        CU_ASSERT(seen[CONFIGURATION] >= 1);
}

/* Decoded values are the documented ones; a hand-built snapshot encodes to the documented text. */
static void test_values(void) {
        const char *text = "{\"scope\":{\"type\":\"cgroup\",\"cgroup\":\"/a\"},\"previous\":\"ok\",\"level\":\"low\","
                           "\"pressure\":{\"some\":{\"avg10\":6.70,\"avg60\":1.21,\"avg300\":0.25,\"total\":762464}},"
                           "\"cgroup_memory\":{\"usage\":16375808,\"limit\":16777216},\"reclaim_target\":167772,"
                           "\"timestamp\":2216556267,\"coalesced\":3,\"removed\":true}";
        struct json_object *o = json_tokener_parse(text);
        struct scope_snapshot s;
        enum level prev;
        unsigned coalesced;

        CU_ASSERT_EQUAL_FATAL(protocol_decode_level_change(o, &s, &prev, &coalesced), 0);
        CU_ASSERT_EQUAL(s.id.type, SCOPE_CGROUP);
        CU_ASSERT_STRING_EQUAL(s.id.cgroup, "/a");
        CU_ASSERT_EQUAL(prev, LEVEL_OK);
        CU_ASSERT_EQUAL(s.level, LEVEL_LOW);
        CU_ASSERT_TRUE(s.have_psi);
        CU_ASSERT_FALSE(s.psi.has_full);
        CU_ASSERT_DOUBLE_EQUAL(s.psi.line[PSI_SOME].avg10, 6.70, 1e-9);
        CU_ASSERT_EQUAL(s.psi.line[PSI_SOME].total, 762464u);
        CU_ASSERT_FALSE(s.have_node_memory);
        CU_ASSERT_TRUE(s.have_cgroup_memory);
        CU_ASSERT_EQUAL(s.usage, 16375808u);
        CU_ASSERT_EQUAL(s.limit, 16777216u);
        CU_ASSERT_EQUAL(s.reclaim_target, 167772u);
        CU_ASSERT_EQUAL(s.since, 2216556267u);
        CU_ASSERT_EQUAL(coalesced, 3u);
        CU_ASSERT_TRUE(s.removed);
        json_object_put(o);

        const struct shrink_request_snapshot q = {
                .id = 1, .shrinker = 2, .op = SHRINK_OP_SCAN, .node = 0, .cgroup = "/", .nr_to_scan = 5,
                .priority = 0, .deadline = 3260996274, .scope_type = SCOPE_CGROUP, .level = LEVEL_LOW,
        };
        o = protocol_encode_shrink_request(&q);
        CU_ASSERT_STRING_EQUAL(plain(o), "{\"id\":1,\"shrinker\":2,\"op\":\"scan\",\"node\":0,\"cgroup\":\"/\","
                                         "\"nr_to_scan\":5,\"priority\":0,\"deadline\":3260996274,\"scope\":\"cgroup\",\"level\":\"low\"}");
        json_object_put(o);
        /* A count has no nr_to_scan. */
        struct shrink_request_snapshot count = q;
        count.op = SHRINK_OP_COUNT;
        o = protocol_encode_shrink_request(&count);
        CU_ASSERT_PTR_NULL(strstr(plain(o), "nr_to_scan"));
        struct shrink_request_snapshot back;
        CU_ASSERT_EQUAL(protocol_decode_shrink_request(o, &back), 0);
        CU_ASSERT_EQUAL(back.op, SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(back.scope_type, SCOPE_CGROUP);
        CU_ASSERT_EQUAL(back.level, LEVEL_LOW);
        json_object_put(o);
        /* An explicit Shrink's requests name no level. */
        count.level = -1;
        o = protocol_encode_shrink_request(&count);
        CU_ASSERT_PTR_NULL(strstr(plain(o), "level"));
        CU_ASSERT_EQUAL(protocol_decode_shrink_request(o, &back), 0);
        CU_ASSERT_EQUAL(back.level, -1);
        json_object_put(o);

        /* A scope with no limit has no limit on the wire, and decodes back to "none". */
        struct scope_snapshot c = {
                .id = { .type = SCOPE_CGROUP, .cgroup = "/b" }, .have_cgroup_memory = true, .usage = 5,
                .limit = UINT64_MAX,
        };
        o = protocol_encode_scope_state(&c);
        CU_ASSERT_STRING_EQUAL(plain(o), "{\"scope\":{\"type\":\"cgroup\",\"cgroup\":\"/b\"},\"level\":\"ok\","
                                         "\"cgroup_memory\":{\"usage\":5},\"reclaim_target\":0,\"since\":0}");
        CU_ASSERT_EQUAL(protocol_decode_scope_state(o, &s), 0);
        CU_ASSERT_EQUAL(s.limit, UINT64_MAX);
        json_object_put(o);
}

static int decode_state_text(const char *text) {
        struct json_object *o = json_tokener_parse(text);
        struct scope_snapshot s;
        int r = o ? protocol_decode_scope_state(o, &s) : -EINVAL;
        json_object_put(o);
        return r;
}

static int decode_ref_text(const char *text, const char **field) {
        struct json_object *o = json_tokener_parse(text);
        struct scope_id id;
        int r = protocol_decode_scope_ref(o, &id, field);
        json_object_put(o);
        return r;
}

static void test_malformed(void) {
        const char *field;
        CU_ASSERT_EQUAL(decode_state_text("[]"), -EINVAL);
        CU_ASSERT_EQUAL(decode_state_text("{\"level\":\"ok\",\"reclaim_target\":0,\"since\":0}"), -EINVAL);
        CU_ASSERT_EQUAL(decode_state_text("{\"scope\":{\"type\":\"system\"},\"level\":\"loud\",\"reclaim_target\":0,\"since\":0}"),
                        -EINVAL);
        CU_ASSERT_EQUAL(decode_state_text("{\"scope\":{\"type\":\"system\"},\"level\":\"ok\",\"reclaim_target\":-1,\"since\":0}"),
                        -EINVAL);
        CU_ASSERT_EQUAL(decode_state_text("{\"scope\":{\"type\":\"system\"},\"level\":\"ok\",\"pressure\":{},"
                                          "\"reclaim_target\":0,\"since\":0}"),
                        -EINVAL);
        CU_ASSERT_EQUAL(decode_state_text("{\"scope\":{\"type\":\"system\"},\"level\":\"ok\",\"reclaim_target\":0,\"since\":0}"), 0);

        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":\"node\"}", &field), -EINVAL);
        CU_ASSERT_STRING_EQUAL(field, "node");
        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":\"system\",\"cgroup\":\"/x\"}", &field), -EINVAL);
        CU_ASSERT_STRING_EQUAL(field, "cgroup");
        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":\"node\",\"node\":-1}", &field), -EINVAL);
        CU_ASSERT_STRING_EQUAL(field, "node");
        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":3}", &field), -EINVAL);
        CU_ASSERT_STRING_EQUAL(field, "type");
        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":\"system\",\"x\":1}", &field), -EINVAL);
        CU_ASSERT_EQUAL(decode_ref_text("\"system\"", &field), -EINVAL);
        CU_ASSERT_EQUAL(decode_ref_text("{\"type\":\"node\",\"node\":1}", &field), 0);
}

/* Requests written as text are the same JSON as the codec's objects, escapes and saturation included. */
static void test_request_text(void) {
        static const char *const cgroups[] = { "/", "/system.slice/a b.service", "/q\"uote\\back", "/ctl\x01\n\t\x1f\x7f/ü", "" };
        for (size_t i = 0; i < sizeof(cgroups) / sizeof(cgroups[0]); i++)
                for (int op = 0; op < 2; op++) {
                        const struct shrink_request_snapshot q = {
                                .id = i == 3 ? UINT64_MAX : 17 + i,
                                .shrinker = 3,
                                .op = op ? SHRINK_OP_SCAN : SHRINK_OP_COUNT,
                                .node = i == 2 ? -1 : (int) i,
                                .cgroup = cgroups[i],
                                .nr_to_scan = i == 4 ? (uint64_t) INT64_MAX + 5 : 128,
                                .priority = 12 - (int) i,
                                .deadline = 123456789012ULL,
                                .scope_type = (enum scope_type) (i % 3),
                                .level = (int) i % 5 - 1, /* -1 (none) through critical */
                        };
                        struct json_text t = {};
                        CU_ASSERT_EQUAL(json_text_append(&t, "x", 1), 0);
                        CU_ASSERT_EQUAL(protocol_text_append_shrink_request(&t, &q), 0);
                        struct json_object *o = protocol_encode_shrink_request(&q);
                        const char *want = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
                        CU_ASSERT_STRING_EQUAL(t.data + 1, want);
                        CU_ASSERT_EQUAL(t.len, strlen(want) + 1);
                        json_object_put(o);
                        json_text_done(&t);
                }
}

/* Prometheus label values: a cgroup path may hold a quote, a backslash or a newline. */
static void test_metrics_label(void) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        metrics_write_label(f, "/a\"b\\c\nd");
        metrics_write_label(f, NULL);
        fclose(f);
        CU_ASSERT_STRING_EQUAL(buf, "/a\\\"b\\\\c\\nd");
        free(buf);
}

/* UTF-8: what is valid, what is not, and how a kernel-made name goes out. */
static void test_utf8(void) {
        static const char *const valid[] = { "", "/system.slice", "/ü/€/\xf0\x9f\x98\x80", "\x7f", "\xef\xbf\xbd" };
        static const char *const invalid[] = { "\xff", "/a\x80", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                              "\xc3", "\xe2\x82", "\xf8\x88\x80\x80\x80" };
        for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
                CU_ASSERT_TRUE(utf8_is_valid(valid[i]));
        for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
                CU_ASSERT_FALSE(utf8_is_valid(invalid[i]));
        char *e = utf8_escape_invalid("/a\xff\xc3" "b/ü");
        CU_ASSERT_STRING_EQUAL(e, "/a\xef\xbf\xbd\xef\xbf\xbd" "b/ü");
        CU_ASSERT_TRUE(utf8_is_valid(e));
        free(e);

        /* In a reply: escaped; in a label: escaped too. */
        struct json_object *o = json_object_new_object();
        jb_set_string(&o, "cgroup", "/x\xfe");
        CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "cgroup")), "/x\xef\xbf\xbd");
        json_object_put(o);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        metrics_write_label(f, "/\x80\"ü");
        fclose(f);
        CU_ASSERT_STRING_EQUAL(buf, "/\xef\xbf\xbd\\\"ü");
        free(buf);

        /* From a client: refused as a parameter. */
        struct scope_id id;
        const char *field;
        o = json_tokener_parse("{\"type\":\"cgroup\",\"cgroup\":\"/ok\"}");
        CU_ASSERT_EQUAL(protocol_decode_scope_ref(o, &id, &field), 0);
        json_object_put(o);
        o = json_object_new_object();
        jb_set(&o, "type", json_object_new_string("cgroup"));
        jb_set(&o, "cgroup", json_object_new_string("/bad\xff"));
        CU_ASSERT_EQUAL(protocol_decode_scope_ref(o, &id, &field), -EINVAL);
        CU_ASSERT_STRING_EQUAL(field, "cgroup");
        json_object_put(o);
}

/* GetConfiguration: a daemon from before the regulator is still read; a reply missing a level, with a
 * kind the kernel has not, or a list that is not one of strings is refused. */
static const char level_text[] =
        "{\"level\":\"%s\",\"pressure\":{\"kind\":\"%s\",\"stall_usec\":1,\"window_usec\":2},\"node_factor\":1.0}";

static int decode_configuration_text(const char *kinds[3], const char *tail, struct configuration_snapshot *ret) {
        char text[2048], lv[3][256];
        static const char *const names[] = { "low", "medium", "critical" };
        size_t n = 0;
        for (size_t i = 0; i < 3; i++)
                if (kinds[i])
                        snprintf(lv[n++], sizeof(lv[0]), level_text, names[i], kinds[i]);
        snprintf(text, sizeof(text),
                 "{\"levels\":[%s%s%s%s%s],\"hold_usec\":1,\"sample_interval_usec\":2,\"round_interval_usec\":3,"
                 "\"request_timeout_usec\":4,\"memory_pressure_level\":\"low\",\"low_memory_monitor\":false,"
                 "\"log_level\":\"info\"%s}",
                 n > 0 ? lv[0] : "", n > 1 ? "," : "", n > 1 ? lv[1] : "", n > 2 ? "," : "", n > 2 ? lv[2] : "", tail);
        struct json_object *o = json_tokener_parse(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        struct configuration_snapshot c;
        int r = protocol_decode_configuration(o, &c);
        if (r >= 0 && ret)
                *ret = c; /* the strings point into o: only numbers and flags are looked at */
        else if (r >= 0)
                protocol_configuration_done(&c);
        json_object_put(o);
        return r;
}

static void test_configuration(void) {
        const char *kinds[3] = { "some", "some", "full" };
        struct configuration_snapshot c;
        CU_ASSERT_EQUAL_FATAL(decode_configuration_text(kinds, ",\"cgroups\":[\"/a\"]", &c), 0);
        CU_ASSERT_FALSE(c.have_regulator);
        CU_ASSERT_FALSE(c.have_value_cgroups);
        CU_ASSERT_FALSE(c.levels[0].have_headroom);
        CU_ASSERT_EQUAL(c.levels[2].pressure.kind, PSI_FULL);
        CU_ASSERT_EQUAL(c.levels[2].level, LEVEL_CRITICAL);
        CU_ASSERT_EQUAL(c.n_cgroups, 1u);
        CU_ASSERT_EQUAL(c.request_timeout_usec, 4u);
        protocol_configuration_done(&c);

        CU_ASSERT_EQUAL(decode_configuration_text(kinds, "", NULL), -EINVAL);                      /* no cgroups */
        CU_ASSERT_EQUAL(decode_configuration_text(kinds, ",\"cgroups\":[1]", NULL), -EINVAL);   /* not strings */
        CU_ASSERT_EQUAL(decode_configuration_text(kinds, ",\"cgroups\":[],\"regulate_budget_usec\":1", NULL),
                        -EINVAL); /* a regulator without its interval */
        CU_ASSERT_EQUAL(decode_configuration_text(kinds, ",\"cgroups\":[],\"value_cgroups\":\"/\"", NULL), -EINVAL);
        const char *two[3] = { "some", "some", NULL }, *odd[3] = { "some", "most", "full" };
        CU_ASSERT_EQUAL(decode_configuration_text(two, ",\"cgroups\":[]", NULL), -EINVAL);
        CU_ASSERT_EQUAL(decode_configuration_text(odd, ",\"cgroups\":[]", NULL), -EINVAL);
}

int main(void) {
        static const struct test_case cases[] = {
                { "GetConfiguration, old and malformed", test_configuration },
                { "UTF-8 in and out", test_utf8 },
                { "documented replies encode as shown and decode back", test_documented_replies },
                { "decoded values", test_values },
                { "malformed objects are refused", test_malformed },
                { "requests as text", test_request_text },
                { "metrics label values", test_metrics_label },
                {},
        };
        return test_run("codec", cases, NULL);
}
