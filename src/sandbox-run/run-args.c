/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "parse-util.h"
#include "run-args.h"

enum {
        ARG_HANDLER = 0x100,
        ARG_EVENT,
        ARG_EVENT_FILE,
        ARG_CONTEXT,
        ARG_TEMPLATE,
        ARG_TIMEOUT,
        ARG_MEMORY,
        ARG_PROFILE,
        ARG_JSON,
        ARG_VERSION,
};

static const struct option options[] = {
        { "help",       no_argument,       NULL, 'h'            },
        { "version",    no_argument,       NULL, ARG_VERSION    },
        { "handler",    required_argument, NULL, ARG_HANDLER    },
        { "event",      required_argument, NULL, ARG_EVENT      },
        { "event-file", required_argument, NULL, ARG_EVENT_FILE },
        { "context",    required_argument, NULL, ARG_CONTEXT    },
        { "template",   required_argument, NULL, ARG_TEMPLATE   },
        { "timeout",    required_argument, NULL, ARG_TIMEOUT    },
        { "memory",     required_argument, NULL, ARG_MEMORY     },
        { "profile",    no_argument,       NULL, ARG_PROFILE    },
        { "json",       no_argument,       NULL, ARG_JSON       },
        {}
};

static int bad(const char *fmt, ...) _printf_(1, 2);
static int bad(const char *fmt, ...) {
        va_list ap;

        fputs("sandbox-run: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return -EINVAL;
}

/* A handler's name: what Python and JavaScript both take as an identifier (ASCII). */
static bool handler_name_is_valid(const char *s) {
        if (!*s || (*s >= '0' && *s <= '9') || strlen(s) > 128)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      *s == '_' || *s == '$'))
                        return false;
        return true;
}

static int parse_option(int c, const char *value, RunArgs *a) {
        switch (c) {
        case 'h':
                a->help = true;
                return 0;
        case ARG_VERSION:
                a->version = true;
                return 0;
        case ARG_HANDLER:
                if (!handler_name_is_valid(value))
                        return bad("--handler: '%s' is not a function's name.", value);
                a->handler = value;
                return 0;
        case ARG_EVENT:
                if (a->event_file)
                        return bad("--event: give --event or --event-file, not both.");
                a->event = value;
                return 0;
        case ARG_EVENT_FILE:
                if (a->event)
                        return bad("--event-file: give --event or --event-file, not both.");
                a->event_file = value;
                return 0;
        case ARG_CONTEXT:
                a->context = value;
                return 0;
        case ARG_TEMPLATE:
                if (!*value)
                        return bad("--template: the name must not be empty.");
                a->template = value;
                return 0;
        case ARG_TIMEOUT:
                if (parse_seconds(value, &a->timeout_sec) < 0 || a->timeout_sec == 0 ||
                    a->timeout_sec > RUN_TIMEOUT_MAX_SEC)
                        return bad("--timeout: '%s' is not a number of seconds from 1 to 3600.", value);
                return 0;
        case ARG_MEMORY:
                if (parse_size(value, &a->memory_max) < 0 || a->memory_max == 0)
                        return bad("--memory: '%s' is not a size (such as 256M).", value);
                return 0;
        case ARG_PROFILE:
                a->profile = true;
                return 0;
        case ARG_JSON:
                a->json = true;
                return 0;
        default:
                return -EINVAL;   /* getopt_long() explained already */
        }
}

static int take_handler_file(RunArgs *a, const char *path) {
        if (a->handler_file)
                return bad("unexpected argument '%s': one HANDLER_FILE only.", path);
        a->handler_file = path;
        return 0;
}

