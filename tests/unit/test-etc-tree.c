/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "etc-tree.h"
#include "strv.h"
#include "template.h"

static const EtcEntry *find(const EtcTree *tree, const char *path) {
        for (size_t i = 0; i < tree->n; i++)
                if (streq(tree->entries[i].path, path))
                        return &tree->entries[i];
        return NULL;
}

static void write_text(const char *dir, const char *name, const char *text) {
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static char *read_text(const char *dir, const char *name) {
        static char buf[8192];
        char path[512];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        assert_true(n >= 0);
        buf[n] = 0;
        return buf;
}

static void rm_r(const char *path) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", path);
        assert_int_equal(system(cmd), 0);
}

/* The identity a program asks for: getpwuid(1000), getgrgid(1000), localhost, files only. */
static void test_generated(void **state) {
        char *binds[] = { (char *) "/usr", NULL };
        Template t = { .name = (char *) "t", .ro_binds = binds };
        _cleanup_(etc_tree_done) EtcTree tree = {};
        const EtcEntry *e;

        assert_int_equal(etc_tree_build(&t, "/nonexistent-host-etc", &tree), 0);

        e = find(&tree, "passwd");
        assert_non_null(e);
        assert_int_equal(e->type, ETC_ENTRY_FILE);
        assert_non_null(strstr(e->data, "\nsandbox:x:1000:1000:sandbox:/work:/bin/sh\n"));
        assert_true(startswith_str(e->data, "root:x:0:0:"));
        assert_non_null(strstr(e->data, "\nnobody:x:65534:65534:"));
        e = find(&tree, "group");
        assert_non_null(strstr(e->data, "\nsandbox:x:1000:\n"));
        assert_true(startswith_str(e->data, "root:x:0:\n"));
        e = find(&tree, "hosts");
        assert_non_null(strstr(e->data, "127.0.0.1\tlocalhost\n"));
        assert_non_null(strstr(e->data, "::1\tlocalhost"));
        assert_non_null(strstr(e->data, "\tsandbox\n"));
        e = find(&tree, "nsswitch.conf");
        assert_non_null(strstr(e->data, "passwd:         files\n"));
        assert_non_null(strstr(e->data, "hosts:          files\n"));
        assert_null(strstr(e->data, "dns"));
        assert_string_equal(find(&tree, "hostname")->data, "sandbox\n");
        assert_string_equal(find(&tree, "host.conf")->data, "multi on\n");
        e = find(&tree, "machine-id");
        assert_int_equal(e->size, 0);
        e = find(&tree, "localtime");
        assert_int_equal(e->type, ETC_ENTRY_SYMLINK);
        assert_string_equal(e->data, "/usr/share/zoneinfo/UTC");
        /* No network, no resolver; nothing of a host without those files. */
        assert_null(find(&tree, "resolv.conf"));
        assert_null(find(&tree, "services"));
        assert_null(find(&tree, "os-release"));
}

static void test_template_parts(void **state) {
        char host[] = "/var/tmp/test-etc-tree-XXXXXX";
        char *binds[] = { (char *) "/usr", (char *) "/etc/ld.so.cache", (char *) "/etc/alternatives",
                          (char *) "/etc/does-not-exist", NULL };
        char *files[] = { (char *) "pip.conf", (char *) "[global]\n", (char *) "xdg/app/conf", (char *) "k=v\n", NULL };
        Template t = { .name = (char *) "t", .ro_binds = binds, .etc_files = files,
                       .timezone = (char *) "Europe/Berlin" };
        _cleanup_(etc_tree_done) EtcTree tree = {};
        const EtcEntry *e;

        assert_non_null(mkdtemp(host));
        write_text(host, "services", "echo 7/tcp\n");
        write_text(host, "os-release", "ID=debian\n");

        assert_int_equal(etc_tree_build(&t, host, &tree), 0);
        assert_string_equal(find(&tree, "services")->data, "echo 7/tcp\n");
        assert_string_equal(find(&tree, "os-release")->data, "ID=debian\n");
        assert_null(find(&tree, "protocols"));
        assert_string_equal(find(&tree, "localtime")->data, "/usr/share/zoneinfo/Europe/Berlin");
        /* Mount points for what the template binds into /etc, of the host's kind. */
        if (access("/etc/ld.so.cache", F_OK) >= 0) {
                e = find(&tree, "ld.so.cache");
                assert_non_null(e);
                assert_int_equal(e->type, ETC_ENTRY_FILE);
                assert_int_equal(e->size, 0);
        }
        if (access("/etc/alternatives", F_OK) >= 0)
                assert_int_equal(find(&tree, "alternatives")->type, ETC_ENTRY_DIR);
        assert_null(find(&tree, "does-not-exist"));
        /* The template's files, their directories made before them. */
        assert_string_equal(find(&tree, "pip.conf")->data, "[global]\n");
        assert_int_equal(find(&tree, "xdg")->type, ETC_ENTRY_DIR);
        assert_int_equal(find(&tree, "xdg/app")->type, ETC_ENTRY_DIR);
        assert_true(find(&tree, "xdg/app") < find(&tree, "xdg/app/conf"));
        assert_string_equal(find(&tree, "xdg/app/conf")->data, "k=v\n");
        rm_r(host);
}

