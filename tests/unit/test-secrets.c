/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The secret store (secret-store.h) in a directory of the test's, the bindings' syntax,
 * the Secrets option as the core keeps it, and the files bwrap is told to make. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "options.h"
#include "payload-bwrap.h"
#include "secret-store.h"
#include "strv.h"
#include "template.h"

static char dir[] = "/tmp/test-secrets-XXXXXX";

static void test_store(void **state) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ char *value = NULL, *path = NULL;
        struct stat st;
        size_t size;

        assert_int_equal(secret_store_list(dir, 1000, NULL, &names), 0);
        assert_int_equal(strv_length(names), 0);
        names = strv_free(names);

        assert_int_equal(secret_store_set(dir, 1000, NULL, "TOKEN", "s3cr3t", 6, &e), 0);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "A_KEY", "one", 3, &e), 0);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "A_KEY", "two", 3, &e), 0);   /* replaced */
        assert_int_equal(secret_store_set(dir, 1000, "acme", "TOKEN", "tenant's", 8, &e), 0);

        /* Names only, sorted; each owner and tenant its own. */
        assert_int_equal(secret_store_list(dir, 1000, NULL, &names), 0);
        assert_int_equal(strv_length(names), 2);
        assert_string_equal(names[0], "A_KEY");
        assert_string_equal(names[1], "TOKEN");
        names = strv_free(names);
        assert_int_equal(secret_store_list(dir, 1001, NULL, &names), 0);
        assert_int_equal(strv_length(names), 0);

        assert_int_equal(secret_store_get(dir, 1000, NULL, "A_KEY", &value, &size), 0);
        assert_string_equal(value, "two");
        assert_int_equal(size, 3);
        value = mfree(value);
        assert_int_equal(secret_store_get(dir, 1000, "acme", "TOKEN", &value, NULL), 0);
        assert_string_equal(value, "tenant's");
        assert_int_equal(secret_store_get(dir, 1001, NULL, "TOKEN", &value, NULL), -ENOENT);

        /* Root's only. */
        assert_int_equal(asprintf(&path, "%s/1000/TOKEN", dir) > 0, 1);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        path = mfree(path);
        assert_int_equal(asprintf(&path, "%s/1000", dir) > 0, 1);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);

        assert_int_equal(secret_store_remove(dir, 1000, NULL, "TOKEN", &e), 1);
        assert_int_equal(secret_store_remove(dir, 1000, NULL, "TOKEN", &e), 0);
        assert_int_equal(secret_store_get(dir, 1000, NULL, "TOKEN", &value, NULL), -ENOENT);

        /* Refused: bad names, empty values, values with NUL, values too large. */
        assert_int_equal(secret_store_set(dir, 1000, NULL, "../x", "v", 1, &e), -EINVAL);
        assert_int_equal(e.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&e);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "1ABC", "v", 1, &e), -EINVAL);
        sandbox_error_done(&e);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "X", "", 0, &e), -EINVAL);
        sandbox_error_done(&e);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "X", "a\0b", 3, &e), -EINVAL);
        sandbox_error_done(&e);
        char *big = calloc(1, SECRET_VALUE_MAX + 1);
        assert_non_null(big);
        memset(big, 'x', SECRET_VALUE_MAX + 1);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "X", big, SECRET_VALUE_MAX + 1, &e), -EINVAL);
        assert_int_equal(secret_store_set(dir, 1000, NULL, "X", big, SECRET_VALUE_MAX, NULL), 0);
        free(big);
}

