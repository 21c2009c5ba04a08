/* SPDX-License-Identifier: MIT */
/* The client: its connections to the daemon, reaching it again after it went away, dispatch, and the
 * calls that wait for an answer (each on a connection of its own, so that nothing else waits with them). */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "pressure-private.h"
#include "list.h"
#include "time-util.h"
#include "macro.h"

#define DEFAULT_TIMEOUT_MS 5000
/* Reaching a daemon that is away: first after this, doubling up to the most. */
#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 2000
/* One dispatch reads at most this much from one connection: a flood cannot keep it from returning. */
#define FILL_MAX (1024u * 1024u)

void client_lock(struct pressure_client *c) {
        pthread_mutex_lock(&c->lock);
        c->lock_holder = pthread_self();
        c->lock_held = true;
}

void client_unlock(struct pressure_client *c) {
        client_assert_locked(c);
        c->lock_held = false;
        pthread_mutex_unlock(&c->lock);
}

void client_wait(struct pressure_client *c, const struct timespec *deadline) {
        client_assert_locked(c);
        c->lock_held = false; /* another thread takes it meanwhile */
        if (deadline)
                (void) pthread_cond_timedwait(&c->cond, &c->lock, deadline);
        else
                (void) pthread_cond_wait(&c->cond, &c->lock);
        c->lock_holder = pthread_self();
        c->lock_held = true;
}

uint64_t now_usec(void) {
        return clock_now_usec(CLOCK_MONOTONIC);
}

/* ---- connections ---- */

void conn_init(struct conn *c) {
        *c = (struct conn){ .fd = -1 };
        frame_reader_init(&c->in, CLIENT_MAX_MESSAGE);
        frame_writer_init(&c->out);
}

static void conn_watch(struct conn *c, int epoll_fd) {
        uint32_t want = EPOLLIN | (frame_writer_queued(&c->out) > 0 ? EPOLLOUT : 0);
        if (c->fd < 0 || want == c->events)
                return;
        struct epoll_event ev = { .events = want };
        if (epoll_ctl(epoll_fd, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) >= 0)
                c->events = want;
}

int conn_open(struct conn *c, const char *path, int epoll_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        conn_close(c, epoll_fd);
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A unix socket connects at once or fails; EAGAIN means a full backlog. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        c->fd = fd;
        conn_watch(c, epoll_fd);
        return 0;
}

void conn_close(struct conn *c, int epoll_fd) {
        if (c->fd >= 0) {
                if (c->events)
                        (void) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
        }
        c->fd = -1;
        c->events = 0;
        frame_reader_done(&c->in);
        frame_writer_done(&c->out);
        frame_reader_init(&c->in, CLIENT_MAX_MESSAGE);
        frame_writer_init(&c->out);
}

int conn_flush(struct conn *c, int epoll_fd) {
        if (c->fd < 0)
                return -ENOTCONN;
        int r = frame_writer_flush(&c->out, c->fd);
        conn_watch(c, epoll_fd);
        if (r == -EAGAIN)
                return frame_writer_queued(&c->out) > CLIENT_MAX_OUTPUT ? -ENOBUFS : 0;
        return r == -EPIPE ? -ECONNRESET : r;
}

int conn_queue(struct conn *c, int epoll_fd, struct json_object *msg) {
        size_t len;
        const char *text = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!text)
                return -ENOMEM;
        if (c->fd < 0)
                return -ENOTCONN;
        int r = frame_writer_put(&c->out, text, len);
        return r < 0 ? r : conn_flush(c, epoll_fd);
}

int conn_fill(struct conn *c) {
        size_t got = 0;
        if (c->fd < 0)
                return -ENOTCONN;
        while (got < FILL_MAX) {
                ssize_t n = frame_reader_read_fd(&c->in, c->fd);
                if (n == -EAGAIN)
                        return 0;
                if (n == 0)
                        return -ECONNRESET;
                if (n < 0)
                        return n == -EPIPE ? -ECONNRESET : (int) n;
                got += (size_t) n;
        }
        return 0;
}

