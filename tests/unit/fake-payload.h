/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A whole core (manager_new()) on one event loop without a system: a fake systemd on the
 * other end of the core's bus (fake-peer.h) that answers every call at once unless told to
 * hold one, a fake payload backend in place of bwrap (its "payload" is a socketpair), and
 * a scripted agent on the payload's end of that socketpair that the test drives: it reads
 * what the core sends and answers ready, started, exit, reset-result and file-result as
 * the test says. So sandbox.c, exec.c, recycle.c, snapshot.c and adoption run their real
 * code, transitions and failure paths in milliseconds. For cmocka tests; each test file
 * includes this once (with fake-peer.h). */

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "fake-peer.h"
#include "fd-util.h"
#include "json-util.h"
#include "sandbox-persist.h"
#include "strv.h"
#include "sandbox-internal.h"

#define FAKE_SYSTEMD_DEST "org.freedesktop.systemd1"
#define FAKE_SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define FAKE_HELD_MAX 8
#define FAKE_AGENTS_MAX 16

/* A string vector, allocated: STRV("sh", "-c", "true"). */
#define STRV(...) strv_copy((char *[]) { __VA_ARGS__, NULL })

static sd_bus *core_bus, *fake_bus;
static Manager *manager;
static char state_dir[64];
static uint64_t fake_retention_sec;    /* the next manager's [Snapshots] Retention= */
static const char *fake_docker_socket; /* ... and DockerSocket=, if set */

/* Runs the loop until nothing more happens at once (every party here answers at once):
 * for what should not happen. */
static void run_briefly(void) {
        for (int i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 1000) >= 0);
}

/* ---- the fake systemd ---- */

typedef struct FakeSystemd {
        unsigned next_job;
        unsigned n_start, n_stop, n_freeze, n_thaw, n_kill, n_get;
        const char *start_result;       /* JobRemoved's result for StartTransientUnit: "done" */
        const char *freeze_error;       /* FreezeUnit fails with this D-Bus error */
        const char *hold;               /* calls of this member wait for fake_systemd_release() */
        char **units;                   /* what ListUnitsByPatterns lists; all of them active */
        char **stopped;                 /* the units StopUnit was called for, in order */
        const char *fail;               /* calls of this member fail (AccessDenied) */
        sd_bus_message *held[FAKE_HELD_MAX];
        unsigned n_held;
} FakeSystemd;

static FakeSystemd systemd_fake;

static void fake_emit_job_removed(unsigned id, const char *job, const char *unit, const char *result) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;

        assert_true(sd_bus_message_new_signal(fake_bus, &s, "/org/freedesktop/systemd1", FAKE_SYSTEMD_MANAGER,
                                              "JobRemoved") >= 0);
        assert_true(sd_bus_message_set_sender(s, FAKE_SYSTEMD_DEST) >= 0);
        assert_true(sd_bus_message_append(s, "uoss", id, job, unit, result) >= 0);
        assert_true(sd_bus_send(fake_bus, s, NULL) >= 0);
}

static void fake_reply_job(sd_bus_message *m, const char *result) {
        const char *unit;
        char job[64];
        unsigned id = ++systemd_fake.next_job;

        assert_true(sd_bus_message_read(m, "s", &unit) > 0);
        snprintf(job, sizeof(job), "/org/freedesktop/systemd1/job/%u", id);
        assert_true(sd_bus_reply_method_return(m, "o", job) >= 0);
        fake_emit_job_removed(id, job, unit, result);
}

/* The unit's cgroup as systemd would put it: sandbox.slice/sandbox-xx.slice/<unit>. */
static void fake_reply_control_group(sd_bus_message *m) {
        _cleanup_free_ char *unit = NULL;
        char cgroup[256];

        assert_true(sd_bus_path_decode(sd_bus_message_get_path(m), "/org/freedesktop/systemd1/unit", &unit) > 0);
        if (strstr(unit, ".slice"))
                snprintf(cgroup, sizeof(cgroup), "/sandbox.slice/%s", unit);
        else
                snprintf(cgroup, sizeof(cgroup), "/sandbox.slice/sandbox-%.2s.slice/%s", unit + strlen("sandbox-"),
                         unit);
        assert_true(sd_bus_reply_method_return(m, "v", "s", cgroup) >= 0);
}

/* Get: a unit's ActiveState ("active" if it is one of systemd_fake.units, else
 * "inactive"), or its ControlGroup. */
