/* SPDX-License-Identifier: MIT */
/* Reclaim rounds against a fake transport: no socket, no daemon. The scopes are real (the system scope
 * arms a PSI trigger that cannot fire: full stall for the whole of a 2 s window), the node scopes read
 * the two-node fixture, levels are fed to them by hand, and the clients are this process, pinned with
 * its own pid. What the transport is asked to send is recorded and answered by the test. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "macro.h"
#include "node_monitor.h"
#include "pressure-gen.h"
#include "reclaim.h"
#include "scope_registry.h"
#include "shrinker.h"
#include "test-util.h"

#define MAX_SENT 4096

struct sent {
        struct shrink_client *client;
        struct shrink_request_snapshot q;
        char cgroup[256];
        bool answered;
};

static struct {
        sd_event *event;
        struct config config;
        struct node_monitor *nodes;
        struct scope_registry *scopes;
        struct shrink_registry *shrinkers;
        struct reclaim *reclaim;
        struct sent sent[MAX_SENT];
        size_t n_sent;
        unsigned n_done;
        void *done_caller;
        struct shrink_result results[16];
        size_t n_results;
} f;

/* What the rounds learnt of a shrinker, as ListShrinkers shows it (without the nodes). */
static struct shrinker_info_snapshot info(const struct shrinker *sh) {
        struct shrinker_info_snapshot i = {};
        CU_ASSERT_EQUAL(reclaim_shrinker_info(f.reclaim, sh, &i), 0);
        free(i.nodes);
        i.nodes = NULL;
        return i;
}

/* What the release meter holds of a client (through its first shrinker). */
static struct shrinker_info_snapshot client_info(const struct shrink_client *cl) {
        return info(cl->shrinkers[0]);
}

static int fake_send(struct shrink_client *cl, const struct shrink_request_snapshot *q, void *userdata) {
        (void) userdata;
        CU_ASSERT_FATAL(f.n_sent < MAX_SENT);
        struct sent *s = &f.sent[f.n_sent++];
        *s = (struct sent){ .client = cl, .q = *q };
        snprintf(s->cgroup, sizeof(s->cgroup), "%s", q->cgroup);
        s->q.cgroup = s->cgroup;
        return 0;
}

static void fake_done(void *caller, const struct shrink_result *results, size_t n, void *userdata) {
        (void) userdata;
        f.n_done++;
        f.done_caller = caller;
        f.n_results = MIN(n, ELEMENTSOF(f.results));
        if (f.n_results > 0)
                memcpy(f.results, results, f.n_results * sizeof(*results)); /* strings not kept */
}

static const struct reclaim_transport fake_transport = {
        .send_request = fake_send,
        .shrink_done = fake_done,
};

static uint64_t now(void) {
        uint64_t t;
        sd_event_now(f.event, CLOCK_MONOTONIC, &t);
        return t;
}

static void setup_nodes(bool with_nodes) {
        memset(&f, 0, sizeof(f));
        config_init(&f.config);
        /* A trigger that fires only when a CPU stalls all the time (on a file nobody stalls in, below). */
        f.config.psi.t[LEVEL_LOW] = (struct psi_trigger){ .kind = PSI_FULL, .stall_usec = 2000000, .window_usec = 2000000 };
        f.config.hold_usec = 0;
        f.config.round_interval_usec = 1000;
        f.config.request_timeout_usec = 50000;
        f.config.quarantine_after = 2;
        /* The regulator reads the host's real stall: its rounds would ask these clients at random. It has
         * tests of its own (test-regulation, test-shrinkers). */
        f.config.regulate_budget_usec = 0;
        f.config.sample_interval_usec = 10000;

        CU_ASSERT_EQUAL_FATAL(sd_event_new(&f.event), 0);
        if (with_nodes) {
                CU_ASSERT_EQUAL_FATAL(node_monitor_new(test_fixture("sysfs-2node"), &f.nodes), 0);
                CU_ASSERT_EQUAL_FATAL(node_monitor_sample(f.nodes, 1), 0);
        }
        CU_ASSERT_EQUAL_FATAL(scope_registry_new(f.event, &f.config, NULL, f.nodes, &f.scopes), 0);
        /* The system scope holds these clients too: on a busy host its own trigger (even one of full
         * 2 s per 2 s, with one CPU stalled and the other idle) would start rounds among the test's. */
        const char *quiet = test_quiet_pressure_path();
        if (quiet)
                scope_registry_set_system_pressure(f.scopes, quiet);
        CU_ASSERT_EQUAL_FATAL(shrink_registry_new(f.event, f.scopes, f.nodes, &f.shrinkers), 0);
        CU_ASSERT_EQUAL_FATAL(reclaim_new(f.event, &f.config, f.scopes, f.shrinkers, &fake_transport, NULL, &f.reclaim), 0);
        CU_ASSERT_EQUAL_FATAL(scope_registry_start(f.scopes), 0);
        CU_ASSERT_EQUAL_FATAL(f.scopes->n_nodes, with_nodes ? 2u : 0u);
}

static void setup(void) {
        setup_nodes(true);
}

static void teardown(void) {
        while (f.shrinkers->clients)
                shrink_client_free(f.shrinkers->clients);
        scope_registry_free(f.scopes);
        reclaim_free(f.reclaim);
        shrink_registry_free(f.shrinkers);
        node_monitor_free(f.nodes);
        config_done(&f.config);
        sd_event_unref(f.event);
}

static struct shrink_client *client(const char *name, unsigned flags, unsigned batch) {
        const struct shrinker_spec spec = { .name = name, .flags = flags, .seeks = 2, .batch = batch };
        struct shrink_client *cl;
        CU_ASSERT_EQUAL_FATAL(shrink_client_new(f.shrinkers, getpid(), getpid(), -EBADF, -EBADF, getuid(), (void *) name, &spec, 1, &cl), 0);
        shrink_client_start(cl);
        return cl;
}

/* Run the loop until `pending` requests wait for an answer (or a safety deadline passes). */
static size_t n_pending(void) {
        size_t n = 0;
        for (size_t i = 0; i < f.n_sent; i++)
                n += !f.sent[i].answered;
        return n;
}

