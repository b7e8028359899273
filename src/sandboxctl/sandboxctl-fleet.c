/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl fleet: a fleet of sandboxd nodes behind HAProxy (docs/SCALE-OUT.md).
 *
 *   sandboxctl fleet haproxy-config [--dir DIR] [--bind ADDR:PORT] [--cert PEM]
 *                                   [--agent-port PORT] [--tenant-affinity]
 *                                   [--database HOST:PORT]… [--database-bind ADDR:PORT] NODE=HOST:PORT…
 *   sandboxctl fleet drain [--move-to URL [--from URL] [--token-file FILE]] | undrain | draining
 *   sandboxctl fleet move ID… --to URL [--from URL] [--token-file FILE]   (sandboxctl-move.c)
 *   sandboxctl fleet backup --dir DIR [--from URL] [--token-file FILE]
 *   sandboxctl fleet restore FILE… --to URL [--token-file FILE]
 *   sandboxctl fleet list [--json] NODE=HOST:PORT…
 *
 * The configuration is HAProxy's own: creates balanced by the weight each node's bridge
 * answers to agent-check, every call naming a sandbox sent to the node its id names (the
 * id's last two hex digits, sandboxd.conf [Fleet] Node=; ids.map first, for ids that
 * name no node, or a node whose state went whole to another), a tenant's or label's creates kept on one node by a stick
 * table, TLS ended there, X-Forwarded-For set for the bridges' TrustedProxy=. No
 * scheduler of ours: HAProxy is the one. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "fd-util.h"
#include "json-util.h"
#include "macro.h"
#include "sandboxctl-fleet.h"
#include "sandboxctl-move.h"
#include "sandboxctl-util.h"
#include "strv.h"

#define FLEET_DRAIN_FILE "/run/sandboxd/drain"
#define FLEET_AGENT_PORT_DEFAULT 8348U
#define FLEET_DIR_DEFAULT "/etc/haproxy/sandboxd"
#define FLEET_NODES_MAX 255U
/* The node's own bridge, as sandboxd-http.socket listens by default. */
#define FLEET_BRIDGE_DEFAULT "http://127.0.0.1:8347"
/* fleet list: a node that does not answer in this time is reported, not waited for. */
#define FLEET_LIST_CONNECT_TIMEOUT_MS 3000L
#define FLEET_LIST_TIMEOUT_MS 20000L
#define FLEET_LIST_BODY_MAX (256U * 1024 * 1024)


/* "N=HOST:PORT", N 1…255. */
static int parse_node(const char *arg, FleetNodeSpec *ret) {
        const char *eq = strchr(arg, '='), *colon;
        unsigned long n;
        char *end;

        if (!eq || eq == arg)
                return -EINVAL;
        errno = 0;
        n = strtoul(arg, &end, 10);
        if (errno || end != eq || n == 0 || n > FLEET_NODES_MAX)
                return -ERANGE;
        colon = strrchr(eq + 1, ':');
        if (!colon || colon == eq + 1 || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
            strpbrk(eq + 1, " \t\n#'\"\\"))
                return -EINVAL;
        *ret = (FleetNodeSpec) { .number = (unsigned) n, .address = eq + 1 };
        return 0;
}

static const char node_unavailable_http[] =
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n"
        "\r\n"
        "{\"error\": {\"code\": \"NodeUnavailable\", "
        "\"message\": \"The node that holds this sandbox is not answering.\"}}\n";

