/* SPDX-License-Identifier: MIT */
#pragma once

/* Intrusive doubly linked lists, as systemd's list.h: an item carries its own prev and next pointers,
 * the owner holds the head (and, for queues, the tail). The _F forms name the item's pointer fields, for
 * an item that is on several lists at once; the plain forms use `prev` and `next`. An item that is on no
 * list has both pointers NULL. Arguments are evaluated more than once: pass plain lvalues. */

#include <assert.h>
#include <stddef.h>

#define LIST_PREPEND_F(pf, nf, head, item)                                                                 \
        do {                                                                                               \
                assert(!(item)->pf && !(item)->nf);                                                        \
                (item)->nf = (head);                                                                       \
                if ((item)->nf)                                                                            \
                        (item)->nf->pf = (item);                                                           \
                (head) = (item);                                                                           \
        } while (0)

/* Unlink item from the list at head (and tail, for LIST_REMOVE_TAIL_F). */
#define LIST_REMOVE_F(pf, nf, head, item)                                                                  \
        do {                                                                                               \
                if ((item)->pf)                                                                            \
                        (item)->pf->nf = (item)->nf;                                                       \
                else {                                                                                     \
                        assert((head) == (item));                                                          \
                        (head) = (item)->nf;                                                               \
                }                                                                                          \
                if ((item)->nf)                                                                            \
                        (item)->nf->pf = (item)->pf;                                                       \
                (item)->pf = (item)->nf = NULL;                                                            \
        } while (0)

/* Lists with a tail: insert item after `after` (NULL: at the head). */
#define LIST_INSERT_AFTER_TAIL_F(pf, nf, head, tail, after, item)                                          \
        do {                                                                                               \
                assert(!(item)->pf && !(item)->nf);                                                        \
                (item)->pf = (after);                                                                      \
                (item)->nf = (after) ? (after)->nf : (head);                                               \
                if ((item)->nf)                                                                            \
                        (item)->nf->pf = (item);                                                           \
                else                                                                                       \
                        (tail) = (item);                                                                   \
                if ((after))                                                                               \
                        (after)->nf = (item);                                                              \
                else                                                                                       \
                        (head) = (item);                                                                   \
        } while (0)

#define LIST_REMOVE_TAIL_F(pf, nf, head, tail, item)                                                       \
        do {                                                                                               \
                if ((item)->pf)                                                                            \
                        (item)->pf->nf = (item)->nf;                                                       \
                else                                                                                       \
                        (head) = (item)->nf;                                                               \
                if ((item)->nf)                                                                            \
                        (item)->nf->pf = (item)->pf;                                                       \
                else                                                                                       \
                        (tail) = (item)->pf;                                                               \
                (item)->pf = (item)->nf = NULL;                                                            \
        } while (0)

#define LIST_PREPEND(head, item) LIST_PREPEND_F(prev, next, head, item)
#define LIST_REMOVE(head, item) LIST_REMOVE_F(prev, next, head, item)

/* Singly linked queues (head and tail, a `next` pointer): append, and take the first. */
#define QUEUE_APPEND(head, tail, item)                                                                     \
        do {                                                                                               \
                (item)->next = NULL;                                                                       \
                if (tail)                                                                                  \
                        (tail)->next = (item);                                                             \
                else                                                                                       \
                        (head) = (item);                                                                   \
                (tail) = (item);                                                                           \
        } while (0)

#define QUEUE_POP(head, tail)                                                                              \
        do {                                                                                               \
                (head) = (head)->next;                                                                     \
                if (!(head))                                                                               \
                        (tail) = NULL;                                                                     \
        } while (0)
