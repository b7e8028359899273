/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>

#include "json-util.h"
#include "macro.h"
#include "parse-util.h"
#include "recorder-mariadb.h"
#include "recorder-spool.h"
#include "strv.h"
#include "time-util.h"

/* Connect, read and write timeouts: a server that hangs costs the writer thread this
 * long, and sandboxd's shutdown at most this long. */
#define DB_TIMEOUT_SEC 5U
#define PRUNE_BATCH 5000U
/* Executions go in as multi-row INSERTs of 2, 4, … EXEC_ROWS_MAX rows: one statement (one
 * round trip, one parse and table open on the server) for many records. */
#define EXEC_COLUMNS 27U
#define EXEC_ROWS_LOG2_MAX 5U
#define EXEC_ROWS_MAX (1U << EXEC_ROWS_LOG2_MAX)
#define PARAMS_MAX (EXEC_COLUMNS * EXEC_ROWS_MAX)
/* A multi-row statement carries at most this many bytes of argv, cwd and excerpts: far
 * below any server's max_allowed_packet (1 MiB at the least), which a statement over it
 * would fail every time it is retried. One row alone is always sent (its record is at
 * most a few hundred KiB). */
#define EXEC_STATEMENT_BYTES_MAX (512U * 1024U)
/* argv is stored as the JSON text of its array. */
#define ARGV_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

static void mysql_stmt_closep(MYSQL_STMT **st) {
        if (*st)
                mysql_stmt_close(*st);
}

/* Parameters for one statement; the values live here until it has run. Sized for the
 * largest statement, a multi-row INSERT of EXEC_ROWS_MAX executions; one per connection. */
typedef struct Params {
        MYSQL_BIND bind[PARAMS_MAX];
        uint64_t u64[PARAMS_MAX];
        int32_t i32[PARAMS_MAX];
        signed char b[PARAMS_MAX];
        unsigned long len[PARAMS_MAX];
        my_bool null[PARAMS_MAX];
        void *owned[PARAMS_MAX];
        size_t n, n_owned;
} Params;

static Params *params_reset(Params *p) {
        for (size_t i = 0; i < p->n_owned; i++)
                free(p->owned[i]);
        p->n = p->n_owned = 0;
        return p;
}

static void params_own(Params *p, void *data) {
        assert(p->n_owned < ELEMENTSOF(p->owned));
        p->owned[p->n_owned++] = data;
}

struct RecorderDB {
        MYSQL *mysql;
        MYSQL_STMT *insert_sandbox, *insert_template, *insert_snapshot;
        MYSQL_STMT *insert_exec[EXEC_ROWS_LOG2_MAX + 1];  /* [i]: 2^i rows, prepared when first needed */
        Params *params;
        char error[512];
};

/* The schema, one step per version; each step idempotent (a crash between a step and its
 * schema_version row only repeats the step). Times are µs since the epoch (UTC) in
 * BIGINT UNSIGNED: exact, and free of the session's time zone. Bytes that come from the
 * sandbox (argv, cwd, output excerpts) are BLOBs: stored verbatim, never re-encoded. */
