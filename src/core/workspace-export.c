/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "sandbox-api.h"
#include "sandbox-internal.h"
#include "snapshot.h"
#include "spawn-util.h"
#include "time-util.h"
#include "workspace.h"
#include "workspace-export.h"

/* What is read ahead of the parts asked for: one part; the child waits on the pipe beyond. */
#define EXPORT_BUFFER ((size_t) FILE_PART_MAX)

typedef struct WorkspaceExport {
        struct WorkspaceExport *next;
        Manager *manager;
        SnapshotMeta meta;
        char id[SANDBOX_ID_LEN + 1];
        int pipe_fd;
        sd_event_source *io, *child, *answer;
        pid_t pid;
        uint8_t *buf;
        size_t n;                  /* bytes in buf */
        uint64_t delivered;        /* bytes handed out in parts */
        bool eof, exited, failed;
        uint64_t last_usec;        /* CLOCK_MONOTONIC of its last part asked */
        /* The part asked for, until it is there. */
        workspace_export_callback_t cb;
        void *userdata;
        size_t want;
} WorkspaceExport;

static WorkspaceExport *export_free(WorkspaceExport *e) {
        if (!e)
                return NULL;
        e->io = sd_event_source_disable_unref(e->io);
        e->child = sd_event_source_disable_unref(e->child);
        e->answer = sd_event_source_disable_unref(e->answer);
        if (e->pid > 0 && !e->exited) {
                (void) kill(e->pid, SIGKILL);
                (void) waitpid(e->pid, NULL, 0);
        }
        safe_close(e->pipe_fd);
        free(e->buf);
        snapshot_meta_done(&e->meta);
        return mfree(e);
}

static void export_unlink(WorkspaceExport *e) {
        for (WorkspaceExport **p = &e->manager->workspace_exports; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        break;
                }
        export_free(e);
}

static WorkspaceExport *export_find(Manager *m, const char *id) {
        for (WorkspaceExport *e = m->workspace_exports; e; e = e->next)
                if (streq(e->id, id))
                        return e;
        return NULL;
}

void workspace_export_cancel(Manager *m, const char *id) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        WorkspaceExport *e = export_find(m, id);
        workspace_export_callback_t cb;
        void *userdata;

        if (!e)
                return;
        log_info("Export of sandbox %s ended by its Wake after %" PRIu64 " bytes.", id, e->delivered);
        cb = e->cb;
        userdata = e->userdata;
        SnapshotMeta meta = e->meta;
        e->meta = (SnapshotMeta) {};
        export_unlink(e);
        if (cb) {
                sandbox_error_set(&error, SANDBOX_ERR_BUSY, "Sandbox %s woke: its export ended.", id);
                cb(&meta, NULL, 0, &error, userdata);
        }
        snapshot_meta_done(&meta);
}

void workspace_exports_done(Manager *m) {
        while (m->workspace_exports) {
                WorkspaceExport *e = m->workspace_exports;
                m->workspace_exports = e->next;
                export_free(e);
        }
}

static void exports_expire(Manager *m) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        for (WorkspaceExport **p = &m->workspace_exports; *p;) {
                WorkspaceExport *e = *p;
                if (e->cb || now - e->last_usec < WORKSPACE_EXPORT_IDLE_USEC) {
                        p = &e->next;
                        continue;
                }
                log_info("Export of sandbox %s abandoned after %" PRIu64 " bytes.", e->id, e->delivered);
                *p = e->next;
                export_free(e);
        }
}

/* Answers the part asked for if it is there: enough bytes, or the end (then the export goes). */
static void export_maybe_answer(WorkspaceExport *e) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        workspace_export_callback_t cb = e->cb;
        void *userdata = e->userdata;
        bool failed = e->failed;
        size_t k;

        if (!cb)
                return;
        if (failed || (e->eof && e->exited && e->n == 0)) {
                e->cb = NULL;
                if (failed)
                        sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED,
                                          "The archive of sandbox %s's files failed (its journal says why).", e->id);
                else
                        log_info("Sandbox %s exported from its workspace: %" PRIu64 " bytes.", e->id, e->delivered);
                /* Gone before the answer: the caller may start the next export at once. */
                SnapshotMeta meta = e->meta;
                e->meta = (SnapshotMeta) {};
                export_unlink(e);       /* e is gone: only copies of it from here on */
                cb(&meta, NULL, 0, failed ? &error : NULL, userdata);
                snapshot_meta_done(&meta);
                return;
        }
        /* A full part, or what is left before the end (the end itself is a part of its own:
         * only a child that exited well ends the stream). */
        if (e->n < e->want && !e->eof)
                return;
        if (e->n == 0)
                return;  /* the end, once the child is reaped */
        k = MIN(e->n, e->want);
        e->cb = NULL;
        e->delivered += k;
        cb(&e->meta, e->buf, k, NULL, userdata);
        memmove(e->buf, e->buf + k, e->n - k);
        e->n -= k;
        if (e->io && !e->eof)
                (void) sd_event_source_set_enabled(e->io, SD_EVENT_ON);
}

static int on_export_readable(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        WorkspaceExport *e = userdata;

        while (e->n < EXPORT_BUFFER) {
                ssize_t n = read(fd, e->buf + e->n, EXPORT_BUFFER - e->n);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        log_warning_errno(errno, "Failed to read the archive of sandbox %s: %m", e->id);
                        e->failed = true;
                        break;
                }
                if (n == 0) {
                        e->eof = true;
                        break;
                }
                e->n += (size_t) n;
        }
        /* Full: the child waits on the pipe until a part is taken. */
        if (e->n == EXPORT_BUFFER || e->eof || e->failed)
                (void) sd_event_source_set_enabled(source, SD_EVENT_OFF);
        export_maybe_answer(e);
        return 0;
}

