/* SPDX-License-Identifier: MIT */
/* Subscriptions without sockets: a recording sink stands in for the Varlink call, levels are fed to the
 * scopes of a registry over fixture nodes, and what each subscriber would have been sent is decoded with
 * the protocol's codec. What is asserted is the delivery policy: who hears what, when events are held
 * back, and how they are folded while a subscriber does not read. tests/test-subscribers.c runs the same
 * over real sockets against the daemon. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "macro.h"
#include "node_monitor.h"
#include "protocol.h"
#include "scope_registry.h"
#include "subscription.h"
#include "pressure-gen.h"
#include "test-util.h"

#define MAX_MSGS 64

/* One subscriber as the sink sees it: what it was sent, and how much it has not read. */
struct endpoint {
        struct subscription *sub;
        struct json_object *msgs[MAX_MSGS]; /* parameters of each notification */
        size_t n_msgs;
        size_t queued; /* set by the test: back-pressure */
        const char *ended; /* the error that ended the call */
        bool fail_send;
};

static struct {
        sd_event *event;
        struct config config;
        struct node_monitor *nodes;
        struct scope_registry *reg;
        struct subscriptions *subs;
} f;

static int rec_send(void *endpoint, const char *params, size_t len) {
        struct endpoint *e = endpoint;
        CU_ASSERT_PTR_NOT_NULL_FATAL(params);
        CU_ASSERT_FATAL(e->n_msgs < MAX_MSGS);
        if (e->fail_send)
                return -EPIPE;
        struct json_tokener *tok = json_tokener_new();
        struct json_object *o = json_tokener_parse_ex(tok, params, (int) len);
        json_tokener_free(tok);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        e->msgs[e->n_msgs++] = o;
        e->queued += len; /* unread until the test says it was read */
        return 0;
}

static size_t rec_queued(void *endpoint) {
        return ((struct endpoint *) endpoint)->queued;
}

/* As the connection does: ending the call frees its subscription. */
static void rec_end(void *endpoint, const char *error, struct json_object *params) {
        struct endpoint *e = endpoint;
        json_object_put(params);
        e->ended = error;
        subscription_free(e->sub);
        e->sub = NULL;
}

static const struct subscription_sink recorder = {
        .send = rec_send,
        .queued = rec_queued,
        .end = rec_end,
};

static void setup(void) {
        memset(&f, 0, sizeof(f));
        config_init(&f.config);
        /* A trigger that fires only when a CPU stalls all the time (on a file nobody stalls in, below). */
        f.config.psi.t[LEVEL_LOW] = (struct psi_trigger){ .kind = PSI_FULL, .stall_usec = 2000000, .window_usec = 2000000 };
        f.config.hold_usec = 0;
        CU_ASSERT_EQUAL_FATAL(sd_event_new(&f.event), 0);
        CU_ASSERT_EQUAL_FATAL(node_monitor_new(test_fixture("sysfs-2node"), &f.nodes), 0);
        CU_ASSERT_EQUAL_FATAL(node_monitor_sample(f.nodes, 1), 0);
        CU_ASSERT_EQUAL_FATAL(scope_registry_new(f.event, &f.config, NULL, f.nodes, &f.reg), 0);
        const char *quiet = test_quiet_pressure_path(); /* the system scope does not hear the host */
        if (quiet)
                scope_registry_set_system_pressure(f.reg, quiet);
        CU_ASSERT_EQUAL_FATAL(subscriptions_new(f.reg, &recorder, &f.subs), 0);
        CU_ASSERT_EQUAL_FATAL(scope_registry_start(f.reg), 0);
        CU_ASSERT_EQUAL_FATAL(f.reg->n_nodes, 2u);
}

static void endpoint_done(struct endpoint *e) {
        subscription_free(e->sub);
        for (size_t i = 0; i < e->n_msgs; i++)
                json_object_put(e->msgs[i]);
        memset(e, 0, sizeof(*e));
}

static void teardown(struct endpoint *eps, size_t n) {
        for (size_t i = 0; i < n; i++)
                endpoint_done(&eps[i]);
        CU_ASSERT_EQUAL(subscriptions_count(f.subs), 0u);
        subscriptions_free(f.subs);
        scope_registry_free(f.reg);
        node_monitor_free(f.nodes);
        config_done(&f.config);
        sd_event_unref(f.event);
}

