/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What is there to see, on varlink: GetLogs (the core's entries as replies, streamed with
 * "more"), GetMetrics, ListPools and GetStatistics. Translation only, as observe-dbus.c:
 * the reading, the bounds and the rules are the core's (sandbox-logs.h, sandbox-metrics.h,
 * pool-status.h, statistics.h). */

#include <stddef.h>

#include "json-util.h"
#include "log-entry-json.h"
#include "log.h"
#include "pool-status.h"
#include "sandbox-metrics.h"
#include "sandbox-varlink.h"
#include "statistics.h"

/* ---- GetLogs ---- */

/* Entries gathered for one "continues" reply: sent when this much is gathered, or when
 * the loop has nothing else to do (a burst of entries goes out in few replies). */
#define LOG_BATCH_BYTES_MAX (64U * 1024U)

typedef struct LogCall {
        VarlinkCall *call;
        LogReader *reader;          /* NULL once it ended */
        json_object *batch;         /* entries not sent yet */
        size_t batch_bytes;
        sd_event_source *flush;     /* sends the batch, after this turn of the loop */
        bool more;
        bool paused;                /* the peer has not read enough: the reader waits */
} LogCall;

static void log_call_free(LogCall *l) {
        if (!l)
                return;
        log_reader_free(l->reader);
        sd_event_source_disable_unref(l->flush);
        json_object_put(l->batch);
        if (l->call)
                varlink_call_set_drained_callback(l->call, NULL, NULL);
        varlink_call_release(l->call);
        free(l);
}

/* Replies what is gathered: a "continues" reply, or with last the final one. */
static int log_call_send(LogCall *l, bool last) {
        _cleanup_json_ json_object *p = json_object_new_object(), *entries = TAKE_PTR(l->batch);
        int r;

        l->batch_bytes = 0;
        if (!entries)
                entries = json_object_new_array();
        if (!p || !entries)
                return -ENOMEM;
        r = json_add(p, "entries", TAKE_PTR(entries));
        if (r < 0)
                return r;
        return last ? varlink_reply_or_fail(l->call, p) : varlink_call_notify(l->call, p);
}

/* With "more": sends the batch; asks the reader to wait while the peer is behind. 0, 1
 * (paused) or a negative errno (the peer is gone). */
static int log_call_flush(LogCall *l) {
        int r;

        (void) sd_event_source_set_enabled(l->flush, SD_EVENT_OFF);
        if (l->batch && json_object_array_length(l->batch) > 0) {
                r = log_call_send(l, false);
                if (r < 0)
                        return r;
        }
        l->paused = varlink_call_get_pending_output(l->call) > VARLINK_RELAY_PENDING_MAX;
        return l->paused;
}

static int on_log_flush(sd_event_source *source, void *userdata) {
        LogCall *l = userdata;
        int r;

        r = log_call_flush(l);
        if (r < 0)
                /* The peer is gone (its disconnect callback follows) or the reply could not
                 * be made: the reader ends here. */
                l->reader = log_reader_free(l->reader);
        return 0;
}

static int on_log_entry(LogReader *reader, const SandboxLogEntry *e, void *userdata) {
        LogCall *l = userdata;
        json_object *o;
        int r;

        r = log_entry_to_json(e, LOG_ENTRY_BYTES_BASE64, &o);
        if (r < 0)
                return r;
        if (!l->batch) {
                l->batch = json_object_new_array();
                if (!l->batch) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        if (json_object_array_add(l->batch, o) < 0) {
                json_object_put(o);
                return -ENOMEM;
        }
        /* What the entry takes in a message, about: base64 of the message and the rest. */
        l->batch_bytes += e->message_size / 3 * 4 + strlen(e->identifier) + 128;

        if (!l->more)
                /* One reply: it must fit in a message. */
                return l->batch_bytes > SANDBOX_VARLINK_MESSAGE_SIZE_MAX ? -EMSGSIZE : 0;
        if (l->batch_bytes >= LOG_BATCH_BYTES_MAX)
                return log_call_flush(l);
        (void) sd_event_source_set_enabled(l->flush, SD_EVENT_ONESHOT);
        return 0;
}

static void on_log_end(LogReader *reader, int error, void *userdata) {
        LogCall *l = userdata;

        l->reader = NULL;
        /* sandboxd is stopping: no answer; the connection closes with it. */
        if (error == -ECANCELED)
                ;
        else if (error == -EMSGSIZE)
                (void) varlink_reply_error(l->call, NULL, -EMSGSIZE);
        else if (error < 0 && error != -ECONNRESET && error != -ENOBUFS)
                (void) varlink_reply_error(l->call, NULL, error);
        else if (error >= 0 && log_call_send(l, true) == -ENOMEM)
                (void) varlink_reply_error(l->call, NULL, -ENOMEM);
        log_call_free(l);
}

static void on_log_drained(VarlinkCall *call, void *userdata) {
        LogCall *l = userdata;

        if (!l->paused || !l->reader)
                return;
        l->paused = false;
        if (log_reader_resume(l->reader) < 0)
                l->reader = log_reader_free(l->reader);
}

static void on_log_disconnect(VarlinkCall *call, void *userdata) {
        log_call_free(userdata);
}

static int get_logs_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                               SandboxError *error) {
        LogCall *l;
        int r;

        l = calloc(1, sizeof(LogCall));
        if (!l)
                return -ENOMEM;
        l->call = varlink_call_ref(call);
        l->more = varlink_call_get_flags(call) & VARLINK_CALL_MORE;
        r = sd_event_add_defer(req->frontend->event, &l->flush, on_log_flush, l);
        if (r >= 0)
                r = sd_event_source_set_enabled(l->flush, SD_EVENT_OFF);
        if (r >= 0)
                r = sandbox_logs_open(s, caller->uid, req->args.lines, req->args.follow, on_log_entry, on_log_end, l,
                                      &l->reader, error);
        if (r < 0) {
                log_call_free(l);
                return r;
        }
        varlink_call_set_disconnect_callback(call, on_log_disconnect, l);
        if (l->more)
                varlink_call_set_drained_callback(call, on_log_drained, l);
        return 0;
}

