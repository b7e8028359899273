/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "etc-tree.h"
#include "strv.h"
#include "template.h"

static void test_parse_good(void **state) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse("python",
                "{\"description\":\"Py\",\"payload\":\"bwrap\",\"ro_binds\":[\"/usr\"],"
                "\"environment\":[\"PATH=/usr/bin\"],\"runtimes\":[\"python3\"],"
                "\"limits\":{\"MemoryMax\":1048576000,\"TasksMax\":64,\"DiskMax\":2097152,\"Timeout\":600},"
                "\"maxima\":{\"MemoryMax\":2097152000,\"CPUQuotaPerSecUSec\":500000,\"TasksMax\":128,"
                "\"DiskMax\":4194304,\"Timeout\":3600}}", &t, &error), 0);
        assert_string_equal(t->name, "python");
        assert_string_equal(t->description, "Py");
        assert_int_equal(t->payload, PAYLOAD_BWRAP);
        assert_string_equal(t->ro_binds[0], "/usr");
        assert_string_equal(t->environment[0], "PATH=/usr/bin");
        assert_int_equal(t->limits.memory_max, 1048576000ULL);
        assert_int_equal(t->limits.tasks_max, 64);
        assert_int_equal(t->limits.cpu_quota_per_sec_usec, 0);
        assert_int_equal(t->pool, 0);
        /* The template's maxima, and the defaults "limits" gives for DiskMax and Timeout. */
        assert_int_equal(t->maxima.max.memory_max, 2097152000ULL);
        assert_int_equal(t->maxima.max.cpu_quota_per_sec_usec, 500000);
        assert_int_equal(t->maxima.max.tasks_max, 128);
        assert_int_equal(t->maxima.disk_max, 4194304);
        assert_int_equal(t->maxima.timeout_max, 3600);
        assert_int_equal(t->maxima.disk_default, 2097152);
        assert_int_equal(t->maxima.timeout_default, 600);
}

static void test_parse_docker_and_pool(void **state) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse("d", "{\"payload\":\"docker\",\"image\":\"sandboxd-busybox:latest\",\"pool\":3}",
                                        &t, &error), 0);
        assert_int_equal(t->payload, PAYLOAD_DOCKER);
        assert_string_equal(t->image, "sandboxd-busybox:latest");
        assert_int_equal(t->pool, 3);
        assert_null(t->ro_binds);
}

static void test_parse_recycling_pool(void **state) {
        _cleanup_(template_freep) Template *a = NULL, *b = NULL, *c = NULL;
        _cleanup_free_ char *error = NULL;

        /* The number form: no recycling, the defaults for when it is turned on. */
        assert_int_equal(template_parse("a", "{\"ro_binds\":[\"/usr\"],\"pool\":2}", &a, &error), 0);
        assert_int_equal(a->pool, 2);
        assert_false(a->recycle);
        assert_int_equal(a->recycle_max, TEMPLATE_RECYCLE_MAX_DEFAULT);
        assert_int_equal(a->recycle_idle_sec, TEMPLATE_RECYCLE_IDLE_SEC_DEFAULT);

        assert_int_equal(template_parse("b", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycle\":true}}", &b, &error), 0);
        assert_int_equal(b->pool, 0);
        assert_true(b->recycle);
        assert_int_equal(b->recycle_max, TEMPLATE_RECYCLE_MAX_DEFAULT);

        assert_int_equal(template_parse("c", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"size\":3,\"recycle\":true,"
                                        "\"recycle_max\":5,\"recycle_idle_sec\":60}}", &c, &error), 0);
        assert_int_equal(c->pool, 3);
        assert_true(c->recycle);
        assert_int_equal(c->recycle_max, 5);
        assert_int_equal(c->recycle_idle_sec, 60);
}

static void expect_bad(const char *name, const char *json, const char *needle) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse(name, json, &t, &error), -EINVAL);
        assert_null(t);
        assert_non_null(error);
        if (!strstr(error, needle))
                fail_msg("error '%s' does not mention '%s'", error, needle);
}

