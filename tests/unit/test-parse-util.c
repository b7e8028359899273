/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "parse-util.h"

#define SENTINEL UINT64_C(0xdeadbeefdeadbeef)

typedef int (*parse_func_t)(const char *s, uint64_t *ret);

static void check_ok(parse_func_t f, const char *s, uint64_t expected) {
        uint64_t v = SENTINEL;
        int r;

        r = f(s, &v);
        if (r != 0 || v != expected) {
                print_error("\"%s\": got %i and %" PRIu64 ", expected 0 and %" PRIu64 "\n",
                            s, r, v, expected);
                fail();
        }
}

static void check_fail(parse_func_t f, const char *s, int expected) {
        uint64_t v = SENTINEL;
        int r;

        r = f(s, &v);
        /* Output parameters are left alone on failure. */
        if (r != expected || v != SENTINEL) {
                print_error("\"%s\": got %i and %" PRIu64 ", expected %i and no value\n",
                            s ?: "(null)", r, v, expected);
                fail();
        }
}

static void test_parse_uint64(void **state) {
        check_ok(parse_uint64, "0", 0);
        check_ok(parse_uint64, "42", 42);
        check_ok(parse_uint64, "007", 7);
        check_ok(parse_uint64, "18446744073709551615", UINT64_MAX);

        check_fail(parse_uint64, "18446744073709551616", -ERANGE);
        check_fail(parse_uint64, "99999999999999999999999999", -ERANGE);
        /* Garbage wins over range. */
        check_fail(parse_uint64, "99999999999999999999999999x", -EINVAL);

        check_fail(parse_uint64, NULL, -EINVAL);
        check_fail(parse_uint64, "", -EINVAL);
        check_fail(parse_uint64, "-1", -EINVAL);
        check_fail(parse_uint64, "-0", -EINVAL);
        check_fail(parse_uint64, "+1", -EINVAL);
        check_fail(parse_uint64, " 1", -EINVAL);
        check_fail(parse_uint64, "1 ", -EINVAL);
        check_fail(parse_uint64, "0x10", -EINVAL);
        check_fail(parse_uint64, "1.0", -EINVAL);
        check_fail(parse_uint64, "1e3", -EINVAL);
        check_fail(parse_uint64, "abc", -EINVAL);
}

static void test_parse_size(void **state) {
        check_ok(parse_size, "0", 0);
        check_ok(parse_size, "1", 1);
        check_ok(parse_size, "256", 256);
        check_ok(parse_size, "1B", 1);
        check_ok(parse_size, "0K", 0);
        check_ok(parse_size, "1K", 1024);
        check_ok(parse_size, "256M", UINT64_C(268435456));
        check_ok(parse_size, "256MB", UINT64_C(268435456));
        check_ok(parse_size, "256MiB", UINT64_C(268435456));
        check_ok(parse_size, "256m", UINT64_C(268435456));
        check_ok(parse_size, "1kib", 1024);
        check_ok(parse_size, "1G", UINT64_C(1073741824));
        check_ok(parse_size, "1T", UINT64_C(1099511627776));

        /* Fractions, rounded down to a whole byte. */
        check_ok(parse_size, "1.5G", UINT64_C(1610612736));
        check_ok(parse_size, "0.5K", 512);
        check_ok(parse_size, "0.1K", 102);
        check_ok(parse_size, "1.25M", UINT64_C(1310720));
        check_ok(parse_size, "1.0M", UINT64_C(1048576));
        check_ok(parse_size, "0.000000001T", 1099);
        check_ok(parse_size, "16777215.999999999T", UINT64_C(18446744073709550516));

        /* Boundaries. */
        check_ok(parse_size, "18446744073709551615", UINT64_MAX);
        check_ok(parse_size, "18446744073709551615B", UINT64_MAX);
        check_ok(parse_size, "16777215T", UINT64_C(16777215) << 40);
        check_ok(parse_size, "17179869183G", UINT64_C(17179869183) << 30);
        check_fail(parse_size, "18446744073709551616", -ERANGE);
        check_fail(parse_size, "16777216T", -ERANGE);
        check_fail(parse_size, "17179869184G", -ERANGE);
        check_fail(parse_size, "99999999999999999999999T", -ERANGE);

        /* Negative, empty, garbage. */
        check_fail(parse_size, NULL, -EINVAL);
        check_fail(parse_size, "", -EINVAL);
        check_fail(parse_size, "-1", -EINVAL);
        check_fail(parse_size, "-1M", -EINVAL);
        check_fail(parse_size, "M", -EINVAL);
        check_fail(parse_size, "B", -EINVAL);
        check_fail(parse_size, "1X", -EINVAL);
        check_fail(parse_size, "1P", -EINVAL);
        check_fail(parse_size, "1 M", -EINVAL);
        check_fail(parse_size, " 1M", -EINVAL);
        check_fail(parse_size, "1M ", -EINVAL);
        check_fail(parse_size, "1MBB", -EINVAL);
        check_fail(parse_size, "1iB", -EINVAL);
        check_fail(parse_size, "1e3", -EINVAL);
        check_fail(parse_size, "0x10", -EINVAL);
        check_fail(parse_size, "99999999999999999999999X", -EINVAL);

        /* Malformed fractions, and fractions of a byte. */
        check_fail(parse_size, "1.5", -EINVAL);
        check_fail(parse_size, "1.5B", -EINVAL);
        check_fail(parse_size, ".5G", -EINVAL);
        check_fail(parse_size, "1.G", -EINVAL);
        check_fail(parse_size, "1..5G", -EINVAL);
        check_fail(parse_size, "1.5.5G", -EINVAL);
        check_fail(parse_size, "1,5G", -EINVAL);
        check_fail(parse_size, "1.0000000001G", -EINVAL);
}