#define RUN_UNTIL(cond)                                                                                    \
        do {                                                                                               \
                uint64_t _end_ = test_now_ms() + 5000;                                                     \
                while (!(cond) && test_now_ms() < _end_)                                                   \
                        (void) sd_event_run(f.event, 10000);                                               \
        } while (0)

/* The newest unanswered request to client cl, or NULL. */
static struct sent *pending_for(struct shrink_client *cl) {
        for (size_t i = f.n_sent; i > 0; i--)
                if (f.sent[i - 1].client == cl && !f.sent[i - 1].answered)
                        return &f.sent[i - 1];
        return NULL;
}

/* The requests to cl are gone (expired, or cl went away): nobody answers them. */
static void forget(struct shrink_client *cl) {
        for (size_t i = 0; i < f.n_sent; i++)
                if (f.sent[i].client == cl)
                        f.sent[i].answered = true;
}

static int answer(struct sent *s, struct shrink_answer a) {
        const char *reason = NULL;
        a.request = (int64_t) s->q.id;
        int r = reclaim_answer(f.reclaim, s->client, &a, &reason);
        if (r == 0)
                s->answered = true;
        return r;
}

#define ABSENT SHRINK_ANSWER_ABSENT
#define COUNT(n) ((struct shrink_answer){ .count = (n), .bytes = (int64_t) (n) * 1000, .freed = ABSENT, .scanned = ABSENT })
#define FREED(n) ((struct shrink_answer){ .count = ABSENT, .bytes = ABSENT, .freed = (n), .scanned = ABSENT })
#define STOP ((struct shrink_answer){ .count = ABSENT, .bytes = ABSENT, .freed = ABSENT, .scanned = ABSENT, .stop = true })
#define EMPTY ((struct shrink_answer){ .count = ABSENT, .bytes = ABSENT, .freed = ABSENT, .scanned = ABSENT, .empty = true })

static struct scope *node1(void) {
        return f.scopes->nodes[1];
}

/* Credit is capped at what a client has resident: 256 MiB of it, touched, for the goals of the tests. */
#define BALLAST_SIZE (256u << 20)
static char *ballast_new(void) {
        char *b = malloc(BALLAST_SIZE);
        CU_ASSERT_FATAL(b != NULL);
        memset(b, 1, BALLAST_SIZE);
        return b;
}

/* A round asks every shrinker in scope at once, at the level's priority, for its share of the goal, and
 * never more than the kernel's sizing at the gentlest priority down to the level's floor that covers
 * it; a round that fell short, with the stall not falling, makes the next one start two steps lower. */
static void test_round_requests_and_priorities(void) {
        setup();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);
        struct shrink_client *plain = client("plain", 0, 100); /* not NUMA_AWARE: a node does not ask it */
        int start = f.config.priorities.at[LEVEL_MEDIUM];

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        CU_ASSERT_TRUE(scope_reclaim_target(node1()) > 0);
        /* Both counts are out before anyone answered: nobody waits on a client. */
        CU_ASSERT_EQUAL(f.n_sent, 2u);
        struct sent *qa = pending_for(a), *qb = pending_for(b);
        CU_ASSERT_FATAL(qa && qb);
        CU_ASSERT_PTR_NULL(pending_for(plain));
        CU_ASSERT_EQUAL(qa->q.op, SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(qa->q.priority, start);
        CU_ASSERT_EQUAL(qa->q.node, 1);
        CU_ASSERT_STRING_EQUAL(qa->q.cgroup, "/");
        CU_ASSERT_NOT_EQUAL(qa->q.id, qb->q.id);

        /* a holds 100,000 objects of 1000 bytes. Its share of node 1's goal (a hundred MB) is far more than
         * the kernel's sizing at priority 9 allows ((100000 >> 9) * 4 / 2 = 390 objects): it is asked at
         * the gentlest priority that covers it, here medium's floor, 2: (100000 >> 2) * 4 / 2 = 50,000
         * objects, in batches of 100. b skips this round. */
        CU_ASSERT_EQUAL(answer(qa, COUNT(100000)), 0);
        CU_ASSERT_EQUAL(answer(qb, COUNT(0)), 0);
        uint64_t scanned = 0;
        struct sent *s;
        while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN) {
                CU_ASSERT(s->q.nr_to_scan <= 100u);
                CU_ASSERT_EQUAL(s->q.priority, f.config.priorities.floor[LEVEL_MEDIUM]);
                scanned += s->q.nr_to_scan;
                CU_ASSERT_EQUAL(answer(s, FREED((int64_t) s->q.nr_to_scan)), 0);
        }
        CU_ASSERT_EQUAL(scanned, 50000u);
        struct shrinker *sh = a->shrinkers[0];
        CU_ASSERT_EQUAL(sh->deferred[1], 0u);
        CU_ASSERT_EQUAL(info(sh).stats.freed, 50000u);

        /* Far short of the goal, and the node's figures (a fixture) do not move: two steps lower. */
        RUN_UNTIL(n_pending() == 2);
        CU_ASSERT_EQUAL(n_pending(), 2u);
        CU_ASSERT_EQUAL(pending_for(a)->q.priority, start - 2);
        CU_ASSERT_EQUAL(pending_for(b)->q.priority, start - 2);
        teardown();
}

/* Escalation stops at the level's floor. */
static void test_escalation_floor(void) {
        setup();
        f.config.priorities.floor[LEVEL_MEDIUM] = f.config.priorities.at[LEVEL_MEDIUM] - 3;
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100);
        int seen[6];

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        for (int round = 0; round < 6; round++) {
                RUN_UNTIL(pending_for(a));
                CU_ASSERT_FATAL(pending_for(a) != NULL);
                seen[round] = pending_for(a)->q.priority;
                CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(0)), 0);
        }
        int start = f.config.priorities.at[LEVEL_MEDIUM];
        CU_ASSERT_EQUAL(seen[0], start);
        CU_ASSERT_EQUAL(seen[1], start - 2);
        CU_ASSERT_EQUAL(seen[2], start - 3);
        CU_ASSERT_EQUAL(seen[5], start - 3);
        teardown();
}

/* Without node figures and without a limit there is no estimate: the target is 0. The episode does not
 * stop after one round for want of a goal; it sizes by the kernel's formula while the pressure lasts. */