static const char *const migration_1[] = {
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        " id VARCHAR(64) NOT NULL PRIMARY KEY,"
        " owner_uid INT UNSIGNED NOT NULL,"
        " template VARCHAR(255) NOT NULL,"
        " payload VARCHAR(32) NOT NULL,"
        " memory_max BIGINT UNSIGNED NOT NULL,"
        " cpu_quota_per_sec_usec BIGINT UNSIGNED NOT NULL,"
        " tasks_max BIGINT UNSIGNED NOT NULL,"
        " disk_max BIGINT UNSIGNED NOT NULL,"
        " timeout_sec BIGINT UNSIGNED NOT NULL,"
        " idle_timeout_sec BIGINT UNSIGNED NOT NULL,"
        " ephemeral BOOLEAN NOT NULL,"
        " created_usec BIGINT UNSIGNED NOT NULL,"
        " destroyed_usec BIGINT UNSIGNED NULL,"
        " end_reason TEXT NULL,"
        " KEY owner (owner_uid),"
        " KEY created (created_usec)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        "CREATE TABLE IF NOT EXISTS executions ("
        " sandbox_id VARCHAR(64) NOT NULL,"
        " exec_id BIGINT UNSIGNED NOT NULL,"
        " owner_uid INT UNSIGNED NOT NULL,"
        " caller_uid INT UNSIGNED NOT NULL,"
        " argv MEDIUMBLOB NOT NULL COMMENT 'JSON array of strings',"
        " cwd BLOB NULL,"
        " background BOOLEAN NOT NULL,"
        " started_usec BIGINT UNSIGNED NOT NULL,"
        " ended_usec BIGINT UNSIGNED NOT NULL,"
        " exit_status INT NOT NULL COMMENT 'exit code, or 128 + signal',"
        " exit_code INT NOT NULL COMMENT '-1 when killed',"
        " term_signal INT NOT NULL,"
        " timed_out BOOLEAN NOT NULL,"
        " oom_killed BOOLEAN NOT NULL,"
        " output_truncated BOOLEAN NOT NULL,"
        " cpu_usec BIGINT UNSIGNED NOT NULL COMMENT 'rusage of the process',"
        " cgroup_cpu_nsec BIGINT UNSIGNED NOT NULL COMMENT 'the unit cgroup, during the exec',"
        " cgroup_memory_peak BIGINT UNSIGNED NOT NULL COMMENT 'bytes, the unit cgroup high-water mark',"
        " stdout_bytes BIGINT UNSIGNED NOT NULL,"
        " stderr_bytes BIGINT UNSIGNED NOT NULL,"
        " stdout_excerpt BLOB NOT NULL,"
        " stderr_excerpt BLOB NOT NULL,"
        " spool_seq BIGINT UNSIGNED NOT NULL,"
        " PRIMARY KEY (sandbox_id, exec_id),"
        " KEY started (started_usec),"
        " KEY ended (ended_usec),"
        " KEY owner (owner_uid),"
        " KEY caller (caller_uid)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        "CREATE TABLE IF NOT EXISTS templates ("
        " name VARCHAR(255) NOT NULL PRIMARY KEY,"
        " payload VARCHAR(32) NOT NULL,"
        " description TEXT NULL,"
        " loaded_usec BIGINT UNSIGNED NOT NULL"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        NULL
};

/* Names and tenants (issue 14): NULL in the rows of sandboxes without, and of before. */
static const char *const migration_2[] = {
        "ALTER TABLE sandboxes"
        " ADD COLUMN IF NOT EXISTS tenant VARCHAR(64) NULL AFTER owner_uid,"
        " ADD COLUMN IF NOT EXISTS name VARCHAR(64) NULL AFTER tenant,"
        " ADD KEY IF NOT EXISTS tenant (tenant)",
        "ALTER TABLE executions"
        " ADD COLUMN IF NOT EXISTS tenant VARCHAR(64) NULL AFTER owner_uid,"
        " ADD KEY IF NOT EXISTS tenant (tenant)",
        NULL
};

/* Snapshot events (issue 19): one row per snapshot taken, per sandbox restored from
 * it, and when it is removed. The key is what happened: a snapshot is taken and removed
 * once, and restored into a sandbox once (restored_into is '' for the other two). */
static const char *const migration_3[] = {
        "CREATE TABLE IF NOT EXISTS snapshot_events ("
        " snapshot_id VARCHAR(64) NOT NULL,"
        " event VARCHAR(16) NOT NULL COMMENT 'taken, restored, removed',"
        " restored_into VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'the sandbox restored; empty unless restored',"
        " cause VARCHAR(16) NOT NULL COMMENT 'snapshot, fork, hibernate, create, wake, remove, retention',"
        " source_sandbox_id VARCHAR(64) NOT NULL,"
        " owner_uid INT UNSIGNED NOT NULL,"
        " tenant VARCHAR(64) NULL,"
        " bytes BIGINT UNSIGNED NOT NULL COMMENT 'the compressed stream',"
        " content_bytes BIGINT UNSIGNED NOT NULL COMMENT 'the files, sparse ones in full',"
        " event_usec BIGINT UNSIGNED NOT NULL,"
        " spool_seq BIGINT UNSIGNED NOT NULL,"
        " PRIMARY KEY (snapshot_id, event, restored_into),"
        " KEY source (source_sandbox_id),"
        " KEY owner (owner_uid),"
        " KEY tenant (tenant),"
        " KEY time (event_usec)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        NULL
};

/* Labels (issue 33): the sandbox's, a JSON object, in its row and in each of its
 * executions' (what it was labelled when the execution ran); NULL without labels. */
static const char *const migration_4[] = {
        "ALTER TABLE sandboxes"
        " ADD COLUMN IF NOT EXISTS labels TEXT NULL COMMENT 'JSON object of strings' AFTER name",
        "ALTER TABLE executions"
        " ADD COLUMN IF NOT EXISTS labels TEXT NULL COMMENT 'JSON object of strings' AFTER tenant",
        NULL
};

/* Workspaces on disk (issue 30): what an execution's sandbox's files took on disk at its
 * end, and its DiskMax. NULL for a sandbox in memory (its files are its memory, in
 * cgroup_memory_peak) and in the rows of before. */
static const char *const migration_5[] = {
        "ALTER TABLE executions"
        " ADD COLUMN IF NOT EXISTS disk_bytes_used BIGINT UNSIGNED NULL"
        "  COMMENT 'bytes of the sandbox workspace on disk at the end' AFTER cgroup_memory_peak,"
        " ADD COLUMN IF NOT EXISTS disk_bytes_max BIGINT UNSIGNED NULL"
        "  COMMENT 'its DiskMax' AFTER disk_bytes_used",
        NULL
};

/* A fleet's tenant quotas (issue 36): what each node's tenants hold, replaced by the node
 * every [Fleet] QuotaInterval=; updated by the database's clock, so that the nodes' clocks
 * need not agree. Not history: no retention, a node's rows are its latest. */
static const char *const migration_6[] = {
        "CREATE TABLE IF NOT EXISTS fleet_usage ("
        " node SMALLINT UNSIGNED NOT NULL,"
        " tenant VARCHAR(64) NOT NULL,"
        " sandboxes BIGINT UNSIGNED NOT NULL,"
        " memory BIGINT UNSIGNED NOT NULL,"
        " tasks BIGINT UNSIGNED NOT NULL,"
        " disk BIGINT UNSIGNED NOT NULL,"
        " cpu BIGINT UNSIGNED NOT NULL COMMENT 'CPU quota, µs per second',"
        " updated TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
        " PRIMARY KEY (node, tenant)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        NULL
};

static const char *const *const migrations[RECORDER_SCHEMA_VERSION] = {
        migration_1,
        migration_2,
        migration_3,
        migration_4,
        migration_5,
        migration_6,
};

static const char sql_insert_sandbox[] =
        "INSERT INTO sandboxes (id, owner_uid, tenant, name, labels, template, payload, memory_max,"
        " cpu_quota_per_sec_usec, tasks_max, disk_max, timeout_sec, idle_timeout_sec, ephemeral, created_usec,"
        " destroyed_usec, end_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        /* One id, two lives: a sandbox woken from hibernation (sandboxd-api(7), SNAPSHOTS)
         * starts later than the row it finds, which then runs again. An event of an
         * earlier life (a replay) changes nothing of a later one's. Assignments apply in
         * order: created_usec last. */
        " ON DUPLICATE KEY UPDATE"
        " destroyed_usec = IF(VALUES(created_usec) < created_usec, destroyed_usec,"
        "   IF(VALUES(created_usec) > created_usec, VALUES(destroyed_usec),"
        "      COALESCE(VALUES(destroyed_usec), destroyed_usec))),"
        " end_reason = IF(VALUES(created_usec) < created_usec, end_reason,"
        "   IF(VALUES(created_usec) > created_usec, VALUES(end_reason), COALESCE(VALUES(end_reason), end_reason))),"
        " created_usec = GREATEST(created_usec, VALUES(created_usec))";

static const char sql_insert_exec[] =
        "INSERT IGNORE INTO executions (sandbox_id, exec_id, owner_uid, tenant, labels, caller_uid, argv, cwd,"
        " background, started_usec, ended_usec, exit_status, exit_code, term_signal, timed_out,"
        " oom_killed, output_truncated, cpu_usec, cgroup_cpu_nsec, cgroup_memory_peak, disk_bytes_used,"
        " disk_bytes_max, stdout_bytes, stderr_bytes, stdout_excerpt, stderr_excerpt, spool_seq) VALUES ";
static const char sql_insert_exec_row[] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

static const char sql_insert_template[] =
        "INSERT INTO templates (name, payload, description, loaded_usec) VALUES (?, ?, ?, ?)"
        " ON DUPLICATE KEY UPDATE payload = VALUES(payload), description = VALUES(description),"
        " loaded_usec = GREATEST(loaded_usec, VALUES(loaded_usec))";

static const char sql_insert_snapshot[] =
        "INSERT IGNORE INTO snapshot_events (snapshot_id, event, restored_into, cause, source_sandbox_id, owner_uid,"
        " tenant, bytes, content_bytes, event_usec, spool_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

static const char *const sql_prune[] = {
        "DELETE FROM executions WHERE ended_usec < ? LIMIT 5000",
        "DELETE FROM sandboxes WHERE destroyed_usec IS NOT NULL AND destroyed_usec < ? LIMIT 5000",
        "DELETE FROM snapshot_events WHERE event_usec < ? LIMIT 5000",
};

/* Whether an error is about this record (it will fail the same way every time) rather
 * than about the server or the connection (which may be better later). */
static bool error_is_permanent(unsigned e) {
        switch (e) {
        case ER_BAD_NULL_ERROR:
        case ER_WARN_DATA_OUT_OF_RANGE:
        case WARN_DATA_TRUNCATED:
        case ER_TRUNCATED_WRONG_VALUE:
        case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
        case ER_DATA_TOO_LONG:
        case ER_INVALID_CHARACTER_STRING:
                return true;
        default:
                return false;
        }
}

static int db_fail(RecorderDB *db, unsigned e, const char *msg, const char *what) {
        /* Bounded: a server message can be longer than the error buffer. */
        snprintf(db->error, sizeof(db->error), "%.100s: %.380s (%u)", what, msg, e);
        return error_is_permanent(e) ? -EBADMSG : -EAGAIN;
}

static int db_fail_mysql(RecorderDB *db, const char *what) {
        return db_fail(db, mysql_errno(db->mysql), mysql_error(db->mysql), what);
}

static int db_fail_stmt(RecorderDB *db, MYSQL_STMT *st, const char *what) {
        return db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st), what);
}

