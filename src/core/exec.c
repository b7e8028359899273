/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <time.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/mman.h>

#include <systemd/sd-daemon.h>

#include "cgroup.h"
#include "exec-forward.h"
#include "exec-persist.h"
#include "fd-util.h"
#include "list.h"
#include "log.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"
#include "time-util.h"
#include "workspace.h"

/* After the process ended, how long what it wrote may take to reach the caller's own
 * descriptors (whose reader takes nothing) before the result goes without the rest. */
#define EXEC_FORWARD_WAIT_USEC (30ULL * 1000000ULL)
/* After a timeout's SIGKILL, how long the agent has to report the exit. */
#define EXEC_KILL_GRACE_USEC (5ULL * 1000000ULL)
#define EXEC_READ_CHUNK (64U * 1024U)
#define EXEC_READ_MAX_PER_CALL (1024U * 1024U)
/* What a caller times (an exec's timeout, a Wait) fires within 1 ms, not within sd-event's
 * default slack of 250 ms. */
#define EXEC_TIMER_ACCURACY_USEC (1000ULL)

uint64_t exec_get_id(const Exec *e) {
        return e->id;
}

bool output_buffer_append(OutputBuffer *b, const void *data, size_t n) {
        if (b->max == 0) {
                b->total += n;
                return n > 0;
        }
        if (b->keep_tail && b->size + n > b->max) {
                /* Make room by dropping the oldest: keep the newest max bytes. */
                size_t take = MIN(n, b->max), drop = MIN(b->size, b->size + take - b->max);
                if (drop > 0) {
                        memmove(b->data, b->data + drop, b->size - drop);
                        b->size -= drop;
                }
                data = (const char *) data + (n - take);
                b->total += n - take;
                n = take;
        }
        size_t keep = b->size < b->max ? MIN(n, b->max - b->size) : 0;

        b->total += n;
        if (keep > 0) {
                char *d = realloc(b->data, b->size + keep);
                if (!d)
                        keep = 0; /* treated as dropped: the caller sees Truncated */
                else {
                        memcpy(d + b->size, data, keep);
                        b->data = d;
                        b->size += keep;
                }
        }
        return keep < n;
}

void output_buffer_done(OutputBuffer *b) {
        b->data = mfree(b->data);
        b->size = 0;
        b->total = 0;
}

int output_buffer_from(const OutputBuffer *b, uint64_t offset, const char **ret_data, size_t *ret_size) {
        /* A background process's buffer keeps the newest bytes, any other the first. */
        uint64_t start = b->keep_tail ? b->total - b->size : 0, skip;

        if (offset > b->total)
                return -EINVAL;
        skip = offset > start ? MIN(offset - start, (uint64_t) b->size) : 0;
        *ret_data = (b->data ?: "") + skip;
        *ret_size = b->size - (size_t) skip;
        return 0;
}

void exec_result_from_exit(ExecResult *r, const struct agent_exit *x, bool timed_out, bool oom_killed) {
        r->exit_code = x->signal > 0 ? -1 : x->code;
        r->signal = x->signal > 0 ? x->signal : 0;
        r->exit_status = x->signal > 0 ? 128 + x->signal : x->code;
        r->timed_out = timed_out;
        /* The cgroup's own count across the exec decides, whatever the top process says: a
         * shell or a pipeline whose child the OOM killer took may well exit 137 or 0. */
        r->oom_killed = oom_killed;
        r->duration_usec = x->duration_usec;
        r->cpu_usec = x->utime_usec + x->stime_usec;
        r->max_rss_bytes = x->maxrss_kb * 1024ULL;
}

typedef struct ExecWaiter {
        Exec *exec;
        exec_callback_t cb;
        void *userdata;
        sd_event_source *timer;
        struct ExecWaiter *next;
} ExecWaiter;

static void exec_unlink(Exec *e);

struct ExecFollower {
        Exec *exec;               /* NULL once the exec is gone */
        exec_output_callback_t on_output;
        void *userdata;
        bool held;
        ExecFollower *next, *prev;
};

static void exec_update_reading(Exec *e) {
        int on = e->n_holds > 0 ? SD_EVENT_OFF : SD_EVENT_ON;

        if (e->out_source)
                (void) sd_event_source_set_enabled(e->out_source, on);
        if (e->err_source)
                (void) sd_event_source_set_enabled(e->err_source, on);
}

static void exec_stdin_done(Exec *e) {
        e->stdin_source = sd_event_source_disable_unref(e->stdin_source);
        e->stdin_fd = safe_close(e->stdin_fd);
        e->stdin_pending = mfree(e->stdin_pending);
        e->stdin_pending_size = 0;
        e->stdin_close_pending = false;
}

/* Answers everyone waiting for e: with its result, or with error. */
static void exec_notify_waiters(Exec *e, const SandboxError *error) {
        while (e->waiters) {
                ExecWaiter *w = e->waiters;
                e->waiters = w->next;
                sd_event_source_disable_unref(w->timer);
                w->cb(e, error ? NULL : &e->result, error, w->userdata);
                free(w);
        }
}

static void exec_unlink_finished(Exec *e) {
        Sandbox *s = e->sandbox;

        LIST_REMOVE(s->finished, e);
        s->n_finished--;
        e->sandbox = NULL;
}

/* A background process's pipes wait in systemd's fd store while sandboxd is not there
 * (a restart, a crash): the next one reads its output on (exec-persist.h). */
