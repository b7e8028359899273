/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl ps and kill (ListProcesses, Signal), and the local half of exec --tty: the
 * pseudo-terminal is the sandbox's; here the user's terminal only goes raw while the
 * session runs, and its size follows the window (SIGWINCH → ResizeTerminal). */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-process.h"
#include "sandboxctl-util.h"
#include "strv.h"

#define HANGUP_CALL_TIMEOUT_USEC (UINT64_C(10) * USEC_PER_SEC)

int signal_from_string(const char *s, int *ret) {
        uint64_t n;

        if (parse_uint64(s, &n) >= 0) {
                if (n < 1 || n > 64)
                        return -EINVAL;
                *ret = (int) n;
                return 0;
        }

        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < NSIG; sig++) {
                const char *name = sigabbrev_np(sig);

                if (name && strcasecmp(name, s) == 0) {
                        *ret = sig;
                        return 0;
                }
        }
        return -EINVAL;
}

typedef struct ProcessInfo {
        uint64_t id;
        int32_t pid;
        char **argv;
        const char *state;      /* into the reply */
        int32_t exit_status;
} ProcessInfo;

static void process_list_free(ProcessInfo *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                strv_free(l[i].argv);
        free(l);
}

static char *argv_join(char **argv) {
        size_t l = 1;
        char *s, *p;

        for (char **a = argv; *a; a++)
                l += strlen(*a) + 1;
        s = p = malloc(l);
        if (!s)
                return NULL;
        for (char **a = argv; *a; a++)
                p = stpcpy(stpcpy(p, a == argv ? "" : " "), *a);
        *p = '\0';
        return s;
}

int processes_list(sd_bus *bus, const char *id, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        ProcessInfo *list = NULL;
        size_t n = 0, allocated = 0;
        int r;

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "ListProcesses", &error, &reply, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to list the processes of sandbox %s: %s",
                                       id, bus_error_message(&error, r));

        r = sd_bus_message_enter_container(reply, 'a', "(tiassi)");
        for (;;) {
                ProcessInfo p = {};

                if (r < 0)
                        goto parse_error;
                r = sd_bus_message_enter_container(reply, 'r', "tiassi");
                if (r < 0)
                        goto parse_error;
                if (r == 0)
                        break;
                r = sd_bus_message_read(reply, "ti", &p.id, &p.pid);
                if (r >= 0)
                        r = sd_bus_message_read_strv(reply, &p.argv);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "si", &p.state, &p.exit_status);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0) {
                        strv_free(p.argv);
                        goto parse_error;
                }

                if (n >= allocated) {
                        size_t k = allocated == 0 ? 16 : allocated * 2;
                        ProcessInfo *q = reallocarray(list, k, sizeof(ProcessInfo));

                        if (!q) {
                                strv_free(p.argv);
                                r = log_oom();
                                goto finish;
                        }
                        list = q;
                        allocated = k;
                }
                list[n++] = p;
        }

        if (json) {
                _cleanup_json_ json_object *ja = json_object_new_array();

                if (!ja) {
                        r = log_oom();
                        goto finish;
                }
                for (size_t i = 0; i < n; i++) {
                        json_object *o = json_object_new_object(), *args = json_object_new_array();

                        r = o && json_object_array_add(ja, o) >= 0 ? 0 : -ENOMEM;
                        if (r < 0)
                                json_object_put(o);
                        if (r >= 0)
                                r = json_add(o, "id", json_object_new_uint64(list[i].id));
                        if (r >= 0)
                                r = json_add(o, "pid", json_object_new_int(list[i].pid));
                        for (char **a = list[i].argv; r >= 0 && args && *a; a++)
                                r = json_object_array_add(args, json_object_new_string(*a)) < 0 ? -ENOMEM : 0;
                        if (r >= 0)
                                r = json_add(o, "argv", TAKE_PTR(args));
                        if (r >= 0)
                                r = json_add_string(o, "state", list[i].state);
                        if (r >= 0 && !streq(list[i].state, "running"))
                                r = json_add(o, "exit_status", json_object_new_int(list[i].exit_status));
                        json_object_put(args);
                        if (r < 0) {
                                r = log_oom();
                                goto finish;
                        }
                }
                r = print_json(ja);
                goto finish;
        }

        if (n > 0) {
                int w_id = (int) strlen("ID"), w_pid = (int) strlen("PID"), w_state = (int) strlen("STATE");
                char buf[32];

                for (size_t i = 0; i < n; i++) {
                        w_id = MAX(w_id, snprintf(buf, sizeof(buf), "%" PRIu64, list[i].id));
                        w_pid = MAX(w_pid, snprintf(buf, sizeof(buf), "%" PRIi32, list[i].pid));
                        w_state = MAX(w_state, (int) strlen(list[i].state));
                }

                printf("%*s %*s %-*s %6s %s\n", w_id, "ID", w_pid, "PID", w_state, "STATE", "STATUS", "COMMAND");
                for (size_t i = 0; i < n; i++) {
                        _cleanup_free_ char *cmd = argv_join(list[i].argv);

                        if (!cmd) {
                                r = log_oom();
                                goto finish;
                        }
                        if (streq(list[i].state, "running"))
                                snprintf(buf, sizeof(buf), "-");
                        else
                                snprintf(buf, sizeof(buf), "%" PRIi32, list[i].exit_status);
                        printf("%*" PRIu64 " %*" PRIi32 " %-*s %6s %s\n", w_id, list[i].id, w_pid, list[i].pid,
                               w_state, list[i].state, buf, cmd);
                }
                putchar('\n');
        }
        printf("%zu %s listed.\n", n, n == 1 ? "process" : "processes");
        r = 0;
        goto finish;