static void fake_reply_property(sd_bus_message *m) {
        const char *interface, *property;
        _cleanup_free_ char *unit = NULL;

        assert_true(sd_bus_message_read(m, "ss", &interface, &property) > 0);
        if (!streq(property, "ActiveState")) {
                fake_reply_control_group(m);
                return;
        }
        assert_true(sd_bus_path_decode(sd_bus_message_get_path(m), "/org/freedesktop/systemd1/unit", &unit) > 0);
        assert_true(sd_bus_reply_method_return(m, "v", "s", strv_contains(systemd_fake.units, unit) ? "active" :
                                               "inactive") >= 0);
}

static void fake_reply_units(sd_bus_message *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;

        assert_true(sd_bus_message_new_method_return(m, &reply) >= 0);
        assert_true(sd_bus_message_open_container(reply, 'a', "(ssssssouso)") >= 0);
        for (char **u = systemd_fake.units; u && *u; u++)
                assert_true(sd_bus_message_append(reply, "(ssssssouso)", *u, "", "loaded", "active", "running", "",
                                                  "/org/freedesktop/systemd1/unit/x", 0, "", "/") >= 0);
        assert_true(sd_bus_message_close_container(reply) >= 0);
        assert_true(sd_bus_send(NULL, reply, NULL) >= 0);
}

static void fake_systemd_answer(sd_bus_message *m) {
        const char *member = sd_bus_message_get_member(m);

        if (systemd_fake.fail && streq(member, systemd_fake.fail)) {
                assert_true(sd_bus_reply_method_errorf(m, SD_BUS_ERROR_ACCESS_DENIED, "No %s for you.", member) >= 0);
                return;
        }

        if (streq(member, "StartTransientUnit")) {
                systemd_fake.n_start++;
                fake_reply_job(m, systemd_fake.start_result ?: "done");
        } else if (streq(member, "StopUnit")) {
                const char *unit;

                systemd_fake.n_stop++;
                assert_true(sd_bus_message_read(m, "s", &unit) > 0);
                assert_int_equal(strv_extend(&systemd_fake.stopped, unit), 0);
                assert_true(sd_bus_message_rewind(m, true) >= 0);
                fake_reply_job(m, "done");
        } else if (streq(member, "FreezeUnit")) {
                systemd_fake.n_freeze++;
                if (systemd_fake.freeze_error)
                        assert_true(sd_bus_reply_method_errorf(m, systemd_fake.freeze_error, "Unit does not "
                                                               "support freezing.") >= 0);
                else
                        assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        } else if (streq(member, "ThawUnit")) {
                systemd_fake.n_thaw++;
                assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        } else if (streq(member, "KillUnit")) {
                systemd_fake.n_kill++;
                assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        } else if (streq(member, "AttachProcessesToUnit"))
                assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        else if (streq(member, "Get")) {
                systemd_fake.n_get++;
                fake_reply_property(m);
        } else if (streq(member, "ListUnitsByPatterns"))
                fake_reply_units(m);
        else
                assert_true(sd_bus_reply_method_errorf(m, SD_BUS_ERROR_UNKNOWN_METHOD, "No %s here.", member) >= 0);
}

static int fake_systemd_filter(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        assert_string_equal(sd_bus_message_get_destination(m), FAKE_SYSTEMD_DEST);
        if (systemd_fake.hold && streq(sd_bus_message_get_member(m), systemd_fake.hold)) {
                assert_true(systemd_fake.n_held < FAKE_HELD_MAX);
                systemd_fake.held[systemd_fake.n_held++] = sd_bus_message_ref(m);
                return 1;
        }
        fake_systemd_answer(m);
        return 1;
}

/* Answers the calls held so far, oldest first, and holds no more. */
_unused_ static void fake_systemd_release(void) {
        systemd_fake.hold = NULL;
        for (unsigned i = 0; i < systemd_fake.n_held; i++) {
                fake_systemd_answer(systemd_fake.held[i]);
                sd_bus_message_unref(systemd_fake.held[i]);
        }
        systemd_fake.n_held = 0;
}

/* ---- the fake payload backend and its agents ---- */

/* The agent of one sandbox: our end of its control socket. Kept after the sandbox is
 * gone (the test may look at what came last); closed at teardown or when it "dies". */
typedef struct FakeAgent {
        Sandbox *sandbox;       /* NULL once the sandbox is freed */
        char id[SANDBOX_ID_LEN + 1];
        int fd;
} FakeAgent;

typedef struct FakePayload {
        int agent;              /* index in agents[] */
        bool renew_held;        /* renew() waits for fake_payload_renewed() */
} FakePayload;