int fleet_haproxy_config(FILE *f, const char *dir, const char *bind, const char *cert, unsigned agent_port,
                         bool tenant_affinity, const FleetNodeSpec *nodes, size_t n_nodes,
                         const char *database_bind, char *const *databases, size_t n_databases) {
        const char *ssl = cert ? " ssl crt " : "";

        fprintf(f,
                "# HAProxy in front of %zu sandboxd node(s): written by sandboxctl fleet haproxy-config\n"
                "# (sandboxctl(1), docs/SCALE-OUT.md). Each node's bridge names this proxy's address in\n"
                "# TrustedProxy= (sandboxd-http(8)) and answers agent checks on port %u.\n"
                "global\n"
                "    stats socket %s/admin.sock mode 600 level admin\n"
                "    ssl-default-bind-options ssl-min-ver TLSv1.2\n"
                "\n"
                "defaults\n"
                "    mode http\n"
                "    timeout connect 2s\n"
                "    timeout client 1h\n"
                "    timeout server 1h\n"
                "    timeout http-request 30s\n"
                "    timeout queue 10s\n"
                "    # A node that is gone: the same 503 and error as a bridge whose sandboxd is gone.\n"
                "    errorfile 503 %s/node-unavailable.http\n"
                "\n"
                "frontend sandboxd\n"
                "    bind %s%s%s\n"
                "    # The client's address for the bridges (TrustedProxy=); a client's own header is not\n"
                "    # believed.\n"
                "    http-request del-header X-Forwarded-For\n"
                "    option forwardfor\n",
                n_nodes, agent_port, dir, dir, bind, ssl, cert ?: "");
        if (cert)
                fputs("    http-request set-header X-Forwarded-Proto https\n", f);
        fprintf(f,
                "    # The sandbox a call names: /api/v1/sessions/ID… and /api/v1/containers/ID…\n"
                "    http-request set-var(txn.sid) path,field(5,/) if { path_beg /api/v1/sessions/ /api/v1/containers/ }\n"
                "    # E2B's control plane (/sandboxes/ID…, /v2/sandboxes/ID…) and its sandbox plane (the\n"
                "    # header E2b-Sandbox-Id; docs/E2B.md).\n"
                "    http-request set-var(txn.sid) path,field(3,/) if { path_beg /sandboxes/ }\n"
                "    http-request set-var(txn.sid) path,field(4,/) if { path_beg /v2/sandboxes/ }\n"
                "    http-request set-var(txn.sid) req.hdr(E2b-Sandbox-Id) if { req.hdr(E2b-Sandbox-Id) -m found }\n"
                "    # /mcp (stateless: one JSON-RPC message per POST): a tool call about one sandbox\n"
                "    # names it in its arguments.\n"
                "    http-request wait-for-body time 2s if { path /mcp } { method POST }\n"
                "    http-request set-var(txn.sid) req.body,json_query('$.params.arguments.sandbox_id') if { path /mcp } { method POST }\n"
                "    acl has_sid var(txn.sid) -m reg ^[0-9a-f]{16}$\n"
                "    acl mapped var(txn.sid),map(%s/ids.map) -m found\n"
                "    # An id listed in ids.map (made before its node had a number, or moved) goes where the\n"
                "    # map says; any other id to the node its last two hex digits name.\n"
                "    use_backend %%[var(txn.sid),map(%s/ids.map)] if has_sid mapped\n"
                "    use_backend %%[var(txn.sid),regsub(^.{14},),map(%s/nodes.map,no-such-node)] if has_sid\n"
                "    # Whatever names no sandbox (create, templates, quota, snapshots, other /mcp calls):\n"
                "    # by weight,\n"
                "    # a tenant's and a label's creates kept together.\n"
                "    default_backend create\n"
                "\n",
                dir, dir, dir);
        fprintf(f,
                "backend create\n"
                "    balance roundrobin\n"
                "    option httpchk GET /healthz\n"
                "    # A node that refuses a create (draining, 503) or cannot be reached: the next one.\n"
                "    option http-buffer-request\n"
                "    retry-on conn-failure empty-response 503\n"
                "    retries 3\n"
                "    option redispatch 1\n"
                "    # Affinity (seed 003's agent affinity): creates with the same label \"affinity\" go to\n"
                "    # the same node while it is up%s.\n"
                "    stick-table type string len 64 size 1m expire 30m\n",
                tenant_affinity ? "; without that label, a tenant's (its token's hash: the table\n"
                "    # is readable on the stats socket)" : "");
        if (tenant_affinity)
                fputs("    http-request set-var(txn.affinity) req.hdr(Authorization),xxh64\n", f);
        fputs("    http-request set-var(txn.affinity) req.body,json_query('$.labels.affinity') "
              "if { method POST } { req.body,json_query('$.labels.affinity') -m found }\n"
              "    stick on var(txn.affinity) if { var(txn.affinity) -m found }\n", f);
        for (size_t i = 0; i < n_nodes; i++)
                fprintf(f, "    server node%02x %s check inter 1s fall 2 rise 1 agent-check agent-port %u agent-inter 1s weight 100\n",
                        nodes[i].number, nodes[i].address, agent_port);
        for (size_t i = 0; i < n_nodes; i++)
                fprintf(f,
                        "\n"
                        "backend node%02x\n"
                        "    option httpchk GET /healthz\n"
                        "    server node%02x %s check inter 1s fall 2 rise 1\n",
                        nodes[i].number, nodes[i].number, nodes[i].address);
        if (n_databases > 0) {
                fprintf(f,
                        "\n"
                        "# The records' database (a Galera cluster): every node's recorder (sandboxd.conf\n"
                        "# MariaDBHost=, MariaDBPort=) writes here; one database node at a time takes the\n"
                        "# writes (balance first: no certification conflicts), the next when it is gone.\n"
                        "# The check logs in as haproxy_check (CREATE USER 'haproxy_check'@'%%': no password,\n"
                        "# no privileges): a bare TCP check would count as a connection error each time and\n"
                        "# get the proxy's address blocked (max_connect_errors).\n"
                        "listen mariadb\n"
                        "    bind %s\n"
                        "    mode tcp\n"
                        "    option tcpka\n"
                        "    option mysql-check user haproxy_check post-41\n"
                        "    balance first\n"
                        "    retries 2\n"
                        "    option redispatch 1\n",
                        database_bind);
                for (size_t i = 0; i < n_databases; i++)
                        fprintf(f, "    server db%zu %s check inter 1s fall 2 rise 2\n", i + 1, databases[i]);
        }
        fputs("\n"
              "backend no-such-node\n"
              "    http-request return status 404 content-type application/json string "
              "\"{\\\"error\\\": {\\\"code\\\": \\\"NoSuchSandbox\\\", \\\"message\\\": "
              "\\\"No node of this fleet has that sandbox id.\\\"}}\"\n", f);
        return ferror(f) ? -EIO : 0;
}

