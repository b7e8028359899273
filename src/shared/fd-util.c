/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/mman.h>

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
