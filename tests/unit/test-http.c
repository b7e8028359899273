/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "http-e2b.h"
#include "http.h"
#include "json-util.h"

/* E2B's front: Connect's envelopes and codes, /home/user onto /work (docs/E2B.md) */
static void test_e2b_connect(void **state) {
        _cleanup_json_ json_object *m = json_tokener_parse("{\"path\": \"/a\"}"), *back = NULL;
        _cleanup_json_ json_object *eexist = json_tokener_parse("{\"errno\": 17}");
        _cleanup_free_ char *b = NULL;
        const char *error = NULL;
        size_t n;

        assert_int_equal(http_connect_envelope(0, m, &b, &n), 0);
        assert_int_equal(n, 5 + strlen("{\"path\":\"/a\"}"));
        assert_memory_equal(b, "\0\0\0\0\x0d{\"path\":\"/a\"}", n);
        assert_int_equal(http_connect_unwrap(b, n, &back, &error), 0);
        assert_string_equal(json_object_get_string(json_object_object_get(back, "path")), "/a");
        /* a length that is not the message's, an end-of-stream frame, a short header */
        b[4] = 0x0c;
        assert_int_equal(http_connect_unwrap(b, n, &back, &error), -EBADMSG);
        b[4] = 0x0d;
        b[0] = CONNECT_FLAG_END;
        assert_int_equal(http_connect_unwrap(b, n, &back, &error), -EBADMSG);
        assert_int_equal(http_connect_unwrap(b, 4, &back, &error), -EBADMSG);
        assert_non_null(error);

        assert_null(http_connect_code(NULL, NULL));
        assert_string_equal(http_connect_code("io.sandboxd.Sandbox.NoSuchSandbox", NULL), "unavailable");
        assert_string_equal(http_connect_code("io.sandboxd.Sandbox.NoSuchProcess", NULL), "not_found");
        assert_string_equal(http_connect_code("io.sandboxd.Sandbox.SystemError", eexist), "already_exists");
        assert_string_equal(http_connect_code("io.sandboxd.Sandbox.QuotaExceeded", NULL), "resource_exhausted");
        assert_string_equal(http_connect_code(VARLINK_ERROR_DISCONNECTED, NULL), "unavailable");
        assert_int_equal(http_connect_status("not_found"), 404);
        assert_int_equal(http_connect_status("resource_exhausted"), 429);
        assert_int_equal(http_connect_status("unauthenticated"), 401);
        assert_int_equal(http_connect_status("what"), 500);
}

static void test_e2b_paths(void **state) {
        static const char *const in[][2] = {
                { "/home/user", "/work" }, { "/home/user/", "/work/" }, { "/home/user/a/b", "/work/a/b" },
                { "~", "/work" }, { "~/x", "/work/x" }, { "", "/work" }, { "rel/x", "rel/x" },
                { "/home/username", "/home/username" }, { "/tmp/x", "/tmp/x" },
        };
        static const char *const out[][2] = {
                { "/work", "/home/user" }, { "/work/a", "/home/user/a" }, { "/workshop", "/workshop" },
                { "x/y", "/home/user/x/y" }, { "/tmp", "/tmp" },
        };

        for (size_t i = 0; i < ELEMENTSOF(in); i++) {
                _cleanup_free_ char *p = NULL;
                assert_int_equal(http_e2b_path_in(in[i][0], &p), 0);
                assert_string_equal(p, in[i][1]);
        }
        for (size_t i = 0; i < ELEMENTSOF(out); i++) {
                _cleanup_free_ char *p = NULL;
                assert_int_equal(http_e2b_path_out(out[i][0], &p), 0);
                assert_string_equal(p, out[i][1]);
        }
}

static void test_e2b_watch(void **state) {
        assert_string_equal(http_e2b_watch_type("create"), "EVENT_TYPE_CREATE");
        assert_string_equal(http_e2b_watch_type("modify"), "EVENT_TYPE_WRITE");
        assert_string_equal(http_e2b_watch_type("delete"), "EVENT_TYPE_REMOVE");
        assert_string_equal(http_e2b_watch_type("move_from"), "EVENT_TYPE_RENAME");
        assert_string_equal(http_e2b_watch_type("move_to"), "EVENT_TYPE_CREATE");
        assert_null(http_e2b_watch_type("overflow"));
        assert_null(http_e2b_watch_type(NULL));

        assert_string_equal(http_e2b_watch_name("/work/d/x", "/work/d"), "x");
        assert_string_equal(http_e2b_watch_name("/work/d/sub/x", "/work/d//"), "sub/x");
        assert_string_equal(http_e2b_watch_name("/x", "/"), "x");
        assert_null(http_e2b_watch_name("/work/dd/x", "/work/d"));
        assert_null(http_e2b_watch_name("/work/d", "/work/d"));
        assert_null(http_e2b_watch_name("/other", "/work/d"));
}

