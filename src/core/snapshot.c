/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fd-util.h"
#include "log.h"
#include "sandbox-internal.h"
#include "manager-quota.h"
#include "snapshot.h"
#include "strv.h"
#include "time-util.h"
#include "workspace.h"
#include "workspace-export.h"

#define SNAPSHOT_META_MAX (16U * 1024U)
#define SNAPSHOT_SPLICE_CHUNK (1024U * 1024U)
#define SNAPSHOT_RETENTION_CHECK_MAX_USEC (3600ULL * 1000000ULL)

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

static const char *snapshots_dir(Manager *m) {
        return m->settings.snapshots.directory ?: SANDBOX_STATE_DIR "/snapshots";
}

static int snapshot_path(Manager *m, const char *id, const char *suffix, char **ret) {
        return asprintf(ret, "%s/%s%s", snapshots_dir(m), id, suffix) < 0 ? -ENOMEM : 0;
}

static int snapshot_meta_load(Manager *m, const char *id, SnapshotMeta *ret) {
        _cleanup_free_ char *path = NULL;
        char buf[SNAPSHOT_META_MAX];
        ssize_t n;
        int r;

        r = snapshot_path(m, id, ".json", &path);
        if (r < 0)
                return r;
        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        r = snapshot_meta_from_json(buf, ret);
        if (r < 0)
                return r;
        if (!streq(ret->id, id)) {
                snapshot_meta_done(ret);
                return -EBADMSG;
        }
        return 0;
}

void snapshot_meta_array_free(SnapshotMeta *a, size_t n) {
        for (size_t i = 0; i < n; i++)
                snapshot_meta_done(&a[i]);
        free(a);
}

static int cmp_created(const void *a, const void *b) {
        const SnapshotMeta *x = a, *y = b;
        return x->created < y->created ? -1 : x->created > y->created ? 1 : strcmp(x->id, y->id);
}

/* Every snapshot on disk, oldest first; records that cannot be read are skipped. */
static int snapshots_load_all(Manager *m, SnapshotMeta **ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = opendir(snapshots_dir(m));
        SnapshotMeta *a = NULL;
        size_t n = 0;
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char id[SNAPSHOT_ID_LEN + 1];
                size_t len = strlen(de->d_name);
                SnapshotMeta *b;

                if (len != SNAPSHOT_ID_LEN + 5 || !streq(de->d_name + SNAPSHOT_ID_LEN, ".json"))
                        continue;
                memcpy(id, de->d_name, SNAPSHOT_ID_LEN);
                id[SNAPSHOT_ID_LEN] = 0;
                if (!snapshot_id_is_valid(id))
                        continue;
                b = realloc(a, (n + 1) * sizeof(SnapshotMeta));
                if (!b) {
                        snapshot_meta_array_free(a, n);
                        return -ENOMEM;
                }
                a = b;
                if (snapshot_meta_load(m, id, &a[n]) >= 0)
                        n++;
        }
        if (n > 0)
                qsort(a, n, sizeof(SnapshotMeta), cmp_created);
        *ret = a;
        *ret_n = n;
        return 0;
}

/* How many snapshots owner (tenant, when not empty) has and how many bytes they take. */
static int snapshots_usage(Manager *m, uid_t owner, const char *tenant, uint64_t *ret_bytes, uint64_t *ret_count) {
        SnapshotMeta *a;
        size_t n;
        int r;

        r = snapshots_load_all(m, &a, &n);
        if (r < 0)
                return r;
        *ret_bytes = *ret_count = 0;
        for (size_t i = 0; i < n; i++)
                if (!isempty(tenant) ? streq(a[i].config.tenant, tenant) : a[i].owner == owner) {
                        *ret_bytes += a[i].size;
                        (*ret_count)++;
                }
        snapshot_meta_array_free(a, n);
        return 0;
}

int snapshot_usage_owner(Manager *m, uid_t owner, uint64_t *ret_bytes, uint64_t *ret_count) {
        return snapshots_usage(m, owner, NULL, ret_bytes, ret_count);
}

int snapshot_usage_tenant(Manager *m, const char *tenant, uint64_t *ret_bytes, uint64_t *ret_count) {
        return snapshots_usage(m, 0, tenant, ret_bytes, ret_count);
}

/* What tenant's quota ([TenantQuota] Snapshots=, SnapshotBytes=) leaves for one more
 * snapshot: *ret_room bytes (UINT64_MAX: unbounded); -EDQUOT, with *ret_count and *ret_used,
 * when none. */
static int snapshot_tenant_room(Manager *m, const char *tenant, uint64_t *ret_used, uint64_t *ret_count,
                                uint64_t *ret_room) {
        const QuotaLimits *l = &m->settings.tenancy.quota.tenant;
        int r;

        *ret_used = *ret_count = 0;
        *ret_room = UINT64_MAX;
        if (isempty(tenant) || (l->snapshots == 0 && l->snapshot_bytes == 0))
                return 0;
        r = snapshot_usage_tenant(m, tenant, ret_used, ret_count);
        if (r < 0)
                return r;
        return snapshot_quota_room(*ret_used, *ret_count, l->snapshot_bytes, l->snapshots, ret_room);
}

/* The record of what happened to snapshot meta: one place per kind (taken:
 * snapshot_job_maybe_finish(); restored: on_extracted(); removed: snapshot_remove_because()). */
static void snapshot_record(Manager *m, const SnapshotMeta *meta, SnapshotEventKind kind, SnapshotEventCause cause,
                            const char *into) {
        assert(snapshot_event_cause_fits(kind, cause));
        manager_record_snapshot(m, &(SnapshotRecordEvent) {
                .kind = kind,
                .cause = cause,
                .snapshot_id = meta->id,
                .source = meta->source,
                .sandbox_id = into,
                .owner = meta->owner,
                .tenant = meta->config.tenant,
                .size = meta->size,
                .content_size = meta->content_size,
                .time = now_usec(CLOCK_REALTIME),
        });
}

static int snapshot_unlink(Manager *m, const char *id) {
        _cleanup_free_ char *meta = NULL, *data = NULL;
        int r;

        if (snapshot_path(m, id, ".json", &meta) < 0 || snapshot_path(m, id, ".tar.zst", &data) < 0)
                return -ENOMEM;
        /* The record first: without it, the stream is no snapshot any more. */
        r = unlink(meta) < 0 ? -errno : 0;
        if (unlink(data) < 0 && errno != ENOENT && r >= 0)
                r = -errno;
        return r;
}

/* Removes snapshot id, and records it (if its metadata could be read: what cannot be is no
 * snapshot to anyone). */
static int snapshot_remove_because(Manager *m, const char *id, SnapshotEventCause cause) {
        _cleanup_(snapshot_meta_done) SnapshotMeta meta = {};
        bool known;
        int r;

        known = snapshot_meta_load(m, id, &meta) >= 0;
        r = snapshot_unlink(m, id);
        if (r >= 0 && known)
                snapshot_record(m, &meta, SNAPSHOT_EVENT_REMOVED, cause, NULL);
        return r;
}

int snapshot_remove(Manager *m, const char *id, SandboxError *error) {
        int r;

        assert_return(m, -EINVAL);
        assert_return(id, -EINVAL);

        r = snapshot_remove_because(m, id, SNAPSHOT_CAUSE_REMOVE);
        if (r == -ENOENT)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SNAPSHOT, "No snapshot '%.64s'.", id);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to remove snapshot %s: %m", id);
        log_info("Snapshot %s removed.", id);
        return 0;
}

/* ---- visibility ---- */

static bool snapshot_visible(const SandboxCaller *caller, const SnapshotMeta *meta) {
        return sandbox_access_visible(caller, meta->owner, meta->config.tenant);
}

/* Restoring (FromSnapshot, Wake) is for the owner (and root) only, whatever else the
 * caller was granted: a snapshot holds the owner's files. */
static bool snapshot_usable(const SandboxCaller *caller, const SnapshotMeta *meta) {
        return sandbox_access_tenant_matches(caller, meta->config.tenant) &&
                (caller->uid == 0 || caller->uid == meta->owner);
}

static int lookup_snapshot(Manager *m, const SandboxCaller *caller, const char *id,
                           bool (*allowed)(const SandboxCaller *, const SnapshotMeta *), SnapshotMeta *ret,
                           SandboxError *error) {
        SnapshotMeta meta;

        /* Another owner's or tenant's snapshot is not there at all for the caller. */
        if (!snapshot_id_is_valid(id) || snapshot_meta_load(m, id, &meta) < 0)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SNAPSHOT, "No snapshot '%.64s'.", id);
        if (!allowed(caller, &meta)) {
                snapshot_meta_done(&meta);
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SNAPSHOT, "No snapshot '%.64s'.", id);
        }
        *ret = meta;
        return 0;
}

