/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "payload-bwrap.h"
#include "strv.h"
#include "template.h"

/* Index of the first occurrence of the sequence a, b[, c] in argv, or -1. */
static int find_seq(char **argv, const char *a, const char *b, const char *c) {
        for (int i = 0; argv[i]; i++)
                if (streq(argv[i], a) && (!b || (argv[i + 1] && streq(argv[i + 1], b))) &&
                    (!c || (argv[i + 1] && argv[i + 2] && streq(argv[i + 2], c))))
                        return i;
        return -1;
}

static void test_argv(void **state) {
        char *binds[] = { (char *) "/usr", (char *) "/lib64", (char *) "/etc/alternatives", NULL };
        char *masks[] = { (char *) "/proc/kallsyms", NULL };
        char *mask_dirs[] = { (char *) "/proc/acpi", NULL };
        Template t = { .name = (char *) "shell", .ro_binds = binds };
        PayloadParams p = {
                .template = &t,
                .bwrap_path = "/usr/bin/bwrap",
                .agent_path = "/usr/libexec/sandboxd/sandbox-init",
                .disk_max = 1048576,
                .proc_masks = masks,
                .proc_mask_dirs = mask_dirs,
                .seccomp_fd = 9,
                .etc_dir = "/run/sandboxd/etc/shell-0123456789abcdef",
                .machine_id = "0123456789abcdef0123456789abcdef",
        };
        _cleanup_strv_free_ char **argv = NULL;
        int sep, i, etc;

        assert_int_equal(bwrap_build_argv(&p, &argv), 0);
        assert_string_equal(argv[0], "/usr/bin/bwrap");

        /* Isolation the spec promises. */
        assert_true(find_seq(argv, "--unshare-all", NULL, NULL) > 0);
        assert_true(find_seq(argv, "--unshare-user", NULL, NULL) > 0);
        /* No nested user namespace: the seccomp policy refuses new ones (test_seccomp). */
        assert_int_equal(find_seq(argv, "--disable-userns", NULL, NULL), -1);
        assert_true(find_seq(argv, "--uid", "1000", NULL) > 0);
        assert_true(find_seq(argv, "--gid", "1000", NULL) > 0);
        assert_true(find_seq(argv, "--cap-drop", "ALL", NULL) > 0);
        assert_true(find_seq(argv, "--new-session", NULL, NULL) > 0);
        /* The agent outlives bwrap's monitor, killed once the sandbox is ready. */
        assert_int_equal(find_seq(argv, "--die-with-parent", NULL, NULL), -1);
        assert_true(find_seq(argv, "--as-pid-1", NULL, NULL) > 0);
        assert_true(find_seq(argv, "--clearenv", NULL, NULL) > 0);
        assert_int_equal(find_seq(argv, "--share-net", NULL, NULL), -1);
        /* Held until in its scope; says its child's pid; gets the policy on its own fd. */
        assert_true(find_seq(argv, "--block-fd", "4", NULL) > 0);
        assert_true(find_seq(argv, "--info-fd", "5", NULL) > 0);
        assert_true(find_seq(argv, "--seccomp", "6", NULL) > 0);

        /* Template root read-only, masks, sized tmpfs, read-only / at the end. */
        assert_true(find_seq(argv, "--ro-bind-try", "/usr", "/usr") > 0);
        assert_true(find_seq(argv, "--ro-bind-try", "/lib64", "/lib64") > 0);
        assert_true(find_seq(argv, "--ro-bind", "/dev/null", "/proc/kallsyms") > find_seq(argv, "--proc", "/proc", NULL));
        assert_true(find_seq(argv, "--tmpfs", "/proc/acpi", NULL) > 0);
        assert_true(find_seq(argv, "--remount-ro", "/proc/acpi", NULL) > 0);
        /* With an empty directory: bound over each masked one, no tmpfs (no superblock). */
        _cleanup_strv_free_ char **argv2 = NULL;
        p.empty_dir = "/run/sandboxd/empty";
        assert_int_equal(bwrap_build_argv(&p, &argv2), 0);
        assert_true(find_seq(argv2, "--ro-bind", "/run/sandboxd/empty", "/proc/acpi") >
                    find_seq(argv2, "--proc", "/proc", NULL));
        assert_int_equal(find_seq(argv2, "--tmpfs", "/proc/acpi", NULL), -1);
        p.empty_dir = NULL;
        i = find_seq(argv, "--tmpfs", "/work", NULL);
        assert_true(i > 4);
        assert_string_equal(argv[i - 1], "0700");
        assert_string_equal(argv[i - 2], "--perms");
        assert_string_equal(argv[i - 3], "1048576");
        assert_string_equal(argv[i - 4], "--size");
        i = find_seq(argv, "--tmpfs", "/tmp", NULL);
        assert_true(i > 2);
        assert_string_equal(argv[i - 2], "--size");
        assert_true(find_seq(argv, "--ro-bind", "/usr/libexec/sandboxd/sandbox-init", "/run/sandbox-init") > 0);
        assert_true(find_seq(argv, "--remount-ro", "/", NULL) > find_seq(argv, "--tmpfs", "/work", NULL));

        /* Its own /etc, never the host's; the template's binds into it come after it. */
        etc = find_seq(argv, "--ro-bind", "/run/sandboxd/etc/shell-0123456789abcdef", "/etc");
        assert_true(etc > 0);
        assert_true(find_seq(argv, "--ro-bind-try", "/etc/alternatives", "/etc/alternatives") > etc);
        assert_true(find_seq(argv, "--ro-bind-data", "7", "/etc/machine-id") > etc);
        assert_int_equal(find_seq(argv, "--ro-bind-try", "/etc", "/etc"), -1);
        assert_int_equal(find_seq(argv, "--ro-bind", "/etc", "/etc"), -1);
        assert_true(find_seq(argv, "--hostname", "sandbox", NULL) > 0);

        /* /dev read-only but for a bounded, world-writable /dev/shm on top of it. */
        i = find_seq(argv, "--tmpfs", "/dev/shm", NULL);
        assert_true(i > find_seq(argv, "--dev", "/dev", NULL));
        assert_string_equal(argv[i - 4], "--size");
        assert_string_equal(argv[i - 3], "67108864");
        assert_string_equal(argv[i - 1], "1777");
        assert_true(find_seq(argv, "--remount-ro", "/dev", NULL) > i);

        /* The agent runs, and is the last thing; its messages come over the control
         * socket once it is ready (no pipe of sandboxd's a running sandbox). */
        sep = find_seq(argv, "--", NULL, NULL);
        assert_true(sep > 0);
        assert_string_equal(argv[sep + 1], "/run/sandbox-init");
        assert_string_equal(argv[sep + 2], "--log-over-control");
        assert_null(argv[sep + 3]);
}