static void test_parse_bad(void **state) {
        expect_bad("x", "not json", "JSON");
        expect_bad("x", "[1,2]", "JSON object");
        expect_bad("x", "{}", "ro_binds");
        expect_bad("x", "{\"ro_binds\":\"/usr\"}", "ro_binds");
        expect_bad("x", "{\"ro_binds\":[\"usr\"]}", "absolute");
        expect_bad("x", "{\"ro_binds\":[\"/usr/../etc\"]}", "absolute");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"payload\":\"vm\"}", "payload");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"environment\":[\"NOEQUALS\"]}", "NAME=VALUE");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"limits\":{\"MemoryMax\":-1}}", "MemoryMax");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"limits\":[]}", "limits");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"maxima\":7}", "maxima");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"maxima\":{\"TasksMax\":-1}}", "TasksMax");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":65}", "pool");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":-1}", "pool");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":\"3\"}", "pool");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycle\":1}}", "recycle");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycel\":true}}", "recycel");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"size\":65}}", "size");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycle\":true,\"recycle_max\":0}}", "recycle_max");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycle\":true,\"recycle_max\":1025}}", "recycle_max");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"pool\":{\"recycle\":true,\"recycle_idle_sec\":0}}",
                   "recycle_idle_sec");
        expect_bad("x", "{\"payload\":\"docker\",\"image\":\"busybox\",\"pool\":{\"recycle\":true}}", "bwrap");
        expect_bad("x", "{\"payload\":\"docker\"}", "image");
        expect_bad("x", "{\"payload\":\"docker\",\"image\":\"a b\"}", "image");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"image\":\"busybox\"}", "docker");
        expect_bad("../evil", "{\"ro_binds\":[\"/usr\"]}", "name");
        expect_bad("", "{\"ro_binds\":[\"/usr\"]}", "name");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"egress_allow\":[\"not ok\"]}", "EgressAllow");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"egress_deny\":[\"*.\"]}", "EgressDeny");
        /* Issue 32: secrets, a required host path and how to install it, idle defaults. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"secrets\":[\"not ok\"]}", "Secrets");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"secrets\":[\"K\"],\"pool\":1}", "pool");
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/opt/x\"],\"requires\":[{\"path\":\"/srv/y\",\"install\":\"i\"}]}",
                   "ro_binds");
        expect_bad("x", "{\"ro_binds\":[\"/opt/x\"],\"requires\":[{\"path\":\"/opt/x/../../etc/shadow\",\"install\":\"i\"}]}",
                   "normalized");
        expect_bad("x", "{\"ro_binds\":[\"/opt/x\"],\"requires\":[{\"path\":\"/opt/x/b\"}]}", "install");
        expect_bad("x", "{\"ro_binds\":[\"/opt/x\"],\"requires\":[{\"path\":\"/opt/x/b\",\"install\":\"a\\nb\"}]}",
                   "one line");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"idle_action\":\"sleep\"}", "idle_action");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"egress_allow\":\"pypi.org\"}", "egress_allow");
}

static void test_parse_egress(void **state) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse("py", "{\"ro_binds\":[\"/usr\"],\"egress_allow\":[\"pypi.org\",\"*.pythonhosted.org\"],"
                                        "\"egress_deny\":[\"evil.pythonhosted.org\"]}", &t, &error), 0);
        assert_int_equal(strv_length(t->egress_allow), 2);
        assert_string_equal(t->egress_deny[0], "evil.pythonhosted.org");
}

static void test_parse_etc(void **state) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse("py",
                "{\"ro_binds\":[\"/usr\",\"/etc/ssl/certs\"],\"timezone\":\"Europe/Berlin\",\"shm_max\":2097152,"
                "\"etc\":{\"pip.conf\":\"[global]\\nno-index = true\\n\",\"npmrc\":\"offline=true\\n\","
                "\"ssl/openssl.cnf\":\"\"}}", &t, &error), 0);
        assert_string_equal(t->timezone, "Europe/Berlin");
        assert_int_equal(t->shm_max, 2097152);
        assert_int_equal(strv_length(t->etc_files), 6);
        assert_string_equal(t->etc_files[0], "pip.conf");
        assert_string_equal(t->etc_files[1], "[global]\nno-index = true\n");
        assert_string_equal(t->etc_files[2], "npmrc");
        assert_string_equal(t->etc_files[4], "ssl/openssl.cnf");
        assert_string_equal(t->etc_files[5], "");
}

static void test_parse_etc_bad(void **state) {
        char big[ETC_FILE_SIZE_MAX + 64], many[4096];
        size_t n;

        /* The host's /etc is never shown, nor its identity files. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc\"]}", "/etc");
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc/\"]}", "/etc");
        expect_bad("x", "{\"ro_binds\":[\"/\"]}", "/etc");
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc/passwd\"]}", "/etc/passwd");
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc/hosts\"]}", "/etc/hosts");
        /* Paths inside /etc only. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"../shadow\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"a/../../x\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"/etc/pip.conf\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"a//b\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\".hidden\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"a b\":\"x\"}}", "relative path");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"\":\"x\"}}", "relative path");
        /* Not sandboxd's own files. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"passwd\":\"root::0:0::/:/bin/sh\"}}", "own");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"hosts\":\"1.2.3.4 x\"}}", "own");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"machine-id\":\"0\"}}", "own");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"resolv.conf\":\"nameserver 1.1.1.1\"}}", "own");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"localtime\":\"x\"}}", "own");
        /* Not over a bound host file, nor file and directory at once. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc/ssl/certs\"],\"etc\":{\"ssl/certs/x.pem\":\"x\"}}",
                   "collides");
        expect_bad("x", "{\"ro_binds\":[\"/usr\",\"/etc/ssl/certs\"],\"etc\":{\"ssl\":\"x\"}}", "collides");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"a\":\"x\",\"a/b\":\"y\"}}", "both");
        /* Shapes, sizes, counts. */
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":[\"pip.conf\"]}", "object");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"pip.conf\":1}}", "string");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"etc\":{\"pip.conf\":\"a\\u0000b\"}}", "text");
        n = (size_t) snprintf(big, sizeof(big), "{\"ro_binds\":[\"/usr\"],\"etc\":{\"big\":\"");
        memset(big + n, 'x', ETC_FILE_SIZE_MAX + 1);
        strcpy(big + n + ETC_FILE_SIZE_MAX + 1, "\"}}");
        expect_bad("x", big, "at most");
        n = (size_t) snprintf(many, sizeof(many), "{\"ro_binds\":[\"/usr\"],\"etc\":{");
        for (unsigned i = 0; i <= ETC_FILES_MAX; i++)
                n += (size_t) snprintf(many + n, sizeof(many) - n, "%s\"f%u\":\"\"", i ? "," : "", i);
        snprintf(many + n, sizeof(many) - n, "}}");
        expect_bad("x", many, "at most");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"timezone\":\"../../etc/shadow\"}", "timezone");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"timezone\":3}", "timezone");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"shm_max\":1}", "shm_max");
        expect_bad("x", "{\"ro_binds\":[\"/usr\"],\"shm_max\":\"64M\"}", "shm_max");
        /* Docker images keep their own /etc. */
        expect_bad("x", "{\"payload\":\"docker\",\"image\":\"busybox\",\"etc\":{\"pip.conf\":\"\"}}", "bwrap");
}