static void exec_store_fds(Exec *e, bool store) {
        const int fds[2] = { e->out_fd, e->err_fd };
        static const char * const names[2] = { "out", "err" };
        char msg[128];

        if (!getenv("NOTIFY_SOCKET"))
                return;
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                if (fds[i] < 0)
                        continue;
                snprintf(msg, sizeof(msg), "%s\nFDNAME=%s-%s-%" PRIu64, store ? "FDSTORE=1" : "FDSTOREREMOVE=1",
                         names[i], e->sandbox->id, e->id);
                if (store ? sd_pid_notify_with_fds(0, false, msg, &fds[i], 1) > 0 : sd_notify(false, msg) >= 0)
                        e->fds_stored = store;
        }
}

Exec *exec_free(Exec *e) {
        if (!e)
                return NULL;
        if (e->fds_stored && e->sandbox && !e->sandbox->detaching)
                exec_store_fds(e, false);
        if (e->sandbox && e->exited && e->config.background)
                exec_unlink_finished(e);
        else if (e->sandbox)
                exec_unlink(e);
        if (e->waiters) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                sandbox_error_set(&error, SANDBOX_ERR_NO_SUCH_PROCESS, "The process is gone with its sandbox.");
                exec_notify_waiters(e, &error);
        }
        while (e->followers) {
                ExecFollower *f = e->followers;
                LIST_REMOVE(e->followers, f);
                f->exec = NULL;
        }
        exec_stdin_done(e);
        sd_event_source_disable_unref(e->resize_timer);
        sd_event_source_disable_unref(e->out_source);
        sd_event_source_disable_unref(e->err_source);
        sd_event_source_disable_unref(e->timeout_source);
        sd_event_source_disable_unref(e->forward_timer);
        exec_forward_free(e->forward[0]);
        exec_forward_free(e->forward[1]);
        safe_close(e->out_fd);
        safe_close(e->err_fd);
        exec_config_done(&e->config);
        output_buffer_done(&e->result.out);
        output_buffer_done(&e->result.err);
        return mfree(e);
}

static uint64_t exec_read_oom_kills(Exec *e) {
        uint64_t n = 0;
        if (e->sandbox->cgroup)
                (void) cgroup_read_oom_kills(e->sandbox->cgroup, &n);
        return n;
}

/* Reads what is there, at most EXEC_READ_MAX_PER_CALL bytes (what the sandbox writes
 * cannot starve the loop); returns true once the writer side is closed. */
static bool exec_drain(Exec *e, int fd, OutputBuffer *b) {
        char buf[EXEC_READ_CHUNK];

        for (unsigned i = 0; i < EXEC_READ_MAX_PER_CALL / EXEC_READ_CHUNK; i++) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno != EAGAIN;
                }
                if (n == 0)
                        return true;
                if (output_buffer_append(b, buf, (size_t) n))
                        e->result.truncated = true;
                for (ExecFollower *f = e->followers, *next; f; f = next) {
                        next = f->next;   /* f may free itself */
                        f->on_output(e, b == &e->result.err, buf, (size_t) n, f->userdata);
                }
        }
        return false;
}

static void exec_forwards_done(Exec *e);

static int on_output(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;
        bool is_out = source == e->out_source;

        if (exec_drain(e, fd, is_out ? &e->result.out : &e->result.err)) {
                if (is_out) {
                        e->out_source = sd_event_source_disable_unref(e->out_source);
                        e->out_fd = safe_close(e->out_fd);
                        /* The terminal's relay is done: the end can be told now. */
                        if (e->forward_waiting && e->config.tty) {
                                exec_forwards_done(e);
                                return 0;
                        }
                } else {
                        e->err_source = sd_event_source_disable_unref(e->err_source);
                        e->err_fd = safe_close(e->err_fd);
                }
        }
        return 0;
}

void exec_suspend_timeout(Exec *e) {
        uint64_t t, now;

        if (!e->timeout_source || sd_event_source_get_time(e->timeout_source, &t) < 0 ||
            sd_event_now(sd_event_source_get_event(e->timeout_source), CLOCK_MONOTONIC, &now) < 0)
                return;
        e->timeout_left_usec = t > now ? t - now : 1;
        (void) sd_event_source_set_enabled(e->timeout_source, SD_EVENT_OFF);
}

void exec_resume_timeout(Exec *e) {
        if (!e->timeout_source || e->timeout_left_usec == 0)
                return;
        if (sd_event_source_set_time_relative(e->timeout_source, e->timeout_left_usec) >= 0)
                (void) sd_event_source_set_enabled(e->timeout_source, SD_EVENT_ONESHOT);
        e->timeout_left_usec = 0;
}

static void exec_unlink(Exec *e) {
        Sandbox *s = e->sandbox;

        LIST_REMOVE(s->execs, e);
        e->sandbox = NULL;
        sandbox_update_idle_timer(s);
}

/* The cgroup files are kept open while execs run (read at each one's start and end), not
 * while the sandbox idles: thousands of idle sandboxes would hold two descriptors each
 * (docs/WORKSPACES.md, "Descriptors"). memory.peak stays open once it was reset for a
 * recycled sandbox: the reset holds for that descriptor only (cgroup.h). */
void sandbox_cgroup_files_idle(Sandbox *s, const Exec *ending) {
        for (Exec *x = s->execs; x; x = x->next)
                if (x != ending && !x->exited)
                        return;
        cgroup_file_close(&s->cgroup_cpu_file);
        if (s->recycles == 0 && !sandbox_is_released(s))
                cgroup_file_close(&s->cgroup_memory_peak_file);
}

