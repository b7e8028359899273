/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Labels (labels.h): Kubernetes' key syntax, free-text values, the bounds, the errors a
 * caller is told, sorting, selectors, and Labels/Label through the option tables of every
 * face (D-Bus and JSON decode into the same OptionValue). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json-util.h"
#include "labels.h"
#include "options.h"
#include "strv.h"

static void test_keys(void **state) {
        char key[400];

        assert_true(label_key_is_valid("team"));
        assert_true(label_key_is_valid("a"));
        assert_true(label_key_is_valid("app.kubernetes.io/name"));
        assert_true(label_key_is_valid("example.com/Run_ID-2"));
        assert_true(label_key_is_valid("e2b-user.v1"));

        assert_false(label_key_is_valid(""));
        assert_false(label_key_is_valid("-team"));          /* a name begins with a letter or digit */
        assert_false(label_key_is_valid("team_"));          /* and ends with one */
        assert_false(label_key_is_valid("te am"));
        assert_false(label_key_is_valid("team=x"));
        assert_false(label_key_is_valid("/name"));          /* an empty prefix */
        assert_false(label_key_is_valid("Example.com/name")); /* a prefix is lowercase */
        assert_false(label_key_is_valid("a..b/name"));
        assert_false(label_key_is_valid("-a.b/name"));
        assert_false(label_key_is_valid("a.b-/name"));
        assert_false(label_key_is_valid("a/b/c"));
        assert_false(label_key_is_valid("ü"));

        /* A name of 63, not 64; a prefix of 253, not 254. */
        memset(key, 'n', 63);
        key[63] = 0;
        assert_true(label_key_is_valid(key));
        memset(key, 'n', 64);
        key[64] = 0;
        assert_false(label_key_is_valid(key));
        memset(key, 'p', 253);
        strcpy(key + 253, "/n");
        assert_true(label_key_is_valid(key));
        memset(key, 'p', 254);
        strcpy(key + 254, "/n");
        assert_false(label_key_is_valid(key));
}

static void test_values(void **state) {
        char value[300];

        assert_true(label_value_is_valid(""));
        assert_true(label_value_is_valid("ml team, run #4 = ok"));
        assert_true(label_value_is_valid("naïve ☃"));
        assert_false(label_value_is_valid("a\nb"));
        assert_false(label_value_is_valid("a\tb"));
        assert_false(label_value_is_valid("\x7f"));
        assert_false(label_value_is_valid("\xc3"));          /* not UTF-8 */
        memset(value, 'v', 256);
        value[256] = 0;
        assert_true(label_value_is_valid(value));
        value[256] = 'v';
        value[257] = 0;
        assert_false(label_value_is_valid(value));
}

static void expect_refused(char **pairs, const char *fragment) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        char **l = NULL;

        assert_int_equal(labels_from_pairs(pairs, &l, &e), -EINVAL);
        assert_null(l);
        assert_int_equal(e.code, SANDBOX_ERR_INVALID_OPTION);
        if (!strstr(e.message, fragment))
                fail_msg("'%s' does not say '%s'", e.message, fragment);
}

static void test_from_pairs(void **state) {
        _cleanup_strv_free_ char **l = NULL;
        char *many[2 * (SANDBOX_LABELS_MAX + 1) + 1] = {};
        char keys[SANDBOX_LABELS_MAX + 1][8];

        assert_int_equal(labels_from_pairs((char *[]) { "zeta", "1", "alpha", "", "mid/x", "a b", NULL }, &l, NULL), 0);
        assert_int_equal(strv_length(l), 3);
        assert_string_equal(l[0], "alpha=");
        assert_string_equal(l[1], "mid/x=a b");
        assert_string_equal(l[2], "zeta=1");
        assert_string_equal(labels_get(l, "zeta"), "1");
        assert_string_equal(labels_get(l, "alpha"), "");
        assert_null(labels_get(l, "alph"));

        expect_refused((char *[]) { "bad key", "v", NULL }, "is not a label key");
        expect_refused((char *[]) { "k", "a\nb", NULL }, "without control characters");
        expect_refused((char *[]) { "k", "1", "k", "2", NULL }, "given twice");
        for (unsigned i = 0; i <= SANDBOX_LABELS_MAX; i++) {
                snprintf(keys[i], sizeof(keys[i]), "k%u", i);
                many[2 * i] = keys[i];
                many[2 * i + 1] = "v";
        }
        expect_refused(many, "at most 64 labels");

        /* 64 values of 256 bytes: more than the bytes of all labels together. */
        char big[257];
        memset(big, 'b', 256);
        big[256] = 0;
        for (unsigned i = 0; i < SANDBOX_LABELS_MAX; i++)
                many[2 * i + 1] = big;
        many[2 * SANDBOX_LABELS_MAX] = NULL;
        expect_refused(many, "bytes in all");
}

