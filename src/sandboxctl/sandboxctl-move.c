/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl fleet move, and the moves of drain --move-to (docs/SCALE-OUT.md): a sandbox
 * moved from one node's bridge to another's, the export streamed into the import with
 * nothing of it kept here but a pipe's worth. Both bridges are asked with the same
 * tenant's token (the same token file on every node): the export is the tenant's, the
 * import becomes the tenant's. The source is removed only once the import answered 201,
 * so a move that breaks anywhere leaves the sandbox where it was.
 *
 * libcurl, two transfers: the export's in a thread writing into a pipe, the import's here
 * reading from it (chunked). The import's last read waits for the export's end and aborts
 * the upload unless the export ended well: a cut export never commits on the new node. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "fd-util.h"
#include "json-util.h"
#include "sandboxctl-util.h"
#include "macro.h"
#include "sandboxctl-move.h"

#define BODY_MAX (4U * 1024U * 1024U)
#define META_MAX (16U * 1024U)

typedef struct Body {
        char *data;
        size_t n;
} Body;

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Body *b = userdata;
        size_t n = size * nmemb;
        char *d;

        if (b->n + n > BODY_MAX)
                return 0;
        d = realloc(b->data, b->n + n + 1);
        if (!d)
                return 0;
        memcpy(d + b->n, ptr, n);
        b->data = d;
        b->n += n;
        b->data[b->n] = 0;
        return n;
}

static struct curl_slist *auth_headers(const char *token, const char *content_type) {
        _cleanup_free_ char *auth = NULL, *ct = NULL;
        struct curl_slist *h = NULL, *h2;

        if (asprintf(&auth, "Authorization: Bearer %s", token) < 0 ||
            (content_type && asprintf(&ct, "Content-Type: %s", content_type) < 0))
                return NULL;
        h = curl_slist_append(NULL, auth);
        /* No 100-continue round trip before a body. */
        if (h && (h2 = curl_slist_append(h, "Expect:")))
                h = h2;
        if (h && ct && (h2 = curl_slist_append(h, ct)))
                h = h2;
        return h;
}

static CURL *easy_new(const char *url, struct curl_slist *headers) {
        CURL *c = curl_easy_init();

        if (!c)
                return NULL;
        (void) curl_easy_setopt(c, CURLOPT_URL, url);
        (void) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        (void) curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
        return c;
}

/* The message of a bridge's error body ({"error": {"code", "message"}}), or the body. */
static const char *error_text(const Body *b, char *buf, size_t size) {
        _cleanup_json_ json_object *o = b->data ? json_tokener_parse(b->data) : NULL;
        json_object *e = NULL, *code = NULL, *msg = NULL;

        if (o && json_object_object_get_ex(o, "error", &e) && json_object_object_get_ex(e, "code", &code) &&
            json_object_object_get_ex(e, "message", &msg)) {
                snprintf(buf, size, "%s: %s", json_object_get_string(code), json_object_get_string(msg));
                return buf;
        }
        snprintf(buf, size, "%s", b->data ? b->data : "no answer");
        return buf;
}

/* One request with a small body; *ret_status the HTTP status, *ret the answer parsed (NULL
 * if it is no JSON). */
static int http_call(const FleetMove *fm, const char *method, const char *base, const char *path, const char *body,
                     long *ret_status, json_object **ret, char *err, size_t err_size) {
        _cleanup_free_ char *url = NULL;
        struct curl_slist *h;
        Body b = {};
        CURLcode cc;
        CURL *c;

        if (asprintf(&url, "%s%s", base, path) < 0)
                return -ENOMEM;
        h = auth_headers(fm->token, body ? "application/json" : NULL);
        c = h ? easy_new(url, h) : NULL;
        if (!c) {
                curl_slist_free_all(h);
                return -ENOMEM;
        }
        (void) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body)
                (void) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        (void) curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
        (void) curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        (void) curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
        cc = curl_easy_perform(c);
        if (cc == CURLE_OK)
                (void) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, ret_status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (cc != CURLE_OK) {
                free(b.data);
                snprintf(err, err_size, "%s %s: %s", method, url, curl_easy_strerror(cc));
                return -EHOSTUNREACH;
        }
        *ret = b.data ? json_tokener_parse(b.data) : NULL;
        if (*ret_status >= 300)
                (void) error_text(&b, err, err_size);
        free(b.data);
        return 0;
}

/* ---- the stream: export (a thread) into a pipe, import from it ---- */