/* At the end of e, while its sandbox's unit is still there: what the cgroup accounted. */
static void exec_record_take(Exec *e) {
        Sandbox *s = e->sandbox;
        uint64_t cpu = 0;

        if (!manager_records_execs(s->manager))
                return;
        e->ended_at = now_usec(CLOCK_REALTIME);
        if (s->cgroup) {
                if (cgroup_read_cpu_nsec(s->cgroup, &s->cgroup_cpu_file, &cpu) >= 0)
                        e->cgroup_cpu = cpu > e->cgroup_cpu_before ? cpu - e->cgroup_cpu_before : 0;
                (void) cgroup_read_memory_peak(s->cgroup, &s->cgroup_memory_peak_file, &e->cgroup_memory_peak);
                sandbox_cgroup_files_idle(s, e);
        }
        /* One sysfs read (its qgroup is known after the first). */
        if (s->workspace && s->manager->workspaces)
                e->disk_known = workspace_usage(s->manager->workspaces, s->id, &s->workspace_qgroup,
                                                &e->disk_bytes_used, NULL) >= 0;
        e->record_pending = true;
}

/* The record of e: what ran, how it ended, what the unit's cgroup accounted meanwhile.
 * sandbox is e's (an ephemeral exec is unlinked from it by then). */
static void exec_record(Exec *e, Sandbox *sandbox) {
        Manager *m = sandbox->manager;
        const ExecResult *r = &e->result;

        if (!e->record_pending)
                return;
        e->record_pending = false;
        manager_record_exec(m, &(ExecRecordEvent) {
                .sandbox_id = sandbox->id,
                .exec_id = e->id,
                .owner = sandbox->owner,
                .tenant = sandbox->config.tenant,
                .labels = sandbox->config.labels,
                .caller = e->config.caller,
                .argv = e->config.argv,
                .working_directory = e->config.working_directory,
                .background = e->config.background,
                .started_at = e->started_at,
                .ended_at = e->ended_at,
                .exit_status = r->exit_status,
                .exit_code = r->exit_code,
                .signal = r->signal,
                .timed_out = r->timed_out,
                .oom_killed = r->oom_killed,
                .truncated = r->truncated,
                .cpu_usec = r->cpu_usec,
                .cgroup_cpu_nsec = e->cgroup_cpu,
                .cgroup_memory_peak = e->cgroup_memory_peak,
                .disk_known = e->disk_known,
                .disk_bytes_used = e->disk_bytes_used,
                .disk_bytes_max = sandbox->config.disk_max,
                .stdout_bytes = r->out.total,
                .stderr_bytes = r->err.total,
                .stdout_excerpt = r->out.data,
                .stdout_excerpt_size = MIN(r->out.size, (size_t) EXEC_EVENT_EXCERPT_MAX),
                .stderr_excerpt = r->err.data,
                .stderr_excerpt_size = MIN(r->err.size, (size_t) EXEC_EVENT_EXCERPT_MAX),
        });
}

static void exec_deliver_now(Exec *e) {
        exec_callback_t cb = e->cb;

        e->cb = NULL;
        cb(e, &e->result, NULL, e->userdata);
        /* The caller has its answer; the record (a format and a write(2)) is not on the
         * way to it. */
        if (e->sandbox)
                exec_record(e, e->sandbox);
        exec_free(e);
}

void exec_abandon_callers(Exec *e, const SandboxError *error) {
        exec_callback_t cb = e->cb;

        e->cb = NULL;
        if (cb)
                cb(e, NULL, error, e->userdata);
        exec_notify_waiters(e, error);
}

static void on_ephemeral_destroyed(Sandbox *s, const SandboxError *error, void *userdata) {
        Exec *e = userdata;

        if (error) {
                /* sandboxd is exiting before the sandbox is gone: the result cannot be
                 * given as promised (with nothing of the sandbox left). */
                exec_abandon_callers(e, error);
                exec_free(e);
                return;
        }
        exec_deliver_now(e);
}

static void exec_deliver(Exec *e) {
        Sandbox *s = e->sandbox;

        if (!s->config.ephemeral) {
                exec_deliver_now(e);
                return;
        }
        /* An ephemeral sandbox answers once it is gone, so that nothing of it is left when
         * the caller sees the result; one a recycling template keeps is gone for the caller
         * at once, and reset meanwhile (recycle.c). Its record goes first, while the
         * sandbox is. */
        exec_record(e, s);
        exec_unlink(e);
        if (recycle_can_keep(s)) {
                /* Answered before the release's own work (its record, signal, state file,
                 * the agent's reset): the release follows in this same dispatch, so no
                 * call can reach the sandbox in between. */
                exec_deliver_now(e);
                if (sandbox_release(s, NULL, NULL) < 0)
                        (void) sandbox_destroy(s, NULL, NULL);
                return;
        }
        if (sandbox_destroy(s, on_ephemeral_destroyed, e) < 0)
                exec_deliver_now(e);
}

static void exec_complete_now(Exec *e, const struct agent_exit *x);

static void exec_forwards_done(Exec *e) {
        struct agent_exit x = e->pending_exit;

        e->forward_waiting = false;
        e->forward_timer = sd_event_source_disable_unref(e->forward_timer);
        exec_complete_now(e, &x);
}

static void on_forward_done(ExecForward *f, void *userdata) {
        Exec *e = userdata;

        for (size_t i = 0; i < ELEMENTSOF(e->forward); i++)
                if (e->forward[i] && !exec_forward_finish(e->forward[i]))
                        return;
        exec_forwards_done(e);
}

