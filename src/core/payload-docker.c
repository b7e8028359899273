/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "etc-tree.h"
#include "json-util.h"
#include "log.h"
#include "payload-docker.h"
#include "payload-backend.h"
#include "sandbox-persist.h"
#include "strv.h"


int docker_build_create_body(const DockerCreateParams *p, json_object **ret) {
        json_object *body = NULL, *host = NULL, *labels = NULL, *tmpfs = NULL;
        _cleanup_free_ char *bind_agent = NULL, *bind_dir = NULL, *seccomp = NULL, *bind_work = NULL,
                *bind_tmp = NULL;
        char work[128], tmp[128], user[32], inside[32];
        int r = -ENOMEM;

        if (asprintf(&bind_agent, "%s:" DOCKER_AGENT_INSIDE ":ro", p->agent_path) < 0 ||
            asprintf(&bind_dir, "%s:" DOCKER_SOCKET_DIR_INSIDE ":ro", p->socket_dir) < 0 ||
            asprintf(&seccomp, "seccomp=%s", p->seccomp_profile) < 0)
                return -ENOMEM;
        /* On disk: the workspace's directories, which dockerd sees as the pool is mounted in
         * the host's namespace (sandboxd-workspaces.service), nosuid and nodev. */
        if (p->workspace_dir &&
            (asprintf(&bind_work, "%s/work:" SANDBOX_WORKDIR ":rw", p->workspace_dir) < 0 ||
             asprintf(&bind_tmp, "%s/tmp:/tmp:rw", p->workspace_dir) < 0))
                return -ENOMEM;
        /* The container runs as the sandbox's own host uid, as a bwrap sandbox does: an
         * escape lands in a uid that is no account's and no other sandbox's. Its agent maps
         * that uid to the sandbox user, 1000 (--user-namespace), before anything else runs. */
        snprintf(user, sizeof(user), "%u:%u", (unsigned) p->host_uid, (unsigned) p->host_uid);
        snprintf(inside, sizeof(inside), "%u:%u", (unsigned) SANDBOX_UID, (unsigned) SANDBOX_GID);
        /* /work as in a bwrap sandbox: owned by the sandbox's user, kept for its life. */
        snprintf(work, sizeof(work), "rw,nosuid,nodev,size=%" PRIu64 ",mode=0700,uid=%u,gid=%u", p->disk_max,
                 (unsigned) p->host_uid, (unsigned) p->host_uid);
        snprintf(tmp, sizeof(tmp), "rw,nosuid,nodev,size=%" PRIu64 ",mode=1777", p->disk_max);

        body = json_object_new_object();
        host = json_object_new_object();
        labels = json_object_new_object();
        tmpfs = json_object_new_object();
        if (!body || !host || !labels || !tmpfs)
                goto finish;

        if (json_add(body, "Image", json_object_new_string(p->image)) < 0 ||
            json_add(body, "Entrypoint", strv_to_json((char *[]) { (char *) DOCKER_AGENT_INSIDE, NULL })) < 0 ||
            json_add(body, "Cmd", strv_to_json((char *[]) { (char *) "--connect",
                                                        (char *) DOCKER_SOCKET_DIR_INSIDE "/" DOCKER_CONTROL_SOCKET,
                                                        (char *) "--user-namespace", inside,
                                                        (char *) "--seccomp",
                                                        (char *) DOCKER_SOCKET_DIR_INSIDE "/" DOCKER_SECCOMP_FILE,
                                                        p->egress ? (char *) "--egress" : NULL,
                                                        NULL })) < 0 ||
            json_add(body, "User", json_object_new_string(user)) < 0 ||
            json_add(body, "WorkingDir", json_object_new_string(SANDBOX_WORKDIR)) < 0 ||
            json_add(body, "Env", strv_to_json(p->environment)) < 0 ||
            json_add(body, "NetworkDisabled", json_object_new_boolean(true)) < 0 ||
            json_add(body, "Hostname", json_object_new_string("sandbox")) < 0 ||
            json_add(labels, DOCKER_LABEL_ID, json_object_new_string(p->sandbox_id)) < 0)
                goto finish;
        if (json_add(body, "Labels", json_object_get(labels)) < 0)
                goto finish;

        if (!p->workspace_dir &&
            (json_add(tmpfs, SANDBOX_WORKDIR, json_object_new_string(work)) < 0 ||
             json_add(tmpfs, "/tmp", json_object_new_string(tmp)) < 0))
                goto finish;
        /* Isolation as in a bwrap sandbox, the limits as a second line behind the unit's. */
        if (json_add(host, "NetworkMode", json_object_new_string("none")) < 0 ||
            json_add(host, "CapDrop", strv_to_json((char *[]) { (char *) "ALL", NULL })) < 0 ||
            json_add(host, "SecurityOpt", strv_to_json((char *[]) { (char *) "no-new-privileges", seccomp, NULL })) < 0 ||
            json_add(host, "ReadonlyRootfs", json_object_new_boolean(true)) < 0 ||
            json_add(host, "Binds", strv_to_json((char *[]) { bind_agent, bind_dir, bind_work, bind_tmp, NULL })) < 0 ||
            json_add(host, "Tmpfs", json_object_get(tmpfs)) < 0 ||
            json_add(host, "CgroupParent", json_object_new_string(p->cgroup_parent)) < 0 ||
            json_add(host, "Memory", json_object_new_int64((int64_t) p->limits->memory_max)) < 0 ||
            json_add(host, "MemorySwap", json_object_new_int64((int64_t) p->limits->memory_max)) < 0 ||
            json_add(host, "NanoCpus", json_object_new_int64((int64_t) p->limits->cpu_quota_per_sec_usec * 1000)) < 0 ||
            json_add(host, "PidsLimit", json_object_new_int64((int64_t) p->limits->tasks_max)) < 0 ||
            json_add(host, "IpcMode", json_object_new_string("private")) < 0 ||
            json_add(host, "Init", json_object_new_boolean(false)) < 0)
                goto finish;
        if (json_add(body, "HostConfig", json_object_get(host)) < 0)
                goto finish;

        *ret = json_object_get(body);
        r = 0;
finish:
        json_object_put(body);
        json_object_put(host);
        json_object_put(labels);
        json_object_put(tmpfs);
        return r;
}

