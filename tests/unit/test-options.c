/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <setjmp.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "options.h"
#include "sandbox.h"
#include "sandbox-errors.h"
#include "strv.h"

static const SystemBounds bounds = { .memory_total = 8ULL << 30, .n_cpus = 2, .workspaces = true };

static int set_u64(SandboxConfig *c, const char *name, uint64_t v, SandboxError *e) {
        OptionValue o = { .type = OPTION_UINT64, .u64 = v };
        return sandbox_config_set(c, name, &o, e);
}

static void assert_invalid(int r, SandboxError *e) {
        assert_int_equal(r, -EINVAL);
        assert_int_equal(e->code, SANDBOX_ERR_INVALID_OPTION);
        assert_non_null(e->message);
        sandbox_error_done(e);
}

static void test_limits_in_range(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};

        assert_int_equal(set_u64(&c, "MemoryMax", 64ULL << 20, &e), 0);
        assert_int_equal(set_u64(&c, "CPUQuotaPerSecUSec", 500000, &e), 0);
        assert_int_equal(set_u64(&c, "TasksMax", 16, &e), 0);
        assert_int_equal(set_u64(&c, "Timeout", 3600, &e), 0);
        assert_int_equal(set_u64(&c, "DiskMax", 1ULL << 20, &e), 0);
        assert_int_equal(sandbox_config_finalize(&c, NULL, &bounds, &e), 0);
        assert_int_equal(c.limits.memory_max, 64ULL << 20);
        assert_int_equal(c.limits.cpu_quota_per_sec_usec, 500000);
        assert_int_equal(c.limits.tasks_max, 16);
        assert_int_equal(c.timeout_sec, 3600);
        assert_int_equal(c.disk_max, 1ULL << 20);
}

static void test_limits_out_of_range(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};

        assert_invalid(set_u64(&c, "MemoryMax", 0, &e), &e);
        assert_invalid(set_u64(&c, "MemoryMax", SANDBOX_MEMORY_MIN - 1, &e), &e);
        assert_invalid(set_u64(&c, "TasksMax", 0, &e), &e);
        assert_invalid(set_u64(&c, "TasksMax", SANDBOX_TASKS_MAX + 1, &e), &e);
        assert_invalid(set_u64(&c, "CPUQuotaPerSecUSec", 1, &e), &e);
        assert_invalid(set_u64(&c, "Timeout", SANDBOX_LIFETIME_MAX_SEC + 1, &e), &e);
        assert_invalid(set_u64(&c, "DiskMax", 1, &e), &e);

        /* Within the absolute bounds but beyond this machine: refused at finalize. */
        assert_int_equal(set_u64(&c, "MemoryMax", 1ULL << 50, &e), 0);
        assert_invalid(sandbox_config_finalize(&c, NULL, &bounds, &e), &e);
        c = (SandboxConfig) {};
        assert_int_equal(set_u64(&c, "CPUQuotaPerSecUSec", 3000000, &e), 0);
        assert_invalid(sandbox_config_finalize(&c, NULL, &bounds, &e), &e);
}

/* Issue 27: MemoryMax=1 quoted a maximum (2^64 - 2) that 1 TiB then contradicted: the
 * range said for a value too small is the one finalize holds a value too large to. */
static void test_limits_messages_agree(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        SystemBounds real;
        char *low, *high;

        assert_int_equal(system_bounds_read(&real), 0);
        assert_int_equal(set_u64(&c, "MemoryMax", 1, &e), -EINVAL);
        low = strdup(sandbox_error_message(&e));
        sandbox_error_done(&e);
        assert_int_equal(set_u64(&c, "MemoryMax", real.memory_total + 1, &e), 0);
        assert_int_equal(sandbox_config_finalize(&c, NULL, &real, &e), -EINVAL);
        high = strdup(sandbox_error_message(&e));
        sandbox_error_done(&e);
        /* "MemoryMax=V is out of range, must be between MIN and MAX.": the same after V. */
        assert_string_equal(strstr(low, " is out of range"), strstr(high, " is out of range"));
        assert_non_null(strstr(low, "must be between 16777216 and "));
        free(low);
        free(high);

        c = (SandboxConfig) {};
        assert_int_equal(set_u64(&c, "CPUQuotaPerSecUSec", 1, &e), -EINVAL);
        low = strdup(sandbox_error_message(&e));
        sandbox_error_done(&e);
        assert_int_equal(set_u64(&c, "CPUQuotaPerSecUSec", real.n_cpus * 1000000ULL + 1, &e), 0);
        assert_int_equal(sandbox_config_finalize(&c, NULL, &real, &e), -EINVAL);
        high = strdup(sandbox_error_message(&e));
        sandbox_error_done(&e);
        assert_string_equal(strstr(low, " is out of range"), strstr(high, " is out of range"));
        free(low);
        free(high);
}