static int on_forward_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Exec *e = userdata;

        log_sandbox(e->sandbox, LOG_WARNING, 0,
                    "The caller's reader of exec %" PRIu64 " took nothing for %llu s; its last output is dropped.",
                    e->id, EXEC_FORWARD_WAIT_USEC / 1000000ULL);
        for (size_t i = 0; i < ELEMENTSOF(e->forward); i++)
                if (e->forward[i])
                        exec_forward_abandon(e->forward[i]);
        exec_forwards_done(e);
        return 0;
}

/* The process ended: its result once what it wrote to the caller's own descriptors is
 * out, counted. */
static void exec_complete(Exec *e, const struct agent_exit *x) {
        bool out = true;

        if (e->forward_waiting)
                return;
        for (size_t i = 0; i < ELEMENTSOF(e->forward); i++)
                if (e->forward[i] && !exec_forward_finish(e->forward[i]))
                        out = false;
        /* A terminal relayed to our pipe: the agent's relay copies what the session wrote
         * last after the exit is reported; its end of the pipe closes once all is out. */
        if (e->config.tty && e->out_source && !e->timed_out)
                out = false;
        if (out || sd_event_add_time_relative(e->sandbox->manager->event, &e->forward_timer, CLOCK_MONOTONIC,
                                              EXEC_FORWARD_WAIT_USEC, 0, on_forward_timeout, e) < 0) {
                exec_complete_now(e, x);
                return;
        }
        e->pending_exit = *x;
        e->forward_waiting = true;
        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
}

static void exec_complete_now(Exec *e, const struct agent_exit *x) {
        /* The agent reports after waitpid(): all the process wrote is in the pipes now. */
        if (e->out_fd >= 0)
                (void) exec_drain(e, e->out_fd, &e->result.out);
        if (e->err_fd >= 0)
                (void) exec_drain(e, e->err_fd, &e->result.err);
        e->out_source = sd_event_source_disable_unref(e->out_source);
        e->err_source = sd_event_source_disable_unref(e->err_source);
        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);
        exec_stdin_done(e);
        /* What the process's children write after it is not waited for: an exec's
         * forwards end with it (their next write fails), a background process's stay
         * until it is forgotten. */
        if (!e->config.background)
                for (size_t i = 0; i < ELEMENTSOF(e->forward); i++)
                        e->forward[i] = exec_forward_free(e->forward[i]);

        exec_result_from_exit(&e->result, x, e->timed_out, exec_read_oom_kills(e) > e->oom_kills_before);
        e->exited = true;
        statistics_exec_done_for(e->sandbox->manager, sandbox_get_tenant(e->sandbox), e->result.duration_usec,
                                 e->result.timed_out, e->result.oom_killed);
        exec_record_take(e);
        if (!e->config.background) {
                exec_deliver(e);
                return;
        }
        exec_record(e, e->sandbox);

        /* A background process: kept, with its result, among the finished (bounded). */
        Sandbox *s = e->sandbox;
        exec_unlink(e);
        e->sandbox = s;
        LIST_PREPEND(s->finished, e);
        if (++s->n_finished > SANDBOX_FINISHED_MAX) {
                Exec *oldest = s->finished;
                while (oldest->next)
                        oldest = oldest->next;
                exec_free(oldest);
        }
        if (e->fds_stored)
                exec_store_fds(e, false);
        sandbox_save_processes(s, false);
        log_sandbox(s, LOG_DEBUG, 0, "Background process %" PRIu64 " ended with %i.", e->id, e->result.exit_status);
        exec_notify_waiters(e, NULL);
}

void exec_on_agent_started(Sandbox *s, uint64_t id, pid_t pid) {
        for (Exec *e = s->execs; e; e = e->next)
                if (e->id == id) {
                        e->pid = pid;
                        return;
                }
}

void exec_on_agent_exit(Sandbox *s, const struct agent_exit *x) {
        for (Exec *e = s->execs; e; e = e->next)
                if (e->id == x->id && !e->exited) {
                        exec_complete(e, x);
                        return;
                }
}

void exec_abort(Exec *e, const char *reason) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        if (exec_read_oom_kills(e) > e->oom_kills_before) {
                /* The OOM killer took the sandbox's init down with the command: report it
                 * as what it was, not as a broken sandbox. */
                struct agent_exit x = { .id = e->id, .code = -1, .signal = SIGKILL };
                exec_complete(e, &x);
                return;
        }
        if (e->timed_out) {
                struct agent_exit x = { .id = e->id, .code = -1, .signal = SIGKILL };
                exec_complete(e, &x);
                return;
        }

        STATISTICS_COUNT(e->sandbox->manager, sandbox_get_tenant(e->sandbox), exec_failures);
        sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "%s", reason);
        exec_callback_t cb = e->cb;
        void *userdata = e->userdata;
        e->cb = NULL;
        if (cb)
                cb(e, NULL, &error, userdata);
        else
                exec_notify_waiters(e, &error);
        exec_free(e);
}

static int on_exec_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Exec *e = userdata;
        Sandbox *s = e->sandbox;
        json_object *msg;
        int r;

        if (e->timed_out) {
                /* The agent did not report the killed process: it cannot be trusted with
                 * further execs. */
                log_sandbox(s, LOG_ERR, 0, "Agent of sandbox %s did not report a killed exec; stopping it.", s->id);
                struct agent_exit x = { .id = e->id, .code = -1, .signal = SIGKILL };
                exec_complete(e, &x);
                if (s->state == SANDBOX_RUNNING)
                        (void) sandbox_destroy(s, NULL, NULL);
                return 0;
        }

        e->timed_out = true;
        msg = agent_msg_kill(e->id, SIGKILL);
        r = msg ? agent_send(s->control_fd, msg, NULL, 0) : -ENOMEM;
        json_object_put(msg);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to ask agent to kill exec %" PRIu64 ": %m", e->id);

        r = sd_event_source_set_time_relative(source, EXEC_KILL_GRACE_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        if (r < 0)
                log_sandbox(s, LOG_ERR, r, "Failed to re-arm exec timer: %m");
        return 0;
}