int conn_next(struct conn *c, struct json_object **ret) {
        const char *text;
        size_t len;
        int r = frame_reader_next(&c->in, &text, &len);
        if (r <= 0)
                return r == -EMSGSIZE ? -EPROTO : r;
        struct json_tokener *tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        struct json_object *o = json_tokener_parse_ex(tok, text, (int) len);
        bool ok = o && json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object);
        json_tokener_free(tok);
        if (!ok) {
                json_object_put(o);
                return -EPROTO;
        }
        *ret = o;
        return 1;
}

int conn_pump(struct conn *c, int epoll_fd, int (*fn)(struct json_object *msg, void *data), void *data) {
        int r = conn_flush(c, epoll_fd);
        if (r >= 0)
                r = conn_fill(c);
        for (;;) {
                struct json_object *msg;
                int k = conn_next(c, &msg);
                if (k < 0)
                        return k;
                if (k == 0)
                        return r;
                k = fn(msg, data);
                if (k < 0)
                        return k;
                if (k > 0)
                        return r;
        }
}

struct json_object *call_new(const char *method, struct json_object *params, bool more, bool oneway) {
        struct json_object *m = json_object_new_object();
        json_object_object_add(m, "method", json_object_new_string(method));
        json_object_object_add(m, "parameters", params ? params : json_object_new_object());
        if (more)
                json_object_object_add(m, "more", json_object_new_boolean(1));
        if (oneway)
                json_object_object_add(m, "oneway", json_object_new_boolean(1));
        return m;
}

/* ---- work ---- */

struct work *work_new(enum work_kind kind) {
        struct work *w = calloc(1, sizeof(*w));
        if (w)
                w->kind = kind;
        return w;
}

void work_free(struct work *w) {
        free(w->text);
        json_object_put(w->msg);
        pressure_status_unref(w->status);
        free(w);
}

void client_add_work(struct pressure_client *c, struct work *w) {
        client_assert_locked(c);
        w->log_handler = c->log_handler; /* the handler of the moment the message was made */
        w->log_userdata = c->log_userdata;
        QUEUE_APPEND(c->work, c->work_last, w);
}

void client_log(struct pressure_client *c, int priority, const char *format, ...) {
        if (!c->log_handler)
                return;
        struct work *w = work_new(WORK_LOG);
        va_list ap;
        va_start(ap, format);
        int n = w ? vasprintf(&w->text, format, ap) : -1;
        va_end(ap);
        if (n < 0) {
                if (w)
                        w->text = NULL;
                free(w);
                return;
        }
        w->error = priority;
        client_add_work(c, w);
}

static void wake(struct pressure_client *c) {
        uint64_t one = 1;
        (void) !write(c->wake_fd, &one, sizeof(one));
}

static void tell(struct pressure_client *c, int connected) {
        if (c->told == connected)
                return;
        c->told = connected;
        struct work *w = work_new(WORK_CONNECTION);
        if (!w)
                return;
        w->connected = connected;
        client_add_work(c, w);
        wake(c);
}

bool client_in_callback(struct pressure_client *c) {
        return c->dispatching && pthread_equal(c->dispatcher, pthread_self());
}

void client_wait_callbacks(struct pressure_client *c) {
        while (c->dispatching && !pthread_equal(c->dispatcher, pthread_self()))
                client_wait(c, NULL);
}

/* ---- the control connection: replies in the order of the calls ---- */

struct pending_call {
        struct pending_call *next;
        void (*done)(struct pressure_client *c, struct json_object *reply, void *data);
        void *data;
};

int client_ctl(struct pressure_client *c) {
        if (c->ctl.fd >= 0)
                return 0;
        if (c->away)
                return -ENOTCONN;
        int r = conn_open(&c->ctl, c->path, c->epoll_fd);
        if (r < 0)
                client_away(c, r);
        return r;
}

int client_ctl_call(struct pressure_client *c, struct json_object *call,
                    void (*done)(struct pressure_client *c, struct json_object *reply, void *data), void *data) {
        client_assert_locked(c);
        struct pending_call *p = NULL;
        int r = client_ctl(c);
        if (r >= 0 && done && !(p = calloc(1, sizeof(*p))))
                r = -ENOMEM;
        if (r >= 0)
                r = conn_queue(&c->ctl, c->epoll_fd, call);
        json_object_put(call);
        if (r < 0) {
                free(p);
                return r;
        }
        if (p) {
                *p = (struct pending_call){ .done = done, .data = data };
                QUEUE_APPEND(c->pending, c->pending_last, p);
        }
        return 0;
}