typedef struct FakeBackend {
        unsigned n_start, n_unit_started, n_stop, n_abort, n_renew, n_adopt, n_detach, n_free;
        bool auto_ready;        /* the agent says "ready" as soon as the unit runs */
        int start_error;        /* start() fails with this */
        bool hold_stop;         /* stop() waits for fake_payload_stopped() */
        Sandbox *stop_held;
        bool hold_renew;        /* renew() waits for fake_payload_renewed() */
        Sandbox *renew_held;
        const char *renew_failure;
        pid_t payload_pid;      /* what the state file says the payload's pid is (0: none) */
} FakeBackend;

static FakeBackend backend;
static FakeAgent agents[FAKE_AGENTS_MAX];
static unsigned n_agents;

static FakePayload *fake_state(Sandbox *s) {
        return s->payload_state;
}

static FakeAgent *agent_of(Sandbox *s) {
        return &agents[fake_state(s)->agent];
}

static void fake_init(Sandbox *s) {
        fake_state(s)->agent = -1;
}

static int fake_agent_new(Sandbox *s, int *ret_core_end) {
        int pair[2];

        assert_true(n_agents < FAKE_AGENTS_MAX);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
                return -errno;
        agents[n_agents] = (FakeAgent) { .sandbox = s, .fd = pair[1] };
        snprintf(agents[n_agents].id, sizeof(agents[n_agents].id), "%s", s->id);
        fake_state(s)->agent = (int) n_agents++;
        *ret_core_end = pair[0];
        return 0;
}

static int fake_start(Sandbox *s, const struct Template *t) {
        int fd = -EBADF, r;

        backend.n_start++;
        if (backend.start_error)
                return backend.start_error;
        r = fake_agent_new(s, &fd);
        if (r < 0)
                return r;
        r = sandbox_payload_connected(s, fd);
        if (r < 0)
                return r;
        return sandbox_payload_start_scope(s, getpid());
}

static void fake_unit_started(Sandbox *s) {
        backend.n_unit_started++;
        if (backend.auto_ready) {
                _cleanup_json_ json_object *m = agent_msg_ready();
                assert_int_equal(agent_send(agent_of(s)->fd, m, NULL, 0), 0);
        }
}

static void fake_abort(Sandbox *s) {
        backend.n_abort++;
}

static void fake_stop(Sandbox *s) {
        backend.n_stop++;
        if (backend.hold_stop) {
                backend.stop_held = s;
                return;
        }
        sandbox_payload_stopped(s);
}

static int fake_save(Sandbox *s, SandboxPersist *st) {
        st->payload_pid = backend.payload_pid;
        return 0;
}

static int fake_adopt(Sandbox *s, const SandboxPersist *st) {
        backend.n_adopt++;
        /* The agent a test adopts is the one it kept: found by the sandbox's id. */
        for (unsigned i = 0; i < n_agents; i++)
                if (streq(agents[i].id, st->id) && !agents[i].sandbox) {
                        agents[i].sandbox = s;
                        fake_state(s)->agent = (int) i;
                        return 0;
                }
        return -ENOENT;
}

static int fake_renew(Sandbox *s) {
        backend.n_renew++;
        if (backend.hold_renew) {
                backend.renew_held = s;
                return 0;
        }
        sandbox_payload_renewed(s, backend.renew_failure);
        return 0;
}

static void fake_detach(Sandbox *s) {
        backend.n_detach++;
}

static void fake_free(Sandbox *s) {
        backend.n_free++;
        if (fake_state(s)->agent >= 0)
                agents[fake_state(s)->agent].sandbox = NULL;
        if (backend.stop_held == s)
                backend.stop_held = NULL;
        if (backend.renew_held == s)
                backend.renew_held = NULL;
}

static const PayloadOps fake_payload_ops = {
        .name = "bwrap",        /* what the state file says: adopted as the same kind */
        .state_size = sizeof(FakePayload),
        .start_timeout_usec = 300 * 1000ULL,   /* the fake is ready in microseconds */
        .init = fake_init,
        .start = fake_start,
        .unit_started = fake_unit_started,
        .abort = fake_abort,
        .stop = fake_stop,
        .save = fake_save,
        .adopt = fake_adopt,
        .renew = fake_renew,
        .detach = fake_detach,
        .free = fake_free,
};

/* What a held stop() or renew() was waiting for. */
_unused_ static void fake_payload_stopped(void) {
        Sandbox *s = TAKE_PTR(backend.stop_held);

        assert_non_null(s);
        backend.hold_stop = false;
        sandbox_payload_stopped(s);
}

