/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "egress-policy.h"
#include "macro.h"

static void test_normalize(void **state) {
        char out[EGRESS_HOST_MAX + 1];

        assert_int_equal(egress_host_normalize("Example.COM.", out), 0);
        assert_string_equal(out, "example.com");
        /* IDNA: Unicode to its A-label, case-folded first (UTS#46). */
        assert_int_equal(egress_host_normalize("BÜCHER.example", out), 0);
        assert_string_equal(out, "xn--bcher-kva.example");
        assert_int_equal(egress_host_normalize("xn--bcher-kva.example", out), 0);
        assert_string_equal(out, "xn--bcher-kva.example");
        assert_int_equal(egress_host_normalize("", out), -EINVAL);
        assert_int_equal(egress_host_normalize(".", out), -EINVAL);
        assert_int_equal(egress_host_normalize("a..b", out), -EINVAL);
        assert_int_equal(egress_host_normalize("exa mple.com", out), -EINVAL);
        assert_int_equal(egress_host_normalize("a/b", out), -EINVAL);
        assert_int_equal(egress_host_normalize("a\nb", out), -EINVAL);

        char label[80];
        memset(label, 'a', 64);
        label[64] = 0;
        assert_int_equal(egress_host_normalize(label, out), -EINVAL);  /* a label of 64 */
        label[63] = 0;
        assert_int_equal(egress_host_normalize(label, out), 0);
}

