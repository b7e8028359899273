/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-caller.h"
#include "bus-util.h"
#include "list.h"
#include "log.h"
#include "strv.h"

const sd_bus_error_map bus_sandbox_error_map[] = {
#define ERROR_MAP_ENTRY(code, name, bus_name, errno_value, http) SD_BUS_ERROR_MAP(bus_name, errno_value),
        SANDBOX_ERRORS(ERROR_MAP_ENTRY)
#undef ERROR_MAP_ENTRY
        SD_BUS_ERROR_MAP_END
};

static const char * const bus_error_names[_SANDBOX_ERR_MAX] = {
#define ERROR_NAME_ENTRY(code, name, bus_name, errno_value, http) [SANDBOX_ERR_##code] = bus_name,
        SANDBOX_ERRORS(ERROR_NAME_ENTRY)
#undef ERROR_NAME_ENTRY
};

int bus_error_from_sandbox(sd_bus_error *b, const SandboxError *e) {
        const char *name = e->code >= 0 && e->code < _SANDBOX_ERR_MAX ? bus_error_names[e->code] : NULL;

        if (!name) {
                /* SANDBOX_ERR_ERRNO: the errno's standard name (System.Error.E…). */
                (void) sd_bus_error_set_errnof(b, e->errno_value, "%s", sandbox_error_message(e));
                return -(e->errno_value ?: EIO);
        }
        (void) sd_bus_error_set(b, name, e->message);
        return -(e->errno_value ?: EIO);
}

int bus_error_return(sd_bus_error *b, const SandboxError *e, int r) {
        if (sandbox_error_is_set(e))
                return bus_error_from_sandbox(b, e);
        return r;
}

void bus_reply_bus_error(sd_bus_message *call, const sd_bus_error *error) {
        int r = sd_bus_reply_method_error(call, error);
        if (r < 0)
                log_debug("Failed to send error reply (caller gone?): %s", strerror(-r));
}

void bus_reply_error(sd_bus_message *call, const SandboxError *error) {
        _cleanup_(sd_bus_error_free) sd_bus_error b = SD_BUS_ERROR_NULL;

        (void) bus_error_from_sandbox(&b, error);
        bus_reply_bus_error(call, &b);
}

int bus_read_strv_bounded(sd_bus_message *m, size_t max_n, size_t max_bytes, const char *what, char ***ret,
                          SandboxError *error) {
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
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
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

/* a{ss} as key, value, key, value, …, NULL; at most SANDBOX_LABELS_MAX pairs (the one
 * option of this type is Labels) of SANDBOX_LABELS_BYTES_MAX bytes. */
static int bus_read_string_map(sd_bus_message *m, const char *what, char ***ret, SandboxError *error) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0, bytes = 0;
        const char *k, *v;
        int r;

        l = calloc(2 * SANDBOX_LABELS_MAX + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "{ss}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "{ss}", &k, &v)) > 0) {
                bytes += strlen(k) + strlen(v) + 2;
                if (n >= 2 * SANDBOX_LABELS_MAX || bytes > SANDBOX_LABELS_BYTES_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "%s: at most %u entries of %u bytes in all.", what, SANDBOX_LABELS_MAX,
                                                 SANDBOX_LABELS_BYTES_MAX);
                l[n] = strdup(k);
                if (!l[n])
                        return -ENOMEM;
                l[++n] = strdup(v);
                if (!l[n])
                        return -ENOMEM;
                n++;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

/* The neutral type of a variant's contents; what no option has is carried by its signature. */
static OptionType option_type_from_signature(const char *contents) {
        static const struct {
                const char *signature;
                OptionType type;
        } table[] = {
                { "s",  OPTION_STRING },
                { "b",  OPTION_BOOL   },
                { "u",  OPTION_UINT32 },
                { "t",  OPTION_UINT64 },
                { "i",  OPTION_INT32  },
                { "x",  OPTION_INT64  },
                { "d",  OPTION_DOUBLE },
                { "as", OPTION_STRV   },
                { "a{ss}", OPTION_STRMAP },
                { "ay", OPTION_BYTES  },
                { "h",  OPTION_FD     },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(table[i].signature, contents))
                        return table[i].type;
        return OPTION_OTHER;
}

/* Reads the variant's contents (entered already) into v. */
static int bus_read_option_value(sd_bus_message *m, const char *name, const char *contents, OptionValue *v,
                                 char ***strv, SandboxError *error) {
        int b, r;

        *v = (OptionValue) { .type = option_type_from_signature(contents) };
        switch (v->type) {
        case OPTION_STRING:
                return sd_bus_message_read_basic(m, 's', &v->s);
        case OPTION_BOOL:
                r = sd_bus_message_read_basic(m, 'b', &b);
                v->b = b;
                return r;
        case OPTION_UINT32:
                return sd_bus_message_read_basic(m, 'u', &v->u32);
        case OPTION_UINT64:
                return sd_bus_message_read_basic(m, 't', &v->u64);
        case OPTION_INT32:
                return sd_bus_message_read_basic(m, 'i', &v->i32);
        case OPTION_INT64:
                return sd_bus_message_read_basic(m, 'x', &v->i64);
        case OPTION_DOUBLE:
                return sd_bus_message_read_basic(m, 'd', &v->d);
        case OPTION_STRV:
                r = bus_read_strv_bounded(m, EXEC_ENVC_MAX, EXEC_ARGS_MAX, name, strv, error);
                v->strv = *strv;
                return r;
        case OPTION_STRMAP:
                r = bus_read_string_map(m, name, strv, error);
                v->strv = *strv;
                return r;
        case OPTION_BYTES:
                return sd_bus_message_read_array(m, 'y', &v->bytes.data, &v->bytes.size);
        case OPTION_FD:
                return sd_bus_message_read_basic(m, 'h', &v->fd);
        default:
                /* Some other type: the setter names it, as the wire does. */
                v->other = contents;
                return sd_bus_message_skip(m, contents);
        }
}

int bus_read_options(sd_bus_message *m, OptionSet set, void *target, SandboxError *error) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                _cleanup_strv_free_ char **strv = NULL;
                const char *name, *contents;
                OptionValue v;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;
                r = sd_bus_message_enter_container(m, 'v', contents);
                if (r < 0)
                        return r;
                r = bus_read_option_value(m, name, contents, &v, &strv, error);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;

                r = option_set_apply(set, target, name, &v, error);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        return sd_bus_message_exit_container(m);
}

typedef struct AuthRequest {
        sd_bus_message *call;
        bus_access_t access;
        SandboxAuthorizeFlags flags;
        bus_authorized_t fn;
        void *userdata;
        void (*free_userdata)(void *userdata);
        SandboxCaller caller;
        char *tenant;      /* the caller's when it called (caller.tenant, once it is known) */
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
        free(a->tenant);
        free(a);
}

/* Every path ends here: the reply is sent (or fn took it on) and a is freed. */
static void auth_request_finish(AuthRequest *a, int r, const SandboxError *error) {
        if (r < 0) {
                if (sandbox_error_is_set(error))
                        bus_reply_error(a->call, error);
                else
                        (void) sd_bus_reply_method_errno(a->call, r, NULL);
        }
        auth_request_free(a);
}

static void auth_request_run(AuthRequest *a, bool granted) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        int r;

        a->caller.granted = granted;
        r = a->fn(a->call, &a->caller, a->userdata, &error);
        auth_request_finish(a, r, &error);
}