const char *recorder_db_error(RecorderDB *db) {
        return db->error;
}

RecorderDB *recorder_db_free(RecorderDB *db) {
        if (!db)
                return NULL;
        if (db->insert_sandbox)
                mysql_stmt_close(db->insert_sandbox);
        for (size_t i = 0; i < ELEMENTSOF(db->insert_exec); i++)
                if (db->insert_exec[i])
                        mysql_stmt_close(db->insert_exec[i]);
        if (db->params)
                free(params_reset(db->params));
        if (db->insert_template)
                mysql_stmt_close(db->insert_template);
        if (db->insert_snapshot)
                mysql_stmt_close(db->insert_snapshot);
        if (db->mysql)
                mysql_close(db->mysql);
        free(db);
        return NULL;
}

static int prepare(RecorderDB *db, const char *sql, MYSQL_STMT **ret) {
        MYSQL_STMT *st;

        st = mysql_stmt_init(db->mysql);
        if (!st)
                return db_fail_mysql(db, "mysql_stmt_init");
        if (mysql_stmt_prepare(st, sql, (unsigned long) strlen(sql)) != 0) {
                int r = db_fail_stmt(db, st, "Failed to prepare statement");
                mysql_stmt_close(st);
                return r == -EBADMSG ? -EAGAIN : r;
        }
        *ret = st;
        return 0;
}

