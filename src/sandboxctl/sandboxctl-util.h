/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <json-c/json.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "json-util.h"
#include "macro.h"

#define BUS_NAME                "io.sandboxd.Sandbox1"
#define MANAGER_PATH            "/io/sandboxd/Sandbox1"
#define MANAGER_INTERFACE       "io.sandboxd.Sandbox1.Manager"
#define SANDBOX_INTERFACE       "io.sandboxd.Sandbox1.Sandbox"
#define ERROR_NO_SUCH_SANDBOX   "io.sandboxd.Sandbox1.NoSuchSandbox"
#define ERROR_NOT_RUNNING       "io.sandboxd.Sandbox1.NotRunning"

/* Prints the message (with %m naming error) and a newline to stderr; returns -|error|. */
int log_error_errno(int error, const char *format, ...) _printf_(2, 3);
#define log_error(...) log_error_errno(EINVAL, __VA_ARGS__)
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")

const char *bus_error_message(const sd_bus_error *e, int error);
char *format_timestamp(char *buf, size_t l, uint64_t usec);
int loop_write(int fd, const void *buf, size_t nbytes);

/* One JSON value on stdout: indented on a terminal, one line otherwise. */
int print_json(json_object *j);
int json_add_string(json_object *o, const char *key, const char *s);
int json_add_bytes(json_object *o, const char *key, const void *data, size_t size);
/* data as lowercase hex digits: bytes that must survive exactly. */
int json_add_hex(json_object *o, const char *key, const void *data, size_t size);

/* Waiting on the bus so that SIGINT, SIGTERM and SIGHUP end the wait instead of the
 * process (and SIGWINCH, when on_winch is given, calls it): those signals blocked and
 * taken by a private sd-event loop attached to the bus, between begin and end. */
typedef struct BusWait {
        sd_bus *bus;
        sd_event *event;
        sigset_t saved;
        bool masked, attached;
        sd_bus_message *reply;   /* of the last bus_wait_call() */
        int signal;              /* the signal that ended a wait, or 0 */
        void (*on_winch)(void *userdata);
        void *userdata;
} BusWait;
int bus_wait_begin(BusWait *w, sd_bus *bus, void (*on_winch)(void *userdata), void *userdata);
/* Sends m and runs the loop until its reply (w->reply) or a signal (w->signal). */
int bus_wait_call(BusWait *w, sd_bus_message *m, uint64_t usec);
/* Detaches and frees the loop and restores the signal mask; w->reply stays. */
void bus_wait_end(BusWait *w);
/* The outcome of the last call: its reply, its error in error (< 0), or -EINTR with the
 * signal in *ret_signal. */
int bus_wait_result(BusWait *w, sd_bus_error *error, sd_bus_message **ret_reply, int *ret_signal);

/* Like sd_bus_call(), but SIGINT, SIGTERM and SIGHUP end the wait (returning -EINTR and
 * the signal in *ret_signal) instead of the process, so that the caller can clean up. */
int bus_call_interruptible(sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_error *error,
                           sd_bus_message **ret_reply, int *ret_signal);
/* Manager.GetSandbox: the object path of sandbox id. */
int get_sandbox_path(sd_bus *bus, const char *id, sd_bus_error *error, char **ret_path);

/* A name from a sandbox (size bytes, not necessarily UTF-8) quoted as GNU ls quotes names
 * on a terminal (--quoting-style=shell-escape): plain names as they are, others in '…',
 * with control characters and invalid bytes as $'\n', $'\033' and the like. It never puts
 * a control character on the operator's terminal. NULL when out of memory. */
char *quote_name(const void *name, size_t size);
