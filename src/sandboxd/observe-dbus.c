/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What is there to see of sandboxes, on D-Bus: Sandbox.GetLogs (the core's entries as
 * JSON lines on a pipe), Sandbox.GetMetrics, Manager.ListPools and Manager.GetStatistics. Translation only: the
 * reading, the bounds and the rules are the core's (sandbox-logs.h, sandbox-metrics.h,
 * pool-status.h). */

#include <fcntl.h>
#include <sys/epoll.h>

#include "bus-util.h"
#include "json-util.h"
#include "log.h"
#include "log-entry-json.h"
#include "parse-util.h"
#include "pool-status.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"
#include "sandbox-logs.h"
#include "sandbox-metrics.h"
#include "statistics.h"

/* One GetLogs caller: the core's reader feeds lines into the pipe it was given. When the
 * pipe is full the reader is paused until it has taken what is left, so that the end
 * (which the reader reports only while it runs) never finds lines still to be written. */
typedef struct LogStream {
        LogReader *reader;
        int fd;                 /* the pipe's write end, non-blocking */
        sd_event_source *source;
        char *buf;              /* what the pipe did not take yet: buf[offset…size) */
        size_t size, offset, allocated;
        bool paused;
} LogStream;

static LogStream *log_stream_free(LogStream *l) {
        if (!l)
                return NULL;
        log_reader_free(l->reader);
        sd_event_source_disable_unref(l->source);
        safe_close(l->fd);
        free(l->buf);
        return mfree(l);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(LogStream *, log_stream_free);

/* One entry as a line: {"timestamp":µs,"priority":N,"identifier":"…","message":"…"} with
 * the message as an array of byte values when it is not valid UTF-8 (as journalctl -o
 * json does), "truncated":true when it was cut (sandboxd-api(7)). */
static int log_entry_to_line(const SandboxLogEntry *e, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *o = NULL;
        const char *s;
        size_t l;
        int r;

        r = log_entry_to_json(e, LOG_ENTRY_BYTES_ARRAY, &o);
        if (r < 0)
                return r;

        s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &l);
        if (!s)
                return -ENOMEM;
        *ret = malloc(l + 1);
        if (!*ret)
                return -ENOMEM;
        memcpy(*ret, s, l);
        (*ret)[l] = '\n';
        *ret_size = l + 1;
        return 0;
}

/* Writes what the pipe takes: 0 when all is out, 1 when some is left, -EPIPE when the
 * caller closed its end. */
static int log_stream_flush(LogStream *l) {
        while (l->offset < l->size) {
                ssize_t n = write(l->fd, l->buf + l->offset, l->size - l->offset);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                l->offset += (size_t) n;
        }
        if (l->offset < l->size)
                return sd_event_source_set_io_events(l->source, EPOLLOUT) < 0 ? -EIO : 1;
        l->offset = l->size = 0;
        return sd_event_source_set_io_events(l->source, 0) < 0 ? -EIO : 0;
}

static int on_log_entry(LogReader *reader, const SandboxLogEntry *e, void *userdata) {
        LogStream *l = userdata;
        _cleanup_free_ char *line = NULL;
        size_t n;
        int r;

        r = log_entry_to_line(e, &line, &n);
        if (r < 0)
                return r;
        if (l->size + n > l->allocated) {
                size_t a = MAX(l->size + n, l->allocated * 2);
                char *b = realloc(l->buf, a);
                if (!b)
                        return -ENOMEM;
                l->buf = b;
                l->allocated = a;
        }
        memcpy(l->buf + l->size, line, n);
        l->size += n;

        r = log_stream_flush(l);
        if (r < 0)
                return r;
        l->paused = r > 0;
        return r;
}

/* All is written (the reader was paused while it was not); closing the pipe is the EOF. */
static void on_log_end(LogReader *reader, int error, void *userdata) {
        LogStream *l = userdata;

        l->reader = NULL;
        if (error < 0 && error != -EPIPE && error != -ECANCELED)
                log_warning_errno(error, "Failed to read the journal for GetLogs: %m");
        log_stream_free(l);
}

static int on_log_pipe(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        LogStream *l = userdata;
        int r = 0;

        if (revents & (EPOLLERR | EPOLLHUP))
                r = -EPIPE;             /* the caller closed its end */
        else if (revents & EPOLLOUT)
                r = log_stream_flush(l);
        if (r == 0 && l->paused) {
                l->paused = false;
                r = log_reader_resume(l->reader);
        }
        if (r < 0)
                log_stream_free(l);
        return 0;
}

/* Arguments are read after the polkit check, from the call itself. */
static int get_logs_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                               SandboxRequest *req, SandboxError *error) {
        _cleanup_(log_stream_freep) LogStream *l = NULL;
        _cleanup_close_pair_ int pipe_fds[2] = { -EBADF, -EBADF };
        uint32_t lines;
        int follow, r;

        r = sd_bus_message_read(call, "ub", &lines, &follow);
        if (r < 0)
                return r;
        if (pipe2(pipe_fds, O_CLOEXEC) < 0 || fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK) < 0)
                return -errno;

        l = calloc(1, sizeof(LogStream));
        if (!l)
                return -ENOMEM;
        l->fd = TAKE_FD(pipe_fds[1]);
        /* No events asked for while nothing waits to be written: a closed read end still
         * shows as EPOLLERR. */
        r = sd_event_add_io(sd_bus_get_event(sd_bus_message_get_bus(call)), &l->source, l->fd, 0, on_log_pipe, l);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(l->source, "get-logs-pipe");

        r = sandbox_logs_open(s, caller->uid, lines, follow, on_log_entry, on_log_end, l, &l->reader, error);
        if (r < 0)
                return r;

        r = sd_bus_reply_method_return(call, "h", pipe_fds[0]);
        if (r < 0)
                return r;
        TAKE_PTR(l);
        return 1;
}

