/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"

/* What fn() writes to stderr (not the journal: no $JOURNAL_STREAM here). */
static void capture_stderr(void (*fn)(void), char *out, size_t size) {
        int p[2], saved;
        ssize_t k;

        unsetenv("JOURNAL_STREAM");
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fflush(stderr);
        saved = dup(STDERR_FILENO);
        assert_true(saved >= 0);
        assert_true(dup2(p[1], STDERR_FILENO) >= 0);
        fn();
        fflush(stderr);
        assert_true(dup2(saved, STDERR_FILENO) >= 0);
        close(saved);
        close(p[1]);
        k = read(p[0], out, size - 1);
        assert_true(k >= 0);
        out[k] = '\0';
        close(p[0]);
}

/* What log_payload_output() writes while our stderr is not the journal: one
 * "<4>identifier: line" per line. */
static struct {
        const char *buf;
        size_t n;
        unsigned *budget;
        size_t logged;
} payload;

static void log_payload(void) {
        payload.logged = log_payload_output("sandbox-abc.scope", "abc", payload.buf, payload.n, payload.budget);
}

static size_t capture(const char *buf, size_t n, unsigned *budget, char *out, size_t size) {
        payload.buf = buf;
        payload.n = n;
        payload.budget = budget;
        capture_stderr(log_payload, out, size);
        return payload.logged;
}

static void log_fault(void) {
        assert_int_equal(log_error_errno(EINVAL, "Failed to frobnicate: %m"), -EINVAL);
}

static void log_notice_only(void) {
        assert_int_equal(log_warning_errno(ENOENT, "No such thing: %m"), -ENOENT);
        log_info("Started.");
}

static int needs_a_pointer(const char *p) {
        assert_return(p, -EINVAL);
        return 0;
}

static void call_with_null(void) {
        assert_int_equal(needs_a_pointer("x"), 0);
        assert_int_equal(needs_a_pointer(NULL), -EINVAL);
}

/* A fault (an errno at LOG_ERR) says which function met it and where. */
static void test_fault_origin(void **state) {
        char out[4096];

        capture_stderr(log_fault, out, sizeof(out));
        assert_non_null(strstr(out, "<3>Failed to frobnicate: Invalid argument (log_fault(), "));
        assert_non_null(strstr(out, "tests/unit/test-log.c:"));
        assert_null(strstr(out, "../"));
        /* A warning, or a message without an errno, reads as it is. */
        capture_stderr(log_notice_only, out, sizeof(out));
        assert_string_equal(out, "<4>No such thing: No such file or directory\n<6>Started.\n");
}

/* assert_return(): the caller's NULL is refused with -EINVAL, and the log says where. */
static void test_assert_return(void **state) {
        char out[4096];

        capture_stderr(call_with_null, out, sizeof(out));
        assert_non_null(strstr(out, "<3>Assertion 'p' failed at tests/unit/test-log.c:"));
        assert_non_null(strstr(out, ", function needs_a_pointer(). Ignoring."));
}

static void test_payload_output_lines(void **state) {
        const char chunk[] = "bwrap: Can't mount proc\n\nsandbox-init: reset: EPERM\nno newline at the end";
        unsigned budget = 10;
        char out[4096];

        unsetenv("JOURNAL_STREAM");
        /* Empty lines are not logged; the last line of a chunk need not end. */
        assert_int_equal(capture(chunk, strlen(chunk), &budget, out, sizeof(out)), 3);
        assert_int_equal(budget, 7);
        assert_string_equal(out, "<4>sandbox-abc.scope: bwrap: Can't mount proc\n"
                                 "<4>sandbox-abc.scope: sandbox-init: reset: EPERM\n"
                                 "<4>sandbox-abc.scope: no newline at the end\n");
}

static void test_payload_output_budget(void **state) {
        const char chunk[] = "one\ntwo\nthree\n";
        unsigned budget = 2;
        char out[4096];

        /* Logged while the budget lasts, and not a line more. */
        assert_int_equal(capture(chunk, strlen(chunk), &budget, out, sizeof(out)), 2);
        assert_int_equal(budget, 0);
        assert_string_equal(out, "<4>sandbox-abc.scope: one\n<4>sandbox-abc.scope: two\n");
        assert_int_equal(capture(chunk, strlen(chunk), &budget, out, sizeof(out)), 0);
        assert_string_equal(out, "");
}

static void test_payload_output_long_line(void **state) {
        size_t n = LOG_PAYLOAD_LINE_MAX + 500;
        char *line = malloc(n), *out = malloc(n + 256);
        unsigned budget = 5;

        assert_non_null(line);
        assert_non_null(out);
        memset(line, 'x', n);
        /* Cut, not split into more lines: one line, LOG_PAYLOAD_LINE_MAX of it shown. */
        assert_int_equal(capture(line, n, &budget, out, n + 256), 1);
        assert_int_equal(strlen(out), strlen("<4>sandbox-abc.scope: ") + LOG_PAYLOAD_LINE_MAX + 1);
        free(line);
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fault_origin),
                cmocka_unit_test(test_assert_return),
                cmocka_unit_test(test_payload_output_lines),
                cmocka_unit_test(test_payload_output_budget),
                cmocka_unit_test(test_payload_output_long_line),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
