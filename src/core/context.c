/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Code contexts: a driver process per context (context-driver.py, context-driver.js,
 * embedded), started as a background process of the sandbox with pipes of ours for its
 * stdin and stdout; cells are written to it one at a time, its events read back line by
 * line, checked, bounded and handed to the caller. docs/CONTEXTS.md says why. */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include "context.h"
#include "fd-util.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "sandbox-internal.h"
#include "sandbox-persist.h"
#include "strv.h"
#include "time-util.h"

#include "context-driver.py.h"
#include "context-driver.js.h"

/* A line of the driver's beyond this (a cell's output can never be) is dropped whole. */
#define CONTEXT_LINE_MAX (EXEC_OUTPUT_MAX + 64U * 1024U)
#define CONTEXT_READ_CHUNK (64U * 1024U)
#define CONTEXT_STDERR_KEEP (16U * 1024U)

typedef struct ReadyWaiter {
        context_ready_t cb;
        void *userdata;
        struct ReadyWaiter *next;
} ReadyWaiter;

/* The wait on the driver's process: it may outlive the context (removed meanwhile). */
typedef struct ContextProcess {
        Context *context;
} ContextProcess;

struct ContextRun {
        Context *context;
        char *code;
        uint64_t timeout_usec;
        uint64_t output_max;
        context_event_t on_event;
        context_done_t on_done;
        void *userdata;          /* NULL callbacks: detached */
        uint64_t started;        /* µs CLOCK_MONOTONIC, once sent */
        uint64_t output_bytes;
        bool truncated, interrupted, timed_out;
        json_object *error;
        ContextRun *next, *prev;
};

struct Context {
        Sandbox *sandbox;
        char id[CONTEXT_ID_LEN + 1];
        ContextLanguage language;
        ContextState state;
        bool is_default;
        uid_t caller;
        char *working_directory;
        char **environment;
        uint64_t created_at;
        uint64_t execution_count;
        char *version;
        char *lost_reason;
        bool lost_for_memory;

        uint64_t process_id;
        ContextProcess *process;   /* while its driver runs */
        int in_fd, out_fd;
        sd_event_source *in_source, *out_source;
        char *inbuf;               /* what is still to be written to the driver */
        size_t inbuf_size, inbuf_done;
        char *line;                /* what was read of the current line */
        size_t line_size;
        bool discarding;           /* the current line was too long: dropped to its end */

        ContextRun *runs;          /* the running one first, then those waiting */
        unsigned n_runs;
        ReadyWaiter *ready_waiters;
        sd_event_source *timer;    /* start deadline; a cell's timeout; the interrupt's grace */
        uint64_t timer_left_usec;  /* while paused */
        bool killing;              /* the grace ran out: killed */

        Context *next, *prev;
};

static const char * const language_table[_CONTEXT_LANGUAGE_MAX] = {
        [CONTEXT_LANGUAGE_PYTHON] = "python",
        [CONTEXT_LANGUAGE_JAVASCRIPT] = "javascript",
};

static const char * const state_table[_CONTEXT_STATE_MAX] = {
        [CONTEXT_STARTING] = "starting",
        [CONTEXT_IDLE] = "idle",
        [CONTEXT_BUSY] = "busy",
        [CONTEXT_LOST] = "lost",
};

ContextLanguage context_language_from_string(const char *s) {
        if (isempty(s) || streq(s, "python") || streq(s, "python3"))
                return CONTEXT_LANGUAGE_PYTHON;
        if (streq(s, "javascript") || streq(s, "js") || streq(s, "node"))
                return CONTEXT_LANGUAGE_JAVASCRIPT;
        return _CONTEXT_LANGUAGE_INVALID;
}

const char *context_language_to_string(ContextLanguage l) {
        return l >= 0 && l < _CONTEXT_LANGUAGE_MAX ? language_table[l] : NULL;
}

const char *context_state_to_string(ContextState s) {
        return s >= 0 && s < _CONTEXT_STATE_MAX ? state_table[s] : NULL;
}

const char *context_get_id(const Context *c) {
        return c->id;
}

ContextLanguage context_get_language(const Context *c) {
        return c->language;
}

ContextState context_get_state(const Context *c) {
        return c->state;
}

uint64_t context_get_execution_count(const Context *c) {
        return c->execution_count;
}

uint64_t context_get_created_at(const Context *c) {
        return c->created_at;
}

const char *context_get_working_directory(const Context *c) {
        return c->working_directory ?: SANDBOX_WORKDIR;
}

const char *context_get_version(const Context *c) {
        return c->version ?: "";
}

const char *context_get_lost_reason(const Context *c) {
        return c->state == CONTEXT_LOST ? (c->lost_reason ?: "its kernel ended") : NULL;
}

bool context_is_default(const Context *c) {
        return c->is_default;
}