int method_sandbox_get_logs(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, get_logs_authorized, NULL);
}

static int get_metrics_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxRequest *req, SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        SandboxMetricField fields[SANDBOX_N_METRICS];
        SandboxMetrics metrics;
        int r;

        r = sandbox_get_metrics(s, &metrics, error);
        if (r < 0)
                return r;

        sandbox_metrics_fields(&metrics, fields);
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
        /* What could not be had is left out. */
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields); i++)
                if (fields[i].value != SANDBOX_METRIC_UNKNOWN)
                        r = sd_bus_message_append(reply, "{sv}", fields[i].dbus, "t", fields[i].value);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int method_sandbox_get_metrics(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, get_metrics_authorized, NULL);
}

static int append_pools(sd_bus_message *reply, const PoolStatus *pools, size_t n) {
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(suuuu)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "(suuuu)", pools[i].template_name, pools[i].size, pools[i].ready,
                                          pools[i].starting, pools[i].in_use);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* Without "manage" (asked without interaction, like ListSandboxes), in_use counts the
 * caller's own sandboxes only. */
static int list_pools_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                 SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ PoolStatus *pools = NULL;
        size_t n;
        int r;

        BusFrontend *f = userdata;

        r = manager_pool_status(f->manager, caller, &pools, &n);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = append_pools(reply, pools, n);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* GetPool: one template's, as a{sv} (with what ListPools' struct has no room for). */
typedef struct PoolRequest {
        BusFrontend *frontend;
        char *template;
} PoolRequest;

static void pool_request_free(void *userdata) {
        PoolRequest *p = userdata;

        free(p->template);
        free(p);
}

static int get_pool_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                               SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        PoolRequest *req = userdata;
        PoolStatus p = {};
        int r;

        r = manager_pool_status_of(req->frontend->manager, req->template, caller, &p, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "a{sv}", 9,
                                          "Template", "s", p.template_name,
                                          "Size", "u", p.size,
                                          "Ready", "u", p.ready,
                                          "Starting", "u", p.starting,
                                          "InUse", "u", p.in_use,
                                          "Recycle", "b", p.recycle,
                                          "Recycled", "u", p.recycled,
                                          "Resetting", "u", p.resetting,
                                          "Waiting", "u", p.waiting);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int method_get_pool(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        PoolRequest *p;
        const char *template;
        int r;

        r = sd_bus_message_read(m, "s", &template);
        if (r < 0)
                return r;
        p = calloc(1, sizeof(PoolRequest));
        if (!p)
                return -ENOMEM;
        *p = (PoolRequest) { .frontend = userdata, .template = strdup(template) };
        if (!p->template) {
                free(p);
                return -ENOMEM;
        }
        return bus_authorize_then(m, bus_list_access, SANDBOX_AUTHORIZE_OPTIONAL, get_pool_authorized, p,
                                  pool_request_free);
}

int method_list_pools(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, bus_list_access, SANDBOX_AUTHORIZE_OPTIONAL, list_pools_authorized,
                                  userdata, NULL);
}

/* GetStatistics: the core's report (statistics.h) as a{sv}. */
static int append_statistics(sd_bus_message *reply, const StatisticsReport *st) {
        StatisticsCounter counters[STATISTICS_N_COUNTERS];
        const Histogram *h = &st->counters->exec_latency;
        int r;

        statistics_counters(st->counters, counters);
        r = sd_bus_message_open_container(reply, 'a', "{sv}");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(counters); i++)
                r = sd_bus_message_append(reply, "{sv}", counters[i].dbus, "t", counters[i].value);

        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", "Sandboxes");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', "a(sst)");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sst)");
        for (size_t i = 0; r >= 0 && i < st->n_sandboxes; i++)
                r = sd_bus_message_append(reply, "(sst)", st->sandboxes[i].state, st->sandboxes[i].template_name,
                                          st->sandboxes[i].count);
        for (int k = 0; r >= 0 && k < 3; k++)
                r = sd_bus_message_close_container(reply);

        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", "ExecLatencyBuckets");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', "a(dt)");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(dt)");
        for (size_t i = 0; r >= 0 && i < h->n; i++)
                r = sd_bus_message_append(reply, "(dt)", h->bounds[i], histogram_cumulative(h, i));
        for (int k = 0; r >= 0 && k < 3; k++)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "ExecLatencyCount", "t", h->count);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "ExecLatencySum", "d", h->sum);

        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", "Pools");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', "a(suuuu)");
        if (r >= 0)
                r = append_pools(reply, st->pools, st->n_pools);
        for (int k = 0; r >= 0 && k < 2; k++)
                r = sd_bus_message_close_container(reply);

        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "SpoolBacklog", "t", st->spool_backlog);
        if (r >= 0 && !st->tenant)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}", "SandboxesMax", "t", st->sandboxes_max,
                                          "SandboxesLive", "t", st->sandboxes_live, "Node", "u", st->node);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}", "WorkspaceBytesUsed", "t",
                                          st->workspace_bytes_used, "WorkspaceBytesMax", "t", st->workspace_bytes_max,
                                          "WorkspacePoolBytes", "t", st->pool_bytes, "WorkspacePoolBytesFree", "t",
                                          st->pool_bytes_free);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int statistics_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                             const char **ret_tenant, SandboxError *error) {
        return 0;
}

static int get_statistics_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(statistics_report_done) StatisticsReport st = {};
        BusFrontend *f = userdata;
        int r;

        r = statistics_report(f->manager, caller->tenant, recorder_spool_backlog(f->recorder), &st);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = append_statistics(reply, &st);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int method_get_statistics(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, statistics_access, 0, get_statistics_authorized, userdata, NULL);
}
