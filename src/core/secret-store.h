/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The secret store (docs/SECRETS.md): named values of an owner (a uid, and the tenant it
 * acts for, if any), kept by sandboxd and bound into sandboxes at create. A value is never
 * returned by the API, logged, or written into a record or a sandbox's state file: it is
 * read from here when a sandbox starts (and again when a restarted sandboxd adopts it).
 *
 * On disk: <secrets_dir>/<uid>[@<tenant>]/<NAME>, directories 0700 and files 0600 of
 * root, each file written whole and renamed into place. The calls are small file
 * operations on a local directory, done on the loop as the state files are. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "sandbox-errors.h"

#define SECRET_NAME_MAX 64U
#define SECRET_VALUE_MAX (16U * 1024U)
#define SECRETS_PER_OWNER_MAX 256U
#define SANDBOX_SECRETS_MAX 32U   /* bindings of one sandbox */
#define SECRETS_DIR_DEFAULT SANDBOX_STATE_DIR "/secrets"

/* A name: a letter or _, then letters, digits and _ (an environment variable's name, so
 * that a secret bound as one keeps its name). */
bool secret_name_is_valid(const char *name);

int secret_store_set(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, const void *value,
                     size_t size, SandboxError *error);
/* 1 if it was there and is gone, 0 if it was not there. */
int secret_store_remove(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, SandboxError *error);
/* The names, sorted; an owner without secrets has none. */
int secret_store_list(const char *secrets_dir, uid_t owner, const char *tenant, char ***ret_names);
/* The value (NUL-terminated; a value holds no NUL), or -ENOENT. */
int secret_store_get(const char *secrets_dir, uid_t owner, const char *tenant, const char *name, char **ret_value,
                     size_t *ret_size);

/* How a sandbox gets a secret (the Secrets option, one string each):
 *   NAME                 the environment variable NAME of every command
 *   NAME:file            the file /run/secrets/NAME (tmpfs, 0400)
 *   NAME@HOST:HEADER     the header HEADER of each request for https://HOST that the
 *                        egress proxy forwards; the sandbox never holds the value */
typedef enum SecretBindingKind {
        SECRET_BIND_ENV,
        SECRET_BIND_FILE,
        SECRET_BIND_HEADER,
} SecretBindingKind;

#define SECRET_HOST_MAX 253U
#define SECRET_HEADER_MAX 64U

typedef struct SecretBinding {
        SecretBindingKind kind;
        char name[SECRET_NAME_MAX + 1];
        char host[SECRET_HOST_MAX + 1];     /* HEADER: lower case */
        char header[SECRET_HEADER_MAX + 1]; /* HEADER: an HTTP token */
} SecretBinding;

/* Parses one binding; -EINVAL if it is none. */
int secret_binding_parse(const char *s, SecretBinding *ret);
/* Its canonical text. */
int secret_binding_format(const SecretBinding *b, char *buf, size_t size);
/* Whether value can be what kind carries: a header's holds no control character. */
bool secret_value_fits(SecretBindingKind kind, const char *value);
