/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* File operations (file-op.c) through the core, with the test as the sandbox's agent
 * (fake-payload.h): what is refused before the agent is asked (a sandbox not running, a
 * path that is none, bounds of ReadFile, WriteFile and ListFiles, a descriptor of the
 * wrong kind), what the agent is handed (the request and its descriptor), what its
 * answers come to for the caller (data, the errno with the path, FileTooLarge, not a
 * regular file), the slots (FILE_OPS_ACTIVE_MAX at the agent, FILE_OPS_WAITING_MAX
 * waiting, then Busy; FILE_WATCHES_MAX watches), cancelling, and an agent that dies with
 * operations under way. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "fake-payload.h"
#include "file-op.h"

#define SHELL_TEMPLATE                                                                          \
        "{ \"description\": \"a shell\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"] }"

static const char *const templates[] = { "shell", SHELL_TEMPLATE, NULL };
static const SandboxCaller root = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .granted = true };

typedef struct FileAnswer {
        unsigned n;
        bool ok;
        char data[64];
        size_t size;
        SandboxErrorCode code;
        int errno_value;
        char message[512];
} FileAnswer;

static void on_file(const struct agent_file_result *result, const void *data, size_t size,
                    const SandboxError *error, void *userdata) {
        FileAnswer *a = userdata;

        a->n++;
        a->ok = result && !error;
        a->size = size;
        if (size > 0)
                memcpy(a->data, data, MIN(size, sizeof(a->data)));
        a->code = error ? error->code : SANDBOX_ERR_NONE;
        a->errno_value = error ? error->errno_value : 0;
        snprintf(a->message, sizeof(a->message), "%s", error ? sandbox_error_message(error) : "");
}

static Sandbox *running(void) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        sandbox_config_done(&config);
        return a.sandbox;
}

/* The agent takes the next "file" request: its fields (strings valid while *ret_msg
 * lives) and its descriptor, if it carries one (else -EBADF). */
static void agent_take_file(FakeAgent *a, json_object **ret_msg, struct agent_file *ret, int *ret_fd) {
        int fd = -EBADF;
        size_t n;

        *ret_msg = agent_expect(a, "file", &fd, 1, &n);
        assert_int_equal(agent_parse_file(*ret_msg, ret), 0);
        if (n == 0)
                fd = -EBADF;
        if (ret_fd)
                *ret_fd = fd;
        else
                safe_close(fd);
}

static void agent_answer(FakeAgent *a, uint64_t id, int error, mode_t not_regular) {
        agent_say(a, agent_msg_file_result(&(struct agent_file_result) {
                .id = id, .error = error, .not_regular = not_regular }));
}

/* Nothing more from the core for now. */
static void agent_expect_nothing(FakeAgent *a) {
        json_object *msg = NULL;
        int fds[2];
        size_t n;

        run_briefly();
        assert_int_equal(agent_recv(a->fd, &msg, fds, 2, &n), -EAGAIN);
}

static int setup(void **state) {
        fake_core_new(templates);
        return 0;
}

static int teardown(void **state) {
        fake_core_free();
        return 0;
}