_unused_ static void fake_payload_renewed(const char *failure) {
        Sandbox *s = TAKE_PTR(backend.renew_held);

        assert_non_null(s);
        backend.hold_renew = false;
        sandbox_payload_renewed(s, failure);
}

/* ---- the scripted agent ---- */

/* The next message the core sent agent a, of type type (its descriptors into fds). */
static json_object *agent_expect(FakeAgent *a, const char *type, int *fds, size_t max_fds, size_t *ret_n_fds) {
        json_object *msg = NULL;
        const char *t;
        size_t n = 0;
        int r;

        RUN_UNTIL((r = agent_recv(a->fd, &msg, fds, max_fds, &n)) != -EAGAIN);
        assert_int_equal(r, 0);
        assert_int_equal(agent_get_string(msg, "type", &t), 0);
        assert_string_equal(t, type);
        if (ret_n_fds)
                *ret_n_fds = n;
        else
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
        return msg;
}

_unused_ static void agent_say(FakeAgent *a, json_object *msg) {
        assert_non_null(msg);
        assert_int_equal(agent_send(a->fd, msg, NULL, 0), 0);
        json_object_put(msg);
}

_unused_ static uint64_t msg_id(json_object *msg) {
        int64_t id;

        assert_int_equal(agent_get_int64(msg, "id", &id), 0);
        return (uint64_t) id;
}

/* The agent's side of an exec: takes the "exec" and its descriptors, says "started";
 * returns its id and keeps stdout's descriptor (the caller writes and closes it). */
_unused_ static uint64_t agent_take_exec(FakeAgent *a, int *ret_out) {
        _cleanup_json_ json_object *msg = NULL;
        int fds[AGENT_EXEC_NFDS];
        size_t n;
        uint64_t id;

        msg = agent_expect(a, "exec", fds, AGENT_EXEC_NFDS, &n);
        assert_int_equal(n, AGENT_EXEC_NFDS);
        id = msg_id(msg);
        safe_close(fds[0]);
        safe_close(fds[2]);
        *ret_out = fds[1];
        agent_say(a, agent_msg_started(id, 42));
        return id;
}

_unused_ static void agent_exit(FakeAgent *a, uint64_t id, int code) {
        agent_say(a, agent_msg_exit(&(struct agent_exit) { .id = id, .code = code, .duration_usec = 1000 }));
}

/* A whole exec: "hello\n" on stdout, then exit code. */
_unused_ static void agent_run_exec(FakeAgent *a, int code) {
        int out;
        uint64_t id = agent_take_exec(a, &out);

        assert_int_equal(write(out, "hello\n", 6), 6);
        safe_close(out);
        agent_exit(a, id, code);
}

/* The agent (and with it the payload) ends: the core sees EOF on its control socket. */
_unused_ static void agent_die(FakeAgent *a) {
        a->fd = safe_close(a->fd);
}

/* ---- what the core's callbacks said ---- */

/* A sandbox_callback_t's answer, for a test to wait for and look at. */

typedef struct Answer {
        unsigned n;
        Sandbox *sandbox;
        char id[SANDBOX_ID_LEN + 1];
        SandboxState state;
        SandboxErrorCode code;
        char message[256];
} Answer;

_unused_ static void on_sandbox(Sandbox *s, const SandboxError *error, void *userdata) {
        Answer *a = userdata;

        a->n++;
        a->sandbox = error ? NULL : s;
        a->code = error ? error->code : SANDBOX_ERR_NONE;
        snprintf(a->message, sizeof(a->message), "%s", error ? sandbox_error_message(error) : "");
        if (s) {
                snprintf(a->id, sizeof(a->id), "%s", s->id);
                a->state = s->state;
        }
}

/* Destroyed, and answered so: what was under way is answered (while the answers' storage
 * lives). */
_unused_ static void fake_destroy(Sandbox *s) {
        Answer d = {};

        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        RUN_UNTIL(d.n > 0);
        assert_int_equal(d.code, SANDBOX_ERR_NONE);
}

/* Whether sandbox id has a state file (what a restarted sandboxd adopts it by). */
_unused_ static bool state_file_exists(const char *id) {
        char path[256];

        snprintf(path, sizeof(path), "%s/sandboxes/%s.json", state_dir, id);
        return access(path, F_OK) == 0;
}

/* ---- what sandboxd tells systemd ($NOTIFY_SOCKET) ---- */

