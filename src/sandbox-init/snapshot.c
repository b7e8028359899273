/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Filesystem snapshots, inside the sandbox: "archive" writes /work (and /tmp) as a
 * zstd-compressed pax tar stream to the descriptor sandboxd gave, "extract" unpacks such a
 * stream into /work (and /tmp). Both run in a file operation's child of the agent, as the
 * sandbox's uid, so the walk and the unpacking can only ever reach what the sandboxed code
 * reaches itself: a symlink to /etc/shadow planted in /work is archived as a symlink, and
 * what a stream holds (tampered with or not) lands only where the sandbox could write.
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sandbox-init.h"

#define SNAPSHOT_BLOCK (1024U * 1024U)

static void archive_freep(struct archive **a) {
        if (*a)
                (void) archive_free(*a);
}
#define _cleanup_archive_ _cleanup_(archive_freep)

static void linkresolver_freep(struct archive_entry_linkresolver **l) {
        if (*l)
                archive_entry_linkresolver_free(*l);
}

/* libarchive's errno, or EIO where it has none; what it says goes to the agent's stderr
 * (the sandbox's journal), where an administrator can read why. */
static int archive_errno_or_eio(struct archive *a) {
        int e = archive_errno(a);
        const char *s = archive_error_string(a);

        if (s)
                fprintf(stderr, "sandbox-init: snapshot: %s\n", s);
        return e > 0 ? -e : -EIO;
}

/* "/work/x" -> "work/x": names in the stream are relative to "/" (or, archived from a
 * workspace's directory, to it: "work/x" already). */
static int entry_strip_root(struct archive_entry *e) {
        const char *p = archive_entry_pathname(e);

        if (!p || p[0] == '\0' || streq(p, "/"))
                return -EINVAL;
        if (p[0] == '/')
                archive_entry_copy_pathname(e, p + 1);
        return 0;
}

/* Adds size to *total; EFBIG once it is beyond max. */
static int count_bytes(uint64_t *total, int64_t size, uint64_t max) {
        if (size < 0)
                return -EINVAL;
        if ((uint64_t) size > UINT64_MAX - *total)
                return -EFBIG;
        *total += (uint64_t) size;
        return *total > max ? -EFBIG : 0;
}

static int copy_entry_data(struct archive *disk, struct archive *out) {
        _cleanup_free_ char *zeros = NULL;
        int64_t progress = 0;

        for (;;) {
                const void *buf;
                size_t n;
                int64_t offset;
                int r = archive_read_data_block(disk, &buf, &n, &offset);

                if (r == ARCHIVE_EOF)
                        return 0;
                if (r != ARCHIVE_OK)
                        return archive_errno_or_eio(disk);
                /* A hole: the pax writer knows the sparse map and stores none of it, but
                 * wants to be handed its length. */
                while (offset > progress) {
                        size_t k = offset - progress > SNAPSHOT_BLOCK ? SNAPSHOT_BLOCK : (size_t) (offset - progress);
                        if (!zeros) {
                                zeros = calloc(1, SNAPSHOT_BLOCK);
                                if (!zeros)
                                        return -ENOMEM;
                        }
                        if (archive_write_data(out, zeros, k) < 0)
                                return archive_errno_or_eio(out);
                        progress += k;
                }
                if (n > 0 && archive_write_data(out, buf, n) < 0)
                        return archive_errno_or_eio(out);
                progress = offset + (int64_t) n;
        }
}