uint64_t context_get_process(const Context *c) {
        return c->process_id;
}

static sd_event *context_event(Context *c) {
        return c->sandbox->manager->event;
}

/* ---- runs ---- */

static ContextRun *context_run_free(ContextRun *run) {
        if (!run)
                return NULL;
        if (run->context) {
                LIST_REMOVE(run->context->runs, run);
                run->context->n_runs--;
        }
        json_object_put(run->error);
        free(run->code);
        return mfree(run);
}

void context_run_detach(ContextRun *run) {
        if (!run)
                return;
        run->on_event = NULL;
        run->on_done = NULL;
        run->userdata = NULL;
}

/* Answers run (with its result, or error) and frees it. */
static void context_run_finish(ContextRun *run, uint64_t execution_count, const char *status,
                               const SandboxError *error) {
        context_done_t done = run->on_done;
        void *userdata = run->userdata;
        ContextRunResult result = {
                .execution_count = execution_count,
                .status = status ?: "ok",
                .error = run->error,
                .truncated = run->truncated,
                .interrupted = run->interrupted,
                .timed_out = run->timed_out,
                .output_bytes = run->output_bytes,
                .duration_usec = run->started > 0 ? now_usec(CLOCK_MONOTONIC) - run->started : 0,
        };

        /* Out of the context's list before the call back, which may remove the context. */
        if (run->context) {
                LIST_REMOVE(run->context->runs, run);
                run->context->n_runs--;
                run->context = NULL;
        }
        if (done)
                done(run, error ? NULL : &result, error, userdata);
        context_run_free(run);
}

static void context_fail_runs(Context *c, SandboxErrorCode code, const char *message) {
        while (c->runs) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                sandbox_error_set(&error, code, "%s", message);
                context_run_finish(c->runs, 0, NULL, &error);
        }
}

static void context_notify_ready(Context *c, const SandboxError *error) {
        while (c->ready_waiters) {
                ReadyWaiter *w = c->ready_waiters;
                c->ready_waiters = w->next;
                w->cb(c, error, w->userdata);
                free(w);
        }
}

/* ---- the driver's stdin ---- */

static int on_writable(sd_event_source *source, int fd, uint32_t revents, void *userdata);

static void context_flush_input(Context *c) {
        while (c->inbuf_done < c->inbuf_size) {
                ssize_t n = write(c->in_fd, c->inbuf + c->inbuf_done, c->inbuf_size - c->inbuf_done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                if (!c->in_source &&
                                    sd_event_add_io(context_event(c), &c->in_source, c->in_fd, EPOLLOUT, on_writable,
                                                    c) < 0)
                                        log_sandbox(c->sandbox, LOG_WARNING, 0,
                                                    "Context %s: cannot wait to write its cell.", c->id);
                                return;
                        }
                        /* The driver is gone: its exit is reported apart. */
                        break;
                }
                c->inbuf_done += (size_t) n;
        }
        c->in_source = sd_event_source_disable_unref(c->in_source);
        c->inbuf = mfree(c->inbuf);
        c->inbuf_size = c->inbuf_done = 0;
}

static int on_writable(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        context_flush_input(userdata);
        return 0;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata);

static int context_arm_timer(Context *c, uint64_t usec) {
        c->timer_left_usec = 0;
        if (!c->timer)
                return sd_event_add_time_relative(context_event(c), &c->timer, CLOCK_MONOTONIC, usec, 1000, on_timer,
                                                  c);
        if (sd_event_source_set_time_relative(c->timer, usec) < 0)
                return -EIO;
        return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static void context_disarm_timer(Context *c) {
        c->timer_left_usec = 0;
        if (c->timer)
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
}

/* The first run waiting goes to the driver, if it is idle. */
static void context_start_next(Context *c) {
        _cleanup_json_ json_object *req = NULL;
        ContextRun *run = c->runs;
        const char *s;

        if (c->state != CONTEXT_IDLE || !run)
                return;
        req = json_object_new_object();
        if (!req || json_add(req, "code", json_object_new_string(run->code)) < 0 ||
            !(s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN))) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "Out of memory for the cell.");
                context_run_finish(run, 0, NULL, &error);
                return;
        }
        if (asprintf(&c->inbuf, "%s\n", s) < 0) {
                c->inbuf = NULL;
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "Out of memory for the cell.");
                context_run_finish(run, 0, NULL, &error);
                return;
        }
        c->inbuf_size = strlen(c->inbuf);
        c->inbuf_done = 0;
        c->state = CONTEXT_BUSY;
        run->started = now_usec(CLOCK_MONOTONIC);
        free(run->code);  /* sent: not needed any more */
        run->code = NULL;
        if (context_arm_timer(c, run->timeout_usec) < 0)
                log_sandbox(c->sandbox, LOG_WARNING, 0, "Context %s: cannot time its cell.", c->id);
        context_flush_input(c);
}

