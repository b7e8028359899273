/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "access.h"
#include "bus-util.h"
#include "log.h"
#include "polkit.h"
#include "recorder-dbus.h"
#include "sandbox-errors.h"

static Recorder *the_recorder;

void recorder_dbus_set(Recorder *r) {
        the_recorder = r;
}

typedef struct ListExecutionsRequest {
        sd_bus_message *call;
        ExecutionFilter filter;
        char *sandbox_id;
} ListExecutionsRequest;

static ListExecutionsRequest *list_request_free(ListExecutionsRequest *l) {
        if (!l)
                return NULL;
        sd_bus_message_unref(l->call);
        free(l->sandbox_id);
        free(l);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ListExecutionsRequest *, list_request_free);

static int read_filter(sd_bus_message *m, ListExecutionsRequest *l, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *name, *contents;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;

                if (streq(name, "SandboxId") && streq(contents, "s")) {
                        const char *s;
                        r = sd_bus_message_read(m, "v", "s", &s);
                        if (r >= 0) {
                                free(l->sandbox_id);
                                l->sandbox_id = strdup(s);
                                if (!l->sandbox_id)
                                        return -ENOMEM;
                        }
                } else if (streq(name, "Owner") && streq(contents, "u")) {
                        uint32_t u;
                        r = sd_bus_message_read(m, "v", "u", &u);
                        l->filter.owner_set = true;
                        l->filter.owner = (uid_t) u;
                } else if (streq(name, "Since") && streq(contents, "t"))
                        r = sd_bus_message_read(m, "v", "t", &l->filter.since);
                else if (streq(name, "Limit") && streq(contents, "u")) {
                        uint32_t u;
                        r = sd_bus_message_read(m, "v", "u", &u);
                        if (r >= 0 && (u == 0 || u > RECORDER_LIST_LIMIT_MAX))
                                return sd_bus_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                         "Limit must be 1…%u.", RECORDER_LIST_LIMIT_MAX);
                        l->filter.limit = u;
                } else if (streq(name, "SandboxId") || streq(name, "Owner") || streq(name, "Since") ||
                           streq(name, "Limit"))
                        return sd_bus_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                 "Filter %s has the wrong type '%s'.", name, contents);
                else
                        return sd_bus_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                 "Unknown filter %s (known: SandboxId, Owner, Since, Limit).", name);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        l->filter.sandbox_id = l->sandbox_id;
        return 0;
}

static int append_execution(sd_bus_message *m, const ExecutionRecord *e) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "stuuassttiiibbttttt");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "stuu", e->sandbox_id, e->exec_id, (uint32_t) e->owner, (uint32_t) e->caller);
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, e->argv);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "sttiiibbttttt",
                                  e->working_directory, e->started_at, e->ended_at,
                                  (int32_t) e->exit_status, (int32_t) e->exit_code, (int32_t) e->signal,
                                  (int) e->timed_out, (int) e->oom_killed,
                                  e->cpu_usec, e->cgroup_cpu_nsec, e->cgroup_memory_peak,
                                  e->stdout_bytes, e->stderr_bytes);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static void on_executions_listed(int error, const ExecutionRecord *records, size_t n, void *userdata) {
        _cleanup_(list_request_freep) ListExecutionsRequest *l = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = error;

        /* sandboxd is stopping: no answer; the bus replies NoReply once we are gone. */
        if (r == -ECANCELED)
                return;

        if (r >= 0)
                r = sd_bus_message_new_method_return(l->call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', RECORDER_EXECUTION_SIGNATURE);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = append_execution(reply, &records[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0) {
                log_warning_errno(r, "Failed to answer ListExecutions: %m");
                (void) sd_bus_reply_method_errno(l->call, r, NULL);
        }
}

/* The spool is read off the event loop; on_executions_listed() answers. */
static int list_executions_start(ListExecutionsRequest *l, bool all, sd_bus_error *error) {
        int r;

        /* Without "manage", a caller sees the executions in its sandboxes and its own. */
        l->filter.any_owner = all;
        r = recorder_list_executions(the_recorder, &l->filter, on_executions_listed, l);
        if (r == -EBUSY)
                return sandbox_error_setf(error, SANDBOX_ERROR_BUSY,
                                          "%u queries of the record are under way already, try again.",
                                          RECORDER_LIST_QUERIES_MAX);
        return r;
}

static void on_list_executions_authorized(int authorized, const sd_bus_error *error, void *userdata) {
        _cleanup_(list_request_freep) ListExecutionsRequest *l = userdata;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        if (!the_recorder) {
                (void) sd_bus_reply_method_errorf(l->call, SD_BUS_ERROR_NOT_SUPPORTED, "Recording is off.");
                return;
        }
        r = list_executions_start(l, authorized > 0, &e);
        if (r >= 0) {
                TAKE_PTR(l);
                return;
        }
        if (sd_bus_error_is_set(&e))
                bus_reply_error(l->call, &e);
        else
                (void) sd_bus_reply_method_errno(l->call, r, NULL);
}

int method_list_executions(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(list_request_freep) ListExecutionsRequest *l = NULL;
        int r;

        l = calloc(1, sizeof(ListExecutionsRequest));
        if (!l)
                return -ENOMEM;
        l->call = sd_bus_message_ref(m);
        r = read_filter(m, l, error);
        if (r < 0)
                return r;
        if (!the_recorder)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "Recording is off (Record=no in sandboxd.conf).");

        r = bus_get_sender_uid(m, &l->filter.uid);
        if (r < 0)
                return r;
        if (l->filter.uid == 0) {
                r = list_executions_start(l, true, error);
                if (r < 0)
                        return r;
                TAKE_PTR(l);
                return 1;
        }

        /* Non-interactive, like ListSandboxes: without "manage" one simply sees one's own. */
        r = polkit_check_bus_name(sd_bus_message_get_bus(m), sd_bus_message_get_sender(m),
                                  SANDBOX_ACTION_MANAGE, false, on_list_executions_authorized, l);
        if (r < 0)
                return r;
        TAKE_PTR(l);
        return 1;
}
