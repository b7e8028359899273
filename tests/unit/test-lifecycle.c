/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The sandbox's life, through the core's own code, without a system (fake-payload.h): a
 * create that starts its unit and waits for the agent, execs and their results, pause and
 * resume, destroy, the ephemeral mode, the recycling pool's reset, snapshots, and adoption
 * by a restarted sandboxd; and what goes wrong on the way: a payload that cannot start, a
 * unit systemd fails, an agent that dies in the middle of an exec, a stop during a reset or
 * during a snapshot, a restart during a pause; and the custody (owned, pooled, resetting,
 * kept) and unit states through each of their transitions and races. */

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "fake-payload.h"
#include "manager-quota.h"
#include "sandbox-persist.h"
#include "sandbox-secrets.h"
#include "snapshot.h"
#include "statistics.h"
#include "strv.h"

#define SHELL_TEMPLATE                                                                          \
        "{ \"description\": \"a shell\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"    \
        "  \"environment\": [\"PATH=/usr/bin\"] }"
#define RECYCLE_TEMPLATE                                                                        \
        "{ \"description\": \"recycled\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"   \
        "  \"pool\": { \"size\": 0, \"recycle\": true, \"recycle_max\": 2, \"recycle_idle_sec\": 600 } }"

#define DOCKER_TEMPLATE "{ \"description\": \"a container\", \"payload\": \"docker\", \"image\": \"x:latest\" }"

static const char *const templates[] = { "shell", SHELL_TEMPLATE, "recycled", RECYCLE_TEMPLATE, "docker",
                                         DOCKER_TEMPLATE, NULL };

static const SandboxCaller root = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .granted = true };

/* ---- what the core's callbacks said (Answer, on_sandbox(): fake-payload.h) ---- */

typedef struct ExecAnswer {
        unsigned n;
        int exit_status;
        char out[64];
        SandboxErrorCode code;
        char message[256];
        bool sandbox_gone;      /* the sandbox was dead when the answer came */
} ExecAnswer;

static void on_exec(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        ExecAnswer *a = userdata;

        a->n++;
        a->code = error ? error->code : SANDBOX_ERR_NONE;
        snprintf(a->message, sizeof(a->message), "%s", error ? sandbox_error_message(error) : "");
        if (result) {
                a->exit_status = result->exit_status;
                snprintf(a->out, sizeof(a->out), "%.*s", (int) result->out.size, strempty(result->out.data));
        }
}

static Sandbox *create(const char *template, bool ephemeral) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = { .ephemeral = ephemeral };
        Answer a = {};

        assert_int_equal(manager_create_sandbox(manager, &root, template, &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_non_null(a.sandbox);
        assert_int_equal(a.state, SANDBOX_RUNNING);
        /* Its cgroup, once systemd said where it is (the first) or computed (the rest). */
        RUN_UNTIL(a.sandbox->cgroup);
        sandbox_config_done(&config);
        return a.sandbox;
}

/* A create whose StartTransientUnit systemd holds: the sandbox, starting. */
static Sandbox *create_held(const char *template, Answer *a) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Sandbox *s;

        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, template, &config, on_sandbox, a, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        s = manager_next_sandbox(manager, NULL);
        assert_non_null(s);
        assert_int_equal(s->state, SANDBOX_STARTING);
        sandbox_config_done(&config);
        return s;
}

static int exec_argv(Sandbox *s, const char *arg, ExecAnswer *a, SandboxError *error) {
        ExecConfig c;
        char **argv = STRV("sh", "-c", (char *) arg);
        int r;

        exec_config_init(&c);
        assert_non_null(argv);
        assert_int_equal(exec_config_set_argv(&c, argv, error), 0);
        r = sandbox_exec(s, &c, on_exec, a, error);
        exec_config_done(&c);
        return r;
}

/* An exec's configuration: argv, as the faces decode it. */
static void exec_config_argv(ExecConfig *c, const char *arg) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        exec_config_init(c);
        assert_int_equal(exec_config_set_argv(c, STRV("sh", "-c", (char *) arg), &error), 0);
}

static void destroy(Sandbox *s) {
        Answer a = {};
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &a), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_int_equal(a.state, SANDBOX_DEAD);
        assert_null(manager_find_sandbox(manager, id));
        assert_false(state_file_exists(id));
}

/* Paused, and answered so. */
static void pause_now(Sandbox *s) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer p = {};

        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(p.n > 0);
        assert_int_equal(p.code, SANDBOX_ERR_NONE);
        assert_int_equal(s->state, SANDBOX_PAUSED);
}

static int setup(void **state) {
        fake_core_new(templates);
        return 0;
}

static int teardown(void **state) {
        fake_core_free();
        return 0;
}

/* ---- the life of a sandbox ---- */

static void test_create_exec_destroy(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s;

        s = create("shell", false);
        assert_int_equal(systemd_fake.n_start, 1);
        assert_int_equal(backend.n_unit_started, 1);
        assert_true(state_file_exists(s->id));
        assert_string_equal(s->cgroup + strlen(s->cgroup) - strlen(s->unit), s->unit);
        assert_ptr_equal(manager_get_sandbox(manager, s->id), s);

        assert_int_equal(exec_argv(s, "echo hello; exit 3", &e, &error), 0);
        agent_run_exec(agent_of(s), 3);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.code, SANDBOX_ERR_NONE);
        assert_int_equal(e.exit_status, 3);
        assert_string_equal(e.out, "hello\n");

        /* A persistent sandbox takes many. */
        e = (ExecAnswer) {};
        assert_int_equal(exec_argv(s, "true", &e, &error), 0);
        agent_run_exec(agent_of(s), 0);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.exit_status, 0);

        destroy(s);
        assert_int_equal(systemd_fake.n_stop, 1);
        assert_int_equal(backend.n_stop, 1);
        assert_int_equal(backend.n_free, 1);
}

/* A fleet node's ids end with its number (sandboxd.conf [Fleet] Node=); the rest stays
 * random. */
static void test_fleet_node_in_ids(void **state) {
        static const uint8_t r[8] = { 0xde, 0xad, 0xbe, 0xef, 0x01, 0x23, 0x45, 0x67 };
        char id[SANDBOX_ID_LEN + 1];
        Sandbox *s;

        sandbox_id_format(r, 0, id);
        assert_string_equal(id, "deadbeef01234567");
        sandbox_id_format(r, 0x2a, id);
        assert_string_equal(id, "deadbeef0123452a");
        assert_true(sandbox_id_is_valid(id));
        assert_int_equal(sandbox_id_node(id), 42);
        assert_int_equal(sandbox_id_node("deadbeef012345ff"), 255);
        assert_int_equal(sandbox_id_node("deadbeef0123452"), -EINVAL);
        assert_int_equal(sandbox_id_node("Deadbeef0123452a"), -EINVAL);

        manager->settings.fleet_node = 7;
        for (unsigned i = 0; i < 3; i++) {
                s = create("shell", false);
                assert_int_equal(sandbox_id_node(s->id), 7);
                assert_string_equal(s->id + SANDBOX_ID_LEN - 2, "07");
                destroy(s);
        }
        manager->settings.fleet_node = 0;
}

static void test_ephemeral_answers_once_gone(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("shell", true);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(exec_argv(s, "true", &e, &error), 0);
        agent_run_exec(agent_of(s), 0);
        RUN_UNTIL(e.n > 0);
        /* Answered only once the sandbox is gone: nothing of it is left. */
        assert_int_equal(e.code, SANDBOX_ERR_NONE);
        assert_null(manager_find_sandbox(manager, id));
        assert_int_equal(systemd_fake.n_stop, 1);
}

static void test_ephemeral_refused_exec_lets_it_go(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL, invalid = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("shell", true), *p;
        char id[SANDBOX_ID_LEN + 1];
        ExecConfig c;

        /* Refused by the face (an option it could not decode): the core answers it. */
        snprintf(id, sizeof(id), "%s", s->id);
        exec_config_init(&c);
        assert_int_equal(exec_config_set_argv(&c, STRV("true"), &error), 0);
        sandbox_error_set(&invalid, SANDBOX_ERR_INVALID_OPTION, "Timeout must be at most 3600.");
        exec_config_refuse(&c, -EINVAL, &invalid);
        assert_int_equal(sandbox_exec(s, &c, on_exec, &e, &error), -EINVAL);
        exec_config_done(&c);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        assert_string_equal(sandbox_error_message(&error), "Timeout must be at most 3600.");
        assert_int_equal(e.n, 0);
        /* ... and the sandbox goes, nobody having to destroy it. */
        RUN_UNTIL(!manager_find_sandbox(manager, id));
        assert_false(state_file_exists(id));

        /* A persistent one stays. */
        sandbox_error_done(&error);
        p = create("shell", false);
        exec_config_init(&c);
        assert_int_equal(exec_config_set_argv(&c, STRV("true"), &error), 0);
        exec_config_refuse(&c, -EINVAL, NULL);
        assert_int_equal(sandbox_exec(p, &c, on_exec, &e, &error), -EINVAL);
        exec_config_done(&c);
        run_briefly();
        assert_int_equal(p->state, SANDBOX_RUNNING);
        /* An ephemeral one that ran its command takes no second. */
        destroy(p);
}

static void test_ephemeral_second_exec_is_busy(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {}, second = {};
        Sandbox *s = create("shell", true);
        int out;
        uint64_t id;

        assert_int_equal(exec_argv(s, "sleep 1", &e, &error), 0);
        id = agent_take_exec(agent_of(s), &out);
        assert_int_equal(exec_argv(s, "true", &second, &error), -EBUSY);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        /* The refusal of a second exec does not end the first. */
        run_briefly();
        assert_int_equal(s->state, SANDBOX_RUNNING);
        safe_close(out);
        agent_exit(agent_of(s), id, 0);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.code, SANDBOX_ERR_NONE);
}

/* ---- failures on the way up ---- */

static void test_payload_cannot_start(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        backend.start_error = -EIO;
        assert_true(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error) < 0);
        run_briefly();
        assert_int_equal(a.n, 0);
        assert_int_equal(systemd_fake.n_start, 0);
        assert_int_equal(backend.n_abort, 1);
        assert_null(manager_next_sandbox(manager, NULL));
}

static void test_unit_fails_to_start(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        systemd_fake.start_result = "failed";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(a.message, "systemd could not start"));
        RUN_UNTIL(!manager_next_sandbox(manager, NULL));
        assert_int_equal(backend.n_unit_started, 0);
        assert_true(backend.n_abort >= 1);
        assert_int_equal(manager->statistics.create_failures, 1);
}

static void test_agent_never_ready(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        backend.auto_ready = false;
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);   /* the payload's start timeout */
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(a.message, "did not report ready"));
        RUN_UNTIL(!manager_next_sandbox(manager, NULL));
}

static void test_agent_dies_while_starting(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        backend.auto_ready = false;
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(backend.n_unit_started > 0);
        agent_die(&agents[0]);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(a.message, "its agent exited"));
        RUN_UNTIL(!manager_next_sandbox(manager, NULL));
}

static void test_destroy_while_the_unit_starts(void **state) {
        Answer a = {}, d = {};
        Sandbox *s = create_held("shell", &a);

        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        assert_int_equal(s->state, SANDBOX_STOPPING);
        run_briefly();
        /* Nothing to stop before systemd answers; then its unit is stopped. */
        assert_int_equal(systemd_fake.n_stop, 0);
        fake_systemd_release();
        RUN_UNTIL(d.n > 0 && a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_int_equal(d.code, SANDBOX_ERR_NONE);
        assert_int_equal(systemd_fake.n_stop, 1);
        assert_null(manager_next_sandbox(manager, NULL));
}

/* ---- while it runs ---- */

static void test_agent_dies_mid_exec(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];
        int out;

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(exec_argv(s, "sleep 100", &e, &error), 0);
        (void) agent_take_exec(agent_of(s), &out);
        agent_die(agent_of(s));
        safe_close(out);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(e.message, "agent exited"));
        RUN_UNTIL(!manager_find_sandbox(manager, id));
        assert_int_equal(systemd_fake.n_stop, 1);
}

