/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What sandboxd-workspace accepts (workspace-request.h): workspace ids of 16 lowercase hex
 * digits, a removal's own names for Remove only, an old shm/'s trash name for RemoveTrash
 * only, uids within sandboxd's range, limits above 0, and nothing else: no path, no "..",
 * no parameter a method does not take. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox-api.h"
#include "workspace-request.h"

#define BASE SANDBOX_UID_BASE_DEFAULT
#define ID "0123456789abcdef"
#define ID2 "fedcba9876543210"

static void test_ids(void **state) {
        assert_true(workspace_id_is_valid(ID));
        assert_true(workspace_id_is_valid(ID2));
        assert_false(workspace_id_is_valid(""));
        assert_false(workspace_id_is_valid("0123456789abcde"));     /* 15 */
        assert_false(workspace_id_is_valid("0123456789abcdef0"));   /* 17 */
        assert_false(workspace_id_is_valid("0123456789ABCDEF"));    /* upper case */
        assert_false(workspace_id_is_valid("0123456789abcdeg"));
        assert_false(workspace_id_is_valid("../../etc/passwd"));
        assert_false(workspace_id_is_valid("/etc/shadow"));
        assert_false(workspace_id_is_valid("0123456789abcd/."));
        assert_false(workspace_id_is_valid("01234567..abcdef"));
        assert_false(workspace_id_is_valid(".removing-" ID "-0-1"));
}

static void test_removing_names(void **state) {
        assert_true(workspace_removing_name_is_valid(".removing-" ID "-0-1"));
        assert_true(workspace_removing_name_is_valid(".removing-" ID "-4294967295-4194304"));
        assert_false(workspace_removing_name_is_valid(".removing-" ID));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "-0"));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "-0-"));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "--1"));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "-0-1-2"));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "-0-1/../.."));
        assert_false(workspace_removing_name_is_valid(".removing-" ID "-12345678901-1"));  /* 11 digits */
        assert_false(workspace_removing_name_is_valid(".removing-0123456789ABCDEF-0-1"));
        assert_false(workspace_removing_name_is_valid(".removing-../../etc-0-1"));
        assert_false(workspace_removing_name_is_valid(".removing-"));
        assert_false(workspace_removing_name_is_valid("removing-" ID "-0-1"));
        assert_false(workspace_removing_name_is_valid(ID));
}

static void test_trash_names(void **state) {
        assert_true(workspace_trash_name_is_valid(".shm-trash-0-1"));
        assert_true(workspace_trash_name_is_valid(".shm-trash-4294967295-4194304"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-0"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-0-"));
        assert_false(workspace_trash_name_is_valid(".shm-trash--1"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-0-1-2"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-0-1/.."));
        assert_false(workspace_trash_name_is_valid(".shm-trash-0-1/../../etc"));
        assert_false(workspace_trash_name_is_valid(".shm-trash-12345678901-1"));  /* 11 digits */
        assert_false(workspace_trash_name_is_valid(".shm-trash-x-1"));
        assert_false(workspace_trash_name_is_valid("shm"));
        assert_false(workspace_trash_name_is_valid("work"));
        assert_false(workspace_trash_name_is_valid(".."));
        assert_false(workspace_trash_name_is_valid("shm-trash-0-1"));
        assert_false(workspace_trash_name_is_valid(".removing-" ID "-0-1"));
        assert_false(workspace_trash_name_is_valid(ID));
}

static void test_uids(void **state) {
        assert_true(workspace_uid_is_valid(BASE, BASE));
        assert_true(workspace_uid_is_valid(BASE, (int64_t) BASE + 65535));
        assert_false(workspace_uid_is_valid(BASE, (int64_t) BASE + 65536));
        assert_false(workspace_uid_is_valid(BASE, (int64_t) BASE - 1));
        assert_false(workspace_uid_is_valid(BASE, 0));       /* root */
        assert_false(workspace_uid_is_valid(BASE, 1000));    /* a user of the host */
        assert_false(workspace_uid_is_valid(BASE, -1));
        assert_false(workspace_uid_is_valid(BASE, (int64_t) UINT32_MAX));
}

/* Parses JSON text as method m's parameters: 0, or -EINVAL with the refused parameter's
 * name copied to bad. */
static int parse(WorkspaceMethod m, const char *text, WorkspaceRequest *r, char *bad, size_t size) {
        json_object *o = json_tokener_parse(text);
        const char *name = NULL;
        int k;

        assert_non_null(o);
        k = workspace_request_parse(m, o, BASE, r, &name);
        if (k < 0) {
                assert_non_null(name);
                snprintf(bad, size, "%s", name);
        }
        json_object_put(o);
        return k;
}

static void expect_refused(WorkspaceMethod m, const char *text, const char *param) {
        WorkspaceRequest r;
        char bad[64] = "";

        assert_int_equal(parse(m, text, &r, bad, sizeof(bad)), -EINVAL);
        assert_string_equal(bad, param);
}

