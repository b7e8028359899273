/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Header injection's pure parts: request heads rewritten, bodies followed to the next
 * head (egress-http.h), and the certificates (egress-tls.h): a CA, a leaf for a host that
 * verifies against it for that host only. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <cmocka.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "egress-http.h"
#include "egress-tls.h"

static void rewrite_to(const char *host, const char *value, const char *head, int want, const char *out,
                       EgressBodyKind kind, uint64_t length) {
        char *got = NULL;
        size_t n = 0;
        EgressBody body;

        assert_int_equal(egress_http_rewrite_request(head, strlen(head), host, "x-api-key", value, &got, &n, &body),
                         want);
        if (want < 0)
                return;
        assert_int_equal(n, strlen(out));
        assert_memory_equal(got, out, n);
        assert_int_equal(body.kind, kind);
        if (kind == EGRESS_BODY_LENGTH)
                assert_int_equal(body.remaining, length);
        free(got);
}

static void rewrite(const char *head, int want, const char *out, EgressBodyKind kind, uint64_t length) {
        rewrite_to(NULL, "K", head, want, out, kind, length);
}

static void test_rewrite(void **state) {
        rewrite("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0, "GET / HTTP/1.1\r\nx-api-key: K\r\nHost: a\r\n\r\n",
                EGRESS_BODY_NONE, 0);
        /* The sandbox's own, in any case and any number, is dropped. */
        rewrite("POST /v1/messages HTTP/1.1\r\nX-API-Key: fake\r\nContent-Length: 12\r\nx-api-key:fake2\r\n\r\n", 0,
                "POST /v1/messages HTTP/1.1\r\nx-api-key: K\r\nContent-Length: 12\r\n\r\n", EGRESS_BODY_LENGTH, 12);
        rewrite("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 0,
                "POST / HTTP/1.1\r\nx-api-key: K\r\nTransfer-Encoding: chunked\r\n\r\n", EGRESS_BODY_CHUNKED, 0);
        rewrite("GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 0,
                "GET / HTTP/1.1\r\nx-api-key: K\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
                EGRESS_BODY_UPGRADE, 0);
        rewrite("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 0, "POST / HTTP/1.1\r\nx-api-key: K\r\nContent-Length: 0\r\n\r\n",
                EGRESS_BODY_NONE, 0);

        /* What two parsers could read two ways is refused. */
        rewrite("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("GET / HTTP/1.1\r\nHost : a\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("GET / HTTP/2.0\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite("GET /\r\n\r\n", -EBADMSG, NULL, 0, 0);

        /* The host the secret is bound to and no other: a front that routes by Host (a CDN)
         * would hand the key to whichever name the sandbox wrote. */
        rewrite_to("api.example.com", "K", "GET /v1 HTTP/1.1\r\nHost: API.example.com:443\r\n\r\n", 0,
                   "GET /v1 HTTP/1.1\r\nx-api-key: K\r\nHost: API.example.com:443\r\n\r\n", EGRESS_BODY_NONE, 0);
        rewrite_to("api.example.com", "K", "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 0,
                   "GET /v1 HTTP/1.1\r\nx-api-key: K\r\nHost: api.example.com\r\n\r\n", EGRESS_BODY_NONE, 0);
        rewrite_to("api.example.com", "K", "GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite_to("api.example.com", "K", "GET / HTTP/1.1\r\nHost: api.example.com.attacker.example\r\n\r\n",
                   -EBADMSG, NULL, 0, 0);
        rewrite_to("api.example.com", "K", "GET / HTTP/1.1\r\nHost: api.example.com:\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite_to("api.example.com", "K", "GET / HTTP/1.1\r\nHost: api.example.com@x\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite_to("api.example.com", "K",
                   "GET / HTTP/1.1\r\nHost: api.example.com\r\nHost: attacker.example\r\n\r\n", -EBADMSG, NULL, 0, 0);
        rewrite_to("api.example.com", "K", "GET http://attacker.example/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
                   -EBADMSG, NULL, 0, 0);
        rewrite("OPTIONS * HTTP/1.1\r\n\r\n", 0, "OPTIONS * HTTP/1.1\r\nx-api-key: K\r\n\r\n", EGRESS_BODY_NONE, 0);
        /* A value that would make a line of its own (the secret changed after create). */
        rewrite_to(NULL, "K\r\nX-Evil: 1", "GET / HTTP/1.1\r\n\r\n", -EINVAL, NULL, 0, 0);
        rewrite_to(NULL, "K\nX", "GET / HTTP/1.1\r\n\r\n", -EINVAL, NULL, 0, 0);

        assert_int_equal(egress_http_head_end("GET / HTTP/1.1\r\n", 16), 0);
        assert_int_equal(egress_http_head_end("GET / HTTP/1.1\r\n\r\nxyz", 21), 18);
}

static void test_bodies(void **state) {
        EgressBody b = { .kind = EGRESS_BODY_LENGTH, .remaining = 5 };
        const char *chunked = "3;ext=1\r\nabc\r\n5\r\ndefgh\r\n0\r\nTrailer: x\r\n\r\nGET /next";

        assert_int_equal(egress_http_body_feed(&b, "abcdefgh", 8), 5);
        assert_int_equal(b.kind, EGRESS_BODY_NONE);

        /* Chunked, fed a byte at a time: it ends exactly before the next head. */
        b = (EgressBody) { .kind = EGRESS_BODY_CHUNKED, .chunk = CHUNK_SIZE };
        size_t used = 0;
        while (b.kind == EGRESS_BODY_CHUNKED) {
                ssize_t k = egress_http_body_feed(&b, chunked + used, 1);
                assert_true(k == 1);
                used++;
        }
        assert_string_equal(chunked + used, "GET /next");
        /* At once, the same. */
        b = (EgressBody) { .kind = EGRESS_BODY_CHUNKED, .chunk = CHUNK_SIZE };
        assert_int_equal(egress_http_body_feed(&b, chunked, strlen(chunked)), (ssize_t) used);

        b = (EgressBody) { .kind = EGRESS_BODY_CHUNKED, .chunk = CHUNK_SIZE };
        assert_int_equal(egress_http_body_feed(&b, "zz\r\n", 4), -EBADMSG);
        b = (EgressBody) { .kind = EGRESS_BODY_CHUNKED, .chunk = CHUNK_SIZE };
        assert_int_equal(egress_http_body_feed(&b, "1\r\naXY\r\n", 8), -EBADMSG);
        b = (EgressBody) { .kind = EGRESS_BODY_CHUNKED, .chunk = CHUNK_SIZE };
        assert_int_equal(egress_http_body_feed(&b, "1\na\r\n", 5), -EBADMSG);
}

static gnutls_x509_crt_t import(const char *pem) {
        gnutls_x509_crt_t c;
        gnutls_datum_t d = { (unsigned char *) pem, (unsigned) strlen(pem) };

        assert_int_equal(gnutls_x509_crt_init(&c), 0);
        assert_int_equal(gnutls_x509_crt_import(c, &d, GNUTLS_X509_FMT_PEM), 0);
        return c;
}

static void test_certificates(void **state) {
        char *ca_pem = NULL, *ca_key = NULL, *chain = NULL, *key = NULL, *other_pem = NULL, *other_key = NULL;
        EgressCA *ca = NULL;
        unsigned status = 0;

        assert_int_equal(egress_ca_generate("test CA", &ca_pem, &ca_key), 0);
        assert_non_null(strstr(ca_pem, "BEGIN CERTIFICATE"));
        assert_non_null(strstr(ca_key, "PRIVATE KEY"));
        assert_int_equal(egress_ca_load(ca_pem, ca_key, &ca), 0);
        assert_int_equal(egress_ca_mint(ca, "api.example.com", &chain, &key), 0);

        gnutls_x509_crt_t leaf = import(chain), root = import(ca_pem);
        assert_int_equal(gnutls_x509_crt_verify(leaf, &root, 1, 0, &status), 0);
        assert_int_equal(status, 0);
        assert_true(gnutls_x509_crt_check_hostname(leaf, "api.example.com"));
        assert_false(gnutls_x509_crt_check_hostname(leaf, "other.example.com"));
        /* The chain carries the CA after the leaf. */
        assert_non_null(strstr(strstr(chain, "END CERTIFICATE") + 1, "BEGIN CERTIFICATE"));

        /* Another sandbox's CA does not vouch for it. */
        assert_int_equal(egress_ca_generate("other CA", &other_pem, &other_key), 0);
        gnutls_x509_crt_t other = import(other_pem);
        assert_int_equal(gnutls_x509_crt_verify(leaf, &other, 1, 0, &status), 0);
        assert_true(status & GNUTLS_CERT_INVALID);

        assert_int_equal(egress_ca_load(ca_pem, "not a key", &(EgressCA *) { NULL }), -EINVAL);

        gnutls_x509_crt_deinit(leaf);
        gnutls_x509_crt_deinit(root);
        gnutls_x509_crt_deinit(other);
        egress_ca_free(ca);
        free(ca_pem);
        free(ca_key);
        free(chain);
        free(key);
        free(other_pem);
        free(other_key);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rewrite),
                cmocka_unit_test(test_bodies),
                cmocka_unit_test(test_certificates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
