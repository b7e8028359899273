/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The egress policy of a sandbox (EgressAllow=, EgressDeny=; sandboxd-egress(8)) and the
 * pure checks sandboxd-egress makes with it: which CONNECT target is allowed, which
 * resolved address may be connected to, and what server name a TLS ClientHello carries.
 * sandboxd uses the parser to validate the options; sandboxd-egress everything.
 *
 * A rule is one of
 *   NAME[:PORT]          that host name exactly (IDNA: any Unicode name is taken in its
 *                        A-label form, lowercase; a final dot is dropped)
 *   *.NAME[:PORT]        every name below NAME, not NAME itself
 *   ADDR[/LEN][:PORT]    an IPv4 range; [ADDR[/LEN]][:PORT] or ADDR/LEN for IPv6
 * An allow rule without a port means 443; a deny rule without a port means every port.
 * Address ranges allow IP literals in CONNECT and resolved addresses of the special kinds
 * (loopback, private, link-local, CGNAT, metadata, ...), which are refused otherwise.
 */

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_RULES_MAX 256U
#define EGRESS_RULE_MAX 300U          /* bytes of one rule as text */
#define EGRESS_HOST_MAX 253U          /* a DNS name in its A-label form */
#define EGRESS_PROXY_PORT 3128        /* where the agent listens, on 127.0.0.1 */
#define EGRESS_DEFAULT_PORT 443
/* A ClientHello's record: header and the largest TLS plaintext record. */
#define EGRESS_HELLO_MAX (5U + 16384U)

typedef enum EgressRuleKind {
        EGRESS_RULE_NAME,
        EGRESS_RULE_SUFFIX,     /* "*.NAME" */
        EGRESS_RULE_RANGE,      /* an address range */
} EgressRuleKind;

typedef struct EgressAddress {
        int family;             /* AF_INET, AF_INET6 */
        uint8_t bytes[16];      /* 4 used for AF_INET */
} EgressAddress;

typedef struct EgressRule {
        EgressRuleKind kind;
        char name[EGRESS_HOST_MAX + 1];  /* NAME, SUFFIX: A-label, lowercase */
        EgressAddress address;           /* RANGE */
        unsigned prefix;                 /* RANGE: bits */
        uint16_t port;                   /* 0: any */
} EgressRule;

typedef struct EgressPolicy {
        EgressRule *allow;
        size_t n_allow;
        EgressRule *deny;
        size_t n_deny;
} EgressPolicy;

/* A host name as the policy compares it: IDNA 2008 (UTS#46) to its A-label form,
 * lowercase, without a final dot, letters digits '-' '_' and dots only, 1..253 bytes,
 * labels 1..63. 0, or -EINVAL. out has EGRESS_HOST_MAX + 1 bytes. */
int egress_host_normalize(const char *in, char out[static EGRESS_HOST_MAX + 1]);

/* Parses an address ("10.0.0.1", "fd00::1"; no brackets) into *ret: 0 or -EINVAL. */
int egress_address_parse(const char *s, EgressAddress *ret);
/* The address of a sockaddr (v4-mapped v6 addresses as v4). */
void egress_address_from_sockaddr(const struct sockaddr *sa, EgressAddress *ret);
/* The kind of an address that is not on the public internet ("loopback", "private",
 * "link-local", "cloud metadata", "CGNAT", "multicast", "unspecified", "reserved",
 * "unique-local", ...), or NULL for a public address. */
const char *egress_address_class(const EgressAddress *a);

/* One rule; deny: a rule without a port applies to every port. 0 or -EINVAL. */
int egress_rule_parse(const char *s, bool deny, EgressRule *ret);
/* The rule in its canonical text form (what egress_rule_parse() takes back). */
int egress_rule_format(const EgressRule *r, bool deny, char *buf, size_t size);

/* Both lists (either may be NULL). -EINVAL names the first bad rule in *ret_bad (points
 * into the lists), -E2BIG: more than EGRESS_RULES_MAX rules in a list. */
int egress_policy_parse(char * const *allow, char * const *deny, EgressPolicy *ret, const char **ret_bad);
void egress_policy_done(EgressPolicy *p);

/* A CONNECT's authority ("host:port", "[v6]:port"): the normalized host (an address
 * literal without brackets) and its port. *ret_is_address says whether it is a literal
 * (then *ret_address is set). 0 or -EINVAL. */
int egress_target_parse(const char *authority, char host[static EGRESS_HOST_MAX + 1], uint16_t *ret_port,
                        bool *ret_is_address, EgressAddress *ret_address);

/* Whether a CONNECT to host:port may go on to be resolved: NULL if so, else why not (a
 * static string, for the journal and the 403). */
const char *egress_check_name(const EgressPolicy *p, const char *host, uint16_t port);
/* Whether address (resolved for, or given as, the target) may be connected to on port:
 * NULL, or why not. literal: the CONNECT named the address itself, which only an address
 * range of EgressAllow= permits. */
const char *egress_check_address(const EgressPolicy *p, const EgressAddress *a, uint16_t port, bool literal);

/* The server name of a TLS ClientHello at the start of buf (n bytes so far): 1 and the
 * name (lowercase) in out; 0: not complete yet, read more (never beyond
 * EGRESS_HELLO_MAX); -EBADMSG: not a ClientHello, or one this proxy does not take (split
 * over records, malformed, more than one name); -ENOENT: a well-formed ClientHello
 * without a server name. */
int egress_client_hello_sni(const uint8_t *buf, size_t n, char out[static EGRESS_HOST_MAX + 1]);