int recorder_db_connect(const RecorderSettings *s, RecorderDB **ret, char **ret_error) {
        RecorderDB *db;
        unsigned timeout = DB_TIMEOUT_SEC;
        my_bool off = 0;

        db = calloc(1, sizeof(RecorderDB));
        if (!db)
                return -ENOMEM;
        db->params = calloc(1, sizeof(Params));
        db->mysql = mysql_init(NULL);
        if (!db->params || !db->mysql) {
                recorder_db_free(db);
                return -ENOMEM;
        }
        (void) mysql_options(db->mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
        (void) mysql_options(db->mysql, MYSQL_OPT_READ_TIMEOUT, &timeout);
        (void) mysql_options(db->mysql, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
        (void) mysql_options(db->mysql, MYSQL_OPT_RECONNECT, &off);
        (void) mysql_options(db->mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
        /* No my.cnf of the host: what sandboxd.conf says is what is used. */

        if (!mysql_real_connect(db->mysql, s->mariadb_socket ? NULL : s->mariadb_host,
                                s->mariadb_user, s->mariadb_password, s->mariadb_database,
                                s->mariadb_socket ? 0 : s->mariadb_port, s->mariadb_socket,
                                CLIENT_FOUND_ROWS)) {
                if (ret_error)
                        *ret_error = strdup(mysql_error(db->mysql));
                recorder_db_free(db);
                return -EAGAIN;
        }
        if (mysql_autocommit(db->mysql, 0) != 0 ||
            mysql_query(db->mysql, "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'") != 0) {
                if (ret_error)
                        *ret_error = strdup(mysql_error(db->mysql));
                recorder_db_free(db);
                return -EAGAIN;
        }
        *ret = db;
        return 0;
}

static int query(RecorderDB *db, const char *sql) {
        if (mysql_query(db->mysql, sql) != 0)
                return db_fail_mysql(db, sql);
        MYSQL_RES *res = mysql_store_result(db->mysql);
        if (res)
                mysql_free_result(res);
        return 0;
}

static MYSQL_BIND *param_next(Params *p) {
        assert(p->n < ELEMENTSOF(p->bind));
        MYSQL_BIND *b = &p->bind[p->n];
        memset(b, 0, sizeof(*b));
        b->is_null = &p->null[p->n];
        b->length = &p->len[p->n];
        p->null[p->n] = 0;
        return b;
}

static void param_u64(Params *p, uint64_t v) {
        MYSQL_BIND *b = param_next(p);
        p->u64[p->n] = v;
        b->buffer_type = MYSQL_TYPE_LONGLONG;
        b->buffer = &p->u64[p->n];
        b->is_unsigned = 1;
        p->n++;
}

static void param_u64_or_null(Params *p, uint64_t v) {
        size_t i = p->n;
        param_u64(p, v);
        p->null[i] = v == 0;
}

/* o's key, or NULL where o has none. */
static void param_u64_field(Params *p, json_object *o, const char *key) {
        size_t i = p->n;
        param_u64(p, spool_get_u64(o, key));
        p->null[i] = !json_object_object_get_ex(o, key, NULL);
}

static void param_i32(Params *p, int64_t v) {
        MYSQL_BIND *b = param_next(p);
        p->i32[p->n] = (int32_t) v;
        b->buffer_type = MYSQL_TYPE_LONG;
        b->buffer = &p->i32[p->n];
        p->n++;
}

static void param_bool(Params *p, bool v) {
        MYSQL_BIND *b = param_next(p);
        p->b[p->n] = v;
        b->buffer_type = MYSQL_TYPE_TINY;
        b->buffer = &p->b[p->n];
        p->n++;
}

/* Bytes as they are, into a BLOB (NULL stays NULL). */
static void param_blob(Params *p, const void *data, size_t size, bool is_null) {
        MYSQL_BIND *b = param_next(p);
        b->buffer_type = MYSQL_TYPE_BLOB;
        b->buffer = (void *) (data ?: "");
        b->buffer_length = (unsigned long) size;
        p->len[p->n] = (unsigned long) size;
        p->null[p->n] = is_null;
        p->n++;
}

/* Text for a TEXT/VARCHAR column: made valid UTF-8, so that the server never refuses it. */
static int param_text(Params *p, const char *s, size_t size) {
        char *t = NULL;
        size_t l = 0;
        int r;

        if (s) {
                r = utf8_sanitize(s, size, &t, &l);
                if (r < 0)
                        return r;
                params_own(p, t);
        }
        MYSQL_BIND *b = param_next(p);
        b->buffer_type = MYSQL_TYPE_STRING;
        b->buffer = t ?: (char *) "";
        b->buffer_length = (unsigned long) l;
        p->len[p->n] = (unsigned long) l;
        p->null[p->n] = !s;
        p->n++;
        return 0;
}

static int param_text_field(Params *p, json_object *o, const char *key) {
        size_t l;
        const char *s = spool_get_string(o, key, &l);
        return param_text(p, s, l);
}

/* The record's labels, a JSON object, as text; NULL without. */
static int param_labels(Params *p, json_object *o) {
        json_object *v;
        const char *s;
        size_t l;

        if (!json_object_object_get_ex(o, "labels", &v) || !json_object_is_type(v, json_type_object))
                return param_text(p, NULL, 0);
        s = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &l);
        if (!s)
                return -ENOMEM;
        return param_text(p, s, l);
}

static int execute(RecorderDB *db, MYSQL_STMT *st, Params *p, const char *what) {
        if (mysql_stmt_bind_param(st, p->bind) != 0)
                return db_fail_stmt(db, st, what);
        if (mysql_stmt_execute(st) != 0)
                return db_fail_stmt(db, st, what);
        return 0;
}

/* The statement that inserts 2^log2 executions at once. */
static int exec_statement(RecorderDB *db, unsigned log2, MYSQL_STMT **ret) {
        _cleanup_free_ char *sql = NULL;
        size_t rows = 1U << log2, size;
        char *q;
        int r;

        assert(log2 < ELEMENTSOF(db->insert_exec));
        if (!db->insert_exec[log2]) {
                size = sizeof(sql_insert_exec) + rows * sizeof(sql_insert_exec_row);
                sql = malloc(size);
                if (!sql)
                        return -ENOMEM;
                q = stpcpy(sql, sql_insert_exec);
                for (size_t i = 0; i < rows; i++)
                        q = stpcpy(stpcpy(q, i > 0 ? "," : ""), sql_insert_exec_row);
                r = prepare(db, sql, &db->insert_exec[log2]);
                if (r < 0)
                        return r;
        }
        *ret = db->insert_exec[log2];
        return 0;
}

int recorder_db_migrate(RecorderDB *db) {
        unsigned have = 0;
        int r;

        r = query(db, "CREATE TABLE IF NOT EXISTS schema_version ("
                      " version INT UNSIGNED NOT NULL PRIMARY KEY,"
                      " applied_usec BIGINT UNSIGNED NOT NULL"
                      ") ENGINE=InnoDB");
        if (r < 0)
                return r == -EBADMSG ? -EAGAIN : r;
        MYSQL_RES *res = NULL;
        if (mysql_query(db->mysql, "SELECT COALESCE(MAX(version), 0) FROM schema_version") != 0 ||
            !(res = mysql_store_result(db->mysql))) {
                (void) db_fail_mysql(db, "Failed to read schema_version");
                return -EAGAIN;
        }
        MYSQL_ROW row = mysql_fetch_row(res);
        if (row && row[0])
                have = (unsigned) strtoul(row[0], NULL, 10);
        mysql_free_result(res);
        if (have > RECORDER_SCHEMA_VERSION) {
                snprintf(db->error, sizeof(db->error),
                         "The database has schema version %u, newer than this sandboxd's %u; writing anyway.",
                         have, RECORDER_SCHEMA_VERSION);
        }

        for (unsigned v = have + 1; v <= RECORDER_SCHEMA_VERSION; v++) {
                char sql[128];
                for (const char *const *s = migrations[v - 1]; *s; s++) {
                        r = query(db, *s);
                        if (r < 0)
                                return -EAGAIN;
                }
                snprintf(sql, sizeof(sql),
                         "INSERT IGNORE INTO schema_version (version, applied_usec) VALUES (%u, %llu)",
                         v, (unsigned long long) now_usec(CLOCK_REALTIME));
                r = query(db, sql);
                if (r >= 0)
                        r = recorder_db_commit(db);
                if (r < 0)
                        return -EAGAIN;
        }

        if (!db->insert_sandbox) {
                r = prepare(db, sql_insert_sandbox, &db->insert_sandbox);
                MYSQL_STMT *unused;
                if (r >= 0)
                        r = exec_statement(db, 0, &unused);
                if (r >= 0)
                        r = prepare(db, sql_insert_template, &db->insert_template);
                if (r >= 0)
                        r = prepare(db, sql_insert_snapshot, &db->insert_snapshot);
                if (r < 0)
                        return r;
        }
        return have > RECORDER_SCHEMA_VERSION;
}

int recorder_db_begin(RecorderDB *db) {
        /* autocommit is off: a transaction starts with the first statement. */
        return 0;
}

int recorder_db_commit(RecorderDB *db) {
        if (mysql_commit(db->mysql) != 0) {
                db_fail_mysql(db, "COMMIT");
                return -EAGAIN;
        }
        return 0;
}

void recorder_db_rollback(RecorderDB *db) {
        (void) mysql_rollback(db->mysql);
}

/* Appends one execution's EXEC_COLUMNS parameters to p. */
static int exec_params(json_object *o, Params *p) {
        json_object *argv;
        const char *argv_json = "[]", *cwd;
        size_t argv_size = 2, cwd_size;
        void *out = NULL, *err = NULL;
        size_t out_size = 0, err_size = 0;
        size_t sb_size;
        const char *sb;
        int r;

        sb = spool_get_string(o, "sandbox", &sb_size);
        if (!sb)
                return -EBADMSG;
        if (json_object_object_get_ex(o, "argv", &argv)) {
                argv_json = json_object_to_json_string_length(argv, ARGV_JSON_FLAGS,
                                                              &argv_size);
                if (!argv_json)
                        return -ENOMEM;
        }
        cwd = spool_get_string(o, "cwd", &cwd_size);
        r = spool_get_hex(o, "stdout", &out, &out_size);
        if (r >= 0)
                params_own(p, out);
        if (r >= 0)
                r = spool_get_hex(o, "stderr", &err, &err_size);
        if (r >= 0)
                params_own(p, err);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG;

        r = param_text(p, sb, sb_size);
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "exec"));
        param_u64(p, spool_get_u64(o, "owner"));
        r = param_text_field(p, o, "tenant");
        if (r >= 0)
                r = param_labels(p, o);
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "caller"));
        param_blob(p, argv_json, argv_size, false);
        param_blob(p, cwd, cwd_size, !cwd);
        param_bool(p, spool_get_bool(o, "background"));
        param_u64(p, spool_get_u64(o, "started"));
        param_u64(p, spool_get_u64(o, "ended"));
        param_i32(p, spool_get_i64(o, "exit_status"));
        param_i32(p, spool_get_i64(o, "exit_code"));
        param_i32(p, spool_get_i64(o, "signal"));
        param_bool(p, spool_get_bool(o, "timed_out"));
        param_bool(p, spool_get_bool(o, "oom_killed"));
        param_bool(p, spool_get_bool(o, "truncated"));
        param_u64(p, spool_get_u64(o, "cpu_usec"));
        param_u64(p, spool_get_u64(o, "cgroup_cpu_nsec"));
        param_u64(p, spool_get_u64(o, "memory_peak"));
        param_u64_field(p, o, "disk_used");
        param_u64_field(p, o, "disk_max");
        param_u64(p, spool_get_u64(o, "stdout_bytes"));
        param_u64(p, spool_get_u64(o, "stderr_bytes"));
        param_blob(p, out, out_size, false);
        param_blob(p, err, err_size, false);
        param_u64(p, spool_get_u64(o, "seq"));
        return 0;
}

