/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-http: the REST/SSE bridge to sandboxd (sandboxd-http(8)).
 *
 *   sandboxd-http [--config=FILE] [--listen=ADDRESS]… [--varlink=ADDRESS] [--tokens-dir=DIR]
 *   sandboxd-http token add NAME [--tenant=TENANT] [--expires-at=SECONDS] [--operator] [--e2b] [--tokens-dir=DIR]
 */

#include <arpa/inet.h>
#include <getopt.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "conf-parser.h"
#include "http-e2b.h"
#include "http.h"
#include "log.h"
#include "mcp.h"
#include "parse-util.h"
#include "strv.h"

static int parse_size_item(const char *rvalue, void *data) {
        return parse_size(rvalue, data);
}

static int parse_unsigned_item(const char *rvalue, void *data) {
        uint64_t v;
        int r = parse_uint64(rvalue, &v);

        if (r < 0)
                return r;
        if (v == 0 || v > 1000000)
                return -ERANGE;
        *(unsigned *) data = (unsigned) v;
        return 0;
}

static int parse_listen_item(const char *rvalue, void *data) {
        char ***l = data;

        if (!*rvalue) {
                *l = strv_free(*l);
                return 0;
        }
        return strv_extend(l, rvalue);
}

/* An IP address (normalized, as inet_ntop() writes it, an IPv4-mapped one as IPv4) or
 * "unix"; empty: none. */
static int parse_proxy_item(const char *rvalue, void *data) {
        char ***l = data, buf[INET6_ADDRSTRLEN];
        unsigned char a[sizeof(struct in6_addr)];

        if (!*rvalue) {
                *l = strv_free(*l);
                return 0;
        }
        if (streq(rvalue, "unix"))
                return strv_extend(l, rvalue);
        if (inet_pton(AF_INET, rvalue, a) == 1)
                return strv_extend(l, inet_ntop(AF_INET, a, buf, sizeof(buf)));
        if (inet_pton(AF_INET6, rvalue, a) == 1)
                /* ::ffff:a.b.c.d is a.b.c.d, as a dual-stack listener's peer is keyed. */
                return strv_extend(l, IN6_IS_ADDR_V4MAPPED((struct in6_addr *) a) ?
                                      inet_ntop(AF_INET, a + 12, buf, sizeof(buf)) :
                                      inet_ntop(AF_INET6, a, buf, sizeof(buf)));
        return -EINVAL;
}

/* [E2B] Template=E2BNAME:TEMPLATE: E2B's template name mapped onto one of sandboxd's. */
static int parse_e2b_template_item(const char *rvalue, void *data) {
        char ***l = data;
        const char *colon = strchr(rvalue, ':');

        if (!colon || colon == rvalue || !colon[1])
                return -EINVAL;
        return strv_extend(l, rvalue);
}

static const ConfigTableItem config_table[] = {
        { "HTTP", "Listen",            parse_listen_item,    offsetof(HttpConfig, listen),            "an address" },
        { "HTTP", "Varlink",           config_parse_path,    offsetof(HttpConfig, varlink_address),   "a socket path" },
        { "HTTP", "TokensDirectory",   config_parse_path,    offsetof(HttpConfig, tokens_dir),        "a directory" },
        { "HTTP", "BodyMax",           parse_size_item,      offsetof(HttpConfig, body_max),          "a size" },
        { "HTTP", "UploadMax",         parse_size_item,      offsetof(HttpConfig, upload_max),        "a size" },
        { "HTTP", "ConnectionsMax",    parse_unsigned_item,  offsetof(HttpConfig, connections_max),   "a number" },
        { "HTTP", "ConnectionsPerIP",  parse_unsigned_item,  offsetof(HttpConfig, connections_per_ip), "a number" },
        { "HTTP", "RequestsPerToken",  parse_unsigned_item,  offsetof(HttpConfig, requests_per_token), "a number" },
        { "HTTP", "UpgradesPerToken",  parse_unsigned_item,  offsetof(HttpConfig, upgrades_per_token), "a number" },
        { "HTTP", "VarlinkConnectionsPerTenant", parse_unsigned_item,
          offsetof(HttpConfig, varlink_connections_per_tenant), "a number" },
        { "HTTP", "TrustedProxy",      parse_proxy_item,     offsetof(HttpConfig, trusted_proxies),   "an IP address or unix" },
        { "HTTP", "ConnectionTimeoutSec", config_parse_seconds, offsetof(HttpConfig, connection_timeout_sec),
          "seconds" },
        { "HTTP", "BodyTimeoutSec",    config_parse_seconds, offsetof(HttpConfig, body_timeout_sec),  "seconds" },
        { "HTTP", "BodyMinRate",       parse_size_item,      offsetof(HttpConfig, body_min_rate),     "a size" },
        { "HTTP", "AccessLog",         config_parse_bool,    offsetof(HttpConfig, access_log),        "a boolean" },
        { "E2B",  "Template",          parse_e2b_template_item, offsetof(HttpConfig, e2b_templates), "E2BNAME:TEMPLATE" },
        { "HTTP", "MCPDefaultLifetimeSec", config_parse_seconds, offsetof(HttpConfig, mcp_default_lifetime_sec),
          "seconds" },
        { "Fleet", "AgentCheck",       config_parse_string,  offsetof(HttpConfig, agent_check),       "an address" },
        { "Fleet", "DrainFile",        config_parse_path,    offsetof(HttpConfig, drain_file),        "an absolute path" },
};