/* Every call in flight gets NULL: the connection is gone. */
static void ctl_fail_pending(struct pressure_client *c) {
        while (c->pending) {
                struct pending_call *p = c->pending;
                QUEUE_POP(c->pending, c->pending_last);
                p->done(c, NULL, p->data);
                free(p);
        }
}

/* A reply goes to the call it answers: the first in flight. */
static int ctl_reply(struct json_object *msg, void *data) {
        struct pressure_client *c = data;
        struct pending_call *p = c->pending;
        if (!p) { /* a reply nobody asked for: the stream is out of step */
                json_object_put(msg);
                return -EPROTO;
        }
        QUEUE_POP(c->pending, c->pending_last);
        p->done(c, msg, p->data); /* takes msg */
        free(p);
        return 0;
}

static void ctl_process(struct pressure_client *c) {
        if (c->ctl.fd < 0)
                return;
        int r = conn_pump(&c->ctl, c->epoll_fd, ctl_reply, c);
        if (r >= 0)
                return;
        /* The daemon closes a connection that holds no call after a while: that alone is no news.
         * With calls in flight it is: the daemon is gone, and they are made again when it is back. */
        bool had_pending = c->pending != NULL;
        conn_close(&c->ctl, c->epoll_fd);
        ctl_fail_pending(c);
        if (had_pending)
                client_away(c, r);
}

/* ---- away and back ---- */

static void retry_arm(struct pressure_client *c, unsigned ms) {
        struct itimerspec its = { .it_value = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000 } };
        (void) timerfd_settime(c->retry_fd, 0, &its, NULL);
}

void client_away(struct pressure_client *c, int error) {
        if (c->away)
                return;
        c->away = true;
        c->away_error = error < 0 ? error : -ECONNRESET;
        if (c->told != 0 && c->away_error == -ESHUTDOWN) /* once per absence, not at every retry */
                client_log(c, LOG_NOTICE, "pressured at %s is shutting down; trying again", c->path);
        else if (c->told != 0)
                client_log(c, LOG_NOTICE, "pressured at %s is not there (%s); trying again", c->path,
                           strerror(-c->away_error));
        conn_close(&c->ctl, c->epoll_fd);
        ctl_fail_pending(c);
        subscriptions_away(c);
        shrinkers_away(c);
        c->retry_ms = c->retry_ms ? MIN(c->retry_ms * 2, (unsigned) RETRY_MAX_MS) : RETRY_FIRST_MS;
        retry_arm(c, c->retry_ms);
        tell(c, 0);
}

void client_check_ready(struct pressure_client *c) {
        client_assert_locked(c);
        if (c->away || subscriptions_starting(c) > 0 || shrinkers_waiting(c))
                return;
        if (!c->subs && !c->shrinkers)
                return; /* nothing was asked of the daemon: nothing to tell */
        c->retry_ms = 0;
        tell(c, 1);
}

/* Reach the daemon again: every subscription and shrinker asks anew. */
static void client_reach(struct pressure_client *c) {
        c->away = false;
        subscriptions_start(c);
        shrinkers_start(c);
        client_check_ready(c);
}

static void retry_process(struct pressure_client *c) {
        uint64_t expirations;
        if (read(c->retry_fd, &expirations, sizeof(expirations)) != sizeof(expirations) || !c->away)
                return;
        client_reach(c);
}

/* ---- the client ---- */

