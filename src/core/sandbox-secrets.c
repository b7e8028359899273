/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "egress-policy.h"
#include "fd-util.h"
#include "log.h"
#include "options.h"
#include "payload-bwrap.h"
#include "sandbox-internal.h"
#include "sandbox-secrets.h"
#include "egress-tls.h"
#include "secret-store.h"
#include "strv.h"

/* Where the sandbox finds the proxy's CA, alone and with the host's bundle; the host's
 * bundle, which the sandbox's own /etc/ssl/certs shows when its template binds it. */
#define EGRESS_CA_INSIDE "/run/sandboxd-egress/ca.pem"
#define EGRESS_BUNDLE_INSIDE "/run/sandboxd-egress/ca-bundle.pem"
#define HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define HOST_BUNDLE_MAX (8U * 1024U * 1024U)

const char *manager_secrets_dir(Manager *m) {
        return m->settings.secrets_dir ?: SECRETS_DIR_DEFAULT;
}

static void values_free(char **values, size_t n) {
        for (size_t i = 0; values && i < n; i++)
                if (values[i]) {
                        explicit_bzero(values[i], strlen(values[i]));
                        free(values[i]);
                }
        free(values);
}

static void strv_free_erase(char **l) {
        for (char **i = l; i && *i; i++)
                explicit_bzero(*i, strlen(*i));
        strv_free(l);
}

/* Whether the egress rules of c let requests for https://host through the proxy: on 443,
 * or on the port of a rule that names the host. */
static bool egress_allows_host(const SandboxConfig *c, const char *host) {
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;
        EgressPolicy p = {};
        bool ok;

        if (sandbox_config_egress_strv(c, false, &allow) < 0 || sandbox_config_egress_strv(c, true, &deny) < 0 ||
            egress_policy_parse(allow, deny, &p, NULL) < 0)
                return false;
        ok = !egress_check_name(&p, host, 443);
        for (char **a = allow; !ok && a && *a; a++) {
                size_t k = strlen(host);
                unsigned port;

                if (strncmp(*a, host, k) == 0 && (*a)[k] == ':' && sscanf(*a + k + 1, "%u", &port) == 1 &&
                    port > 0 && port < 65536)
                        ok = !egress_check_name(&p, host, (uint16_t) port);
        }
        egress_policy_done(&p);
        return ok;
}

int sandbox_secrets_check(Manager *m, const Template *t, uid_t owner, const SandboxConfig *c, SandboxError *error) {
        _cleanup_free_ SecretBinding *b = NULL;
        size_t n = 0;
        int r;

        r = sandbox_config_secret_bindings(c, &b, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *value = NULL;
                size_t size = 0;

                for (size_t j = 0; j < i; j++)
                        if (b[j].kind == b[i].kind &&
                            (b[i].kind == SECRET_BIND_HEADER ? streq(b[j].host, b[i].host) && streq(b[j].header, b[i].header) :
                             streq(b[j].name, b[i].name)))
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "Secrets: %s is bound twice the same way.", b[i].name);
                if (b[i].kind != SECRET_BIND_ENV && t->payload != PAYLOAD_BWRAP)
                        return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED,
                                                 "Secrets: %s: only bwrap sandboxes take secrets as files or headers; "
                                                 "a %s sandbox takes them as environment variables.", b[i].name,
                                                 payload_kind_to_string(t->payload));
                if (b[i].kind == SECRET_BIND_HEADER && !egress_allows_host(c, b[i].host))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Secrets: %s is bound to %s, which EgressAllow= does not allow.",
                                                 b[i].name, b[i].host);
                r = secret_store_get(manager_secrets_dir(m), owner, c->tenant, b[i].name, &value, &size);
                if (r == -ENOENT)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Secrets: there is no secret %s%s%s%s (sandboxctl secret set %s).",
                                                 b[i].name, isempty(c->tenant) ? "" : " of tenant '",
                                                 strempty(c->tenant), isempty(c->tenant) ? "" : "'", b[i].name);
                if (r < 0)
                        return sandbox_error_set_errno(error, r, "Secrets: cannot read secret %s: %m", b[i].name);
                bool fits = secret_value_fits(b[i].kind, value);
                explicit_bzero(value, size);
                if (!fits)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Secrets: %s holds a control character, which a header cannot carry.",
                                                 b[i].name);
        }
        return 0;
}

bool sandbox_has_header_secrets(const Sandbox *s) {
        for (size_t i = 0; i < s->n_secrets; i++)
                if (s->secret_bindings[i].kind == SECRET_BIND_HEADER)
                        return true;
        return false;
}