/* The backend: the sandbox's payload is a container. The same unit, agent and protocol
 * as a bwrap sandbox; what differs is how the payload comes to life and goes. */

/* Images may be large to unpack: a minute to come up. */
#define DOCKER_START_TIMEOUT_USEC (60ULL * 1000000ULL)

typedef struct DockerState {
        PayloadProcess holder;    /* cgroupfs driver: keeps the scope alive; none under systemd's */
        char *image;
        char *container_id;
        char *socket_dir;         /* holds the control socket the container's agent connects to */
        int listen_fd;
        sd_event_source *listen_source;
        bool docker_pending;      /* a create, start or remove is in flight */
} DockerState;

static void docker_stop(Sandbox *s);
static int docker_start_unit(Sandbox *s);

static void docker_init(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        d->holder = PAYLOAD_PROCESS_NULL;
        d->listen_fd = -EBADF;
}

static void docker_fail(Sandbox *s, const char *what, long status, json_object *body, const char *error) {
        char buf[512], reason[640];

        docker_error_message(status, body, error, buf, sizeof(buf));
        snprintf(reason, sizeof(reason), "%s: %s", what, buf);
        log_sandbox(s, LOG_ERR, 0, "Sandbox %s: %s", sandbox_get_id(s), reason);
        sandbox_payload_failed(s, reason);
}

static int on_agent_connect(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        DockerState *d = sandbox_payload_state(s);
        int c, r;

        c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
                return 0;
        /* One agent per sandbox: the first to connect is PID 1 of the container, started
         * before anything of the sandbox's own runs. Nobody else gets in after it. */
        d->listen_source = sd_event_source_disable_unref(d->listen_source);
        d->listen_fd = safe_close(d->listen_fd);
        r = sandbox_payload_connected(s, c);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to watch the agent connection of %s: %m", sandbox_get_id(s));
                sandbox_payload_failed(s, "its agent's connection could not be watched.");
        }
        return 0;
}

static void on_container_started(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        DockerState *d = sandbox_payload_state(s);

        d->docker_pending = false;
        if (sandbox_payload_going(s)) {
                docker_stop(s);
                return;
        }
        if (status != 204 && status != 304) {
                docker_fail(s, "the container did not start", status, body, error);
                return;
        }
        log_sandbox(s, LOG_DEBUG, 0, "Container %.12s of sandbox %s started.", d->container_id, sandbox_get_id(s));
}