static void test_argv_shm_size(void **state) {
        char *binds[] = { (char *) "/usr", NULL };
        Template t = { .name = (char *) "shell", .ro_binds = binds, .shm_max = 1 << 20 };
        PayloadParams p = {
                .template = &t, .bwrap_path = "/usr/bin/bwrap", .agent_path = "/a", .disk_max = 1 << 20,
                .seccomp_fd = 9,
        };
        _cleanup_strv_free_ char **argv = NULL;
        int i;

        assert_int_equal(bwrap_build_argv(&p, &argv), 0);
        i = find_seq(argv, "--tmpfs", "/dev/shm", NULL);
        assert_true(i > 4);
        assert_string_equal(argv[i - 3], "1048576");
        /* No tree: no /etc and no machine id to bind into it. */
        assert_int_equal(find_seq(argv, "--ro-bind-data", NULL, NULL), -1);
}

/* On disk: /dev/shm is the workspace's shm/, bound (no tmpfs: no superblock of its own,
 * within the workspace's quota), and the agent empties it as it starts. */
static void test_argv_shm_on_disk(void **state) {
        char *binds[] = { (char *) "/usr", NULL };
        Template t = { .name = (char *) "shell", .ro_binds = binds, .shm_max = 1 << 20 };
        PayloadParams p = {
                .template = &t, .bwrap_path = "/usr/bin/bwrap", .agent_path = "/a", .disk_max = 1 << 20,
                .seccomp_fd = 9, .workspace_dir = "/var/lib/sandboxd/workspaces/0123456789abcdef",
                .shm_dir = "/var/lib/sandboxd/workspaces/0123456789abcdef/shm",
        };
        _cleanup_strv_free_ char **argv = NULL, **argv2 = NULL;
        int i, sep;

        assert_int_equal(bwrap_build_argv(&p, &argv), 0);
        i = find_seq(argv, "--bind", "/var/lib/sandboxd/workspaces/0123456789abcdef/shm", "/dev/shm");
        assert_true(i > find_seq(argv, "--dev", "/dev", NULL));
        assert_true(find_seq(argv, "--remount-ro", "/dev", NULL) > i);
        assert_true(find_seq(argv, "--bind", "/var/lib/sandboxd/workspaces/0123456789abcdef/work", "/work") > 0);
        assert_true(find_seq(argv, "--bind", "/var/lib/sandboxd/workspaces/0123456789abcdef/tmp", "/tmp") > 0);
        /* No tmpfs at all but bwrap's root and /dev, and no size of shm_max. */
        assert_int_equal(find_seq(argv, "--tmpfs", NULL, NULL), -1);
        assert_int_equal(find_seq(argv, "--size", NULL, NULL), -1);
        sep = find_seq(argv, "--", NULL, NULL);
        assert_true(sep > 0);
        assert_true(find_seq(argv, "--empty-dev-shm", NULL, NULL) > sep);

        /* A workspace that cannot hold one: a tmpfs /dev/shm as in memory, left alone. */
        p.shm_dir = NULL;
        assert_int_equal(bwrap_build_argv(&p, &argv2), 0);
        i = find_seq(argv2, "--tmpfs", "/dev/shm", NULL);
        assert_true(i > 4);
        assert_string_equal(argv2[i - 3], "1048576");
        assert_int_equal(find_seq(argv2, "--bind", NULL, "/dev/shm"), -1);
        assert_int_equal(find_seq(argv2, "--empty-dev-shm", NULL, NULL), -1);
}

