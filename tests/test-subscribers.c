/* SPDX-License-Identifier: MIT */
/* Subscribers against the real daemon, with node levels driven through a two-node fixture tree: events
 * for NUMA nodes, and a subscriber that stops reading while the scope keeps changing. */

#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pressure.h"
#include "pressure-gen.h"
#include "test-util.h"

static struct test_daemon daemon_;
static char root[128];

/* Node 1 of the fixture: free pages equal to its high watermark (3000) is "low"; 100000 is "ok". */
static int set_node1_free(unsigned long pages) {
        char src[200], dst[200], cmd[2000];
        snprintf(src, sizeof(src), "%s/proc/zoneinfo.in", root);
        snprintf(dst, sizeof(dst), "%s/proc/zoneinfo", root);
        snprintf(cmd, sizeof(cmd),
                 "awk -v free=%lu '/^Node 1, zone +Normal/{n1=1} /^Node 1, zone +Movable/{n1=0} "
                 "n1 && $1==\"pages\" && $2==\"free\" {print \"  pages free     \" free; next} {print}' %s > %s.tmp && mv %s.tmp %s",
                 pages, src, dst, dst, dst);
        return system(cmd) == 0 ? 0 : -EIO;
}

static int setup_tree(void) {
        char cmd[600];
        snprintf(root, sizeof(root), "/tmp/pressured-sysfs-XXXXXX");
        if (!mkdtemp(root))
                return -errno;
        test_cleanup_path(root, true);
        snprintf(cmd, sizeof(cmd), "cp -r %s/. %s/ && cp %s/proc/zoneinfo %s/proc/zoneinfo.in", test_fixture("sysfs-2node"),
                 root, root, root);
        if (system(cmd) != 0)
                return -EIO;
        return 0;
}

static void teardown_tree(void) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        (void) system(cmd);
}

struct seen {
        enum pressure_level level;
        unsigned events;
};

static void on_event(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        struct seen *seen = userdata;
        (void) c;
        CU_ASSERT_EQUAL(pressure_scope_get_type(s), PRESSURE_SCOPE_NODE);
        CU_ASSERT_EQUAL(pressure_scope_get_node(s), 1);
        seen->level = pressure_scope_get_level(s);
        if (!initial)
                seen->events++;
}

static int wait_level(struct pressure_client *c, struct seen *seen, enum pressure_level want) {
        uint64_t deadline = test_now_ms() + 10000;
        while (seen->level != want) {
                uint64_t now = test_now_ms();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = pressure_client_get_fd(c), .events = POLLIN };
                if (poll(&p, 1, (int) (deadline - now)) > 0 && pressure_client_dispatch(c) < 0)
                        return -ECONNRESET;
        }
        return 0;
}

