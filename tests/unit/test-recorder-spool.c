/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-event.h>

#include "macro.h"
#include "recorder-spool.h"
#include "recorder.h"
#include "strv.h"

static char *tmpdir;

static const char hostile_out[] = "quote' \"dq\" \0NUL\xff\xfe invalid \xc3\x28 utf8\n\r\\";

static void make_exec(ExecRecordEvent *ev, char **argv, uint64_t id, uint64_t ended) {
        *ev = (ExecRecordEvent) {
                .sandbox_id = "sb1",
                .exec_id = id,
                .owner = 1000,
                .caller = 1001,
                .argv = argv,
                .working_directory = "/work/\xff",
                .started_at = ended - 5,
                .ended_at = ended,
                .exit_status = 137, .exit_code = -1, .signal = 9,
                .oom_killed = true,
                .cpu_usec = 11, .cgroup_cpu_nsec = 12000, .cgroup_memory_peak = 1 << 20,
                .stdout_bytes = 1 << 30, .stderr_bytes = 3,
                .stdout_excerpt = hostile_out, .stdout_excerpt_size = sizeof(hostile_out) - 1,
                .stderr_excerpt = "err", .stderr_excerpt_size = 3,
        };
}

static void test_exec_round_trip(void **state) {
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) "'; DROP TABLE executions;--", (char *) "\xc3\x28\n", NULL };
        _cleanup_free_ char *line = NULL;
        _cleanup_free_ void *out = NULL, *err = NULL;
        json_object *o = NULL, *a;
        ExecRecordEvent ev;
        size_t size, l;
        uint64_t seq;
        const char *s;

        make_exec(&ev, argv, 7, 1000000);
        assert_int_equal(spool_format_exec(42, &ev, &line, &size), 0);
        assert_int_equal(strlen(line), size);
        assert_true(line[size - 1] == '\n');
        assert_null(memchr(line, '\n', size - 1));   /* one line, whatever the content */

        assert_int_equal(spool_line_seq(line, size - 1, &seq), 0);
        assert_true(seq == 42);
        assert_int_equal(spool_line_parse(line, size - 1, &o), 0);
        assert_string_equal(spool_get_string(o, "type", NULL), "exec");
        assert_true(spool_get_u64(o, "time") == 1000000);
        assert_string_equal(spool_get_string(o, "sandbox", NULL), "sb1");
        assert_true(spool_get_u64(o, "exec") == 7);
        assert_true(spool_get_u64(o, "owner") == 1000);
        assert_true(spool_get_u64(o, "caller") == 1001);
        assert_true(spool_get_i64(o, "exit_status") == 137);
        assert_true(spool_get_i64(o, "exit_code") == -1);
        assert_true(spool_get_i64(o, "signal") == 9);
        assert_true(spool_get_bool(o, "oom_killed"));
        assert_false(spool_get_bool(o, "timed_out"));
        assert_true(spool_get_u64(o, "stdout_bytes") == 1ULL << 30);
        assert_true(spool_get_u64(o, "memory_peak") == 1 << 20);
        s = spool_get_string(o, "cwd", &l);
        assert_int_equal(l, 7);
        assert_memory_equal(s, "/work/\xff", 7);

        assert_true(json_object_object_get_ex(o, "argv", &a));
        assert_int_equal(json_object_array_length(a), 4);
        for (size_t i = 0; i < 4; i++)
                assert_string_equal(json_object_get_string(json_object_array_get_idx(a, i)), argv[i]);

        /* The excerpts come back byte for byte: NULs, quotes, invalid UTF-8. */
        assert_int_equal(spool_get_hex(o, "stdout", &out, &l), 0);
        assert_int_equal(l, sizeof(hostile_out) - 1);
        assert_memory_equal(out, hostile_out, l);
        assert_int_equal(spool_get_hex(o, "stderr", &err, &l), 0);
        assert_int_equal(l, 3);
        json_object_put(o);
}

static void test_excerpt_capped(void **state) {
        static char big[EXEC_EVENT_EXCERPT_MAX * 2];
        char *argv[] = { (char *) "true", NULL };
        _cleanup_free_ char *line = NULL;
        _cleanup_free_ void *out = NULL;
        json_object *o = NULL;
        ExecRecordEvent ev;
        size_t size, l;

        memset(big, 'x', sizeof(big));
        make_exec(&ev, argv, 1, 10);
        ev.stdout_excerpt = big;
        ev.stdout_excerpt_size = sizeof(big);
        assert_int_equal(spool_format_exec(1, &ev, &line, &size), 0);
        assert_int_equal(spool_line_parse(line, size - 1, &o), 0);
        assert_int_equal(spool_get_hex(o, "stdout", &out, &l), 0);
        assert_int_equal(l, EXEC_EVENT_EXCERPT_MAX);
        json_object_put(o);
}