static void test_malformed_agent_message(void **state) {
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];
        static const char junk[] = "not json";

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(send(agent_of(s)->fd, junk, sizeof(junk) - 1, 0), (ssize_t) sizeof(junk) - 1);
        RUN_UNTIL(!manager_find_sandbox(manager, id));
}

static void test_pause_resume(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer p = {}, r = {};
        Sandbox *s = create("shell", false);

        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        /* One at a time. */
        assert_true(sandbox_pause(s, on_sandbox, &p, &error) < 0);
        sandbox_error_done(&error);
        RUN_UNTIL(p.n > 0);
        assert_int_equal(p.code, SANDBOX_ERR_NONE);
        assert_int_equal(s->state, SANDBOX_PAUSED);
        assert_string_equal(sandbox_get_pause_method(s), "freeze");
        assert_int_equal(systemd_fake.n_freeze, 1);

        assert_int_equal(exec_argv(s, "true", &e, &error), -ESRCH);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_RUNNING);
        sandbox_error_done(&error);
        assert_true(sandbox_pause(s, on_sandbox, &p, &error) < 0);
        sandbox_error_done(&error);

        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(r.n > 0);
        assert_int_equal(r.code, SANDBOX_ERR_NONE);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(systemd_fake.n_thaw, 1);
        assert_true(sandbox_resume(s, on_sandbox, &r, &error) < 0);
        sandbox_error_done(&error);
        destroy(s);
}

static void test_pause_without_freezer_uses_sigstop(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer p = {}, r = {};
        Sandbox *s = create("shell", false);

        systemd_fake.freeze_error = SD_BUS_ERROR_NOT_SUPPORTED;
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(p.n > 0);
        assert_int_equal(p.code, SANDBOX_ERR_NONE);
        assert_string_equal(sandbox_get_pause_method(s), "sigstop");
        assert_int_equal(systemd_fake.n_kill, 1);
        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(r.n > 0);
        assert_int_equal(systemd_fake.n_kill, 2);   /* SIGCONT */
        assert_int_equal(s->state, SANDBOX_RUNNING);

        /* Another refusal of systemd's is the caller's answer, and the sandbox runs on. */
        systemd_fake.freeze_error = SD_BUS_ERROR_ACCESS_DENIED;
        p = (Answer) {};
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(p.n > 0);
        assert_int_equal(p.code, SANDBOX_ERR_SYSTEMD_FAILED);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        destroy(s);
}

static void test_destroy_answers_callers_in_flight(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer p = {}, d1 = {}, d2 = {};
        Sandbox *s = create("shell", false);
        int out;

        assert_int_equal(exec_argv(s, "sleep 100", &e, &error), 0);
        (void) agent_take_exec(agent_of(s), &out);
        systemd_fake.hold = "FreezeUnit";
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        /* Two destroys: both answered. */
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d1), 0);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d2), 0);
        RUN_UNTIL(d1.n > 0 && d2.n > 0);
        assert_int_equal(e.n, 1);
        assert_int_equal(e.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.code, SANDBOX_ERR_NOT_RUNNING);
        safe_close(out);
        fake_systemd_release();
        run_briefly();
        assert_int_equal(p.n, 1);
}

static void test_lifetime_and_idle_timeouts(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_set_timeout(s, 0, 0, &error), 0);
        assert_int_equal(sandbox_get_deadline(s), 0);
        assert_true(sandbox_set_timeout(s, 31ULL * 86400, 0, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_int_equal(sandbox_set_timeout(s, 3600, 1, &error), 0);
        assert_true(sandbox_get_deadline(s) > 0);
        /* Idle for a second: destroyed. */
        RUN_UNTIL(!manager_find_sandbox(manager, id));
}

/* Issue 32: a paused sandbox's lifetime stands still, and counts on from its resume. */
static void test_lifetime_stands_still_while_paused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];
        Answer r = {};

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_set_timeout(s, 1, 0, &error), 0);
        pause_now(s);
        assert_int_equal(sandbox_get_deadline(s), 0);
        assert_true(s->lifetime_left_usec > 0 && s->lifetime_left_usec <= 1000000ULL);
        uint64_t until = now_usec(CLOCK_MONOTONIC) + 1500 * 1000ULL;
        while (now_usec(CLOCK_MONOTONIC) < until)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_ptr_equal(manager_find_sandbox(manager, id), s);
        assert_int_equal(s->state, SANDBOX_PAUSED);
        /* SetTimeout while paused: counted from the resume too. */
        assert_int_equal(sandbox_set_timeout(s, 1, 0, &error), 0);
        assert_int_equal(sandbox_get_deadline(s), 0);
        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(r.n > 0);
        assert_true(sandbox_get_deadline(s) > 0);
        RUN_UNTIL(!manager_find_sandbox(manager, id));
}

/* A paused sandbox is idle to an idle action that takes it further (hibernate), and to no
 * other. */
static void test_paused_sandbox_idles_to_hibernate(void **state) {
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        s->config.idle_timeout_sec = 1;
        s->config.idle_action = IDLE_ACTION_PAUSE;
        pause_now(s);
        sandbox_update_idle_timer(s);
        assert_null(s->idle_source);
        s->config.idle_action = IDLE_ACTION_HIBERNATE;
        sandbox_update_idle_timer(s);
        assert_non_null(s->idle_source);
        /* Hibernated (or, where that fails here, ended): either way no longer a paused sandbox. */
        RUN_UNTIL(!manager_find_sandbox(manager, id) || manager_find_sandbox(manager, id)->state != SANDBOX_PAUSED);
}

static void test_background_process(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *kill = NULL;
        ExecAnswer w = {};
        ExecConfig c;
        Exec *e;
        Sandbox *s = create("shell", false);
        uint64_t id, agent_id;
        ExecOutput o;
        int out;

        exec_config_init(&c);
        assert_int_equal(exec_config_set_argv(&c, STRV("sleep", "100"), &error), 0);
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), 0);
        exec_config_done(&c);
        agent_id = agent_take_exec(agent_of(s), &out);
        assert_int_equal(write(out, "partial\n", 8), 8);
        RUN_UNTIL((e = sandbox_find_process(s, id)) && exec_get_pid(e) == 42 && exec_get_result(e)->out.total == 8);
        assert_true(exec_is_running(e));
        assert_int_equal(exec_read_output(e, 0, 0, &o, &error), 0);
        assert_int_equal(o.out_size, 8);
        assert_true(sandbox_next_process(s, NULL) == e);
        assert_int_equal(sandbox_get_process(s, 9999, &e, &error), -ECHILD);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_PROCESS);
        sandbox_error_done(&error);
        assert_int_equal(sandbox_get_process(s, id, &e, &error), 0);

        assert_int_equal(exec_wait(e, 0, on_exec, &w, &error), 0);
        assert_int_equal(exec_signal(e, SIGTERM, &error), 0);
        kill = agent_expect(agent_of(s), "kill", NULL, 0, NULL);
        assert_int_equal(msg_id(kill), agent_id);
        safe_close(out);
        agent_say(agent_of(s), agent_msg_exit(&(struct agent_exit) { .id = agent_id, .code = -1, .signal = SIGTERM }));
        RUN_UNTIL(w.n > 0);
        assert_int_equal(w.exit_status, 128 + SIGTERM);
        assert_false(exec_is_running(e));
        /* Kept for its result. */
        assert_ptr_equal(sandbox_find_process(s, id), e);
        destroy(s);
}

static void test_destroy_waits_for_the_payload(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer d = {};
        Sandbox *s = create("shell", false);

        backend.hold_stop = true;
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        RUN_UNTIL(backend.stop_held);
        assert_int_equal(s->state, SANDBOX_STOPPING);
        /* Going: nothing new starts in it, and it is not answered before its unit stops. */
        assert_int_equal(exec_argv(s, "true", &e, &error), -ESRCH);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_RUNNING);
        run_briefly();
        assert_int_equal(d.n, 0);
        assert_int_equal(systemd_fake.n_stop, 0);
        fake_payload_stopped();
        RUN_UNTIL(d.n > 0);
        assert_int_equal(systemd_fake.n_stop, 1);
        assert_null(manager_next_sandbox(manager, NULL));
}


static unsigned n_exec_records;

static void on_exec_record(const ExecRecordEvent *ev, void *userdata) {
        assert_string_equal(ev->argv[0], "sh");
        n_exec_records++;
}

static void test_exec_timeout_kills_and_records(void **state) {
        static const ManagerHooks hooks = { .exec_record = on_exec_record };
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *kill = NULL;
        ManagerSubscription *sub = NULL;
        ExecAnswer e = {};
        ExecConfig c;
        Sandbox *s = create("shell", false);
        uint64_t id;
        int out;

        n_exec_records = 0;
        assert_int_equal(manager_subscribe(manager, &hooks, NULL, &sub), 0);
        exec_config_argv(&c, "sleep 100");
        c.timeout_usec = 50 * 1000;
        c.timeout_set = true;
        c.stdin_data = strdup("input");
        c.stdin_size = 5;
        assert_int_equal(sandbox_exec(s, &c, on_exec, &e, &error), 0);
        exec_config_done(&c);
        id = agent_take_exec(agent_of(s), &out);
        /* At its timeout the agent is told to kill it, and its end says so. */
        kill = agent_expect(agent_of(s), "kill", NULL, 0, NULL);
        assert_int_equal(msg_id(kill), id);
        safe_close(out);
        agent_say(agent_of(s), agent_msg_exit(&(struct agent_exit) { .id = id, .code = -1, .signal = SIGKILL }));
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.exit_status, 128 + SIGKILL);
        RUN_UNTIL(n_exec_records == 1);
        sub = manager_unsubscribe(sub);
        destroy(s);
}

static void test_exec_timeout_stands_still_while_paused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *kill = NULL;
        ExecAnswer e = {};
        Answer r = {};
        ExecConfig c;
        Sandbox *s = create("shell", false);
        uint64_t id;
        int out;

        exec_config_argv(&c, "sleep 100");
        c.timeout_usec = 100 * 1000;
        c.timeout_set = true;
        assert_int_equal(sandbox_exec(s, &c, on_exec, &e, &error), 0);
        exec_config_done(&c);
        id = agent_take_exec(agent_of(s), &out);
        pause_now(s);
        /* Paused longer than its timeout: not killed meanwhile. */
        usleep(150 * 1000);
        run_briefly();
        assert_int_equal(e.n, 0);
        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(r.n > 0);
        kill = agent_expect(agent_of(s), "kill", NULL, 0, NULL);
        assert_int_equal(msg_id(kill), id);
        safe_close(out);
        agent_exit(agent_of(s), id, 0);
        RUN_UNTIL(e.n > 0);
        destroy(s);
}

static void test_exec_output_to_the_callers_descriptors(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        ExecConfig c;
        Sandbox *s = create("shell", false);
        int mine[2], out;
        char buf[16] = {};
        uint64_t id;

        assert_int_equal(pipe2(mine, O_CLOEXEC), 0);
        exec_config_argv(&c, "echo hi");
        c.stdout_fd = mine[1];
        assert_int_equal(sandbox_exec(s, &c, on_exec, &e, &error), 0);
        exec_config_done(&c);
        id = agent_take_exec(agent_of(s), &out);
        assert_int_equal(write(out, "through\n", 8), 8);
        safe_close(out);
        agent_exit(agent_of(s), id, 0);
        RUN_UNTIL(e.n > 0);
        /* Not captured: it went to the caller's own pipe. */
        assert_string_equal(e.out, "");
        assert_int_equal(read(mine[0], buf, sizeof(buf) - 1), 8);
        assert_string_equal(buf, "through\n");
        safe_close(mine[0]);
        destroy(s);
}