static void test_bindings(void **state) {
        SecretBinding b;
        char buf[512];

        assert_int_equal(secret_binding_parse("TOKEN", &b), 0);
        assert_int_equal(b.kind, SECRET_BIND_ENV);
        assert_string_equal(b.name, "TOKEN");
        assert_int_equal(secret_binding_parse("TOKEN:env", &b), 0);
        assert_int_equal(b.kind, SECRET_BIND_ENV);
        assert_int_equal(secret_binding_format(&b, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "TOKEN");
        assert_int_equal(secret_binding_parse("TOKEN:file", &b), 0);
        assert_int_equal(b.kind, SECRET_BIND_FILE);
        assert_int_equal(secret_binding_format(&b, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "TOKEN:file");
        assert_int_equal(secret_binding_parse("ANTHROPIC_API_KEY@API.Anthropic.com:X-Api-Key", &b), 0);
        assert_int_equal(b.kind, SECRET_BIND_HEADER);
        assert_string_equal(b.host, "api.anthropic.com");
        assert_string_equal(b.header, "x-api-key");
        assert_int_equal(secret_binding_format(&b, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "ANTHROPIC_API_KEY@api.anthropic.com:x-api-key");

        const char *bad[] = { "", ":file", "TOKEN:", "TOKEN:dir", "TO-KEN", "1X", "X@host", "X@:h", "X@*.host:h",
                              "X@host:bad header", "X@host:h\r\nEvil: 1", "X@ho..st:h", "X@host:" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(secret_binding_parse(bad[i], &b), -EINVAL);

        assert_true(secret_value_fits(SECRET_BIND_ENV, "a\nb"));
        assert_true(secret_value_fits(SECRET_BIND_HEADER, "sk-ant-123 456"));
        assert_false(secret_value_fits(SECRET_BIND_HEADER, "a\r\nX-Evil: 1"));
}

static void test_option(void **state) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_(sandbox_config_done) SandboxConfig c = {}, copy = {};
        char *good[] = { (char *) "TOKEN:env", (char *) "KEY@Api.Example.com:Authorization", (char *) "F:file", NULL };
        char *bad[] = { (char *) "TOKEN", (char *) "no good", NULL };
        char *tmpl[] = { (char *) "OTHER", NULL };
        OptionValue v = { .type = OPTION_STRV, .strv = good };
        _cleanup_free_ SecretBinding *b = NULL;
        size_t n = 0;

        assert_int_equal(sandbox_config_set(&c, "Secrets", &v, &e), 0);
        assert_string_equal(c.secrets, "TOKEN\nKEY@api.example.com:authorization\nF:file\n");
        /* Given: the template's do not apply. */
        assert_int_equal(sandbox_config_secrets_defaults(&c, tmpl, &e), 0);
        assert_string_equal(c.secrets, "TOKEN\nKEY@api.example.com:authorization\nF:file\n");
        assert_int_equal(sandbox_config_copy(&copy, &c), 0);
        assert_ptr_not_equal(copy.secrets, c.secrets);
        assert_int_equal(sandbox_config_secret_bindings(&copy, &b, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(b[1].kind, SECRET_BIND_HEADER);
        assert_string_equal(b[2].name, "F");

        v.strv = bad;
        assert_int_equal(sandbox_config_set(&c, "Secrets", &v, &e), -EINVAL);
        assert_int_equal(e.code, SANDBOX_ERR_INVALID_OPTION);
        assert_non_null(strstr(e.message, "no good"));

        _cleanup_(sandbox_config_done) SandboxConfig d = {};
        assert_int_equal(sandbox_config_secrets_defaults(&d, tmpl, NULL), 0);
        assert_string_equal(d.secrets, "OTHER\n");
}

static void test_bwrap_data_files(void **state) {
        char *binds[] = { (char *) "/usr", NULL };
        Template t = { .name = (char *) "shell", .ro_binds = binds };
        PayloadDataFile files[] = {
                { .path = "/run/secrets/TOKEN", .data = "x", .size = 1, .mode = 0400 },
                { .path = "/run/secrets/OTHER", .data = "y", .size = 1, .mode = 0400 },
        };
        PayloadParams p = {
                .template = &t,
                .bwrap_path = "/usr/bin/bwrap",
                .agent_path = "/usr/libexec/sandboxd/sandbox-init",
                .disk_max = 1048576,
                .seccomp_fd = 9,
                .data_files = files,
                .n_data_files = ELEMENTSOF(files),
        };
        _cleanup_strv_free_ char **argv = NULL;
        int i, k = -1;

        assert_int_equal(bwrap_build_argv(&p, &argv), 0);
        for (i = 0; argv[i]; i++)
                if (streq(argv[i], "--ro-bind-data") && streq(argv[i + 2], "/run/secrets/TOKEN"))
                        k = i;
        assert_true(k > 2);
        assert_string_equal(argv[k - 2], "--perms");
        assert_string_equal(argv[k - 1], "0400");
        assert_string_equal(argv[k + 1], "8");
        assert_string_equal(argv[k + 6], "9");
        assert_string_equal(argv[k + 7], "/run/secrets/OTHER");
        /* Before the root is made read-only, after the agent. */
        for (i = k; argv[i] && !streq(argv[i], "--remount-ro"); i++)
                ;
        assert_non_null(argv[i]);
        assert_string_equal(argv[i + 1], "/");
}

static int setup(void **state) {
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_store),
                cmocka_unit_test(test_bindings),
                cmocka_unit_test(test_option),
                cmocka_unit_test(test_bwrap_data_files),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
