/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* src/mcp: JSON-RPC parsing and dispatch, version negotiation, the tools/list schemas,
 * argument checks, and each tool's varlink calls and error mapping against a fake
 * sandboxd (a varlink server of the project's own, serving the real interface
 * description, on an abstract socket of this process). */

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64-util.h"
#include "sandbox-api.h"
#include "json-util.h"
#include "mcp.h"
#include "varlink.h"

static sd_event *event;
static VarlinkServer *fake;
static McpServer *mcp;
static char address[64];
static json_object *sent;              /* what the session sent, in order */
static json_object *calls;             /* what the fake sandboxd was called with: {method, parameters} */
static VarlinkCall *held;              /* a call the fake sandboxd keeps unanswered */
static char *started_word;             /* the sh -c word of the last Start */

#define SID "0123456789abcdef"
#define IFACE "io.sandboxd.Sandbox."
#define SNAP "00112233445566778899aabbccddeeff"
#define SNAPSHOT_JSON(hibernated)                                                                       \
        "{\"id\":\"" SNAP "\",\"template\":\"python\",\"owner\":1000,\"tenant\":\"\",\"name\":\"\","        \
        "\"source\":\"" SID "\",\"size\":1234,\"contentSize\":5678,\"created\":1,\"diskMax\":1048576,"   \
        "\"includesTmp\":false,\"hibernated\":" hibernated "}"

/* ---- the fake sandboxd ---- */

static void record(VarlinkCall *call, json_object *parameters) {
        json_object *c = json_object_new_object();

        assert_non_null(c);
        json_object_object_add(c, "method", json_object_new_string(varlink_call_get_method(call)));
        json_object_object_add(c, "parameters", json_object_get(parameters));
        json_object_array_add(calls, c);
}

static const char *param(json_object *parameters, const char *name) {
        json_object *v;

        return json_object_object_get_ex(parameters, name, &v) ? json_object_get_string(v) : NULL;
}

static int reply_json(VarlinkCall *call, const char *text) {
        _cleanup_json_ json_object *p = json_tokener_parse(text);

        assert_non_null(p);
        return varlink_call_reply(call, p);
}

static int error_json(VarlinkCall *call, const char *error, const char *text) {
        _cleanup_json_ json_object *p = json_tokener_parse(text);

        assert_non_null(p);
        return varlink_call_error(call, error, p);
}

static json_object *sandbox_json(const char *id, const char *tenant) {
        json_object *s = json_object_new_object();

        json_object_object_add(s, "id", json_object_new_string(id));
        json_object_object_add(s, "template", json_object_new_string("python"));
        json_object_object_add(s, "state", json_object_new_string("running"));
        json_object_object_add(s, "owner", json_object_new_int(1000));
        json_object_object_add(s, "name", json_object_new_string(""));
        json_object_object_add(s, "tenant", json_object_new_string(tenant));
        return s;
}

static int fake_method(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        const char *method = varlink_call_get_method(call) + strlen(IFACE);
        const char *id = param(parameters, "id"), *path = param(parameters, "path");

        record(call, parameters);
        if (id && !streq(id, SID) && !streq(id, "fedcba9876543210"))
                return error_json(call, IFACE "NoSuchSandbox", "{\"message\":\"no sandbox has that id\"}");
        if (streq(method, "ActForTenant") && streq(param(parameters, "tenant"), "evil"))
                return error_json(call, IFACE "AccessDenied", "{\"message\":\"not for you\"}");
        if (streq(method, "CreateSandbox"))
                return reply_json(call, "{\"id\":\"" SID "\"}");
        if (streq(method, "GetSandbox")) {
                _cleanup_json_ json_object *p = json_object_new_object();
                json_object_object_add(p, "sandbox", sandbox_json(id, streq(id, SID) ? "" : "acme"));
                return varlink_call_reply(call, p);
        }
        if (streq(method, "ListSandboxes")) {
                _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
                json_object_array_add(l, sandbox_json(SID, ""));
                json_object_array_add(l, sandbox_json("fedcba9876543210", "acme"));
                json_object_object_add(p, "sandboxes", TAKE_PTR(l));
                return varlink_call_reply(call, p);
        }
        if (streq(method, "Start")) {
                json_object *argv;

                assert_true(json_object_object_get_ex(parameters, "argv", &argv));
                free(started_word);
                started_word = strdup(json_object_get_string(json_object_array_get_idx(argv, 2)));
                if (streq(started_word, "hang-start")) {
                        held = varlink_call_ref(call);
                        return 0;
                }
                return reply_json(call, "{\"process\":7}");
        }
        if (streq(method, "Wait")) {
                if (json_object_get_int(json_object_object_get(parameters, "process")) == 8)
                        return error_json(call, IFACE "StillRunning", "{\"message\":\"still running\"}");
                if (streq_ptr(started_word, "hang")) {
                        held = varlink_call_ref(call);
                        return 0;
                }
                return reply_json(call, "{\"exitStatus\":137,\"info\":{\"timedOut\":true,\"oomKilled\":false,"
                                        "\"signal\":9,\"exitCode\":-1,\"durationUSec\":2000000,\"truncated\":true,"
                                        "\"stdoutBytes\":100000,\"stderrBytes\":1}}");
        }
        if (streq(method, "ReadOutput"))
                return reply_json(call, "{\"stdout\":\"aGkK\",\"stderr\":\"/w==\",\"running\":false,"
                                        "\"stdoutTotal\":100000,\"stderrTotal\":1}");
        if (streq(method, "ListProcesses"))
                return reply_json(call, "{\"processes\":[{\"process\":7,\"pid\":12,\"argv\":[\"sh\"],"
                                        "\"state\":\"running\",\"exitStatus\":0},{\"process\":6,\"pid\":11,"
                                        "\"argv\":[\"true\"],\"state\":\"exited\",\"exitStatus\":3}]}");
        if (streq(method, "Exec")) {
                _cleanup_free_ uint8_t *in = NULL;
                const char *word;
                json_object *argv, *o, *stdin_b64;
                size_t n = 0;

                assert_true(json_object_object_get_ex(parameters, "argv", &argv));
                /* The command's word: sh -c's, or run_code's code after its length on stdin. */
                word = json_object_get_string(json_object_array_get_idx(argv, 2));
                if (json_object_object_get_ex(parameters, "options", &o) &&
                    json_object_object_get_ex(o, "Stdin", &stdin_b64) &&
                    json_object_get_base64(stdin_b64, &in, &n) >= 0) {
                        char *text = strndup((const char *) in, n), *nl = text ? strchr(text, '\n') : NULL;

                        assert_non_null(nl);
                        word = nl + 1;
                        free(in);
                        in = (uint8_t *) text;
                }
                if (streq_ptr(word, "hang")) {
                        held = varlink_call_ref(call);
                        return 0;
                }
                if (streq_ptr(word, "refused"))
                        return error_json(call, IFACE "InvalidOption", "{\"message\":\"Timeout out of range\"}");
                /* stdout "hi\n", stderr "\xff" (not UTF-8), 100000 bytes written, timed out. */
                return reply_json(call, "{\"exitStatus\":137,\"stdout\":\"aGkK\",\"stderr\":\"/w==\",\"info\":{"
                                        "\"timedOut\":true,\"oomKilled\":false,\"signal\":9,\"exitCode\":-1,"
                                        "\"durationUSec\":2000000,\"truncated\":true,\"stdoutBytes\":100000,"
                                        "\"stderrBytes\":1}}");
        }
        if (streq(method, "ReadFile")) {
                if (streq(path, "../../etc/shadow"))
                        return error_json(call, IFACE "SystemError",
                                          "{\"errno\":2,\"errnoName\":\"ENOENT\",\"message\":\"../../etc/shadow\"}");
                if (streq(path, "bin"))
                        return reply_json(call, "{\"data\":\"AAEC\"}");
                return reply_json(call, "{\"data\":\"aGVsbG8=\"}");
        }
        if (streq(method, "WriteFile")) {
                _cleanup_free_ void *data = NULL;
                char text[64];
                size_t n;

                assert_int_equal(base64_decode(param(parameters, "data"), &data, &n), 0);
                snprintf(text, sizeof(text), "{\"bytes\":%zu}", n);
                return reply_json(call, text);
        }
        if (streq(method, "ListTemplates"))
                return error_json(call, "org.varlink.service.InvalidParameter", "{\"parameter\":\"x\"}");
        if (streq(method, "Snapshot") || streq(method, "Hibernate"))
                return reply_json(call, streq(method, "Snapshot") ? "{\"snapshot\":" SNAPSHOT_JSON("false") "}"
                                                                  : "{\"snapshot\":" SNAPSHOT_JSON("true") "}");
        if (streq(method, "ListSnapshots"))
                return reply_json(call, "{\"snapshots\":[" SNAPSHOT_JSON("false") "]}");
        if (streq(method, "Fork"))
                return reply_json(call, "{\"id\":\"fedcba9876543210\"}");
        if (streq(method, "Wake"))
                return reply_json(call, "{\"id\":\"" SID "\"}");
        if (streq(method, "RemoveSnapshot") && !streq(param(parameters, "snapshot"), SNAP))
                return error_json(call, IFACE "NoSuchSnapshot", "{\"message\":\"no snapshot has that id\"}");
        return reply_json(call, "{}");
}

