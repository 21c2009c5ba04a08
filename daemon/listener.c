/* SPDX-License-Identifier: MIT */
#include "listener.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "clock.h"
#include "macro.h"

#define ACCEPTS_PER_WAKEUP 64
#define BACKOFF_FIRST_USEC 50000u
#define BACKOFF_MAX_USEC 2000000u

bool connection_uid_reserved(uid_t uid) {
        return uid < 1000 || (uid >= 61184 && uid <= 65519);
}

const char *connection_quota_refusal(const struct connection_quota *q, uid_t uid) {
        assert(q);

        if (q->max == 0)
                return NULL;
        if (q->n >= q->max)
                return "the connections both sockets may have";
        unsigned users_max = q->max - q->max / CONNECTION_QUOTA_RESERVE_DIVISOR;
        if (!connection_uid_reserved(uid) && q->n_users >= users_max)
                return "the connections all users may have (the rest is root's and the system services')";
        return NULL;
}

void connection_quota_set_max(struct connection_quota *q, unsigned max) {
        assert(q);
        q->max = max;
}

bool connection_quota_take(struct connection_quota *q, uid_t uid) {
        assert(q);

        if (connection_quota_refusal(q, uid))
                return false;
        q->n++;
        if (!connection_uid_reserved(uid))
                q->n_users++;
        return true;
}

void connection_quota_put(struct connection_quota *q, uid_t uid) {
        assert(q);

        if (q->n > 0)
                q->n--;
        if (!connection_uid_reserved(uid) && q->n_users > 0)
                q->n_users--;
}

static int on_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        struct listener *l = userdata;
        (void) src;
        (void) usec;
        (void) sd_event_source_set_enabled(l->source, SD_EVENT_ON);
        return 0;
}

static void back_off(struct listener *l, int error) {
        unsigned suppressed;
        l->backoff_usec = l->backoff_usec == 0 ? BACKOFF_FIRST_USEC : MIN(l->backoff_usec * 2, BACKOFF_MAX_USEC);
        if (ratelimit_below(&l->log, event_now(l->event), &suppressed))
                log_warning_errno(error, "Failed to accept a connection on %s, not accepting for %llu ms: %m", l->what,
                                  (unsigned long long) (l->backoff_usec / 1000));
        if (!l->retry && sd_event_add_time(l->event, &l->retry, CLOCK_MONOTONIC, 0, 10000, on_retry, l) >= 0)
                (void) sd_event_source_set_description(l->retry, "listen-retry");
        if (!l->retry)
                return; /* cannot even back off: keep accepting as before */
        (void) sd_event_source_set_enabled(l->source, SD_EVENT_OFF);
        (void) sd_event_source_set_time(l->retry, event_now(l->event) + l->backoff_usec);
        (void) sd_event_source_set_enabled(l->retry, SD_EVENT_ONESHOT);
}

static int on_listen(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct listener *l = userdata;
        (void) src;
        (void) revents;

        for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                                return 0;
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                back_off(l, -errno);
                        else
                                log_warning_errno(-errno, "Failed to accept a connection on %s, ignoring: %m", l->what);
                        return 0;
                }
                l->backoff_usec = 0;
                l->accept(cfd, l->userdata);
        }
        return 0;
}

int listener_new(sd_event *event, int fd, const char *what, listener_accept_fn accept, void *userdata,
                 struct listener **ret) {
        assert(event);

        struct listener *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (struct listener){ .event = event, .fd = fd, .what = what, .accept = accept, .userdata = userdata,
                                .log = { .interval_usec = 60 * 1000000ULL, .burst = 3 } };
        int r = sd_event_add_io(event, &l->source, fd, EPOLLIN, on_listen, l);
        if (r < 0) {
                free(l);
                return r;
        }
        (void) sd_event_source_set_description(l->source, what);
        *ret = l;
        return 0;
}

struct listener *listener_free(struct listener *l) {
        if (!l)
                return NULL;
        sd_event_source_disable_unref(l->retry);
        sd_event_source_disable_unref(l->source);
        free(l);
        return NULL;
}