int snapshot_lookup(Manager *m, const SandboxCaller *caller, const char *id, SnapshotMeta *ret,
                    SandboxError *error) {
        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(id, -EINVAL);

        return lookup_snapshot(m, caller, id, snapshot_visible, ret, error);
}

int snapshot_call_access(Manager *m, const SandboxCaller *caller, const char *id, bool wake, SnapshotMeta *meta,
                         uid_t *ret_owner, const char **ret_tenant, SandboxError *error) {
        SandboxCaller any = *caller;
        int r;

        any.granted = true;
        snapshot_meta_done(meta);
        if (wake) {
                /* A stopped sandbox (files on disk, no processes) before a hibernated one. */
                Sandbox *s = manager_find_stopped(m, caller, id);
                if (s) {
                        *ret_owner = s->owner;
                        *ret_tenant = s->config.tenant;
                        return 0;
                }
        }
        r = wake ? snapshot_lookup_hibernated(m, caller, id, meta, error) :
                   snapshot_lookup(m, &any, id, meta, error);
        if (r < 0)
                return r;
        *ret_owner = meta->owner;
        *ret_tenant = meta->config.tenant;
        return 0;
}

int snapshot_list(Manager *m, const SandboxCaller *caller, SnapshotMeta **ret, size_t *ret_n) {
        SnapshotMeta *a;
        size_t n, k = 0;
        int r;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(ret, -EINVAL);
        assert_return(ret_n, -EINVAL);

        r = snapshots_load_all(m, &a, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (snapshot_visible(caller, &a[i]))
                        a[k++] = a[i];
                else
                        snapshot_meta_done(&a[i]);
        }
        *ret = a;
        *ret_n = k;
        return 0;
}

int snapshot_lookup_hibernated(Manager *m, const SandboxCaller *caller, const char *id_or_name, SnapshotMeta *ret,
                               SandboxError *error) {
        SnapshotMeta *a;
        size_t n;
        int r, found = -1;

        r = snapshots_load_all(m, &a, &n);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to read the snapshots: %m");
        /* The newest hibernation of that sandbox id; or of that name, among the caller's
         * own for the tenant it acts for (as names of live sandboxes resolve). */
        for (size_t i = 0; i < n; i++) {
                const SnapshotMeta *s = &a[i];
                if (!s->hibernated || !snapshot_usable(caller, s))
                        continue;
                if (streq(s->source, id_or_name) ||
                    (!isempty(s->config.name) && streq(s->config.name, id_or_name) && s->owner == caller->uid &&
                     streq(s->config.tenant, strempty(caller->tenant))))
                        found = (int) i;
        }
        if (found < 0) {
                snapshot_meta_array_free(a, n);
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX, "No hibernated sandbox '%.64s'.",
                                         id_or_name);
        }
        /* *ret takes what the record owns: every pointer snapshot_meta_done() frees. */
        *ret = a[found];
        a[found].template_name = NULL;
        a[found].config.labels = NULL;
        a[found].config.secrets = NULL;
        a[found].contexts = NULL;
        snapshot_meta_array_free(a, n);
        return 0;
}

/* ---- taking a snapshot ---- */

typedef struct SnapshotJob {
        Manager *manager;
        Sandbox *sandbox;          /* until the agent is done */
        SnapshotMeta meta;
        int file_fd;
        int pipe_fd;               /* the read end */
        sd_event_source *io;
        char *partial;
        uint64_t room;
        bool room_is_max; /* room is sandboxd.conf [Limits] SnapshotMax=, not the quota's */
        bool room_is_tenant;       /* room is the tenant's quota's, not the owner's */             /* what the quota leaves */
        bool stream_done;
        bool op_done;
        bool repause;              /* it was paused: frozen again after */
        bool repausing;            /* ... which is under way */
        bool streaming;            /* in on_stream(): finishing waits until it returns */
        SandboxError error;        /* the first thing that went wrong */
        SnapshotEventCause cause;  /* Snapshot, Fork or Hibernate */
        FileOp *op;
        snapshot_callback_t cb;
        void *userdata;
        bool turn;                 /* holds one of its owner's (tenant's) turns */
} SnapshotJob;

static SnapshotJob *snapshot_job_free(SnapshotJob *j) {
        if (!j)
                return NULL;
        sd_event_source_disable_unref(j->io);
        safe_close(j->file_fd);
        safe_close(j->pipe_fd);
        if (j->partial)
                (void) unlink(j->partial);
        free(j->partial);
        if (j->turn)
                manager_turn_done(j->manager, j->meta.owner, j->meta.config.tenant);
        snapshot_meta_done(&j->meta);
        sandbox_error_done(&j->error);
        return mfree(j);
}

static int snapshot_commit(SnapshotJob *j) {
        _cleanup_free_ char *data = NULL, *meta = NULL, *tmp = NULL, *text = NULL;
        uint64_t used, count, room;
        struct stat st;
        int r;

        if (fsync(j->file_fd) < 0 || fstat(j->file_fd, &st) < 0)
                return -errno;
        j->meta.size = (uint64_t) st.st_size;
        /* The quota once more, against what is stored now: snapshots of the same owner taken
         * at the same time each had the room of the start, and committed since. Commits are
         * one at a time (the loop), so what is stored never exceeds the quota. */
        r = snapshot_usage_owner(j->manager, j->meta.owner, &used, &count);
        if (r < 0)
                return r;
        r = snapshot_quota_room(used, count, j->manager->settings.snapshots.max_bytes_per_owner,
                                j->manager->settings.snapshots.max_per_owner, &room);
        if (r < 0 || j->meta.size > room)
                return -EDQUOT;
        r = snapshot_tenant_room(j->manager, j->meta.config.tenant, &used, &count, &room);
        if (r < 0 || j->meta.size > room)
                return r == -EDQUOT || r >= 0 ? -EDQUOT : r;
        r = snapshot_meta_to_json(&j->meta, &text);
        if (r < 0)
                return r;
        if (snapshot_path(j->manager, j->meta.id, ".tar.zst", &data) < 0 ||
            snapshot_path(j->manager, j->meta.id, ".json", &meta) < 0 ||
            snapshot_path(j->manager, j->meta.id, ".json.partial", &tmp) < 0)
                return -ENOMEM;
        if (rename(j->partial, data) < 0)
                return -errno;
        j->partial = mfree(j->partial);
        r = write_file_atomic(meta, tmp, text, strlen(text), 0600, true);
        if (r < 0)
                (void) unlink(data);
        return r;
}

static void snapshot_job_maybe_finish(SnapshotJob *j);

static void on_repaused(Sandbox *s, const SandboxError *error, void *userdata) {
        SnapshotJob *j = userdata;

        if (error)
                log_sandbox(s, LOG_WARNING, 0, "Failed to pause sandbox %s again after its snapshot: %s", s->id,
                            sandbox_error_message(error));
        j->repausing = false;
        snapshot_job_maybe_finish(j);
}

static void snapshot_job_maybe_finish(SnapshotJob *j) {
        int r;

        if (!j->op_done || j->repausing || j->streaming ||
            (!j->stream_done && !sandbox_error_is_set(&j->error)))
                return;

        if (!sandbox_error_is_set(&j->error)) {
                r = snapshot_commit(j);
                if (r == -EDQUOT)
                        sandbox_error_set(&j->error, SANDBOX_ERR_QUOTA_EXCEEDED,
                                          "Snapshot of sandbox %s does not fit the snapshot quota of owner %u "
                                          "(sandboxd.conf(5)) next to the snapshots stored meanwhile.",
                                          j->meta.source, j->meta.owner);
                else if (r < 0)
                        sandbox_error_set_errno(&j->error, -r, "Failed to store snapshot %s: %m", j->meta.id);
        }
        if (sandbox_error_is_set(&j->error)) {
                log_warning("Snapshot of sandbox %s failed: %s", j->meta.source, sandbox_error_message(&j->error));
                j->cb(NULL, &j->error, j->userdata);
        } else {
                log_info("Snapshot %s of sandbox %s taken: %" PRIu64 " bytes of files in %" PRIu64 " bytes.",
                         j->meta.id, j->meta.source, j->meta.content_size, j->meta.size);
                snapshot_record(j->manager, &j->meta, SNAPSHOT_EVENT_TAKEN, j->cause, NULL);
                j->cb(&j->meta, NULL, j->userdata);
        }
        snapshot_job_free(j);
}