void http_config_done(HttpConfig *c) {
        c->listen = strv_free(c->listen);
        c->trusted_proxies = strv_free(c->trusted_proxies);
        c->e2b_templates = strv_free(c->e2b_templates);
        c->varlink_address = mfree(c->varlink_address);
        c->tokens_dir = mfree(c->tokens_dir);
        c->agent_check = mfree(c->agent_check);
        c->drain_file = mfree(c->drain_file);
}

int http_config_load(HttpConfig *c, const char *path) {
        int r = config_parse_file(path, config_table, ELEMENTSOF(config_table), c);
        return r == -ENOENT ? 0 : r;
}

static int set_string(char **s, const char *v) {
        char *c = strdup(v);

        if (!c)
                return -ENOMEM;
        free(*s);
        *s = c;
        return 0;
}

static int run_token_command(int argc, char **argv, const char *tokens_dir) {
        static const struct option options[] = {
                { "tenant",     required_argument, NULL, 't' },
                { "expires-at", required_argument, NULL, 'e' },
                { "operator",   no_argument,       NULL, 'o' },
                { "tokens-dir", required_argument, NULL, 'd' },
                { "e2b",        no_argument,       NULL, 'E' },
                {}
        };
        const char *tenant = NULL;
        uint64_t expires_at = 0;
        bool operator = false, e2b = false;
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 't':
                        tenant = optarg;
                        break;
                case 'e':
                        if (parse_uint64(optarg, &expires_at) < 0)
                                return log_error_errno(-EINVAL, "Bad --expires-at=%s.", optarg);
                        break;
                case 'd':
                        tokens_dir = optarg;
                        break;
                case 'E':
                        e2b = true;
                        break;
                case 'o':
                        operator = true;
                        break;
                default:
                        return -EINVAL;
                }
        if (argc - optind != 2 || !streq(argv[optind], "add")) {
                fprintf(stderr, "Usage: sandboxd-http token add NAME [--tenant=TENANT] [--expires-at=SECONDS] [--operator] [--e2b]\n");
                return -EINVAL;
        }
        return http_token_add(tokens_dir, argv[optind + 1], tenant, expires_at, operator, e2b);
}

/* The sockets systemd hands over (the one named "agent-check" is HAProxy's agent port,
 * *ret_agent_fd), else the configured addresses. */