static void test_node_events(void) {
        struct pressure_client *c;
        struct seen seen = {};
        const char *scopes[] = { "node:1", NULL };

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_event, &seen), 0);
        /* As recorded, node 1 sits at its high watermark. */
        CU_ASSERT_EQUAL(seen.level, PRESSURE_LEVEL_LOW);
        /* The system scope watches the empty group's file (main()): nobody has ever stalled there. */
        struct pressure_status *quiet = NULL;
        struct pressure_stall some;
        if (test_quiet_pressure_path() && pressure_client_get_status(c, &quiet) >= 0) {
                CU_ASSERT(pressure_scope_get_stall(pressure_status_get_system(quiet), PRESSURE_STALL_SOME, &some) >= 0);
                CU_ASSERT_EQUAL(some.total, 0u);
                pressure_status_unref(quiet);
        }

        CU_ASSERT_EQUAL(set_node1_free(100000), 0);
        CU_ASSERT_EQUAL(wait_level(c, &seen, PRESSURE_LEVEL_OK), 0);
        CU_ASSERT_EQUAL(set_node1_free(2400), 0); /* below low (2500) */
        CU_ASSERT_EQUAL(wait_level(c, &seen, PRESSURE_LEVEL_MEDIUM), 0);
        CU_ASSERT_EQUAL(set_node1_free(1000), 0); /* below min (2000) */
        CU_ASSERT_EQUAL(wait_level(c, &seen, PRESSURE_LEVEL_CRITICAL), 0);

        /* Node 0 stays ok throughout, and the status shows both nodes with their sizes. */
        struct pressure_status *st;
        CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
        CU_ASSERT_EQUAL(pressure_status_get_n_nodes(st), 2u);
        CU_ASSERT_EQUAL(pressure_scope_get_level(pressure_status_get_node(st, 0)), PRESSURE_LEVEL_OK);
        CU_ASSERT_EQUAL(pressure_scope_get_level(pressure_status_get_node(st, 1)), PRESSURE_LEVEL_CRITICAL);
        uint64_t total = 0, free_b = 0;
        CU_ASSERT_EQUAL(pressure_scope_get_memory(pressure_status_get_node(st, 1), &total, &free_b), 0);
        CU_ASSERT_EQUAL(total, 4060000ull * 1024);
        CU_ASSERT(pressure_scope_get_reclaim_target(pressure_status_get_node(st, 1)) > 0);
        pressure_status_unref(st);
        pressure_client_unref(c);
        set_node1_free(3000);
}

struct recorded {
        char lines[16][64];
        unsigned n;
};

static void on_record(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        struct recorded *r = userdata;
        (void) c;
        if (initial || r->n >= 16)
                return;
        snprintf(r->lines[r->n++], sizeof(r->lines[0]), "%s->%s",
                 pressure_level_to_string(pressure_scope_get_previous_level(s)),
                 pressure_level_to_string(pressure_scope_get_level(s)));
}

/* min_level: told when the scope reaches it and when it falls back below, and of the return to ok after
 * that, nothing else; "previous" is what this subscriber last heard. */
static void test_min_level(void) {
        struct pressure_client *sync, *crit;
        struct seen seen = {};
        struct recorded rec = {};
        const char *scopes[] = { "node:1", NULL };

        CU_ASSERT_EQUAL_FATAL(set_node1_free(100000), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &sync), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(sync, scopes, PRESSURE_LEVEL_LOW, on_event, &seen), 0);
        CU_ASSERT_EQUAL(wait_level(sync, &seen, PRESSURE_LEVEL_OK), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &crit), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(crit, scopes, PRESSURE_LEVEL_CRITICAL, on_record, &rec), 0);

        static const struct {
                unsigned long free;
                enum pressure_level level;
        } steps[] = {
                { 3000, PRESSURE_LEVEL_LOW },      { 2400, PRESSURE_LEVEL_MEDIUM }, { 1000, PRESSURE_LEVEL_CRITICAL },
                { 2400, PRESSURE_LEVEL_MEDIUM },   { 1000, PRESSURE_LEVEL_CRITICAL }, { 2400, PRESSURE_LEVEL_MEDIUM },
                { 100000, PRESSURE_LEVEL_OK },
        };
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
                CU_ASSERT_EQUAL(set_node1_free(steps[i].free), 0);
                CU_ASSERT_EQUAL(wait_level(sync, &seen, steps[i].level), 0);
        }
        /* Both subscribers are written to in the same pass, so what crit was sent is in its socket now. */
        CU_ASSERT_EQUAL(pressure_client_dispatch(crit), 0);
        CU_ASSERT_EQUAL(rec.n, 5u);
        CU_ASSERT_STRING_EQUAL(rec.lines[0], "ok->critical");
        CU_ASSERT_STRING_EQUAL(rec.lines[1], "critical->medium");
        CU_ASSERT_STRING_EQUAL(rec.lines[2], "medium->critical");
        CU_ASSERT_STRING_EQUAL(rec.lines[3], "critical->medium");
        /* Fallen through two levels: told of the return to ok too, not left at medium. */
        CU_ASSERT_STRING_EQUAL(rec.lines[4], "medium->ok");
        pressure_client_unref(crit);
        pressure_client_unref(sync);
        CU_ASSERT_EQUAL(set_node1_free(3000), 0);
}