static uint64_t now(void) {
        static uint64_t t = 1000000;
        return t += 1000; /* each feed a little later: levels change on time */
}

static struct scope *node(size_t i) {
        return f.reg->nodes[i];
}

static void feed(size_t node_index, enum level l) {
        scope_feed_level(node(node_index), l, now());
        CU_ASSERT_EQUAL(scope_level(node(node_index)), l);
}

/* Subscribe e to both nodes (references taken as the service would). */
static void subscribe(struct endpoint *e, enum level min_level) {
        struct scope *scopes[2];
        for (size_t i = 0; i < 2; i++)
                scopes[i] = scope_ref(node(i));
        CU_ASSERT_EQUAL_FATAL(subscription_start(f.subs, e, 0, scopes, 2, min_level, &e->sub), 0);
        CU_ASSERT_EQUAL_FATAL(subscription_send_state(e->sub), 0);
}

/* The i-th notification as a level change: its level, previous level and coalesced count. */
static void level_change(struct endpoint *e, size_t i, enum level *level, enum level *previous, unsigned *coalesced) {
        CU_ASSERT_FATAL(i < e->n_msgs);
        struct json_object *ev;
        CU_ASSERT_FATAL(json_object_object_get_ex(e->msgs[i], "event", &ev));
        struct scope_snapshot s;
        CU_ASSERT_EQUAL_FATAL(protocol_decode_level_change(ev, &s, previous, coalesced), 0);
        *level = s.level;
}

static void assert_change(struct endpoint *e, size_t i, enum level previous, enum level level, unsigned coalesced) {
        enum level l, p;
        unsigned c;
        level_change(e, i, &l, &p, &c);
        CU_ASSERT_EQUAL(l, level);
        CU_ASSERT_EQUAL(p, previous);
        CU_ASSERT_EQUAL(c, coalesced);
}

