/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Bearer tokens: DIR/NAME.conf, each
 *     [Token]
 *     Tenant=alice
 *     SHA256=<64 hex digits: SHA-256 of the token>
 *     ExpiresAt=<seconds since the epoch; absent: never>
 * A token is 256 random bits: its hash needs no slow KDF. The hash is GnuTLS's (already
 * under libmicrohttpd). */

#include <dirent.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "conf-parser.h"
#include "http.h"
#include "log.h"
#include "parse-util.h"
#include "sandbox-api.h"

#define TOKEN_PREFIX "sdh_"

int http_sha256(const void *data, size_t size, uint8_t ret[32]) {
        return gnutls_hash_fast(GNUTLS_DIG_SHA256, data, size, ret) < 0 ? -EIO : 0;
}

static bool memeq_const_time(const uint8_t *a, const uint8_t *b, size_t n) {
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= a[i] ^ b[i];
        return d == 0;
}

static bool label_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > SANDBOX_NAME_MAX)
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n && s[0] != '.';
}

typedef struct TokenFile {
        char *tenant;
        char *sha256;
        char *expires_at;
        bool operator;
} TokenFile;

static const ConfigTableItem token_table[] = {
        { "Token", "Tenant",    config_parse_string, offsetof(TokenFile, tenant),     "a tenant name" },
        { "Token", "SHA256",    config_parse_string, offsetof(TokenFile, sha256),     "64 hex digits" },
        { "Token", "ExpiresAt", config_parse_string, offsetof(TokenFile, expires_at), "seconds since the epoch" },
        { "Token", "Operator",  config_parse_bool,   offsetof(TokenFile, operator),   "a boolean" },
};

static int token_load(HttpToken *t, const char *path, char *name) {
        TokenFile f = {};
        int r;

        r = config_parse_file(path, token_table, ELEMENTSOF(token_table), &f);
        if (r >= 0 && (!f.sha256 || strlen(f.sha256) != 64 || !label_is_valid(f.tenant)))
                r = -EINVAL;
        if (r >= 0) {
                _cleanup_free_ void *h = NULL;
                size_t n;

                r = hex_decode(f.sha256, 64, &h, &n);
                if (r >= 0)
                        memcpy(t->sha256, h, sizeof(t->sha256));
        }
        if (r >= 0 && f.expires_at)
                r = parse_uint64(f.expires_at, &t->expires_at);
        if (r >= 0) {
                t->tenant = TAKE_PTR(f.tenant);
                t->name = name;
                t->operator = f.operator;
        } else
                free(name);
        free(f.tenant);
        free(f.sha256);
        free(f.expires_at);
        return r;
}

void http_tokens_done(HttpTokens *t) {
        for (size_t i = 0; i < t->n_tokens; i++) {
                free(t->tokens[i].name);
                free(t->tokens[i].tenant);
        }
        t->tokens = mfree(t->tokens);
        t->n_tokens = 0;
}

static bool has_conf_suffix(const char *name) {
        size_t n = strlen(name);
        return n > 5 && streq(name + n - 5, ".conf");
}

/* The token's name for the file FILE (allocated), or NULL (and errno) when FILE holds no
 * token: in a tokens directory NAME.conf; among credentials (HTTP_TOKEN_CREDENTIAL, see
 * http.h) http-token.NAME, or http-token_NAME[.conf] as LoadCredential= of a directory
 * names its files. */
static char *token_file_name(const char *file, bool credentials) {
        const char *name = file;
        size_t n;

        if (credentials) {
                size_t k = strlen(HTTP_TOKEN_CREDENTIAL);
                if (strncmp(file, HTTP_TOKEN_CREDENTIAL, k) != 0 || (file[k] != '.' && file[k] != '_'))
                        return errno = ENOENT, NULL;
                name = file + k + 1;
        } else if (!has_conf_suffix(file))
                return errno = ENOENT, NULL;
        n = strlen(name) - (has_conf_suffix(name) ? 5 : 0);
        if (n == 0 || name[0] == '.')
                return errno = ENOENT, NULL;
        return strndup(name, n);
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

int http_tokens_load(HttpTokens *t, const char *dir, bool credentials) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                char *name;
                HttpToken token = {};
                HttpToken *a;
                int r;

                name = token_file_name(de->d_name, credentials);
                if (!name) {
                        if (errno == ENOMEM)
                                return -ENOMEM;
                        continue;
                }
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return free(name), -ENOMEM;
                r = token_load(&token, path, name);
                if (r < 0) {
                        log_warning_errno(r, "Ignoring token file %s: %m", path);
                        continue;
                }
                a = reallocarray(t->tokens, t->n_tokens + 1, sizeof(HttpToken));
                if (!a) {
                        free(token.name);
                        free(token.tenant);
                        return -ENOMEM;
                }
                t->tokens = a;
                t->tokens[t->n_tokens++] = token;
        }
        return 0;
}

const HttpToken *http_tokens_find(const HttpTokens *t, const char *secret, uint64_t now) {
        const HttpToken *found = NULL;
        uint8_t h[32];

        if (!secret || http_sha256(secret, strlen(secret), h) < 0)
                return NULL;
        /* Every hash is compared, whatever matched earlier. */
        for (size_t i = 0; i < t->n_tokens; i++)
                if (memeq_const_time(h, t->tokens[i].sha256, sizeof(h)) && !found)
                        found = &t->tokens[i];
        if (found && found->expires_at > 0 && now >= found->expires_at)
                return NULL;
        return found;
}

int http_token_add(const char *dir, const char *name, const char *tenant, uint64_t expires_at, bool operator,
                   bool e2b) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *random_hex = NULL, *digest = NULL;
        char secret[MAX(sizeof(TOKEN_PREFIX), sizeof(HTTP_E2B_TOKEN_PREFIX)) + 64];
        uint8_t random[32], h[32];
        FILE *f;

        if (!label_is_valid(name) || (tenant && !label_is_valid(tenant)))
                return log_error_errno(-EINVAL, "A token's name and tenant are 1 to %u of A-Z a-z 0-9 . _ -.",
                                       SANDBOX_NAME_MAX);
        if (getrandom(random, sizeof(random), 0) != sizeof(random))
                return log_error_errno(-errno, "getrandom(): %m");
        if (hex_encode(random, sizeof(random), &random_hex) < 0)
                return -ENOMEM;
        snprintf(secret, sizeof(secret), "%s%s", e2b ? HTTP_E2B_TOKEN_PREFIX : TOKEN_PREFIX, random_hex);
        if (http_sha256(secret, strlen(secret), h) < 0 || hex_encode(h, sizeof(h), &digest) < 0)
                return -EIO;

        (void) mkdir(dir, 0755);
        if (asprintf(&path, "%s/%s.conf", dir, name) < 0)
                return -ENOMEM;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot create %s: %m", path);
        /* A hash, not a secret: readable by the bridge's dynamic user. */
        (void) fchmod(fd, 0644);
        f = fdopen(TAKE_FD(fd), "w");
        if (!f)
                return -errno;
        fprintf(f, "# sandboxd-http token %s (sandboxd-http(8)); only its hash is kept.\n[Token]\nTenant=%s\nSHA256=%s\n",
                name, tenant ?: name, digest);
        if (expires_at > 0)
                fprintf(f, "ExpiresAt=%llu\n", (unsigned long long) expires_at);
        if (operator)
                fprintf(f, "Operator=yes\n");
        if (fclose(f) != 0) {
                (void) unlink(path);
                return log_error_errno(-EIO, "Cannot write %s.", path);
        }
        printf("%s\n", secret);
        return 0;
}