typedef struct Pump {
        CURL *curl;
        int fd;                   /* the pipe's write end; closed at the export's end */
        long status;
        Body error;               /* the export's body when it is no 200 */
        char meta[META_MAX + 1];  /* the stream's first line: the exported record */
        size_t meta_n;
        bool meta_done;
        CURLcode code;
} Pump;

static size_t pump_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Pump *p = userdata;
        size_t n = size * nmemb, k;

        if (p->status == 0)
                (void) curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &p->status);
        if (p->status != 200)
                return body_write(ptr, size, nmemb, &p->error);
        if (!p->meta_done) {
                const char *nl = memchr(ptr, '\n', n);
                k = MIN(nl ? (size_t) (nl - ptr) : n, META_MAX - p->meta_n);
                memcpy(p->meta + p->meta_n, ptr, k);
                p->meta_n += k;
                p->meta[p->meta_n] = 0;
                p->meta_done = nl || p->meta_n == META_MAX;
        }
        return write_all(p->fd, ptr, n) < 0 ? 0 : n;
}

static void *pump_run(void *userdata) {
        Pump *p = userdata;

        p->code = curl_easy_perform(p->curl);
        p->fd = safe_close(p->fd);
        return NULL;
}

typedef struct Upload {
        int fd;                   /* the pipe's read end */
        pthread_t thread;
        bool joined;
        Pump *pump;
} Upload;

static bool pump_ok(const Pump *p) {
        return p->code == CURLE_OK && p->status == 200 && p->meta_done;
}

static size_t upload_read(char *buf, size_t size, size_t nitems, void *userdata) {
        Upload *u = userdata;

        for (;;) {
                ssize_t n = read(u->fd, buf, size * nitems);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return CURL_READFUNC_ABORT;
                if (n > 0)
                        return (size_t) n;
                /* The end of the pipe: the import ends only if the export did, well. */
                (void) pthread_join(u->thread, NULL);
                u->joined = true;
                return pump_ok(u->pump) ? 0 : CURL_READFUNC_ABORT;
        }
}

/* The export of id at fm->from streamed into an import at fm->to: *ret_new the new id,
 * *ret_meta the exported record. */
static int stream_move(const FleetMove *fm, const char *id, char **ret_new, json_object **ret_meta, char *err,
                       size_t err_size) {
        _cleanup_free_ char *export_url = NULL, *import_url = NULL;
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        struct curl_slist *hx = NULL, *hi = NULL;
        Pump pump = { .fd = -EBADF };
        Upload up = { .fd = -EBADF, .pump = &pump };
        _cleanup_json_ json_object *answer = NULL;
        json_object *v;
        CURL *import = NULL;
        Body b = {};
        long status = 0;
        CURLcode cc;
        int r = 0;

        if (asprintf(&export_url, "%s/api/v1/sessions/%s/export", fm->from, id) < 0 ||
            asprintf(&import_url, "%s/api/v1/sessions/import", fm->to) < 0)
                return -ENOMEM;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        hx = auth_headers(fm->token, NULL);
        hi = auth_headers(fm->token, "application/vnd.sandboxd.move");
        pump.curl = hx ? easy_new(export_url, hx) : NULL;
        import = hi ? easy_new(import_url, hi) : NULL;
        if (!pump.curl || !import) {
                r = -ENOMEM;
                goto finish;
        }
        (void) curl_easy_setopt(pump.curl, CURLOPT_WRITEFUNCTION, pump_write);
        (void) curl_easy_setopt(pump.curl, CURLOPT_WRITEDATA, &pump);
        (void) curl_easy_setopt(import, CURLOPT_POST, 1L);
        (void) curl_easy_setopt(import, CURLOPT_READFUNCTION, upload_read);
        (void) curl_easy_setopt(import, CURLOPT_READDATA, &up);
        (void) curl_easy_setopt(import, CURLOPT_WRITEFUNCTION, body_write);
        (void) curl_easy_setopt(import, CURLOPT_WRITEDATA, &b);

        pump.fd = TAKE_FD(p[1]);
        up.fd = p[0];
        r = -pthread_create(&up.thread, NULL, pump_run, &pump);
        if (r < 0) {
                pump.fd = safe_close(pump.fd);
                up.joined = true;
                goto finish;
        }
        cc = curl_easy_perform(import);
        if (cc == CURLE_OK)
                (void) curl_easy_getinfo(import, CURLINFO_RESPONSE_CODE, &status);
        /* The import may have answered before the export ended: the export's writes fail
         * once the pipe's read end is gone, and it stops. */
        p[0] = up.fd = safe_close(p[0]);
        if (!up.joined)
                (void) pthread_join(up.thread, NULL);

        if (pump.code != CURLE_OK && pump.status == 0) {
                snprintf(err, err_size, "export from %s: %s", fm->from, curl_easy_strerror(pump.code));
                r = -EHOSTUNREACH;
        } else if (pump.status != 200) {
                char m[1024];
                snprintf(err, err_size, "export from %s: HTTP %ld, %s", fm->from, pump.status,
                         error_text(&pump.error, m, sizeof(m)));
                r = pump.status == 404 ? -ENOENT : -EIO;
        } else if (!pump_ok(&pump)) {
                snprintf(err, err_size, "export from %s broke off: %s", fm->from, curl_easy_strerror(pump.code));
                r = -EIO;
        } else if (cc != CURLE_OK) {
                snprintf(err, err_size, "import into %s: %s", fm->to, curl_easy_strerror(cc));
                r = -EIO;
        } else if (status != 201) {
                char m[1024];
                snprintf(err, err_size, "import into %s: HTTP %ld, %s", fm->to, status, error_text(&b, m, sizeof(m)));
                r = -EIO;
        } else {
                answer = b.data ? json_tokener_parse(b.data) : NULL;
                if (!answer || !json_object_object_get_ex(answer, "id", &v) || !json_object_get_string(v)) {
                        snprintf(err, err_size, "import into %s: an answer without an id", fm->to);
                        r = -EBADMSG;
                } else {
                        *ret_meta = json_tokener_parse(pump.meta);
                        *ret_new = strdup(json_object_get_string(v));
                        r = *ret_new && *ret_meta ? 0 : -ENOMEM;
                }
        }
finish:
        if (pump.curl)
                curl_easy_cleanup(pump.curl);
        if (import)
                curl_easy_cleanup(import);
        curl_slist_free_all(hx);
        curl_slist_free_all(hi);
        safe_close(pump.fd);
        free(pump.error.data);
        free(b.data);
        return r;
}