static int archive_tree(struct archive *disk, struct archive *out, struct archive_entry_linkresolver *links,
                        const char *root, uint64_t max, uint64_t *total) {
        int r;

        if (archive_read_disk_open(disk, root) != ARCHIVE_OK)
                return archive_errno_or_eio(disk);

        for (;;) {
                struct archive_entry *e = archive_entry_new(), *spare = NULL;

                if (!e)
                        return -ENOMEM;
                r = archive_read_next_header2(disk, e);
                if (r == ARCHIVE_EOF) {
                        archive_entry_free(e);
                        break;
                }
                if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
                        archive_entry_free(e);
                        return archive_errno_or_eio(disk);
                }
                /* Never into anything mounted below (none should be), never following a
                 * link (physical mode): a link is stored as what it is. */
                (void) archive_read_disk_descend(disk);

                r = entry_strip_root(e);
                if (r >= 0 && archive_entry_filetype(e) == AE_IFREG)
                        r = count_bytes(total, archive_entry_size(e), max);
                if (r < 0) {
                        archive_entry_free(e);
                        return r;
                }
                /* The second and later names of a regular file become hard links to the
                 * first. (A symlink's are stored as symlinks: libarchive refuses to unpack
                 * a hard link to one, rightly, as it cannot tell it from a path through it.) */
                if (archive_entry_filetype(e) == AE_IFREG)
                        archive_entry_linkify(links, &e, &spare);
                if (e) {
                        if (archive_write_header(out, e) != ARCHIVE_OK)
                                r = archive_errno_or_eio(out);
                        else if (archive_entry_size(e) > 0)
                                r = copy_entry_data(disk, out);
                        archive_entry_free(e);
                }
                archive_entry_free(spare);
                if (r < 0)
                        return r;
        }
        return archive_read_close(disk) == ARCHIVE_OK ? 0 : archive_errno_or_eio(disk);
}

/* roots: "/work" and "/tmp" inside the sandbox; "work" and "tmp" in a workspace's
 * directory (the current one). */
static int snapshot_write(const char *work, const char *tmp, uint64_t max, int out, uint64_t *total) {
        _cleanup_archive_ struct archive *disk = archive_read_disk_new(), *w = archive_write_new();
        _cleanup_(linkresolver_freep) struct archive_entry_linkresolver *links = archive_entry_linkresolver_new();
        int r;

        if (!disk || !w || !links)
                return -ENOMEM;
        archive_entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        if (archive_read_disk_set_symlink_physical(disk) != ARCHIVE_OK ||
            archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
                                                 ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS) != ARCHIVE_OK ||
            archive_write_set_format_pax(w) != ARCHIVE_OK ||
            /* Names as the bytes they are: a name that is not UTF-8 is no error. */
            archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
            archive_write_add_filter_zstd(w) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
            archive_write_open_fd(w, out) != ARCHIVE_OK)
                return archive_errno_or_eio(w);

        r = archive_tree(disk, w, links, work, max, total);
        if (r >= 0 && tmp)
                r = archive_tree(disk, w, links, tmp, max, total);
        if (r < 0)
                return r;
        return archive_write_close(w) == ARCHIVE_OK ? 0 : archive_errno_or_eio(w);
}

/* archive: every other process of the sandbox stands still (SIGSTOP to all but PID 1, the
 * agent, and this one; kill(-1) is atomic against fork) while /work is read, so that the
 * snapshot is of one moment. "bytes": the size of the files archived (sparse ones at
 * their full size), EFBIG beyond "max". */
int op_archive(const struct agent_file *f, int out, struct agent_file_result *res) {
        int r;

        (void) kill(-1, SIGSTOP);
        res->has_bytes = true;
        r = snapshot_write(AGENT_WORKDIR, f->tmp ? "/tmp" : NULL, f->max, out, &res->bytes);
        (void) kill(-1, SIGCONT);
        return r;
}

/* sandbox-init --archive-workspace: the workspace of a sandbox hibernated on disk (no
 * processes, so no agent inside) to standard output, in the stream op_archive writes, for
 * an export (sandboxd's workspace-export.c). sandboxd starts it in the workspace's
 * directory as the sandbox's uid: it reads what the sandbox itself could, and stores a
 * link as a link, as above. */
