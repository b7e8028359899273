/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Between the protocol (mcp-protocol.c), the requests and their varlink calls
 * (mcp-request.c) and the tools (mcp-tools.c). */

#include <stdint.h>

#include "mcp.h"
#include "varlink.h"

#define VARLINK_IFACE "io.sandboxd.Sandbox"

struct McpServer {
        unsigned n_ref;
        sd_event *event;
        char *varlink_address;
        uint64_t default_lifetime_sec; /* sandbox_create's lifetime when not given; 0: none */
        unsigned n_cleanups;          /* cancelled run_codes whose sandboxes are being destroyed */
};

typedef enum McpArgType {
        MCP_ARG_STRING,
        MCP_ARG_INTEGER,
        MCP_ARG_BOOLEAN,
        MCP_ARG_STRINGS,
        MCP_ARG_SECONDS,              /* a number of seconds (0.5 too); its range is sandboxd's */
        MCP_ARG_STRING_MAP,           /* an object of strings (labels); its keys and values are sandboxd's to check */
} McpArgType;

/* One argument of a tool: its inputSchema property and how it is checked, from one table. */
typedef struct McpArg {
        const char *name;
        McpArgType type;
        bool required;
        const char *description;
        const char *const *choices;   /* strings: the enum, NULL-terminated; NULL: any */
        int64_t min, max;             /* integers: the range; strings: max is the length (0: none) */
} McpArg;

typedef int (*mcp_tool_run_t)(McpRequest *r);

typedef struct McpTool {
        const char *name;
        const char *title;
        const char *description;
        const McpArg *args;           /* ended by one without a name */
        const char *output_schema;    /* JSON text, or NULL for a tool without structured output */
        bool read_only, destructive, idempotent, open_world;
        bool on_sandbox;              /* takes a "sandbox_id" */
        bool one_off;                 /* creates the sandbox it runs in (sandbox_id), which is
                                       * destroyed when the call is cancelled */
        bool kills_on_cancel;         /* Starts a process (McpRequest.process) that is killed
                                       * when the call is cancelled */
        mcp_tool_run_t run;
} McpTool;

extern const McpTool mcp_tools[];
const McpTool *mcp_tool_find(const char *name);
json_object *mcp_tool_describe(const McpTool *t);
/* Checks args (an object) against the tool's table: 0, or -EINVAL with *ret_message
 * (static or to free: see the caller) saying what does not fit. */
int mcp_tool_check_args(const McpTool *t, json_object *args, char **ret_message);

/* A step of a tool: called with the reply of the varlink call that named it (parameters
 * borrowed; error NULL or the varlink error's name). Returns 0 once it has finished the
 * request (r is freed then) or made the next call, or a negative errno, which finishes the
 * request as a tool error. */
typedef int (*mcp_step_t)(McpRequest *r, json_object *parameters, const char *error);

struct McpRequest {
        McpServer *server;
        McpSession *session;          /* NULL once the session is freed */
        char *tenant;                 /* NULL: none */
        json_object *id;
        const McpTool *tool;
        json_object *args;
        VarlinkClient *varlink;
        mcp_step_t step;
        char *sandbox_id;             /* the sandbox the tool works on (created or looked up) */
        json_object *scratch;         /* what a tool keeps between steps */
        mcp_send_t send;
        void *userdata;
        bool *finished;               /* set when freed, while mcp_request_start() runs */
        bool cancelled;               /* waiting for its sandbox (one_off) or its process
                                       * (kills_on_cancel) to be named, to end it */
        uint64_t process;             /* kills_on_cancel: the process Start made; 0: none yet */
        bool sandbox_given;           /* a one_off run in the caller's sandbox: not destroyed */
        json_object *progress_token;  /* the client's, NULL: it wants no progress */
        sd_event_source *progress_timer;
        uint64_t progress;            /* notifications/progress sent */
        McpRequest *prev, *next;
};

/* The tools' side of a request. */
int mcp_request_call(McpRequest *r, const char *method, json_object *parameters, mcp_step_t step);
/* Finish: send the result (structured may be NULL; text is the model's text). */
int mcp_request_finish(McpRequest *r, json_object *structured, const char *text, bool is_error);
int mcp_request_finish_errorf(McpRequest *r, const char *format, ...) _printf_(2, 3);
/* A varlink error reply as a tool error. */
int mcp_request_finish_varlink_error(McpRequest *r, json_object *parameters, const char *error);
/* A result whose text is the structured content as JSON, with note (may be NULL) after it. */
int mcp_request_finish_structured(McpRequest *r, json_object *structured, const char *note, bool is_error);
/* The same with more content items after the text (images: {"type": "image", "data",
 * "mimeType"}); extra may be NULL. */
int mcp_request_finish_content(McpRequest *r, json_object *structured, const char *note, json_object *extra,
                               bool is_error);

const char *mcp_arg_string(McpRequest *r, const char *name);
bool mcp_arg_has(McpRequest *r, const char *name);
int64_t mcp_arg_int(McpRequest *r, const char *name, int64_t fallback);
bool mcp_arg_bool(McpRequest *r, const char *name, bool fallback);
json_object *mcp_arg(McpRequest *r, const char *name);

/* The protocol's side of a request (mcp-protocol.c ↔ mcp-request.c). */
json_object *mcp_jsonrpc_result_new(json_object *id, json_object *result);
/* Starts tool with args (checked here) for a client of tenant. MCP_HANDLE_REPLIED if it
 * answered at once (bad arguments, sandboxd unreachable), MCP_HANDLE_PENDING with *ret the
 * request otherwise, or a negative errno. */
int mcp_request_start(McpServer *m, const char *tenant, json_object *id, const McpTool *tool, json_object *args,
                      mcp_send_t send, void *userdata, McpRequest **ret);
void mcp_session_forget_request(McpSession *s, McpRequest *r);
/* notifications/progress for token every MCP_PROGRESS_INTERVAL_USEC while r is pending,
 * through r's send(). */
int mcp_request_start_progress(McpRequest *r, json_object *token);
