/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "secret-store.h"
#include "strv.h"

bool secret_name_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strnlen(name, SECRET_NAME_MAX + 1);
        if (n == 0 || n > SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* <dir>/<uid>[@<tenant>]; the tenant is valid (the core checked it when it was said) and
 * holds no '/'. */
static int owner_dir(const char *secrets_dir, uid_t owner, const char *tenant, char **ret) {
        if (!isempty(tenant) && strchr(tenant, '/'))
                return -EINVAL;
        if (asprintf(ret, "%s/%u%s%s", secrets_dir, (unsigned) owner, isempty(tenant) ? "" : "@",
                     strempty(tenant)) < 0)
                return -ENOMEM;
        return 0;
}

static int mkdir_private(const char *path) {
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int secret_store_set(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, const void *value,
                     size_t size, SandboxError *error) {
        _cleanup_free_ char *dir = NULL, *tmp = NULL, *path = NULL;
        _cleanup_strv_free_ char **names = NULL;
        int r;

        if (!secret_name_is_valid(name))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "A secret's name is 1 to %u characters of A-Z a-z 0-9 _, not starting "
                                         "with a digit.", SECRET_NAME_MAX);
        if (size == 0 || size > SECRET_VALUE_MAX || memchr(value, 0, size))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "A secret's value is 1 to %u bytes without NUL.", SECRET_VALUE_MAX);
        r = owner_dir(secrets_dir, owner, tenant, &dir);
        if (r < 0)
                return r;
        if ((r = mkdir_private(secrets_dir)) < 0 || (r = mkdir_private(dir)) < 0)
                return r;
        if (asprintf(&path, "%s/%s", dir, name) < 0 || asprintf(&tmp, "%s/.%s.new", dir, name) < 0)
                return -ENOMEM;
        if (access(path, F_OK) < 0) {
                r = secret_store_list(secrets_dir, owner, tenant, &names);
                if (r < 0)
                        return r;
                if (strv_length(names) >= SECRETS_PER_OWNER_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "At most %u secrets per owner.", SECRETS_PER_OWNER_MAX);
        }

        /* Whole or not at all: written aside, then renamed over the old one. */
        return write_file_atomic(path, tmp, value, size, 0600, true);
}

int secret_store_remove(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, SandboxError *error) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        int r;

        if (!secret_name_is_valid(name))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "'%.64s' is not a secret's name.",
                                         strna(name));
        r = owner_dir(secrets_dir, owner, tenant, &dir);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        if (unlink(path) < 0) {
                if (errno == ENOENT)
                        return 0;
                return -errno;
        }
        return 1;
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char * const *) a, *(char * const *) b);
}

int secret_store_list(const char *secrets_dir, uid_t owner, const char *tenant, char ***ret_names) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **names = NULL;
        DIR *d;
        int r;

        r = owner_dir(secrets_dir, owner, tenant, &dir);
        if (r < 0)
                return r;
        names = calloc(1, sizeof(char *));
        if (!names)
                return -ENOMEM;
        d = opendir(dir);
        if (!d) {
                if (errno != ENOENT)
                        return -errno;
        } else {
                struct dirent *de;

                r = 0;
                while (r >= 0 && (de = readdir(d)))
                        if (de->d_type == DT_REG && secret_name_is_valid(de->d_name))
                                r = strv_extend(&names, de->d_name);
                closedir(d);
                if (r < 0)
                        return r;
                qsort(names, strv_length(names), sizeof(char *), compare_strings);
        }
        *ret_names = TAKE_PTR(names);
        return 0;
}

int secret_store_get(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, char **ret_value,
                     size_t *ret_size) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *buf = NULL;
        ssize_t n;
        int r;

        if (!secret_name_is_valid(name))
                return -EINVAL;
        r = owner_dir(secrets_dir, owner, tenant, &dir);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        buf = malloc(SECRET_VALUE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        n = read_small_file_at(AT_FDCWD, path, buf, SECRET_VALUE_MAX + 1);
        if (n < 0)
                return (int) n;
        if (n == 0 || memchr(buf, 0, (size_t) n))
                return -EBADMSG;
        if (ret_size)
                *ret_size = (size_t) n;
        *ret_value = TAKE_PTR(buf);
        return 0;
}

static bool header_name_is_valid(const char *s, size_t n) {
        /* An HTTP token (RFC 9110, 5.6.2). */
        if (n == 0 || n > SECRET_HEADER_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", s[i]) ||
                    !s[i])
                        return false;
        return true;
}

static bool host_name_is_valid(const char *s, size_t n) {
        /* A host name: labels of letters, digits and '-', as the egress rules name hosts
         * exactly (no wildcard: one host, one key). */
        if (n == 0 || n > SECRET_HOST_MAX || s[0] == '.' || s[n - 1] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.", s[i]) || !s[i] ||
                    (s[i] == '.' && s[i + 1] == '.'))
                        return false;
        return true;
}

int secret_binding_parse(const char *s, SecretBinding *ret) {
        SecretBinding b = {};
        const char *at, *colon;
        size_t n;

        if (!s)
                return -EINVAL;
        n = strcspn(s, ":@");
        if (n == 0 || n > SECRET_NAME_MAX)
                return -EINVAL;
        memcpy(b.name, s, n);
        b.name[n] = 0;
        if (!secret_name_is_valid(b.name))
                return -EINVAL;
        if (s[n] == 0)
                b.kind = SECRET_BIND_ENV;
        else if (streq(s + n, ":env"))
                b.kind = SECRET_BIND_ENV;
        else if (streq(s + n, ":file"))
                b.kind = SECRET_BIND_FILE;
        else if (s[n] == '@') {
                at = s + n + 1;
                colon = strchr(at, ':');
                if (!colon || !host_name_is_valid(at, (size_t) (colon - at)) ||
                    !header_name_is_valid(colon + 1, strlen(colon + 1)))
                        return -EINVAL;
                b.kind = SECRET_BIND_HEADER;
                for (size_t i = 0; i < (size_t) (colon - at); i++)
                        b.host[i] = (char) (at[i] >= 'A' && at[i] <= 'Z' ? at[i] - 'A' + 'a' : at[i]);
                for (size_t i = 0; colon[1 + i]; i++)
                        b.header[i] = (char) (colon[1 + i] >= 'A' && colon[1 + i] <= 'Z' ?
                                              colon[1 + i] - 'A' + 'a' : colon[1 + i]);
        } else
                return -EINVAL;
        *ret = b;
        return 0;
}

int secret_binding_format(const SecretBinding *b, char *buf, size_t size) {
        int n;

        switch (b->kind) {
        case SECRET_BIND_ENV:
                n = snprintf(buf, size, "%s", b->name);
                break;
        case SECRET_BIND_FILE:
                n = snprintf(buf, size, "%s:file", b->name);
                break;
        case SECRET_BIND_HEADER:
                n = snprintf(buf, size, "%s@%s:%s", b->name, b->host, b->header);
                break;
        default:
                return -EINVAL;
        }
        return n < 0 || (size_t) n >= size ? -ENOBUFS : 0;
}

bool secret_value_fits(SecretBindingKind kind, const char *value) {
        if (kind != SECRET_BIND_HEADER)
                return true;
        /* A header's value: visible ASCII and spaces, never a line of its own. */
        for (const char *p = value; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}