EXPORT int pressure_client_new(const char *socket_path, struct pressure_client **ret) {
        struct pressure_client *c;
        int r = 0;

        if (!ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->timeout_ms = DEFAULT_TIMEOUT_MS;
        c->release = release_heap;
        c->told = -1;
        c->epoll_fd = c->wake_fd = c->retry_fd = c->release_fd = c->stop_fd = -1;
        conn_init(&c->ctl);
        conn_init(&c->serve);
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->cond, NULL);

        if (socket_path)
                r = (c->path = strdup(socket_path)) ? 0 : -ENOMEM;
        else
                r = pressure_default_socket_path(&c->path);
        if (r >= 0 && strlen(c->path) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
                r = -ENAMETOOLONG;
        if (r >= 0) {
                c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
                c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                c->retry_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                c->release_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                if (c->epoll_fd < 0 || c->wake_fd < 0 || c->retry_fd < 0 || c->release_fd < 0)
                        r = -errno;
        }
        int fds[] = { c->wake_fd, c->retry_fd, c->release_fd };
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fds); i++) {
                struct epoll_event ev = { .events = EPOLLIN };
                if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
                        r = -errno;
        }
        if (r < 0) {
                pressure_client_unref(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* Atomic: thread mode lets any thread hold and drop references, the last one frees. */
EXPORT struct pressure_client *pressure_client_ref(struct pressure_client *c) {
        if (c)
                __atomic_add_fetch(&c->n_ref, 1, __ATOMIC_RELAXED);
        return c;
}

static void client_free(struct pressure_client *c);

EXPORT struct pressure_client *pressure_client_unref(struct pressure_client *c) {
        if (!c)
                return NULL;
        /* Release what this thread did with the client; the last one acquires all of it before freeing. */
        if (__atomic_sub_fetch(&c->n_ref, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;

        if (c->thread_running) {
                if (pthread_equal(c->thread, pthread_self())) {
                        /* The last reference went on the library's thread (dispatch held one while another
                         * thread dropped its own): the thread frees the client once dispatch returns. */
                        c->free_on_thread_exit = true;
                        return NULL;
                }
                uint64_t one = 1;
                (void) !write(c->stop_fd, &one, sizeof(one));
                pthread_join(c->thread, NULL);
        }
        client_free(c);
        return NULL;
}

static void client_free(struct pressure_client *c) {
        /* Shrinkers and subscriptions with handles hold a reference: only floating ones are left. No
         * other thread is left either; the lock is taken for the helpers' sake (client_assert_locked()). */
        client_lock(c);
        subscriptions_free_all(c);
        conn_close(&c->ctl, c->epoll_fd);
        ctl_fail_pending(c);
        shrinkers_away(c); /* freed shrinkers whose registration was on its way go with it */
        client_unlock(c);
        frame_reader_done(&c->ctl.in);
        frame_reader_done(&c->serve.in);
        while (c->work) {
                struct work *w = c->work;
                c->work = w->next;
                work_free(w);
        }
        int fds[] = { c->epoll_fd, c->wake_fd, c->retry_fd, c->release_fd, c->stop_fd };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c->path);
        free(c);
}

EXPORT const char *pressure_client_get_socket_path(struct pressure_client *c) {
        return c ? c->path : NULL;
}

EXPORT void pressure_client_set_timeout(struct pressure_client *c, int timeout_ms) {
        if (!c)
                return;
        client_lock(c);
        c->timeout_ms = timeout_ms;
        client_unlock(c);
}

EXPORT int pressure_client_set_connection_handler(struct pressure_client *c, pressure_connection_handler_t handler,
                                                  void *userdata) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        c->connection_handler = handler;
        c->connection_userdata = userdata;
        client_unlock(c);
        return 0;
}

EXPORT int pressure_client_set_log_handler(struct pressure_client *c, pressure_log_handler_t handler, void *userdata) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        c->log_handler = handler;
        c->log_userdata = userdata;
        client_unlock(c);
        return 0;
}

EXPORT int pressure_client_is_connected(struct pressure_client *c) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        int r = c->told == 1 && !c->away;
        client_unlock(c);
        return r;
}

EXPORT int pressure_client_get_fd(struct pressure_client *c) {
        return c ? c->epoll_fd : -EINVAL;
}

/* ---- dispatch ---- */

static void run_work(struct pressure_client *c, struct work *w, pressure_connection_handler_t conn_handler,
                     void *conn_userdata) {
        switch (w->kind) {
        case WORK_EVENT:
        case WORK_MEMORY_EVENT:
        case WORK_SUB_END:
                subscription_run(c, w);
                break;
        case WORK_REQUESTS:
                shrinkers_run(c, w);
                break;
        case WORK_STATUS:
                w->status_fn(c, w->error, w->status, w->status_userdata);
                break;
        case WORK_CONNECTION:
                if (conn_handler)
                        conn_handler(c, w->connected, conn_userdata);
                break;
        case WORK_LOG:
                if (w->log_handler)
                        w->log_handler(c, w->error, w->text, w->log_userdata);
                break;
        }
}

