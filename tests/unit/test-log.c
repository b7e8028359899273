/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"

/* A journald that accepts nothing: a listening stream socket with room for one
 * connection not yet accepted. */
static int listen_at(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        assert_true(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 0), 0);
        return fd;
}

static void test_journal_stream_never_blocks(void **state) {
        char dir[] = "/tmp/test-log-XXXXXX", path[64], header[64] = {};
        const char *expected = "sandbox-abc.scope\n\n4\n0\n0\n0\n0\n";
        int listener, first, second, third, conn, flags;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/stdout", dir);
        listener = listen_at(path);

        /* A blocking connect() would hang here, not fail: the alarm ends the test. */
        alarm(20);
        first = log_open_journal_stream(path, "sandbox-abc.scope", LOG_WARNING);
        assert_true(first >= 0);
        second = log_open_journal_stream(path, "sandbox-def.scope", LOG_WARNING);
        assert_int_equal(second, -EAGAIN);
        alarm(0);

        /* The payload gets an ordinary stderr: blocking, not inherited across exec. */
        flags = fcntl(first, F_GETFL);
        assert_true(flags >= 0);
        assert_false(flags & O_NONBLOCK);
        assert_true(fcntl(first, F_GETFD) & FD_CLOEXEC);

        /* journald reads the header sd_journal_stream_fd() would have written, then lines. */
        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        assert_true(conn >= 0);
        assert_int_equal(write(first, "hello\n", 6), 6);
        close(first);
        size_t n = 0;
        for (ssize_t k; (k = read(conn, header + n, sizeof(header) - 1 - n)) > 0;)
                n += (size_t) k;
        assert_string_equal(header, "sandbox-abc.scope\n\n4\n0\n0\n0\n0\nhello\n");
        assert_int_equal(strncmp(header, expected, strlen(expected)), 0);
        close(conn);

        /* Room again once journald accepted. */
        third = log_open_journal_stream(path, "sandbox-ghi.scope", LOG_WARNING);
        assert_true(third >= 0);
        close(third);

        close(listener);
        unlink(path);
        assert_int_equal(log_open_journal_stream(path, "x", LOG_WARNING), -ENOENT);
        rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_journal_stream_never_blocks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
