/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "run-outcome.h"

void run_outcome_done(RunOutcome *o) {
        o->result = mfree(o->result);
        json_object_putp(&o->error);
}

static json_object *error_new(const char *type, const char *message) {
        _cleanup_json_ json_object *e = json_object_new_object();

        if (!e ||
            json_add(e, "errorType", json_object_new_string(type)) < 0 ||
            json_add(e, "errorMessage", json_object_new_string(message)) < 0 ||
            json_add(e, "stackTrace", json_object_new_array()) < 0)
                return NULL;
        return TAKE_PTR(e);
}

int run_outcome_set_error(RunOutcome *o, RunExit exit, const char *type, const char *message) {
        json_object *e = error_new(type, message);

        if (!e)
                return -ENOMEM;
        run_outcome_done(o);
        o->exit = exit;
        o->error = e;
        return 0;
}

int run_outcome_set_errorv(RunOutcome *o, RunExit exit, const char *type, const char *fmt, va_list ap) {
        _cleanup_free_ char *m = NULL;

        if (vasprintf(&m, fmt, ap) < 0)
                return -ENOMEM;
        return run_outcome_set_error(o, exit, type, m);
}

static int set_errorf(RunOutcome *o, RunExit exit, const char *type, const char *fmt, ...) _printf_(4, 5);
static int set_errorf(RunOutcome *o, RunExit exit, const char *type, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = run_outcome_set_errorv(o, exit, type, fmt, ap);
        va_end(ap);
        return r;
}

/* How the process ended, in the words of AWS Lambda's "Runtime exited with error: …". */
static void describe_end(const RunExecEnd *end, char *buf, size_t size) {
        if (end->signal > 0) {
                const char *name = strsignal(end->signal);
                snprintf(buf, size, "signal: %c%s", name ? tolower((unsigned char) name[0]) : '?',
                         name && name[0] ? name + 1 : "");
        } else
                snprintf(buf, size, "exit status %d", end->exit_status);
}

/* The next '\n'-ended line of [*p, end): its start and length; false at the end or when
 * the line is not ended. */
static bool next_line(const char **p, const char *end, const char **ret, size_t *ret_len) {
        const char *nl = memchr(*p, '\n', (size_t) (end - *p));

        if (!nl)
                return false;
        *ret = *p;
        *ret_len = (size_t) (nl - *p);
        *p = nl + 1;
        return true;
}

/* The JSON value that data holds entirely (whitespace around it allowed), in *ret (NULL
 * for null). -EINVAL if it holds anything else. */
static int json_parse_exact(const char *data, size_t size, json_object **ret) {
        _cleanup_free_ char *copy = strndup(data, size);
        _cleanup_json_ json_object *o = NULL;
        json_tokener *tok;
        size_t end;
        bool ok;

        if (!copy)
                return -ENOMEM;
        if (strlen(copy) != size || size > INT32_MAX - 1)
                return -EINVAL;   /* a NUL inside */
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, copy, (int) size + 1);   /* with the NUL: the end */
        ok = json_tokener_get_error(tok) == json_tokener_success;
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!ok)
                return -EINVAL;
        for (; end < size; end++)
                if (!isspace((unsigned char) copy[end]))
                        return -EINVAL;
        *ret = TAKE_PTR(o);
        return 0;
}

/* A channel message: a JSON object with "status". */
static json_object *message_parse(const char *line, size_t len) {
        json_object *m = NULL;

        if (json_parse_exact(line, len, &m) < 0)
                return NULL;
        return m;
}

static const char *message_status(json_object *m) {
        json_object *s;

        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "status", &s) ||
            !json_object_is_type(s, json_type_string))
                return NULL;
        return json_object_get_string(s);
}

