/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* GET /api/v1/sessions/{id}/terminal: a shell on a pseudo-terminal of the sandbox, over a
 * WebSocket (docs/TERMINALS.md has the protocol). sandboxd runs it as a background process
 * with a TTY (Start); its output comes from Follow, paced by the WebSocket's client; the
 * client's input goes to WriteStdin, one call at a time and in order, paced by sandboxd;
 * a resize is ResizeTerminal; a client that goes away hangs the terminal up (SIGHUP, then
 * SIGKILL). Two varlink connections of the session's own, acting for the token's tenant:
 * Follow holds one for as long as it streams. */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "parse-util.h"

#define IFACE "io.sandboxd.Sandbox."
#define TERMINAL_PROTOCOL "sandboxd.terminal.v1"
/* Output queued for the client beyond which Follow waits (and so the process). */
#define TERMINAL_OUTPUT_HIGH (256U * 1024U)
#define TERMINAL_OUTPUT_LOW (64U * 1024U)
/* Input not yet taken by sandboxd beyond which the client's messages wait. */
#define TERMINAL_INPUT_HIGH (256U * 1024U)
#define TERMINAL_BUSY_RETRY_USEC (20U * 1000U)
/* After the hang-up, how long the shell has before SIGKILL. */
#define TERMINAL_HANGUP_GRACE_USEC (5U * 1000U * 1000U)
/* A shell: bash where the template has it, else sh; both interactive on a terminal. */
#define TERMINAL_SHELL "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"

typedef struct InputChunk {
        struct InputChunk *next;
        size_t size;
        uint8_t data[];
} InputChunk;

typedef struct Terminal {
        HttpServer *server;
        char *tenant;
        char *sandbox_id;
        uint64_t process;
        HttpWebSocket *ws;              /* NULL once closed */
        VarlinkClient *follow;          /* NULL once Follow ended */
        VarlinkClient *control;
        InputChunk *input, *input_tail; /* in order; the head is in flight or retried */
        size_t input_bytes;
        bool writing;                   /* a WriteStdin is in flight */
        bool exited;                    /* Follow's last reply came */
        unsigned control_calls;         /* in flight on control */
        sd_event_source *timer;         /* Busy's retry, then the hang-up's SIGKILL */
        bool hung_up;
        struct Terminal *prev, *next;   /* all sessions, freed at exit if still there */
} Terminal;

static Terminal *terminals;

static void terminal_free(Terminal *t) {
        LIST_REMOVE(terminals, t);
        while (t->input) {
                InputChunk *c = t->input;
                t->input = c->next;
                free(c);
        }
        sd_event_source_disable_unref(t->timer);
        varlink_client_unref(t->follow);
        varlink_client_unref(t->control);
        free(t->tenant);
        free(t->sandbox_id);
        free(t);
}

/* Over once the client is gone and nothing is left to tell sandboxd. */
static void terminal_maybe_free(Terminal *t) {
        if (!t->ws && t->control_calls == 0 && !t->timer)
                terminal_free(t);
}

static int on_acting(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        return 0;       /* a refusal shows in the calls that follow, which are refused too */
}

static int terminal_connect(Terminal *t, VarlinkClient **ret) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        int r;

        r = varlink_client_connect_address(&c, http_server_config(t->server)->varlink_address);
        if (r >= 0)
                r = varlink_client_attach_event(c, http_server_event(t->server), 0);
        if (r < 0)
                return r;
        /* Follow streams for as long as the shell runs. */
        varlink_client_set_timeout(c, 0);
        if (t->tenant) {
                _cleanup_json_ json_object *p = json_object_new_object();
                if (!p || json_add(p, "tenant", json_object_new_string(t->tenant)) < 0)
                        return -ENOMEM;
                r = varlink_client_call_async(c, IFACE "ActForTenant", p, 0, on_acting, NULL);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static json_object *terminal_params(Terminal *t) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "id", json_object_new_string(t->sandbox_id)) < 0 ||
            json_add(p, "process", json_object_new_uint64(t->process)) < 0)
                return NULL;
        return TAKE_PTR(p);
}

static void terminal_fail(Terminal *t, const char *why) {
        if (t->ws)
                http_websocket_close(t->ws, 1011, why);
}