/* Fork: what the call leaves unset is the source's, what it gives (0 included) is its own. */
static void test_config_inherit(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig src = {}, c = {};

        assert_int_equal(set_u64(&src, "MemoryMax", 96ULL << 20, &e), 0);
        assert_int_equal(set_u64(&src, "Timeout", 900, &e), 0);
        assert_int_equal(set_u64(&src, "IdleTimeout", 600, &e), 0);
        assert_int_equal(sandbox_config_set(&src, "IdleAction", &(OptionValue) { .type = OPTION_STRING, .s = "pause" },
                                            &e), 0);
        assert_int_equal(sandbox_config_set(&src, "EgressAllow", &(OptionValue) { .type = OPTION_STRV,
                                            .strv = (char *[]) { (char *) "example.org", NULL } }, &e), 0);

        assert_int_equal(sandbox_config_inherit(&c, &src), 0);
        assert_int_equal(c.limits.memory_max, 96ULL << 20);
        assert_int_equal(c.timeout_sec, 900);
        assert_int_equal(c.idle_timeout_sec, 600);
        assert_int_equal(c.idle_action, IDLE_ACTION_PAUSE);
        assert_string_equal(c.egress_allow, src.egress_allow);
        assert_non_null(strstr(c.egress_allow, "example.org"));
        assert_true(c.egress_allow_set && c.egress_deny_set);
        assert_null(c.egress_deny);
        sandbox_config_done(&c);

        c = (SandboxConfig) {};
        assert_int_equal(set_u64(&c, "Timeout", 0, &e), 0);
        assert_int_equal(sandbox_config_inherit(&c, &src), 0);
        assert_int_equal(c.timeout_sec, 0);
        assert_int_equal(c.idle_timeout_sec, 600);
        sandbox_config_done(&c);
        sandbox_config_done(&src);
}

static void test_wrong_type_and_unknown(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        OptionValue s = { .type = OPTION_STRING, .s = "256M" };
        OptionValue b = { .type = OPTION_BOOL, .b = true };
        OptionValue i = { .type = OPTION_INT64 };

        assert_invalid(sandbox_config_set(&c, "MemoryMax", &s, &e), &e);
        assert_invalid(sandbox_config_set(&c, "MemoryMax", &i, &e), &e);
        assert_invalid(sandbox_config_set(&c, "Ephemeral", &s, &e), &e);
        assert_invalid(sandbox_config_set(&c, "NoSuchOption", &b, &e), &e);
        assert_int_equal(sandbox_config_set(&c, "Ephemeral", &b, &e), 0);
        assert_true(c.ephemeral);
}

static void test_defaults(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        SandboxLimits t = { .memory_max = 128ULL << 20 };
        SystemBounds small = { .memory_total = 64ULL << 20, .n_cpus = 1 };

        assert_int_equal(sandbox_config_finalize(&c, &t, &bounds, &e), 0);
        assert_int_equal(c.limits.memory_max, 128ULL << 20);            /* template */
        assert_int_equal(c.limits.tasks_max, SANDBOX_TASKS_DEFAULT);    /* built in */
        assert_int_equal(c.limits.cpu_quota_per_sec_usec, SANDBOX_CPU_QUOTA_DEFAULT_USEC);
        assert_int_equal(c.disk_max, SANDBOX_DISK_DEFAULT);

        assert_int_equal(c.limits.storage, STORAGE_DISK);               /* persistent: on disk */

        /* Ephemeral: in memory, and its default DiskMax no more than its memory. */
        c = (SandboxConfig) { .ephemeral = true };
        assert_int_equal(sandbox_config_finalize(&c, &t, &bounds, &e), 0);
        assert_int_equal(c.limits.storage, STORAGE_TMPFS);
        assert_int_equal(c.disk_max, 128ULL << 20);

        /* A template's storage wins over the default, the caller's over the template's. */
        SandboxLimits tt = { .storage = STORAGE_TMPFS };
        c = (SandboxConfig) {};
        assert_int_equal(sandbox_config_finalize(&c, &tt, &bounds, &e), 0);
        assert_int_equal(c.limits.storage, STORAGE_TMPFS);
        c = (SandboxConfig) { .limits.storage = STORAGE_DISK };
        assert_int_equal(sandbox_config_finalize(&c, &tt, &bounds, &e), 0);
        assert_int_equal(c.limits.storage, STORAGE_DISK);

        /* A tmpfs above the memory is refused, not left to the OOM killer. */
        c = (SandboxConfig) { .limits.storage = STORAGE_TMPFS, .disk_max = 1ULL << 30 };
        assert_int_equal(sandbox_config_finalize(&c, &t, &bounds, &e), -EINVAL);
        assert_non_null(strstr(e.message, "above MemoryMax"));
        assert_invalid(-EINVAL, &e);
        c = (SandboxConfig) { .limits.storage = STORAGE_DISK, .disk_max = 1ULL << 30 };
        assert_int_equal(sandbox_config_finalize(&c, &t, &bounds, &e), 0);

        /* No pool: tmpfs by default, and disk asked for is refused with the reason. */
        SystemBounds nopool = bounds;
        nopool.workspaces = false;
        c = (SandboxConfig) {};
        assert_int_equal(sandbox_config_finalize(&c, &t, &nopool, &e), 0);
        assert_int_equal(c.limits.storage, STORAGE_TMPFS);
        c = (SandboxConfig) { .limits.storage = STORAGE_DISK };
        assert_true(sandbox_config_finalize(&c, &t, &nopool, &e) < 0);
        assert_int_equal(e.code, SANDBOX_ERR_NOT_SUPPORTED);
        sandbox_error_done(&e);

        /* The option's values. */
        OptionValue v = { .type = OPTION_STRING, .s = "tmpfs" };
        c = (SandboxConfig) {};
        assert_int_equal(sandbox_config_set(&c, "Storage", &v, &e), 0);
        assert_int_equal(c.limits.storage, STORAGE_TMPFS);
        v.s = "default";
        assert_invalid(sandbox_config_set(&c, "Storage", &v, &e), &e);

        /* A default beyond a small machine is clamped, not an error. */
        c = (SandboxConfig) {};
        assert_int_equal(sandbox_config_finalize(&c, &t, &small, &e), 0);
        assert_int_equal(c.limits.memory_max, 64ULL << 20);
}

