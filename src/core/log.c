/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

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

int log_open_journal_stream(const char *socket_path, const char *identifier, int priority) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *header = NULL;
        int n, flags;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -EINVAL;
        strcpy(sa.sun_path, socket_path);

        /* Non-blocking for connect() and the header only: connecting to a unix stream socket
         * either completes at once or, while the listener has a full backlog of connections
         * it has not accepted, blocks (here: EAGAIN). */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        if (shutdown(fd, SHUT_RD) < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int) { 8 * 1024 * 1024 }, sizeof(int));

        /* journald's stream header, as sd_journal_stream_fd() writes it: identifier, unit id,
         * priority, level prefix, forward to syslog, to kmsg, to the console. It fits the
         * empty send buffer of a new socket. */
        n = asprintf(&header, "%s\n\n%i\n0\n0\n0\n0\n", identifier, priority);
        if (n < 0)
                return -ENOMEM;
        ssize_t k = write(fd, header, (size_t) n);
        if (k < 0)
                return -errno;
        if (k != n)
                return -EIO;

        /* Whoever gets it writes to it like to any stderr, and may wait. */
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return -errno;
        return TAKE_FD(fd);
}
