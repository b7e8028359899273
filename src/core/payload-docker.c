/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdio.h>

#include "json-util.h"
#include "payload-docker.h"
#include "strv.h"


static json_object *strv_to_json(char * const *l) {
        json_object *a = json_object_new_array();
        for (char * const *i = l; a && i && *i; i++)
                if (json_object_array_add(a, json_object_new_string(*i)) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

int docker_build_create_body(const DockerCreateParams *p, json_object **ret) {
        json_object *body = NULL, *host = NULL, *labels = NULL, *tmpfs = NULL;
        _cleanup_free_ char *bind_agent = NULL, *bind_dir = NULL, *seccomp = NULL;
        char work[128], tmp[128];
        int r = -ENOMEM;

        if (asprintf(&bind_agent, "%s:" DOCKER_AGENT_INSIDE ":ro", p->agent_path) < 0 ||
            asprintf(&bind_dir, "%s:" DOCKER_SOCKET_DIR_INSIDE ":ro", p->socket_dir) < 0 ||
            asprintf(&seccomp, "seccomp=%s", p->seccomp_profile) < 0)
                return -ENOMEM;
        /* /work as in a bwrap sandbox: owned by the sandbox's user, kept for its life. */
        snprintf(work, sizeof(work), "rw,nosuid,nodev,size=%" PRIu64 ",mode=0700,uid=1000,gid=1000", p->disk_max);
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
                                                        NULL })) < 0 ||
            json_add(body, "User", json_object_new_string("1000:1000")) < 0 ||
            json_add(body, "WorkingDir", json_object_new_string(SANDBOX_WORKDIR)) < 0 ||
            json_add(body, "Env", strv_to_json(p->environment)) < 0 ||
            json_add(body, "NetworkDisabled", json_object_new_boolean(true)) < 0 ||
            json_add(body, "Hostname", json_object_new_string("sandbox")) < 0 ||
            json_add(labels, DOCKER_LABEL_ID, json_object_new_string(p->sandbox_id)) < 0)
                goto finish;
        if (json_add(body, "Labels", json_object_get(labels)) < 0)
                goto finish;

        if (json_add(tmpfs, SANDBOX_WORKDIR, json_object_new_string(work)) < 0 ||
            json_add(tmpfs, "/tmp", json_object_new_string(tmp)) < 0)
                goto finish;
        /* Isolation as in a bwrap sandbox, the limits as a second line behind the unit's. */
        if (json_add(host, "NetworkMode", json_object_new_string("none")) < 0 ||
            json_add(host, "CapDrop", strv_to_json((char *[]) { (char *) "ALL", NULL })) < 0 ||
            json_add(host, "SecurityOpt", strv_to_json((char *[]) { (char *) "no-new-privileges", seccomp, NULL })) < 0 ||
            json_add(host, "ReadonlyRootfs", json_object_new_boolean(true)) < 0 ||
            json_add(host, "Binds", strv_to_json((char *[]) { bind_agent, bind_dir, NULL })) < 0 ||
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