static int listen_all(HttpServer *s, const HttpConfig *config, int *ret_agent_fd) {
        _cleanup_strv_free_ char **names = NULL;
        int n, r;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "sd_listen_fds(): %m");
        for (int i = 0; i < n; i++) {
                if (names && names[i] && streq(names[i], HTTP_AGENT_CHECK_FD_NAME)) {
                        *ret_agent_fd = SD_LISTEN_FDS_START + i;
                        continue;
                }
                r = http_server_listen_fd(s, SD_LISTEN_FDS_START + i);
                if (r < 0)
                        return r;
        }
        if (n > 0)
                return 0;
        for (char **a = config->listen; a && *a; a++) {
                r = http_server_listen_address(s, *a);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Every token: the tokens directory's, and with $CREDENTIALS_DIRECTORY the credentials'. */
static int tokens_load_all(const HttpConfig *config, HttpTokens *ret, size_t *ret_n_credentials) {
        _cleanup_(http_tokens_done) HttpTokens t = {};
        const char *credentials = getenv("CREDENTIALS_DIRECTORY");
        size_t n;
        int r;

        r = http_tokens_load(&t, config->tokens_dir, false);
        if (r < 0)
                return log_error_errno(r, "Cannot read %s: %m", config->tokens_dir);
        n = t.n_tokens;
        if (credentials) {
                r = http_tokens_load(&t, credentials, true);
                if (r < 0)
                        return log_error_errno(r, "Cannot read credentials in %s: %m", credentials);
        }
        *ret_n_credentials = t.n_tokens - n;
        *ret = t;
        t = (HttpTokens) {};
        return 0;
}

typedef struct Reloader {
        const HttpConfig *config;
        HttpTokens *tokens;             /* the server's: replaced in place */
} Reloader;

/* The tokens read again (a token file changed, or SIGHUP): requests in progress keep
 * their tenant, connections stay; a failure keeps the tokens in use. */
static void tokens_reload(Reloader *rl, const char *why) {
        _cleanup_(http_tokens_done) HttpTokens t = {};
        size_t n;

        if (tokens_load_all(rl->config, &t, &n) < 0) {
                log_warning("Tokens not reloaded (%s): the %zu in use are kept.", why, rl->tokens->n_tokens);
                return;
        }
        HttpTokens old = *rl->tokens;

        *rl->tokens = t;
        t = old;        /* freed on return */
        log_info("Tokens reloaded (%s): %zu token(s), %zu from credentials.", why, rl->tokens->n_tokens, n);
}

static int on_tokens_changed(sd_event_source *s, const struct inotify_event *event, void *userdata) {
        tokens_reload(userdata, "a token file changed");
        return 0;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        tokens_reload(userdata, "SIGHUP");
        return 0;
}

static int run(const HttpConfig *config) {
        _cleanup_(http_server_freep) HttpServer *s = NULL;
        _cleanup_(http_backend_freep) HttpBackend *b = NULL;
        _cleanup_(http_agent_freep) HttpAgent *agent = NULL;
        _cleanup_(http_tokens_done) HttpTokens tokens = {};
        Reloader reloader = { config, &tokens };
        int agent_fd = -EBADF;
        sd_event *e = NULL;
        size_t n;
        int r;

        /* Tokens and secret values pass through its memory (PUT .../secrets): no core
         * dump of it (sandboxd-http(8), SERVICE). */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(-errno, "Failed to make sandboxd-http undumpable: %m");
        r = tokens_load_all(config, &tokens, &n);
        if (r < 0)
                return r;
        log_info("%zu token(s) from %s.", tokens.n_tokens - n, config->tokens_dir);
        if (getenv("CREDENTIALS_DIRECTORY"))
                log_info("%zu token(s) from credentials.", n);

        r = sd_event_default(&e);
        if (r < 0)
                return r;
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(e, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(e, NULL, SIGINT, NULL, NULL);
        (void) sd_event_add_signal(e, NULL, SIGHUP, on_sighup, &reloader);
        (void) signal(SIGPIPE, SIG_IGN);
        /* Token files added, changed or removed are seen at once (SIGHUP does the same, for
         * credentials and a directory made later). */
        r = sd_event_add_inotify(e, NULL, config->tokens_dir,
                                 IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB |
                                 IN_ONLYDIR, on_tokens_changed, &reloader);
        if (r < 0)
                log_info("Not watching %s (%s): reload tokens with SIGHUP.", config->tokens_dir, strerror(-r));

        r = http_backend_new(&b, e, config->varlink_address, config->varlink_connections_per_tenant);
        if (r >= 0)
                r = http_server_new(&s, e, config, &tokens);
        if (r < 0)
                goto finish;
        http_server_set_backend(s, b);
        r = listen_all(s, config, &agent_fd);
        if (r < 0)
                goto finish;
        if (agent_fd < 0 && config->agent_check) {
                agent_fd = http_listen_inet(config->agent_check);
                if (agent_fd < 0) {
                        r = log_error_errno(agent_fd, "Cannot listen for agent checks on %s: %m", config->agent_check);
                        goto finish;
                }
        }
        if (agent_fd >= 0) {
                r = http_agent_new(&agent, e, agent_fd, config->varlink_address, config->drain_file);
                if (r < 0)
                        goto finish;
                log_info("Answering HAProxy's agent checks (drain file %s).", config->drain_file);
        }
        (void) sd_notify(false, "READY=1\nSTATUS=Serving.");
        r = sd_event_loop(e);
finish:
        /* The server first: its requests drop their varlink calls. */
        http_terminals_done();
        http_e2b_watchers_done();
        s = http_server_free(s);
        sd_event_unref(e);
        return r;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "config",     required_argument, NULL, 'c' },
                { "listen",     required_argument, NULL, 'l' },
                { "varlink",    required_argument, NULL, 'v' },
                { "tokens-dir", required_argument, NULL, 'd' },
                { "help",       no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(http_config_done) HttpConfig config = {
                .body_max = HTTP_BODY_MAX_DEFAULT,
                .upload_max = HTTP_UPLOAD_MAX_DEFAULT,
                .connections_max = HTTP_CONNECTIONS_MAX_DEFAULT,
                .connections_per_ip = HTTP_CONNECTIONS_PER_IP_DEFAULT,
                .requests_per_token = HTTP_REQUESTS_PER_TOKEN_DEFAULT,
                .upgrades_per_token = HTTP_UPGRADES_PER_TOKEN_DEFAULT,
                .varlink_connections_per_tenant = HTTP_VARLINK_CONNECTIONS_PER_TENANT_DEFAULT,
                .connection_timeout_sec = HTTP_CONNECTION_TIMEOUT_SEC_DEFAULT,
                .body_timeout_sec = HTTP_BODY_TIMEOUT_SEC_DEFAULT,
                .body_min_rate = HTTP_BODY_MIN_RATE_DEFAULT,
                .access_log = true,
                .mcp_default_lifetime_sec = MCP_DEFAULT_LIFETIME_SEC,
        };
        _cleanup_strv_free_ char **listen = NULL;
        const char *config_path = HTTP_DEFAULT_CONFIG, *varlink = NULL, *tokens_dir = NULL;
        int c, r;

        if (argc >= 2 && streq(argv[1], "token"))
                return run_token_command(argc - 1, argv + 1, HTTP_DEFAULT_TOKENS_DIR) < 0 ? 1 : 0;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        config_path = optarg;
                        break;
                case 'l':
                        if (strv_extend(&listen, optarg) < 0)
                                return 1;
                        break;
                case 'v':
                        varlink = optarg;
                        break;
                case 'd':
                        tokens_dir = optarg;
                        break;
                case 'h':
                        printf("sandboxd-http [--config=FILE] [--listen=ADDRESS]… [--varlink=ADDRESS] "
                               "[--tokens-dir=DIR]\n"
                               "sandboxd-http token add NAME [--tenant=TENANT] [--expires-at=SECONDS] [--operator] [--e2b]\n");
                        return 0;
                default:
                        return 2;
                }
        if (optind < argc) {
                log_error("Unexpected argument %s.", argv[optind]);
                return 2;
        }

        r = http_config_load(&config, config_path);
        if (r < 0)
                return 1;
        if (listen) {
                strv_free(config.listen);
                config.listen = TAKE_PTR(listen);
        }
        if ((varlink || !config.varlink_address) && set_string(&config.varlink_address, varlink ?: HTTP_DEFAULT_VARLINK) < 0)
                return 1;
        if ((tokens_dir || !config.tokens_dir) && set_string(&config.tokens_dir, tokens_dir ?: HTTP_DEFAULT_TOKENS_DIR) < 0)
                return 1;
        if (!config.drain_file && set_string(&config.drain_file, HTTP_DEFAULT_DRAIN_FILE) < 0)
                return 1;
        if (!config.listen && (strv_extend(&config.listen, HTTP_DEFAULT_LISTEN_TCP) < 0 ||
                               strv_extend(&config.listen, HTTP_DEFAULT_LISTEN_UNIX) < 0))
                return 1;

        r = run(&config);
        return r < 0 ? 1 : 0;
}