static void test_sandbox_and_template(void **state) {
        SandboxConfig c = { .limits = { .memory_max = 1 << 28, .tasks_max = 64 }, .ephemeral = true };
        _cleanup_free_ char *l1 = NULL, *l2 = NULL;
        json_object *o = NULL;
        size_t size;

        assert_int_equal(spool_format_sandbox(3, &(SandboxRecordEvent) {
                .sandbox_id = "abc", .template_name = "shell", .payload = "bwrap", .owner = 5,
                .config = &c, .created_at = 100, .destroyed_at = 200, .end_reason = "timeout",
        }, &l1, &size), 0);
        assert_int_equal(spool_line_parse(l1, size - 1, &o), 0);
        assert_string_equal(spool_get_string(o, "type", NULL), "sandbox");
        assert_true(spool_get_u64(o, "time") == 200);   /* the end, for retention */
        assert_true(spool_get_u64(o, "memory_max") == 1 << 28);
        assert_true(spool_get_bool(o, "ephemeral"));
        assert_string_equal(spool_get_string(o, "end_reason", NULL), "timeout");
        json_object_put(o);

        assert_int_equal(spool_format_template(4, &(TemplateRecordEvent) {
                .name = "shell", .payload = "bwrap", .description = NULL, .loaded_at = 9,
        }, &l2, &size), 0);
        assert_int_equal(spool_line_parse(l2, size - 1, &o), 0);
        assert_null(spool_get_string(o, "description", NULL));
        json_object_put(o);
}

/* A snapshot event as the snapshot_events table reads it (recorder-mariadb.c). */
static void test_snapshot(void **state) {
        _cleanup_free_ char *l1 = NULL, *l2 = NULL;
        json_object *o = NULL;
        size_t size;

        assert_int_equal(spool_format_snapshot(7, &(SnapshotRecordEvent) {
                .kind = SNAPSHOT_EVENT_RESTORED, .cause = SNAPSHOT_CAUSE_WAKE, .snapshot_id = "0123456789abcdef",
                .source = "fedcba9876543210", .sandbox_id = "fedcba9876543210", .owner = 1000, .tenant = "acme",
                .size = 4096, .content_size = UINT64_C(1) << 40, .time = 42,
        }, &l1, &size), 0);
        assert_int_equal(l1[size - 1], '\n');
        assert_int_equal(spool_line_parse(l1, size - 1, &o), 0);
        assert_true(spool_get_u64(o, "seq") == 7);
        assert_string_equal(spool_get_string(o, "type", NULL), "snapshot");
        assert_true(spool_get_u64(o, "time") == 42);
        assert_string_equal(spool_get_string(o, "snapshot", NULL), "0123456789abcdef");
        assert_string_equal(spool_get_string(o, "event", NULL), "restored");
        assert_string_equal(spool_get_string(o, "cause", NULL), "wake");
        assert_string_equal(spool_get_string(o, "source", NULL), "fedcba9876543210");
        assert_string_equal(spool_get_string(o, "sandbox", NULL), "fedcba9876543210");
        assert_true(spool_get_u64(o, "owner") == 1000);
        assert_string_equal(spool_get_string(o, "tenant", NULL), "acme");
        assert_true(spool_get_u64(o, "size") == 4096);
        assert_true(spool_get_u64(o, "content_size") == UINT64_C(1) << 40);
        json_object_put(o);

        /* Taken and removed restore nothing; no tenant is no key. */
        assert_int_equal(spool_format_snapshot(8, &(SnapshotRecordEvent) {
                .kind = SNAPSHOT_EVENT_REMOVED, .cause = SNAPSHOT_CAUSE_RETENTION, .snapshot_id = "0123456789abcdef",
                .source = "fedcba9876543210", .tenant = "", .size = 1,
        }, &l2, &size), 0);
        assert_int_equal(spool_line_parse(l2, size - 1, &o), 0);
        assert_string_equal(spool_get_string(o, "event", NULL), "removed");
        assert_string_equal(spool_get_string(o, "cause", NULL), "retention");
        assert_null(spool_get_string(o, "sandbox", NULL));
        assert_null(spool_get_string(o, "tenant", NULL));
        json_object_put(o);

        /* What has no name is not written. */
        assert_int_equal(spool_format_snapshot(9, &(SnapshotRecordEvent) {
                .kind = _SNAPSHOT_EVENT_KIND_MAX, .snapshot_id = "0123456789abcdef",
        }, &l2, &size), -EINVAL);
        assert_int_equal(spool_format_snapshot(9, &(SnapshotRecordEvent) {
                .kind = SNAPSHOT_EVENT_TAKEN, .cause = _SNAPSHOT_CAUSE_MAX, .snapshot_id = "0123456789abcdef",
        }, &l2, &size), -EINVAL);
}