static char *read_idl(void) {
        const char *path = getenv("SANDBOXD_VARLINK_IDL");
        char *text = NULL;
        size_t n = 0;
        FILE *f;

        assert_non_null(path);
        f = fopen(path, "re");
        assert_non_null(f);
        assert_true(getdelim(&text, &n, 0, f) > 0);
        fclose(f);
        return text;
}

static int setup(void **state) {
        static const char *const methods[] = {
                "CreateSandbox", "GetSandbox", "ListSandboxes", "ListTemplates", "Exec", "Destroy", "Pause",
                "Resume", "ReadFile", "WriteFile", "ListFiles", "Remove", "ActForTenant", "Snapshot", "Hibernate",
                "Fork", "Wake", "ListSnapshots", "RemoveSnapshot", "Start", "Wait", "ReadOutput", "Signal",
                "ListProcesses", "WriteStdin", "CloseStdin",
        };
        _cleanup_free_ char *idl = read_idl();

        assert_int_equal(sd_event_new(&event), 0);
        assert_int_equal(varlink_server_new(&fake), 0);
        assert_int_equal(varlink_server_add_interface(fake, idl), 0);
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                char name[64];
                snprintf(name, sizeof(name), IFACE "%s", methods[i]);
                assert_int_equal(varlink_server_bind_method(fake, name, fake_method, NULL), 0);
        }
        snprintf(address, sizeof(address), "@sandboxd-test-mcp-%d", (int) getpid());
        assert_int_equal(varlink_server_listen_address(fake, address, 0600), 0);
        assert_int_equal(varlink_server_attach_event(fake, event, 0), 0);
        assert_int_equal(mcp_server_new(&mcp, event, address), 0);
        sent = json_object_new_array();
        calls = json_object_new_array();
        return 0;
}

static int teardown(void **state) {
        held = varlink_call_unref(held);
        mcp = mcp_server_unref(mcp);
        fake = varlink_server_unref(fake);
        event = sd_event_unref(event);
        json_object_put(sent);
        json_object_put(calls);
        started_word = mfree(started_word);
        return 0;
}

/* ---- the client's side ---- */

static void on_send(json_object *message, void *userdata) {
        json_object_array_add(sent, json_object_get(message));
}

/* Handles text on s, runs the loop until s has nothing pending; returns what handle said. */
static int handle(McpSession *s, const char *text) {
        int r = mcp_session_handle(s, text, strlen(text), on_send, NULL, NULL);

        for (unsigned i = 0; mcp_session_n_pending(s) > 0 && i < 1000; i++)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_int_equal(mcp_session_n_pending(s), 0);
        return r;
}

static json_object *last_sent(void) {
        size_t n = json_object_array_length(sent);

        assert_true(n > 0);
        return json_object_array_get_idx(sent, n - 1);
}

