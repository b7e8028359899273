/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What one invocation came to: the exit code, the handler's return value (its JSON text
 * as the runtime wrote it, passed on verbatim: no number is re-rounded), or an error
 * object as AWS Lambda prints one ({errorType, errorMessage, stackTrace}). Made from what
 * the bootstrap wrote on its channel and how sandboxd says the process ended. Pure. */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "macro.h"
#include "run-args.h"

/* The most of a return value taken, as AWS Lambda's synchronous response limit. */
#define RUN_RESPONSE_MAX (6U * 1024U * 1024U)

/* How the process ended (Exec's exitStatus and info). */
typedef struct RunExecEnd {
        int exit_status;        /* the exit code, or 128 + the signal */
        int signal;             /* 0 when it exited */
        bool timed_out;
        bool oom_killed;
} RunExecEnd;

typedef struct RunOutcome {
        RunExit exit;
        char *result;           /* RUN_EXIT_SUCCESS: the return value's JSON text */
        json_object *error;     /* otherwise: the error object */
} RunOutcome;

void run_outcome_done(RunOutcome *o);

/* An outcome that is only an error: errorType, errorMessage and an empty stackTrace. */
int run_outcome_set_error(RunOutcome *o, RunExit exit, const char *type, const char *message);
/* The same with the message formatted. */
int run_outcome_set_errorv(RunOutcome *o, RunExit exit, const char *type, const char *fmt, va_list ap)
        _printf_(4, 0);

/* The outcome of the handler's run from the channel's bytes (data, size; overflow: more
 * than RUN_RESPONSE_MAX came and the rest was dropped), the end of the process, the
 * timeout it had and the runtime's name (for messages). Returns 0 or -ENOMEM. */
int run_outcome_from_channel(const char *data, size_t size, bool overflow, const RunExecEnd *end,
                             uint64_t timeout_sec, const char *runtime, RunOutcome *ret);
