/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandbox-run's pure parts: the command line, the event's __timeout, the context, the
 * outcome (exit code, result, error) from what the bootstrap wrote and how the process
 * ended, and what --json and --profile print. */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "json-util.h"
#include "macro.h"
#include "run-args.h"
#include "run-outcome.h"
#include "run-report.h"

#define ARGV(...) ((char *[]) { (char *) "sandbox-run", __VA_ARGS__, NULL })
#define ARGC(...) ((int) (sizeof((char *[]) { (char *) "sandbox-run", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(ret, ...) run_args_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), ret)

static void test_args_defaults(void **state) {
        RunArgs a;

        assert_int_equal(PARSE(&a, "h.py"), 0);
        assert_string_equal(a.handler_file, "h.py");
        assert_string_equal(a.handler, "handler");
        assert_null(a.event);
        assert_null(a.event_file);
        assert_null(a.template);
        assert_int_equal(a.timeout_sec, 0);
        assert_int_equal(a.memory_max, 0);
        assert_false(a.profile);
        assert_false(a.json);
}

static void test_args_all(void **state) {
        RunArgs a;

        /* Options before and after HANDLER_FILE. */
        assert_int_equal(PARSE(&a, "--handler", "main", "h.js", "--event", "{\"a\":1}", "--context", "{}",
                               "--template", "node", "--timeout", "5m", "--memory", "256M", "--profile", "--json"),
                         0);
        assert_string_equal(a.handler_file, "h.js");
        assert_string_equal(a.handler, "main");
        assert_string_equal(a.event, "{\"a\":1}");
        assert_string_equal(a.context, "{}");
        assert_string_equal(a.template, "node");
        assert_int_equal(a.timeout_sec, 300);
        assert_int_equal(a.memory_max, 256 << 20);
        assert_true(a.profile);
        assert_true(a.json);

        assert_int_equal(PARSE(&a, "--event-file", "-", "h.py"), 0);
        assert_string_equal(a.event_file, "-");
        assert_int_equal(PARSE(&a, "--timeout", "3600", "--", "-odd.py"), 0);
        assert_string_equal(a.handler_file, "-odd.py");
        assert_int_equal(a.timeout_sec, 3600);
        assert_int_equal(PARSE(&a, "--help"), 0);
        assert_true(a.help);
        assert_int_equal(PARSE(&a, "-h"), 0);
        assert_true(a.help);
}

static void test_args_bad(void **state) {
        RunArgs a = { .handler_file = "untouched" };

        assert_int_equal(PARSE(&a, "--json"), -EINVAL);                         /* no file */
        assert_int_equal(PARSE(&a, "a.py", "b.py"), -EINVAL);                   /* two */
        assert_int_equal(PARSE(&a, "a.py", "--", "b.py"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--frobnicate"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--event"), -EINVAL);                /* no value */
        assert_int_equal(PARSE(&a, "a.py", "--event", "{}", "--event-file", "f"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--event-file", "f", "--event", "{}"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--timeout", "0"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--timeout", "3601"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--timeout", "2h"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--timeout", "-1"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--timeout", "soon"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--memory", "lots"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--memory", "0"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--handler", "a.b"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--handler", "1st"), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--handler", ""), -EINVAL);
        assert_int_equal(PARSE(&a, "a.py", "--template", ""), -EINVAL);
        assert_string_equal(a.handler_file, "untouched");   /* *ret untouched on failure */
}

static void test_language(void **state) {
        assert_int_equal(run_language_from_path("h.py"), RUN_LANGUAGE_PYTHON);
        assert_int_equal(run_language_from_path("/x/y/index.js"), RUN_LANGUAGE_NODE);
        assert_int_equal(run_language_from_path("a.cjs"), RUN_LANGUAGE_NODE);
        assert_int_equal(run_language_from_path("a.mjs"), RUN_LANGUAGE_NODE);
        assert_int_equal(run_language_from_path("a.rb"), _RUN_LANGUAGE_INVALID);
        assert_int_equal(run_language_from_path("py"), _RUN_LANGUAGE_INVALID);
        assert_int_equal(run_language_from_template("python"), RUN_LANGUAGE_PYTHON);
        assert_int_equal(run_language_from_template("python-numpy"), RUN_LANGUAGE_PYTHON);
        assert_int_equal(run_language_from_template("node"), RUN_LANGUAGE_NODE);
        assert_int_equal(run_language_from_template("shell"), _RUN_LANGUAGE_INVALID);
        assert_string_equal(run_language_to_string(RUN_LANGUAGE_PYTHON), "python");
        assert_string_equal(run_language_to_string(RUN_LANGUAGE_NODE), "node");
        assert_null(run_language_to_string(_RUN_LANGUAGE_INVALID));
}

/* __timeout of the event text: the return value, the seconds, and the event afterwards. */
static int take_timeout(const char *event, uint64_t *ret_sec, char **ret_after) {
        _cleanup_json_ json_object *e = json_tokener_parse(event);
        int r;

        r = run_event_take_timeout(e, ret_sec);
        *ret_after = strdup(e ? json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN) : "null");
        return r;
}

