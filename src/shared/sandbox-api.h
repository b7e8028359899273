/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The names and bounds of sandboxd's API (sandboxd-api(7)), defined once: the daemon's D-Bus
 * face, the core's error table and the client library (every front end) include this. */

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* Sandboxes run as host uids SANDBOX_UID_BASE_DEFAULT … +SANDBOX_UID_RANGE-1: sandboxd
 * hands them out, sandboxd-workspace gives workspaces to no other. */
#define SANDBOX_UID_BASE_DEFAULT 0x70000000U
#define SANDBOX_UID_RANGE 65536U

/* D-Bus: bus name, objects, interfaces. */
#define SANDBOX_BUS_NAME                 "io.sandboxd.Sandbox1"
#define SANDBOX_MANAGER_PATH             "/io/sandboxd/Sandbox1"
#define SANDBOX_MANAGER_INTERFACE        "io.sandboxd.Sandbox1.Manager"
#define SANDBOX_OBJECT_ROOT              "/io/sandboxd/Sandbox1/sandbox"
#define SANDBOX_OBJECT_PREFIX            SANDBOX_OBJECT_ROOT "/"
#define SANDBOX_INTERFACE                "io.sandboxd.Sandbox1.Sandbox"

/* The documented error names (varlink uses the same names under io.sandboxd.Sandbox). */
#define SANDBOX_ERROR_NO_SUCH_TEMPLATE   "io.sandboxd.Sandbox1.NoSuchTemplate"
#define SANDBOX_ERROR_NO_SUCH_SANDBOX    "io.sandboxd.Sandbox1.NoSuchSandbox"
#define SANDBOX_ERROR_INVALID_OPTION     "io.sandboxd.Sandbox1.InvalidOption"
#define SANDBOX_ERROR_NOT_RUNNING        "io.sandboxd.Sandbox1.NotRunning"
#define SANDBOX_ERROR_BUSY               "io.sandboxd.Sandbox1.Busy"
#define SANDBOX_ERROR_TOO_MANY_SANDBOXES "io.sandboxd.Sandbox1.TooManySandboxes"
#define SANDBOX_ERROR_SANDBOX_FAILED     "io.sandboxd.Sandbox1.SandboxFailed"
#define SANDBOX_ERROR_SYSTEMD_FAILED     "io.sandboxd.Sandbox1.SystemdFailed"
#define SANDBOX_ERROR_NO_SUCH_PROCESS    "io.sandboxd.Sandbox1.NoSuchProcess"
#define SANDBOX_ERROR_STILL_RUNNING      "io.sandboxd.Sandbox1.StillRunning"
#define SANDBOX_ERROR_FILE_TOO_LARGE     "io.sandboxd.Sandbox1.FileTooLarge"
#define SANDBOX_ERROR_SANDBOX_EXISTS     "io.sandboxd.Sandbox1.SandboxExists"
#define SANDBOX_ERROR_TEMPLATE_READ_ONLY "io.sandboxd.Sandbox1.TemplateReadOnly"
#define SANDBOX_ERROR_NO_SUCH_SNAPSHOT   "io.sandboxd.Sandbox1.NoSuchSnapshot"
#define SANDBOX_ERROR_QUOTA_EXCEEDED     "io.sandboxd.Sandbox1.QuotaExceeded"
#define SANDBOX_ERROR_SNAPSHOT_TOO_LARGE "io.sandboxd.Sandbox1.SnapshotTooLarge"
#define SANDBOX_ERROR_NOT_REGULAR_FILE   "io.sandboxd.Sandbox1.NotRegularFile"
#define SANDBOX_ERROR_NODE_UNAVAILABLE   "io.sandboxd.Sandbox1.NodeUnavailable"
#define SANDBOX_ERROR_NO_SUCH_CONTEXT    "io.sandboxd.Sandbox1.NoSuchContext"
#define SANDBOX_ERROR_CONTEXT_LOST       "io.sandboxd.Sandbox1.ContextLost"

/* Every error of the API, once: X(CODE, Name, D-Bus name, errno, HTTP status). The core
 * reports the code (SANDBOX_ERR_CODE, src/core/sandbox-errors.h) with a message; each front
 * end maps it: D-Bus to the name here, varlink to io.sandboxd.Sandbox.Name, sandboxd-http
 * to the HTTP status (sandboxd-http(8)). The errno is what the client library returns for
 * the name. The last four are the bus's own
 * names, which sandboxd's D-Bus face gives for them (sandboxd-api(7)). */
