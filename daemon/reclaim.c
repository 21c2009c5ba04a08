/* SPDX-License-Identifier: MIT */
#include "reclaim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "protocol.h"
#include "scope.h"
#include "varlink.h"

struct shrink_round {
        struct manager *manager;
        struct reclaim_episode *episode;   /* NULL for an explicit Shrink */
        struct varlink_connection *reply;  /* the Shrink call to answer */
        struct json_object *results;       /* its per-job results */
        unsigned n_jobs;                   /* not finished yet */
        uint64_t freed, freed_bytes, scanned;
        unsigned n_asked;
};

struct reclaim_episode {
        struct scope *scope;
        sd_event_source *timer;
        struct shrink_round *round;
        uint64_t target, freed_bytes;
        unsigned rounds;
        unsigned escalation; /* rounds so far that did not end the pressure: each asks for more */
        bool paused;         /* target reached: waiting to see whether the pressure goes */
};

static uint64_t now_usec(struct manager *m) {
        uint64_t t = 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void job_run(struct shrink_job *j);
static void round_job_done(struct shrink_round *r, struct shrink_job *j);

/* ---- requests ---- */

static void request_free(struct shrink_client *cl, struct shrink_request *q) {
        if (!q)
                return;
        if (q->prev)
                q->prev->next = q->next;
        else
                cl->requests = q->next;
        if (q->next)
                q->next->prev = q->prev;
        sd_event_source_disable_unref(q->timer);
        if (q->job)
                q->job->req = NULL;
        free(q);
}

static void job_finish(struct shrink_job *j);

static int on_request_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct shrink_request *q = userdata;
        struct shrink_job *j = q->job;
        struct shrinker *sh = j->shrinker;
        (void) s;
        (void) usec;

        sh->stats.timeouts++;
        j->timed_out = true;
        if (shrink_health_timeout(&sh->health, sh->client->manager->config.quarantine_after))
                log_warning("Shrinker %s (id %llu) of pid %d did not answer %u requests in time: quarantined.",
                            sh->name, (unsigned long long) sh->id, (int) sh->client->pid,
                            sh->health.consecutive_timeouts);
        request_free(sh->client, q);
        job_finish(j);
        return 0;
}

static int request_send(struct shrink_job *j, enum shrink_op op, uint64_t nr_to_scan) {
        struct shrinker *sh = j->shrinker;
        struct shrink_client *cl = sh->client;
        struct manager *m = cl->manager;
        uint64_t now = now_usec(m);
        int r;

        struct shrink_request *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->id = ++m->last_request_id;
        q->job = j;
        q->op = op;
        q->nr_to_scan = nr_to_scan;
        q->sent_usec = now;
        q->deadline_usec = now + m->config.request_timeout_usec;

        r = sd_event_add_time(m->event, &q->timer, CLOCK_MONOTONIC, q->deadline_usec, 1000, on_request_timeout, q);
        if (r < 0) {
                free(q);
                return r;
        }
        (void) sd_event_source_set_description(q->timer, "shrink-deadline");
        q->next = cl->requests;
        if (q->next)
                q->next->prev = q;
        cl->requests = q;
        j->req = q;

        if (op == SHRINK_OP_SCAN)
                sh->stats.calls++;
        struct json_object *p = json_object_new_object();
        json_object_object_add(p, "request", protocol_shrink_request(q));
        r = varlink_notify(cl->conn, p);
        if (r < 0) {
                /* The client's connection is going; its cleanup will take this request. */
                log_debug_errno(r, "Cannot send request to pid %d: %m", (int) cl->pid);
        }
        return 0;
}

/* ---- jobs ---- */

static void job_free(struct shrink_job *j) {
        if (!j)
                return;
        if (j->req)
                request_free(j->shrinker->client, j->req);
        free(j->cgroup);
        free(j);
}

static void job_next_scan(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;
        uint64_t nr;

        if (j->explicit_nr) {
                if (j->explicit_left == 0) {
                        job_finish(j);
                        return;
                }
                nr = MIN((uint64_t) sh->batch, j->explicit_left);
        } else if (!shrink_plan_next(&j->plan, sh->batch, &nr)) {
                job_finish(j);
                return;
        }
        if (request_send(j, SHRINK_OP_SCAN, nr) < 0)
                job_finish(j);
}

static void job_run(struct shrink_job *j) {
        j->started = true;
        if (j->explicit_nr)
                job_next_scan(j);
        else if (request_send(j, SHRINK_OP_COUNT, 0) < 0)
                job_finish(j);
}