int run_args_parse(int argc, char *argv[], RunArgs *ret) {
        RunArgs a = { .handler = RUN_HANDLER_DEFAULT };
        int c, r;

        optind = 0;   /* a fresh scan, also when called again (tests) */
        for (;;) {
                c = getopt_long(argc, argv, "+:h", options, NULL);
                if (c < 0) {
                        if (optind >= argc || streq(argv[optind - 1], "--"))
                                break;
                        /* "+" stops getopt_long() at each non-option: HANDLER_FILE, which
                         * options may follow (`sandbox-run h.py --event …`). */
                        r = take_handler_file(&a, argv[optind++]);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (c == '?')
                        return bad("unknown option '%s' (see --help).", argv[optind - 1]);
                if (c == ':')
                        return bad("option '%s' needs a value.", argv[optind - 1]);
                r = parse_option(c, optarg, &a);
                if (r < 0)
                        return r;
        }
        /* After "--": file names only. */
        for (; optind < argc; optind++) {
                r = take_handler_file(&a, argv[optind]);
                if (r < 0)
                        return r;
        }
        if (!a.handler_file && !a.help && !a.version)
                return bad("no HANDLER_FILE given (see --help).");
        *ret = a;
        return 0;
}

static bool endswith(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && streq(s + n - m, suffix);
}

RunLanguage run_language_from_path(const char *path) {
        if (endswith(path, ".py"))
                return RUN_LANGUAGE_PYTHON;
        if (endswith(path, ".js") || endswith(path, ".cjs") || endswith(path, ".mjs"))
                return RUN_LANGUAGE_NODE;
        return _RUN_LANGUAGE_INVALID;
}

RunLanguage run_language_from_template(const char *name) {
        if (startswith_str(name, "python"))
                return RUN_LANGUAGE_PYTHON;
        if (startswith_str(name, "node"))
                return RUN_LANGUAGE_NODE;
        return _RUN_LANGUAGE_INVALID;
}

const char *run_language_to_string(RunLanguage l) {
        static const char *const names[_RUN_LANGUAGE_MAX] = {
                [RUN_LANGUAGE_PYTHON] = "python",
                [RUN_LANGUAGE_NODE] = "node",
        };

        return l >= 0 && l < _RUN_LANGUAGE_MAX ? names[l] : NULL;
}

int run_event_take_timeout(json_object *event, uint64_t *ret_sec) {
        json_object *v;
        double d;
        int r = 0;

        *ret_sec = 0;
        if (!json_object_is_type(event, json_type_object) ||
            !json_object_object_get_ex(event, RUN_EVENT_TIMEOUT_KEY, &v))
                return 0;

        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i <= 0)
                        r = -EINVAL;
                else if ((uint64_t) i > RUN_TIMEOUT_MAX_SEC)
                        r = -ERANGE;
                else
                        *ret_sec = (uint64_t) i;
        } else if (json_object_is_type(v, json_type_double)) {
                d = json_object_get_double(v);
                if (!(d > 0))   /* also NaN */
                        r = -EINVAL;
                else if (d > (double) RUN_TIMEOUT_MAX_SEC)
                        r = -ERANGE;
                else {
                        *ret_sec = (uint64_t) d;
                        if ((double) *ret_sec < d)
                                (*ret_sec)++;   /* rounded up */
                }
        } else
                r = -EINVAL;

        json_object_object_del(event, RUN_EVENT_TIMEOUT_KEY);
        return r;
}

uint64_t run_timeout_resolve(uint64_t arg_sec, uint64_t event_sec) {
        return arg_sec ?: event_sec ?: RUN_TIMEOUT_DEFAULT_SEC;
}

int run_context_parse(const char *text, json_object **ret) {
        json_object *o;

        o = json_tokener_parse(text);
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EINVAL;
        }
        *ret = o;
        return 0;
}

int run_context_build(const char *function_name, uint64_t memory_limit_bytes, const char *request_id,
                      json_object *overrides, json_object **ret) {
        _cleanup_json_ json_object *c = json_object_new_object();
        char mb[32], arn[512], group[512];

        snprintf(mb, sizeof(mb), "%" PRIu64, (memory_limit_bytes + (UINT64_C(1) << 20) - 1) >> 20);
        snprintf(arn, sizeof(arn), "arn:aws:lambda:local:000000000000:function:%s", function_name);
        snprintf(group, sizeof(group), "/aws/lambda/%s", function_name);
        if (!c ||
            json_add(c, "function_name", json_object_new_string(function_name)) < 0 ||
            json_add(c, "function_version", json_object_new_string("$LATEST")) < 0 ||
            json_add(c, "invoked_function_arn", json_object_new_string(arn)) < 0 ||
            json_add(c, "memory_limit_in_mb", json_object_new_string(mb)) < 0 ||
            json_add(c, "aws_request_id", json_object_new_string(request_id)) < 0 ||
            json_add(c, "log_group_name", json_object_new_string(group)) < 0 ||
            json_add(c, "log_stream_name", json_object_new_string(request_id)) < 0)
                return -ENOMEM;
        if (overrides) {
                json_object_object_foreach(overrides, key, value)
                        if (json_add(c, key, json_object_get(value)) < 0)
                                return -ENOMEM;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

char *run_function_name(const char *handler_file, json_object *overrides) {
        const char *base = strrchr(handler_file, '/'), *dot;
        json_object *v;

        if (overrides && json_object_object_get_ex(overrides, "function_name", &v) &&
            json_object_is_type(v, json_type_string))
                return strdup(json_object_get_string(v));
        base = base ? base + 1 : handler_file;
        dot = strrchr(base, '.');
        return strndup(base, dot && dot != base ? (size_t) (dot - base) : strlen(base));
}