static void test_parse_cpu_quota(void **state) {
        check_ok(parse_cpu_quota, "50%", 500000);
        check_ok(parse_cpu_quota, "100%", 1000000);
        check_ok(parse_cpu_quota, "200%", 2000000);
        check_ok(parse_cpu_quota, "1%", 10000);
        check_ok(parse_cpu_quota, "12.5%", 125000);
        check_ok(parse_cpu_quota, "0.0001%", 1);
        check_ok(parse_cpu_quota, "0.5%", 5000);
        check_ok(parse_cpu_quota, "1844674407370955%", UINT64_C(18446744073709550000));
        check_ok(parse_cpu_quota, "1844674407370955.1615%", UINT64_MAX);

        check_fail(parse_cpu_quota, "0%", -ERANGE);
        check_fail(parse_cpu_quota, "0.0000%", -ERANGE);
        check_fail(parse_cpu_quota, "1844674407370956%", -ERANGE);
        check_fail(parse_cpu_quota, "1844674407370955.1616%", -ERANGE);
        check_fail(parse_cpu_quota, "1844674407370955.9999%", -ERANGE);
        check_fail(parse_cpu_quota, "99999999999999999999999%", -ERANGE);

        check_fail(parse_cpu_quota, NULL, -EINVAL);
        check_fail(parse_cpu_quota, "", -EINVAL);
        check_fail(parse_cpu_quota, "%", -EINVAL);
        check_fail(parse_cpu_quota, "-50%", -EINVAL);
        check_fail(parse_cpu_quota, "50", -EINVAL);
        check_fail(parse_cpu_quota, "50%%", -EINVAL);
        check_fail(parse_cpu_quota, "50 %", -EINVAL);
        check_fail(parse_cpu_quota, "abc%", -EINVAL);
        check_fail(parse_cpu_quota, ".5%", -EINVAL);
        check_fail(parse_cpu_quota, "5.%", -EINVAL);
        check_fail(parse_cpu_quota, "0.00001%", -EINVAL);
        check_fail(parse_cpu_quota, "99999999999999999999999x%", -EINVAL);
}