/* A datagram socket as $NOTIFY_SOCKET, for what sandboxd tells systemd. */
_unused_ static int notify_socket_new(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        assert_true(fd >= 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", state_dir);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
        return fd;
}

/* Every message sent to it so far, each line-terminated. */
_unused_ static char *notify_read_all(int fd) {
        char *all = strdup(""), buf[512];
        ssize_t n;

        assert_non_null(all);
        while ((n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
                char *more;

                buf[n] = 0;
                assert_true(asprintf(&more, "%s%s\n", all, buf) > 0);
                free(all);
                all = more;
        }
        return all;
}

/* The next message to the notify socket: its text, and the descriptor it carries (or
 * -EBADF); false if none came. */
_unused_ static bool notify_recv(int fd, char *text, size_t size, int *ret_fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = text, .iov_len = size - 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof(control) };
        ssize_t n;

        *ret_fd = -EBADF;
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0) {
                assert_int_equal(errno, EAGAIN);
                return false;
        }
        text[n] = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        assert_int_equal(c->cmsg_len, CMSG_LEN(sizeof(int)));
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
                }
        return true;
}

/* ---- the core ---- */

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        assert_non_null(f);
        assert_true(fputs(text, f) >= 0);
        assert_int_equal(fclose(f), 0);
}

/* A manager over the fake systemd with the fake backend for bwrap, in state_dir (the
 * templates in its "templates"); again over the same state: sandboxd restarted. */
/* The defaults, with dir as the state directory and the snapshots in state_dir's. */
static void fake_settings_init(ManagerSettings *settings, const char *dir) {
        assert_int_equal(manager_settings_init(settings), 0);
        free(settings->state_dir);
        settings->state_dir = strdup(dir);
        assert_non_null(settings->state_dir);
        free(settings->snapshots.directory);
        assert_true(asprintf(&settings->snapshots.directory, "%s/snapshots", state_dir) > 0);
}

static void fake_manager_new(void) {
        ManagerSettings settings;

        fake_settings_init(&settings, state_dir);
        settings.snapshots.retention_sec = fake_retention_sec;
        if (fake_docker_socket) {
                free(settings.docker_socket);
                settings.docker_socket = strdup(fake_docker_socket);
                assert_non_null(settings.docker_socket);
        }
        settings.template_dirs = strv_free(settings.template_dirs);
        assert_int_equal(strv_extendf(&settings.template_dirs, "%s/templates", state_dir), 0);
        assert_int_equal(manager_new(event, core_bus, &settings, &manager), 0);
        manager_settings_done(&settings);
        manager->payload_ops[PAYLOAD_BWRAP] = &fake_payload_ops;
        assert_true(manager_load_templates(manager) > 0);
}

/* The fake systemd and a manager over it, with these templates ("name", JSON text, ...;
 * NULL-terminated) in a state directory of its own. */
static void fake_core_new(const char *const *templates) {
        char dir[128];

        snprintf(state_dir, sizeof(state_dir), "/tmp/test-core-XXXXXX");
        assert_non_null(mkdtemp(state_dir));
        snprintf(dir, sizeof(dir), "%s/templates", state_dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        for (size_t i = 0; templates && templates[i]; i += 2) {
                char path[256];

                snprintf(path, sizeof(path), "%s/%s.json", dir, templates[i]);
                write_text(path, templates[i + 1]);
        }

        systemd_fake = (FakeSystemd) { .next_job = 100 };
        fake_retention_sec = 0;
        backend = (FakeBackend) { .auto_ready = true };
        n_agents = 0;

        fake_peer_new(&core_bus, &fake_bus);
        assert_true(sd_bus_add_filter(fake_bus, NULL, fake_systemd_filter, NULL) >= 0);
        fake_peer_start(core_bus, fake_bus);
        fake_manager_new();
}

static void fake_core_free(void) {
        char cmd[128];

        manager = manager_free(manager);
        /* Whatever the manager left to answer. */
        for (int i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 0) >= 0);
        for (unsigned i = 0; i < n_agents; i++)
                agents[i].fd = safe_close(agents[i].fd);
        for (unsigned i = 0; i < systemd_fake.n_held; i++)
                sd_bus_message_unref(systemd_fake.held[i]);
        systemd_fake.n_held = 0;
        systemd_fake.units = strv_free(systemd_fake.units);
        systemd_fake.stopped = strv_free(systemd_fake.stopped);
        fake_peer_done(&core_bus, &fake_bus);
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", state_dir);
        assert_int_equal(system(cmd), 0);
}