static int outcome_from_header(RunOutcome *o, json_object *header, const char *rest, size_t rest_size) {
        const char *status = message_status(header);
        _cleanup_json_ json_object *value = NULL;
        json_object *e, *type, *msg;

        if (streq_ptr(status, "ok")) {
                while (rest_size > 0 && rest[rest_size - 1] == '\n')
                        rest_size--;
                if (json_parse_exact(rest, rest_size, &value) < 0)
                        return run_outcome_set_error(o, RUN_EXIT_ERROR, "Runtime.InvalidResponse",
                                                     "The runtime returned what is not JSON.");
                run_outcome_done(o);
                o->exit = RUN_EXIT_SUCCESS;
                o->result = strndup(rest, rest_size);
                return o->result ? 0 : -ENOMEM;
        }

        if (!json_object_object_get_ex(header, "error", &e) || !json_object_is_type(e, json_type_object) ||
            !json_object_object_get_ex(e, "errorType", &type) || !json_object_is_type(type, json_type_string) ||
            !json_object_object_get_ex(e, "errorMessage", &msg) || !json_object_is_type(msg, json_type_string))
                return run_outcome_set_error(o, RUN_EXIT_ERROR, "Runtime.InvalidResponse",
                                             "The runtime reported an error without errorType and errorMessage.");
        run_outcome_done(o);
        if (streq_ptr(status, "raised"))
                o->exit = RUN_EXIT_ERROR;
        else if (streq_ptr(status, "syntax") || streq_ptr(status, "nohandler"))
                o->exit = RUN_EXIT_SYNTAX;
        else
                return run_outcome_set_error(o, RUN_EXIT_ERROR, "Runtime.InvalidResponse",
                                             "The runtime reported an unknown status.");
        o->error = json_object_get(e);
        return 0;
}

int run_outcome_from_channel(const char *data, size_t size, bool overflow, const RunExecEnd *end,
                             uint64_t timeout_sec, const char *runtime, RunOutcome *ret) {
        _cleanup_json_ json_object *started = NULL, *header = NULL;
        const char *p = data ?: "", *stop = p + size, *line;
        char how[128];
        size_t len;
        int r;

        RunOutcome o = {};
        describe_end(end, how, sizeof(how));

        /* Whatever the handler got to write, a timeout is a timeout. */
        if (end->timed_out)
                r = set_errorf(&o, RUN_EXIT_TIMEOUT, "Sandbox.Timedout", "Task timed out after %" PRIu64 ".00 seconds",
                               timeout_sec);
        else if (!next_line(&p, stop, &line, &len) ||
                 !streq_ptr(message_status(started = message_parse(line, len)), "started"))
                /* The interpreter never ran the bootstrap: not there, or the sandbox broke. */
                r = set_errorf(&o, RUN_EXIT_SANDBOX, "Runtime.InvalidEntrypoint",
                               "The %s runtime did not start in the sandbox (%s%s).", runtime, how,
                               end->oom_killed ? ", out of memory" : "");
        else if (overflow)
                r = set_errorf(&o, RUN_EXIT_ERROR, "Function.ResponseSizeTooLarge",
                               "Response payload size exceeded maximum allowed payload size (%u bytes).",
                               RUN_RESPONSE_MAX);
        else if (!next_line(&p, stop, &line, &len)) {
                /* It ended before it answered: the handler exited, or was killed. */
                if (end->oom_killed)
                        r = set_errorf(&o, RUN_EXIT_ERROR, "Runtime.OutOfMemory",
                                       "Runtime exited with error: %s (out of memory)", how);
                else if (end->exit_status == 0)
                        r = run_outcome_set_error(&o, RUN_EXIT_ERROR, "Runtime.ExitError",
                                                  "Runtime exited without providing a reason");
                else
                        r = set_errorf(&o, RUN_EXIT_ERROR, "Runtime.ExitError", "Runtime exited with error: %s",
                                       how);
        } else {
                header = message_parse(line, len);
                r = outcome_from_header(&o, header, p, (size_t) (stop - p));
        }
        if (r < 0) {
                run_outcome_done(&o);
                return r;
        }
        *ret = o;
        return 0;
}