int sandbox_secrets_environment(Sandbox *s) {
        static const char * const trust[] = {
                /* OpenSSL and what uses it (curl, Python's ssl), GnuTLS's gnutls-cli, Go */
                "SSL_CERT_FILE=" EGRESS_BUNDLE_INSIDE,
                "CURL_CA_BUNDLE=" EGRESS_BUNDLE_INSIDE,
                "REQUESTS_CA_BUNDLE=" EGRESS_BUNDLE_INSIDE,
                /* Node.js keeps its own roots and adds these */
                "NODE_EXTRA_CA_CERTS=" EGRESS_CA_INSIDE,
                NULL
        };
        char **merged = NULL;
        int r;

        if (!s->egress_ca_cert)
                return 0;
        r = strv_env_merge(s->environment, (char **) trust, &merged);
        if (r < 0)
                return r;
        strv_free(s->environment);
        s->environment = merged;
        return 0;
}

void sandbox_egress_ca_free(Sandbox *s) {
        s->egress_ca_cert = mfree(s->egress_ca_cert);
        if (s->egress_ca_key)
                explicit_bzero(s->egress_ca_key, strlen(s->egress_ca_key));
        s->egress_ca_key = mfree(s->egress_ca_key);
}

void sandbox_secrets_free(Sandbox *s) {
        values_free(s->secret_values, s->n_secrets);
        s->secret_values = NULL;
        s->secret_bindings = mfree(s->secret_bindings);
        s->n_secrets = 0;
        strv_free_erase(s->secret_environment);
        s->secret_environment = NULL;
}

int sandbox_secrets_load(Sandbox *s) {
        _cleanup_free_ SecretBinding *b = NULL;
        char **values = NULL, **env = NULL;
        size_t n = 0;
        int r;

        sandbox_secrets_free(s);
        r = sandbox_config_secret_bindings(&s->config, &b, &n);
        if (r < 0 || n == 0)
                return r;
        values = calloc(n + 1, sizeof(char *));
        env = calloc(1, sizeof(char *));
        if (!values || !env) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < n; i++) {
                r = secret_store_get(manager_secrets_dir(s->manager), s->owner, s->config.tenant, b[i].name,
                                     &values[i], NULL);
                if (r < 0)
                        goto fail;
                if (b[i].kind == SECRET_BIND_ENV) {
                        char *e = NULL;
                        if (asprintf(&e, "%s=%s", b[i].name, values[i]) < 0) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        r = strv_consume(&env, e);
                        if (r < 0)
                                goto fail;
                }
        }
        /* A header bound: the proxy's CA, made now unless it was kept (an adopted sandbox's). */
        for (size_t i = 0; i < n && !s->egress_ca_cert; i++)
                if (b[i].kind == SECRET_BIND_HEADER) {
                        char cn[128];

                        snprintf(cn, sizeof(cn), "sandboxd egress CA of sandbox %s", s->id);
                        r = egress_ca_generate(cn, &s->egress_ca_cert, &s->egress_ca_key);
                        if (r < 0)
                                goto fail;
                }
        s->secret_bindings = TAKE_PTR(b);
        s->secret_values = values;
        s->secret_environment = env;
        s->n_secrets = n;
        return 0;
fail:
        values_free(values, n);
        strv_free_erase(env);
        return r;
}

int manager_set_secret(Manager *m, const SandboxCaller *caller, const char *name, const void *value, size_t size,
                       SandboxError *error) {
        int r;

        r = secret_store_set(manager_secrets_dir(m), caller->uid, caller->tenant, name, value, size, error);
        if (r < 0) {
                if (sandbox_error_is_set(error))
                        return r;
                return sandbox_error_set_errno(error, r, "Failed to store secret %s: %m", name);
        }
        /* The name only, never the value. */
        log_info("Secret %s of uid %u%s%s set.", name, (unsigned) caller->uid, isempty(caller->tenant) ? "" : ", tenant ",
                 strempty(caller->tenant));
        return 0;
}

int manager_remove_secret(Manager *m, const SandboxCaller *caller, const char *name, SandboxError *error) {
        int r;

        r = secret_store_remove(manager_secrets_dir(m), caller->uid, caller->tenant, name, error);
        if (r < 0) {
                if (sandbox_error_is_set(error))
                        return r;
                return sandbox_error_set_errno(error, r, "Failed to remove secret %s: %m", name);
        }
        if (r == 0)
                return sandbox_error_set_errno(error, ENOENT, "There is no secret %s.", name);
        log_info("Secret %s of uid %u%s%s removed.", name, (unsigned) caller->uid,
                 isempty(caller->tenant) ? "" : ", tenant ", strempty(caller->tenant));
        return 0;
}