static void test_status(void **state) {
        _cleanup_json_ json_object *enoent = json_tokener_parse("{\"errno\": 2}");
        _cleanup_json_ json_object *eexist = json_tokener_parse("{\"errno\": 17}");

        assert_int_equal(http_status_from_varlink_error(NULL, NULL), 200);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.NoSuchSandbox", NULL), 404);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.InvalidOption", NULL), 400);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.SandboxExists", NULL), 409);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.TooManySandboxes", NULL), 429);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.AccessDenied", NULL), 403);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.NoReply", NULL), 503);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.SystemError", enoent), 404);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.SystemError", eexist), 409);
        assert_int_equal(http_status_from_varlink_error("io.sandboxd.Sandbox.SomethingNew", NULL), 500);
        assert_int_equal(http_status_from_varlink_error(VARLINK_ERROR_DISCONNECTED, NULL), 503);
        assert_int_equal(http_status_from_varlink_error(VARLINK_ERROR_INVALID_PARAMETER, NULL), 400);
        assert_int_equal(http_status_from_varlink_error("org.example.Other", NULL), 502);
}

static void check_bad(const char *text, const char *want) {
        const char *error = NULL;
        json_object *o = http_json_parse(text, strlen(text), &error);

        assert_null(o);
        assert_non_null(error);
        if (want)
                assert_non_null(strstr(error, want));
}

static void test_json(void **state) {
        _cleanup_json_ json_object *o = NULL, *empty = NULL, *o2 = NULL;
        char deep[200];
        const char *error = NULL;

        o = http_json_parse("{\"a\": [1, 2]}\n", 14, &error);
        assert_non_null(o);
        empty = http_json_parse(" ", 1, &error);
        assert_int_equal(json_object_object_length(empty), 0);
        check_bad("{", "not JSON");
        check_bad("[1]", "not a JSON object");
        check_bad("{\"a\": 1, \"a\": 2}", "duplicate");
        check_bad("{\"x\": {\"b\": 1, \"c\": [], \"b\": 3}}", "duplicate");
        o2 = http_json_parse("{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}]}", 42, &error);
        assert_non_null(o2);
        check_bad("{\"a\": 1} x", "not JSON");
        check_bad("{\"a\": \"\xff\"}", "not JSON");
        memset(deep, '[', 100);
        memset(deep + 100, ']', 99);
        deep[0] = '{';
        strcpy(deep + 1, "\"a\":");
        memset(deep + 5, '[', 60);
        memset(deep + 65, ']', 60);
        strcpy(deep + 125, "}");
        check_bad(deep, "deeply");
        assert_null(http_json_parse("{\"a\":\0}", 7, &error));
}

static void test_tokens(void **state) {
        char dir[] = "/tmp/test-http-XXXXXX", path[256];
        HttpTokens tokens = {};
        const HttpToken *t;
        FILE *f;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/alice.conf", dir);
        f = fopen(path, "w");
        assert_non_null(f);
        /* sha256("sdh_secret") */
        fprintf(f, "[Token]\nTenant=team-a\nSHA256=%s\n",
                "0c5d2a8f3c0d6e0b1d3e4e2f5d6c7b8a9f0e1d2c3b4a59687766554433221100");
        fclose(f);
        snprintf(path, sizeof(path), "%s/bad.conf", dir);
        f = fopen(path, "w");
        fprintf(f, "[Token]\nTenant=../x\nSHA256=00\n");
        fclose(f);
        assert_int_equal(http_tokens_load(&tokens, dir, false), 0);
        assert_int_equal(tokens.n_tokens, 1);       /* bad.conf ignored */
        assert_string_equal(tokens.tokens[0].tenant, "team-a");
        assert_null(http_tokens_find(&tokens, "sdh_secret", 0));   /* not its hash */

        /* The real thing: hash what token add would have written. */
        uint8_t h[32];
        assert_int_equal(http_sha256("sdh_secret", 10, h), 0);
        memcpy(tokens.tokens[0].sha256, h, 32);
        t = http_tokens_find(&tokens, "sdh_secret", 1000);
        assert_non_null(t);
        assert_string_equal(t->name, "alice");
        assert_null(http_tokens_find(&tokens, "sdh_secreT", 1000));
        assert_null(http_tokens_find(&tokens, "", 1000));
        assert_null(http_tokens_find(&tokens, NULL, 1000));
        tokens.tokens[0].expires_at = 1000;
        assert_null(http_tokens_find(&tokens, "sdh_secret", 1000));
        assert_non_null(http_tokens_find(&tokens, "sdh_secret", 999));
        http_tokens_done(&tokens);

        /* As credentials: http-token.NAME and http-token_NAME[.conf] only. */
        static const char * const creds[] = { "http-token.carol", "http-token_dave.conf", "http-tokens", "http-token." };
        for (size_t i = 0; i < ELEMENTSOF(creds); i++) {
                char cred[4096];
                snprintf(cred, sizeof(cred), "%s/%s", dir, creds[i]);
                f = fopen(cred, "w");
                assert_non_null(f);
                fprintf(f, "[Token]\nTenant=team-c\nSHA256=%064d\n", 0);
                fclose(f);
        }
        assert_int_equal(http_tokens_load(&tokens, dir, true), 0);
        assert_int_equal(tokens.n_tokens, 2);
        assert_true((streq(tokens.tokens[0].name, "carol") && streq(tokens.tokens[1].name, "dave")) ||
                    (streq(tokens.tokens[0].name, "dave") && streq(tokens.tokens[1].name, "carol")));
        http_tokens_done(&tokens);
        for (size_t i = 0; i < ELEMENTSOF(creds); i++) {
                char cred[4096];
                snprintf(cred, sizeof(cred), "%s/%s", dir, creds[i]);
                unlink(cred);
        }

        unlink(path);
        snprintf(path, sizeof(path), "%s/alice.conf", dir);
        unlink(path);
        rmdir(dir);
}