static void test_requests(void **state) {
        WorkspaceRequest r;
        char bad[64];

        assert_int_equal(parse(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1879048193,\"maxBytes\":1048576}", &r, bad,
                               sizeof(bad)), 0);
        assert_string_equal(r.id, ID);
        assert_int_equal(r.uid, BASE + 1);
        assert_int_equal(r.max_bytes, 1048576);

        assert_int_equal(parse(WORKSPACE_CLONE, "{\"from\":\"" ID "\",\"id\":\"" ID2 "\",\"fromUid\":1879048193,"
                               "\"uid\":1879048194,\"maxBytes\":5}", &r, bad, sizeof(bad)), 0);
        assert_string_equal(r.from, ID);
        assert_string_equal(r.id, ID2);
        assert_int_equal(r.from_uid, BASE + 1);
        assert_int_equal(r.uid, BASE + 2);

        assert_int_equal(parse(WORKSPACE_REMOVE, "{\"id\":\"" ID "\"}", &r, bad, sizeof(bad)), 0);
        assert_int_equal(parse(WORKSPACE_REMOVE, "{\"id\":\".removing-" ID "-3-99\"}", &r, bad, sizeof(bad)), 0);
        assert_string_equal(r.id, ".removing-" ID "-3-99");

        assert_int_equal(parse(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\".shm-trash-7-42\"}", &r, bad,
                               sizeof(bad)), 0);
        assert_string_equal(r.id, ID);
        assert_string_equal(r.trash, ".shm-trash-7-42");

        /* Paths, in any parameter or as one of their own. */
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"/etc\",\"uid\":1879048193,\"maxBytes\":1}", "id");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"../..\",\"uid\":1879048193,\"maxBytes\":1}", "id");
        expect_refused(WORKSPACE_REMOVE, "{\"id\":\"../../../etc\"}", "id");
        expect_refused(WORKSPACE_REMOVE, "{\"id\":\".removing-" ID "-0-1/x\"}", "id");
        expect_refused(WORKSPACE_CLONE, "{\"from\":\"/var/lib/sandboxd\",\"id\":\"" ID2 "\",\"fromUid\":1879048193,"
                       "\"uid\":1879048194,\"maxBytes\":5}", "from");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1879048193,\"maxBytes\":1,\"path\":\"/etc\"}",
                       "path");
        expect_refused(WORKSPACE_REMOVE, "{\"id\":\"" ID "\",\"directory\":\"/\"}", "directory");
        /* RemoveTrash: a workspace's id (never a removal's) and a trash name, both, only. */
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\"shm\"}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\"work\"}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\".shm-trash-1-2/../..\"}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\"..\"}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":5}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\"}", "trash");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\".removing-" ID "-0-1\",\"trash\":\".shm-trash-1-2\"}", "id");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"..\",\"trash\":\".shm-trash-1-2\"}", "id");
        expect_refused(WORKSPACE_REMOVE_TRASH, "{\"id\":\"" ID "\",\"trash\":\".shm-trash-1-2\",\"path\":\"/\"}",
                       "path");
        expect_refused(WORKSPACE_REMOVE, "{\"id\":\"" ID "\",\"trash\":\".shm-trash-1-2\"}", "trash");
        /* A removal's name is Remove's only. */
        expect_refused(WORKSPACE_CREATE, "{\"id\":\".removing-" ID "-0-1\",\"uid\":1879048193,\"maxBytes\":1}", "id");
        expect_refused(WORKSPACE_CLONE, "{\"from\":\".removing-" ID "-0-1\",\"id\":\"" ID2 "\",\"fromUid\":1879048193,"
                       "\"uid\":1879048194,\"maxBytes\":5}", "from");
        /* Uids: root, a host user, past the range; of the source too. */
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":0,\"maxBytes\":1}", "uid");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1000,\"maxBytes\":1}", "uid");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1879113728,\"maxBytes\":1}", "uid");
        expect_refused(WORKSPACE_CLONE, "{\"from\":\"" ID "\",\"id\":\"" ID2 "\",\"fromUid\":0,"
                       "\"uid\":1879048194,\"maxBytes\":5}", "fromUid");
        /* Types, absence, limits, a clone onto itself. */
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":\"1879048193\",\"maxBytes\":1}", "uid");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"maxBytes\":1}", "uid");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1879048193,\"maxBytes\":0}", "maxBytes");
        expect_refused(WORKSPACE_CREATE, "{\"id\":\"" ID "\",\"uid\":1879048193,\"maxBytes\":-1}", "maxBytes");
        expect_refused(WORKSPACE_REMOVE, "{\"id\":16}", "id");
        expect_refused(WORKSPACE_REMOVE, "{}", "id");
        expect_refused(WORKSPACE_CLONE, "{\"from\":\"" ID "\",\"id\":\"" ID "\",\"fromUid\":1879048193,"
                       "\"uid\":1879048194,\"maxBytes\":5}", "id");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ids),
                cmocka_unit_test(test_removing_names),
                cmocka_unit_test(test_trash_names),
                cmocka_unit_test(test_uids),
                cmocka_unit_test(test_requests),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
