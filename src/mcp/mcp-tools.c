/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The tools: each a table of arguments (its inputSchema and its checks, from one source),
 * an outputSchema, annotations, and a few varlink calls to sandboxd. Translation only: what
 * a sandbox may do, and who may do it, sandboxd decides. */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64-util.h"
#include "code-runner.h"
#include "json-util.h"
#include "mcp-internal.h"
#include "parse-util.h"
#include "sandbox-api.h"

#define MiB (1024 * 1024)
#define MCP_FILE_WRITE_MAX (8 * MiB)       /* base64 of it fits a varlink message */
#define ARG_END { .name = NULL }

/* ---- schemas ---- */

#define SANDBOX_SCHEMA                                                                          \
        "{\"type\":\"object\",\"properties\":{"                                                 \
        "\"id\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"                          \
        "\"template\":{\"type\":\"string\"},"                                                   \
        "\"state\":{\"type\":\"string\",\"enum\":[\"starting\",\"running\",\"paused\",\"stopping\",\"dead\",\"stopped\"]}," \
        "\"owner\":{\"type\":\"integer\"},\"tenant\":{\"type\":\"string\"},"                    \
        "\"createdAt\":{\"type\":\"integer\",\"description\":\"µs since the epoch\"},"          \
        "\"memoryMax\":{\"type\":\"integer\",\"description\":\"bytes\"},"                       \
        "\"timeout\":{\"type\":\"integer\",\"description\":\"lifetime in seconds, 0: none\"},"  \
        "\"deadline\":{\"type\":\"integer\",\"description\":\"µs since the epoch, 0: never\"}," \
        "\"ephemeral\":{\"type\":\"boolean\"},"                                                 \
        "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}},"        \
        "\"required\":[\"id\",\"template\",\"state\"]}"

#define RUN_RESULT_SCHEMA                                                                       \
        "{\"type\":\"object\",\"properties\":{"                                                 \
        "\"exit_code\":{\"type\":\"integer\",\"description\":\"the exit code, or 128 + the signal that killed it\"}," \
        "\"stdout\":{\"type\":\"string\",\"description\":\"the text, or base64 of the bytes (stdout_encoding)\"}," \
        "\"stderr\":{\"type\":\"string\",\"description\":\"the text, or base64 of the bytes (stderr_encoding)\"}," \
        "\"stdout_encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"                   \
        "\"stderr_encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"                   \
        "\"timed_out\":{\"type\":\"boolean\"},\"oom_killed\":{\"type\":\"boolean\"},"           \
        "\"signal\":{\"type\":\"integer\",\"description\":\"0 when it exited\"},"               \
        "\"truncated\":{\"type\":\"boolean\",\"description\":\"stdout or stderr was cut at 65536 bytes\"}," \
        "\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},"      \
        "\"duration_ms\":{\"type\":\"integer\"}},"                                              \
        "\"required\":[\"exit_code\",\"stdout\",\"stderr\",\"stdout_encoding\",\"stderr_encoding\",\"timed_out\"," \
        "\"oom_killed\",\"truncated\"]}"

/* run_code's in a code context. */
#define CELL_RESULT_SCHEMA                                                                      \
        "{\"type\":\"object\",\"properties\":{"                                                 \
        "\"context_id\":{\"type\":\"string\"},\"execution_count\":{\"type\":\"integer\"},"      \
        "\"status\":{\"type\":\"string\",\"enum\":[\"ok\",\"error\",\"aborted\"]},"               \
        "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"                      \
        "\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"description\":"           \
        "\"MIME type to representation (images: the image content item's number)\"}},"          \
        "\"error\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"             \
        "\"value\":{\"type\":\"string\"},\"traceback\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}," \
        "\"truncated\":{\"type\":\"boolean\"},\"interrupted\":{\"type\":\"boolean\"},"          \
        "\"timed_out\":{\"type\":\"boolean\"},\"duration_ms\":{\"type\":\"integer\"}},"         \
        "\"required\":[\"context_id\",\"execution_count\",\"status\",\"stdout\",\"stderr\",\"results\"]}"

#define OBJECT_SCHEMA(props, required) \
        "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" required "]}"

#define SNAPSHOT_SCHEMA                                                                         \
        "{\"type\":\"object\",\"properties\":{"                                                 \
        "\"id\":{\"type\":\"string\"},\"template\":{\"type\":\"string\"},"                        \
        "\"owner\":{\"type\":\"integer\"},\"tenant\":{\"type\":\"string\"},"                      \
        "\"name\":{\"type\":\"string\",\"description\":\"the source sandbox's name\"},"            \
        "\"source\":{\"type\":\"string\",\"description\":\"the source sandbox's id\"},"            \
        "\"size\":{\"type\":\"integer\",\"description\":\"bytes stored (compressed)\"},"           \
        "\"contentSize\":{\"type\":\"integer\",\"description\":\"the files' bytes added up\"},"    \
        "\"created\":{\"type\":\"integer\",\"description\":\"µs since the epoch\"},"               \
        "\"diskMax\":{\"type\":\"integer\"},\"includesTmp\":{\"type\":\"boolean\"},"              \
        "\"hibernated\":{\"type\":\"boolean\"}},"                                                \
        "\"required\":[\"id\",\"source\",\"size\",\"hibernated\"]}"

/* {"snapshot": …}: what sandbox_snapshot and sandbox_hibernate return. */
#define SNAPSHOT_RESULT_SCHEMA OBJECT_SCHEMA("\"snapshot\":" SNAPSHOT_SCHEMA, "\"snapshot\"")

/* {"sandbox": …}: what the tools about one sandbox return. */
#define SANDBOX_RESULT_SCHEMA OBJECT_SCHEMA("\"sandbox\":" SANDBOX_SCHEMA, "\"sandbox\"")

static const char *const languages[] = { "python", "node", "bash", NULL };
static const char *const encodings[] = { "utf-8", "base64", NULL };
static const char *const idle_actions[] = { "destroy", "pause", "hibernate", NULL };

#define ARG_SANDBOX_ID                                                                          \
        { "sandbox_id", MCP_ARG_STRING, true, "The sandbox's id (16 hex digits, from sandbox_create or "  \
          "sandbox_list) or its name", .max = 64 }
#define ARG_PATH(req, what)                                                                     \
        { "path", MCP_ARG_STRING, req, what " (inside the sandbox; relative paths are from /work)", \
          .max = 4096 }
#define ARG_TIMEOUT                                                                             \
        { "timeout", MCP_ARG_SECONDS, false, "Seconds before it is killed (default 300; 0.5 is half a second)" }
#define ARG_IDLE_ACTION                                                                         \
        { "idle_action", MCP_ARG_STRING, false, "What idle_timeout does: destroy (default), pause, or hibernate " \
          "(files kept on disk; sandbox_wake brings it back)", .choices = idle_actions }
#define ARG_LIMITS                                                                              \
        { "cpu_percent", MCP_ARG_INTEGER, false, "CPU time limit in percent of one CPU (default: the template's)", \
          .min = 1, .max = 100000 },                                                            \
        { "tasks_max", MCP_ARG_INTEGER, false, "Processes and threads at most (default: the template's)", \
          .min = 1, .max = 1000000 },                                                           \
        { "disk_mb", MCP_ARG_INTEGER, false, "Disk space of /work and /tmp in MiB (default: sandboxd's)", \
          .min = 1, .max = 1048576 }
#define ARG_EGRESS                                                                              \
        { "egress_allow", MCP_ARG_STRINGS, false, "Hosts the sandbox may reach (example.org, *.example.org, " \
          "host:port, an address or CIDR), through sandboxd's egress proxy; replaces the template's; [] for no " \
          "network" },                                                                          \
        { "egress_deny", MCP_ARG_STRINGS, false, "Hosts refused even when egress_allow matches them" }
#define ARG_INCLUDE_TMP                                                                         \
        { "include_tmp", MCP_ARG_BOOLEAN, false, "Keep /tmp as well as /work (default false)" }
#define ARG_MEMORY_MB                                                                           \
        { "memory_mb", MCP_ARG_INTEGER, false, "Memory limit in MiB (default: the template's)", .min = 16, \
          .max = 1048576 }

/* ---- arguments: schema and checks ---- */

static json_object *arg_schema(const McpArg *a) {
        static const char *const type_names[] = {
                [MCP_ARG_STRING] = "string",
                [MCP_ARG_INTEGER] = "integer",
                [MCP_ARG_BOOLEAN] = "boolean",
                [MCP_ARG_STRINGS] = "array",
                [MCP_ARG_SECONDS] = "number",
                [MCP_ARG_STRING_MAP] = "object",
        };
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "type", json_object_new_string(type_names[a->type])) < 0 ||
            json_add(o, "description", json_object_new_string(a->description)) < 0)
                return NULL;
        if (a->choices) {
                _cleanup_json_ json_object *e = json_object_new_array();
                if (!e)
                        return NULL;
                for (const char *const *c = a->choices; *c; c++)
                        if (json_object_array_add(e, json_object_new_string(*c)) < 0)
                                return NULL;
                if (json_add(o, "enum", TAKE_PTR(e)) < 0)
                        return NULL;
        }
        if (a->type == MCP_ARG_INTEGER &&
            (json_add(o, "minimum", json_object_new_int64(a->min)) < 0 ||
             json_add(o, "maximum", json_object_new_int64(a->max)) < 0))
                return NULL;
        /* The bound is the core's (sandbox-api.h), which sandboxd checks. */
        if (a->type == MCP_ARG_SECONDS &&
            (json_add(o, "exclusiveMinimum", json_object_new_int(0)) < 0 ||
             json_add(o, "maximum", json_object_new_uint64(EXEC_TIMEOUT_MAX_SEC)) < 0))
                return NULL;
        if (a->type == MCP_ARG_STRING && a->max > 0 && json_add(o, "maxLength", json_object_new_int64(a->max)) < 0)
                return NULL;
        if (a->type == MCP_ARG_STRING_MAP) {
                _cleanup_json_ json_object *values = json_object_new_object();
                if (!values || json_add(values, "type", json_object_new_string("string")) < 0 ||
                    json_add(o, "additionalProperties", TAKE_PTR(values)) < 0)
                        return NULL;
        }
        if (a->type == MCP_ARG_STRINGS) {
                _cleanup_json_ json_object *items = json_object_new_object();
                if (!items || json_add(items, "type", json_object_new_string("string")) < 0 ||
                    json_add(o, "items", TAKE_PTR(items)) < 0)
                        return NULL;
        }
        return TAKE_PTR(o);
}