static void test_argv_without_seccomp(void **state) {
        char *binds[] = { (char *) "/usr", NULL };
        Template t = { .name = (char *) "shell", .ro_binds = binds };
        PayloadParams p = {
                .template = &t, .bwrap_path = "/usr/bin/bwrap", .agent_path = "/a", .disk_max = 1 << 20,
                .seccomp_fd = -1,
        };
        _cleanup_strv_free_ char **argv = NULL;

        /* Refused: the policy is what keeps the sandbox from making user namespaces. */
        assert_int_equal(bwrap_build_argv(&p, &argv), -EINVAL);
        assert_null(argv);
}

static void test_parse_info(void **state) {
        const char *full = "{\n    \"child-pid\": 685,\n    \"cgroup-namespace\": 4026532838\n}\n";
        pid_t pid = 0;

        assert_int_equal(bwrap_parse_info(full, strlen(full), &pid), 0);
        assert_int_equal(pid, 685);
        assert_int_equal(bwrap_parse_info(full, 20, &pid), -EAGAIN);
        assert_int_equal(bwrap_parse_info("{\"child-pid\": -1}", 17, &pid), -EBADMSG);
        assert_int_equal(bwrap_parse_info("{\"child-pid\": \"1\"}", 18, &pid), -EBADMSG);
        assert_int_equal(bwrap_parse_info("{}", 2, &pid), -EBADMSG);
        assert_int_equal(bwrap_parse_info("]", 1, &pid), -EBADMSG);
}

/* A killed bwrap monitor is told from a process given its pid later by its start time,
 * which a zombie still shows and which is gone once it is reaped (bwrap_monitor_lingers()). */
static void test_pid_start_time(void **state) {
        uint64_t a = 0, b = 0, z = 0;
        pid_t pid;

        assert_int_equal(payload_pid_start_time(getpid(), &a), 0);
        assert_int_equal(payload_pid_start_time(getpid(), &b), 0);
        assert_true(a > 0);
        assert_true(a == b);

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(0);
        assert_int_equal(waitid(P_PID, (id_t) pid, NULL, WEXITED | WNOWAIT), 0);
        /* A zombie: still there, with its start time, no earlier than ours. */
        assert_int_equal(payload_pid_start_time(pid, &z), 0);
        assert_true(z >= a);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_true(payload_pid_start_time(pid, &z) < 0);
}

static void test_kind_strings(void **state) {
        assert_string_equal(payload_kind_to_string(PAYLOAD_BWRAP), "bwrap");
        assert_int_equal(payload_kind_from_string("docker"), PAYLOAD_DOCKER);
        assert_int_equal(payload_kind_from_string("lxc"), _PAYLOAD_KIND_INVALID);
        assert_int_equal(payload_kind_from_string(NULL), _PAYLOAD_KIND_INVALID);
        assert_null(payload_kind_to_string(_PAYLOAD_KIND_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_argv),
                cmocka_unit_test(test_argv_without_seccomp),
                cmocka_unit_test(test_argv_shm_size),
                cmocka_unit_test(test_argv_shm_on_disk),
                cmocka_unit_test(test_parse_info),
                cmocka_unit_test(test_kind_strings),
                cmocka_unit_test(test_pid_start_time),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