static int write_text(const char *dir, const char *name, const char *text, bool keep) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return log_oom();
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (keep ? O_EXCL : O_TRUNC), 0644);
        if (fd < 0 && keep && errno == EEXIST)
                return 0;
        if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
                return log_error_errno(errno ?: EIO, "Cannot write %s: %m", path);
        return 0;
}

static int verb_haproxy_config(int argc, char *argv[]) {
        static const struct option options[] = {
                { "dir",        required_argument, NULL, 'd' },
                { "bind",       required_argument, NULL, 'b' },
                { "cert",       required_argument, NULL, 'c' },
                { "agent-port", required_argument, NULL, 'a' },
                { "tenant-affinity", no_argument,  NULL, 't' },
                { "database",   required_argument, NULL, 'D' },
                { "database-bind", required_argument, NULL, 'B' },
                {}
        };
        const char *dir = FLEET_DIR_DEFAULT, *bind = NULL, *cert = NULL;
        _cleanup_free_ FleetNodeSpec *nodes = NULL;
        _cleanup_free_ char *path = NULL, *map = NULL;
        unsigned long agent_port = FLEET_AGENT_PORT_DEFAULT;
        size_t n = 0, size = 0;
        bool tenant_affinity = false;
        _cleanup_strv_free_ char **databases = NULL;
        const char *database_bind = "127.0.0.1:3306";
        FILE *f;
        char *end;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        dir = optarg;
                        break;
                case 'b':
                        bind = optarg;
                        break;
                case 'c':
                        cert = optarg;
                        break;
                case 't':
                        tenant_affinity = true;
                        break;
                case 'D':
                        if (!strchr(optarg, ':') || strpbrk(optarg, " \t\n#'\"\\"))
                                return log_error("Invalid --database '%s', expected HOST:PORT.", optarg);
                        if (strv_extend(&databases, optarg) < 0)
                                return log_oom();
                        break;
                case 'B':
                        if (!strchr(optarg, ':') || strpbrk(optarg, " \t\n#'\"\\"))
                                return log_error("Invalid --database-bind '%s', expected ADDR:PORT.", optarg);
                        database_bind = optarg;
                        break;
                case 'a':
                        errno = 0;
                        agent_port = strtoul(optarg, &end, 10);
                        if (errno || *end || agent_port == 0 || agent_port > 65535)
                                return log_error("Invalid --agent-port '%s', expected a port.", optarg);
                        break;
                default:
                        return -EINVAL;
                }
        if (dir[0] != '/' || (cert && cert[0] != '/'))
                return log_error("--dir and --cert take absolute paths.");
        if (optind >= argc)
                return log_error("No node: %s fleet haproxy-config NODE=HOST:PORT…", program_invocation_short_name);
        nodes = calloc((size_t) (argc - optind), sizeof(FleetNodeSpec));
        if (!nodes)
                return log_oom();
        for (int i = optind; i < argc; i++) {
                if (parse_node(argv[i], &nodes[n]) < 0)
                        return log_error("Invalid node '%s', expected NUMBER=HOST:PORT, NUMBER 1…255 "
                                         "(sandboxd.conf [Fleet] Node=).", argv[i]);
                for (size_t j = 0; j < n; j++)
                        if (nodes[j].number == nodes[n].number)
                                return log_error("Node %u is given twice.", nodes[n].number);
                n++;
        }
        if (!bind)
                bind = cert ? "*:443" : "*:80";

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Cannot create %s: %m", dir);
        /* nodes.map: a node's two hex digits to its backend. */
        f = open_memstream(&map, &size);
        if (!f)
                return log_oom();
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%02x node%02x\n", nodes[i].number, nodes[i].number);
        if (fclose(f) != 0)
                return log_oom();
        r = write_text(dir, "nodes.map", map, false);
        if (r >= 0)
                r = write_text(dir, "node-unavailable.http", node_unavailable_http, false);
        if (r >= 0)
                /* The routes an operator keeps (ID BACKEND lines): never overwritten. */
                r = write_text(dir, "ids.map", "", true);
        if (r < 0)
                return r;

        if (asprintf(&path, "%s/haproxy.cfg", dir) < 0)
                return log_oom();
        f = fopen(path, "we");
        if (!f)
                return log_error_errno(errno, "Cannot write %s: %m", path);
        r = fleet_haproxy_config(f, dir, bind, cert, (unsigned) agent_port, tenant_affinity, nodes, n, database_bind,
                                 databases, strv_length(databases));
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r < 0)
                return log_error_errno(r, "Cannot write %s: %m", path);
        puts(path);
        return 0;
}

