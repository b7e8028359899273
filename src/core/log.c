/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

int log_internal(int level, int error, const char *sandbox_id, const char *fmt, ...) {
        char buf[2048];
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

        if (use_journal < 0)
                use_journal = stderr_is_journal();
        /* Without a sandbox, no SANDBOX_ID= field at all: "SANDBOX_ID=" with an unused
         * argument would shift the varargs and make sd_journal_send() drop the message. */
        if (use_journal && sandbox_id)
                sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level, "SANDBOX_ID=%s", sandbox_id,
                                "ERRNO=%i", error, "SYSLOG_IDENTIFIER=sandboxd", NULL);
        else if (use_journal)
                sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level,
                                "ERRNO=%i", error, "SYSLOG_IDENTIFIER=sandboxd", NULL);
        else if (sandbox_id)
                fprintf(stderr, "<%i>%s: %s\n", level, sandbox_id, buf);
        else
                fprintf(stderr, "<%i>%s\n", level, buf);
        return -error;
}