static json_object *input_schema(const McpTool *t) {
        _cleanup_json_ json_object *s = json_object_new_object(), *props = json_object_new_object(),
                                   *req = json_object_new_array();

        if (!s || !props || !req)
                return NULL;
        for (const McpArg *a = t->args; a->name; a++) {
                if (json_add(props, a->name, arg_schema(a)) < 0)
                        return NULL;
                if (a->required && json_object_array_add(req, json_object_new_string(a->name)) < 0)
                        return NULL;
        }
        if (json_add(s, "type", json_object_new_string("object")) < 0 ||
            json_add(s, "properties", TAKE_PTR(props)) < 0 ||
            json_add(s, "required", TAKE_PTR(req)) < 0 ||
            json_add(s, "additionalProperties", json_object_new_boolean(false)) < 0)
                return NULL;
        return TAKE_PTR(s);
}

json_object *mcp_tool_describe(const McpTool *t) {
        _cleanup_json_ json_object *d = json_object_new_object(), *ann = json_object_new_object();

        if (!d || !ann ||
            json_add(ann, "title", json_object_new_string(t->title)) < 0 ||
            json_add(ann, "readOnlyHint", json_object_new_boolean(t->read_only)) < 0 ||
            json_add(ann, "destructiveHint", json_object_new_boolean(t->destructive)) < 0 ||
            json_add(ann, "idempotentHint", json_object_new_boolean(t->idempotent)) < 0 ||
            json_add(ann, "openWorldHint", json_object_new_boolean(t->open_world)) < 0 ||
            json_add(d, "name", json_object_new_string(t->name)) < 0 ||
            json_add(d, "title", json_object_new_string(t->title)) < 0 ||
            json_add(d, "description", json_object_new_string(t->description)) < 0 ||
            json_add(d, "inputSchema", input_schema(t)) < 0 ||
            json_add(d, "annotations", TAKE_PTR(ann)) < 0)
                return NULL;
        if (t->output_schema && json_add(d, "outputSchema", json_tokener_parse(t->output_schema)) < 0)
                return NULL;
        return TAKE_PTR(d);
}

static int arg_check(const McpArg *a, json_object *v, char **ret_message) {
        switch (a->type) {
        case MCP_ARG_STRING:
                if (!json_object_is_type(v, json_type_string))
                        return asprintf(ret_message, "%s must be a string", a->name) < 0 ? -ENOMEM : -EINVAL;
                /* Handed on as a C string, which would end at the NUL without a word. */
                if (strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                        return asprintf(ret_message, "%s must not hold a NUL byte (\\u0000)%s", a->name,
                                        streq(a->name, "content") ? "; write bytes with encoding base64" : "") < 0
                                       ? -ENOMEM : -EINVAL;
                if (a->max > 0 && json_object_get_string_len(v) > a->max)
                        return asprintf(ret_message, "%s is longer than %" PRIi64 " bytes", a->name, a->max) < 0
                                       ? -ENOMEM : -EINVAL;
                if (a->choices) {
                        for (const char *const *c = a->choices; *c; c++)
                                if (streq(*c, json_object_get_string(v)))
                                        return 0;
                        return asprintf(ret_message, "%s must be one of the schema's enum", a->name) < 0 ? -ENOMEM
                                                                                                        : -EINVAL;
                }
                return 0;
        case MCP_ARG_INTEGER: {
                int64_t i;
                /* JSON Schema's integer is a number without a fraction: 2.0 is one. */
                if (!json_is_integer(v, &i))
                        return asprintf(ret_message, "%s must be an integer", a->name) < 0 ? -ENOMEM : -EINVAL;
                if (i < a->min || i > a->max)
                        return asprintf(ret_message, "%s must be from %" PRIi64 " to %" PRIi64, a->name, a->min,
                                        a->max) < 0 ? -ENOMEM : -EINVAL;
                return 0;
        }
        case MCP_ARG_SECONDS: {
                const char *option;
                uint64_t value;
                if (json_timeout_option(v, &option, &value) < 0)
                        return asprintf(ret_message, "%s must be a number of seconds", a->name) < 0 ? -ENOMEM
                                                                                                  : -EINVAL;
                return 0;
        }
        case MCP_ARG_BOOLEAN:
                if (!json_object_is_type(v, json_type_boolean))
                        return asprintf(ret_message, "%s must be a boolean", a->name) < 0 ? -ENOMEM : -EINVAL;
                return 0;
        case MCP_ARG_STRINGS:
                if (!json_object_is_type(v, json_type_array))
                        return asprintf(ret_message, "%s must be an array of strings", a->name) < 0 ? -ENOMEM
                                                                                                     : -EINVAL;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        const char *s;
                        int r = json_string_get_clean(json_object_array_get_idx(v, i), &s);
                        if (r == -EBADMSG)
                                return asprintf(ret_message, "%s[%zu] must not hold a NUL byte (\\u0000)", a->name,
                                                i) < 0 ? -ENOMEM : -EINVAL;
                        if (r < 0)
                                return asprintf(ret_message, "%s must be an array of strings", a->name) < 0
                                               ? -ENOMEM : -EINVAL;
                }
                return 0;
        case MCP_ARG_STRING_MAP:
                if (!json_object_is_type(v, json_type_object))
                        return asprintf(ret_message, "%s must be an object of strings", a->name) < 0 ? -ENOMEM
                                                                                                      : -EINVAL;
                json_object_object_foreach(v, key, value) {
                        const char *s;
                        if (json_string_get_clean(value, &s) < 0)
                                return asprintf(ret_message, "%s.%.64s must be a string without NUL bytes", a->name,
                                                key) < 0 ? -ENOMEM : -EINVAL;
                }
                return 0;
        }
        return -EINVAL;
}

int mcp_tool_check_args(const McpTool *t, json_object *args, char **ret_message) {
        const McpArg *a;
        int r;

        json_object_object_foreach(args, key, v) {
                for (a = t->args; a->name; a++)
                        if (streq(a->name, key))
                                break;
                if (!a->name)
                        return asprintf(ret_message, "unknown argument %.64s", key) < 0 ? -ENOMEM : -EINVAL;
                /* Not as if absent: null is no integer, string or boolean for JSON Schema. */
                if (json_object_is_type(v, json_type_null))
                        return asprintf(ret_message, "%s must not be null (leave it out for the default)",
                                        a->name) < 0 ? -ENOMEM : -EINVAL;
                r = arg_check(a, v, ret_message);
                if (r < 0)
                        return r;
        }
        for (a = t->args; a->name; a++) {
                json_object *given;
                if (a->required && (!json_object_object_get_ex(args, a->name, &given) ||
                                    json_object_is_type(given, json_type_null)))
                        return asprintf(ret_message, "%s is required", a->name) < 0 ? -ENOMEM : -EINVAL;
        }
        return 0;
}

/* ---- helpers ---- */

/* {"id": the request's sandbox} and more. */
static json_object *params_sandbox(McpRequest *r) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0)
                return NULL;
        return TAKE_PTR(p);
}

static json_object *params_sandbox_path(McpRequest *r, const char *fallback) {
        _cleanup_json_ json_object *p = params_sandbox(r);
        const char *path = mcp_arg_string(r, "path") ?: fallback;

        if (!p || json_add(p, "path", json_object_new_string(path)) < 0)
                return NULL;
        return TAKE_PTR(p);
}

/* Bytes as file_read gives them: the text when they are UTF-8 without a NUL, else base64 of
 * them; *ret_text says which. Every byte is kept either way. */
static json_object *json_object_new_bytes(const void *data, size_t n, bool *ret_text) {
        *ret_text = utf8_is_valid_n(data, n) && !memchr(data, 0, n);
        return *ret_text ? json_object_new_string_len(data, (int) n) : json_object_new_base64(data, n);
}

/* Exec's stdout or stderr (base64 in the reply) as FIELD and FIELD_encoding. */
static int add_output(json_object *o, json_object *parameters, const char *field, size_t *ret_size) {
        _cleanup_free_ void *data = NULL;
        _cleanup_free_ char *encoding = NULL;
        json_object *v;
        size_t n = 0;
        bool text;

        if (json_object_object_get_ex(parameters, field, &v) && json_object_is_type(v, json_type_string) &&
            base64_decode(json_object_get_string(v), &data, &n) < 0)
                return -ENOMEM;
        *ret_size = n;
        if (asprintf(&encoding, "%s_encoding", field) < 0)
                return -ENOMEM;
        if (json_add(o, field, json_object_new_bytes(data ?: "", n, &text)) < 0 ||
            json_add(o, encoding, json_object_new_string(text ? "utf-8" : "base64")) < 0)
                return -ENOMEM;
        return 0;
}

static int64_t json_int_field(json_object *o, const char *field) {
        json_object *v;

        return o && json_object_object_get_ex(o, field, &v) ? json_object_get_int64(v) : 0;
}

static bool json_bool_field(json_object *o, const char *field) {
        json_object *v;

        return o && json_object_object_get_ex(o, field, &v) && json_object_get_boolean(v);
}

/* ---- running: run_code, run_command ---- */