static void test_refused_before_the_agent(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        char long_path[4100];
        FileAnswer f = {};
        Sandbox *s;
        int dir;

        /* Not running yet. */
        systemd_fake.hold = "StartTransientUnit";
        Answer c = {};
        SandboxConfig config = {};
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &c, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        s = manager_next_sandbox(manager, NULL);
        assert_true(sandbox_stat_file(s, "a", on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_RUNNING);
        sandbox_error_done(&error);
        fake_systemd_release();
        RUN_UNTIL(c.n > 0);
        assert_int_equal(s->state, SANDBOX_RUNNING);

        /* Not a path: empty, a control character, too long; the same for Move's target. */
        memset(long_path, 'a', sizeof(long_path) - 1);
        long_path[sizeof(long_path) - 1] = 0;
        const char *bad[] = { "", "a\nb", long_path };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_true(sandbox_stat_file(s, bad[i], on_file, &f, NULL, &error) < 0);
                assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
                sandbox_error_done(&error);
        }
        assert_true(sandbox_move_file(s, "a", "b\tc", on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);

        /* Bounds. */
        assert_true(sandbox_read_file(s, "a", (uint64_t) INT64_MAX + 1, 0, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_true(sandbox_read_file(s, "a", 0, FILE_PART_MAX + 1, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_FILE_TOO_LARGE);
        sandbox_error_done(&error);
        assert_true(sandbox_write_file(s, "a", "x", FILE_PART_MAX + 1, NULL, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_FILE_TOO_LARGE);
        sandbox_error_done(&error);
        assert_true(sandbox_list_files(s, "/", 0, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_true(sandbox_list_files(s, "/", AGENT_FILE_DEPTH_MAX + 1, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);

        /* Upload and Download take a regular file, pipe or socket: not a directory. */
        dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        assert_true(sandbox_upload(s, "a", dir, NULL, on_file, &f, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        safe_close(dir);

        /* None of it reached the agent, nor a callback. */
        agent_expect_nothing(agent_of(s));
        assert_int_equal(f.n, 0);
        sandbox_config_done(&config);
}

/* ReadFile: the agent writes into the memfd it is handed; the caller gets those bytes,
 * and FileTooLarge when more than FILE_PART_MAX is there. */
static void test_read(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *msg = NULL, *msg2 = NULL;
        struct agent_file req;
        FileAnswer f = {}, g = {};
        Sandbox *s = running();
        int fd;

        assert_int_equal(sandbox_read_file(s, "notes.txt", 3, 0, on_file, &f, NULL, &error), 0);
        agent_take_file(agent_of(s), &msg, &req, &fd);
        assert_int_equal(req.op, AGENT_FILE_READ);
        assert_string_equal(req.path, "notes.txt");
        assert_int_equal(req.offset, 3);
        /* Length 0 is "to the end", asked as one byte past the bound. */
        assert_int_equal(req.length, FILE_PART_MAX + 1);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "hello", 5), 5);
        safe_close(fd);
        agent_answer(agent_of(s), req.id, 0, 0);
        RUN_UNTIL(f.n > 0);
        assert_true(f.ok);
        assert_int_equal(f.size, 5);
        assert_memory_equal(f.data, "hello", 5);

        assert_int_equal(sandbox_read_file(s, "big", 0, 0, on_file, &g, NULL, &error), 0);
        agent_take_file(agent_of(s), &msg2, &req, &fd);
        assert_int_equal(ftruncate(fd, FILE_PART_MAX + 1), 0);
        safe_close(fd);
        agent_answer(agent_of(s), req.id, 0, 0);
        RUN_UNTIL(g.n > 0);
        assert_false(g.ok);
        assert_int_equal(g.code, SANDBOX_ERR_FILE_TOO_LARGE);
        assert_non_null(strstr(g.message, "big: more than"));
}

/* What the agent met comes back with the path: an errno, a file larger than Download's
 * Max, something not a regular file. */
static void test_agent_errors(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL;
        struct agent_file req;
        FileAnswer a = {}, b = {}, c = {}, d = {};
        Sandbox *s = running();
        int p[2], fd;

        assert_int_equal(sandbox_remove_file(s, "gone", true, on_file, &a, NULL, &error), 0);
        agent_take_file(agent_of(s), &m1, &req, NULL);
        assert_int_equal(req.op, AGENT_FILE_REMOVE);
        assert_true(req.recursive);
        agent_answer(agent_of(s), req.id, ENOENT, 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_ERRNO);
        assert_int_equal(a.errno_value, ENOENT);
        assert_non_null(strstr(a.message, "gone: "));

        /* Download without Max: the sandbox's DiskMax is the bound the agent is given. */
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(sandbox_download(s, "huge", p[1], NULL, on_file, &b, NULL, &error), 0);
        safe_close(p[1]);
        agent_take_file(agent_of(s), &m2, &req, &fd);
        assert_true(fd >= 0);
        safe_close(fd);
        assert_int_equal(req.max, s->config.disk_max);
        agent_answer(agent_of(s), req.id, EFBIG, 0);
        RUN_UNTIL(b.n > 0);
        assert_int_equal(b.code, SANDBOX_ERR_FILE_TOO_LARGE);
        assert_non_null(strstr(b.message, "huge: File too large"));
        safe_close(p[0]);

        assert_int_equal(sandbox_write_file(s, "fifo", "x", 1, &(FileOptions) { .mode = 0600, .append = true },
                                            on_file, &c, NULL, &error), 0);
        agent_take_file(agent_of(s), &m3, &req, &fd);
        assert_int_equal(req.op, AGENT_FILE_WRITE);
        assert_true(req.append);
        assert_int_equal(req.mode, 0600);
        /* The data comes in a descriptor of its own. */
        char buf[4] = {};
        assert_int_equal(pread(fd, buf, sizeof(buf), 0), 1);
        assert_string_equal(buf, "x");
        safe_close(fd);
        agent_answer(agent_of(s), req.id, EINVAL, S_IFIFO);
        RUN_UNTIL(c.n > 0);
        assert_int_equal(c.code, SANDBOX_ERR_NOT_REGULAR_FILE);
        assert_non_null(strstr(c.message, "fifo: not a regular file"));

        /* And success, with nothing read: no data. */
        assert_int_equal(sandbox_make_directory(s, "d/e", true, on_file, &d, NULL, &error), 0);
        agent_take_file(agent_of(s), &m4, &req, NULL);
        assert_int_equal(req.op, AGENT_FILE_MKDIR);
        assert_true(req.parents);
        agent_answer(agent_of(s), req.id, 0, 0);
        RUN_UNTIL(d.n > 0);
        assert_true(d.ok);
        assert_int_equal(d.size, 0);
}

/* FILE_OPS_ACTIVE_MAX at the agent, the next FILE_OPS_WAITING_MAX wait (and go, oldest
 * first, as slots free), beyond that Busy; watches apart, FILE_WATCHES_MAX of them. */
static void test_slots(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        enum { N = FILE_OPS_ACTIVE_MAX + FILE_OPS_WAITING_MAX };
        json_object *msgs[FILE_OPS_ACTIVE_MAX];
        struct agent_file req;
        FileAnswer answers[N] = {}, busy = {}, w = {};
        uint64_t first_id = 0;
        char path[32];
        Sandbox *s = running();

        for (unsigned i = 0; i < N; i++) {
                snprintf(path, sizeof(path), "f%u", i);
                assert_int_equal(sandbox_stat_file(s, path, on_file, &answers[i], NULL, &error), 0);
        }
        assert_true(sandbox_stat_file(s, "one more", on_file, &busy, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        sandbox_error_done(&error);

        for (unsigned i = 0; i < FILE_OPS_ACTIVE_MAX; i++) {
                agent_take_file(agent_of(s), &msgs[i], &req, NULL);
                snprintf(path, sizeof(path), "f%u", i);
                assert_string_equal(req.path, path);
                if (i == 0)
                        first_id = req.id;
        }
        agent_expect_nothing(agent_of(s));

        /* One answered: the oldest waiting goes to the agent. */
        agent_answer(agent_of(s), first_id, 0, 0);
        RUN_UNTIL(answers[0].n > 0);
        json_object_put(msgs[0]);
        agent_take_file(agent_of(s), &msgs[0], &req, NULL);
        snprintf(path, sizeof(path), "f%u", FILE_OPS_ACTIVE_MAX);
        assert_string_equal(req.path, path);

        /* Watches are not in those slots, but bounded. */
        for (unsigned i = 0; i < FILE_WATCHES_MAX; i++) {
                int p[2];

                assert_int_equal(pipe2(p, O_CLOEXEC), 0);
                assert_int_equal(sandbox_watch_directory(s, "/work", true, p[1], on_file, &w, NULL, &error), 0);
                safe_close(p[0]);
        }
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_true(sandbox_watch_directory(s, "/work", false, p[1], on_file, &w, NULL, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        safe_close(p[0]);
        safe_close(p[1]);
        for (unsigned i = 0; i < FILE_OPS_ACTIVE_MAX; i++)
                json_object_put(msgs[i]);

        /* Destroyed: each still under way or waiting is answered, once. */
        fake_destroy(s);
        for (unsigned i = 1; i < N; i++) {
                assert_int_equal(answers[i].n, 1);
                assert_int_equal(answers[i].code, SANDBOX_ERR_SANDBOX_FAILED);
        }
}

/* Cancelled: a waiting one is answered at once and never sent; one with the agent is
 * killed there (its answer then frees the slot). */
static void test_cancel(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *kill = NULL;
        json_object *msgs[FILE_OPS_ACTIVE_MAX];
        struct agent_file req;
        FileAnswer active[FILE_OPS_ACTIVE_MAX] = {}, waiting = {};
        FileOp *first = NULL, *queued = NULL;
        uint64_t first_id = 0;
        int64_t id;
        Sandbox *s = running();

        for (unsigned i = 0; i < FILE_OPS_ACTIVE_MAX; i++)
                assert_int_equal(sandbox_stat_file(s, "a", on_file, &active[i], i == 0 ? &first : NULL, &error), 0);
        assert_int_equal(sandbox_stat_file(s, "queued", on_file, &waiting, &queued, &error), 0);
        for (unsigned i = 0; i < FILE_OPS_ACTIVE_MAX; i++) {
                agent_take_file(agent_of(s), &msgs[i], &req, NULL);
                if (i == 0)
                        first_id = req.id;
        }

        file_op_cancel(queued);
        assert_int_equal(waiting.n, 1);
        assert_int_equal(waiting.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(waiting.message, "went away"));

        file_op_cancel(first);
        kill = agent_expect(agent_of(s), "kill", NULL, 0, NULL);
        assert_int_equal(agent_get_int64(kill, "id", &id), 0);
        assert_int_equal((uint64_t) id, first_id);
        assert_int_equal(active[0].n, 0);
        agent_answer(agent_of(s), first_id, EIO, 0);
        RUN_UNTIL(active[0].n > 0);
        assert_int_equal(active[0].errno_value, EIO);
        /* The queued one is gone: nothing more is sent. */
        agent_expect_nothing(agent_of(s));
        for (unsigned i = 0; i < FILE_OPS_ACTIVE_MAX; i++)
                json_object_put(msgs[i]);
        fake_destroy(s);
        assert_int_equal(waiting.n, 1);
}

/* The agent dies: every operation, with it or waiting, is answered with the failure. */
static void test_agent_dies(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        FileAnswer a[FILE_OPS_ACTIVE_MAX + 1] = {};
        Sandbox *s = running();

        for (unsigned i = 0; i <= FILE_OPS_ACTIVE_MAX; i++)
                assert_int_equal(sandbox_list_files(s, "/work", 2, on_file, &a[i], NULL, &error), 0);
        agent_die(agent_of(s));
        for (unsigned i = 0; i <= FILE_OPS_ACTIVE_MAX; i++) {
                RUN_UNTIL(a[i].n > 0);
                assert_false(a[i].ok);
                assert_int_equal(a[i].code, SANDBOX_ERR_SANDBOX_FAILED);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_refused_before_the_agent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_agent_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_agent_dies, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
