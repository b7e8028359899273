/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The record of a snapshot (snapshot-meta.h) and the per-owner quota arithmetic. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot-meta.h"

static SnapshotMeta sample(void) {
        SnapshotMeta m = {
                .id = "0123456789abcdef",
                .template_name = (char *) "shell",
                .owner = 1000,
                .source = "fedcba9876543210",
                .size = 4096,
                .content_size = UINT64_C(1) << 40,
                .created = UINT64_C(1795552492017126),
                .tmp = true,
                .hibernated = true,
                .config = {
                        .limits = { .memory_max = 256 << 20, .cpu_quota_per_sec_usec = 500000, .tasks_max = 64 },
                        .disk_max = 1 << 30,
                        .timeout_sec = 3600,
                        .idle_timeout_sec = 60,
                        .idle_action = IDLE_ACTION_HIBERNATE,
                        .name = "web",
                        .tenant = "acme",
                },
        };
        return m;
}

static void test_roundtrip(void **state) {
        SnapshotMeta m = sample(), got;
        char *text = NULL;

        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        assert_int_equal(snapshot_meta_from_json(text, &got), 0);
        assert_string_equal(got.id, m.id);
        assert_string_equal(got.template_name, "shell");
        assert_int_equal(got.owner, 1000);
        assert_string_equal(got.source, m.source);
        assert_true(got.size == 4096);
        assert_true(got.content_size == UINT64_C(1) << 40);
        assert_true(got.created == m.created);
        assert_true(got.tmp && got.hibernated);
        assert_true(got.config.limits.memory_max == m.config.limits.memory_max);
        assert_true(got.config.limits.cpu_quota_per_sec_usec == 500000);
        assert_true(got.config.limits.tasks_max == 64);
        assert_true(got.config.disk_max == m.config.disk_max);
        assert_true(got.config.timeout_sec == 3600 && got.config.idle_timeout_sec == 60);
        assert_int_equal(got.config.idle_action, IDLE_ACTION_HIBERNATE);
        assert_string_equal(got.config.name, "web");
        assert_string_equal(got.config.tenant, "acme");
        snapshot_meta_done(&got);
        free(text);

        /* No name, no tenant: empty, and still a record. */
        m.config.name[0] = m.config.tenant[0] = 0;
        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        assert_int_equal(snapshot_meta_from_json(text, &got), 0);
        assert_string_equal(got.config.name, "");
        snapshot_meta_done(&got);
        snapshot_meta_done(&got); /* idempotent */
        free(text);
}

static int parse_with(const char *key, const char *value);

/* A hibernation keeps the secret bindings given at create (names only), "" (none given)
 * included; a snapshot keeps none, and a record's bindings must parse. */
static void test_secret_bindings(void **state) {
        SnapshotMeta m = sample(), got;
        char *text = NULL;

        m.config.secrets = (char *) "API_KEY\nCERT:file";
        m.config.secrets_set = true;
        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        assert_null(strstr(text, "value"));
        assert_int_equal(snapshot_meta_from_json(text, &got), 0);
        assert_true(got.config.secrets_set);
        assert_string_equal(got.config.secrets, "API_KEY\nCERT:file");
        snapshot_meta_done(&got);
        free(text);

        m.config.secrets = NULL;          /* given as none: the template's do not apply */
        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        assert_int_equal(snapshot_meta_from_json(text, &got), 0);
        assert_true(got.config.secrets_set);
        assert_null(got.config.secrets);
        snapshot_meta_done(&got);
        free(text);

        m.config.secrets = (char *) "API_KEY";
        m.hibernated = false;
        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        assert_null(strstr(text, "Secrets"));
        free(text);

        assert_int_equal(parse_with("Secrets", "\"API_KEY\""), 0);
        assert_int_equal(parse_with("Secrets", "\"no such=binding\""), -EBADMSG);
        assert_int_equal(parse_with("Secrets", "7"), -EBADMSG);
}