/* About how many bytes an execution's row sends: its variable-length columns. */
static size_t exec_size(json_object *o) {
        json_object *argv;
        size_t size = 0, l;

        if (spool_get_string(o, "cwd", &l))
                size += l;
        if (json_object_object_get_ex(o, "labels", &argv) &&
            json_object_to_json_string_length(argv, JSON_C_TO_STRING_PLAIN, &l))
                size += l;
        if (spool_get_string(o, "stdout", &l))
                size += l / 2;
        if (spool_get_string(o, "stderr", &l))
                size += l / 2;
        /* argv goes as the JSON text exec_params() makes of it: escapes count. */
        if (json_object_object_get_ex(o, "argv", &argv) &&
            json_object_to_json_string_length(argv, ARGV_JSON_FLAGS, &l))
                size += l;
        return size;
}

/* Inserts 2^log2 executions with one statement. */
static int apply_execs(RecorderDB *db, json_object **records, unsigned log2) {
        Params *p = params_reset(db->params);
        MYSQL_STMT *st;
        int r;

        for (size_t i = 0; i < (1U << log2); i++) {
                r = exec_params(records[i], p);
                if (r == -EBADMSG)
                        snprintf(db->error, sizeof(db->error), "record %" PRIu64 " is not a valid execution record",
                                 spool_get_u64(records[i], "seq"));
                if (r < 0)
                        return r;
        }
        assert(p->n == EXEC_COLUMNS << log2);
        r = exec_statement(db, log2, &st);
        if (r < 0)
                return r;
        return execute(db, st, p, "INSERT INTO executions");
}