static void test_line_seq(void **state) {
        uint64_t seq = 0;
        json_object *o = NULL;

        assert_int_equal(spool_line_seq("{\"seq\":18446744073709551615,", 29, &seq), 0);
        assert_true(seq == UINT64_MAX);
        assert_int_equal(spool_line_seq("{\"seq\":184467440737095516150,", 30, &seq), -EBADMSG);
        assert_int_equal(spool_line_seq("{\"seq\":,", 8, &seq), -EBADMSG);
        assert_int_equal(spool_line_seq("{\"seq\":12", 9, &seq), -EBADMSG);
        assert_int_equal(spool_line_seq("{\"type\":1,\"seq\":1,", 18, &seq), -EBADMSG);
#define PARSE(s) spool_line_parse(s, strlen(s), &o)
        assert_int_equal(PARSE("{\"seq\":1,\"type\":\"exec\""), -EBADMSG);
        assert_int_equal(PARSE("{\"seq\":1,\"type\":\"exec\",\"time\":2} x"), -EBADMSG);
        assert_int_equal(PARSE("{\"seq\":1,\"type\":\"exec\"}"), -EBADMSG);
        assert_int_equal(PARSE("[1]"), -EBADMSG);
        assert_int_equal(PARSE("{\"seq\":1,\"type\":\"exec\",\"time\":2}"), 0);
#undef PARSE
        json_object_put(o);
}

/* A spool of n exec records, seq 1…n, record i ended at time 100 * i, then garbage, and
 * a last line still being written. */
static int make_spool(const char *name, unsigned n, bool torn) {
        char path[4096], *argv[] = { (char *) "echo", (char *) "x", NULL };
        int fd;

        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        for (unsigned i = 1; i <= n; i++) {
                _cleanup_free_ char *line = NULL;
                ExecRecordEvent ev;
                size_t size;

                make_exec(&ev, argv, i, 100 * i);
                assert_int_equal(spool_format_exec(i, &ev, &line, &size), 0);
                assert_int_equal(write(fd, line, size), (ssize_t) size);
                if (i == n / 2)
                        assert_int_equal(write(fd, "not json\n", 9), 9);   /* a cut-short write */
        }
        if (torn)
                assert_int_equal(write(fd, "{\"seq\":9999,\"ty", 15), 15);
        return fd;
}

typedef struct Seen {
        uint64_t seqs[4096];
        size_t n;
        size_t stop_after;
} Seen;

static int collect(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        Seen *s = userdata;
        uint64_t seq;

        assert_true(line[size] == '\n');
        if (spool_line_seq(line, size, &seq) < 0)
                return 0;
        s->seqs[s->n++] = seq;
        return s->stop_after && s->n >= s->stop_after ? 1 : 0;
}

