/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"

int memfd_new_with_data(const char *name, const void *data, size_t size) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC);
        size_t done = 0;

        if (fd < 0)
                return -errno;
        while (done < size) {
                ssize_t n = write(fd, (const char *) data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        return TAKE_FD(fd);
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
