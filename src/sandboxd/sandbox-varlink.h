/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxd's varlink face (sandboxd-api(7), VARLINK): interface io.sandboxd.Sandbox on
 * /run/sandboxd/io.sandboxd.Sandbox, a translator onto the core's API exactly as the D-Bus
 * face is (sandbox-dbus.h). It holds no rule and no bound of its own. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "access.h"
#include "manager.h"
#include "recorder.h"
#include "varlink-util.h"

#define SANDBOX_VARLINK_SOCKET SANDBOX_RUNTIME_DIR "/" SANDBOX_VARLINK_INTERFACE
/* The name the socket unit gives the descriptor it passes (FileDescriptorName=). */
#define SANDBOX_VARLINK_FD_NAME "varlink"

/* Every reply the D-Bus API can give must fit in one varlink message, base64 taking 4/3 of
 * the bytes: two OutputMax outputs of 8 MiB, a ReadFile of 16 MiB, 16 MiB of Stdin. So a
 * message may have 32 MiB, as on the system bus. */
#define SANDBOX_VARLINK_MESSAGE_SIZE_MAX (32U * 1024U * 1024U)
/* One such reply and a stream's replies behind it may wait for the peer. */
#define SANDBOX_VARLINK_OUTPUT_BUFFER_MAX (64U * 1024U * 1024U)

typedef struct VarlinkFrontend {
        sd_event *event;
        sd_bus *bus;                  /* polkit is asked on it */
        Manager *manager;
        Recorder *recorder;           /* NULL: recording is off */
        VarlinkServer *server;
        char *socket_path;            /* made by us (not socket-activated): removed at exit */
} VarlinkFrontend;

/* The server with io.sandboxd.Sandbox and its methods, attached to f->event. */
int varlink_frontend_setup(VarlinkFrontend *f);
/* Serves fd, the socket unit's (taken), or if it is negative binds SANDBOX_VARLINK_SOCKET,
 * mode 0666 (polkit decides), replacing a stale socket file. */
int varlink_frontend_listen(VarlinkFrontend *f, int fd);
/* Closes every connection (calls in progress get no answer) and removes the socket file
 * it made. */
void varlink_frontend_done(VarlinkFrontend *f);

/* manager-varlink.c */
int manager_varlink_bind(VarlinkFrontend *f);
/* A new sandbox's answer (CreateSandbox, AcquireSandbox with its source, Fork, Wake):
 * {id}; userdata is the call, its reference taken. */
void varlink_reply_sandbox_created(Sandbox *s, const SandboxError *error, void *userdata);
/* sandbox-varlink.c */
int sandbox_varlink_bind(VarlinkFrontend *f);
/* sandbox-files-varlink.c */
int sandbox_files_varlink_bind(VarlinkFrontend *f);
/* observe-varlink.c */
int observe_varlink_bind(VarlinkFrontend *f);
int snapshot_varlink_bind(VarlinkFrontend *f);
/* context-varlink.c */
int context_varlink_bind(VarlinkFrontend *f);
/* sandbox-ports-varlink.c */
int sandbox_ports_varlink_bind(VarlinkFrontend *f);

/* ListSandboxes', ListExecutions' and ListPools' access: without "manage" (asked without
 * interaction) a caller sees its own only; root sees all. */
int varlink_list_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                        const char **ret_tenant, SandboxError *error);

/* ---- a call on one sandbox ---- */

/* The parameters of every method on one sandbox, each method reading those it has
 * (VarlinkParam tables with offsets in here), and what they decode to. */
typedef struct SandboxArgs {
        char *id;
        char **argv;
        json_object *options;         /* borrowed: for prepare only */
        char *path;
        char *to;
        char *context;                /* code contexts: its id */
        char *language;
        char *code;
        VarlinkBytes data;
        uint64_t process;
        uint64_t timeout_sec;
        uint64_t lifetime_sec;
        uint64_t idle_sec;
        uint64_t rows;
        uint64_t columns;
        uint64_t offset;
        uint64_t length;
        uint64_t stdout_offset;       /* ReadOutput */
        uint64_t stderr_offset;
        uint64_t depth;
        uint32_t lines;
        uint32_t port;                /* OpenPort */
        bool follow;
        int32_t signal;
        bool parents;
        bool recursive;
        ExecConfig exec;              /* Exec, Start: argv and options */
        FileOptions file;             /* WriteFile, Download: options */
        SnapshotOptions snapshot;     /* Snapshot, Hibernate: options */
        SandboxConfig config;         /* Fork: options */
} SandboxArgs;

typedef struct SandboxVarlinkRequest SandboxVarlinkRequest;

/* Before the authorization: decodes what the core will check (argv, options) into args;
 * an error is replied at once. */
typedef int (*sandbox_varlink_prepare_t)(Sandbox *s, SandboxArgs *args, SandboxError *error);
/* The method, once authorized: s is looked up again (it may have gone meanwhile:
 * NoSuchSandbox). Returns as varlink_authorized_t. */
typedef int (*sandbox_varlink_authorized_t)(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                            SandboxVarlinkRequest *req, SandboxError *error);

struct SandboxVarlinkRequest {
        VarlinkFrontend *frontend;
        sandbox_varlink_authorized_t fn;
        SandboxArgs args;
};

/* A method on one sandbox: reads parameters by table (an "id" among them), looks the
 * sandbox up (NoSuchSandbox), has prepare (optional) decode the rest, has the core
 * authorize the method by the caller on it, and runs fn once it is. Every error is replied.
 * Returns as a method does. */
int sandbox_varlink_method(VarlinkFrontend *f, VarlinkCall *call, json_object *parameters,
                           const VarlinkParam table[], sandbox_varlink_prepare_t prepare,
                           sandbox_varlink_authorized_t fn);