/* Exec's options from the tool's arguments. */
static json_object *exec_options(McpRequest *r) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *env = mcp_arg(r, "env");
        const char *s;

        if (!o || json_add(o, "OutputMax", json_object_new_int(MCP_OUTPUT_MAX)) < 0)
                return NULL;
        if (mcp_arg_has(r, "timeout")) {
                const char *option;
                uint64_t value;
                /* Checked by mcp_tool_check_args(). */
                if (json_timeout_option(mcp_arg(r, "timeout"), &option, &value) < 0 ||
                    json_add(o, option, json_object_new_uint64(value)) < 0)
                        return NULL;
        }
        if ((s = mcp_arg_string(r, "working_directory")) && json_add(o, "WorkingDirectory", json_object_new_string(s)) < 0)
                return NULL;
        if (env && json_add(o, "Environment", json_object_get(env)) < 0)
                return NULL;
        if ((s = mcp_arg_string(r, "stdin")) && json_add(o, "Stdin", json_object_new_base64(s, strlen(s))) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* run_code's Exec: the language's bootstrap as argv, the code on stdin ahead of the
 * caller's (code-runner.h): nothing of it in an argv. */
static int exec_code_call(McpRequest *r, const char *language, mcp_step_t step) {
        _cleanup_json_ json_object *p = params_sandbox(r), *a = json_object_new_array(), *o = exec_options(r);
        const char * const *boot = code_runner_argv(language);
        const char *code = mcp_arg_string(r, "code") ?: "", *in = mcp_arg_string(r, "stdin");
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int k;

        if (!boot)
                return -EINVAL;
        if (!p || !a || !o)
                return -ENOMEM;
        for (size_t i = 0; boot[i]; i++)
                if (json_object_array_add(a, json_object_new_string(boot[i])) < 0)
                        return -ENOMEM;
        k = code_runner_stdin(code, strlen(code), in, in ? strlen(in) : 0, &buf, &n);
        if (k < 0)
                return k;
        if (json_add(o, "Stdin", json_object_new_base64(buf, n)) < 0 ||
            json_add(p, "argv", TAKE_PTR(a)) < 0 ||
            json_add(p, "options", TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Exec", TAKE_PTR(p), step);
}

static json_object *argv_new(const char *a, const char *b, const char *c) {
        _cleanup_json_ json_object *l = json_object_new_array();

        if (!l ||
            json_object_array_add(l, json_object_new_string(a)) < 0 ||
            json_object_array_add(l, json_object_new_string(b)) < 0 ||
            json_object_array_add(l, json_object_new_string(c)) < 0)
                return NULL;
        return TAKE_PTR(l);
}

/* Exec's reply as the model reads it; a run that timed out or was killed for memory is a
 * tool error, one that exited (with any code) is not. */
static int finish_exec(McpRequest *r, json_object *parameters, bool tail) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *note = NULL;
        json_object *info = NULL;
        int64_t out_bytes, err_bytes;
        size_t out_kept, err_kept;
        bool truncated, timed_out, oom;

        if (!o)
                return -ENOMEM;
        (void) json_object_object_get_ex(parameters, "info", &info);
        out_bytes = json_int_field(info, "stdoutBytes");
        err_bytes = json_int_field(info, "stderrBytes");
        truncated = json_bool_field(info, "truncated");
        timed_out = json_bool_field(info, "timedOut");
        oom = json_bool_field(info, "oomKilled");
        if (json_add(o, "exit_code", json_object_new_int64(json_int_field(parameters, "exitStatus"))) < 0 ||
            add_output(o, parameters, "stdout", &out_kept) < 0 ||
            add_output(o, parameters, "stderr", &err_kept) < 0 ||
            json_add(o, "timed_out", json_object_new_boolean(timed_out)) < 0 ||
            json_add(o, "oom_killed", json_object_new_boolean(oom)) < 0 ||
            json_add(o, "signal", json_object_new_int64(json_int_field(info, "signal"))) < 0 ||
            json_add(o, "truncated", json_object_new_boolean(truncated)) < 0 ||
            json_add(o, "stdout_bytes", json_object_new_int64(out_bytes)) < 0 ||
            json_add(o, "stderr_bytes", json_object_new_int64(err_bytes)) < 0 ||
            json_add(o, "duration_ms", json_object_new_int64(json_int_field(info, "durationUSec") / 1000)) < 0)
                return -ENOMEM;
        if (truncated && asprintf(&note, "Output truncated: stdout %zu of %" PRIi64 " bytes shown, stderr %zu of %"
                                  PRIi64 " bytes shown%s.", out_kept, out_bytes, err_kept, err_bytes,
                                  tail ? " (the last ones)" : "") < 0)
                return -ENOMEM;
        if (!note && timed_out && !(note = strdup("Timed out: killed when its timeout ran out.")))
                return -ENOMEM;
        if (!note && oom && !(note = strdup("Out of memory: killed by the sandbox's memory limit (memory_mb).")))
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, note, timed_out || oom);
}

/* run_code: an ephemeral sandbox of the language's template, which sandboxd lets go after
 * its one Exec, or when it refused it. */
static const struct {
        const char *language, *template;
} runtimes[] = {
        { "python", "python" },
        { "node",   "node"   },
        { "bash",   "shell"  },
};

static int run_code_ran(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        return finish_exec(r, parameters, false);
}

static int run_code_created(McpRequest *r, json_object *parameters, const char *error) {
        const char *language = mcp_arg_string(r, "language");
        json_object *v;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!json_object_object_get_ex(parameters, "id", &v))
                return -EBADMSG;
        r->sandbox_id = strdup(json_object_get_string(v));
        if (!r->sandbox_id)
                return -ENOMEM;
        return exec_code_call(r, language, run_code_ran);
}

/* The tool arguments that set CreateSandbox's options: the option by its snake_case name
 * in the core's table (sandbox_option_from_snake(), sandbox-api.h), and, for a number MCP
 * takes in a unit of its own (MiB, percent of a CPU), what one of it is in the core's
 * (bytes, µs per second); 0: passed on as it is (a string, an array, an object). "lifetime"
 * and Ephemeral are create_options()'s. */
static const struct {
        const char *arg;
        const char *option;
        int64_t scale;
} create_args[] = {
        { "memory_mb",     "memory_max",             MiB },
        { "cpu_percent",   "cpu_quota_per_sec_usec", 10000 },
        { "tasks_max",     "tasks_max",              1 },
        { "disk_mb",       "disk_max",               MiB },
        { "idle_timeout",  "idle_timeout",           1 },
        { "egress_allow",  "egress_allow",           0 },
        { "egress_deny",   "egress_deny",            0 },
        { "labels",        "labels",                 0 },
        { "secrets",       "secrets",                0 },
        { "name",          "name",                   0 },
        { "idle_action",   "idle_action",            0 },
        { "from_snapshot", "from_snapshot",          0 },
};

static int create_option_add(json_object *o, const char *snake, json_object *v) {
        const char *option = sandbox_option_from_snake(snake);

        assert(option);
        return json_add(o, option, v);
}

/* CreateSandbox's options from sandbox_create's, sandbox_fork's and run_code's arguments. */
static json_object *create_options(McpRequest *r, bool ephemeral, bool default_lifetime) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (ephemeral && create_option_add(o, "ephemeral", json_object_new_boolean(true)) < 0)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(create_args); i++) {
                if (!mcp_arg_has(r, create_args[i].arg))
                        continue;
                json_object *v = create_args[i].scale > 0 ?
                        json_object_new_int64(mcp_arg_int(r, create_args[i].arg, 0) * create_args[i].scale) :
                        json_object_get(mcp_arg(r, create_args[i].arg));
                if (create_option_add(o, create_args[i].option, v) < 0)
                        return NULL;
        }
        /* A sandbox made over MCP without a lifetime gets the server's default: an agent
         * that forgets sandbox_destroy does not leak it (sandboxd-mcp(1)). */
        if (mcp_arg_has(r, "lifetime") || (default_lifetime && r->server->default_lifetime_sec > 0)) {
                int64_t sec = mcp_arg_int(r, "lifetime", (int64_t) r->server->default_lifetime_sec);
                if (create_option_add(o, "timeout", json_object_new_int64(sec)) < 0)
                        return NULL;
        }
        return TAKE_PTR(o);
}

static int create_call(McpRequest *r, const char *template, bool ephemeral, mcp_step_t step) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p ||
            json_add(p, "template", json_object_new_string(template)) < 0 ||
            /* run_code's sandbox ends with its one command: no default lifetime. */
            json_add(p, "options", create_options(r, ephemeral, !ephemeral)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "CreateSandbox", TAKE_PTR(p), step);
}

/* run_code in a sandbox of the caller's: a cell of its code context (context_id, or the
 * sandbox's default one of the language), whose variables last from call to call. Images
 * among its results are MCP image content; the rest is the structured content. */
static int add_text_field(json_object *o, const char *key, json_object *events, const char *type) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0;

        for (size_t i = 0; i < json_object_array_length(events); i++) {
                json_object *e = json_object_array_get_idx(events, i), *v;
                const char *t = json_object_object_get_ex(e, "type", &v) ? json_object_get_string(v) : "";
                if (!streq(t, type) || !json_object_object_get_ex(e, "text", &v))
                        continue;
                size_t k = json_object_get_string_len(v);
                char *b = realloc(text, n + k + 1);
                if (!b)
                        return -ENOMEM;
                text = b;
                memcpy(text + n, json_object_get_string(v), k);
                n += k;
                text[n] = 0;
        }
        return json_add(o, key, json_object_new_string_len(text ?: "", (int) n));
}