static int apply_sandbox(RecorderDB *db, json_object *o, Params *p) {
        int r;

        if (!spool_get_string(o, "sandbox", NULL))
                return -EBADMSG;
        r = param_text_field(p, o, "sandbox");
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "owner"));
        r = param_text_field(p, o, "tenant");
        if (r >= 0)
                r = param_text_field(p, o, "name");
        if (r >= 0)
                r = param_labels(p, o);
        if (r < 0)
                return r;
        r = param_text(p, spool_get_string(o, "template", NULL) ?: "", strlen(spool_get_string(o, "template", NULL) ?: ""));
        if (r < 0)
                return r;
        r = param_text(p, spool_get_string(o, "payload", NULL) ?: "", strlen(spool_get_string(o, "payload", NULL) ?: ""));
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "memory_max"));
        param_u64(p, spool_get_u64(o, "cpu_quota_per_sec_usec"));
        param_u64(p, spool_get_u64(o, "tasks_max"));
        param_u64(p, spool_get_u64(o, "disk_max"));
        param_u64(p, spool_get_u64(o, "timeout_sec"));
        param_u64(p, spool_get_u64(o, "idle_timeout_sec"));
        param_bool(p, spool_get_bool(o, "ephemeral"));
        param_u64(p, spool_get_u64(o, "created"));
        param_u64_or_null(p, spool_get_u64(o, "destroyed"));
        r = param_text_field(p, o, "end_reason");
        if (r < 0)
                return r;
        return execute(db, db->insert_sandbox, p, "INSERT INTO sandboxes");
}

static int apply_template(RecorderDB *db, json_object *o, Params *p) {
        int r;

        if (!spool_get_string(o, "name", NULL))
                return -EBADMSG;
        r = param_text_field(p, o, "name");
        if (r >= 0)
                r = param_text(p, spool_get_string(o, "payload", NULL) ?: "", strlen(spool_get_string(o, "payload", NULL) ?: ""));
        if (r >= 0)
                r = param_text_field(p, o, "description");
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "time"));
        return execute(db, db->insert_template, p, "INSERT INTO templates");
}

static int apply_snapshot(RecorderDB *db, json_object *o, Params *p) {
        const char *into;
        size_t into_size = 0;
        int r;

        if (!spool_get_string(o, "snapshot", NULL) || !spool_get_string(o, "event", NULL) ||
            !spool_get_string(o, "cause", NULL) || !spool_get_string(o, "source", NULL))
                return -EBADMSG;
        into = spool_get_string(o, "sandbox", &into_size);
        r = param_text_field(p, o, "snapshot");
        if (r >= 0)
                r = param_text_field(p, o, "event");
        if (r >= 0)
                r = param_text(p, into ?: "", into_size);
        if (r >= 0)
                r = param_text_field(p, o, "cause");
        if (r >= 0)
                r = param_text_field(p, o, "source");
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "owner"));
        r = param_text_field(p, o, "tenant");
        if (r < 0)
                return r;
        param_u64(p, spool_get_u64(o, "size"));
        param_u64(p, spool_get_u64(o, "content_size"));
        param_u64(p, spool_get_u64(o, "time"));
        param_u64(p, spool_get_u64(o, "seq"));
        return execute(db, db->insert_snapshot, p, "INSERT INTO snapshot_events");
}

static bool is_exec(json_object *record) {
        return streq_ptr(spool_get_string(record, "type", NULL), "exec");
}

