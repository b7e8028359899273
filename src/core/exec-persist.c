/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "exec-persist.h"
#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "sandbox-internal.h"
#include "strv.h"
#include "time-util.h"

/* The processes file holds at most SANDBOX_FINISHED_MAX ended ones and the running ones,
 * each an argv of at most the exec request's size: far below this. */
#define PROCS_FILE_MAX (8U * 1024U * 1024U)

static int procs_path(const char *dir, const char *id, const char *suffix, char **ret) {
        return asprintf(ret, "%s/%s%s", dir, id, suffix) < 0 ? -ENOMEM : 0;
}

static int add_u64(json_object *o, const char *key, uint64_t v) {
        return json_add(o, key, json_object_new_int64((int64_t) MIN(v, (uint64_t) INT64_MAX)));
}

static int output_path(const char *dir, const char *id, uint64_t eid, const char *stream, char **ret) {
        return asprintf(ret, "%s/%s.%" PRIu64 ".%s", dir, id, eid, stream) < 0 ? -ENOMEM : 0;
}

static json_object *process_to_json(Sandbox *s, Exec *e, bool stopping) {
        const ExecResult *r = &e->result;
        json_object *p = json_object_new_object(), *argv = json_object_new_array();
        int k;

        if (!p || !argv) {
                json_object_put(p);
                json_object_put(argv);
                return NULL;
        }
        k = json_add(p, "argv", argv);
        for (char **a = e->config.argv; k >= 0 && a && *a; a++)
                k = json_object_array_add(argv, json_object_new_string(*a)) < 0 ? -ENOMEM : 0;
        if (k >= 0) k = add_u64(p, "id", e->id);
        if (k >= 0) k = add_u64(p, "pid", (uint64_t) MAX(e->pid, 0));
        if (k >= 0) k = json_add(p, "tty", json_object_new_boolean(e->config.tty));
        if (k >= 0) k = add_u64(p, "output_max", e->config.output_max);
        if (k >= 0) k = add_u64(p, "started_at", e->started_at);
        if (k >= 0) k = add_u64(p, "timeout_left_usec", e->exited ? 0 : exec_timeout_left_usec(e));
        if (k >= 0) k = json_add(p, "exited", json_object_new_boolean(e->exited));
        if (k >= 0 && e->exited) {
                k = json_add(p, "exit_status", json_object_new_int(r->exit_status));
                if (k >= 0) k = json_add(p, "exit_code", json_object_new_int(r->exit_code));
                if (k >= 0) k = json_add(p, "signal", json_object_new_int(r->signal));
                if (k >= 0) k = json_add(p, "timed_out", json_object_new_boolean(r->timed_out));
                if (k >= 0) k = json_add(p, "oom_killed", json_object_new_boolean(r->oom_killed));
                if (k >= 0) k = add_u64(p, "duration_usec", r->duration_usec);
                if (k >= 0) k = add_u64(p, "cpu_usec", r->cpu_usec);
                if (k >= 0) k = add_u64(p, "max_rss_bytes", r->max_rss_bytes);
        }
        if (k >= 0 && stopping) {
                /* The output kept so far, beside this file: its totals say where it ends. */
                const OutputBuffer *b[2] = { &r->out, &r->err };
                static const char * const names[2] = { "out", "err" };

                k = json_add(p, "truncated", json_object_new_boolean(r->truncated));
                for (size_t i = 0; k >= 0 && i < 2; i++) {
                        _cleanup_free_ char *path = NULL, *tmp = NULL;
                        char key[16];

                        snprintf(key, sizeof(key), "%s_total", names[i]);
                        k = add_u64(p, key, b[i]->total);
                        if (k < 0 || b[i]->size == 0)
                                continue;
                        k = output_path(s->manager->sandboxes_dir, s->id, e->id, names[i], &path);
                        if (k >= 0 && asprintf(&tmp, "%s.tmp", path) < 0)
                                k = -ENOMEM;
                        if (k >= 0 && write_file_atomic(path, tmp, b[i]->data, b[i]->size, 0600, false) < 0)
                                log_sandbox(s, LOG_WARNING, 0, "Failed to keep the output of process %" PRIu64 ".",
                                            e->id);
                }
                if (k >= 0)
                        k = json_add(p, "output_saved", json_object_new_boolean(true));
        }
        if (k < 0) {
                json_object_put(p);
                return NULL;
        }
        return p;
}

void sandbox_save_processes(Sandbox *s, bool stopping) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        json_object *o = json_object_new_object(), *list = json_object_new_array();
        const char *text;
        size_t n = 0;
        int r = -ENOMEM;

        if (!o || !list) {
                json_object_put(list);
                goto finish;
        }
        if (json_add(o, "processes", list) < 0)   /* takes list, even on failure */
                goto finish;
        for (Exec *e = sandbox_next_process(s, NULL); e; e = sandbox_next_process(s, e), n++) {
                json_object *p = process_to_json(s, e, stopping);
                if (!p || json_object_array_add(list, p) < 0) {
                        json_object_put(p);
                        goto finish;
                }
        }
        r = procs_path(s->manager->sandboxes_dir, s->id, ".procs", &path);
        if (r < 0)
                goto finish;
        if (n == 0) {
                r = unlink(path) < 0 && errno != ENOENT ? -errno : 0;
                goto finish;
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        r = procs_path(s->manager->sandboxes_dir, s->id, ".procs.tmp", &tmp);
        if (r >= 0)
                r = write_file_atomic(path, tmp, text, strlen(text), 0600, false);
finish:
        json_object_put(o);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to save the processes of sandbox %s: %m", s->id);
}

