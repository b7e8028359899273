/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "egress-tls.h"

struct EgressCA {
        gnutls_x509_crt_t cert;
        gnutls_x509_privkey_t key;
        gnutls_x509_privkey_t leaf_key;
        char *cert_pem;
        char *leaf_key_pem;
};

static int gnutls_to_errno(int g) {
        if (g >= 0)
                return 0;
        return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EIO;
}

static int export_pem(int (*fn)(void *, gnutls_x509_crt_fmt_t, gnutls_datum_t *), void *obj, char **ret) {
        gnutls_datum_t d = {};
        int g = fn(obj, GNUTLS_X509_FMT_PEM, &d);
        char *s;

        if (g < 0)
                return gnutls_to_errno(g);
        s = malloc(d.size + 1);
        if (!s) {
                gnutls_free(d.data);
                return -ENOMEM;
        }
        memcpy(s, d.data, d.size);
        s[d.size] = 0;
        gnutls_memset(d.data, 0, d.size);
        gnutls_free(d.data);
        *ret = s;
        return 0;
}

static int crt_export(void *c, gnutls_x509_crt_fmt_t f, gnutls_datum_t *d) {
        return gnutls_x509_crt_export2(c, f, d);
}

static int key_export(void *k, gnutls_x509_crt_fmt_t f, gnutls_datum_t *d) {
        return gnutls_x509_privkey_export2(k, f, d);
}

static int new_key(gnutls_x509_privkey_t *ret) {
        int g = gnutls_x509_privkey_init(ret);
        if (g >= 0)
                g = gnutls_x509_privkey_generate(*ret, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
        return gnutls_to_errno(g);
}

static int set_serial_and_times(gnutls_x509_crt_t c, unsigned days) {
        unsigned char serial[16];
        time_t now = time(NULL);
        int g;

        g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
        serial[0] &= 0x7f; /* positive */
        if (g >= 0)
                g = gnutls_x509_crt_set_serial(c, serial, sizeof(serial));
        if (g >= 0)
                g = gnutls_x509_crt_set_version(c, 3);
        /* An hour back: clocks of the sandbox's clients and ours differ a little. */
        if (g >= 0)
                g = gnutls_x509_crt_set_activation_time(c, now - 3600);
        if (g >= 0)
                g = gnutls_x509_crt_set_expiration_time(c, now + (time_t) days * 86400);
        return g;
}

int egress_ca_generate(const char *common_name, char **ret_cert_pem, char **ret_key_pem) {
        gnutls_x509_privkey_t key = NULL;
        gnutls_x509_crt_t crt = NULL;
        char *cert_pem = NULL, *key_pem = NULL;
        int g, r;

        r = new_key(&key);
        if (r < 0)
                goto finish;
        g = gnutls_x509_crt_init(&crt);
        if (g >= 0)
                g = set_serial_and_times(crt, EGRESS_CA_DAYS);
        if (g >= 0)
                g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, common_name,
                                                  strlen(common_name));
        if (g >= 0)
                g = gnutls_x509_crt_set_key(crt, key);
        if (g >= 0)
                g = gnutls_x509_crt_set_basic_constraints(crt, 1, 0); /* a CA of leaves only */
        if (g >= 0)
                g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN);
        if (g >= 0) {
                unsigned char id[64];
                size_t n = sizeof(id);
                g = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, id, &n);
                if (g >= 0)
                        g = gnutls_x509_crt_set_subject_key_id(crt, id, n);
        }
        if (g >= 0)
                g = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
        r = gnutls_to_errno(g);
        if (r >= 0)
                r = export_pem(crt_export, crt, &cert_pem);
        if (r >= 0)
                r = export_pem(key_export, key, &key_pem);
        if (r >= 0) {
                *ret_cert_pem = cert_pem;
                *ret_key_pem = key_pem;
                cert_pem = key_pem = NULL;
        }
