/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"

int write_all(int fd, const void *data, size_t size) {
        size_t done = 0;

        while (done < size) {
                ssize_t n = write(fd, (const char *) data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        return 0;
}

int memfd_new_with_data(const char *name, const void *data, size_t size) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC);
        int r;

        if (fd < 0)
                return -errno;
        r = write_all(fd, data, size);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int memfd_new_growing(const char *name) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

        if (fd < 0)
                return -errno;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int write_file_atomic(const char *path, const char *tmp_path, const void *data, size_t size, mode_t mode,
                      bool sync) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = write_all(fd, data, size);
        /* Whatever the umask. */
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && sync && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && rename(tmp_path, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp_path);
        return r;
}

ssize_t read_file_head_at(int dir_fd, const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        if (size < 1)
                return -EINVAL;
        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return n;
}

int read_regular_file_at(int dir_fd, const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t n = 0;

        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = n;
        return 0;
}

ssize_t read_small_file_at(int dir_fd, const char *path, char *buf, size_t size) {
        ssize_t n;
        int fd, r = 0;

        if (size < 2)
                return -EINVAL;
        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* One byte more than fits tells a file that is too large from one that just fits. */
        n = read(fd, buf, size);
        if (n < 0)
                r = -errno;
        close(fd);
        if (r < 0)
                return r;
        if ((size_t) n >= size) {
                explicit_bzero(buf, size);
                return -E2BIG;
        }
        buf[n] = 0;
        return n;
}