static void test_parse_seconds(void **state) {
        check_ok(parse_seconds, "0", 0);
        check_ok(parse_seconds, "30", 30);
        check_ok(parse_seconds, "30s", 30);
        check_ok(parse_seconds, "30sec", 30);
        check_ok(parse_seconds, "5m", 300);
        check_ok(parse_seconds, "5min", 300);
        check_ok(parse_seconds, "2h", 7200);
        check_ok(parse_seconds, "1d", 86400);
        check_ok(parse_seconds, "18446744073709551615", UINT64_MAX);
        check_ok(parse_seconds, "18446744073709551615s", UINT64_MAX);
        check_ok(parse_seconds, "213503982334601d", UINT64_C(18446744073709526400));

        check_fail(parse_seconds, "18446744073709551616", -ERANGE);
        check_fail(parse_seconds, "213503982334602d", -ERANGE);
        check_fail(parse_seconds, "307445734561825861min", -ERANGE);

        check_fail(parse_seconds, NULL, -EINVAL);
        check_fail(parse_seconds, "", -EINVAL);
        check_fail(parse_seconds, "-1", -EINVAL);
        check_fail(parse_seconds, "1.5", -EINVAL);
        check_fail(parse_seconds, "5 min", -EINVAL);
        check_fail(parse_seconds, "5ms", -EINVAL);
        check_fail(parse_seconds, "5mins", -EINVAL);
        check_fail(parse_seconds, "h", -EINVAL);
        check_fail(parse_seconds, "1w", -EINVAL);
        check_fail(parse_seconds, "abc", -EINVAL);
}

static void check_format_bytes(uint64_t t, const char *expected) {
        char buf[FORMAT_BYTES_MAX];

        assert_non_null(format_bytes(buf, sizeof(buf), t));
        assert_string_equal(buf, expected);
}

static void test_format_bytes(void **state) {
        char small[4];

        check_format_bytes(0, "0B");
        check_format_bytes(1, "1B");
        check_format_bytes(1023, "1023B");
        check_format_bytes(1024, "1.0K");
        check_format_bytes(1536, "1.5K");
        /* Rounded down: never "1024.0K". */
        check_format_bytes(UINT64_C(1048575), "1023.9K");
        check_format_bytes(UINT64_C(1048576), "1.0M");
        check_format_bytes(UINT64_C(268435456), "256.0M");
        check_format_bytes(UINT64_C(1610612736), "1.5G");
        check_format_bytes(UINT64_C(1099511627776), "1.0T");
        check_format_bytes(UINT64_C(1) << 50, "1.0P");
        check_format_bytes(UINT64_C(1) << 60, "1.0E");
        check_format_bytes(UINT64_MAX, "15.9E");

        assert_null(format_bytes(small, sizeof(small), 1024));
        assert_non_null(format_bytes(small, sizeof(small), 99));
        assert_string_equal(small, "99B");
        assert_null(format_bytes(small, sizeof(small), 100));
}

static void check_format_cpu_quota(uint64_t v, const char *expected) {
        char buf[FORMAT_CPU_QUOTA_MAX];

        assert_non_null(format_cpu_quota(buf, sizeof(buf), v));
        assert_string_equal(buf, expected);
}

static void test_format_cpu_quota(void **state) {
        char small[3];

        check_format_cpu_quota(500000, "50%");
        check_format_cpu_quota(1000000, "100%");
        check_format_cpu_quota(2000000, "200%");
        check_format_cpu_quota(125000, "12.5%");
        check_format_cpu_quota(1234567, "123.4567%");
        check_format_cpu_quota(10, "0.001%");
        check_format_cpu_quota(1, "0.0001%");
        check_format_cpu_quota(0, "0%");
        check_format_cpu_quota(UINT64_MAX, "1844674407370955.1615%");

        assert_null(format_cpu_quota(small, sizeof(small), 500000));
}

static void test_parse_format_roundtrip(void **state) {
        static const char *const quotas[] = { "1%", "12.5%", "50%", "200%", "0.0001%", "123.4567%" };

        for (size_t i = 0; i < ELEMENTSOF(quotas); i++) {
                char buf[FORMAT_CPU_QUOTA_MAX];
                uint64_t v;

                assert_int_equal(parse_cpu_quota(quotas[i], &v), 0);
                assert_non_null(format_cpu_quota(buf, sizeof(buf), v));
                assert_string_equal(buf, quotas[i]);
        }
}

#define FFFD "\xEF\xBF\xBD"

