/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idn2.h>

#include "egress-policy.h"
#include "macro.h"

static bool host_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

static int host_check_ascii(const char *s) {
        size_t n = strlen(s), label = 0;

        if (n == 0 || n > EGRESS_HOST_MAX)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (!host_char_ok(*p))
                        return -EINVAL;
                if (*p == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                } else if (++label > 63)
                        return -EINVAL;
        }
        return label == 0 ? -EINVAL : 0;
}

int egress_host_normalize(const char *in, char out[static EGRESS_HOST_MAX + 1]) {
        char buf[EGRESS_HOST_MAX + 2];
        bool ascii = true;
        size_t n;

        if (!in)
                return -EINVAL;
        n = strnlen(in, EGRESS_HOST_MAX + 2);
        /* One final dot is the root, not part of the name. */
        if (n > 0 && in[n - 1] == '.')
                n--;
        if (n == 0 || n > EGRESS_HOST_MAX)
                return -EINVAL;
        memcpy(buf, in, n);
        buf[n] = 0;

        for (size_t i = 0; i < n; i++) {
                if ((unsigned char) buf[i] >= 0x80)
                        ascii = false;
                else if (buf[i] >= 'A' && buf[i] <= 'Z')
                        buf[i] = (char) (buf[i] - 'A' + 'a');
        }

        if (!ascii) {
                char *alabel = NULL;
                int r;

                /* UTS#46 non-transitional mapping (lowercases, NFC), as browsers do. */
                r = idn2_to_ascii_8z(buf, &alabel, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
                if (r != IDN2_OK)
                        return -EINVAL;
                if (strlen(alabel) > EGRESS_HOST_MAX) {
                        idn2_free(alabel);
                        return -EINVAL;
                }
                strcpy(buf, alabel);
                idn2_free(alabel);
        } else if (strstr(buf, "xn--")) {
                /* An A-label given as such must be a valid one (no smuggled forms). */
                char *ulabel = NULL;

                if (idn2_to_unicode_8z8z(buf, &ulabel, 0) != IDN2_OK)
                        return -EINVAL;
                idn2_free(ulabel);
        }

        if (host_check_ascii(buf) < 0)
                return -EINVAL;
        strcpy(out, buf);
        return 0;
}

/* A name whose last label is a number (or hex, as inet_aton() reads "0x7f") is an address
 * to a URL parser (WHATWG) and to libc: never a host name here. */
static bool name_is_numeric(const char *s) {
        const char *last = strrchr(s, '.');

        last = last ? last + 1 : s;
        return strspn(last, "0123456789") == strlen(last) || startswith_str(last, "0x");
}

int egress_address_parse(const char *s, EgressAddress *ret) {
        EgressAddress a = {};

        if (inet_pton(AF_INET, s, a.bytes) == 1)
                a.family = AF_INET;
        else if (inet_pton(AF_INET6, s, a.bytes) == 1)
                a.family = AF_INET6;
        else
                return -EINVAL;
        *ret = a;
        return 0;
}

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

void egress_address_from_sockaddr(const struct sockaddr *sa, EgressAddress *ret) {
        *ret = (EgressAddress) {};
        if (sa->sa_family == AF_INET) {
                ret->family = AF_INET;
                memcpy(ret->bytes, &((const struct sockaddr_in *) sa)->sin_addr, 4);
        } else if (sa->sa_family == AF_INET6) {
                const uint8_t *b = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;

                if (memcmp(b, v4_mapped_prefix, 12) == 0) {
                        ret->family = AF_INET;
                        memcpy(ret->bytes, b + 12, 4);
                } else {
                        ret->family = AF_INET6;
                        memcpy(ret->bytes, b, 16);
                }
        }
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned bits) {
        unsigned whole = bits / 8, rest = bits % 8;

        if (memcmp(a, net, whole) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xff << (8 - rest));
        return (a[whole] & mask) == (net[whole] & mask);
}

typedef struct AddressClass {
        int family;
        uint8_t net[16];
        unsigned bits;
        const char *name;
} AddressClass;

/* More specific first: the first match names the kind. */
static const AddressClass address_classes[] = {
        { AF_INET,  { 169, 254, 169, 254 }, 32, "cloud metadata" },
        { AF_INET,  { 100, 100, 100, 200 }, 32, "cloud metadata" },   /* Alibaba */
        { AF_INET,  { 0 },                   8, "unspecified" },
        { AF_INET,  { 10 },                  8, "private" },
        { AF_INET,  { 100, 64 },            10, "CGNAT" },
        { AF_INET,  { 127 },                 8, "loopback" },
        { AF_INET,  { 169, 254 },           16, "link-local" },
        { AF_INET,  { 172, 16 },            12, "private" },
        { AF_INET,  { 192, 0, 0 },          24, "reserved" },
        { AF_INET,  { 192, 0, 2 },          24, "documentation" },
        { AF_INET,  { 192, 88, 99 },        24, "reserved" },
        { AF_INET,  { 192, 168 },           16, "private" },
        { AF_INET,  { 198, 18 },            15, "benchmarking" },
        { AF_INET,  { 198, 51, 100 },       24, "documentation" },
        { AF_INET,  { 203, 0, 113 },        24, "documentation" },
        { AF_INET,  { 224 },                 4, "multicast" },
        { AF_INET,  { 240 },                 4, "reserved" },           /* and broadcast */
        { AF_INET6, { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 }, 128, "cloud metadata" }, /* fd00:ec2::254 */
        { AF_INET6, { 0 },                 128, "unspecified" },
        { AF_INET6, { [15] = 1 },          128, "loopback" },
        { AF_INET6, { 0x00, 0x64, 0xff, 0x9b }, 96, "NAT64" },
        { AF_INET6, { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "NAT64" },  /* local-use, RFC 8215 */
        { AF_INET6, { 0x01, 0x00 },         64, "discard" },
        { AF_INET6, { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation" },
        { AF_INET6, { 0x20, 0x01, 0x00, 0x00 }, 32, "Teredo" },           /* RFC 4380: an IPv4 inside */
        { AF_INET6, { 0x20, 0x02 },         16, "6to4" },
        { AF_INET6, { 0xfc },                7, "unique-local" },
        { AF_INET6, { 0xfe, 0x80 },         10, "link-local" },
        { AF_INET6, { 0xfe, 0xc0 },         10, "site-local" },
        { AF_INET6, { 0xff },                8, "multicast" },
        { AF_INET6, { 0 },                  96, "IPv4-compatible" },
};

const char *egress_address_class(const EgressAddress *a) {
        if (a->family == AF_INET6 && memcmp(a->bytes, v4_mapped_prefix, 12) == 0) {
                /* What the kernel would connect to: the IPv4 address inside. */
                EgressAddress v4 = { .family = AF_INET };
                memcpy(v4.bytes, a->bytes + 12, 4);
                return egress_address_class(&v4);
        }
        for (size_t i = 0; i < ELEMENTSOF(address_classes); i++) {
                const AddressClass *c = address_classes + i;

                if (c->family != a->family)
                        continue;
                if (prefix_match(a->bytes, c->net, c->bits))
                        return c->name;
        }
        return NULL;
}

static int parse_port(const char *s, uint16_t *ret) {
        char *end;
        unsigned long v;

        if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
                return -EINVAL;
        v = strtoul(s, &end, 10);
        if (*end || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

/* ADDR[/LEN] into the rule. */
static int parse_range(const char *s, EgressRule *r) {
        char buf[INET6_ADDRSTRLEN + 8];
        const char *slash;
        unsigned max;

        if (strlen(s) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, s);
        slash = strchr(s, '/');
        if (slash)
                buf[slash - s] = 0;
        if (egress_address_parse(buf, &r->address) < 0)
                return -EINVAL;
        max = r->address.family == AF_INET ? 32 : 128;
        r->prefix = max;
        if (slash) {
                const char *p = slash + 1;
                char *end;
                unsigned long v;

                if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 3)
                        return -EINVAL;
                v = strtoul(p, &end, 10);
                if (v > max)
                        return -EINVAL;
                r->prefix = (unsigned) v;
        }
        /* Canonical: the bits beyond the prefix cleared. */
        for (unsigned bit = r->prefix; bit < max; bit++)
                r->address.bytes[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
        r->kind = EGRESS_RULE_RANGE;
        return 0;
}

int egress_rule_parse(const char *s, bool deny, EgressRule *ret) {
        char buf[EGRESS_RULE_MAX + 1], *host, *port = NULL;
        EgressRule r = {};

        if (!s || strnlen(s, EGRESS_RULE_MAX + 1) > EGRESS_RULE_MAX || !*s)
                return -EINVAL;
        strcpy(buf, s);
        host = buf;

        if (host[0] == '[') {
                /* [v6[/len]][:port] */
                char *close = strchr(host, ']');
                if (!close)
                        return -EINVAL;
                *close = 0;
                host++;
                if (close[1] == ':')
                        port = close + 2;
                else if (close[1] != 0)
                        return -EINVAL;
                if (parse_range(host, &r) < 0 || r.address.family != AF_INET6)
                        return -EINVAL;
        } else {
                char *colon = strchr(host, ':');

                if (colon && strchr(colon + 1, ':')) {
                        /* More than one colon: a bare IPv6 range, no port. */
                        if (parse_range(host, &r) < 0)
                                return -EINVAL;
                } else {
                        if (colon) {
                                *colon = 0;
                                port = colon + 1;
                        }
                        if (parse_range(host, &r) < 0) {
                                const char *name = host;

                                if (strchr(host, '/'))
                                        return -EINVAL;
                                r = (EgressRule) { .kind = EGRESS_RULE_NAME };
                                if (startswith_str(host, "*.")) {
                                        r.kind = EGRESS_RULE_SUFFIX;
                                        name = host + 2;
                                }
                                if (egress_host_normalize(name, r.name) < 0)
                                        return -EINVAL;
                                /* "*.com" is fine by this; a name must not look like an address. */
                                if (name_is_numeric(r.name))
                                        return -EINVAL;
                        }
                }
        }

        if (port) {
                if (parse_port(port, &r.port) < 0)
                        return -EINVAL;
        } else
                r.port = deny ? 0 : EGRESS_DEFAULT_PORT;

        *ret = r;
        return 0;
}

int egress_rule_format(const EgressRule *r, bool deny, char *buf, size_t size) {
        char addr[INET6_ADDRSTRLEN], port[8] = "";
        bool show_port = deny ? r->port != 0 : r->port != EGRESS_DEFAULT_PORT;
        int k;

        if (show_port)
                snprintf(port, sizeof(port), ":%u", (unsigned) r->port);
        switch (r->kind) {
        case EGRESS_RULE_NAME:
                k = snprintf(buf, size, "%s%s", r->name, port);
                break;
        case EGRESS_RULE_SUFFIX:
                k = snprintf(buf, size, "*.%s%s", r->name, port);
                break;
        default:
                if (!inet_ntop(r->address.family, r->address.bytes, addr, sizeof(addr)))
                        return -EINVAL;
                if (r->address.family == AF_INET6 && show_port)
                        k = snprintf(buf, size, "[%s/%u]%s", addr, r->prefix, port);
                else
                        k = snprintf(buf, size, "%s/%u%s", addr, r->prefix, port);
        }
        return k < 0 || (size_t) k >= size ? -ENOBUFS : 0;
}

static int parse_list(char * const *l, bool deny, EgressRule **ret, size_t *ret_n, const char **ret_bad) {
        _cleanup_free_ EgressRule *rules = NULL;
        size_t n = 0;

        for (char * const *i = l; i && *i; i++)
                n++;
        if (n > EGRESS_RULES_MAX)
                return -E2BIG;
        rules = calloc(n ?: 1, sizeof(EgressRule));
        if (!rules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (egress_rule_parse(l[i], deny, rules + i) < 0) {
                        if (ret_bad)
                                *ret_bad = l[i];
                        return -EINVAL;
                }
        *ret = TAKE_PTR(rules);
        *ret_n = n;
        return 0;
}

int egress_policy_parse(char * const *allow, char * const *deny, EgressPolicy *ret, const char **ret_bad) {
        EgressPolicy p = {};
        int r;

        r = parse_list(allow, false, &p.allow, &p.n_allow, ret_bad);
        if (r < 0)
                return r;
        r = parse_list(deny, true, &p.deny, &p.n_deny, ret_bad);
        if (r < 0) {
                egress_policy_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void egress_policy_done(EgressPolicy *p) {
        p->allow = mfree(p->allow);
        p->deny = mfree(p->deny);
        p->n_allow = p->n_deny = 0;
}

int egress_target_parse(const char *authority, char host[static EGRESS_HOST_MAX + 1], uint16_t *ret_port,
                        bool *ret_is_address, EgressAddress *ret_address) {
        char buf[EGRESS_HOST_MAX + 16];
        const char *colon;
        EgressAddress a;
        size_t n;

        if (!authority || strnlen(authority, sizeof(buf)) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, authority);

        if (buf[0] == '[') {
                char *close = strchr(buf, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                *close = 0;
                if (parse_port(close + 2, ret_port) < 0 || egress_address_parse(buf + 1, &a) < 0 ||
                    a.family != AF_INET6)
                        return -EINVAL;
                strcpy(host, buf + 1);
                *ret_is_address = true;
                *ret_address = a;
                return 0;
        }

        /* CONNECT always names a port (RFC 9110, 9.3.6). */
        colon = strrchr(buf, ':');
        if (!colon || strchr(buf, ':') != colon)
                return -EINVAL;
        n = (size_t) (colon - buf);
        buf[n] = 0;
        if (parse_port(buf + n + 1, ret_port) < 0)
                return -EINVAL;
        if (egress_address_parse(buf, &a) >= 0) {
                strcpy(host, buf);
                *ret_is_address = true;
                *ret_address = a;
                return 0;
        }
        if (egress_host_normalize(buf, host) < 0)
                return -EINVAL;
        /* "010.1" and friends that inet_aton() would read as addresses: not names either. */
        if (name_is_numeric(host) || startswith_str(host, "0x"))
                return -EINVAL;
        *ret_is_address = false;
        return 0;
}

static bool port_matches(const EgressRule *r, uint16_t port) {
        return r->port == 0 || r->port == port;
}

static bool name_matches(const EgressRule *r, const char *host) {
        size_t n, m;

        if (r->kind == EGRESS_RULE_NAME)
                return streq(r->name, host);
        if (r->kind != EGRESS_RULE_SUFFIX)
                return false;
        /* A strict subdomain: "x.example.com" for "*.example.com", not "example.com", not
         * "badexample.com". */
        n = strlen(host);
        m = strlen(r->name);
        return n > m + 1 && host[n - m - 1] == '.' && streq(host + n - m, r->name);
}

static bool range_matches(const EgressRule *r, const EgressAddress *a) {
        return r->kind == EGRESS_RULE_RANGE && r->address.family == a->family &&
               prefix_match(a->bytes, r->address.bytes, r->prefix);
}

/* A deny rule covers its name and every name under it ("secret.example.com" denies
 * "a.secret.example.com" too, even where "*.example.com" is allowed). */
static bool deny_matches(const EgressRule *r, const char *host) {
        size_t n, m;

        if (name_matches(r, host))
                return true;
        if (r->kind != EGRESS_RULE_NAME)
                return false;
        n = strlen(host);
        m = strlen(r->name);
        return n > m + 1 && host[n - m - 1] == '.' && streq(host + n - m, r->name);
}

const char *egress_check_name(const EgressPolicy *p, const char *host, uint16_t port) {
        bool listed = false;

        for (size_t i = 0; i < p->n_deny; i++)
                if (deny_matches(p->deny + i, host) && port_matches(p->deny + i, port))
                        return "denied by EgressDeny=";
        for (size_t i = 0; i < p->n_allow; i++)
                if (name_matches(p->allow + i, host)) {
                        if (port_matches(p->allow + i, port))
                                return NULL;
                        listed = true;
                }
        return listed ? "port not allowed by EgressAllow=" : "host not in EgressAllow=";
}

static EgressAddress address_unmapped(const EgressAddress *a) {
        EgressAddress u = *a;

        if (a->family == AF_INET6 && memcmp(a->bytes, v4_mapped_prefix, 12) == 0) {
                u = (EgressAddress) { .family = AF_INET };
                memcpy(u.bytes, a->bytes + 12, 4);
        }
        return u;
}

const char *egress_check_address(const EgressPolicy *p, const EgressAddress *address, uint16_t port, bool literal) {
        EgressAddress a = address_unmapped(address);
        bool in_range = false;
        const char *kind;

        for (size_t i = 0; i < p->n_deny; i++)
                if (range_matches(p->deny + i, &a) && port_matches(p->deny + i, port))
                        return "address denied by EgressDeny=";
        for (size_t i = 0; i < p->n_allow; i++)
                if (range_matches(p->allow + i, &a) && port_matches(p->allow + i, port)) {
                        in_range = true;
                        break;
                }
        if (in_range)
                return NULL;
        if (literal)
                return "IP address not in an address range of EgressAllow=";
        kind = egress_address_class(&a);
        if (!kind)
                return NULL;
        if (streq(kind, "loopback"))
                return "resolves to a loopback address";
        if (streq(kind, "cloud metadata"))
                return "resolves to a cloud metadata address";
        if (streq(kind, "private") || streq(kind, "unique-local"))
                return "resolves to a private address";
        if (streq(kind, "link-local"))
                return "resolves to a link-local address";
        if (streq(kind, "CGNAT"))
                return "resolves to a CGNAT address";
        return "resolves to a special-purpose address";
}

/* ---- TLS ClientHello (RFC 8446, 4.1.2; RFC 6066, 3) ---- */

typedef struct Reader {
        const uint8_t *p;
        size_t n;
} Reader;

static bool rd_u8(Reader *r, unsigned *v) {
        if (r->n < 1)
                return false;
        *v = r->p[0];
        r->p++, r->n--;
        return true;
}

static bool rd_u16(Reader *r, unsigned *v) {
        if (r->n < 2)
                return false;
        *v = (unsigned) r->p[0] << 8 | r->p[1];
        r->p += 2, r->n -= 2;
        return true;
}

static bool rd_skip(Reader *r, size_t k) {
        if (r->n < k)
                return false;
        r->p += k, r->n -= k;
        return true;
}

/* A sub-reader of k bytes, which r then skips. */
static bool rd_sub(Reader *r, size_t k, Reader *sub) {
        if (r->n < k)
                return false;
        *sub = (Reader) { r->p, k };
        return rd_skip(r, k);
}

static int parse_server_name(Reader ext, char out[static EGRESS_HOST_MAX + 1]) {
        Reader list, name;
        unsigned len, type, nlen;

        if (!rd_u16(&ext, &len) || !rd_sub(&ext, len, &list) || ext.n != 0)
                return -EBADMSG;
        if (!rd_u8(&list, &type) || !rd_u16(&list, &nlen) || !rd_sub(&list, nlen, &name))
                return -EBADMSG;
        /* One host_name, nothing else: two names leave it open which the server takes. */
        if (type != 0 || list.n != 0 || nlen == 0 || nlen > EGRESS_HOST_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < nlen; i++) {
                char c = (char) name.p[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                if (!host_char_ok(c))
                        return -EBADMSG;
                out[i] = c;
        }
        out[nlen] = 0;
        if (out[nlen - 1] == '.')
                out[nlen - 1] = 0;   /* as egress_host_normalize() has it */
        return host_check_ascii(out) < 0 ? -EBADMSG : 1;
}

int egress_client_hello_sni(const uint8_t *buf, size_t n, char out[static EGRESS_HOST_MAX + 1]) {
        Reader rec, hs, body, exts;
        unsigned type, major, minor, len, hs_type, v;
        size_t hs_len;
        bool found = false;

        /* The record header: handshake, TLS 1.x, a length that fits a record. */
        if (n >= 1 && buf[0] != 22)
                return -EBADMSG;
        if (n >= 2 && buf[1] != 3)
                return -EBADMSG;
        if (n < 5)
                return 0;
        rec = (Reader) { buf, n };
        (void) rd_u8(&rec, &type);
        (void) rd_u8(&rec, &major);
        (void) rd_u8(&rec, &minor);
        (void) rd_u16(&rec, &len);
        if (minor > 4 || len < 4 || len > EGRESS_HELLO_MAX - 5)
                return -EBADMSG;
        if (n < 5 + (size_t) len)
                return 0;
        rec.n = len;

        /* The handshake header: a ClientHello, all of it in this record. */
        if (!rd_u8(&rec, &hs_type) || hs_type != 1)
                return -EBADMSG;
        if (rec.n < 3)
                return -EBADMSG;
        hs_len = (size_t) rec.p[0] << 16 | (size_t) rec.p[1] << 8 | rec.p[2];
        (void) rd_skip(&rec, 3);
        if (hs_len != rec.n)
                return -EBADMSG;
        hs = rec;

        /* legacy_version, random, session id, cipher suites, compression methods. */
        if (!rd_u16(&hs, &v) || (v >> 8) != 3 || !rd_skip(&hs, 32))
                return -EBADMSG;
        if (!rd_u8(&hs, &v) || v > 32 || !rd_skip(&hs, v))
                return -EBADMSG;
        if (!rd_u16(&hs, &v) || v < 2 || v % 2 != 0 || !rd_skip(&hs, v))
                return -EBADMSG;
        if (!rd_u8(&hs, &v) || v < 1 || !rd_skip(&hs, v))
                return -EBADMSG;
        if (hs.n == 0)
                return -ENOENT; /* no extensions at all (TLS 1.2 allows that) */
        if (!rd_u16(&hs, &v) || !rd_sub(&hs, v, &exts) || hs.n != 0)
                return -EBADMSG;

        while (exts.n > 0) {
                unsigned etype, elen;
                int r;

                if (!rd_u16(&exts, &etype) || !rd_u16(&exts, &elen) || !rd_sub(&exts, elen, &body))
                        return -EBADMSG;
                if (etype != 0)
                        continue;
                if (found)
                        return -EBADMSG; /* a second server_name */
                r = parse_server_name(body, out);
                if (r < 0)
                        return r;
                found = true;
        }
        return found ? 1 : -ENOENT;
}