/* Take the job at the head of its shrinker's queue off it, report it to its round, free it. */
static void job_retire(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;

        if (j->req)
                request_free(sh->client, j->req);
        sh->jobs_head = j->next;
        if (!sh->jobs_head)
                sh->jobs_tail = NULL;
        round_job_done(j->round, j);
        job_free(j);
}

/* Done with this job: settle deferred work, retire it, start the shrinker's next one. */
static void job_finish(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;

        if (!j->explicit_nr && !j->probe_only && j->freeable > 0)
                sh->deferred[shrinker_node_slot(sh, j->node_index)] = shrink_plan_finish(&j->plan);
        /* Jobs finish in queue order: this is the head. */
        job_retire(j);
        if (sh->jobs_head && !sh->jobs_head->started)
                job_run(sh->jobs_head);
}

static void job_enqueue(struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;
        if (sh->jobs_tail)
                sh->jobs_tail->next = j;
        else
                sh->jobs_head = j;
        sh->jobs_tail = j;
}

static struct shrink_job *job_new(struct shrink_round *r, struct shrinker *sh, size_t node_index, const char *cgroup,
                                  int priority) {
        struct shrink_job *j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        j->shrinker = sh;
        j->round = r;
        j->node_index = node_index;
        j->node = r->manager->nodes ? r->manager->nodes->cur[node_index].id : 0;
        j->priority = priority;
        j->probe_only = sh->health.quarantined;
        j->cgroup = strdup(cgroup);
        if (!j->cgroup) {
                free(j);
                return NULL;
        }
        return j;
}

/* ---- answers ---- */

int reclaim_answer(struct shrink_client *cl, uint64_t request_id, const struct shrink_answer *a,
                   const char **ret_reason) {
        struct shrink_request *q;

        for (q = cl->requests; q; q = q->next)
                if (q->id == request_id)
                        break;
        if (!q) {
                cl->rejected++;
                return -ENOENT;
        }

        /* Check everything before changing anything. */
        const char *bad = NULL;
        if (q->op == SHRINK_OP_COUNT) {
                if (a->freed >= 0 || a->scanned >= 0 || a->stop > 0)
                        bad = "a count request is answered with count, bytes or empty";
                else if (a->count < 0 && a->empty <= 0)
                        bad = "count missing";
        } else {
                if (a->count >= 0 || a->empty > 0)
                        bad = "a scan request is answered with freed, scanned, bytes or stop";
                else if (a->stop <= 0 && a->freed < 0)
                        bad = "freed missing";
                else if (a->freed >= 0 && (uint64_t) a->freed > 2 * q->nr_to_scan)
                        bad = "freed exceeds twice nr_to_scan";
                else if (a->scanned >= 0 && (uint64_t) a->scanned > 2 * q->nr_to_scan)
                        bad = "scanned exceeds twice nr_to_scan";
        }
        if (bad) {
                cl->rejected++;
                *ret_reason = bad;
                return -EINVAL;
        }

        struct shrink_job *j = q->job;
        struct shrinker *sh = j->shrinker;
        struct manager *m = cl->manager;
        uint64_t latency = now_usec(m) - q->sent_usec;
        size_t slot = shrinker_node_slot(sh, j->node_index);
        enum shrink_op op = q->op;
        uint64_t nr_to_scan = q->nr_to_scan;

        sh->stats.last_latency_usec = latency;
        sh->stats.worst_latency_usec = MAX(sh->stats.worst_latency_usec, latency);
        if (shrink_health_answer(&sh->health))
                log_info("Shrinker %s (id %llu) of pid %d answers again: out of quarantine.", sh->name,
                         (unsigned long long) sh->id, (int) cl->pid);
        request_free(cl, q);

        if (op == SHRINK_OP_COUNT) {
                uint64_t count = a->empty > 0 ? 0 : (uint64_t) a->count;
                sh->last_count[slot] = count;
                sh->last_bytes[slot] = a->bytes >= 0 ? (uint64_t) a->bytes : 0;
                if (a->empty > 0) {
                        sh->stats.empty++;
                        j->empty = true;
                }
                /* 0 means "skip me this time", EMPTY "nothing here": either way nothing to scan now. */
                if (count == 0 || j->probe_only) {
                        job_finish(j);
                        return 0;
                }
                j->freeable = count;
                if (j->explicit_all) {
                        /* io.pressured.Shrink without nr_to_scan: everything the count reported. */
                        j->explicit_nr = true;
                        j->explicit_left = count;
                }
                if (a->bytes > 0)
                        j->bytes_per_object_x1000 = (uint64_t) a->bytes * 1000 / count;
                shrink_plan_start(&j->plan, count, j->priority, sh->seeks, sh->deferred[slot]);
                job_next_scan(j);
                return 0;
        }

        if (a->stop > 0) {
                sh->stats.stops++;
                j->stopped = true;
                job_finish(j);
                return 0;
        }
        uint64_t freed = (uint64_t) a->freed;
        uint64_t scanned = a->scanned >= 0 ? (uint64_t) a->scanned : nr_to_scan;
        uint64_t bytes = a->bytes >= 0 ? (uint64_t) a->bytes : freed * j->bytes_per_object_x1000 / 1000;
        sh->stats.freed += freed;
        sh->stats.scanned += scanned;
        sh->stats.bytes_freed += bytes;
        j->freed += freed;
        j->scanned += scanned;
        j->bytes_freed += bytes;
        if (j->explicit_nr)
                j->explicit_left = scanned >= j->explicit_left ? 0 : j->explicit_left - scanned;
        else
                shrink_plan_scanned(&j->plan, scanned);
        /* A shrinker that scans nothing cannot make progress: do not spin on it. */
        if (scanned == 0) {
                job_finish(j);
                return 0;
        }
        job_next_scan(j);
        return 0;
}

