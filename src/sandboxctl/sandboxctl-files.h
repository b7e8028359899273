/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-client.h"

typedef struct CopyOptions {
        bool parents;           /* host → sandbox: CreateParents */
        bool mode_set;
        mode_t mode;            /* sandbox → host: mode of a created file (default 0644) */
        uint64_t max;           /* sandbox → host: Download's Max; UINT64_MAX: no limit */
} CopyOptions;

/* The file verbs of sandboxctl, over the Files methods of sandboxd-api(7). Each returns 0,
 * a negative errno (logged), or 128 + a signal that ended the wait. */

/* cp SRC DEST: one of them ID:PATH (in the sandbox), the other a host path or "-". */
int files_copy(SandboxClient *c, const char *src, const char *dest, const CopyOptions *o);
/* cat ID PATH…: each file to standard output, in order. */
int files_cat(SandboxClient *c, const char *id, char **paths, uint64_t max);
/* ls ID [PATH]: ListFiles as a table or JSON. */
int files_list(SandboxClient *c, const char *id, const char *path, unsigned depth, bool json);
/* stat ID PATH. */
int files_stat(SandboxClient *c, const char *id, const char *path, bool json);