static void test_exec_options(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        ExecConfig c;
        char *env_ok[] = { (char *) "A=1", (char *) "_B2=x=y", NULL };
        char *env_bad[] = { (char *) "1A=1", NULL };
        char *env_noeq[] = { (char *) "A", NULL };

        exec_config_init(&c);
        assert_int_equal(c.timeout_usec, EXEC_TIMEOUT_DEFAULT_SEC * 1000000ULL);

        assert_invalid(exec_config_set(&c, "Timeout", &(OptionValue) { .type = OPTION_UINT64, .u64 = 0 }, &e), &e);
        assert_invalid(exec_config_set(&c, "Timeout", &(OptionValue) { .type = OPTION_UINT64, .u64 = 3601 }, &e), &e);
        assert_int_equal(exec_config_set(&c, "Timeout", &(OptionValue) { .type = OPTION_UINT64, .u64 = 3600 }, &e), 0);
        assert_int_equal(c.timeout_usec, 3600000000ULL);
        /* To the microsecond; refused beyond the bounds, with the bound in the message, never clamped. */
        assert_int_equal(exec_config_set(&c, "TimeoutUSec", &(OptionValue) { .type = OPTION_UINT64, .u64 = 500000 }, &e), 0);
        assert_int_equal(c.timeout_usec, 500000);
        assert_int_equal(exec_config_set(&c, "TimeoutUSec", &(OptionValue) { .type = OPTION_UINT64, .u64 = 4000000000ULL }, &e), -EINVAL);
        assert_non_null(strstr(e.message, "between 1000 and 3600000000"));
        assert_int_equal(c.timeout_usec, 500000);
        sandbox_error_done(&e);
        assert_invalid(exec_config_set(&c, "Timeout", &(OptionValue) { .type = OPTION_UINT64, .u64 = 4000 }, &e), &e);
        assert_int_equal(c.timeout_usec, 500000);
        assert_invalid(exec_config_set(&c, "TimeoutUSec", &(OptionValue) { .type = OPTION_UINT64, .u64 = 999 }, &e), &e);
        assert_invalid(exec_config_set(&c, "OutputMax", &(OptionValue) { .type = OPTION_UINT64, .u64 = EXEC_OUTPUT_MAX + 1 }, &e), &e);
        assert_invalid(exec_config_set(&c, "WorkingDirectory", &(OptionValue) { .type = OPTION_STRING, .s = "relative" }, &e), &e);
        assert_invalid(exec_config_set(&c, "WorkingDirectory", &(OptionValue) { .type = OPTION_STRING, .s = "/a\nb" }, &e), &e);
        assert_int_equal(exec_config_set(&c, "WorkingDirectory", &(OptionValue) { .type = OPTION_STRING, .s = "/tmp" }, &e), 0);
        assert_invalid(exec_config_set(&c, "Environment", &(OptionValue) { .type = OPTION_STRV, .strv = env_bad }, &e), &e);
        assert_invalid(exec_config_set(&c, "Environment", &(OptionValue) { .type = OPTION_STRV, .strv = env_noeq }, &e), &e);
        assert_int_equal(exec_config_set(&c, "Environment", &(OptionValue) { .type = OPTION_STRV, .strv = env_ok }, &e), 0);
        assert_int_equal(exec_config_set(&c, "Stdin", &(OptionValue) { .type = OPTION_BYTES, .bytes = { "ab\0c", 4 } }, &e), 0);
        assert_int_equal(c.stdin_size, 4);
        assert_memory_equal(c.stdin_data, "ab\0c", 4);
        assert_invalid(exec_config_set(&c, "Bogus", &(OptionValue) { .type = OPTION_UINT64 }, &e), &e);

        /* argv */
        assert_invalid(exec_config_set_argv(&c, NULL, &e), &e);
        char **empty = calloc(1, sizeof(char *));
        assert_invalid(exec_config_set_argv(&c, empty, &e), &e);
        char **blank = NULL;
        assert_int_equal(strv_extend(&blank, ""), 0);
        assert_invalid(exec_config_set_argv(&c, blank, &e), &e);
        char **ok = NULL;
        assert_int_equal(strv_extend(&ok, "true"), 0);
        assert_int_equal(exec_config_set_argv(&c, ok, &e), 0);

        assert_int_equal(exec_config_finalize(&c, &e), 0);
        assert_string_equal(c.working_directory, "/tmp");
        exec_config_done(&c);
}

