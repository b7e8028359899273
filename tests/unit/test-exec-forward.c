/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <systemd/sd-event.h>

#include "exec-forward.h"
#include "fd-util.h"
#include "macro.h"

static sd_event *event;
static unsigned n_done;

static void on_done(ExecForward *f, void *userdata) {
        n_done++;
}

static int setup(void **state) {
        n_done = 0;
        return sd_event_new(&event) < 0 ? -1 : 0;
}

static int teardown(void **state) {
        event = sd_event_unref(event);
        return 0;
}

/* A caller's pipe: everything arrives, in order, counted; at the end, done once out. */
static void test_pipe(void **state) {
        int dst[2], proc = -EBADF;
        uint64_t counter = 0;
        ExecForward *f = NULL;
        static char buf[256 * 1024], got[256 * 1024];
        size_t have = 0;

        assert_int_equal(pipe2(dst, O_CLOEXEC | O_NONBLOCK), 0);
        assert_int_equal(exec_forward_new(event, dst[1], &counter, on_done, NULL, &f, &proc), 1);
        assert_non_null(f);
        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (char) (i * 7);
        /* More than both pipes hold: the forward waits for our reads, never blocks. */
        size_t written = 0;
        while (written < sizeof(buf) || have < sizeof(buf)) {
                ssize_t n;
                if (written < sizeof(buf)) {
                        (void) fcntl(proc, F_SETFL, O_NONBLOCK);
                        n = write(proc, buf + written, sizeof(buf) - written);
                        if (n > 0)
                                written += (size_t) n;
                }
                assert_true(sd_event_run(event, 1000) >= 0);
                n = read(dst[0], got + have, sizeof(got) - have);
                if (n > 0)
                        have += (size_t) n;
        }
        assert_memory_equal(buf, got, sizeof(buf));
        assert_int_equal(counter, sizeof(buf));

        /* The process wrote its last and ended: out at once (the caller's pipe has room),
         * done not called. */
        assert_int_equal(write(proc, "end", 3), 3);
        assert_true(exec_forward_finish(f));
        assert_int_equal(n_done, 0);
        assert_int_equal(read(dst[0], got, sizeof(got)), 3);
        assert_memory_equal(got, "end", 3);
        assert_int_equal(counter, 3 + sizeof(buf));
        safe_close(proc);
        exec_forward_free(f);
        safe_close(dst[0]);
}

/* The caller's reader went away: the process's next write fails with EPIPE, as it would
 * have on the caller's own pipe. */
static void test_reader_gone(void **state) {
        int dst[2], proc = -EBADF;
        uint64_t counter = 0;
        ExecForward *f = NULL;
        char buf[4096] = {};
        ssize_t n = 0;

        assert_int_equal(pipe2(dst, O_CLOEXEC), 0);
        assert_int_equal(exec_forward_new(event, dst[1], &counter, on_done, NULL, &f, &proc), 1);
        safe_close(dst[0]);
        assert_int_equal(write(proc, buf, sizeof(buf)), (ssize_t) sizeof(buf));
        signal(SIGPIPE, SIG_IGN);
        (void) fcntl(proc, F_SETFL, O_NONBLOCK);
        for (unsigned i = 0; i < 100 && n >= 0; i++) {
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
                n = write(proc, buf, sizeof(buf));
                if (n < 0 && errno == EAGAIN)
                        n = 0;
        }
        assert_int_equal(n, -1);
        assert_int_equal(errno, EPIPE);
        assert_true(exec_forward_finish(f));
        safe_close(proc);
        exec_forward_free(f);
}

/* A socket: sent without blocking; what it cannot take waits; counted. */
static void test_socket_and_done(void **state) {
        int sk[2], proc = -EBADF;
        uint64_t counter = 0;
        ExecForward *f = NULL;
        static char buf[1024 * 1024];
        size_t got = 0;
        char tmp[65536];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sk), 0);
        assert_int_equal(exec_forward_new(event, sk[1], &counter, on_done, NULL, &f, &proc), 1);
        (void) fcntl(proc, F_SETFL, O_NONBLOCK);
        ssize_t w = write(proc, buf, 65536);
        assert_int_equal(w, 65536);
        /* The peer does not read yet: the forward holds back and finish waits. */
        for (unsigned i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 1000) >= 0);
        safe_close(proc);
        if (!exec_forward_finish(f)) {
                while (n_done == 0) {
                        ssize_t n = recv(sk[0], tmp, sizeof(tmp), MSG_DONTWAIT);
                        if (n > 0)
                                got += (size_t) n;
                        assert_true(sd_event_run(event, 1000) >= 0);
                }
                assert_int_equal(n_done, 1);
        }
        for (;;) {
                ssize_t n = recv(sk[0], tmp, sizeof(tmp), MSG_DONTWAIT);
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        assert_int_equal(got, 65536);
        assert_int_equal(counter, 65536);
        exec_forward_free(f);
        safe_close(sk[0]);
}

/* /dev/null: read and dropped, counted; a regular file: given as it is, counted by growth. */
static void test_null_and_file(void **state) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC), proc = -EBADF, file;
        uint64_t counter = 0, c2 = 0;
        ExecForward *f = NULL, *g = NULL;
        char path[] = "/var/tmp/test-exec-forward-XXXXXX";

        assert_true(null >= 0);
        assert_int_equal(exec_forward_new(event, null, &counter, on_done, NULL, &f, &proc), 1);
        assert_int_equal(write(proc, "12345", 5), 5);
        safe_close(proc);
        while (counter < 5)
                assert_true(sd_event_run(event, 1000) >= 0);
        assert_true(exec_forward_finish(f));
        assert_int_equal(counter, 5);
        exec_forward_free(f);

        file = mkostemp(path, O_CLOEXEC | O_APPEND);
        assert_true(file >= 0);
        (void) unlink(path);
        assert_int_equal(write(file, "before", 6), 6);
        assert_int_equal(exec_forward_new(event, file, &c2, on_done, NULL, &g, &proc), 0);
        assert_non_null(g);
        assert_int_equal(write(proc, "abc", 3), 3);
        assert_true(exec_forward_finish(g));
        assert_int_equal(c2, 3);
        safe_close(proc);
        exec_forward_free(g);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_pipe, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reader_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_and_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_null_and_file, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