/* ---- control: input, resize, hang-up ---- */

static int on_control_reply(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        Terminal *t = userdata;

        t->control_calls--;
        terminal_maybe_free(t);
        return 0;
}

static int terminal_control(Terminal *t, const char *method, json_object *extra_key_value_owner, const char *key,
                            varlink_reply_t callback) {
        _cleanup_json_ json_object *p = terminal_params(t), *v = extra_key_value_owner;
        int r;

        if (!p || (key && json_add(p, key, TAKE_PTR(v)) < 0))
                return -ENOMEM;
        r = varlink_client_call_async(t->control, method, p, 0, callback, t);
        if (r >= 0)
                t->control_calls++;
        return r;
}

static void terminal_write_next(Terminal *t);

static int on_busy_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Terminal *t = userdata;

        t->timer = sd_event_source_disable_unref(t->timer);
        terminal_write_next(t);
        terminal_maybe_free(t);
        return 0;
}

static int on_written(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        Terminal *t = userdata;
        InputChunk *done;

        t->control_calls--;
        t->writing = false;
        if (error && streq(error, IFACE "Busy") && !t->exited) {
                /* sandboxd holds 1 MiB the shell has not read: the same chunk, shortly. */
                if (sd_event_add_time_relative(http_server_event(t->server), &t->timer, CLOCK_MONOTONIC,
                                               TERMINAL_BUSY_RETRY_USEC, 0, on_busy_retry, t) < 0)
                        terminal_fail(t, "cannot wait for the shell to read");
                return 0;
        }
        done = t->input;
        t->input = done->next;
        if (!t->input)
                t->input_tail = NULL;
        t->input_bytes -= done->size;
        free(done);
        if (error && !t->exited)
                terminal_fail(t, "the shell's input is closed");
        if (t->ws && t->input_bytes < TERMINAL_INPUT_HIGH)
                http_websocket_pause(t->ws, false);
        terminal_write_next(t);
        terminal_maybe_free(t);
        return 0;
}

static void terminal_write_next(Terminal *t) {
        if (t->writing || !t->input || t->timer || t->exited)
                return;
        if (terminal_control(t, IFACE "WriteStdin", json_object_new_base64(t->input->data, t->input->size), "data",
                             on_written) < 0) {
                terminal_fail(t, "cannot reach sandboxd");
                return;
        }
        t->writing = true;
}

static int terminal_input(Terminal *t, const void *data, size_t size) {
        InputChunk *c;

        if (size == 0)
                return 0;
        c = malloc(sizeof(InputChunk) + size);
        if (!c)
                return -ENOMEM;
        c->next = NULL;
        c->size = size;
        memcpy(c->data, data, size);
        if (t->input_tail)
                t->input_tail->next = c;
        else
                t->input = c;
        t->input_tail = c;
        t->input_bytes += size;
        if (t->input_bytes >= TERMINAL_INPUT_HIGH)
                http_websocket_pause(t->ws, true);
        terminal_write_next(t);
        return 0;
}

/* A text message: {"type": "resize", "rows": R, "cols": C} or {"type": "input", "data": S}. */
static int terminal_command(Terminal *t, const uint8_t *text, size_t size) {
        _cleanup_json_ json_object *m = NULL;
        _cleanup_free_ char *copy = malloc(size + 1);
        json_object *type, *v;
        int64_t rows, cols;

        if (!copy)
                return -ENOMEM;
        /* The reader wants a NUL after the text (json_parse_strict()); the message has none. */
        memcpy(copy, text, size);
        copy[size] = '\0';
        if (memchr(text, 0, size) || json_parse_strict(copy, size, HTTP_JSON_DEPTH_MAX, &m) < 0 ||
            !json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "type", &type))
                return -EINVAL;
        if (streq(json_object_get_string(type), "input") && json_object_object_get_ex(m, "data", &v) &&
            json_object_is_type(v, json_type_string))
                return terminal_input(t, json_object_get_string(v), (size_t) json_object_get_string_len(v));
        if (!streq(json_object_get_string(type), "resize") ||
            !json_object_object_get_ex(m, "rows", &v) || !json_is_integer(v, &rows) ||
            !json_object_object_get_ex(m, "cols", &v) || !json_is_integer(v, &cols))
                return -EINVAL;
        /* Its bounds are sandboxd's (InvalidOption, which the shell survives). */
        if (rows < 0 || cols < 0 || rows > UINT32_MAX || cols > UINT32_MAX)
                return -EINVAL;
        _cleanup_json_ json_object *size_p = terminal_params(t);
        if (!size_p || json_add(size_p, "rows", json_object_new_int64(rows)) < 0 ||
            json_add(size_p, "columns", json_object_new_int64(cols)) < 0)
                return -ENOMEM;
        int r = varlink_client_call_async(t->control, IFACE "ResizeTerminal", size_p, 0, on_control_reply, t);
        if (r >= 0)
                t->control_calls++;
        return r;
}