static void test_target_zero(void) {
        setup_nodes(false);
        struct shrink_client *a = client("a", 0, 100);

        scope_feed_level(f.scopes->system, LEVEL_MEDIUM, now());
        CU_ASSERT_EQUAL(scope_reclaim_target(f.scopes->system), 0u);
        for (int round = 0; round < 3; round++) {
                RUN_UNTIL(pending_for(a));
                CU_ASSERT_FATAL(pending_for(a) != NULL);
                CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(100000)), 0);
                struct sent *s;
                while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN)
                        CU_ASSERT_EQUAL(answer(s, FREED((int64_t) s->q.nr_to_scan)), 0);
        }
        CU_ASSERT(info(a->shrinkers[0]).stats.freed > 0);
        teardown();
}

/* A goal released while the stall has gone (the node's free pages back above its high watermarks)
 * starts no new one, however long the level is held; when the node is short again, the next goal comes. */
static void test_no_goal_while_quiet(void) {
        setup();
        f.config.priorities.at[LEVEL_LOW] = f.config.priorities.floor[LEVEL_LOW] = 0;
        char *ballast = ballast_new();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 1u << 20);
        struct node_sample *n = &f.nodes->cur[1];
        uint64_t short_free = n->high_pages / 2; /* short of its high watermarks */
        n->free_pages = short_free;

        scope_feed_level(node1(), LEVEL_LOW, now());
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(1000000)), 0);
        struct sent *s;
        while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN)
                CU_ASSERT_EQUAL(answer(s, FREED((int64_t) s->q.nr_to_scan)), 0);
        size_t sent = f.n_sent;

        /* Quiet now: a hundred round intervals pass without a request, the level still low. */
        n->free_pages = n->high_pages + 1000;
        uint64_t end = test_now_ms() + 100 * f.config.round_interval_usec / 1000;
        while (test_now_ms() < end)
                (void) sd_event_run(f.event, 1000);
        CU_ASSERT_EQUAL(scope_level(node1()), LEVEL_LOW);
        CU_ASSERT_EQUAL(f.n_sent, sent);

        /* Short again: a new goal, counted first. */
        n->free_pages = short_free;
        RUN_UNTIL(pending_for(a));
        CU_ASSERT_FATAL(pending_for(a) != NULL);
        CU_ASSERT_EQUAL(pending_for(a)->q.op, SHRINK_OP_COUNT);
        free(ballast);
        teardown();
}

/* A shrinker that does not deliver its share makes nobody else give more, nor asks them more often: the
 * honest one scans its own half of the goal in the first round and is not even counted again in the
 * goal's later rounds, while the other is asked (and stops) in three rounds; then the goal is over. */
static void test_undelivered_share_stays(void) {
        setup();
        f.config.priorities.at[LEVEL_MEDIUM] = f.config.priorities.floor[LEVEL_MEDIUM] = 0; /* no cap */
        char *ballast = ballast_new();
        const unsigned batch = 1u << 20;
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, batch), *b = client("b", SHRINKER_NUMA_AWARE, batch);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        uint64_t goal = scope_reclaim_target(node1()), a_scanned = 0;
        CU_ASSERT_FATAL(goal > 0 && goal < BALLAST_SIZE / 2);
        unsigned a_counts = 0;
        for (int round = 0; round < 3; round++) {
                RUN_UNTIL(pending_for(b));
                CU_ASSERT_FATAL(pending_for(b) != NULL);
                struct sent *s = pending_for(a);
                if (s) {
                        a_counts++;
                        CU_ASSERT_EQUAL(answer(s, COUNT(100000)), 0);
                }
                CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(100000)), 0);
                while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN) {
                        a_scanned += s->q.nr_to_scan;
                        CU_ASSERT_EQUAL(answer(s, FREED((int64_t) s->q.nr_to_scan)), 0);
                }
                if ((s = pending_for(b)) && s->q.op == SHRINK_OP_SCAN)
                        CU_ASSERT_EQUAL(answer(s, STOP), 0);
        }
        /* a's half of the goal, in objects of 1000 bytes, in its one count of the goal. */
        CU_ASSERT_EQUAL(a_counts, 1u);
        CU_ASSERT(a_scanned >= goal / 2000 - 2);
        CU_ASSERT(a_scanned <= goal / 2000 + 2);
        CU_ASSERT_EQUAL(info(b->shrinkers[0]).stats.stops, 3u);
        CU_ASSERT_EQUAL(round_engine_goal_asks(reclaim_engine(f.reclaim), b->shrinkers[0], 1), 3u);
        free(ballast);
        teardown();
}

/* A small cache at low: the kernel's sizing at priority 12 asks nothing of 500 objects. Its share of
 * the goal (all of its 2 MB) is asked at once, at the gentlest priority that covers it but not below
 * low's floor: (500 >> 4) * 4 / 2 = 62 objects, in the first round. */