static void on_authorized(int authorized, const SandboxError *error, void *userdata) {
        AuthRequest *a = userdata;

        a->slot = sd_bus_slot_unref(a->slot);
        if (authorized < 0)
                auth_request_finish(a, authorized, error);
        else
                auth_request_run(a, authorized > 0);
}

static void auth_request_decide(AuthRequest *a, uid_t uid) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        int r;

        a->caller = (SandboxCaller) {
                .kind = SANDBOX_CALLER_BUS_NAME,
                .uid = uid,
                .bus_name = sd_bus_message_get_sender(a->call),
                .tenant = a->tenant,
                .interactive = sd_bus_message_get_allow_interactive_authorization(a->call) > 0,
        };
        if (!a->access) {
                auth_request_run(a, true);
                return;
        }
        r = sandbox_authorize_method(sd_bus_message_get_bus(a->call), &a->caller, sd_bus_message_get_member(a->call),
                                     a->access, a->userdata, a->flags, on_authorized, a, &a->slot, &error);
        if (r < 0)
                auth_request_finish(a, r, &error);
        else if (r > 0)
                auth_request_run(a, true);
}

static void on_caller_uid(int r, uid_t uid, const sd_bus_error *error, void *userdata) {
        AuthRequest *a = userdata;

        a->slot = sd_bus_slot_unref(a->slot);
        if (r >= 0) {
                auth_request_decide(a, uid);
                return;
        }
        /* The bus daemon's own answer (the caller left: NameHasNoOwner). */
        if (error)
                bus_reply_bus_error(a->call, error);
        else
                (void) sd_bus_reply_method_errno(a->call, r, NULL);
        auth_request_free(a);
}

int bus_authorize_then(sd_bus_message *call, bus_access_t access, SandboxAuthorizeFlags flags,
                       bus_authorized_t fn, void *userdata, void (*free_userdata)(void *userdata)) {
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
                .access = access,
                .flags = flags,
                .fn = fn,
                .userdata = userdata,
                .free_userdata = free_userdata,
        };
        LIST_PREPEND(auth_requests, a);
        /* Taken now: a call is for the tenant its sender acted for when it made it. */
        if (bus_caller_tenant(call)) {
                a->tenant = strdup(bus_caller_tenant(call));
                if (!a->tenant) {
                        auth_request_free(a);
                        return -ENOMEM;
                }
        }

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