static void on_container_created(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        DockerState *d = sandbox_payload_state(s);
        json_object *id;
        char path[128];

        d->docker_pending = false;
        if (status == 201 && body && json_object_object_get_ex(body, "Id", &id) &&
            json_object_is_type(id, json_type_string))
                d->container_id = strdup(json_object_get_string(id));
        if (sandbox_payload_going(s)) {
                docker_stop(s); /* removes what was just made */
                return;
        }
        if (!d->container_id) {
                docker_fail(s, "the container could not be created", status, body, error);
                return;
        }
        snprintf(path, sizeof(path), "/containers/%s/start", d->container_id);
        if (docker_request(sandbox_payload_host(s)->docker, "POST", path, NULL, on_container_started, s) < 0) {
                sandbox_payload_failed(s, "its container could not be started.");
                return;
        }
        d->docker_pending = true;
}

static void docker_create_container(Sandbox *s, const char *cgroup_parent) {
        DockerState *d = sandbox_payload_state(s);
        _cleanup_strv_free_ char **env = NULL;
        json_object *body = NULL;
        char path[128];
        int r;

        _cleanup_free_ char *workspace = NULL;
        if (sandbox_workspace_path(s, &workspace) < 0) {
                sandbox_payload_failed(s, "its container could not be asked for.");
                return;
        }
        env = strv_copy(sandbox_payload_environment(s));
        DockerCreateParams p = {
                .workspace_dir = workspace,
                .sandbox_id = sandbox_get_id(s),
                .image = d->image,
                .agent_path = sandbox_payload_host(s)->agent_path,
                .socket_dir = d->socket_dir,
                .host_uid = sandbox_payload_uid(s),
                .cgroup_parent = cgroup_parent,
                .seccomp_profile = sandbox_payload_host(s)->docker_seccomp_profile,
                .environment = env,
                .limits = &sandbox_payload_config(s)->limits,
                .disk_max = sandbox_payload_config(s)->disk_max,
                .egress = sandbox_config_has_egress(sandbox_payload_config(s)),
        };
        r = env ? docker_build_create_body(&p, &body) : -ENOMEM;
        if (r >= 0) {
                snprintf(path, sizeof(path), "/containers/create?name=sandbox-%s", sandbox_get_id(s));
                r = docker_request(sandbox_payload_host(s)->docker, "POST", path, body, on_container_created, s);
        }
        json_object_put(body);
        if (r < 0) {
                sandbox_payload_failed(s, "its container could not be asked for.");
                return;
        }
        d->docker_pending = true;
}

static void docker_unit_started(Sandbox *s) {
        _cleanup_free_ char *parent = NULL;

        /* cgroupfs: the container's cgroup nests under the (delegated) scope, so the
         * scope's limits hold it; systemd: dockerd makes its scope inside our slice. */
        if (streq_ptr(docker_client_cgroup_driver(sandbox_payload_host(s)->docker), "systemd"))
                parent = strdup(sandbox_payload_unit(s));
        else if (sandbox_payload_cgroup(s) && asprintf(&parent, "%s/payload", sandbox_payload_cgroup(s)) < 0)
                parent = NULL;
        if (!parent) {
                sandbox_payload_failed(s, "the cgroup of its unit is not known.");
                return;
        }
        docker_create_container(s, parent);
}

/* The policy as BPF, where the agent finds it (DOCKER_SECCOMP_FILE). */
static int docker_write_seccomp(Sandbox *s) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char buf[4096];
        off_t offset = 0;
        ssize_t n;

        if (asprintf(&path, "%s/" DOCKER_SECCOMP_FILE, ((DockerState *) sandbox_payload_state(s))->socket_dir) < 0)
                return -ENOMEM;
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return -errno;
        while ((n = pread(sandbox_payload_host(s)->seccomp_fd, buf, sizeof(buf), offset)) > 0) {
                if (write(fd, buf, (size_t) n) != n)
                        return errno > 0 ? -errno : -EIO;
                offset += n;
        }
        if (n < 0)
                return -errno;
        return offset > 0 ? 0 : -ENODATA;
}

static int docker_listen(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (asprintf(&d->socket_dir, "%s/sockets/%s", sandbox_payload_host(s)->state_dir, sandbox_get_id(s)) < 0)
                return -ENOMEM;
        /* Bound into this sandbox's container only, read-only. */
        if (mkdir(d->socket_dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        r = docker_write_seccomp(s);
        if (r < 0)
                return r;
        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" DOCKER_CONTROL_SOCKET, d->socket_dir) >=
            sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(sa.sun_path);
        /* The container's user (the sandbox's host uid) must be able to connect; we may not
         * chown (no CAP_CHOWN), and nobody but that container sees the directory. */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0666) < 0 || listen(fd, 1) < 0)
                return -errno;
        r = sd_event_add_io(sandbox_payload_host(s)->event, &d->listen_source, fd, EPOLLIN, on_agent_connect, s);
        if (r < 0)
                return r;
        d->listen_fd = TAKE_FD(fd);
        return 0;
}