EXPORT int pressure_client_dispatch(struct pressure_client *c) {
        if (!c)
                return -EINVAL;
        client_lock(c);
        if (c->dispatching) {
                /* From a callback, or a second thread: the first dispatch goes on. */
                client_unlock(c);
                return -EBUSY;
        }
        pressure_client_ref(c);
        c->dispatching = true;
        c->dispatcher = pthread_self();

        uint64_t v;
        (void) !read(c->wake_fd, &v, sizeof(v));
        retry_process(c);
        ctl_process(c);
        shrinkers_process(c);
        subscriptions_process(c);
        client_check_ready(c);

        struct work *work = c->work;
        c->work = c->work_last = NULL;
        pressure_connection_handler_t conn_handler = c->connection_handler;
        void *conn_userdata = c->connection_userdata;
        client_unlock(c);

        /* The application's callbacks, without the lock. */
        for (struct work *w = work; w; w = w->next)
                run_work(c, w, conn_handler, conn_userdata);
        bool release = false;
        client_lock(c);
        shrinkers_release_if_due(c, &release);
        pressure_release_t fn = c->release;
        void *release_userdata = c->release_userdata;
        client_unlock(c);
        if (release && fn)
                fn(release_userdata);

        client_lock(c);
        while (work) {
                struct work *w = work;
                work = w->next;
                if (w->sub)
                        subscription_work_done(w);
                work_free(w);
        }
        (void) conn_flush(&c->ctl, c->epoll_fd);
        if (c->work)
                wake(c); /* made while the callbacks ran */
        c->dispatching = false;
        pthread_cond_broadcast(&c->cond);
        client_unlock(c);
        pressure_client_unref(c);
        return 0;
}

/* ---- the library's own thread ---- */

static void *client_thread(void *userdata) {
        struct pressure_client *c = userdata;
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = c->epoll_fd, .events = POLLIN },
                        { .fd = c->stop_fd, .events = POLLIN },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents)
                        break;
                (void) pressure_client_dispatch(c);
                if (c->free_on_thread_exit) {
                        pthread_detach(pthread_self());
                        client_free(c);
                        break;
                }
        }
        return NULL;
}

