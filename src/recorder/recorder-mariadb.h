/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The MariaDB side of the recorder: connection, schema migrations, idempotent inserts,
 * pruning. Blocking (libmariadb's synchronous API): called from the writer thread only.
 * Functions return 0, -EAGAIN when the server is gone, slow or refusing for now (drop the
 * connection, retry later), or -EBADMSG when this one record cannot ever be stored (data
 * the schema refuses); recorder_db_error() says why. */

#include <stdatomic.h>
#include <stdint.h>

#include <json-c/json.h>

#include "recorder.h"

typedef struct RecorderDB RecorderDB;

#define RECORDER_SCHEMA_VERSION 6

int recorder_db_connect(const RecorderSettings *s, RecorderDB **ret, char **ret_error);
RecorderDB *recorder_db_free(RecorderDB *db);
const char *recorder_db_error(RecorderDB *db);

/* Applies the migrations the database does not have yet (schema_version). > 0: the
 * database's schema is newer than this sandboxd's, which writes anyway (the message is in
 * recorder_db_error()). */
int recorder_db_migrate(RecorderDB *db);

int recorder_db_begin(RecorderDB *db);
int recorder_db_commit(RecorderDB *db);
void recorder_db_rollback(RecorderDB *db);

/* Spool records (spool_line_parse()), in order: INSERT … ON DUPLICATE KEY UPDATE / INSERT
 * IGNORE; runs of executions as multi-row INSERTs. A record the schema refuses (it never
 * can be stored) is passed to bad, with the reason, and skipped. */
typedef void (*recorder_db_bad_t)(json_object *record, const char *why, void *userdata);
int recorder_db_apply(RecorderDB *db, json_object **records, size_t n, recorder_db_bad_t bad, void *userdata);

/* Deletes executions that ended, sandboxes destroyed and snapshot events before before_usec, in small
 * transactions; returns -ECANCELED between two of them once *stop is set. Templates are
 * not pruned: one row per name, the catalogue rather than history (and a template
 * loaded long ago may well be in use still). */
int recorder_db_prune(RecorderDB *db, uint64_t before_usec, const atomic_bool *stop);

/* The executions the database holds that match f (ListExecutions' filter, the same
 * meaning as in the spool; uids compared as numbers), the most recently ended first, at
 * most limit: row is called with each as a spool record would have it (spool.h's keys),
 * and stops the listing by returning < 0. Blocking: on a query's thread. */
typedef int (*recorder_db_row_t)(json_object *record, void *userdata);
int recorder_db_list_executions(RecorderDB *db, const ExecutionFilter *f, unsigned limit,
                                recorder_db_row_t row, void *userdata);

/* A fleet's tenant quotas: node's rows of fleet_usage replaced by mine (n_mine tenants,
 * none: its rows go), then the other nodes' sums per tenant, of the rows updated in the
 * last fresh_usec by the database's clock, in *ret (a new array, *ret_n of them). */
int recorder_db_fleet_usage(RecorderDB *db, unsigned node, const TenantUse *mine, size_t n_mine,
                            uint64_t fresh_usec, TenantUse **ret, size_t *ret_n);
