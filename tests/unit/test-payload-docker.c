/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The Docker payload backend (payload-docker.c) through the core's own code, against a
 * fake Docker Engine: a unix socket served by a thread of this process that reads the
 * HTTP requests libcurl sends (docker-api.c) and answers each as the test scripts it —
 * a status and a JSON body, an answer held until the test lets it go, or a connection
 * dropped without one. The rest is fake-payload.h's: a fake systemd, and the test as the
 * container's agent, connecting to the control socket the backend listens on. What is
 * asserted is what a caller hears (the create's error, the destroy's answer) and what
 * the backend asked of Docker. */

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/un.h>
#include <cmocka.h>

#include "fake-payload.h"
#include "payload-docker.h"

#define DOCKER_TEMPLATE "{ \"description\": \"a container\", \"payload\": \"docker\", \"image\": \"img:1\" }"
#define CONTAINER_ID "c0ffee0123456789abcdef"
#define ENGINE_RULES_MAX 8
#define ENGINE_LOG_MAX 32

static const char *const templates[] = { "box", DOCKER_TEMPLATE, NULL };
static const SandboxCaller root = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .granted = true };

/* ---- the fake Docker Engine ---- */

/* The first rule whose method and path prefix match answers; a rule with uses > 0 is
 * spent after that many. */
typedef struct EngineRule {
        const char *method;
        const char *path;
        int status;
        const char *body;
        bool drop;              /* close the connection without an answer */
        bool hold;              /* answer once engine_release() is called */
        int uses;
} EngineRule;

typedef struct Engine {
        pthread_t thread;
        pthread_mutex_t lock;
        int listen_fd;
        int release[2];         /* a byte lets a held answer go */
        char dir[64], path[96];
        EngineRule rules[ENGINE_RULES_MAX];
        unsigned n_rules;
        char log[ENGINE_LOG_MAX][192]; /* "METHOD path" of every request, in order */
        unsigned n_log;
        char *create_body;      /* the last POST /containers/create's body */
        unsigned n_held;        /* requests waiting for engine_release() */
} Engine;

static Engine engine;

static const EngineRule default_rules[] = {
        { "GET", "/info", 200, "{\"CgroupDriver\":\"systemd\"}" },
        { "POST", "/containers/create", 201, "{\"Id\":\"" CONTAINER_ID "\",\"Warnings\":[]}" },
        { "POST", "/containers/" CONTAINER_ID "/start", 204, NULL },
        { "DELETE", "/containers/", 204, NULL },
        { "GET", "/containers/json", 200, "[]" },
};

/* Tried before the defaults. */
static void engine_script(EngineRule rule) {
        pthread_mutex_lock(&engine.lock);
        assert_true(engine.n_rules < ENGINE_RULES_MAX);
        engine.rules[engine.n_rules++] = rule;
        pthread_mutex_unlock(&engine.lock);
}

static bool engine_match(const EngineRule *r, const char *method, const char *path) {
        return streq(r->method, method) && strncmp(path, r->path, strlen(r->path)) == 0;
}

/* What the rules say for this request (the default rule if none does). */
static EngineRule engine_answer_for(const char *method, const char *path) {
        EngineRule answer = { .status = 404, .body = "{\"message\":\"page not found\"}" };

        pthread_mutex_lock(&engine.lock);
        for (unsigned i = 0; i < engine.n_rules; i++)
                if (engine.rules[i].uses >= 0 && engine_match(&engine.rules[i], method, path)) {
                        answer = engine.rules[i];
                        if (engine.rules[i].uses > 0 && --engine.rules[i].uses == 0)
                                engine.rules[i].uses = -1;
                        goto done;
                }
        for (size_t i = 0; i < ELEMENTSOF(default_rules); i++)
                if (engine_match(&default_rules[i], method, path)) {
                        answer = default_rules[i];
                        break;
                }
done:
        pthread_mutex_unlock(&engine.lock);
        return answer;
}