static void snapshot_job_fail(SnapshotJob *j) {
        j->io = sd_event_source_disable_unref(j->io);
        j->pipe_fd = safe_close(j->pipe_fd);
        if (j->op)
                file_op_cancel(j->op); /* its callback follows, with an error */
}

static int on_stream(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        SnapshotJob *j = userdata;

        /* Cancelling the op may answer it at once (on_archived()): the job stays until
         * this returns. */
        j->streaming = true;
        for (;;) {
                ssize_t n = splice(fd, NULL, j->file_fd, NULL, SNAPSHOT_SPLICE_CHUNK,
                                   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        j->streaming = false;
                        return 0;
                }
                if (n < 0) {
                        sandbox_error_set_errno(&j->error, errno, "Failed to write snapshot %s: %m", j->meta.id);
                        snapshot_job_fail(j);
                        break;
                }
                if (n == 0) {
                        j->stream_done = true;
                        j->io = sd_event_source_disable_unref(j->io);
                        j->pipe_fd = safe_close(j->pipe_fd);
                        break;
                }
                j->meta.size += (uint64_t) n;
                if (j->meta.size > j->room && j->room_is_max) {
                        sandbox_error_set(&j->error, SANDBOX_ERR_SNAPSHOT_TOO_LARGE,
                                          "Snapshot of sandbox %s exceeds the maximum of %" PRIu64 " bytes of one "
                                          "snapshot (sandboxd.conf [Limits] SnapshotMax=).", j->meta.source, j->room);
                        snapshot_job_fail(j);
                        break;
                }
                if (j->meta.size > j->room && j->room_is_tenant) {
                        const QuotaLimits *l = &j->manager->settings.tenancy.quota.tenant;

                        sandbox_error_set_quota(&j->error, quota_item_to_string(QUOTA_SNAPSHOT_BYTES),
                                                l->snapshot_bytes, l->snapshot_bytes - j->room,
                                                "Snapshot of sandbox %s exceeds the snapshot quota of tenant %s "
                                                "([TenantQuota] SnapshotBytes=, sandboxd.conf(5)): %" PRIu64
                                                " bytes left.", j->meta.source, j->meta.config.tenant, j->room);
                        snapshot_job_fail(j);
                        break;
                }
                if (j->meta.size > j->room) {
                        sandbox_error_set_quota(&j->error, quota_item_to_string(QUOTA_SNAPSHOT_BYTES),
                                                j->manager->settings.snapshots.max_bytes_per_owner,
                                                j->manager->settings.snapshots.max_bytes_per_owner - j->room,
                                          "Snapshot of sandbox %s exceeds the snapshot quota of owner %u "
                                          "(MaxBytesPerOwner=, sandboxd.conf(5)): %" PRIu64 " bytes left.",
                                          j->meta.source, j->meta.owner, j->room);
                        snapshot_job_fail(j);
                        break;
                }
        }
        j->streaming = false;
        snapshot_job_maybe_finish(j);
        return 0;
}

/* What the agent met (an errno in the sandbox) is, for the caller, the sandbox failing;
 * what sandboxd met keeps its code. */
static SandboxErrorCode agent_error_code(const SandboxError *error) {
        return error->code == SANDBOX_ERR_ERRNO ? SANDBOX_ERR_SANDBOX_FAILED : error->code;
}

static void on_archived(const struct agent_file_result *result, const void *data, size_t size,
                        const SandboxError *error, void *userdata) {
        SnapshotJob *j = userdata;

        j->op = NULL;
        j->op_done = true;
        if (error && error->code == SANDBOX_ERR_FILE_TOO_LARGE)
                sandbox_error_set(&j->error, SANDBOX_ERR_SNAPSHOT_TOO_LARGE,
                                  "The files of sandbox %s add up to more than its DiskMax (%" PRIu64 " bytes, "
                                  "sparse files at their full size): a snapshot of them could not be restored.",
                                  j->meta.source, j->meta.config.disk_max);
        else if (error)
                sandbox_error_set(&j->error, agent_error_code(error),
                                  "Snapshot of sandbox %s failed: %s", j->meta.source, sandbox_error_message(error));
        else
                j->meta.content_size = result->bytes;
        if (sandbox_error_is_set(&j->error))
                snapshot_job_fail(j);
        /* Paused before: frozen again, and answered once it is. Not one released meanwhile
         * (recycle.c): it is being reset, or kept for a next user, who gets it running. */
        if (j->repause && sandbox_get_state(j->sandbox) == SANDBOX_RUNNING && !sandbox_is_released(j->sandbox) &&
            sandbox_pause(j->sandbox, on_repaused, j, NULL) >= 0)
                j->repausing = true;
        j->sandbox = NULL; /* may be gone by the time the stream ends */
        snapshot_job_maybe_finish(j);
}

static int snapshot_generate_id(Manager *m, char ret[static SNAPSHOT_ID_LEN + 1]) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                _cleanup_free_ char *path = NULL;
                uint8_t b[SNAPSHOT_ID_LEN / 2];

                if (getrandom(b, sizeof(b), 0) != sizeof(b))
                        return -EIO;
                for (size_t i = 0; i < sizeof(b); i++)
                        sprintf(ret + 2 * i, "%02x", b[i]);
                if (snapshot_path(m, ret, ".json", &path) < 0)
                        return -ENOMEM;
                if (access(path, F_OK) < 0 && errno == ENOENT)
                        return 0;
        }
        return -EEXIST;
}

/* Starts the agent's archive into a pipe; the job takes over. */
static int snapshot_job_start(SnapshotJob *j, SandboxError *error) {
        Sandbox *s = j->sandbox;
        int p[2], r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        j->pipe_fd = p[0];
        (void) fcntl(p[0], F_SETFL, O_NONBLOCK);
        (void) fcntl(p[0], F_SETPIPE_SZ, SNAPSHOT_SPLICE_CHUNK);
        r = sd_event_add_io(j->manager->event, &j->io, p[0], EPOLLIN, on_stream, j);
        if (r < 0) {
                safe_close(p[1]);
                return r;
        }
        /* The agent stops at DiskMax (per directory archived): what it could not restore
         * into a sandbox like this one, it does not take. */
        return sandbox_archive(s, p[1], j->meta.tmp, j->meta.config.disk_max * (j->meta.tmp ? 2 : 1),
                               on_archived, j, &j->op, error);
}

static void on_resumed_for_snapshot(Sandbox *s, const SandboxError *error, void *userdata) {
        SnapshotJob *j = userdata;
        int r;

        if (!error) {
                r = snapshot_job_start(j, &j->error);
                if (r >= 0)
                        return;
                if (!sandbox_error_is_set(&j->error))
                        sandbox_error_set_errno(&j->error, -r, "Failed to start the snapshot: %m");
        } else
                sandbox_error_set(&j->error, error->code, "%s", sandbox_error_message(error));
        j->op_done = true;
        snapshot_job_maybe_finish(j);
}

