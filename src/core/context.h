/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Code contexts (docs/CONTEXTS.md): stateful Python and JavaScript sessions in a sandbox.
 * A context is one long-lived background process of the sandbox, a driver (an IPython
 * kernel through jupyter_client, or a REPL on Node's vm module) that sandboxd holds by its
 * stdin and stdout and speaks line-delimited JSON with; its cells run one at a time, their
 * output (stdout, stderr, results as MIME bundles, an error) streamed as events. */

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "options.h"
#include "sandbox-errors.h"

typedef struct Sandbox Sandbox;
typedef struct Context Context;
typedef struct ContextRun ContextRun;

#define CONTEXT_ID_LEN 12
#define CONTEXTS_PER_SANDBOX_MAX 16U
/* A cell's output (every event's bytes, images in base64 included) unless OutputMax says
 * otherwise (at most EXEC_OUTPUT_MAX); beyond it events are dropped and the end says
 * truncated. */
#define CONTEXT_OUTPUT_DEFAULT (4ULL * 1024 * 1024)
#define CONTEXT_CODE_MAX (1024U * 1024U)
#define CONTEXT_QUEUE_MAX 16U
/* After an interrupt (InterruptContext, or a cell's Timeout), how long the cell has to end
 * before its kernel is killed (and the context lost). */
#define CONTEXT_INTERRUPT_GRACE_USEC (5ULL * 1000000ULL)
/* How long a kernel may take to start. */
#define CONTEXT_START_TIMEOUT_USEC (120ULL * 1000000ULL)

typedef enum ContextLanguage {
        CONTEXT_LANGUAGE_PYTHON,
        CONTEXT_LANGUAGE_JAVASCRIPT,
        _CONTEXT_LANGUAGE_MAX,
        _CONTEXT_LANGUAGE_INVALID = -EINVAL,
} ContextLanguage;

/* "python" (also "python3"), "javascript" (also "js", "node"); NULL or "": python. */
ContextLanguage context_language_from_string(const char *s);
const char *context_language_to_string(ContextLanguage l);

typedef enum ContextState {
        CONTEXT_STARTING,   /* its kernel starts; cells wait */
        CONTEXT_IDLE,
        CONTEXT_BUSY,       /* a cell runs */
        CONTEXT_LOST,       /* its kernel ended (killed, OOM, the sandbox stopped): RestartContext */
        _CONTEXT_STATE_MAX,
        _CONTEXT_STATE_INVALID = -EINVAL,
} ContextState;

const char *context_state_to_string(ContextState s);

typedef void (*context_ready_t)(Context *c, const SandboxError *error, void *userdata);

/* CreateContext: a context of language with options (Environment, WorkingDirectory; the
 * other exec options are refused) in s, running; cb once its kernel is ready (or could not
 * start: ContextLost). Returns the context at once (cells given before it is ready wait). */
int sandbox_create_context(Sandbox *s, const char *language, ExecConfig *options, uid_t caller, context_ready_t cb,
                           void *userdata, Context **ret, SandboxError *error);
/* NoSuchContext if there is none of that id. */
int sandbox_get_context(Sandbox *s, const char *id, Context **ret, SandboxError *error);
/* The context RunCode uses when none is named: the sandbox's default one of language,
 * started now if there is none or it was lost. */
int sandbox_default_context(Sandbox *s, const char *language, uid_t caller, Context **ret, SandboxError *error);
/* Iterates the sandbox's contexts, oldest first: NULL to start. */
Context *sandbox_next_context(Sandbox *s, Context *prev);
/* The sandbox goes (or is reset for another user): its contexts go, their calls answered. */
void sandbox_contexts_free(Sandbox *s);
/* The template's "contexts": its default context of each language started now (a kernel
 * takes seconds: a sandbox that starts with it answers its first RunCode warm). */
void sandbox_contexts_prestart(Sandbox *s);
/* Pause and resume: cells' timeouts stand still meanwhile. */
void sandbox_contexts_suspend(Sandbox *s);
void sandbox_contexts_resume(Sandbox *s);

const char *context_get_id(const Context *c);
ContextLanguage context_get_language(const Context *c);
ContextState context_get_state(const Context *c);
uint64_t context_get_execution_count(const Context *c);
uint64_t context_get_created_at(const Context *c);     /* µs CLOCK_REALTIME */
const char *context_get_working_directory(const Context *c);
const char *context_get_version(const Context *c);     /* the runtime's, once ready; "" before */
const char *context_get_lost_reason(const Context *c); /* NULL unless lost */
bool context_is_default(const Context *c);
uint64_t context_get_process(const Context *c);        /* its background process's id */

/* How a cell ended. error is its error event ({"type":"error","name","value","traceback"}),
 * NULL if it raised none; borrowed for the call. */
typedef struct ContextRunResult {
        uint64_t execution_count;
        const char *status;      /* "ok", "error", "aborted" */
        json_object *error;
        bool truncated;          /* output beyond the cell's OutputMax was dropped */
        bool interrupted;        /* InterruptContext or its Timeout interrupted it */
        bool timed_out;
        uint64_t output_bytes;   /* every event's, dropped ones included */
        uint64_t duration_usec;
} ContextRunResult;

/* Each event as it comes: {"type":"stdout"|"stderr","text"}, {"type":"result","data":{mime:
 * value},"isMainResult"}, {"type":"error","name","value","traceback"}; borrowed. */
typedef void (*context_event_t)(ContextRun *run, json_object *event, void *userdata);
/* Once: the result, or error (ContextLost: its kernel ended during the cell; NotRunning). */
typedef void (*context_done_t)(ContextRun *run, const ContextRunResult *result, const SandboxError *error,
                               void *userdata);

/* RunCode: code in c after the cells before it, with options (Timeout, TimeoutUSec,
 * OutputMax; the others are refused): on_event for each event, on_done at the end. */
int context_run(Context *c, const char *code, const ExecConfig *options, context_event_t on_event,
                context_done_t on_done, void *userdata, ContextRun **ret, SandboxError *error);
/* The caller is gone: the cell runs on (or stays queued), its events dropped; no call back. */
void context_run_detach(ContextRun *run);

/* SIGINT to the kernel; if the cell has not ended CONTEXT_INTERRUPT_GRACE_USEC later, the
 * kernel is killed and the context lost. Nothing running: nothing to do. */
int context_interrupt(Context *c, SandboxError *error);
/* A fresh kernel under the same id (its state gone; cells waiting answered with
 * ContextLost); cb once it is ready. */
int context_restart(Context *c, context_ready_t cb, void *userdata, SandboxError *error);
/* Ends its kernel and forgets it (cells waiting answered with NoSuchContext). */
void context_remove(Context *c);

/* Across a hibernation or a restart of sandboxd (docs/CONTEXTS.md): a context's kernel does
 * not come along, its id, language and working directory do. The sandbox's contexts as
 * records, oldest first ([{"id","language","cwd","default","caller","created"}], checked by
 * context_records_valid()); a new reference, NULL if out of memory. */
json_object *sandbox_contexts_to_json(Sandbox *s);
/* The contexts of records in s, lost for reason: RunCode answers ContextLost with it,
 * ListContexts shows them lost, RestartContext starts a fresh kernel under the same id.
 * Ids s has already (and defaults of a language it has one of) are skipped. */
void sandbox_contexts_add_lost(Sandbox *s, json_object *records, const char *reason);
#define CONTEXT_LOST_HIBERNATED "the sandbox was hibernated; its kernel's state is gone"
#define CONTEXT_LOST_STOPPED "the sandbox was hibernated or stopped; its kernel's state is gone"
#define CONTEXT_LOST_RESTARTED "sandboxd restarted; its kernel's state is gone"