#define SANDBOX_ERRORS(X)                                                                                       \
        X(NO_SUCH_TEMPLATE,   "NoSuchTemplate",   SANDBOX_ERROR_NO_SUCH_TEMPLATE,   ENOENT, 404)                \
        X(NO_SUCH_SANDBOX,    "NoSuchSandbox",    SANDBOX_ERROR_NO_SUCH_SANDBOX,    ENXIO, 404)                 \
        X(INVALID_OPTION,     "InvalidOption",    SANDBOX_ERROR_INVALID_OPTION,     EINVAL, 400)                \
        X(NOT_RUNNING,        "NotRunning",       SANDBOX_ERROR_NOT_RUNNING,        ESRCH, 409)                 \
        X(BUSY,               "Busy",             SANDBOX_ERROR_BUSY,               EBUSY, 429)                 \
        X(TOO_MANY_SANDBOXES, "TooManySandboxes", SANDBOX_ERROR_TOO_MANY_SANDBOXES, EUSERS, 429)                \
        X(SANDBOX_FAILED,     "SandboxFailed",    SANDBOX_ERROR_SANDBOX_FAILED,     EIO, 500)                   \
        X(SYSTEMD_FAILED,     "SystemdFailed",    SANDBOX_ERROR_SYSTEMD_FAILED,     EIO, 500)                   \
        X(NO_SUCH_PROCESS,    "NoSuchProcess",    SANDBOX_ERROR_NO_SUCH_PROCESS,    ECHILD, 404)                \
        X(STILL_RUNNING,      "StillRunning",     SANDBOX_ERROR_STILL_RUNNING,      EAGAIN, 409)                \
        X(FILE_TOO_LARGE,     "FileTooLarge",     SANDBOX_ERROR_FILE_TOO_LARGE,     EFBIG, 413)                 \
        X(SANDBOX_EXISTS,     "SandboxExists",    SANDBOX_ERROR_SANDBOX_EXISTS,     EEXIST, 409)                \
        X(TEMPLATE_READ_ONLY, "TemplateReadOnly", SANDBOX_ERROR_TEMPLATE_READ_ONLY, EROFS, 409)                 \
        X(NO_SUCH_SNAPSHOT,   "NoSuchSnapshot",   SANDBOX_ERROR_NO_SUCH_SNAPSHOT,   ENODATA, 404)               \
        X(QUOTA_EXCEEDED,     "QuotaExceeded",    SANDBOX_ERROR_QUOTA_EXCEEDED,     EDQUOT, 403)                \
        X(SNAPSHOT_TOO_LARGE, "SnapshotTooLarge", SANDBOX_ERROR_SNAPSHOT_TOO_LARGE, EFBIG, 413)                 \
        X(NOT_REGULAR_FILE,   "NotRegularFile",   SANDBOX_ERROR_NOT_REGULAR_FILE,   EINVAL, 400)                \
        X(NODE_UNAVAILABLE,   "NodeUnavailable",  SANDBOX_ERROR_NODE_UNAVAILABLE,   EHOSTDOWN, 503)             \
        X(NO_SUCH_CONTEXT,    "NoSuchContext",    SANDBOX_ERROR_NO_SUCH_CONTEXT,    ENOENT, 404)                \
        X(CONTEXT_LOST,       "ContextLost",      SANDBOX_ERROR_CONTEXT_LOST,       EOWNERDEAD, 410)            \
        X(ACCESS_DENIED,      "AccessDenied",     "org.freedesktop.DBus.Error.AccessDenied", EACCES, 403)       \
        X(INTERACTIVE_AUTHORIZATION_REQUIRED, "InteractiveAuthorizationRequired",                               \
          "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired", EACCES, 403)                           \
        X(NOT_SUPPORTED,      "NotSupported",     "org.freedesktop.DBus.Error.NotSupported", EOPNOTSUPP, 501)   \
        X(NO_REPLY,           "NoReply",          "org.freedesktop.DBus.Error.NoReply", ETIMEDOUT, 503)

/* Bounds a caller may need to know before it asks. */
#define EXEC_TIMEOUT_DEFAULT_SEC 300ULL
#define EXEC_TIMEOUT_MAX_SEC 3600ULL
/* TimeoutUSec=: an exec's timeout to the microsecond, from 1 ms (the timer's accuracy). */
#define EXEC_TIMEOUT_MIN_USEC 1000ULL
#define EXEC_TIMEOUT_MAX_USEC (EXEC_TIMEOUT_MAX_SEC * 1000000ULL)
#define EXEC_OUTPUT_DEFAULT (1024ULL * 1024)
/* stdout and stderr both at their maximum must fit in one reply under the system bus's
 * 32 MiB message limit. */