static int make_stdin(const ExecConfig *c) {
        int fd;

        if (c->stdin_data && c->stdin_size > 0)
                return memfd_new_with_data("sandbox-stdin", c->stdin_data, c->stdin_size);
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int exec_start(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata, SandboxError *error) {
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_pair_ int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        _cleanup_close_ int in = -EBADF, in_writer = -EBADF;
        Manager *m = s->manager;
        json_object *msg = NULL;
        Exec *e;
        int r;

        r = exec_config_finalize(c, error);
        if (r >= 0)
                r = limit_settings_check_exec(&m->settings.tenancy.limits, c, error);
        if (r < 0)
                return r;
        if (s->secret_environment) {
                /* Secrets bound as variables: over the template's, under the exec's own. */
                _cleanup_strv_free_ char **base = NULL;
                r = strv_env_merge(s->environment, s->secret_environment, &base);
                if (r >= 0)
                        r = strv_env_merge(base, c->environment, &env);
                for (char **i = base; i && *i; i++)
                        explicit_bzero(*i, strlen(*i));
        } else
                r = strv_env_merge(s->environment, c->environment, &env);
        if (r < 0)
                return r;

        /* The caller's input goes straight to the process; its output descriptors through
         * a forward that counts (exec-forward.h); pipes of ours where we capture. */
        if (c->stdin_pipe) {
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return -errno;
                in = p[0];
                in_writer = p[1];
                /* Ours only: the process's end stays blocking, as it expects. */
                if (fcntl(in_writer, F_SETFL, O_NONBLOCK) < 0)
                        return -errno;
        } else
                in = c->stdin_fd >= 0 ? TAKE_FD(c->stdin_fd) : make_stdin(c);
        if (in < 0)
                return in;
        if (c->stdout_fd < 0 && (pipe2(out, O_CLOEXEC) < 0 || fcntl(out[0], F_SETFL, O_NONBLOCK) < 0))
                return -errno;
        if (c->stderr_fd < 0 && (pipe2(err, O_CLOEXEC) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0))
                return -errno;

        e = calloc(1, sizeof(Exec));
        if (!e)
                return -ENOMEM;
        e->sandbox = s;
        e->id = ++s->next_exec_id;
        e->stdin_fd = TAKE_FD(in_writer);
        exec_config_move(&e->config, c);
        e->out_fd = TAKE_FD(out[0]);
        e->err_fd = TAKE_FD(err[0]);
        e->result.out.max = e->result.err.max = e->config.output_max;
        e->result.out.keep_tail = e->result.err.keep_tail = e->config.background;
        e->cb = cb;
        e->userdata = userdata;
        LIST_PREPEND(s->execs, e);

        r = 0;
        /* On a terminal the agent relays the pseudo-terminal to the caller's descriptors,
         * on after the process's end; a background process outlives sandboxd's restarts:
         * both are given the caller's descriptors as they are (not counted). */
        if ((e->config.tty || e->config.background) && e->config.stdout_fd >= 0)
                out[1] = TAKE_FD(e->config.stdout_fd);
        if ((e->config.tty || e->config.background) && e->config.stderr_fd >= 0)
                err[1] = TAKE_FD(e->config.stderr_fd);
        if (e->config.stdout_fd >= 0)
                r = exec_forward_new(m->event, TAKE_FD(e->config.stdout_fd), &e->result.out.total, on_forward_done, e,
                                     &e->forward[0], &out[1]);
        if (r >= 0 && e->config.stderr_fd >= 0)
                r = exec_forward_new(m->event, TAKE_FD(e->config.stderr_fd), &e->result.err.total, on_forward_done, e,
                                     &e->forward[1], &err[1]);
        if (r >= 0 && e->out_fd >= 0)
                r = sd_event_add_io(m->event, &e->out_source, e->out_fd, EPOLLIN, on_output, e);
        if (r >= 0 && e->err_fd >= 0)
                r = sd_event_add_io(m->event, &e->err_source, e->err_fd, EPOLLIN, on_output, e);
        /* A background process has no timeout unless one was asked for. */
        if (r >= 0 && (!e->config.background || e->config.timeout_set))
                r = sd_event_add_time_relative(m->event, &e->timeout_source, CLOCK_MONOTONIC,
                                               e->config.timeout_usec, EXEC_TIMER_ACCURACY_USEC,
                                               on_exec_timeout, e);
        if (r < 0)
                goto fail;

        e->oom_kills_before = exec_read_oom_kills(e);
        if (manager_records_execs(m))
                e->started_at = now_usec(CLOCK_REALTIME);

        if (e->config.tty) {
                struct agent_winsize ws = { .rows = e->config.tty_rows ?: 24, .cols = e->config.tty_cols ?: 80 };
                msg = agent_msg_exec_tty(e->id, e->config.argv, env, e->config.working_directory, &ws);
        } else
                msg = agent_msg_exec(e->id, e->config.argv, env, e->config.working_directory);
        if (!msg) {
                r = -ENOMEM;
                goto fail;
        }
        r = agent_send(s->control_fd, msg, (int[]) { in, out[1], err[1] }, AGENT_EXEC_NFDS);
        json_object_put(msg);
        if (r == -EMSGSIZE) {
                exec_free(e);
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "The exec request is too large.");
        }
        if (r < 0) {
                STATISTICS_COUNT(m, sandbox_get_tenant(s), exec_failures);
                exec_free(e);
                return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_FAILED,
                                         "Failed to hand the command to sandbox %s: %s", s->id, strerror(-r));
        }

        /* For the record: the unit's CPU time from here on, read while the agent starts the
         * command rather than before it is asked to (the command has used none yet). */
        if (manager_records_execs(m) && s->cgroup)
                (void) cgroup_read_cpu_nsec(s->cgroup, &s->cgroup_cpu_file, &e->cgroup_cpu_before);

        sandbox_set_use(s, SANDBOX_USED);
        sandbox_update_idle_timer(s);
        if (e->config.background) {
                exec_store_fds(e, true);
                sandbox_save_processes(s, false);
        }
        log_sandbox(s, LOG_DEBUG, 0, "Exec %" PRIu64 " started: %s", e->id, e->config.argv[0]);
        return 0;
