/* SPDX-License-Identifier: MIT */
#include "notifier.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "format.h"
#include "log.h"
#include "macro.h"

struct notifier {
        struct scope_registry *registry;
        size_t (*n_clients)(void *userdata);
        void *userdata;
};

void notifier_status(struct notifier *n) {
        assert(n);

        size_t cgroups = scope_registry_n_cgroups(n->registry), clients = n->n_clients ? n->n_clients(n->userdata) : 0;
        (void) sd_notifyf(0, "STATUS=Watching memory pressure; system level %s, %zu cgroup%s watched, %zu client%s.",
                          level_to_string(scope_level(scope_registry_system(n->registry))), cgroups, cgroups == 1 ? "" : "s",
                          clients, clients == 1 ? "" : "s");
}

static void on_level_changed(struct scope *s, void *userdata) {
        struct notifier *n = userdata;
        char f_level[32], f_prev[32], f_target[48], f_source[48], target[FORMAT_BYTES_MAX];

        snprintf(f_level, sizeof(f_level), "PRESSURED_LEVEL=%s", level_to_string(scope_level(s)));
        snprintf(f_prev, sizeof(f_prev), "PRESSURED_PREVIOUS_LEVEL=%s", level_to_string(scope_previous(s)));
        snprintf(f_target, sizeof(f_target), "PRESSURED_RECLAIM_TARGET=%llu", (unsigned long long) scope_reclaim_target(s));
        snprintf(f_source, sizeof(f_source), "PRESSURED_SOURCE=%s",
                 level_source_to_string(scope_get_type(s) == SCOPE_NODE ? LEVEL_SOURCE_WATERMARK : scope_source(s)));
        const char *const fields[] = { f_level, f_prev, f_target, f_source, NULL };
        /* The figure and the threshold the decision used (scope_explain()), in people's units. */
        if (scope_level(s) == LEVEL_OK)
                log_struct(LOG_INFO, PRESSURED_MESSAGE_LEVEL_CHANGE, scope_name(s), fields,
                           "%s: memory pressure %s -> ok: below every threshold for %s", scope_name(s),
                           level_to_string(scope_previous(s)), format_usec(target, sizeof(target), scope_registry_config(n->registry)->hold_usec));
        else
                log_struct(scope_level(s) > scope_previous(s) ? LOG_NOTICE : LOG_INFO, PRESSURED_MESSAGE_LEVEL_CHANGE, scope_name(s),
                           fields, "%s: memory pressure %s -> %s: %s; reclaim target %s", scope_name(s),
                           level_to_string(scope_previous(s)), level_to_string(scope_level(s)), scope_reason(s),
                           format_bytes(target, sizeof(target), scope_reclaim_target(s)));
        if (scope_get_type(s) == SCOPE_SYSTEM)
                notifier_status(n);
}

static const struct scope_observer observer = {
        .level_changed = on_level_changed,
};

int notifier_new(struct scope_registry *reg, size_t (*n_clients)(void *userdata), void *userdata,
                 struct notifier **ret) {
        struct notifier *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        *n = (struct notifier){ .registry = reg, .n_clients = n_clients, .userdata = userdata };
        int r = scope_registry_add_observer(reg, &observer, n);
        if (r < 0) {
                free(n);
                return r;
        }
        *ret = n;
        return 0;
}

struct notifier *notifier_free(struct notifier *n) {
        assert(n);

        free(n);
        return NULL;
}
