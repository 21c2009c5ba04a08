/* SPDX-License-Identifier: MIT */
#include "limit_stall.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "macro.h"
#include "psi.h"

struct limit_stall_group {
        char *path;
        uint64_t some, full; /* totals at the last read */
        uint64_t events;     /* limit events at the last read */
        uint64_t look;       /* the update it was last read in */
        uint64_t grew_usec;  /* when its limit events were last seen growing (0: never) */
        bool have_events;
};

uint64_t limit_stall_explains(uint64_t stall_delta, bool limit_reclaimed, uint64_t children_explain) {
        return limit_reclaimed ? stall_delta : MIN(children_explain, stall_delta);
}

int limit_stall_init(struct limit_stall *ls) {
        assert(ls);
        *ls = (struct limit_stall){};
        return hashmap_new(HASHMAP_KEY_STRING, &ls->by_path);
}

static void group_free(struct limit_stall_group *g) {
        if (g) {
                free(g->path);
                free(g);
        }
}

void limit_stall_done(struct limit_stall *ls) {
        if (!ls)
                return;
        for (size_t i = 0; i < ls->n_groups; i++)
                group_free(ls->groups[i]);
        free(ls->groups);
        hashmap_free(ls->by_path);
        *ls = (struct limit_stall){};
}

static struct limit_stall_group *group_get(struct limit_stall *ls, const char *path, bool *ret_new) {
        struct limit_stall_group *g = hashmap_get_string(ls->by_path, path);
        *ret_new = false;
        if (g || ls->n_groups >= LIMIT_STALL_TRACKED_MAX)
                return g;
        struct limit_stall_group **a = reallocarray(ls->groups, ls->n_groups + 1, sizeof(*a));
        if (!a)
                return NULL;
        ls->groups = a;
        g = calloc(1, sizeof(*g));
        if (!g || !(g->path = strdup(path)) || hashmap_put_string(ls->by_path, g->path, g) < 0) {
                group_free(g);
                return NULL;
        }
        ls->groups[ls->n_groups++] = g;
        *ret_new = true;
        return g;
}

/* Groups not read for 60 updates go: they are gone, or quiet. */
static void prune(struct limit_stall *ls) {
        for (size_t i = ls->n_groups; i > 0; i--) {
                struct limit_stall_group *g = ls->groups[i - 1];
                if (ls->look - g->look < 60)
                        continue;
                hashmap_remove_string(ls->by_path, g->path);
                ls->groups[i - 1] = ls->groups[--ls->n_groups];
                group_free(g);
        }
}

struct walk {
        struct limit_stall *ls;
        const struct cgroup_layout *l;
        unsigned reads;
        uint64_t now;
};

/* What the groups below cgroup explain since the last update: some and full. */
static void walk(struct walk *w, const char *cgroup, unsigned depth, uint64_t *ret_some, uint64_t *ret_full) {
        _cleanup_free_ char *dirpath = NULL;
        *ret_some = *ret_full = 0;
        if (depth >= LIMIT_STALL_DEPTH_MAX || w->reads >= LIMIT_STALL_READS_MAX ||
            asprintf(&dirpath, "%s%s", w->l->v2_root, streq(cgroup, "/") ? "" : cgroup) < 0)
                return;
        DIR *d = opendir(dirpath);
        if (!d)
                return;
        for (struct dirent *de; w->reads < LIMIT_STALL_READS_MAX && (de = readdir(d));) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *child = NULL, *pressure = NULL;
                struct psi_stats st;
                if (asprintf(&child, "%s/%s", streq(cgroup, "/") ? "" : cgroup, de->d_name) < 0 ||
                    cgroup_file_path(w->l, child, "memory.pressure", &pressure) < 0)
                        break;
                w->reads++;
                if (psi_read_path(pressure, &st) < 0)
                        continue;
                bool is_new;
                struct limit_stall_group *g = group_get(w->ls, child, &is_new);
                if (!g)
                        continue;
                uint64_t some = st.line[PSI_SOME].total, full = st.has_full ? st.line[PSI_FULL].total : 0;
                uint64_t dsome = !is_new && some > g->some ? some - g->some : 0;
                uint64_t dfull = !is_new && full > g->full ? full - g->full : 0;
                g->some = some;
                g->full = full;
                g->look = w->ls->look;
                uint64_t events;
                bool have = cgroup_limit_events(w->l, child, &events) >= 0;
                if (have && g->have_events && events > g->events)
                        g->grew_usec = w->now;
                /* Its limit reclaimed lately: a stall lags the reclaim that causes it, and refaults of
                 * what the limit took stall on after its last event. */
                bool reclaimed = g->grew_usec > 0 && w->now - g->grew_usec <= LIMIT_STALL_RECENT_USEC;
                if (have) {
                        g->events = events;
                        g->have_events = true;
                }
                if (dsome == 0 && dfull == 0)
                        continue; /* nothing stalled there since: nothing to look into */
                uint64_t cs = 0, cf = 0;
                if (!reclaimed)
                        walk(w, child, depth + 1, &cs, &cf);
                *ret_some = sat_add(*ret_some, limit_stall_explains(dsome, reclaimed, cs));
                *ret_full = sat_add(*ret_full, limit_stall_explains(dfull, reclaimed, cf));
        }
        closedir(d);
}

void limit_stall_update(struct limit_stall *ls, const struct cgroup_layout *l, const char *cgroup, uint64_t now,
                        uint64_t own_some_delta, uint64_t own_full_delta) {
        assert(ls && cgroup);

        ls->look++;
        ls->last_some = 0;
        if (!l || !l->v2_root)
                return;
        struct walk w = { .ls = ls, .l = l, .now = now };
        uint64_t some, full;
        walk(&w, cgroup, 0, &some, &full);
        if (ls->primed) {
                /* Tasks stalled in several groups at once count once in the scope: never more than it,
                 * over the whole time (the groups are read a moment after the scope, so a look's share
                 * may run ahead of the scope's and the next one's behind; a cap per look would leave the
                 * difference as the scope's own). */
                uint64_t before = ls->some;
                ls->below_some = sat_add(ls->below_some, some);
                ls->below_full = sat_add(ls->below_full, full);
                ls->scope_some = sat_add(ls->scope_some, own_some_delta);
                ls->scope_full = sat_add(ls->scope_full, own_full_delta);
                ls->some = MIN(ls->below_some, ls->scope_some);
                ls->full = MIN(ls->below_full, ls->scope_full);
                ls->last_some = ls->some - before;
        }
        ls->primed = true;
        prune(ls);
}
