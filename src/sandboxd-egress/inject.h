/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Header injection (inject.c, docs/SECRETS.md). */

#include <stddef.h>
#include <stdint.h>

#include "egress.h"

#define EGRESS_INJECT_MAX 512U   /* connections with a header added, at once, of all sandboxes */
#define EGRESS_INJECT_BOX_MAX 64U /* of one sandbox: it cannot take all of them from the others */
#define EGRESS_TRUST_DIR "/etc/sandboxd/egress-trust.d"

/* The roots the servers are verified with: the system's, each of trust_files, and every
 * *.pem of trust_dir (the admin's; a missing directory is none). */
int inject_init(char * const *trust_files, const char *trust_dir);
int log_trust_failure(const char *path, int gnutls_error);
void inject_done(void);
unsigned inject_running(void);

/* Hands the connection to a thread of its own: the sockets (connected to the client and
 * to the server) are the thread's on success, the caller's on failure. early: the
 * ClientHello already read. */
int inject_start(const Box *b, const char *host, uint16_t port, int client_fd, int server_fd, const uint8_t *early,
                 size_t early_len, const char *header, const char *value, const char *chain_pem, const char *key_pem);