static int set_drain(const char *verb) {
        _cleanup_close_ int fd = -EBADF;

        if (streq(verb, "draining")) {
                bool on = access(FLEET_DRAIN_FILE, F_OK) >= 0;
                puts(on ? "draining" : "not draining");
                return on ? 0 : 1;
        }
        if (streq(verb, "undrain")) {
                if (unlink(FLEET_DRAIN_FILE) < 0 && errno != ENOENT)
                        return log_error_errno(errno, "Cannot remove %s: %m", FLEET_DRAIN_FILE);
                return 0;
        }
        fd = open(FLEET_DRAIN_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return log_error_errno(errno, "Cannot create %s: %m", FLEET_DRAIN_FILE);
        return 0;
}

/* A tenant's token: --token-file (its first line), else $SANDBOXD_TOKEN. */
static int read_token(const char *path, char **ret) {
        char *line = NULL;
        FILE *f;
        size_t size = 0;
        ssize_t n;

        if (!path) {
                const char *e = getenv("SANDBOXD_TOKEN");
                if (isempty(e))
                        return log_error_errno(EINVAL, "A tenant's token is needed: --token-file FILE or $SANDBOXD_TOKEN.");
                *ret = strdup(e);
                return *ret ? 0 : log_oom();
        }
        f = fopen(path, "re");
        if (!f)
                return log_error_errno(errno, "Cannot read %s: %m", path);
        n = getline(&line, &size, f);
        fclose(f);
        if (n <= 0) {
                free(line);
                return log_error_errno(EINVAL, "%s holds no token.", path);
        }
        line[strcspn(line, "\r\n")] = 0;
        *ret = line;
        return 0;
}

/* backup --dir DIR [--from URL], restore FILE… --to URL: a dead node's sandboxes brought up
 * elsewhere from their last saved exports (docs/SCALE-OUT.md). */
static int backup_or_restore(int argc, char *argv[], bool backup, const char *dir, const char *to,
                             const char *token_file, const char *from) {
        _cleanup_free_ char *token = NULL;
        FleetMove fm = { .from = from, .to = to };
        unsigned saved = 0, failed = 0;
        int r;

        if (backup && (!dir || argc > 0))
                return log_error_errno(EINVAL, "fleet backup --dir DIR [--from URL] [--token-file FILE]");
        if (!backup && (!to || argc == 0))
                return log_error_errno(EINVAL, "fleet restore FILE… --to URL [--token-file FILE]");
        r = read_token(token_file, &token);
        if (r < 0)
                return r;
        fm.token = token;
        if (backup) {
                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "Cannot create %s: %m", dir);
                r = fleet_backup_all(&fm, dir, &saved, &failed);
                if (r < 0)
                        return r;
                fprintf(stderr, "%u sandbox(es) saved in %s, %u failed.\n", saved, dir, failed);
                return failed > 0 ? 1 : 0;
        }
        for (int i = 0; i < argc; i++) {
                _cleanup_free_ char *old_id = NULL, *new_id = NULL;

                if (fleet_restore_one(&fm, argv[i], &old_id, &new_id) < 0) {
                        failed++;
                        continue;
                }
                printf("%s %s\n", old_id, new_id);
        }
        return failed > 0 ? 1 : 0;
}

