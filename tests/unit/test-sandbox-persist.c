/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The state a restarted sandboxd adopts a sandbox from (sandbox-persist.c): what is written
 * is read back, names, tenants and labels included; a file of a sandboxd before them still reads;
 * a name that is not one is refused. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "sandbox-persist.h"

static void test_round_trip(void **state) {
        _cleanup_free_ char *text = NULL;
        SandboxPersist st = {
                .id = "0123456789abcdef",
                .template_name = (char *) "shell",
                .owner = 1000,
                .host_uid = 0x70000001,
                .created_at = 1,
                .from_pool = true,
                .config = { .limits = { .memory_max = 1 << 24 }, .timeout_sec = 60, .ephemeral = true,
                            .name = "agent-7", .tenant = "acme",
                            .labels = (char *[]) { "example.com/team=ml", "run=4 b", NULL },
                            .secrets = (char *) "KEY@api.example.com:x-api-key\nTOKEN\n" },
                .egress_ca_cert = (char *) "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
                .egress_ca_key = (char *) "-----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----\n",
                .lifetime_left_usec = 1234567,
        }, back = {};

        assert_int_equal(sandbox_persist_to_json(&st, &text), 0);
        assert_null(strstr(text, "\"contexts\""));  /* none: no key */
        assert_int_equal(sandbox_persist_from_json(text, &back), 0);
        assert_null(back.contexts);
        assert_string_equal(back.id, st.id);
        assert_int_equal(back.owner, 1000);
        assert_string_equal(back.config.name, "agent-7");
        assert_string_equal(back.config.tenant, "acme");
        assert_true(back.config.ephemeral);
        assert_true(back.from_pool);
        assert_int_equal(back.config.timeout_sec, 60);
        assert_non_null(back.config.labels);
        assert_string_equal(back.config.labels[0], "example.com/team=ml");
        assert_string_equal(back.config.labels[1], "run=4 b");
        assert_null(back.config.labels[2]);
        /* Issue 32: the bindings (names only), the proxy's CA, a paused lifetime's rest. */
        assert_string_equal(back.config.secrets, st.config.secrets);
        assert_string_equal(back.egress_ca_cert, st.egress_ca_cert);
        assert_string_equal(back.egress_ca_key, st.egress_ca_key);
        assert_int_equal(back.lifetime_left_usec, 1234567);
        sandbox_persist_done(&back);
        st.config.secrets = NULL;
        st.egress_ca_cert = st.egress_ca_key = NULL;
        st.lifetime_left_usec = 0;

        /* Neither: no keys, and none read back. */
        st.config.name[0] = st.config.tenant[0] = 0;
        st.config.labels = NULL;
        free(text);
        assert_int_equal(sandbox_persist_to_json(&st, &text), 0);
        assert_null(strstr(text, "\"Name\""));
        assert_null(strstr(text, "\"Tenant\""));
        assert_int_equal(sandbox_persist_from_json(text, &back), 0);
        assert_string_equal(back.config.name, "");
        assert_string_equal(back.config.tenant, "");
        assert_null(back.config.labels);
        assert_null(strstr(text, "\"Labels\""));
        sandbox_persist_done(&back);
}

static void test_bad_names(void **state) {
        static const char base[] =
                "{\"id\":\"0123456789abcdef\",\"template\":\"shell\",\"owner\":0,\"host_uid\":1,\"created_at\":1,"
                "\"deadline_realtime\":0,\"payload_pid\":0,\"MemoryMax\":1,\"CPUQuotaPerSecUSec\":1,\"TasksMax\":1,"
                "\"DiskMax\":1,\"Timeout\":0,\"IdleTimeout\":0,\"Ephemeral\":false,\"environment\":[]%s}";
        static const char *const bad[] = {
                ",\"Name\":\"a b\"",
                ",\"Name\":\"0123456789abcdef\"",
                ",\"Name\":7",
                ",\"Tenant\":\"\"",
                ",\"Tenant\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
                ",\"Labels\":{\"bad key\":\"v\"}",
                ",\"Labels\":[\"a=b\"]",
        };
        SandboxPersist st = {};
        char text[1024];

        snprintf(text, sizeof(text), base, "");
        assert_int_equal(sandbox_persist_from_json(text, &st), 0);
        sandbox_persist_done(&st);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                snprintf(text, sizeof(text), base, bad[i]);
                assert_int_equal(sandbox_persist_from_json(text, &st), -EBADMSG);
        }
}