/* ---- the driver's events ---- */

static bool json_is_string_array(json_object *a) {
        if (!json_object_is_type(a, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(a); i++)
                if (!json_object_is_type(json_object_array_get_idx(a, i), json_type_string))
                        return false;
        return true;
}

static const char *json_get_string(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
                json_object_get_string(v) : NULL;
}

/* The event the caller gets, built from the driver's line by what it should say: only the
 * fields of the documented shape, each of its type. NULL if it is not one. */
static json_object *context_event_from_driver(json_object *o, const char *type) {
        _cleanup_json_ json_object *e = json_object_new_object();
        json_object *v;

        if (!e || json_add(e, "type", json_object_new_string(type)) < 0)
                return NULL;
        if (streq(type, "stdout") || streq(type, "stderr")) {
                const char *text = json_get_string(o, "text");
                if (!text || json_add(e, "text", json_object_new_string(text)) < 0)
                        return NULL;
        } else if (streq(type, "result")) {
                _cleanup_json_ json_object *data = json_object_new_object();
                if (!data || !json_object_object_get_ex(o, "data", &v) || !json_object_is_type(v, json_type_object))
                        return NULL;
                json_object_object_foreach(v, mime, value) {
                        /* A MIME type names a representation; its value is text (base64 for
                         * binary ones), or JSON for a JSON type. */
                        if (strlen(mime) > 255 || !strchr(mime, '/'))
                                continue;
                        if (!json_object_is_type(value, json_type_string) && !strstr(mime, "json"))
                                continue;
                        if (json_add(data, mime, json_object_get(value)) < 0)
                                return NULL;
                }
                if (json_add(e, "data", TAKE_PTR(data)) < 0 ||
                    json_add(e, "isMainResult",
                             json_object_new_boolean(json_object_object_get_ex(o, "isMainResult", &v) &&
                                                     json_object_get_boolean(v))) < 0)
                        return NULL;
        } else if (streq(type, "error")) {
                const char *name = json_get_string(o, "name"), *value = json_get_string(o, "value");
                if (!name || !value || !json_object_object_get_ex(o, "traceback", &v) || !json_is_string_array(v))
                        return NULL;
                if (json_add(e, "name", json_object_new_string(name)) < 0 ||
                    json_add(e, "value", json_object_new_string(value)) < 0 ||
                    json_add(e, "traceback", json_object_get(v)) < 0)
                        return NULL;
        } else
                return NULL;
        return TAKE_PTR(e);
}

/* An event of the running cell: counted, passed on within its OutputMax. */
static void context_run_event(ContextRun *run, json_object *event, size_t bytes) {
        run->output_bytes += bytes;
        if (run->output_bytes > run->output_max) {
                run->truncated = true;
                return;
        }
        if (streq(json_get_string(event, "type"), "error")) {
                json_object_put(run->error);
                run->error = json_object_get(event);
        }
        if (run->on_event)
                run->on_event(run, event, run->userdata);
}

static void context_on_ready(Context *c, json_object *o) {
        const char *version = json_get_string(o, "version");

        if (c->state != CONTEXT_STARTING)
                return;
        free(c->version);
        c->version = version ? strdup(version) : NULL;
        c->state = CONTEXT_IDLE;
        context_disarm_timer(c);
        log_sandbox(c->sandbox, LOG_DEBUG, 0, "Context %s (%s) is ready.", c->id,
                    context_language_to_string(c->language));
        context_notify_ready(c, NULL);
        context_start_next(c);
}

static void context_on_end(Context *c, json_object *o) {
        ContextRun *run = c->runs;
        json_object *v;
        uint64_t count = 0;

        if (c->state != CONTEXT_BUSY || !run)
                return;
        if (json_object_object_get_ex(o, "executionCount", &v) && json_object_is_type(v, json_type_int))
                count = (uint64_t) MAX(json_object_get_int64(v), 0);
        c->execution_count = count;
        c->state = CONTEXT_IDLE;
        context_disarm_timer(c);
        context_run_finish(run, count, json_get_string(o, "status"), NULL);
        context_start_next(c);
}

static void context_on_line(Context *c, const char *line, size_t size) {
        _cleanup_json_ json_object *o = NULL, *event = NULL;
        const char *type;

        o = json_tokener_parse(line);
        type = o && json_object_is_type(o, json_type_object) ? json_get_string(o, "type") : NULL;
        if (type && streq(type, "ready"))
                return context_on_ready(c, o);
        if (type && streq(type, "end"))
                return context_on_end(c, o);
        if (type && streq(type, "lost")) {
                const char *reason = json_get_string(o, "reason");
                if (reason && !c->lost_reason)
                        c->lost_reason = strndup(reason, 1024);
                return;
        }
        if (c->state != CONTEXT_BUSY || !c->runs)
                return;
        event = type ? context_event_from_driver(o, type) : NULL;
        if (!event) {
                /* Not the driver's: something the cell wrote to the channel itself (a child
                 * process of Node's, say) is its output. */
                _cleanup_free_ char *text = NULL;
                json_object_put(event);
                event = json_object_new_object();
                if (asprintf(&text, "%.*s\n", (int) size, line) < 0)
                        text = NULL;
                if (!text || !event || json_add(event, "type", json_object_new_string("stdout")) < 0 ||
                    json_add(event, "text", json_object_new_string(text)) < 0)
                        return;
        }
        context_run_event(c->runs, event, size + 1);
}

static int on_driver_output(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Context *c = userdata;
        char buf[CONTEXT_READ_CHUNK];
        ssize_t n;

        for (unsigned i = 0; i < 64; i++) {
                n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        /* The driver closed it: its exit follows (on_driver_exit()). */
                        c->out_source = sd_event_source_disable_unref(c->out_source);
                        c->out_fd = safe_close(c->out_fd);
                        return 0;
                }
                for (char *p = buf, *end = buf + n; p < end;) {
                        char *nl = memchr(p, '\n', end - p);
                        size_t take = (nl ? nl : end) - p;

                        if (c->discarding || c->line_size + take > CONTEXT_LINE_MAX) {
                                /* Too long to be anything a cell may give: dropped, said. */
                                if (!c->discarding && c->state == CONTEXT_BUSY && c->runs) {
                                        c->runs->truncated = true;
                                        c->runs->output_bytes += c->line_size;
                                }
                                if (c->state == CONTEXT_BUSY && c->runs)
                                        c->runs->output_bytes += take;
                                c->discarding = !nl;
                                c->line = mfree(c->line);
                                c->line_size = 0;
                        } else {
                                char *l = realloc(c->line, c->line_size + take + 1);
                                if (!l) {
                                        log_sandbox(c->sandbox, LOG_ERR, -ENOMEM, "Context %s: %m", c->id);
                                        return 0;
                                }
                                memcpy(l + c->line_size, p, take);
                                c->line = l;
                                c->line_size += take;
                                c->line[c->line_size] = 0;
                                if (nl) {
                                        _cleanup_free_ char *line = TAKE_PTR(c->line);
                                        size_t size = c->line_size;
                                        c->line_size = 0;
                                        context_on_line(c, line, size);
                                        /* The context may have been lost meanwhile; its
                                         * descriptor is then closed. */
                                        if (c->out_fd != fd)
                                                return 0;
                                }
                        }
                        p += take + (nl ? 1 : 0);
                }
        }
        return 0;
}

