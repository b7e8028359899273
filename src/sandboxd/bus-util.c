/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"
#include "log.h"
#include "sandbox-errors.h"
#include "strv.h"

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
                        r = sd_bus_message_read_strv(m, &strv);
                        v.strv = strv ?: (char *[]) { NULL };
                } else if (streq(contents, "ay"))
                        r = sd_bus_message_read_array(m, 'y', &v.bytes.data, &v.bytes.size);
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