static void test_small_cache_at_low(void) {
        setup();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 128);
        struct shrink_answer small = { .count = 500, .bytes = 500 * 4096, .freed = ABSENT, .scanned = ABSENT };

        scope_feed_level(node1(), LEVEL_LOW, now());
        RUN_UNTIL(pending_for(a));
        struct sent *s = pending_for(a);
        CU_ASSERT_FATAL(s && s->q.op == SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(s->q.priority, f.config.priorities.at[LEVEL_LOW]);
        CU_ASSERT_EQUAL(answer(s, small), 0);
        s = pending_for(a);
        CU_ASSERT_FATAL(s && s->q.op == SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(s->q.priority, f.config.priorities.floor[LEVEL_LOW]);
        CU_ASSERT_EQUAL(s->q.nr_to_scan, 62u);
        teardown();
}

static uint64_t scan_total(struct shrink_client *cl, uint64_t from) {
        uint64_t n = 0;
        for (size_t i = from; i < f.n_sent; i++)
                if (f.sent[i].client == cl && f.sent[i].q.op == SHRINK_OP_SCAN)
                        n += f.sent[i].q.nr_to_scan;
        return n;
}

/* With weights known from the last counts, each shrinker is asked in proportion to what it holds:
 * 240 MB and 80 MB, the same seeks: three to one. (What a shrinker says it holds is capped at what its
 * client has resident: the ballast.) */
static void test_proportional_split(void) {
        setup();
        char *ballast = ballast_new();
        f.config.priorities.at[LEVEL_MEDIUM] = f.config.priorities.floor[LEVEL_MEDIUM] = 0; /* no cap */
        f.config.round_budget_usec = 0; /* on a slow machine a cut job would still be busy in round 2 */
        const unsigned batch = 1u << 20; /* a whole share in one request */
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, batch), *b = client("b", SHRINKER_NUMA_AWARE, batch);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        /* Round 1: nothing known yet, each counts as much as the other. */
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(240000)), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(80000)), 0);
        uint64_t a1 = pending_for(a)->q.nr_to_scan, b1 = pending_for(b)->q.nr_to_scan;
        CU_ASSERT_EQUAL(a1, b1);
        /* (A scan that frees less than its share would be followed by another: stop instead.) */
        CU_ASSERT_EQUAL(answer(pending_for(a), STOP), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), STOP), 0);

        /* Round 2: the goal is far from met, and the weights are the first round's counts. */
        size_t from = f.n_sent;
        RUN_UNTIL(n_pending() == 2);
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(240000)), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(80000)), 0);
        uint64_t a2 = scan_total(a, from), b2 = scan_total(b, from);
        CU_ASSERT(b2 > 0);
        CU_ASSERT(a2 >= 3 * b2 - 3 && a2 <= 3 * b2 + 3);
        /* Together, about what is still to release: the goal less the two objects. */
        uint64_t goal_objects = scope_reclaim_target(node1()) / 1000;
        CU_ASSERT(a2 + b2 <= goal_objects + 2);
        CU_ASSERT(a2 + b2 + 10 >= goal_objects);
        free(ballast);
        teardown();
}

/* A shrinker busy with an earlier round's scan is not asked, but it still weighs in the split: the one
 * that is asked gets its own half of the goal, not the absent one's part too. */
static void test_busy_share_stays(void) {
        setup();
        char *ballast = ballast_new();
        f.config.priorities.at[LEVEL_MEDIUM] = f.config.priorities.floor[LEVEL_MEDIUM] = 0; /* no cap */
        f.config.round_budget_usec = 20000;
        f.config.request_timeout_usec = 60000000;
        const unsigned batch = 1u << 20;
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, batch), *s = client("s", SHRINKER_NUMA_AWARE, batch);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        uint64_t goal = scope_reclaim_target(node1());
        CU_ASSERT_FATAL(goal > 0 && goal < BALLAST_SIZE / 2);
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(100000)), 0);
        CU_ASSERT_EQUAL(answer(pending_for(s), COUNT(100000)), 0);
        CU_ASSERT_FATAL(pending_for(s) && pending_for(s)->q.op == SHRINK_OP_SCAN); /* left waiting */
        CU_ASSERT_EQUAL(answer(pending_for(a), STOP), 0);

        /* The budget cuts s's job; the next round asks a alone. */
        size_t from = f.n_sent;
        RUN_UNTIL(pending_for(a) != NULL);
        CU_ASSERT_FATAL(pending_for(a) && pending_for(a)->q.op == SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(100000)), 0);
        uint64_t asked = scan_total(a, from);
        CU_ASSERT(asked >= goal / 2000 - 2 && asked <= goal / 2000 + 2);
        free(ballast);
        teardown();
}

/* Once the goal is released the round stops: a shrinker that gives more than it was asked ends
 * everyone's scanning at their next step. And a shrinker whose scans free less than they looked at is
 * asked again for what is still missing of its share. */
static void test_stop_at_goal(void) {
        setup();
        f.config.priorities.at[LEVEL_LOW] = f.config.priorities.floor[LEVEL_LOW] = 0;
        char *ballast = ballast_new();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 1000), *b = client("b", SHRINKER_NUMA_AWARE, 1000);

        scope_feed_level(node1(), LEVEL_LOW, now());
        uint64_t goal = scope_reclaim_target(node1());
        CU_ASSERT_FATAL(goal > 4000000 && goal < BALLAST_SIZE / 2);
        CU_ASSERT_EQUAL(answer(pending_for(a), COUNT(1000000)), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(1000000)), 0);
        struct sent *sb = pending_for(b); /* b's first scan stays out while a works */
        CU_ASSERT_FATAL(sb && sb->q.op == SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(sb->q.nr_to_scan, 1000u);

        /* a frees half of what it looks at: each next scan asks for what is still missing of its half
         * of the goal, so it is asked about twice its share's objects in all. */
        uint64_t a_scanned = 0, a_freed = 0;
        struct sent *s;
        while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN && a_freed < goal) {
                CU_ASSERT(s->q.nr_to_scan <= 1000u);
                a_scanned += s->q.nr_to_scan;
                a_freed += s->q.nr_to_scan / 2 * 1000;
                CU_ASSERT_EQUAL(answer(s, FREED((int64_t) (s->q.nr_to_scan / 2))), 0);
                if (a_freed >= goal / 2)
                        break;
        }
        /* (Its scan budget, twice the share's objects, runs out a few halves of odd scans short.) */
        CU_ASSERT(a_freed + goal / 100 >= goal / 2 && a_freed < goal / 2 + 1000000);
        CU_ASSERT(a_scanned >= goal / 1000 - 2 && a_scanned <= goal / 1000 + 2000);
        CU_ASSERT_PTR_NULL(pending_for(a)); /* its share is in, or its budget spent */

        /* b's scan comes back claiming the rest of the goal at once: nothing more for anyone. */
        struct shrink_answer rest = FREED(2000);
        rest.bytes = (int64_t) goal;
        CU_ASSERT_EQUAL(answer(sb, rest), 0);
        CU_ASSERT_PTR_NULL(pending_for(b));
        free(ballast);
        teardown();
}

/* A client that does not answer holds up only itself: the others' rounds go on, its requests time out
 * and after quarantine_after timeouts in a row it is only probed (a count and one batch). */