static int sandbox_snapshot_full(Sandbox *s, const SnapshotOptions *o, SnapshotEventCause cause,
                                 snapshot_callback_t cb, void *userdata, SandboxError *error) {
        bool hibernate = cause == SNAPSHOT_CAUSE_HIBERNATE;
        Manager *m = s->manager;
        SnapshotJob *j;
        uint64_t used, count, room, troom;
        bool by_tenant;
        int r;

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.", s->id,
                                         sandbox_state_to_string(s->state));
        if (sandbox_freeze_pending(s))
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "Sandbox %s is being paused or resumed.", s->id);

        r = snapshot_usage_owner(m, s->owner, &used, &count);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to read the snapshots in %s: %m", snapshots_dir(m));
        r = snapshot_quota_room(used, count, m->settings.snapshots.max_bytes_per_owner,
                                m->settings.snapshots.max_per_owner, &room);
        if (r < 0) {
                bool by_count = m->settings.snapshots.max_per_owner > 0 && count >= m->settings.snapshots.max_per_owner;

                return sandbox_error_set_quota(error, quota_item_to_string(by_count ? QUOTA_SNAPSHOTS : QUOTA_SNAPSHOT_BYTES),
                                         by_count ? m->settings.snapshots.max_per_owner
                                                  : m->settings.snapshots.max_bytes_per_owner,
                                         by_count ? count : used,
                                         "Owner %u has %" PRIu64 " snapshot(s) of %" PRIu64 " bytes; the quota "
                                         "(sandboxd.conf(5)) is %" PRIu64 " snapshot(s), %" PRIu64 " bytes.",
                                         s->owner, count, used, m->settings.snapshots.max_per_owner,
                                         m->settings.snapshots.max_bytes_per_owner);
        }
        r = snapshot_tenant_room(m, s->config.tenant, &used, &count, &troom);
        if (r == -EDQUOT) {
                const QuotaLimits *l = &m->settings.tenancy.quota.tenant;
                bool by_count = l->snapshots > 0 && count >= l->snapshots;

                return sandbox_error_set_quota(error, quota_item_to_string(by_count ? QUOTA_SNAPSHOTS : QUOTA_SNAPSHOT_BYTES),
                                               by_count ? l->snapshots : l->snapshot_bytes, by_count ? count : used,
                                               "Tenant %s has %" PRIu64 " snapshot(s) of %" PRIu64 " bytes; the quota "
                                               "([TenantQuota], sandboxd.conf(5)) is %" PRIu64 " snapshot(s), %" PRIu64
                                               " bytes.", s->config.tenant, count, used, l->snapshots, l->snapshot_bytes);
        }
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to read the snapshots in %s: %m", snapshots_dir(m));
        by_tenant = troom < room;
        room = MIN(room, troom);

        j = calloc(1, sizeof(SnapshotJob));
        if (!j)
                return -ENOMEM;
        *j = (SnapshotJob) {
                .manager = m,
                .sandbox = s,
                .file_fd = -EBADF,
                .pipe_fd = -EBADF,
                .room = MIN(room, m->settings.tenancy.limits.snapshot_max ?: UINT64_MAX),
                .room_is_max = m->settings.tenancy.limits.snapshot_max && m->settings.tenancy.limits.snapshot_max < room,
                .room_is_tenant = by_tenant,
                .cause = cause,
                .cb = cb,
                .userdata = userdata,
                .repause = s->state == SANDBOX_PAUSED && !hibernate,
                .meta = {
                        .config = s->config,
                        .owner = s->owner,
                        .created = now_usec(CLOCK_REALTIME),
                        .tmp = o && o->include_tmp,
                        .hibernated = hibernate,
                },
        };
        j->meta.config.reuse_existing = false;
        /* A snapshot keeps no egress rules (snapshot-meta.c), and the copy is not the owner. */
        j->meta.config.egress_allow = j->meta.config.egress_deny = NULL;
        /* Nor secret bindings, but a hibernation's given at create (names: the values stay
         * in the store), so that Wake binds them again; others take their template's. */
        j->meta.config.secrets = NULL;
        j->meta.config.secrets_set = hibernate && s->config.secrets_set;
        if (j->meta.config.secrets_set && s->config.secrets && !(j->meta.config.secrets = strdup(s->config.secrets))) {
                free(j);
                return -ENOMEM;
        }
        j->meta.config.from_snapshot[0] = 0;
        /* Its labels are kept, so that a sandbox woken has them again. */
        j->meta.config.labels = NULL;
        if (s->config.labels && !(j->meta.config.labels = strv_copy(s->config.labels))) {
                free(j->meta.config.secrets);
                free(j);
                return -ENOMEM;
        }
        /* Hibernated, its code contexts are listed again after Wake, lost (docs/CONTEXTS.md). */
        if (hibernate && s->contexts && !(j->meta.contexts = sandbox_contexts_to_json(s))) {
                strv_free(j->meta.config.labels);
                free(j->meta.config.secrets);
                free(j);
                return -ENOMEM;
        }
        strcpy(j->meta.source, s->id);
        j->meta.template_name = strdup(s->template_name);
        r = j->meta.template_name ? snapshot_generate_id(m, j->meta.id) : -ENOMEM;
        if (r >= 0)
                r = snapshot_path(m, j->meta.id, ".tar.zst.partial", &j->partial);
        if (r < 0) {
                snapshot_job_free(j);
                return r;
        }
        j->file_fd = open(j->partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (j->file_fd < 0) {
                r = sandbox_error_set_errno(error, errno, "Failed to create %s: %m", j->partial);
                j->partial = mfree(j->partial);
                snapshot_job_free(j);
                return r;
        }

        if (s->state == SANDBOX_PAUSED) {
                /* The agent is frozen with the rest: thawed for the snapshot, frozen again
                 * after (unless it is to go). */
                r = sandbox_resume(s, on_resumed_for_snapshot, j, error);
        } else
                r = snapshot_job_start(j, error);
        if (r < 0) {
                snapshot_job_free(j);
                return sandbox_error_is_set(error) ? r :
                        sandbox_error_set_errno(error, -r, "Failed to start the snapshot: %m");
        }
        manager_turn_taken(m, j->meta.owner, j->meta.config.tenant);
        j->turn = true;
        log_sandbox(s, LOG_INFO, 0, "Taking snapshot %s of sandbox %s.", j->meta.id, s->id);
        return 0;
}

/* A snapshot waiting for its owner's (tenant's) turn (manager-quota.h). */

typedef struct SnapshotTurn {
        Manager *manager;
        bool counted;                   /* in its sandbox's snapshot_turns_waiting */
        char sandbox[SANDBOX_ID_LEN + 1];
        SnapshotOptions options;
        bool has_options;
        SnapshotEventCause cause;
        snapshot_callback_t cb;
        void *userdata;
} SnapshotTurn;

/* The turn no longer waits: its sandbox's count goes down (once). */
static void snapshot_turn_leaves(SnapshotTurn *t) {
        Sandbox *s = t->counted ? manager_find_sandbox(t->manager, t->sandbox) : NULL;

        if (s && s->snapshot_turns_waiting > 0)
                s->snapshot_turns_waiting--;
        t->counted = false;
}

static int on_snapshot_turn(Manager *m, void *data, SandboxError *error) {
        SnapshotTurn *t = data;
        Sandbox *s = manager_find_sandbox(m, t->sandbox);
        int r;

        snapshot_turn_leaves(t);
        /* Everything is checked again now: the sandbox may have gone or changed meanwhile. */
        if (!s)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX,
                                         "Sandbox %s ended while its snapshot waited.", t->sandbox);
        r = sandbox_snapshot_full(s, t->has_options ? &t->options : NULL, t->cause, t->cb, t->userdata, error);
        if (r >= 0)
                free(t);
        return r;
}

static void on_snapshot_turn_failed(void *data, const SandboxError *error) {
        SnapshotTurn *t = data;

        snapshot_turn_leaves(t);
        t->cb(NULL, error, t->userdata);
        free(t);
}

/* Now, or once its owner (tenant) has a turn free: StartsInFlight= for snapshots as for
 * creates, one queue for both (docs/QUOTAS.md). */
static int sandbox_snapshot_queued(Sandbox *s, const SnapshotOptions *o, SnapshotEventCause cause,
                                   snapshot_callback_t cb, void *userdata, SandboxError *error) {
        SnapshotTurn *t;
        int r;

        if (manager_turn_free(s->manager, s->owner, s->config.tenant))
                return sandbox_snapshot_full(s, o, cause, cb, userdata, error);
        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.", s->id,
                                         sandbox_state_to_string(s->state));
        if (s->snapshot_turns_waiting >= SNAPSHOT_TURNS_WAITING_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "%u snapshots (forks, hibernations) of sandbox %s wait for their turn "
                                         "already (StartsInFlight=); try again later.", SNAPSHOT_TURNS_WAITING_MAX, s->id);
        t = calloc(1, sizeof(SnapshotTurn));
        if (!t)
                return sandbox_error_set_errno(error, ENOMEM, "Out of memory.");
        t->manager = s->manager;
        snprintf(t->sandbox, sizeof(t->sandbox), "%s", s->id);
        if (o) {
                t->options = *o;
                t->has_options = true;
        }
        t->cause = cause;
        t->cb = cb;
        t->userdata = userdata;
        r = manager_turn_wait(s->manager, s->owner, s->config.tenant, on_snapshot_turn, on_snapshot_turn_failed, t,
                              error);
        if (r < 0) {
                free(t);
                return r;
        }
        s->snapshot_turns_waiting++;
        t->counted = true;
        return r;
}

int sandbox_snapshot(Sandbox *s, const SnapshotOptions *o, snapshot_callback_t cb, void *userdata,
                     SandboxError *error) {
        assert_return(s, -EINVAL);

        return sandbox_snapshot_queued(s, o, SNAPSHOT_CAUSE_SNAPSHOT, cb, userdata, error);
}