static void test_slow_subscriber_is_coalesced(void) {
        struct pressure_client *c;
        struct seen seen = {};
        const char *scopes[] = { "node:1", NULL };
        char *msg = NULL;
        enum { TOGGLES = 1200 };

        /* The slow one: subscribes, takes the first reply, then reads nothing. */
        int slow = test_connect(daemon_.socket);
        CU_ASSERT_FATAL(slow >= 0);
        const char sub[] = "{\"method\":\"io.pressured.Subscribe\",\"parameters\":{\"scopes\":[{\"type\":\"node\",\"node\":1}]},\"more\":true}";
        CU_ASSERT_EQUAL(test_send_raw(slow, sub, sizeof(sub)), 0);
        CU_ASSERT_EQUAL(test_recv_msg(slow, 5000, &msg), 1);
        free(msg);

        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_subscribe(c, scopes, PRESSURE_LEVEL_LOW, on_event, &seen), 0);

        /* Flip node 1 between ok and low, each time until the reading subscriber has seen it. */
        enum pressure_level last = seen.level;
        for (int i = 0; i < TOGGLES; i++) {
                last = last == PRESSURE_LEVEL_OK ? PRESSURE_LEVEL_LOW : PRESSURE_LEVEL_OK;
                if (set_node1_free(last == PRESSURE_LEVEL_OK ? 100000 : 3000) < 0 || wait_level(c, &seen, last) < 0) {
                        CU_FAIL("reader did not see a change");
                        break;
                }
        }
        CU_ASSERT(seen.events >= TOGGLES);

        /* Now the slow one reads all that waits for it: far fewer events than changes, some marked as
         * coalesced, and the last one is the latest state. */
        unsigned n = 0, coalesced = 0;
        char last_level[16] = "";
        for (;;) {
                int r = test_recv_msg(slow, 1000, &msg);
                if (r != 1)
                        break;
                struct json_object *o = json_tokener_parse(msg), *p, *ev, *v;
                if (json_object_object_get_ex(o, "parameters", &p) && json_object_object_get_ex(p, "event", &ev)) {
                        n++;
                        if (json_object_object_get_ex(ev, "coalesced", &v))
                                coalesced += (unsigned) json_object_get_int(v);
                        if (json_object_object_get_ex(ev, "level", &v))
                                snprintf(last_level, sizeof(last_level), "%s", json_object_get_string(v));
                }
                json_object_put(o);
                free(msg);
        }
        close(slow);
        printf("\n    slow subscriber: %u events for %d changes, %u coalesced\n", n, TOGGLES, coalesced);
        CU_ASSERT(n < TOGGLES);
        CU_ASSERT(coalesced > 0);
        CU_ASSERT_STRING_EQUAL(last_level, pressure_level_to_string(last));
        CU_ASSERT(test_daemon_alive(&daemon_));
        pressure_client_unref(c);
}

/* ---- node-local reclaim through the LRU's built-in shrinker ---- */

struct item {
        struct pressure_lru_node lru;
        int node;
        int index; /* in items[] */
};

enum { PER_NODE = 1000 };
static unsigned long freed_per_node[2];
static pthread_mutex_t freed_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed_cond = PTHREAD_COND_INITIALIZER;

/* The application's table of its objects: mutators look objects up in it under freed_lock, and the free
 * callback takes the object out under the same lock, as pressure.h tells an application to. */
static struct item *items[2 * PER_NODE];

static void free_leftover(struct pressure_lru_node *n, void *userdata) {
        (void) userdata;
        free(PRESSURE_LRU_ENTRY(n, struct item, lru));
}

