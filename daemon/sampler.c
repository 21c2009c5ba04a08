/* SPDX-License-Identifier: MIT */
#include "sampler.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "macro.h"

struct sampler {
        sd_event *event;
        const struct config *config;
        struct scope_registry *registry;
        struct node_monitor *nodes;
        sd_event_source *timer;
};

static bool any_active(const struct sampler *sp, uint64_t now) {
        SCOPE_REGISTRY_FOREACH(s, sp->registry)
                if (scope_is_active(s, now))
                        return true;
        return false;
}

static int sample_nodes(struct sampler *sp, uint64_t now) {
        if (!sp->nodes)
                return 0;
        int r = node_monitor_sample(sp->nodes, now);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sp->registry->n_nodes; i++)
                scope_update_node(sp->registry->nodes[i], now);
        /* Headroom far from its thresholds, where the kernel would tell of a change (v1 thresholds) or PSI
         * and the watermarks watch too (the system), rides on the node sample. */
        SCOPE_REGISTRY_FOREACH(s, sp->registry)
                if (scope_rides_node_sample(s))
                        scope_check_headroom(s, now);
        return 0;
}

int sampler_sample_nodes(struct sampler *sp) {
        assert(sp);

        return sample_nodes(sp, event_now(sp->event));
}

/* Sampling under pressure wants its period; the idle node sample may slip by a tenth of its period so
 * that the kernel can batch it with other wake-ups. */
static void set_timer(struct sampler *sp, uint64_t period, uint64_t now) {
        (void) sd_event_source_set_time_accuracy(sp->timer, MAX(period / 10, 1u));
        (void) sd_event_source_set_time(sp->timer, now + period);
        (void) sd_event_source_set_enabled(sp->timer, SD_EVENT_ONESHOT);
}

static void arm(struct sampler *sp, uint64_t now) {
        if (any_active(sp, now))
                set_timer(sp, sp->config->sample_interval_usec, now);
        else if (sp->config->node_interval_usec > 0 && sp->nodes)
                set_timer(sp, sp->config->node_interval_usec, now);
        else
                (void) sd_event_source_set_enabled(sp->timer, SD_EVENT_OFF);
}

void sampler_arm(struct sampler *sp) {
        assert(sp);

        arm(sp, event_now(sp->event));
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct sampler *sp = userdata;
        uint64_t now = event_now(sp->event);
        (void) src;
        (void) usec;

        int r = sample_nodes(sp, now);
        if (r < 0)
                log_warning_errno(r, "Failed to read node memory figures, ignoring: %m");
        SCOPE_REGISTRY_FOREACH(s, sp->registry)
                if (scope_get_type(s) != SCOPE_NODE && scope_is_active(s, now))
                        scope_sample(s, now);
        arm(sp, now);
        return 0;
}

/* A trigger fired: sample within one interval, keeping an earlier wake-up that is already set. */
static void on_became_active(struct scope *s, void *userdata) {
        struct sampler *sp = userdata;
        uint64_t now = event_now(sp->event), when = 0;
        int enabled = 0;
        (void) s;

        (void) sd_event_source_get_enabled(sp->timer, &enabled);
        if (enabled && sd_event_source_get_time(sp->timer, &when) >= 0 &&
            when <= now + sp->config->sample_interval_usec)
                return;
        set_timer(sp, sp->config->sample_interval_usec, now);
}

static const struct scope_observer observer = {
        .became_active = on_became_active,
};

int sampler_new(sd_event *event, const struct config *config, struct scope_registry *reg, struct node_monitor *nodes,
                struct sampler **ret) {
        assert(event);

        struct sampler *sp = calloc(1, sizeof(*sp));
        int r;

        if (!sp)
                return -ENOMEM;
        *sp = (struct sampler){ .event = event, .config = config, .registry = reg, .nodes = nodes };
        r = sd_event_add_time(event, &sp->timer, CLOCK_MONOTONIC, 0, 0, on_timer, sp);
        if (r >= 0)
                r = scope_registry_add_observer(reg, &observer, sp);
        if (r < 0) {
                sampler_free(sp);
                return r;
        }
        (void) sd_event_source_set_enabled(sp->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(sp->timer, "sample-timer");
        *ret = sp;
        return 0;
}

struct sampler *sampler_free(struct sampler *sp) {
        if (!sp)
                return NULL;
        sd_event_source_disable_unref(sp->timer);
        free(sp);
        return NULL;
}
