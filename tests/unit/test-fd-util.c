/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* fd-util.h: a growing memfd (ReadFile's buffer, filled by the sandbox's agent and then
 * mapped by sandboxd) grows but cannot be shrunk, nor its seals taken off; a regular file
 * read whole (templates, the host's /etc files) up to its bound and no further; a kernel
 * file's head read into a buffer, cut where the buffer ends. */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd-util.h"

static void test_memfd_new_growing(void **state) {
        struct stat st;
        int fd = memfd_new_growing("test");

        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        /* As the agent fills it, through a descriptor of its own. */
        assert_int_equal(write_all(fd, "0123456789", 10), 0);
        assert_int_equal(ftruncate(fd, 4096), 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 4096);
        /* What a hostile agent would do under sandboxd's mapping. */
        assert_int_equal(ftruncate(fd, 0), -1);
        assert_int_equal(errno, EPERM);
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
        assert_int_equal(errno, EPERM);
        assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, 4096);
        close(fd);
}

/* ten (10 bytes), empty, and a directory sub in dfd. */
static int make_files(int dfd) {
        int fd = openat(dfd, "ten", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        if (fd < 0 || write_all(fd, "0123456789", 10) < 0)
                return -1;
        close(fd);
        fd = openat(dfd, "empty", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return -1;
        close(fd);
        return mkdirat(dfd, "sub", 0700);
}

static void test_read_regular_file_at(void **state) {
        char dir[] = "/tmp/test-fd-util.XXXXXX", *text = NULL;
        size_t size = 0;
        int dfd;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(make_files(dfd), 0);

        assert_int_equal(read_regular_file_at(dfd, "ten", 10, &text, &size), 0);
        assert_int_equal(size, 10);
        assert_string_equal(text, "0123456789");
        free(text);
        text = NULL;
        /* Without its length; an empty file is "". */
        assert_int_equal(read_regular_file_at(dfd, "empty", 0, &text, NULL), 0);
        assert_string_equal(text, "");
        free(text);
        text = NULL;

        /* One byte over the bound, a directory, nothing: refused, *ret untouched. */
        assert_int_equal(read_regular_file_at(dfd, "ten", 9, &text, &size), -EFBIG);
        assert_int_equal(read_regular_file_at(dfd, "sub", 100, &text, &size), -EBADFD);
        assert_int_equal(read_regular_file_at(dfd, "none", 100, &text, &size), -ENOENT);
        assert_null(text);
        assert_int_equal(size, 10);

        /* Its head: as much as fits with the NUL, the rest cut. */
        {
                char buf[5];

                assert_int_equal(read_file_head_at(dfd, "ten", buf, sizeof(buf)), 4);
                assert_string_equal(buf, "0123");
                assert_int_equal(read_file_head_at(dfd, "empty", buf, sizeof(buf)), 0);
                assert_string_equal(buf, "");
                assert_int_equal(read_file_head_at(dfd, "none", buf, sizeof(buf)), -ENOENT);
                assert_int_equal(read_file_head_at(dfd, "ten", buf, 0), -EINVAL);
        }

        assert_int_equal(unlinkat(dfd, "ten", 0), 0);
        assert_int_equal(unlinkat(dfd, "empty", 0), 0);
        assert_int_equal(unlinkat(dfd, "sub", AT_REMOVEDIR), 0);
        close(dfd);
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_memfd_new_growing),
                cmocka_unit_test(test_read_regular_file_at),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