/* Runs on the library's thread, called by the built-in shrinker's scan. */
static void free_item(struct pressure_lru_node *n, void *userdata) {
        struct item *it = PRESSURE_LRU_ENTRY(n, struct item, lru);
        (void) userdata;
        pthread_mutex_lock(&freed_lock);
        freed_per_node[it->node]++;
        items[it->index] = NULL;
        pthread_cond_broadcast(&freed_cond);
        pthread_mutex_unlock(&freed_lock);
        free(it);
}

/* While the daemon's requests run the built-in shrinker on the library's thread: take node 1's objects
 * off and put them back from two threads, with no lock of the list's, until the shrinker has freed some
 * and a while after (not to the end: objects put back go to the newest end, and the test wants them
 * all freed in the end). */
static int stop_mutators;

static void *mutator(void *arg) {
        struct pressure_lru *lru = arg;
        unsigned seed = (unsigned) (uintptr_t) pthread_self(), n = 0, after = 0;
        while (!__atomic_load_n(&stop_mutators, __ATOMIC_RELAXED) && after < 20000) {
                int i = PER_NODE + (int) (rand_r(&seed) % PER_NODE);
                pthread_mutex_lock(&freed_lock);
                after += freed_per_node[1] > 0;
                struct item *it = items[i];
                if (it) {
                        int r = pressure_lru_del(lru, &it->lru);
                        CU_ASSERT(r == 1 || r == 0 || r == -EBUSY); /* -EBUSY: the shrinker has it */
                        if (r == 1)
                                CU_ASSERT_EQUAL(pressure_lru_add(lru, &it->lru, 1), 1);
                }
                pthread_mutex_unlock(&freed_lock);
                if (++n % 64 == 0)
                        sched_yield();
        }
        return NULL;
}

static enum pressure_lru_status take_all(struct pressure_lru_node *n, void *ud) {
        (void) n;
        (void) ud;
        return PRESSURE_LRU_REMOVED;
}

static void test_node_local_reclaim(void) {
        struct pressure_client *c;
        struct pressure_lru *lru;
        struct pressure_shrinker *sh;

        CU_ASSERT_EQUAL_FATAL(set_node1_free(100000), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &lru), 0);
        for (int nid = 0; nid < 2; nid++)
                for (int i = 0; i < PER_NODE; i++) {
                        struct item *it = calloc(1, sizeof(*it));
                        pressure_lru_node_init(&it->lru);
                        it->node = nid;
                        it->index = nid * PER_NODE + i;
                        items[it->index] = it;
                        CU_ASSERT_EQUAL(pressure_lru_add(lru, &it->lru, nid), 1);
                }
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_shrinker_alloc(lru, c, "node-cache", 0, sizeof(struct item), NULL, free_item,
                                                          NULL, &sh),
                              0);
        CU_ASSERT_EQUAL(pressure_lru_shrinker_alloc(lru, c, "second", 0, 0, NULL, free_item, NULL, &sh), -EBUSY);
        CU_ASSERT_EQUAL(pressure_shrinker_set_batch(sh, 64), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_register(sh), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_start_thread(c), 0);

        /* Node 1 runs short (below its min watermark): the daemon asks for node 1 only, while two
         * threads use node 1's objects until half of them are gone. */
        pthread_t m[2];
        stop_mutators = 0;
        for (int i = 0; i < 2; i++)
                CU_ASSERT_EQUAL_FATAL(pthread_create(&m[i], NULL, mutator, lru), 0);
        CU_ASSERT_EQUAL(set_node1_free(1000), 0);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 30;
        pthread_mutex_lock(&freed_lock);
        while (freed_per_node[1] < PER_NODE)
                if (pthread_cond_timedwait(&freed_cond, &freed_lock, &deadline) != 0)
                        break;
        unsigned long f0 = freed_per_node[0], f1 = freed_per_node[1];
        pthread_mutex_unlock(&freed_lock);
        __atomic_store_n(&stop_mutators, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < 2; i++)
                pthread_join(m[i], NULL);
        CU_ASSERT_EQUAL(f1, (unsigned long) PER_NODE);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 1), 0u);
        CU_ASSERT_EQUAL(f0, 0ul);
        CU_ASSERT_EQUAL(pressure_lru_count_node(lru, 0), (uint64_t) PER_NODE);

        CU_ASSERT_EQUAL(set_node1_free(3000), 0);
        pressure_shrinker_free(sh);
        pressure_client_unref(c);
        /* What is left is ours to free. */
        pressure_lru_drain(lru, free_leftover, NULL);
        pressure_lru_free(lru);
}