/* ---- rounds ---- */

static void episode_round_done(struct reclaim_episode *e, struct shrink_round *r);

static void round_free(struct shrink_round *r) {
        json_object_put(r->results);
        free(r);
}

/* The Shrink caller went away before the round ended. */
static void round_detach_reply(void *data) {
        struct shrink_round *r = data;
        r->reply = NULL;
}

static void round_complete(struct shrink_round *r) {
        if (r->episode)
                episode_round_done(r->episode, r);
        if (r->reply) {
                struct json_object *p = json_object_new_object();
                json_object_object_add(p, "results", json_object_get(r->results));
                struct varlink_connection *c = r->reply;
                r->reply = NULL;
                (void) varlink_reply(c, p);
        }
        round_free(r);
}

static void round_job_done(struct shrink_round *r, struct shrink_job *j) {
        struct shrinker *sh = j->shrinker;

        r->freed += j->freed;
        r->freed_bytes += j->bytes_freed;
        r->scanned += j->scanned;
        if (r->results) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "shrinker", json_object_new_int64((int64_t) sh->id));
                json_object_object_add(o, "name", json_object_new_string(sh->name));
                json_object_object_add(o, "node", json_object_new_int(j->node));
                json_object_object_add(o, "cgroup", json_object_new_string(j->cgroup));
                json_object_object_add(o, "scanned", json_object_new_int64((int64_t) j->scanned));
                json_object_object_add(o, "freed", json_object_new_int64((int64_t) j->freed));
                json_object_object_add(o, "bytes_freed", json_object_new_int64((int64_t) j->bytes_freed));
                if (j->stopped)
                        json_object_object_add(o, "stopped", json_object_new_boolean(1));
                if (j->timed_out)
                        json_object_object_add(o, "timed_out", json_object_new_boolean(1));
                if (j->empty)
                        json_object_object_add(o, "empty", json_object_new_boolean(1));
                if (j->probe_only)
                        json_object_object_add(o, "quarantined", json_object_new_boolean(1));
                json_object_array_add(r->results, o);
        }
        if (--r->n_jobs == 0)
                round_complete(r);
}