/* move ID… --to URL | drain|undrain|draining [--move-to URL], with --from URL and
 * --token-file FILE for the moves. */
static int verb_move_or_drain(int argc, char *argv[]) {
        static const struct option options[] = {
                { "to",         required_argument, NULL, 't' },
                { "move-to",    required_argument, NULL, 'm' },
                { "from",       required_argument, NULL, 'f' },
                { "token-file", required_argument, NULL, 'k' },
                { "dir",        required_argument, NULL, 'd' },
                {}
        };
        bool move = streq(argv[0], "move"), drain = streq(argv[0], "drain");
        bool backup = streq(argv[0], "backup"), restore = streq(argv[0], "restore");
        const char *to = NULL, *token_file = NULL, *dir = NULL;
        _cleanup_free_ char *token = NULL;
        FleetMove fm = { .from = FLEET_BRIDGE_DEFAULT };
        unsigned moved = 0, failed = 0, left = 0;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 't':
                case 'm':
                        if ((c == 't') != (move || restore))
                                return log_error_errno(EINVAL, "--%s is for fleet %s.", c == 't' ? "to" : "move-to",
                                                       c == 't' ? "move or restore" : "drain");
                        to = optarg;
                        break;
                case 'f':
                        fm.from = optarg;
                        break;
                case 'k':
                        token_file = optarg;
                        break;
                case 'd':
                        if (!backup)
                                return log_error_errno(EINVAL, "--dir is for fleet backup.");
                        dir = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (backup || restore)
                return backup_or_restore(argc - optind, argv + optind, backup, dir, to, token_file, fm.from);
        if (!move && !(drain && to) && (optind != argc || token_file || fm.from != (const char *) FLEET_BRIDGE_DEFAULT))
                return log_error_errno(EINVAL, "fleet %s takes no arguments but --move-to (drain).", argv[0]);
        if (!move && !to)
                return set_drain(argv[0]);
        if (move && (optind >= argc || !to))
                return log_error_errno(EINVAL, "fleet move ID… --to URL [--from URL] [--token-file FILE]");
        if (drain && optind != argc)
                return log_error_errno(EINVAL, "fleet drain takes no sandbox ids.");
        fm.to = to;
        r = read_token(token_file, &token);
        if (r < 0)
                return r;
        fm.token = token;
        if (drain) {
                /* New creates elsewhere first, then what is here moves. */
                r = set_drain("drain");
                if (r < 0)
                        return r;
                r = fleet_move_all(&fm, &moved, &failed, &left);
                if (r < 0)
                        return r;
                fprintf(stderr, "%u sandbox(es) moved to %s, %u failed (still here), %u ephemeral left to finish.\n",
                        moved, to, failed, left);
                return failed > 0 ? 1 : 0;
        }
        for (int i = optind; i < argc; i++) {
                _cleanup_free_ char *new_id = NULL;

                if (fleet_move_one(&fm, argv[i], &new_id) < 0) {
                        failed++;
                        continue;
                }
                puts(new_id);
        }
        return failed > 0 ? 1 : 0;
}

/* ---- fleet list: every node's sandboxes, from each node's bridge ---- */

typedef struct FleetListing {
        FleetNodeSpec node;
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        size_t size;
        CURLcode result;
        bool done;
        char error[CURL_ERROR_SIZE];
} FleetListing;

static size_t on_listing_body(char *data, size_t size, size_t n, void *userdata) {
        FleetListing *l = userdata;
        size_t add = size * n;
        char *p;

        if (add > FLEET_LIST_BODY_MAX - l->size)
                return 0;       /* ends the transfer: CURLE_WRITE_ERROR */
        p = realloc(l->body, l->size + add + 1);
        if (!p)
                return 0;
        memcpy(p + l->size, data, add);
        l->size += add;
        p[l->size] = 0;
        l->body = p;
        return add;
}