static int apply_one(RecorderDB *db, json_object *record, recorder_db_bad_t bad, void *userdata) {
        const char *type = spool_get_string(record, "type", NULL);
        Params *p = params_reset(db->params);
        int r;

        if (streq_ptr(type, "exec"))
                r = apply_execs(db, &record, 0);
        else if (streq_ptr(type, "sandbox"))
                r = apply_sandbox(db, record, p);
        else if (streq_ptr(type, "template"))
                r = apply_template(db, record, p);
        else if (streq_ptr(type, "snapshot"))
                r = apply_snapshot(db, record, p);
        else
                r = 0;  /* a record type of a newer sandboxd: nothing to do here */
        params_reset(p);
        if (r == -EBADMSG) {
                /* This record can never be stored; it stays in the spool. */
                if (bad)
                        bad(record, db->error, userdata);
                r = 0;
        }
        return r;
}

int recorder_db_apply(RecorderDB *db, json_object **records, size_t n, recorder_db_bad_t bad, void *userdata) {
        size_t i = 0;
        int r;

        while (i < n) {
                size_t run = 0;

                while (i + run < n && is_exec(records[i + run]))
                        run++;
                if (run < 2) {
                        r = apply_one(db, records[i], bad, userdata);
                        if (r < 0)
                                return r;
                        i++;
                        continue;
                }
                /* A run of executions: in statements of the largest power of two of rows
                 * that fits. One row the server refuses fails its statement (and only that
                 * statement: the transaction goes on); then its rows go in one by one. */
                unsigned log2 = EXEC_ROWS_LOG2_MAX;
                while ((1U << log2) > run)
                        log2--;
                for (size_t bytes = SIZE_MAX; log2 > 0 && bytes > EXEC_STATEMENT_BYTES_MAX; ) {
                        bytes = 0;
                        for (size_t j = 0; j < (1U << log2); j++)
                                bytes += exec_size(records[i + j]);
                        if (bytes > EXEC_STATEMENT_BYTES_MAX)
                                log2--;
                }
                size_t rows = 1U << log2;
                r = apply_execs(db, records + i, log2);
                params_reset(db->params);
                if (r == -EBADMSG)
                        for (size_t j = 0; r == -EBADMSG && j < rows; j++) {
                                int k = apply_one(db, records[i + j], bad, userdata);
                                if (k < 0)
                                        r = k;
                        }
                if (r == -EBADMSG)
                        r = 0;
                if (r < 0)
                        return r;
                i += rows;
        }
        return 0;
}

int recorder_db_prune(RecorderDB *db, uint64_t before_usec, const atomic_bool *stop) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(sql_prune); i++) {
                _cleanup_(mysql_stmt_closep) MYSQL_STMT *st = NULL;
                r = prepare(db, sql_prune[i], &st);
                if (r < 0)
                        return r;
                for (;;) {
                        Params *p = params_reset(db->params);
                        param_u64(p, before_usec);
                        r = execute(db, st, p, "DELETE");
                        if (r < 0)
                                return -EAGAIN;
                        my_ulonglong n = mysql_stmt_affected_rows(st);
                        r = recorder_db_commit(db);
                        if (r < 0)
                                return r;
                        if (n < PRUNE_BATCH)
                                break;
                        if (stop && atomic_load(stop))
                                return -ECANCELED;
                }
        }
        return 0;
}

/* ---- ListExecutions from the database: a fleet's executions ---------------------- */

/* s as a hex literal: nothing in it can end the literal, whatever the connection's
 * character set. */
static int sql_string(FILE *f, const char *s) {
        size_t l = strlen(s);
        _cleanup_free_ char *hex = malloc(2 * l + 1);

        if (!hex)
                return -ENOMEM;
        (void) mysql_hex_string(hex, s, l);
        fprintf(f, "X'%s'", hex);
        return 0;
}

static json_object *row_u64(const char *s) {
        uint64_t v = 0;

        (void) parse_uint64(strempty(s), &v);
        return json_object_new_uint64(v);
}

static json_object *row_i64(const char *s) {
        return json_object_new_int64(s ? strtoll(s, NULL, 10) : 0);
}