static void test_exec_fds(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        int pipefd[2], dirfd, pathfd;
        ExecConfig c;

        exec_config_init(&c);
        assert_int_equal(pipe(pipefd), 0);
        assert_int_equal(exec_config_set(&c, "StandardOutput", &(OptionValue) { .type = OPTION_FD, .fd = pipefd[1] }, &e), 0);
        assert_true(c.stdout_fd >= 0 && c.stdout_fd != pipefd[1]); /* a dup of its own */

        /* Ways out of the mount namespace are refused. */
        dirfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        pathfd = open("/etc/passwd", O_PATH | O_CLOEXEC);
        assert_true(dirfd >= 0 && pathfd >= 0);
        assert_invalid(exec_config_set(&c, "StandardInput", &(OptionValue) { .type = OPTION_FD, .fd = dirfd }, &e), &e);
        assert_invalid(exec_config_set(&c, "StandardError", &(OptionValue) { .type = OPTION_FD, .fd = pathfd }, &e), &e);
        assert_int_equal(c.stdin_fd, -EBADF);
        assert_int_equal(c.stderr_fd, -EBADF);

        close(dirfd);
        close(pathfd);
        close(pipefd[0]);
        close(pipefd[1]);
        exec_config_done(&c);
        assert_int_equal(c.stdout_fd, -EBADF);
}

static void test_exec_args_too_big(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        char **argv = NULL;
        ExecConfig c;

        exec_config_init(&c);
        char *big = malloc(EXEC_ARGS_MAX + 1);
        memset(big, 'x', EXEC_ARGS_MAX);
        big[EXEC_ARGS_MAX] = 0;
        assert_int_equal(strv_extend(&argv, "echo"), 0);
        assert_int_equal(strv_consume(&argv, big), 0);
        assert_int_equal(exec_config_set_argv(&c, argv, &e), 0);
        assert_invalid(exec_config_finalize(&c, &e), &e);
        exec_config_done(&c);
}

/* JSON (varlink's, HTTP's options) decodes into the same values as D-Bus's a{sv}: as the
 * type each option has, refused as the same InvalidOption otherwise. */