static int on_export_answer(sd_event_source *source, void *userdata) {
        export_maybe_answer(userdata);
        return 0;
}

static int on_export_exited(sd_event_source *source, const siginfo_t *si, void *userdata) {
        WorkspaceExport *e = userdata;

        e->exited = true;
        if (si->si_code != CLD_EXITED || si->si_status != 0) {
                log_warning("The archive of sandbox %s's workspace ended with %s %d.", e->id,
                            si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
                e->failed = true;
        }
        export_maybe_answer(e);
        return 0;
}

typedef struct ExportChild {
        const char *agent;
        int dir_fd, out_fd;
        uid_t uid;
} ExportChild;

/* In the child (spawn-util.h: raw calls only): in the workspace's directory, as the
 * sandbox's uid, without privileges to gain, the agent writes the stream to out_fd. */
static int export_child(void *userdata) {
        ExportChild *c = userdata;
        char *argv[] = { (char *) "sandbox-init", (char *) "--archive-workspace", NULL };
        char *envp[] = { NULL };
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

        if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(c->out_fd, STDOUT_FILENO) < 0 || fchdir(c->dir_fd) < 0)
                return -errno;
        if (drop_to_uid(c->uid, c->uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        execve(c->agent, argv, envp);
        return -errno;
}

static int export_start(Manager *m, Sandbox *s, WorkspaceExport **ret, SandboxError *error) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int dir_fd = -EBADF, pidfd = -EBADF;
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        WorkspaceExport *e;
        int r;

        dir = workspace_path(m->workspaces, s->id, NULL);
        if (!dir)
                return -ENOMEM;
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir_fd < 0)
                return sandbox_error_set_errno(error, errno, "Failed to open the workspace of sandbox %s: %m", s->id);
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        (void) fcntl(p[0], F_SETFL, O_NONBLOCK);
        (void) fcntl(p[0], F_SETPIPE_SZ, EXPORT_BUFFER);

        e = calloc(1, sizeof(WorkspaceExport));
        if (!e)
                return -ENOMEM;
        *e = (WorkspaceExport) { .manager = m, .pipe_fd = -EBADF, .last_usec = now_usec(CLOCK_MONOTONIC) };
        strcpy(e->id, s->id);
        e->buf = malloc(EXPORT_BUFFER);
        r = e->buf ? snapshot_meta_of_workspace(s, &e->meta) : -ENOMEM;
        if (r < 0) {
                export_free(e);
                return r;
        }
        ExportChild c = { .agent = m->settings.agent_path, .dir_fd = dir_fd, .out_fd = p[1], .uid = s->host_uid };
        r = spawn_vfork(0, export_child, &c, &e->pid, &pidfd);
        if (r < 0) {
                export_free(e);
                return sandbox_error_set_errno(error, -r, "Failed to start the archive of sandbox %s: %m", s->id);
        }
        p[1] = safe_close(p[1]);
        e->pipe_fd = TAKE_FD(p[0]);
        r = sd_event_add_io(m->event, &e->io, e->pipe_fd, EPOLLIN, on_export_readable, e);
        if (r >= 0)
                r = sd_event_add_child_pidfd(m->event, &e->child, pidfd, WEXITED, on_export_exited, e);
        if (r >= 0)
                r = sd_event_add_defer(m->event, &e->answer, on_export_answer, e);
        if (r >= 0)
                r = sd_event_source_set_enabled(e->answer, SD_EVENT_OFF);
        if (r < 0) {
                export_free(e);
                return r;
        }
        TAKE_FD(pidfd);
        (void) sd_event_source_set_child_pidfd_own(e->child, true);
        e->next = m->workspace_exports;
        m->workspace_exports = e;
        log_sandbox(s, LOG_INFO, 0, "Exporting sandbox %s from its workspace.", s->id);
        *ret = e;
        return 0;
}

int workspace_export_read(Manager *m, Sandbox *s, uint64_t offset, size_t length, workspace_export_callback_t cb,
                          void *userdata, SandboxError *error) {
        WorkspaceExport *e;
        int r;

        assert_return(m, -EINVAL);
        assert_return(s, -EINVAL);
        assert_return(cb, -EINVAL);

        exports_expire(m);
        if (!m->workspaces || s->state != SANDBOX_STOPPED || !workspace_exists(m->workspaces, s->id))
                return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED, "Sandbox %s has no workspace on disk.",
                                         s->id);
        e = export_find(m, s->id);
        if (e && e->cb)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "A part of sandbox %s's export is under way.",
                                         s->id);
        if (offset == 0) {
                /* From the start again: what was under way is dropped. */
                if (e)
                        export_unlink(e);
                r = export_start(m, s, &e, error);
                if (r < 0)
                        return r;
        } else if (!e || offset != e->delivered)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "The export of sandbox %s is not at offset %" PRIu64 "; start at 0.", s->id,
                                         offset);
        e->last_usec = now_usec(CLOCK_MONOTONIC);
        e->want = MIN(MAX(length, (size_t) 1), EXPORT_BUFFER);
        e->cb = cb;
        e->userdata = userdata;
        /* What is there already is answered from the loop, never before this returns. */
        r = sd_event_source_set_enabled(e->answer, SD_EVENT_ONESHOT);
        if (r < 0)
                e->cb = NULL;
        return r;
}