static void test_terminal(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *msg = NULL, *resize = NULL;
        struct agent_winsize ws = {};
        ExecConfig c;
        Exec *e;
        Sandbox *s = create("shell", false);
        int in[2], out[2], fds[AGENT_EXEC_NFDS];
        uint64_t id, agent_id;
        size_t n;

        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        exec_config_argv(&c, "sh");
        c.tty = true;
        c.tty_rows = 30;
        c.tty_cols = 100;
        /* A terminal needs both of the caller's descriptors, or neither (sandboxd's pipes). */
        c.stdout_fd = fcntl(out[1], F_DUPFD_CLOEXEC, 3);
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), -EINVAL);
        sandbox_error_done(&error);
        c.stdout_fd = safe_close(c.stdout_fd);
        c.stdin_fd = in[0];
        c.stdout_fd = out[1];
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), 0);
        exec_config_done(&c);
        msg = agent_expect(agent_of(s), "exec", fds, AGENT_EXEC_NFDS, &n);
        assert_int_equal(agent_parse_exec_tty(msg, &ws), 1);
        assert_int_equal(ws.rows, 30);
        agent_id = msg_id(msg);
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
        agent_say(agent_of(s), agent_msg_started(agent_id, 7));
        RUN_UNTIL((e = sandbox_find_process(s, id)) && exec_get_pid(e) == 7);
        assert_int_equal(exec_resize_terminal(e, 0, 10, &error), -EINVAL);
        sandbox_error_done(&error);
        assert_int_equal(exec_resize_terminal(e, 40, 120, &error), 0);
        resize = agent_expect(agent_of(s), "resize", NULL, 0, NULL);
        assert_int_equal(agent_parse_resize(resize, &id, &ws), 0);
        assert_int_equal(ws.cols, 120);
        assert_string_equal(exec_get_argv(e)[0], "sh");
        safe_close(in[1]);
        safe_close(out[0]);
        destroy(s);
}

/* Reads what fds[0] has (non-blocking): the bytes, or -1 (EAGAIN: nothing yet). */
static ssize_t read_now(int fd, char *buf, size_t size) {
        ssize_t k = read(fd, buf, size);

        assert_true(k >= 0 || errno == EAGAIN);
        return k;
}

/* Input written after a resize reaches the terminal once the agent has resized it (its
 * "resized", protocol version 6), so what is typed after a resize meets the new size; what
 * was written before goes at once. An agent that never answers (older than version 6) is
 * waited for EXEC_RESIZE_WAIT_USEC, then the input goes. */
static void test_terminal_input_waits_for_resize(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *msg = NULL, *r1 = NULL, *r2 = NULL, *r3 = NULL;
        Sandbox *s = create("shell", false);
        int fds[AGENT_EXEC_NFDS];
        uint64_t id, agent_id, t0;
        char buf[64];
        ExecConfig c;
        size_t n;
        Exec *e;

        exec_config_argv(&c, "sh");
        c.tty = true;
        c.tty_rows = 24;
        c.tty_cols = 80;
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), 0);
        exec_config_done(&c);
        msg = agent_expect(agent_of(s), "exec", fds, AGENT_EXEC_NFDS, &n);
        agent_id = msg_id(msg);
        agent_say(agent_of(s), agent_msg_started(agent_id, 11));
        RUN_UNTIL((e = sandbox_find_process(s, id)) && exec_get_pid(e) == 11);
        assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);

        assert_int_equal(exec_write_stdin(e, "before\n", 7, &error), 0);
        assert_int_equal(exec_resize_terminal(e, 40, 120, &error), 0);
        assert_int_equal(exec_write_stdin(e, "after\n", 6, &error), 0);
        r1 = agent_expect(agent_of(s), "resize", NULL, 0, NULL);
        assert_int_equal(msg_id(r1), agent_id);
        run_briefly();
        assert_int_equal(read_now(fds[0], buf, sizeof(buf)), 7);
        assert_memory_equal(buf, "before\n", 7);
        assert_int_equal(read_now(fds[0], buf, sizeof(buf)), -1);

        /* Two resizes: it waits for both answers. */
        assert_int_equal(exec_resize_terminal(e, 41, 121, &error), 0);
        r2 = agent_expect(agent_of(s), "resize", NULL, 0, NULL);
        agent_say(agent_of(s), agent_msg_resized(agent_id));
        run_briefly();
        assert_int_equal(read_now(fds[0], buf, sizeof(buf)), -1);
        /* More input waits behind it, in order. */
        assert_int_equal(exec_write_stdin(e, "exit\n", 5, &error), 0);
        agent_say(agent_of(s), agent_msg_resized(agent_id));
        RUN_UNTIL(read_now(fds[0], buf, sizeof(buf)) == 11);
        assert_memory_equal(buf, "after\nexit\n", 11);

        /* An agent that does not answer: the input goes after EXEC_RESIZE_WAIT_USEC. */
        t0 = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(exec_resize_terminal(e, 50, 132, &error), 0);
        r3 = agent_expect(agent_of(s), "resize", NULL, 0, NULL);
        assert_int_equal(exec_write_stdin(e, "late\n", 5, &error), 0);
        RUN_UNTIL(read_now(fds[0], buf, sizeof(buf)) == 5);
        assert_true(now_usec(CLOCK_MONOTONIC) - t0 >= EXEC_RESIZE_WAIT_USEC);
        assert_memory_equal(buf, "late\n", 5);
        /* Its answer, late, changes nothing: input goes at once again. */
        agent_say(agent_of(s), agent_msg_resized(agent_id));
        run_briefly();
        assert_int_equal(exec_write_stdin(e, "now\n", 4, &error), 0);
        assert_int_equal(read_now(fds[0], buf, sizeof(buf)), 4);

        /* Closed while input waits for an answer: closed once it is out. */
        assert_int_equal(exec_resize_terminal(e, 51, 133, &error), 0);
        assert_int_equal(exec_write_stdin(e, "bye\n", 4, &error), 0);
        assert_int_equal(exec_close_stdin(e, &error), 0);
        run_briefly();
        assert_int_equal(read_now(fds[0], buf, sizeof(buf)), -1);
        agent_say(agent_of(s), agent_msg_resized(agent_id));
        RUN_UNTIL(read_now(fds[0], buf, sizeof(buf)) == 4);
        assert_memory_equal(buf, "bye\n", 4);
        RUN_UNTIL(read_now(fds[0], buf, sizeof(buf)) == 0);

        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
        destroy(s);
}

typedef struct Followed {
        char data[64];
        size_t size;
} Followed;

static void on_followed(Exec *e, bool is_stderr, const void *data, size_t size, void *userdata) {
        Followed *f = userdata;

        assert_false(is_stderr);
        assert_true(f->size + size <= sizeof(f->data));
        memcpy(f->data + f->size, data, size);
        f->size += size;
}

/* StdinPipe: what is written reaches the process's input in order, what its pipe has no
 * room for waits (bounded: Busy), close ends it; a follower sees the output as it comes,
 * and holding it stops the reading. */
static void test_stdin_and_follow(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *msg = NULL;
        _cleanup_free_ char *big = malloc(EXEC_STDIN_PENDING_MAX);
        Sandbox *s = create("shell", false);
        int fds[AGENT_EXEC_NFDS];
        Followed seen = {};
        ExecFollower *f;
        uint64_t id, agent_id, n_read = 0;
        char buf[64 * 1024];
        ExecConfig c;
        ssize_t k;
        size_t n;
        Exec *e;

        assert_non_null(big);
        memset(big, 'b', EXEC_STDIN_PENDING_MAX);
        exec_config_argv(&c, "cat");
        c.stdin_pipe = true;
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), 0);
        exec_config_done(&c);
        msg = agent_expect(agent_of(s), "exec", fds, AGENT_EXEC_NFDS, &n);
        agent_id = msg_id(msg);
        agent_say(agent_of(s), agent_msg_started(agent_id, 9));
        RUN_UNTIL((e = sandbox_find_process(s, id)) && exec_get_pid(e) == 9);

        assert_int_equal(exec_write_stdin(e, "hello ", 6, &error), 0);
        assert_int_equal(exec_write_stdin(e, "world", 5, &error), 0);
        assert_int_equal(read(fds[0], buf, sizeof(buf)), 11);
        assert_memory_equal(buf, "hello world", 11);

        /* The pipe full, at most 1 MiB more waits in the core, then Busy, nothing taken. */
        assert_int_equal(exec_write_stdin(e, big, EXEC_STDIN_PENDING_MAX, &error), 0);
        assert_int_equal(exec_write_stdin(e, big, EXEC_STDIN_PENDING_MAX, &error), -EBUSY);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        sandbox_error_done(&error);
        assert_int_equal(exec_close_stdin(e, &error), 0);
        /* Closed (once what waits is out): no more, and the reader sees all, then EOF. */
        assert_int_equal(exec_write_stdin(e, "x", 1, &error), -EINVAL);
        sandbox_error_done(&error);
        assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
        for (;;) {
                k = read(fds[0], buf, sizeof(buf));
                if (k == 0)
                        break;
                if (k < 0) {
                        assert_int_equal(errno, EAGAIN);
                        assert_int_equal(sd_event_run(event, 100000), 1);
                        continue;
                }
                n_read += (uint64_t) k;
        }
        assert_int_equal(n_read, EXEC_STDIN_PENDING_MAX);

        /* Following: each piece as it is read; held, nothing is read. */
        assert_int_equal(exec_follow(e, on_followed, &seen, &f), 0);
        assert_int_equal(write(fds[1], "one", 3), 3);
        RUN_UNTIL(seen.size == 3);
        exec_follower_hold(f, true);
        assert_int_equal(write(fds[1], "two", 3), 3);
        for (int i = 0; i < 5; i++)
                (void) sd_event_run(event, 10000);
        assert_int_equal(seen.size, 3);
        assert_int_equal(exec_get_result(e)->out.total, 3);
        exec_follower_hold(f, false);
        RUN_UNTIL(seen.size == 6);
        assert_memory_equal(seen.data, "onetwo", 6);
        exec_follower_free(f);

        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
        destroy(s);
}

static void test_wait_times_out(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer w = {};
        ExecConfig c;
        Exec *e;
        Sandbox *s = create("shell", false);
        uint64_t id;
        int out;

        exec_config_argv(&c, "sleep 100");
        assert_int_equal(sandbox_start_process(s, &c, &id, &error), 0);
        exec_config_done(&c);
        (void) agent_take_exec(agent_of(s), &out);
        e = sandbox_find_process(s, id);
        assert_non_null(e);
        assert_int_equal(exec_wait(e, 3601, on_exec, &w, &error), -EINVAL);
        sandbox_error_done(&error);
        assert_int_equal(exec_signal(e, 999, &error), -EINVAL);
        sandbox_error_done(&error);
        assert_int_equal(exec_wait(e, 1, on_exec, &w, &error), 0);
        RUN_UNTIL(w.n > 0);
        assert_int_equal(w.code, SANDBOX_ERR_STILL_RUNNING);
        /* Its sandbox going ends the process, and those waiting learn so. */
        w = (ExecAnswer) {};
        assert_int_equal(exec_wait(e, 0, on_exec, &w, &error), 0);
        safe_close(out);
        destroy(s);
        assert_int_equal(w.n, 1);
        assert_int_equal(w.code, SANDBOX_ERR_SANDBOX_FAILED);
}

