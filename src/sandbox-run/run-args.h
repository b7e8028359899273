/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandbox-run's pure parts, before anything talks to sandboxd: the command line, the
 * handler's language, the event and its "__timeout", the context given with --context.
 * Nothing here does I/O but the messages the command line parser prints. */

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

/* The exit codes (seed 003, sandbox-run(1)). */
typedef enum RunExit {
        RUN_EXIT_SUCCESS = 0,
        RUN_EXIT_ERROR = 1,     /* the handler raised, or a general error (a bad argument) */
        RUN_EXIT_FILE = 2,      /* the handler file (or --event-file) not found or unreadable */
        RUN_EXIT_SYNTAX = 3,    /* a syntax error in the handler file, or no such handler */
        RUN_EXIT_TIMEOUT = 4,   /* the handler ran past its timeout */
        RUN_EXIT_SANDBOX = 5,   /* no sandbox: sandboxd unreachable, no such template, refused */
} RunExit;

#define RUN_TIMEOUT_DEFAULT_SEC UINT64_C(300)
#define RUN_TIMEOUT_MAX_SEC UINT64_C(3600)
#define RUN_EVENT_TIMEOUT_KEY "__timeout"
#define RUN_HANDLER_DEFAULT "handler"

typedef enum RunLanguage {
        RUN_LANGUAGE_PYTHON,
        RUN_LANGUAGE_NODE,
        _RUN_LANGUAGE_MAX,
        _RUN_LANGUAGE_INVALID = -1,
} RunLanguage;

typedef struct RunArgs {
        const char *handler_file;
        const char *handler;            /* the function's name; RUN_HANDLER_DEFAULT */
        const char *event;              /* --event: JSON text; NULL: none */
        const char *event_file;         /* --event-file: a path, "-" for standard input */
        const char *context;            /* --context: a JSON object's text */
        const char *template;           /* NULL: the language's (python, node) */
        uint64_t timeout_sec;           /* --timeout; 0: not given */
        uint64_t memory_max;            /* --memory, bytes; 0: the template's */
        bool profile;
        bool json;
        bool help;
        bool version;
} RunArgs;

/* Parses the command line (getopt_long; options and HANDLER_FILE in any order). On a bad
 * one prints why (prefixed with "sandbox-run: ") to stderr and returns -EINVAL. --help and
 * --version only set their flag. */
int run_args_parse(int argc, char *argv[], RunArgs *ret);

/* By the file's extension: .py is Python; .js, .cjs and .mjs are Node.js. */
RunLanguage run_language_from_path(const char *path);
/* By a template's name, for a file of another extension: "python…" or "node…". */
RunLanguage run_language_from_template(const char *name);
const char *run_language_to_string(RunLanguage l);      /* "python", "node": their templates */

/* Takes RUN_EVENT_TIMEOUT_KEY out of event (when event is an object that has it), as
 * seconds: a positive number up to RUN_TIMEOUT_MAX_SEC, a fraction rounded up to the next
 * whole second (sandboxd's unit). *ret_sec is 0 when there is none. -EINVAL (not a
 * positive number) or -ERANGE (above the maximum), the key then still removed. */
int run_event_take_timeout(json_object *event, uint64_t *ret_sec);

/* The timeout that applies: --timeout, else the event's __timeout, else the default. */
uint64_t run_timeout_resolve(uint64_t arg_sec, uint64_t event_sec);

/* Parses --context: a JSON object (its fields override the context's: function_name,
 * memory_limit_in_mb, client_context, identity, …). -EINVAL otherwise. */
int run_context_parse(const char *text, json_object **ret);

/* The context object the runtime gets (snake_case, as Python's runtime names the fields;
 * the Node.js runtime renames them): function_name, function_version,
 * invoked_function_arn, memory_limit_in_mb (a string, as on AWS Lambda), aws_request_id,
 * log_group_name, log_stream_name; then each field of overrides (--context; may be NULL),
 * which wins. */
int run_context_build(const char *function_name, uint64_t memory_limit_bytes, const char *request_id,
                      json_object *overrides, json_object **ret);

/* The function's name: --context's function_name if it is a string, else the handler
 * file's name without its directory and extension. A new string. */
char *run_function_name(const char *handler_file, json_object *overrides);