/* ---- Hibernate ---- */

typedef struct HibernateJob {
        Manager *manager;
        SnapshotMeta meta;
        snapshot_callback_t cb;
        void *userdata;
} HibernateJob;

static void on_hibernate_destroyed(Sandbox *s, const SandboxError *error, void *userdata) {
        HibernateJob *h = userdata;

        /* Gone, one way or another: the snapshot is what remains of it. */
        h->cb(&h->meta, NULL, h->userdata);
        snapshot_meta_done(&h->meta);
        free(h);
}

static void on_hibernate_snapshot(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        HibernateJob *h = userdata;
        Sandbox *s;
        int r;

        if (error) {
                h->cb(NULL, error, h->userdata);
                free(h);
                return;
        }
        /* A copy of its own: snapshot_meta_done() frees it below, the job's meta apart. */
        h->meta = *meta;
        h->meta.template_name = strdup(meta->template_name);
        h->meta.config.labels = meta->config.labels ? strv_copy(meta->config.labels) : NULL;
        h->meta.config.secrets = meta->config.secrets ? strdup(meta->config.secrets) : NULL;
        h->meta.contexts = json_object_get(meta->contexts);
        s = manager_find_sandbox(h->manager, meta->source);
        if (!s || !h->meta.template_name) {
                /* It ended meanwhile: hibernated all the same. */
                on_hibernate_destroyed(NULL, NULL, h);
                return;
        }
        /* What its record (and an exec still running) gives as the reason it ended. */
        if (!s->failure && asprintf(&s->failure, "hibernated as snapshot %s", meta->id) < 0)
                s->failure = NULL;
        r = sandbox_destroy(s, on_hibernate_destroyed, h);
        if (r < 0)
                on_hibernate_destroyed(NULL, NULL, h);
        else
                log_sandbox(s, LOG_INFO, 0, "Sandbox %s hibernated as snapshot %s.", s->id, meta->id);
}

static void on_hibernated_on_disk(Sandbox *s, const SandboxError *error, void *userdata) {
        HibernateJob *h = userdata;

        h->cb(error ? NULL : &h->meta, error, h->userdata);
        snapshot_meta_done(&h->meta);
        free(h);
}

int snapshot_meta_of_workspace(Sandbox *s, SnapshotMeta *ret) {
        SnapshotMeta meta = { .owner = s->owner, .created = now_usec(CLOCK_REALTIME), .hibernated = true,
                              .tmp = true };

        strcpy(meta.id, s->id);
        strcpy(meta.source, s->id);
        (void) workspace_usage(s->manager->workspaces, s->id, &s->workspace_qgroup, &meta.content_size, NULL);
        meta.template_name = strdup(s->template_name);
        if (!meta.template_name || sandbox_config_copy(&meta.config, &s->config) < 0) {
                snapshot_meta_done(&meta);
                return -ENOMEM;
        }
        /* A snapshot's record keeps no egress rules (as a snapshot job's does not), and
         * snapshot_meta_done() frees none; a hibernation's keeps its secret bindings given at
         * create (names), for a Wake after a move. */
        meta.config.egress_allow = mfree(meta.config.egress_allow);
        meta.config.egress_deny = mfree(meta.config.egress_deny);
        if (!meta.config.secrets_set)
                meta.config.secrets = mfree(meta.config.secrets);
        *ret = meta;
        return 0;
}

/* On disk, Hibernate is "stop the processes, keep the directory": no archive, the
 * sandbox listed as stopped, and Wake starts it again in its workspace. What the caller
 * gets is the SnapshotInfo of no archive: an empty id, hibernated, the files' bytes. */
static int sandbox_hibernate_on_disk(Sandbox *s, snapshot_callback_t cb, void *userdata, SandboxError *error) {
        HibernateJob *h;
        int r;

        if (sandbox_freeze_pending(s))
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "Sandbox %s is being paused or resumed.", s->id);
        h = calloc(1, sizeof(HibernateJob));
        if (!h)
                return -ENOMEM;
        *h = (HibernateJob) { .manager = s->manager, .cb = cb, .userdata = userdata };
        if (snapshot_meta_of_workspace(s, &h->meta) < 0) {
                free(h);
                return -ENOMEM;
        }
        h->meta.id[0] = 0; /* no archive */
        r = sandbox_stop_keeping_files(s, on_hibernated_on_disk, h);
        if (r < 0) {
                snapshot_meta_done(&h->meta);
                free(h);
                if (r == -EBUSY)
                        return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.",
                                                 s->id, sandbox_state_to_string(s->state));
                return sandbox_error_set_errno(error, -r, "Failed to stop sandbox %s: %m", s->id);
        }
        log_sandbox(s, LOG_INFO, 0, "Sandbox %s hibernating: its processes stop, its files stay on disk.", s->id);
        return 0;
}

int sandbox_hibernate(Sandbox *s, const SnapshotOptions *o, snapshot_callback_t cb, void *userdata,
                      SandboxError *error) {
        HibernateJob *h;
        int r;

        assert_return(s, -EINVAL);

        if (s->workspace && s->manager->workspaces && !s->config.ephemeral && !sandbox_is_pooled(s))
                return sandbox_hibernate_on_disk(s, cb, userdata, error);
        h = calloc(1, sizeof(HibernateJob));
        if (!h)
                return -ENOMEM;
        h->manager = s->manager;
        h->cb = cb;
        h->userdata = userdata;
        r = sandbox_snapshot_queued(s, o, SNAPSHOT_CAUSE_HIBERNATE, on_hibernate_snapshot, h, error);
        if (r < 0)
                free(h);
        return r;
}

/* ---- restoring: CreateSandbox with FromSnapshot, Fork, Wake ---- */

typedef struct RestoreJob {
        Manager *manager;
        Sandbox *sandbox;          /* once started */
        char snapshot[SNAPSHOT_ID_LEN + 1];
        SnapshotMeta meta;         /* for the record; without its template_name */
        bool tmp;
        bool consume;              /* the snapshot goes once restored (Fork, Wake) */
        SnapshotEventCause cause;  /* CreateSandbox, Fork or Wake */
        sandbox_callback_t cb;
        void *userdata;
} RestoreJob;

static void restore_job_free(RestoreJob *rj) {
        json_object_put(rj->meta.contexts);
        free(rj);
}

static void restore_failed(RestoreJob *rj, Sandbox *s, const SandboxError *error) {
        rj->cb(s, error, rj->userdata);
        /* Half restored is not restored: the sandbox goes. */
        (void) sandbox_destroy(s, NULL, NULL);
        restore_job_free(rj);
}

static void on_extracted(const struct agent_file_result *result, const void *data, size_t size,
                         const SandboxError *error, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        RestoreJob *rj = userdata;
        Sandbox *s = rj->sandbox;

        if (error) {
                if (error->code == SANDBOX_ERR_FILE_TOO_LARGE)
                        sandbox_error_set(&e, SANDBOX_ERR_SNAPSHOT_TOO_LARGE,
                                          "Snapshot %s holds more than the DiskMax of sandbox %s (%" PRIu64 " bytes).",
                                          rj->snapshot, s->id, s->config.disk_max);
                else
                        sandbox_error_set(&e, agent_error_code(error),
                                          "Failed to restore snapshot %s into sandbox %s: %s", rj->snapshot, s->id,
                                          sandbox_error_message(error));
                restore_failed(rj, s, &e);
                return;
        }
        log_sandbox(s, LOG_INFO, 0, "Sandbox %s restored from snapshot %s (%" PRIu64 " bytes of files).", s->id,
                    rj->snapshot, result->bytes);
        snapshot_record(rj->manager, &rj->meta, SNAPSHOT_EVENT_RESTORED, rj->cause, s->id);
        if (rj->consume)
                (void) snapshot_remove_because(rj->manager, rj->snapshot, rj->cause);
        if (rj->cause == SNAPSHOT_CAUSE_WAKE && rj->meta.contexts) {
                sandbox_contexts_add_lost(s, rj->meta.contexts, CONTEXT_LOST_HIBERNATED);
                if (s->saved)
                        sandbox_save(s);
        }
        rj->cb(s, NULL, rj->userdata);
        restore_job_free(rj);
}