static void test_slow_client(void) {
        setup();
        struct shrink_client *slow = client("slow", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);

        scope_feed_level(node1(), LEVEL_CRITICAL, now());
        CU_ASSERT_FATAL(pending_for(slow) && pending_for(b));
        /* b's count and scans go through while slow's count is still out. */
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(1000)), 0);
        CU_ASSERT_EQUAL(pending_for(b)->q.op, SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(answer(pending_for(b), STOP), 0);
        CU_ASSERT_PTR_NULL(pending_for(b));
        CU_ASSERT_PTR_NOT_NULL(pending_for(slow));

        struct shrinker *sh = slow->shrinkers[0];
        RUN_UNTIL(info(sh).stats.timeouts >= 2);
        CU_ASSERT_EQUAL(info(sh).stats.timeouts, 2u);
        CU_ASSERT_TRUE(info(sh).quarantined);
        /* Quarantined: probed with a count and a scan of one batch; a count in time is not enough, the
         * scan answered in time ends the quarantine. */
        forget(slow); /* expired */
        RUN_UNTIL(pending_for(slow));
        struct sent *probe = pending_for(slow);
        CU_ASSERT_FATAL(probe != NULL);
        CU_ASSERT_EQUAL(probe->q.op, SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(answer(probe, COUNT(1000)), 0);
        CU_ASSERT_TRUE(info(sh).quarantined);
        probe = pending_for(slow);
        CU_ASSERT_FATAL(probe != NULL && probe->q.op == SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(probe->q.nr_to_scan, 100u); /* its batch */
        CU_ASSERT_EQUAL(answer(probe, FREED(100)), 0);
        CU_ASSERT_FALSE(info(sh).quarantined);
        CU_ASSERT_PTR_NULL(pending_for(slow));
        teardown();
}

/* Impossible answers are refused: the job they answered ends (counted on the shrinker, not as a
 * timeout); unknown, foreign and repeated answers are refused and counted on the client. */
static void test_client_that_lies(void) {
        setup();
        struct shrink_client *liar = client("liar", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);
        struct shrinker *sh = liar->shrinkers[0];
        const char *reason = NULL;

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        struct sent *q = pending_for(liar), *qb = pending_for(b);
        CU_ASSERT_FATAL(q && qb);

        /* b's request is not the liar's to answer; a made-up one is nobody's. */
        struct shrink_answer foreign = COUNT(5);
        foreign.request = (int64_t) qb->q.id;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &foreign, &reason), -ENOENT);
        struct shrink_answer unknown = COUNT(5);
        unknown.request = 999999;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &unknown, &reason), -ENOENT);
        CU_ASSERT_EQUAL(round_engine_client_rejected(reclaim_engine(f.reclaim), liar), 2u);
        CU_ASSERT_EQUAL(round_engine_client_rejected(reclaim_engine(f.reclaim), b), 0u);
        CU_ASSERT_PTR_NOT_NULL(pending_for(b)); /* untouched */

        /* A count answered as a scan: refused, and the job is over, without a timeout. */
        struct shrink_answer wrong = FREED(5);
        wrong.request = (int64_t) q->q.id;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &wrong, &reason), -EINVAL);
        CU_ASSERT_STRING_EQUAL(reason, "a count request is answered with count, bytes or empty");
        CU_ASSERT_EQUAL(info(sh).stats.rejected, 1u);
        q->answered = true;
        /* Answered once: again is unknown. */
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &wrong, &reason), -ENOENT);
        CU_ASSERT_EQUAL(round_engine_client_rejected(reclaim_engine(f.reclaim), liar), 3u);

        /* Next round: negative numbers are impossible too. */
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(0)), 0);
        RUN_UNTIL(pending_for(liar));
        q = pending_for(liar);
        CU_ASSERT_FATAL(q != NULL);
        struct shrink_answer negative = COUNT(-5);
        negative.request = (int64_t) q->q.id;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &negative, &reason), -EINVAL);
        CU_ASSERT_STRING_EQUAL(reason, "negative numbers");
        CU_ASSERT_EQUAL(info(sh).stats.rejected, 2u);
        q->answered = true;

        /* A true count, then more freed than twice what was asked. */
        RUN_UNTIL(pending_for(liar));
        CU_ASSERT_EQUAL(answer(pending_for(liar), COUNT(100000)), 0);
        struct sent *scan = pending_for(liar);
        CU_ASSERT_FATAL(scan && scan->q.op == SHRINK_OP_SCAN);
        struct shrink_answer big = FREED(201);
        big.request = (int64_t) scan->q.id;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, liar, &big, &reason), -EINVAL);
        CU_ASSERT_STRING_EQUAL(reason, "freed exceeds twice nr_to_scan");
        CU_ASSERT_EQUAL(info(sh).stats.freed, 0u);
        CU_ASSERT_EQUAL(info(sh).stats.rejected, 3u);
        CU_ASSERT_EQUAL(info(sh).stats.timeouts, 0u);
        CU_ASSERT_FALSE(info(sh).quarantined);
        teardown();
}

static uint64_t own_resident(void) {
        unsigned long long size, resident = 0;
        FILE *statm = fopen("/proc/self/statm", "re");
        if (statm) {
                if (fscanf(statm, "%llu %llu", &size, &resident) != 2)
                        resident = 0;
                fclose(statm);
        }
        return resident * (uint64_t) sysconf(_SC_PAGESIZE);
}

/* Numbers meant to break the arithmetic: 2^62 objects still make a plan (the product saturates rather
 * than wrapping to nothing); bytes held far beyond the process's memory weigh only what it has resident,
 * and bytes freed beyond it are credited only up to that, so they cannot make the round look done. */
static void test_liar_numbers(void) {
        setup();
        struct shrink_client *liar = client("liar", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);
        struct shrinker *sh = liar->shrinkers[0];

        scope_feed_level(node1(), LEVEL_CRITICAL, now()); /* priority 0 */
        struct shrink_answer huge = { .count = 1LL << 62, .bytes = INT64_MAX, .freed = ABSENT, .scanned = ABSENT };
        CU_ASSERT_EQUAL(answer(pending_for(liar), huge), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(1000)), 0);
        CU_ASSERT(round_engine_last_bytes(reclaim_engine(f.reclaim), sh, 1) > 0 && round_engine_last_bytes(reclaim_engine(f.reclaim), sh, 1) <= own_resident() + (64u << 20));
        struct sent *s;
        for (int i = 0; i < 5 && (s = pending_for(liar)) && s->q.op == SHRINK_OP_SCAN; i++) {
                struct shrink_answer lie = { .count = ABSENT, .bytes = INT64_MAX, .freed = 100, .scanned = ABSENT };
                CU_ASSERT_EQUAL(answer(s, lie), 0);
        }
        if ((s = pending_for(liar)))
                CU_ASSERT_EQUAL(answer(s, STOP), 0);
        CU_ASSERT(info(sh).stats.bytes_freed > 0);
        CU_ASSERT(info(sh).stats.bytes_freed <= own_resident() + (64u << 20));
        CU_ASSERT(sh->deferred[1] > 0);
        /* b is served as usual meanwhile. */
        CU_ASSERT_FATAL(pending_for(b) && pending_for(b)->q.op == SHRINK_OP_SCAN);
        teardown();
}

