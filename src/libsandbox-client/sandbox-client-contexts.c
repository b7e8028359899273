/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Code contexts over D-Bus (sandboxd-api(7), CONTEXTS): RunCode and InterruptContext, the
 * replies' a{sv} given as JSON objects of the same names. */

#include <json-c/json.h>

#include "json-util.h"
#include "sandbox-client-internal.h"

/* A variant of the types the context methods send, as JSON. */
static int read_variant_json(sd_bus_message *m, json_object **ret) {
        const char *contents, *s;
        char type;
        int r;

        r = sd_bus_message_peek_type(m, &type, &contents);
        if (r < 0)
                return r;
        if (streq(contents, "s")) {
                r = sd_bus_message_read(m, "v", "s", &s);
                *ret = r < 0 ? NULL : json_object_new_string(s);
        } else if (streq(contents, "b")) {
                int b;
                r = sd_bus_message_read(m, "v", "b", &b);
                *ret = r < 0 ? NULL : json_object_new_boolean(b);
        } else if (streq(contents, "t")) {
                uint64_t t;
                r = sd_bus_message_read(m, "v", "t", &t);
                *ret = r < 0 ? NULL : json_object_new_uint64(t);
        } else if (streq(contents, "as")) {
                _cleanup_json_ json_object *a = json_object_new_array();
                r = sd_bus_message_enter_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_enter_container(m, 'a', "s");
                while (r >= 0 && (r = sd_bus_message_read(m, "s", &s)) > 0)
                        if (!a || json_object_array_add(a, json_object_new_string(s)) < 0)
                                return -ENOMEM;
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                *ret = r < 0 ? NULL : TAKE_PTR(a);
        } else if (streq(contents, "a{ss}")) {
                _cleanup_json_ json_object *o = json_object_new_object();
                const char *k;
                r = sd_bus_message_enter_container(m, 'v', "a{ss}");
                if (r >= 0)
                        r = sd_bus_message_enter_container(m, 'a', "{ss}");
                while (r >= 0 && (r = sd_bus_message_read(m, "{ss}", &k, &s)) > 0)
                        if (!o || json_add(o, k, json_object_new_string(s)) < 0)
                                return -ENOMEM;
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                *ret = r < 0 ? NULL : TAKE_PTR(o);
        } else {
                *ret = NULL;
                return sd_bus_message_skip(m, "v");
        }
        if (r >= 0 && !*ret)
                return -ENOMEM;
        return r;
}

static int read_dict_json(sd_bus_message *m, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;

        if (!o)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                json_object *v = NULL;
                const char *name;
                r = sd_bus_message_read(m, "s", &name);
                if (r >= 0)
                        r = read_variant_json(m, &v);
                if (r >= 0 && v && json_add(o, name, v) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int sandbox_handle_run_code(SandboxHandle *h, const char *context, const char *code, uint64_t timeout_sec,
                            uint64_t output_max, json_object **ret_events, json_object **ret_result,
                            SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_json_ json_object *events = json_object_new_array(), *result = NULL;
        uint64_t timeout = timeout_sec > 0 ? timeout_sec : EXEC_TIMEOUT_DEFAULT_SEC;
        int r;

        if (!events)
                return client_error_from_bus(error, NULL, -ENOMEM);
        r = client_new_call(h->client, h, "RunCode", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", context ?: "", code);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && timeout_sec > 0)
                r = sd_bus_message_append(m, "{sv}", "Timeout", "t", timeout_sec);
        if (r >= 0 && output_max > 0)
                r = sd_bus_message_append(m, "{sv}", "OutputMax", "t", output_max);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        /* A kernel may take seconds to start before the cell's own time begins. */
        r = client_call(h->client, m, sec_to_usec_add(timeout, EXEC_CALL_SLACK_SEC + 120), /* interruptible= */ true,
                        error, &reply);
        if (r < 0)
                return r;

        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0) {
                json_object *e = NULL;
                r = sd_bus_message_peek_type(reply, NULL, NULL);
                if (r <= 0)
                        break;
                r = read_dict_json(reply, &e);
                if (r >= 0 && json_object_array_add(events, e) < 0) {
                        json_object_put(e);
                        r = -ENOMEM;
                }
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = read_dict_json(reply, &result);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        *ret_events = TAKE_PTR(events);
        *ret_result = TAKE_PTR(result);
        return 0;
}

int sandbox_handle_interrupt_context(SandboxHandle *h, const char *context, SandboxClientError *error) {
        return client_call_method(h->client, h, "InterruptContext", error, "s", context);
}
