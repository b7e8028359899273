/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Many tenants on one node (quota.h): the node's ceilings from the host, the admin's maxima
 * and defaults, the quota of an owner or tenant, the creates-per-second bucket. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "manager.h"
#include "quota.h"

#define GiB (1024ULL * 1024 * 1024)
#define KiB 1024ULL
#define MiB (1024ULL * 1024)

static void test_node_ceiling(void **state) {
        const HostResources host = { .memory_total = 24 * GiB, .pid_max = 32768 };
        NodeCeiling c = {};
        char why[256];

        /* Computed: an eighth of the memory and of the PIDs kept, a weight below system.slice's. */
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), 0);
        assert_int_equal(c.memory_max, 21 * GiB);
        assert_int_equal(c.tasks_max, 28672);
        assert_int_equal(c.cpu_weight, NODE_CPU_WEIGHT_DEFAULT);
        assert_true(c.cpu_weight < NODE_CPU_WEIGHT_SYSTEM);

        /* A small host keeps at least 1 GiB. */
        c = (NodeCeiling) {};
        assert_int_equal(node_ceiling_resolve(&c, &(HostResources) { .memory_total = 4 * GiB, .pid_max = 4096 },
                                              why, sizeof(why)), 0);
        assert_int_equal(c.memory_max, 3 * GiB);
        assert_int_equal(c.tasks_max, 3072);

        /* Set by the admin: taken as they are, if the host can honour them. */
        c = (NodeCeiling) { .memory_max = 8 * GiB, .tasks_max = 10000, .cpu_weight = 20 };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), 0);
        assert_int_equal(c.memory_max, 8 * GiB);
        assert_int_equal(c.tasks_max, 10000);
        assert_int_equal(c.cpu_weight, 20);

        /* What the host cannot honour is refused, with the reason. */
        c = (NodeCeiling) { .memory_max = 24 * GiB };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), -ERANGE);
        assert_non_null(strstr(why, "MemoryMax="));
        c = (NodeCeiling) { .tasks_max = 32000 };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), -ERANGE);
        assert_non_null(strstr(why, "TasksMax="));
        c = (NodeCeiling) { .cpu_weight = 100 };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), -ERANGE);
        assert_non_null(strstr(why, "CPUWeight="));
        c = (NodeCeiling) { .memory_reserve = 24 * GiB };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), -ERANGE);
        c = (NodeCeiling) { .tasks_reserve = 40000 };
        assert_int_equal(node_ceiling_resolve(&c, &host, why, sizeof(why)), -ERANGE);
}

static void test_limits(void **state) {
        const LimitSettings conf = {
                .max = { .memory_max = 2 * GiB, .tasks_max = 512 },
                .def = { .memory_max = 256 * MiB },
                .disk_max = 4 * GiB,
                .timeout_max = 3600,
                .output_max = 1 * MiB,
        };
        const LimitSettings tmpl = { .max = { .memory_max = 1 * GiB, .cpu_quota_per_sec_usec = 500000 },
                                     .timeout_default = 600 };
        SandboxError e = SANDBOX_ERROR_NULL;
        LimitSettings l;
        SandboxConfig c = {};
        ExecConfig x;

        /* The stricter of the two maxima; the template's default over the admin's. */
        limit_settings_merge(&l, &conf, &tmpl);
        assert_int_equal(l.max.memory_max, 1 * GiB);
        assert_int_equal(l.max.tasks_max, 512);
        assert_int_equal(l.max.cpu_quota_per_sec_usec, 500000);
        assert_int_equal(l.def.memory_max, 256 * MiB);
        assert_int_equal(l.timeout_default, 600);

        /* Defaults for what was not asked. */
        assert_int_equal(limit_settings_check_sandbox(&l, &c, "here", &e), 0);
        assert_int_equal(c.limits.memory_max, 256 * MiB);
        assert_int_equal(c.timeout_sec, 600);

        /* Beyond a maximum: InvalidOption saying the maximum and where it is set. */
        c = (SandboxConfig) { .limits.memory_max = 20 * GiB };
        assert_int_equal(limit_settings_check_sandbox(&l, &c, "sandboxd.conf [Limits]", &e), -EINVAL);
        assert_int_equal(e.code, SANDBOX_ERR_INVALID_OPTION);
        assert_non_null(strstr(e.message, "MemoryMax=21474836480 exceeds the maximum of 1073741824"));
        assert_non_null(strstr(e.message, "sandboxd.conf [Limits]"));
        sandbox_error_done(&e);
        c = (SandboxConfig) { .limits.tasks_max = 65536 };
        assert_int_equal(limit_settings_check_sandbox(&l, &c, "x", &e), -EINVAL);
        assert_non_null(strstr(e.message, "TasksMax=65536 exceeds the maximum of 512"));
        sandbox_error_done(&e);
        c = (SandboxConfig) { .disk_max = 5 * GiB };
        assert_int_equal(limit_settings_check_sandbox(&l, &c, "x", &e), -EINVAL);
        assert_non_null(strstr(e.message, "DiskMax="));
        sandbox_error_done(&e);
        c = (SandboxConfig) { .timeout_sec = 7200 };
        assert_int_equal(limit_settings_check_sandbox(&l, &c, "x", &e), -EINVAL);
        assert_non_null(strstr(e.message, "Timeout=7200 exceeds the maximum of 3600"));
        sandbox_error_done(&e);
        /* No timeout asked and no default, but a maximum: the maximum. */
        c = (SandboxConfig) {};
        assert_int_equal(limit_settings_check_sandbox(&conf, &c, "x", &e), 0);
        assert_int_equal(c.timeout_sec, 3600);

        /* An exec's output: the default (1 MiB) clamped to a smaller maximum, not refused. */
        exec_config_init(&x);
        l.output_max = 512 * KiB;
        assert_int_equal(limit_settings_check_exec(&l, &x, &e), 0);
        assert_int_equal(x.output_max, 512 * KiB);
        l.output_max = 1 * MiB;
        x.output_max = 2 * MiB;
        x.output_max_set = true;
        assert_int_equal(limit_settings_check_exec(&l, &x, &e), -EINVAL);
        assert_non_null(strstr(e.message, "OutputMax=2097152 exceeds the maximum of 1048576"));
        sandbox_error_done(&e);
        x.output_max = 1 * MiB;
        assert_int_equal(limit_settings_check_exec(&l, &x, &e), 0);
        /* Stdin beyond StdinMax=: refused, naming the maximum. */
        l.stdin_max = 64 * KiB;
        x.stdin_size = 100000;
        assert_int_equal(limit_settings_check_exec(&l, &x, &e), -EINVAL);
        assert_non_null(strstr(e.message, "Stdin=100000 exceeds the maximum of 65536"));
        sandbox_error_done(&e);
        x.stdin_size = 0;
}

