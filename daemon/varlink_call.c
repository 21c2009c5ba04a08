/* SPDX-License-Identifier: MIT */
#include "varlink_call.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "macro.h"

/* One whole JSON object, nothing after it; NULL otherwise. */
struct json_object *varlink_call_parse_object(const char *text, size_t len, const char **ret_bad) {
        struct json_tokener *tok = json_tokener_new_ex(64);
        if (!tok) {
                *ret_bad = NULL;
                return NULL;
        }
        errno = 0;
        struct json_object *msg = json_tokener_parse_ex(tok, text, (int) len);
        enum json_tokener_error jerr = json_tokener_get_error(tok);
        size_t end = json_tokener_get_parse_end(tok);
        int saved_errno = errno;
        json_tokener_free(tok);

        /* A failed allocation is not the peer's fault. json-c 0.17 says so; before it, malloc's errno
         * tells it from bad JSON. */
        bool out_of_memory = !msg && saved_errno == ENOMEM;
#if JSON_C_VERSION_NUM >= ((0 << 16) | (17 << 8))
        out_of_memory = out_of_memory || jerr == json_tokener_error_memory;
#endif
        *ret_bad = out_of_memory ? NULL : "message is not valid JSON";
        if (!*ret_bad)
                return NULL;
        if (msg && jerr == json_tokener_success && end == len) {
                if (json_object_is_type(msg, json_type_object))
                        return msg;
                *ret_bad = "message is not a JSON object";
        }
        json_object_put(msg);
        return NULL;
}

/* The call's envelope: method, parameters and at most one flag. Returns what is wrong, or NULL. */
const char *varlink_call_parse(struct json_object *msg, struct varlink_call *ret) {
        assert(ret);

        struct varlink_call call = {};
        unsigned n_flags = 0;
        const char *bad = NULL;

        json_object_object_foreach(msg, key, val) {
                if (streq(key, "method")) {
                        if (!json_object_is_type(val, json_type_string))
                                bad = "\"method\" is not a string";
                        else
                                call.method = json_object_get_string(val);
                } else if (streq(key, "parameters")) {
                        if (val && !json_object_is_type(val, json_type_object))
                                bad = "\"parameters\" is not an object";
                        else
                                call.params = val;
                } else if (streq(key, "more") || streq(key, "oneway") || streq(key, "upgrade")) {
                        if (!json_object_is_type(val, json_type_boolean)) {
                                bad = "a call flag is not a boolean";
                                continue;
                        }
                        if (!json_object_get_boolean(val))
                                continue;
                        n_flags++;
                        if (streq(key, "more"))
                                call.flags |= VARLINK_CALL_MORE;
                        else if (streq(key, "oneway"))
                                call.flags |= VARLINK_CALL_ONEWAY;
                        else
                                call.upgrade = true;
                } else
                        bad = "unknown field in call";
        }
        if (!bad && !call.method)
                bad = "call has no method";
        if (!bad && n_flags > 1)
                bad = "more than one of more, oneway and upgrade";
        *ret = call;
        return bad;
}

