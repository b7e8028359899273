/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <signal.h>
#include <stdarg.h>

#include "list.h"
#include "scope.h"
#include "strv.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define SYSTEMD_CALL_TIMEOUT_USEC (25ULL * 1000000ULL)
#define EARLY_JOBS_MAX 16

typedef enum CallKind {
        CALL_START,
        CALL_STOP,
        CALL_CONTROL_GROUP,
        CALL_ATTACH,
        CALL_SIMPLE,
} CallKind;

/* One operation in flight: first the method call, then (for jobs) the wait for its
 * JobRemoved. */
typedef struct PendingCall PendingCall;
struct PendingCall {
        SystemdClient *client;
        CallKind kind;
        sd_bus_slot *slot;
        char *job;             /* set once systemd queued the job */
        ScopeParams params;    /* CALL_START, for a retry */
        char *unit;
        uint32_t pids[4];
        size_t n_pids;
        bool drop_oom_policy;
        systemd_job_callback_t cb;
        void *userdata;
        PendingCall *next, *prev;
};

/* A JobRemoved whose job no call knows yet. */
typedef struct EarlyJob {
        char *job;
        char *result;
} EarlyJob;

struct SystemdClient {
        sd_bus *bus;
        sd_bus_slot *job_removed_slot;
        sd_bus_slot *disconnected_slot;
        PendingCall *calls;
        /* Kept while a call waits for the reply naming its job: nothing in the protocol
         * says that reply comes before the job's JobRemoved. */
        EarlyJob early[EARLY_JOBS_MAX];
        size_t n_early;
};

static void pending_call_unlink_free(PendingCall *p) {
        if (!p)
                return;
        LIST_REMOVE(p->client->calls, p);
        sd_bus_slot_unref(p->slot);
        free(p->job);
        free(p->unit);
        free(p);
}

static void pending_call_finish(PendingCall *p, const char *result, const sd_bus_error *error) {
        systemd_job_callback_t cb = p->cb;
        void *userdata = p->userdata;

        /* Free first: the callback may start new calls or free its owner. */
        pending_call_unlink_free(p);
        cb(result, error, userdata);
}

static void early_jobs_clear(SystemdClient *c) {
        while (c->n_early > 0) {
                c->n_early--;
                free(c->early[c->n_early].job);
                free(c->early[c->n_early].result);
        }
}

/* The result of job, if its JobRemoved came before the reply naming it; the caller frees it. */
static char *early_job_take(SystemdClient *c, const char *job) {
        for (size_t i = 0; i < c->n_early; i++)
                if (streq(c->early[i].job, job)) {
                        char *result = c->early[i].result;

                        free(c->early[i].job);
                        c->early[i] = c->early[--c->n_early];
                        return result;
                }
        return NULL;
}

static bool awaiting_job(SystemdClient *c) {
        for (PendingCall *p = c->calls; p; p = p->next)
                if ((p->kind == CALL_START || p->kind == CALL_STOP) && !p->job)
                        return true;
        return false;
}

static void early_job_add(SystemdClient *c, const char *job, const char *result) {
        EarlyJob e = { .job = strdup(job), .result = strdup(result) };

        if (!e.job || !e.result) {
                free(e.job);
                free(e.result);
                return;
        }
        if (c->n_early == EARLY_JOBS_MAX) {
                /* The oldest goes: a reply is not that late. */
                free(c->early[0].job);
                free(c->early[0].result);
                memmove(c->early, c->early + 1, (EARLY_JOBS_MAX - 1) * sizeof(EarlyJob));
                c->n_early--;
        }
        c->early[c->n_early++] = e;
}

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SystemdClient *c = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        int r;

        r = sd_bus_message_read(m, "uoss", &id, &path, &unit, &result);
        if (r < 0)
                return 0;
        for (PendingCall *p = c->calls; p; p = p->next)
                if (p->job && streq(p->job, path)) {
                        pending_call_finish(p, result, NULL);
                        return 0;
                }
        /* Perhaps a job whose reply is still to come; kept only while one is. */
        if (awaiting_job(c))
                early_job_add(c, path, result);
        else
                early_jobs_clear(c);
        return 0;
}

/* sd-bus fails the calls still waiting for a reply when the connection goes; a job's
 * JobRemoved will not come either, so its call fails the same way. */
static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SystemdClient *c = userdata;
        const sd_bus_error error = SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_NO_REPLY, "Connection terminated");

        /* One at a time from the head: a callback may cancel others. */
        while (c->calls)
                pending_call_finish(c->calls, NULL, &error);
        return 0;
}