static void test_options_from_json(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        ExecConfig x;
        FileOptions f;
        ExecutionQuery q = {};
        json_object *o;
        int pipefd[2];

        o = json_tokener_parse("{\"MemoryMax\": 268435456, \"Ephemeral\": true, \"Timeout\": 60}");
        assert_non_null(o);
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), 0);
        assert_int_equal(c.limits.memory_max, 268435456);
        assert_true(c.ephemeral);
        assert_int_equal(c.timeout_sec, 60);
        json_object_put(o);

        /* null: not given (varlink's optional fields), whatever the option's type. */
        c = (SandboxConfig) {};
        o = json_tokener_parse("{\"MemoryMax\": null, \"Ephemeral\": null, \"Frobnicate\": null}");
        assert_non_null(o);
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), 0);
        assert_int_equal(c.limits.memory_max, 0);
        assert_false(c.ephemeral);
        json_object_put(o);

        /* Negative, a string, unknown, out of range, not an object. */
        static const char * const bad[] = {
                "{\"MemoryMax\": -1}",
                "{\"MemoryMax\": \"64M\"}",
                "{\"Frobnicate\": true}",
                "{\"TasksMax\": 0}",
                "{\"Ephemeral\": 1}",
                "[1, 2]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                c = (SandboxConfig) {};
                o = json_tokener_parse(bad[i]);
                assert_non_null(o);
                assert_invalid(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), &e);
                json_object_put(o);
        }

        /* Exec: strings, string arrays, base64 bytes, descriptors by index. */
        exec_config_init(&x);
        assert_int_equal(pipe(pipefd), 0);
        o = json_tokener_parse("{\"WorkingDirectory\": \"/tmp\", \"Environment\": [\"A=1\", \"B=2\"],"
                               " \"Stdin\": \"aGVsbG8=\", \"Timeout\": 5, \"StandardOutput\": 0}");
        assert_non_null(o);
        assert_int_equal(options_from_json(o, OPTION_SET_EXEC, &x, &pipefd[1], 1, &e), 0);
        assert_string_equal(x.working_directory, "/tmp");
        assert_int_equal(strv_length(x.environment), 2);
        assert_string_equal(x.environment[1], "B=2");
        assert_int_equal(x.stdin_size, 5);
        assert_memory_equal(x.stdin_data, "hello", 5);
        assert_int_equal(x.timeout_usec, 5000000);
        assert_true(x.stdout_fd >= 0 && x.stdout_fd != pipefd[1]);
        json_object_put(o);

        static const char * const bad_exec[] = {
                "{\"StandardError\": 1}",             /* only one descriptor was passed */
                "{\"Stdin\": \"not base64!\"}",
                "{\"Environment\": [\"A=1\", 2]}",
                "{\"Environment\": [\"1A=1\"]}",
                "{\"WorkingDirectory\": \"relative\"}",
                "{\"Timeout\": 3601}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_exec); i++) {
                o = json_tokener_parse(bad_exec[i]);
                assert_non_null(o);
                assert_invalid(options_from_json(o, OPTION_SET_EXEC, &x, &pipefd[1], 1, &e), &e);
                json_object_put(o);
        }
        exec_config_done(&x);
        close(pipefd[0]);
        close(pipefd[1]);

        /* File options: Mode is a uint32, at most 07777. */
        file_options_init(&f);
        o = json_tokener_parse("{\"Mode\": 384, \"Append\": true, \"Max\": 4096}");
        assert_int_equal(options_from_json(o, OPTION_SET_FILE, &f, NULL, 0, &e), 0);
        assert_int_equal(f.mode, 0600);
        assert_true(f.append);
        assert_int_equal(f.max, 4096);
        json_object_put(o);
        o = json_tokener_parse("{\"Mode\": 4096}");
        assert_invalid(options_from_json(o, OPTION_SET_FILE, &f, NULL, 0, &e), &e);
        json_object_put(o);
        o = json_tokener_parse("{\"Mode\": 4294967296}");   /* beyond uint32: the wrong type */
        assert_invalid(options_from_json(o, OPTION_SET_FILE, &f, NULL, 0, &e), &e);
        json_object_put(o);

        /* The record's filter, and the caller's view of it. */
        o = json_tokener_parse("{\"SandboxId\": \"0123456789abcdef\", \"Owner\": 1000, \"Limit\": 5}");
        assert_int_equal(options_from_json(o, OPTION_SET_EXECUTIONS, &q, NULL, 0, &e), 0);
        assert_string_equal(q.filter.sandbox_id, "0123456789abcdef");
        assert_true(q.filter.owner_set);
        assert_int_equal(q.filter.owner, 1000);
        assert_int_equal(q.filter.limit, 5);
        json_object_put(o);
        execution_query_authorize(&q, &(SandboxCaller) { .uid = 1000, .granted = false });
        assert_int_equal(q.filter.uid, 1000);
        assert_false(q.filter.any_owner);
        o = json_tokener_parse("{\"Limit\": 0}");
        assert_invalid(options_from_json(o, OPTION_SET_EXECUTIONS, &q, NULL, 0, &e), &e);
        json_object_put(o);
        execution_query_done(&q);
}

static int set_str(SandboxConfig *c, const char *name, const char *v, SandboxError *e) {
        return sandbox_config_set(c, name, &(OptionValue) { .type = OPTION_STRING, .s = v }, e);
}

