/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The daemon's configuration file, sandboxd.conf(5): read here, in the daemon, and
 * handed to the parts it configures (today the recorder's [Recording] section). */

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf-parser.h"
#include "fd-util.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "sandbox.h"
#include "sandboxd-conf.h"

#define PASSWORD_MAX 4096

typedef struct SettingsFile {
        RecorderSettings s;
        SnapshotSettings snap;
        TenancySettings ten;
        WorkspaceSettings ws;
        uint64_t fleet_node;
        char *password_file;
} SettingsFile;

static const ConfigTableItem recorder_table[] = {
        { "Recording", "Record",         config_parse_bool,    offsetof(SettingsFile, s.enabled),          "yes or no" },
        { "Recording", "SpoolDirectory", config_parse_path,    offsetof(SettingsFile, s.spool_dir),        "an absolute path" },
        { "Recording", "MariaDBSocket",  config_parse_path,    offsetof(SettingsFile, s.mariadb_socket),   "an absolute path" },
        { "Recording", "MariaDBHost",    config_parse_string,  offsetof(SettingsFile, s.mariadb_host),     "a host name or address" },
        { "Recording", "MariaDBPort",    config_parse_port,    offsetof(SettingsFile, s.mariadb_port),     "a port, 1…65535" },
        { "Recording", "Database",       config_parse_string,  offsetof(SettingsFile, s.mariadb_database), "a database name" },
        { "Recording", "User",           config_parse_string,  offsetof(SettingsFile, s.mariadb_user),     "a user name" },
        { "Recording", "PasswordFile",   config_parse_path,    offsetof(SettingsFile, password_file),      "an absolute path" },
        { "Recording", "Retention",      config_parse_seconds, offsetof(SettingsFile, s.retention_sec),    "seconds with an optional unit (s, min, h, d)" },
        { "Snapshots", "Directory",        config_parse_path,    offsetof(SettingsFile, snap.directory),           "an absolute path" },
        { "Snapshots", "MaxBytesPerOwner", config_parse_size,    offsetof(SettingsFile, snap.max_bytes_per_owner), "bytes with an optional K, M, G or T" },
        { "Snapshots", "MaxPerOwner",      config_parse_uint64,  offsetof(SettingsFile, snap.max_per_owner),       "a number" },
        { "Snapshots", "Retention",        config_parse_seconds, offsetof(SettingsFile, snap.retention_sec),       "seconds with an optional unit (s, min, h, d)" },
        { "Node", "Ceilings",        config_parse_bool,   offsetof(SettingsFile, ten.node.apply),          "yes or no" },
        { "Node", "MemoryMax",       config_parse_size,   offsetof(SettingsFile, ten.node.memory_max),     "bytes with an optional K, M, G or T" },
        { "Node", "MemoryReserve",   config_parse_size,   offsetof(SettingsFile, ten.node.memory_reserve), "bytes with an optional K, M, G or T" },
        { "Node", "TasksMax",        config_parse_uint64, offsetof(SettingsFile, ten.node.tasks_max),      "a number" },
        { "Node", "TasksReserve",    config_parse_uint64, offsetof(SettingsFile, ten.node.tasks_reserve),  "a number" },
        { "Node", "CPUWeight",       config_parse_uint64, offsetof(SettingsFile, ten.node.cpu_weight),     "a number, 1…99" },
        { "Node", "StartsInFlight",  config_parse_uint64, offsetof(SettingsFile, ten.node.starts_in_flight), "a number" },
        { "Limits", "MemoryMax",        config_parse_size,      offsetof(SettingsFile, ten.limits.max.memory_max),             "bytes with an optional K, M, G or T" },
        { "Limits", "CPUQuotaMax",      config_parse_cpu_quota, offsetof(SettingsFile, ten.limits.max.cpu_quota_per_sec_usec), "a percentage of one CPU" },
        { "Limits", "TasksMax",         config_parse_uint64,    offsetof(SettingsFile, ten.limits.max.tasks_max),              "a number" },
        { "Limits", "DiskMax",          config_parse_size,      offsetof(SettingsFile, ten.limits.disk_max),                   "bytes with an optional K, M, G or T" },
        { "Limits", "TimeoutMax",       config_parse_seconds,   offsetof(SettingsFile, ten.limits.timeout_max),                "seconds with an optional unit (s, min, h, d)" },
        { "Limits", "OutputMax",        config_parse_size,      offsetof(SettingsFile, ten.limits.output_max),                 "bytes with an optional K, M, G or T" },
        { "Limits", "StdinMax",         config_parse_size,      offsetof(SettingsFile, ten.limits.stdin_max),                  "bytes with an optional K, M, G or T" },
        { "Limits", "SnapshotMax",      config_parse_size,      offsetof(SettingsFile, ten.limits.snapshot_max),               "bytes with an optional K, M, G or T" },
        { "Limits", "DefaultMemoryMax", config_parse_size,      offsetof(SettingsFile, ten.limits.def.memory_max),             "bytes with an optional K, M, G or T" },
        { "Limits", "DefaultCPUQuota",  config_parse_cpu_quota, offsetof(SettingsFile, ten.limits.def.cpu_quota_per_sec_usec), "a percentage of one CPU" },
        { "Limits", "DefaultTasksMax",  config_parse_uint64,    offsetof(SettingsFile, ten.limits.def.tasks_max),              "a number" },
        { "Limits", "DefaultDiskMax",   config_parse_size,      offsetof(SettingsFile, ten.limits.disk_default),               "bytes with an optional K, M, G or T" },
        { "Limits", "DefaultTimeout",   config_parse_seconds,   offsetof(SettingsFile, ten.limits.timeout_default),            "seconds with an optional unit (s, min, h, d)" },
        { "OwnerQuota", "Sandboxes",        config_parse_uint64,    offsetof(SettingsFile, ten.quota.owner.sandboxes),       "a number" },
        { "OwnerQuota", "MemoryMax",        config_parse_size,      offsetof(SettingsFile, ten.quota.owner.memory),          "bytes with an optional K, M, G or T" },
        { "OwnerQuota", "TasksMax",         config_parse_uint64,    offsetof(SettingsFile, ten.quota.owner.tasks),           "a number" },
        { "OwnerQuota", "DiskMax",          config_parse_size,      offsetof(SettingsFile, ten.quota.owner.disk),            "bytes with an optional K, M, G or T" },
        { "OwnerQuota", "CPUQuota",         config_parse_cpu_quota, offsetof(SettingsFile, ten.quota.owner.cpu),             "a percentage of one CPU" },
        { "OwnerQuota", "CreatesPerSecond", config_parse_uint64,    offsetof(SettingsFile, ten.quota.owner.creates_per_sec), "a number" },
        { "OwnerQuota", "CreatesBurst",     config_parse_uint64,    offsetof(SettingsFile, ten.quota.owner.creates_burst),   "a number" },
        { "TenantQuota", "Sandboxes",        config_parse_uint64,    offsetof(SettingsFile, ten.quota.tenant.sandboxes),       "a number" },
        { "TenantQuota", "MemoryMax",        config_parse_size,      offsetof(SettingsFile, ten.quota.tenant.memory),          "bytes with an optional K, M, G or T" },
        { "TenantQuota", "TasksMax",         config_parse_uint64,    offsetof(SettingsFile, ten.quota.tenant.tasks),           "a number" },
        { "TenantQuota", "DiskMax",          config_parse_size,      offsetof(SettingsFile, ten.quota.tenant.disk),            "bytes with an optional K, M, G or T" },
        { "TenantQuota", "CPUQuota",         config_parse_cpu_quota, offsetof(SettingsFile, ten.quota.tenant.cpu),             "a percentage of one CPU" },
        { "TenantQuota", "CreatesPerSecond", config_parse_uint64,    offsetof(SettingsFile, ten.quota.tenant.creates_per_sec), "a number" },
        { "TenantQuota", "CreatesBurst",     config_parse_uint64,    offsetof(SettingsFile, ten.quota.tenant.creates_burst),   "a number" },
        { "TenantQuota", "Snapshots",        config_parse_uint64,    offsetof(SettingsFile, ten.quota.tenant.snapshots),       "a number" },
        { "TenantQuota", "SnapshotBytes",    config_parse_size,      offsetof(SettingsFile, ten.quota.tenant.snapshot_bytes),  "bytes with an optional K, M, G or T" },
        { "Fleet", "Node",                 config_parse_uint64,  offsetof(SettingsFile, fleet_node),               "a number, 1…255" },
        { "Fleet", "QuotaInterval",        config_parse_seconds, offsetof(SettingsFile, s.fleet_quota_interval_sec), "seconds with an optional unit (s, min, h, d)" },
        { "Workspaces", "Directory",       config_parse_path,    offsetof(SettingsFile, ws.directory),             "an absolute path" },
        { "Workspaces", "PoolSize",        config_parse_size,    offsetof(SettingsFile, ws.pool_size),             "bytes with an optional K, M, G or T" },
};

static int read_password(const char *path, char **ret) {
        char buf[PASSWORD_MAX + 1];
        ssize_t n;

        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        /* One line: a trailing newline (as editors and echo leave) is not part of it. */
        if (n > 0 && buf[n - 1] == '\n')
                buf[--n] = 0;
        if (n > 0 && buf[n - 1] == '\r')
                buf[--n] = 0;
        if (memchr(buf, 0, (size_t) n)) {
                explicit_bzero(buf, sizeof(buf));
                return -EINVAL;
        }
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return *ret ? 0 : -ENOMEM;
}

int sandboxd_conf_load(RecorderSettings *s, SnapshotSettings *snap, TenancySettings *ten, WorkspaceSettings *ws,
                       unsigned *fleet_node, const char *path) {
        _cleanup_free_ char *dropins = NULL, *cred = NULL;
        SettingsFile f = { .s = *s, .snap = *snap, .ten = ten ? *ten : (TenancySettings) {},
                           .ws = ws ? *ws : (WorkspaceSettings) {}, .fleet_node = fleet_node ? *fleet_node : 0 };
        const char *main_path = path ?: SANDBOX_CONF_FILE;
        const char *creds;
        int r;

        if (asprintf(&dropins, "%s.d", main_path) < 0)
                return -ENOMEM;
        r = config_parse_with_dropins(main_path, dropins, recorder_table, ELEMENTSOF(recorder_table), &f);
        *s = f.s;
        *snap = f.snap;
        if (ten)
                *ten = f.ten;
        if (ws)
                *ws = f.ws;
        else
                workspace_settings_done(&f.ws);
        if (r < 0) {
                free(f.password_file);
                return r;
        }
        if (f.fleet_node > SANDBOX_NODE_MAX) {
                free(f.password_file);
                return log_error_errno(ERANGE, "[Fleet] Node=%" PRIu64 " is out of range, 1…%u (0: none).",
                                       f.fleet_node, SANDBOX_NODE_MAX);
        }
        if (fleet_node)
                *fleet_node = (unsigned) f.fleet_node;
        if (path && access(path, F_OK) < 0) {
                free(f.password_file);
                return log_error_errno(errno, "Cannot read %s: %m", path);
        }

        /* systemd's LoadCredential=mariadb-password:… wins over PasswordFile=. */
        creds = getenv("CREDENTIALS_DIRECTORY");
        if (creds && asprintf(&cred, "%s/mariadb-password", creds) < 0) {
                free(f.password_file);
                return -ENOMEM;
        }
        if (cred && access(cred, F_OK) >= 0) {
                free(f.password_file);
                f.password_file = TAKE_PTR(cred);
        }
        if (f.password_file) {
                char *pw = NULL;
                r = read_password(f.password_file, &pw);
                if (r < 0) {
                        log_error_errno(r, "Failed to read the MariaDB password from %s: %m", f.password_file);
                        free(f.password_file);
                        return r;
                }
                free(s->mariadb_password);
                s->mariadb_password = pw;
        }
        free(f.password_file);

        if (s->mariadb_socket && s->mariadb_host)
                log_warning("Both MariaDBSocket= and MariaDBHost= are set; using the socket.");
        if ((s->mariadb_socket || s->mariadb_host) && !s->mariadb_database)
                return log_error_errno(EINVAL, "MariaDB is configured but Database= is not.");
        return 0;
}