int systemd_client_new(sd_bus *bus, SystemdClient **ret) {
        SystemdClient *c;
        int r;

        c = calloc(1, sizeof(SystemdClient));
        if (!c)
                return -ENOMEM;
        c->bus = sd_bus_ref(bus);

        /* Match before any job is queued, so no JobRemoved can slip past. */
        r = sd_bus_match_signal_async(bus, &c->job_removed_slot, SYSTEMD_DEST, SYSTEMD_PATH,
                                      SYSTEMD_MANAGER, "JobRemoved", on_job_removed, NULL, c);
        if (r < 0)
                goto fail;
        /* Synthesized by sd-bus itself: nothing is asked of the bus daemon. */
        r = sd_bus_match_signal_async(bus, &c->disconnected_slot, "org.freedesktop.DBus.Local",
                                      "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local",
                                      "Disconnected", on_disconnected, NULL, c);
        if (r < 0)
                goto fail;
        /* No Subscribe: systemd sends a job's JobNew and JobRemoved to the client that
         * queued it (it tracks the caller of StartTransientUnit and StopUnit) without one.
         * A subscriber gets every unit's UnitNew, UnitRemoved and PropertiesChanged too —
         * serialized by systemd and routed by the bus daemon for each state change of each
         * scope — none of which sandboxd reads. */

        *ret = c;
        return 0;
fail:
        systemd_client_free(c);
        return r;
}

SystemdClient *systemd_client_free(SystemdClient *c) {
        if (!c)
                return NULL;
        while (c->calls)
                pending_call_unlink_free(c->calls);
        early_jobs_clear(c);
        sd_bus_slot_unref(c->job_removed_slot);
        sd_bus_slot_unref(c->disconnected_slot);
        sd_bus_unref(c->bus);
        return mfree(c);
}

void systemd_client_cancel(SystemdClient *c, void *userdata) {
        for (PendingCall *p = c->calls, *n; p; p = n) {
                n = p->next;
                if (p->userdata == userdata)
                        pending_call_unlink_free(p);
        }
}

static PendingCall *pending_call_new(SystemdClient *c, CallKind kind, const char *unit,
                                     systemd_job_callback_t cb, void *userdata) {
        PendingCall *p = calloc(1, sizeof(PendingCall));
        if (!p)
                return NULL;
        p->unit = strdup(unit);
        if (!p->unit)
                return mfree(p);
        p->client = c;
        p->kind = kind;
        p->cb = cb;
        p->userdata = userdata;
        LIST_PREPEND(c->calls, p);
        return p;
}

static int on_job_queued(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error);

/* Sends m for a new pending call; the call is forgotten again if it cannot be sent. */
static int pending_call_send(SystemdClient *c, CallKind kind, const char *unit, sd_bus_message *m,
                             sd_bus_message_handler_t handler, systemd_job_callback_t cb, void *userdata) {
        PendingCall *p;
        int r;

        p = pending_call_new(c, kind, unit, cb, userdata);
        if (!p)
                return -ENOMEM;
        r = sd_bus_call_async(c->bus, &p->slot, m, handler, p, SYSTEMD_CALL_TIMEOUT_USEC);
        if (r < 0)
                pending_call_unlink_free(p);
        return r;
}