/* ---- subscriptions as objects ---- */

struct sub_seen {
        unsigned initial, events;
        enum pressure_level level;
        int ended; /* 1: not ended */
};

static void on_sub_event(struct pressure_client *c, const struct pressure_scope *s, int initial, void *userdata) {
        struct sub_seen *seen = userdata;
        (void) c;
        seen->level = pressure_scope_get_level(s);
        if (initial)
                seen->initial++;
        else
                seen->events++;
}

static void on_sub_end(struct pressure_subscription *sub, int error, void *userdata) {
        struct sub_seen *seen = userdata;
        (void) sub;
        seen->ended = error;
}

/* Any number per client, each with its own level; first states from dispatch; unref unsubscribes; a
 * refusal comes to the end handler. */
static void test_subscription_objects(void) {
        struct pressure_client *c;
        struct pressure_subscription *low, *crit, *bad;
        struct sub_seen sl = { .ended = 1 }, sc = { .ended = 1 }, sf = { .ended = 1 }, sb = { .ended = 1 };
        const char *node1[] = { "node:1", NULL }, *node0[] = { "node:0", NULL };
        const char *missing[] = { "/pressured-test-no-such-cgroup", NULL };

        /* Node 1 at ok before anyone subscribes: the critical subscriber's count starts clean. */
        CU_ASSERT_EQUAL_FATAL(set_node1_free(100000), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        struct pressure_status *st;
        bool ok = false;
        for (uint64_t end = test_now_ms() + 10000; !ok && test_now_ms() < end;) {
                CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
                ok = pressure_scope_get_level(pressure_status_get_node(st, 1)) == PRESSURE_LEVEL_OK;
                pressure_status_unref(st);
        }
        CU_ASSERT_FATAL(ok);
        CU_ASSERT_EQUAL_FATAL(pressure_subscription_new(c, node1, PRESSURE_LEVEL_LOW, on_sub_event, &sl, &low), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_subscription_new(c, node1, PRESSURE_LEVEL_CRITICAL, on_sub_event, &sc, &crit), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_subscription_new(c, node0, PRESSURE_LEVEL_LOW, on_sub_event, &sf, NULL), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_subscription_new(c, missing, PRESSURE_LEVEL_LOW, on_sub_event, &sb, &bad), 0);
        CU_ASSERT_EQUAL(pressure_subscription_set_end_handler(bad, on_sub_end, &sb), 0);
        CU_ASSERT_EQUAL(pressure_subscription_new(c, (const char *[]){ "nowhere", NULL }, PRESSURE_LEVEL_LOW,
                                                  on_sub_event, &sb, &bad),
                        -EINVAL);
        /* Nothing is delivered before dispatch. */
        CU_ASSERT_EQUAL(sl.initial + sc.initial + sf.initial, 0u);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, sl.initial == 1 && sc.initial == 1 && sf.initial == 1 && sb.ended != 1));
        CU_ASSERT_EQUAL(sb.ended, -ENOENT);
        CU_ASSERT_EQUAL(pressure_subscription_get_state(bad), -ENOENT);
        CU_ASSERT_EQUAL(pressure_subscription_get_state(low), 1);
        CU_ASSERT_EQUAL(sb.initial, 0u);
        pressure_subscription_unref(bad);

        CU_ASSERT_EQUAL(set_node1_free(2400), 0); /* medium: the low subscriber hears, the critical one not */
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, sl.level == PRESSURE_LEVEL_MEDIUM));
        CU_ASSERT_EQUAL(set_node1_free(1000), 0); /* critical: both */
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, sl.level == PRESSURE_LEVEL_CRITICAL && sc.level == PRESSURE_LEVEL_CRITICAL));
        CU_ASSERT_EQUAL(sc.events, 1u);

        /* Unsubscribed: the fall back below critical, sent in the same pass as the low subscriber's
         * event, is not heard. */
        pressure_subscription_unref(crit);
        CU_ASSERT_EQUAL(set_node1_free(2400), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, sl.level == PRESSURE_LEVEL_MEDIUM));
        CU_ASSERT_EQUAL(sc.events, 1u);
        CU_ASSERT_EQUAL(sf.events, 0u); /* node 0 stayed ok */

        /* The node's own figures through the getters. */
        uint64_t wmin = 0, wlow = 0, whigh = 0, usage;
        CU_ASSERT_EQUAL_FATAL(pressure_client_get_status(c, &st), 0);
        CU_ASSERT_EQUAL(pressure_scope_get_watermarks(pressure_status_get_node(st, 1), &wmin, &wlow, &whigh), 0);
        CU_ASSERT_EQUAL(wmin, 2000ull * 4096);
        CU_ASSERT_EQUAL(wlow, 2500ull * 4096);
        CU_ASSERT_EQUAL(whigh, 3000ull * 4096);
        CU_ASSERT_EQUAL(pressure_scope_get_cgroup_memory(pressure_status_get_node(st, 1), &usage, NULL), -ENODATA);
        CU_ASSERT_EQUAL(pressure_scope_get_watermarks(pressure_status_get_system(st), NULL, NULL, NULL), -ENODATA);
        pressure_status_unref(st);

        pressure_subscription_unref(low);
        pressure_client_unref(c); /* the floating one goes with the client */
        CU_ASSERT_EQUAL(set_node1_free(3000), 0);
}