int recorder_db_list_executions(RecorderDB *db, const ExecutionFilter *f, unsigned limit,
                                recorder_db_row_t row, void *userdata) {
        static const char *const columns[] = {
                "sandbox", "exec", "owner", "tenant", "caller", "argv", "cwd", "started", "ended",
                "exit_status", "exit_code", "signal", "timed_out", "oom_killed", "cpu_usec",
                "cgroup_cpu_nsec", "memory_peak", "disk_used", "disk_max", "stdout_bytes", "stderr_bytes",
        };
        _cleanup_free_ char *sql = NULL;
        size_t size = 0;
        MYSQL_RES *res;
        MYSQL_ROW values;
        FILE *s;
        int k = 0;

        s = open_memstream(&sql, &size);
        if (!s)
                return -ENOMEM;
        fputs("SELECT sandbox_id, exec_id, owner_uid, IFNULL(tenant, ''), caller_uid, argv, IFNULL(cwd, ''),"
              " started_usec, ended_usec, exit_status, exit_code, term_signal, timed_out, oom_killed, cpu_usec,"
              " cgroup_cpu_nsec, cgroup_memory_peak, disk_bytes_used, disk_bytes_max, stdout_bytes, stderr_bytes"
              " FROM executions WHERE TRUE", s);
        if (f->sandbox_id) {
                fputs(" AND sandbox_id = ", s);
                k = sql_string(s, f->sandbox_id);
        }
        if (!f->any_owner)
                fprintf(s, " AND (owner_uid = %u OR caller_uid = %u)", (unsigned) f->uid, (unsigned) f->uid);
        if (f->owner_set)
                fprintf(s, " AND owner_uid = %u", (unsigned) f->owner);
        if (f->since > 0)
                fprintf(s, " AND started_usec >= %" PRIu64, f->since);
        if (!isempty(f->tenant) && k >= 0) {
                fputs(" AND tenant = ", s);
                k = sql_string(s, f->tenant);
        }
        if (!isempty(f->caller_tenant) && k >= 0) {
                fputs(" AND tenant = ", s);
                k = sql_string(s, f->caller_tenant);
        }
        fprintf(s, " ORDER BY ended_usec DESC LIMIT %u", limit);
        if (fclose(s) != 0 || !sql || k < 0)
                return -ENOMEM;

        if (mysql_query(db->mysql, sql) != 0)
                return db_fail_mysql(db, "SELECT … FROM executions");
        res = mysql_store_result(db->mysql);
        if (!res)
                return db_fail_mysql(db, "SELECT … FROM executions");
        while (k >= 0 && (values = mysql_fetch_row(res))) {
                unsigned long *lengths = mysql_fetch_lengths(res);
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o || !lengths) {
                        k = -ENOMEM;
                        break;
                }
                for (size_t i = 0; i < ELEMENTSOF(columns) && k >= 0; i++) {
                        json_object *v;

                        if (!values[i])
                                continue;       /* NULL: as a spool record without the field */
                        if (streq(columns[i], "argv"))
                                v = json_tokener_parse(values[i]) ?: json_object_new_array();
                        else if (i == 0 || streq(columns[i], "tenant") || streq(columns[i], "cwd"))
                                v = json_object_new_string_len(values[i], (int) MIN(lengths[i], (unsigned long) INT_MAX));
                        else if (streq(columns[i], "exit_status") || streq(columns[i], "exit_code") ||
                                 streq(columns[i], "signal"))
                                v = row_i64(values[i]);
                        else if (streq(columns[i], "timed_out") || streq(columns[i], "oom_killed"))
                                v = json_object_new_boolean(streq(values[i], "1"));
                        else
                                v = row_u64(values[i]);
                        if (!v || json_object_object_add(o, columns[i], v) < 0) {
                                json_object_put(v);
                                k = -ENOMEM;
                        }
                }
                if (k >= 0)
                        k = row(o, userdata);
        }
        mysql_free_result(res);
        return k;
}

/* ---- a fleet's tenant quotas ----------------------------------------------------- */

int recorder_db_fleet_usage(RecorderDB *db, unsigned node, const TenantUse *mine, size_t n_mine,
                            uint64_t fresh_usec, TenantUse **ret, size_t *ret_n) {
        _cleanup_free_ char *sql = NULL;
        _cleanup_free_ TenantUse *list = NULL;
        size_t size = 0, n = 0;
        MYSQL_RES *res;
        MYSQL_ROW row;
        FILE *s;
        int k = 0;

        /* This node's rows, replaced in one transaction. */
        s = open_memstream(&sql, &size);
        if (!s)
                return -ENOMEM;
        fputs("INSERT INTO fleet_usage (node, tenant, sandboxes, memory, tasks, disk, cpu) VALUES ", s);
        for (size_t i = 0; i < n_mine && k >= 0; i++) {
                const QuotaUse *u = &mine[i].use;
                fprintf(s, "%s(%u, ", i > 0 ? ", " : "", node);
                k = sql_string(s, mine[i].tenant);
                fprintf(s, ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", u->sandboxes,
                        u->memory, u->tasks, u->disk, u->cpu);
        }
        if (fclose(s) != 0 || !sql || k < 0)
                return -ENOMEM;
        k = recorder_db_begin(db);
        if (k < 0)
                return k;
        {
                char del[64];
                snprintf(del, sizeof(del), "DELETE FROM fleet_usage WHERE node = %u", node);
                k = query(db, del);
        }
        if (k >= 0 && n_mine > 0)
                k = query(db, sql);
        if (k >= 0)
                k = recorder_db_commit(db);
        if (k < 0) {
                recorder_db_rollback(db);
                return k;
        }

        /* The others', those that have told lately: a node gone stops counting. */
        sql = mfree(sql);
        if (asprintf(&sql, "SELECT tenant, SUM(sandboxes), SUM(memory), SUM(tasks), SUM(disk), SUM(cpu)"
                     " FROM fleet_usage WHERE node <> %u AND updated >= NOW(6) - INTERVAL %" PRIu64 " MICROSECOND"
                     " GROUP BY tenant", node, fresh_usec) < 0)
                return -ENOMEM;
        if (mysql_query(db->mysql, sql) != 0)
                return db_fail_mysql(db, "SELECT … FROM fleet_usage");
        res = mysql_store_result(db->mysql);
        if (!res)
                return db_fail_mysql(db, "SELECT … FROM fleet_usage");
        while (k >= 0 && (row = mysql_fetch_row(res))) {
                TenantUse *p = reallocarray(list, n + 1, sizeof(TenantUse));
                uint64_t v[5] = {};

                if (!p) {
                        k = -ENOMEM;
                        break;
                }
                list = p;
                for (size_t i = 0; i < 5; i++)
                        (void) parse_uint64(strempty(row[i + 1]), &v[i]);
                list[n] = (TenantUse) { .use = { v[0], v[1], v[2], v[3], v[4] } };
                snprintf(list[n].tenant, sizeof(list[n].tenant), "%s", strempty(row[0]));
                n++;
        }
        mysql_free_result(res);
        /* Ends the read's transaction (autocommit is off): the next round sees anew. */
        if (k >= 0)
                k = recorder_db_commit(db);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}