static int read_all(const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        ssize_t n;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        n = read(fd, buf, (size_t) st.st_size);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_size = (size_t) n;
        return 0;
}

static uint64_t get_u64(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return (uint64_t) MAX(json_object_get_int64(v), 0);
}

static bool get_bool(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

/* The output kept before the restart, with the count of all there was. */
static void adopt_output(Sandbox *s, Exec *e, json_object *p) {
        OutputBuffer *b[2] = { &e->result.out, &e->result.err };
        static const char * const names[2] = { "out", "err" };

        if (!get_bool(p, "output_saved")) {
                /* Saved when sandboxd stops; not after a crash. */
                e->output_lost = !e->config.tty;
                return;
        }
        e->result.truncated = get_bool(p, "truncated");
        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *path = NULL, *data = NULL;
                char key[16];
                size_t size = 0;

                snprintf(key, sizeof(key), "%s_total", names[i]);
                if (output_path(s->manager->sandboxes_dir, s->id, e->id, names[i], &path) >= 0 &&
                    read_all(path, b[i]->max, &data, &size) >= 0)
                        (void) output_buffer_append(b[i], data, size);
                if (path)
                        (void) unlink(path);
                b[i]->total = MAX(get_u64(p, key), (uint64_t) b[i]->size);
        }
}

int sandbox_adopt_processes(Sandbox *s, int (*take_fd)(void *userdata, const char *name), void *userdata) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        json_object *o = NULL, *list;
        Exec *tail = NULL;
        size_t size;
        int r, adopted = 0;

        r = procs_path(s->manager->sandboxes_dir, s->id, ".procs", &path);
        if (r < 0)
                return r;
        r = read_all(path, PROCS_FILE_MAX, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        o = json_tokener_parse(text);
        if (!o || !json_object_object_get_ex(o, "processes", &list) || !json_object_is_type(list, json_type_array)) {
                json_object_put(o);
                return -EBADMSG;
        }
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *p = json_object_array_get_idx(list, i), *a;
                _cleanup_strv_free_ char **argv = NULL;
                uint64_t id = get_u64(p, "id");
                Exec *e;

                if (id == 0 || sandbox_find_process(s, id) ||
                    !json_object_object_get_ex(p, "argv", &a) || !json_object_is_type(a, json_type_array))
                        continue;
                for (size_t j = 0; j < json_object_array_length(a); j++)
                        if (strv_extend(&argv, json_object_get_string(json_object_array_get_idx(a, j))) < 0)
                                goto oom;
                if (!argv)
                        continue;
                e = exec_new_adopted(s, id, argv, get_bool(p, "tty"), get_u64(p, "output_max"));
                if (!e)
                        goto oom;
                argv = NULL;
                adopt_output(s, e, p);
                if (get_bool(p, "exited")) {
                        json_object *v;

                        e->result.exit_status = json_object_object_get_ex(p, "exit_status", &v) ? json_object_get_int(v) : 0;
                        e->result.exit_code = json_object_object_get_ex(p, "exit_code", &v) ? json_object_get_int(v) : 0;
                        e->result.signal = json_object_object_get_ex(p, "signal", &v) ? json_object_get_int(v) : 0;
                        e->result.timed_out = get_bool(p, "timed_out");
                        e->result.oom_killed = get_bool(p, "oom_killed");
                        e->result.duration_usec = get_u64(p, "duration_usec");
                        e->result.cpu_usec = get_u64(p, "cpu_usec");
                        e->result.max_rss_bytes = get_u64(p, "max_rss_bytes");
                        e->pid = (pid_t) get_u64(p, "pid");
                        exec_adopt_finished(e, &tail);
                } else {
                        char name[128];
                        int out, err;

                        snprintf(name, sizeof(name), "out-%s-%" PRIu64, s->id, id);
                        out = take_fd(userdata, name);
                        snprintf(name, sizeof(name), "err-%s-%" PRIu64, s->id, id);
                        err = take_fd(userdata, name);
                        r = exec_adopt_running(e, (pid_t) get_u64(p, "pid"), get_u64(p, "started_at"), out, err,
                                               get_u64(p, "timeout_left_usec"));
                        if (r < 0)
                                log_sandbox(s, LOG_WARNING, r, "Failed to watch process %" PRIu64 " again: %m", id);
                        if (out < 0 && err < 0 && !e->config.tty)
                                log_sandbox(s, LOG_WARNING, 0,
                                            "The output pipes of process %" PRIu64 " were not kept; its output is lost.", id);
                }
                adopted++;
        }
        json_object_put(o);
        sandbox_update_idle_timer(s);
        if (adopted > 0)
                log_sandbox(s, LOG_INFO, 0, "Adopted %i background process(es) of sandbox %s.", adopted, s->id);
        return adopted;
oom:
        json_object_put(o);
        return -ENOMEM;
}

void sandbox_remove_processes(const char *dir, const char *id) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        json_object *o, *list;
        size_t size;

        if (procs_path(dir, id, ".procs", &path) < 0 || read_all(path, PROCS_FILE_MAX, &text, &size) < 0)
                return;
        o = json_tokener_parse(text);
        if (o && json_object_object_get_ex(o, "processes", &list) && json_object_is_type(list, json_type_array))
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        uint64_t eid = get_u64(json_object_array_get_idx(list, i), "id");
                        for (size_t k = 0; k < 2; k++) {
                                _cleanup_free_ char *out = NULL;
                                if (output_path(dir, id, eid, k ? "err" : "out", &out) >= 0)
                                        (void) unlink(out);
                        }
                }
        json_object_put(o);
        (void) unlink(path);
}
