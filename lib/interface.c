/* SPDX-License-Identifier: MIT */
/* What the library takes from the daemon is held to the interface's one definition (the same
 * io.pressured.varlink the daemon serves, built in): a reply without a mandatory field, or with one of
 * the wrong type, is refused (-EPROTO) instead of read as 0. Fields a later daemon added are skipped. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "internal.h"
#include "macro.h"
#include "varlink_idl.h"

extern const char protocol_interface_description[];

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct idl_interface *interface;

static void interface_load(void) {
        /* Built in and checked by the test suite: a failure here is a build that cannot talk at all. */
        if (idl_parse(protocol_interface_description, &interface, NULL) < 0)
                interface = NULL;
}

int reply_check(struct pressure_client *c, struct json_object *msg, const char *method) {
        struct json_object *params = json_get(msg, "parameters");
        _cleanup_free_ char *err = NULL;

        if (json_get(msg, "error"))
                return 0; /* errors are the caller's to read */
        (void) pthread_once(&once, interface_load);
        const struct idl_method *m = interface ? idl_method(interface, method) : NULL;
        if (!m)
                return -EPROTO;
        struct json_object *empty = params ? NULL : json_object_new_object(); /* absent: no parameters */
        int r = idl_validate(interface, &m->out, params ? params : empty, IDL_ALLOW_UNKNOWN, &err);
        json_object_put(empty);
        if (r < 0) {
                if (c)
                        client_log(c, LOG_ERR, "pressured sent a %s reply that breaks the interface (%s): ignored", method,
                                   err ? err : "out of memory");
                return -EPROTO;
        }
        return 0;
}
