/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What the verbs of sandboxctl share: logging, JSON output, bus calls that a signal can
 * end. */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-util.h"

int log_error_errno(int error, const char *format, ...) {
        va_list ap;

        /* So that %m in format names this error. */
        errno = abs(error);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);

        return -abs(error);
}

const char *bus_error_message(const sd_bus_error *e, int error) {
        if (e && e->message)
                return e->message;
        return strerror(abs(error));
}

char *format_timestamp(char *buf, size_t l, uint64_t usec) {
        struct tm tm;
        time_t t;

        if (usec == 0 || usec == UINT64_MAX)
                return NULL;

        t = (time_t) (usec / USEC_PER_SEC);
        if (!localtime_r(&t, &tm))
                return NULL;
        if (strftime(buf, l, "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return NULL;
        return buf;
}

int loop_write(int fd, const void *buf, size_t nbytes) {
        const uint8_t *p = buf;

        while (nbytes > 0) {
                ssize_t k;

                k = write(fd, p, nbytes);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                /* An inherited non-blocking descriptor: wait, don't spin. */
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };

                                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                                        return -errno;
                                continue;
                        }
                        return -errno;
                }
                if (k == 0)
                        return -EIO;

                p += k;
                nbytes -= (size_t) k;
        }

        return 0;
}

int print_json(json_object *j) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE;
        const char *s;

        flags |= isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN;

        s = json_object_to_json_string_ext(j, flags);
        if (!s)
                return log_oom();

        if (puts(s) == EOF || fflush(stdout) != 0)
                return log_error_errno(errno > 0 ? errno : EIO, "Failed to write standard output: %m");
        return 0;
}


int json_add_string(json_object *o, const char *key, const char *s) {
        return json_add(o, key, json_object_new_string(strempty(s)));
}

int json_add_bytes(json_object *o, const char *key, const void *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        size_t n;
        int r;

        /* JSON strings are Unicode: undecodable bytes become U+FFFD. */
        r = utf8_sanitize(data, size, &s, &n);
        if (r < 0)
                return r;
        if (n > INT_MAX)
                return -E2BIG;

        return json_add(o, key, json_object_new_string_len(s, (int) n));
}

typedef struct CallState {
        sd_bus_message *reply;
        int signal;
} CallState;

/* The handlers only record: sd_event_exit() would also close the bus (sd-bus hooks the
 * loop's exit), and the caller may still need it, e.g. to destroy the sandbox. */
static int call_reply_handler(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        CallState *s = userdata;

        s->reply = sd_bus_message_ref(m);
        return 0;
}

static int call_signal_handler(sd_event_source *source, const struct signalfd_siginfo *si, void *userdata) {
        CallState *s = userdata;

        s->signal = (int) si->ssi_signo;
        return 0;
}

static int call_wait(sd_bus *bus, sd_event *event, sd_bus_message *m, uint64_t usec, CallState *state) {
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        static const int signals[] = { SIGINT, SIGTERM, SIGHUP };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(signals); i++) {
                r = sd_event_add_signal(event, NULL, signals[i], call_signal_handler, state);
                if (r < 0)
                        return r;
        }

        r = sd_bus_call_async(bus, &slot, m, call_reply_handler, state, usec);
        if (r < 0)
                return r;

        /* The call's own timeout ends it with an error reply, so this ends. */
        while (!state->reply && state->signal == 0) {
                r = sd_event_run(event, UINT64_MAX);
                if (r < 0)
                        return r;
        }

        return 0;
}

/* Like sd_bus_call(), but SIGINT, SIGTERM and SIGHUP end the wait (returning -EINTR and
 * the signal in *ret_signal) instead of the process, so that the caller can clean up
 * after itself. sd_bus_call() itself retries on EINTR. */
int bus_call_interruptible(
                sd_bus *bus,
                sd_bus_message *m,
                uint64_t usec,
                sd_bus_error *error,
                sd_bus_message **ret_reply,
                int *ret_signal) {

        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        CallState state = {};
        sigset_t mask, saved;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, &saved) < 0)
                return -errno;

        r = sd_event_new(&event);
        if (r >= 0) {
                r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
                if (r >= 0) {
                        r = call_wait(bus, event, m, usec, &state);
                        (void) sd_bus_detach_event(bus);
                }
        }
        event = sd_event_unref(event);

        /* The signal that ended the wait has been consumed; a second one acts as usual. */
        (void) sigprocmask(SIG_SETMASK, &saved, NULL);

        reply = state.reply;
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        if (!reply) {
                *ret_signal = state.signal;
                return -EINTR;
        }

        if (sd_bus_message_is_method_error(reply, NULL)) {
                r = sd_bus_error_copy(error, sd_bus_message_get_error(reply));
                return r < 0 ? r : -EIO;
        }

        *ret_reply = TAKE_PTR(reply);
        return 0;
}

int get_sandbox_path(sd_bus *bus, const char *id, sd_bus_error *error, char **ret_path) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *path;
        char *p;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "GetSandbox",
                               error, &reply, "s", id);
        if (r < 0)
                return r;

        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        p = strdup(path);
        if (!p)
                return sd_bus_error_set_errno(error, -ENOMEM);

        *ret_path = p;
        return 0;
}