/* A shrinker of one's own over a list, with the walk and count helpers: node pressure asks for node 1,
 * and says which scope and level the request is for. */
struct own {
        struct pressure_lru *lru;
        unsigned long freed[2];
        struct pressure_shrink_control last;
        uint64_t asked_at;
};

static uint64_t own_count(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct own *o = userdata;
        (void) s;
        uint64_t n = pressure_lru_shrink_count(o->lru, sc);
        return n > 0 ? n : PRESSURE_SHRINK_EMPTY;
}

static uint64_t own_scan(struct pressure_shrinker *s, struct pressure_shrink_control *sc, void *userdata) {
        struct own *o = userdata;
        struct pressure_lru_node *d;
        struct timespec ts;
        (void) s;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        o->asked_at = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
        o->last = *sc;
        uint64_t n = pressure_lru_shrink_walk(o->lru, sc, take_all, NULL, &d);
        while (d) {
                struct item *it = PRESSURE_LRU_ENTRY(d, struct item, lru);
                d = d->next;
                o->freed[it->node]++;
                free(it);
        }
        return n;
}

static void test_own_shrinker_over_list(void) {
        struct pressure_client *c;
        struct pressure_shrinker *sh;
        struct own o = {};

        CU_ASSERT_EQUAL_FATAL(set_node1_free(100000), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_lru_new(2, &o.lru), 0);
        for (int nid = 0; nid < 2; nid++)
                for (int i = 0; i < 100; i++) {
                        struct item *it = calloc(1, sizeof(*it));
                        pressure_lru_node_init(&it->lru);
                        it->node = nid;
                        CU_ASSERT_EQUAL(pressure_lru_add(o.lru, &it->lru, nid), 1);
                }
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_shrinker_alloc(c, PRESSURE_SHRINKER_NUMA_AWARE, "own-list", &sh), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_callbacks(sh, own_count, own_scan), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_userdata(sh, &o, NULL), 0);
        CU_ASSERT_EQUAL(pressure_shrinker_set_seeks(sh, 0), 0); /* cheap: half of it per pass */
        CU_ASSERT_EQUAL(pressure_shrinker_register(sh), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, pressure_client_is_connected(c) == 1));

        CU_ASSERT_EQUAL(set_node1_free(1000), 0);
        CU_ASSERT_TRUE(TEST_DISPATCH_UNTIL(c, o.freed[1] > 0));
        CU_ASSERT_EQUAL(o.freed[0], 0ul);
        CU_ASSERT_EQUAL(o.last.node, 1);
        CU_ASSERT_EQUAL(o.last.scope_type, PRESSURE_SCOPE_NODE);
        CU_ASSERT(o.last.level >= PRESSURE_LEVEL_LOW);
        CU_ASSERT(o.last.deadline > o.asked_at);
        CU_ASSERT(o.last.nr_scanned > 0 && o.last.nr_scanned <= o.last.nr_to_scan);

        CU_ASSERT_EQUAL(set_node1_free(3000), 0);
        pressure_shrinker_free(sh);
        pressure_client_unref(c);
        pressure_lru_drain(o.lru, free_leftover, NULL);
        pressure_lru_free(o.lru);
}