fail:
        STATISTICS_COUNT(m, sandbox_get_tenant(s), exec_failures);
        exec_free(e);
        return r;
}

Exec *exec_new_adopted(Sandbox *s, uint64_t id, char **argv, bool tty, uint64_t output_max) {
        Exec *e = calloc(1, sizeof(Exec));

        if (!e)
                return NULL;
        exec_config_init(&e->config);
        e->config.argv = argv;
        e->config.background = true;
        e->config.tty = tty;
        e->config.output_max = output_max;
        e->id = id;
        e->out_fd = e->err_fd = e->stdin_fd = -EBADF;
        e->result.out.max = e->result.err.max = output_max;
        e->result.out.keep_tail = e->result.err.keep_tail = true;
        e->sandbox = s;
        return e;
}

int exec_adopt_running(Exec *e, pid_t pid, uint64_t started_at, int out_fd, int err_fd, uint64_t timeout_left_usec) {
        Sandbox *s = e->sandbox;
        sd_event *event = s->manager->event;
        int r = 0;

        e->pid = pid;
        e->started_at = started_at;
        e->out_fd = out_fd;
        e->err_fd = err_fd;
        e->fds_stored = out_fd >= 0 || err_fd >= 0;
        LIST_PREPEND(s->execs, e);
        e->oom_kills_before = exec_read_oom_kills(e);
        if (e->out_fd >= 0)
                r = sd_event_add_io(event, &e->out_source, e->out_fd, EPOLLIN, on_output, e);
        if (r >= 0 && e->err_fd >= 0)
                r = sd_event_add_io(event, &e->err_source, e->err_fd, EPOLLIN, on_output, e);
        if (r >= 0 && timeout_left_usec > 0)
                r = sd_event_add_time_relative(event, &e->timeout_source, CLOCK_MONOTONIC, timeout_left_usec,
                                               EXEC_TIMER_ACCURACY_USEC, on_exec_timeout, e);
        return r;
}

void exec_adopt_finished(Exec *e, Exec **tail) {
        Sandbox *s = e->sandbox;

        e->exited = true;
        if (*tail)
                (*tail)->next = e, e->prev = *tail;
        else
                s->finished = e;
        *tail = e;
        s->n_finished++;
}

uint64_t exec_timeout_left_usec(const Exec *e) {
        uint64_t t, now;

        if (!e->timeout_source || sd_event_source_get_enabled(e->timeout_source, NULL) <= 0 ||
            sd_event_source_get_time(e->timeout_source, &t) < 0 ||
            sd_event_now(sd_event_source_get_event(e->timeout_source), CLOCK_MONOTONIC, &now) < 0)
                return e->timeout_left_usec;
        return t > now ? t - now : 1;
}

int sandbox_start_process(Sandbox *s, ExecConfig *c, uint64_t *ret_id, SandboxError *error) {
        int r;

        if (sandbox_get_config(s)->ephemeral)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "Sandbox %s is ephemeral: it runs one Exec, not background processes.",
                                          sandbox_get_id(s));
        c->background = true;
        r = sandbox_exec(s, c, NULL, NULL, error);
        if (r < 0)
                return r;
        *ret_id = s->next_exec_id; /* exec_start took the latest id */
        return 0;
}

Exec *sandbox_find_process(Sandbox *s, uint64_t id) {
        for (Exec *e = sandbox_next_process(s, NULL); e; e = sandbox_next_process(s, e))
                if (e->id == id)
                        return e;
        return NULL;
}

int sandbox_get_process(Sandbox *s, uint64_t id, Exec **ret, SandboxError *error) {
        Exec *e = sandbox_find_process(s, id);

        if (!e)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_PROCESS, "No process %" PRIu64 " in sandbox %s.",
                                         id, s->id);
        *ret = e;
        return 0;
}

Exec *sandbox_next_process(Sandbox *s, Exec *prev) {
        Exec *e;

        if (!prev)
                e = s->execs;
        else if (!prev->exited)
                e = prev->next;
        else
                return prev->next;
        for (; e; e = e->next)
                if (e->config.background)
                        return e;
        return s->finished;
}

int exec_signal(Exec *e, int sig, SandboxError *error) {
        json_object *msg;
        int r;

        if (sig < 1 || sig > 64)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Signal %i is not a signal.", sig);
        if (!exec_is_running(e))
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_PROCESS, "Process %" PRIu64 " has ended.", e->id);
        msg = agent_msg_kill(e->id, sig);
        if (!msg)
                return -ENOMEM;
        r = agent_send(e->sandbox->control_fd, msg, NULL, 0);
        json_object_put(msg);
        return r;
}

