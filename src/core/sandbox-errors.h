/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The core's errors, as dbus-broker keeps them apart: a function returns a negative errno;
 * with a SandboxError set it is an API error that the caller is told, a code from the one
 * list in sandbox-api.h and a message saying why; without, a fault (ENOMEM, EIO from a
 * syscall) that a front end maps from the errno alone. Nothing here knows a transport:
 * each front end maps the code (D-Bus name, varlink error, HTTP status). */

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "sandbox-api.h"

typedef enum SandboxErrorCode {
        SANDBOX_ERR_NONE = 0,
#define SANDBOX_ERROR_CODE_ENUM(code, name, bus_name, errno_value, http) SANDBOX_ERR_##code,
        SANDBOX_ERRORS(SANDBOX_ERROR_CODE_ENUM)
#undef SANDBOX_ERROR_CODE_ENUM
        /* An errno the caller is told with a message of our own (a file operation's error
         * inside the sandbox, a sandbox that could not be allocated): D-Bus gives it the
         * errno's standard name. */
        SANDBOX_ERR_ERRNO,
        _SANDBOX_ERR_MAX,
} SandboxErrorCode;

typedef struct SandboxError {
        SandboxErrorCode code;
        int errno_value;   /* positive: the code's, or SANDBOX_ERR_ERRNO's own */
        char *message;     /* NULL only when out of memory */
        /* QuotaExceeded only: what is over quota (quota.h: "Sandboxes", "MemoryMax", …,
         * "CreatesPerSecond"; a static string), the limit and the use; NULL otherwise. */
        const char *quota_what;
        uint64_t quota_limit, quota_use;
} SandboxError;

#define SANDBOX_ERROR_NULL ((SandboxError) {})

static inline bool sandbox_error_is_set(const SandboxError *e) {
        return e && e->code != SANDBOX_ERR_NONE;
}

/* Sets e (unless it is NULL or set already: the first error stands) to code with a
 * formatted message; returns the code's negative errno, so that a caller can set and
 * return in one step. */
int sandbox_error_set(SandboxError *e, SandboxErrorCode code, const char *fmt, ...) _printf_(3, 4);
/* The same for SANDBOX_ERR_ERRNO; %m in fmt is strerror(errno_value). */
int sandbox_error_set_errno(SandboxError *e, int errno_value, const char *fmt, ...) _printf_(3, 4);
/* QuotaExceeded with what, limit and use (what: a static string). */
int sandbox_error_set_quota(SandboxError *e, const char *what, uint64_t limit, uint64_t use, const char *fmt, ...)
        _printf_(5, 6);
void sandbox_error_done(SandboxError *e);

/* "NoSuchSandbox" (the name a front end puts after its prefix); NULL for NONE and ERRNO. */
const char *sandbox_error_code_to_name(SandboxErrorCode code);
SandboxErrorCode sandbox_error_code_from_name(const char *name);
/* The errno the code stands for (EIO for what has none). */
int sandbox_error_code_to_errno(SandboxErrorCode code);
/* The message, or a fallback when there is none. */
const char *sandbox_error_message(const SandboxError *e);