static bool engine_read_request(int fd, char *buf, size_t size, size_t *ret_len, size_t *ret_header_len) {
        size_t len = 0;

        for (;;) {
                char *end;
                ssize_t n;

                buf[len] = 0;
                end = strstr(buf, "\r\n\r\n");
                if (end) {
                        const char *cl = strcasestr(buf, "\r\nContent-Length:");
                        size_t header_len = (size_t) (end - buf) + 4;
                        size_t body_len = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;

                        if (strcasestr(buf, "\r\nExpect: 100-continue") && len == header_len &&
                            body_len > 0 && write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 25)
                                return false;
                        if (len >= header_len + body_len) {
                                *ret_len = len;
                                *ret_header_len = header_len;
                                return true;
                        }
                }
                if (len + 1 >= size)
                        return false;
                n = read(fd, buf + len, size - 1 - len);
                if (n <= 0)
                        return false;
                len += (size_t) n;
        }
}

static void engine_serve(int fd) {
        static char buf[256 * 1024];
        char method[16], path[160], reply[1024];
        size_t len, header_len;
        EngineRule a;
        int n;

        if (!engine_read_request(fd, buf, sizeof(buf), &len, &header_len) ||
            sscanf(buf, "%15s %159s", method, path) != 2)
                return;
        pthread_mutex_lock(&engine.lock);
        if (engine.n_log < ENGINE_LOG_MAX)
                snprintf(engine.log[engine.n_log++], sizeof(engine.log[0]), "%s %s", method, path);
        if (streq(method, "POST") && startswith_str(path, "/containers/create")) {
                free(engine.create_body);
                engine.create_body = strndup(buf + header_len, len - header_len);
        }
        pthread_mutex_unlock(&engine.lock);

        a = engine_answer_for(method, path);
        if (a.hold) {
                char c;

                __atomic_add_fetch(&engine.n_held, 1, __ATOMIC_SEQ_CST);
                if (read(engine.release[0], &c, 1) != 1)
                        return;
        }
        if (a.drop)
                return;
        n = snprintf(reply, sizeof(reply),
                     "HTTP/1.1 %d Whatever\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", a.status, strlen(strempty(a.body)), strempty(a.body));
        (void) !write(fd, reply, (size_t) n);
}

static void *engine_main(void *userdata) {
        for (;;) {
                int fd = accept4(engine.listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return NULL; /* shut down */
                }
                engine_serve(fd);
                safe_close(fd);
        }
}

