/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The D-Bus transport of libsandbox-client: what its files share, and the pure parts
 * (encoding options, decoding replies, mapping errors) that the unit tests call. */

#include <signal.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "sandbox-client.h"

/* Slack over the exec timeout for the method call itself: the daemon kills at the
 * timeout, then still has to collect the process and reply. */
#define EXEC_CALL_SLACK_SEC             UINT64_C(30)
/* Creating may pull or start a payload; destroying waits for the unit to go. */
#define CREATE_CALL_TIMEOUT_USEC        (UINT64_C(120) * UINT64_C(1000000))
#define DESTROY_CALL_TIMEOUT_USEC       (UINT64_C(120) * UINT64_C(1000000))
#define HISTORY_CALL_TIMEOUT_USEC       (UINT64_C(60) * UINT64_C(1000000))

struct SandboxClient {
        sd_bus *bus;

        /* Between sandbox_client_interrupt_begin() and _end(): the signals blocked and
         * taken by a private loop that the bus is attached to. */
        sd_event *event;
        sigset_t saved;
        bool masked;
        bool attached;
        int signal;                     /* the one that ended a wait, or 0 */
        void (*on_winch)(void *userdata);
        void *userdata;
};

struct SandboxHandle {
        SandboxClient *client;
        char *id;
        char *path;
};

/* The client over an existing connection to sandboxd (or to a peer that acts as it, in the
 * tests): takes a reference on bus. */
int sandbox_client_new_bus(sd_bus *bus, SandboxClient **ret);
/* A handle for the sandbox id at path (no call). */
int sandbox_handle_new(SandboxClient *c, const char *id, const char *path, SandboxHandle **ret);

/* Fills e (if given) from the bus error, or from r alone when none is set; returns the
 * negative errno: the documented names' own, else r's. */
int client_error_from_bus(SandboxClientError *e, const sd_bus_error *b, int r);

/* Sends m and returns its reply. interruptible: inside an interrupt scope, a signal ends
 * the wait with -EINTR. */
int client_call(SandboxClient *c, sd_bus_message *m, uint64_t usec, bool interruptible,
                SandboxClientError *error, sd_bus_message **ret_reply);
/* A method call of the Manager (h NULL) or of the sandbox h. */
int client_new_call(SandboxClient *c, SandboxHandle *h, const char *member, sd_bus_message **ret);
/* Calls a method whose arguments and (empty or ignored) reply are trivial. */
int client_call_method(SandboxClient *c, SandboxHandle *h, const char *member, SandboxClientError *error,
                       const char *types, ...);

/* Encoding and decoding, without a call. */
int client_append_create_options(sd_bus_message *m, const SandboxCreateOptions *o);
/* timeout_sec: sent when > 0 (o's own is not looked at). */
int client_append_exec_options(sd_bus_message *m, const SandboxExecOptions *o, uint64_t timeout_sec);
/* Exec's reply (with_output) or Wait's: (i, [ay, ay,] a{sv}). */
int client_read_exec_result(sd_bus_message *m, bool with_output, SandboxExecResult *ret);
/* Properties.GetAll of the Sandbox interface. */
int client_read_status(sd_bus_message *m, SandboxStatus *ret);
/* ay into a copy (NULL when empty). */
int client_read_bytes(sd_bus_message *m, void **ret, size_t *ret_size);
int client_read_file_entry(sd_bus_message *m, SandboxFileEntry *ret);

/* "(...)" arrays: reads entries with read_one (1: one read, 0: the end) into a growing
 * array of size-byte elements; free_one undoes a partly read one. */
int client_read_array(sd_bus_message *m, const char *contents, size_t size,
                      int (*read_one)(sd_bus_message *m, void *item), void (*free_one)(void *item),
                      void **ret, size_t *ret_n);

/* Calls member (no arguments) of the Manager (h NULL) or of h, and reads its reply, an
 * array of contents, with client_read_array(). */
int client_call_list(SandboxClient *c, SandboxHandle *h, const char *member, const char *contents, size_t size,
                     int (*read_one)(sd_bus_message *m, void *item), void (*free_one)(void *item),
                     void **ret, size_t *ret_n, SandboxClientError *error);
/* Reads an a{sv} into base: field(i, &signature, &offset) names the i-th of n_fields
 * known entries; *seen gets bit i for each found. Unknown names or types are skipped. */
int client_read_fields(sd_bus_message *m, size_t n_fields,
                       const char *(*field)(size_t i, const char **sig, size_t *off), void *base, unsigned *seen);
/* Metrics of GetMetrics' reply. */
int client_read_metrics(sd_bus_message *m, SandboxMetricsInfo *ret);
/* Frees n elements of size bytes, each with free_one, and the array. */
void client_array_free(void *items, size_t n, size_t size, void (*free_one)(void *item));

uint64_t sec_to_usec_add(uint64_t sec, uint64_t slack_sec);
uint64_t sec_add(uint64_t a, uint64_t b);