static int on_wait_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        ExecWaiter *w = userdata;
        Exec *e = w->exec;
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        for (ExecWaiter **p = &e->waiters; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        sandbox_error_set(&error, SANDBOX_ERR_STILL_RUNNING, "Process %" PRIu64 " is still running.", e->id);
        sd_event_source_disable_unref(w->timer);
        w->cb(e, NULL, &error, w->userdata);
        free(w);
        return 0;
}

int exec_wait(Exec *e, uint64_t timeout_sec, exec_callback_t cb, void *userdata, SandboxError *error) {
        ExecWaiter *w;
        int r;

        if (timeout_sec > EXEC_TIMEOUT_MAX_SEC)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Wait takes at most %llu s.", EXEC_TIMEOUT_MAX_SEC);
        if (e->exited) {
                cb(e, &e->result, NULL, userdata);
                return 0;
        }
        w = calloc(1, sizeof(ExecWaiter));
        if (!w)
                return -ENOMEM;
        *w = (ExecWaiter) { .exec = e, .cb = cb, .userdata = userdata };
        if (timeout_sec > 0) {
                r = sd_event_add_time_relative(e->sandbox->manager->event, &w->timer, CLOCK_MONOTONIC,
                                               timeout_sec * 1000000ULL, EXEC_TIMER_ACCURACY_USEC, on_wait_timeout, w);
                if (r < 0) {
                        free(w);
                        return r;
                }
        }
        w->next = e->waiters;
        e->waiters = w;
        return 0;
}

void exec_wait_cancel(Exec *e, exec_callback_t cb, void *userdata) {
        for (ExecWaiter **p = &e->waiters; *p; p = &(*p)->next)
                if ((*p)->cb == cb && (*p)->userdata == userdata) {
                        ExecWaiter *w = *p;
                        *p = w->next;
                        sd_event_source_disable_unref(w->timer);
                        free(w);
                        return;
                }
}

bool exec_is_running(const Exec *e) {
        return !e->exited;
}

pid_t exec_get_pid(const Exec *e) {
        return e->pid;
}

char * const *exec_get_argv(const Exec *e) {
        return e->config.argv;
}

int exec_read_output(const Exec *e, uint64_t out_offset, uint64_t err_offset, ExecOutput *ret, SandboxError *error) {
        const ExecResult *r = exec_get_result(e);

        if (output_buffer_from(&r->out, out_offset, &ret->out, &ret->out_size) < 0 ||
            output_buffer_from(&r->err, err_offset, &ret->err, &ret->err_size) < 0) {
                if (e->output_lost)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Offset beyond the process's output (%" PRIu64 " and %" PRIu64
                                                 " bytes): sandboxd stopped without saving what it had read of "
                                                 "process %" PRIu64 " (a crash) and counts its output from 0 since "
                                                 "its restart; read from offset 0.",
                                                 r->out.total, r->err.total, e->id);
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Offset beyond the process's output (%" PRIu64 " and %" PRIu64 " bytes).",
                                         r->out.total, r->err.total);
        }
        ret->out_total = r->out.total;
        ret->err_total = r->err.total;
        return 0;
}

const ExecResult *exec_get_result(const Exec *e) {
        return &e->result;
}

static int on_stdin_writable(sd_event_source *source, int fd, uint32_t revents, void *userdata);

/* The resizes are answered (or waited for long enough): what input waited goes. */
static void exec_stdin_release(Exec *e) {
        int r;

        e->resizes_unanswered = 0;
        e->resize_timer = sd_event_source_disable_unref(e->resize_timer);
        e->stdin_unheld = 0;
        if (e->stdin_pending_size == 0)
                return;
        if (e->stdin_source) {
                r = sd_event_source_set_enabled(e->stdin_source, SD_EVENT_ON);
                if (r >= 0)
                        return;
        } else
                r = sd_event_add_io(e->sandbox->manager->event, &e->stdin_source, e->stdin_fd, EPOLLOUT, on_stdin_writable, e);
        if (r < 0) {
                log_sandbox(e->sandbox, LOG_WARNING, r, "Input of process %" PRIu64 " lost: %m", e->id);
                exec_stdin_done(e);
        }
}

static int on_resize_wait_over(sd_event_source *source, uint64_t usec, void *userdata) {
        Exec *e = userdata;

        log_sandbox(e->sandbox, LOG_DEBUG, 0, "No answer to the resize of process %" PRIu64 "'s terminal "
                    "(an agent before protocol version 6): its input goes on.", e->id);
        exec_stdin_release(e);
        return 0;
}

void exec_on_agent_resized(Sandbox *s, uint64_t id) {
        for (Exec *e = s->execs; e; e = e->next)
                if (e->id == id) {
                        if (e->resizes_unanswered > 0 && --e->resizes_unanswered == 0)
                                exec_stdin_release(e);
                        return;
                }
}

