/* SPDX-License-Identifier: MIT */
/* What goes out on a connection: replies, notifications, errors, each framed into the connection's
 * output buffer and written as far as the socket takes it (the rest on EPOLLOUT, varlink.c). */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json_build.h"
#include "log.h"
#include "macro.h"
#include "varlink-private.h"

/* Write what is queued now; whatever the socket does not take waits for EPOLLOUT. */
static int flush_now(struct varlink_connection *c) {
        int r = frame_writer_flush(&c->out, c->fd);
        if (r < 0 && r != -EAGAIN) {
                log_debug_errno(r, "Connection of pid %d: write failed: %m", (int) c->peer.pid);
                connection_kill(c);
                return r;
        }
        connection_account_buffers(c);
        connection_update_events(c);
        return 0;
}

static int connection_send(struct varlink_connection *c, struct json_object *msg) {
        struct json_text *text = &c->server->scratch;
        int r;

        if (connection_dead(c))
                return -ECONNRESET;
        /* A message that cannot be sent is a gap in the conversation: the peer must not go on as if
         * nothing was lost. */
        json_text_truncate(text, 0);
        r = json_text_append_value(text, msg);
        if (r >= 0)
                r = frame_writer_put(&c->out, text->data, text->len);
        /* The scratch text serves every message; a huge one is not kept. */
        if (text->size > 64 * 1024)
                json_text_done(text);
        if (r < 0) {
                connection_kill(c);
                return r;
        }
        return flush_now(c);
}

/* A message around parameters that are text already: no json-c tree of the whole. */
static int send_serialized(struct varlink_connection *c, const char *params, size_t len, bool continues) {
        static const char head[] = "{\"parameters\":", more[] = ",\"continues\":true}", end[] = "}";
        const char *tail = continues ? more : end;
        size_t tail_len = continues ? sizeof(more) - 1 : sizeof(end) - 1;
        char stack[4096];

        if (connection_dead(c))
                return -ECONNRESET;
        if (!params) {
                connection_kill(c);
                return -ENOMEM;
        }
        size_t total = sizeof(head) - 1 + len + tail_len;
        char *msg = total <= sizeof(stack) ? stack : malloc(total);
        if (!msg) {
                connection_kill(c);
                return -ENOMEM;
        }
        memcpy(msg, head, sizeof(head) - 1);
        memcpy(msg + sizeof(head) - 1, params, len);
        memcpy(msg + sizeof(head) - 1 + len, tail, tail_len);
        int r = frame_writer_put(&c->out, msg, total);
        if (msg != stack)
                free(msg);
        if (r < 0) {
                connection_kill(c);
                return r;
        }
        return flush_now(c);
}

int varlink_notify_serialized(struct varlink_connection *c, const char *params, size_t len) {
        assert(c);

        if (!connection_in_call(c) || !(c->call_flags & VARLINK_CALL_MORE))
                return -EPROTO;
        return send_serialized(c, params, len, true);
}


int varlink_reply_serialized(struct varlink_connection *c, const char *params, size_t len) {
        assert(c);

        if (!connection_in_call(c))
                return -EBADMSG; /* programmer error: nothing to answer */
        int r = c->call_flags & VARLINK_CALL_ONEWAY ? 0 : send_serialized(c, params, len, false);
        connection_call_end(c);
        return r;
}


static int send_reply(struct varlink_connection *c, const char *error, struct json_object *params, bool continues) {
        int r = 0;

        if (!connection_in_call(c)) {
                json_object_put(params);
                return -EBADMSG; /* programmer error: nothing to answer */
        }

        /* NULL parameters: building them failed. The call cannot be answered as it should be, so the
         * connection goes (as for any message that cannot be sent); a final answer still ends the call. */
        if (!params) {
                connection_kill(c);
                r = -ENOMEM;
        } else if (!(c->call_flags & VARLINK_CALL_ONEWAY)) {
                struct json_object *msg = json_object_new_object();
                if (error)
                        jb_set_string(&msg, "error", error);
                jb_set(&msg, "parameters", params);
                jb_set_true(&msg, "continues", continues);
                if (msg)
                        r = connection_send(c, msg);
                else {
                        connection_kill(c);
                        r = -ENOMEM;
                }
                json_object_put(msg);
        } else
                json_object_put(params);

        if (!continues)
                connection_call_end(c);
        return r;
}

int varlink_reply(struct varlink_connection *c, struct json_object *params) {
        assert(c);

        return send_reply(c, NULL, params, false);
}

int varlink_notify(struct varlink_connection *c, struct json_object *params) {
        assert(c);

        if (!(c->call_flags & VARLINK_CALL_MORE)) {
                json_object_put(params);
                return -EPROTO;
        }
        return send_reply(c, NULL, params, true);
}

int varlink_error(struct varlink_connection *c, const char *error, struct json_object *params) {
        assert(c);

        return send_reply(c, error, params, false);
}

int varlink_error_invalid_parameter(struct varlink_connection *c, const char *parameter) {
        assert(c);

        struct json_object *p = json_object_new_object();
        jb_set_string(&p, "parameter", parameter);
        return varlink_error(c, VARLINK_ERROR_INVALID_PARAMETER, p);
}

void connection_protocol_violation(struct varlink_connection *c, const char *reason) {
        assert(c);

        log_debug("Connection of pid %d broke the protocol (%s), closing it.", (int) c->peer.pid, reason);

        /* A last, best-effort error so that the peer learns why; then the connection goes. */
        struct json_object *msg = json_object_new_object();
        jb_set_string(&msg, "error", VARLINK_ERROR_PROTOCOL);
        jb_set(&msg, "parameters", jb_object_with("reason", json_object_new_string(reason)));
        if (msg)
                (void) connection_send(c, msg);
        json_object_put(msg);
        connection_kill(c);
}

int varlink_parse_params(struct varlink_connection *c, struct json_object *params, const struct param *table, void *out) {
        assert(c);

        const char *bad;
        if (params_dispatch(params, table, out, &bad) < 0) {
                (void) varlink_error_invalid_parameter(c, bad);
                return -EINVAL;
        }
        return 0;
}