#define EXEC_OUTPUT_MAX (8ULL * 1024 * 1024)
#define EXEC_STDIN_MAX (16ULL * 1024 * 1024)
/* A background process's input (StdinPipe) not yet read by it: more is Busy. */
#define EXEC_STDIN_PENDING_MAX (1024U * 1024U)
/* ReadFile returns and WriteFile takes at most this much: the whole-buffer calls, whose data
 * sandboxd holds (and encodes) while it answers. Larger files stream: Download and Upload
 * (on varlink: Download, and WriteFile in parts with Append), whose data never waits in
 * sandboxd more than a pipe's worth at a time (sandboxd-api(7)). The HTTP bridge's part. */
#define FILE_PART_MAX (4ULL * 1024 * 1024)
/* WatchDirectory: watches at once per sandbox (each a process in it, in no slot of the
 * file operations'); one more is Busy. The HTTP bridge's E2B watchers are such watches. */
#define FILE_WATCHES_MAX 8U
#define LIST_FILES_DEPTH_MAX 16U
#define LIST_EXECUTIONS_LIMIT_MAX 10000U
/* GetLogs: at most this many of the latest entries (lines 0: all of them, up to this);
 * concurrent readers per caller's uid and in all, beyond which GetLogs fails with Busy. */
#define SANDBOX_LOGS_LINES_MAX 10000U
#define SANDBOX_LOGS_READERS_PER_UID_MAX 16U
#define SANDBOX_LOGS_READERS_MAX 64U
/* A sandbox's Name and Tenant: 1 to this many of A-Z a-z 0-9 . _ - (a Name not of the
 * form of a sandbox id, 16 lowercase hex digits, so that either may stand for a sandbox). */
#define SANDBOX_NAME_MAX 64U
/* Labels (a sandbox's key/value pairs, docs/LABELS.md): at most this many, keys of
 * Kubernetes' syntax (a prefix of up to 253 characters, '/', a name of up to 63), values
 * free text of up to SANDBOX_LABEL_VALUE_MAX bytes, all of them at most
 * SANDBOX_LABELS_BYTES_MAX bytes ("key=value" and a NUL each). */
#define SANDBOX_LABELS_MAX 64U
#define SANDBOX_LABEL_PREFIX_MAX 253U
#define SANDBOX_LABEL_NAME_MAX 63U
#define SANDBOX_LABEL_KEY_MAX (SANDBOX_LABEL_PREFIX_MAX + 1U + SANDBOX_LABEL_NAME_MAX)
#define SANDBOX_LABEL_VALUE_MAX 256U
#define SANDBOX_LABELS_BYTES_MAX 16384U

/* CreateSandbox's options, once for every face: X(name on D-Bus and varlink, the
 * snake_case name of the faces that spell it so: the HTTP bridge and MCP). The core
 * decodes and checks each (options.c); a face maps its spelling through this table
 * (sandbox_option_from_snake()) and holds no option name of its own. test-options fails
 * when an option of the core is missing here. */
#define SANDBOX_CREATE_OPTIONS(X)                                       \
        X("MemoryMax",          "memory_max")                           \
        X("CPUQuotaPerSecUSec", "cpu_quota_per_sec_usec")               \
        X("TasksMax",           "tasks_max")                            \
        X("DiskMax",            "disk_max")                             \
        X("Timeout",            "timeout")                              \
        X("IdleTimeout",        "idle_timeout")                         \
        X("IdleAction",         "idle_action")                          \
        X("Ephemeral",          "ephemeral")                            \
        X("Name",               "name")                                 \
        X("ReuseExisting",      "reuse")                                \
        X("Tenant",             "tenant")                               \
        X("EgressAllow",        "egress_allow")                         \
        X("EgressDeny",         "egress_deny")                          \
        X("FromSnapshot",       "from_snapshot")                        \
        X("Storage",            "storage")                              \
        X("Secrets",            "secrets")                              \
        X("Labels",             "labels")

/* The option a face's snake_case name stands for ("memory_max": "MemoryMax"), or NULL. */
static inline const char *sandbox_option_from_snake(const char *snake) {
#define SANDBOX_OPTION_SNAKE(name, snake_name) { name, snake_name },
        static const struct { const char *name, *snake; } options[] = { SANDBOX_CREATE_OPTIONS(SANDBOX_OPTION_SNAKE) };
#undef SANDBOX_OPTION_SNAKE

        for (size_t i = 0; snake && i < sizeof(options) / sizeof(options[0]); i++)
                if (strcmp(options[i].snake, snake) == 0)
                        return options[i].name;
        return NULL;
}
