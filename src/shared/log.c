/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;
static int use_journal = -1;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

static bool stderr_is_journal(void) {
        /* $JOURNAL_STREAM is "dev:ino" of the stream systemd connected us to. */
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

bool log_uses_journal(void) {
        if (use_journal < 0)
                use_journal = stderr_is_journal();
        return use_journal;
}

/* "src/core/sandbox.c" of "../src/core/sandbox.c": where the build put the compiler. */
static const char *source_path(const char *file) {
        while (strncmp(file, "../", 3) == 0)
                file += 3;
        return file;
}

int log_internal_full(int level, int error, const char *sandbox_id, const char *file, int line, const char *func,
                      const char *fmt, ...) {
        char buf[2048], code_file[256], code_line[32];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        errno = saved;
        file = source_path(file);

        if (use_journal < 0)
                use_journal = stderr_is_journal();
        if (use_journal) {
                snprintf(code_file, sizeof(code_file), "CODE_FILE=%s", file);
                snprintf(code_line, sizeof(code_line), "CODE_LINE=%i", line);
        }
        /* Without a sandbox, no SANDBOX_ID= field at all: "SANDBOX_ID=" with an unused
         * argument would shift the varargs and make sd_journal_send() drop the message. */
        if (use_journal && sandbox_id)
                sd_journal_send_with_location(code_file, code_line, func, "MESSAGE=%s", buf, "PRIORITY=%i", level,
                                              "SANDBOX_ID=%s", sandbox_id, "ERRNO=%i", error,
                                              "SYSLOG_IDENTIFIER=sandboxd", NULL);
        else if (use_journal)
                sd_journal_send_with_location(code_file, code_line, func, "MESSAGE=%s", buf, "PRIORITY=%i", level,
                                              "ERRNO=%i", error, "SYSLOG_IDENTIFIER=sandboxd", NULL);
        else if (error != 0 && level <= LOG_ERR)
                fprintf(stderr, "<%i>%s%s%s (%s(), %s:%i)\n", level, strempty(sandbox_id), sandbox_id ? ": " : "",
                        buf, func, file, line);
        else if (sandbox_id)
                fprintf(stderr, "<%i>%s: %s\n", level, sandbox_id, buf);
        else
                fprintf(stderr, "<%i>%s\n", level, buf);
        return -error;
}

void log_assert_failed_return(const char *text, const char *file, int line, const char *func) {
        (void) log_internal_full(LOG_ERR, 0, NULL, file, line, func,
                                 "Assertion '%s' failed at %s:%i, function %s(). Ignoring.", text,
                                 source_path(file), line, func);
}

size_t log_payload_output(const char *identifier, const char *sandbox_id, const char *buf, size_t n,
                          unsigned *budget) {
        size_t logged = 0;

        if (use_journal < 0)
                use_journal = stderr_is_journal();
        while (n > 0 && *budget > 0) {
                const char *nl = memchr(buf, '\n', n);
                size_t len = nl ? (size_t) (nl - buf) : n;
                int shown = (int) MIN(len, (size_t) LOG_PAYLOAD_LINE_MAX);

                if (len > 0) {
                        if (use_journal)
                                sd_journal_send("MESSAGE=%.*s", shown, buf, "PRIORITY=%i", LOG_WARNING,
                                                "SANDBOX_ID=%s", sandbox_id, "SYSLOG_IDENTIFIER=%s", identifier, NULL);
                        else
                                fprintf(stderr, "<%i>%s: %.*s\n", LOG_WARNING, identifier, shown, buf);
                        (*budget)--;
                        logged++;
                }
                len += nl ? 1 : 0;
                buf += len;
                n -= len;
        }
        return logged;
}
