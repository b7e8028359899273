/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A memfd (O_CLOEXEC) holding data, its offset at 0: a descriptor to hand to a process
 * that reads it at its own pace, with nothing to feed and nothing to wait on. */
int memfd_new_with_data(const char *name, const void *data, size_t size);

/* An empty memfd (O_CLOEXEC) that may grow but never shrink (F_SEAL_SHRINK, sealed so):
 * another process may fill it, and what fstat() then says stays there to mmap() (a file
 * shrunk under a mapping would fault, SIGBUS, on the pages past its new end). */
int memfd_new_growing(const char *name);

/* Reads a small file whole into buf (at most size - 1 bytes, NUL-terminated), from dir_fd
 * (AT_FDCWD: path as it is). Returns the length, -E2BIG when the file is larger. */
ssize_t read_small_file_at(int dir_fd, const char *path, char *buf, size_t size);

/* Reads what one read() gives of path (from dir_fd, as openat()) into buf, NUL-terminated:
 * at most size - 1 bytes, a larger file cut there. For the kernel's files (/proc, cgroupfs),
 * which give their text whole in one read and put what is read of them first. Returns the
 * length. */
ssize_t read_file_head_at(int dir_fd, const char *path, char *buf, size_t size);

/* Reads the regular file path (from dir_fd, as openat()) whole, as large as fstat() says
 * it is, into *ret (NUL-terminated) and its length into *ret_size (may be NULL): -EBADFD
 * for anything but a regular file, -EFBIG for one larger than max bytes. */
int read_regular_file_at(int dir_fd, const char *path, size_t max, char **ret, size_t *ret_size);

/* Writes all of data to fd. */
int write_all(int fd, const void *data, size_t size);

/* Writes data as path, all or nothing: into tmp_path (a name the readers of path's
 * directory skip), of mode, flushed to disk first with sync, then renamed over path; on
 * failure tmp_path is removed and path is as it was. */
int write_file_atomic(const char *path, const char *tmp_path, const void *data, size_t size, mode_t mode,
                      bool sync);