/* Issue 34: a sandbox's code contexts (their ids, languages, working directories) come back
 * with it, to be listed lost; a record that is not one is refused. */
static void test_contexts(void **state) {
        static const char base[] =
                "{\"id\":\"0123456789abcdef\",\"template\":\"shell\",\"owner\":0,\"host_uid\":1,\"created_at\":1,"
                "\"deadline_realtime\":0,\"payload_pid\":0,\"MemoryMax\":1,\"CPUQuotaPerSecUSec\":1,\"TasksMax\":1,"
                "\"DiskMax\":1,\"Timeout\":0,\"IdleTimeout\":0,\"Ephemeral\":false,\"environment\":[],"
                "\"contexts\":[%s]}";
        static const char good[] =
                "{\"id\":\"0123456789ab\",\"language\":\"python\",\"cwd\":\"/tmp\",\"default\":false,"
                "\"caller\":1000,\"created\":5},"
                "{\"id\":\"ba9876543210\",\"language\":\"javascript\",\"default\":true,\"caller\":0,"
                "\"created\":6}";
        static const char *const bad[] = {
                "{\"id\":\"0123456789AB\",\"language\":\"python\",\"default\":false,\"caller\":0,\"created\":1}",
                "{\"id\":\"0123456789a\",\"language\":\"python\",\"default\":false,\"caller\":0,\"created\":1}",
                "{\"id\":\"0123456789ab\",\"language\":\"ruby\",\"default\":false,\"caller\":0,\"created\":1}",
                "{\"id\":\"0123456789ab\",\"language\":\"python\",\"cwd\":\"tmp\",\"default\":false,"
                "\"caller\":0,\"created\":1}",
                "{\"id\":\"0123456789ab\",\"language\":\"python\",\"default\":false,\"caller\":-1,\"created\":1}",
                "{\"id\":\"0123456789ab\",\"language\":\"python\",\"caller\":0,\"created\":1}",
                "7",
        };
        _cleanup_free_ char *again = NULL;
        SandboxPersist st = {}, back = {};
        char text[2048];

        snprintf(text, sizeof(text), base, good);
        assert_int_equal(sandbox_persist_from_json(text, &st), 0);
        assert_non_null(st.contexts);
        assert_int_equal(json_object_array_length(st.contexts), 2);
        /* Written again as read. */
        assert_int_equal(sandbox_persist_to_json(&st, &again), 0);
        assert_int_equal(sandbox_persist_from_json(again, &back), 0);
        assert_true(json_object_equal(st.contexts, back.contexts));
        json_object *cwd = json_object_object_get(json_object_array_get_idx(back.contexts, 0), "cwd");
        assert_string_equal(json_object_get_string(cwd), "/tmp");
        sandbox_persist_done(&back);
        sandbox_persist_done(&st);
        /* None (an empty list, as an older sandboxd's file has): none read. */
        snprintf(text, sizeof(text), base, "");
        assert_int_equal(sandbox_persist_from_json(text, &st), 0);
        assert_int_equal(json_object_array_length(st.contexts), 0);
        sandbox_persist_done(&st);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                snprintf(text, sizeof(text), base, bad[i]);
                assert_int_equal(sandbox_persist_from_json(text, &st), -EBADMSG);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_contexts),
                cmocka_unit_test(test_bad_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