static void test_exec_after_the_agent_is_gone(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        agent_die(agent_of(s));
        /* Before the loop notices: the command cannot be handed over. */
        assert_true(exec_argv(s, "true", &e, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_SANDBOX_FAILED);
        RUN_UNTIL(!manager_find_sandbox(manager, id));
        assert_int_equal(e.n, 0);
}

/* ---- the recycling pool ---- */

static void agent_reset(FakeAgent *a, int error) {
        _cleanup_json_ json_object *reset = agent_expect(a, "reset", NULL, 0, NULL);

        agent_say(a, agent_msg_reset_result(msg_id(reset), error));
}

static void test_recycled_for_the_same_owner(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer rel = {};
        Sandbox *s = create("recycled", false), *again;
        char first[SANDBOX_ID_LEN + 1];
        FakeAgent *a = agent_of(s);

        snprintf(first, sizeof(first), "%s", s->id);
        assert_true(recycle_can_keep(s));
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        /* Gone for its user at once; reset meanwhile. */
        assert_null(manager_get_sandbox(manager, first));
        agent_reset(a, 0);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(rel.code, SANDBOX_ERR_NONE);
        assert_int_equal(rel.state, SANDBOX_RUNNING);
        assert_int_equal(backend.n_renew, 1);
        assert_int_equal(pool_count_released(manager, s), 1);

        /* The next create of that owner gets it, under a new id, as the same unit. */
        again = create("recycled", false);
        assert_ptr_equal(again, s);
        assert_string_not_equal(again->id, first);
        assert_string_equal(sandbox_get_source(again), "recycled");
        assert_int_equal(sandbox_get_recycles(again), 1);
        assert_int_equal(systemd_fake.n_start, 1);

        assert_int_equal(exec_argv(again, "true", &e, &error), 0);
        agent_run_exec(a, 0);
        RUN_UNTIL(e.n > 0);
        destroy(again);
}

/* Under systemd, a recycled sandbox's control socket is filed in the fd store under its
 * new id once handed out (the old name dropped): what a restarted sandboxd looks for. */
static void test_recycled_refiled_in_the_fd_store(void **state) {
        _cleanup_close_ int notify = notify_socket_new();
        Answer rel = {};
        Sandbox *s = create("recycled", false), *again;
        char first[SANDBOX_ID_LEN + 1], text[256], expect[128];
        int fd;

        snprintf(first, sizeof(first), "%s", s->id);
        assert_true(notify_recv(notify, text, sizeof(text), &fd));
        safe_close(fd);
        snprintf(expect, sizeof(expect), "FDSTORE=1\nFDNAME=ctl-%s", first);
        assert_string_equal(text, expect);

        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        agent_reset(agent_of(s), 0);
        RUN_UNTIL(rel.n > 0);
        again = create("recycled", false);
        assert_ptr_equal(again, s);

        assert_true(notify_recv(notify, text, sizeof(text), &fd));
        assert_true(fd < 0);
        snprintf(expect, sizeof(expect), "FDSTOREREMOVE=1\nFDNAME=ctl-%s", first);
        assert_string_equal(text, expect);
        assert_true(notify_recv(notify, text, sizeof(text), &fd));
        assert_true(fd >= 0);
        safe_close(fd);
        snprintf(expect, sizeof(expect), "FDSTORE=1\nFDNAME=ctl-%s", again->id);
        assert_string_equal(text, expect);
        assert_false(notify_recv(notify, text, sizeof(text), &fd));

        destroy(again);
        assert_int_equal(unsetenv("NOTIFY_SOCKET"), 0);
}

/* An owner with two sandboxes being reset (one working, one resetting, alternately): its
 * next create waits for a reset rather than start a unit, and is handed that sandbox once
 * kept; or, when that reset fails, goes on and gets a new one. */
static void test_create_waits_for_the_reset(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};

        for (int fail = 0; fail <= 1; fail++) {
                Answer rel[2] = {}, c = {};
                Sandbox *s[2] = { create("recycled", false), create("recycled", false) }, *waited;
                unsigned starts;

                for (unsigned i = 0; i < 2; i++)
                        assert_int_equal(sandbox_release(s[i], on_sandbox, &rel[i]), 0);
                starts = systemd_fake.n_start;
                assert_int_equal(manager_create_sandbox(manager, &root, "recycled", &config, on_sandbox, &c,
                                                        &error), 0);
                run_briefly();
                assert_int_equal(c.n, 0);
                waited = s[0]->recycle_waiter ? s[0] : s[1];
                assert_non_null(waited->recycle_waiter);
                agent_reset(agent_of(waited), fail ? EIO : 0);
                RUN_UNTIL(c.n > 0);
                assert_int_equal(c.code, SANDBOX_ERR_NONE);
                assert_int_equal(c.state, SANDBOX_RUNNING);
                if (fail) {
                        assert_ptr_not_equal(c.sandbox, s[0]);
                        assert_ptr_not_equal(c.sandbox, s[1]);
                        assert_int_equal(systemd_fake.n_start, starts + 1);
                } else {
                        assert_ptr_equal(c.sandbox, waited);
                        assert_int_equal(waited->custody, SANDBOX_OWNED);
                        assert_int_equal(systemd_fake.n_start, starts);
                }
                /* The other one's reset, and nothing kept is left for the next round. */
                agent_reset(agent_of(waited == s[0] ? s[1] : s[0]), 0);
                RUN_UNTIL(rel[0].n > 0 && rel[1].n > 0);
                destroy(c.sandbox);
                while (manager->pooled)
                        destroy(manager->pooled);
        }
        sandbox_config_done(&config);
}

/* Released with a command running: it ends, answered as a destroy would; and no more are
 * kept than the template's recycle_max. */
static void test_release_ends_what_runs_and_keeps_at_most_max(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer rel[3] = {};
        Sandbox *s[3];
        int out;

        for (unsigned i = 0; i < 3; i++)
                s[i] = create("recycled", false);
        assert_int_equal(exec_argv(s[0], "sleep 100", &e, &error), 0);
        (void) agent_take_exec(agent_of(s[0]), &out);
        assert_int_equal(sandbox_release(s[0], on_sandbox, &rel[0]), 0);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_non_null(strstr(e.message, "released while the command ran"));
        safe_close(out);
        agent_reset(agent_of(s[0]), 0);
        RUN_UNTIL(rel[0].n > 0);
        assert_int_equal(rel[0].state, SANDBOX_RUNNING);

        assert_int_equal(sandbox_release(s[1], on_sandbox, &rel[1]), 0);
        agent_reset(agent_of(s[1]), 0);
        RUN_UNTIL(rel[1].n > 0);
        assert_int_equal(pool_count_released(manager, s[1]), 2);
        /* recycle_max is 2: the third is destroyed. */
        assert_false(recycle_can_keep(s[2]));
        assert_int_equal(sandbox_release(s[2], on_sandbox, &rel[2]), 0);
        RUN_UNTIL(rel[2].n > 0);
        assert_int_equal(rel[2].state, SANDBOX_DEAD);
        assert_int_equal(pool_count_released(manager, s[1]), 2);
}

static void test_ephemeral_recycled_after_its_exec(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("recycled", true);
        FakeAgent *a = agent_of(s);

        assert_int_equal(s->use, SANDBOX_FRESH);
        assert_int_equal(exec_argv(s, "true", &e, &error), 0);
        assert_int_equal(s->use, SANDBOX_USED);
        agent_run_exec(a, 0);
        RUN_UNTIL(e.n > 0);
        /* Answered before the reset. */
        assert_int_equal(s->custody, SANDBOX_RESETTING);
        assert_int_equal(s->use, SANDBOX_USED);
        agent_reset(a, 0);
        RUN_UNTIL(s->custody == SANDBOX_KEPT);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        /* Reset, it takes a command again. */
        assert_int_equal(s->use, SANDBOX_FRESH);
        assert_int_equal(pool_count_released(manager, s), 1);
}

static void test_reset_that_fails_destroys(void **state) {
        Answer rel = {};
        Sandbox *s = create("recycled", false);
        FakeAgent *a = agent_of(s);

        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        agent_reset(a, ETIMEDOUT);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_DEAD);
        RUN_UNTIL(!manager_next_sandbox(manager, NULL));

        /* The payload's renewal failing does the same. */
        rel = (Answer) {};
        s = create("recycled", false);
        backend.renew_failure = "a process was left in the unit";
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        agent_reset(agent_of(s), 0);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_DEAD);
}

static void test_renewal_answers_late(void **state) {
        Answer rel = {};
        Sandbox *s = create("recycled", false);

        backend.hold_renew = true;
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        agent_reset(agent_of(s), 0);
        RUN_UNTIL(backend.renew_held);
        run_briefly();
        assert_int_equal(rel.n, 0);
        assert_true(sandbox_is_resetting(s));
        fake_payload_renewed(NULL);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_RUNNING);
        assert_false(sandbox_is_resetting(s));
        assert_true(sandbox_is_kept(s));
}

static void test_stop_during_reset(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer rel = {}, d = {}, waited = {}, rel2 = {};
        Sandbox *s = create("recycled", false), *t = create("recycled", false);
        FakeAgent *a = agent_of(s);

        /* Two of the owner's being reset: a create waits for one. */
        backend.hold_renew = true;
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        assert_int_equal(sandbox_release(t, on_sandbox, &rel2), 0);
        agent_reset(a, 0);
        RUN_UNTIL(backend.renew_held);
        assert_int_equal(manager_create_sandbox(manager, &root, "recycled", &config, on_sandbox, &waited, &error), 0);
        /* Stopped while being reset: not kept, and not handed to the waiting create. */
        assert_ptr_equal(backend.renew_held, s);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        RUN_UNTIL(d.n > 0 && rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_DEAD);
        /* The create goes on without it: a sandbox of its own, never a NULL one. */
        RUN_UNTIL(waited.n > 0);
        assert_int_equal(waited.code, SANDBOX_ERR_NONE);
        assert_non_null(waited.sandbox);
        assert_int_equal(waited.state, SANDBOX_RUNNING);
        assert_string_not_equal(waited.id, d.id);
        sandbox_config_done(&config);

        /* The other one's reset ends as usual: kept. */
        agent_reset(agent_of(t), 0);
        RUN_UNTIL(backend.renew_held == t);
        fake_payload_renewed(NULL);
        RUN_UNTIL(rel2.n > 0);
        assert_int_equal(rel2.state, SANDBOX_RUNNING);
}

/* The public entry points refuse a NULL object with -EINVAL (assert_return()), and leave
 * what they were given alone. */
static void test_entry_points_refuse_null(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};
        Sandbox *s = NULL;

        assert_int_equal(manager_create_sandbox(manager, NULL, "shell", &config, on_sandbox, &a, &error), -EINVAL);
        assert_int_equal(manager_create_sandbox(NULL, &root, "shell", &config, on_sandbox, &a, &error), -EINVAL);
        assert_int_equal(manager_lookup_sandbox(manager, &root, NULL, &s, &error), -EINVAL);
        assert_int_equal(sandbox_destroy(NULL, on_sandbox, &a), -EINVAL);
        assert_int_equal(sandbox_pause(NULL, on_sandbox, &a, &error), -EINVAL);
        assert_int_equal(sandbox_exec(NULL, NULL, NULL, NULL, &error), -EINVAL);
        assert_int_equal(snapshot_remove(manager, NULL, &error), -EINVAL);
        run_briefly();
        assert_int_equal(a.n, 0);
        assert_null(s);
        assert_false(sandbox_error_is_set(&error));
        assert_null(manager_next_sandbox(manager, NULL));
}

/* ---- the explicit states: custody and unit ---- */

static void test_unit_states(void **state) {
        Answer a = {}, d = {};
        Sandbox *s = create_held("shell", &a);

        assert_int_equal(s->unit_state, SANDBOX_UNIT_STARTING);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        fake_systemd_release();
        RUN_UNTIL(a.n > 0);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(s->unit_state, SANDBOX_UNIT_STARTED);

        systemd_fake.hold = "StopUnit";
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(s->state, SANDBOX_STOPPING);
        assert_int_equal(s->unit_state, SANDBOX_UNIT_STOPPING);
        /* A second destroy while the stop job runs asks systemd nothing more. */
        assert_int_equal(sandbox_destroy(s, NULL, NULL), 0);
        run_briefly();
        assert_int_equal(systemd_fake.n_held, 1);
        fake_systemd_release();
        RUN_UNTIL(d.n > 0);
        assert_int_equal(d.state, SANDBOX_DEAD);
        assert_int_equal(systemd_fake.n_stop, 1);
}

