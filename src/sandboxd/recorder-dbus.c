/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "bus-util.h"
#include "log.h"
#include "recorder-dbus.h"
#include "sandbox-dbus.h"

/* ListExecutions, while its query runs. */
typedef struct ListExecutionsRequest {
        BusFrontend *frontend;
        sd_bus_message *call;   /* once the query runs */
        ExecutionQuery query;
        bool ex;                /* ListExecutionsEx */
} ListExecutionsRequest;

static ListExecutionsRequest *list_request_free(ListExecutionsRequest *l) {
        if (!l)
                return NULL;
        sd_bus_message_unref(l->call);
        execution_query_done(&l->query);
        free(l);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ListExecutionsRequest *, list_request_free);

static void list_request_destroy(void *userdata) {
        list_request_free(userdata);
}

static int append_execution(sd_bus_message *m, const ExecutionRecord *e, bool ex) {
        int r;

        r = sd_bus_message_open_container(m, 'r', ex ? "stuuassttiiibbtttttstt" : "stuuassttiiibbttttt");
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
        if (r >= 0 && ex)
                r = sd_bus_message_append(m, "stt", strempty(e->tenant),
                                          e->disk_known ? e->disk_bytes_used : UINT64_MAX,
                                          e->disk_known ? e->disk_bytes_max : UINT64_MAX);
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
                r = sd_bus_message_open_container(reply, 'a', l->ex ? RECORDER_EXECUTION_EX_SIGNATURE :
                                                                      RECORDER_EXECUTION_SIGNATURE);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = append_execution(reply, &records[i], l->ex);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0) {
                log_warning_errno(r, "Failed to answer ListExecutions: %m");
                (void) sd_bus_reply_method_errno(l->call, r, NULL);
        }
}

/* What the caller sees is the core's rule (execution_query_authorize()); the spool is read
 * off the event loop, and on_executions_listed() answers. */
static int list_executions_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                      SandboxError *error) {
        _cleanup_(list_request_freep) ListExecutionsRequest *q = NULL;
        ListExecutionsRequest *l = userdata;
        int r;

        /* The query outlives this call (l is freed when it returns): it takes l's query. */
        q = calloc(1, sizeof(ListExecutionsRequest));
        if (!q)
                return -ENOMEM;
        q->call = sd_bus_message_ref(call);
        q->ex = l->ex;
        q->query = l->query;
        l->query = (ExecutionQuery) {};
        execution_query_authorize(&q->query, caller);
        r = recorder_query_executions(l->frontend->recorder, &q->query, on_executions_listed, q, error);
        if (r < 0)
                return r;
        TAKE_PTR(q);
        return 1;
}

static int list_executions(sd_bus_message *m, BusFrontend *f, bool ex, sd_bus_error *error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_(list_request_freep) ListExecutionsRequest *l = NULL;
        int r;

        l = calloc(1, sizeof(ListExecutionsRequest));
        if (!l)
                return -ENOMEM;
        l->frontend = f;
        l->ex = ex;
        r = bus_read_options(m, OPTION_SET_EXECUTIONS, &l->query, &e);
        if (r >= 0)
                r = recorder_check_enabled(f->recorder, &e);
        if (r < 0)
                return bus_error_return(error, &e, r);

        return bus_authorize_then(m, bus_list_access, SANDBOX_AUTHORIZE_OPTIONAL, list_executions_authorized,
                                  TAKE_PTR(l), list_request_destroy);
}

int method_list_executions(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return list_executions(m, userdata, false, error);
}

int method_list_executions_ex(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return list_executions(m, userdata, true, error);
}
