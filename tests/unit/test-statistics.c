/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The statistics' pure parts (statistics.c): the exec latency histogram's buckets as
 * Prometheus has them (cumulative, upper bounds inclusive, +Inf as the count) and the
 * counters an exec's end moves. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "macro.h"
#include "statistics.h"

static void test_histogram_buckets(void **state) {
        static const double bounds[] = { 0.1, 1, 10 };
        Histogram h;

        histogram_init(&h, bounds, ELEMENTSOF(bounds));
        for (size_t i = 0; i < h.n; i++)
                assert_int_equal(histogram_cumulative(&h, i), 0);

        histogram_observe(&h, 0);       /* the first bucket */
        histogram_observe(&h, 0.1);     /* a bound is its own bucket's (le) */
        histogram_observe(&h, 0.1001);
        histogram_observe(&h, 1);
        histogram_observe(&h, 9.99);
        histogram_observe(&h, 11);      /* only in +Inf */
        histogram_observe(&h, 1e9);

        assert_int_equal(histogram_cumulative(&h, 0), 2);
        assert_int_equal(histogram_cumulative(&h, 1), 4);
        assert_int_equal(histogram_cumulative(&h, 2), 5);
        assert_int_equal(h.count, 7);
        assert_true(h.sum > 1e9 + 22.19 && h.sum < 1e9 + 22.2);
        /* Past the last bound: as the last. */
        assert_int_equal(histogram_cumulative(&h, 99), 5);
}

static void test_exec_done(void **state) {
        SandboxStatistics s;
        StatisticsCounter c[STATISTICS_N_COUNTERS];

        statistics_init(&s, 1234);
        assert_int_equal(s.exec_latency.n, STATISTICS_LATENCY_N_BOUNDS);
        for (size_t i = 1; i < s.exec_latency.n; i++)
                assert_true(s.exec_latency.bounds[i] > s.exec_latency.bounds[i - 1]);
        /* The longest exec (Timeout at most 3600 s) has a bucket of its own. */
        assert_true(s.exec_latency.bounds[s.exec_latency.n - 1] >= 3600);

        statistics_exec_done(&s, 2000, false, false);        /* 2 ms */
        statistics_exec_done(&s, 1500000, true, false);      /* 1.5 s, timed out */
        statistics_exec_done(&s, 30000, false, true);        /* 30 ms, OOM */
        assert_int_equal(s.execs, 3);
        assert_int_equal(s.exec_timeouts, 1);
        assert_int_equal(s.oom_kills, 1);
        assert_int_equal(s.exec_latency.count, 3);
        assert_true(s.exec_latency.sum > 1.5319 && s.exec_latency.sum < 1.5321);
        assert_int_equal(histogram_cumulative(&s.exec_latency, 0), 1);  /* ≤ 5 ms */
        assert_int_equal(histogram_cumulative(&s.exec_latency, 3), 2);  /* ≤ 50 ms */
        assert_int_equal(histogram_cumulative(&s.exec_latency, 8), 3);  /* ≤ 2.5 s */

        statistics_counters(&s, c);
        assert_string_equal(c[0].dbus, "StartedAt");
        assert_string_equal(c[0].varlink, "startedAt");
        assert_int_equal(c[0].value, 1234);
        assert_string_equal(c[4].varlink, "execs");
        assert_int_equal(c[4].value, 3);
        assert_string_equal(c[7].dbus, "OOMKills");
        assert_int_equal(c[7].value, 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_histogram_buckets),
                cmocka_unit_test(test_exec_done),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
