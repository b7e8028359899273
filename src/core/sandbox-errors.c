/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>

#include "sandbox-errors.h"

const sd_bus_error_map sandbox_error_map[] = {
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_NO_SUCH_TEMPLATE,   ENOENT),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_NO_SUCH_SANDBOX,    ENXIO),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_INVALID_OPTION,     EINVAL),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_NOT_RUNNING,        ESRCH),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_BUSY,               EBUSY),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_TOO_MANY_SANDBOXES, EUSERS),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_SANDBOX_FAILED,     EIO),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_SYSTEMD_FAILED,     EIO),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_NO_SUCH_PROCESS,    ECHILD),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_STILL_RUNNING,      EAGAIN),
        SD_BUS_ERROR_MAP(SANDBOX_ERROR_FILE_TOO_LARGE,     EFBIG),
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