static int append_property(sd_bus_message *m, const char *name, const char *type, ...) {
        va_list ap;
        int r;

        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", name);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'v', type);
        if (r < 0)
                return r;
        va_start(ap, type);
        r = sd_bus_message_appendv(m, type, ap);
        va_end(ap);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int scope_send_start(PendingCall *p) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const ScopeParams *s = &p->params;
        int r;

        r = sd_bus_message_new_method_call(p->client->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH,
                                           SYSTEMD_MANAGER, "StartTransientUnit");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", p->unit, "fail");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;

        bool is_slice = strlen(p->unit) > 6 && streq(p->unit + strlen(p->unit) - 6, ".slice");

        if (r >= 0)
                r = append_property(m, "Description", "s", s->description);
        if (r >= 0 && s->slice)
                r = append_property(m, "Slice", "s", s->slice);
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_append(m, "s", "PIDs");
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_open_container(m, 'v', "au");
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_append_array(m, 'u', p->pids, sizeof(uint32_t) * p->n_pids);
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0 && p->n_pids > 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = append_property(m, "MemoryAccounting", "b", 1);
        if (r >= 0)
                r = append_property(m, "MemoryMax", "t", s->limits.memory_max);
        /* MemoryMax= alone leaves swap unlimited on cgroup v2: a sandbox would go on
         * allocating into the host's swap instead of being OOM-killed at its limit. (v1 has
         * no unit property for memsw; sandboxd(8) says so.) */
        if (r >= 0)
                r = append_property(m, "MemorySwapMax", "t", UINT64_C(0));
        if (r >= 0)
                r = append_property(m, "CPUAccounting", "b", 1);
        if (r >= 0)
                r = append_property(m, "CPUQuotaPerSecUSec", "t", s->limits.cpu_quota_per_sec_usec);
        if (r >= 0)
                r = append_property(m, "TasksAccounting", "b", 1);
        if (r >= 0)
                r = append_property(m, "TasksMax", "t", s->limits.tasks_max);
        if (!is_slice) {
                /* Delegated: the payload's second process joins after the start
                 * (AttachProcessesToUnit), and a container runtime may nest cgroups here. The
                 * sandbox itself never sees cgroupfs (own cgroup namespace, nothing mounted). */
                if (r >= 0)
                        r = append_property(m, "Delegate", "b", 1);
                /* Untrusted code gets no grace period on stop. */
                if (r >= 0)
                        r = append_property(m, "KillSignal", "i", SIGKILL);
                if (r >= 0)
                        r = append_property(m, "SendSIGHUP", "b", 0);
        }
        /* A sandbox whose code ended badly must not linger as a failed unit. */
        if (r >= 0)
                r = append_property(m, "CollectMode", "s", "inactive-or-failed");
        /* An OOM kill of one exec must not stop a persistent sandbox (systemd ≥ 253
         * knows OOMPolicy= for scopes; older ones refuse it and we retry without). */
        if (r >= 0 && !p->drop_oom_policy && !is_slice)
                r = append_property(m, "OOMPolicy", "s", "continue");
        if (r < 0)
                return r;

        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                return r;

        p->slot = sd_bus_slot_unref(p->slot);
        return sd_bus_call_async(p->client->bus, &p->slot, m, on_job_queued, p, SYSTEMD_CALL_TIMEOUT_USEC);
}

static int on_job_queued(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PendingCall *p = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *job;
        int r;

        p->slot = sd_bus_slot_unref(p->slot);

        if (e) {
                if (p->kind == CALL_START && !p->drop_oom_policy &&
                    sd_bus_error_has_names(e, SD_BUS_ERROR_PROPERTY_READ_ONLY, SD_BUS_ERROR_INVALID_ARGS) &&
                    e->message && strstr(e->message, "OOMPolicy")) {
                        p->drop_oom_policy = true;
                        r = scope_send_start(p);
                        if (r >= 0)
                                return 0;
                        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                        sd_bus_error_set_errno(&error, r);
                        pending_call_finish(p, NULL, &error);
                        return 0;
                }
                if (p->kind == CALL_STOP && sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchUnit")) {
                        pending_call_finish(p, "done", NULL);
                        return 0;
                }
                pending_call_finish(p, NULL, e);
                return 0;
        }

        r = sd_bus_message_read(reply, "o", &job);
        if (r >= 0) {
                p->job = strdup(job);
                if (!p->job)
                        r = -ENOMEM;
        }
        if (r < 0) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                sd_bus_error_set_errno(&error, r);
                pending_call_finish(p, NULL, &error);
                return 0;
        }
        /* Its JobRemoved may have come first. */
        _cleanup_free_ char *result = early_job_take(p->client, p->job);
        if (result)
                pending_call_finish(p, result, NULL);
        return 0;
}

int scope_start_transient(SystemdClient *c, const ScopeParams *params,
                          systemd_job_callback_t cb, void *userdata) {
        PendingCall *p;
        int r;

        p = pending_call_new(c, CALL_START, params->unit, cb, userdata);
        if (!p)
                return -ENOMEM;
        if (params->n_pids > ELEMENTSOF(p->pids)) {
                pending_call_unlink_free(p);
                return -EINVAL;
        }
        p->params = *params;
        p->params.unit = p->unit;
        for (size_t i = 0; i < params->n_pids; i++)
                p->pids[i] = (uint32_t) params->pids[i];
        p->n_pids = params->n_pids;
        p->params.pids = NULL; /* copied above; the caller's array is gone after return */
        /* slice and description must outlive the call: they belong to the caller's
         * sandbox, which cancels us before it goes away. */
        r = scope_send_start(p);
        if (r < 0)
                pending_call_unlink_free(p);
        return r;
}