static void test_scan(void **state) {
        _cleanup_close_ int fd = make_spool("scan", 1000, true);
        Seen fwd = {}, back = {};
        uint64_t end, last, off, off2;
        struct stat st;

        assert_int_equal(spool_scan(fd, 0, collect, &fwd, &end), 0);
        assert_int_equal(fwd.n, 1000);
        for (size_t i = 0; i < fwd.n; i++)
                assert_true(fwd.seqs[i] == i + 1);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(end == (uint64_t) st.st_size - 15);   /* the partial line is left */

        assert_int_equal(spool_scan_backwards(fd, UINT64_MAX, collect, &back), 0);
        assert_int_equal(back.n, 1000);
        for (size_t i = 0; i < back.n; i++)
                assert_true(back.seqs[i] == 1000 - i);

        /* Bounded: only what lies within the last max_bytes, whole lines only. */
        Seen some = {};
        assert_int_equal(spool_scan_backwards(fd, 4096, collect, &some), 0);
        assert_true(some.n > 0 && some.n < 1000);
        assert_true(some.seqs[0] == 1000);

        Seen three = { .stop_after = 3 };
        assert_int_equal(spool_scan_backwards(fd, UINT64_MAX, collect, &three), 0);
        assert_int_equal(three.n, 3);
        assert_true(three.seqs[2] == 998);

        assert_int_equal(spool_last_seq(fd, &last), 0);
        assert_true(last == 1000);

        /* Replay bookkeeping: where to go on after the cursor. */
        assert_int_equal(spool_offset_after(fd, 0, &off), 0);
        assert_true(off == 0);
        assert_int_equal(spool_offset_after(fd, 1000, &off), 0);
        assert_true(off == end);
        assert_int_equal(spool_offset_after(fd, 700, &off), 0);
        Seen rest = {};
        assert_int_equal(spool_scan(fd, off, collect, &rest, NULL), 0);
        assert_int_equal(rest.n, 300);
        assert_true(rest.seqs[0] == 701);

        /* Compaction's cut: not past the retention, not past the cursor. */
        assert_int_equal(spool_cut_offset(fd, 100 * 301, UINT64_MAX, &off), 0);
        Seen kept = {};
        assert_int_equal(spool_scan(fd, off, collect, &kept, NULL), 0);
        assert_true(kept.seqs[0] == 301);
        assert_int_equal(spool_cut_offset(fd, 100 * 301, 200, &off2), 0);
        assert_true(off2 < off);
        Seen kept2 = {};
        assert_int_equal(spool_scan(fd, off2, collect, &kept2, NULL), 0);
        assert_true(kept2.seqs[0] == 201);
        assert_int_equal(spool_cut_offset(fd, 0, UINT64_MAX, &off), 0);
        assert_true(off == 0);
}

static void test_empty_spool(void **state) {
        _cleanup_close_ int fd = make_spool("empty", 0, false);
        Seen s = {};
        uint64_t last = 1, off = 1;

        assert_int_equal(spool_scan_backwards(fd, UINT64_MAX, collect, &s), 0);
        assert_int_equal(s.n, 0);
        assert_int_equal(spool_last_seq(fd, &last), 0);
        assert_true(last == 0);
        assert_int_equal(spool_offset_after(fd, 5, &off), 0);
        assert_true(off == 0);
}

