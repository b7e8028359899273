/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "run-report.h"

#define MIB (UINT64_C(1) << 20)

uint64_t run_profile_peak_memory(const RunProfile *p) {
        return p->recorded && p->memory_peak_bytes > 0 ? p->memory_peak_bytes : p->max_rss_bytes;
}

static json_object *profile_to_json(const RunProfile *p) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "sandboxId", json_object_new_string(p->sandbox_id)) < 0 ||
            json_add(o, "template", json_object_new_string(p->template)) < 0 ||
            json_add(o, "start", json_object_new_string(p->from_pool ? "warm" : "cold")) < 0 ||
            json_add(o, "initUSec", json_object_new_uint64(p->init_usec)) < 0 ||
            json_add(o, "durationUSec", json_object_new_uint64(p->duration_usec)) < 0 ||
            json_add(o, "cpuUSec", json_object_new_uint64(p->cpu_usec)) < 0 ||
            json_add(o, "maxRSSBytes", json_object_new_uint64(p->max_rss_bytes)) < 0 ||
            json_add(o, "peakMemoryBytes", json_object_new_uint64(run_profile_peak_memory(p))) < 0 ||
            json_add(o, "memoryLimitBytes", json_object_new_uint64(p->memory_limit_bytes)) < 0)
                return NULL;
        if (p->recorded &&
            (json_add(o, "sandboxMemoryPeakBytes", json_object_new_uint64(p->memory_peak_bytes)) < 0 ||
             json_add(o, "sandboxCPUUSec", json_object_new_uint64(p->cgroup_cpu_nsec / 1000)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

char *run_report_json(const RunOutcome *o, const char *request_id, const char *function_name,
                      const RunProfile *p) {
        _cleanup_json_ json_object *j = json_object_new_object();
        const char *text;
        char *s;

        if (!j ||
            json_add(j, "exitCode", json_object_new_int(o->exit)) < 0 ||
            json_add(j, "requestId", json_object_new_string(request_id)) < 0 ||
            json_add(j, "functionName", json_object_new_string(function_name)) < 0 ||
            (o->error && json_add(j, "error", json_object_get(o->error)) < 0) ||
            (p && json_add(j, "profile", profile_to_json(p)) < 0))
                return NULL;
        text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return NULL;
        if (!o->result)
                return strdup(text);
        /* The return value as the runtime wrote it, spliced in before the closing brace:
         * json-c would re-round its floats and clamp its big integers. */
        if (asprintf(&s, "%.*s,\"result\":%s}", (int) strlen(text) - 1, text, o->result) < 0)
                return NULL;
        return s;
}

char *run_report_profile_line(const char *request_id, const RunProfile *p) {
        char *s;

        if (asprintf(&s,
                     "REPORT RequestId: %s\tDuration: %.2f ms\tCPU Time: %.2f ms\tMax Memory Used: %" PRIu64
                     " MB\tMax RSS: %" PRIu64 " MB\tMemory Size: %" PRIu64
                     " MB\tStart: %s\tInit Duration: %.2f ms\tSandbox: %s (%s)",
                     request_id, p->duration_usec / 1000.0, p->cpu_usec / 1000.0,
                     (run_profile_peak_memory(p) + MIB - 1) / MIB, (p->max_rss_bytes + MIB - 1) / MIB,
                     p->memory_limit_bytes / MIB,
                     p->from_pool ? "warm" : "cold", p->init_usec / 1000.0, p->sandbox_id, p->template) < 0)
                return NULL;
        return s;
}