/* ---- the driver's process ---- */

static void context_close_driver(Context *c) {
        c->in_source = sd_event_source_disable_unref(c->in_source);
        c->out_source = sd_event_source_disable_unref(c->out_source);
        c->in_fd = safe_close(c->in_fd);
        c->out_fd = safe_close(c->out_fd);
        c->inbuf = mfree(c->inbuf);
        c->inbuf_size = c->inbuf_done = 0;
        c->line = mfree(c->line);
        c->line_size = 0;
        c->discarding = false;
        if (c->process) {
                c->process->context = NULL;  /* its wait frees it */
                c->process = NULL;
        }
}

/* Its kernel ended: lost, said why, to the cell that ran and to whoever waits. */
static void context_lose(Context *c, const char *why) {
        _cleanup_free_ char *reason = NULL;
        bool starting = c->state == CONTEXT_STARTING;

        if (!c->lost_reason || c->killing || c->lost_for_memory) {
                free(c->lost_reason);
                c->lost_reason = strdup(why);
        }
        c->state = CONTEXT_LOST;
        context_disarm_timer(c);
        context_close_driver(c);
        log_sandbox(c->sandbox, LOG_INFO, 0, "Context %s lost: %s", c->id, c->lost_reason ?: why);

        reason = strdup(c->lost_reason ?: why);
        if (starting) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                sandbox_error_set(&error, SANDBOX_ERR_CONTEXT_LOST, "The kernel of context %s did not start: %s",
                                  c->id, reason ?: why);
                context_notify_ready(c, &error);
        }
        if (c->runs) {
                _cleanup_free_ char *message = NULL;
                if (asprintf(&message, "Context %s is lost: %s. RestartContext gives a fresh one (its variables are gone).",
                             c->id, reason ?: why) < 0)
                        message = NULL;
                context_fail_runs(c, SANDBOX_ERR_CONTEXT_LOST, message ?: "The context is lost.");
        }
}