static void on_restore_started(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        RestoreJob *rj = userdata;
        int fd, r;

        if (error) {
                rj->cb(s, error, rj->userdata);
                restore_job_free(rj);
                return;
        }
        rj->sandbox = s;
        r = snapshot_path(rj->manager, rj->snapshot, ".tar.zst", &path);
        if (r < 0) {
                sandbox_error_set_errno(&e, -r, "Failed to restore snapshot %s: %m", rj->snapshot);
                restore_failed(rj, s, &e);
                return;
        }
        /* Read-only, and only the stream: the agent reads what we give it, nothing else
         * of ours. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                sandbox_error_set(&e, SANDBOX_ERR_NO_SUCH_SNAPSHOT, "Snapshot %s is gone: %s", rj->snapshot,
                                  strerror(errno));
                restore_failed(rj, s, &e);
                return;
        }
        r = sandbox_extract(s, fd, rj->tmp, s->config.disk_max * (rj->tmp ? 2 : 1), on_extracted, rj, NULL, &e);
        if (r < 0) {
                if (!sandbox_error_is_set(&e))
                        sandbox_error_set_errno(&e, -r, "Failed to restore snapshot %s: %m", rj->snapshot);
                restore_failed(rj, s, &e);
        }
}

/* Starts a sandbox of t for owner from snapshot meta. */
static int create_from_meta(Manager *m, const Template *t, SandboxConfig *config, uid_t owner,
                            const SnapshotMeta *meta, bool consume, SnapshotEventCause cause, sandbox_callback_t cb,
                            void *userdata, SandboxError *error) {
        RestoreJob *rj;
        int r;

        r = manager_config_resolve(m, t, config, error);
        if (r < 0)
                return r;
        /* Before anything starts: what cannot fit is refused here. */
        if (meta->content_size > config->disk_max * (meta->tmp ? 2 : 1))
                return sandbox_error_set(error, SANDBOX_ERR_SNAPSHOT_TOO_LARGE,
                                         "Snapshot %s holds %" PRIu64 " bytes of files, more than the new sandbox's "
                                         "DiskMax of %" PRIu64 " bytes%s; give a larger DiskMax.", meta->id,
                                         meta->content_size, config->disk_max,
                                         meta->tmp ? " (each of /work, /tmp)" : "");
        if (m->n_sandboxes >= m->settings.max_sandboxes)
                return manager_error_too_many(m, error);

        rj = calloc(1, sizeof(RestoreJob));
        if (!rj)
                return -ENOMEM;
        *rj = (RestoreJob) { .manager = m, .meta = *meta, .tmp = meta->tmp, .consume = consume, .cause = cause,
                             .cb = cb, .userdata = userdata };
        rj->meta.template_name = NULL;
        rj->meta.config.secrets = NULL;         /* the caller's, and not needed */
        rj->meta.contexts = json_object_get(meta->contexts);
        strcpy(rj->snapshot, meta->id);
        r = manager_start_sandbox(m, t, config, owner, false, on_restore_started, rj, error);
        if (r < 0)
                restore_job_free(rj);
        return r;
}

int snapshot_create_sandbox(Manager *m, const SandboxCaller *caller, const Template *t, SandboxConfig *config,
                            sandbox_callback_t cb, void *userdata, SandboxError *error) {
        _cleanup_(snapshot_meta_done) SnapshotMeta meta = {};
        int r;

        r = lookup_snapshot(m, caller, config->from_snapshot, snapshot_usable, &meta, error);
        if (r < 0)
                return r;
        return create_from_meta(m, t, config, caller->uid, &meta, false, SNAPSHOT_CAUSE_CREATE, cb, userdata, error);
}

typedef struct ForkJob {
        Manager *manager;
        uid_t uid;
        char tenant[SANDBOX_NAME_MAX + 1];
        SandboxConfig config;
        sandbox_callback_t cb;
        void *userdata;
} ForkJob;

static void fork_job_free(ForkJob *fj) {
        sandbox_config_done(&fj->config);
        free(fj);
}

static void on_fork_snapshot(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        ForkJob *fj = userdata;
        const Template *t;
        int r;

        if (error) {
                fj->cb(NULL, error, fj->userdata);
                fork_job_free(fj);
                return;
        }
        t = template_set_find(&fj->manager->templates, meta->template_name);
        if (!t)
                r = sandbox_error_set(&e, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%s' any more.",
                                      meta->template_name);
        else {
                /* Checked when asked; other creates and forks may have started while the
                 * snapshot was taken. */
                r = manager_quota_recheck(fj->manager, t, fj->uid, &fj->config, &e);
                if (r >= 0)
                        r = create_from_meta(fj->manager, t, &fj->config, fj->uid, meta, true, SNAPSHOT_CAUSE_FORK,
                                             fj->cb, fj->userdata, &e);
        }
        if (r < 0) {
                (void) snapshot_remove_because(fj->manager, meta->id, SNAPSHOT_CAUSE_FORK);
                if (!sandbox_error_is_set(&e))
                        sandbox_error_set_errno(&e, -r, "Failed to fork: %m");
                fj->cb(NULL, &e, fj->userdata);
        }
        fork_job_free(fj);
}

static int fork_on_disk(Manager *m, const SandboxCaller *caller, Sandbox *source, SandboxConfig *c,
                        sandbox_callback_t cb, void *userdata, SandboxError *error) {
        const Template *t = template_set_find(&m->templates, source->template_name);
        uint64_t used = 0;

        if (!t)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%s' any more.",
                                         source->template_name);
        if (workspace_usage(m->workspaces, source->id, &source->workspace_qgroup, &used, NULL) >= 0 && used > c->disk_max)
                return sandbox_error_set(error, SANDBOX_ERR_SNAPSHOT_TOO_LARGE,
                                         "The files of sandbox %s take %" PRIu64 " bytes, more than the fork's "
                                         "DiskMax of %" PRIu64 " bytes; give a larger DiskMax.", source->id, used,
                                         c->disk_max);
        if (m->n_sandboxes >= m->settings.max_sandboxes)
                return manager_error_too_many(m, error);
        c->limits.storage = STORAGE_DISK;
        strcpy(c->fork_from, source->id);
        log_sandbox(source, LOG_INFO, 0, "Forking sandbox %s by a snapshot of its workspace.", source->id);
        return manager_start_sandbox(m, t, c, caller->uid, false, cb, userdata, error);
}

int snapshot_fork_sandbox(Manager *m, const SandboxCaller *caller, Sandbox *source, const SandboxConfig *config,
                          sandbox_callback_t cb, void *userdata, SandboxError *error) {
        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(source, -EINVAL);
        assert_return(config, -EINVAL);
        assert_return(cb, -EINVAL);

        const SandboxConfig *sc = &source->config;
        const Template *t;
        ForkJob *fj;
        int r;

        fj = calloc(1, sizeof(ForkJob));
        if (!fj)
                return -ENOMEM;
        *fj = (ForkJob) { .manager = m, .uid = caller->uid, .cb = cb, .userdata = userdata };
        if (sandbox_config_copy(&fj->config, config) < 0) {
                free(fj);
                return -ENOMEM;
        }
        /* What the call leaves unset is the source's; the fork is for the source's tenant,
         * and has a name only if it is given one. */
        SandboxConfig *c = &fj->config;
        if (sandbox_config_inherit(c, sc) < 0) {
                fork_job_free(fj);
                return -ENOMEM;
        }
        strcpy(c->tenant, sc->tenant);
        c->reuse_existing = false;
        c->from_snapshot[0] = 0;
        c->wake_id[0] = 0;
        if (!isempty(c->name) && manager_find_named(m, caller->uid, c->tenant, c->name)) {
                /* The message first: c is fj's. */
                r = sandbox_error_set(error, SANDBOX_ERR_SANDBOX_EXISTS, "A sandbox named '%s' exists already.",
                                      c->name);
                fork_job_free(fj);
                return r;
        }
        /* A new sandbox of the caller's (for the source's tenant): its maxima and quota,
         * before the snapshot is taken. */
        t = template_set_find(&m->templates, source->template_name);
        r = t ? manager_quota_check(m, t, caller->uid, c, error) : 0;
        if (r < 0) {
                fork_job_free(fj);
                return r;
        }
        if (source->workspace && m->workspaces && c->limits.storage != STORAGE_TMPFS &&
            (source->state == SANDBOX_RUNNING || source->state == SANDBOX_PAUSED)) {
                /* On disk: the fork's workspace is a snapshot of the source's, nothing copied
                 * (docs/WORKSPACES.md); its files are the source's as they are on disk. */
                r = fork_on_disk(m, caller, source, c, cb, userdata, error);
                fork_job_free(fj);
                return r;
        }
        r = sandbox_snapshot_queued(source, NULL, SNAPSHOT_CAUSE_FORK, on_fork_snapshot, fj, error);
        if (r < 0)
                fork_job_free(fj);
        return r;
}