static void check_utf8(const char *in, size_t in_size, const char *expected, size_t expected_size) {
        _cleanup_free_ char *out = NULL;
        size_t out_size = SIZE_MAX;
        bool valid = in_size == expected_size && memcmp(in, expected, in_size) == 0;

        assert_int_equal(utf8_sanitize(in, in_size, &out, &out_size), 0);
        assert_non_null(out);
        assert_int_equal(out_size, expected_size);
        assert_memory_equal(out, expected, expected_size);
        assert_int_equal(out[out_size], '\0');

        /* Valid input passes through unchanged; the output is always valid. */
        assert_int_equal(utf8_is_valid_n(in, in_size), valid);
        assert_true(utf8_is_valid_n(out, out_size));
}

#define CHECK_UTF8(in, expected) check_utf8((in), sizeof(in) - 1, (expected), sizeof(expected) - 1)

static void test_utf8_valid(void **state) {
        CHECK_UTF8("", "");
        CHECK_UTF8("hello, world\n", "hello, world\n");
        CHECK_UTF8("\x7F", "\x7F");
        CHECK_UTF8("\xC2\x80", "\xC2\x80");                       /* U+0080, first 2-byte */
        CHECK_UTF8("\xC3\xA9", "\xC3\xA9");                       /* é */
        CHECK_UTF8("\xDF\xBF", "\xDF\xBF");                       /* U+07FF */
        CHECK_UTF8("\xE0\xA0\x80", "\xE0\xA0\x80");               /* U+0800, first 3-byte */
        CHECK_UTF8("\xE2\x82\xAC", "\xE2\x82\xAC");               /* € */
        CHECK_UTF8("\xED\x9F\xBF", "\xED\x9F\xBF");               /* U+D7FF, below surrogates */
        CHECK_UTF8("\xEE\x80\x80", "\xEE\x80\x80");               /* U+E000, above surrogates */
        CHECK_UTF8("\xEF\xBF\xBF", "\xEF\xBF\xBF");               /* U+FFFF */
        CHECK_UTF8(FFFD, FFFD);
        CHECK_UTF8("\xF0\x90\x80\x80", "\xF0\x90\x80\x80");       /* U+10000, first 4-byte */
        CHECK_UTF8("\xF0\x9D\x84\x9E", "\xF0\x9D\x84\x9E");       /* 𝄞 */
        CHECK_UTF8("\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF");       /* U+10FFFF, the last */

        /* NUL is a character like any other; it must survive. */
        CHECK_UTF8("a\0b", "a\0b");
        CHECK_UTF8("\0", "\0");
}