static int listing_start(CURLM *multi, FleetListing *l, const char *token) {
        _cleanup_free_ char *url = NULL, *auth = NULL;

        if (asprintf(&url, "http://%s/api/v1/sessions", l->node.address) < 0 ||
            asprintf(&auth, "Authorization: Bearer %s", token) < 0)
                return -ENOMEM;
        l->easy = curl_easy_init();
        l->headers = curl_slist_append(NULL, auth);
        explicit_bzero(auth, strlen(auth));
        if (!l->easy || !l->headers)
                return -ENOMEM;
        if (curl_easy_setopt(l->easy, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_HTTPHEADER, l->headers) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_WRITEFUNCTION, on_listing_body) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_WRITEDATA, l) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_PRIVATE, l) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_ERRORBUFFER, l->error) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_CONNECTTIMEOUT_MS, FLEET_LIST_CONNECT_TIMEOUT_MS) != CURLE_OK ||
            curl_easy_setopt(l->easy, CURLOPT_TIMEOUT_MS, FLEET_LIST_TIMEOUT_MS) != CURLE_OK)
                return -EINVAL;
        return curl_multi_add_handle(multi, l->easy) == CURLM_OK ? 0 : -ENOMEM;
}

static void listing_done(CURLM *multi, FleetListing *l) {
        if (l->easy) {
                (void) curl_multi_remove_handle(multi, l->easy);
                curl_easy_cleanup(l->easy);
        }
        curl_slist_free_all(l->headers);
        free(l->body);
}

/* The node's sandboxes (a new reference) with "node" added to each, or NULL with why. */
static json_object *listing_sandboxes(FleetListing *l, char *why, size_t why_size) {
        _cleanup_json_ json_object *o = NULL;
        json_object *error = NULL, *code = NULL;
        long status = 0;

        if (l->result != CURLE_OK) {
                snprintf(why, why_size, "%s", l->error[0] ? l->error : curl_easy_strerror(l->result));
                return NULL;
        }
        (void) curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &status);
        o = l->body ? json_tokener_parse(l->body) : NULL;
        if (status != 200) {
                if (json_object_object_get_ex(o, "error", &error))
                        (void) json_object_object_get_ex(error, "code", &code);
                snprintf(why, why_size, "HTTP %ld%s%s", status, code ? " " : "",
                         code ? json_object_get_string(code) : "");
                return NULL;
        }
        if (!json_object_is_type(o, json_type_array)) {
                snprintf(why, why_size, "the answer is no list of sandboxes");
                return NULL;
        }
        for (size_t i = 0; i < json_object_array_length(o); i++) {
                json_object *sb = json_object_array_get_idx(o, i);
                if (json_object_is_type(sb, json_type_object) &&
                    json_object_object_add(sb, "node", json_object_new_int((int) l->node.number)) < 0) {
                        snprintf(why, why_size, "out of memory");
                        return NULL;
                }
        }
        return TAKE_PTR(o);
}

static const char *field(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
                json_object_get_string(v) : "-";
}

/* Each node's GET /api/v1/sessions, at once, with $SANDBOXD_TOKEN (a tenant's token lists
 * the tenant's): the fleet's sandboxes, each with its node. A node that does not answer
 * is named on stderr and makes the exit status 1: the list is then the others'. */