/* A valid record with one member replaced by value (JSON text), or removed (NULL). */
static int parse_with(const char *key, const char *value) {
        SnapshotMeta m = sample(), got;
        char *text = NULL, buf[4096];
        json_object *o;
        int r;

        assert_int_equal(snapshot_meta_to_json(&m, &text), 0);
        o = json_tokener_parse(text);
        free(text);
        if (value)
                json_object_object_add(o, key, json_tokener_parse(value));
        else
                json_object_object_del(o, key);
        snprintf(buf, sizeof(buf), "%s", json_object_to_json_string(o));
        json_object_put(o);
        r = snapshot_meta_from_json(buf, &got);
        if (r >= 0)
                snapshot_meta_done(&got);
        return r;
}

static void test_refused(void **state) {
        SnapshotMeta got;

        assert_int_equal(snapshot_meta_from_json("", &got), -EBADMSG);
        assert_int_equal(snapshot_meta_from_json("[]", &got), -EBADMSG);
        assert_int_equal(snapshot_meta_from_json("{\"id\":\"0123456789abcdef\"}", &got), -EBADMSG);
        assert_int_equal(parse_with("size", "12"), 0);
        /* Each member is required, of its type and in its range. */
        static const char * const keys[] = { "id", "template", "owner", "source", "size", "content_size",
                                             "created", "tmp", "hibernated", "DiskMax", "Name", "Tenant",
                                             "IdleAction" };
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                assert_int_equal(parse_with(keys[i], NULL), -EBADMSG);
        assert_int_equal(parse_with("id", "\"../../etc/passwd\""), -EBADMSG);
        assert_int_equal(parse_with("id", "\"0123456789ABCDEF\""), -EBADMSG);
        assert_int_equal(parse_with("source", "\"x\""), -EBADMSG);
        assert_int_equal(parse_with("template", "\"../x\""), -EBADMSG);
        assert_int_equal(parse_with("owner", "-1"), -EBADMSG);
        assert_int_equal(parse_with("owner", "4294967295"), -EBADMSG);
        assert_int_equal(parse_with("size", "-5"), -EBADMSG);
        assert_int_equal(parse_with("size", "\"5\""), -EBADMSG);
        assert_int_equal(parse_with("tmp", "1"), -EBADMSG);
        assert_int_equal(parse_with("Name", "\"has space\""), -EBADMSG);
        assert_int_equal(parse_with("Name", "\"0123456789abcdef\""), -EBADMSG); /* an id is no name */
        assert_int_equal(parse_with("Tenant", "\"a/b\""), -EBADMSG);
        assert_int_equal(parse_with("IdleAction", "\"explode\""), -EBADMSG);
}

static void test_quota(void **state) {
        uint64_t room = 0;

        /* No bounds: room without end. */
        assert_int_equal(snapshot_quota_room(UINT64_C(1) << 50, 1000, 0, 0, &room), 0);
        assert_true(room == UINT64_MAX);
        /* Bytes: what is left; nothing left is no room at all. */
        assert_int_equal(snapshot_quota_room(300, 1, 1000, 0, &room), 0);
        assert_true(room == 700);
        assert_int_equal(snapshot_quota_room(1000, 1, 1000, 0, &room), -EDQUOT);
        assert_int_equal(snapshot_quota_room(1500, 1, 1000, 0, &room), -EDQUOT);
        /* Count: one more than max_count - 1 fits, max_count does not. */
        assert_int_equal(snapshot_quota_room(0, 5, 0, 6, NULL), 0);
        assert_int_equal(snapshot_quota_room(0, 6, 0, 6, NULL), -EDQUOT);
        assert_int_equal(snapshot_quota_room(0, 0, 1, 1, &room), 0);
        assert_true(room == 1);
}

static void test_ids_and_actions(void **state) {
        assert_true(snapshot_id_is_valid("0123456789abcdef"));
        assert_false(snapshot_id_is_valid("0123456789abcde"));
        assert_false(snapshot_id_is_valid("0123456789abcdeg"));
        assert_false(snapshot_id_is_valid(NULL));
        for (IdleAction a = 0; a < _IDLE_ACTION_MAX; a++)
                assert_int_equal(idle_action_from_string(idle_action_to_string(a)), a);
        assert_int_equal(idle_action_from_string("Hibernate"), _IDLE_ACTION_INVALID);
        assert_null(idle_action_to_string(_IDLE_ACTION_MAX));
}