/* Name and Tenant: the characters, the length, and a Name never of a sandbox id's form. */
static void test_names_and_tenants(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        ExecutionQuery q = {};
        char longest[SANDBOX_NAME_MAX + 2];
        json_object *o;

        assert_true(sandbox_name_is_valid("agent-1"));
        assert_true(sandbox_name_is_valid("A.b_C-9"));
        assert_true(sandbox_name_is_valid("0123456789abcde"));      /* 15: not an id */
        assert_true(sandbox_name_is_valid("0123456789ABCDEF"));     /* ids are lowercase */
        assert_false(sandbox_name_is_valid("0123456789abcdef"));    /* an id's form */
        assert_true(sandbox_tenant_is_valid("0123456789abcdef"));   /* a tenant may */
        assert_false(sandbox_name_is_valid(""));
        assert_false(sandbox_name_is_valid(NULL));
        assert_false(sandbox_name_is_valid("a b"));
        assert_false(sandbox_name_is_valid("a/b"));
        assert_false(sandbox_name_is_valid("ä"));
        assert_false(sandbox_tenant_is_valid("a\nb"));
        memset(longest, 'x', SANDBOX_NAME_MAX);
        longest[SANDBOX_NAME_MAX] = 0;
        assert_true(sandbox_name_is_valid(longest));
        assert_true(sandbox_tenant_is_valid(longest));
        longest[SANDBOX_NAME_MAX] = 'x';
        longest[SANDBOX_NAME_MAX + 1] = 0;
        assert_false(sandbox_name_is_valid(longest));
        assert_false(sandbox_tenant_is_valid(longest));

        assert_int_equal(set_str(&c, "Name", "agent-1", &e), 0);
        assert_int_equal(set_str(&c, "Tenant", "acme", &e), 0);
        assert_int_equal(sandbox_config_set(&c, "ReuseExisting", &(OptionValue) { .type = OPTION_BOOL, .b = true }, &e), 0);
        assert_string_equal(c.name, "agent-1");
        assert_string_equal(c.tenant, "acme");
        assert_true(c.reuse_existing);
        assert_invalid(set_str(&c, "Name", "", &e), &e);
        assert_invalid(set_str(&c, "Name", "0123456789abcdef", &e), &e);
        assert_invalid(set_str(&c, "Tenant", longest, &e), &e);
        assert_invalid(set_str(&c, "Tenant", "a;b", &e), &e);
        assert_invalid(sandbox_config_set(&c, "Name", &(OptionValue) { .type = OPTION_BOOL }, &e), &e);
        assert_string_equal(c.name, "agent-1");     /* the refused ones changed nothing */
        assert_string_equal(c.tenant, "acme");

        c = (SandboxConfig) {};
        o = json_tokener_parse("{\"Name\": \"n\", \"Tenant\": \"t\", \"ReuseExisting\": true}");
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), 0);
        assert_string_equal(c.name, "n");
        assert_string_equal(c.tenant, "t");
        assert_true(c.reuse_existing);
        json_object_put(o);

        /* The record's Tenant filter; a caller acting for a tenant sees its own only. */
        assert_int_equal(execution_query_set(&q, "Tenant", &(OptionValue) { .type = OPTION_STRING, .s = "b" }, &e), 0);
        assert_string_equal(q.filter.tenant, "b");
        assert_invalid(execution_query_set(&q, "Tenant", &(OptionValue) { .type = OPTION_STRING, .s = "" }, &e), &e);
        execution_query_authorize(&q, &(SandboxCaller) { .uid = 1000, .tenant = "a" });
        assert_string_equal(q.filter.caller_tenant, "a");
        assert_string_equal(q.filter.tenant, "b");
        execution_query_authorize(&q, &(SandboxCaller) { .uid = 1000 });
        assert_string_equal(q.filter.caller_tenant, "");
        execution_query_done(&q);
}

/* D-Bus's wider types are not taken for narrower ones, and the reverse (strict typing,
 * as the API documents each option's type). */
