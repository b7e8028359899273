/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* fd-util.h: a growing memfd (ReadFile's buffer, filled by the sandbox's agent and then
 * mapped by sandboxd) grows but cannot be shrunk, nor its seals taken off. */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_memfd_new_growing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
