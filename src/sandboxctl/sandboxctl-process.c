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

#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-process.h"
#include "sandboxctl-util.h"

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

int processes_list(SandboxClient *c, const char *id, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        SandboxProcess *list = NULL;
        size_t n = 0;
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        r = sandbox_handle_processes(h, &list, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list the processes of sandbox %s: %s",
                                       id, sandbox_client_error_message(&error, r));

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

finish:
        sandbox_process_array_free(list, n);
        return r;
}

/* The sandbox and the process named on the command line. */
static int process_get(SandboxClient *c, const char *id, const char *process, SandboxHandle **ret_h,
                       uint64_t *ret_process) {
        uint64_t p;
        int r;

        r = parse_uint64(process, &p);
        if (r < 0)
                return log_error_errno(r, "Invalid process '%s', expected the ID that '%s ps %s' shows.",
                                       process, program_invocation_short_name, id);
        r = sandbox_get(c, id, ret_h);
        if (r < 0)
                return r;
        *ret_process = p;
        return 0;
}

int process_signal(SandboxClient *c, const char *id, const char *process, int sig) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        uint64_t pid = 0;
        int r;

        r = process_get(c, id, process, &h, &pid);
        if (r < 0)
                return r;
        r = sandbox_handle_signal(h, pid, sig, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to send signal %d to process %" PRIu64 " of sandbox %s: %s",
                                       sig, pid, id, sandbox_client_error_message(&error, r));
        return 0;
}

/* A process whose input is full takes this long to be asked again. */
#define STDIN_BUSY_RETRY_USEC (20U * 1000U)

int process_send_stdin(SandboxClient *c, const char *id, const char *process) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        char buf[64 * 1024];
        uint64_t pid = 0;
        ssize_t n;
        int r;

        r = process_get(c, id, process, &h, &pid);
        if (r < 0)
                return r;
        /* What comes, as it comes: a terminal's lines, a pipe's writes. */
        while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "Failed to read standard input: %m");
                }
                while ((r = sandbox_handle_write_stdin(h, pid, buf, (size_t) n, &error)) == -EBUSY) {
                        sandbox_client_error_done(&error);
                        (void) usleep(STDIN_BUSY_RETRY_USEC);
                }
                if (r < 0)
                        return log_error_errno(r, "Failed to write to the input of process %" PRIu64
                                               " of sandbox %s: %s", pid, id, sandbox_client_error_message(&error, r));
        }
        return 0;
}

int process_close_stdin(SandboxClient *c, const char *id, const char *process) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        uint64_t pid = 0;
        int r;

        r = process_get(c, id, process, &h, &pid);
        if (r < 0)
                return r;
        r = sandbox_handle_close_stdin(h, pid, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to close the input of process %" PRIu64 " of sandbox %s: %s", pid,
                                       id, sandbox_client_error_message(&error, r));
        return 0;
}

/* How often output --follow asks for more. */
#define OUTPUT_POLL_USEC (100U * 1000U)

static int write_all(int fd, const void *data, size_t size) {
        for (const char *p = data; size > 0;) {
                ssize_t n = write(fd, p, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

int process_output(SandboxClient *c, const char *id, const char *process, bool follow) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        uint64_t pid = 0, offsets[2] = {}, totals[2];
        bool running;
        int r;

        r = process_get(c, id, process, &h, &pid);
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_(sandbox_exec_result_done) SandboxExecResult out = {};

                r = sandbox_handle_read_output_from(h, pid, offsets, &out, &running, totals, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to read the output of process %" PRIu64 " of sandbox %s: %s",
                                               pid, id, sandbox_client_error_message(&error, r));
                r = write_all(STDOUT_FILENO, out.stdout_data ?: "", out.stdout_size);
                if (r >= 0)
                        r = write_all(STDERR_FILENO, out.stderr_data ?: "", out.stderr_size);
                if (r < 0)
                        return log_error_errno(r, "Failed to write the output: %m");
                /* What sandboxd dropped between two reads (its OutputMax): said, not hidden. */
                for (unsigned i = 0; i < 2; i++) {
                        uint64_t got = i == 0 ? out.stdout_size : out.stderr_size;
                        if (totals[i] - offsets[i] > got)
                                fprintf(stderr, "%s: %" PRIu64 " bytes of %s were dropped by sandboxd (OutputMax).\n",
                                        program_invocation_short_name, totals[i] - offsets[i] - got,
                                        i == 0 ? "stdout" : "stderr");
                        offsets[i] = totals[i];
                }
                if (!follow || !running)
                        return 0;
                (void) usleep(OUTPUT_POLL_USEC);
        }
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
        SandboxHandle *handle;
        uint64_t process;
} Session;

static void session_on_winch(void *userdata) {
        Session *s = userdata;
        unsigned rows = 0, cols = 0;

        /* Fire and forget: a lost resize is corrected by the next one. */
        if (s->process > 0 && terminal_get_size(STDIN_FILENO, &rows, &cols) >= 0)
                (void) sandbox_handle_resize_terminal(s->handle, s->process, rows, cols);
}

int tty_session(SandboxHandle *h, char **argv, const SandboxExecOptions *o, uint64_t wait_usec,
                SandboxExecResult *ret, SandboxClientError *error, int *ret_signal) {
        SandboxClient *c = sandbox_handle_client(h);
        Session s = { .handle = h };
        int r;

        r = sandbox_client_interrupt_begin(c, session_on_winch, &s);
        if (r < 0)
                return r;

        /* Raw before the session starts: what is typed early is not echoed here as well. */
        r = terminal_make_raw();
        if (r < 0) {
                if (asprintf(&error->message, "Failed to put the terminal into raw mode: %s", strerror(-r)) < 0)
                        error->message = NULL;
        } else {
                r = sandbox_handle_start(h, argv, o, &s.process, error);
                if (r >= 0)
                        r = sandbox_handle_wait(h, s.process, 0, wait_usec, ret, error);
                /* As a terminal that went away: the session is hung up, not left running. */
                if (r == -EINTR && sandbox_client_interrupted(c) > 0)
                        (void) sandbox_handle_signal(h, s.process, SIGHUP, NULL);
                terminal_restore();
        }
        *ret_signal = sandbox_client_interrupted(c);
        sandbox_client_interrupt_end(c);
        return r;
}