#define ARG(field) offsetof(SandboxArgs, field)

static const VarlinkParam get_logs_params[] = {
        { "id",     VARLINK_PARAM_STRING, ARG(id), true },
        { "lines",  VARLINK_PARAM_UINT32, ARG(lines)    },
        { "follow", VARLINK_PARAM_BOOL,   ARG(follow)   },
        {}
};

static int method_get_logs(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        json_object *follow;

        /* Following has no end but the sandbox's: only replies that continue can carry it. */
        if (!(flags & VARLINK_CALL_MORE) && json_object_object_get_ex(parameters, "follow", &follow) &&
            json_object_is_type(follow, json_type_boolean) && json_object_get_boolean(follow)) {
                (void) varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
                return 0;
        }
        return sandbox_varlink_method(userdata, call, parameters, get_logs_params, NULL,
                                      get_logs_authorized);
}

/* ---- GetMetrics ---- */

static int get_metrics_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxVarlinkRequest *req, SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object();
        SandboxMetricField fields[SANDBOX_N_METRICS];
        SandboxMetrics metrics;
        int r;

        if (!p || !o)
                return -ENOMEM;
        r = sandbox_get_metrics(s, &metrics, error);
        if (r < 0)
                return r;

        sandbox_metrics_fields(&metrics, fields);
        /* What could not be had is left out. */
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields); i++)
                if (fields[i].value != SANDBOX_METRIC_UNKNOWN)
                        r = json_add(o, fields[i].varlink, json_object_new_uint64(fields[i].value));
        if (r >= 0)
                r = json_add(p, "metrics", TAKE_PTR(o));
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, p);
        return 0;
}

static const VarlinkParam get_metrics_params[] = {
        { "id", VARLINK_PARAM_STRING, ARG(id), true },
        {}
};

static int method_get_metrics(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, get_metrics_params, NULL,
                                      get_metrics_authorized);
}

/* ---- ListPools, GetStatistics ---- */

static json_object *pool_to_json(const PoolStatus *p) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "template", json_object_new_string(p->template_name)) < 0 ||
            json_add(o, "size", json_object_new_uint64(p->size)) < 0 ||
            json_add(o, "ready", json_object_new_uint64(p->ready)) < 0 ||
            json_add(o, "starting", json_object_new_uint64(p->starting)) < 0 ||
            json_add(o, "inUse", json_object_new_uint64(p->in_use)) < 0 ||
            json_add(o, "recycle", json_object_new_boolean(p->recycle)) < 0 ||
            json_add(o, "recycled", json_object_new_uint64(p->recycled)) < 0 ||
            json_add(o, "resetting", json_object_new_uint64(p->resetting)) < 0 ||
            json_add(o, "waiting", json_object_new_uint64(p->waiting)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static json_object *pools_to_json(const PoolStatus *pools, size_t n) {
        _cleanup_json_ json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++) {
                json_object *o = pool_to_json(&pools[i]);

                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return NULL;
                }
        }
        return TAKE_PTR(a);
}

/* GetPool */
typedef struct PoolArgs {
        VarlinkFrontend *frontend;
        char *template;
} PoolArgs;

static void pool_args_free(void *userdata) {
        PoolArgs *a = userdata;

        free(a->template);
        free(a);
}

static int get_pool_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                               SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object();
        PoolArgs *a = userdata;
        PoolStatus st;
        int r;

        if (!p)
                return -ENOMEM;
        r = manager_pool_status_of(a->frontend->manager, a->template, caller, &st, error);
        if (r < 0)
                return r;
        r = json_add(p, "pool", pool_to_json(&st));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static const VarlinkParam pool_params[] = {
        { "template", VARLINK_PARAM_STRING, offsetof(PoolArgs, template), true },
        {}
};

static int method_get_pool(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        VarlinkFrontend *f = userdata;
        PoolArgs *a = calloc(1, sizeof(PoolArgs));

        if (a)
                a->frontend = f;
        return varlink_read_authorize_then(f->bus, call, parameters, pool_params, a, pool_args_free,
                                           varlink_list_access, SANDBOX_AUTHORIZE_OPTIONAL, get_pool_authorized);
}