int agent_archive_workspace(void) {
        uint64_t total = 0;
        int r = snapshot_write("work", "tmp", UINT64_MAX, STDOUT_FILENO, &total);

        if (r < 0) {
                fprintf(stderr, "sandbox-init: archive of the workspace: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}

/* What a stream may hold: "work" and "work/..." (with "tmp", "tmp" and "tmp/..." too). The
 * roots themselves are there (and stay as they are). 1: take, 0: the root, -EINVAL: not
 * ours. */
static int extract_name_check(const char *p, bool tmp) {
        static const char * const roots[] = { "work", "tmp" };

        if (!p)
                return -EINVAL;
        for (size_t i = 0; i < (tmp ? 2U : 1U); i++) {
                size_t n = strlen(roots[i]);
                if (strncmp(p, roots[i], n) != 0)
                        continue;
                if (p[n] == '\0' || (p[n] == '/' && p[n + 1] == '\0'))
                        return 0;
                if (p[n] == '/')
                        return 1;
        }
        return -EINVAL;
}

static int extract_data(struct archive *in, struct archive *disk, uint64_t max, uint64_t *written) {
        for (;;) {
                const void *buf;
                size_t n;
                int64_t offset;
                int r = archive_read_data_block(in, &buf, &n, &offset);

                if (r == ARCHIVE_EOF)
                        return 0;
                if (r != ARCHIVE_OK)
                        return archive_errno_or_eio(in);
                /* What the header said is counted already; a stream that holds more than
                 * it said still stops here. */
                r = count_bytes(written, (int64_t) n, max);
                if (r < 0)
                        return r;
                if (archive_write_data_block(disk, buf, n, offset) < 0)
                        return archive_errno_or_eio(disk);
        }
}

static int snapshot_read(const struct agent_file *f, int in, uint64_t *total) {
        _cleanup_archive_ struct archive *a = archive_read_new(), *disk = archive_write_disk_new();
        uint64_t written = 0;
        int r;

        if (!a || !disk)
                return -ENOMEM;
        if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
            archive_write_disk_set_options(disk, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                 ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                 ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS) != ARCHIVE_OK)
                return -EIO;
        if (archive_read_open_fd(a, in, SNAPSHOT_BLOCK) != ARCHIVE_OK)
                return archive_errno_or_eio(a);
        /* Names are relative to "/", and only ever under /work (and /tmp). */
        if (chdir("/") < 0)
                return -errno;

        for (;;) {
                struct archive_entry *e;
                const char *hardlink;

                r = archive_read_next_header(a, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
                        return archive_errno_or_eio(a);

                r = extract_name_check(archive_entry_pathname(e), f->tmp);
                if (r < 0) {
                        fprintf(stderr, "sandbox-init: snapshot: refusing '%s': not in /work%s.\n",
                                strna(archive_entry_pathname(e)), f->tmp ? " or /tmp" : "");
                        return r;
                }
                if (r == 0)
                        continue;
                hardlink = archive_entry_hardlink(e);
                if (hardlink && extract_name_check(hardlink, f->tmp) <= 0) {
                        fprintf(stderr, "sandbox-init: snapshot: refusing hard link to '%s'.\n", hardlink);
                        return -EINVAL;
                }
                if (archive_entry_filetype(e) == AE_IFREG) {
                        r = count_bytes(total, archive_entry_size(e), f->max);
                        if (r < 0)
                                return r;
                }
                /* What the sandbox cannot make itself, it does not get from a stream. (A
                 * hard link's type is its target's: none of its own.) */
                switch (hardlink ? AE_IFREG : archive_entry_filetype(e)) {
                case AE_IFREG: case AE_IFDIR: case AE_IFLNK: case AE_IFIFO:
                        break;
                default:
                        fprintf(stderr, "sandbox-init: snapshot: refusing '%s': a device or socket.\n",
                                archive_entry_pathname(e));
                        return -EINVAL;
                }

                if (archive_write_header(disk, e) != ARCHIVE_OK)
                        return archive_errno_or_eio(disk);
                if (archive_entry_size(e) > 0) {
                        r = extract_data(a, disk, f->max, &written);
                        if (r < 0)
                                return r;
                }
                if (archive_write_finish_entry(disk) != ARCHIVE_OK)
                        return archive_errno_or_eio(disk);
        }
        /* Directories get their modes and times last, as tar does. */
        return archive_write_close(disk) == ARCHIVE_OK ? 0 : archive_errno_or_eio(disk);
}

/* extract: "bytes": the size of the files unpacked; EFBIG beyond "max". */
int op_extract(const struct agent_file *f, int in, struct agent_file_result *res) {
        res->has_bytes = true;
        return snapshot_read(f, in, &res->bytes);
}