int snapshot_wake_sandbox(Manager *m, const SandboxCaller *caller, const char *id_or_name, sandbox_callback_t cb,
                          void *userdata, SandboxError *error) {
        _cleanup_(snapshot_meta_done) SnapshotMeta meta = {};
        _cleanup_(sandbox_config_done) SandboxConfig config = {};
        const Template *t;
        Sandbox *s;
        int r;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(id_or_name, -EINVAL);
        assert_return(cb, -EINVAL);

        s = manager_find_stopped(m, caller, id_or_name);
        if (s) {
                if (!template_set_find(&m->templates, s->template_name))
                        return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%s' any more.",
                                                 s->template_name);
                /* Its files change from now on: an export of them under way ends. */
                workspace_export_cancel(m, s->id);
                r = sandbox_wake_stopped(s, cb, userdata);
                if (r < 0)
                        return sandbox_error_set_errno(error, r, "Failed to start sandbox %s again: %m", s->id);
                return 0;
        }
        r = snapshot_lookup_hibernated(m, caller, id_or_name, &meta, error);
        if (r < 0)
                return r;
        if (manager_find_sandbox(m, meta.source))
                return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_EXISTS, "Sandbox %s is awake already.",
                                         meta.source);
        if (!isempty(meta.config.name) && manager_find_named(m, meta.owner, meta.config.tenant, meta.config.name))
                return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_EXISTS,
                                         "A sandbox named '%s' exists already; it cannot wake.", meta.config.name);
        t = template_set_find(&m->templates, meta.template_name);
        if (!t)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%s' any more.",
                                         meta.template_name);
        if (sandbox_config_copy(&config, &meta.config) < 0)
                return -ENOMEM;
        strcpy(config.wake_id, meta.source);
        /* Back for its owner (and tenant): within their quota, as a create. */
        r = manager_quota_check(m, t, meta.owner, &config, error);
        if (r < 0)
                return r;
        return create_from_meta(m, t, &config, meta.owner, &meta, true, SNAPSHOT_CAUSE_WAKE, cb, userdata, error);
}

/* ---- moving: export and import in parts ---- */

/* What an export of id_or_name reads: the hibernated sandbox's archive; else, the snapshot
 * of that id (the caller's to restore), exported as a hibernated sandbox's, so that an
 * import makes of it a sandbox that wakes (a backup of a running sandbox: docs/SCALE-OUT.md). */
static int export_lookup(Manager *m, const SandboxCaller *caller, const char *id_or_name, SnapshotMeta *ret,
                         SandboxError *error) {
        int r;

        r = snapshot_lookup_hibernated(m, caller, id_or_name, ret, error);
        if (r >= 0 || error->code != SANDBOX_ERR_NO_SUCH_SANDBOX || !snapshot_id_is_valid(id_or_name))
                return r;
        sandbox_error_done(error);
        r = lookup_snapshot(m, caller, id_or_name, snapshot_usable, ret, error);
        if (r < 0)
                return r;
        ret->hibernated = true;
        return 0;
}

int snapshot_export_access(Manager *m, const SandboxCaller *caller, const char *id_or_name, SnapshotMeta *meta,
                           uid_t *ret_owner, const char **ret_tenant, SandboxError *error) {
        SandboxCaller any = *caller;
        int r;

        r = snapshot_call_access(m, caller, id_or_name, true, meta, ret_owner, ret_tenant, error);
        if (r >= 0 || error->code != SANDBOX_ERR_NO_SUCH_SANDBOX || !snapshot_id_is_valid(id_or_name))
                return r;
        /* A snapshot of that id, found whoever owns it: polkit decides about another's, and
         * the export itself takes only what the caller may restore. */
        sandbox_error_done(error);
        any.granted = true;
        snapshot_meta_done(meta);
        r = lookup_snapshot(m, &any, id_or_name, snapshot_visible, meta, error);
        if (r < 0)
                return r;
        *ret_owner = meta->owner;
        *ret_tenant = meta->config.tenant;
        return 0;
}

int snapshot_export_read(Manager *m, const SandboxCaller *caller, const char *id_or_name, uint64_t offset,
                         size_t length, workspace_export_callback_t cb, void *userdata, SandboxError *error) {
        _cleanup_(snapshot_meta_done) SnapshotMeta meta = {};
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        Sandbox *s;
        ssize_t n;
        int r;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(id_or_name, -EINVAL);
        assert_return(cb, -EINVAL);

        /* On disk: no archive to read, one made as it is read (workspace-export.h). */
        s = manager_find_stopped(m, caller, id_or_name);
        if (s)
                return workspace_export_read(m, s, offset, length, cb, userdata, error);
        r = export_lookup(m, caller, id_or_name, &meta, error);
        if (r < 0)
                return r;
        if (snapshot_path(m, meta.id, ".tar.zst", &path) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return sandbox_error_set_errno(error, errno, "Failed to open snapshot %s: %m", meta.id);
        buf = malloc(MAX(length, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        n = length > 0 ? pread(fd, buf, length, (off_t) offset) : 0;
        if (n < 0)
                return sandbox_error_set_errno(error, errno, "Failed to read snapshot %s: %m", meta.id);
        cb(&meta, buf, (size_t) n, NULL, userdata);
        return 0;
}

typedef struct SnapshotImport {
        struct SnapshotImport *next;
        SnapshotMeta meta;         /* its id, source (the new sandbox id), owner, tenant */
        char *partial;
        int fd;
        uint64_t written;
        uint64_t room;             /* what the quotas left at its start */
        uint64_t last_usec;        /* CLOCK_MONOTONIC of its last part */
} SnapshotImport;

static void snapshot_import_free(SnapshotImport *i) {
        safe_close(i->fd);
        if (i->partial)
                (void) unlink(i->partial);
        free(i->partial);
        snapshot_meta_done(&i->meta);
        free(i);
}

static void snapshot_import_unlink(Manager *m, SnapshotImport *i) {
        for (SnapshotImport **p = &m->snapshot_imports; *p; p = &(*p)->next)
                if (*p == i) {
                        *p = i->next;
                        break;
                }
        snapshot_import_free(i);
}

static void snapshot_imports_expire(Manager *m) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        for (SnapshotImport **p = &m->snapshot_imports; *p;) {
                SnapshotImport *i = *p;
                if (now - i->last_usec < SNAPSHOT_IMPORT_IDLE_USEC) {
                        p = &i->next;
                        continue;
                }
                log_info("Import of sandbox %s abandoned after %llu bytes, removed.", i->meta.source,
                         (unsigned long long) i->written);
                *p = i->next;
                snapshot_import_free(i);
        }
}

static bool sandbox_id_taken(Manager *m, const char *id) {
        SnapshotMeta *a;
        size_t n;
        bool taken = manager_find_sandbox(m, id);

        for (SnapshotImport *i = m->snapshot_imports; i && !taken; i = i->next)
                taken = streq(i->meta.source, id);
        if (taken || snapshots_load_all(m, &a, &n) < 0)
                return taken;
        for (size_t k = 0; k < n && !taken; k++)
                taken = a[k].hibernated && streq(a[k].source, id);
        snapshot_meta_array_free(a, n);
        return taken;
}

static int snapshot_import_start(Manager *m, const SandboxCaller *caller, const char *meta_json,
                                 SnapshotImport **ret, SandboxError *error) {
        SnapshotMeta meta = {};
        SnapshotImport *i;
        uint64_t used, count, room_owner, room_tenant;
        uint8_t b[SANDBOX_ID_LEN / 2];
        int r;

        if (!meta_json || snapshot_meta_from_json(meta_json, &meta) < 0)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "The import's first part needs the exported record (meta).");
        if (!meta.hibernated || !meta.template_name) {
                snapshot_meta_done(&meta);
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "The record is not a hibernated sandbox's.");
        }
        /* The caller's, for the tenant it acts for, whoever had it on the other node. */
        meta.owner = caller->uid;
        if (strlen(strempty(caller->tenant)) >= sizeof(meta.config.tenant)) {
                snapshot_meta_done(&meta);
                return -EINVAL;
        }
        strcpy(meta.config.tenant, strempty(caller->tenant));
        meta.size = 0;
        r = snapshot_generate_id(m, meta.id);
        for (unsigned attempt = 0; r >= 0; attempt++) {
                if (attempt == 16) {
                        r = -EEXIST;
                        break;
                }
                if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
                        r = -EIO;
                        break;
                }
                sandbox_id_format(b, m->settings.fleet_node, meta.source);
                if (!sandbox_id_taken(m, meta.source))
                        break;
        }
        if (r < 0) {
                snapshot_meta_done(&meta);
                return r;
        }
        r = snapshot_usage_owner(m, meta.owner, &used, &count);
        if (r >= 0)
                r = snapshot_quota_room(used, count, m->settings.snapshots.max_bytes_per_owner,
                                        m->settings.snapshots.max_per_owner, &room_owner);
        if (r >= 0)
                r = snapshot_tenant_room(m, meta.config.tenant, &used, &count, &room_tenant);
        if (r < 0) {
                snapshot_meta_done(&meta);
                if (r == -EDQUOT)
                        return sandbox_error_set(error, SANDBOX_ERR_QUOTA_EXCEEDED,
                                                 "No room for one more snapshot: the import is refused.");
                return r;
        }
        i = calloc(1, sizeof(SnapshotImport));
        if (!i) {
                snapshot_meta_done(&meta);
                return -ENOMEM;
        }
        i->meta = meta;
        i->fd = -EBADF;
        i->room = MIN(room_owner, room_tenant);
        i->last_usec = now_usec(CLOCK_MONOTONIC);
        if (snapshot_path(m, i->meta.id, ".tar.zst.partial", &i->partial) < 0) {
                snapshot_import_free(i);
                return -ENOMEM;
        }
        i->fd = open(i->partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
        if (i->fd < 0) {
                r = -errno;
                i->partial = mfree(i->partial);
                snapshot_import_free(i);
                return sandbox_error_set_errno(error, -r, "Failed to create the imported snapshot: %m");
        }
        i->next = m->snapshot_imports;
        m->snapshot_imports = i;
        *ret = i;
        return 0;
}