/* A Pause or Resume in flight is its own state: the sandbox runs (or stays paused) until
 * systemd answers, takes no other Pause, Resume, Exec or snapshot meanwhile, and the
 * freeze settles before the state changes. */
static void test_freeze_states(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Answer p = {}, r = {}, again = {};
        Sandbox *s = create("shell", false);

        assert_int_equal(s->freeze, SANDBOX_FREEZE_NONE);
        systemd_fake.hold = "FreezeUnit";
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(s->freeze, SANDBOX_FREEZE_PAUSING);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_true(sandbox_pause(s, on_sandbox, &again, &error) < 0);
        assert_non_null(strstr(sandbox_error_message(&error), "being paused or resumed"));
        sandbox_error_done(&error);
        assert_true(exec_argv(s, "true", &e, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_RUNNING);
        sandbox_error_done(&error);
        fake_systemd_release();
        RUN_UNTIL(p.n > 0);
        assert_int_equal(s->freeze, SANDBOX_FREEZE_NONE);
        assert_int_equal(s->state, SANDBOX_PAUSED);

        systemd_fake.hold = "ThawUnit";
        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(s->freeze, SANDBOX_FREEZE_RESUMING);
        assert_int_equal(s->state, SANDBOX_PAUSED);
        assert_true(sandbox_resume(s, on_sandbox, &again, &error) < 0);
        sandbox_error_done(&error);
        fake_systemd_release();
        RUN_UNTIL(r.n > 0);
        assert_int_equal(s->freeze, SANDBOX_FREEZE_NONE);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(again.n, 0);

        /* Destroyed while pausing: the Pause is answered, the freeze settled. */
        p = (Answer) {};
        systemd_fake.hold = "FreezeUnit";
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        destroy(s);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.code, SANDBOX_ERR_NOT_RUNNING);
        fake_systemd_release();
        run_briefly();
        assert_int_equal(p.n, 1);
}

static void test_custody_through_recycling(void **state) {
        Answer rel = {};
        Sandbox *s = create("recycled", false), *again;
        char first[SANDBOX_ID_LEN + 1];

        snprintf(first, sizeof(first), "%s", s->id);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        assert_int_equal(s->custody, SANDBOX_RESETTING);
        assert_true(sandbox_is_resetting(s));
        assert_false(sandbox_is_kept(s));
        /* Nobody's to see meanwhile, and no longer recorded. */
        assert_null(manager_get_sandbox(manager, first));
        assert_null(manager_next_sandbox(manager, NULL));
        assert_true(s->record_closed);
        /* Only its owner's (SANDBOX_OWNED) is released: not kept twice. */
        assert_false(recycle_can_keep(s));

        agent_reset(agent_of(s), 0);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(s->custody, SANDBOX_KEPT);
        assert_true(sandbox_is_kept(s));
        assert_false(sandbox_is_resetting(s));
        assert_null(manager_next_sandbox(manager, NULL));

        again = create("recycled", false);
        assert_ptr_equal(again, s);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        assert_ptr_equal(manager_next_sandbox(manager, NULL), s);
        destroy(again);
}

/* Released while its unit is being made: not running, so not kept; it goes, and both the
 * create and the release are answered. */