static void on_driver_exit(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        ContextProcess *p = userdata;
        Context *c = p->context;
        _cleanup_free_ char *why = NULL;

        free(p);
        if (!c)
                return;
        c->process = NULL;
        /* What it wrote before it ended (its "lost", its last events) is read first. */
        if (c->out_fd >= 0)
                (void) on_driver_output(NULL, c->out_fd, 0, c);
        if (c->state == CONTEXT_LOST)
                return;
        if (error) {
                /* The sandbox stopped (hibernated, destroyed) or its agent is gone. */
                if (asprintf(&why, "the sandbox's processes ended (%s)", sandbox_error_message(error)) < 0)
                        why = NULL;
        } else if (result->oom_killed) {
                c->lost_for_memory = true;
                why = strdup("its kernel was killed for lack of memory (the sandbox's MemoryMax)");
        } else if (c->killing)
                why = strdup("its kernel was killed: the cell did not stop after its interrupt");
        else {
                /* Last lines of the driver's stderr: why a kernel would not start. */
                size_t n = MIN(result->err.size, (size_t) 512);
                const char *tail = result->err.data ? result->err.data + result->err.size - n : "";
                if (asprintf(&why, "its process ended (%s %i)%s%.*s", result->signal > 0 ? "signal" : "status",
                             result->signal > 0 ? result->signal : result->exit_code,
                             n > 0 && !c->lost_reason ? "; it wrote: " : "", c->lost_reason ? 0 : (int) n, tail) < 0)
                        why = NULL;
        }
        context_lose(c, why ?: "its process ended");
}

static int context_spawn(Context *c, SandboxError *error) {
        _cleanup_(exec_config_done) ExecConfig x = {};
        _cleanup_close_pair_ int in[2] = { -EBADF, -EBADF }, out[2] = { -EBADF, -EBADF };
        ContextProcess *p;
        Exec *e;
        int r;

        exec_config_init(&x);
        r = strv_extend(&x.argv, c->language == CONTEXT_LANGUAGE_PYTHON ? "python3" : "node");
        if (r >= 0)
                r = strv_extend(&x.argv, c->language == CONTEXT_LANGUAGE_PYTHON ? "-c" : "-e");
        if (r >= 0)
                r = strv_extend(&x.argv, c->language == CONTEXT_LANGUAGE_PYTHON ? context_driver_py : context_driver_js);
        if (r < 0)
                return r;
        if (c->environment) {
                x.environment = strv_copy(c->environment);
                if (!x.environment)
                        return -ENOMEM;
        }
        if (c->working_directory) {
                x.working_directory = strdup(c->working_directory);
                if (!x.working_directory)
                        return -ENOMEM;
        }
        x.output_max = CONTEXT_STDERR_KEEP;  /* its stderr, for why it would not start */
        x.caller = c->caller;

        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || fcntl(in[1], F_SETFL, O_NONBLOCK) < 0 ||
            fcntl(out[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        x.stdin_fd = TAKE_FD(in[0]);
        x.stdout_fd = TAKE_FD(out[1]);
        r = sandbox_start_process(c->sandbox, &x, &c->process_id, error);
        if (r < 0)
                return r;
        e = sandbox_find_process(c->sandbox, c->process_id);
        if (!e)
                return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_FAILED, "The context's process is gone.");

        p = calloc(1, sizeof(ContextProcess));
        if (!p)
                return -ENOMEM;
        r = exec_wait(e, 0, on_driver_exit, p, error);
        if (r < 0) {
                free(p);
                return r;
        }
        /* Once it is waited for, its end is the context's (on_driver_exit()). */
        p->context = c;
        c->process = p;
        c->in_fd = TAKE_FD(in[1]);
        c->out_fd = TAKE_FD(out[0]);
        c->state = CONTEXT_STARTING;
        c->killing = false;
        c->lost_for_memory = false;
        c->lost_reason = mfree(c->lost_reason);
        c->execution_count = 0;
        r = sd_event_add_io(context_event(c), &c->out_source, c->out_fd, EPOLLIN, on_driver_output, c);
        if (r >= 0)
                r = context_arm_timer(c, CONTEXT_START_TIMEOUT_USEC);
        if (r < 0) {
                (void) exec_signal(e, SIGKILL, NULL);
                context_close_driver(c);
                return r;
        }
        return 0;
}

static void context_kill(Context *c) {
        Exec *e = c->process ? sandbox_find_process(c->sandbox, c->process_id) : NULL;

        if (e && exec_is_running(e))
                (void) exec_signal(e, SIGKILL, NULL);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Context *c = userdata;

        switch (c->state) {
        case CONTEXT_STARTING:
                free(c->lost_reason);
                c->lost_reason = strdup("its kernel did not start in time");
                context_kill(c);
                context_lose(c, "its kernel did not start in time");
                break;
        case CONTEXT_BUSY:
                if (c->runs && !c->runs->interrupted) {
                        c->runs->timed_out = true;
                        (void) context_interrupt(c, NULL);
                        break;
                }
                /* The grace after the interrupt is over. */
                c->killing = true;
                context_kill(c);
                break;
        default:
                break;
        }
        return 0;
}

/* ---- the API ---- */

static Context *context_free(Context *c) {
        if (!c)
                return NULL;
        context_disarm_timer(c);
        c->timer = sd_event_source_disable_unref(c->timer);
        if (c->sandbox) {
                LIST_REMOVE(c->sandbox->contexts, c);
                c->sandbox->n_contexts--;
        }
        context_close_driver(c);
        free(c->working_directory);
        strv_free(c->environment);
        free(c->version);
        free(c->lost_reason);
        return mfree(c);
}

static int context_check_options(const ExecConfig *o, bool create, SandboxError *error) {
        if (!o)
                return 0;
        if (o->stdin_data || o->stdin_fd >= 0 || o->stdout_fd >= 0 || o->stderr_fd >= 0 || o->tty)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "A context's kernel has no standard input or output of the caller's.");
        if (create && o->timeout_set)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "CreateContext takes Environment and WorkingDirectory; Timeout is RunCode's.");
        if (!create && (o->environment || o->working_directory))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "RunCode takes Timeout and OutputMax; Environment and WorkingDirectory "
                                         "are the context's (CreateContext).");
        return 0;
}

