/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The pure parts of what there is to see of a sandbox: the journal matches of its logs,
 * and the /proc and cgroup text its metrics are found through. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cgroup.h"
#include "sandbox-logs.h"
#include "sandbox-metrics.h"
#include "strv.h"

static void test_logs_matches(void **state) {
        _cleanup_strv_free_ char **l = NULL;
        char *joined = NULL;
        size_t n = 0;
        FILE *f;

        assert_int_equal(sandbox_logs_matches("0123456789abcdef", "sandbox-0123456789abcdef.scope", &l), 0);
        f = open_memstream(&joined, &n);
        assert_non_null(f);
        for (char **m = l; *m; m++)
                fprintf(f, "%s%s", m == l ? "" : " ", *m);
        fclose(f);
        /* journalctl's notation: sandboxd's messages, the payload's stream, PID 1's about
         * the unit, a container's output; the reader adds _UID=0 to all. */
        assert_string_equal(joined,
                            "SANDBOX_ID=0123456789abcdef + "
                            "SYSLOG_IDENTIFIER=sandbox-0123456789abcdef.scope + "
                            "UNIT=sandbox-0123456789abcdef.scope _PID=1 + "
                            "CONTAINER_NAME=sandbox-0123456789abcdef");
        free(joined);
}

static void test_cgroup_text_has_path(void **state) {
        static const char hybrid[] =
                "13:perf_event:/\n"
                "6:memory:/ns/sandbox.slice/sandbox-a.scope\n"
                "1:name=systemd:/ns/sandbox.slice/sandbox-a.scope/payload\n"
                "0::/ns/sandbox.slice/sandbox-a.scope\n";
        static const char other[] =
                "1:name=systemd:/ns/sandbox.slice/sandbox-ab.scope\n"
                "0::/ns/sandbox.slice\n";

        assert_true(cgroup_text_has_path(hybrid, "/ns/sandbox.slice/sandbox-a.scope"));
        assert_true(cgroup_text_has_path(hybrid, "/ns/sandbox.slice"));
        assert_true(cgroup_text_has_path("0::/a/b", "/a/b"));
        /* A longer name is another cgroup, not one below. */
        assert_false(cgroup_text_has_path(other, "/ns/sandbox.slice/sandbox-a.scope"));
        assert_false(cgroup_text_has_path("", "/a"));
        assert_false(cgroup_text_has_path("garbage without colons\n", "/a"));
        assert_false(cgroup_text_has_path("1:x\n", "/a"));
}

static void test_proc_status(void **state) {
        static const char inside[] =
                "Name:\tsandbox-init\n"
                "Uid:\t1879064808\t1879064808\t1879064808\t1879064808\n"
                "Gid:\t1879064809\t1879064809\t1879064809\t1879064809\n"
                "NSpid:\t225\t1\n";
        static const char outside[] =
                "Uid:\t0\t0\t0\t0\n"
                "Gid:\t0\t0\t0\t0\n"
                "NSpid:\t224\n";
        uint32_t id = 7;

        assert_int_equal(proc_status_parse_id(inside, "Uid", &id), 0);
        assert_int_equal(id, 1879064808U);
        assert_int_equal(proc_status_parse_id(inside, "Gid", &id), 0);
        assert_int_equal(id, 1879064809U);
        assert_int_equal(proc_status_nested(inside), 1);
        assert_int_equal(proc_status_nested(outside), 0);

        /* Ids that differ (a process between setresuid() calls) are no one's. */
        id = 7;
        assert_int_equal(proc_status_parse_id("Uid:\t1000\t0\t1000\t1000\n", "Uid", &id), -EPERM);
        assert_int_equal(proc_status_parse_id("Uid:\t1000\t1000\n", "Uid", &id), -EBADMSG);
        assert_int_equal(proc_status_parse_id("Uid:\t1\t1\t1\t1 x\n", "Uid", &id), -EBADMSG);
        assert_int_equal(proc_status_parse_id("Gid:\t1\t1\t1\t1\n", "Uid", &id), -ENOENT);
        assert_int_equal(proc_status_parse_id("Uidx:\t1\t1\t1\t1\n", "Uid", &id), -ENOENT);
        assert_int_equal(id, 7U);
        assert_int_equal(proc_status_nested("Name:\tx\n"), -ENOENT);
        assert_int_equal(proc_status_nested("NSpid:\n"), -EBADMSG);
        assert_int_equal(proc_status_nested("NSpid:\t1\tx\n"), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_logs_matches),
                cmocka_unit_test(test_cgroup_text_has_path),
                cmocka_unit_test(test_proc_status),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