static void test_cursor(void **state) {
        _cleanup_close_ int dir = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t v = 0;

        assert_int_equal(spool_cursor_read(dir, &v), -ENOENT);
        assert_int_equal(spool_cursor_write(dir, 12345), 0);
        assert_int_equal(spool_cursor_read(dir, &v), 0);
        assert_true(v == 12345);
        assert_int_equal(spool_cursor_write(dir, UINT64_MAX), 0);
        assert_int_equal(spool_cursor_read(dir, &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(faccessat(dir, SPOOL_CURSOR_FILE ".new", F_OK, 0), -1);
}

static void test_hex(void **state) {
        _cleanup_free_ char *h = NULL;
        _cleanup_free_ void *d = NULL;
        size_t l;

        assert_int_equal(hex_encode("\x00\xff\x10", 3, &h), 0);
        assert_string_equal(h, "00ff10");
        assert_int_equal(hex_decode("00FF10", 6, &d, &l), 0);
        assert_int_equal(l, 3);
        assert_memory_equal(d, "\x00\xff\x10", 3);
        assert_int_equal(hex_decode("0", 1, &d, &l), -EINVAL);
        assert_int_equal(hex_decode("0g", 2, &d, &l), -EINVAL);
}

/* The recorder without MariaDB: records land in the spool, seq goes on across restarts. */
static void test_recorder_spool_only(void **state) {
        char *argv[] = { (char *) "true", NULL };
        RecorderSettings s = { .enabled = true };
        char spool[4096], path[4200];
        uint64_t last;
        ExecRecordEvent ev;
        Recorder *r = NULL;
        sd_event *e = NULL;

        assert_int_equal(sd_event_new(&e), 0);
        snprintf(spool, sizeof(spool), "%s/spool/sub", tmpdir);
        s.spool_dir = spool;
        assert_int_equal(recorder_new(NULL, &s, &r), -EINVAL);
        for (unsigned round = 0; round < 2; round++) {
                assert_int_equal(recorder_new(e, &s, &r), 0);
                for (unsigned i = 1; i <= 3; i++) {
                        make_exec(&ev, argv, i, 10 * i);
                        recorder_exec_event(r, &ev);
                }
                recorder_sandbox_event(r, &(SandboxRecordEvent) { .sandbox_id = "sb1", .template_name = "t",
                                                                  .payload = "bwrap", .created_at = 1 });
                r = recorder_free(r);
        }
        e = sd_event_unref(e);
        snprintf(path, sizeof(path), "%s/" SPOOL_FILE, spool);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(spool_last_seq(fd, &last), 0);
        assert_true(last == 8);
        Seen all = {};
        assert_int_equal(spool_scan(fd, 0, collect, &all, NULL), 0);
        assert_int_equal(all.n, 8);
        for (size_t i = 0; i < all.n; i++)
                assert_true(all.seqs[i] == i + 1);
}

typedef struct Listed {
        unsigned calls;
        int error;
        size_t n;
        uint64_t exec_ids[16];
        char *sandbox, *cwd;
        char **argv;
} Listed;

static void listed_done(Listed *l) {
        free(l->sandbox);
        free(l->cwd);
        strv_free(l->argv);
}

static void on_listed(int error, const ExecutionRecord *records, size_t n, void *userdata) {
        Listed *l = userdata;

        l->calls++;
        l->error = error;
        l->n = n;
        for (size_t i = 0; i < MIN(n, ELEMENTSOF(l->exec_ids)); i++)
                l->exec_ids[i] = records[i].exec_id;
        if (n == 0)
                return;
        l->sandbox = strdup(records[0].sandbox_id);
        l->cwd = strdup(records[0].working_directory);
        l->argv = strv_copy(records[0].argv);
}

/* A recorder on an event loop of its own, spooling to tmpdir/name. */
static Recorder *recorder_on_new_loop(const char *name, sd_event **ret_event) {
        RecorderSettings s = { .enabled = true };
        char spool[4096];
        Recorder *r = NULL;

        assert_int_equal(sd_event_new(ret_event), 0);
        snprintf(spool, sizeof(spool), "%s/%s", tmpdir, name);
        s.spool_dir = spool;
        assert_int_equal(recorder_new(*ret_event, &s, &r), 0);
        return r;
}

/* Starts a query and runs the loop until it answers. */
static void list_wait(sd_event *e, Recorder *r, const ExecutionFilter *f, Listed *l) {
        assert_int_equal(recorder_list_executions(r, f, on_listed, l), 0);
        assert_int_equal(l->calls, 0);   /* never from within the call */
        while (l->calls == 0)
                assert_true(sd_event_run(e, 10ULL * 1000 * 1000) >= 0);
        assert_int_equal(l->calls, 1);
        assert_int_equal(l->error, 0);
}

/* The exec ids a query finds, newest first. */
static size_t list_now(sd_event *e, Recorder *r, const ExecutionFilter *f, uint64_t *ret_ids) {
        Listed l = {};

        list_wait(e, r, f, &l);
        memcpy(ret_ids, l.exec_ids, sizeof(l.exec_ids));
        listed_done(&l);
        return l.n;
}

#define assert_ids(e, r, f, ...)                                                        \
        do {                                                                            \
                const uint64_t _want[] = { __VA_ARGS__ };                               \
                uint64_t _got[16] = {};                                                 \
                assert_int_equal(list_now(e, r, f, _got), ELEMENTSOF(_want) - 1);       \
                assert_memory_equal(_got, _want, sizeof(_want) - sizeof(uint64_t));     \
        } while (0)

/* ListExecutions' filters, answered from a thread, on the loop. */
static void test_recorder_list(void **state) {
        char *argv[] = { (char *) "echo", (char *) "\xc3\x28", NULL };
        ExecRecordEvent ev;
        sd_event *e = NULL;
        Recorder *r = recorder_on_new_loop("spool-list", &e);
        Listed l = {};

        /* sb1: owner 1000, caller 1001, execs 1…3 ended at 10, 20, 30 (started 5 before). */
        for (unsigned i = 1; i <= 3; i++) {
                make_exec(&ev, argv, i, 10 * i);
                recorder_exec_event(r, &ev);
        }
        recorder_sandbox_event(r, &(SandboxRecordEvent) { .sandbox_id = "sb2", .template_name = "t",
                                                          .payload = "bwrap", .owner = 2000, .created_at = 35 });
        make_exec(&ev, argv, 4, 40);
        ev.sandbox_id = "sb2";
        ev.owner = ev.caller = 2000;
        recorder_exec_event(r, &ev);

        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true }), 4, 3, 2, 1, 0);
        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true, .sandbox_id = "sb1" }), 3, 2, 1, 0);
        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true, .sandbox_id = "nope" }), 0);
        assert_ids(e, r, &((ExecutionFilter) { .uid = 1001 }), 3, 2, 1, 0);      /* the caller */
        assert_ids(e, r, &((ExecutionFilter) { .uid = 1000 }), 3, 2, 1, 0);      /* the owner */
        assert_ids(e, r, &((ExecutionFilter) { .uid = 2000 }), 4, 0);
        assert_ids(e, r, &((ExecutionFilter) { .uid = 5 }), 0);
        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true, .owner_set = true, .owner = 2000 }), 4, 0);
        assert_ids(e, r, &((ExecutionFilter) { .uid = 1000, .owner_set = true, .owner = 2000 }), 0);
        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true, .since = 20 }), 4, 3, 0);
        assert_ids(e, r, &((ExecutionFilter) { .any_owner = true, .limit = 2 }), 4, 3, 0);

        /* The record's strings, as D-Bus takes them. */
        list_wait(e, r, &((ExecutionFilter) { .any_owner = true, .limit = 1 }), &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.sandbox, "sb2");
        assert_string_equal(l.cwd, "/work/\xef\xbf\xbd");
        assert_int_equal(strv_length(l.argv), 2);
        assert_string_equal(l.argv[0], "echo");
        assert_string_equal(l.argv[1], "\xef\xbf\xbd(");
        listed_done(&l);

        r = recorder_free(r);
        e = sd_event_unref(e);
}