static int snapshot_import_commit(Manager *m, SnapshotImport *i, SandboxError *error) {
        _cleanup_free_ char *data = NULL, *meta = NULL, *tmp = NULL, *text = NULL;
        uint64_t used, count, room;
        int r;

        if (fsync(i->fd) < 0)
                return sandbox_error_set_errno(error, errno, "Failed to write the imported snapshot: %m");
        i->meta.size = i->written;
        /* Once more against what is stored now, as a snapshot's commit. */
        r = snapshot_usage_owner(m, i->meta.owner, &used, &count);
        if (r >= 0)
                r = snapshot_quota_room(used, count, m->settings.snapshots.max_bytes_per_owner,
                                        m->settings.snapshots.max_per_owner, &room);
        if (r >= 0 && i->meta.size > room)
                r = -EDQUOT;
        if (r >= 0)
                r = snapshot_tenant_room(m, i->meta.config.tenant, &used, &count, &room);
        if (r >= 0 && i->meta.size > room)
                r = -EDQUOT;
        if (r == -EDQUOT)
                return sandbox_error_set(error, SANDBOX_ERR_QUOTA_EXCEEDED,
                                         "The imported sandbox does not fit the snapshot quota.");
        if (r < 0)
                return r;
        r = snapshot_meta_to_json(&i->meta, &text);
        if (r < 0)
                return r;
        if (snapshot_path(m, i->meta.id, ".tar.zst", &data) < 0 ||
            snapshot_path(m, i->meta.id, ".json", &meta) < 0 ||
            snapshot_path(m, i->meta.id, ".json.partial", &tmp) < 0)
                return -ENOMEM;
        if (rename(i->partial, data) < 0)
                return sandbox_error_set_errno(error, errno, "Failed to store the imported snapshot: %m");
        i->partial = mfree(i->partial);
        r = write_file_atomic(meta, tmp, text, strlen(text), 0600, true);
        if (r < 0) {
                (void) unlink(data);
                return sandbox_error_set_errno(error, -r, "Failed to store the imported snapshot: %m");
        }
        log_info("Sandbox %s imported, hibernated (%llu bytes).", i->meta.source,
                 (unsigned long long) i->meta.size);
        return 0;
}

int snapshot_import_part(Manager *m, const SandboxCaller *caller, const char *import_id, const char *meta_json,
                         uint64_t offset, const void *data, size_t size, bool done,
                         char ret_id[static SANDBOX_ID_LEN + 1], SandboxError *error) {
        SnapshotImport *i = NULL;
        int r;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(data || size == 0, -EINVAL);

        snapshot_imports_expire(m);
        if (!import_id) {
                if (offset != 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "An import starts at offset 0.");
                r = snapshot_import_start(m, caller, meta_json, &i, error);
                if (r < 0)
                        return r;
        } else {
                for (i = m->snapshot_imports; i; i = i->next)
                        if (streq(i->meta.source, import_id) && i->meta.owner == caller->uid &&
                            streq(i->meta.config.tenant, strempty(caller->tenant)))
                                break;
                if (!i)
                        return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX,
                                                 "No import of '%.64s' under way.", import_id);
                if (offset != i->written) {
                        snapshot_import_unlink(m, i);
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "A part at %" PRIu64 ", not at the end of the import: dropped.",
                                                 offset);
                }
        }
        i->last_usec = now_usec(CLOCK_MONOTONIC);
        if (size > i->room || i->written > i->room - size) {
                snapshot_import_unlink(m, i);
                return sandbox_error_set(error, SANDBOX_ERR_QUOTA_EXCEEDED,
                                         "The import exceeds the snapshot quota: dropped.");
        }
        r = write_all(i->fd, data, size);
        if (r < 0) {
                snapshot_import_unlink(m, i);
                return sandbox_error_set_errno(error, -r, "Failed to write the imported snapshot: %m");
        }
        i->written += size;
        strcpy(ret_id, i->meta.source);
        if (!done)
                return 0;
        r = snapshot_import_commit(m, i, error);
        snapshot_import_unlink(m, i);
        return r;
}

/* ---- the directory, and retention ---- */

static void snapshots_expire(Manager *m) {
        uint64_t retention = m->settings.snapshots.retention_sec, now = now_usec(CLOCK_REALTIME);
        SnapshotMeta *a;
        size_t n;

        if (retention == 0 || snapshots_load_all(m, &a, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (a[i].created + retention * 1000000ULL <= now) {
                        log_info("Snapshot %s of sandbox %s is older than Retention=%" PRIu64 "s, removing it.",
                                 a[i].id, a[i].source, retention);
                        if (snapshot_unlink(m, a[i].id) >= 0)
                                snapshot_record(m, &a[i], SNAPSHOT_EVENT_REMOVED, SNAPSHOT_CAUSE_RETENTION, NULL);
                }
        snapshot_meta_array_free(a, n);
}

static uint64_t retention_period_usec(Manager *m) {
        uint64_t half = m->settings.snapshots.retention_sec * 1000000ULL / 2;
        return MAX(MIN(half, SNAPSHOT_RETENTION_CHECK_MAX_USEC), 1000000ULL);
}

static int on_retention(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        snapshots_expire(m);
        (void) sd_event_source_set_time_relative(source, retention_period_usec(m));
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);
        return 0;
}

/* Streams half-written when sandboxd ended: not snapshots, never will be. */
static void snapshots_remove_partial(Manager *m) {
        _cleanup_(closedirp) DIR *d = opendir(snapshots_dir(m));
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len > 8 && streq(de->d_name + len - 8, ".partial")) {
                        log_info("Removing %s/%s, what an interrupted snapshot left.", snapshots_dir(m), de->d_name);
                        (void) unlinkat(dirfd(d), de->d_name, 0);
                }
        }
}

int snapshot_store_setup(Manager *m) {
        const char *dir = snapshots_dir(m);
        int r;

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return log_warning_errno(errno, "Failed to create %s, snapshots will fail: %m", dir);
        (void) chmod(dir, 0700);
        snapshots_remove_partial(m);
        if (m->settings.snapshots.retention_sec == 0)
                return 0;
        snapshots_expire(m);
        r = sd_event_add_time_relative(m->event, &m->snapshot_retention, CLOCK_MONOTONIC, retention_period_usec(m),
                                       0, on_retention, m);
        if (r < 0)
                return log_warning_errno(r, "Failed to arm the snapshot retention timer: %m");
        return 0;
}

void snapshot_store_done(Manager *m) {
        m->snapshot_retention = sd_event_source_disable_unref(m->snapshot_retention);
        while (m->snapshot_imports) {
                SnapshotImport *i = m->snapshot_imports;
                m->snapshot_imports = i->next;
                snapshot_import_free(i);
        }
}