/* References taken and dropped from several threads at once, as thread mode allows: the count stays
 * right (ThreadSanitizer runs this test in build-aux/check). */
static void *ref_unref_loop(void *userdata) {
        struct pressure_client *c = userdata;
        for (int i = 0; i < 100000; i++)
                pressure_client_unref(pressure_client_ref(c));
        return NULL;
}

static void test_ref_from_threads(void) {
        struct pressure_client *c;
        pthread_t t[4];
        CU_ASSERT_EQUAL_FATAL(pressure_client_new(daemon_.socket, &c), 0);
        CU_ASSERT_EQUAL_FATAL(pressure_client_start_thread(c), 0);
        for (int i = 0; i < 4; i++)
                CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, ref_unref_loop, c), 0);
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        /* Still ours alone and working: a call answers, and the last unref frees it. */
        struct pressure_status *st;
        CU_ASSERT_EQUAL(pressure_client_get_status(c, &st), 0);
        pressure_status_unref(st);
        pressure_client_unref(c);
}

static void test_stop(void) {
        CU_ASSERT_EQUAL(test_daemon_stop(&daemon_), 0);
        teardown_tree();
}

int main(void) {
        static const struct test_case cases[] = {
                { "client references from several threads", test_ref_from_threads },
                { "node level events from node figures", test_node_events },
                { "min_level", test_min_level },
                { "a subscriber that stops reading is coalesced", test_slow_subscriber_is_coalesced },
                { "node-local reclaim through the LRU's shrinker", test_node_local_reclaim },
                { "subscriptions as objects", test_subscription_objects },
                { "a shrinker of one's own over a list", test_own_shrinker_over_list },
                { "daemon stops cleanly", test_stop },
                {},
        };
        const char *skip = access("/proc/pressure/memory", R_OK) < 0 ? "no PSI on this kernel" : NULL;
        if (!skip) {
                if (setup_tree() < 0)
                        return 1;
                if (set_node1_free(3000) < 0)
                        return 1;
                /* The nodes' levels come from the fixture. The system's would come from the host's real
                 * PSI, which other work beside this test raises (a busy CI machine reached 1900 ms of
                 * 2 s, and a system round then took node 0's objects): it watches an empty group's
                 * memory.pressure instead, where nobody stalls, and its thresholds stay out of reach
                 * for hosts without cgroup v2. */
                const char *quiet = test_quiet_pressure_path();
                const char *const args[] = { "--sysfs-root", root, "--hold", "0", "--sample-interval", "10ms",
                                             "--node-interval", "10ms", "--low", "some 1900ms 2s",
                                             "--medium", "some 1950ms 2s", "--critical", "full 1990ms 2s",
                                             quiet ? "--system-pressure" : NULL, quiet, NULL };
                if (test_daemon_start(&daemon_, args) < 0) {
                        fprintf(stderr, "cannot start the daemon\n");
                        teardown_tree();
                        return 1;
                }
        }
        return test_run("subscribers", cases, skip);
}
