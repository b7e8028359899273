/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Doubly linked lists through an item's own prev and next fields, in the manner of
 * systemd's list.h. */

#define LIST_PREPEND(head, item)                                \
        do {                                                    \
                (item)->prev = NULL;                            \
                (item)->next = (head);                          \
                if (head)                                       \
                        (head)->prev = (item);                  \
                (head) = (item);                                \
        } while (0)

#define LIST_REMOVE(head, item)                                 \
        do {                                                    \
                if ((item)->prev)                               \
                        (item)->prev->next = (item)->next;      \
                else                                            \
                        (head) = (item)->next;                  \
                if ((item)->next)                               \
                        (item)->next->prev = (item)->prev;      \
                (item)->next = (item)->prev = NULL;             \
        } while (0)

/* For lists that keep their tail as well, in the order items came (append at the tail). */
#define LIST_APPEND(head, tail, item)                           \
        do {                                                    \
                (item)->next = NULL;                            \
                (item)->prev = (tail);                          \
                if (tail)                                       \
                        (tail)->next = (item);                  \
                else                                            \
                        (head) = (item);                        \
                (tail) = (item);                                \
        } while (0)

#define LIST_REMOVE_WITH_TAIL(head, tail, item)                 \
        do {                                                    \
                if ((tail) == (item))                           \
                        (tail) = (item)->prev;                  \
                LIST_REMOVE(head, item);                        \
        } while (0)
