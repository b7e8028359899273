/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The /etc a bwrap sandbox sees: a small read-only tree of its own (the host's /etc is
 * never shown), written once per template into a daemon-owned directory and bound at
 * /etc by every sandbox of that template. It names the sandbox user, resolves localhost,
 * and carries the few files real programs expect; the template may add more. Only the
 * machine id is per sandbox (bwrap binds it over the tree's empty /etc/machine-id). */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

struct Template;

/* Who the sandbox's processes are, and what the sandbox is called. */
#define SANDBOX_USER "sandbox"
#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
#define SANDBOX_HOME "/work"
#define SANDBOX_SHELL "/bin/sh"
#define SANDBOX_HOSTNAME "sandbox"
#define SANDBOX_TIMEZONE_DEFAULT "UTC"
#define SANDBOX_MACHINE_ID_LEN 32

/* A fresh machine id: 128 random bits in hex, as systemd-machine-id-setup writes one. */
int machine_id_generate(char ret[static SANDBOX_MACHINE_ID_LEN + 1]);

/* Files the template may add under /etc: how many, how large each. */
#define ETC_FILES_MAX 32U
#define ETC_FILE_SIZE_MAX (16U * 1024U)
#define ETC_FILE_PATH_MAX 128U

typedef enum EtcEntryType {
        ETC_ENTRY_FILE,
        ETC_ENTRY_DIR,
        ETC_ENTRY_SYMLINK,
} EtcEntryType;

typedef struct EtcEntry {
        char *path;        /* relative to /etc */
        EtcEntryType type;
        char *data;        /* file contents, or the symlink's target */
        size_t size;
} EtcEntry;

typedef struct EtcTree {
        EtcEntry *entries;
        size_t n;
} EtcTree;

void etc_tree_done(EtcTree *tree);

/* Whether name (relative to /etc) is one of the files sandboxd writes itself (passwd,
 * hosts, machine-id, …) or lies beneath one. */
bool etc_name_is_reserved(const char *name);
/* A relative path under /etc a template may name: no "..", ".", empty or hidden
 * components, sane characters, bounded length. */
bool etc_file_path_is_valid(const char *path);
/* A time zone name as under /usr/share/zoneinfo ("UTC", "Europe/Berlin"). */
bool timezone_is_valid(const char *tz);

/* Everything the tree of template t holds, in the order to write it (parents first):
 * the generated identity files, copies of host_etc's services, protocols and os-release
 * (where they exist), mount points for t's read-only binds under /etc, t's own files. */
int etc_tree_build(const struct Template *t, const char *host_etc, EtcTree *ret);

/* Writes the tree of t under root (once: the directory is named by its contents, so that
 * sandboxes still bound to an older tree keep it) and returns its path. */
int etc_tree_write(const struct Template *t, const char *host_etc, const char *root, char **ret_path);
