/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A sandbox whose payload is a Docker container: the same unit, agent and protocol as a
 * bwrap sandbox; what differs is how the payload comes to life and goes. */

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "log.h"
#include "payload-docker.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"

/* Whether the sandbox was asked to go while a Docker request was in flight. (Not "not
 * starting": the agent may well report ready before Docker answers the start.) */
static bool sandbox_going(Sandbox *s) {
        return s->state == SANDBOX_STOPPING || s->state == SANDBOX_DEAD;
}

static void docker_fail(Sandbox *s, const char *what, long status, json_object *body, const char *error) {
        char buf[512], reason[640];

        docker_error_message(status, body, error, buf, sizeof(buf));
        snprintf(reason, sizeof(reason), "%s: %s", what, buf);
        log_sandbox(s, LOG_ERR, 0, "Sandbox %s: %s", s->id, reason);
        sandbox_fail(s, reason);
}

static int on_agent_connect(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        int c, r;

        c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
                return 0;
        /* One agent per sandbox: the first to connect is PID 1 of the container, started
         * before anything of the sandbox's own runs. Nobody else gets in after it. */
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        s->listen_fd = safe_close(s->listen_fd);
        s->control_fd = c;
        r = sd_event_add_io(s->manager->event, &s->control_source, s->control_fd, EPOLLIN, sandbox_on_control, s);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to watch the agent connection of %s: %m", s->id);
                s->control_fd = safe_close(s->control_fd);
                sandbox_fail(s, "its agent's connection could not be watched.");
        }
        return 0;
}

static void on_container_started(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;

        s->docker_pending = false;
        if (sandbox_going(s)) {
                sandbox_docker_stop(s);
                return;
        }
        if (status != 204 && status != 304) {
                docker_fail(s, "the container did not start", status, body, error);
                return;
        }
        log_sandbox(s, LOG_DEBUG, 0, "Container %.12s of sandbox %s started.", s->container_id, s->id);
}

static void on_container_created(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        json_object *id;
        char path[128];

        s->docker_pending = false;
        if (status == 201 && body && json_object_object_get_ex(body, "Id", &id) &&
            json_object_is_type(id, json_type_string))
                s->container_id = strdup(json_object_get_string(id));
        if (sandbox_going(s)) {
                sandbox_docker_stop(s); /* removes what was just made */
                return;
        }
        if (!s->container_id) {
                docker_fail(s, "the container could not be created", status, body, error);
                return;
        }
        snprintf(path, sizeof(path), "/containers/%s/start", s->container_id);
        if (docker_request(s->manager->docker, "POST", path, NULL, on_container_started, s) < 0) {
                sandbox_fail(s, "its container could not be started.");
                return;
        }
        s->docker_pending = true;
}

static void docker_create_container(Sandbox *s, const char *cgroup_parent) {
        _cleanup_strv_free_ char **env = NULL;
        json_object *body = NULL;
        char path[128];
        int r;

        env = strv_copy(s->environment);
        DockerCreateParams p = {
                .sandbox_id = s->id,
                .image = s->image,
                .agent_path = s->manager->settings.agent_path,
                .socket_dir = s->socket_dir,
                .cgroup_parent = cgroup_parent,
                .seccomp_profile = s->manager->docker_seccomp_profile,
                .environment = env,
                .limits = &s->config.limits,
                .disk_max = s->config.disk_max,
        };
        r = env ? docker_build_create_body(&p, &body) : -ENOMEM;
        if (r >= 0) {
                snprintf(path, sizeof(path), "/containers/create?name=sandbox-%s", s->id);
                r = docker_request(s->manager->docker, "POST", path, body, on_container_created, s);
        }
        json_object_put(body);
        if (r < 0) {
                sandbox_fail(s, "its container could not be asked for.");
                return;
        }
        s->docker_pending = true;
}

void sandbox_docker_unit_started(Sandbox *s) {
        _cleanup_free_ char *parent = NULL;

        /* cgroupfs: the container's cgroup nests under the (delegated) scope, so the
         * scope's limits hold it; systemd: dockerd makes its scope inside our slice. */
        if (streq(s->manager->docker_cgroup_driver, "systemd"))
                parent = strdup(s->unit);
        else if (s->cgroup && asprintf(&parent, "%s/payload", s->cgroup) < 0)
                parent = NULL;
        if (!parent) {
                sandbox_fail(s, "the cgroup of its unit is not known.");
                return;
        }
        docker_create_container(s, parent);
}