static int context_ran(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object(), *results = json_object_new_array(),
                                   *images = json_object_new_array();
        json_object *events = NULL, *result = NULL, *v;
        _cleanup_free_ char *note = NULL;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o || !results || !images)
                return -ENOMEM;
        (void) json_object_object_get_ex(parameters, "events", &events);
        (void) json_object_object_get_ex(parameters, "result", &result);
        if (!events || !result)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(events); i++) {
                json_object *e = json_object_array_get_idx(events, i), *data, *d, *main;
                if (!json_object_object_get_ex(e, "type", &v) || !streq(json_object_get_string(v), "result") ||
                    !json_object_object_get_ex(e, "data", &data))
                        continue;
                d = json_object_new_object();
                if (!d || json_object_array_add(results, d) < 0) {
                        json_object_put(d);
                        return -ENOMEM;
                }
                json_object_object_foreach(data, mime, value) {
                        if (streq(mime, "image/png") || streq(mime, "image/jpeg") || streq(mime, "image/gif")) {
                                _cleanup_json_ json_object *img = json_object_new_object();
                                _cleanup_free_ char *said = NULL;
                                if (!img || json_add(img, "type", json_object_new_string("image")) < 0 ||
                                    json_add(img, "data", json_object_get(value)) < 0 ||
                                    json_add(img, "mimeType", json_object_new_string(mime)) < 0 ||
                                    json_object_array_add(images, TAKE_PTR(img)) < 0 ||
                                    asprintf(&said, "(image content %zu)", json_object_array_length(images)) < 0 ||
                                    json_add(d, mime, json_object_new_string(said)) < 0)
                                        return -ENOMEM;
                        } else if (json_add(d, mime, json_object_get(value)) < 0)
                                return -ENOMEM;
                }
                if (json_object_object_get_ex(e, "isMainResult", &main) &&
                    json_add(d, "is_main_result", json_object_new_boolean(json_object_get_boolean(main))) < 0)
                        return -ENOMEM;
        }
        if (json_add(o, "context_id", json_object_get(json_object_object_get_ex(result, "context", &v) ? v : NULL)) < 0 ||
            json_add(o, "execution_count", json_object_new_int64(json_int_field(result, "executionCount"))) < 0 ||
            json_add(o, "status", json_object_get(json_object_object_get_ex(result, "status", &v) ? v : NULL)) < 0 ||
            add_text_field(o, "stdout", events, "stdout") < 0 ||
            add_text_field(o, "stderr", events, "stderr") < 0 ||
            json_add(o, "results", TAKE_PTR(results)) < 0 ||
            (json_object_object_get_ex(result, "error", &v) && json_add(o, "error", json_object_get(v)) < 0) ||
            json_add(o, "truncated", json_object_new_boolean(json_bool_field(result, "truncated"))) < 0 ||
            json_add(o, "interrupted", json_object_new_boolean(json_bool_field(result, "interrupted"))) < 0 ||
            json_add(o, "timed_out", json_object_new_boolean(json_bool_field(result, "timedOut"))) < 0 ||
            json_add(o, "duration_ms", json_object_new_int64(json_int_field(result, "durationUSec") / 1000)) < 0)
                return -ENOMEM;
        if (json_bool_field(result, "truncated") &&
            asprintf(&note, "Output truncated: the cell wrote %" PRIi64 " bytes; the rest was dropped.",
                     json_int_field(result, "outputBytes")) < 0)
                return -ENOMEM;
        if (!note && json_bool_field(result, "timedOut") &&
            !(note = strdup("Timed out: the cell was interrupted when its timeout ran out; the context keeps its state.")))
                return -ENOMEM;
        return mcp_request_finish_content(r, o, note, images, json_bool_field(result, "timedOut"));
}

static int run_in_context(McpRequest *r, const char *language) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object();
        const char *context = mcp_arg_string(r, "context_id");

        if (streq(language, "bash"))
                return mcp_request_finish_errorf(r, "bash has no code context: use run_command in the sandbox.");
        if (mcp_arg_has(r, "stdin") || mcp_arg_has(r, "memory_mb"))
                return mcp_request_finish_errorf(r, "stdin and memory_mb are not taken with sandbox_id (a cell has no "
                                                 "standard input; the sandbox has its limits).");
        r->sandbox_id = strdup(mcp_arg_string(r, "sandbox_id"));
        if (!r->sandbox_id)
                return -ENOMEM;
        r->sandbox_given = true;
        if (!p || !o ||
            json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0 ||
            json_add(p, "code", json_object_new_string(mcp_arg_string(r, "code") ?: "")) < 0 ||
            (context && json_add(p, "context", json_object_new_string(context)) < 0) ||
            (!context && json_add(p, "language", json_object_new_string(streq(language, "node") ? "javascript" : language)) < 0) ||
            json_add(o, "OutputMax", json_object_new_int(MCP_OUTPUT_MAX * 16)) < 0)
                return -ENOMEM;
        if (mcp_arg_has(r, "timeout")) {
                const char *option;
                uint64_t value;
                if (json_timeout_option(mcp_arg(r, "timeout"), &option, &value) < 0 ||
                    json_add(o, option, json_object_new_uint64(value)) < 0)
                        return -ENOMEM;
        }
        if (json_add(p, "options", TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "RunCode", TAKE_PTR(p), context_ran);
}

static int run_code(McpRequest *r) {
        const char *language = mcp_arg_string(r, "language");

        if (mcp_arg_has(r, "sandbox_id"))
                return run_in_context(r, language);
        if (mcp_arg_has(r, "context_id"))
                return mcp_request_finish_errorf(r, "context_id needs the sandbox_id it is in.");

        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (streq(language, runtimes[i].language))
                        return create_call(r, runtimes[i].template, true, run_code_created);
        return -EINVAL;
}

/* run_command: Start, Wait, ReadOutput, so that a cancelled call can kill its command
 * (kills_on_cancel: the process is named by Start's reply); the output kept is the last
 * MCP_OUTPUT_MAX bytes of each stream. */
static json_object *params_process(McpRequest *r, uint64_t process) {
        _cleanup_json_ json_object *p = params_sandbox(r);

        if (!p || json_add(p, "process", json_object_new_uint64(process)) < 0)
                return NULL;
        return TAKE_PTR(p);
}

static int run_command_read(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (json_add(r->scratch, "stdout", json_object_get(json_object_object_get(parameters, "stdout"))) < 0 ||
            json_add(r->scratch, "stderr", json_object_get(json_object_object_get(parameters, "stderr"))) < 0)
                return -ENOMEM;
        return finish_exec(r, r->scratch, true);
}

static int run_command_waited(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        r->scratch = json_object_get(parameters);
        return mcp_request_call(r, "ReadOutput", params_process(r, r->process), run_command_read);
}

