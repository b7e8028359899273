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

int json_add_hex(json_object *o, const char *key, const void *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        const uint8_t *p = data;

        if (size > (SIZE_MAX - 1) / 2)
                return -ENOMEM;
        s = malloc(size * 2 + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < size; i++)
                sprintf(s + 2 * i, "%02x", p[i]);
        s[size * 2] = 0;
        return json_add_string(o, key, s);
}

/* The handlers only record: sd_event_exit() would also close the bus (sd-bus hooks the
 * loop's exit), and the caller may still need it, e.g. to destroy the sandbox. */
static int wait_reply_handler(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        BusWait *w = userdata;

        w->reply = sd_bus_message_ref(m);
        return 0;
}

static int wait_signal_handler(sd_event_source *source, const struct signalfd_siginfo *si, void *userdata) {
        BusWait *w = userdata;

        if (si->ssi_signo == SIGWINCH) {
                w->on_winch(w->userdata);
                return 0;
        }
        w->signal = (int) si->ssi_signo;
        return 0;
}

int bus_wait_begin(BusWait *w, sd_bus *bus, void (*on_winch)(void *userdata), void *userdata) {
        static const int signals[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
        size_t n = on_winch ? ELEMENTSOF(signals) : ELEMENTSOF(signals) - 1;
        sigset_t mask;
        int r;

        *w = (BusWait) { .bus = bus, .on_winch = on_winch, .userdata = userdata };
        sigemptyset(&mask);
        for (size_t i = 0; i < n; i++)
                sigaddset(&mask, signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, &w->saved) < 0)
                return -errno;
        w->masked = true;

        r = sd_event_new(&w->event);
        if (r >= 0)
                r = sd_bus_attach_event(bus, w->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                w->attached = true;
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_event_add_signal(w->event, NULL, signals[i], wait_signal_handler, w);
        if (r < 0)
                bus_wait_end(w);
        return r;
}

int bus_wait_call(BusWait *w, sd_bus_message *m, uint64_t usec) {
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        int r;

        w->reply = sd_bus_message_unref(w->reply);
        r = sd_bus_call_async(w->bus, &slot, m, wait_reply_handler, w, usec);
        if (r < 0)
                return r;
        /* The call's own timeout ends it with an error reply, so this ends. */
        while (!w->reply && w->signal == 0) {
                r = sd_event_run(w->event, UINT64_MAX);
                if (r < 0)
                        return r;
        }
        return 0;
}

void bus_wait_end(BusWait *w) {
        if (w->attached)
                (void) sd_bus_detach_event(w->bus);
        w->attached = false;
        w->event = sd_event_unref(w->event);
        /* The signal that ended the wait has been consumed; a second one acts as usual. */
        if (w->masked)
                (void) sigprocmask(SIG_SETMASK, &w->saved, NULL);
        w->masked = false;
}

int bus_wait_result(BusWait *w, sd_bus_error *error, sd_bus_message **ret_reply, int *ret_signal) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = TAKE_PTR(w->reply);
        int r;

        if (!reply) {
                *ret_signal = w->signal;
                return -EINTR;
        }
        if (sd_bus_message_is_method_error(reply, NULL)) {
                r = sd_bus_error_copy(error, sd_bus_message_get_error(reply));
                return r < 0 ? r : -EIO;
        }
        *ret_reply = TAKE_PTR(reply);
        return 0;
}

int bus_call_interruptible(
                sd_bus *bus,
                sd_bus_message *m,
                uint64_t usec,
                sd_bus_error *error,
                sd_bus_message **ret_reply,
                int *ret_signal) {

        BusWait w;
        int r;

        r = bus_wait_begin(&w, bus, NULL, NULL);
        if (r >= 0)
                r = bus_wait_call(&w, m, usec);
        bus_wait_end(&w);
        if (r < 0) {
                w.reply = sd_bus_message_unref(w.reply);
                return sd_bus_error_set_errno(error, r);
        }
        return bus_wait_result(&w, error, ret_reply, ret_signal);
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

static bool name_char_is_plain(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                strchr("%+,-./:=@_^", c);
}

/* The length of a printable character at p (an ASCII one, or a valid UTF-8 sequence that
 * is not a C1 control), 0 if it is not one. */
static size_t printable_length(const unsigned char *p, const unsigned char *end) {
        size_t n, subpart;

        if (*p >= 0x20 && *p < 0x7f)
                return 1;
        if (*p < 0x80)
                return 0;
        n = utf8_sequence_length(p, (size_t) (end - p), &subpart);
        if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
                return 0; /* U+0080..U+009F, the C1 controls */
        return n;
}

char *quote_name(const void *name, size_t size) {
        static const char controls[] = "\a\b\t\n\v\f\r"; /* written as C escapes */
        const unsigned char *p = name, *end = p + size;
        const char *c;
        bool plain = size > 0, in_quote = false;
        char *ret = NULL;
        size_t len = 0;
        FILE *f;

        for (const unsigned char *q = p; q < end; q++)
                if (*q < 0x80 && !name_char_is_plain(*q))
                        plain = false;
        for (const unsigned char *q = p; plain && q < end;) {
                size_t n = printable_length(q, end);
                if (n == 0)
                        plain = false;
                q += n;
        }
        if (plain)
                return strndup(name, size);

        f = open_memstream(&ret, &len);
        if (!f)
                return NULL;
        if (size == 0)
                fputs("''", f);
        while (p < end) {
                size_t n = printable_length(p, end);

                if (n > 0 && *p != '\'') {
                        if (!in_quote)
                                fputc('\'', f);
                        in_quote = true;
                        fwrite(p, 1, n, f);
                        p += n;
                        continue;
                }
                if (in_quote)
                        fputc('\'', f);
                in_quote = false;
                if (*p == '\'')
                        fputs("\\'", f);
                else if (*p && (c = strchr(controls, *p)))
                        fprintf(f, "$'\\%c'", "abtnvfr"[c - controls]);
                else
                        fprintf(f, "$'\\%03o'", *p);
                p++;
        }
        if (in_quote)
                fputc('\'', f);
        if (fclose(f) != 0)
                return mfree(ret);
        return ret;
}
