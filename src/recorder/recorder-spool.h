/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The spool's format and bookkeeping, without threads or I/O policy (recorder.c has those).
 *
 * The spool is one append-only file, records.jsonl: one JSON object per line, written by
 * json-c, each starting with {"seq":N,"type":"exec"|"sandbox"|"template"|"snapshot","time":µs,…}.
 * seq increases by one per record and never repeats (not even after compaction empties
 * the file: the next one continues from the cursor). Bytes that need not be text (the
 * stdout/stderr excerpts) are hex strings; argv and paths are JSON strings (json-c passes
 * bytes that are not UTF-8 through unchanged, so they come back as they went in).
 * A line that does not parse (a write cut short by a full disk) is skipped by readers.
 *
 * The cursor file holds the seq of the last record committed to MariaDB. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "parse-util.h"   /* hex_encode(), hex_decode() */

#include "recorder.h"

#define SPOOL_FILE "records.jsonl"
#define SPOOL_CURSOR_FILE "cursor"

/* Each returns a malloc'd line ending in '\n', and its length. */
int spool_format_exec(uint64_t seq, const ExecRecordEvent *ev, char **ret, size_t *ret_size);
int spool_format_sandbox(uint64_t seq, const SandboxRecordEvent *ev, char **ret, size_t *ret_size);
int spool_format_template(uint64_t seq, const TemplateRecordEvent *ev, char **ret, size_t *ret_size);
int spool_format_snapshot(uint64_t seq, const SnapshotRecordEvent *ev, char **ret, size_t *ret_size);

/* The seq of a line, read from its fixed prefix without parsing the rest; -EBADMSG if the
 * line is not a record. */
int spool_line_seq(const char *line, size_t size, uint64_t *ret);
/* The whole record; -EBADMSG if it does not parse or has no seq, type and time. */
int spool_line_parse(const char *line, size_t size, json_object **ret);

/* Field access on a parsed record (0 / NULL / false when absent). */
uint64_t spool_get_u64(json_object *o, const char *key);
int64_t spool_get_i64(json_object *o, const char *key);
bool spool_get_bool(json_object *o, const char *key);
/* Returns the string and its length (bytes, may hold anything but NUL). */
const char *spool_get_string(json_object *o, const char *key, size_t *ret_size);
/* Decodes a hex field into a new buffer (NULL and 0 when empty). */
int spool_get_hex(json_object *o, const char *key, void **ret, size_t *ret_size);


/* Calls cb for each complete line of fd (without its '\n'), from start_offset on, with
 * the offset just past the line; cb returns > 0 to stop, < 0 to fail. Reads in chunks;
 * returns the offset past the last complete line visited (a partial last line, still
 * being written, is left for later). */
typedef int (*spool_line_cb_t)(const char *line, size_t size, uint64_t end_offset, void *userdata);
int spool_scan(int fd, uint64_t start_offset, spool_line_cb_t cb, void *userdata, uint64_t *ret_end);
/* The same, newest line first, reading at most max_bytes back from the end. */
int spool_scan_backwards(int fd, uint64_t max_bytes, spool_line_cb_t cb, void *userdata);

/* The seq of the newest record in fd, 0 if none. */
int spool_last_seq(int fd, uint64_t *ret);
/* The offset of the first record with a seq above after_seq (the file's size if none). */
int spool_offset_after(int fd, uint64_t after_seq, uint64_t *ret);
/* Where compaction may cut: the offset of the first record that must be kept, being
 * newer than keep_since (µs) or not yet committed (seq above committed_seq). */
int spool_cut_offset(int fd, uint64_t keep_since, uint64_t committed_seq, uint64_t *ret);

int spool_cursor_read(int dir_fd, uint64_t *ret);
int spool_cursor_write(int dir_fd, uint64_t seq);