static void on_ws_message(HttpWebSocket *ws, bool text, const uint8_t *data, size_t size, void *userdata) {
        Terminal *t = userdata;
        int r;

        r = text ? terminal_command(t, data, size) : terminal_input(t, data, size);
        if (r == -EINVAL)
                http_websocket_close(ws, 1003, "a text message is {\"type\":\"resize\",\"rows\":R,\"cols\":C} or "
                                               "{\"type\":\"input\",\"data\":S}");
        else if (r < 0)
                terminal_fail(t, "out of memory");
}

static int on_hangup_kill(sd_event_source *s, uint64_t usec, void *userdata) {
        Terminal *t = userdata;

        t->timer = sd_event_source_disable_unref(t->timer);
        (void) terminal_control(t, IFACE "Signal", json_object_new_int(SIGKILL), "signal", on_control_reply);
        terminal_maybe_free(t);
        return 0;
}

static void on_ws_closed(HttpWebSocket *ws, void *userdata) {
        Terminal *t = userdata;

        t->ws = NULL;
        if (t->exited)
                t->follow = varlink_client_unref(t->follow);
        else if (t->follow)
                /* Its output is for nobody now: read and dropped, until Follow says the
                 * hung-up shell ended (on_follow()). */
                varlink_client_pause(t->follow, false);
        if (!t->exited) {
                /* The client hung up: so does the terminal, as a modem's line would. */
                t->hung_up = true;
                t->timer = sd_event_source_disable_unref(t->timer);
                (void) terminal_control(t, IFACE "Signal", json_object_new_int(SIGHUP), "signal", on_control_reply);
                if (sd_event_add_time_relative(http_server_event(t->server), &t->timer, CLOCK_MONOTONIC,
                                               TERMINAL_HANGUP_GRACE_USEC, 0, on_hangup_kill, t) < 0)
                        t->timer = NULL;
        }
        terminal_maybe_free(t);
}

static void on_ws_drained(HttpWebSocket *ws, void *userdata) {
        Terminal *t = userdata;

        if (t->follow && http_websocket_queued(ws) < TERMINAL_OUTPUT_LOW)
                varlink_client_pause(t->follow, false);
}

/* ---- output ---- */

static int on_follow(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        Terminal *t = userdata;
        json_object *v;

        if (!t->ws) {
                /* Hung up: the shell's end (or sandboxd's) is all that matters now. */
                if (!error && (flags & VARLINK_REPLY_CONTINUES))
                        return 0;
                t->exited = true;
                t->timer = sd_event_source_disable_unref(t->timer);
                t->follow = varlink_client_unref(t->follow);  /* the dispatch keeps its own */
                terminal_maybe_free(t);
                return 0;
        }
        if (error) {
                if (!streq(error, VARLINK_ERROR_DISCONNECTED) || !t->exited)
                        terminal_fail(t, "sandboxd ended the terminal");
                return 0;
        }
        for (unsigned i = 0; i < 2; i++) {
                _cleanup_free_ uint8_t *d = NULL;
                size_t n;

                /* stderr does not come from a terminal; kept for a process that has both. */
                if (!json_object_object_get_ex(parameters, i == 0 ? "stdout" : "stderr", &v))
                        continue;
                if (json_object_get_base64(v, &d, &n) < 0 || http_websocket_send(t->ws, false, d, n) < 0)
                        return 0;
        }
        if (flags & VARLINK_REPLY_CONTINUES) {
                if (http_websocket_queued(t->ws) > TERMINAL_OUTPUT_HIGH)
                        varlink_client_pause(c, true);
                return 0;
        }
        /* The shell ended: its exit status, then a normal close. */
        t->exited = true;
        _cleanup_json_ json_object *m = json_object_new_object();
        const char *s;
        if (m && json_add(m, "type", json_object_new_string("exit")) >= 0 &&
            json_add(m, "exit_code", json_object_get(json_object_object_get(parameters, "exitStatus"))) >= 0 &&
            (s = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN)))
                (void) http_websocket_send(t->ws, true, s, strlen(s));
        http_websocket_close(t->ws, 1000, "the shell ended");
        return 0;
}