/* Without "manage" (asked without interaction, like ListSandboxes), inUse counts the
 * caller's own sandboxes only. */
static int list_pools_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                 SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object();
        _cleanup_free_ PoolStatus *pools = NULL;
        VarlinkFrontend *f = userdata;
        size_t n;
        int r;

        if (!p)
                return -ENOMEM;
        r = manager_pool_status(f->manager, caller, &pools, &n);
        if (r >= 0)
                r = json_add(p, "pools", pools_to_json(pools, n));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static json_object *histogram_to_json(const Histogram *h) {
        _cleanup_json_ json_object *o = json_object_new_object(), *bounds = json_object_new_array(),
                                   *counts = json_object_new_array();

        if (!o || !bounds || !counts)
                return NULL;
        for (size_t i = 0; i < h->n; i++)
                if (json_object_array_add(bounds, json_object_new_double(h->bounds[i])) < 0 ||
                    json_object_array_add(counts, json_object_new_uint64(histogram_cumulative(h, i))) < 0)
                        return NULL;
        if (json_add(o, "bounds", TAKE_PTR(bounds)) < 0 ||
            json_add(o, "counts", TAKE_PTR(counts)) < 0 ||
            json_add(o, "count", json_object_new_uint64(h->count)) < 0 ||
            json_add(o, "sum", json_object_new_double(h->sum)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static json_object *sandbox_counts_to_json(const SandboxCount *c, size_t n) {
        _cleanup_json_ json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++) {
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o ||
                    json_add(o, "state", json_object_new_string(c[i].state)) < 0 ||
                    json_add(o, "template", json_object_new_string(c[i].template_name)) < 0 ||
                    json_add(o, "count", json_object_new_uint64(c[i].count)) < 0 ||
                    json_object_array_add(a, o) < 0)
                        return NULL;
                TAKE_PTR(o);
        }
        return TAKE_PTR(a);
}

static json_object *statistics_to_json(const StatisticsReport *st) {
        _cleanup_json_ json_object *o = json_object_new_object();
        StatisticsCounter counters[STATISTICS_N_COUNTERS];

        if (!o)
                return NULL;
        statistics_counters(st->counters, counters);
        for (size_t i = 0; i < ELEMENTSOF(counters); i++)
                if (json_add(o, counters[i].varlink, json_object_new_uint64(counters[i].value)) < 0)
                        return NULL;
        if (json_add(o, "sandboxes", sandbox_counts_to_json(st->sandboxes, st->n_sandboxes)) < 0 ||
            json_add(o, "execLatency", histogram_to_json(&st->counters->exec_latency)) < 0 ||
            json_add(o, "pools", pools_to_json(st->pools, st->n_pools)) < 0 ||
            json_add(o, "spoolBacklog", json_object_new_uint64(st->spool_backlog)) < 0 ||
            json_add(o, "workspaceBytesUsed", json_object_new_uint64(st->workspace_bytes_used)) < 0 ||
            json_add(o, "workspaceBytesMax", json_object_new_uint64(st->workspace_bytes_max)) < 0 ||
            json_add(o, "workspacePoolBytes", json_object_new_uint64(st->pool_bytes)) < 0 ||
            json_add(o, "workspacePoolBytesFree", json_object_new_uint64(st->pool_bytes_free)) < 0)
                return NULL;
        if (!st->tenant &&
            (json_add(o, "sandboxesMax", json_object_new_uint64(st->sandboxes_max)) < 0 ||
             json_add(o, "sandboxesLive", json_object_new_uint64(st->sandboxes_live)) < 0 ||
             json_add(o, "node", json_object_new_uint64(st->node)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

static int statistics_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                             const char **ret_tenant, SandboxError *error) {
        return 0;
}

static int get_statistics_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_(statistics_report_done) StatisticsReport st = {};
        _cleanup_json_ json_object *p = json_object_new_object();
        VarlinkFrontend *f = userdata;
        int r;

        if (!p)
                return -ENOMEM;
        r = statistics_report(f->manager, caller->tenant, recorder_spool_backlog(f->recorder), &st);
        if (r >= 0)
                r = json_add(p, "statistics", statistics_to_json(&st));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static int method_manager_call(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        static const VarlinkParam no_params[] = { {} };
        bool pools = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".ListPools");
        VarlinkFrontend *f = userdata;

        return pools ? varlink_read_authorize_then(f->bus, call, parameters, no_params, f, NULL, varlink_list_access,
                                                   SANDBOX_AUTHORIZE_OPTIONAL, list_pools_authorized)
                     : varlink_read_authorize_then(f->bus, call, parameters, no_params, f, NULL, statistics_access, 0,
                                                   get_statistics_authorized);
}

int observe_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "GetLogs",       method_get_logs     },
                { "GetMetrics",    method_get_metrics  },
                { "ListPools",     method_manager_call },
                { "GetPool",       method_get_pool     },
                { "GetStatistics", method_manager_call },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