static void test_sha256(void **state) {
        static const uint8_t abc[32] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
        };
        uint8_t h[32];

        assert_int_equal(http_sha256("abc", 3, h), 0);
        assert_memory_equal(h, abc, 32);
}

/* A peer's address as TrustedProxy= and ConnectionsPerIP= key it: an IPv4 client of a
 * dual-stack listener ([::]) is its IPv4 address, as a TrustedProxy= of it is written. */
static void test_address(void **state) {
        char buf[INET6_ADDRSTRLEN];
        struct sockaddr_in v4 = { .sin_family = AF_INET };
        struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };

        assert_int_equal(inet_pton(AF_INET, "10.0.0.5", &v4.sin_addr), 1);
        assert_string_equal(http_address_to_string((struct sockaddr *) &v4, buf), "10.0.0.5");
        assert_int_equal(inet_pton(AF_INET6, "::ffff:10.0.0.5", &v6.sin6_addr), 1);
        assert_string_equal(http_address_to_string((struct sockaddr *) &v6, buf), "10.0.0.5");
        assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr), 1);
        assert_string_equal(http_address_to_string((struct sockaddr *) &v6, buf), "2001:db8::1");
        assert_string_equal(http_address_to_string(NULL, buf), "unix");

        /* X-Forwarded-For entries: normalized like a peer, words refused. */
        assert_int_equal(http_address_normalize("10.0.0.5", buf), 0);
        assert_string_equal(buf, "10.0.0.5");
        assert_int_equal(http_address_normalize("::ffff:10.0.0.5", buf), 0);
        assert_string_equal(buf, "10.0.0.5");
        assert_int_equal(http_address_normalize("2001:DB8:0::1", buf), 0);
        assert_string_equal(buf, "2001:db8::1");
        assert_int_equal(http_address_normalize("client-7", buf), -EINVAL);
        assert_int_equal(http_address_normalize("10.0.0.5:443", buf), -EINVAL);
        assert_int_equal(http_address_normalize("", buf), -EINVAL);
}

/* The per-address limits' client: an IPv6 host has its /64 to rotate through, so its
 * connections count under the /64; an IPv4 address under itself. */
static void test_address_limit_key(void **state) {
        char buf[HTTP_ADDRESS_KEY_MAX], other[HTTP_ADDRESS_KEY_MAX];

        assert_string_equal(http_address_limit_key("10.0.0.5", buf), "10.0.0.5");
        assert_string_equal(http_address_limit_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", buf), "2001:db8:1:2::/64");
        assert_string_equal(http_address_limit_key("2001:db8:1:2::1", other), buf);
        assert_string_equal(http_address_limit_key("2001:db8:1:3::1", other), "2001:db8:1:3::/64");
        assert_string_equal(http_address_limit_key("::1", buf), "::/64");
        assert_string_equal(http_address_limit_key("unix", buf), "unix");
        assert_string_equal(http_address_limit_key("invalid", buf), "invalid");
        assert_string_equal(http_address_limit_key("fe80::1:2:3:4", buf), "fe80::/64");
}

/* HAProxy's agent check: the free share as a weight, drain, down. */
static void test_agent_answer(void **state) {
        char buf[64];

        assert_int_equal(http_agent_answer(false, true, 4, 1, buf, sizeof(buf)), 13);
        assert_string_equal(buf, "up ready 75%\n");
        assert_true(http_agent_answer(false, true, 4096, 0, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "up ready 100%\n");
        /* One more fits: never 0%, which is HAProxy's DRAIN. */
        assert_true(http_agent_answer(false, true, 1000, 999, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "up ready 1%\n");
        assert_true(http_agent_answer(false, true, 4, 4, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "up ready 0%\n");
        assert_true(http_agent_answer(false, true, 4, 9, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "up ready 0%\n");
        assert_true(http_agent_answer(true, true, 4, 1, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "drain\n");
        assert_true(http_agent_answer(false, false, 0, 0, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "down#sandboxd not answering\n");
        assert_int_equal(http_agent_answer(false, true, 4, 1, buf, 5), -ENOBUFS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status),
                cmocka_unit_test(test_e2b_connect),
                cmocka_unit_test(test_e2b_paths),
                cmocka_unit_test(test_e2b_watch),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_tokens),
                cmocka_unit_test(test_sha256),
                cmocka_unit_test(test_address),
                cmocka_unit_test(test_address_limit_key),
                cmocka_unit_test(test_agent_answer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
