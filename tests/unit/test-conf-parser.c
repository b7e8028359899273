/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf-parser.h"
#include "macro.h"
#include "recorder.h"
#include "sandboxd-conf.h"

typedef struct Conf {
        char *path;
        char *name;
        unsigned port;
        uint64_t retention;
        bool on;
} Conf;

static const ConfigTableItem table[] = {
        { "A", "Path",      config_parse_path,    offsetof(Conf, path),      "an absolute path" },
        { "A", "Name",      config_parse_string,  offsetof(Conf, name),      NULL },
        { "A", "Port",      config_parse_port,    offsetof(Conf, port),      NULL },
        { "B", "Retention", config_parse_seconds, offsetof(Conf, retention), NULL },
        { "B", "On",        config_parse_bool,    offsetof(Conf, on),        NULL },
};

static void conf_done(Conf *c) {
        free(c->path);
        free(c->name);
        *c = (Conf) {};
}

static int parse_text(const char *text, Conf *c) {
        FILE *f = fmemopen((void *) text, strlen(text), "r");
        int r;

        assert_non_null(f);
        r = config_parse_stream(f, "test.conf", table, ELEMENTSOF(table), c);
        fclose(f);
        return r;
}

static void test_basic(void **state) {
        Conf c = {};

        assert_int_equal(parse_text("# comment\n"
                                    "; another\n"
                                    "\n"
                                    "[A]\n"
                                    "  Path = /var/lib/x  \n"
                                    "Name=a b = c\n"
                                    "Port=3307\n"
                                    "\t[B]\t\n"
                                    "Retention=30d\n"
                                    "On=yes\n", &c), 0);
        assert_string_equal(c.path, "/var/lib/x");
        assert_string_equal(c.name, "a b = c");   /* the value is what follows the first '=' */
        assert_int_equal(c.port, 3307);
        assert_true(c.retention == 30ULL * 86400);
        assert_true(c.on);
        conf_done(&c);
}

static void test_later_wins_and_reset(void **state) {
        Conf c = {};

        assert_int_equal(parse_text("[A]\nName=first\nName=second\nPort=1\nPort=\n", &c), 0);
        assert_string_equal(c.name, "second");
        assert_int_equal(c.port, 0);
        assert_int_equal(parse_text("[A]\nName=\n", &c), 0);
        assert_null(c.name);
        conf_done(&c);
}

static void test_unknown_is_ignored(void **state) {
        Conf c = {};

        /* Warned about (a newer configuration must not stop an older daemon), not fatal. */
        assert_int_equal(parse_text("[A]\nNope=1\nName=x\n[Zzz]\nName=y\n", &c), 0);
        assert_string_equal(c.name, "x");
        conf_done(&c);
}

static void test_errors(void **state) {
        static const char *const bad[] = {
                "Name=outside a section\n",
                "[A]\njust words\n",
                "[A]\n=value\n",
                "[A\nName=x\n",
                "[]\n",
                "[A]\nPath=relative/path\n",
                "[A]\nPort=0\n",
                "[A]\nPort=65536\n",
                "[A]\nPort=-1\n",
                "[A]\nPort=12ab\n",
                "[B]\nRetention=30x\n",
                "[B]\nRetention=-5\n",
                "[B]\nRetention=1.5d\n",
                "[B]\nOn=maybe\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                Conf c = {};
                int r = parse_text(bad[i], &c);
                if (r >= 0) {
                        print_error("accepted: %s", bad[i]);
                        fail();
                }
                conf_done(&c);
        }
}

static void test_nul_byte(void **state) {
        static const char text[] = "[A]\nName=a\0b\n";
        FILE *f = fmemopen((void *) text, sizeof(text) - 1, "r");
        Conf c = {};

        assert_int_equal(config_parse_stream(f, "t", table, ELEMENTSOF(table), &c), -EINVAL);
        fclose(f);
        conf_done(&c);
}

static char *tmpdir;