/* What the records (recorder-spool.c, the snapshot_events table) name events and causes. */
static void test_event_names(void **state) {
        static const char *const kinds[] = { "taken", "restored", "removed" };
        static const char *const causes[] = { "snapshot", "fork", "hibernate", "create", "wake", "remove",
                                              "retention" };

        assert_int_equal(ELEMENTSOF(kinds), _SNAPSHOT_EVENT_KIND_MAX);
        assert_int_equal(ELEMENTSOF(causes), _SNAPSHOT_CAUSE_MAX);
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                assert_string_equal(snapshot_event_kind_to_string((SnapshotEventKind) i), kinds[i]);
        for (size_t i = 0; i < ELEMENTSOF(causes); i++)
                assert_string_equal(snapshot_event_cause_to_string((SnapshotEventCause) i), causes[i]);
        assert_null(snapshot_event_kind_to_string(_SNAPSHOT_EVENT_KIND_MAX));
        assert_null(snapshot_event_kind_to_string((SnapshotEventKind) -1));
        assert_null(snapshot_event_cause_to_string(_SNAPSHOT_CAUSE_MAX));

        /* Taken by the three operations that take one. */
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_TAKEN, SNAPSHOT_CAUSE_SNAPSHOT));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_TAKEN, SNAPSHOT_CAUSE_FORK));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_TAKEN, SNAPSHOT_CAUSE_HIBERNATE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_TAKEN, SNAPSHOT_CAUSE_WAKE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_TAKEN, SNAPSHOT_CAUSE_RETENTION));
        /* Restored by the three that restore. */
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_RESTORED, SNAPSHOT_CAUSE_CREATE));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_RESTORED, SNAPSHOT_CAUSE_FORK));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_RESTORED, SNAPSHOT_CAUSE_WAKE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_RESTORED, SNAPSHOT_CAUSE_HIBERNATE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_RESTORED, SNAPSHOT_CAUSE_REMOVE));
        /* Removed by RemoveSnapshot, retention, and Fork and Wake once restored. */
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_REMOVE));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_RETENTION));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_FORK));
        assert_true(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_WAKE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_CREATE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_SNAPSHOT));
        assert_false(snapshot_event_cause_fits(_SNAPSHOT_EVENT_KIND_MAX, SNAPSHOT_CAUSE_REMOVE));
        assert_false(snapshot_event_cause_fits(SNAPSHOT_EVENT_REMOVED, _SNAPSHOT_CAUSE_MAX));
}

static void test_options(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        SnapshotOptions so = {};

        assert_int_equal(sandbox_config_set(&c, "IdleAction",
                                            &(OptionValue) { .type = OPTION_STRING, .s = "pause" }, &e), 0);
        assert_int_equal(c.idle_action, IDLE_ACTION_PAUSE);
        assert_int_equal(sandbox_config_set(&c, "FromSnapshot",
                                            &(OptionValue) { .type = OPTION_STRING, .s = "00112233445566ff" }, &e), 0);
        assert_string_equal(c.from_snapshot, "00112233445566ff");
        assert_int_equal(sandbox_config_set(&c, "IdleAction",
                                            &(OptionValue) { .type = OPTION_STRING, .s = "nap" }, &e), -EINVAL);
        assert_int_equal(e.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&e);
        assert_int_equal(sandbox_config_set(&c, "FromSnapshot",
                                            &(OptionValue) { .type = OPTION_STRING, .s = "../x" }, &e), -EINVAL);
        sandbox_error_done(&e);
        assert_int_equal(option_set_apply(OPTION_SET_SNAPSHOT, &so, "IncludeTmp",
                                          &(OptionValue) { .type = OPTION_BOOL, .b = true }, &e), 0);
        assert_true(so.include_tmp);
        assert_int_equal(option_set_apply(OPTION_SET_SNAPSHOT, &so, "IncludeTmp",
                                          &(OptionValue) { .type = OPTION_STRING, .s = "yes" }, &e), -EINVAL);
        sandbox_error_done(&e);
        assert_int_equal(option_set_apply(OPTION_SET_SNAPSHOT, &so, "Compression",
                                          &(OptionValue) { .type = OPTION_BOOL, .b = true }, &e), -EINVAL);
        sandbox_error_done(&e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_secret_bindings),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_quota),
                cmocka_unit_test(test_ids_and_actions),
                cmocka_unit_test(test_options),
                cmocka_unit_test(test_event_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