static json_object *get(json_object *o, const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;

        for (char *k = strtok_r(copy, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
                json_object *v;
                if (json_object_is_type(o, json_type_array))
                        v = json_object_array_get_idx(o, (size_t) atoi(k));
                else if (!json_object_object_get_ex(o, k, &v))
                        return NULL;
                o = v;
        }
        return o;
}

static const char *get_string(json_object *o, const char *path) {
        json_object *v = get(o, path);

        return v ? json_object_get_string(v) : NULL;
}

static void assert_error(int code, const char *id_json) {
        json_object *m = last_sent();

        assert_int_equal(json_object_get_int(get(m, "error.code")), code);
        assert_string_equal(json_object_to_json_string(get(m, "id")), id_json);
        assert_string_equal(get_string(m, "jsonrpc"), "2.0");
        assert_null(get(m, "result"));
}

/* tools/call NAME with ARGS (JSON); returns the result. */
static json_object *tool(McpSession *s, const char *name, const char *args) {
        _cleanup_free_ char *text = NULL;
        json_object *res;

        assert_true(asprintf(&text, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
                             "\"arguments\":%s}}", name, args) > 0);
        assert_int_not_equal(handle(s, text), MCP_HANDLE_NO_REPLY);
        res = get(last_sent(), "result");
        assert_non_null(res);
        assert_int_equal(json_object_get_int(get(last_sent(), "id")), 7);
        return res;
}

static const char *tool_text(json_object *res) {
        return get_string(res, "content.0.text");
}

static bool tool_is_error(json_object *res) {
        return json_object_get_boolean(get(res, "isError"));
}

static json_object *last_call(const char *method) {
        for (size_t i = json_object_array_length(calls); i > 0; i--) {
                json_object *c = json_object_array_get_idx(calls, i - 1);
                const char *m = get_string(c, "method");
                if (m && startswith_str(m, IFACE) && streq(m + strlen(IFACE), method))
                        return get(c, "parameters");
        }
        return NULL;
}

/* ---- JSON-RPC ---- */

static void test_jsonrpc_errors(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\0x";
        static const struct {
                const char *text;
                int code;
                const char *id;         /* the reply's id, as JSON */
        } cases[] = {
                { "not json", -32700, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", -32700, "null" },
                /* What json-c alone lets through: refused, the id not altered. */
                { "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551616,\"method\":\"ping\"}", -32700, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", -32700, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":NaN}}", -32700, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\tng\"}", -32700, "null" },
                { "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600, "null" },
                { "42", -32600, "null" },
                { "{\"id\":3,\"method\":\"ping\"}", -32600, "3" },
                { "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", -32600, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", -32600, "null" },
                { "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":5}", -32600, "\"x\"" },
                { "{\"jsonrpc\":\"2.0\",\"id\":4}", -32600, "4" },
                { "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"prompts/list\"}", -32601, "5" },
                { "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":[1]}", -32602, "6" },
                { "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{}}", -32602, "8" },
                { "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_list\","
                  "\"arguments\":[]}}", -32602, "10" },
        };

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                assert_int_equal(handle(s, cases[i].text), MCP_HANDLE_REPLIED);
                assert_error(cases[i].code, cases[i].id);
        }
        assert_int_equal(mcp_session_handle(s, nul, sizeof(nul) - 1, on_send, NULL, NULL), MCP_HANDLE_REPLIED);
        assert_error(-32700, "null");
        /* A message in a buffer of exactly its size, no NUL after it (an HTTP body): read
         * to its end, not beyond (ASan would tell). */
        {
                static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}";
                _cleanup_free_ char *exact = malloc(strlen(ping));
                assert_non_null(exact);
                memcpy(exact, ping, strlen(ping));
                assert_int_equal(mcp_session_handle(s, exact, strlen(ping), on_send, NULL, NULL), MCP_HANDLE_REPLIED);
                assert_int_equal(json_object_get_int(get(last_sent(), "id")), 77);
        }
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}"),
                         MCP_HANDLE_REPLIED);
        assert_error(-32602, "9");
        assert_string_equal(get_string(last_sent(), "error.message"), "Unknown tool: rm_rf");

        /* Notifications and responses: nothing sent, whatever they say. */
        size_t n = json_object_array_length(sent);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"), MCP_HANDLE_NO_REPLY);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"no/such\"}"), MCP_HANDLE_NO_REPLY);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":7}"), MCP_HANDLE_NO_REPLY);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":11,\"result\":{}}"), MCP_HANDLE_NO_REPLY);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{\"code\":1,\"message\":\"x\"}}"),
                         MCP_HANDLE_NO_REPLY);
        assert_int_equal(json_object_array_length(sent), n);

        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}"), MCP_HANDLE_REPLIED);
        assert_string_equal(json_object_to_json_string(last_sent()), "{ \"jsonrpc\": \"2.0\", \"id\": \"p\", \"result\": { } }");
}

