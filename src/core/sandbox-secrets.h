/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A sandbox's Secrets= (secret-store.h, docs/SECRETS.md): checked when it is asked for,
 * read from the store when the sandbox is made or adopted, and handed to where each
 * binding goes: the environment of each exec, files under /run/secrets (payload-bwrap.c),
 * or the egress proxy's header injection (egress.c). */

#include <stdbool.h>
#include <sys/types.h>

#include "sandbox-errors.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct Template Template;
typedef struct SandboxConfig SandboxConfig;

const char *manager_secrets_dir(Manager *m);
/* Each binding of c: a secret of owner (and c's tenant) that exists, fits its binding, and
 * (a header's) is for a host the egress rules allow; the payload takes it. InvalidOption
 * or NotSupported, saying which. */
int sandbox_secrets_check(Manager *m, const Template *t, uid_t owner, const SandboxConfig *c, SandboxError *error);
/* Reads the values of s's bindings into s (sandbox-internal.h); -ENOENT if one is gone. */
int sandbox_secrets_load(Sandbox *s);
/* Forgets them, overwritten first. */
void sandbox_secrets_free(Sandbox *s);
/* Whether s has a secret bound to a header (the proxy adds it). */
bool sandbox_has_header_secrets(const Sandbox *s);
/* With a header bound: the variables that point the sandbox's TLS clients at the CA
 * (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, …), over its template's. */
int sandbox_secrets_environment(Sandbox *s);
void sandbox_egress_ca_free(Sandbox *s);

/* The files bwrap makes for s (payload-bwrap.h): each secret bound as a file, at
 * /run/secrets/NAME, 0400. The data points into s; free the paths with
 * sandbox_data_files_free(). */
struct PayloadDataFile;
int sandbox_secrets_data_files(Sandbox *s, struct PayloadDataFile **ret, size_t *ret_n);
void sandbox_data_files_free(struct PayloadDataFile *f, size_t n);

/* The API's calls (authorized already: SetSecret and RemoveSecret as a create by caller
 * for the tenant it acts for, ListSecrets as one's own): the store of caller's uid and
 * the tenant it acts for. RemoveSecret of a name that is not there: ENOENT. */
typedef struct SandboxCaller SandboxCaller;
int manager_set_secret(Manager *m, const SandboxCaller *caller, const char *name, const void *value, size_t size,
                       SandboxError *error);
int manager_remove_secret(Manager *m, const SandboxCaller *caller, const char *name, SandboxError *error);
int manager_list_secrets(Manager *m, const SandboxCaller *caller, char ***ret_names);