static void test_release_while_starting(void **state) {
        Answer a = {}, rel = {};
        Sandbox *s = create_held("recycled", &a);

        assert_false(recycle_can_keep(s));
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        assert_int_equal(s->state, SANDBOX_STOPPING);
        assert_int_equal(s->unit_state, SANDBOX_UNIT_STARTING);
        fake_systemd_release();
        RUN_UNTIL(a.n > 0 && rel.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_null(a.sandbox);
        assert_int_equal(rel.state, SANDBOX_DEAD);
        assert_null(manager_next_sandbox(manager, NULL));
        assert_int_equal(pool_count_released(manager, &(Sandbox) { .template_name = (char *) "recycled" }), 0);
}

/* Released while paused, or while a pause is in flight: not kept either. */
static void test_release_while_paused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer rel = {}, p = {}, rel2 = {};
        Sandbox *s = create("recycled", false), *t;

        pause_now(s);
        assert_false(recycle_can_keep(s));
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        RUN_UNTIL(rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_DEAD);

        t = create("recycled", false);
        systemd_fake.hold = "FreezeUnit";
        assert_int_equal(sandbox_pause(t, on_sandbox, &p, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(t->freeze, SANDBOX_FREEZE_PAUSING);
        assert_false(recycle_can_keep(t));
        assert_int_equal(sandbox_release(t, on_sandbox, &rel2), 0);
        assert_int_equal(t->custody, SANDBOX_OWNED);
        fake_systemd_release();
        RUN_UNTIL(rel2.n > 0 && p.n > 0);
        assert_int_equal(rel2.state, SANDBOX_DEAD);
        assert_null(manager_next_sandbox(manager, NULL));
}

/* The agent's reset answer comes after the sandbox was stopped: nothing is renewed, nothing
 * kept. */
static void test_reset_answer_after_stop(void **state) {
        Answer rel = {}, d = {};
        Sandbox *s = create("recycled", false);
        FakeAgent *a = agent_of(s);

        backend.hold_stop = true;
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        assert_int_equal(s->state, SANDBOX_STOPPING);
        assert_false(sandbox_is_resetting(s));
        assert_int_equal(s->custody, SANDBOX_RESETTING); /* what it was when it went */
        agent_reset(a, 0);
        run_briefly();
        assert_int_equal(backend.n_renew, 0);
        fake_payload_stopped();
        RUN_UNTIL(d.n > 0 && rel.n > 0);
        assert_int_equal(rel.state, SANDBOX_DEAD);
}

/* A kept sandbox that is going (its payload failed) is not handed out: the create gets one
 * of its own, never the dying one nor a NULL one (fa88a01). */
static void test_kept_going_not_handed_out(void **state) {
        Answer rel = {};
        Sandbox *s = create("recycled", false), *t;

        backend.hold_stop = true;
        assert_int_equal(sandbox_release(s, on_sandbox, &rel), 0);
        agent_reset(agent_of(s), 0);
        RUN_UNTIL(rel.n > 0);
        assert_true(sandbox_is_kept(s));
        sandbox_payload_failed(s, "its payload died.");
        assert_false(sandbox_is_kept(s));
        backend.hold_stop = false;
        t = create("recycled", false);
        assert_ptr_not_equal(t, s);
        assert_int_equal(t->custody, SANDBOX_OWNED);
        destroy(t);
        fake_payload_stopped();
        RUN_UNTIL(!manager_find_sandbox(manager, rel.id));
}

#define POOL_TEMPLATE                                                                           \
        "{ \"description\": \"pooled\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"     \
        "  \"pool\": { \"size\": 1 } }"

static int setup_pool(void **state) {
        static const char *const pool_templates[] = { "pooled", POOL_TEMPLATE, NULL };

        fake_core_new(pool_templates);
        return 0;
}

static Sandbox *pooled_running(void) {
        pool_schedule_refill(manager, 0);
        RUN_UNTIL(pool_has_sandboxes(manager) && manager->pooled->state == SANDBOX_RUNNING);
        return manager->pooled;
}

static void test_pool_hand_out(void **state) {
        Sandbox *p = pooled_running(), *s;

        assert_int_equal(p->custody, SANDBOX_POOLED);
        assert_null(manager_next_sandbox(manager, NULL));
        assert_null(manager_get_sandbox(manager, p->id));

        s = create("pooled", false);
        assert_ptr_equal(s, p);
        assert_int_equal(s->custody, SANDBOX_OWNED);
        assert_string_equal(sandbox_get_source(s), "pool");
        assert_ptr_equal(manager_get_sandbox(manager, s->id), s);
        /* Not of a recycling template: released, it goes. */
        assert_false(recycle_can_keep(s));
        /* The pool is filled again, with another. */
        RUN_UNTIL(pool_has_sandboxes(manager) && manager->pooled->state == SANDBOX_RUNNING);
        assert_ptr_not_equal(manager->pooled, s);
        destroy(s);
}

/* A pooled sandbox still starting is not handed out; one that dies in the pool is not
 * either, and the create starts its own. */
static void test_pool_starting_not_handed_out(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};
        Sandbox *p;

        systemd_fake.hold = "StartTransientUnit";
        pool_schedule_refill(manager, 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        p = manager->pooled;
        assert_non_null(p);
        assert_int_equal(p->state, SANDBOX_STARTING);
        assert_int_equal(p->custody, SANDBOX_POOLED);
        fake_systemd_release();
        assert_int_equal(manager_create_sandbox(manager, &root, "pooled", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_non_null(a.sandbox);
        assert_ptr_not_equal(a.sandbox, p);
        assert_int_equal(a.sandbox->custody, SANDBOX_OWNED);
        assert_string_equal(sandbox_get_source(a.sandbox), "new");
        sandbox_config_done(&config);
}

/* ---- snapshots ---- */

static void on_snapshot(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        Answer *a = userdata;

        a->n++;
        a->code = error ? error->code : SANDBOX_ERR_NONE;
        snprintf(a->message, sizeof(a->message), "%s", error ? sandbox_error_message(error) : "");
        if (meta)
                snprintf(a->id, sizeof(a->id), "%s", meta->id);
}

/* The agent's archive: some bytes into the descriptor, then its result. */
static void agent_archive(FakeAgent *a, const char *data, int error) {
        _cleanup_json_ json_object *msg = NULL;
        struct agent_file f;
        int fd;
        size_t n;

        msg = agent_expect(a, "file", &fd, 1, &n);
        assert_int_equal(n, 1);
        assert_int_equal(agent_parse_file(msg, &f), 0);
        assert_int_equal(f.op, AGENT_FILE_ARCHIVE);
        if (data)
                assert_int_equal(write(fd, data, strlen(data)), (ssize_t) strlen(data));
        safe_close(fd);
        agent_say(a, agent_msg_file_result(&(struct agent_file_result) {
                .id = f.id, .error = error, .has_bytes = true, .bytes = data ? strlen(data) : 0 }));
}

static void test_snapshot(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SnapshotMeta *list = NULL;
        size_t n = 0;
        Answer snap = {};
        Sandbox *s = create("shell", false);
        char path[256];

        assert_int_equal(sandbox_snapshot(s, &(SnapshotOptions) {}, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "an archive", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_NONE);
        snprintf(path, sizeof(path), "%s/snapshots/%s.tar.zst", state_dir, snap.id);
        assert_int_equal(access(path, F_OK), 0);
        assert_int_equal(snapshot_list(manager, &root, &list, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(list[0].id, snap.id);
        assert_int_equal(list[0].size, strlen("an archive"));
        snapshot_meta_array_free(list, n);

        /* The agent failing is the caller's answer; nothing is left of it. */
        snap = (Answer) {};
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), NULL, EIO);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_int_equal(snapshot_list(manager, &root, &list, &n), 0);
        assert_int_equal(n, 1);
        snapshot_meta_array_free(list, n);

        assert_int_equal(snapshot_remove(manager, snap.id[0] ? snap.id : "0000000000000000", &error) < 0, true);
        sandbox_error_done(&error);
        destroy(s);
}

static void test_stop_during_snapshot(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *msg = NULL;
        SnapshotMeta *list = NULL;
        size_t n = 0, n_fds;
        Answer snap = {}, d = {};
        Sandbox *s = create("shell", false);
        int fd;

        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        msg = agent_expect(agent_of(s), "file", &fd, 1, &n_fds);
        assert_non_null(msg);
        assert_int_equal(n_fds, 1);
        assert_int_equal(write(fd, "half", 4), 4);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        RUN_UNTIL(d.n > 0 && snap.n > 0);
        safe_close(fd);
        assert_int_equal(snap.code, SANDBOX_ERR_SANDBOX_FAILED);
        run_briefly();
        /* No snapshot, and no partial file left. */
        assert_int_equal(snapshot_list(manager, &root, &list, &n), 0);
        assert_int_equal(n, 0);
        free(list);
}

static void test_snapshot_while_paused_pauses_again(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer snap = {};
        Sandbox *s = create("shell", false);

        pause_now(s);
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "x", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_NONE);
        assert_int_equal(s->state, SANDBOX_PAUSED);
        assert_int_equal(systemd_fake.n_thaw, 1);
        assert_int_equal(systemd_fake.n_freeze, 2);
        destroy(s);
}


/* The agent's side of a restore: the stream read in full, its result. */
static void agent_extract(FakeAgent *a, int error) {
        _cleanup_json_ json_object *msg = NULL;
        struct agent_file f;
        char buf[256];
        int fd;
        size_t n;

        msg = agent_expect(a, "file", &fd, 1, &n);
        assert_int_equal(n, 1);
        assert_int_equal(agent_parse_file(msg, &f), 0);
        assert_int_equal(f.op, AGENT_FILE_EXTRACT);
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
        safe_close(fd);
        agent_say(a, agent_msg_file_result(&(struct agent_file_result) {
                .id = f.id, .error = error, .has_bytes = true, .bytes = 3 }));
}

/* Hibernated sandbox id woken, its archive unpacked by its second agent: w, answered. */
static void wake_now(const char *id, Answer *w) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        assert_int_equal(snapshot_wake_sandbox(manager, &root, id, on_sandbox, w, &error), 0);
        RUN_UNTIL(n_agents == 2);
        agent_extract(&agents[1], 0);
        RUN_UNTIL(w->n > 0);
        assert_int_equal(w->code, SANDBOX_ERR_NONE);
}

static void test_hibernate_and_wake(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SnapshotMeta *list = NULL, meta = {};
        size_t n = 0;
        Answer h = {}, w = {};
        Sandbox *s = create("shell", false);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_hibernate(s, NULL, on_snapshot, &h, &error), 0);
        agent_archive(agent_of(s), "files", 0);
        RUN_UNTIL(h.n > 0);
        assert_int_equal(h.code, SANDBOX_ERR_NONE);
        assert_null(manager_find_sandbox(manager, id));
        assert_int_equal(snapshot_lookup_hibernated(manager, &root, id, &meta, &error), 0);
        assert_true(meta.hibernated);
        snapshot_meta_done(&meta);

        /* Back under the same id, with its files; the snapshot used up. */
        wake_now(id, &w);
        assert_string_equal(w.id, id);
        assert_int_equal(snapshot_list(manager, &root, &list, &n), 0);
        assert_int_equal(n, 0);
        free(list);
        destroy(w.sandbox);
}

/* Wake refused, and the hibernated sandbox kept for a later one: its name taken by another
 * sandbox meanwhile, its template gone, another user's, or woken already (a second Wake
 * while the first restores). */
static void test_wake_refused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        SnapshotMeta meta = {};
        Answer h = {}, a = {}, w = {};
        char id[SANDBOX_ID_LEN + 1], message[256];
        Sandbox *s;

        snprintf(config.name, sizeof(config.name), "db");
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        s = a.sandbox;
        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_hibernate(s, NULL, on_snapshot, &h, &error), 0);
        agent_archive(agent_of(s), "files", 0);
        RUN_UNTIL(h.n > 0);
        assert_int_equal(h.code, SANDBOX_ERR_NONE);

        /* Its name is another's now. */
        a = (Answer) {};
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_true(snapshot_wake_sandbox(manager, &root, id, on_sandbox, &w, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_SANDBOX_EXISTS);
        assert_string_equal(sandbox_error_message(&error), "A sandbox named 'db' exists already; it cannot wake.");
        sandbox_error_done(&error);
        destroy(a.sandbox);

        /* Its template is gone. */
        assert_int_equal(manager_remove_template(manager, "shell", &error), 0);
        assert_true(snapshot_wake_sandbox(manager, &root, id, on_sandbox, &w, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_TEMPLATE);
        assert_string_equal(sandbox_error_message(&error), "No template 'shell' any more.");
        sandbox_error_done(&error);
        assert_int_equal(manager_create_template(manager, "shell", SHELL_TEMPLATE, &error), 0);
        assert_int_equal(manager_n_sandboxes(manager), 0);
        run_briefly();
        assert_int_equal(w.n, 0);

        /* Not another user's to wake: for them there is none. */
        assert_true(snapshot_wake_sandbox(manager, &(SandboxCaller) { .uid = 1000 }, id, on_sandbox, &w, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        snprintf(message, sizeof(message), "No hibernated sandbox '%s'.", id);
        assert_string_equal(sandbox_error_message(&error), message);
        sandbox_error_done(&error);

        /* Woken (by its name) twice at once: the second is refused, the first answered. */
        assert_int_equal(snapshot_wake_sandbox(manager, &root, "db", on_sandbox, &w, &error), 0);
        RUN_UNTIL(n_agents == 3);
        assert_true(snapshot_wake_sandbox(manager, &root, id, on_sandbox, &a, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_SANDBOX_EXISTS);
        snprintf(message, sizeof(message), "Sandbox %s is awake already.", id);
        assert_string_equal(sandbox_error_message(&error), message);
        agent_extract(&agents[2], 0);
        RUN_UNTIL(w.n > 0);
        assert_int_equal(w.code, SANDBOX_ERR_NONE);
        assert_string_equal(w.id, id);
        assert_string_equal(sandbox_get_name(w.sandbox), "db");
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_true(snapshot_lookup_hibernated(manager, &root, id, &meta, &error) < 0);
        sandbox_config_done(&config);
        destroy(w.sandbox);
}

/* Secret bindings given at create (not the template's) come back with Wake: the record
 * keeps their names, the values stay in the store. */
static void test_hibernation_keeps_its_secret_bindings(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = { .secrets_set = true };
        SnapshotMeta meta = {};
        Answer c = {}, h = {}, w = {};
        char id[SANDBOX_ID_LEN + 1];

        free(manager->settings.secrets_dir);
        assert_true(asprintf(&manager->settings.secrets_dir, "%s/secrets", state_dir) > 0);
        assert_int_equal(manager_set_secret(manager, &root, "API_KEY", "sk-1", 4, &error), 0);
        config.secrets = strdup("API_KEY\n");
        assert_non_null(config.secrets);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &c, &error), 0);
        RUN_UNTIL(c.n > 0);
        assert_int_equal(c.code, SANDBOX_ERR_NONE);
        sandbox_config_done(&config);
        snprintf(id, sizeof(id), "%s", c.sandbox->id);

        assert_int_equal(sandbox_hibernate(c.sandbox, NULL, on_snapshot, &h, &error), 0);
        agent_archive(agent_of(c.sandbox), "files", 0);
        RUN_UNTIL(h.n > 0);
        assert_int_equal(h.code, SANDBOX_ERR_NONE);
        assert_int_equal(snapshot_lookup_hibernated(manager, &root, id, &meta, &error), 0);
        assert_true(meta.config.secrets_set);
        assert_string_equal(meta.config.secrets, "API_KEY\n");
        snapshot_meta_done(&meta);

        wake_now(id, &w);
        assert_true(w.sandbox->config.secrets_set);
        assert_string_equal(w.sandbox->config.secrets, "API_KEY\n");
        assert_int_equal(w.sandbox->n_secrets, 1);
        destroy(w.sandbox);
}

/* A Docker sandbox takes secrets as environment variables only: a file binding is refused
 * at create, saying so, before anything starts. */
static void test_docker_refuses_secret_files(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = { .secrets_set = true };
        Answer a = {};

        config.secrets = strdup("API_KEY:file\n");
        assert_non_null(config.secrets);
        assert_true(manager_create_sandbox(manager, &root, "docker", &config, on_sandbox, &a, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_SUPPORTED);
        assert_non_null(strstr(sandbox_error_message(&error), "only bwrap sandboxes take secrets as files"));
        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_int_equal(systemd_fake.n_start, 0);
        sandbox_config_done(&config);
}

static void test_fork_and_restore_failure(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer f = {}, g = {};
        Sandbox *s = create("shell", false);

        assert_int_equal(snapshot_fork_sandbox(manager, &root, s, &config, on_sandbox, &f, &error), 0);
        agent_archive(agent_of(s), "files", 0);
        RUN_UNTIL(n_agents == 2);
        agent_extract(&agents[1], 0);
        RUN_UNTIL(f.n > 0);
        assert_int_equal(f.code, SANDBOX_ERR_NONE);
        assert_string_not_equal(f.id, s->id);
        assert_int_equal(s->state, SANDBOX_RUNNING);

        /* The new one's agent cannot unpack: the fork fails and leaves nothing. */
        assert_int_equal(snapshot_fork_sandbox(manager, &root, s, &config, on_sandbox, &g, &error), 0);
        agent_archive(agent_of(s), "files", 0);
        RUN_UNTIL(n_agents == 3);
        agent_extract(&agents[2], EIO);
        RUN_UNTIL(g.n > 0);
        assert_int_equal(g.code, SANDBOX_ERR_SANDBOX_FAILED);
        RUN_UNTIL(!agents[2].sandbox);
        destroy(f.sandbox);
        destroy(s);
}

/* CreateSandbox with FromSnapshot: a sandbox of the caller's with the snapshot's files;
 * the snapshot is looked up as its caller sees it, stays, and is removed by id. */
static void test_create_from_snapshot(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        const SandboxCaller other = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000 };
        SandboxConfig config = {};
        SnapshotMeta meta = {};
        Answer snap = {}, c = {}, bad = {};
        Sandbox *s = create("shell", false);
        uid_t owner = 42;
        const char *tenant = NULL;

        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "files", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_NONE);

        /* Looked up by its owner; not there for another user. */
        assert_int_equal(snapshot_lookup(manager, &root, snap.id, &meta, &error), 0);
        assert_string_equal(meta.id, snap.id);
        snapshot_meta_done(&meta);
        assert_true(snapshot_lookup(manager, &other, snap.id, &meta, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SNAPSHOT);
        sandbox_error_done(&error);
        assert_int_equal(snapshot_call_access(manager, &root, snap.id, false, &meta, &owner, &tenant, &error), 0);
        assert_int_equal(owner, 0);
        snapshot_meta_done(&meta);

        snprintf(config.from_snapshot, sizeof(config.from_snapshot), "%s", snap.id);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &c, &error), 0);
        RUN_UNTIL(n_agents == 2);
        agent_extract(&agents[1], 0);
        RUN_UNTIL(c.n > 0);
        assert_int_equal(c.code, SANDBOX_ERR_NONE);
        assert_string_not_equal(c.id, s->id);
        assert_int_equal(c.state, SANDBOX_RUNNING);
        assert_int_equal(snapshot_lookup(manager, &root, snap.id, &meta, &error), 0);
        snapshot_meta_done(&meta);

        /* Its files cannot be unpacked: the create fails, and leaves no sandbox. */
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &bad, &error), 0);
        RUN_UNTIL(n_agents == 3);
        agent_extract(&agents[2], EIO);
        RUN_UNTIL(bad.n > 0);
        assert_int_equal(bad.code, SANDBOX_ERR_SANDBOX_FAILED);
        RUN_UNTIL(!agents[2].sandbox);

        assert_int_equal(snapshot_remove(manager, snap.id, &error), 0);
        assert_true(snapshot_lookup(manager, &root, snap.id, &meta, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SNAPSHOT);
        sandbox_config_done(&config);
        destroy(c.sandbox);
        destroy(s);
}