static int docker_listen(Sandbox *s) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (asprintf(&s->socket_dir, "%s/sockets/%s", s->manager->settings.state_dir, s->id) < 0)
                return -ENOMEM;
        /* The container's user (uid 1000 of the host's, without a user namespace) must be
         * able to connect; the directory is bound only into this sandbox's container. */
        if (mkdir(s->socket_dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" DOCKER_CONTROL_SOCKET, s->socket_dir) >=
            sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(sa.sun_path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0666) < 0 || listen(fd, 1) < 0)
                return -errno;
        r = sd_event_add_io(s->manager->event, &s->listen_source, fd, EPOLLIN, on_agent_connect, s);
        if (r < 0)
                return r;
        s->listen_fd = TAKE_FD(fd);
        return 0;
}

static void on_docker_info(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        Manager *m = s->manager;
        json_object *d;
        int r;

        s->docker_pending = false;
        if (sandbox_going(s)) {
                sandbox_docker_stop(s);
                return;
        }
        if (status != 200 || !body || !json_object_object_get_ex(body, "CgroupDriver", &d) ||
            !json_object_is_type(d, json_type_string)) {
                docker_fail(s, "Docker is not available", status, body, error);
                return;
        }
        free(m->docker_cgroup_driver);
        m->docker_cgroup_driver = strdup(json_object_get_string(d));
        r = sandbox_docker_start(s);
        if (r < 0)
                sandbox_fail(s, "it could not be set up.");
}

int sandbox_docker_start(Sandbox *s) {
        Manager *m = s->manager;
        int r;

        if (!m->docker)
                return -EOPNOTSUPP;
        if (!m->docker_cgroup_driver) {
                /* Asked every time until it answers: Docker may come up after us. */
                r = docker_request(m->docker, "GET", "/info", NULL, on_docker_info, s);
                if (r >= 0)
                        s->docker_pending = true;
                return r;
        }

        if (s->listen_fd < 0) {
                r = docker_listen(s);
                if (r < 0)
                        return log_sandbox(s, LOG_ERR, r, "Failed to listen for the agent of %s: %m", s->id);
        }

        if (streq(m->docker_cgroup_driver, "systemd")) {
                /* The sandbox's unit is a slice; dockerd puts its scope into it. */
                char *slice;

                if (asprintf(&slice, "sandbox-%s.slice", s->id) < 0)
                        return -ENOMEM;
                free(s->unit);
                s->unit = slice;
                ScopeParams sp = {
                        .unit = s->unit,
                        .slice = NULL,
                        .description = s->description,
                        .limits = s->config.limits,
                };
                r = scope_start_transient(m->systemd, &sp, sandbox_on_unit_started, s);
        } else {
                /* A scope needs a process: a holder keeps it while the container's
                 * processes, started by dockerd, live in a cgroup nested below it. */
                r = payload_spawn_holder(m->settings.agent_path, s->host_uid, &s->payload);
                if (r < 0)
                        return log_sandbox(s, LOG_ERR, r, "Failed to spawn the holder of %s: %m", s->unit);
                r = sd_event_add_io(m->event, &s->payload_source, s->payload.pidfd, EPOLLIN, sandbox_on_payload_exit, s);
                if (r < 0)
                        return r;
                ScopeParams sp = {
                        .unit = s->unit,
                        .slice = "sandbox.slice",
                        .description = s->description,
                        .pids = &s->payload.pid,
                        .n_pids = 1,
                        .limits = s->config.limits,
                };
                r = scope_start_transient(m->systemd, &sp, sandbox_on_unit_started, s);
        }
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to ask systemd for %s: %m", s->unit);
        s->start_pending = true;
        return 0;
}

static void on_container_removed(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        char buf[512];

        s->docker_pending = false;
        if (status != 204 && status != 404)
                log_sandbox(s, LOG_WARNING, 0, "Failed to remove container %.12s of sandbox %s: %s",
                            s->container_id, s->id, docker_error_message(status, body, error, buf, sizeof(buf)));
        s->container_id = mfree(s->container_id);
        sandbox_stop_unit_now(s);
}

void sandbox_docker_stop(Sandbox *s) {
        char path[160];

        if (s->docker_pending)
                return; /* the answer in flight continues the stop */
        if (s->container_id && s->manager->docker) {
                snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", s->container_id);
                if (docker_request(s->manager->docker, "DELETE", path, NULL, on_container_removed, s) >= 0) {
                        s->docker_pending = true;
                        return;
                }
                log_sandbox(s, LOG_WARNING, 0, "Failed to ask Docker to remove container %.12s.", s->container_id);
        }
        sandbox_stop_unit_now(s);
}

void sandbox_docker_done(Sandbox *s) {
        char path[PATH_MAX];

        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        s->listen_fd = safe_close(s->listen_fd);
        if (s->socket_dir) {
                snprintf(path, sizeof(path), "%s/" DOCKER_CONTROL_SOCKET, s->socket_dir);
                (void) unlink(path);
                (void) rmdir(s->socket_dir);
        }
        if (s->manager->docker)
                docker_client_cancel(s->manager->docker, s);
}