static void write_file(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *p = NULL;
        FILE *f;

        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_dropins(void **state) {
        char main_path[4096], dropins[4096];
        Conf c = {};

        snprintf(main_path, sizeof(main_path), "%s/sandboxd.conf", tmpdir);
        snprintf(dropins, sizeof(dropins), "%s/sandboxd.conf.d", tmpdir);
        assert_int_equal(mkdir(dropins, 0755), 0);
        write_file(tmpdir, "sandboxd.conf", "[A]\nName=main\nPort=1\n");
        write_file(dropins, "20-b.conf", "[A]\nName=twenty\n");
        write_file(dropins, "10-a.conf", "[A]\nName=ten\nPort=10\n");
        write_file(dropins, "30-ignored.txt", "[A]\nName=not a .conf\n");

        assert_int_equal(config_parse_with_dropins(main_path, dropins, table, ELEMENTSOF(table), &c), 0);
        assert_string_equal(c.name, "twenty");  /* lexical order, later wins */
        assert_int_equal(c.port, 10);
        conf_done(&c);

        /* Neither the main file nor the directory need exist. */
        assert_int_equal(config_parse_with_dropins("/nonexistent/x.conf", "/nonexistent/x.conf.d",
                                                   table, ELEMENTSOF(table), &c), 0);

        /* A bad drop-in fails the whole. */
        write_file(dropins, "40-bad.conf", "[A]\nPort=x\n");
        assert_int_equal(config_parse_with_dropins(main_path, dropins, table, ELEMENTSOF(table), &c), -EINVAL);
        conf_done(&c);
}

static void test_recorder_settings(void **state) {
        _cleanup_(recorder_settings_done) RecorderSettings s = {};
        char path[4096], pw[4096], creds[4096], text[8192];
        SnapshotSettings snap = {};

        snprintf(path, sizeof(path), "%s/rec.conf", tmpdir);
        snprintf(pw, sizeof(pw), "%s/pw", tmpdir);
        write_file(tmpdir, "pw", "s3cr'et\n");
        snprintf(text, sizeof(text),
                 "[Recording]\nSpoolDirectory=/var/spool/x\nMariaDBSocket=/run/mysqld/mysqld.sock\n"
                 "Database=sandboxd\nUser=sandboxd\nPasswordFile=%s\nRetention=12h\n", pw);
        write_file(tmpdir, "rec.conf", text);

        assert_int_equal(unsetenv("CREDENTIALS_DIRECTORY"), 0);
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_true(s.enabled);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path), 0);
        assert_string_equal(s.spool_dir, "/var/spool/x");
        assert_string_equal(s.mariadb_socket, "/run/mysqld/mysqld.sock");
        assert_string_equal(s.mariadb_database, "sandboxd");
        assert_string_equal(s.mariadb_user, "sandboxd");
        assert_string_equal(s.mariadb_password, "s3cr'et");   /* without the newline */
        assert_true(s.retention_sec == 12 * 3600);
        recorder_settings_done(&s);

        /* systemd's LoadCredential= wins over PasswordFile=. */
        snprintf(creds, sizeof(creds), "%s/creds", tmpdir);
        assert_int_equal(mkdir(creds, 0700), 0);
        write_file(creds, "mariadb-password", "from-credential");
        assert_int_equal(setenv("CREDENTIALS_DIRECTORY", creds, 1), 0);
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path), 0);
        assert_string_equal(s.mariadb_password, "from-credential");
        recorder_settings_done(&s);
        assert_int_equal(unsetenv("CREDENTIALS_DIRECTORY"), 0);

        /* MariaDB without a database is refused; an explicit file that is missing too. */
        write_file(tmpdir, "rec.conf", "[Recording]\nMariaDBHost=localhost\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path), -EINVAL);
        recorder_settings_done(&s);
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, "/nonexistent/sandboxd.conf"), -ENOENT);
        recorder_settings_done(&s);

        write_file(tmpdir, "rec.conf", "[Recording]\nRecord=no\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path), 0);
        assert_false(s.enabled);
        recorder_settings_done(&s);

        /* [Snapshots]: the quota and retention; what is not set keeps its default. */
        write_file(tmpdir, "rec.conf", "[Snapshots]\nDirectory=/srv/snap\nMaxBytesPerOwner=1.5G\nRetention=2d\n");
        snap = (SnapshotSettings) { .max_bytes_per_owner = 1, .max_per_owner = 32 };
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path), 0);
        assert_string_equal(snap.directory, "/srv/snap");
        assert_true(snap.max_bytes_per_owner == 1536ULL * 1024 * 1024);
        assert_true(snap.max_per_owner == 32);
        assert_true(snap.retention_sec == 2 * 86400);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);

        /* [Workspaces]: where the pool is and how big its image grows. */
        WorkspaceSettings ws = {};
        write_file(tmpdir, "rec.conf", "[Workspaces]\nDirectory=/srv/ws\nPoolSize=64G\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, &ws, NULL, path), 0);
        assert_string_equal(ws.directory, "/srv/ws");
        assert_true(ws.pool_size == 64ULL * 1024 * 1024 * 1024);
        workspace_settings_done(&ws);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);
        write_file(tmpdir, "rec.conf", "[Workspaces]\nPoolSize=big\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_true(sandboxd_conf_load(&s, &snap, NULL, &ws, NULL, path) < 0);
        workspace_settings_done(&ws);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);

        /* [Fleet] Node=: the number new ids end with, 1…255. */
        unsigned node = 0;
        write_file(tmpdir, "rec.conf", "[Fleet]\nNode=12\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, &node, path), 0);
        assert_int_equal(node, 12);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);
        /* [Fleet] QuotaInterval=: seconds, 0 (unset) for per-node quotas. */
        write_file(tmpdir, "rec.conf", "[Fleet]\nNode=12\nQuotaInterval=1\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(s.fleet_quota_interval_sec, 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, &node, path), 0);
        assert_int_equal(s.fleet_quota_interval_sec, 1);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);
        write_file(tmpdir, "rec.conf", "[Fleet]\nQuotaInterval=2min\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, &node, path), 0);
        assert_int_equal(s.fleet_quota_interval_sec, 120);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);
        write_file(tmpdir, "rec.conf", "[Fleet]\nNode=256\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_int_equal(sandboxd_conf_load(&s, &snap, NULL, NULL, &node, path), -ERANGE);
        assert_int_equal(node, 12);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);

        write_file(tmpdir, "rec.conf", "[Snapshots]\nMaxPerOwner=many\n");
        assert_int_equal(recorder_settings_init(&s), 0);
        assert_true(sandboxd_conf_load(&s, &snap, NULL, NULL, NULL, path) < 0);
        snapshot_settings_done(&snap);
        recorder_settings_done(&s);
}

static int setup(void **state) {
        char t[] = "/var/tmp/test-conf-parser.XXXXXX";
        tmpdir = strdup(mkdtemp(t));
        return tmpdir ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
        free(tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),
                cmocka_unit_test(test_later_wins_and_reset),
                cmocka_unit_test(test_unknown_is_ignored),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_nul_byte),
                cmocka_unit_test(test_dropins),
                cmocka_unit_test(test_recorder_settings),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