static void write_file(const char *dir, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static int reports;
static void count_report(const char *path, const char *error, void *userdata) {
        reports++;
}

static void test_dirs_override(void **state) {
        char vendor[] = "/var/tmp/test-template-XXXXXX", etc[] = "/var/tmp/test-template-XXXXXX";
        TemplateSet set = {};
        char *dirs[] = { vendor, etc, (char *) "/nonexistent-dir", NULL };

        assert_non_null(mkdtemp(vendor));
        assert_non_null(mkdtemp(etc));
        write_file(vendor, "shell.json", "{\"description\":\"vendor\",\"ro_binds\":[\"/usr\"]}");
        write_file(vendor, "python.json", "{\"description\":\"py\",\"ro_binds\":[\"/usr\"]}");
        write_file(vendor, "broken.json", "{");
        write_file(vendor, "README", "not a template");
        write_file(etc, "shell.json", "{\"description\":\"admin\",\"ro_binds\":[\"/usr\"]}");

        reports = 0;
        assert_int_equal(template_set_load(&set, dirs, count_report, NULL), 2);
        assert_int_equal(reports, 1);
        assert_string_equal(template_set_find(&set, "shell")->description, "admin");
        assert_string_equal(template_set_find(&set, "python")->description, "py");
        assert_null(template_set_find(&set, "broken"));
        assert_null(template_set_find(&set, "README"));
        template_set_done(&set);

        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -r -- '%s' '%s'", vendor, etc);
        assert_int_equal(system(cmd), 0);
}

/* "contexts": the code contexts started with each sandbox, by language name; one that is no
 * language of contexts is refused, naming it. */
static void test_parse_contexts(void **state) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *error = NULL;

        assert_int_equal(template_parse("d", "{\"ro_binds\":[\"/usr\"],\"contexts\":[\"python\",\"javascript\"]}", &t,
                                        &error), 0);
        assert_string_equal(t->contexts[0], "python");
        assert_string_equal(t->contexts[1], "javascript");
        assert_null(t->contexts[2]);
        expect_bad("e", "{\"ro_binds\":[\"/usr\"],\"contexts\":[\"python\",\"cobol\"]}", "'cobol'");
        expect_bad("f", "{\"ro_binds\":[\"/usr\"],\"contexts\":\"python\"}", "contexts");
}

