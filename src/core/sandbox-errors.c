/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>

#include "sandbox-errors.h"

static const struct {
        const char *name;
        int errno_value;
} error_table[_SANDBOX_ERR_MAX] = {
#define SANDBOX_ERROR_TABLE_ENTRY(code, n, bus_name, e, http) [SANDBOX_ERR_##code] = { .name = n, .errno_value = e },
        SANDBOX_ERRORS(SANDBOX_ERROR_TABLE_ENTRY)
#undef SANDBOX_ERROR_TABLE_ENTRY
};

const char *sandbox_error_code_to_name(SandboxErrorCode code) {
        return code >= 0 && code < _SANDBOX_ERR_MAX ? error_table[code].name : NULL;
}

SandboxErrorCode sandbox_error_code_from_name(const char *name) {
        if (name)
                for (SandboxErrorCode c = 0; c < _SANDBOX_ERR_MAX; c++)
                        if (error_table[c].name && streq(error_table[c].name, name))
                                return c;
        return SANDBOX_ERR_NONE;
}

int sandbox_error_code_to_errno(SandboxErrorCode code) {
        if (code < 0 || code >= _SANDBOX_ERR_MAX || error_table[code].errno_value <= 0)
                return EIO;
        return error_table[code].errno_value;
}

static int error_setv(SandboxError *e, SandboxErrorCode code, int errno_value, const char *fmt, va_list ap) {
        if (!e || sandbox_error_is_set(e))
                return -errno_value;
        *e = (SandboxError) { .code = code, .errno_value = errno_value };
        errno = errno_value; /* for %m */
        if (vasprintf(&e->message, fmt, ap) < 0)
                e->message = NULL;
        return -errno_value;
}

int sandbox_error_set(SandboxError *e, SandboxErrorCode code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(e, code, sandbox_error_code_to_errno(code), fmt, ap);
        va_end(ap);
        return r;
}

int sandbox_error_set_errno(SandboxError *e, int errno_value, const char *fmt, ...) {
        va_list ap;
        int r;

        errno_value = abs(errno_value) ?: EIO;
        va_start(ap, fmt);
        r = error_setv(e, SANDBOX_ERR_ERRNO, errno_value, fmt, ap);
        va_end(ap);
        return r;
}

int sandbox_error_set_quota(SandboxError *e, const char *what, uint64_t limit, uint64_t use, const char *fmt, ...) {
        bool was_set = sandbox_error_is_set(e);
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(e, SANDBOX_ERR_QUOTA_EXCEEDED, sandbox_error_code_to_errno(SANDBOX_ERR_QUOTA_EXCEEDED), fmt, ap);
        va_end(ap);
        if (e && !was_set) {
                e->quota_what = what;
                e->quota_limit = limit;
                e->quota_use = use;
        }
        return r;
}

void sandbox_error_done(SandboxError *e) {
        if (!e)
                return;
        free(e->message);
        *e = SANDBOX_ERROR_NULL;
}

const char *sandbox_error_message(const SandboxError *e) {
        if (e && e->message)
                return e->message;
        return strerror(e && e->errno_value > 0 ? e->errno_value : EIO);
}