static void test_egress(void **state) {
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxConfig c = {};
        json_object *o;

        o = json_tokener_parse("{\"EgressAllow\": [\"PyPI.org\", \"*.pythonhosted.org\", \"10.0.0.1/8:8443\"],"
                               " \"EgressDeny\": [\"evil.pythonhosted.org\"]}");
        assert_non_null(o);
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX, &c, NULL, 0, &e), 0);
        json_object_put(o);
        assert_true(sandbox_config_has_egress(&c));
        assert_true(c.egress_allow_set && c.egress_deny_set);
        /* Stored canonical. */
        assert_int_equal(sandbox_config_egress_strv(&c, false, &allow), 0);
        assert_int_equal(strv_length(allow), 3);
        assert_string_equal(allow[0], "pypi.org");
        assert_string_equal(allow[1], "*.pythonhosted.org");
        assert_string_equal(allow[2], "10.0.0.0/8:8443");
        assert_int_equal(sandbox_config_egress_strv(&c, true, &deny), 0);
        assert_int_equal(strv_length(deny), 1);

        /* The template's lists apply only where the caller gave none. */
        assert_int_equal(sandbox_config_egress_defaults(&c, (char *[]) { (char *) "other.org", NULL }, NULL, &e), 0);
        assert_string_equal(c.egress_allow, "pypi.org\n*.pythonhosted.org\n10.0.0.0/8:8443\n");

        /* A copy is deep: the sandbox keeps its own after the call's config is gone. */
        SandboxConfig copy;
        assert_int_equal(sandbox_config_copy(&copy, &c), 0);
        assert_ptr_not_equal(copy.egress_allow, c.egress_allow);
        assert_ptr_not_equal(copy.egress_deny, c.egress_deny);
        sandbox_config_done(&c);
        assert_null(c.egress_allow);
        assert_false(sandbox_config_has_egress(&c));
        assert_string_equal(copy.egress_allow, "pypi.org\n*.pythonhosted.org\n10.0.0.0/8:8443\n");
        assert_string_equal(copy.egress_deny, "evil.pythonhosted.org\n");
        assert_true(copy.egress_allow_set);
        assert_false(sandbox_config_egress_equal(&copy, &c));
        assert_true(sandbox_config_egress_equal(&c, &(SandboxConfig) { .egress_allow = (char *) "" }));
        SandboxConfig again;
        assert_int_equal(sandbox_config_copy(&again, &copy), 0);
        assert_true(sandbox_config_egress_equal(&copy, &again));
        sandbox_config_done(&again);
        sandbox_config_done(&copy);

        c = (SandboxConfig) {};
        assert_int_equal(sandbox_config_egress_defaults(&c, (char *[]) { (char *) "other.org", NULL }, NULL, &e), 0);
        assert_string_equal(c.egress_allow, "other.org\n");
        assert_false(c.egress_allow_set);

        /* Empty: no network. */
        sandbox_config_done(&c);
        assert_int_equal(sandbox_config_set(&c, "EgressAllow", &(OptionValue) { .type = OPTION_STRV,
                                                                              .strv = (char *[]) { NULL } }, &e), 0);
        assert_false(sandbox_config_has_egress(&c));

        /* A bad rule names the option and the rule; a string is not a list. */
        assert_invalid(sandbox_config_set(&c, "EgressAllow", &(OptionValue) { .type = OPTION_STRV,
                       .strv = (char *[]) { (char *) "ok.org", (char *) "not ok", NULL } }, &e), &e);
        assert_invalid(sandbox_config_set(&c, "EgressDeny", &(OptionValue) { .type = OPTION_STRING, .s = "x.org" }, &e),
                       &e);
        /* Too many. */
        _cleanup_strv_free_ char **many = NULL;
        for (unsigned i = 0; i <= 256; i++) {
                char name[32];
                snprintf(name, sizeof(name), "h%u.example", i);
                assert_int_equal(strv_extend(&many, name), 0);
        }
        assert_invalid(sandbox_config_set(&c, "EgressAllow", &(OptionValue) { .type = OPTION_STRV, .strv = many }, &e),
                       &e);
        sandbox_config_done(&c);
}

static void test_option_types(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        FileOptions f;
        ExecutionQuery q = {};

        file_options_init(&f);
        assert_invalid(file_options_set(&f, "Mode", &(OptionValue) { .type = OPTION_UINT64, .u64 = 0600 }, &e), &e);
        assert_int_equal(file_options_set(&f, "Mode", &(OptionValue) { .type = OPTION_UINT32, .u32 = 0600 }, &e), 0);
        assert_invalid(file_options_set(&f, "Bogus", &(OptionValue) { .type = OPTION_BOOL }, &e), &e);
        assert_invalid(execution_query_set(&q, "Owner", &(OptionValue) { .type = OPTION_STRING, .s = "0" }, &e), &e);
        assert_invalid(execution_query_set(&q, "Limit", &(OptionValue) { .type = OPTION_UINT32, .u32 = 10001 }, &e), &e);
        assert_int_equal(option_set_lookup(OPTION_SET_EXEC, "StandardInput"), OPTION_FD);
        assert_int_equal(option_set_lookup(OPTION_SET_SANDBOX, "StandardInput"), _OPTION_TYPE_INVALID);
        execution_query_done(&q);
}

