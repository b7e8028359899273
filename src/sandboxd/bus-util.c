/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"
#include "sandbox-errors.h"
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

/* Unique bus names are never reused while the bus runs, so what a name's uid was stays
 * true: a few remembered save a round trip to the bus daemon on every call. */
#define SENDER_CACHE_SIZE 16

static struct {
        char name[64];
        uid_t uid;
} sender_cache[SENDER_CACHE_SIZE];
static unsigned sender_cache_next;

int bus_get_sender_uid(sd_bus_message *m, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *sender = sd_bus_message_get_sender(m);
        uid_t uid;
        int r;

        if (sender)
                for (unsigned i = 0; i < SENDER_CACHE_SIZE; i++)
                        if (streq(sender_cache[i].name, sender)) {
                                *ret = sender_cache[i].uid;
                                return 0;
                        }

        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;

        if (sender && strlen(sender) < sizeof(sender_cache[0].name)) {
                unsigned i = sender_cache_next++ % SENDER_CACHE_SIZE;
                strcpy(sender_cache[i].name, sender);
                sender_cache[i].uid = uid;
        }
        *ret = uid;
        return 0;
}

typedef struct AuthRequest {
        sd_bus_message *call;
        bus_authorized_t fn;
        void *userdata;
        void (*free_userdata)(void *userdata);
} AuthRequest;

static void auth_request_run(AuthRequest *a) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = a->fn(a->call, a->userdata, &error);
        if (r < 0) {
                if (sd_bus_error_is_set(&error))
                        bus_reply_error(a->call, &error);
                else
                        (void) sd_bus_reply_method_errno(a->call, r, NULL);
        }
}

static void auth_request_free(AuthRequest *a) {
        if (a->free_userdata)
                a->free_userdata(a->userdata);
        sd_bus_message_unref(a->call);
        free(a);
}

static void on_authorized(int authorized, const sd_bus_error *error, void *userdata) {
        AuthRequest *a = userdata;

        if (authorized > 0)
                auth_request_run(a);
        else
                bus_reply_error(a->call, error);
        auth_request_free(a);
}

int bus_authorize_then(sd_bus_message *call, const char *action, bus_authorized_t fn,
                       void *userdata, void (*free_userdata)(void *userdata)) {
        AuthRequest *a;
        int r;

        a = calloc(1, sizeof(AuthRequest));
        if (!a) {
                if (free_userdata)
                        free_userdata(userdata);
                return -ENOMEM;
        }
        *a = (AuthRequest) {
                .call = sd_bus_message_ref(call),
                .fn = fn,
                .userdata = userdata,
                .free_userdata = free_userdata,
        };

        if (!action) {
                auth_request_run(a);
                auth_request_free(a);
                return 1;
        }

        r = polkit_check_bus_name(sd_bus_message_get_bus(call), sd_bus_message_get_sender(call), action,
                                  sd_bus_message_get_allow_interactive_authorization(call) > 0,
                                  on_authorized, a);
        if (r < 0) {
                auth_request_free(a);
                return r;
        }
        return 1;
}
