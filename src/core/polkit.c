/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "macro.h"
#include "polkit.h"
#include "strv.h"

#define POLKIT_CHECK_TIMEOUT_USEC (120ULL * 1000000ULL) /* a human may be typing a password */
#define POLKIT_FLAG_ALLOW_USER_INTERACTION 1U

typedef struct PolkitQuery {
        char *action;
        PolkitCheckFlags flags;
        polkit_callback_t cb;
        void *userdata;
        /* polkit_check_any(): the actions asked for in turn when this one is refused, and
         * the question about the next, which this one's slot owns (so that unreferencing
         * the caller's slot cancels whichever is under way). */
        sd_bus *bus;
        SandboxCaller caller;
        char **rest;
        PolkitCheckFlags rest_flags;
        bool floating;
        sd_bus_slot *next;
} PolkitQuery;

/* The slot's destroy callback: the query lives exactly as long as its slot. */
static void polkit_query_free(void *userdata) {
        PolkitQuery *q = userdata;

        if (!q)
                return;
        sd_bus_slot_unref(q->next);
        strv_free(q->rest);
        free(q->action);
        free(q);
}

static int polkit_query_start(sd_bus *bus, const SandboxCaller *caller, char * const *actions, PolkitCheckFlags flags,
                              polkit_callback_t cb, void *userdata, bool floating, sd_bus_slot **ret_slot);

/* Refused for q->action: asks for the next action, if there is one (> 0). */
static int polkit_query_next(PolkitQuery *q) {
        int r;

        if (strv_isempty(q->rest))
                return 0;
        r = polkit_query_start(q->bus, &q->caller, q->rest, q->rest_flags, q->cb, q->userdata, q->floating,
                               q->floating ? NULL : &q->next);
        return r < 0 ? r : 1;
}

/* Every answer ends here: a refusal is no refusal for an optional check. */
static void polkit_query_refuse(PolkitQuery *q, int r, const SandboxError *error) {
        if (polkit_query_next(q) > 0)
                return;
        if (q->flags & POLKIT_CHECK_OPTIONAL)
                q->cb(0, NULL, q->userdata);
        else
                q->cb(r, error, q->userdata);
}

static int on_check_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        PolkitQuery *q = userdata;
        const char *action = q->action;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int authorized, challenge, r;

        if (e) {
                if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        sandbox_error_set(&error, SANDBOX_ERR_ACCESS_DENIED,
                                          "polkit is not running, so only root may do this (%s).", action);
                else
                        sandbox_error_set(&error, SANDBOX_ERR_ACCESS_DENIED,
                                          "Could not ask polkit for %s: %s", action, e->message);
                polkit_query_refuse(q, -EACCES, &error);
                return 0;
        }

        r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
        if (r >= 0)
                r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0) {
                sandbox_error_set(&error, SANDBOX_ERR_ACCESS_DENIED, "polkit sent a reply we cannot read.");
                polkit_query_refuse(q, r, &error);
                return 0;
        }

        if (authorized) {
                q->cb(1, NULL, q->userdata);
                return 0;
        }
        if (challenge)
                sandbox_error_set(&error, SANDBOX_ERR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                  "Authentication is required for %s.", action);
        else
                sandbox_error_set(&error, SANDBOX_ERR_ACCESS_DENIED, "Not authorized for %s.", action);
        polkit_query_refuse(q, -EACCES, &error);
        return 0;
}

static int append_subject(sd_bus_message *m, const SandboxCaller *caller) {
        switch (caller->kind) {
        case SANDBOX_CALLER_BUS_NAME:
                if (!caller->bus_name)
                        return -EINVAL;
                return sd_bus_message_append(m, "(sa{sv})", "system-bus-name", 1, "name", "s", caller->bus_name);
        case SANDBOX_CALLER_UNIX_PROCESS:
                /* pid and start time name the process even if the pid is reused; uid as the
                 * caller had it when it connected, as polkit's own clients send it. */
                if (caller->pid <= 0)
                        return -EINVAL;
                return sd_bus_message_append(m, "(sa{sv})", "unix-process", 3,
                                             "pid", "u", (uint32_t) caller->pid,
                                             "start-time", "t", caller->start_time,
                                             "uid", "i", (int32_t) caller->uid);
        }
        return -EINVAL;
}

static int polkit_query_start(sd_bus *bus, const SandboxCaller *caller, char * const *actions, PolkitCheckFlags flags,
                              polkit_callback_t cb, void *userdata, bool floating, sd_bus_slot **ret_slot) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const char *action = actions[0];
        bool last = strv_isempty(actions + 1);
        PolkitQuery *q;
        sd_bus_slot *slot;
        int r;

        q = calloc(1, sizeof(PolkitQuery));
        if (!q)
                return -ENOMEM;
        *q = (PolkitQuery) {
                .action = strdup(action),
                /* Before the last: asked without interaction, and a no is not the answer. */
                .flags = last ? flags : (flags & ~POLKIT_CHECK_INTERACTIVE),
                .cb = cb,
                .userdata = userdata,
                .bus = bus,
                .caller = *caller,
                .rest = last ? NULL : strv_copy(actions + 1),
                .rest_flags = flags,
                .floating = floating,
        };
        if (!q->action || (!last && !q->rest)) {
                polkit_query_free(q);
                return -ENOMEM;
        }

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.PolicyKit1",
                                           "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
        if (r >= 0)
                r = append_subject(m, caller);
        if (r >= 0)
                r = sd_bus_message_append(m, "sa{ss}us",
                                          action,
                                          0,
                                          (flags & POLKIT_CHECK_INTERACTIVE) ? POLKIT_FLAG_ALLOW_USER_INTERACTION : 0U,
                                          "");
        if (r < 0)
                goto fail;
        r = sd_bus_call_async(bus, &slot, m, on_check_reply, q, POLKIT_CHECK_TIMEOUT_USEC);
        if (r < 0)
                goto fail;
        (void) sd_bus_slot_set_destroy_callback(slot, polkit_query_free);
        if (!floating) {
                *ret_slot = slot;
                return 0;
        }
        /* Floating: the bus holds the query until the reply (or timeout) arrives. */
        (void) sd_bus_slot_set_floating(slot, true);
        sd_bus_slot_unref(slot);
        return 0;
fail:
        polkit_query_free(q);
        return r;
}

int polkit_check_any(sd_bus *bus, const SandboxCaller *caller, char * const *actions, PolkitCheckFlags flags,
                     polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot) {
        if (strv_isempty(actions))
                return -EINVAL;
        return polkit_query_start(bus, caller, actions, flags, cb, userdata, !ret_slot, ret_slot);
}

int polkit_check(sd_bus *bus, const SandboxCaller *caller, const char *action, PolkitCheckFlags flags,
                 polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot) {
        return polkit_check_any(bus, caller, (char *[]) { (char *) action, NULL }, flags, cb, userdata, ret_slot);
}
