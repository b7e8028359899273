/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-caller.h"
#include "bus-util.h"
#include "list.h"
#include "log.h"
#include "polkit.h"
#include "sandbox-errors.h"
#include "strv.h"

int bus_read_strv_bounded(sd_bus_message *m, size_t max_n, size_t max_bytes, const char *what, char ***ret,
                          sd_bus_error *error) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0, allocated = 0, bytes = 0;
        const char *s;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read_basic(m, 's', &s)) > 0) {
                bytes += strlen(s) + 1;
                if (n >= max_n || bytes > max_bytes)
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                  "%s: at most %zu strings of %zu bytes in all.", what, max_n, max_bytes);
                if (n + 2 > allocated) {
                        size_t a = MAX(allocated * 2, (size_t) 16);
                        char **nl = realloc(l, a * sizeof(char *));
                        if (!nl)
                                return -ENOMEM;
                        l = nl;
                        allocated = a;
                }
                l[n] = strdup(s);
                if (!l[n])
                        return -ENOMEM;
                l[++n] = NULL;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int bus_read_options(sd_bus_message *m, option_setter_t set, void *config, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                _cleanup_strv_free_ char **strv = NULL;
                const char *name, *contents;
                OptionValue v = {};
                int b;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;
                r = sd_bus_message_enter_container(m, 'v', contents);
                if (r < 0)
                        return r;

                v.signature = contents;
                if (streq(contents, "t"))
                        r = sd_bus_message_read_basic(m, 't', &v.u64);
                else if (streq(contents, "b")) {
                        r = sd_bus_message_read_basic(m, 'b', &b);
                        v.b = b;
                } else if (streq(contents, "s"))
                        r = sd_bus_message_read_basic(m, 's', &v.s);
                else if (streq(contents, "as")) {
                        r = bus_read_strv_bounded(m, EXEC_ENVC_MAX, EXEC_ARGS_MAX, name, &strv, error);
                        v.strv = strv ?: (char *[]) { NULL };
                } else if (streq(contents, "ay"))
                        r = sd_bus_message_read_array(m, 'y', &v.bytes.data, &v.bytes.size);
                else if (streq(contents, "h"))
                        r = sd_bus_message_read_basic(m, 'h', &v.fd);
                else
                        /* Some other type: the setter names the type it wanted. */
                        r = sd_bus_message_skip(m, contents);
                if (r < 0)
                        return r;

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;

                r = set(config, name, &v, error);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        return sd_bus_message_exit_container(m);
}

void bus_reply_error(sd_bus_message *call, const sd_bus_error *error) {
        int r = sd_bus_reply_method_error(call, error);
        if (r < 0)
                log_debug("Failed to send error reply (caller gone?): %s", strerror(-r));
}

typedef struct AuthRequest {
        sd_bus_message *call;
        bus_action_t action;
        BusAuthorizeFlags flags;
        bus_authorized_t fn;
        void *userdata;
        void (*free_userdata)(void *userdata);
        BusCaller caller;
        sd_bus_slot *slot; /* the question in flight: to the bus daemon, then to polkit */
        struct AuthRequest *prev, *next;
} AuthRequest;

static AuthRequest *auth_requests; /* in flight */

static void auth_request_free(AuthRequest *a) {
        LIST_REMOVE(auth_requests, a);
        sd_bus_slot_unref(a->slot);
        if (a->free_userdata)
                a->free_userdata(a->userdata);
        sd_bus_message_unref(a->call);
        free(a);
}

/* Every path ends here: the reply is sent (or fn took it on) and a is freed. */
static void auth_request_finish(AuthRequest *a, int r, const sd_bus_error *error) {
        if (r < 0) {
                if (sd_bus_error_is_set(error))
                        bus_reply_error(a->call, error);
                else
                        (void) sd_bus_reply_method_errno(a->call, r, NULL);
        }
        auth_request_free(a);
}

static void auth_request_run(AuthRequest *a, bool granted) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        a->caller.granted = granted;
        r = a->fn(a->call, &a->caller, a->userdata, &error);
        auth_request_finish(a, r, &error);
}

static void on_authorized(int authorized, const sd_bus_error *error, void *userdata) {
        AuthRequest *a = userdata;

        a->slot = sd_bus_slot_unref(a->slot);
        if (authorized > 0 || (a->flags & BUS_AUTHORIZE_OPTIONAL))
                auth_request_run(a, authorized > 0);
        else
                auth_request_finish(a, -EACCES, error);
}

static void auth_request_decide(AuthRequest *a, uid_t uid) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *action = NULL;
        bool interactive;
        int r;

        a->caller.uid = uid;
        if (a->action) {
                r = a->action(uid, a->userdata, &action, &error);
                if (r < 0) {
                        auth_request_finish(a, r, &error);
                        return;
                }
        }
        if (!action) {
                auth_request_run(a, true);
                return;
        }

        interactive = !(a->flags & BUS_AUTHORIZE_OPTIONAL) &&
                      sd_bus_message_get_allow_interactive_authorization(a->call) > 0;
        r = polkit_check_bus_name(sd_bus_message_get_bus(a->call), sd_bus_message_get_sender(a->call), action,
                                  interactive, on_authorized, a, &a->slot);
        if (r < 0)
                auth_request_finish(a, r, NULL);
}

static void on_caller_uid(int r, uid_t uid, const sd_bus_error *error, void *userdata) {
        AuthRequest *a = userdata;

        a->slot = sd_bus_slot_unref(a->slot);
        if (r < 0)
                auth_request_finish(a, r, error);
        else
                auth_request_decide(a, uid);
}

int bus_authorize_then(sd_bus_message *call, bus_action_t action, BusAuthorizeFlags flags, bus_authorized_t fn,
                       void *userdata, void (*free_userdata)(void *userdata)) {
        AuthRequest *a;
        uid_t uid;
        int r;

        a = calloc(1, sizeof(AuthRequest));
        if (!a) {
                if (free_userdata)
                        free_userdata(userdata);
                return -ENOMEM;
        }
        *a = (AuthRequest) {
                .call = sd_bus_message_ref(call),
                .action = action,
                .flags = flags,
                .fn = fn,
                .userdata = userdata,
                .free_userdata = free_userdata,
        };
        LIST_PREPEND(auth_requests, a);

        r = bus_caller_uid(call, on_caller_uid, a, &a->slot, &uid);
        if (r < 0) {
                auth_request_free(a);
                return r;
        }
        if (r > 0)
                auth_request_decide(a, uid);
        return 1;
}

void bus_authorize_cancel_all(void) {
        while (auth_requests)
                auth_request_free(auth_requests);
}