/* ListSandboxes' filter: each member, its bounds, and JSON (varlink's) as D-Bus's. */
static void test_sandbox_list_query(void **state) {
        SandboxError e = SANDBOX_ERROR_NULL;
        SandboxListQuery q = SANDBOX_LIST_QUERY_INIT;
        json_object *o;

        assert_int_equal(q.state, -1);
        assert_int_equal(sandbox_list_query_set(&q, "Offset", &(OptionValue) { .type = OPTION_UINT64, .u64 = 500 }, &e), 0);
        assert_int_equal(sandbox_list_query_set(&q, "Limit", &(OptionValue) { .type = OPTION_UINT32, .u32 = 100 }, &e), 0);
        assert_int_equal(sandbox_list_query_set(&q, "State", &(OptionValue) { .type = OPTION_STRING, .s = "paused" }, &e), 0);
        assert_int_equal(sandbox_list_query_set(&q, "Template", &(OptionValue) { .type = OPTION_STRING, .s = "py-3.12" }, &e), 0);
        assert_int_equal(sandbox_list_query_set(&q, "Name", &(OptionValue) { .type = OPTION_STRING, .s = "job-7" }, &e), 0);
        assert_int_equal(q.offset, 500);
        assert_int_equal(q.limit, 100);
        assert_int_equal(q.state, SANDBOX_PAUSED);
        assert_string_equal(q.template_name, "py-3.12");
        assert_string_equal(q.name, "job-7");

        assert_invalid(sandbox_list_query_set(&q, "Limit", &(OptionValue) { .type = OPTION_UINT32, .u32 = 0 }, &e), &e);
        assert_invalid(sandbox_list_query_set(&q, "Limit", &(OptionValue) { .type = OPTION_UINT32, .u32 = 10001 }, &e), &e);
        assert_invalid(sandbox_list_query_set(&q, "Limit", &(OptionValue) { .type = OPTION_UINT64, .u64 = 10 }, &e), &e);
        assert_invalid(sandbox_list_query_set(&q, "State", &(OptionValue) { .type = OPTION_STRING, .s = "gone" }, &e), &e);
        assert_invalid(sandbox_list_query_set(&q, "Template", &(OptionValue) { .type = OPTION_STRING, .s = "../x" }, &e), &e);
        /* A name is not of the form of an id. */
        assert_invalid(sandbox_list_query_set(&q, "Name", &(OptionValue) { .type = OPTION_STRING, .s = "0123456789abcdef" }, &e), &e);
        assert_invalid(sandbox_list_query_set(&q, "Owner", &(OptionValue) { .type = OPTION_UINT32 }, &e), &e);

        q = (SandboxListQuery) SANDBOX_LIST_QUERY_INIT;
        o = json_tokener_parse("{\"Offset\": 3, \"Limit\": 2, \"State\": \"running\", \"Name\": null}");
        assert_non_null(o);
        assert_int_equal(options_from_json(o, OPTION_SET_SANDBOX_LIST, &q, NULL, 0, &e), 0);
        assert_int_equal(q.offset, 3);
        assert_int_equal(q.limit, 2);
        assert_int_equal(q.state, SANDBOX_RUNNING);
        assert_string_equal(q.name, "");
        json_object_put(o);
        o = json_tokener_parse("{\"Offset\": -1}");
        assert_non_null(o);
        assert_invalid(options_from_json(o, OPTION_SET_SANDBOX_LIST, &q, NULL, 0, &e), &e);
        json_object_put(o);
}

/* The faces' names of CreateSandbox's options come from one table (sandbox-api.h): it has
 * every option the core takes, each once, and no name the core does not know. */
static void test_option_names_table(void **state) {
#define NAME(name, snake) name,
        static const char *const names[] = { SANDBOX_CREATE_OPTIONS(NAME) };
#undef NAME
        size_t n = 0;

        for (const char *o; (o = option_set_name(OPTION_SET_SANDBOX, n)); n++) {
                bool found = false;
                for (size_t i = 0; i < ELEMENTSOF(names); i++)
                        found = found || streq(names[i], o);
                if (!found)
                        fail_msg("CreateSandbox option %s has no row in SANDBOX_CREATE_OPTIONS (sandbox-api.h)", o);
        }
        assert_int_equal(n, ELEMENTSOF(names));
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                assert_true(option_set_lookup(OPTION_SET_SANDBOX, names[i]) >= 0);
        assert_string_equal(sandbox_option_from_snake("memory_max"), "MemoryMax");
        assert_string_equal(sandbox_option_from_snake("reuse"), "ReuseExisting");
        assert_null(sandbox_option_from_snake("memory_mb"));
        assert_null(sandbox_option_from_snake("MemoryMax"));
        assert_null(option_set_name(OPTION_SET_SANDBOX, n));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_option_names_table),
                cmocka_unit_test(test_limits_in_range),
                cmocka_unit_test(test_limits_out_of_range),
                cmocka_unit_test(test_limits_messages_agree),
                cmocka_unit_test(test_config_inherit),
                cmocka_unit_test(test_wrong_type_and_unknown),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_exec_options),
                cmocka_unit_test(test_exec_fds),
                cmocka_unit_test(test_exec_args_too_big),
                cmocka_unit_test(test_options_from_json),
                cmocka_unit_test(test_option_types),
                cmocka_unit_test(test_names_and_tenants),
                cmocka_unit_test(test_sandbox_list_query),
                cmocka_unit_test(test_egress),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