int exec_resize_terminal(Exec *e, uint64_t rows, uint64_t cols, SandboxError *error) {
        struct agent_winsize ws = { .rows = (uint16_t) rows, .cols = (uint16_t) cols };
        json_object *msg;
        int r;

        if (rows < 1 || cols < 1 || rows > UINT16_MAX || cols > UINT16_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Terminal size out of range.");
        if (!e->config.tty)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Process %" PRIu64 " has no terminal.", e->id);
        if (!exec_is_running(e))
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_PROCESS, "Process %" PRIu64 " has ended.", e->id);
        msg = agent_msg_resize(e->id, &ws);
        if (!msg)
                return -ENOMEM;
        r = agent_send(e->sandbox->control_fd, msg, NULL, 0);
        json_object_put(msg);
        if (r < 0)
                return r;
        /* Input written from now on waits for the agent's "resized"; what waits already
         * was written before the resize, and goes on. */
        if (e->stdin_fd >= 0 && !e->stdin_close_pending) {
                e->resize_timer = sd_event_source_disable_unref(e->resize_timer);
                r = sd_event_add_time_relative(e->sandbox->manager->event, &e->resize_timer, CLOCK_MONOTONIC,
                                               EXEC_RESIZE_WAIT_USEC, 0, on_resize_wait_over, e);
                if (r < 0)
                        return r;
                if (e->resizes_unanswered++ == 0)
                        e->stdin_unheld = e->stdin_pending_size;
        }
        return 0;
}

/* Writes what it can of data: the bytes written, or -EPIPE (the process closed its
 * input) or another -errno. */
static ssize_t exec_stdin_push(Exec *e, const void *data, size_t size) {
        ssize_t n;

        do
                n = write(e->stdin_fd, data, size);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN ? 0 : -errno;
        return n;
}

static int exec_stdin_flush(Exec *e) {
        bool held = e->resizes_unanswered > 0;
        size_t may = held ? e->stdin_unheld : e->stdin_pending_size;
        ssize_t n = may > 0 ? exec_stdin_push(e, e->stdin_pending, may) : 0;

        if (n < 0)
                return (int) n;
        memmove(e->stdin_pending, e->stdin_pending + n, e->stdin_pending_size - (size_t) n);
        e->stdin_pending_size -= (size_t) n;
        e->stdin_unheld -= MIN((size_t) n, e->stdin_unheld);
        if (e->stdin_pending_size > 0)
                /* Off while only what waits for a resize's answer is left. */
                return sd_event_source_set_enabled(e->stdin_source,
                                                   held && e->stdin_unheld == 0 ? SD_EVENT_OFF : SD_EVENT_ON);
        e->stdin_source = sd_event_source_disable_unref(e->stdin_source);
        if (e->stdin_close_pending)
                exec_stdin_done(e);
        return 0;
}

static int on_stdin_writable(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;
        int r = exec_stdin_flush(e);

        if (r < 0) {
                /* The process closed its input: what waits is for nobody. */
                log_sandbox(e->sandbox, LOG_DEBUG, r, "Input of process %" PRIu64 " closed: %m", e->id);
                exec_stdin_done(e);
        }
        return 0;
}

static int exec_stdin_check(Exec *e, SandboxError *error) {
        if (!exec_is_running(e))
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_PROCESS, "Process %" PRIu64 " has ended.", e->id);
        if (e->stdin_fd < 0 || e->stdin_close_pending)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Process %" PRIu64 " has no open input: start it with StdinPipe (or a TTY "
                                         "without descriptors); once closed, it stays closed.", e->id);
        return 0;
}

int exec_write_stdin(Exec *e, const void *data, size_t size, SandboxError *error) {
        ssize_t n = 0;
        int r;

        r = exec_stdin_check(e, error);
        if (r < 0)
                return r;
        if (size > EXEC_STDIN_PENDING_MAX - e->stdin_pending_size)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "Process %" PRIu64 " has not read %zu bytes of its input yet; at most %u "
                                         "may wait: retry once it has read them.",
                                         e->id, e->stdin_pending_size, EXEC_STDIN_PENDING_MAX);
        if (e->stdin_pending_size == 0 && e->resizes_unanswered == 0) {
                n = exec_stdin_push(e, data, size);
                if (n < 0) {
                        exec_stdin_done(e);
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Process %" PRIu64 " closed its input.", e->id);
                }
        }
        if ((size_t) n == size)
                return 0;

        /* The rest waits for room in the pipe, in order. */
        char *p = realloc(e->stdin_pending, e->stdin_pending_size + size - (size_t) n);
        if (!p)
                return -ENOMEM;
        memcpy(p + e->stdin_pending_size, (const char *) data + n, size - (size_t) n);
        e->stdin_pending = p;
        e->stdin_pending_size += size - (size_t) n;
        if (!e->stdin_source && e->resizes_unanswered == 0)
                return sd_event_add_io(e->sandbox->manager->event, &e->stdin_source, e->stdin_fd, EPOLLOUT,
                                       on_stdin_writable, e);
        return 0;
}

int exec_close_stdin(Exec *e, SandboxError *error) {
        int r = exec_stdin_check(e, error);

        if (r < 0)
                return r;
        if (e->stdin_pending_size > 0)
                e->stdin_close_pending = true;
        else
                exec_stdin_done(e);
        return 0;
}

int exec_follow(Exec *e, exec_output_callback_t cb, void *userdata, ExecFollower **ret) {
        ExecFollower *f = calloc(1, sizeof(ExecFollower));

        if (!f)
                return -ENOMEM;
        *f = (ExecFollower) { .exec = e, .on_output = cb, .userdata = userdata };
        LIST_PREPEND(e->followers, f);
        *ret = f;
        return 0;
}

void exec_follower_hold(ExecFollower *f, bool hold) {
        if (!f || !f->exec || f->held == hold)
                return;
        f->held = hold;
        if (hold)
                f->exec->n_holds++;
        else
                f->exec->n_holds--;
        exec_update_reading(f->exec);
}

ExecFollower *exec_follower_free(ExecFollower *f) {
        if (!f)
                return NULL;
        exec_follower_hold(f, false);
        if (f->exec)
                LIST_REMOVE(f->exec->followers, f);
        return mfree(f);
}