static int context_new(Sandbox *s, ContextLanguage language, ExecConfig *options, uid_t caller, bool is_default,
                       Context **ret, SandboxError *error) {
        Context *c, *other;
        uint8_t b[CONTEXT_ID_LEN / 2];
        int r;

        if (s->state != SANDBOX_RUNNING)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is not running.", s->id);
        if (s->n_contexts >= CONTEXTS_PER_SANDBOX_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "Sandbox %s has %u contexts, the most it may have.",
                                         s->id, CONTEXTS_PER_SANDBOX_MAX);
        r = context_check_options(options, true, error);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(Context));
        if (!c)
                return -ENOMEM;
        c->in_fd = c->out_fd = -EBADF;
        c->language = language;
        c->caller = caller;
        c->is_default = is_default;
        c->created_at = now_usec(CLOCK_REALTIME);
        if (options) {
                c->working_directory = TAKE_PTR(options->working_directory);
                c->environment = TAKE_PTR(options->environment);
        }
        do {
                if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b)) {
                        context_free(c);
                        return -EIO;
                }
                for (size_t i = 0; i < sizeof(b); i++)
                        snprintf(c->id + 2 * i, 3, "%02x", b[i]);
        } while (sandbox_get_context(s, c->id, &other, NULL) >= 0);
        c->sandbox = s;
        LIST_PREPEND(s->contexts, c);
        s->n_contexts++;

        r = context_spawn(c, error);
        if (r < 0) {
                context_free(c);
                return r;
        }
        log_sandbox(s, LOG_DEBUG, 0, "Context %s (%s) started.", c->id, context_language_to_string(language));
        /* Its id in the sandbox's state: listed as lost after a restart of sandboxd. */
        if (s->saved)
                sandbox_save(s);
        *ret = c;
        return 0;
}

static int context_add_ready_waiter(Context *c, context_ready_t cb, void *userdata) {
        ReadyWaiter *w, **tail;

        if (!cb)
                return 0;
        w = calloc(1, sizeof(ReadyWaiter));
        if (!w)
                return -ENOMEM;
        *w = (ReadyWaiter) { .cb = cb, .userdata = userdata };
        for (tail = &c->ready_waiters; *tail; tail = &(*tail)->next)
                ;
        *tail = w;
        return 0;
}

int sandbox_create_context(Sandbox *s, const char *language, ExecConfig *options, uid_t caller, context_ready_t cb,
                           void *userdata, Context **ret, SandboxError *error) {
        ContextLanguage l = context_language_from_string(language);
        Context *c;
        int r;

        if (l < 0)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Unknown language '%.64s' (python, javascript).", language);
        r = context_new(s, l, options, caller, false, &c, error);
        if (r < 0)
                return r;
        r = context_add_ready_waiter(c, cb, userdata);
        if (r < 0) {
                context_remove(c);
                return r;
        }
        if (ret)
                *ret = c;
        return 0;
}

int sandbox_get_context(Sandbox *s, const char *id, Context **ret, SandboxError *error) {
        for (Context *c = s->contexts; c; c = c->next)
                if (streq(c->id, id ?: "")) {
                        *ret = c;
                        return 0;
                }
        return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_CONTEXT, "No context %.64s in sandbox %s.", id ?: "",
                                 s->id);
}

