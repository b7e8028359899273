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