static int run_command_started(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *p = NULL;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        r->process = (uint64_t) json_int_field(parameters, "process");
        p = params_process(r, r->process);
        /* No limit here: the command's own Timeout ends it. */
        if (!p || json_add(p, "timeoutSec", json_object_new_int(0)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Wait", TAKE_PTR(p), run_command_waited);
}

/* Exec's default timeout, which a background process does not have by itself. */
static json_object *start_options(McpRequest *r, bool timeout_default) {
        _cleanup_json_ json_object *o = exec_options(r);

        if (o && timeout_default && !mcp_arg_has(r, "timeout") &&
            json_add(o, "Timeout", json_object_new_uint64(EXEC_TIMEOUT_DEFAULT_SEC)) < 0)
                return NULL;
        if (o && mcp_arg_bool(r, "stdin_pipe", false) && json_add(o, "StdinPipe", json_object_new_boolean(true)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int start_call(McpRequest *r, bool timeout_default, mcp_step_t step) {
        _cleanup_json_ json_object *p = params_sandbox(r), *a = argv_new("sh", "-c", mcp_arg_string(r, "command"));

        if (!p || !a ||
            json_add(p, "argv", TAKE_PTR(a)) < 0 ||
            json_add(p, "options", start_options(r, timeout_default)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Start", TAKE_PTR(p), step);
}

static int run_command(McpRequest *r) {
        return start_call(r, true, run_command_started);
}

/* ---- background processes ---- */

static int process_started(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o || json_add(o, "process_id", json_object_new_int64(json_int_field(parameters, "process"))) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_start(McpRequest *r) {
        return start_call(r, false, process_started);
}

static int processes_listed(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object(), *l = json_object_new_array();
        json_object *ps;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o || !l)
                return -ENOMEM;
        ps = json_object_object_get(parameters, "processes");
        for (size_t i = 0; i < json_object_array_length(ps); i++) {
                json_object *p = json_object_array_get_idx(ps, i), *e = json_object_new_object();
                bool running = streq(json_object_get_string(json_object_object_get(p, "state")), "running");
                if (!e || json_object_array_add(l, e) < 0) {
                        json_object_put(e);
                        return -ENOMEM;
                }
                if (json_add(e, "process_id", json_object_new_int64(json_int_field(p, "process"))) < 0 ||
                    json_add(e, "pid", json_object_new_int64(json_int_field(p, "pid"))) < 0 ||
                    json_add(e, "argv", json_object_get(json_object_object_get(p, "argv"))) < 0 ||
                    json_add(e, "running", json_object_new_boolean(running)) < 0 ||
                    (!running && json_add(e, "exit_code", json_object_new_int64(json_int_field(p, "exitStatus"))) < 0))
                        return -ENOMEM;
        }
        if (json_add(o, "processes", TAKE_PTR(l)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_list(McpRequest *r) {
        return mcp_request_call(r, "ListProcesses", params_sandbox(r), processes_listed);
}

static uint64_t arg_process(McpRequest *r) {
        return (uint64_t) mcp_arg_int(r, "process_id", 0);
}

static int process_output_read(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int64_t from[2] = { mcp_arg_int(r, "stdout_offset", 0), mcp_arg_int(r, "stderr_offset", 0) };
        size_t kept[2];

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o ||
            json_add(o, "process_id", json_object_new_uint64(arg_process(r))) < 0 ||
            json_add(o, "running", json_object_new_boolean(json_bool_field(parameters, "running"))) < 0 ||
            add_output(o, parameters, "stdout", &kept[0]) < 0 ||
            add_output(o, parameters, "stderr", &kept[1]) < 0 ||
            json_add(o, "stdout_offset", json_object_new_int64(json_int_field(parameters, "stdoutTotal"))) < 0 ||
            json_add(o, "stderr_offset", json_object_new_int64(json_int_field(parameters, "stderrTotal"))) < 0 ||
            /* What sandboxd's bound dropped between the offsets given and this output. */
            json_add(o, "dropped", json_object_new_int64(json_int_field(parameters, "stdoutTotal") - from[0] -
                                                         (int64_t) kept[0] + json_int_field(parameters, "stderrTotal") -
                                                         from[1] - (int64_t) kept[1])) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_read(McpRequest *r) {
        _cleanup_json_ json_object *p = params_process(r, arg_process(r));

        if (!p ||
            json_add(p, "stdoutOffset", json_object_new_int64(mcp_arg_int(r, "stdout_offset", 0))) < 0 ||
            json_add(p, "stderrOffset", json_object_new_int64(mcp_arg_int(r, "stderr_offset", 0))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "ReadOutput", TAKE_PTR(p), process_output_read);
}

static int process_signalled(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o ||
            json_add(o, "process_id", json_object_new_uint64(arg_process(r))) < 0 ||
            json_add(o, "signal", json_object_new_string(mcp_arg_string(r, "signal") ?: "KILL")) < 0 ||
            json_add(o, "sent", json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_signal(McpRequest *r) {
        _cleanup_json_ json_object *p = params_process(r, arg_process(r));
        int sig = SIGKILL;

        if (mcp_arg_has(r, "signal") && signal_from_string(mcp_arg_string(r, "signal"), &sig) < 0)
                return mcp_request_finish_errorf(r, "Invalid arguments for process_signal: signal must be a name "
                                                 "(TERM, INT, KILL, HUP, USR1, ...) or a number from 1 to 64");
        if (!p || json_add(p, "signal", json_object_new_int(sig)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Signal", TAKE_PTR(p), process_signalled);
}

static int process_waited(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *info = json_object_object_get(parameters, "info");

        if (!o || json_add(o, "process_id", json_object_new_uint64(arg_process(r))) < 0)
                return -ENOMEM;
        if (error && streq(error, VARLINK_IFACE ".StillRunning")) {
                if (json_add(o, "running", json_object_new_boolean(true)) < 0)
                        return -ENOMEM;
                return mcp_request_finish_structured(r, o, "Still running: wait again, or read its output with "
                                                     "process_read.", false);
        }
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (json_add(o, "running", json_object_new_boolean(false)) < 0 ||
            json_add(o, "exit_code", json_object_new_int64(json_int_field(parameters, "exitStatus"))) < 0 ||
            json_add(o, "signal", json_object_new_int64(json_int_field(info, "signal"))) < 0 ||
            json_add(o, "timed_out", json_object_new_boolean(json_bool_field(info, "timedOut"))) < 0 ||
            json_add(o, "oom_killed", json_object_new_boolean(json_bool_field(info, "oomKilled"))) < 0 ||
            json_add(o, "duration_ms", json_object_new_int64(json_int_field(info, "durationUSec") / 1000)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_wait(McpRequest *r) {
        _cleanup_json_ json_object *p = params_process(r, arg_process(r));

        if (!p || json_add(p, "timeoutSec", json_object_new_int64(mcp_arg_int(r, "timeout", 60))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Wait", TAKE_PTR(p), process_waited);
}

static int process_input_closed(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();
        const char *data = mcp_arg_string(r, "data");

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o ||
            json_add(o, "process_id", json_object_new_uint64(arg_process(r))) < 0 ||
            json_add(o, "bytes", json_object_new_int64(data ? (int64_t) strlen(data) : 0)) < 0 ||
            json_add(o, "closed", json_object_new_boolean(mcp_arg_bool(r, "close", false))) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int process_input_written(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!mcp_arg_bool(r, "close", false))
                return process_input_closed(r, parameters, NULL);
        return mcp_request_call(r, "CloseStdin", params_process(r, arg_process(r)), process_input_closed);
}

static int process_write_stdin(McpRequest *r) {
        _cleanup_json_ json_object *p = params_process(r, arg_process(r));
        const char *data = mcp_arg_string(r, "data");

        if (!data)
                return process_input_written(r, NULL, NULL);
        if (!p || json_add(p, "data", json_object_new_base64(data, strlen(data))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "WriteStdin", TAKE_PTR(p), process_input_written);
}

/* ---- sandboxes ---- */

/* {key: the reply's key}: GetSandbox's sandbox, ListTemplates' templates. */
static int finish_field(McpRequest *r, json_object *parameters, const char *error, const char *key) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *v;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o)
                return -ENOMEM;
        if (!json_object_object_get_ex(parameters, key, &v))
                return -EBADMSG;
        if (json_add(o, key, json_object_get(v)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int step_sandbox(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "sandbox");
}

static int get_sandbox_call(McpRequest *r) {
        return mcp_request_call(r, "GetSandbox", params_sandbox(r), step_sandbox);
}

static int sandbox_created(McpRequest *r, json_object *parameters, const char *error) {
        json_object *v;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!json_object_object_get_ex(parameters, "id", &v))
                return -EBADMSG;
        free(r->sandbox_id);    /* Fork's, Wake's: the source's id or name */
        r->sandbox_id = strdup(json_object_get_string(v));
        if (!r->sandbox_id)
                return -ENOMEM;
        return get_sandbox_call(r);
}

static int sandbox_create(McpRequest *r) {
        return create_call(r, mcp_arg_string(r, "template") ?: "python", false, sandbox_created);
}

static int sandbox_info(McpRequest *r) {
        return get_sandbox_call(r);
}

static int ports_listed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "ports");
}

static int sandbox_ports(McpRequest *r) {
        return mcp_request_call(r, "ListPorts", params_sandbox(r), ports_listed);
}

static int sandboxes_listed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "sandboxes");
}

static int sandbox_list(McpRequest *r) {
        _cleanup_json_ json_object *p = json_object_new_object(), *filter = NULL;

        if (!p)
                return -ENOMEM;
        if (mcp_arg_has(r, "label")) {
                filter = json_object_new_object();
                if (!filter || json_add(filter, "Label", json_object_get(mcp_arg(r, "label"))) < 0 ||
                    json_add(p, "filter", TAKE_PTR(filter)) < 0)
                        return -ENOMEM;
        }
        return mcp_request_call(r, "ListSandboxes", TAKE_PTR(p), sandboxes_listed);
}

/* Destroy, Remove: {what: its name, key: true}. */
static int finish_done(McpRequest *r, json_object *parameters, const char *error, const char *what,
                       const char *name, const char *key) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o ||
            json_add(o, what, json_object_new_string(name)) < 0 ||
            json_add(o, key, json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int step_destroyed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_done(r, parameters, error, "sandbox_id", r->sandbox_id, "destroyed");
}

static int sandbox_destroy(McpRequest *r) {
        return mcp_request_call(r, "Destroy", params_sandbox(r), step_destroyed);
}

/* Pause, Resume: the sandbox as it is then. */
static int step_sandbox_after(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        return get_sandbox_call(r);
}

static int sandbox_pause(McpRequest *r) {
        return mcp_request_call(r, "Pause", params_sandbox(r), step_sandbox_after);
}

static int sandbox_resume(McpRequest *r) {
        return mcp_request_call(r, "Resume", params_sandbox(r), step_sandbox_after);
}

static int templates_listed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "templates");
}

static int templates_list(McpRequest *r) {
        return mcp_request_call(r, "ListTemplates", json_object_new_object(), templates_listed);
}

/* GetQuota: {"scope": …, "quota": [{what, limit, use}]}. */
static int quota_got(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        return mcp_request_finish_structured(r, json_object_get(parameters), NULL, false);
}

static int quota_info(McpRequest *r) {
        return mcp_request_call(r, "GetQuota", json_object_new_object(), quota_got);
}

/* ---- snapshots (sandboxd-api(7), SNAPSHOTS) ---- */

static int step_snapshot(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "snapshot");
}

/* Snapshot, Hibernate: {"snapshot": …}. */
static int snapshot_call(McpRequest *r, const char *method) {
        _cleanup_json_ json_object *p = params_sandbox(r), *o = json_object_new_object();

        if (!p || !o ||
            (mcp_arg_has(r, "include_tmp") &&
             json_add(o, "IncludeTmp", json_object_new_boolean(mcp_arg_bool(r, "include_tmp", false))) < 0) ||
            json_add(p, "options", TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, method, TAKE_PTR(p), step_snapshot);
}

static int sandbox_snapshot(McpRequest *r) {
        return snapshot_call(r, "Snapshot");
}

static int sandbox_hibernate(McpRequest *r) {
        return snapshot_call(r, "Hibernate");
}

/* Fork, Wake: the sandbox they answer the id of. */
static int sandbox_fork(McpRequest *r) {
        _cleanup_json_ json_object *p = params_sandbox(r);

        if (!p || json_add(p, "options", create_options(r, false, false)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Fork", TAKE_PTR(p), sandbox_created);
}

static int sandbox_wake(McpRequest *r) {
        return mcp_request_call(r, "Wake", params_sandbox(r), sandbox_created);
}

static int snapshots_listed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_field(r, parameters, error, "snapshots");
}

static int snapshot_list(McpRequest *r) {
        return mcp_request_call(r, "ListSnapshots", json_object_new_object(), snapshots_listed);
}

static int step_snapshot_removed(McpRequest *r, json_object *parameters, const char *error) {
        return finish_done(r, parameters, error, "snapshot_id", mcp_arg_string(r, "snapshot_id"), "removed");
}

static int snapshot_remove(McpRequest *r) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "snapshot", json_object_new_string(mcp_arg_string(r, "snapshot_id"))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "RemoveSnapshot", TAKE_PTR(p), step_snapshot_removed);
}

/* ---- files ---- */

static int file_read_done(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ void *data = NULL;
        _cleanup_free_ char *note = NULL;
        json_object *v;
        size_t n;
        bool truncated, text;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o)
                return -ENOMEM;
        if (!json_object_object_get_ex(parameters, "data", &v) ||
            base64_decode(json_object_get_string(v), &data, &n) < 0)
                return -EBADMSG;
        /* One byte more than shown was asked for: whether it came says if there is more. */
        truncated = n > MCP_FILE_READ_MAX;
        n = MIN(n, (size_t) MCP_FILE_READ_MAX);
        if (json_add(o, "path", json_object_new_string(mcp_arg_string(r, "path"))) < 0 ||
            json_add(o, "content", json_object_new_bytes(data, n, &text)) < 0 ||
            json_add(o, "encoding", json_object_new_string(text ? "utf-8" : "base64")) < 0 ||
            json_add(o, "bytes", json_object_new_int64((int64_t) n)) < 0 ||
            json_add(o, "truncated", json_object_new_boolean(truncated)) < 0)
                return -ENOMEM;
        if (truncated && asprintf(&note, "Truncated: the first %zu bytes from offset %" PRIi64 " shown; read on with "
                                  "offset.", n, mcp_arg_int(r, "offset", 0)) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, note, false);
}

static int file_read(McpRequest *r) {
        _cleanup_json_ json_object *p = params_sandbox_path(r, NULL);

        if (!p ||
            json_add(p, "offset", json_object_new_int64(mcp_arg_int(r, "offset", 0))) < 0 ||
            json_add(p, "length", json_object_new_int64(MCP_FILE_READ_MAX + 1)) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "ReadFile", TAKE_PTR(p), file_read_done);
}

/* A file_write's content goes in parts of at most FILE_PART_MAX, the most WriteFile takes,
 * the later ones appended: r->scratch holds the bytes ("data"), how far they went
 * ("offset") and what sandboxd counted ("bytes"). */
static int file_write_part(McpRequest *r);

static int file_written(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = NULL;
        json_object *offset = json_object_object_get(r->scratch, "offset");
        json_object *bytes = json_object_object_get(r->scratch, "bytes");
        int64_t size = json_object_get_string_len(json_object_object_get(r->scratch, "data"));

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (json_object_set_int64(bytes, json_object_get_int64(bytes) + json_int_field(parameters, "bytes")) == 0)
                return -ENOMEM;
        if (json_object_get_int64(offset) < size)
                return file_write_part(r);
        o = json_object_new_object();
        if (!o ||
            json_add(o, "path", json_object_new_string(mcp_arg_string(r, "path"))) < 0 ||
            json_add(o, "bytes", json_object_new_int64(json_object_get_int64(bytes))) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, NULL, false);
}

static int file_write_part(McpRequest *r) {
        _cleanup_json_ json_object *p = params_sandbox_path(r, NULL), *o = json_object_new_object();
        json_object *data = json_object_object_get(r->scratch, "data");
        json_object *offset = json_object_object_get(r->scratch, "offset");
        int64_t at = json_object_get_int64(offset), size = json_object_get_string_len(data);
        size_t n = MIN((size_t) (size - at), (size_t) FILE_PART_MAX);

        if (!p || !o ||
            json_add(o, "CreateParents", json_object_new_boolean(true)) < 0 ||
            json_add(o, "Append", json_object_new_boolean(at > 0 || mcp_arg_bool(r, "append", false))) < 0 ||
            (mcp_arg_has(r, "mode") && json_add(o, "Mode", json_object_new_int64(mcp_arg_int(r, "mode", 0))) < 0) ||
            json_add(p, "data", json_object_new_base64(json_object_get_string(data) + at, n)) < 0 ||
            json_add(p, "options", TAKE_PTR(o)) < 0 ||
            json_object_set_int64(offset, at + (int64_t) n) == 0)
                return -ENOMEM;
        return mcp_request_call(r, "WriteFile", TAKE_PTR(p), file_written);
}

static int file_write(McpRequest *r) {
        _cleanup_json_ json_object *scratch = json_object_new_object();
        const char *content = mcp_arg_string(r, "content");
        _cleanup_free_ void *bytes = NULL;
        size_t n = strlen(content);

        if (!scratch)
                return -ENOMEM;
        if (streq_ptr(mcp_arg_string(r, "encoding"), "base64")) {
                if (base64_decode(content, &bytes, &n) < 0)
                        return mcp_request_finish_errorf(r, "Invalid arguments for file_write: content is not base64");
                content = bytes;
        }
        if (json_add(scratch, "data", json_object_new_string_len(content, (int) n)) < 0 ||
            json_add(scratch, "offset", json_object_new_int64(0)) < 0 ||
            json_add(scratch, "bytes", json_object_new_int64(0)) < 0)
                return -ENOMEM;
        json_object_put(r->scratch);
        r->scratch = TAKE_PTR(scratch);
        return file_write_part(r);
}

static int files_listed(McpRequest *r, json_object *parameters, const char *error) {
        _cleanup_json_ json_object *o = json_object_new_object(), *l = json_object_new_array();
        _cleanup_free_ char *note = NULL;
        json_object *entries;
        size_t n;

        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        if (!o || !l)
                return -ENOMEM;
        if (!json_object_object_get_ex(parameters, "entries", &entries))
                return -EBADMSG;
        n = json_object_array_length(entries);
        for (size_t i = 0; i < MIN(n, (size_t) MCP_FILE_LIST_MAX); i++) {
                static const char *const fields[] = { "path", "type", "size", "mode", "mtime", "target" };
                json_object *e = json_object_array_get_idx(entries, i), *f = json_object_new_object(), *v;
                if (!f || json_object_array_add(l, f) < 0) {
                        json_object_put(f);
                        return -ENOMEM;
                }
                /* What a model needs of each; the bytes of non-UTF-8 names stay with sandboxd. */
                for (size_t k = 0; k < ELEMENTSOF(fields); k++)
                        if (json_object_object_get_ex(e, fields[k], &v) &&
                            json_add(f, fields[k], json_object_get(v)) < 0)
                                return -ENOMEM;
        }
        if (json_add(o, "path", json_object_new_string(mcp_arg_string(r, "path") ?: ".")) < 0 ||
            json_add(o, "entries", TAKE_PTR(l)) < 0 ||
            json_add(o, "truncated", json_object_new_boolean(n > MCP_FILE_LIST_MAX)) < 0)
                return -ENOMEM;
        if (n > MCP_FILE_LIST_MAX && asprintf(&note, "Truncated: %u of %zu entries shown; list a subdirectory or "
                                              "a smaller depth.", MCP_FILE_LIST_MAX, n) < 0)
                return -ENOMEM;
        return mcp_request_finish_structured(r, o, note, false);
}

static int file_list(McpRequest *r) {
        _cleanup_json_ json_object *p = params_sandbox_path(r, ".");

        if (!p || json_add(p, "depth", json_object_new_int64(mcp_arg_int(r, "depth", 1))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "ListFiles", TAKE_PTR(p), files_listed);
}

static int file_deleted(McpRequest *r, json_object *parameters, const char *error) {
        return finish_done(r, parameters, error, "path", mcp_arg_string(r, "path"), "deleted");
}

static int file_delete(McpRequest *r) {
        _cleanup_json_ json_object *p = params_sandbox_path(r, NULL);

        if (!p || json_add(p, "recursive", json_object_new_boolean(mcp_arg_bool(r, "recursive", false))) < 0)
                return -ENOMEM;
        return mcp_request_call(r, "Remove", TAKE_PTR(p), file_deleted);
}

/* ---- the table ---- */

static const McpArg run_code_args[] = {
        { "language", MCP_ARG_STRING, true, "python (Python 3), node (Node.js) or bash", .choices = languages },
        { "code", MCP_ARG_STRING, true, "The program's source", .max = MCP_CODE_MAX },
        ARG_TIMEOUT,
        ARG_MEMORY_MB,
        { "stdin", MCP_ARG_STRING, false, "Text given to the program on its standard input (not with sandbox_id)",
          .max = MCP_FILE_WRITE_MAX },
        { "sandbox_id", MCP_ARG_STRING, false, "Run as a cell of a code context in this sandbox (from "
          "sandbox_create; the python-data template has numpy, pandas, matplotlib): variables last from call to "
          "call, figures come back as images", .max = 64 },
        { "context_id", MCP_ARG_STRING, false, "The code context (a previous result's context_id; default: the "
          "sandbox's own of the language)", .max = 64 },
        ARG_END
};

static const McpArg sandbox_create_args[] = {
        { "template", MCP_ARG_STRING, false, "The template (see templates_list; default python)", .max = 64 },
        { "name", MCP_ARG_STRING, false, "A name to find it by instead of its id (A-Z a-z 0-9 . _ -)", .max = 64 },
        ARG_MEMORY_MB,
        ARG_LIMITS,
        { "lifetime", MCP_ARG_INTEGER, false, "Seconds after which it is destroyed (default: the server's, one hour "
          "unless configured; 0: none)", .min = 0, .max = 30 * 24 * 3600 },
        { "idle_timeout", MCP_ARG_INTEGER, false, "Seconds without a running command after which it is destroyed "
          "(0: never)", .min = 0, .max = 30 * 24 * 3600 },
        ARG_IDLE_ACTION,
        { "from_snapshot", MCP_ARG_STRING, false, "A snapshot id (sandbox_snapshot, snapshot_list): start with its "
          "files", .max = 64 },
        ARG_EGRESS,
        { "labels", MCP_ARG_STRING_MAP, false, "Labels to find it by (sandbox_list's label): keys like Kubernetes' "
          "([prefix/]name, letters, digits, - _ .), values text of up to 256 bytes; at most 64" },
        { "secrets", MCP_ARG_STRINGS, false, "Secrets of your store (sandboxctl secret set) bound into it: NAME (an "
          "environment variable), NAME:file (/run/secrets/NAME) or NAME@HOST:HEADER (added by the egress proxy to "
          "requests for https://HOST; the sandbox never holds it)" },
        ARG_END
};

static const McpArg sandbox_list_args[] = {
        { "label", MCP_ARG_STRINGS, false, "Only sandboxes with every one of these labels: KEY=VALUE, or KEY for "
          "any value" },
        ARG_END
};

static const McpArg sandbox_fork_args[] = {
        ARG_SANDBOX_ID,
        { "name", MCP_ARG_STRING, false, "A name for the new sandbox (default: none)", .max = 64 },
        ARG_MEMORY_MB,
        { "lifetime", MCP_ARG_INTEGER, false, "Seconds after which it is destroyed (default: the source's)",
          .min = 0, .max = 30 * 24 * 3600 },
        { "idle_timeout", MCP_ARG_INTEGER, false, "Seconds without a running command after which idle_action is "
          "taken (default: the source's; 0: never)", .min = 0, .max = 30 * 24 * 3600 },
        ARG_IDLE_ACTION,
        ARG_END
};

static const McpArg sandbox_snapshot_args[] = {
        ARG_SANDBOX_ID,
        ARG_INCLUDE_TMP,
        ARG_END
};

static const McpArg snapshot_remove_args[] = {
        { "snapshot_id", MCP_ARG_STRING, true, "The snapshot's id (from sandbox_snapshot or snapshot_list)", .max = 64 },
        ARG_END
};

static const McpArg no_args[] = {
        ARG_END
};

static const McpArg sandbox_args[] = {
        ARG_SANDBOX_ID,
        ARG_END
};

static const McpArg run_command_args[] = {
        ARG_SANDBOX_ID,
        { "command", MCP_ARG_STRING, true, "A shell command line, run with sh -c", .max = MCP_CODE_MAX },
        ARG_TIMEOUT,
        { "working_directory", MCP_ARG_STRING, false, "Absolute directory to run in (default /work)", .max = 4096 },
        { "env", MCP_ARG_STRINGS, false, "NAME=VALUE entries added to the environment" },
        { "stdin", MCP_ARG_STRING, false, "Text given to the command on its standard input", .max = MCP_FILE_WRITE_MAX },
        ARG_END
};

#define ARG_PROCESS_ID                                                                          \
        { "process_id", MCP_ARG_INTEGER, true, "The process (from process_start or process_list)", .min = 1, \
          .max = INT32_MAX }

static const McpArg process_start_args[] = {
        ARG_SANDBOX_ID,
        { "command", MCP_ARG_STRING, true, "A shell command line, run with sh -c", .max = MCP_CODE_MAX },
        { "timeout", MCP_ARG_SECONDS, false, "Seconds before it is killed (default: none; it runs until it exits, "
          "is signalled, or the sandbox ends)" },
        { "working_directory", MCP_ARG_STRING, false, "Absolute directory to run in (default /work)", .max = 4096 },
        { "env", MCP_ARG_STRINGS, false, "NAME=VALUE entries added to the environment" },
        { "stdin_pipe", MCP_ARG_BOOLEAN, false, "Keep its standard input open for process_write_stdin (default: "
          "empty input)" },
        ARG_END
};

static const McpArg process_read_args[] = {
        ARG_SANDBOX_ID,
        ARG_PROCESS_ID,
        { "stdout_offset", MCP_ARG_INTEGER, false, "Read stdout from here on: the stdout_offset of the last "
          "process_read (default 0, the start)", .min = 0, .max = INT64_MAX },
        { "stderr_offset", MCP_ARG_INTEGER, false, "The same for stderr", .min = 0, .max = INT64_MAX },
        ARG_END
};

static const McpArg process_signal_args[] = {
        ARG_SANDBOX_ID,
        ARG_PROCESS_ID,
        { "signal", MCP_ARG_STRING, false, "TERM, INT, KILL (default), HUP, USR1, ... or a number", .max = 16 },
        ARG_END
};

static const McpArg process_wait_args[] = {
        ARG_SANDBOX_ID,
        ARG_PROCESS_ID,
        { "timeout", MCP_ARG_INTEGER, false, "Seconds to wait at most (default 60; 0: until it ends)", .min = 0,
          .max = EXEC_TIMEOUT_MAX_SEC },
        ARG_END
};

static const McpArg process_write_stdin_args[] = {
        ARG_SANDBOX_ID,
        ARG_PROCESS_ID,
        { "data", MCP_ARG_STRING, false, "Text written to its standard input (started with stdin_pipe)",
          .max = MCP_FILE_WRITE_MAX },
        { "close", MCP_ARG_BOOLEAN, false, "Then close its input: it reads end of file" },
        ARG_END
};

static const McpArg file_read_args[] = {
        ARG_SANDBOX_ID,
        ARG_PATH(true, "The file"),
        { "offset", MCP_ARG_INTEGER, false, "Byte to start at (default 0); 262144 bytes are returned at most",
          .min = 0, .max = INT64_MAX },
        ARG_END
};

static const McpArg file_write_args[] = {
        ARG_SANDBOX_ID,
        ARG_PATH(true, "The file, created with its missing parent directories"),
        { "content", MCP_ARG_STRING, true, "What to write", .max = MCP_FILE_WRITE_MAX * 4 / 3 + 4 },
        { "encoding", MCP_ARG_STRING, false, "utf-8 (default): content is the text; base64: content is base64 of "
          "the bytes", .choices = encodings },
        { "append", MCP_ARG_BOOLEAN, false, "Append instead of replacing" },
        { "mode", MCP_ARG_INTEGER, false, "Permission bits of a new file (default 0644 = 420)", .min = 0, .max = 07777 },
        ARG_END
};

static const McpArg file_list_args[] = {
        ARG_SANDBOX_ID,
        ARG_PATH(false, "The directory (default /work)"),
        { "depth", MCP_ARG_INTEGER, false, "Levels to list (default 1)", .min = 1, .max = 16 },
        ARG_END
};

static const McpArg file_delete_args[] = {
        ARG_SANDBOX_ID,
        ARG_PATH(true, "The file or directory"),
        { "recursive", MCP_ARG_BOOLEAN, false, "Remove a directory with what it holds" },
        ARG_END
};

const McpTool mcp_tools[] = {
        {
                "run_code", "Run code",
                "Runs a Python, Node.js or bash program once, in a fresh isolated sandbox that is destroyed "
                "afterwards, and returns its exit code, stdout and stderr (each cut at 65536 bytes). With "
                "sandbox_id, runs it as a cell of a stateful code context (a Jupyter kernel for Python) in that "
                "sandbox instead: variables, imports and data last from call to call, and results come back "
                "rich (figures as images, tables as HTML and text, the last expression's value).",
                run_code_args,
                "{\"type\":\"object\",\"required\":[\"stdout\",\"stderr\"],\"anyOf\":[" RUN_RESULT_SCHEMA "," CELL_RESULT_SCHEMA "]}",
                .one_off = true,
                .run = run_code,
        },
        {
                "sandbox_create", "Create a sandbox",
                "Starts an isolated sandbox from a template, to run commands and keep files in across calls. "
                "Returns it; its id is the sandbox_id of the other tools. Destroy it when done.",
                sandbox_create_args,
                SANDBOX_RESULT_SCHEMA,
                .run = sandbox_create,
        },
        {
                "sandbox_list", "List sandboxes",
                "Lists the sandboxes you can use, or those with the labels given.",
                sandbox_list_args,
                OBJECT_SCHEMA("\"sandboxes\":{\"type\":\"array\",\"items\":" SANDBOX_SCHEMA "}", "\"sandboxes\""),
                .read_only = true, .idempotent = true,
                .run = sandbox_list,
        },
        {
                "sandbox_info", "Describe a sandbox",
                "A sandbox's state, template, limits and deadline.",
                sandbox_args,
                SANDBOX_RESULT_SCHEMA,
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = sandbox_info,
        },
        {
                "sandbox_ports", "List a sandbox's open ports",
                "What listens on TCP inside a sandbox (a server a command started): each address and port. "
                "Its owner reaches them through sandboxd-http's /api/v1/sessions/ID/ports/PORT/ or sandboxctl "
                "port-forward.",
                sandbox_args,
                OBJECT_SCHEMA("\"ports\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
                              "\"address\":{\"type\":\"string\"},\"port\":{\"type\":\"integer\"}},"
                              "\"required\":[\"address\",\"port\"]}}", "\"ports\""),
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = sandbox_ports,
        },
        {
                "sandbox_destroy", "Destroy a sandbox",
                "Stops a sandbox and deletes everything in it.",
                sandbox_args,
                OBJECT_SCHEMA("\"sandbox_id\":{\"type\":\"string\"},\"destroyed\":{\"type\":\"boolean\"}",
                              "\"sandbox_id\",\"destroyed\""),
                .destructive = true, .idempotent = true, .on_sandbox = true,
                .run = sandbox_destroy,
        },
        {
                "sandbox_pause", "Pause a sandbox",
                "Freezes every process of a sandbox (its files and memory are kept) until sandbox_resume.",
                sandbox_args,
                SANDBOX_RESULT_SCHEMA,
                .idempotent = true, .on_sandbox = true,
                .run = sandbox_pause,
        },
        {
                "sandbox_resume", "Resume a sandbox",
                "Lets the processes of a paused sandbox run again.",
                sandbox_args,
                SANDBOX_RESULT_SCHEMA,
                .idempotent = true, .on_sandbox = true,
                .run = sandbox_resume,
        },
        {
                "sandbox_snapshot", "Snapshot a sandbox",
                "Saves the files of a sandbox's /work (and /tmp with include_tmp) as a snapshot; the sandbox "
                "runs on. Start a sandbox from it with sandbox_create's from_snapshot. Processes and memory are "
                "not kept.",
                sandbox_snapshot_args,
                SNAPSHOT_RESULT_SCHEMA,
                .on_sandbox = true,
                .run = sandbox_snapshot,
        },
        {
                "sandbox_fork", "Fork a sandbox",
                "Starts a new sandbox with a copy of a sandbox's files (the source runs on, unchanged); each then "
                "goes its own way. Limits not given are the source's. Returns the new sandbox.",
                sandbox_fork_args,
                SANDBOX_RESULT_SCHEMA,
                .on_sandbox = true,
                .run = sandbox_fork,
        },
        {
                "sandbox_hibernate", "Hibernate a sandbox",
                "Saves a sandbox's files as a snapshot, then stops it (its processes end); sandbox_wake brings it "
                "back with the same id, name and files.",
                sandbox_snapshot_args,
                SNAPSHOT_RESULT_SCHEMA,
                .destructive = true, .on_sandbox = true,
                .run = sandbox_hibernate,
        },
        {
                "sandbox_wake", "Wake a sandbox",
                "Starts a hibernated sandbox again (by its id or name), with its files; returns it.",
                sandbox_args,
                SANDBOX_RESULT_SCHEMA,
                .on_sandbox = true,
                .run = sandbox_wake,
        },
        {
                "snapshot_list", "List snapshots",
                "Lists your snapshots, hibernated sandboxes' included, oldest first.",
                no_args,
                OBJECT_SCHEMA("\"snapshots\":{\"type\":\"array\",\"items\":" SNAPSHOT_SCHEMA "}", "\"snapshots\""),
                .read_only = true, .idempotent = true,
                .run = snapshot_list,
        },
        {
                "snapshot_remove", "Remove a snapshot",
                "Deletes a snapshot (a hibernated sandbox's too: it can no longer be woken).",
                snapshot_remove_args,
                OBJECT_SCHEMA("\"snapshot_id\":{\"type\":\"string\"},\"removed\":{\"type\":\"boolean\"}",
                              "\"snapshot_id\",\"removed\""),
                .destructive = true, .idempotent = true,
                .run = snapshot_remove,
        },
        {
                "run_command", "Run a command in a sandbox",
                "Runs a shell command in a sandbox (from /work by default) and returns its exit code, stdout and "
                "stderr (each cut at 65536 bytes). Files it leaves stay for the next calls.",
                run_command_args,
                RUN_RESULT_SCHEMA,
                .destructive = true, .on_sandbox = true, .kills_on_cancel = true,
                .run = run_command,
        },
        {
                "process_start", "Start a background process",
                "Starts a shell command in a sandbox in the background (a server, a watcher, a long build) and "
                "returns its process_id at once. It runs until it exits, is signalled, or the sandbox ends "
                "(no timeout unless given). Follow it with process_read, process_wait, process_signal.",
                process_start_args,
                OBJECT_SCHEMA("\"process_id\":{\"type\":\"integer\"}", "\"process_id\""),
                .destructive = true, .on_sandbox = true,
                .run = process_start,
        },
        {
                "process_list", "List background processes",
                "The background processes of a sandbox: running ones, and the last ones that ended with their "
                "exit code. pid is the process's id inside the sandbox.",
                sandbox_args,
                OBJECT_SCHEMA("\"processes\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
                              "\"properties\":{\"process_id\":{\"type\":\"integer\"},\"pid\":{\"type\":\"integer\"},"
                              "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                              "\"running\":{\"type\":\"boolean\"},\"exit_code\":{\"type\":\"integer\"}},"
                              "\"required\":[\"process_id\",\"pid\",\"running\"]}}",
                              "\"processes\""),
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = process_list,
        },
        {
                "process_read", "Read a background process's output",
                "What a background process wrote from the offsets on (sandboxd keeps the newest 64 KiB of each "
                "stream; dropped counts what was lost), whether it still runs, and the offsets to read on from.",
                process_read_args,
                OBJECT_SCHEMA("\"process_id\":{\"type\":\"integer\"},\"running\":{\"type\":\"boolean\"},"
                              "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
                              "\"stdout_encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"
                              "\"stderr_encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"
                              "\"stdout_offset\":{\"type\":\"integer\"},\"stderr_offset\":{\"type\":\"integer\"},"
                              "\"dropped\":{\"type\":\"integer\"}",
                              "\"process_id\",\"running\",\"stdout\",\"stderr\",\"stdout_offset\",\"stderr_offset\""),
                .read_only = true, .on_sandbox = true,
                .run = process_read,
        },
        {
                "process_signal", "Signal a background process",
                "Sends a signal (default KILL) to a background process and what it started.",
                process_signal_args,
                OBJECT_SCHEMA("\"process_id\":{\"type\":\"integer\"},\"signal\":{\"type\":\"string\"},"
                              "\"sent\":{\"type\":\"boolean\"}", "\"process_id\",\"sent\""),
                .destructive = true, .on_sandbox = true,
                .run = process_signal,
        },
        {
                "process_wait", "Wait for a background process",
                "Waits until a background process ends (at most timeout seconds) and returns how it ended, or "
                "running: true if it still runs. Cancelling the wait leaves the process running.",
                process_wait_args,
                OBJECT_SCHEMA("\"process_id\":{\"type\":\"integer\"},\"running\":{\"type\":\"boolean\"},"
                              "\"exit_code\":{\"type\":\"integer\"},\"signal\":{\"type\":\"integer\"},"
                              "\"timed_out\":{\"type\":\"boolean\"},\"oom_killed\":{\"type\":\"boolean\"},"
                              "\"duration_ms\":{\"type\":\"integer\"}", "\"process_id\",\"running\""),
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = process_wait,
        },
        {
                "process_write_stdin", "Write to a background process",
                "Writes text to the standard input of a background process started with stdin_pipe, and with "
                "close ends its input.",
                process_write_stdin_args,
                OBJECT_SCHEMA("\"process_id\":{\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"},"
                              "\"closed\":{\"type\":\"boolean\"}", "\"process_id\",\"bytes\",\"closed\""),
                .destructive = true, .on_sandbox = true,
                .run = process_write_stdin,
        },
        {
                "file_read", "Read a file",
                "Reads a file in a sandbox: text as it is, other bytes as base64; at most 262144 bytes per call.",
                file_read_args,
                OBJECT_SCHEMA("\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},"
                              "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]},"
                              "\"bytes\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}",
                              "\"path\",\"content\",\"encoding\",\"bytes\",\"truncated\""),
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = file_read,
        },
        {
                "file_write", "Write a file",
                "Writes (or appends to) a file in a sandbox, creating its parent directories.",
                file_write_args,
                OBJECT_SCHEMA("\"path\":{\"type\":\"string\"},\"bytes\":{\"type\":\"integer\"}",
                              "\"path\",\"bytes\""),
                .destructive = true, .on_sandbox = true,
                .run = file_write,
        },
        {
                "file_list", "List files",
                "Lists a directory in a sandbox (at most 1000 entries).",
                file_list_args,
                OBJECT_SCHEMA("\"path\":{\"type\":\"string\"},\"entries\":{\"type\":\"array\",\"items\":{"
                              "\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                              "\"type\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
                              "\"mode\":{\"type\":\"integer\"},\"mtime\":{\"type\":\"integer\"},"
                              "\"target\":{\"type\":\"string\"}},\"required\":[\"path\",\"type\"]}},"
                              "\"truncated\":{\"type\":\"boolean\"}",
                              "\"path\",\"entries\",\"truncated\""),
                .read_only = true, .idempotent = true, .on_sandbox = true,
                .run = file_list,
        },
        {
                "file_delete", "Delete a file",
                "Removes a file, or a directory (with recursive, also what it holds), in a sandbox.",
                file_delete_args,
                OBJECT_SCHEMA("\"path\":{\"type\":\"string\"},\"deleted\":{\"type\":\"boolean\"}",
                              "\"path\",\"deleted\""),
                .destructive = true, .idempotent = true, .on_sandbox = true,
                .run = file_delete,
        },
        {
                "templates_list", "List templates",
                "Lists the templates sandboxes are made from (run_code uses python, node and shell).",
                no_args,
                OBJECT_SCHEMA("\"templates\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
                              "\"name\":{\"type\":\"string\"},\"payload\":{\"type\":\"string\"},"
                              "\"description\":{\"type\":\"string\"}},\"required\":[\"name\"]}}",
                              "\"templates\""),
                .read_only = true, .idempotent = true,
                .run = templates_list,
        },
        {
                "quota_info", "Show your quota",
                "Shows your quota on this node: how many sandboxes, how much memory, tasks, disk and CPU they "
                "may hold together, snapshots, creates per second; each with its limit (0: none) and what is "
                "in use.",
                no_args,
                OBJECT_SCHEMA("\"scope\":{\"type\":\"string\"},\"quota\":{\"type\":\"array\",\"items\":"
                              "{\"type\":\"object\",\"properties\":{\"what\":{\"type\":\"string\"},"
                              "\"limit\":{\"type\":\"integer\"},\"use\":{\"type\":\"integer\"}},"
                              "\"required\":[\"what\",\"limit\",\"use\"]}}",
                              "\"scope\",\"quota\""),
                .read_only = true, .idempotent = true,
                .run = quota_info,
        },
        {}
};

const McpTool *mcp_tool_find(const char *name) {
        for (const McpTool *t = mcp_tools; t->name; t++)
                if (streq(t->name, name))
                        return t;
        return NULL;
}
