/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl run-code: a cell of a sandbox's code context. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandboxctl-code.h"
#include "sandboxctl-util.h"

static const char *field_string(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static bool field_bool(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* The cell as text: its output as it was written, the text of its results (an image as a
 * placeholder: a terminal is no place for base64), its exception's traceback. */
static int print_cell(json_object *events) {
        int status = 0;

        for (size_t i = 0; i < json_object_array_length(events); i++) {
                json_object *e = json_object_array_get_idx(events, i), *data, *tb;
                const char *type = field_string(e, "Type") ?: "", *text;

                if (streq(type, "stdout") || streq(type, "stderr")) {
                        text = field_string(e, "Text") ?: "";
                        fputs(text, streq(type, "stdout") ? stdout : stderr);
                } else if (streq(type, "result") && json_object_object_get_ex(e, "Data", &data)) {
                        bool shown = false;
                        json_object_object_foreach(data, mime, value) {
                                if (strncmp(mime, "image/", 6) != 0 || streq(mime, "image/svg+xml"))
                                        continue;
                                printf("<%s: %d bytes of base64; --json has them>\n", mime, json_object_get_string_len(value));
                                shown = true;
                        }
                        text = field_string(data, "text/plain");
                        if (text && !shown)
                                printf("%s\n", text);
                } else if (streq(type, "error")) {
                        status = 1;
                        if (json_object_object_get_ex(e, "Traceback", &tb) && json_object_array_length(tb) > 0)
                                for (size_t k = 0; k < json_object_array_length(tb); k++)
                                        fprintf(stderr, "%s\n", json_object_get_string(json_object_array_get_idx(tb, k)));
                        else
                                fprintf(stderr, "%s: %s\n", field_string(e, "Name") ?: "", field_string(e, "Value") ?: "");
                }
        }
        fflush(stdout);
        return status;
}

/* --json: {"context", "execution_count", "status", "truncated", "interrupted", "timed_out",
 * "events": [{"type", "text" | "data", "is_main_result" | "name", "value", "traceback"}],
 * "error"}, images in base64 as the kernel gave them. */
static int print_cell_json(json_object *events, json_object *result, int *ret_status) {
        _cleanup_json_ json_object *o = json_object_new_object(), *l = json_object_new_array();
        static const struct { const char *bus, *json; } fields[] = {
                { "Type", "type" }, { "Text", "text" }, { "Data", "data" }, { "IsMainResult", "is_main_result" },
                { "Name", "name" }, { "Value", "value" }, { "Traceback", "traceback" },
        };
        json_object *v;

        if (!o || !l)
                return log_oom();
        *ret_status = 0;
        for (size_t i = 0; i < json_object_array_length(events); i++) {
                json_object *e = json_object_array_get_idx(events, i), *x = json_object_new_object();
                if (!x || json_object_array_add(l, x) < 0) {
                        json_object_put(x);
                        return log_oom();
                }
                for (size_t k = 0; k < ELEMENTSOF(fields); k++)
                        if (json_object_object_get_ex(e, fields[k].bus, &v) &&
                            json_add(x, fields[k].json, json_object_get(v)) < 0)
                                return log_oom();
                if (streq(field_string(e, "Type") ?: "", "error")) {
                        *ret_status = 1;
                        if (json_add(o, "error", json_object_get(x)) < 0)
                                return log_oom();
                }
        }
        if (json_add_string(o, "context", field_string(result, "Context")) < 0 ||
            json_add(o, "execution_count", json_object_object_get_ex(result, "ExecutionCount", &v) ?
                                           json_object_get(v) : json_object_new_int(0)) < 0 ||
            json_add_string(o, "status", field_string(result, "Status")) < 0 ||
            json_add(o, "truncated", json_object_new_boolean(field_bool(result, "Truncated"))) < 0 ||
            json_add(o, "interrupted", json_object_new_boolean(field_bool(result, "Interrupted"))) < 0 ||
            json_add(o, "timed_out", json_object_new_boolean(field_bool(result, "TimedOut"))) < 0 ||
            json_add(o, "events", TAKE_PTR(l)) < 0)
                return log_oom();
        return print_json(o);
}

int code_run(SandboxClient *c, const char *id, const char *context, const char *code, uint64_t timeout_sec,
             uint64_t output_max, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_json_ json_object *events = NULL, *result = NULL;
        int r, status = 0;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;
        r = sandbox_handle_run_code(h, context, code, timeout_sec, output_max, &events, &result, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to run the code in sandbox %s: %s", id,
                                       sandbox_client_error_message(&error, r));
        if (json) {
                r = print_cell_json(events, result, &status);
                if (r < 0)
                        return r;
        } else
                status = print_cell(events);
        if (!json && field_bool(result, "Truncated"))
                fprintf(stderr, "%s: the cell's output was cut at its --output-max; the rest was dropped\n",
                        program_invocation_short_name);
        if (!json && field_bool(result, "TimedOut"))
                fprintf(stderr, "%s: the cell was interrupted at its --timeout\n", program_invocation_short_name);
        return status;
}