static int verb_list(int argc, char *argv[]) {
        static const struct option options[] = {
                { "json", no_argument, NULL, 'j' },
                {}
        };
        _cleanup_free_ FleetListing *listings = NULL;
        _cleanup_json_ json_object *all = NULL;
        const char *token = getenv("SANDBOXD_TOKEN");
        bool json = false;
        size_t n = 0, failed = 0;
        CURLM *multi = NULL;
        int c, r = 0, running = 0;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'j':
                        json = true;
                        break;
                default:
                        return -EINVAL;
                }
        if (isempty(token))
                return log_error("No token: set $SANDBOXD_TOKEN to a token of the bridges (sandboxd-http(8)).");
        if (optind >= argc)
                return log_error("No node: %s fleet list NODE=HOST:PORT…", program_invocation_short_name);
        listings = calloc((size_t) (argc - optind), sizeof(FleetListing));
        all = json_object_new_array();
        if (!listings || !all)
                return log_oom();
        for (int i = optind; i < argc; i++) {
                if (parse_node(argv[i], &listings[n].node) < 0)
                        return log_error("Invalid node '%s', expected NUMBER=HOST:PORT, NUMBER 1…255.", argv[i]);
                n++;
        }

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(multi = curl_multi_init()))
                return log_oom();
        for (size_t i = 0; i < n && r >= 0; i++)
                r = listing_start(multi, &listings[i], token);
        while (r >= 0) {
                CURLMsg *m;
                int left;

                if (curl_multi_perform(multi, &running) != CURLM_OK) {
                        r = -EIO;
                        break;
                }
                while ((m = curl_multi_info_read(multi, &left)))
                        if (m->msg == CURLMSG_DONE) {
                                FleetListing *l = NULL;
                                (void) curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &l);
                                if (l) {
                                        l->result = m->data.result;
                                        l->done = true;
                                }
                        }
                if (running == 0)
                        break;
                if (curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK)
                        r = -EIO;
        }
        for (size_t i = 0; i < n && r >= 0; i++) {
                char why[CURL_ERROR_SIZE + 64] = "no answer";
                _cleanup_json_ json_object *got = listings[i].done ?
                        listing_sandboxes(&listings[i], why, sizeof(why)) : NULL;

                if (!got) {
                        log_error("Node %u (%s) did not list its sandboxes: %s", listings[i].node.number,
                                  listings[i].node.address, why);
                        failed++;
                        continue;
                }
                for (size_t j = 0; j < json_object_array_length(got); j++)
                        if (json_object_array_add(all, json_object_get(json_object_array_get_idx(got, j))) < 0)
                                r = -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                listing_done(multi, &listings[i]);
        curl_multi_cleanup(multi);
        curl_global_cleanup();
        if (r < 0)
                return log_error_errno(r, "Cannot list the fleet: %m");

        if (json)
                r = print_json(all);
        else {
                printf("%-4s %-16s %-9s %-16s %s\n", "NODE", "ID", "STATE", "TEMPLATE", "NAME");
                for (size_t i = 0; i < json_object_array_length(all); i++) {
                        json_object *sb = json_object_array_get_idx(all, i), *node = NULL;
                        (void) json_object_object_get_ex(sb, "node", &node);
                        printf("%-4d %-16s %-9s %-16s %s\n", json_object_get_int(node), field(sb, "id"),
                               field(sb, "state"), field(sb, "template"), field(sb, "name"));
                }
                printf("\n%zu sandbox%s on %zu of %zu node%s.\n", json_object_array_length(all),
                       json_object_array_length(all) == 1 ? "" : "es", n - failed, n, n == 1 ? "" : "s");
        }
        if (r < 0)
                return r;
        return failed > 0 ? 1 : 0;
}

int fleet_main(int argc, char *argv[]) {
        if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
                printf("%1$s fleet haproxy-config [--dir DIR] [--bind ADDR:PORT] [--cert PEM] [--agent-port PORT] "
                       "[--tenant-affinity] [--database HOST:PORT]… [--database-bind ADDR:PORT] NODE=HOST:PORT…\n"
                       "%1$s fleet drain [--move-to URL [--from URL] [--token-file FILE]] | undrain | draining\n"
                       "%1$s fleet move ID… --to URL [--from URL] [--token-file FILE]\n"
                       "%1$s fleet backup --dir DIR [--from URL] [--token-file FILE]\n"
                       "%1$s fleet restore FILE… --to URL [--token-file FILE]\n"
                       "%1$s fleet list [--json] NODE=HOST:PORT…   (token: $SANDBOXD_TOKEN)\n",
                       program_invocation_short_name);
                return argc < 2 ? -EINVAL : 0;
        }
        if (streq(argv[1], "haproxy-config"))
                return verb_haproxy_config(argc - 1, argv + 1);
        if (streq(argv[1], "list"))
                return verb_list(argc - 1, argv + 1);
        if (streq(argv[1], "drain") || streq(argv[1], "undrain") || streq(argv[1], "draining") ||
            streq(argv[1], "move") || streq(argv[1], "backup") || streq(argv[1], "restore"))
                return verb_move_or_drain(argc - 1, argv + 1);
        return log_error("Unknown fleet command '%s'. See '%s fleet --help'.", argv[1], program_invocation_short_name);
}