/* A fork is counted against its owner's quota when asked and again once its snapshot is
 * taken (asynchronously): forks asked together cannot all pass the first check. */
static void test_fork_quota_rechecked(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        const SandboxCaller user = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000, .granted = true };
        SandboxConfig config = {};
        Answer f = {}, g = {};
        Sandbox *a = create("shell", false), *b = create("shell", false);

        manager->settings.tenancy.quota.owner.sandboxes = 1;
        assert_int_equal(snapshot_fork_sandbox(manager, &user, a, &config, on_sandbox, &f, &error), 0);
        assert_int_equal(snapshot_fork_sandbox(manager, &user, b, &config, on_sandbox, &g, &error), 0);
        agent_archive(agent_of(a), "files", 0);
        RUN_UNTIL(n_agents == 3);
        agent_extract(&agents[2], 0);
        RUN_UNTIL(f.n > 0);
        assert_int_equal(f.code, SANDBOX_ERR_NONE);

        /* The second's snapshot comes when the first counts: refused, nothing started. */
        agent_archive(agent_of(b), "files", 0);
        RUN_UNTIL(g.n > 0);
        assert_int_equal(g.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        assert_int_equal(n_agents, 3);
        manager->settings.tenancy.quota.owner.sandboxes = 0;
        destroy(f.sandbox);
        destroy(a);
        destroy(b);
}

/* Creates waiting for their turn (StartsInFlight=) count against --max-sandboxes: one
 * caller cannot queue more creates than the daemon would hold. Static: the waiting ones are
 * answered after the test returns should it fail. */
static Answer waiting[4];

static void test_waiting_creates_count_against_the_maximum(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};

        manager->settings.max_sandboxes = 3;
        manager->settings.tenancy.node.starts_in_flight = 1;
        systemd_fake.hold = "StartTransientUnit";
        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &waiting[i],
                                                        &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(manager_creates_waiting(manager), 2);

        assert_true(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &waiting[3], &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_TOO_MANY_SANDBOXES);
        assert_non_null(strstr(sandbox_error_message(&error), "with 2 creates waiting for their turn"));
        assert_int_equal(manager_creates_waiting(manager), 2);

        fake_systemd_release();
        RUN_UNTIL(waiting[0].n > 0 && waiting[1].n > 0 && waiting[2].n > 0);
        for (unsigned i = 0; i < 3; i++) {
                assert_int_equal(waiting[i].code, SANDBOX_ERR_NONE);
                destroy(waiting[i].sandbox);
        }
        assert_int_equal(waiting[3].n, 0);
}

/* A sandbox's snapshots queued for a turn are bounded (each holds its caller's message). */
static Answer snapshot_turns[SNAPSHOT_TURNS_WAITING_MAX + 1];

static void test_snapshot_turns_waiting_bounded(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s = create("shell", false);
        Answer held = {};

        SandboxConfig config = {};

        /* Another create of the owner's holds its one turn. */
        manager->settings.tenancy.node.starts_in_flight = 1;
        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &held, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        for (unsigned i = 0; i < SNAPSHOT_TURNS_WAITING_MAX; i++)
                assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snapshot_turns[i], &error), 0);
        assert_int_equal(s->snapshot_turns_waiting, SNAPSHOT_TURNS_WAITING_MAX);
        assert_true(sandbox_snapshot(s, NULL, on_snapshot, &snapshot_turns[SNAPSHOT_TURNS_WAITING_MAX],
                                     &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        assert_non_null(strstr(sandbox_error_message(&error), "wait for their turn"));

        /* Gone while they wait: each is answered so when its turn comes. */
        destroy(s);
        fake_systemd_release();
        RUN_UNTIL(held.n > 0);
        for (unsigned i = 0; i < SNAPSHOT_TURNS_WAITING_MAX; i++) {
                RUN_UNTIL(snapshot_turns[i].n > 0);
                assert_int_equal(snapshot_turns[i].code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        }
        assert_int_equal(snapshot_turns[SNAPSHOT_TURNS_WAITING_MAX].n, 0);
        destroy(held.sandbox);
}

/* A snapshot waiting for its turn is no sandbox of its owner's: only creates waiting
 * count against the quota (the waiters' test once read `!run && tenant ? … : …`, which
 * counted every waiting operation of an owner without a tenant). */
static void test_waiting_snapshot_counts_no_sandbox(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s = create("shell", false);
        SandboxConfig config = {};
        Answer held = {}, queued = {}, snapshot = {};
        QuotaReport q;

        /* A create holds the owner's one turn; a second create and a snapshot wait. */
        manager->settings.tenancy.node.starts_in_flight = 1;
        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &held, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &queued, &error), 0);
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snapshot, &error), 0);
        assert_int_equal(s->snapshot_turns_waiting, 1);
        assert_int_equal(manager_creates_waiting(manager), 1);

        /* s, the one starting and the create waiting: three, not four. */
        assert_int_equal(manager_get_quota(manager, &root, &q), 0);
        assert_int_equal(q.entries[QUOTA_SANDBOXES].use, 3);

        destroy(s);
        fake_systemd_release();
        RUN_UNTIL(held.n > 0 && queued.n > 0 && snapshot.n > 0);
        assert_int_equal(snapshot.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        destroy(held.sandbox);
        destroy(queued.sandbox);
}

/* Tenants are names a delegate gives, any number of them: the statistics keep at most
 * STATISTICS_TENANTS_MAX, a tenant with no sandbox left giving its entry up first. */
static void test_tenant_statistics_bounded(void **state) {
        Sandbox *s = create("shell", false);
        char name[32];
        bool kept = false, reclaimed = true;

        snprintf(s->config.tenant, sizeof(s->config.tenant), "t0");
        for (unsigned i = 0; i < STATISTICS_TENANTS_MAX; i++) {
                snprintf(name, sizeof(name), "t%u", i);
                assert_non_null(statistics_of_tenant(manager, name));
        }
        assert_int_equal(manager->n_tenant_statistics, STATISTICS_TENANTS_MAX);
        assert_non_null(statistics_of_tenant(manager, "newcomer"));
        assert_int_equal(manager->n_tenant_statistics, STATISTICS_TENANTS_MAX);
        for (size_t i = 0; i < manager->n_tenant_statistics; i++) {
                kept = kept || streq(manager->tenant_statistics[i].tenant, "t0");       /* it has a sandbox */
                reclaimed = reclaimed && !streq(manager->tenant_statistics[i].tenant, "t1");
        }
        assert_true(kept);
        assert_true(reclaimed);
        assert_string_equal(manager->tenant_statistics[manager->n_tenant_statistics - 1].tenant, "newcomer");
        s->config.tenant[0] = 0;
        destroy(s);
}

static void test_snapshot_quota(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer snap = {};
        Sandbox *s = create("shell", false);

        manager->settings.snapshots.max_per_owner = 1;
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "x", 0);
        RUN_UNTIL(snap.n > 0);
        assert_true(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        sandbox_error_done(&error);
        assert_int_equal(snapshot_remove(manager, snap.id, &error), 0);

        /* Bytes too: the stream is cut where the quota ends. */
        manager->settings.snapshots.max_bytes_per_owner = 4;
        snap = (Answer) {};
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "more than four bytes", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        destroy(s);
}

/* ExportSnapshot's part, answered before the call returns for an archive. */
typedef struct ExportPart {
        unsigned n;
        char data[64];
        size_t size;
        bool hibernated;
        char *meta;     /* the record, as JSON */
} ExportPart;

static void on_export_part(const SnapshotMeta *meta, const void *data, size_t size, const SandboxError *error,
                           void *userdata) {
        ExportPart *p = userdata;

        assert_null(error);
        p->n++;
        assert_true(size <= sizeof(p->data));
        memcpy(p->data, data, size);
        p->size = size;
        p->hibernated = meta->hibernated;
        p->meta = mfree(p->meta);
        assert_int_equal(snapshot_meta_to_json(meta, &p->meta), 0);
}

static void export_part(const char *id, uint64_t offset, size_t length, ExportPart *p) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        unsigned n = p->n;

        assert_int_equal(snapshot_export_read(manager, &root, id, offset, length, on_export_part, p, &error), 0);
        assert_int_equal(p->n, n + 1);
}

/* Export and import move a hibernated sandbox between nodes in parts: what is read is the
 * archive's bytes; an import starts at 0, goes on at its end only, fits the quota, and
 * ends as a hibernated sandbox of the caller's under a new id that wakes. */
