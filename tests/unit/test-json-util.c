/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The one strict JSON reader every face uses (varlink, HTTP, MCP): what json-c alone lets
 * through (json-c 0.16 with JSON_TOKENER_STRICT) is refused here, each with its reason. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json-util.h"

static int parse(const char *text, json_object **ret) {
        return json_parse_strict(text, strlen(text), 8, ret);
}

static void check(const char *text, int want) {
        json_object *o = NULL;
        int r = parse(text, &o);

        if (r != want)
                fail_msg("%s: %d, want %d", text, r, want);
        if (r == 0)
                json_object_put(o);
        else
                assert_null(o);
}

static void test_accepted(void **state) {
        _cleanup_json_ json_object *o = NULL;

        check("{}", 0);
        check(" [ ] ", 0);
        check("\"a\\u00e9\\n\"", 0);
        check("{\"a\": [1, -0, 0.5, 2.0, 1e3, -1.5E-3, true, false, null, \"x\"]}", 0);
        check("18446744073709551615", 0);                       /* UINT64_MAX */
        check("-9223372036854775808", 0);                       /* INT64_MIN */
        check("1e-400", 0);                                     /* underflows to 0: not altered in kind */
        check("{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}]}", 0);
        check("{\"a\": 1, \"A\": 2}", 0);
        /* A NUL in a string value is kept: byte strings may carry one. */
        assert_int_equal(parse("{\"s\": \"a\\u0000b\"}", &o), 0);
        assert_int_equal(json_object_get_string_len(json_object_object_get(o, "s")), 3);
}

static void test_syntax(void **state) {
        check("", -EBADMSG);
        check("{", -EBADMSG);
        check("{\"a\": 1} x", -EBADMSG);
        check("{\"a\": \"x\ty\"}", -EBADMSG);                  /* raw control characters */
        check("\"\x01\"", -EBADMSG);
        check("\"\n\"", -EBADMSG);
        check("NaN", -EBADMSG);
        check("{\"a\": NaN}", -EBADMSG);
        check("{\"a\": Infinity}", -EBADMSG);
        check("{\"a\": -Infinity}", -EBADMSG);
        check("1.", -EBADMSG);
        check(".5", -EBADMSG);
        check("01", -EBADMSG);
        check("+1", -EBADMSG);
        check("1e", -EBADMSG);
        check("[1,]", -EBADMSG);
        check("{\"a\":1,}", -EBADMSG);
        check("'a'", -EBADMSG);
        check("\"\\x41\"", -EBADMSG);
        check("\"\\u12\"", -EBADMSG);
        check("{\"a\\u0000b\": 1}", -EBADMSG);                 /* json-c would cut the key at the NUL */
        check("\"\xff\"", -EBADMSG);                           /* not UTF-8 */
        check("tru", -EBADMSG);
        check("nulls", -EBADMSG);
        /* A NUL inside the text, before its end. */
        assert_int_equal(json_parse_strict("{\"a\":\0}", 6, 8, &(json_object *) { NULL }), -EBADMSG);
}

static void test_range(void **state) {
        check("18446744073709551616", -ERANGE);                 /* json-c clamps it to …615 */
        check("{\"id\": 18446744073709551616}", -ERANGE);
        check("-9223372036854775809", -ERANGE);
        check("100000000000000000000000", -ERANGE);
        check("1e400", -ERANGE);                                /* +inf */
        check("-1e400", -ERANGE);
}

static void test_duplicates(void **state) {
        check("{\"a\": 1, \"a\": 2}", -ENOTUNIQ);
        check("{\"x\": {\"b\": 1, \"c\": [], \"b\": 3}}", -ENOTUNIQ);
        check("[{}, {\"a\": {\"b\": 1}, \"a\": 2}]", -ENOTUNIQ);
        check("{\"a\": 1, \"\\u0061\": 2}", -ENOTUNIQ);        /* the same key, spelled otherwise */
        check("{\"o\": {\"a\": 1, \"a\": 2}, \"o\": 5}", -ENOTUNIQ);
}

static void test_depth(void **state) {
        check("[[[[[[[[1]]]]]]]]", 0);                          /* 8 deep */
        check("[[[[[[[[[1]]]]]]]]]", -ELOOP);
        check("{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{}}}}}}}}}", -ELOOP);
        assert_string_equal(json_strict_strerror(-ENOTUNIQ), "a duplicate key");
}