static void engine_start(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        engine = (Engine) {};
        assert_int_equal(pthread_mutex_init(&engine.lock, NULL), 0);
        assert_int_equal(pipe2(engine.release, O_CLOEXEC), 0);
        snprintf(engine.dir, sizeof(engine.dir), "/tmp/test-docker-XXXXXX");
        assert_non_null(mkdtemp(engine.dir));
        snprintf(engine.path, sizeof(engine.path), "%s/docker.sock", engine.dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", engine.path);
        engine.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(engine.listen_fd >= 0);
        assert_int_equal(bind(engine.listen_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(engine.listen_fd, 16), 0);
        assert_int_equal(pthread_create(&engine.thread, NULL, engine_main, NULL), 0);
}

static void engine_stop(void) {
        /* Whatever is held goes, and accept() returns. */
        for (unsigned i = 0; i < engine.n_held; i++)
                (void) !write(engine.release[1], "x", 1);
        assert_int_equal(shutdown(engine.listen_fd, SHUT_RDWR), 0);
        assert_int_equal(pthread_join(engine.thread, NULL), 0);
        safe_close(engine.listen_fd);
        safe_close(engine.release[0]);
        safe_close(engine.release[1]);
        free(engine.create_body);
        pthread_mutex_destroy(&engine.lock);
        assert_int_equal(unlink(engine.path), 0);
        assert_int_equal(rmdir(engine.dir), 0);
}

static void engine_release(void) {
        assert_int_equal(write(engine.release[1], "x", 1), 1);
}

static unsigned engine_held(void) {
        return __atomic_load_n(&engine.n_held, __ATOMIC_SEQ_CST);
}

static unsigned engine_n_log(void) {
        unsigned n;

        pthread_mutex_lock(&engine.lock);
        n = engine.n_log;
        pthread_mutex_unlock(&engine.lock);
        return n;
}

/* Whether a request "METHOD path" (a prefix of it) came, and how often. */
static unsigned engine_count(const char *request) {
        unsigned n = 0;

        pthread_mutex_lock(&engine.lock);
        for (unsigned i = 0; i < engine.n_log; i++)
                if (startswith_str(engine.log[i], request))
                        n++;
        pthread_mutex_unlock(&engine.lock);
        return n;
}

/* ---- the core, and the container's agent ---- */

static int setup(void **state) {
        engine_start();
        fake_docker_socket = engine.path;
        fake_core_new(templates);
        return 0;
}

static int teardown(void **state) {
        fake_core_free();
        engine_stop();
        return 0;
}

/* Asks for a sandbox of the docker template: the one the core now has, starting. */
static Sandbox *create_starting(Answer *a) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Sandbox *s;

        assert_int_equal(manager_create_sandbox(manager, &root, "box", &config, on_sandbox, a, &error), 0);
        s = manager_next_sandbox(manager, NULL);
        assert_non_null(s);
        assert_int_equal(s->state, SANDBOX_STARTING);
        sandbox_config_done(&config);
        return s;
}

/* The container's agent: connects to the control socket the backend listens on, as the
 * container's PID 1 does, and says it is ready. */
static int agent_connect(const char *id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_json_ json_object *ready = agent_msg_ready();
        int fd;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sockets/%s/" DOCKER_CONTROL_SOCKET, state_dir, id);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(agent_send(fd, ready, NULL, 0), 0);
        return fd;
}

static bool socket_exists(const char *id) {
        char path[256];

        snprintf(path, sizeof(path), "%s/sockets/%s/" DOCKER_CONTROL_SOCKET, state_dir, id);
        return access(path, F_OK) == 0;
}

/* Created, its container started, its agent connected: running. */
static Sandbox *create_running(int *ret_agent) {
        unsigned started = engine_count("POST /containers/" CONTAINER_ID "/start");
        Answer a = {};
        Sandbox *s = create_starting(&a);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        /* The agent is in the container: it connects once that started. */
        RUN_UNTIL(engine_count("POST /containers/" CONTAINER_ID "/start") > started);
        assert_true(socket_exists(id));
        *ret_agent = agent_connect(id);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_ptr_equal(a.sandbox, s);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        return s;
}

/* A create that fails: its answer's message. */
static void create_fails(const char *message) {
        Answer a = {};

        (void) create_starting(&a);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        if (!strstr(a.message, message))
                fail_msg("\"%s\" does not say \"%s\"", a.message, message);
        /* Nothing of it is left: no sandbox, its unit stopped. */
        RUN_UNTIL(!manager_next_sandbox(manager, NULL));
}

/* ---- the tests ---- */

static void test_create_and_destroy(void **state) {
        _cleanup_json_ json_object *body = NULL;
        json_object *host, *v, *labels;
        char id[SANDBOX_ID_LEN + 1], request[192];
        int agent;
        Sandbox *s = create_running(&agent);

        snprintf(id, sizeof(id), "%s", s->id);
        /* Asked, in order: the cgroup driver, the container (named after the sandbox), its start. */
        assert_true(engine_n_log() >= 3);
        assert_string_equal(engine.log[0], "GET /info");
        snprintf(request, sizeof(request), "POST /containers/create?name=sandbox-%s", id);
        assert_string_equal(engine.log[1], request);
        assert_string_equal(engine.log[2], "POST /containers/" CONTAINER_ID "/start");
        /* The systemd driver: the unit is a slice that dockerd puts the container's scope in. */
        assert_non_null(strstr(s->unit, ".slice"));

        body = json_tokener_parse(engine.create_body);
        assert_non_null(body);
        assert_true(json_object_object_get_ex(body, "Image", &v));
        assert_string_equal(json_object_get_string(v), "img:1");
        assert_true(json_object_object_get_ex(body, "Labels", &labels));
        assert_true(json_object_object_get_ex(labels, DOCKER_LABEL_ID, &v));
        assert_string_equal(json_object_get_string(v), id);
        assert_true(json_object_object_get_ex(body, "HostConfig", &host));
        assert_true(json_object_object_get_ex(host, "CgroupParent", &v));
        assert_string_equal(json_object_get_string(v), s->unit);
        assert_true(json_object_object_get_ex(host, "NetworkMode", &v));
        assert_string_equal(json_object_get_string(v), "none");

        /* The driver is asked once, not per sandbox. */
        safe_close(agent);
        fake_destroy(s);
        assert_int_equal(engine_count("DELETE /containers/" CONTAINER_ID "?force=1&v=1"), 1);
        assert_false(socket_exists(id));
        s = create_running(&agent);
        assert_int_equal(engine_count("GET /info"), 1);
        fake_destroy(s);
        safe_close(agent);
}

/* No Docker (500, or the connection dropped): the create fails saying so; asked again
 * by the next create. */
static void test_docker_not_available(void **state) {
        engine_script((EngineRule) { "GET", "/info", 500, "{\"message\":\"daemon is sick\"}", .uses = 1 });
        create_fails("Docker is not available: Docker says: daemon is sick");
        engine_script((EngineRule) { "GET", "/info", .drop = true, .uses = 1 });
        create_fails("Docker is not available: ");
        assert_int_equal(engine_count("GET /info"), 2);
        assert_int_equal(engine_count("POST /containers/create"), 0);
        assert_int_equal(systemd_fake.n_start, 0);
}

/* Docker refuses the container: no such image (404), its name taken (409), a fault
 * (500), no answer at all. The create fails with Docker's message; no container to
 * remove, the unit stopped. */
static void test_create_refused(void **state) {
        engine_script((EngineRule) { "POST", "/containers/create", 404, "{\"message\":\"No such image: img:1\"}",
                                     .uses = 1 });
        create_fails("the container could not be created: Docker says: No such image: img:1");
        engine_script((EngineRule) { "POST", "/containers/create", 409,
                                     "{\"message\":\"Conflict. The container name is already in use\"}", .uses = 1 });
        create_fails("the container could not be created: Docker says: Conflict. The container name is already in use");
        engine_script((EngineRule) { "POST", "/containers/create", 500, "not json", .uses = 1 });
        create_fails("the container could not be created: Docker answered HTTP 500");
        engine_script((EngineRule) { "POST", "/containers/create", .drop = true, .uses = 1 });
        create_fails("the container could not be created: ");
        assert_int_equal(engine_count("DELETE"), 0);
        assert_int_equal(systemd_fake.n_stop, 4);
}

/* The container is made but does not start: the create fails, and the container goes. */
static void test_start_fails(void **state) {
        engine_script((EngineRule) { "POST", "/containers/" CONTAINER_ID "/start", 500,
                                     "{\"message\":\"OCI runtime create failed\"}", .uses = 1 });
        create_fails("the container did not start: Docker says: OCI runtime create failed");
        assert_int_equal(engine_count("DELETE /containers/" CONTAINER_ID), 1);
}

/* Destroyed while Docker makes its container: the answer, when it comes, removes what
 * was made, and the destroy is answered after. */
static void test_destroy_while_creating(void **state) {
        Answer a = {}, d = {};
        Sandbox *s;

        engine_script((EngineRule) { "POST", "/containers/create", 201, "{\"Id\":\"" CONTAINER_ID "\"}", .hold = true });
        s = create_starting(&a);
        RUN_UNTIL(engine_held() > 0);
        assert_int_equal(sandbox_destroy(s, on_sandbox, &d), 0);
        run_briefly();
        assert_int_equal(d.n, 0);
        assert_int_equal(engine_count("DELETE"), 0);
        engine_release();
        RUN_UNTIL(d.n > 0 && a.n > 0);
        assert_int_equal(d.code, SANDBOX_ERR_NONE);
        assert_int_not_equal(a.code, SANDBOX_ERR_NONE);
        assert_int_equal(engine_count("DELETE /containers/" CONTAINER_ID "?force=1&v=1"), 1);
        assert_int_equal(engine_count("POST /containers/" CONTAINER_ID "/start"), 0);
}

/* Docker cannot remove the container (500), or it is gone already (404): the sandbox is
 * destroyed all the same, its unit stopped. */
static void test_remove_fails(void **state) {
        int agent;
        Sandbox *s = create_running(&agent);
        unsigned stops = systemd_fake.n_stop;

        engine_script((EngineRule) { "DELETE", "/containers/", 500, "{\"message\":\"device busy\"}", .uses = 1 });
        fake_destroy(s);
        assert_int_equal(systemd_fake.n_stop, stops + 1);
        safe_close(agent);

        s = create_running(&agent);
        engine_script((EngineRule) { "DELETE", "/containers/", 404, "{\"message\":\"No such container\"}", .uses = 1 });
        fake_destroy(s);
        assert_null(manager_next_sandbox(manager, NULL));
        assert_int_equal(engine_count("DELETE"), 2);
        safe_close(agent);
}

/* The agent (the container's PID 1) ends: the sandbox fails, and its container goes. */
static void test_container_dies(void **state) {
        int agent;
        Sandbox *s = create_running(&agent);
        char id[SANDBOX_ID_LEN + 1];

        snprintf(id, sizeof(id), "%s", s->id);
        safe_close(agent);
        RUN_UNTIL(engine_count("DELETE /containers/" CONTAINER_ID "?force=1&v=1") == 1);
        RUN_UNTIL(!socket_exists(id));
}

/* sandboxd restarts: the container's id is in the sandbox's state file, and the one
 * that adopts it removes that container when it is destroyed. */
static void test_restart_keeps_the_container(void **state) {
        char id[SANDBOX_ID_LEN + 1], path[256];
        SandboxPersist st = {};
        Sandbox *adopted = NULL;
        int agent;
        Sandbox *s = create_running(&agent);
        int kept = fcntl(s->control_fd, F_DUPFD_CLOEXEC, 3);

        assert_true(kept >= 0);
        snprintf(id, sizeof(id), "%s", s->id);
        manager = manager_free(manager);
        assert_int_equal(engine_count("DELETE"), 0);

        fake_manager_new();
        snprintf(path, sizeof(path), "%s/sandboxes/%s.json", state_dir, id);
        assert_int_equal(sandbox_persist_load(path, &st), 0);
        assert_non_null(st.payload_data);
        assert_int_equal(sandbox_adopt(manager, &st, kept, &adopted), 0);
        sandbox_persist_done(&st);
        assert_int_equal(adopted->state, SANDBOX_RUNNING);
        fake_destroy(adopted);
        assert_int_equal(engine_count("DELETE /containers/" CONTAINER_ID "?force=1&v=1"), 1);
        safe_close(agent);
}

/* At start, containers labelled as a sandbox's that is not ours are removed; the others
 * are left alone; no Docker is no error. */
static void test_orphans_removed(void **state) {
        engine_script((EngineRule) { "GET", "/containers/json", 200,
                                     "[{\"Id\":\"orphan\",\"Labels\":{\"" DOCKER_LABEL_ID "\":\"0123456789abcdef\"}},"
                                     " {\"Id\":\"unlabelled\",\"Labels\":{}}]", .uses = 1 });
        engine_script((EngineRule) { "DELETE", "/containers/orphan", 500, "{\"message\":\"busy\"}" });
        payload_docker_ops.remove_orphans(manager);
        RUN_UNTIL(engine_count("DELETE /containers/orphan?force=1&v=1") == 1);
        run_briefly();
        assert_int_equal(engine_count("DELETE"), 1);

        engine_script((EngineRule) { "GET", "/containers/json", .drop = true, .uses = 1 });
        payload_docker_ops.remove_orphans(manager);
        RUN_UNTIL(engine_count("GET /containers/json") == 2);
        run_briefly();
        assert_int_equal(engine_count("DELETE"), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_and_destroy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_docker_not_available, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_destroy_while_creating, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_container_dies, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_keeps_the_container, setup, teardown),
                cmocka_unit_test_setup_teardown(test_orphans_removed, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
