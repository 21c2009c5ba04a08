/* SPDX-License-Identifier: MIT */
#pragma once

/* Small helpers shared by the daemon, the library and the tools: automatic cleanup in the style of
 * systemd's _cleanup_, without depending on libsystemd's private headers. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _pure_ __attribute__((pure))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand out a pointer owned by a _cleanup_ variable. */
#define TAKE_PTR(p)                                                                                        \
        ({                                                                                                 \
                __typeof__(p) _p_ = (p);                                                                   \
                (p) = NULL;                                                                                \
                _p_;                                                                                       \
        })

#define SWAP_PTR(a, b)                                                                                     \
        do {                                                                                               \
                __typeof__(a) _t_ = (a);                                                                   \
                (a) = (b);                                                                                 \
                (b) = _t_;                                                                                 \
        } while (0)

#define TAKE_FD(fd)                                                                                        \
        ({                                                                                                 \
                int _fd_ = (fd);                                                                           \
                (fd) = -EBADF;                                                                             \
                _fd_;                                                                                      \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Define a cleanup helper "<func>p" for a type whose destructor is func(type *). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                            \
        static inline void func##p(type *p) {                                                              \
                if (*p)                                                                                    \
                        func(*p);                                                                          \
        }

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define streq(a, b) (strcmp((a), (b)) == 0)

/* Numbers from clients go up to INT64_MAX: arithmetic on them saturates rather than wraps. */
static inline uint64_t sat_add(uint64_t a, uint64_t b) {
        uint64_t r;
        return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t sat_mul(uint64_t a, uint64_t b) {
        uint64_t r;
        return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