static unsigned n_sent_to(struct shrink_client *cl) {
        unsigned n = 0;
        for (size_t i = 0; i < f.n_sent; i++)
                n += f.sent[i].client == cl;
        return n;
}

/* No barrier: a client that never answers (stopped, or answering at the last moment) holds up only
 * itself. Rounds end at their budget, and the others are asked round after round while its one request
 * waits for a deadline far away. */
static void test_stopped_client(void) {
        setup();
        f.config.round_budget_usec = 20000;
        f.config.request_timeout_usec = 60000000;
        struct shrink_client *stopped = client("stopped", SHRINKER_NUMA_AWARE, 100);
        struct shrink_client *b = client("b", SHRINKER_NUMA_AWARE, 100);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        CU_ASSERT_EQUAL(answer(pending_for(stopped), COUNT(100000)), 0); /* then silence: its scan waits */
        for (int round = 0; round < 4; round++) {
                RUN_UNTIL(pending_for(b));
                CU_ASSERT_FATAL(pending_for(b) != NULL);
                CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(0)), 0);
        }
        CU_ASSERT_EQUAL(n_sent_to(b), 4u);
        CU_ASSERT_EQUAL(n_sent_to(stopped), 2u); /* the count and one scan, still in flight */
        CU_ASSERT_EQUAL(info(stopped->shrinkers[0]).stats.timeouts, 0u);
        /* Cut from its round, it goes on at its own pace: its scan is still taken, the next one follows;
         * what it leaves undone when it stops is deferred. */
        CU_ASSERT_EQUAL(answer(pending_for(stopped), FREED(100)), 0);
        CU_ASSERT_FATAL(pending_for(stopped) && pending_for(stopped)->q.op == SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(answer(pending_for(stopped), STOP), 0);
        uint64_t deferred = stopped->shrinkers[0]->deferred[1];
        CU_ASSERT(deferred > 0);

        /* A dry run changes nothing: not even the work it carries over. */
        int caller = 0;
        struct shrink_round *r;
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 1, .only = stopped->shrinkers[0],
                                                         .dry_run = true });
        RUN_UNTIL(pending_for(stopped));
        CU_ASSERT_FATAL(pending_for(stopped) && pending_for(stopped)->q.op == SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(answer(pending_for(stopped), COUNT(100000)), 0);
        CU_ASSERT_PTR_NULL(pending_for(stopped));
        CU_ASSERT_EQUAL(stopped->shrinkers[0]->deferred[1], deferred);
        CU_ASSERT_PTR_EQUAL(f.done_caller, &caller); /* answered, and the round is gone */
        teardown();
}

/* A new client is asked at once, alone, at the episode's priority; a loop of registrations by one uid
 * starts no more than one such round per round interval, and nobody else's escalation moves. */
static void test_serve_spammer(void) {
        setup();
        f.config.round_interval_usec = 60000000; /* one round of the episode in this test */
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        struct sent *qa = pending_for(a);
        CU_ASSERT_FATAL(qa != NULL);
        int priority = qa->q.priority;

        struct shrink_client *first = client("spam", SHRINKER_NUMA_AWARE, 100);
        struct sent *qs = pending_for(first);
        CU_ASSERT_FATAL(qs != NULL);
        CU_ASSERT_EQUAL(qs->q.priority, priority);
        CU_ASSERT_EQUAL(qs->q.node, 1);
        shrink_client_free(first);
        forget(first);
        size_t before = f.n_sent;
        for (int i = 0; i < 50; i++) {
                struct shrink_client *spam = client("spam", SHRINKER_NUMA_AWARE, 100);
                shrink_client_free(spam);
        }
        CU_ASSERT_EQUAL(f.n_sent, before); /* nobody asked, a included */
        CU_ASSERT_PTR_EQUAL(pending_for(a), qa);
        teardown();
}

/* Claimed and released side by side: the client's resident memory is read when the round first asks
 * it to scan and again a moment after the round. Here the client (this process) claims 100 KB while it
 * gives back 64 MiB it had mapped. */
static void test_release_measured(void) {
        setup();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100);
        const size_t size = 64u << 20;
        char *ballast = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CU_ASSERT_FATAL(ballast != MAP_FAILED);
        memset(ballast, 1, size);

        int caller = 0;
        struct shrink_round *r;
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 1, .nr_to_scan = 100,
                                                         .measure = true });
        CU_ASSERT_FATAL(pending_for(a) && pending_for(a)->q.op == SHRINK_OP_SCAN);
        munmap(ballast, size);
        struct shrink_answer claim = FREED(100);
        claim.bytes = 100000;
        CU_ASSERT_EQUAL(answer(pending_for(a), claim), 0);
        /* Measured only once the client had time to give back; a Shrink that asked for it is answered
         * then. */
        CU_ASSERT_EQUAL(f.n_done, 0u);
        CU_ASSERT_EQUAL(client_info(a).client_released_bytes, 0u);
        RUN_UNTIL(f.n_done == 1);
        CU_ASSERT_EQUAL(client_info(a).client_claimed_bytes, 100000u);
        CU_ASSERT(client_info(a).client_released_bytes >= size / 2);
        CU_ASSERT_EQUAL_FATAL(f.n_results, 1u);
        CU_ASSERT_EQUAL(f.results[0].bytes_freed, 100000u);
        CU_ASSERT_TRUE(f.results[0].have_released);
        CU_ASSERT_EQUAL(f.results[0].released_bytes, client_info(a).client_released_bytes);
        teardown();
}