/* At most RECORDER_LIST_QUERIES_MAX at a time; those under way when the recorder goes are
 * answered -ECANCELED, and nothing leaks (ASan). */
static void test_recorder_list_bounded(void **state) {
        char *argv[] = { (char *) "true", NULL };
        Listed l[RECORDER_LIST_QUERIES_MAX + 1] = {};
        const ExecutionFilter f = { .any_owner = true };
        ExecRecordEvent ev;
        sd_event *e = NULL;
        Recorder *r = recorder_on_new_loop("spool-bounded", &e);
        unsigned answered;

        for (unsigned i = 1; i <= 100; i++) {
                make_exec(&ev, argv, i, 10 * i);
                recorder_exec_event(r, &ev);
        }

        /* A query holds its place until the loop has taken its answer. */
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                assert_int_equal(recorder_list_executions(r, &f, on_listed, &l[i]), 0);
        assert_int_equal(recorder_list_executions(r, &f, on_listed, &l[RECORDER_LIST_QUERIES_MAX]), -EBUSY);
        do {
                assert_true(sd_event_run(e, 10ULL * 1000 * 1000) >= 0);
                answered = 0;
                for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                        answered += l[i].calls;
        } while (answered < RECORDER_LIST_QUERIES_MAX);
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++) {
                assert_int_equal(l[i].calls, 1);
                assert_int_equal(l[i].error, 0);
                assert_int_equal(l[i].n, 100);
                listed_done(&l[i]);
                l[i] = (Listed) {};
        }
        assert_int_equal(l[RECORDER_LIST_QUERIES_MAX].calls, 0);

        /* Room again; then the recorder goes with all of them under way. */
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                assert_int_equal(recorder_list_executions(r, &f, on_listed, &l[i]), 0);
        r = recorder_free(r);
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++) {
                assert_int_equal(l[i].calls, 1);
                assert_int_equal(l[i].error, -ECANCELED);
                assert_int_equal(l[i].n, 0);
        }
        e = sd_event_unref(e);
}

static int setup(void **state) {
        char t[] = "/var/tmp/test-recorder-spool.XXXXXX";
        tmpdir = strdup(mkdtemp(t));
        return tmpdir ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
        free(tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_round_trip),
                cmocka_unit_test(test_excerpt_capped),
                cmocka_unit_test(test_sandbox_and_template),
                cmocka_unit_test(test_snapshot),
                cmocka_unit_test(test_line_seq),
                cmocka_unit_test(test_scan),
                cmocka_unit_test(test_empty_spool),
                cmocka_unit_test(test_cursor),
                cmocka_unit_test(test_hex),
                cmocka_unit_test(test_recorder_spool_only),
                cmocka_unit_test(test_recorder_list),
                cmocka_unit_test(test_recorder_list_bounded),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