static void test_version_negotiation(void **state) {
        static const struct {
                const char *asked, *answered;
        } cases[] = {
                { "2025-11-25", "2025-11-25" },
                { "2025-06-18", "2025-06-18" },
                { "2025-03-26", "2025-03-26" },
                { "2024-11-05", "2025-11-25" },
                { "2099-01-01", "2025-11-25" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(mcp_session_freep) McpSession *s = NULL;
                _cleanup_free_ char *text = NULL;

                assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
                assert_null(mcp_session_get_protocol_version(s));
                assert_true(asprintf(&text, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                                     "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
                                     "\"version\":\"1\"}}}", cases[i].asked) > 0);
                assert_int_equal(handle(s, text), MCP_HANDLE_REPLIED);
                assert_string_equal(get_string(last_sent(), "result.protocolVersion"), cases[i].answered);
                assert_string_equal(mcp_session_get_protocol_version(s), cases[i].answered);
                assert_string_equal(get_string(last_sent(), "result.serverInfo.name"), "sandboxd-mcp");
                assert_false(json_object_get_boolean(get(last_sent(), "result.capabilities.tools.listChanged")));
        }

        /* initialize without a version: bad params. */
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        assert_int_equal(handle(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}"),
                         MCP_HANDLE_REPLIED);
        assert_error(-32602, "1");

        /* HTTP's header. */
        assert_int_equal(mcp_session_set_protocol_version(s, NULL), 0);
        assert_string_equal(mcp_session_get_protocol_version(s), "2025-03-26");
        assert_int_equal(mcp_session_set_protocol_version(s, "2025-06-18"), 0);
        assert_string_equal(mcp_session_get_protocol_version(s), "2025-06-18");
        assert_int_equal(mcp_session_set_protocol_version(s, "2024-11-05"), -EPROTONOSUPPORT);
        assert_false(mcp_protocol_version_supported("2025-11-25 "));
        assert_true(mcp_protocol_version_supported("2025-11-25"));
}

/* ---- tools/list ---- */

static void test_tools_list_schemas(void **state) {
        static const char *const names[] = {
                "run_code", "sandbox_create", "sandbox_list", "sandbox_info", "sandbox_ports", "sandbox_destroy",
                "sandbox_pause",
                "sandbox_resume", "sandbox_snapshot", "sandbox_fork", "sandbox_hibernate", "sandbox_wake",
                "snapshot_list", "snapshot_remove", "run_command", "process_start", "process_list",
                "process_read", "process_signal", "process_wait", "process_write_stdin", "file_read",
                "file_write", "file_list", "file_delete", "templates_list", "quota_info",
        };
        _cleanup_json_ json_object *list = mcp_tools_list();
        json_object *tools;

        assert_non_null(list);
        tools = get(list, "tools");
        assert_int_equal(json_object_array_length(tools), ELEMENTSOF(names));
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                json_object *t = json_object_array_get_idx(tools, i), *props, *req;
                assert_string_equal(get_string(t, "name"), names[i]);
                assert_non_null(get_string(t, "title"));
                assert_true(strlen(get_string(t, "description")) > 20);
                assert_string_equal(get_string(t, "inputSchema.type"), "object");
                assert_false(json_object_get_boolean(get(t, "inputSchema.additionalProperties")));
                props = get(t, "inputSchema.properties");
                req = get(t, "inputSchema.required");
                assert_non_null(props);
                for (size_t k = 0; k < json_object_array_length(req); k++)
                        assert_non_null(get(props, json_object_get_string(json_object_array_get_idx(req, k))));
                json_object_object_foreach(props, key, prop) {
                        assert_non_null(get_string(prop, "type"));
                        assert_non_null(get_string(prop, "description"));
                        (void) key;
                }
                assert_string_equal(get_string(t, "outputSchema.type"), "object");
                assert_non_null(get(t, "outputSchema.required"));
                assert_true(json_object_is_type(get(t, "annotations.readOnlyHint"), json_type_boolean));
                assert_true(json_object_is_type(get(t, "annotations.destructiveHint"), json_type_boolean));
                assert_true(json_object_is_type(get(t, "annotations.idempotentHint"), json_type_boolean));
                assert_true(json_object_is_type(get(t, "annotations.openWorldHint"), json_type_boolean));
                /* A tool that only reads never destroys. */
                if (json_object_get_boolean(get(t, "annotations.readOnlyHint")))
                        assert_false(json_object_get_boolean(get(t, "annotations.destructiveHint")));
        }
        assert_string_equal(get_string(tools, "0.inputSchema.properties.language.enum.2"), "bash");
        assert_int_equal(json_object_get_int(get(tools, "0.inputSchema.properties.timeout.maximum")), 3600);
        assert_true(json_object_get_boolean(get(tools, "5.annotations.destructiveHint")));  /* sandbox_destroy */
        assert_string_equal(get_string(tools, "5.inputSchema.required.0"), "sandbox_id");
}

/* ---- arguments ---- */

static void test_arguments_checked(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        static const struct {
                const char *tool, *args, *message;
        } cases[] = {
                { "run_code", "{\"language\":\"cobol\",\"code\":\"x\"}", "language must be one of the schema's enum" },
                { "run_code", "{\"language\":\"python\"}", "code is required" },
                { "run_code", "{\"language\":\"python\",\"code\":null}",
                  "code must not be null (leave it out for the default)" },
                { "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":null}",
                  "timeout must not be null (leave it out for the default)" },
                { "run_code", "{\"language\":\"python\",\"code\":7}", "code must be a string" },
                { "run_code", "{\"language\":\"python\",\"code\":\"print(1)\\u0000print(2)\"}",
                  "code must not hold a NUL byte (\\u0000)" },
                { "run_command", "{\"sandbox_id\":\"" SID "\",\"command\":\"x\",\"env\":[\"A=1\\u0000B\"]}",
                  "env[0] must not hold a NUL byte (\\u0000)" },
                { "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":\"5\"}", "timeout must be a number of seconds" },
                { "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":-1}", "timeout must be a number of seconds" },
                { "sandbox_create", "{\"memory_mb\":256.5}", "memory_mb must be an integer" },
                { "run_command", "{\"sandbox_id\":\"" SID "\",\"command\":\"x\",\"env\":[1]}",
                  "env must be an array of strings" },
                { "file_delete", "{\"sandbox_id\":\"" SID "\",\"path\":\"x\",\"recursive\":\"yes\"}",
                  "recursive must be a boolean" },
                { "sandbox_list", "{\"all\":true}", "unknown argument all" },
        };

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *want = NULL;
                json_object *res = tool(s, cases[i].tool, cases[i].args);
                assert_true(tool_is_error(res));
                assert_true(asprintf(&want, "Invalid arguments for %s: %s", cases[i].tool, cases[i].message) > 0);
                assert_string_equal(tool_text(res), want);
                assert_null(get(res, "structuredContent"));
        }
        /* None reached sandboxd. */
        assert_int_equal(json_object_array_length(calls), 0);
}

/* ---- the tools against the fake sandboxd ---- */