/* One measured Shrink of 100 objects in which client a claims `claim` bytes, and really gives back
 * `give` (unmapped from *mem while its scan is out). Returns the bytes credited for the claim. */
static uint64_t measured_shrink(struct shrink_client *a, uint64_t claim, char **mem, size_t give) {
        int caller = 0;
        struct shrink_round *r;
        unsigned done = f.n_done;
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 1, .nr_to_scan = 100,
                                                         .measure = true });
        CU_ASSERT_FATAL(pending_for(a) && pending_for(a)->q.op == SHRINK_OP_SCAN);
        if (give > 0) {
                munmap(*mem, give);
                *mem += give;
        }
        struct shrink_answer a_claim = FREED(100);
        a_claim.bytes = (int64_t) claim;
        CU_ASSERT_EQUAL(answer(pending_for(a), a_claim), 0);
        RUN_UNTIL(f.n_done == done + 1);
        CU_ASSERT_FATAL(f.n_done == done + 1 && f.n_results == 1);
        return f.results[0].bytes_freed;
}

/* A client's claims count for as much as its memory bore out before: one that gives back what it
 * claims keeps full trust; one that claims 32 MiB a time and gives back nothing counts for a sixteenth
 * within four rounds (so its claims cannot end anyone's goal); giving back again restores it. */
static void test_trust_follows_release(void) {
        setup();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100);
        const size_t chunk = 40u << 20, size = 4 * chunk;
        const uint64_t claim = 32u << 20;
        char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *start = mem;
        CU_ASSERT_FATAL(mem != MAP_FAILED);
        memset(mem, 1, size);

        CU_ASSERT_EQUAL(measured_shrink(a, claim, &mem, chunk), claim);
        CU_ASSERT_EQUAL(client_info(a).client_trust, SHRINK_TRUST_FULL);
        for (int i = 0; i < 4; i++)
                (void) measured_shrink(a, claim, &mem, 0);
        unsigned t = client_info(a).client_trust;
        CU_ASSERT(t <= SHRINK_TRUST_FULL / 16 + 1);
        CU_ASSERT_EQUAL(measured_shrink(a, claim, &mem, 0), shrink_trust_credit(t, claim));
        /* Its memory falls by what it claims again: trusted again. */
        for (int i = 0; i < 3; i++)
                (void) measured_shrink(a, claim, &mem, chunk);
        CU_ASSERT(client_info(a).client_trust >= SHRINK_TRUST_FULL * 7 / 8);
        munmap(mem, size - (size_t) (mem - start));
        teardown();
}

/* A shrinker that answers every count in time but lets every scan run into its deadline is quarantined:
 * misses are counted over all requests, and only a job that met every deadline clears them. */
static void test_count_but_never_scan(void) {
        setup();
        struct shrink_client *half = client("half", SHRINKER_NUMA_AWARE, 100);
        struct shrinker *sh = half->shrinkers[0];

        scope_feed_level(node1(), LEVEL_CRITICAL, now());
        for (unsigned round = 0; round < 2; round++) {
                RUN_UNTIL(pending_for(half) && pending_for(half)->q.op == SHRINK_OP_COUNT);
                struct sent *q = pending_for(half);
                CU_ASSERT_FATAL(q && q->q.op == SHRINK_OP_COUNT);
                CU_ASSERT_EQUAL(answer(q, COUNT(100000)), 0);
                CU_ASSERT_FATAL(pending_for(half) && pending_for(half)->q.op == SHRINK_OP_SCAN);
                unsigned before = (unsigned) info(sh).stats.timeouts;
                RUN_UNTIL(info(sh).stats.timeouts > before);
                forget(half);
        }
        CU_ASSERT_EQUAL(info(sh).stats.timeouts, 2u);
        CU_ASSERT_TRUE(info(sh).quarantined);
        /* Its probes: the count is answered in time, the scan of one batch is not. It stays quarantined
         * (it used to leave at the first count and come back at the next timeouts, over and over). */
        for (unsigned probe = 0; probe < 3; probe++) {
                RUN_UNTIL(pending_for(half) && pending_for(half)->q.op == SHRINK_OP_COUNT);
                struct sent *q = pending_for(half);
                CU_ASSERT_FATAL(q && q->q.op == SHRINK_OP_COUNT);
                CU_ASSERT_EQUAL(answer(q, COUNT(100000)), 0);
                CU_ASSERT_TRUE(info(sh).quarantined);
                CU_ASSERT_FATAL(pending_for(half) && pending_for(half)->q.op == SHRINK_OP_SCAN);
                CU_ASSERT_EQUAL(pending_for(half)->q.nr_to_scan, 100u);
                unsigned before = (unsigned) info(sh).stats.timeouts;
                RUN_UNTIL(info(sh).stats.timeouts > before);
                forget(half);
                CU_ASSERT_TRUE(info(sh).quarantined);
        }
        teardown();
}

/* EMPTY: left out of rounds for empty_backoff; the others are asked as before. */
static void test_empty_backoff(void) {
        setup();
        struct shrink_client *e = client("empty", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        CU_ASSERT_EQUAL(answer(pending_for(e), EMPTY), 0);
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(0)), 0);
        for (int round = 0; round < 3; round++) {
                RUN_UNTIL(pending_for(b));
                CU_ASSERT_FATAL(pending_for(b) != NULL);
                CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(0)), 0);
        }
        CU_ASSERT_PTR_NULL(pending_for(e));
        CU_ASSERT_EQUAL(info(e->shrinkers[0]).stats.empty, 1u);
        teardown();
}

/* A client that goes away mid-round: its requests are dropped, the round still ends, and the next round
 * asks only who is left. */