finish:
        free(cert_pem);
        if (key_pem) {
                explicit_bzero(key_pem, strlen(key_pem));
                free(key_pem);
        }
        if (crt)
                gnutls_x509_crt_deinit(crt);
        if (key)
                gnutls_x509_privkey_deinit(key);
        return r;
}

EgressCA *egress_ca_free(EgressCA *ca) {
        if (!ca)
                return NULL;
        if (ca->cert)
                gnutls_x509_crt_deinit(ca->cert);
        if (ca->key)
                gnutls_x509_privkey_deinit(ca->key);
        if (ca->leaf_key)
                gnutls_x509_privkey_deinit(ca->leaf_key);
        free(ca->cert_pem);
        if (ca->leaf_key_pem) {
                explicit_bzero(ca->leaf_key_pem, strlen(ca->leaf_key_pem));
                free(ca->leaf_key_pem);
        }
        free(ca);
        return NULL;
}

int egress_ca_load(const char *cert_pem, const char *key_pem, EgressCA **ret) {
        gnutls_datum_t c = { (unsigned char *) cert_pem, (unsigned) strlen(cert_pem) };
        gnutls_datum_t k = { (unsigned char *) key_pem, (unsigned) strlen(key_pem) };
        EgressCA *ca;
        int g, r;

        ca = calloc(1, sizeof(EgressCA));
        if (!ca)
                return -ENOMEM;
        g = gnutls_x509_crt_init(&ca->cert);
        if (g >= 0)
                g = gnutls_x509_crt_import(ca->cert, &c, GNUTLS_X509_FMT_PEM);
        if (g >= 0)
                g = gnutls_x509_privkey_init(&ca->key);
        if (g >= 0)
                g = gnutls_x509_privkey_import(ca->key, &k, GNUTLS_X509_FMT_PEM);
        r = g < 0 ? -EINVAL : 0;
        if (r >= 0)
                r = new_key(&ca->leaf_key);
        if (r >= 0)
                r = export_pem(key_export, ca->leaf_key, &ca->leaf_key_pem);
        if (r >= 0)
                r = (ca->cert_pem = strdup(cert_pem)) ? 0 : -ENOMEM;
        if (r < 0) {
                egress_ca_free(ca);
                return r;
        }
        *ret = ca;
        return 0;
}

int egress_ca_mint(EgressCA *ca, const char *host, char **ret_chain_pem, char **ret_key_pem) {
        gnutls_x509_crt_t crt = NULL;
        char *leaf = NULL, *chain = NULL, *key = NULL;
        int g, r;

        g = gnutls_x509_crt_init(&crt);
        if (g >= 0)
                g = set_serial_and_times(crt, EGRESS_LEAF_DAYS);
        if (g >= 0)
                g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, host, strlen(host));
        if (g >= 0)
                g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, host, strlen(host), GNUTLS_FSAN_SET);
        if (g >= 0)
                g = gnutls_x509_crt_set_key(crt, ca->leaf_key);
        if (g >= 0)
                g = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
        if (g >= 0)
                g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
        if (g >= 0)
                g = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
        if (g >= 0)
                g = gnutls_x509_crt_sign2(crt, ca->cert, ca->key, GNUTLS_DIG_SHA256, 0);
        r = gnutls_to_errno(g);
        if (r >= 0)
                r = export_pem(crt_export, crt, &leaf);
        if (r >= 0) {
                size_t a = strlen(leaf), b = strlen(ca->cert_pem);
                chain = malloc(a + b + 1);
                r = chain ? 0 : -ENOMEM;
                if (chain) {
                        memcpy(chain, leaf, a);
                        memcpy(chain + a, ca->cert_pem, b + 1);
                }
        }
        if (r >= 0)
                r = (key = strdup(ca->leaf_key_pem)) ? 0 : -ENOMEM;
        if (r >= 0) {
                *ret_chain_pem = chain;
                *ret_key_pem = key;
                chain = NULL;
        } else
                free(chain);
        free(leaf);
        if (crt)
                gnutls_x509_crt_deinit(crt);
        return r;
}