static void test_quota(void **state) {
        const QuotaLimits l = { .sandboxes = 3, .memory = 1 * GiB, .tasks = 600 };
        const SandboxConfig c = { .limits = { .memory_max = 256 * MiB, .tasks_max = 200,
                                              .cpu_quota_per_sec_usec = 1000000 }, .disk_max = GiB };
        SandboxError e = SANDBOX_ERROR_NULL;
        QuotaUse use = {};

        assert_int_equal(quota_check(&l, &use, &c, "owner 1000", &e), 0);
        quota_use_add(&use, &c);
        quota_use_add(&use, &c);
        assert_int_equal(use.sandboxes, 2);
        assert_int_equal(use.memory, 512 * MiB);
        assert_int_equal(use.tasks, 400);
        assert_int_equal(use.cpu, 2000000);
        assert_int_equal(use.disk, 2 * GiB);
        assert_int_equal(quota_check(&l, &use, &c, "owner 1000", &e), 0);
        quota_use_add(&use, &c);

        /* The fourth: the count first, with what, limit and use. */
        assert_int_equal(quota_check(&l, &use, &c, "owner 1000", &e), -EDQUOT);
        assert_int_equal(e.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        assert_string_equal(e.quota_what, "Sandboxes");
        assert_int_equal(e.quota_limit, 3);
        assert_int_equal(e.quota_use, 3);
        assert_non_null(strstr(e.message, "owner 1000 has 3 of 3 sandboxes"));
        sandbox_error_done(&e);

        /* Tasks: 600 - 400 leaves 200, and 201 does not fit. */
        const QuotaLimits tasks = { .tasks = 600 };
        QuotaUse two = { .sandboxes = 2, .tasks = 400 };
        SandboxConfig big = c;
        big.limits.tasks_max = 201;
        assert_int_equal(quota_check(&tasks, &two, &c, "tenant a", &e), 0);
        assert_int_equal(quota_check(&tasks, &two, &big, "tenant a", &e), -EDQUOT);
        assert_string_equal(e.quota_what, "TasksMax");
        assert_int_equal(e.quota_limit, 600);
        assert_int_equal(e.quota_use, 400);
        assert_non_null(strstr(e.message, "tenant a"));
        sandbox_error_done(&e);

        /* Use beyond the limit (the admin lowered it) is no overflow. */
        const QuotaLimits mem = { .memory = 100 * MiB };
        QuotaUse over = { .memory = 200 * MiB };
        assert_int_equal(quota_check(&mem, &over, &c, "owner 1", &e), -EDQUOT);
        assert_string_equal(e.quota_what, "MemoryMax");
        sandbox_error_done(&e);

        /* DiskMax is unbounded: two of 2^63 (made while no disk quota was set) must not
         * wrap the sum to 0, which a disk quota set later would take for no use at all. */
        SandboxConfig huge = c;
        QuotaUse wrap = {};
        huge.disk_max = UINT64_C(1) << 63;
        quota_use_add(&wrap, &huge);
        quota_use_add(&wrap, &huge);
        assert_true(wrap.disk == UINT64_MAX);
        assert_int_equal(quota_check(&(QuotaLimits) { .disk = 10 * GiB }, &wrap, &c, "owner 1", &e), -EDQUOT);
        assert_string_equal(e.quota_what, "DiskMax");
        sandbox_error_done(&e);

        /* No limits: anything goes, and nothing needs counting (a create of an owner
         * without a quota walks no sandboxes); a rate or a snapshot quota counts none either. */
        assert_int_equal(quota_check(&(QuotaLimits) {}, &over, &c, "owner 1", &e), 0);
        assert_false(quota_limits_bound_use(&(QuotaLimits) {}));
        assert_false(quota_limits_bound_use(&(QuotaLimits) { .creates_per_sec = 5, .creates_burst = 10,
                                                             .snapshots = 3, .snapshot_bytes = GiB }));
        assert_true(quota_limits_bound_use(&(QuotaLimits) { .sandboxes = 1 }));
        assert_true(quota_limits_bound_use(&(QuotaLimits) { .memory = 1 }));
        assert_true(quota_limits_bound_use(&(QuotaLimits) { .tasks = 1 }));
        assert_true(quota_limits_bound_use(&(QuotaLimits) { .disk = 1 }));
        assert_true(quota_limits_bound_use(&(QuotaLimits) { .cpu = 1 }));
        assert_string_equal(quota_item_to_string(QUOTA_CREATES_PER_SEC), "CreatesPerSecond");
        assert_null(quota_item_to_string(_QUOTA_ITEM_MAX));
}

static void test_token_bucket(void **state) {
        TokenBucket b = {};
        uint64_t t = 1000000;

        /* Full when new: a burst of 3, then empty. */
        assert_true(token_bucket_take(&b, 2, 3, t));
        assert_true(token_bucket_take(&b, 2, 3, t));
        assert_true(token_bucket_take(&b, 2, 3, t));
        assert_false(token_bucket_take(&b, 2, 3, t));
        assert_int_equal(token_bucket_in_use(&b, 2, 3, t), 3);
        /* 2 a second: one more after half a second, not before. */
        assert_false(token_bucket_take(&b, 2, 3, t + 400000));
        assert_true(token_bucket_take(&b, 2, 3, t + 500000));
        /* Refilled to the burst, never beyond. */
        assert_int_equal(token_bucket_in_use(&b, 2, 3, t + 10000000), 0);
        for (int i = 0; i < 3; i++)
                assert_true(token_bucket_take(&b, 2, 3, t + 10000000));
        assert_false(token_bucket_take(&b, 2, 3, t + 10000000));
        /* Time going backwards takes nothing back. */
        assert_false(token_bucket_take(&b, 2, 3, t));
        /* No rate: no bound. */
        for (int i = 0; i < 100; i++)
                assert_true(token_bucket_take(&b, 0, 0, t));
}

/* The descriptor budget: RLIMIT_NOFILE from --max-sandboxes, and back. */
static void test_descriptor_budget(void **state) {
        assert_int_equal(sandbox_fds_needed(0), SANDBOX_FDS_BASE);
        assert_int_equal(sandbox_fds_needed(10000), SANDBOX_FDS_BASE + 10000ULL * SANDBOX_FDS_PER_SANDBOX);
        for (unsigned n = 1; n <= 100000; n = n * 3 + 1)
                assert_int_equal(sandbox_fds_room(sandbox_fds_needed(n)), n);
        /* One short: one sandbox fewer. */
        assert_int_equal(sandbox_fds_room(sandbox_fds_needed(4096) - 1), 4095);
        /* One descriptor an idle sandbox: 10,000 need 15,120, within the hard limit of
         * 20,000 that the CI VM gives every process (and that none may raise there). */
        assert_int_equal(SANDBOX_FDS_PER_SANDBOX, 1);
        assert_int_equal(sandbox_fds_needed(10000), 15120);
        assert_true(sandbox_fds_room(20000) >= 10000);
        assert_true(sandbox_fds_room(524288) >= 10000);
        /* A limit below the base still lets one sandbox be tried. */
        assert_int_equal(sandbox_fds_room(1024), 1);
        assert_int_equal(sandbox_fds_room(0), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_node_ceiling),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_quota),
                cmocka_unit_test(test_token_bucket),
                cmocka_unit_test(test_descriptor_budget),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
