/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Code sent by a client runs from stdin (code-runner.h): the argv is the language's fixed
 * bootstrap, the code runs, and the caller's stdin follows it. Run with the host's sh,
 * bash and python3. */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "code-runner.h"
#include "fd-util.h"

#define MARKER "sandboxd-secret-7f3a"

/* Runs language's bootstrap with code and in on stdin (a memfd, as sandboxd's Stdin is);
 * its stdout into out. Returns the exit status. */
static int run(const char *language, const char *code, const char *in, char *out, size_t size) {
        const char * const *argv = code_runner_argv(language);
        char *buf;
        size_t n;
        int p[2], fd, status;
        ssize_t k, got = 0;
        pid_t pid;

        assert_non_null(argv);
        for (size_t i = 0; argv[i]; i++)
                assert_null(strstr(argv[i], MARKER));
        assert_int_equal(code_runner_stdin(code, strlen(code), in, strlen(in), &buf, &n), 0);
        fd = memfd_new_with_data("stdin", buf, n);
        free(buf);
        assert_true(fd >= 0);
        assert_int_equal(pipe(p), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fd, 0);
                dup2(p[1], 1);
                execvp(argv[0], (char **) argv);
                _exit(127);
        }
        close(fd);
        close(p[1]);
        while ((k = read(p[0], out + got, size - 1 - (size_t) got)) > 0)
                got += k;
        out[got] = 0;
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_stdin_layout(void **state) {
        char *buf;
        size_t n;

        assert_int_equal(code_runner_stdin("ab", 2, "cd", 2, &buf, &n), 0);
        assert_int_equal(n, 6);
        assert_memory_equal(buf, "2\nabcd", 6);
        free(buf);
        assert_null(code_runner_argv("cobol"));
        assert_null(code_runner_argv(NULL));
}

static void test_python(void **state) {
        char out[256];

        if (access("/usr/bin/python3", X_OK) < 0)
                skip();
        assert_int_equal(run("python", "import sys\nx = '" MARKER "'\nprint(len(x), input(), sys.argv)\nsys.exit(3)\n",
                             "from-stdin\n", out, sizeof(out)), 3);
        assert_string_equal(out, "20 from-stdin ['-c']\n");
}

static void test_shells(void **state) {
        char out[256];

        assert_int_equal(run("sh", "m=" MARKER "\nread x\necho \"$x ${#m}\"\nexit 4", "hello\nworld\n", out,
                             sizeof(out)), 4);
        assert_string_equal(out, "hello 20\n");
        if (access("/bin/bash", X_OK) < 0)
                return;
        assert_int_equal(run("bash", "cat", "all of\nit", out, sizeof(out)), 0);
        assert_string_equal(out, "all of\nit");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stdin_layout),
                cmocka_unit_test(test_python),
                cmocka_unit_test(test_shells),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