static void on_docker_info(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        const PayloadHost *h = sandbox_payload_host(s);
        json_object *d;
        int r;

        ((DockerState *) sandbox_payload_state(s))->docker_pending = false;
        if (sandbox_payload_going(s)) {
                docker_stop(s);
                return;
        }
        if (status != 200 || !body || !json_object_object_get_ex(body, "CgroupDriver", &d) ||
            !json_object_is_type(d, json_type_string)) {
                docker_fail(s, "Docker is not available", status, body, error);
                return;
        }
        r = docker_client_set_cgroup_driver(h->docker, json_object_get_string(d));
        if (r >= 0)
                r = docker_start_unit(s);
        if (r < 0)
                sandbox_payload_failed(s, "it could not be set up.");
}

static int docker_start_unit(Sandbox *s) {
        const PayloadHost *h = sandbox_payload_host(s);
        DockerState *d = sandbox_payload_state(s);
        int r;

        if (!h->docker)
                return -EOPNOTSUPP;
        if (!docker_client_cgroup_driver(h->docker)) {
                /* Asked every time until it answers: Docker may come up after us. */
                r = docker_request(h->docker, "GET", "/info", NULL, on_docker_info, s);
                if (r >= 0)
                        d->docker_pending = true;
                return r;
        }

        if (d->listen_fd < 0) {
                r = docker_listen(s);
                if (r < 0)
                        return log_sandbox(s, LOG_ERR, r, "Failed to listen for the agent of %s: %m",
                                           sandbox_get_id(s));
        }

        if (streq(docker_client_cgroup_driver(h->docker), "systemd"))
                /* The sandbox's unit is a slice; dockerd puts its scope into it. */
                return sandbox_payload_start_slice(s);

        /* A scope needs a process: a holder keeps it while the container's processes,
         * started by dockerd, live in a cgroup nested below it. */
        r = payload_spawn_holder(h->agent_path, sandbox_payload_uid(s), &d->holder);
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to spawn the holder of %s: %m", sandbox_payload_unit(s));
        r = payload_process_watch(&d->holder, h->event, s);
        if (r < 0)
                return r;
        return sandbox_payload_start_scope(s, d->holder.pid);
}

/* The container is gone (or was never made): the holder and the unit go next. */
static void docker_stop_unit(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        /* As bwrap's monitor: killed as systemd is asked to stop the unit. */
        payload_process_kill(&d->holder, sandbox_payload_unit(s));
        sandbox_payload_stopped(s);
}

static void on_container_removed(long status, json_object *body, const char *error, void *userdata) {
        Sandbox *s = userdata;
        DockerState *d = sandbox_payload_state(s);
        char buf[512];

        d->docker_pending = false;
        if (status != 204 && status != 404)
                log_sandbox(s, LOG_WARNING, 0, "Failed to remove container %.12s of sandbox %s: %s",
                            d->container_id, sandbox_get_id(s), docker_error_message(status, body, error, buf, sizeof(buf)));
        d->container_id = mfree(d->container_id);
        docker_stop_unit(s);
}

/* A container goes first, through Docker, so that none is left behind; then the unit. */
static void docker_stop(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);
        char path[160];
        int r;

        if (d->docker_pending)
                return; /* the answer in flight continues the stop */
        if (d->container_id && sandbox_payload_host(s)->docker) {
                snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", d->container_id);
                r = docker_request(sandbox_payload_host(s)->docker, "DELETE", path, NULL, on_container_removed, s);
                if (r >= 0) {
                        d->docker_pending = true;
                        return;
                }
                log_sandbox(s, LOG_WARNING, 0, "Failed to ask Docker to remove container %.12s.", d->container_id);
        }
        docker_stop_unit(s);
}

static void docker_done(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);
        char path[PATH_MAX];

        d->listen_source = sd_event_source_disable_unref(d->listen_source);
        d->listen_fd = safe_close(d->listen_fd);
        if (d->socket_dir) {
                snprintf(path, sizeof(path), "%s/" DOCKER_CONTROL_SOCKET, d->socket_dir);
                (void) unlink(path);
                snprintf(path, sizeof(path), "%s/" DOCKER_SECCOMP_FILE, d->socket_dir);
                (void) unlink(path);
                (void) rmdir(d->socket_dir);
        }
        if (sandbox_payload_host(s)->docker)
                docker_client_cancel(sandbox_payload_host(s)->docker, s);
}