int manager_list_secrets(Manager *m, const SandboxCaller *caller, char ***ret_names) {
        return secret_store_list(manager_secrets_dir(m), caller->uid, caller->tenant, ret_names);
}

#define SECRETS_DIR_INSIDE "/run/secrets"

void sandbox_data_files_free(PayloadDataFile *f, size_t n) {
        for (size_t i = 0; f && i < n; i++) {
                free((char *) f[i].path);
                free(f[i].owned);
        }
        free(f);
}

/* The host's bundle of roots with ca after it. */
static int host_bundle_with(const char *ca, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t n_ca = strlen(ca);
        ssize_t n;

        buf = malloc(HOST_BUNDLE_MAX + n_ca + 2);
        if (!buf)
                return -ENOMEM;
        n = read_small_file_at(AT_FDCWD, HOST_BUNDLE, buf, HOST_BUNDLE_MAX);
        if (n < 0)
                n = 0; /* none on this host: the CA alone */
        if (n > 0 && buf[n - 1] != '\n')
                buf[n++] = '\n';
        memcpy(buf + n, ca, n_ca + 1);
        *ret_size = (size_t) n + n_ca;
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Whether the template shows path of the host (one of its ro_binds is path or above it). */
static bool template_binds(Sandbox *s, const char *path) {
        const Template *t = template_set_find(&s->manager->templates, s->template_name);

        for (char **b = t ? t->ro_binds : NULL; b && *b; b++) {
                size_t k = strlen(*b);
                if (strncmp(path, *b, k) == 0 && (path[k] == '/' || path[k] == 0))
                        return true;
        }
        return false;
}

int sandbox_secrets_data_files(Sandbox *s, PayloadDataFile **ret, size_t *ret_n) {
        PayloadDataFile *f;
        size_t n = 0;
        int r;

        f = calloc(s->n_secrets + 3, sizeof(PayloadDataFile));
        if (!f)
                return -ENOMEM;
        if (s->egress_ca_cert) {
                /* The CA alone (Node.js's NODE_EXTRA_CA_CERTS), and with the host's roots:
                 * the sandbox still reaches hosts the proxy only relays. */
                char *bundle = NULL;
                size_t n_host = 0, n_ca = strlen(s->egress_ca_cert);
                char *path = strdup(EGRESS_CA_INSIDE);

                if (!path) {
                        free(f);
                        return -ENOMEM;
                }
                f[n++] = (PayloadDataFile) { .path = path, .data = s->egress_ca_cert, .size = n_ca, .mode = 0444 };
                r = host_bundle_with(s->egress_ca_cert, &bundle, &n_host);
                if (r < 0) {
                        sandbox_data_files_free(f, n);
                        return r;
                }
                path = strdup(EGRESS_BUNDLE_INSIDE);
                if (!path) {
                        free(bundle);
                        sandbox_data_files_free(f, n);
                        return -ENOMEM;
                }
                f[n++] = (PayloadDataFile) { .path = path, .data = bundle, .size = n_host, .mode = 0444,
                                             .owned = bundle };
                /* Its own /etc/ssl/certs says the same where the template shows the host's. */
                if (template_binds(s, HOST_BUNDLE) && access(HOST_BUNDLE, F_OK) >= 0) {
                        path = strdup(HOST_BUNDLE);
                        if (!path) {
                                sandbox_data_files_free(f, n);
                                return -ENOMEM;
                        }
                        f[n++] = (PayloadDataFile) { .path = path, .data = bundle, .size = n_host, .mode = 0444 };
                }
        }
        for (size_t i = 0; i < s->n_secrets; i++) {
                char *path = NULL;

                if (s->secret_bindings[i].kind != SECRET_BIND_FILE)
                        continue;
                if (asprintf(&path, SECRETS_DIR_INSIDE "/%s", s->secret_bindings[i].name) < 0) {
                        sandbox_data_files_free(f, n);
                        return -ENOMEM;
                }
                f[n++] = (PayloadDataFile) {
                        .path = path,
                        .data = s->secret_values[i],
                        .size = strlen(s->secret_values[i]),
                        .mode = 0400,
                };
        }
        *ret = f;
        *ret_n = n;
        return 0;
}
