/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "access.h"
#include "bus-util.h"
#include "log.h"
#include "recorder-dbus.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"

static Recorder *the_recorder;

void recorder_dbus_set(Recorder *r) {
        the_recorder = r;
}

typedef struct ListExecutionsRequest {
        sd_bus_message *call;   /* once the query runs */
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

static void list_request_destroy(void *userdata) {
        list_request_free(userdata);
}

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
                        if (r >= 0 && (u == 0 || u > LIST_EXECUTIONS_LIMIT_MAX))
                                return sd_bus_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                         "Limit must be 1…%u.", LIST_EXECUTIONS_LIMIT_MAX);
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

/* Without "manage" (asked without interaction, like ListSandboxes), a caller sees the
 * executions in its sandboxes and its own. The spool is read off the event loop;
 * on_executions_listed() answers. */
static int list_executions_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                                      sd_bus_error *error) {
        _cleanup_(list_request_freep) ListExecutionsRequest *q = NULL;
        ListExecutionsRequest *l = userdata;
        int r;

        if (!the_recorder)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED, "Recording is off.");

        /* The query outlives this call (l is freed when it returns): it takes l's filter. */
        q = calloc(1, sizeof(ListExecutionsRequest));
        if (!q)
                return -ENOMEM;
        q->call = sd_bus_message_ref(call);
        q->filter = l->filter;
        q->sandbox_id = TAKE_PTR(l->sandbox_id);
        q->filter.sandbox_id = q->sandbox_id;
        q->filter.uid = caller->uid;
        q->filter.any_owner = caller->granted;
        r = recorder_list_executions(the_recorder, &q->filter, on_executions_listed, q);
        if (r == -EBUSY)
                return sandbox_error_setf(error, SANDBOX_ERROR_BUSY,
                                          "%u queries of the record are under way already, try again.",
                                          RECORDER_LIST_QUERIES_MAX);
        if (r < 0)
                return r;
        TAKE_PTR(q);
        return 1;
}

int method_list_executions(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(list_request_freep) ListExecutionsRequest *l = NULL;
        int r;

        l = calloc(1, sizeof(ListExecutionsRequest));
        if (!l)
                return -ENOMEM;
        r = read_filter(m, l, error);
        if (r < 0)
                return r;
        if (!the_recorder)
                return sd_bus_error_set(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                        "Recording is off (Record=no in sandboxd.conf).");

        return bus_authorize_then(m, sandbox_list_action, BUS_AUTHORIZE_OPTIONAL, list_executions_authorized,
                                  TAKE_PTR(l), list_request_destroy);
}