/* Queue one job per (shrinker, node) that the scope selects. Returns the number of jobs. */
static unsigned round_add_jobs(struct shrink_round *r, enum scope_type type, int node_index, const char *cgroup,
                               int priority, uint64_t nr_to_scan, struct shrinker *only) {
        bool explicit = r->reply != NULL;
        struct manager *m = r->manager;
        size_t n_nodes = m->nodes ? m->nodes->n_nodes : 1;
        unsigned n = 0;

        for (struct shrink_client *cl = m->shrink_clients; cl; cl = cl->next) {
                if (cl->dead)
                        continue;
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        struct shrinker *sh = cl->shrinkers[i];
                        bool all_nodes;
                        const char *req_cgroup;

                        if (only && sh != only)
                                continue;
                        if (!shrink_select(type, cgroup, sh->flags, cl->cgroup, &all_nodes, &req_cgroup))
                                continue;

                        size_t first = type == SCOPE_NODE ? (size_t) node_index : 0;
                        size_t last = type == SCOPE_NODE ? (size_t) node_index : all_nodes ? n_nodes - 1 : 0;
                        for (size_t k = first; k <= last; k++) {
                                struct shrink_job *j = job_new(r, sh, k, req_cgroup, priority);
                                if (!j) {
                                        log_oom();
                                        continue;
                                }
                                if (explicit && nr_to_scan > 0 && !j->probe_only) {
                                        j->explicit_nr = true;
                                        j->explicit_left = nr_to_scan;
                                } else if (explicit)
                                        j->explicit_all = true;
                                job_enqueue(j);
                                r->n_jobs++;
                                n++;
                        }
                        r->n_asked++;
                }
        }
        /* Start only after everything is queued: a job may finish at once (a dead client). */
        r->n_jobs++;
        for (struct shrink_client *cl = m->shrink_clients; cl; cl = cl->next)
                for (size_t i = 0; i < cl->n_shrinkers; i++) {
                        struct shrinker *sh = cl->shrinkers[i];
                        if (sh->jobs_head && !sh->jobs_head->started)
                                job_run(sh->jobs_head);
                }
        return n;
}

/* Drop the extra count that kept the round open while it was being filled. */
static void round_seal(struct shrink_round *r) {
        if (--r->n_jobs == 0)
                round_complete(r);
}

int reclaim_shrink_now(struct manager *m, struct varlink_connection *c, enum scope_type type, int node_index,
                       const char *cgroup, uint64_t nr_to_scan, struct shrinker *only) {
        struct shrink_round *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->manager = m;
        r->reply = c;
        r->results = json_object_new_array();
        varlink_connection_set_call_data(c, r, round_detach_reply);
        round_add_jobs(r, type, node_index, cgroup, 0, nr_to_scan, only);
        round_seal(r);
        return 0;
}

/* ---- episodes: rounds while a scope is above ok ---- */

static void episode_start_round(struct reclaim_episode *e) {
        struct scope *s = e->scope;
        struct manager *m = s->manager;
        struct shrink_round *r = calloc(1, sizeof(*r));

        if (!r) {
                log_oom();
                return;
        }
        r->manager = m;
        r->episode = e;
        e->round = r;
        e->rounds++;
        /* As the kernel lowers its priority with every reclaim pass that did not free enough, each round
         * of an episode that finds the scope still above ok asks for more than the one before: two
         * priority steps (four times as much), since a round is far coarser than a kernel pass. */
        int priority = MAX(0, m->config.priorities.at[s->level.level] - 2 * (int) e->escalation);
        e->escalation = MIN(e->escalation + 1, (unsigned) SHRINK_PRIORITY_MAX);
        round_add_jobs(r, s->type, (int) s->node_index, s->cgroup, priority, 0, NULL);
        log_debug("%s: reclaim round %u at priority %d asks %u shrinkers.", s->name, e->rounds, priority, r->n_asked);
        round_seal(r);
}

/* Whether a scope's level calls for rounds. System-wide stall alone is not enough: the stall of a cgroup
 * at its limit shows in the system's PSI too, yet the kernel shrinks nobody else's caches for it. As in
 * the kernel, everyone is asked only when memory is short globally: some node is below its watermarks. */
static bool scope_wants_reclaim(const struct scope *s) {
        const struct manager *m = s->manager;

        if (s->level.level == LEVEL_OK || s->gone)
                return false;
        if (s->type != SCOPE_SYSTEM)
                return true;
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++)
                if (m->node_scopes[i]->level.level > LEVEL_OK)
                        return true;
        return !m->nodes; /* no node figures at all: trust PSI */
}

static int on_episode_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct reclaim_episode *e = userdata;
        (void) src;
        (void) usec;
        if (e->round || !scope_wants_reclaim(e->scope))
                return 0;
        if (e->paused) {
                /* The target was freed and the scope is still above ok: the estimate was short. */
                e->paused = false;
                e->target = e->scope->reclaim_target;
                e->freed_bytes = 0;
        }
        if (e->freed_bytes < e->target)
                episode_start_round(e);
        return 0;
}