static void test_string_get_clean(void **state) {
        _cleanup_json_ json_object *nul = json_object_new_string_len("a\0b", 3);
        _cleanup_json_ json_object *ok = json_object_new_string("ab"), *num = json_object_new_int(1);
        const char *s = NULL;

        assert_int_equal(json_string_get_clean(nul, &s), -EBADMSG);
        assert_null(s);
        assert_int_equal(json_string_get_clean(num, &s), -EINVAL);
        assert_int_equal(json_string_get_clean(ok, &s), 0);
        assert_string_equal(s, "ab");
}

static void test_find_nul(void **state) {
        static const char *const skip[] = { "stdin", NULL };
        _cleanup_json_ json_object *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        _cleanup_free_ char *pa = NULL, *pb = NULL, *pd = NULL;
        char *pc = NULL;

        assert_int_equal(parse("{\"argv\": [\"sh\", \"a\\u0000b\"]}", &a), 0);
        assert_int_equal(json_find_nul(a, skip, &pa), 1);
        assert_string_equal(pa, "argv[1]");
        assert_int_equal(parse("{\"x\": 1, \"env\": {\"A\": \"1\", \"B\": \"\\u0000\"}}", &b), 0);
        assert_int_equal(json_find_nul(b, skip, &pb), 1);
        assert_string_equal(pb, "env.B");
        assert_int_equal(parse("{\"stdin\": \"\\u0000\", \"code\": \"print(1)\"}", &c), 0);
        assert_int_equal(json_find_nul(c, skip, &pc), 0);   /* stdin's bytes may hold one */
        assert_null(pc);
        assert_int_equal(parse("{\"stdin\": \"\\u0000\", \"code\": \"print(1)\\u0000print(2)\"}", &d), 0);
        assert_int_equal(json_find_nul(d, skip, &pd), 1);
        assert_string_equal(pd, "code");
}

static void test_is_integer(void **state) {
        _cleanup_json_ json_object *two = NULL, *half = NULL, *big = NULL, *null = json_object_new_null();
        int64_t i = 0;

        assert_int_equal(parse("2.0", &two), 0);
        assert_true(json_is_integer(two, &i));
        assert_int_equal(i, 2);
        assert_int_equal(parse("0.5", &half), 0);
        assert_false(json_is_integer(half, &i));
        assert_int_equal(parse("1e19", &big), 0);          /* a double beyond int64 */
        assert_false(json_is_integer(big, &i));
        assert_false(json_is_integer(null, &i));
}

static void test_timeout_option(void **state) {
        static const struct {
                const char *text, *option;
                uint64_t value;
        } cases[] = {
                { "5", "Timeout", 5 },
                { "2.0", "Timeout", 2 },
                { "0.5", "TimeoutUSec", 500000 },
                { "4000", "Timeout", 4000 },            /* the core refuses it, naming 3600 */
                { "0.0000004", "TimeoutUSec", 0 },      /* the core refuses it, naming 1000 */
                { "1e300", "TimeoutUSec", UINT64_MAX },
        };

        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                _cleanup_json_ json_object *o = NULL;
                const char *option = NULL;
                uint64_t value = 1;

                assert_int_equal(parse(cases[k].text, &o), 0);
                assert_int_equal(json_timeout_option(o, &option, &value), 0);
                assert_string_equal(option, cases[k].option);
                assert_true(value == cases[k].value);
        }
        for (const char *const *bad = (const char *const[]) { "-1", "-0.5", "null", "\"5\"", "true", NULL }; *bad; bad++) {
                _cleanup_json_ json_object *o = NULL;
                const char *option = NULL;
                uint64_t value = 0;

                assert_int_equal(parse(*bad, &o), 0);
                assert_int_equal(json_timeout_option(o, &option, &value), -EINVAL);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accepted),
                cmocka_unit_test(test_syntax),
                cmocka_unit_test(test_range),
                cmocka_unit_test(test_duplicates),
                cmocka_unit_test(test_depth),
                cmocka_unit_test(test_string_get_clean),
                cmocka_unit_test(test_find_nul),
                cmocka_unit_test(test_is_integer),
                cmocka_unit_test(test_timeout_option),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