EXPORT int pressure_client_start_thread(struct pressure_client *c) {
        int r = 0;
        if (!c)
                return -EINVAL;
        client_lock(c);
        if (c->thread_running)
                r = -EBUSY;
        else if ((c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
                r = -errno;
        else if ((r = -pthread_create(&c->thread, NULL, client_thread, c)) == 0)
                c->thread_running = true;
        client_unlock(c);
        return r;
}

/* ---- calls that wait: a connection of their own, the client's lock not held while waiting ---- */

static int remaining_ms(uint64_t deadline_us) {
        if (deadline_us == 0)
                return -1;
        uint64_t now = now_usec();
        return now >= deadline_us ? 0 : (int) MIN((deadline_us - now + 999) / 1000, (uint64_t) INT_MAX);
}

/* One call, one reply, within timeout_ms (<= 0: no limit). */
static int call_wait(const char *path, int timeout_ms, struct json_object *call, struct json_object **ret) {
        uint64_t deadline = timeout_ms > 0 ? now_usec() + (uint64_t) timeout_ms * 1000 : 0;
        struct conn conn;
        int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        int r = epoll_fd < 0 ? -errno : 0;

        conn_init(&conn);
        if (r >= 0)
                r = conn_open(&conn, path, epoll_fd);
        if (r >= 0)
                r = conn_queue(&conn, epoll_fd, call);
        while (r >= 0) {
                struct json_object *reply;
                r = conn_next(&conn, &reply);
                if (r > 0) {
                        *ret = reply;
                        r = 0;
                        break;
                }
                if (r < 0)
                        break;
                struct pollfd p = { .fd = conn.fd, .events = POLLIN | (frame_writer_queued(&conn.out) ? POLLOUT : 0) };
                int k = poll(&p, 1, remaining_ms(deadline));
                if (k == 0)
                        r = -ETIMEDOUT;
                else if (k < 0)
                        r = errno == EINTR ? 0 : -errno;
                else if ((r = conn_flush(&conn, epoll_fd)) >= 0)
                        r = conn_fill(&conn);
                if (r == -ECONNRESET) { /* a last reply may sit in the buffer */
                        struct json_object *last;
                        if (conn_next(&conn, &last) > 0) {
                                *ret = last;
                                r = 0;
                                break;
                        }
                }
        }
        json_object_put(call);
        conn_close(&conn, epoll_fd);
        frame_reader_done(&conn.in);
        if (epoll_fd >= 0)
                close(epoll_fd);
        return r;
}

static int client_call_wait(struct pressure_client *c, struct json_object *call, struct json_object **ret) {
        client_lock(c);
        int timeout_ms = c->timeout_ms;
        client_unlock(c);
        return call_wait(c->path, timeout_ms, call, ret);
}

EXPORT int pressure_client_get_status(struct pressure_client *c, struct pressure_status **ret) {
        struct json_object *reply = NULL;
        if (!c || !ret)
                return -EINVAL;
        int r = client_call_wait(c, call_new("io.pressured.GetStatus", NULL, false, false), &reply);
        if (r >= 0)
                r = reply_to_errno(reply);
        if (r < 0) {
                json_object_put(reply);
                return r;
        }
        return status_from_reply(reply, ret);
}

struct status_call {
        pressure_status_handler_t fn;
        void *userdata;
};

static void status_done(struct pressure_client *c, struct json_object *reply, void *data) {
        struct status_call *sc = data;
        struct work *w = work_new(WORK_STATUS);
        if (!w) {
                json_object_put(reply);
                free(sc);
                return;
        }
        w->status_fn = sc->fn;
        w->status_userdata = sc->userdata;
        free(sc);
        int r = reply ? reply_to_errno(reply) : -ECONNRESET;
        if (r >= 0)
                r = status_from_reply(reply, &w->status);
        else
                json_object_put(reply);
        w->error = r < 0 ? r : 0;
        client_add_work(c, w);
}

EXPORT int pressure_client_get_status_async(struct pressure_client *c, pressure_status_handler_t handler,
                                            void *userdata) {
        if (!c || !handler)
                return -EINVAL;
        struct status_call *sc = malloc(sizeof(*sc));
        if (!sc)
                return -ENOMEM;
        *sc = (struct status_call){ .fn = handler, .userdata = userdata };
        client_lock(c);
        if (c->away) /* say so now, not at the next retry */
                client_reach(c);
        int r = c->away ? -ENOTCONN : client_ctl_call(c, call_new("io.pressured.GetStatus", NULL, false, false), status_done, sc);
        client_unlock(c);
        if (r < 0)
                free(sc);
        return r;
}

EXPORT int pressure_client_call_json(struct pressure_client *c, const char *method, const char *parameters,
                                     char **ret, char **ret_error) {
        struct json_object *params = NULL, *reply = NULL;

        if (!c || !method || !ret)
                return -EINVAL;
        if (parameters) {
                params = json_tokener_parse(parameters);
                if (!params || !json_object_is_type(params, json_type_object)) {
                        json_object_put(params);
                        return -EINVAL;
                }
        }
        int r = client_call_wait(c, call_new(method, params, false, false), &reply);
        if (r < 0)
                return r;
        r = reply_to_errno(reply);
        if (r < 0) {
                if (ret_error) {
                        const char *e = json_object_get_string(json_get(reply, "error"));
                        *ret_error = e ? strdup(e) : NULL;
                }
                json_object_put(reply);
                return r;
        }
        /* Held to the interface like every reply the library reads itself: pressurectl shows what a
         * reply of io.pressured holds, never a 0 for a field that broke it. */
        if (strncmp(method, "io.pressured.", 13) == 0 && reply_check(c, reply, method + 13) < 0) {
                json_object_put(reply);
                return -EPROTO;
        }
        const char *text = json_object_to_json_string_ext(json_get(reply, "parameters"),
                                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = strdup(text ? text : "{}");
        json_object_put(reply);
        return *ret ? 0 : -ENOMEM;
}

/* Reach the daemon now if it was away and something new is asked of it (a subscription, a shrinker):
 * the application hears at once whether it is there. Under the lock. */
void client_kick(struct pressure_client *c) {
        if (c->away) {
                c->retry_ms = 0;
                client_reach(c);
        }
        wake(c);
}