static const char *json_str(json_object *o, const char *key) {
        json_object *v;

        return o && json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

int fleet_move_one(const FleetMove *fm, const char *id, char **ret_new) {
        _cleanup_json_ json_object *info = NULL, *meta = NULL, *hibernated = NULL, *removed = NULL;
        _cleanup_free_ char *path = NULL, *new_id = NULL;
        const char *state, *snapshot, *source;
        char err[2048] = "";
        long status = 0;
        int r;

        (void) signal(SIGPIPE, SIG_IGN);
        if (asprintf(&path, "/api/v1/sessions/%s", id) < 0)
                return -ENOMEM;
        r = http_call(fm, "GET", fm->from, path, NULL, &status, &info, err, sizeof(err));
        if (r < 0)
                return log_error_errno(r, "Cannot move %s: %s", id, err);
        state = status == 200 ? json_str(info, "state") : NULL;
        if (status != 200 && status != 404)
                return log_error_errno(EIO, "Cannot move %s: %s", id, err);
        /* Running (or paused): hibernated first. Stopped: hibernated on disk. Not a
         * sandbox (404): a hibernated one's archive, or nothing (the export says). */
        if (state && (streq(state, "running") || streq(state, "paused"))) {
                free(path);
                if (asprintf(&path, "/api/v1/sessions/%s/hibernate", id) < 0)
                        return -ENOMEM;
                r = http_call(fm, "POST", fm->from, path, "{}", &status, &hibernated, err, sizeof(err));
                if (r < 0 || status != 200)
                        return log_error_errno(r < 0 ? r : EIO, "Cannot hibernate %s: %s", id, err);
        } else if (state && !streq(state, "stopped"))
                return log_error_errno(EBUSY, "Cannot move %s: it is %s.", id, state);

        r = stream_move(fm, id, &new_id, &meta, err, sizeof(err));
        if (r < 0)
                return log_error_errno(r, "Cannot move %s (it stays where it is): %s", id, err);

        /* Only now the source goes: a workspace's sandbox (its record's id is its own), or
         * the archive's snapshot. */
        snapshot = json_str(meta, "id");
        source = json_str(meta, "source");
        free(path);
        if (!snapshot || !source)
                return log_error_errno(EBADMSG, "Moved %s to %s, but its record names no source: remove it by hand.",
                                       id, new_id);
        if (asprintf(&path, streq(snapshot, source) ? "/api/v1/sessions/%s" : "/api/v1/snapshots/%s", snapshot) < 0)
                return -ENOMEM;
        r = http_call(fm, "DELETE", fm->from, path, NULL, &status, &removed, err, sizeof(err));
        if (r < 0 || status != 204)
                fprintf(stderr, "Moved %s to %s, but could not remove the source (%s): %s\n", id, new_id, path, err);
        *ret_new = TAKE_PTR(new_id);
        return 0;
}

/* Each persistent sandbox of the token's tenant at fm->from: fn(id, state) for sandboxes
 * (running, paused, or hibernated on disk: "stopped"), then fn(source, NULL) for each
 * archive a hibernated one left; *ret_ephemeral counts those skipped, which finish where
 * they are. fn returns 1 if it did its work, 0 if it skipped, <0 if it failed. */
typedef int (*movable_fn_t)(const FleetMove *fm, const char *id, const char *state, void *userdata);

static int for_each_movable(const FleetMove *fm, movable_fn_t fn, void *userdata, unsigned *ret_done,
                            unsigned *ret_failed, unsigned *ret_ephemeral) {
        _cleanup_json_ json_object *list = NULL, *snapshots = NULL;
        unsigned done = 0, failed = 0, ephemeral = 0;
        char err[2048] = "";
        long status = 0;
        int r;

        r = http_call(fm, "GET", fm->from, "/api/v1/sessions", NULL, &status, &list, err, sizeof(err));
        if (r >= 0 && status != 200)
                r = -EIO;
        if (r >= 0)
                r = http_call(fm, "GET", fm->from, "/api/v1/snapshots", NULL, &status, &snapshots, err, sizeof(err));
        if (r >= 0 && status != 200)
                r = -EIO;
        if (r < 0)
                return log_error_errno(r, "Cannot list the sandboxes at %s: %s", fm->from, err);

        for (size_t pass = 0; pass < 2; pass++) {
                json_object *a = pass == 0 ? list : snapshots;

                for (size_t i = 0; json_object_is_type(a, json_type_array) && i < json_object_array_length(a); i++) {
                        json_object *s = json_object_array_get_idx(a, i), *v;
                        const char *id = json_str(s, pass == 0 ? "id" : "source");

                        if (!id || (pass == 1 && !(json_object_object_get_ex(s, "hibernated", &v) &&
                                                   json_object_get_boolean(v))))
                                continue;
                        if (pass == 0 && json_object_object_get_ex(s, "ephemeral", &v) && json_object_get_boolean(v)) {
                                ephemeral++;
                                continue;
                        }
                        r = fn(fm, id, pass == 0 ? json_str(s, "state") : NULL, userdata);
                        if (r < 0)
                                failed++;
                        else if (r > 0)
                                done++;
                }
        }
        *ret_done = done;
        *ret_failed = failed;
        *ret_ephemeral = ephemeral;
        return 0;
}

static int move_listed(const FleetMove *fm, const char *id, const char *state, void *userdata) {
        _cleanup_free_ char *new_id = NULL;
        int r;

        r = fleet_move_one(fm, id, &new_id);
        if (r < 0)
                return r;
        printf("%s %s\n", id, new_id);
        fflush(stdout);
        return 1;
}

int fleet_move_all(const FleetMove *fm, unsigned *ret_moved, unsigned *ret_failed, unsigned *ret_left) {
        return for_each_movable(fm, move_listed, NULL, ret_moved, ret_failed, ret_left);
}

/* ---- backup and restore: a dead node's sandboxes from their last copies ---- */

/* The export of what (a hibernated sandbox, or a snapshot's id) at fm->from into DIR/ID.move,
 * replaced whole once complete. */
static int backup_one(const FleetMove *fm, const char *what, const char *dir, const char *id, char **ret_path) {
        _cleanup_free_ char *url = NULL, *path = NULL, *partial = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct curl_slist *h;
        Pump pump = { .fd = -EBADF };
        char m[1024];
        int r = 0;

        if (asprintf(&url, "%s/api/v1/sessions/%s/export", fm->from, what) < 0 ||
            asprintf(&path, "%s/%s.move", dir, id) < 0 || asprintf(&partial, "%s.partial", path) < 0)
                return log_oom();
        fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return log_error_errno(errno, "Cannot create %s: %m", partial);
        pump.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        h = auth_headers(fm->token, NULL);
        pump.curl = h && pump.fd >= 0 ? easy_new(url, h) : NULL;
        if (!pump.curl)
                r = log_oom();
        else {
                (void) curl_easy_setopt(pump.curl, CURLOPT_WRITEFUNCTION, pump_write);
                (void) curl_easy_setopt(pump.curl, CURLOPT_WRITEDATA, &pump);
                (void) pump_run(&pump);
                if (!pump_ok(&pump))
                        r = log_error_errno(EIO, "Cannot back up %s from %s: %s", id, fm->from,
                                            pump.status != 200 && pump.status != 0 ?
                                            error_text(&pump.error, m, sizeof(m)) : curl_easy_strerror(pump.code));
                else if (fsync(fd) < 0 || rename(partial, path) < 0)
                        r = log_error_errno(errno, "Cannot write %s: %m", path);
                curl_easy_cleanup(pump.curl);
        }
        if (r < 0)
                (void) unlink(partial);
        safe_close(pump.fd);
        curl_slist_free_all(h);
        free(pump.error.data);
        if (r >= 0)
                *ret_path = TAKE_PTR(path);
        return r;
}

/* A running (or paused) sandbox keeps running: a snapshot of it is what is saved, and
 * removed after. */
static int backup_listed(const FleetMove *fm, const char *id, const char *state, void *userdata) {
        _cleanup_json_ json_object *snap = NULL, *gone = NULL;
        _cleanup_free_ char *path = NULL, *url = NULL;
        const char *dir = userdata, *what = id;
        char err[2048] = "";
        long status = 0;
        int r;

        if (state && (streq(state, "running") || streq(state, "paused"))) {
                if (asprintf(&url, "/api/v1/sessions/%s/snapshot", id) < 0)
                        return log_oom();
                r = http_call(fm, "POST", fm->from, url, "{}", &status, &snap, err, sizeof(err));
                what = r >= 0 && status == 201 ? json_str(snap, "id") : NULL;
                if (!what)
                        return log_error_errno(EIO, "Cannot snapshot %s for its backup: %s", id, err);
        } else if (state && !streq(state, "stopped"))
                return 0;
        r = backup_one(fm, what, dir, id, &path);
        if (what != id) {
                url = mfree(url);
                if (asprintf(&url, "/api/v1/snapshots/%s", what) < 0)
                        return log_oom();
                (void) http_call(fm, "DELETE", fm->from, url, NULL, &status, &gone, err, sizeof(err));
        }
        if (r < 0)
                return r;
        printf("%s %s\n", id, path);
        fflush(stdout);
        return 1;
}

int fleet_backup_all(const FleetMove *fm, const char *dir, unsigned *ret_saved, unsigned *ret_failed) {
        unsigned ephemeral;

        return for_each_movable(fm, backup_listed, (void *) dir, ret_saved, ret_failed, &ephemeral);
}

int fleet_restore_one(const FleetMove *fm, const char *path, char **ret_old, char **ret_new) {
        _cleanup_free_ char *url = NULL, *line = NULL;
        _cleanup_json_ json_object *meta = NULL, *answer = NULL;
        struct curl_slist *h = NULL;
        struct stat st;
        size_t size = 0;
        long status = 0;
        CURLcode cc;
        Body b = {};
        CURL *c = NULL;
        FILE *f;
        char m[1024];
        int r = 0;

        f = fopen(path, "re");
        if (!f)
                return log_error_errno(errno, "Cannot read %s: %m", path);
        if (getline(&line, &size, f) <= 0 || !(meta = json_tokener_parse(line)) || !json_str(meta, "source") ||
            fstat(fileno(f), &st) < 0 || fseek(f, 0, SEEK_SET) < 0) {
                fclose(f);
                return log_error_errno(EBADMSG, "%s is no export (sandboxctl fleet backup writes them).", path);
        }
        if (asprintf(&url, "%s/api/v1/sessions/import", fm->to) < 0)
                r = log_oom();
        h = r >= 0 ? auth_headers(fm->token, "application/vnd.sandboxd.move") : NULL;
        c = h ? easy_new(url, h) : NULL;
        if (!c)
                r = log_oom();
        else {
                (void) curl_easy_setopt(c, CURLOPT_POST, 1L);
                (void) curl_easy_setopt(c, CURLOPT_READDATA, f);
                (void) curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) st.st_size);
                (void) curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
                (void) curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
                cc = curl_easy_perform(c);
                if (cc == CURLE_OK)
                        (void) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
                answer = status == 201 && b.data ? json_tokener_parse(b.data) : NULL;
                if (cc != CURLE_OK)
                        r = log_error_errno(EIO, "Cannot restore %s into %s: %s", path, fm->to, curl_easy_strerror(cc));
                else if (!json_str(answer, "id"))
                        r = log_error_errno(EIO, "Cannot restore %s into %s: HTTP %ld, %s", path, fm->to, status,
                                            error_text(&b, m, sizeof(m)));
                else {
                        *ret_old = strdup(json_str(meta, "source"));
                        *ret_new = strdup(json_str(answer, "id"));
                        r = *ret_old && *ret_new ? 0 : log_oom();
                }
                curl_easy_cleanup(c);
        }
        curl_slist_free_all(h);
        free(b.data);
        fclose(f);
        return r;
}
