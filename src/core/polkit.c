/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "macro.h"
#include "polkit.h"

#define POLKIT_CHECK_TIMEOUT_USEC (120ULL * 1000000ULL) /* a human may be typing a password */
#define POLKIT_FLAG_ALLOW_USER_INTERACTION 1U

typedef struct PolkitQuery {
        char *action;
        polkit_callback_t cb;
        void *userdata;
} PolkitQuery;

/* The slot's destroy callback: the query lives exactly as long as its slot. */
static void polkit_query_free(void *userdata) {
        PolkitQuery *q = userdata;

        if (!q)
                return;
        free(q->action);
        free(q);
}

static int on_check_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        PolkitQuery *q = userdata;
        const char *action = q->action;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int authorized, challenge, r;

        if (e) {
                if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                          "polkit is not running, so only root may do this (%s).", action);
                else
                        sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                          "Could not ask polkit for %s: %s", action, e->message);
                q->cb(-EACCES, &error, q->userdata);
                return 0;
        }

        r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
        if (r >= 0)
                r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0) {
                sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED, "polkit sent a reply we cannot read.");
                q->cb(r, &error, q->userdata);
                return 0;
        }

        if (authorized) {
                q->cb(1, NULL, q->userdata);
                return 0;
        }
        if (challenge)
                sd_bus_error_setf(&error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                  "Authentication is required for %s.", action);
        else
                sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized for %s.", action);
        q->cb(0, &error, q->userdata);
        return 0;
}

int polkit_check_bus_name(sd_bus *bus, const char *bus_name, const char *action, bool interactive,
                          polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        PolkitQuery *q;
        sd_bus_slot *slot;
        int r;

        q = calloc(1, sizeof(PolkitQuery));
        if (!q)
                return -ENOMEM;
        q->action = strdup(action);
        if (!q->action) {
                polkit_query_free(q);
                return -ENOMEM;
        }
        q->cb = cb;
        q->userdata = userdata;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.PolicyKit1",
                                           "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
        if (r < 0)
                goto fail;
        r = sd_bus_message_append(m, "(sa{sv})sa{ss}us",
                                  "system-bus-name", 1, "name", "s", bus_name,
                                  action,
                                  0,
                                  interactive ? POLKIT_FLAG_ALLOW_USER_INTERACTION : 0U,
                                  "");
        if (r < 0)
                goto fail;
        r = sd_bus_call_async(bus, &slot, m, on_check_reply, q, POLKIT_CHECK_TIMEOUT_USEC);
        if (r < 0)
                goto fail;
        (void) sd_bus_slot_set_destroy_callback(slot, polkit_query_free);
        if (ret_slot) {
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