static void test_write(void **state) {
        char root[] = "/var/tmp/test-etc-tree-XXXXXX";
        char *binds[] = { (char *) "/usr", NULL };
        char *files[] = { (char *) "npmrc", (char *) "offline=true\n", NULL };
        Template t = { .name = (char *) "node", .ro_binds = binds, .etc_files = files };
        _cleanup_free_ char *path = NULL, *again = NULL, *other = NULL;
        char link[256];
        struct stat st;
        ssize_t n;

        assert_non_null(mkdtemp(root));
        umask(077);
        assert_int_equal(etc_tree_write(&t, "/nonexistent-host-etc", root, &path), 0);
        assert_true(startswith_str(path, root));
        assert_non_null(strstr(path, "/node-"));

        /* Readable by the sandboxes' own uids, whatever the daemon's umask. */
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_string_equal(read_text(path, "npmrc"), "offline=true\n");
        assert_string_equal(read_text(path, "hostname"), "sandbox\n");
        assert_non_null(strstr(read_text(path, "passwd"), "sandbox:x:1000:1000:"));
        {
                char f[512];
                snprintf(f, sizeof(f), "%s/passwd", path);
                assert_int_equal(stat(f, &st), 0);
                assert_int_equal(st.st_mode & 07777, 0644);
                snprintf(f, sizeof(f), "%s/localtime", path);
                n = readlink(f, link, sizeof(link) - 1);
                assert_true(n > 0);
                link[n] = 0;
                assert_string_equal(link, "/usr/share/zoneinfo/UTC");
        }

        /* Once per contents: the same template again is the same tree, left as it is;
         * other contents are another tree, and the first stays for who still binds it. */
        assert_int_equal(etc_tree_write(&t, "/nonexistent-host-etc", root, &again), 0);
        assert_string_equal(path, again);
        files[1] = (char *) "offline=false\n";
        assert_int_equal(etc_tree_write(&t, "/nonexistent-host-etc", root, &other), 0);
        assert_string_not_equal(path, other);
        assert_string_equal(read_text(path, "npmrc"), "offline=true\n");
        assert_string_equal(read_text(other, "npmrc"), "offline=false\n");
        umask(022);
        rm_r(root);
}

static void test_names(void **state) {
        char a[SANDBOX_MACHINE_ID_LEN + 1], b[SANDBOX_MACHINE_ID_LEN + 1];

        assert_true(etc_name_is_reserved("passwd"));
        assert_true(etc_name_is_reserved("machine-id"));
        assert_true(etc_name_is_reserved("resolv.conf"));
        assert_true(etc_name_is_reserved("host.conf"));
        assert_true(etc_name_is_reserved("hosts/x"));
        assert_false(etc_name_is_reserved("hosts.allow"));
        assert_false(etc_name_is_reserved("pip.conf"));

        assert_true(etc_file_path_is_valid("pip.conf"));
        assert_true(etc_file_path_is_valid("a/b-c_d.e"));
        assert_false(etc_file_path_is_valid("../x"));
        assert_false(etc_file_path_is_valid("a/./b"));
        assert_false(etc_file_path_is_valid("a/"));
        assert_false(etc_file_path_is_valid("/a"));
        assert_false(etc_file_path_is_valid("a\nb"));

        assert_true(timezone_is_valid("UTC"));
        assert_true(timezone_is_valid("America/Argentina/Buenos_Aires"));
        assert_true(timezone_is_valid("Etc/GMT+5"));
        assert_false(timezone_is_valid("../UTC"));
        assert_false(timezone_is_valid("/UTC"));

        assert_int_equal(machine_id_generate(a), 0);
        assert_int_equal(machine_id_generate(b), 0);
        assert_int_equal(strlen(a), SANDBOX_MACHINE_ID_LEN);
        assert_int_equal(strspn(a, "0123456789abcdef"), SANDBOX_MACHINE_ID_LEN);
        assert_string_not_equal(a, b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_generated),
                cmocka_unit_test(test_template_parts),
                cmocka_unit_test(test_write),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