int sandbox_default_context(Sandbox *s, const char *language, uid_t caller, Context **ret, SandboxError *error) {
        ContextLanguage l = context_language_from_string(language);

        if (l < 0)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Unknown language '%.64s' (python, javascript).", language);
        for (Context *c = s->contexts; c; c = c->next)
                if (c->is_default && c->language == l) {
                        /* Its loss was told to the cell that ran then; the next one, that
                         * names no context, gets a fresh kernel. */
                        if (c->state == CONTEXT_LOST) {
                                int r = context_restart(c, NULL, NULL, error);
                                if (r < 0)
                                        return r;
                        }
                        *ret = c;
                        return 0;
                }
        return context_new(s, l, NULL, caller, true, ret, error);
}

Context *sandbox_next_context(Sandbox *s, Context *prev) {
        /* The list is newest first: walk it from its tail. */
        Context *c;

        if (prev)
                return prev->prev;
        c = s->contexts;
        while (c && c->next)
                c = c->next;
        return c;
}

void sandbox_contexts_free(Sandbox *s) {
        while (s->contexts) {
                Context *c = s->contexts;
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                sandbox_error_set(&error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is gone, and context %s with it.",
                                  s->id, c->id);
                context_notify_ready(c, &error);
                while (c->runs)
                        context_run_finish(c->runs, 0, NULL, &error);
                context_free(c);
        }
}

void sandbox_contexts_prestart(Sandbox *s) {
        const Template *t = template_set_find(&s->manager->templates, s->template_name);

        if (!t || s->config.ephemeral)
                return;
        for (char **l = t->contexts; l && *l; l++) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                Context *c;
                if (sandbox_default_context(s, *l, s->owner, &c, &error) < 0)
                        log_sandbox(s, LOG_WARNING, 0, "Sandbox %s: its %s context did not start: %s", s->id, *l,
                                    sandbox_error_message(&error));
        }
}

void sandbox_contexts_suspend(Sandbox *s) {
        for (Context *c = s->contexts; c; c = c->next) {
                uint64_t t, now;

                if (!c->timer || sd_event_source_get_enabled(c->timer, NULL) <= 0 ||
                    sd_event_source_get_time(c->timer, &t) < 0 ||
                    sd_event_now(context_event(c), CLOCK_MONOTONIC, &now) < 0)
                        continue;
                c->timer_left_usec = t > now ? t - now : 1;
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        }
}

void sandbox_contexts_resume(Sandbox *s) {
        for (Context *c = s->contexts; c; c = c->next)
                if (c->timer_left_usec > 0)
                        (void) context_arm_timer(c, c->timer_left_usec);
}

int context_run(Context *c, const char *code, const ExecConfig *options, context_event_t on_event,
                context_done_t on_done, void *userdata, ContextRun **ret, SandboxError *error) {
        ContextRun *run, *tail;
        int r;

        r = context_check_options(options, false, error);
        if (r < 0)
                return r;
        if (!code || strlen(code) > CONTEXT_CODE_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "A cell has at most %u bytes of code.",
                                         CONTEXT_CODE_MAX);
        if (c->state == CONTEXT_LOST)
                return sandbox_error_set(error, SANDBOX_ERR_CONTEXT_LOST,
                                         "Context %s is lost: %s. RestartContext gives a fresh one.", c->id,
                                         context_get_lost_reason(c));
        if (c->sandbox->state != SANDBOX_RUNNING && c->sandbox->state != SANDBOX_PAUSED)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is not running.", c->sandbox->id);
        if (c->n_runs >= CONTEXT_QUEUE_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "Context %s has %u cells waiting, the most it takes.",
                                         c->id, CONTEXT_QUEUE_MAX);

        run = calloc(1, sizeof(ContextRun));
        if (!run)
                return -ENOMEM;
        run->code = strdup(code);
        if (!run->code) {
                free(run);
                return -ENOMEM;
        }
        run->timeout_usec = options ? options->timeout_usec : EXEC_TIMEOUT_DEFAULT_SEC * 1000000ULL;
        run->output_max = options && options->output_max_set ? options->output_max : CONTEXT_OUTPUT_DEFAULT;
        run->on_event = on_event;
        run->on_done = on_done;
        run->userdata = userdata;
        run->context = c;
        /* Appended: cells run in the order given. */
        for (tail = c->runs; tail && tail->next; tail = tail->next)
                ;
        if (tail) {
                tail->next = run;
                run->prev = tail;
        } else
                c->runs = run;
        c->n_runs++;
        sandbox_set_use(c->sandbox, SANDBOX_USED);
        if (ret)
                *ret = run;
        context_start_next(c);
        return 0;
}

