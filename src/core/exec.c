/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/mman.h>

#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"

/* After a timeout's SIGKILL, how long the agent has to report the exit. */
#define EXEC_KILL_GRACE_USEC (5ULL * 1000000ULL)
#define EXEC_READ_CHUNK (64U * 1024U)

uint64_t exec_get_id(const Exec *e) {
        return e->id;
}

bool output_buffer_append(OutputBuffer *b, const void *data, size_t n) {
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

void exec_result_from_exit(ExecResult *r, const struct agent_exit *x, bool timed_out, bool oom_killed) {
        r->exit_code = x->signal > 0 ? -1 : x->code;
        r->signal = x->signal > 0 ? x->signal : 0;
        r->exit_status = x->signal > 0 ? 128 + x->signal : x->code;
        r->timed_out = timed_out;
        /* Only a kill can be the OOM killer's; a process that exited by itself was not. */
        r->oom_killed = oom_killed && x->signal == SIGKILL;
        r->duration_usec = x->duration_usec;
        r->cpu_usec = x->utime_usec + x->stime_usec;
        r->max_rss_bytes = x->maxrss_kb * 1024ULL;
}

static void exec_unlink(Exec *e);

Exec *exec_free(Exec *e) {
        if (!e)
                return NULL;
        if (e->sandbox)
                exec_unlink(e);
        sd_event_source_disable_unref(e->out_source);
        sd_event_source_disable_unref(e->err_source);
        sd_event_source_disable_unref(e->timeout_source);
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

/* Reads what is there without waiting; returns true once the writer side is closed. */
static bool exec_drain(Exec *e, int fd, OutputBuffer *b) {
        char buf[EXEC_READ_CHUNK];

        for (;;) {
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
        }
}

static int on_output(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Exec *e = userdata;
        bool is_out = source == e->out_source;

        if (exec_drain(e, fd, is_out ? &e->result.out : &e->result.err)) {
                if (is_out) {
                        e->out_source = sd_event_source_disable_unref(e->out_source);
                        e->out_fd = safe_close(e->out_fd);
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

        if (e->prev)
                e->prev->next = e->next;
        else if (s->execs == e)
                s->execs = e->next;
        if (e->next)
                e->next->prev = e->prev;
        e->next = e->prev = NULL;
        e->sandbox = NULL;
        sandbox_update_idle_timer(s);
}

static void exec_deliver_now(Exec *e) {
        exec_callback_t cb = e->cb;

        e->cb = NULL;
        cb(e, &e->result, NULL, e->userdata);
        exec_free(e);
}

static void on_ephemeral_destroyed(Sandbox *s, const sd_bus_error *error, void *userdata) {
        exec_deliver_now(userdata);
}

static void exec_deliver(Exec *e) {
        Sandbox *s = e->sandbox;

        if (!s->config.ephemeral) {
                exec_deliver_now(e);
                return;
        }
        /* An ephemeral sandbox answers once it is gone, so that nothing of it is left
         * when the caller sees the result. */
        exec_unlink(e);
        if (sandbox_destroy(s, on_ephemeral_destroyed, e) < 0)
                exec_deliver_now(e);
}

static void exec_complete(Exec *e, const struct agent_exit *x) {
        /* The agent reports after waitpid(): all the process wrote is in the pipes now. */
        if (e->out_fd >= 0)
                (void) exec_drain(e, e->out_fd, &e->result.out);
        if (e->err_fd >= 0)
                (void) exec_drain(e, e->err_fd, &e->result.err);
        e->out_source = sd_event_source_disable_unref(e->out_source);
        e->err_source = sd_event_source_disable_unref(e->err_source);
        e->timeout_source = sd_event_source_disable_unref(e->timeout_source);

        exec_result_from_exit(&e->result, x, e->timed_out, exec_read_oom_kills(e) > e->oom_kills_before);
        e->exited = true;
        exec_deliver(e);
}

void exec_on_agent_exit(Sandbox *s, const struct agent_exit *x) {
        for (Exec *e = s->execs; e; e = e->next)
                if (e->id == x->id && !e->exited) {
                        exec_complete(e, x);
                        return;
                }
}

void exec_abort(Exec *e, const char *reason) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;

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

        sandbox_error_setf(&error, SANDBOX_ERROR_SANDBOX_FAILED, "%s", reason);
        exec_callback_t cb = e->cb;
        void *userdata = e->userdata;
        e->cb = NULL;
        cb(e, NULL, &error, userdata);
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

int exec_start(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata, sd_bus_error *error) {
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_pair_ int out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        _cleanup_close_ int in = -EBADF;
        Manager *m = s->manager;
        json_object *msg = NULL;
        Exec *e;
        int r;

        r = exec_config_finalize(c, error);
        if (r < 0)
                return r;
        r = strv_env_merge(s->environment, c->environment, &env);
        if (r < 0)
                return r;

        /* The caller's descriptors go straight to the process; pipes only where we
         * capture. */
        in = c->stdin_fd >= 0 ? TAKE_FD(c->stdin_fd) : make_stdin(c);
        if (in < 0)
                return in;
        if (c->stdout_fd >= 0)
                out[1] = TAKE_FD(c->stdout_fd);
        else if (pipe2(out, O_CLOEXEC) < 0 || fcntl(out[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        if (c->stderr_fd >= 0)
                err[1] = TAKE_FD(c->stderr_fd);
        else if (pipe2(err, O_CLOEXEC) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;

        e = calloc(1, sizeof(Exec));
        if (!e)
                return -ENOMEM;
        e->sandbox = s;
        e->id = ++s->next_exec_id;
        exec_config_move(&e->config, c);
        e->out_fd = TAKE_FD(out[0]);
        e->err_fd = TAKE_FD(err[0]);
        e->result.out.max = e->result.err.max = e->config.output_max;
        e->cb = cb;
        e->userdata = userdata;
        e->next = s->execs;
        if (s->execs)
                s->execs->prev = e;
        s->execs = e;

        r = 0;
        if (e->out_fd >= 0)
                r = sd_event_add_io(m->event, &e->out_source, e->out_fd, EPOLLIN, on_output, e);
        if (r >= 0 && e->err_fd >= 0)
                r = sd_event_add_io(m->event, &e->err_source, e->err_fd, EPOLLIN, on_output, e);
        if (r >= 0)
                r = sd_event_add_time_relative(m->event, &e->timeout_source, CLOCK_MONOTONIC,
                                               e->config.timeout_sec * 1000000ULL, 0, on_exec_timeout, e);
        if (r < 0)
                goto fail;

        e->oom_kills_before = exec_read_oom_kills(e);

        msg = agent_msg_exec(e->id, e->config.argv, env, e->config.working_directory);
        if (!msg) {
                r = -ENOMEM;
                goto fail;
        }
        r = agent_send(s->control_fd, msg, (int[]) { in, out[1], err[1] }, AGENT_EXEC_NFDS);
        json_object_put(msg);
        if (r == -EMSGSIZE) {
                exec_free(e);
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "The exec request is too large.");
        }
        if (r < 0) {
                exec_free(e);
                return sandbox_error_setf(error, SANDBOX_ERROR_SANDBOX_FAILED,
                                         "Failed to hand the command to sandbox %s: %s", s->id, strerror(-r));
        }

        s->used = true;
        sandbox_update_idle_timer(s);
        log_sandbox(s, LOG_DEBUG, 0, "Exec %" PRIu64 " started: %s", e->id, e->config.argv[0]);
        return 0;
fail:
        exec_free(e);
        return r;
}