static void test_export_and_import(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_free_ char *text = NULL;
        SnapshotMeta meta = {}, got = {};
        ExportPart part = {};
        Answer h = {}, w = {};
        char id[SANDBOX_ID_LEN + 1], imported[SANDBOX_ID_LEN + 1], again[SANDBOX_ID_LEN + 1];
        const char *tenant;
        uid_t owner;
        Sandbox *s = create("shell", false);

        snprintf(id, sizeof(id), "%s", s->id);
        assert_int_equal(sandbox_hibernate(s, NULL, on_snapshot, &h, &error), 0);
        agent_archive(agent_of(s), "0123456789", 0);
        RUN_UNTIL(h.n > 0);
        assert_int_equal(h.code, SANDBOX_ERR_NONE);
        assert_int_equal(snapshot_call_access(manager, &root, id, true, &meta, &owner, &tenant, &error), 0);
        assert_int_equal(owner, 0);
        snapshot_meta_done(&meta);

        /* Read in two parts, and past the end nothing. */
        export_part(id, 0, 4, &part);
        assert_int_equal(part.size, 4);
        assert_memory_equal(part.data, "0123", 4);
        assert_true(part.hibernated);
        export_part(id, 4, 60, &part);
        assert_int_equal(part.size, 6);
        assert_memory_equal(part.data, "456789", 6);
        export_part(id, 10, 4, &part);
        assert_int_equal(part.size, 0);
        text = TAKE_PTR(part.meta);
        /* Neither a hibernated sandbox nor a snapshot of that id. */
        assert_true(snapshot_export_read(manager, &root, "no-such-one", 0, 4, on_export_part, &part, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        sandbox_error_done(&error);
        assert_true(snapshot_export_read(manager, &root, "0000000000000000", 0, 4, on_export_part, &part, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SNAPSHOT);
        sandbox_error_done(&error);

        /* Refused: no record, not at 0, an import nobody started. */
        assert_true(snapshot_import_part(manager, &root, NULL, NULL, 0, "", 0, false, imported, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_true(snapshot_import_part(manager, &root, NULL, text, 3, "x", 1, false, imported, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_true(snapshot_import_part(manager, &root, "0000000000000000", NULL, 0, "x", 1, false, imported,
                                         &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        sandbox_error_done(&error);

        /* A part that is not at the end drops the import. */
        assert_int_equal(snapshot_import_part(manager, &root, NULL, text, 0, "01234", 5, false, imported, &error), 0);
        assert_string_not_equal(imported, id);
        assert_true(snapshot_import_part(manager, &root, imported, NULL, 3, "x", 1, false, again, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);
        assert_true(snapshot_import_part(manager, &root, imported, NULL, 5, "56789", 5, true, again, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        sandbox_error_done(&error);

        /* More than the quota leaves: dropped at the part that does not fit. */
        manager->settings.snapshots.max_bytes_per_owner = 12;
        assert_int_equal(snapshot_import_part(manager, &root, NULL, text, 0, "0", 1, false, imported, &error), 0);
        assert_true(snapshot_import_part(manager, &root, imported, NULL, 1, "12345", 5, false, again, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        sandbox_error_done(&error);
        manager->settings.snapshots.max_bytes_per_owner = 0;

        /* In full: a hibernated sandbox under the new id, the same bytes. */
        assert_int_equal(snapshot_import_part(manager, &root, NULL, text, 0, "01234", 5, false, imported, &error), 0);
        assert_int_equal(snapshot_import_part(manager, &root, imported, NULL, 5, "56789", 5, true, again, &error), 0);
        assert_string_equal(again, imported);
        assert_int_equal(snapshot_lookup_hibernated(manager, &root, imported, &got, &error), 0);
        assert_int_equal(got.size, 10);
        assert_true(got.hibernated);
        snapshot_meta_done(&got);
        export_part(imported, 0, 60, &part);
        assert_int_equal(part.size, 10);
        assert_memory_equal(part.data, "0123456789", 10);
        part.meta = mfree(part.meta);

        /* A record that is not a hibernation's is not imported. */
        assert_int_equal(snapshot_lookup_hibernated(manager, &root, id, &meta, &error), 0);
        meta.hibernated = false;
        text = mfree(text);
        assert_int_equal(snapshot_meta_to_json(&meta, &text), 0);
        snapshot_meta_done(&meta);
        assert_true(snapshot_import_part(manager, &root, NULL, text, 0, "x", 1, true, again, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_INVALID_OPTION);
        sandbox_error_done(&error);

        /* The imported one wakes. */
        assert_int_equal(snapshot_wake_sandbox(manager, &root, imported, on_sandbox, &w, &error), 0);
        RUN_UNTIL(n_agents == 2);
        agent_extract(&agents[1], 0);
        RUN_UNTIL(w.n > 0);
        assert_int_equal(w.code, SANDBOX_ERR_NONE);
        assert_string_equal(w.id, imported);
        destroy(w.sandbox);
        assert_true(snapshot_wake_sandbox(manager, &root, imported, on_sandbox, &w, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
}

/* Refused before anything starts: a sandbox still starting, one being paused. */
static void test_snapshot_refused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer a = {}, snap = {}, p = {};
        Sandbox *s = create_held("shell", &a);

        assert_true(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_NOT_RUNNING);
        sandbox_error_done(&error);
        fake_systemd_release();
        RUN_UNTIL(a.n > 0);
        assert_int_equal(s->state, SANDBOX_RUNNING);

        systemd_fake.hold = "FreezeUnit";
        assert_int_equal(sandbox_pause(s, on_sandbox, &p, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_true(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        sandbox_error_done(&error);
        assert_true(sandbox_hibernate(s, NULL, on_snapshot, &snap, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_BUSY);
        fake_systemd_release();
        RUN_UNTIL(p.n > 0);
        assert_int_equal(s->state, SANDBOX_PAUSED);
        assert_int_equal(snap.n, 0);
        destroy(s);
}

/* One snapshot in flight per owner (StartsInFlight=1): the next waits for its turn, and
 * is checked again then (its sandbox may be gone). */
static void test_snapshot_waits_its_turn(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer first = {}, second = {}, third = {};
        Sandbox *a = create("shell", false), *b = create("shell", false);

        manager->settings.tenancy.node.starts_in_flight = 1;
        assert_int_equal(sandbox_snapshot(a, NULL, on_snapshot, &first, &error), 0);
        assert_int_equal(sandbox_snapshot(b, &(SnapshotOptions) { .include_tmp = true }, on_snapshot, &second,
                                          &error), 0);
        run_briefly();
        agent_archive(agent_of(a), "a", 0);
        RUN_UNTIL(first.n > 0);
        assert_int_equal(first.code, SANDBOX_ERR_NONE);
        assert_int_equal(second.n, 0);
        agent_archive(agent_of(b), "b", 0);
        RUN_UNTIL(second.n > 0);
        assert_int_equal(second.code, SANDBOX_ERR_NONE);

        /* Waiting, its sandbox goes: answered so. */
        assert_int_equal(sandbox_snapshot(a, NULL, on_snapshot, &first, &error), 0);
        assert_int_equal(sandbox_hibernate(b, NULL, on_snapshot, &third, &error), 0);
        destroy(b);
        agent_archive(agent_of(a), "a", 0);
        RUN_UNTIL(third.n > 0);
        assert_int_equal(third.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
        destroy(a);
}

/* A tenant's snapshot quota (count and bytes) and [Limits] SnapshotMax= cut a snapshot. */
static void test_snapshot_tenant_quota_and_max(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        const SandboxCaller acme = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .granted = true, .tenant = "acme" };
        SandboxConfig config = {};
        Answer c = {}, snap = {};
        uint64_t bytes, count;
        Sandbox *s;

        assert_int_equal(manager_create_sandbox(manager, &acme, "shell", &config, on_sandbox, &c, &error), 0);
        RUN_UNTIL(c.n > 0);
        s = c.sandbox;
        assert_non_null(s);
        assert_string_equal(s->config.tenant, "acme");

        manager->settings.tenancy.quota.tenant.snapshots = 1;
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "abc", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_NONE);
        assert_int_equal(snapshot_usage_tenant(manager, "acme", &bytes, &count), 0);
        assert_int_equal(bytes, 3);
        assert_int_equal(count, 1);
        assert_true(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error) < 0);
        assert_int_equal(error.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        assert_non_null(strstr(sandbox_error_message(&error), "Tenant acme"));
        sandbox_error_done(&error);

        /* Bytes: the stream is cut where the tenant's room ends. */
        manager->settings.tenancy.quota.tenant.snapshots = 0;
        manager->settings.tenancy.quota.tenant.snapshot_bytes = 5;
        snap = (Answer) {};
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "more than two", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_QUOTA_EXCEEDED);
        manager->settings.tenancy.quota.tenant.snapshot_bytes = 0;

        /* One snapshot's ceiling. */
        manager->settings.tenancy.limits.snapshot_max = 4;
        snap = (Answer) {};
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &snap, &error), 0);
        agent_archive(agent_of(s), "more than four", 0);
        RUN_UNTIL(snap.n > 0);
        assert_int_equal(snap.code, SANDBOX_ERR_SNAPSHOT_TOO_LARGE);
        assert_int_equal(snapshot_usage_tenant(manager, "acme", &bytes, &count), 0);
        assert_int_equal(count, 1);
        sandbox_config_done(&config);
        destroy(s);
}

/* At start, what an interrupted snapshot left goes, and so does a snapshot older than
 * Retention=. */
static void test_retention_and_leftovers(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_json_ json_object *o = NULL;
        SnapshotMeta *list = NULL;
        size_t n = 0;
        Answer old = {}, young = {};
        char path[256];
        Sandbox *s = create("shell", false);

        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &old, &error), 0);
        agent_archive(agent_of(s), "old", 0);
        RUN_UNTIL(old.n > 0);
        assert_int_equal(sandbox_snapshot(s, NULL, on_snapshot, &young, &error), 0);
        agent_archive(agent_of(s), "young", 0);
        RUN_UNTIL(young.n > 0);
        destroy(s);

        snprintf(path, sizeof(path), "%s/snapshots/%s.json", state_dir, old.id);
        o = json_object_from_file(path);
        assert_non_null(o);
        json_object_object_add(o, "created", json_object_new_int64(1000000));
        assert_int_equal(json_object_to_file(path, o), 0);
        snprintf(path, sizeof(path), "%s/snapshots/0123456789abcdef.tar.zst.partial", state_dir);
        write_text(path, "half");

        manager = manager_free(manager);
        fake_retention_sec = 3600;
        fake_manager_new();
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(snapshot_list(manager, &root, &list, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(list[0].id, young.id);
        snapshot_meta_array_free(list, n);
}

/* ---- a restarted sandboxd ---- */

/* The manager goes as sandboxd does when it stops (sandboxes detached, their state kept),
 * and a new one over the same state directory adopts s from its state file and its
 * control socket (what systemd's fd store would give back). */
static Sandbox *restart_and_adopt(Sandbox *s) {
        _cleanup_close_ int kept = fcntl(s->control_fd, F_DUPFD_CLOEXEC, 3);
        char id[SANDBOX_ID_LEN + 1], path[256];
        SandboxPersist st = {};
        Sandbox *adopted = NULL;

        assert_true(kept >= 0);
        snprintf(id, sizeof(id), "%s", s->id);
        manager = manager_free(manager);
        assert_int_equal(backend.n_detach, 1);
        assert_true(state_file_exists(id));

        fake_manager_new();
        snprintf(path, sizeof(path), "%s/sandboxes/%s.json", state_dir, id);
        assert_int_equal(sandbox_persist_load(path, &st), 0);
        assert_int_equal(sandbox_adopt(manager, &st, TAKE_FD(kept), &adopted), 0);
        sandbox_persist_done(&st);
        assert_int_equal(backend.n_adopt, 1);
        assert_ptr_equal(manager_get_sandbox(manager, id), adopted);
        return adopted;
}

static void test_restart_adopts_a_running_sandbox(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        ExecAnswer e = {};
        Sandbox *s = create("shell", false);

        s = restart_and_adopt(s);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(exec_argv(s, "true", &e, &error), 0);
        agent_run_exec(agent_of(s), 7);
        RUN_UNTIL(e.n > 0);
        assert_int_equal(e.exit_status, 7);
        destroy(s);
}

static void test_restart_during_pause(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer r = {};
        Sandbox *s = create("shell", false);

        pause_now(s);
        s = restart_and_adopt(s);
        /* Still paused, and how: resumed the same way. */
        assert_int_equal(s->state, SANDBOX_PAUSED);
        assert_string_equal(sandbox_get_pause_method(s), "freeze");
        assert_int_equal(sandbox_resume(s, on_sandbox, &r, &error), 0);
        RUN_UNTIL(r.n > 0);
        assert_int_equal(r.code, SANDBOX_ERR_NONE);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(systemd_fake.n_thaw, 1);
        destroy(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_exec_destroy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fleet_node_in_ids, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ephemeral_answers_once_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ephemeral_refused_exec_lets_it_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ephemeral_second_exec_is_busy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_payload_cannot_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_fails_to_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_agent_never_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_agent_dies_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_destroy_while_the_unit_starts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_agent_dies_mid_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_malformed_agent_message, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pause_without_freezer_uses_sigstop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_destroy_answers_callers_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lifetime_and_idle_timeouts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lifetime_stands_still_while_paused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_paused_sandbox_idles_to_hibernate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_background_process, setup, teardown),
                cmocka_unit_test_setup_teardown(test_destroy_waits_for_the_payload, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_timeout_kills_and_records, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_timeout_stands_still_while_paused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_output_to_the_callers_descriptors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal_input_waits_for_resize, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stdin_and_follow, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wait_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exec_after_the_agent_is_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recycled_for_the_same_owner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recycled_refiled_in_the_fd_store, setup, teardown),
                cmocka_unit_test_setup_teardown(test_renewal_answers_late, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ephemeral_recycled_after_its_exec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_waits_for_the_reset, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_ends_what_runs_and_keeps_at_most_max, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reset_that_fails_destroys, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_reset, setup, teardown),
                cmocka_unit_test_setup_teardown(test_entry_points_refuse_null, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unit_states, setup, teardown),
                cmocka_unit_test_setup_teardown(test_freeze_states, setup, teardown),
                cmocka_unit_test_setup_teardown(test_custody_through_recycling, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_while_paused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reset_answer_after_stop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kept_going_not_handed_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pool_hand_out, setup_pool, teardown),
                cmocka_unit_test_setup_teardown(test_pool_starting_not_handed_out, setup_pool, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_during_snapshot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_while_paused_pauses_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hibernate_and_wake, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wake_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fork_and_restore_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_from_snapshot, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fork_quota_rechecked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_quota, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waiting_creates_count_against_the_maximum, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_turns_waiting_bounded, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tenant_statistics_bounded, setup, teardown),
                cmocka_unit_test_setup_teardown(test_export_and_import, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_waits_its_turn, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waiting_snapshot_counts_no_sandbox, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_tenant_quota_and_max, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retention_and_leftovers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hibernation_keeps_its_secret_bindings, setup, teardown),
                cmocka_unit_test_setup_teardown(test_docker_refuses_secret_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_adopts_a_running_sandbox, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_during_pause, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