int context_interrupt(Context *c, SandboxError *error) {
        Exec *e;
        int r;

        if (c->state != CONTEXT_BUSY || !c->runs || c->runs->interrupted)
                return 0;
        e = sandbox_find_process(c->sandbox, c->process_id);
        if (!e || !exec_is_running(e))
                return 0;
        /* The driver passes it on as jupyter_client's interrupt (SIGINT to the kernel's
         * process group); Node's vm breaks the cell on it. */
        r = exec_signal(e, SIGINT, error);
        if (r < 0)
                return r;
        c->runs->interrupted = true;
        return context_arm_timer(c, CONTEXT_INTERRUPT_GRACE_USEC);
}

int context_restart(Context *c, context_ready_t cb, void *userdata, SandboxError *error) {
        int r;

        if (c->sandbox->state != SANDBOX_RUNNING)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is not running.", c->sandbox->id);
        if (c->state != CONTEXT_LOST) {
                context_kill(c);
                context_close_driver(c);
                context_disarm_timer(c);
                c->state = CONTEXT_LOST;
                {
                        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
                        sandbox_error_set(&e, SANDBOX_ERR_CONTEXT_LOST, "Context %s was restarted.", c->id);
                        context_notify_ready(c, &e);
                }
                context_fail_runs(c, SANDBOX_ERR_CONTEXT_LOST, "The context was restarted before the cell ended.");
        }
        r = context_spawn(c, error);
        if (r < 0)
                return r;
        return context_add_ready_waiter(c, cb, userdata);
}

void context_remove(Context *c) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        sandbox_error_set(&error, SANDBOX_ERR_NO_SUCH_CONTEXT, "Context %s was removed.", c->id);
        /* Closing its stdin ends an idle driver; a busy one is killed. */
        if (c->state == CONTEXT_BUSY || c->state == CONTEXT_STARTING)
                context_kill(c);
        context_close_driver(c);
        context_notify_ready(c, &error);
        while (c->runs)
                context_run_finish(c->runs, 0, NULL, &error);
        Sandbox *s = c->sandbox;
        context_free(c);
        if (s->saved)
                sandbox_save(s);
}

/* ---- across a hibernation, a restart of sandboxd ---- */

json_object *sandbox_contexts_to_json(Sandbox *s) {
        json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (Context *c = sandbox_next_context(s, NULL); c; c = sandbox_next_context(s, c)) {
                json_object *o = json_object_new_object();

                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return json_object_put(a), NULL;
                }
                if (json_add(o, "id", json_object_new_string(c->id)) < 0 ||
                    json_add(o, "language", json_object_new_string(context_language_to_string(c->language))) < 0 ||
                    (c->working_directory &&
                     json_add(o, "cwd", json_object_new_string(c->working_directory)) < 0) ||
                    json_add(o, "default", json_object_new_boolean(c->is_default)) < 0 ||
                    json_add(o, "caller", json_object_new_int64(c->caller)) < 0 ||
                    json_add(o, "created", json_object_new_int64((int64_t) c->created_at)) < 0)
                        return json_object_put(a), NULL;
        }
        return a;
}

void sandbox_contexts_add_lost(Sandbox *s, json_object *records, const char *reason) {
        if (!records || !context_records_valid(records))
                return;
        for (size_t i = 0; i < json_object_array_length(records); i++) {
                json_object *o = json_object_array_get_idx(records, i), *v;
                const char *id = json_object_get_string(json_object_object_get(o, "id"));
                ContextLanguage l = context_language_from_string(
                        json_object_get_string(json_object_object_get(o, "language")));
                bool is_default = json_object_get_boolean(json_object_object_get(o, "default"));
                Context *c, *other;

                if (l < 0 || sandbox_get_context(s, id, &other, NULL) >= 0 ||
                    s->n_contexts >= CONTEXTS_PER_SANDBOX_MAX)
                        continue;
                /* The template's default context of that language started anew already. */
                if (is_default)
                        for (other = s->contexts; other; other = other->next)
                                if (other->is_default && other->language == l)
                                        break;
                if (is_default && other)
                        continue;
                c = calloc(1, sizeof(Context));
                if (!c)
                        return;
                c->in_fd = c->out_fd = -EBADF;
                c->language = l;
                c->state = CONTEXT_LOST;
                c->is_default = is_default;
                c->caller = (uid_t) json_object_get_int64(json_object_object_get(o, "caller"));
                c->created_at = (uint64_t) json_object_get_int64(json_object_object_get(o, "created"));
                strcpy(c->id, id);
                c->lost_reason = strdup(reason);
                if (json_object_object_get_ex(o, "cwd", &v))
                        c->working_directory = strdup(json_object_get_string(v));
                if (!c->lost_reason || (json_object_object_get_ex(o, "cwd", NULL) && !c->working_directory)) {
                        context_free(c);
                        return;
                }
                c->sandbox = s;
                /* The list is newest first; records are oldest first. */
                LIST_PREPEND(s->contexts, c);
                s->n_contexts++;
                log_sandbox(s, LOG_INFO, 0, "Context %s lost: %s", c->id, reason);
        }
}
