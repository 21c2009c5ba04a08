/* SPDX-License-Identifier: MIT */
#include "headroom.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

void headroom_thresholds_default(struct headroom_thresholds *ret) {
        assert(ret);

        /* Low leaves a cache growing at a tenth of the limit per second over a second to react before
         * critical; critical is one or two steps of a grower from the OOM killer. */
        *ret = (struct headroom_thresholds){ .f = { [LEVEL_LOW] = 0.85, [LEVEL_MEDIUM] = 0.92, [LEVEL_CRITICAL] = 0.97 } };
}

int headroom_thresholds_check(const struct headroom_thresholds *t) {
        assert(t);

        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                if (t->left[l] == 0 && !(t->f[l] > 0 && t->f[l] <= 1))
                        return -EINVAL;
        for (int l = LEVEL_MEDIUM; l < _LEVEL_MAX; l++) {
                bool sizes = t->left[l] > 0 && t->left[l - 1] > 0, fractions = t->left[l] == 0 && t->left[l - 1] == 0;
                if ((sizes && t->left[l] > t->left[l - 1]) || (fractions && t->f[l] < t->f[l - 1]))
                        return -EINVAL;
        }
        return 0;
}

uint64_t headroom_threshold_used(const struct headroom_thresholds *t, enum level l, uint64_t limit) {
        assert(t);
        assert(l > LEVEL_OK && l < _LEVEL_MAX);

        if (t->left[l] > 0)
                return limit > t->left[l] ? limit - t->left[l] : 0;
        return (uint64_t) ((double) limit * t->f[l]);
}

static uint64_t unreclaimable(const struct headroom_group *g) {
        return g->usage > g->reclaimable ? g->usage - g->reclaimable : 0;
}

/* A group's own level: the highest whose threshold its unreclaimable memory has reached. */
static enum level group_level(const struct headroom_thresholds *t, uint64_t used, uint64_t limit) {
        enum level level = LEVEL_OK;
        for (int l = LEVEL_LOW; l < _LEVEL_MAX; l++)
                if (used >= headroom_threshold_used(t, l, limit) && used > 0)
                        level = l;
        return level;
}

void headroom_evaluate(const struct headroom_group *groups, size_t n, const struct headroom_thresholds *t,
                       struct headroom *ret) {
        assert(groups);
        assert(ret);

        struct headroom h = { .level = LEVEL_OK, .limit = UINT64_MAX, .left = UINT64_MAX, .room_bytes = UINT64_MAX };
        bool found = false;

        /* The group that decides is the one at the highest level, and among those the one nearest to
         * its limit: with sizes, a small group may be at ease where a large one has less room left. */
        for (size_t i = 0; i < n; i++) {
                const struct headroom_group *g = &groups[i];
                if (g->limit == 0 || g->limit == UINT64_MAX)
                        continue;
                uint64_t u = unreclaimable(g);
                double f = (double) u / (double) g->limit;
                uint64_t low = headroom_threshold_used(t, LEVEL_LOW, g->limit);
                enum level level = group_level(t, u, g->limit);
                h.room_bytes = MIN(h.room_bytes, u < low ? low - u : 0);
                if (found && (level < h.level || (level == h.level && f <= h.fraction)))
                        continue;
                found = true;
                h.level = level;
                h.binding = i;
                h.fraction = f;
                h.limit = g->limit;
                h.left = g->limit > u ? g->limit - u : 0;
                h.over_bytes = u > low ? u - low : 0;
        }
        *ret = h;
}

uint64_t headroom_next_check_usec(const struct headroom *h, uint64_t growth_per_sec, unsigned floor_per_mille,
                                  uint64_t min_usec, uint64_t max_usec) {
        if (h->limit == UINT64_MAX || h->room_bytes == UINT64_MAX)
                return max_usec;
        uint64_t rate = MAX(growth_per_sec, h->limit / 1000 * floor_per_mille);
        if (rate == 0)
                return max_usec;
        /* Half the time it would take: the looks close in on the threshold rather than land just
         * after it (a grower measured a little slow would cross it a whole interval early). */
        unsigned __int128 usec = (unsigned __int128) h->room_bytes * 1000000 / rate / 2;
        return usec < min_usec ? min_usec : usec > max_usec ? max_usec : (uint64_t) usec;
}

int headroom_parse_field(const char *text, const char *key, uint64_t *ret) {
        assert(ret);

        size_t n = strlen(key);

        for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (strncmp(line, key, n) != 0)
                        continue;
                const char *p = line + n;
                bool meminfo = *p == ':';
                if (meminfo)
                        p++;
                if (*p != ' ' && *p != '\t')
                        continue; /* a longer key that starts the same */
                char *end;
                errno = 0;
                unsigned long long v = strtoull(p, &end, 10);
                if (errno != 0 || end == p)
                        return -EINVAL;
                if (meminfo && strncmp(end, " kB", 3) == 0) {
                        if (v > UINT64_MAX / 1024)
                                return -EINVAL;
                        v *= 1024;
                        end += 3;
                }
                if (*end != '\n' && *end != 0)
                        return -EINVAL;
                *ret = v;
                return 0;
        }
        return -ENODATA;
}