static void episode_round_done(struct reclaim_episode *e, struct shrink_round *r) {
        struct scope *s = e->scope;
        struct manager *m = s->manager;

        e->round = NULL;
        e->freed_bytes += r->freed_bytes;
        if (r->n_asked > 0) {
                char f_freed[48], f_bytes[48], f_round[32];
                snprintf(f_round, sizeof(f_round), "PRESSURED_ROUND=%u", e->rounds);
                snprintf(f_freed, sizeof(f_freed), "PRESSURED_FREED=%llu", (unsigned long long) r->freed);
                snprintf(f_bytes, sizeof(f_bytes), "PRESSURED_FREED_BYTES=%llu", (unsigned long long) r->freed_bytes);
                const char *const fields[] = { f_round, f_freed, f_bytes, NULL };
                log_struct(r->freed > 0 ? LOG_INFO : LOG_DEBUG, PRESSURED_MESSAGE_RECLAIM_ROUND, s->name, fields,
                           "%s: reclaim round %u: %u shrinkers scanned %llu and freed %llu objects (%llu bytes; %llu of %llu this episode).",
                           s->name, e->rounds, r->n_asked, (unsigned long long) r->scanned,
                           (unsigned long long) r->freed, (unsigned long long) r->freed_bytes,
                           (unsigned long long) e->freed_bytes, (unsigned long long) e->target);
        }
        /* Nobody was asked: wait for a level change or a new client rather than wake up for nothing. */
        if (!scope_wants_reclaim(s) || r->n_asked == 0)
                return;
        uint64_t next = m->config.round_interval_usec;
        if (e->freed_bytes >= e->target) {
                /* Give the pressure one fresh sample to show the effect before going on. */
                e->paused = true;
                next = MAX(next, m->config.sample_interval_usec);
        }
        (void) sd_event_source_set_time(e->timer, now_usec(m) + next);
        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
}

static void episode_free(struct reclaim_episode *e) {
        if (!e)
                return;
        if (e->round)
                e->round->episode = NULL; /* it finishes on its own */
        sd_event_source_disable_unref(e->timer);
        free(e);
}

void reclaim_scope_changed(struct scope *s) {
        struct manager *m = s->manager;

        /* A node's level decides whether the system's stall is a global shortage. */
        if (s->type == SCOPE_NODE && m->system && s != m->system && m->system->level.level > LEVEL_OK &&
            !(m->system->reclaim && m->system->reclaim->round) && scope_wants_reclaim(m->system))
                reclaim_scope_changed(m->system);

        if (!scope_wants_reclaim(s)) {
                episode_free(s->reclaim);
                s->reclaim = NULL;
                return;
        }
        if (!m->shrink_clients)
                return; /* nobody to ask; an episode starts with the next change */

        struct reclaim_episode *e = s->reclaim;
        if (!e) {
                e = calloc(1, sizeof(*e));
                if (!e) {
                        log_oom();
                        return;
                }
                e->scope = s;
                if (sd_event_add_time(m->event, &e->timer, CLOCK_MONOTONIC, 0, 1000, on_episode_timer, e) < 0) {
                        free(e);
                        return;
                }
                (void) sd_event_source_set_enabled(e->timer, SD_EVENT_OFF);
                s->reclaim = e;
        }
        /* Every change while above ok sets a new goal; a fall also means the last rounds were enough. */
        if (s->level.level < s->previous)
                e->escalation = 0;
        e->target = s->reclaim_target;
        e->freed_bytes = 0;
        e->paused = false;
        if (!e->round)
                episode_start_round(e);
}

void reclaim_clients_changed(struct manager *m) {
        struct scope *s;
        if (m->system && scope_wants_reclaim(m->system) && !(m->system->reclaim && m->system->reclaim->round))
                reclaim_scope_changed(m->system);
        for (size_t i = 0; m->nodes && i < m->nodes->n_nodes; i++) {
                s = m->node_scopes[i];
                if (scope_wants_reclaim(s) && !(s->reclaim && s->reclaim->round))
                        reclaim_scope_changed(s);
        }
        for (s = m->cgroups; s; s = s->next)
                if (scope_wants_reclaim(s) && !(s->reclaim && s->reclaim->round))
                        reclaim_scope_changed(s);
}

void reclaim_scope_free(struct scope *s) {
        episode_free(s->reclaim);
        s->reclaim = NULL;
}

void reclaim_client_gone(struct shrink_client *cl) {
        /* Finish every job of every shrinker: in-flight requests are dropped, rounds get their count. */
        for (size_t i = 0; i < cl->n_shrinkers; i++)
                while (cl->shrinkers[i]->jobs_head)
                        job_retire(cl->shrinkers[i]->jobs_head);
        while (cl->requests)
                request_free(cl, cl->requests);
}