static void test_client_gone_mid_round(void) {
        setup();
        struct shrink_client *gone = client("gone", SHRINKER_NUMA_AWARE, 100), *b = client("b", SHRINKER_NUMA_AWARE, 100);

        scope_feed_level(node1(), LEVEL_MEDIUM, now());
        struct sent *qg = pending_for(gone);
        CU_ASSERT_FATAL(qg && pending_for(b));
        CU_ASSERT_EQUAL(answer(qg, COUNT(100000)), 0);
        CU_ASSERT_PTR_NOT_NULL(pending_for(gone)); /* a scan is out */
        uint64_t scan_id = pending_for(gone)->q.id;
        shrink_client_free(gone);
        forget(gone);

        /* The dropped request is unknown to anyone now. */
        const char *reason;
        struct shrink_answer late = FREED(10);
        late.request = (int64_t) scan_id;
        CU_ASSERT_EQUAL(reclaim_answer(f.reclaim, b, &late, &reason), -ENOENT);

        size_t before = f.n_sent;
        CU_ASSERT_EQUAL(answer(pending_for(b), COUNT(0)), 0);
        RUN_UNTIL(f.n_sent > before);
        CU_ASSERT_EQUAL(f.n_sent, before + 1);
        CU_ASSERT_PTR_NOT_NULL(pending_for(b));
        teardown();
}

/* An explicit Shrink: results for the caller; a caller that left gets nothing and the round still ends. */
static void test_explicit_shrink(void) {
        setup();
        struct shrink_client *a = client("a", SHRINKER_NUMA_AWARE, 100);
        int caller = 0;

        /* Without nr_to_scan: count, then scan everything counted, on both nodes for the system. */
        struct shrink_round *r;
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_SYSTEM });
        struct sent *s = pending_for(a);
        CU_ASSERT_FATAL(s && s->q.op == SHRINK_OP_COUNT);
        CU_ASSERT_EQUAL(s->q.node, 0);
        CU_ASSERT_EQUAL(s->q.priority, 0);
        CU_ASSERT_EQUAL(answer(s, COUNT(150)), 0);
        while ((s = pending_for(a)) && s->q.op == SHRINK_OP_SCAN)
                CU_ASSERT_EQUAL(answer(s, FREED((int64_t) s->q.nr_to_scan)), 0);
        /* node 1's job follows node 0's: one request in flight per shrinker */
        CU_ASSERT_FATAL(s && s->q.node == 1);
        CU_ASSERT_EQUAL(f.n_done, 0u);
        CU_ASSERT_EQUAL(answer(s, EMPTY), 0);
        RUN_UNTIL(f.n_done == 1); /* once its client was measured */
        CU_ASSERT_EQUAL(f.n_done, 1u);
        CU_ASSERT_PTR_EQUAL(f.done_caller, &caller);
        CU_ASSERT_EQUAL_FATAL(f.n_results, 2u);
        CU_ASSERT_EQUAL(f.results[0].node, 0);
        CU_ASSERT_EQUAL(f.results[0].freed, 150u);
        CU_ASSERT_EQUAL(f.results[0].bytes_freed, 150u * 1000);
        CU_ASSERT_EQUAL(f.results[1].node, 1);
        CU_ASSERT_TRUE(f.results[1].empty);

        /* With nr_to_scan, on one node: scans of at most a batch, no count; the caller leaves midway. */
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 1, .nr_to_scan = 250 });
        s = pending_for(a);
        CU_ASSERT_FATAL(s && s->q.op == SHRINK_OP_SCAN);
        CU_ASSERT_EQUAL(s->q.nr_to_scan, 100u);
        /* Nobody waits for the rest: the answer in flight is taken, and nothing more is asked. */
        reclaim_shrink_detach(r);
        CU_ASSERT_EQUAL(answer(s, FREED(100)), 0);
        CU_ASSERT_PTR_NULL(pending_for(a));
        CU_ASSERT_EQUAL(f.n_done, 1u); /* nobody told */

        /* With nr_to_scan, a shrinker that frees nothing is not asked again in the pass. */
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 1, .nr_to_scan = 1000000 });
        CU_ASSERT_EQUAL(answer(pending_for(a), FREED(0)), 0);
        CU_ASSERT_PTR_NULL(pending_for(a));
        RUN_UNTIL(f.n_done == 2);
        CU_ASSERT_EQUAL(f.n_done, 2u);
        CU_ASSERT_EQUAL(f.results[0].scanned, 100u);
        CU_ASSERT_EQUAL(f.results[0].freed, 0u);

        /* A Shrink whose only shrinker goes away ends with its (empty-handed) result. */
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_NODE, .node_index = 0 });
        CU_ASSERT_PTR_NOT_NULL(pending_for(a));
        shrink_client_free(a);
        CU_ASSERT_EQUAL(f.n_done, 3u);
        CU_ASSERT_EQUAL(f.n_results, 1u);
        CU_ASSERT_EQUAL(f.results[0].freed, 0u);

        /* Nobody to ask: done at once. */
        CU_ASSERT_EQUAL_FATAL(reclaim_shrink_new(f.reclaim, &caller, &r), 0);
        reclaim_shrink_start(r, &(struct shrink_target){ .type = SCOPE_SYSTEM });
        CU_ASSERT_EQUAL(f.n_done, 4u);
        CU_ASSERT_EQUAL(f.n_results, 0u);
        teardown();
}

int main(void) {
        static const struct test_case cases[] = {
                { "a round's requests and priorities", test_round_requests_and_priorities },
                { "escalation stops at the floor", test_escalation_floor },
                { "the goal is split in proportion", test_proportional_split },
                { "a round stops at its goal", test_stop_at_goal },
                { "a target of 0", test_target_zero },
                { "a small cache at low", test_small_cache_at_low },
                { "no new goal while the stall is gone", test_no_goal_while_quiet },
                { "a share not delivered is nobody else's", test_undelivered_share_stays },
                { "a busy shrinker's part is its own", test_busy_share_stays },
                { "a slow client", test_slow_client },
                { "a client that lies", test_client_that_lies },
                { "answering counts but never scans is quarantined", test_count_but_never_scan },
                { "numbers meant to break the arithmetic", test_liar_numbers },
                { "claimed and released bytes", test_release_measured },
                { "trust follows what was released", test_trust_follows_release },
                { "a stopped client delays nobody", test_stopped_client },
                { "registrations change only the new client", test_serve_spammer },
                { "an EMPTY shrinker is left out for a while", test_empty_backoff },
                { "a client that goes away mid-round", test_client_gone_mid_round },
                { "an explicit Shrink, and one whose caller leaves", test_explicit_shrink },
                {},
        };
        return test_run("reclaim", cases, test_need_root_psi());
}