static void test_utf8_invalid(void **state) {
        /* Stray continuation bytes and bytes that never appear. */
        CHECK_UTF8("\x80", FFFD);
        CHECK_UTF8("\xBF", FFFD);
        CHECK_UTF8("a\x80\x80z", "a" FFFD FFFD "z");
        CHECK_UTF8("\xFE", FFFD);
        CHECK_UTF8("\xFF", FFFD);
        CHECK_UTF8("\xF5\x80\x80\x80", FFFD FFFD FFFD FFFD);     /* lead beyond U+10FFFF */
        CHECK_UTF8("\xF8\x88\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD); /* old 5-byte form */

        /* A continuation byte missing in the middle: the subpart, then what follows. */
        CHECK_UTF8("\xE2\x82" "A", FFFD "A");
        CHECK_UTF8("\xF0\x9D" "A", FFFD "A");
        CHECK_UTF8("\xC3" "A", FFFD "A");
        CHECK_UTF8("\xE2" "\xE2\x82\xAC", FFFD "\xE2\x82\xAC");
}

static void test_utf8_overlong(void **state) {
        CHECK_UTF8("\xC0\x80", FFFD FFFD);                        /* NUL as 2 bytes */
        CHECK_UTF8("\xC0\xAF", FFFD FFFD);                        /* '/' as 2 bytes */
        CHECK_UTF8("\xC1\xBF", FFFD FFFD);
        CHECK_UTF8("\xE0\x80\x80", FFFD FFFD FFFD);
        CHECK_UTF8("\xE0\x80\xAF", FFFD FFFD FFFD);
        CHECK_UTF8("\xE0\x9F\xBF", FFFD FFFD FFFD);               /* U+07FF as 3 bytes */
        CHECK_UTF8("\xF0\x80\x80\x80", FFFD FFFD FFFD FFFD);
        CHECK_UTF8("\xF0\x8F\xBF\xBF", FFFD FFFD FFFD FFFD);      /* U+FFFF as 4 bytes */
}

static void test_utf8_surrogates(void **state) {
        CHECK_UTF8("\xED\xA0\x80", FFFD FFFD FFFD);               /* U+D800 */
        CHECK_UTF8("\xED\xAD\xBF", FFFD FFFD FFFD);               /* U+DB7F */
        CHECK_UTF8("\xED\xB0\x80", FFFD FFFD FFFD);               /* U+DC00 */
        CHECK_UTF8("\xED\xBF\xBF", FFFD FFFD FFFD);               /* U+DFFF */
        /* A CESU-8 style pair, U+1D11E. */
        CHECK_UTF8("\xED\xA0\xB4\xED\xB4\x9E", FFFD FFFD FFFD FFFD FFFD FFFD);
        /* Beyond U+10FFFF. */
        CHECK_UTF8("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD);
}

static void test_utf8_truncated(void **state) {
        CHECK_UTF8("\xC3", FFFD);
        CHECK_UTF8("\xE2", FFFD);
        CHECK_UTF8("\xE2\x82", FFFD);
        CHECK_UTF8("\xF0", FFFD);
        CHECK_UTF8("\xF0\x9D", FFFD);
        CHECK_UTF8("\xF0\x9D\x84", FFFD);
        CHECK_UTF8("ok\xF0\x9D\x84", "ok" FFFD);
        /* A truncated surrogate lead stops at the bad second byte. */
        CHECK_UTF8("\xED\xA0", FFFD FFFD);
}

static void test_utf8_unicode_table_3_8(void **state) {
        /* The example of Unicode 15, §3.9, table 3-8 (maximal subparts). */
        CHECK_UTF8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
                   "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
}

static void test_utf8_sanitize_large(void **state) {
        _cleanup_free_ char *in = NULL, *out = NULL;
        size_t n = 3 * 1024 * 1024, out_size;

        /* Worst case: every byte replaced, output three times the input. */
        in = malloc(n);
        assert_non_null(in);
        memset(in, 0xFF, n);

        assert_int_equal(utf8_sanitize(in, n, &out, &out_size), 0);
        assert_int_equal(out_size, 3 * n);
        for (size_t i = 0; i < n; i++)
                assert_memory_equal(out + 3 * i, FFFD, 3);
        assert_true(utf8_is_valid_n(out, out_size));
        assert_false(utf8_is_valid_n(in, n));
}

static void test_utf8_escape_invalid(void **state) {
        static const struct { const char *in, *out; } t[] = {
                { "plain", "plain" },
                { "", "" },
                { "a\\b", "a\\b" },                          /* backslashes are kept */
                { "caf\xc3\xa9", "caf\xc3\xa9" },                /* valid UTF-8 is kept */
                { "bad\xff\xc0name", "bad\\xff\\xc0name" },
                { "\xe2\x82", "\\xe2\\x82" },                  /* a truncated sequence */
                { "\xed\xa0\x80", "\\xed\\xa0\\x80" },         /* a surrogate */
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_free_ char *e = utf8_escape_invalid(t[i].in);
                assert_non_null(e);
                assert_string_equal(e, t[i].out);
                assert_true(utf8_is_valid_n(e, strlen(e)));
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_uint64),
                cmocka_unit_test(test_parse_size),
                cmocka_unit_test(test_parse_cpu_quota),
                cmocka_unit_test(test_parse_seconds),
                cmocka_unit_test(test_format_bytes),
                cmocka_unit_test(test_format_cpu_quota),
                cmocka_unit_test(test_parse_format_roundtrip),
                cmocka_unit_test(test_utf8_valid),
                cmocka_unit_test(test_utf8_invalid),
                cmocka_unit_test(test_utf8_overlong),
                cmocka_unit_test(test_utf8_surrogates),
                cmocka_unit_test(test_utf8_truncated),
                cmocka_unit_test(test_utf8_unicode_table_3_8),
                cmocka_unit_test(test_utf8_sanitize_large),
                cmocka_unit_test(test_utf8_escape_invalid),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
