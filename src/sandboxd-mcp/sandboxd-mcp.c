/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-mcp: the MCP tools (src/mcp) over stdio, for an agent that runs it as its own
 * user. A message per line on stdin, a reply per line on stdout, logs on stderr; the event
 * loop never blocks on either (a client that does not read its replies stops us reading
 * its requests, nothing more). */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "mcp.h"
#include "parse-util.h"

/* A line may carry a file_write of 8 MiB, as base64 in JSON. */
#define LINE_MAX_BYTES (16U * 1024U * 1024U)
/* Replies not yet read by the client past which we stop reading its requests. */
#define OUTPUT_HIGH_WATER (16U * 1024U * 1024U)
#define READ_CHUNK (64U * 1024U)

typedef struct Stdio {
        sd_event *event;
        McpServer *server;
        McpSession *session;
        sd_event_source *in_source, *out_source, *post_source;
        char *in;                      /* what was read and is not a whole line yet */
        size_t in_size;
        bool discarding;               /* within a line past LINE_MAX_BYTES: dropped up to its end */
        bool in_eof;
        char *out;                     /* replies not yet written */
        size_t out_size;
        bool verbose;
} Stdio;

static void log_msg(const char *format, ...) _printf_(1, 2);
static void log_msg(const char *format, ...) {
        va_list ap;

        fputs("sandboxd-mcp: ", stderr);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static int log_errno(int r, const char *what) {
        log_msg("%s: %s", what, strerror(r < 0 ? -r : r));
        return r < 0 ? r : -r;
}

static void stdio_update(Stdio *io);

static int stdio_flush(Stdio *io) {
        while (io->out_size > 0) {
                ssize_t n = write(STDOUT_FILENO, io->out, io->out_size);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return -errno;
                }
                memmove(io->out, io->out + n, io->out_size - (size_t) n);
                io->out_size -= (size_t) n;
        }
        return 0;
}

/* The end: stdin closed and every reply written, or stdout gone. */
static void stdio_maybe_exit(Stdio *io) {
        if (io->in_eof && io->out_size == 0 && mcp_session_n_pending(io->session) == 0 &&
            !mcp_server_is_busy(io->server))
                (void) sd_event_exit(io->event, 0);
}

static void on_send(json_object *message, void *userdata) {
        Stdio *io = userdata;
        const char *text;
        size_t n;
        char *p;
        int r;

        text = json_object_to_json_string_ext(message, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text) {
                log_msg("out of memory for a reply");
                return;
        }
        if (io->verbose)
                log_msg("> %.200s", text);
        n = strlen(text);
        p = realloc(io->out, io->out_size + n + 1);
        if (!p) {
                log_msg("out of memory for a reply");
                return;
        }
        io->out = p;
        memcpy(io->out + io->out_size, text, n);
        io->out[io->out_size + n] = '\n';
        io->out_size += n + 1;
        r = stdio_flush(io);
        if (r < 0) {
                log_errno(r, "Failed to write to stdout");
                (void) sd_event_exit(io->event, 1);
                return;
        }
        stdio_update(io);
}

static void handle_line(Stdio *io, char *line, size_t n) {
        int r;

        if (n > 0 && line[n - 1] == '\r')
                n--;
        if (n == 0)
                return;
        if (io->verbose)
                log_msg("< %.*s", (int) MIN(n, (size_t) 200), line);
        r = mcp_session_handle(io->session, line, n, on_send, io, NULL);
        if (r < 0)
                log_errno(r, "Failed to handle a message");
}

/* Handles each whole line in the input; keeps the rest. */
static void stdio_consume(Stdio *io) {
        size_t start = 0;
        char *nl;

        while ((nl = memchr(io->in + start, '\n', io->in_size - start))) {
                size_t end = (size_t) (nl - io->in);
                if (io->discarding)
                        io->discarding = false;
                else
                        handle_line(io, io->in + start, end - start);
                start = end + 1;
        }
        memmove(io->in, io->in + start, io->in_size - start);
        io->in_size -= start;
        if (io->in_size > LINE_MAX_BYTES) {
                /* Answered as JSON that does not parse, as the rest of it will not be read. */
                static const char too_long[] = "{";
                if (!io->discarding)
                        (void) mcp_session_handle(io->session, too_long, strlen(too_long), on_send, io, NULL);
                log_msg("A message longer than %u bytes: dropped", LINE_MAX_BYTES);
                io->discarding = true;
                io->in_size = 0;
        }
}

static int on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Stdio *io = userdata;
        ssize_t n;
        char *p;

        p = realloc(io->in, io->in_size + READ_CHUNK);
        if (!p)
                return log_errno(-ENOMEM, "Failed to read stdin");
        io->in = p;
        n = read(fd, io->in + io->in_size, READ_CHUNK);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                log_errno(-errno, "Failed to read stdin");
                n = 0;
        }
        if (n == 0) {
                /* The client is done: a last line without its newline counts too. */
                if (!io->discarding)
                        handle_line(io, io->in, io->in_size);
                io->in_size = 0;
                io->in_eof = true;
                io->in_source = sd_event_source_disable_unref(io->in_source);
                stdio_maybe_exit(io);
                return 0;
        }
        io->in_size += (size_t) n;
        stdio_consume(io);
        stdio_update(io);
        return 0;
}

static int on_stdin_file(sd_event_source *s, void *userdata) {
        return on_stdin(s, STDIN_FILENO, EPOLLIN, userdata);
}