static void test_event_timeout(void **state) {
        static const struct {
                const char *event;
                int ret;
                uint64_t sec;
                const char *after;
        } cases[] = {
                { "{\"__timeout\":30,\"timeout\":5}", 0, 30, "{\"timeout\":5}" },   /* theirs stays */
                { "{\"__timeout\":3600}", 0, 3600, "{}" },
                { "{\"__timeout\":1}", 0, 1, "{}" },
                { "{\"__timeout\":1.5}", 0, 2, "{}" },                               /* rounded up */
                { "{\"__timeout\":0.001}", 0, 1, "{}" },
                { "{\"__timeout\":3600.0}", 0, 3600, "{}" },
                { "{\"a\":1}", 0, 0, "{\"a\":1}" },                                  /* none */
                { "[1,{\"__timeout\":5}]", 0, 0, "[1,{\"__timeout\":5}]" },           /* not an object */
                { "null", 0, 0, "null" },
                { "{\"__timeout\":0}", -EINVAL, 0, "{}" },                           /* bad: removed too */
                { "{\"__timeout\":-5}", -EINVAL, 0, "{}" },
                { "{\"__timeout\":\"30\"}", -EINVAL, 0, "{}" },
                { "{\"__timeout\":true}", -EINVAL, 0, "{}" },
                { "{\"__timeout\":null}", -EINVAL, 0, "{}" },
                { "{\"__timeout\":3601}", -ERANGE, 0, "{}" },
                { "{\"__timeout\":3600.5}", -ERANGE, 0, "{}" },
                { "{\"__timeout\":1e300}", -ERANGE, 0, "{}" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *after = NULL;
                uint64_t sec = 99;
                int r = take_timeout(cases[i].event, &sec, &after);

                if (r != cases[i].ret || sec != cases[i].sec || !streq(after, cases[i].after))
                        fail_msg("%s: %d %" PRIu64 " %s", cases[i].event, r, sec, after);
        }
}

static void test_timeout_resolve(void **state) {
        assert_int_equal(run_timeout_resolve(0, 0), 300);                /* the default */
        assert_int_equal(run_timeout_resolve(0, 30), 30);                /* the event's */
        assert_int_equal(run_timeout_resolve(10, 30), 10);               /* --timeout wins */
        assert_int_equal(run_timeout_resolve(10, 0), 10);
}

static void test_context(void **state) {
        _cleanup_json_ json_object *overrides = NULL, *c = NULL;
        _cleanup_free_ char *name = NULL, *plain = NULL;
        json_object *v;

        assert_int_equal(run_context_parse("[1]", &overrides), -EINVAL);
        assert_int_equal(run_context_parse("{", &overrides), -EINVAL);
        assert_int_equal(run_context_parse("null", &overrides), -EINVAL);
        assert_int_equal(run_context_parse("{\"memory_limit_in_mb\":\"64\",\"identity\":{\"id\":1}}", &overrides), 0);

        assert_int_equal(run_context_build("fn", 512 << 20, "req-1", overrides, &c), 0);
        assert_true(json_object_object_get_ex(c, "function_name", &v));
        assert_string_equal(json_object_get_string(v), "fn");
        assert_true(json_object_object_get_ex(c, "aws_request_id", &v));
        assert_string_equal(json_object_get_string(v), "req-1");
        assert_true(json_object_object_get_ex(c, "memory_limit_in_mb", &v));
        assert_string_equal(json_object_get_string(v), "64");                /* theirs wins */
        assert_true(json_object_object_get_ex(c, "identity", &v));
        assert_true(json_object_is_type(v, json_type_object));
        assert_true(json_object_object_get_ex(c, "invoked_function_arn", &v));
        assert_string_equal(json_object_get_string(v), "arn:aws:lambda:local:000000000000:function:fn");
        json_object_putp(&c);
        assert_int_equal(run_context_build("fn", (512 << 20) + 1, "req-1", NULL, &c), 0);
        assert_true(json_object_object_get_ex(c, "memory_limit_in_mb", &v));
        assert_string_equal(json_object_get_string(v), "513");                /* rounded up, a string */

        name = run_function_name("/srv/fn/my.handler.py", NULL);
        assert_string_equal(name, "my.handler");
        plain = run_function_name(".hidden", NULL);
        assert_string_equal(plain, ".hidden");
        free(name);
        json_object_putp(&overrides);
        assert_int_equal(run_context_parse("{\"function_name\":\"billing\"}", &overrides), 0);
        name = run_function_name("h.py", overrides);
        assert_string_equal(name, "billing");
}

/* ---- outcomes ---- */

#define STARTED "{\"status\":\"started\"}\n"
#define END_OK ((RunExecEnd) { .exit_status = 0 })

static const char *error_field(const RunOutcome *o, const char *key) {
        json_object *v;

        assert_non_null(o->error);
        assert_true(json_object_object_get_ex(o->error, key, &v));
        return json_object_get_string(v);
}

static void outcome(const char *channel, bool overflow, RunExecEnd end, RunOutcome *ret) {
        assert_int_equal(run_outcome_from_channel(channel, strlen(channel), overflow, &end, 30, "python3", ret), 0);
}

static void test_outcome_ok(void **state) {
        RunOutcome o;

        /* The value as the runtime wrote it: no float re-rounded, no big integer clamped. */
        outcome(STARTED "{\"status\":\"ok\"}\n{\"n\": 123456789012345678901234567890, \"f\": 0.1}\n", false, END_OK,
                &o);
        assert_int_equal(o.exit, RUN_EXIT_SUCCESS);
        assert_string_equal(o.result, "{\"n\": 123456789012345678901234567890, \"f\": 0.1}");
        assert_null(o.error);
        run_outcome_done(&o);

        outcome(STARTED "{\"status\":\"ok\"}\nnull\n", false, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_SUCCESS);
        assert_string_equal(o.result, "null");
        run_outcome_done(&o);

        outcome(STARTED "{\"status\":\"ok\"}\n7\n", false, END_OK, &o);
        assert_string_equal(o.result, "7");
        run_outcome_done(&o);

        /* Not JSON after all (a handler that wrote on the channel itself). */
        outcome(STARTED "{\"status\":\"ok\"}\n{\"a\":\n", false, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        assert_string_equal(error_field(&o, "errorType"), "Runtime.InvalidResponse");
        run_outcome_done(&o);
        outcome(STARTED "{\"status\":\"ok\"}\n1 2\n", false, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        run_outcome_done(&o);
}

static void test_outcome_errors(void **state) {
        static const struct {
                const char *status;
                RunExit exit;
        } cases[] = {
                { "raised", RUN_EXIT_ERROR },
                { "syntax", RUN_EXIT_SYNTAX },
                { "nohandler", RUN_EXIT_SYNTAX },
                { "bogus", RUN_EXIT_ERROR },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *channel = NULL;
                RunOutcome o;

                assert_true(asprintf(&channel,
                                     STARTED "{\"status\":\"%s\",\"error\":{\"errorType\":\"ValueError\","
                                     "\"errorMessage\":\"boom\",\"stackTrace\":[\"  File x\"]}}\n",
                                     cases[i].status) > 0);
                outcome(channel, false, END_OK, &o);
                assert_int_equal(o.exit, cases[i].exit);
                assert_null(o.result);
                if (!streq(cases[i].status, "bogus")) {
                        assert_string_equal(error_field(&o, "errorType"), "ValueError");
                        assert_string_equal(error_field(&o, "errorMessage"), "boom");
                }
                run_outcome_done(&o);
        }
}

static void test_outcome_process_end(void **state) {
        RunOutcome o;

        /* A timeout is a timeout, whatever was written. */
        outcome(STARTED "{\"status\":\"ok\"}\n1\n", false, (RunExecEnd) { .exit_status = 137, .signal = 9, .timed_out = true },
                &o);
        assert_int_equal(o.exit, RUN_EXIT_TIMEOUT);
        assert_string_equal(error_field(&o, "errorType"), "Sandbox.Timedout");
        assert_string_equal(error_field(&o, "errorMessage"), "Task timed out after 30.00 seconds");
        run_outcome_done(&o);

        /* Nothing at all: the interpreter never ran (127: not found). */
        outcome("", false, (RunExecEnd) { .exit_status = 127 }, &o);
        assert_int_equal(o.exit, RUN_EXIT_SANDBOX);
        assert_string_equal(error_field(&o, "errorType"), "Runtime.InvalidEntrypoint");
        assert_non_null(strstr(error_field(&o, "errorMessage"), "python3"));
        assert_non_null(strstr(error_field(&o, "errorMessage"), "exit status 127"));
        run_outcome_done(&o);
        outcome("garbage\n", false, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_SANDBOX);
        run_outcome_done(&o);

        /* Started, then gone without an answer. */
        outcome(STARTED, false, (RunExecEnd) { .exit_status = 3 }, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        assert_string_equal(error_field(&o, "errorType"), "Runtime.ExitError");
        assert_string_equal(error_field(&o, "errorMessage"), "Runtime exited with error: exit status 3");
        run_outcome_done(&o);
        outcome(STARTED, false, (RunExecEnd) { .exit_status = 128 + SIGSEGV, .signal = SIGSEGV }, &o);
        assert_string_equal(error_field(&o, "errorMessage"), "Runtime exited with error: signal: segmentation fault");
        run_outcome_done(&o);
        outcome(STARTED, false, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        assert_string_equal(error_field(&o, "errorMessage"), "Runtime exited without providing a reason");
        run_outcome_done(&o);
        outcome(STARTED "{\"status\":\"ok\"}", false, END_OK, &o);   /* a header cut short */
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        run_outcome_done(&o);
        outcome(STARTED, false, (RunExecEnd) { .exit_status = 137, .signal = SIGKILL, .oom_killed = true }, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        assert_string_equal(error_field(&o, "errorType"), "Runtime.OutOfMemory");
        run_outcome_done(&o);

        /* More than a response may be. */
        outcome(STARTED "{\"status\":\"ok\"}\n\"xxxx", true, END_OK, &o);
        assert_int_equal(o.exit, RUN_EXIT_ERROR);
        assert_string_equal(error_field(&o, "errorType"), "Function.ResponseSizeTooLarge");
        run_outcome_done(&o);
}

/* ---- what is printed ---- */

static const RunProfile profile = {
        .sandbox_id = "0123456789abcdef",
        .template = "python",
        .from_pool = true,
        .init_usec = 1500,
        .duration_usec = 12345,
        .cpu_usec = 10000,
        .max_rss_bytes = 20 << 20,
        .memory_limit_bytes = 512 << 20,
        .recorded = true,
        .memory_peak_bytes = (6 << 20) + 1,
        .cgroup_cpu_nsec = 11000000,
};

static void test_report_json(void **state) {
        _cleanup_free_ char *text = NULL, *err = NULL;
        _cleanup_json_ json_object *j = NULL, *k = NULL;
        RunOutcome o = { .exit = RUN_EXIT_SUCCESS, .result = (char *) "{\"n\": 123456789012345678901234567890}" };
        json_object *v, *p;

        text = run_report_json(&o, "req", "fn", &profile);
        assert_non_null(text);
        assert_non_null(strstr(text, ",\"result\":{\"n\": 123456789012345678901234567890}}"));
        j = json_tokener_parse(text);
        assert_non_null(j);
        assert_true(json_object_object_get_ex(j, "exitCode", &v));
        assert_int_equal(json_object_get_int(v), 0);
        assert_true(json_object_object_get_ex(j, "requestId", &v));
        assert_string_equal(json_object_get_string(v), "req");
        assert_false(json_object_object_get_ex(j, "error", NULL));
        assert_true(json_object_object_get_ex(j, "profile", &p));
        assert_true(json_object_object_get_ex(p, "start", &v));
        assert_string_equal(json_object_get_string(v), "warm");
        assert_true(json_object_object_get_ex(p, "peakMemoryBytes", &v));
        assert_int_equal(json_object_get_int64(v), (6 << 20) + 1);
        assert_true(json_object_object_get_ex(p, "sandboxCPUUSec", &v));
        assert_int_equal(json_object_get_int64(v), 11000);

        RunOutcome failed = {};
        assert_int_equal(run_outcome_set_error(&failed, RUN_EXIT_TIMEOUT, "Sandbox.Timedout", "slow"), 0);
        err = run_report_json(&failed, "req", "fn", NULL);
        k = json_tokener_parse(err);
        assert_non_null(k);
        assert_true(json_object_object_get_ex(k, "exitCode", &v));
        assert_int_equal(json_object_get_int(v), 4);
        assert_false(json_object_object_get_ex(k, "result", NULL));
        assert_false(json_object_object_get_ex(k, "profile", NULL));
        assert_true(json_object_object_get_ex(k, "error", &v));
        run_outcome_done(&failed);
}

static void test_report_profile_line(void **state) {
        _cleanup_free_ char *line = run_report_profile_line("req", &profile), *cold = NULL;
        RunProfile unrecorded = profile;

        assert_string_equal(line, "REPORT RequestId: req\tDuration: 12.35 ms\tCPU Time: 10.00 ms\t"
                                  "Max Memory Used: 7 MB\tMax RSS: 20 MB\tMemory Size: 512 MB\tStart: warm\t"
                                  "Init Duration: 1.50 ms\tSandbox: 0123456789abcdef (python)");
        /* Without the record, the process's peak; cold. */
        unrecorded.recorded = false;
        unrecorded.from_pool = false;
        assert_int_equal(run_profile_peak_memory(&unrecorded), 20 << 20);
        cold = run_report_profile_line("req", &unrecorded);
        assert_non_null(strstr(cold, "Max Memory Used: 20 MB\t"));
        assert_non_null(strstr(cold, "Start: cold\t"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_args_defaults),
                cmocka_unit_test(test_args_all),
                cmocka_unit_test(test_args_bad),
                cmocka_unit_test(test_language),
                cmocka_unit_test(test_event_timeout),
                cmocka_unit_test(test_timeout_resolve),
                cmocka_unit_test(test_context),
                cmocka_unit_test(test_outcome_ok),
                cmocka_unit_test(test_outcome_errors),
                cmocka_unit_test(test_outcome_process_end),
                cmocka_unit_test(test_report_json),
                cmocka_unit_test(test_report_profile_line),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