static void test_run_code(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        json_object *res, *p;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        res = tool(s, "run_code", "{\"language\":\"node\",\"code\":\"console.log(1)\",\"timeout\":9,\"memory_mb\":64}");
        p = last_call("CreateSandbox");
        assert_string_equal(get_string(p, "template"), "node");
        assert_true(json_object_get_boolean(get(p, "options.Ephemeral")));
        assert_int_equal(json_object_get_int64(get(p, "options.MemoryMax")), 64 << 20);
        assert_null(get(p, "options.Tenant"));
        p = last_call("Exec");
        assert_string_equal(get_string(p, "id"), SID);
        /* The code goes on stdin after its length, never in the argv (code-runner.h). */
        assert_string_equal(get_string(p, "argv.0"), "node");
        assert_string_equal(get_string(p, "argv.1"), "-e");
        assert_null(strstr(json_object_to_json_string(get(p, "argv")), "console.log(1)"));
        assert_string_equal(get_string(p, "options.Stdin"), "MTQKY29uc29sZS5sb2coMSk="); /* "14\nconsole.log(1)" */
        assert_int_equal(json_object_get_int(get(p, "options.Timeout")), 9);
        assert_int_equal(json_object_get_int(get(p, "options.OutputMax")), MCP_OUTPUT_MAX);

        /* The fake's result: timed out (a tool error), truncated, stderr not UTF-8: base64 of its
         * one byte, flagged, rather than U+FFFD. */
        assert_true(tool_is_error(res));
        assert_int_equal(json_object_get_int(get(res, "structuredContent.exit_code")), 137);
        assert_string_equal(get_string(res, "structuredContent.stdout"), "hi\n");
        assert_string_equal(get_string(res, "structuredContent.stdout_encoding"), "utf-8");
        assert_string_equal(get_string(res, "structuredContent.stderr"), "/w==");
        assert_string_equal(get_string(res, "structuredContent.stderr_encoding"), "base64");
        assert_true(json_object_get_boolean(get(res, "structuredContent.timed_out")));
        assert_true(json_object_get_boolean(get(res, "structuredContent.truncated")));
        assert_int_equal(json_object_get_int(get(res, "structuredContent.stdout_bytes")), 100000);
        assert_int_equal(json_object_get_int(get(res, "structuredContent.duration_ms")), 2000);
        assert_string_equal(get_string(res, "content.1.text"),
                            "Output truncated: stdout 3 of 100000 bytes shown, stderr 1 of 1 bytes shown.");
        {
                _cleanup_json_ json_object *text = json_tokener_parse(tool_text(res));
                assert_true(json_object_equal(text, get(res, "structuredContent")));
        }

        /* Refused before it ran: the refusal is the result, and letting the ephemeral
         * sandbox go is sandboxd's business (no Destroy from here). */
        json_object_put(calls);
        calls = json_object_new_array();
        res = tool(s, "run_code", "{\"language\":\"bash\",\"code\":\"refused\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "InvalidOption: Timeout out of range");
        assert_int_equal(json_object_array_length(calls), 2); /* CreateSandbox, Exec */

        /* Timeouts: 2.0 is an integer; half a second stays half a second (sandboxd checks the range). */
        (void) tool(s, "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":2.0}");
        assert_int_equal(json_object_get_int(get(last_call("Exec"), "options.Timeout")), 2);
        (void) tool(s, "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":0.5}");
        assert_null(get(last_call("Exec"), "options.Timeout"));
        assert_int_equal(json_object_get_int(get(last_call("Exec"), "options.TimeoutUSec")), 500000);
        (void) tool(s, "run_code", "{\"language\":\"python\",\"code\":\"1\",\"timeout\":4000}");
        assert_int_equal(json_object_get_int(get(last_call("Exec"), "options.Timeout")), 4000);
}

static const char hang[] = "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"tools/call\",\"params\":{\"name\":"
                           "\"run_command\",\"arguments\":{\"sandbox_id\":\"" SID "\",\"command\":\"hang\"}}}";

static void test_error_mapping(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        _cleanup_(mcp_server_unrefp) McpServer *nowhere = NULL;
        _cleanup_(mcp_session_freep) McpSession *lost = NULL;
        json_object *res;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        res = tool(s, "sandbox_info", "{\"sandbox_id\":\"ffffffffffffffff\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "NoSuchSandbox: no sandbox has that id");
        res = tool(s, "file_read", "{\"sandbox_id\":\"" SID "\",\"path\":\"../../etc/shadow\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "ENOENT: ../../etc/shadow");
        res = tool(s, "templates_list", "{}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "sandboxd refused parameter x (org.varlink.service.InvalidParameter)");

        /* sandboxd not there. */
        assert_int_equal(mcp_server_new(&nowhere, event, "@sandboxd-test-mcp-nobody-listens"), 0);
        assert_int_equal(mcp_session_new(nowhere, NULL, &lost), 0);
        res = tool(lost, "sandbox_list", "{}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "Cannot reach sandboxd at @sandboxd-test-mcp-nobody-listens: Connection "
                                            "refused (is sandboxd-varlink.socket running?)");

        /* sandboxd gone before it answered. */
        assert_int_equal(mcp_session_handle(s, hang, strlen(hang), on_send, NULL, NULL), MCP_HANDLE_PENDING);
        while (!held)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        fake = varlink_server_unref(fake);
        held = varlink_call_unref(held);
        while (mcp_session_n_pending(s) > 0)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_string_equal(tool_text(get(last_sent(), "result")), "sandboxd closed the connection before it answered");
}

static void test_files(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        json_object *res, *p;
        _cleanup_free_ void *data = NULL;
        size_t n;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        res = tool(s, "file_write", "{\"sandbox_id\":\"" SID "\",\"path\":\"a/b.txt\",\"content\":\"hello\",\"mode\":384}");
        assert_false(tool_is_error(res));
        p = last_call("WriteFile");
        assert_int_equal(base64_decode(get_string(p, "data"), &data, &n), 0);
        assert_int_equal(n, 5);
        assert_memory_equal(data, "hello", 5);
        assert_true(json_object_get_boolean(get(p, "options.CreateParents")));
        assert_int_equal(json_object_get_int(get(p, "options.Mode")), 0600);
        assert_string_equal(json_object_to_json_string(get(res, "structuredContent")),
                            "{ \"path\": \"a\\/b.txt\", \"bytes\": 5 }");

        /* Past the most WriteFile takes: in parts, the later ones appended (issue 27). */
        {
                size_t big = FILE_PART_MAX + FILE_PART_MAX / 2 + 3, first = json_object_array_length(calls);
                _cleanup_free_ char *args = malloc(big + 128), *content = malloc(big + 1);
                json_object *c;

                assert_non_null(args);
                assert_non_null(content);
                memset(content, 'z', big);
                content[big] = 0;
                snprintf(args, big + 128, "{\"sandbox_id\":\"" SID "\",\"path\":\"big\",\"content\":\"%s\"}", content);
                res = tool(s, "file_write", args);
                assert_false(tool_is_error(res));
                assert_int_equal(json_object_get_int64(get(res, "structuredContent.bytes")), (int64_t) big);
                assert_int_equal(json_object_array_length(calls) - first, 2);
                for (size_t i = 0; i < 2; i++) {
                        c = get(json_object_array_get_idx(calls, first + i), "parameters");
                        free(data);
                        data = NULL;
                        assert_int_equal(base64_decode(get_string(c, "data"), &data, &n), 0);
                        assert_int_equal(n, i == 0 ? FILE_PART_MAX : big - FILE_PART_MAX);
                        assert_int_equal(json_object_get_boolean(get(c, "options.Append")), i == 1);
                }
        }

        res = tool(s, "file_write", "{\"sandbox_id\":\"" SID "\",\"path\":\"x\",\"content\":\"!!\",\"encoding\":\"base64\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "Invalid arguments for file_write: content is not base64");

        res = tool(s, "file_read", "{\"sandbox_id\":\"" SID "\",\"path\":\"t\",\"offset\":3}");
        assert_string_equal(get_string(res, "structuredContent.content"), "hello");
        assert_string_equal(get_string(res, "structuredContent.encoding"), "utf-8");
        p = last_call("ReadFile");
        assert_int_equal(json_object_get_int(get(p, "offset")), 3);
        assert_int_equal(json_object_get_int(get(p, "length")), MCP_FILE_READ_MAX + 1);
        res = tool(s, "file_read", "{\"sandbox_id\":\"" SID "\",\"path\":\"bin\"}");
        assert_string_equal(get_string(res, "structuredContent.content"), "AAEC");
        assert_string_equal(get_string(res, "structuredContent.encoding"), "base64");

        res = tool(s, "file_delete", "{\"sandbox_id\":\"" SID "\",\"path\":\"d\",\"recursive\":true}");
        assert_false(tool_is_error(res));
        assert_true(json_object_get_boolean(get(last_call("Remove"), "recursive")));
        res = tool(s, "file_list", "{\"sandbox_id\":\"" SID "\"}");
        /* The fake answers {}: no entries is a fault of sandboxd's, said as one. */
        assert_true(tool_is_error(res));
        assert_string_equal(get_string(last_call("ListFiles"), "path"), ".");
        assert_int_equal(json_object_get_int(get(last_call("ListFiles"), "depth")), 1);
}

static void test_snapshots(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        _cleanup_json_ json_object *list = mcp_tools_list();
        json_object *res, *p;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        /* snapshot_remove and sandbox_hibernate lose what was; snapshot_list only reads. */
        for (size_t i = 0; i < json_object_array_length(get(list, "tools")); i++) {
                json_object *t = json_object_array_get_idx(get(list, "tools"), i);
                const char *name = get_string(t, "name");
                if (streq(name, "snapshot_remove") || streq(name, "sandbox_hibernate"))
                        assert_true(json_object_get_boolean(get(t, "annotations.destructiveHint")));
                if (streq(name, "snapshot_list"))
                        assert_true(json_object_get_boolean(get(t, "annotations.readOnlyHint")));
        }

        res = tool(s, "sandbox_snapshot", "{\"sandbox_id\":\"" SID "\",\"include_tmp\":true}");
        assert_false(tool_is_error(res));
        p = last_call("Snapshot");
        assert_string_equal(get_string(p, "id"), SID);
        assert_true(json_object_get_boolean(get(p, "options.IncludeTmp")));
        assert_string_equal(get_string(res, "structuredContent.snapshot.id"), SNAP);
        assert_int_equal(json_object_get_int(get(res, "structuredContent.snapshot.contentSize")), 5678);
        {
                _cleanup_json_ json_object *text = json_tokener_parse(tool_text(res));
                assert_true(json_object_equal(text, get(res, "structuredContent")));
        }
        res = tool(s, "sandbox_snapshot", "{\"sandbox_id\":\"ffffffffffffffff\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "NoSuchSandbox: no sandbox has that id");
        assert_null(get(last_call("Snapshot"), "options.IncludeTmp"));

        res = tool(s, "sandbox_hibernate", "{\"sandbox_id\":\"" SID "\"}");
        assert_true(json_object_get_boolean(get(res, "structuredContent.snapshot.hibernated")));
        assert_string_equal(get_string(last_call("Hibernate"), "id"), SID);

        /* Fork: the new sandbox, with the options given; Wake: the woken one. */
        res = tool(s, "sandbox_fork", "{\"sandbox_id\":\"" SID "\",\"name\":\"f\",\"memory_mb\":64,"
                                      "\"idle_action\":\"hibernate\",\"idle_timeout\":30}");
        assert_false(tool_is_error(res));
        p = last_call("Fork");
        assert_string_equal(get_string(p, "id"), SID);
        assert_string_equal(get_string(p, "options.Name"), "f");
        assert_string_equal(get_string(p, "options.IdleAction"), "hibernate");
        assert_int_equal(json_object_get_int64(get(p, "options.MemoryMax")), 64 << 20);
        assert_null(get(p, "options.Ephemeral"));
        assert_string_equal(get_string(last_call("GetSandbox"), "id"), "fedcba9876543210");
        assert_string_equal(get_string(res, "structuredContent.sandbox.id"), "fedcba9876543210");
        res = tool(s, "sandbox_fork", "{\"sandbox_id\":\"" SID "\",\"idle_action\":\"sleep\"}");
        assert_string_equal(tool_text(res), "Invalid arguments for sandbox_fork: idle_action must be one of the "
                                            "schema's enum");
        res = tool(s, "sandbox_wake", "{\"sandbox_id\":\"" SID "\"}");
        assert_string_equal(get_string(last_call("Wake"), "id"), SID);
        assert_string_equal(get_string(res, "structuredContent.sandbox.id"), SID);

        res = tool(s, "sandbox_create", "{\"from_snapshot\":\"" SNAP "\",\"idle_action\":\"pause\"}");
        assert_false(tool_is_error(res));
        p = last_call("CreateSandbox");
        assert_string_equal(get_string(p, "options.FromSnapshot"), SNAP);
        assert_string_equal(get_string(p, "options.IdleAction"), "pause");

        res = tool(s, "snapshot_list", "{}");
        assert_string_equal(get_string(res, "structuredContent.snapshots.0.source"), SID);
        res = tool(s, "snapshot_remove", "{\"snapshot_id\":\"" SNAP "\"}");
        assert_false(tool_is_error(res));
        assert_string_equal(json_object_to_json_string(get(res, "structuredContent")),
                            "{ \"snapshot_id\": \"" SNAP "\", \"removed\": true }");
        res = tool(s, "snapshot_remove", "{\"snapshot_id\":\"gone\"}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "NoSuchSnapshot: no snapshot has that id");
}

/* Every argument of sandbox_create reaches CreateSandbox under the core's option name
 * (sandbox-api.h's table), in the core's units. */
static void test_create_options(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        json_object *res, *p;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        res = tool(s, "sandbox_create", "{\"template\":\"shell\",\"name\":\"n\",\"memory_mb\":64,"
                                        "\"cpu_percent\":50,\"tasks_max\":32,\"disk_mb\":128,"
                                        "\"idle_timeout\":30,\"idle_action\":\"pause\",\"lifetime\":90,"
                                        "\"egress_allow\":[\"example.org\"],\"egress_deny\":[\"x.example.org\"],"
                                        "\"labels\":{\"team\":\"a\"},\"secrets\":[\"K@example.org:x-api-key\"]}");
        assert_false(tool_is_error(res));
        p = last_call("CreateSandbox");
        assert_string_equal(get_string(p, "options.Name"), "n");
        assert_int_equal(json_object_get_int64(get(p, "options.MemoryMax")), 64 << 20);
        assert_int_equal(json_object_get_int64(get(p, "options.CPUQuotaPerSecUSec")), 500000);
        assert_int_equal(json_object_get_int64(get(p, "options.TasksMax")), 32);
        assert_int_equal(json_object_get_int64(get(p, "options.DiskMax")), 128 << 20);
        assert_int_equal(json_object_get_int64(get(p, "options.IdleTimeout")), 30);
        assert_string_equal(get_string(p, "options.IdleAction"), "pause");
        assert_int_equal(json_object_get_int64(get(p, "options.Timeout")), 90);
        assert_string_equal(get_string(p, "options.EgressAllow.0"), "example.org");
        assert_string_equal(get_string(p, "options.EgressDeny.0"), "x.example.org");
        assert_string_equal(get_string(p, "options.Labels.team"), "a");
        assert_string_equal(get_string(p, "options.Secrets.0"), "K@example.org:x-api-key");
        assert_null(get(p, "options.Ephemeral"));
        assert_int_equal(json_object_object_length(get(p, "options")), 12);
}

static void test_tenant(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL, *evil = NULL;
        json_object *res;

        /* Each request's connection acts for the tenant before anything else. */
        assert_int_equal(mcp_session_new(mcp, "acme", &s), 0);
        res = tool(s, "sandbox_create", "{\"template\":\"shell\",\"name\":\"n1\",\"lifetime\":60}");
        assert_false(tool_is_error(res));
        assert_string_equal(get_string(calls, "0.method"), IFACE "ActForTenant");
        assert_string_equal(get_string(calls, "0.parameters.tenant"), "acme");
        assert_string_equal(get_string(calls, "1.method"), IFACE "CreateSandbox");
        assert_string_equal(get_string(calls, "1.parameters.options.Name"), "n1");
        assert_int_equal(json_object_get_int(get(calls, "1.parameters.options.Timeout")), 60);
        /* The tenant is the connection's: not an option of its own. */
        assert_null(get(calls, "1.parameters.options.Tenant"));
        assert_string_equal(get_string(calls, "2.method"), IFACE "GetSandbox");
        res = tool(s, "run_command", "{\"sandbox_id\":\"" SID "\",\"command\":\"echo\"}");
        assert_string_equal(get_string(calls, "3.method"), IFACE "ActForTenant");
        assert_string_equal(get_string(calls, "4.method"), IFACE "Start");
        assert_string_equal(get_string(calls, "5.method"), IFACE "Wait");
        assert_string_equal(get_string(calls, "6.method"), IFACE "ReadOutput");
        assert_int_equal(json_object_array_length(calls), 7);

        /* Refused: the tool does nothing. */
        assert_int_equal(mcp_session_new(mcp, "evil", &evil), 0);
        res = tool(evil, "sandbox_list", "{}");
        assert_true(tool_is_error(res));
        assert_string_equal(tool_text(res), "AccessDenied: not for you");
        assert_string_equal(get_string(calls, "7.method"), IFACE "ActForTenant");
        assert_int_equal(json_object_array_length(calls), 8);

        /* Without a tenant, none. */
        s = mcp_session_free(s);
        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        (void) tool(s, "sandbox_list", "{}");
        assert_string_equal(get_string(calls, "8.method"), IFACE "ListSandboxes");
}

static void test_cancel(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        static const char pause_call[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                                         "\"name\":\"sandbox_pause\",\"arguments\":{\"sandbox_id\":\"" SID "\"}}}";
        static const char cancel_other[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                                           "\"requestId\":\"other\"}}";
        static const char cancel_h[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                                       "\"requestId\":\"h\"}}";
        McpRequest *r = NULL;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);

        /* By the transport (an HTTP client gone). */
        assert_int_equal(mcp_session_handle(s, hang, strlen(hang), on_send, NULL, &r), MCP_HANDLE_PENDING);
        assert_non_null(r);
        while (!held)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        mcp_request_cancel(r);
        assert_int_equal(mcp_session_n_pending(s), 0);
        for (int i = 0; i < 5; i++)
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
        held = varlink_call_unref(held);
        assert_int_equal(json_object_array_length(sent), 0);

        /* By the client's notification. */
        assert_int_equal(mcp_session_handle(s, hang, strlen(hang), on_send, NULL, NULL), MCP_HANDLE_PENDING);
        assert_int_equal(mcp_session_handle(s, cancel_other, strlen(cancel_other), on_send, NULL, NULL),
                         MCP_HANDLE_NO_REPLY);
        assert_int_equal(mcp_session_n_pending(s), 1);
        assert_int_equal(mcp_session_handle(s, cancel_h, strlen(cancel_h), on_send, NULL, NULL), MCP_HANDLE_NO_REPLY);
        assert_int_equal(mcp_session_n_pending(s), 0);
        held = varlink_call_unref(held);
        assert_int_equal(json_object_array_length(sent), 0);

        /* A session freed with a request pending: the request still answers. */
        assert_int_equal(mcp_session_handle(s, pause_call, strlen(pause_call), on_send, NULL, NULL), MCP_HANDLE_PENDING);
        s = mcp_session_free(s);
        while (json_object_array_length(sent) == 0)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_string_equal(get_string(last_sent(), "result.structuredContent.sandbox.state"), "running");
        assert_string_equal(get_string(calls, "0.method"), IFACE "Start");
        assert_string_equal(get_string(last_call("Pause"), "id"), SID);
}

/* A cancelled run_command kills its command: SIGKILL to the process Start made, on a
 * connection of its own, whether the cancel came while it ran or while Start was under
 * way. A cancelled process_wait leaves its process alone. */
static void test_cancel_kills(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        static const char hang_start[] = "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"tools/call\",\"params\":{"
                                         "\"name\":\"run_command\",\"arguments\":{\"sandbox_id\":\"" SID "\","
                                         "\"command\":\"hang-start\"}}}";
        static const char cancel_h[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                                       "\"requestId\":\"h\"}}";
        json_object *sig;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);

        /* While it runs (its Wait pending). */
        assert_int_equal(mcp_session_handle(s, hang, strlen(hang), on_send, NULL, NULL), MCP_HANDLE_PENDING);
        while (!held)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_string_equal(get_string(last_call("Wait"), "id"), SID);
        assert_int_equal(mcp_session_handle(s, cancel_h, strlen(cancel_h), on_send, NULL, NULL), MCP_HANDLE_NO_REPLY);
        while (!(sig = last_call("Signal")))
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_int_equal(json_object_get_int(get(sig, "process")), 7);
        assert_int_equal(json_object_get_int(get(sig, "signal")), 9);
        assert_string_equal(get_string(sig, "id"), SID);
        held = varlink_call_unref(held);
        /* The Signal's connection closes once it is answered. */
        while (mcp_server_is_busy(mcp))
                assert_true(sd_event_run(event, 100 * 1000) >= 0);

        /* While Start is under way: killed once Start names the process. */
        json_object_put(calls);
        calls = json_object_new_array();
        assert_int_equal(mcp_session_handle(s, hang_start, strlen(hang_start), on_send, NULL, NULL), MCP_HANDLE_PENDING);
        while (!held)
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_int_equal(mcp_session_handle(s, cancel_h, strlen(cancel_h), on_send, NULL, NULL), MCP_HANDLE_NO_REPLY);
        assert_int_equal(mcp_session_n_pending(s), 0);
        assert_null(last_call("Signal"));
        assert_int_equal(reply_json(held, "{\"process\":7}"), 0);
        held = varlink_call_unref(held);
        while (!(sig = last_call("Signal")))
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
        assert_int_equal(json_object_get_int(get(sig, "process")), 7);
        assert_int_equal(json_object_array_length(sent), 0);
        while (mcp_server_is_busy(mcp))
                assert_true(sd_event_run(event, 100 * 1000) >= 0);
}

static void test_process_tools(void **state) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        json_object *res;

        assert_int_equal(mcp_session_new(mcp, NULL, &s), 0);
        res = tool(s, "process_start", "{\"sandbox_id\":\"" SID "\",\"command\":\"serve\",\"stdin_pipe\":true}");
        assert_false(tool_is_error(res));
        assert_int_equal(json_object_get_int(get(res, "structuredContent.process_id")), 7);
        /* No timeout of its own: it runs as long as the sandbox. */
        assert_null(get(last_call("Start"), "options.Timeout"));
        assert_true(json_object_get_boolean(get(last_call("Start"), "options.StdinPipe")));

        res = tool(s, "process_list", "{\"sandbox_id\":\"" SID "\"}");
        assert_int_equal(json_object_get_int(get(res, "structuredContent.processes.0.pid")), 12);
        assert_true(json_object_get_boolean(get(res, "structuredContent.processes.0.running")));
        assert_int_equal(json_object_get_int(get(res, "structuredContent.processes.1.exit_code")), 3);

        res = tool(s, "process_read", "{\"sandbox_id\":\"" SID "\",\"process_id\":7,\"stdout_offset\":10}");
        assert_string_equal(get_string(res, "structuredContent.stdout"), "hi\n");
        assert_int_equal(json_object_get_int(get(res, "structuredContent.stdout_offset")), 100000);
        assert_int_equal(json_object_get_int(get(res, "structuredContent.dropped")), 100000 - 10 - 3);
        assert_int_equal(json_object_get_int(get(last_call("ReadOutput"), "stdoutOffset")), 10);

        res = tool(s, "process_signal", "{\"sandbox_id\":\"" SID "\",\"process_id\":7,\"signal\":\"term\"}");
        assert_false(tool_is_error(res));
        assert_int_equal(json_object_get_int(get(last_call("Signal"), "signal")), 15);
        res = tool(s, "process_signal", "{\"sandbox_id\":\"" SID "\",\"process_id\":7,\"signal\":\"NOPE\"}");
        assert_true(tool_is_error(res));

        res = tool(s, "process_write_stdin", "{\"sandbox_id\":\"" SID "\",\"process_id\":7,\"data\":\"abc\","
                                              "\"close\":true}");
        assert_int_equal(json_object_get_int(get(res, "structuredContent.bytes")), 3);
        assert_string_equal(get_string(last_call("WriteStdin"), "data"), "YWJj");
        assert_int_equal(json_object_get_int(get(last_call("CloseStdin"), "process")), 7);

        res = tool(s, "process_wait", "{\"sandbox_id\":\"" SID "\",\"process_id\":8,\"timeout\":1}");
        assert_false(tool_is_error(res));
        assert_true(json_object_get_boolean(get(res, "structuredContent.running")));
        res = tool(s, "process_wait", "{\"sandbox_id\":\"" SID "\",\"process_id\":7}");
        assert_false(json_object_get_boolean(get(res, "structuredContent.running")));
        assert_int_equal(json_object_get_int(get(res, "structuredContent.exit_code")), 137);
        assert_int_equal(json_object_get_int(get(last_call("Wait"), "timeoutSec")), 60);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_jsonrpc_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_version_negotiation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tools_list_schemas, setup, teardown),
                cmocka_unit_test_setup_teardown(test_arguments_checked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_run_code, setup, teardown),
                cmocka_unit_test_setup_teardown(test_error_mapping, setup, teardown),
                cmocka_unit_test_setup_teardown(test_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tenant, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_kills, setup, teardown),
                cmocka_unit_test_setup_teardown(test_process_tools, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
