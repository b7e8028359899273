/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>

#include "sandbox-errors.h"

const sd_bus_error_map sandbox_error_map[] = {
#define ERROR_MAP_ENTRY(name, errno_value) SD_BUS_ERROR_MAP(name, errno_value),
        SANDBOX_ERRORS(ERROR_MAP_ENTRY)
#undef ERROR_MAP_ENTRY
        SD_BUS_ERROR_MAP_END
};

int sandbox_error_setf(sd_bus_error *error, const char *name, const char *fmt, ...) {
        int r = -EIO;
        va_list ap;

        for (const sd_bus_error_map *m = sandbox_error_map; m->name; m++)
                if (streq(m->name, name)) {
                        r = -m->code;
                        break;
                }
        if (error && !sd_bus_error_is_set(error)) {
                va_start(ap, fmt);
                (void) sd_bus_error_setfv(error, name, fmt, ap);
                va_end(ap);
        }
        return r;
}