static void test_shipped_templates(void **state) {
        const char *dir = getenv("TEMPLATE_DIR");
        char *dirs[] = { (char *) dir, NULL };
        TemplateSet set = {};

        if (!dir)
                skip();
        reports = 0;
        assert_true(template_set_load(&set, dirs, count_report, NULL) >= 2);
        assert_int_equal(reports, 0);
        assert_non_null(template_set_find(&set, "shell"));
        assert_non_null(template_set_find(&set, "python"));
        assert_non_null(template_set_find(&set, "node"));
        /* claude-code: the CLI from the admin's install, its key added by the proxy. */
        const Template *cc = template_set_find(&set, "claude-code");
        assert_non_null(cc);
        assert_true(strv_contains(cc->ro_binds, "/opt/sandboxd/claude-code"));
        assert_string_equal(cc->requires[0], "/opt/sandboxd/claude-code/bin/claude");
        assert_non_null(strstr(cc->requires[1], "npm install -g --prefix /opt/sandboxd/claude-code @anthropic-ai/claude-code"));
        assert_string_equal(cc->egress_allow[0], "api.anthropic.com");
        assert_null(cc->egress_allow[1]);
        assert_string_equal(cc->secrets[0], "ANTHROPIC_API_KEY@api.anthropic.com:x-api-key");
        assert_int_equal(cc->limits.memory_max, 2ULL << 30);
        assert_int_equal(cc->maxima.disk_default, 5ULL << 30);
        assert_int_equal(cc->limits.storage, STORAGE_DISK);
        assert_true(cc->idle_action_set);
        assert_int_equal(cc->idle_action, IDLE_ACTION_HIBERNATE);
        assert_true(cc->idle_timeout_sec > 0);
        assert_string_equal(template_set_find(&set, "python-data")->contexts[0], "python");
        template_set_done(&set);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_bad),
                cmocka_unit_test(test_parse_egress),
                cmocka_unit_test(test_parse_contexts),
                cmocka_unit_test(test_parse_etc),
                cmocka_unit_test(test_parse_etc_bad),
                cmocka_unit_test(test_parse_docker_and_pool),
                cmocka_unit_test(test_parse_recycling_pool),
                cmocka_unit_test(test_dirs_override),
                cmocka_unit_test(test_shipped_templates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
