/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libsandbox-client over D-Bus: the connection, errors, calls that a signal can end, and
 * the Manager's and the sandboxes' lifecycle methods. */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-client-internal.h"
#include "strv.h"

uint64_t sec_to_usec_add(uint64_t sec, uint64_t slack_sec) {
        /* Saturating: UINT64_MAX is "no timeout" to sd-bus anyway. */
        if (sec > UINT64_MAX / UINT64_C(1000000) - slack_sec)
                return UINT64_MAX;
        return (sec + slack_sec) * UINT64_C(1000000);
}

uint64_t sec_add(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- errors ---- */

void sandbox_client_error_done(SandboxClientError *e) {
        if (!e)
                return;
        e->name = mfree(e->name);
        e->message = mfree(e->message);
}

bool sandbox_client_error_is_set(const SandboxClientError *e) {
        return e && e->name;
}

bool sandbox_client_error_has_name(const SandboxClientError *e, const char *name) {
        return e && e->name && name && streq(e->name, name);
}

const char *sandbox_client_error_message(const SandboxClientError *e, int error) {
        if (e && e->message)
                return e->message;
        return strerror(abs(error));
}

int sandbox_client_errno_from_name(const char *name) {
        sd_bus_error b = { .name = name };
        int k;

        if (!name)
                return EIO;
#define ERROR_ERRNO(code, suffix, bus_name, errno_value, http) if (streq(name, bus_name)) return errno_value;
        SANDBOX_ERRORS(ERROR_ERRNO)
#undef ERROR_ERRNO
        /* The standard names, and System.Error.E* of the file methods. */
        k = sd_bus_error_get_errno(&b);
        return k > 0 ? k : EIO;
}

int client_error_from_bus(SandboxClientError *e, const sd_bus_error *b, int r) {
        if (b && b->name) {
                r = -sandbox_client_errno_from_name(b->name);
                if (e && !e->name) {
                        char *name = strdup(b->name), *message = b->message ? strdup(b->message) : NULL;

                        if (!name || (b->message && !message)) {
                                free(name);
                                free(message);
                                return -ENOMEM;
                        }
                        sandbox_client_error_done(e);
                        e->name = name;
                        e->message = message;
                }
        }
        return r < 0 ? r : -EIO;
}

/* ---- the connection ---- */

int sandbox_client_new_bus(sd_bus *bus, SandboxClient **ret) {
        SandboxClient *c;

        c = calloc(1, sizeof(SandboxClient));
        if (!c)
                return -ENOMEM;
        c->bus = sd_bus_ref(bus);
        *ret = c;
        return 0;
}

int sandbox_client_open_system(SandboxClient **ret) {
        _cleanup_(sd_bus_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0)
                return r;
        return sandbox_client_new_bus(bus, ret);
}

SandboxClient *sandbox_client_free(SandboxClient *c) {
        if (!c)
                return NULL;
        sandbox_client_interrupt_end(c);
        c->bus = sd_bus_flush_close_unref(c->bus);
        return mfree(c);
}

int sandbox_client_set_interactive(SandboxClient *c, bool b) {
        return sd_bus_set_allow_interactive_authorization(c->bus, b);
}

/* The handlers only record: sd_event_exit() would also close the bus (sd-bus hooks the
 * loop's exit), and the caller may still need it, e.g. to destroy the sandbox. */
static int on_signal(sd_event_source *source, const struct signalfd_siginfo *si, void *userdata) {
        SandboxClient *c = userdata;

        if (si->ssi_signo == SIGWINCH) {
                c->on_winch(c->userdata);
                return 0;
        }
        c->signal = (int) si->ssi_signo;
        return 0;
}

int sandbox_client_interrupt_begin(SandboxClient *c, void (*on_winch)(void *userdata), void *userdata) {
        static const int signals[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
        size_t n = on_winch ? ELEMENTSOF(signals) : ELEMENTSOF(signals) - 1;
        sigset_t mask;
        int r;

        if (c->masked)
                return -EBUSY;

        c->on_winch = on_winch;
        c->userdata = userdata;
        c->signal = 0;
        sigemptyset(&mask);
        for (size_t i = 0; i < n; i++)
                sigaddset(&mask, signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, &c->saved) < 0)
                return -errno;
        c->masked = true;

        r = sd_event_new(&c->event);
        if (r >= 0)
                r = sd_bus_attach_event(c->bus, c->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                c->attached = true;
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_event_add_signal(c->event, NULL, signals[i], on_signal, c);
        if (r < 0)
                sandbox_client_interrupt_end(c);
        return r;
}

void sandbox_client_interrupt_end(SandboxClient *c) {
        if (c->attached)
                (void) sd_bus_detach_event(c->bus);
        c->attached = false;
        c->event = sd_event_unref(c->event);
        /* The signal that ended a wait has been consumed; a second one acts as usual. */
        if (c->masked)
                (void) sigprocmask(SIG_SETMASK, &c->saved, NULL);
        c->masked = false;
        c->on_winch = NULL;
}

int sandbox_client_interrupted(const SandboxClient *c) {
        return c->signal;
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        sd_bus_message **reply = userdata;

        *reply = sd_bus_message_ref(m);
        return 0;
}

int client_call(SandboxClient *c, sd_bus_message *m, uint64_t usec, bool interruptible,
                SandboxClientError *error, sd_bus_message **ret_reply) {

        _cleanup_(sd_bus_error_free) sd_bus_error b = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        int r;

        if (!interruptible || !c->attached) {
                r = sd_bus_call(c->bus, m, usec, &b, &reply);
                if (r < 0)
                        return client_error_from_bus(error, &b, r);
                if (ret_reply)
                        *ret_reply = TAKE_PTR(reply);
                return 0;
        }

        if (c->signal > 0)
                return -EINTR;
        r = sd_bus_call_async(c->bus, &slot, m, on_reply, &reply, usec);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        /* The call's own timeout ends it with an error reply, so this ends. */
        while (!reply && c->signal == 0) {
                r = sd_event_run(c->event, UINT64_MAX);
                if (r < 0)
                        return client_error_from_bus(error, NULL, r);
        }
        if (!reply)
                return -EINTR;

        if (sd_bus_message_is_method_error(reply, NULL))
                return client_error_from_bus(error, sd_bus_message_get_error(reply),
                                             -sd_bus_message_get_errno(reply));
        if (ret_reply)
                *ret_reply = TAKE_PTR(reply);
        return 0;
}

int client_new_call(SandboxClient *c, SandboxHandle *h, const char *member, sd_bus_message **ret) {
        if (h)
                return sd_bus_message_new_method_call(c->bus, ret, SANDBOX_BUS_NAME, h->path,
                                                      SANDBOX_INTERFACE, member);
        return sd_bus_message_new_method_call(c->bus, ret, SANDBOX_BUS_NAME, SANDBOX_MANAGER_PATH,
                                              SANDBOX_MANAGER_INTERFACE, member);
}

int client_call_method(SandboxClient *c, SandboxHandle *h, const char *member, SandboxClientError *error,
                       const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = client_new_call(c, h, member, &m);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        return client_call(c, m, 0, /* interruptible= */ false, error, NULL);
}

void client_array_free(void *items, size_t n, size_t size, void (*free_one)(void *item)) {
        for (size_t i = 0; i < n; i++)
                free_one((uint8_t *) items + i * size);
        free(items);
}

int client_read_array(sd_bus_message *m, const char *contents, size_t size,
                      int (*read_one)(sd_bus_message *m, void *item), void (*free_one)(void *item),
                      void **ret, size_t *ret_n) {
        uint8_t *items = NULL;
        size_t n = 0, allocated = 0;
        int r;

        r = sd_bus_message_enter_container(m, 'a', contents);
        while (r >= 0) {
                if (n >= allocated) {
                        size_t k = allocated == 0 ? 16 : allocated * 2;
                        uint8_t *p = reallocarray(items, k, size);

                        if (!p) {
                                r = -ENOMEM;
                                break;
                        }
                        items = p;
                        allocated = k;
                }
                memset(items + n * size, 0, size);
                r = read_one(m, items + n * size);
                if (r <= 0) {
                        free_one(items + n * size);
                        break;
                }
                n++;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                client_array_free(items, n, size, free_one);
                return r;
        }

        *ret = items;
        *ret_n = n;
        return 0;
}

int client_call_list(SandboxClient *c, SandboxHandle *h, const char *member, const char *contents, size_t size,
                     int (*read_one)(sd_bus_message *m, void *item), void (*free_one)(void *item),
                     void **ret, size_t *ret_n, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(c, h, member, &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = client_read_array(reply, contents, size, read_one, free_one, ret, ret_n);
        return r < 0 ? client_error_from_bus(error, NULL, r) : 0;
}

/* ---- sandboxes ---- */

int sandbox_handle_new(SandboxClient *c, const char *id, const char *path, SandboxHandle **ret) {
        SandboxHandle *h;

        h = calloc(1, sizeof(SandboxHandle));
        if (!h)
                return -ENOMEM;
        h->client = c;
        h->id = strdup(id);
        h->path = strdup(path);
        if (!h->id || !h->path)
                return sandbox_handle_free(h), -ENOMEM;
        *ret = h;
        return 0;
}

SandboxHandle *sandbox_handle_free(SandboxHandle *h) {
        if (!h)
                return NULL;
        free(h->id);
        free(h->path);
        return mfree(h);
}

const char *sandbox_handle_id(const SandboxHandle *h) {
        return h->id;
}

const char *sandbox_handle_path(const SandboxHandle *h) {
        return h->path;
}

SandboxClient *sandbox_handle_client(const SandboxHandle *h) {
        return h->client;
}

/* One option of CreateSandbox: where SandboxCreateOptions keeps it. */
static const struct {
        SandboxCreateField field;
        const char *name;
        char type;              /* 't', 'b', 's' or 'S' (a string array) */
        size_t offset;
} create_options[] = {
        { SANDBOX_CREATE_MEMORY_MAX,   "MemoryMax",          't', offsetof(SandboxCreateOptions, memory_max)             },
        { SANDBOX_CREATE_CPU_QUOTA,    "CPUQuotaPerSecUSec", 't', offsetof(SandboxCreateOptions, cpu_quota_per_sec_usec) },
        { SANDBOX_CREATE_TASKS_MAX,    "TasksMax",           't', offsetof(SandboxCreateOptions, tasks_max)              },
        { SANDBOX_CREATE_DISK_MAX,     "DiskMax",            't', offsetof(SandboxCreateOptions, disk_max)               },
        { SANDBOX_CREATE_TIMEOUT,      "Timeout",            't', offsetof(SandboxCreateOptions, timeout_sec)            },
        { SANDBOX_CREATE_IDLE_TIMEOUT, "IdleTimeout",        't', offsetof(SandboxCreateOptions, idle_timeout_sec)       },
        { SANDBOX_CREATE_EPHEMERAL,    "Ephemeral",          'b', offsetof(SandboxCreateOptions, ephemeral)              },
        { SANDBOX_CREATE_NAME,         "Name",               's', offsetof(SandboxCreateOptions, name)                   },
        { SANDBOX_CREATE_REUSE_EXISTING, "ReuseExisting",    'b', offsetof(SandboxCreateOptions, reuse_existing)         },
        { SANDBOX_CREATE_TENANT,       "Tenant",             's', offsetof(SandboxCreateOptions, tenant)                 },
        { SANDBOX_CREATE_EGRESS_ALLOW, "EgressAllow",        'S', offsetof(SandboxCreateOptions, egress_allow)           },
        { SANDBOX_CREATE_EGRESS_DENY,  "EgressDeny",         'S', offsetof(SandboxCreateOptions, egress_deny)            },
        { SANDBOX_CREATE_FROM_SNAPSHOT, "FromSnapshot",      's', offsetof(SandboxCreateOptions, from_snapshot)          },
        { SANDBOX_CREATE_IDLE_ACTION,  "IdleAction",         's', offsetof(SandboxCreateOptions, idle_action)            },
        { SANDBOX_CREATE_STORAGE,      "Storage",            's', offsetof(SandboxCreateOptions, storage)                },
        { SANDBOX_CREATE_SECRETS,      "Secrets",            'S', offsetof(SandboxCreateOptions, secrets)                },
        { SANDBOX_CREATE_LABELS,       "Labels",             'L', offsetof(SandboxCreateOptions, labels)                 },
};

/* "key=value" strings as a{ss}, each split at its first '=' (a label key has none). */
static int append_labels(sd_bus_message *m, char * const *labels) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{ss}");
        for (char * const *l = labels; r >= 0 && l && *l; l++) {
                const char *eq = strchr(*l, '=');
                _cleanup_free_ char *key = strndup(*l, eq ? (size_t) (eq - *l) : strlen(*l));

                if (!key)
                        return -ENOMEM;
                r = sd_bus_message_append(m, "{ss}", key, eq ? eq + 1 : "");
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* a{ss} (entered at its array) as "key=value" strings. */
static int read_labels(sd_bus_message *m, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *k, *v;
        int r;

        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "{ss}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "{ss}", &k, &v)) > 0)
                if (strv_extendf(&l, "%s=%s", k, v) < 0)
                        return -ENOMEM;
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        strv_free(*ret);
        *ret = TAKE_PTR(l);
        return 0;
}

int client_append_create_options(sd_bus_message *m, const SandboxCreateOptions *o) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (size_t i = 0; r >= 0 && o && i < ELEMENTSOF(create_options); i++) {
                const uint8_t *p = (const uint8_t *) o + create_options[i].offset;

                if (!(o->set & create_options[i].field))
                        continue;
                if (create_options[i].type == 'b')
                        r = sd_bus_message_append(m, "{sv}", create_options[i].name, "b", (int) *(const bool *) p);
                else if (create_options[i].type == 's')
                        r = sd_bus_message_append(m, "{sv}", create_options[i].name, "s",
                                                  strempty(*(const char * const *) p));
                else if (create_options[i].type == 'L') {
                        r = sd_bus_message_open_container(m, 'e', "sv");
                        if (r >= 0)
                                r = sd_bus_message_append(m, "s", create_options[i].name);
                        if (r >= 0)
                                r = sd_bus_message_open_container(m, 'v', "a{ss}");
                        if (r >= 0)
                                r = append_labels(m, *(char ** const *) p);
                        if (r >= 0)
                                r = sd_bus_message_close_container(m);
                        if (r >= 0)
                                r = sd_bus_message_close_container(m);
                } else if (create_options[i].type == 'S') {
                        r = sd_bus_message_open_container(m, 'e', "sv");
                        if (r >= 0)
                                r = sd_bus_message_append(m, "s", create_options[i].name);
                        if (r >= 0)
                                r = sd_bus_message_open_container(m, 'v', "as");
                        if (r >= 0)
                                r = sd_bus_message_append_strv(m, *(char ** const *) p);
                        if (r >= 0)
                                r = sd_bus_message_close_container(m);
                        if (r >= 0)
                                r = sd_bus_message_close_container(m);
                }
                else
                        r = sd_bus_message_append(m, "{sv}", create_options[i].name, "t", *(const uint64_t *) p);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int sandbox_client_create(SandboxClient *c, const char *template, const SandboxCreateOptions *o,
                          char **ret_id, SandboxHandle **ret_handle, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *id = NULL;
        const char *i, *p;
        int r;

        r = client_new_call(c, NULL, "CreateSandbox", &m);
        /* An empty name selects the default template. */
        if (r >= 0)
                r = sd_bus_message_append(m, "s", strempty(template));
        if (r >= 0)
                r = client_append_create_options(m, o);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(c, m, CREATE_CALL_TIMEOUT_USEC, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;

        r = sd_bus_message_read(reply, "so", &i, &p);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = sandbox_handle_new(c, i, p, &h);
        if (r < 0)
                return r;
        if (ret_id) {
                id = strdup(i);
                if (!id)
                        return -ENOMEM;
                *ret_id = TAKE_PTR(id);
        }
        if (ret_handle)
                *ret_handle = TAKE_PTR(h);
        return 0;
}

int sandbox_client_get(SandboxClient *c, const char *id, SandboxHandle **ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *path;
        int r;

        r = client_new_call(c, NULL, "GetSandbox", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", id);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;

        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        /* Asked by name: the id is the path's last part. */
        if (startswith_str(path, SANDBOX_OBJECT_PREFIX) && !strchr(path + strlen(SANDBOX_OBJECT_PREFIX), '/'))
                id = path + strlen(SANDBOX_OBJECT_PREFIX);
        return sandbox_handle_new(c, id, path, ret);
}

int sandbox_handle_destroy(SandboxHandle *h, SandboxDestroyMode mode, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;
        int r;

        r = client_new_call(h->client, h, "Destroy", &m);
        if (r >= 0 && mode == SANDBOX_DESTROY_CLEANUP)
                r = sd_bus_message_set_auto_start(m, false);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, DESTROY_CALL_TIMEOUT_USEC, /* interruptible= */ false, &e, NULL);
        if (r < 0 && mode == SANDBOX_DESTROY_CLEANUP &&
            (sandbox_client_error_has_name(&e, SANDBOX_ERROR_NO_SUCH_SANDBOX) ||
             sandbox_client_error_has_name(&e, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
             sandbox_client_error_has_name(&e, SD_BUS_ERROR_NAME_HAS_NO_OWNER)))
                r = 0;
        if (r < 0 && error) {
                sandbox_client_error_done(error);
                *error = e;
        } else
                sandbox_client_error_done(&e);
        return r;
}

int sandbox_handle_release(SandboxHandle *h, bool *ret_recycled, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int recycled = 0, r;

        r = client_new_call(h->client, h, "Release", &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(h->client, m, DESTROY_CALL_TIMEOUT_USEC, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "b", &recycled);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        if (ret_recycled)
                *ret_recycled = recycled;
        return 0;
}

int sandbox_handle_pause(SandboxHandle *h, SandboxClientError *error) {
        return client_call_method(h->client, h, "Pause", error, NULL);
}

int sandbox_handle_resume(SandboxHandle *h, SandboxClientError *error) {
        return client_call_method(h->client, h, "Resume", error, NULL);
}

int sandbox_handle_set_timeout(SandboxHandle *h, uint64_t lifetime_sec, uint64_t idle_sec,
                               SandboxClientError *error) {
        return client_call_method(h->client, h, "SetTimeout", error, "tt", lifetime_sec, idle_sec);
}

static void sandbox_info_done(void *item) {
        SandboxInfo *s = item;

        free(s->id);
        free(s->template);
        free(s->state);
        free(s->path);
        free(s->name);
        strv_free(s->labels);
}

void sandbox_info_array_free(SandboxInfo *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxInfo), sandbox_info_done);
}

static int strdup_all(char **dst[], const char *const src[], size_t n) {
        for (size_t i = 0; i < n; i++) {
                *dst[i] = strdup(src[i]);
                if (!*dst[i])
                        return -ENOMEM;
        }
        return 0;
}

static int sandbox_info_read(sd_bus_message *m, void *item) {
        SandboxInfo *s = item;
        const char *id, *template, *state, *path;
        int r;

        r = sd_bus_message_read(m, "(ssusot)", &id, &template, &s->owner, &state, &path, &s->created_at);
        if (r <= 0)
                return r;
        r = strdup_all((char **[]) { &s->id, &s->template, &s->state, &s->path },
                       (const char *const[]) { id, template, state, path }, 4);
        return r < 0 ? r : 1;
}

typedef struct NameQuery {
        SandboxInfo *info;
        size_t *pending;
        sd_bus_slot *slot;
} NameQuery;

/* What a list entry takes of its object's properties. */
typedef struct InfoFields {
        char *name;
        char **labels;
} InfoFields;

static const char *info_field(size_t i, const char **sig, size_t *off) {
        static const struct { const char *name, *sig; size_t off; } fields[] = {
                { "Name",   "s",     offsetof(InfoFields, name)   },
                { "Labels", "a{ss}", offsetof(InfoFields, labels) },
        };
        *sig = fields[i].sig;
        *off = fields[i].off;
        return fields[i].name;
}

/* The answer to one Properties.GetAll, into its SandboxInfo; an error (the sandbox went
 * meanwhile, an older daemon) leaves "" and no labels. */
static int on_name(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        NameQuery *q = userdata;
        InfoFields f = {};
        unsigned seen = 0;

        (*q->pending)--;
        if (!sd_bus_message_is_method_error(reply, NULL) && client_read_fields(reply, 2, info_field, &f, &seen) >= 0) {
                if (f.name) {
                        free(q->info->name);
                        q->info->name = TAKE_PTR(f.name);
                }
                strv_free(q->info->labels);
                q->info->labels = TAKE_PTR(f.labels);
        }
        free(f.name);
        strv_free(f.labels);
        return 0;
}

/* Each one's name: the questions go out together, at most NAME_QUERIES_IN_FLIGHT at a time
 * (the bus daemon refuses more than 128 calls awaiting replies per connection). */
#define NAME_QUERIES_IN_FLIGHT 64U

static int sandbox_infos_fetch_names(SandboxClient *c, SandboxInfo *infos, size_t n) {
        NameQuery *queries;
        size_t pending = 0, sent = 0;
        int r = 0;

        queries = calloc(n ?: 1, sizeof(NameQuery));
        if (!queries)
                return -ENOMEM;
        while (r >= 0 && (sent < n || pending > 0)) {
                while (r >= 0 && sent < n && pending < NAME_QUERIES_IN_FLIGHT) {
                        NameQuery *q = &queries[sent];

                        *q = (NameQuery) { .info = &infos[sent], .pending = &pending };
                        q->info->name = strdup("");
                        if (!q->info->name)
                                r = -ENOMEM;
                        else
                                r = sd_bus_call_method_async(c->bus, &q->slot, SANDBOX_BUS_NAME, q->info->path,
                                                             "org.freedesktop.DBus.Properties", "GetAll", on_name, q,
                                                             "s", SANDBOX_INTERFACE);
                        if (r >= 0)
                                pending++;
                        sent++;
                }
                /* Each answer comes, an error reply at the latest when its call times out. */
                if (r >= 0 && pending > 0) {
                        r = sd_bus_process(c->bus, NULL);
                        if (r == 0)
                                r = sd_bus_wait(c->bus, UINT64_MAX);
                }
        }
        for (size_t i = 0; i < n; i++)
                sd_bus_slot_unref(queries[i].slot);
        free(queries);
        return r < 0 ? r : 0;
}

int sandbox_client_list(SandboxClient *c, char * const *labels, SandboxInfo **ret, size_t *ret_n,
                        SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        SandboxInfo *infos = NULL;
        size_t n = 0;
        int r;

        if (strv_isempty(labels))
                r = client_call_list(c, NULL, "ListSandboxes", "(ssusot)", sizeof(SandboxInfo), sandbox_info_read,
                                     sandbox_info_done, (void **) &infos, &n, error);
        else {
                r = client_new_call(c, NULL, "ListSandboxesFiltered", &m);
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{sv}");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "Label");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_append_strv(m, (char **) labels);
                for (unsigned i = 0; r >= 0 && i < 3; i++)
                        r = sd_bus_message_close_container(m);
                if (r < 0)
                        return client_error_from_bus(error, NULL, r);
                r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
                if (r < 0)
                        return r;
                r = client_read_array(reply, "(ssusot)", sizeof(SandboxInfo), sandbox_info_read, sandbox_info_done,
                                      (void **) &infos, &n);
                if (r < 0)
                        return client_error_from_bus(error, NULL, r);
        }
        if (r < 0)
                return r;
        r = sandbox_infos_fetch_names(c, infos, n);
        if (r < 0) {
                sandbox_info_array_free(infos, n);
                return client_error_from_bus(error, NULL, r);
        }
        *ret = infos;
        *ret_n = n;
        return 0;
}

/* One property: where SandboxStatus keeps it. */
static const struct {
        const char *name;
        const char *signature;
        size_t offset;
} sandbox_properties[_SANDBOX_PROPERTY_MAX] = {
        [SANDBOX_PROPERTY_ID]           = { "Id",                 "s", offsetof(SandboxStatus, id)                     },
        [SANDBOX_PROPERTY_TEMPLATE]     = { "Template",           "s", offsetof(SandboxStatus, template)               },
        [SANDBOX_PROPERTY_OWNER]        = { "Owner",              "u", offsetof(SandboxStatus, owner)                  },
        [SANDBOX_PROPERTY_STATE]        = { "State",              "s", offsetof(SandboxStatus, state)                  },
        [SANDBOX_PROPERTY_UNIT]         = { "Unit",               "s", offsetof(SandboxStatus, unit)                   },
        [SANDBOX_PROPERTY_CREATED_AT]   = { "CreatedAt",          "t", offsetof(SandboxStatus, created_at)             },
        [SANDBOX_PROPERTY_MEMORY_MAX]   = { "MemoryMax",          "t", offsetof(SandboxStatus, memory_max)             },
        [SANDBOX_PROPERTY_CPU_QUOTA]    = { "CPUQuotaPerSecUSec", "t", offsetof(SandboxStatus, cpu_quota_per_sec_usec) },
        [SANDBOX_PROPERTY_TASKS_MAX]    = { "TasksMax",           "t", offsetof(SandboxStatus, tasks_max)              },
        [SANDBOX_PROPERTY_DISK_MAX]     = { "DiskMax",            "t", offsetof(SandboxStatus, disk_max)               },
        [SANDBOX_PROPERTY_TIMEOUT]      = { "Timeout",            "t", offsetof(SandboxStatus, timeout)                },
        [SANDBOX_PROPERTY_IDLE_TIMEOUT] = { "IdleTimeout",        "t", offsetof(SandboxStatus, idle_timeout)           },
        [SANDBOX_PROPERTY_DEADLINE]     = { "Deadline",           "t", offsetof(SandboxStatus, deadline)               },
        [SANDBOX_PROPERTY_EPHEMERAL]    = { "Ephemeral",          "b", offsetof(SandboxStatus, ephemeral)              },
        [SANDBOX_PROPERTY_NAME]         = { "Name",               "s", offsetof(SandboxStatus, name)                   },
        [SANDBOX_PROPERTY_TENANT]       = { "Tenant",             "s", offsetof(SandboxStatus, tenant)                 },
        [SANDBOX_PROPERTY_STORAGE]      = { "Storage",            "s", offsetof(SandboxStatus, storage)                },
        [SANDBOX_PROPERTY_FORK_METHOD]  = { "ForkMethod",         "s", offsetof(SandboxStatus, fork_method)            },
        [SANDBOX_PROPERTY_LABELS]       = { "Labels",         "a{ss}", offsetof(SandboxStatus, labels)                 },
};

/* One value of a property or an info entry into p, by its signature. */
static int read_variant(sd_bus_message *m, const char *signature, void *p) {
        const char *s;
        int b, r;

        switch (signature[0]) {
        case 's':
                r = sd_bus_message_read(m, "v", "s", &s);
                if (r < 0)
                        return r;
                free(*(char **) p);
                *(char **) p = strdup(s);
                return *(char **) p ? 0 : -ENOMEM;
        case 'b':
                r = sd_bus_message_read(m, "v", "b", &b);
                if (r >= 0)
                        *(bool *) p = b;
                return r;
        case 'a':       /* a{ss}: "key=value" strings */
                r = sd_bus_message_enter_container(m, 'v', signature);
                if (r >= 0)
                        r = read_labels(m, (char ***) p);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                return r;
        default:        /* i, u, t: stored as the bus has them */
                return sd_bus_message_read(m, "v", signature, p);
        }
}

/* Reads a{sv} into base; *seen gets a bit per field found. Entries with unknown names or
 * unexpected types are skipped: newer daemons may send more. */
int client_read_fields(sd_bus_message *m, size_t n_fields,
                       const char *(*field)(size_t i, const char **sig, size_t *off), void *base, unsigned *seen) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        for (;;) {
                const char *name, *contents;
                size_t i, offset = 0;
                char type;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                if (r <= 0)
                        break;
                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r < 0)
                        return r;

                for (i = 0; i < n_fields; i++) {
                        const char *sig;

                        if (streq(field(i, &sig, &offset), name) && streq(sig, contents))
                                break;
                }
                if (i < n_fields) {
                        r = read_variant(m, contents, (uint8_t *) base + offset);
                        if (r >= 0)
                                *seen |= 1U << i;
                } else
                        r = sd_bus_message_skip(m, "v");
                if (r < 0)
                        return r;

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        return sd_bus_message_exit_container(m);
}

static const char *status_field(size_t i, const char **sig, size_t *off) {
        *sig = sandbox_properties[i].signature;
        *off = sandbox_properties[i].offset;
        return sandbox_properties[i].name;
}

const char *sandbox_property_signature(SandboxProperty p) {
        return sandbox_properties[p].signature;
}

const void *sandbox_status_field(const SandboxStatus *s, SandboxProperty p) {
        return (const uint8_t *) s + sandbox_properties[p].offset;
}

void sandbox_status_done(SandboxStatus *s) {
        free(s->id);
        free(s->template);
        free(s->state);
        free(s->unit);
        free(s->name);
        free(s->tenant);
        free(s->storage);
        free(s->fork_method);
        strv_free(s->labels);
        *s = (SandboxStatus) {};
}

int client_read_status(sd_bus_message *m, SandboxStatus *ret) {
        SandboxStatus s = {};
        int r;

        r = client_read_fields(m, ELEMENTSOF(sandbox_properties), status_field, &s, &s.seen);
        if (r < 0) {
                sandbox_status_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

int sandbox_handle_status(SandboxHandle *h, SandboxStatus *ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = sd_bus_message_new_method_call(h->client->bus, &m, SANDBOX_BUS_NAME, h->path,
                                           "org.freedesktop.DBus.Properties", "GetAll");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", SANDBOX_INTERFACE);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;

        return client_read_status(reply, ret);
}

/* The a{sv} info of Exec's and Wait's replies. */
static const struct {
        const char *name;
        const char *signature;
        size_t offset;
} exec_info_fields[] = {
        { "TimedOut",     "b", offsetof(SandboxExecResult, timed_out)     },
        { "OOMKilled",    "b", offsetof(SandboxExecResult, oom_killed)    },
        { "Signal",       "i", offsetof(SandboxExecResult, signal)        },
        { "ExitCode",     "i", offsetof(SandboxExecResult, exit_code)     },
        { "DurationUSec", "t", offsetof(SandboxExecResult, duration_usec) },
        { "CPUUSec",      "t", offsetof(SandboxExecResult, cpu_usec)      },
        { "MaxRSSBytes",  "t", offsetof(SandboxExecResult, max_rss_bytes) },
        { "Truncated",    "b", offsetof(SandboxExecResult, truncated)     },
        { "StdoutBytes",  "t", offsetof(SandboxExecResult, stdout_bytes)  },
        { "StderrBytes",  "t", offsetof(SandboxExecResult, stderr_bytes)  },
};
#define EXEC_INFO_EXIT_CODE 3

static const char *exec_info_field(size_t i, const char **sig, size_t *off) {
        *sig = exec_info_fields[i].signature;
        *off = exec_info_fields[i].offset;
        return exec_info_fields[i].name;
}

void sandbox_exec_result_done(SandboxExecResult *r) {
        free(r->stdout_data);
        free(r->stderr_data);
        *r = (SandboxExecResult) {};
}

int client_read_bytes(sd_bus_message *m, void **ret, size_t *ret_size) {
        const void *p;
        size_t n;
        int r;

        r = sd_bus_message_read_array(m, 'y', &p, &n);
        if (r < 0)
                return r;
        *ret = NULL;
        if (n > 0) {
                *ret = malloc(n);
                if (!*ret)
                        return -ENOMEM;
                memcpy(*ret, p, n);
        }
        *ret_size = n;
        return 0;
}

int client_read_exec_result(sd_bus_message *m, bool with_output, SandboxExecResult *ret) {
        SandboxExecResult res = {};
        unsigned seen = 0;
        int r;

        r = sd_bus_message_read(m, "i", &res.exit_status);
        if (r >= 0 && with_output)
                r = client_read_bytes(m, &res.stdout_data, &res.stdout_size);
        if (r >= 0 && with_output)
                r = client_read_bytes(m, &res.stderr_data, &res.stderr_size);
        if (r >= 0)
                r = client_read_fields(m, ELEMENTSOF(exec_info_fields), exec_info_field, &res, &seen);
        if (r < 0) {
                sandbox_exec_result_done(&res);
                return r;
        }
        /* ExitCode as older sandboxd imply it. */
        if (!(seen & (1U << EXEC_INFO_EXIT_CODE)))
                res.exit_code = res.signal > 0 ? -1 : res.exit_status;

        *ret = res;
        return 0;
}

static void sandbox_template_done(void *item) {
        SandboxTemplate *t = item;

        free(t->name);
        free(t->payload);
        free(t->description);
}

void sandbox_template_array_free(SandboxTemplate *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxTemplate), sandbox_template_done);
}

static int sandbox_template_read(sd_bus_message *m, void *item) {
        SandboxTemplate *t = item;
        const char *name, *payload, *description;
        int r;

        r = sd_bus_message_read(m, "(sss)", &name, &payload, &description);
        if (r <= 0)
                return r;
        r = strdup_all((char **[]) { &t->name, &t->payload, &t->description },
                       (const char *const[]) { name, payload, description }, 3);
        return r < 0 ? r : 1;
}

int sandbox_client_templates(SandboxClient *c, SandboxTemplate **ret, size_t *ret_n, SandboxClientError *error) {
        return client_call_list(c, NULL, "ListTemplates", "(sss)", sizeof(SandboxTemplate), sandbox_template_read,
                                sandbox_template_done, (void **) ret, ret_n, error);
}

int sandbox_client_create_template(SandboxClient *c, const char *name, const char *json, SandboxClientError *error) {
        return client_call_method(c, NULL, "CreateTemplate", error, "ss", name, json);
}

int sandbox_client_remove_template(SandboxClient *c, const char *name, SandboxClientError *error) {
        return client_call_method(c, NULL, "RemoveTemplate", error, "s", name);
}

static int quota_entry_read(sd_bus_message *m, void *item) {
        SandboxQuotaEntry *q = item;
        const char *what;
        int r;

        r = sd_bus_message_read(m, "(stt)", &what, &q->limit, &q->use);
        if (r <= 0)
                return r;
        q->what = strdup(what);
        return q->what ? 1 : -ENOMEM;
}

static void quota_entry_done(void *item) {
        SandboxQuotaEntry *q = item;
        free(q->what);
}

void sandbox_quota_done(SandboxQuota *q) {
        free(q->scope);
        client_array_free(q->entries, q->n_entries, sizeof(SandboxQuotaEntry), quota_entry_done);
        *q = (SandboxQuota) {};
}

int sandbox_client_quota(SandboxClient *c, SandboxQuota *ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        SandboxQuota q = {};
        const char *scope;
        int r;

        r = client_new_call(c, NULL, "GetQuota", &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "s", &scope);
        if (r >= 0)
                r = (q.scope = strdup(scope)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = client_read_array(reply, "(stt)", sizeof(SandboxQuotaEntry), quota_entry_read, quota_entry_done,
                                      (void **) &q.entries, &q.n_entries);
        if (r < 0) {
                sandbox_quota_done(&q);
                return client_error_from_bus(error, NULL, r);
        }
        *ret = q;
        return 0;
}

int sandbox_client_set_secret(SandboxClient *c, const char *name, const void *value, size_t size,
                              SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(c, NULL, "SetSecret", &m);
        if (r >= 0)
                r = sd_bus_message_sensitive(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", name);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', value, size);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        return client_call(c, m, 0, /* interruptible= */ false, error, &reply);
}

int sandbox_client_list_secrets(SandboxClient *c, char ***ret_names, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(c, NULL, "ListSecrets", &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read_strv(reply, ret_names);
        return r < 0 ? client_error_from_bus(error, NULL, r) : 0;
}

int sandbox_client_remove_secret(SandboxClient *c, const char *name, SandboxClientError *error) {
        return client_call_method(c, NULL, "RemoveSecret", error, "s", name);
}

int sandbox_client_act_for_tenant(SandboxClient *c, const char *tenant, SandboxClientError *error) {
        return client_call_method(c, NULL, "ActForTenant", error, "s", strempty(tenant));
}

/* ---- execution records ---- */

static void execution_done(void *item) {
        SandboxExecution *e = item;

        free(e->sandbox_id);
        strv_free(e->argv);
        free(e->cwd);
        free(e->tenant);
}

void sandbox_execution_array_free(SandboxExecution *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxExecution), execution_done);
}

static int execution_read(sd_bus_message *m, void *item) {
        SandboxExecution *e = item;
        const char *id, *cwd, *tenant;
        int timed_out, oom, r;

        r = sd_bus_message_enter_container(m, 'r', "stuuassttiiibbtttttstt");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "stuu", &id, &e->exec_id, &e->owner, &e->caller);
        if (r < 0)
                return r;
        r = sd_bus_message_read_strv(m, &e->argv);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "sttiiibbtttttstt", &cwd, &e->started, &e->ended, &e->exit_status,
                                &e->exit_code, &e->signal, &timed_out, &oom, &e->cpu_usec,
                                &e->cgroup_cpu_nsec, &e->memory_peak, &e->stdout_bytes, &e->stderr_bytes,
                                &tenant, &e->disk_bytes_used, &e->disk_bytes_max);
        if (r < 0)
                return r;
        e->timed_out = timed_out;
        e->oom_killed = oom;
        r = strdup_all((char **[]) { &e->sandbox_id, &e->cwd, &e->tenant }, (const char *const[]) { id, cwd, tenant }, 3);
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 1;
}

int sandbox_client_executions(SandboxClient *c, const SandboxExecutionFilter *f, SandboxExecution **ret,
                              size_t *ret_n, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(c, NULL, "ListExecutionsEx", &m);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && f && f->sandbox_id)
                r = sd_bus_message_append(m, "{sv}", "SandboxId", "s", f->sandbox_id);
        if (r >= 0 && f && f->owner_set)
                r = sd_bus_message_append(m, "{sv}", "Owner", "u", f->owner);
        if (r >= 0 && f && f->since_usec > 0)
                r = sd_bus_message_append(m, "{sv}", "Since", "t", f->since_usec);
        if (r >= 0 && f && f->limit_set)
                r = sd_bus_message_append(m, "{sv}", "Limit", "u", f->limit);
        if (r >= 0 && f && f->tenant)
                r = sd_bus_message_append(m, "{sv}", "Tenant", "s", f->tenant);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(c, m, HISTORY_CALL_TIMEOUT_USEC, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        return client_read_array(reply, "(stuuassttiiibbtttttstt)", sizeof(SandboxExecution), execution_read,
                                 execution_done, (void **) ret, ret_n);
}
