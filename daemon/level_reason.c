/* SPDX-License-Identifier: MIT */
#include "level_reason.h"

#include <assert.h>
#include <stdio.h>

#include "format.h"

enum level_reason_kind level_reason_psi_kind(bool first_look, bool have_samples, bool rise, double fraction,
                                             uint64_t stall_usec, uint64_t window_usec) {
        if (first_look)
                return LEVEL_REASON_FIRST_LOOK;
        /* The samples lag the kernel's window: a rise they do not show was the trigger's. */
        if (!have_samples || (rise && window_usec > 0 && fraction < (double) stall_usec / (double) window_usec))
                return LEVEL_REASON_TRIGGER;
        return LEVEL_REASON_SAMPLES;
}

void level_reason_format(const struct level_reason *r, char *buf, size_t size) {
        char a[FORMAT_BYTES_MAX], b[FORMAT_BYTES_MAX], at[FORMAT_BYTES_MAX], w[FORMAT_USEC_MAX], st[FORMAT_USEC_MAX];
        assert(r && buf && size > 0);

        buf[0] = 0;
        if (r->level == LEVEL_OK)
                return;
        const char *level = level_to_string(r->level);
        switch (r->kind) {
        case LEVEL_REASON_WATERMARK:
                snprintf(buf, size, "free %s, at or below %s's %.2f x the %s watermark (%s)",
                         format_bytes(a, sizeof(a), r->free_bytes), level, r->factor, r->mark ? r->mark : "?",
                         format_bytes(b, sizeof(b), r->threshold_bytes));
                return;
        case LEVEL_REASON_HEADROOM:
                if (r->at_left > 0)
                        format_bytes(at, sizeof(at), r->at_left);
                else
                        snprintf(at, sizeof(at), "%.0f%%", 100 * (1 - r->at_fraction));
                snprintf(buf, size, "headroom %.1f%% (%s left under the %s limit%s%s), at or below %s's %s", 100 * r->room,
                         format_bytes(a, sizeof(a), r->left), format_bytes(b, sizeof(b), r->limit),
                         r->binding ? " of " : "", r->binding ? r->binding : "", level, at);
                return;
        default:
                break;
        }
        double limit = r->window_usec > 0 ? (double) r->stall_usec / (double) r->window_usec : 0;
        format_usec(w, sizeof(w), r->window_usec);
        format_usec(st, sizeof(st), r->stall_usec);
        const char *kind = psi_kind_to_string(r->psi);
        switch (r->kind) {
        case LEVEL_REASON_FIRST_LOOK:
                snprintf(buf, size, "%s stall %.1f%% over the last 10s (the kernel's average, a first look), at or "
                         "above %s's %.1f%% (%s per %s)", kind, 100 * r->fraction, level, 100 * limit, st, w);
                break;
        case LEVEL_REASON_TRIGGER:
                snprintf(buf, size, "the kernel's trigger fired: %s stall of %s within %s (%s's threshold)", kind, st, w,
                         level);
                break;
        default:
                snprintf(buf, size, "%s stall %.1f%% over %s, %s %s's %.1f%% (%s per %s)%s", kind, 100 * r->fraction, w,
                         r->fraction >= limit ? "at or above" : "below", level, 100 * limit, st, w,
                         r->fraction >= limit ? "" : ", held until it stays below for the hold time");
                break;
        }
}
