/* SPDX-License-Identifier: MIT */
/* Fuzz target: everything the daemon parses out of a client's message once it is JSON. The input is
 * taken as a JSON text; the object is run through the parameter tables (every type) and through every
 * decoder of the codec, and what decodes is encoded again. Nothing may crash, leak or read out of
 * bounds; a decoder must refuse what it cannot represent. Built as a libFuzzer target with
 * -Dfuzzer=true (clang), and otherwise with fuzz-driver.c, which replays a corpus (a unit test). */
#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "protocol.h"
#include "scope_id.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct all_types {
        int64_t i, j;
        bool b;
        const char *s;
        struct json_object *array, *object;
        int level;
};

static const struct param table[] = {
        { "token", PARAM_STRING, offsetof(struct all_types, s) },
        { "request", PARAM_INT, offsetof(struct all_types, i), .mandatory = true },
        { "count", PARAM_INT, offsetof(struct all_types, j), .min = INT64_MIN + 1 },
        { "stop", PARAM_BOOL, offsetof(struct all_types, b) },
        { "scopes", PARAM_ARRAY, offsetof(struct all_types, array) },
        { "scope", PARAM_OBJECT, offsetof(struct all_types, object) },
        { "min_level", PARAM_LEVEL, offsetof(struct all_types, level) },
        {}
};

static void decode_everything(struct json_object *o) {
        struct scope_snapshot snap;
        struct shrink_request_snapshot q;
        struct shrink_result r;
        struct shrink_registration g;
        struct shrinker_info_snapshot info;
        struct scope_id id;
        enum level prev;
        unsigned coalesced;
        const char *field;

        if (protocol_decode_scope_ref(o, &id, &field) >= 0)
                json_object_put(protocol_encode_scope_ref(&id));
        if (protocol_decode_scope_state(o, &snap) >= 0)
                json_object_put(protocol_encode_scope_state(&snap));
        if (protocol_decode_level_change(o, &snap, &prev, &coalesced) >= 0)
                json_object_put(protocol_encode_level_change(&snap, prev, coalesced));
        if (protocol_decode_shrink_request(o, &q) >= 0)
                json_object_put(protocol_encode_shrink_request(&q));
        if (protocol_decode_shrink_result(o, &r) >= 0)
                json_object_put(protocol_encode_shrink_result(&r));
        if (protocol_decode_registration(o, &g) >= 0) {
                json_object_put(protocol_encode_registration(&g));
                free(g.shrinkers);
        }
        if (protocol_decode_shrinker_info(o, &info) >= 0) {
                json_object_put(protocol_encode_shrinker_info(&info));
                free(info.nodes);
        }
        /* Whole replies, as pressurectl reads them. */
        struct configuration_snapshot conf;
        struct status_snapshot status;
        struct shrinker_info_snapshot *infos;
        struct shrink_result *results;
        size_t n;
        if (protocol_decode_configuration(o, &conf) >= 0) {
                json_object_put(protocol_encode_configuration(&conf));
                protocol_configuration_done(&conf);
        }
        if (protocol_decode_status(o, &status) >= 0)
                protocol_status_done(&status);
        if (protocol_decode_shrinkers_reply(o, &infos, &n) >= 0)
                protocol_shrinker_infos_free(infos, n);
        if (protocol_decode_shrink_reply(o, &results, &n) >= 0)
                free(results);
        struct shrink_answer *answers;
        size_t n_answers;
        const char *token;
        if (protocol_decode_answer_call(o, &token, &answers, &n_answers, &field) >= 0)
                free(answers);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 65536)
                return 0; /* the daemon refuses larger messages before parsing */

        /* Names from the command line and the configuration go through scope_id. */
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        struct scope_id id;
        (void) scope_id_from_string(text, &id);

        struct json_tokener *tok = json_tokener_new_ex(64);
        struct json_object *o = tok ? json_tokener_parse_ex(tok, text, (int) size) : NULL;
        json_tokener_free(tok);
        if (o) {
                struct all_types out = {};
                const char *bad;
                (void) params_dispatch(o, table, &out, &bad);
                decode_everything(o);
                /* The parts a message nests: every value of the object, every element of an array. */
                if (json_object_is_type(o, json_type_object)) {
                        json_object_object_foreach(o, key, val) {
                                (void) key;
                                decode_everything(val);
                                for (size_t i = 0; json_object_is_type(val, json_type_array) &&
                                                   i < json_object_array_length(val);
                                     i++)
                                        decode_everything(json_object_array_get_idx(val, i));
                        }
                }
                json_object_put(o);
        }
        free(text);
        return 0;
}