int unit_stop(SystemdClient *c, const char *unit, systemd_job_callback_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "StopUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "replace");
        if (r < 0)
                return r;
        return pending_call_send(c, CALL_STOP, unit, m, on_job_queued, cb, userdata);
}

/* For methods that do their work before replying (no job to wait for). */
static int on_simple_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PendingCall *p = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        pending_call_finish(p, e ? NULL : "done", e);
        return 0;
}

int unit_attach_processes(SystemdClient *c, const char *unit, const pid_t *pids, size_t n_pids,
                          systemd_job_callback_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           "AttachProcessesToUnit");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", unit, "");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "u");
        for (size_t i = 0; r >= 0 && i < n_pids; i++)
                r = sd_bus_message_append(m, "u", (uint32_t) pids[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;

        return pending_call_send(c, CALL_ATTACH, unit, m, on_simple_reply, cb, userdata);
}

static int unit_call_simple(SystemdClient *c, const char *unit, const char *method, const char *types,
                            systemd_job_callback_t cb, void *userdata, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, method);
        if (r < 0)
                return r;
        va_start(ap, userdata);
        r = sd_bus_message_appendv(m, types, ap);
        va_end(ap);
        if (r < 0)
                return r;
        return pending_call_send(c, CALL_SIMPLE, unit, m, on_simple_reply, cb, userdata);
}

int unit_freeze(SystemdClient *c, const char *unit, bool freeze, systemd_job_callback_t cb, void *userdata) {
        return unit_call_simple(c, unit, freeze ? "FreezeUnit" : "ThawUnit", "s", cb, userdata, unit);
}

int unit_kill(SystemdClient *c, const char *unit, int signo, systemd_job_callback_t cb, void *userdata) {
        return unit_call_simple(c, unit, "KillUnit", "ssi", cb, userdata, unit, "all", signo);
}

int unit_set_limits(SystemdClient *c, const char *unit, uint64_t memory_max, uint64_t tasks_max,
                    uint64_t cpu_weight, systemd_job_callback_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           "SetUnitProperties");
        if (r < 0)
                return r;
        /* runtime: the unit file stays the administrator's; sandboxd sets them at each start. */
        r = sd_bus_message_append(m, "sb", unit, true);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_property(m, "MemoryAccounting", "b", true);
        if (r >= 0)
                r = append_property(m, "TasksAccounting", "b", true);
        if (r >= 0)
                r = append_property(m, "MemoryMax", "t", memory_max);
        if (r >= 0)
                r = append_property(m, "TasksMax", "t", tasks_max);
        if (r >= 0)
                r = append_property(m, "CPUWeight", "t", cpu_weight);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return pending_call_send(c, CALL_SIMPLE, unit, m, on_simple_reply, cb, userdata);
}

int unit_set_description(SystemdClient *c, const char *unit, const char *description, systemd_job_callback_t cb,
                         void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           "SetUnitProperties");
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", unit, true);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_property(m, "Description", "s", description);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return pending_call_send(c, CALL_SIMPLE, unit, m, on_simple_reply, cb, userdata);
}

static int on_control_group(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PendingCall *p = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *cg = NULL;
        const char *s;
        int r;

        if (e) {
                pending_call_finish(p, NULL, e);
                return 0;
        }
        r = sd_bus_message_read(reply, "v", "s", &s);
        if (r >= 0 && !(cg = strdup(s)))
                r = -ENOMEM;
        if (r < 0) {
                sd_bus_error_set_errno(&error, r);
                pending_call_finish(p, NULL, &error);
                return 0;
        }
        pending_call_finish(p, cg, NULL);
        return 0;
}

int unit_get_control_group(SystemdClient *c, const char *unit, systemd_job_callback_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_free_ char *path = NULL;
        size_t n = strlen(unit);
        int r;

        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_call(c->bus, &m, SYSTEMD_DEST, path, "org.freedesktop.DBus.Properties", "Get");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss",
                                          n > 6 && streq(unit + n - 6, ".slice") ? "org.freedesktop.systemd1.Slice" :
                                                                                    "org.freedesktop.systemd1.Scope",
                                          "ControlGroup");
        if (r < 0)
                return r;
        return pending_call_send(c, CALL_CONTROL_GROUP, unit, m, on_control_group, cb, userdata);
}