static int docker_start(Sandbox *s, const Template *t) {
        DockerState *d = sandbox_payload_state(s);

        d->image = strdup(t->image);
        if (!d->image)
                return -ENOMEM;
        return docker_start_unit(s);
}

static void docker_abort(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        payload_process_abort(&d->holder, sandbox_payload_unit(s));
}

static int docker_save(Sandbox *s, SandboxPersist *st) {
        DockerState *d = sandbox_payload_state(s);

        st->payload_pid = d->holder.pid;
        if (!d->container_id)
                return 0;
        st->payload_data = json_object_new_object();
        if (!st->payload_data)
                return -ENOMEM;
        return json_add(st->payload_data, "container_id", json_object_new_string(d->container_id));
}

/* The container's agent connected and is ready: the holder is known by pid only from
 * here on (it only keeps the scope; the sandbox's end is its agent's connection's). */
static void docker_running(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        payload_process_running(&d->holder);
}

static int docker_adopt(Sandbox *s, const SandboxPersist *st) {
        DockerState *d = sandbox_payload_state(s);
        json_object *v;

        d->holder.pid = st->payload_pid;
        if (json_object_object_get_ex(st->payload_data, "container_id", &v)) {
                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                d->container_id = strdup(json_object_get_string(v));
                if (!d->container_id)
                        return -ENOMEM;
        }
        if (asprintf(&d->socket_dir, "%s/sockets/%s", sandbox_payload_host(s)->state_dir, sandbox_get_id(s)) < 0) {
                d->socket_dir = NULL;
                return -ENOMEM;
        }
        return 0;
}

static void docker_detach(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        payload_process_done(&d->holder);
}

static void docker_free(Sandbox *s) {
        DockerState *d = sandbox_payload_state(s);

        payload_process_abort(&d->holder, sandbox_payload_unit(s));
        free(d->image);
        free(d->container_id);
        free(d->socket_dir);
        sd_event_source_disable_unref(d->listen_source);
        safe_close(d->listen_fd);
}

static void on_orphan_container_removed(long status, json_object *body, const char *error, void *userdata) {
        char buf[256];
        if (status != 204 && status != 404)
                log_warning("Failed to remove an orphaned sandbox container: %s",
                            docker_error_message(status, body, error, buf, sizeof(buf)));
}

static void on_sandbox_containers(long status, json_object *body, const char *error, void *userdata) {
        Manager *m = userdata;

        if (status != 200 || !json_object_is_type(body, json_type_array))
                return; /* no Docker here (or not now): nothing of ours can be in it */
        for (size_t i = 0; i < json_object_array_length(body); i++) {
                json_object *c = json_object_array_get_idx(body, i), *labels, *id, *cid;
                char path[160];

                if (!json_object_object_get_ex(c, "Labels", &labels) ||
                    !json_object_object_get_ex(labels, DOCKER_LABEL_ID, &id) ||
                    !json_object_object_get_ex(c, "Id", &cid))
                        continue;
                if (manager_knows_sandbox(m, json_object_get_string(id)))
                        continue;
                log_warning("Removing container %.12s of sandbox %s: no sandbox of ours goes with it "
                            "(left by a sandboxd that was killed while making it?).",
                            json_object_get_string(cid), json_object_get_string(id));
                snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", json_object_get_string(cid));
                (void) docker_request(manager_payload_host(m)->docker, "DELETE", path, NULL,
                                      on_orphan_container_removed, m);
        }
}

/* Containers labelled as a sandbox's whose sandbox is not (or no longer) ours. */
static void docker_remove_orphans(Manager *m) {
        /* filters={"label":["io.sandboxd.id"]}, URL-encoded */
        (void) docker_request(manager_payload_host(m)->docker, "GET",
                              "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" DOCKER_LABEL_ID "%22%5D%7D",
                              NULL, on_sandbox_containers, m);
}

const PayloadOps payload_docker_ops = {
        .name = "docker",
        .state_size = sizeof(DockerState),
        .start_timeout_usec = DOCKER_START_TIMEOUT_USEC,
        .unit_started_needs_cgroup = true,
        .init = docker_init,
        .start = docker_start,
        .unit_started = docker_unit_started,
        .abort = docker_abort,
        .stop = docker_stop,
        .done = docker_done,
        .save = docker_save,
        .running = docker_running,
        .adopt = docker_adopt,
        .detach = docker_detach,
        .free = docker_free,
        .remove_orphans = docker_remove_orphans,
};