static void test_selectors(void **state) {
        _cleanup_strv_free_ char **l = NULL;

        assert_int_equal(labels_from_pairs((char *[]) { "team", "ml", "env", "dev x", NULL }, &l, NULL), 0);
        assert_true(labels_match(l, NULL));
        assert_true(labels_match(l, (char *[]) { "team=ml", NULL }));
        assert_true(labels_match(l, (char *[]) { "team=ml", "env=dev x", NULL }));
        assert_true(labels_match(l, (char *[]) { "env", NULL }));
        assert_false(labels_match(l, (char *[]) { "team=m", NULL }));
        assert_false(labels_match(l, (char *[]) { "tea=ml", NULL }));
        assert_false(labels_match(l, (char *[]) { "team=ml", "owner", NULL }));
        assert_false(labels_match(NULL, (char *[]) { "team", NULL }));
        assert_true(labels_match(NULL, NULL));

        assert_int_equal(label_selector_check("team=ml", NULL), 0);
        assert_int_equal(label_selector_check("team", NULL), 0);
        assert_int_equal(label_selector_check("team=", NULL), 0);
        assert_int_equal(label_selector_check("=ml", NULL), -EINVAL);
        assert_int_equal(label_selector_check("bad key=1", NULL), -EINVAL);
}

static void test_json_and_format(void **state) {
        _cleanup_strv_free_ char **l = NULL, **back = NULL;
        _cleanup_json_ json_object *o = NULL, *bad = NULL;
        _cleanup_free_ char *text = NULL;

        assert_int_equal(labels_from_pairs((char *[]) { "b", "two words", "a", "1", NULL }, &l, NULL), 0);
        o = labels_to_json(l);
        assert_non_null(o);
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "{\"a\":\"1\",\"b\":\"two words\"}");
        assert_int_equal(labels_from_json(o, &back, NULL), 0);
        assert_int_equal(strv_length(back), 2);
        assert_string_equal(back[1], "b=two words");

        bad = json_tokener_parse("{\"a\": 1}");
        assert_int_equal(labels_from_json(bad, &back, NULL), -EINVAL);

        assert_int_equal(labels_format(l, &text), 0);
        assert_string_equal(text, "a=1 b=\"two words\"");
        free(text);
        assert_int_equal(labels_format(NULL, &text), 0);
        assert_string_equal(text, "");
}

/* Labels through the option table, as a D-Bus a{ss} or a JSON object decodes; Label
 * through ListSandboxes' filter. */
static void test_options(void **state) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_(sandbox_config_done) SandboxConfig c = {}, copy = {};
        _cleanup_json_ json_object *o = NULL;
        SandboxListQuery q = SANDBOX_LIST_QUERY_INIT;
        OptionValue v = { .type = OPTION_STRMAP, .strv = (char *[]) { "team", "ml", NULL } };

        assert_int_equal(option_set_lookup(OPTION_SET_SANDBOX, "Labels"), OPTION_STRMAP);
        assert_string_equal(sandbox_option_from_snake("labels"), "Labels");
        assert_int_equal(sandbox_config_set(&c, "Labels", &v, &e), 0);
        assert_string_equal(c.labels[0], "team=ml");
        assert_int_equal(sandbox_config_copy(&copy, &c), 0);
        assert_ptr_not_equal(copy.labels, c.labels);
        assert_string_equal(copy.labels[0], "team=ml");

        /* The wrong type is named as such. */
        v = (OptionValue) { .type = OPTION_STRV, .strv = (char *[]) { "team=ml", NULL } };
        assert_int_equal(sandbox_config_set(&c, "Labels", &v, &e), -EINVAL);
        assert_non_null(strstr(e.message, "string map"));
        sandbox_error_done(&e);

        o = json_tokener_parse("{\"Labels\": {\"env\": \"dev\", \"a.b/c\": \"\"}}");
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), 0);
        assert_int_equal(strv_length(c.labels), 2);
        assert_string_equal(c.labels[0], "a.b/c=");
        json_object_put(o);
        o = json_tokener_parse("{\"Labels\": {\"env\": [1]}}");
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), -EINVAL);
        assert_non_null(strstr(e.message, "must be a string"));
        sandbox_error_done(&e);
        json_object_put(o);

        o = json_tokener_parse("{\"Label\": [\"env=dev\", \"team\"]}");
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX_LIST, &q, NULL, 0, &e), 0);
        assert_int_equal(strv_length(q.labels), 2);
        json_object_put(o);
        o = json_tokener_parse("{\"Label\": [\"not a key=1\"]}");
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX_LIST, &q, NULL, 0, &e), -EINVAL);
        assert_non_null(strstr(e.message, "no selector"));
        sandbox_list_query_done(&q);
        assert_null(q.labels);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_keys),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_from_pairs),
                cmocka_unit_test(test_selectors),
                cmocka_unit_test(test_json_and_format),
                cmocka_unit_test(test_options),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