static int on_stdout(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Stdio *io = userdata;
        int r;

        r = stdio_flush(io);
        if (r < 0) {
                log_errno(r, "Failed to write to stdout");
                return sd_event_exit(io->event, 1);
        }
        stdio_update(io);
        return 0;
}

/* After each round of events: a request that finished may have been the last. */
static int on_post(sd_event_source *s, void *userdata) {
        stdio_maybe_exit(userdata);
        return 0;
}

/* Reads while the client reads its replies; writes while there is something to write. */
static void stdio_update(Stdio *io) {
        if (io->out_source)
                (void) sd_event_source_set_enabled(io->out_source, io->out_size > 0 ? SD_EVENT_ON : SD_EVENT_OFF);
        if (io->in_source)
                (void) sd_event_source_set_enabled(io->in_source,
                                                   io->out_size < OUTPUT_HIGH_WATER ? SD_EVENT_ON : SD_EVENT_OFF);
        stdio_maybe_exit(io);
}

static int fd_nonblock(int fd) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

static void help(void) {
        printf("sandboxd-mcp [OPTIONS]\n\n"
               "sandboxd's sandboxes as Model Context Protocol tools, over stdio.\n\n"
               "  -h --help             Show this help\n"
               "     --version          Show the version\n"
               "     --address ADDRESS  sandboxd's varlink socket (default %s)\n"
               "     --tenant TENANT    Act for this tenant (needs io.sandboxd.Sandbox1.delegate)\n"
               "     --default-lifetime SEC\n"
               "                        sandbox_create's lifetime when none is given (default 1h; 0: none)\n"
               "  -v --verbose          Log each message on stderr\n\n"
               "See sandboxd-mcp(1).\n", MCP_VARLINK_ADDRESS_DEFAULT);
}

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_ADDRESS, ARG_TENANT, ARG_DEFAULT_LIFETIME };
        static const struct option options[] = {
                { "help",    no_argument,       NULL, 'h'         },
                { "version", no_argument,       NULL, ARG_VERSION },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "tenant",  required_argument, NULL, ARG_TENANT  },
                { "default-lifetime", required_argument, NULL, ARG_DEFAULT_LIFETIME },
                { "verbose", no_argument,       NULL, 'v'         },
                {}
        };
        _cleanup_(mcp_server_unrefp) McpServer *server = NULL;
        const char *address = getenv("SANDBOXD_VARLINK_ADDRESS"), *tenant = NULL;
        uint64_t default_lifetime = MCP_DEFAULT_LIFETIME_SEC;
        Stdio io = {};
        sigset_t mask;
        int c, r;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandboxd-mcp %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_ADDRESS:
                        address = optarg;
                        break;
                case ARG_TENANT:
                        tenant = optarg;
                        break;
                case ARG_DEFAULT_LIFETIME:
                        if (parse_seconds(optarg, &default_lifetime) < 0) {
                                log_msg("Invalid --default-lifetime: %s (seconds, or with s, min, h, d)", optarg);
                                return 2;
                        }
                        break;
                case 'v':
                        io.verbose = true;
                        break;
                default:
                        return 2;
                }
        if (optind < argc) {
                log_msg("Unexpected argument: %s", argv[optind]);
                return 2;
        }

        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);

        r = sd_event_default(&io.event);
        if (r < 0)
                return log_errno(r, "Failed to get the event loop"), 1;
        if (sd_event_add_signal(io.event, NULL, SIGTERM, NULL, NULL) < 0 ||
            sd_event_add_signal(io.event, NULL, SIGINT, NULL, NULL) < 0)
                return log_msg("Failed to handle SIGTERM and SIGINT"), 1;
        r = mcp_server_new(&server, io.event, address);
        if (r >= 0) {
                mcp_server_set_default_lifetime(server, default_lifetime);
                io.server = server;
        }
        if (r >= 0)
                r = mcp_session_new(server, tenant, &io.session);
        if (r >= 0)
                /* stdout takes notifications at any time: progress while a call runs. */
                mcp_session_set_notify(io.session, true);
        if (r < 0)
                return log_errno(r, "Failed to set up"), 1;

        r = fd_nonblock(STDIN_FILENO);
        if (r >= 0)
                r = fd_nonblock(STDOUT_FILENO);
        if (r < 0)
                return log_errno(r, "Failed to make stdin and stdout non-blocking"), 1;
        /* A regular file (sandboxd-mcp < requests > replies) cannot be polled, and never
         * blocks: it is read on each round of the loop, and written at once. */
        r = sd_event_add_io(io.event, &io.in_source, STDIN_FILENO, EPOLLIN, on_stdin, &io);
        if (r == -EPERM)
                r = sd_event_add_defer(io.event, &io.in_source, on_stdin_file, &io);
        if (r < 0)
                return log_errno(r, "Failed to watch stdin"), 1;
        r = sd_event_add_io(io.event, &io.out_source, STDOUT_FILENO, EPOLLOUT, on_stdout, &io);
        if (r < 0 && r != -EPERM)
                return log_errno(r, "Failed to watch stdout"), 1;
        r = sd_event_add_post(io.event, &io.post_source, on_post, &io);
        if (r < 0)
                return log_errno(r, "Failed to set up the event loop"), 1;
        stdio_update(&io);

        r = sd_event_loop(io.event);

        mcp_session_free(io.session);
        sd_event_source_disable_unref(io.in_source);
        sd_event_source_disable_unref(io.out_source);
        sd_event_source_disable_unref(io.post_source);
        free(io.in);
        free(io.out);
        server = mcp_server_unref(server);
        sd_event_unref(io.event);
        return r < 0 ? (log_errno(r, "Event loop failed"), 1) : r;
}