static void test_rules(void **state) {
        char buf[EGRESS_RULE_MAX + 8];
        EgressRule r;

        assert_int_equal(egress_rule_parse("PyPI.org", false, &r), 0);
        assert_int_equal(r.kind, EGRESS_RULE_NAME);
        assert_int_equal(r.port, 443);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "pypi.org");

        assert_int_equal(egress_rule_parse("*.pythonhosted.org:8443", false, &r), 0);
        assert_int_equal(r.kind, EGRESS_RULE_SUFFIX);
        assert_int_equal(r.port, 8443);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "*.pythonhosted.org:8443");

        /* deny without a port: every port. */
        assert_int_equal(egress_rule_parse("evil.com", true, &r), 0);
        assert_int_equal(r.port, 0);

        assert_int_equal(egress_rule_parse("10.1.2.3/8", false, &r), 0);
        assert_int_equal(r.kind, EGRESS_RULE_RANGE);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "10.0.0.0/8");
        assert_int_equal(egress_rule_parse("192.0.2.7:8443", false, &r), 0);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "192.0.2.7/32:8443");
        assert_int_equal(egress_rule_parse("fd00::/8", false, &r), 0);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "fd00::/8");
        assert_int_equal(egress_rule_parse("[fd00::/8]:8443", false, &r), 0);
        assert_int_equal(egress_rule_format(&r, false, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "[fd00::/8]:8443");

        static const char * const bad[] = {
                "", "*", "*.", "a.*.com", "x.com:0", "x.com:65536", "x.com:", "x.com:1:2", "10.0.0.0/33",
                "10.0.0.0/", "[fd00::/8", "[10.0.0.0/8]:443", "exa mple.com", "x.com/8", "http://x.com",
                "999.1.1.1", "example.123", "*.0x7f",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(egress_rule_parse(bad[i], false, &r), -EINVAL);
}

static void test_match(void **state) {
        char *allow[] = { (char *) "example.com", (char *) "*.pypi.org", (char *) "api.example.com:8443",
                          (char *) "10.5.0.0/16", (char *) "denied.example", NULL };
        char *deny[] = { (char *) "denied.example", (char *) "*.bad.pypi.org", (char *) "10.5.9.0/24", NULL };
        const char *bad = NULL;
        EgressPolicy p;

        assert_int_equal(egress_policy_parse(allow, deny, &p, &bad), 0);

        assert_null(egress_check_name(&p, "example.com", 443));
        assert_non_null(egress_check_name(&p, "www.example.com", 443));   /* no wildcard */
        assert_non_null(egress_check_name(&p, "example.com", 22));
        assert_string_equal(egress_check_name(&p, "example.com", 22), "port not allowed by EgressAllow=");
        assert_null(egress_check_name(&p, "api.example.com", 8443));
        assert_non_null(egress_check_name(&p, "api.example.com", 443));
        /* *.x: subdomains, not the apex, not a name that only ends the same. */
        assert_null(egress_check_name(&p, "files.pypi.org", 443));
        assert_null(egress_check_name(&p, "a.b.pypi.org", 443));
        assert_non_null(egress_check_name(&p, "pypi.org", 443));
        assert_non_null(egress_check_name(&p, "evilpypi.org", 443));
        /* deny wins, for the name and below a denied suffix. */
        assert_string_equal(egress_check_name(&p, "denied.example", 443), "denied by EgressDeny=");
        assert_string_equal(egress_check_name(&p, "x.bad.pypi.org", 443), "denied by EgressDeny=");
        assert_string_equal(egress_check_name(&p, "other.org", 443), "host not in EgressAllow=");
        /* A denied name covers every name under it, even under an allowed wildcard. */
        {
                char *wa[] = { (char *) "*.example.org", NULL };
                char *wd[] = { (char *) "internal.example.org", NULL };
                EgressPolicy w;

                assert_int_equal(egress_policy_parse(wa, wd, &w, &bad), 0);
                assert_null(egress_check_name(&w, "www.example.org", 443));
                assert_string_equal(egress_check_name(&w, "internal.example.org", 443), "denied by EgressDeny=");
                assert_string_equal(egress_check_name(&w, "db.internal.example.org", 443), "denied by EgressDeny=");
                assert_string_equal(egress_check_name(&w, "a.b.internal.example.org", 443), "denied by EgressDeny=");
                assert_null(egress_check_name(&w, "notinternal.example.org", 443));
                egress_policy_done(&w);
        }

        EgressAddress a;
        assert_int_equal(egress_address_parse("10.5.1.1", &a), 0);
        assert_null(egress_check_address(&p, &a, 443, true));       /* literal in a range */
        assert_null(egress_check_address(&p, &a, 443, false));      /* private, but named */
        assert_non_null(egress_check_address(&p, &a, 22, false));   /* the range's port is 443 */
        assert_int_equal(egress_address_parse("10.5.9.1", &a), 0);
        assert_string_equal(egress_check_address(&p, &a, 443, false), "address denied by EgressDeny=");
        assert_int_equal(egress_address_parse("93.184.216.34", &a), 0);
        assert_null(egress_check_address(&p, &a, 443, false));      /* public, resolved */
        assert_non_null(egress_check_address(&p, &a, 443, true));   /* but not as a literal */
        assert_int_equal(egress_address_parse("127.0.0.1", &a), 0);
        assert_string_equal(egress_check_address(&p, &a, 443, false), "resolves to a loopback address");
        assert_int_equal(egress_address_parse("::ffff:169.254.169.254", &a), 0);
        assert_string_equal(egress_check_address(&p, &a, 443, false), "resolves to a cloud metadata address");
        assert_int_equal(egress_address_parse("::ffff:10.5.1.1", &a), 0);
        assert_null(egress_check_address(&p, &a, 443, false));      /* mapped: the v4 range holds */

        egress_policy_done(&p);

        char *broken[] = { (char *) "ok.com", (char *) "not ok", NULL };
        assert_int_equal(egress_policy_parse(broken, NULL, &p, &bad), -EINVAL);
        assert_string_equal(bad, "not ok");
}

static void test_classes(void **state) {
        static const struct {
                const char *address;
                const char *kind;
        } cases[] = {
                { "8.8.8.8", NULL },
                { "2606:4700::1111", NULL },
                { "127.0.0.1", "loopback" },
                { "127.255.0.9", "loopback" },
                { "::1", "loopback" },
                { "10.0.0.1", "private" },
                { "172.16.0.1", "private" },
                { "172.31.255.255", "private" },
                { "172.32.0.1", NULL },
                { "192.168.1.1", "private" },
                { "100.64.0.1", "CGNAT" },
                { "100.127.255.255", "CGNAT" },
                { "100.128.0.1", NULL },
                { "169.254.1.1", "link-local" },
                { "169.254.169.254", "cloud metadata" },
                { "fd00:ec2::254", "cloud metadata" },
                { "fe80::1", "link-local" },
                { "fc00::1", "unique-local" },
                { "0.0.0.0", "unspecified" },
                { "::", "unspecified" },
                { "224.0.0.1", "multicast" },
                { "255.255.255.255", "reserved" },
                { "::ffff:127.0.0.1", "loopback" },
                { "::ffff:8.8.8.8", NULL },
                { "64:ff9b::7f00:1", "NAT64" },
                { "64:ff9b:1::a00:1", "NAT64" },        /* local-use NAT64 */
                { "64:ff9b:2::1", NULL },
                { "2001:0:4136:e378::1", "Teredo" },
                { "2001:1::1", NULL },
                { "2001:db8::1", "documentation" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                EgressAddress a;
                const char *k;

                assert_int_equal(egress_address_parse(cases[i].address, &a), 0);
                k = egress_address_class(&a);
                if (!cases[i].kind) {
                        if (k)
                                fail_msg("%s: %s, expected public", cases[i].address, k);
                } else if (!k || strcmp(k, cases[i].kind) != 0)
                        fail_msg("%s: %s, expected %s", cases[i].address, k ?: "public", cases[i].kind);
        }
}

static void test_target(void **state) {
        char host[EGRESS_HOST_MAX + 1];
        EgressAddress a;
        uint16_t port;
        bool literal;

        assert_int_equal(egress_target_parse("Example.com:443", host, &port, &literal, &a), 0);
        assert_string_equal(host, "example.com");
        assert_int_equal(port, 443);
        assert_false(literal);
        assert_int_equal(egress_target_parse("10.0.0.1:8443", host, &port, &literal, &a), 0);
        assert_true(literal);
        assert_int_equal(port, 8443);
        assert_int_equal(egress_target_parse("[::1]:443", host, &port, &literal, &a), 0);
        assert_true(literal);
        assert_string_equal(host, "::1");
        assert_int_equal(egress_target_parse("example.com", host, &port, &literal, &a), -EINVAL);
        assert_int_equal(egress_target_parse("example.com:0", host, &port, &literal, &a), -EINVAL);
        assert_int_equal(egress_target_parse("::1:443", host, &port, &literal, &a), -EINVAL);
        assert_int_equal(egress_target_parse("2130706433:443", host, &port, &literal, &a), -EINVAL);
        assert_int_equal(egress_target_parse("0x7f.1:443", host, &port, &literal, &a), -EINVAL);
        assert_int_equal(egress_target_parse("a b:443", host, &port, &literal, &a), -EINVAL);
}

/* ---- ClientHello ---- */

typedef struct Buf {
        uint8_t d[EGRESS_HELLO_MAX + 64];
        size_t n;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
        memcpy(b->d + b->n, p, n);
        b->n += n;
}
static void put8(Buf *b, unsigned v) {
        b->d[b->n++] = (uint8_t) v;
}
static void put16(Buf *b, unsigned v) {
        put8(b, v >> 8);
        put8(b, v & 0xff);
}
static void put24(Buf *b, size_t v) {
        put8(b, (unsigned) (v >> 16));
        put16(b, (unsigned) (v & 0xffff));
}

/* A ClientHello as a TLS 1.3 client sends it, with the given server names (n_names 0: no
 * server_name extension) and an extra extension before it. */
static void make_hello(Buf *out, const char * const *names, size_t n_names) {
        Buf ext = {}, body = {};
        uint8_t random[32] = { 1 };

        /* supported_versions: TLS 1.3 */
        put16(&ext, 43);
        put16(&ext, 3);
        put8(&ext, 2);
        put16(&ext, 0x0304);
        if (n_names > 0) {
                size_t list = 0;
                for (size_t i = 0; i < n_names; i++)
                        list += 3 + strlen(names[i]);
                put16(&ext, 0);
                put16(&ext, (unsigned) list + 2);
                put16(&ext, (unsigned) list);
                for (size_t i = 0; i < n_names; i++) {
                        put8(&ext, 0);
                        put16(&ext, (unsigned) strlen(names[i]));
                        put(&ext, names[i], strlen(names[i]));
                }
        }

        put16(&body, 0x0303);
        put(&body, random, 32);
        put8(&body, 0);            /* session id */
        put16(&body, 2);
        put16(&body, 0x1301);      /* TLS_AES_128_GCM_SHA256 */
        put8(&body, 1);
        put8(&body, 0);            /* null compression */
        put16(&body, (unsigned) ext.n);
        put(&body, ext.d, ext.n);

        *out = (Buf) {};
        put8(out, 22);
        put16(out, 0x0301);
        put16(out, (unsigned) body.n + 4);
        put8(out, 1);
        put24(out, body.n);
        put(out, body.d, body.n);
}

static void test_sni(void **state) {
        char sni[EGRESS_HOST_MAX + 1];
        Buf b;

        make_hello(&b, (const char *[]) { "Files.PythonHosted.org" }, 1);
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), 1);
        assert_string_equal(sni, "files.pythonhosted.org");

        /* Every truncation: "read more", never a name, never a crash. */
        for (size_t n = 0; n < b.n; n++)
                assert_int_equal(egress_client_hello_sni(b.d, n, sni), 0);

        /* No server name. */
        make_hello(&b, NULL, 0);
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -ENOENT);

        /* Two names: which would the server take? Refused. */
        make_hello(&b, (const char *[]) { "a.example", "b.example" }, 2);
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);

        /* A name with bytes no host name has. */
        make_hello(&b, (const char *[]) { "a\001b.example" }, 1);
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);

        /* Not TLS at all: refused at the first byte. */
        assert_int_equal(egress_client_hello_sni((const uint8_t *) "GET / HTTP/1.1\r\n", 16, sni), -EBADMSG);
        /* Not a handshake record, or not a ClientHello. */
        make_hello(&b, (const char *[]) { "a.example" }, 1);
        b.d[0] = 23;
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);
        make_hello(&b, (const char *[]) { "a.example" }, 1);
        b.d[5] = 2;
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);
        /* A handshake longer than its record (split over records): refused. */
        make_hello(&b, (const char *[]) { "a.example" }, 1);
        b.d[8]++;
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);
        /* A record length beyond what TLS allows. */
        make_hello(&b, (const char *[]) { "a.example" }, 1);
        b.d[3] = 0xff;
        assert_int_equal(egress_client_hello_sni(b.d, b.n, sni), -EBADMSG);
        /* An extension length that runs past the end. */
        make_hello(&b, (const char *[]) { "a.example" }, 1);
        b.d[b.n - 14 - 2] = 0x7f;   /* the server_name extension's length byte */
        assert_true(egress_client_hello_sni(b.d, b.n, sni) < 0);

        /* Random bytes behind a plausible header: never a name, never a crash. */
        uint32_t x = 12345;
        for (unsigned round = 0; round < 2000; round++) {
                make_hello(&b, (const char *[]) { "a.example" }, 1);
                for (unsigned k = 0; k < 4; k++) {
                        x = x * 1103515245 + 12345;
                        b.d[5 + (x >> 8) % (b.n - 5)] = (uint8_t) (x >> 16);
                }
                int r = egress_client_hello_sni(b.d, b.n, sni);
                assert_true(r == 1 || r == 0 || r == -EBADMSG || r == -ENOENT);
                if (r == 1)
                        assert_true(strlen(sni) > 0 && strlen(sni) <= EGRESS_HOST_MAX);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalize),
                cmocka_unit_test(test_rules),
                cmocka_unit_test(test_match),
                cmocka_unit_test(test_classes),
                cmocka_unit_test(test_target),
                cmocka_unit_test(test_sni),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