parse_error:
        r = log_error_errno(r, "Failed to parse ListProcesses reply: %m");
finish:
        process_list_free(list, n);
        return r;
}

int process_signal(sd_bus *bus, const char *id, const char *process, int sig) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        uint64_t pid;
        int r;

        r = parse_uint64(process, &pid);
        if (r < 0)
                return log_error_errno(r, "Invalid process '%s', expected the ID that '%s ps %s' shows.",
                                       process, program_invocation_short_name, id);

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "Signal", &error, &reply,
                               "ti", pid, (int32_t) sig);
        if (r < 0)
                return log_error_errno(r, "Failed to send signal %d to process %" PRIu64 " of sandbox %s: %s",
                                       sig, pid, id, bus_error_message(&error, r));
        return 0;
}

int terminal_get_size(int fd, unsigned *ret_rows, unsigned *ret_cols) {
        struct winsize ws = {};

        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0) /* a terminal that does not know: the default */
                return -ENODATA;
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
        return 0;
}

/* The terminal as it was: restored on every way out, also by exit(). */
static struct termios saved_termios;
static bool termios_saved = false;

static void terminal_restore(void) {
        if (!termios_saved)
                return;
        (void) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
        termios_saved = false;
}

static int terminal_make_raw(void) {
        static bool registered = false;
        struct termios raw;

        if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
                return -errno;
        if (!registered) {
                if (atexit(terminal_restore) != 0)
                        return -ENOMEM;
                registered = true;
        }

        raw = saved_termios;
        cfmakeraw(&raw);
        termios_saved = true;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0) {
                termios_saved = false;
                return -errno;
        }
        return 0;
}

typedef struct Session {
        sd_bus *bus;
        const char *path;
        uint64_t process;
} Session;

static void session_on_winch(void *userdata) {
        Session *s = userdata;
        unsigned rows = 0, cols = 0;

        /* Fire and forget: a lost resize is corrected by the next one. */
        if (terminal_get_size(STDIN_FILENO, &rows, &cols) >= 0)
                (void) sd_bus_call_method_async(s->bus, NULL, SANDBOX_BUS_NAME, s->path, SANDBOX_INTERFACE,
                                                "ResizeTerminal", NULL, NULL, "tuu", s->process,
                                                (uint32_t) rows, (uint32_t) cols);
}

static int session_run(Session *s, BusWait *w, sd_bus_message *start, uint64_t wait_usec, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *wait = NULL;
        int r;

        r = sd_bus_call(s->bus, start, 0, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "t", &s->process);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        r = sd_bus_message_new_method_call(s->bus, &wait, SANDBOX_BUS_NAME, s->path, SANDBOX_INTERFACE, "Wait");
        if (r >= 0)
                r = sd_bus_message_append(wait, "tt", s->process, UINT64_C(0));
        if (r >= 0)
                r = bus_wait_call(w, wait, wait_usec);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        if (!w->reply)
                /* As a terminal that went away: the session is hung up, not left running. */
                (void) sd_bus_call_method(s->bus, SANDBOX_BUS_NAME, s->path, SANDBOX_INTERFACE, "Signal", NULL, NULL,
                                          "ti", s->process, (int32_t) SIGHUP);
        return 0;
}

int tty_session(sd_bus *bus, const char *path, sd_bus_message *start, uint64_t wait_usec,
                sd_bus_error *error, sd_bus_message **ret_reply, int *ret_signal) {
        Session s = { .bus = bus, .path = path };
        BusWait w;
        int r;

        r = bus_wait_begin(&w, bus, session_on_winch, &s);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        /* Raw before the session starts: what is typed early is not echoed here as well. */
        r = terminal_make_raw();
        if (r < 0)
                r = sd_bus_error_set_errnof(error, r, "Failed to put the terminal into raw mode: %m");
        else {
                r = session_run(&s, &w, start, wait_usec, error);
                terminal_restore();
        }
        bus_wait_end(&w);
        if (r < 0) {
                w.reply = sd_bus_message_unref(w.reply);
                return r;
        }
        return bus_wait_result(&w, error, ret_reply, ret_signal);
}
