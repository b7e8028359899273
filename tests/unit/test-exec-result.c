/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "access.h"
#include "cgroup.h"
#include "exec.h"

static void test_exit_mapping(void **state) {
        ExecResult r = {};

        exec_result_from_exit(&r, &(struct agent_exit) { .code = 3, .utime_usec = 5, .stime_usec = 7,
                                                          .maxrss_kb = 2, .duration_usec = 99 }, false, false);
        assert_int_equal(r.exit_status, 3);
        assert_int_equal(r.exit_code, 3);
        assert_int_equal(r.signal, 0);
        assert_false(r.timed_out);
        assert_false(r.oom_killed);
        assert_int_equal(r.cpu_usec, 12);
        assert_int_equal(r.max_rss_bytes, 2048);
        assert_int_equal(r.duration_usec, 99);

        exec_result_from_exit(&r, &(struct agent_exit) { .code = -1, .signal = SIGKILL }, false, true);
        assert_int_equal(r.exit_status, 137);
        assert_int_equal(r.exit_code, -1);
        assert_int_equal(r.signal, SIGKILL);
        assert_true(r.oom_killed);

        /* The cgroup counted an OOM kill during the exec: whatever the top process says,
         * a shell's child or a pipeline's member was killed (sh exits 137, a pipeline 0). */
        exec_result_from_exit(&r, &(struct agent_exit) { .code = 0 }, false, true);
        assert_true(r.oom_killed);
        assert_int_equal(r.exit_status, 0);
        exec_result_from_exit(&r, &(struct agent_exit) { .code = 137 }, false, true);
        assert_true(r.oom_killed);
        assert_int_equal(r.exit_status, 137);
        /* And none counted: a SIGKILL or a SIGSEGV is no OOM kill. */
        exec_result_from_exit(&r, &(struct agent_exit) { .code = -1, .signal = SIGSEGV }, false, false);
        assert_false(r.oom_killed);
        assert_int_equal(r.exit_status, 128 + SIGSEGV);

        exec_result_from_exit(&r, &(struct agent_exit) { .code = -1, .signal = SIGKILL }, true, false);
        assert_true(r.timed_out);
        assert_false(r.oom_killed);
}

static void test_output_buffer(void **state) {
        OutputBuffer b = { .max = 5 };

        assert_false(output_buffer_append(&b, "abc", 3));
        assert_true(output_buffer_append(&b, "defg", 4));
        assert_int_equal(b.size, 5);
        assert_int_equal(b.total, 7);
        assert_memory_equal(b.data, "abcde", 5);
        assert_true(output_buffer_append(&b, "h", 1));
        assert_int_equal(b.size, 5);
        assert_int_equal(b.total, 8);
        output_buffer_done(&b);

        /* Read from an offset: a background process's buffer keeps the newest bytes. */
        OutputBuffer t = { .max = 4, .keep_tail = true };
        const char *d;
        size_t n;

        assert_false(output_buffer_append(&t, "abc", 3));
        assert_int_equal(output_buffer_from(&t, 1, &d, &n), 0);
        assert_int_equal(n, 2);
        assert_memory_equal(d, "bc", 2);
        assert_int_equal(output_buffer_from(&t, 3, &d, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(output_buffer_from(&t, 4, &d, &n), -EINVAL);
        (void) output_buffer_append(&t, "defgh", 5);   /* keeps efgh of abcdefgh */
        assert_int_equal(output_buffer_from(&t, 1, &d, &n), 0);
        assert_int_equal(n, 4);   /* b, c, d dropped: 8 - 1 - 4 */
        assert_memory_equal(d, "efgh", 4);
        assert_int_equal(output_buffer_from(&t, 6, &d, &n), 0);
        assert_memory_equal(d, "gh", 2);
        assert_int_equal(n, 2);
        output_buffer_done(&t);
        /* One that keeps the first bytes: what came after them is dropped. */
        OutputBuffer h = { .max = 2 };
        assert_true(output_buffer_append(&h, "xyz", 3));
        assert_int_equal(output_buffer_from(&h, 1, &d, &n), 0);
        assert_memory_equal(d, "y", 1);
        assert_int_equal(n, 1);
        assert_int_equal(output_buffer_from(&h, 3, &d, &n), 0);
        assert_int_equal(n, 0);
        output_buffer_done(&h);

        OutputBuffer z = { .max = 0 };
        assert_true(output_buffer_append(&z, "x", 1));
        assert_int_equal(z.size, 0);
        output_buffer_done(&z);
}

static void test_cgroup_keyed(void **state) {
        uint64_t v = 0;

        assert_int_equal(cgroup_parse_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill", &v), 0);
        assert_int_equal(v, 3);
        assert_int_equal(cgroup_parse_keyed("low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n", "oom_kill", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(cgroup_parse_keyed("oom_kill_disable 0\n", "oom_kill", &v), -ENOENT);
        assert_int_equal(cgroup_parse_keyed("oom_kill x\n", "oom_kill", &v), -EBADMSG);
        assert_int_equal(cgroup_parse_keyed("", "oom_kill", &v), -ENOENT);
}

static void test_access(void **state) {
        assert_null(sandbox_access_action(SANDBOX_OP_EXEC, 0, 1000, NULL));
        assert_null(sandbox_access_action(SANDBOX_OP_CREATE, 0, 0, NULL));
        assert_string_equal(sandbox_access_action(SANDBOX_OP_CREATE, 1000, 0, NULL), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1000, NULL), SANDBOX_ACTION_EXEC);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1001, NULL), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1000, NULL), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 0, NULL), SANDBOX_ACTION_MANAGE);
        assert_null(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1000, NULL));
        assert_null(sandbox_access_action(SANDBOX_OP_LIST_ALL, 0, 0, NULL));
        assert_string_equal(sandbox_access_action(SANDBOX_OP_LIST_ALL, 1000, 0, NULL), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1001, NULL), SANDBOX_ACTION_MANAGE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exit_mapping),
                cmocka_unit_test(test_output_buffer),
                cmocka_unit_test(test_cgroup_keyed),
                cmocka_unit_test(test_access),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
