/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The certificates of header injection (docs/SECRETS.md): a CA per sandbox, made by
 * sandboxd when the sandbox starts (its certificate goes into the sandbox's trust store,
 * its key never does), and the leaf certificates sandboxd-egress mints with it, one per
 * host the sandbox's secrets are bound to. GnuTLS; ECDSA P-256 throughout. */

#include <stddef.h>

typedef struct EgressCA EgressCA;

#define EGRESS_CA_DAYS 400U
#define EGRESS_LEAF_DAYS 30U

/* A new CA; its certificate and key as PEM (free() them). */
int egress_ca_generate(const char *common_name, char **ret_cert_pem, char **ret_key_pem);

/* A CA from its PEM, with a fresh key for the leaves it mints. */
int egress_ca_load(const char *cert_pem, const char *key_pem, EgressCA **ret);
EgressCA *egress_ca_free(EgressCA *ca);
/* A certificate for host (its only subject alternative name), signed by ca: the chain
 * (leaf, then the CA) and the leaf's key as PEM. */
int egress_ca_mint(EgressCA *ca, const char *host, char **ret_chain_pem, char **ret_key_pem);