static void test_state_first(void) {
        struct endpoint e = {};
        setup();
        feed(1, LEVEL_MEDIUM);
        subscribe(&e, LEVEL_LOW);
        CU_ASSERT_EQUAL(e.n_msgs, 1u);
        struct json_object *states;
        CU_ASSERT_FATAL(json_object_object_get_ex(e.msgs[0], "state", &states));
        CU_ASSERT_EQUAL_FATAL(json_object_array_length(states), 2u);
        struct scope_snapshot s;
        CU_ASSERT_EQUAL(protocol_decode_scope_state(json_object_array_get_idx(states, 1), &s), 0);
        CU_ASSERT_EQUAL(s.level, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(subscriptions_count(f.subs), 1u);
        teardown(&e, 1);
}

static void test_min_level(void) {
        struct endpoint low = {}, critical = {};
        setup();
        subscribe(&low, LEVEL_LOW);
        subscribe(&critical, LEVEL_CRITICAL);

        feed(0, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(low.n_msgs, 2u);
        assert_change(&low, 1, LEVEL_OK, LEVEL_MEDIUM, 0);
        CU_ASSERT_EQUAL(critical.n_msgs, 1u); /* medium is below its level */

        feed(0, LEVEL_CRITICAL);
        feed(0, LEVEL_MEDIUM);
        /* Down through two levels: the critical subscriber hears medium, and must hear ok too. */
        feed(0, LEVEL_OK);
        CU_ASSERT_EQUAL_FATAL(critical.n_msgs, 4u);
        /* "previous" is what this subscriber was last told, not the scope's last level. */
        assert_change(&critical, 1, LEVEL_OK, LEVEL_CRITICAL, 0);
        assert_change(&critical, 2, LEVEL_CRITICAL, LEVEL_MEDIUM, 0);
        assert_change(&critical, 3, LEVEL_MEDIUM, LEVEL_OK, 0);
        CU_ASSERT_EQUAL(low.n_msgs, 5u);
        teardown((struct endpoint[]){ low, critical }, 2);
}

/* One subscriber stops reading: its events are held and folded into one per scope, the latest state
 * with the number of changes it stands for; the others are told at once all along. */
static void test_backlog_coalesces(void) {
        struct endpoint slow = {}, fast = {};
        setup();
        subscribe(&slow, LEVEL_LOW);
        subscribe(&fast, LEVEL_LOW);
        slow.queued = SUBSCRIPTION_QUEUE_LIMIT;
        fast.queued = 0;

        static const enum level seq[] = { LEVEL_LOW, LEVEL_MEDIUM, LEVEL_CRITICAL, LEVEL_MEDIUM, LEVEL_LOW };
        for (size_t i = 0; i < ELEMENTSOF(seq); i++) {
                feed(0, seq[i]);
                fast.queued = 0; /* it reads everything */
        }
        feed(1, LEVEL_LOW);
        CU_ASSERT_EQUAL(fast.n_msgs, 1u + ELEMENTSOF(seq) + 1);
        CU_ASSERT_EQUAL(slow.n_msgs, 1u); /* the state only */

        /* Still backlogged: a drain notice that does not bring it under the limit sends nothing. */
        subscription_drained(slow.sub);
        CU_ASSERT_EQUAL(slow.n_msgs, 1u);

        slow.queued = 0;
        subscription_drained(slow.sub);
        CU_ASSERT_EQUAL_FATAL(slow.n_msgs, 3u);
        /* Node 0: from ok (what it was last told) to low, standing for five changes. */
        assert_change(&slow, 1, LEVEL_OK, LEVEL_LOW, 4);
        assert_change(&slow, 2, LEVEL_OK, LEVEL_LOW, 0);

        /* Caught up: told at once again. */
        slow.queued = 0;
        feed(0, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL_FATAL(slow.n_msgs, 4u);
        assert_change(&slow, 3, LEVEL_LOW, LEVEL_MEDIUM, 0);
        teardown((struct endpoint[]){ slow, fast }, 2);
}

/* Back-pressure mid-drain: the drain sends scope by scope and stops as soon as the subscriber is full
 * again; the rest waits for the next drain. */
static void test_drain_stops_when_full(void) {
        struct endpoint e = {};
        setup();
        subscribe(&e, LEVEL_LOW);
        e.queued = SUBSCRIPTION_QUEUE_LIMIT;
        feed(0, LEVEL_MEDIUM);
        feed(1, LEVEL_MEDIUM);
        CU_ASSERT_EQUAL(e.n_msgs, 1u);

        e.queued = SUBSCRIPTION_QUEUE_LIMIT - 1; /* room for one: the send itself fills it */
        subscription_drained(e.sub);
        CU_ASSERT_EQUAL(e.n_msgs, 2u);
        e.queued = 0;
        subscription_drained(e.sub);
        CU_ASSERT_EQUAL(e.n_msgs, 3u);
        /* Nothing pending: draining again sends nothing. */
        e.queued = 0;
        subscription_drained(e.sub);
        CU_ASSERT_EQUAL(e.n_msgs, 3u);
        teardown(&e, 1);
}

/* Memory events reach everyone at any min_level; one that does not read has them counted in its next
 * level change instead of queued. */
static void test_memory_events(void) {
        struct endpoint reading = {}, stuck = {};
        setup();
        subscribe(&reading, LEVEL_CRITICAL);
        subscribe(&stuck, LEVEL_LOW);
        stuck.queued = SUBSCRIPTION_QUEUE_LIMIT;
        reading.queued = 0;

        f.reg->env.events->memory_event(node(0), MEMORY_EVENT_OOM_KILL, 1, f.reg->env.userdata);
        CU_ASSERT_EQUAL_FATAL(reading.n_msgs, 2u);
        struct json_object *me;
        CU_ASSERT_FATAL(json_object_object_get_ex(reading.msgs[1], "memory_event", &me));
        struct memory_event_snapshot snap;
        CU_ASSERT_EQUAL(protocol_decode_memory_event(me, &snap), 0);
        CU_ASSERT_EQUAL(snap.kind, MEMORY_EVENT_OOM_KILL);
        CU_ASSERT_EQUAL(snap.count, 1u);
        CU_ASSERT_EQUAL(stuck.n_msgs, 1u);

        feed(0, LEVEL_LOW);
        stuck.queued = 0;
        subscription_drained(stuck.sub);
        CU_ASSERT_EQUAL_FATAL(stuck.n_msgs, 2u);
        assert_change(&stuck, 1, LEVEL_OK, LEVEL_LOW, 1);
        teardown((struct endpoint[]){ reading, stuck }, 2);
}

/* Many subscribers share one encoding of an event: each receives the same text. */
static void test_shared_text(void) {
        struct endpoint e[3] = {};
        setup();
        for (size_t i = 0; i < 3; i++)
                subscribe(&e[i], LEVEL_LOW);
        feed(1, LEVEL_CRITICAL);
        for (size_t i = 0; i < 3; i++) {
                CU_ASSERT_EQUAL_FATAL(e[i].n_msgs, 2u);
                CU_ASSERT_STRING_EQUAL(json_object_to_json_string(e[i].msgs[1]), json_object_to_json_string(e[0].msgs[1]));
                assert_change(&e[i], 1, LEVEL_OK, LEVEL_CRITICAL, 0);
        }
        teardown(e, 3);
}

static void test_shutdown_ends_all(void) {
        struct endpoint e[2] = {};
        setup();
        subscribe(&e[0], LEVEL_LOW);
        subscribe(&e[1], LEVEL_MEDIUM);
        subscriptions_shutdown(f.subs);
        for (size_t i = 0; i < 2; i++) {
                CU_ASSERT_PTR_NULL(e[i].sub);
                CU_ASSERT_STRING_EQUAL(e[i].ended ? e[i].ended : "", PROTOCOL_ERROR_SHUTTING_DOWN);
        }
        CU_ASSERT_EQUAL(subscriptions_count(f.subs), 0u);
        /* Nobody is left to tell. */
        feed(0, LEVEL_CRITICAL);
        CU_ASSERT_EQUAL(e[0].n_msgs, 1u);
        teardown(e, 2);
}

/* The reason a level change gives is the figure that made it: a rise the daemon's samples do not show yet
 * (the kernel's trigger raised it) names the trigger, not "below medium's threshold, held"; a fall that
 * the hysteresis holds says so. */
static void test_reason_of_a_rise(void) {
        setup();
        f.config.hold_usec = 10000000;
        struct scope *sys = scope_registry_system(f.reg);
        if (!test_quiet_pressure_path()) {
                printf("(no cgroup v2 with PSI: skipped) ");
                teardown(NULL, 0);
                return;
        }
        uint64_t t = now();
        scope_feed_level(sys, LEVEL_LOW, t);
        CU_ASSERT_EQUAL(scope_level(sys), LEVEL_LOW);
        CU_ASSERT_PTR_NOT_NULL(strstr(scope_reason(sys), "the kernel's trigger fired"));
        /* Samples over a window with no stall in them (the file is a cgroup nobody runs in). */
        scope_sample(sys, t + 100000);
        scope_sample(sys, t + 2600000);
        CU_ASSERT_EQUAL(scope_level(sys), LEVEL_LOW); /* held */
        scope_feed_level(sys, LEVEL_MEDIUM, t + 2700000);
        CU_ASSERT_EQUAL(scope_level(sys), LEVEL_MEDIUM);
        printf("(%s) ", scope_reason(sys));
        CU_ASSERT_PTR_NOT_NULL(strstr(scope_reason(sys), "the kernel's trigger fired"));
        CU_ASSERT_PTR_NULL(strstr(scope_reason(sys), "held until"));
        teardown(NULL, 0);
}

int main(void) {
        static const struct test_case cases[] = {
                { "the current state comes first", test_state_first },
                { "each subscriber hears the changes at and around its level", test_min_level },
                { "a subscriber that does not read gets its events folded", test_backlog_coalesces },
                { "a drain stops when the subscriber is full again", test_drain_stops_when_full },
                { "memory events reach every subscriber, or are counted", test_memory_events },
                { "subscribers share one encoding of an event", test_shared_text },
                { "shutting down ends every subscription", test_shutdown_ends_all },
                { "a rise is explained by the figure that raised it", test_reason_of_a_rise },
                {},
        };
        return test_run("subscription", cases, NULL);
}