/* ---- the route ---- */

/* The Start of a shell, on a call of its own rather than the request's: a client that goes
 * while the shell starts does not cancel the call, whose answer then ends the shell (no
 * one else would ever know of it). */
typedef struct TerminalStart {
        HttpRequest *req;       /* a reference */
        char *protocol;         /* the subprotocol chosen, or NULL */
        char *sandbox_id, *tenant;
        struct TerminalStart *prev, *next;      /* all of them, freed at exit if still there */
} TerminalStart;

static TerminalStart *starts;

static TerminalStart *terminal_start_free(TerminalStart *s) {
        if (!s)
                return NULL;
        LIST_REMOVE(starts, s);
        http_request_unref(s->req);
        free(s->protocol);
        free(s->sandbox_id);
        free(s->tenant);
        return mfree(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(TerminalStart *, terminal_start_free);

static int on_orphan_killed(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        return 0;
}

/* The shell started for a client that has gone: killed. */
static void terminal_start_orphaned(TerminalStart *st, json_object *parameters) {
        _cleanup_json_ json_object *p = json_object_new_object();
        json_object *process = json_object_object_get(parameters, "process");

        if (!p || !process || json_add(p, "id", json_object_new_string(st->sandbox_id)) < 0 ||
            json_add(p, "process", json_object_get(process)) < 0 ||
            json_add(p, "signal", json_object_new_int(SIGKILL)) < 0 ||
            http_backend_call_detached(http_server_backend(http_request_server(st->req)), st->tenant, IFACE "Signal",
                                       TAKE_PTR(p), 0, on_orphan_killed, NULL, NULL) < 0)
                log_warning("Cannot end the shell of sandbox %s started for a client that left.", st->sandbox_id);
}

static int on_started_for(HttpRequest *req, TerminalStart *st, json_object *parameters, const char *error) {
        static const HttpWebSocketCallbacks callbacks = { .message = on_ws_message, .closed = on_ws_closed };
        const char *tenant = st->tenant;
        _cleanup_json_ json_object *p = NULL;
        Terminal *t;
        int r;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        t = calloc(1, sizeof(Terminal));
        if (!t)
                return http_request_reply_errno(req, -ENOMEM);
        LIST_PREPEND(terminals, t);
        t->server = http_request_server(req);
        t->process = (uint64_t) json_object_get_int64(json_object_object_get(parameters, "process"));
        t->sandbox_id = strdup(http_request_param(req, 0));
        t->tenant = tenant ? strdup(tenant) : NULL;
        r = t->sandbox_id && (!tenant || t->tenant) ? 0 : -ENOMEM;
        if (r >= 0)
                r = terminal_connect(t, &t->follow);
        if (r >= 0)
                r = terminal_connect(t, &t->control);
        if (r >= 0 && !(p = terminal_params(t)))
                r = -ENOMEM;
        if (r >= 0)
                r = varlink_client_call_async(t->follow, IFACE "Follow", p, VARLINK_CALL_MORE, on_follow, t);
        if (r >= 0)
                r = http_websocket_accept(req, st->protocol, &callbacks, t, &t->ws);
        if (r >= 0)
                http_websocket_set_drained(t->ws, on_ws_drained);
        if (r < 0) {
                /* The shell started for nobody: killed, and the session freed once that is
                 * said (or at once, without a connection to say it on). */
                t->follow = varlink_client_unref(t->follow);
                t->exited = true;
                if (!t->control || terminal_control(t, IFACE "Signal", json_object_new_int(SIGKILL), "signal",
                                                    on_control_reply) < 0)
                        terminal_free(t);
                return http_request_reply_errno(req, r);
        }
        return 0;
}

static int on_started(HttpRequest *unused, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        TerminalStart *st = userdata;
        int r = 0;

        if (http_request_is_gone(st->req)) {
                if (!error)
                        terminal_start_orphaned(st, parameters);
        } else
                r = on_started_for(st->req, st, parameters, error);
        terminal_start_free(st);
        return r;
}

void http_terminals_done(void) {
        /* Their calls are cancelled with the backend, after this: no callback comes. */
        while (starts)
                terminal_start_free(starts);
        /* At exit: a hung-up shell's session may still wait for its SIGKILL (at most
         * TERMINAL_HANGUP_GRACE_USEC); sandboxd's own Timeout ends what is left. */
        while (terminals) {
                Terminal *t = terminals;
                /* Its WebSocket, if any, is gone with the server's connections. */
                t->ws = NULL;
                terminal_free(t);
        }
}

static uint64_t query_size(HttpRequest *req, const char *name, uint64_t fallback) {
        const char *v = http_request_query(req, name);
        uint64_t n;

        return v && parse_uint64(v, &n) >= 0 ? n : fallback;
}

int http_route_terminal(HttpRequest *req) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object(),
                                   *argv = json_object_new_array(), *env = json_object_new_array();
        const char *offered = http_request_header(req, "Sec-WebSocket-Protocol");
        _cleanup_(terminal_start_freep) TerminalStart *st = NULL;
        const char *tenant = http_request_backend_tenant(req);
        int r;

        if (!http_websocket_requested(req))
                return http_request_reply_error(req, 400, "BadRequest",
                                                "This route is a WebSocket: GET with Upgrade: websocket, "
                                                "Sec-WebSocket-Version: 13 (docs/TERMINALS.md).");
        /* A client that offers subprotocols gets the terminal's, or none will do. */
        if (offered && !strstr(offered, TERMINAL_PROTOCOL))
                return http_request_reply_error(req, 400, "BadRequest", "The subprotocol is " TERMINAL_PROTOCOL ".");
        st = calloc(1, sizeof(TerminalStart));
        if (!st)
                return -ENOMEM;
        LIST_PREPEND(starts, st);
        st->req = http_request_ref(req);
        st->sandbox_id = strdup(http_request_param(req, 0));
        if (!st->sandbox_id || (tenant && !(st->tenant = strdup(tenant))) ||
            (offered && !(st->protocol = strdup(TERMINAL_PROTOCOL))))
                return -ENOMEM;

        if (!p || !o || !argv || !env ||
            json_object_array_add(argv, json_object_new_string("/bin/sh")) < 0 ||
            json_object_array_add(argv, json_object_new_string("-c")) < 0 ||
            json_object_array_add(argv, json_object_new_string(TERMINAL_SHELL)) < 0 ||
            json_object_array_add(env, json_object_new_string("TERM=xterm-256color")) < 0 ||
            json_add(o, "TTY", json_object_new_boolean(true)) < 0 ||
            json_add(o, "TerminalRows", json_object_new_uint64(query_size(req, "rows", 24))) < 0 ||
            json_add(o, "TerminalColumns", json_object_new_uint64(query_size(req, "cols", 80))) < 0 ||
            json_add(o, "Environment", TAKE_PTR(env)) < 0 ||
            json_add(p, "id", json_object_new_string(http_request_param(req, 0))) < 0 ||
            json_add(p, "argv", TAKE_PTR(argv)) < 0 ||
            json_add(p, "options", TAKE_PTR(o)) < 0)
                return -ENOMEM;
        /* Answered (or the request gone) in on_started(); the request waits meanwhile. */
        r = http_backend_call_detached(http_server_backend(http_request_server(req)), st->tenant, IFACE "Start",
                                       TAKE_PTR(p), 0, on_started, st, NULL);
        if (r < 0)
                return r;
        TAKE_PTR(st);
        return 0;
}
