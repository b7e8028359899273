/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* A memfd (O_CLOEXEC) holding data, its offset at 0: a descriptor to hand to a process
 * that reads it at its own pace, with nothing to feed and nothing to wait on. */
int memfd_new_with_data(const char *name, const void *data, size_t size);
