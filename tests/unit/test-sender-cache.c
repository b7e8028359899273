/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sender-cache.h"

static void name_of(char *buf, size_t size, unsigned i) {
        snprintf(buf, size, ":1.%u", i);
}

static void test_get_put(void **state) {
        SenderCache c = {};
        uid_t uid = 4711;

        assert_false(sender_cache_get(&c, ":1.1", &uid));
        assert_int_equal(uid, 4711); /* untouched on a miss */
        sender_cache_put(&c, ":1.1", 1000);
        sender_cache_put(&c, ":1.2", 0);
        assert_true(sender_cache_get(&c, ":1.1", &uid));
        assert_int_equal(uid, 1000);
        assert_true(sender_cache_get(&c, ":1.2", &uid));
        assert_int_equal(uid, 0);
        assert_false(sender_cache_get(&c, ":1.3", &uid));
        assert_false(sender_cache_get(&c, ":1.", &uid));

        /* Put again: one entry, the newer uid (not that a unique name changes hands). */
        sender_cache_put(&c, ":1.1", 1001);
        assert_true(sender_cache_get(&c, ":1.1", &uid));
        assert_int_equal(uid, 1001);
        unsigned n = 0;
        for (size_t i = 0; i < SENDER_CACHE_SIZE; i++)
                n += c.entries[i].used > 0 && strcmp(c.entries[i].name, ":1.1") == 0;
        assert_int_equal(n, 1);
}

static void test_only_unique_names(void **state) {
        SenderCache c = {};
        char longname[SENDER_NAME_MAX + 2];
        uid_t uid;

        /* A well-known name may change owners: never cached. */
        sender_cache_put(&c, "org.example.Foo", 0);
        assert_false(sender_cache_get(&c, "org.example.Foo", &uid));
        sender_cache_put(&c, NULL, 0);
        assert_false(sender_cache_get(&c, NULL, &uid));

        memset(longname, 'x', sizeof(longname) - 1);
        longname[0] = ':';
        longname[sizeof(longname) - 1] = 0;
        sender_cache_put(&c, longname, 0);
        assert_false(sender_cache_get(&c, longname, &uid));
        longname[SENDER_NAME_MAX] = 0; /* the longest that fits */
        sender_cache_put(&c, longname, 7);
        assert_true(sender_cache_get(&c, longname, &uid));
        assert_int_equal(uid, 7);
}

static void test_bounded_lru(void **state) {
        SenderCache c = {};
        char name[32];
        uid_t uid;

        for (unsigned i = 0; i < SENDER_CACHE_SIZE; i++) {
                name_of(name, sizeof(name), i);
                sender_cache_put(&c, name, 1000 + i);
        }
        /* Full: every one is there. Using :1.0 makes :1.1 the least recently used. */
        for (unsigned i = 0; i < SENDER_CACHE_SIZE; i++) {
                name_of(name, sizeof(name), i);
                assert_true(sender_cache_get(&c, name, &uid));
                assert_int_equal(uid, 1000 + i);
        }
        assert_true(sender_cache_get(&c, ":1.0", &uid));

        sender_cache_put(&c, ":1.1000", 5);
        assert_false(sender_cache_get(&c, ":1.1", &uid));
        assert_true(sender_cache_get(&c, ":1.0", &uid));
        assert_int_equal(uid, 1000);
        assert_true(sender_cache_get(&c, ":1.1000", &uid));
        assert_int_equal(uid, 5);

        /* Many more names than places: the cache stays within its bound and keeps the newest. */
        for (unsigned i = 2000; i < 2000 + 10 * SENDER_CACHE_SIZE; i++) {
                name_of(name, sizeof(name), i);
                sender_cache_put(&c, name, i);
        }
        for (unsigned i = 2000 + 9 * SENDER_CACHE_SIZE; i < 2000 + 10 * SENDER_CACHE_SIZE; i++) {
                name_of(name, sizeof(name), i);
                assert_true(sender_cache_get(&c, name, &uid));
                assert_int_equal(uid, i);
        }
        assert_false(sender_cache_get(&c, ":1.0", &uid));
        assert_false(sender_cache_get(&c, ":1.2000", &uid));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_get_put),
                cmocka_unit_test(test_only_unique_names),
                cmocka_unit_test(test_bounded_lru),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
