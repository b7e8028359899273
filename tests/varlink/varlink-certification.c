/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * org.varlink.certification (https://varlink.org, varlink-go's cmd/varlink-go-certification)
 * on our varlink layer, both ends:
 *
 *   varlink-certification --varlink=unix:PATH            serve it (prints "ready" once listening)
 *   varlink-certification --client --varlink=unix:PATH   call Start, Test01 … Test11, End
 *
 * The client passes each reply on as the next call's parameters, as the interface says;
 * the server checks each call's parameters against what the previous reply held and
 * answers CertificationError {wants, got} when they differ. Test10 must be called with
 * "more" (the server streams ten replies, one per loop turn, from a timer), Test11 oneway;
 * End's all_ok says whether every test passed, in order, on that client id. The values are
 * varlink-go's, so our client can certify varlink-go's server and varlink-go's client ours.
 * Numbers compare by value (1 and 1.0 are equal) and a null field equals an absent one, as
 * a typed reader (Go's) sees them.
 */

#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include "json-util.h"
#include "varlink.h"

#define CERT_INTERFACE "org.varlink.certification"
#define CERT_CLIENTS_MAX 100U
#define CERT_TEST10_REPLIES 10
#define CERT_STREAM_INTERVAL_USEC 1000U

static const char cert_idl[] =
        "# Interface to test varlink implementations against.\n"
        "# First you write a varlink client calling:\n"
        "# Start, Test01, Test02, …, Test09, End\n"
        "# The return value of the previous call should be the argument of the next call.\n"
        "# Then you test this client against well known servers like python or rust from\n"
        "# https://github.com/varlink/\n"
        "#\n"
        "# Next you write a varlink server providing the same service as the well known ones.\n"
        "# Now run your client against it and run well known clients like python or rust\n"
        "# from https://github.com/varlink/ against your server. If all works out, then\n"
        "# your new language bindings should be varlink certified.\n"
        "interface org.varlink.certification\n"
        "\n"
        "type Interface (\n"
        "  foo: ?[]?[string](foo, bar, baz),\n"
        "  anon: (foo: bool, bar: bool)\n"
        ")\n"
        "\n"
        "type MyType (\n"
        "  object: object,\n"
        "  enum: (one, two, three),\n"
        "  struct: (first: int, second: string),\n"
        "  array: []string,\n"
        "  dictionary: [string]string,\n"
        "  stringset: [string](),\n"
        "  nullable: ?string,\n"
        "  nullable_array_struct: ?[](first: int, second: string),\n"
        "  interface: Interface\n"
        ")\n"
        "\n"
        "method Start() -> (client_id: string)\n"
        "\n"
        "method Test01(client_id: string) -> (bool: bool)\n"
        "\n"
        "method Test02(client_id: string, bool: bool) -> (int: int)\n"
        "\n"
        "method Test03(client_id: string, int: int) -> (float: float)\n"
        "\n"
        "method Test04(client_id: string, float: float) -> (string: string)\n"
        "\n"
        "method Test05(client_id: string, string: string) -> (\n"
        "  bool: bool,\n"
        "  int: int,\n"
        "  float: float,\n"
        "  string: string\n"
        ")\n"
        "\n"
        "method Test06(\n"
        "  client_id: string,\n"
        "  bool: bool,\n"
        "  int: int,\n"
        "  float: float,\n"
        "  string: string\n"
        ") -> (\n"
        "  struct: (\n"
        "    bool: bool,\n"
        "    int: int,\n"
        "    float: float,\n"
        "    string: string\n"
        "  )\n"
        ")\n"
        "\n"
        "method Test07(\n"
        "  client_id: string,\n"
        "  struct: (\n"
        "    bool: bool,\n"
        "    int: int,\n"
        "    float: float,\n"
        "    string: string\n"
        "  )\n"
        ") -> (map: [string]string)\n"
        "\n"
        "method Test08(client_id: string, map: [string]string) -> (set: [string]())\n"
        "\n"
        "method Test09(client_id: string, set: [string]()) -> (mytype: MyType)\n"
        "\n"
        "# returns more than one reply with \"continues\"\n"
        "method Test10(client_id: string, mytype: MyType) -> (string: string)\n"
        "\n"
        "method Test11(\n"
        "  client_id: string,\n"
        "  last_more_replies: []string\n"
        ") -> ()\n"
        "\n"
        "method End(client_id: string) -> (all_ok: bool)\n"
        "\n"
        "error ClientIdError ()\n"
        "\n"
        "error CertificationError (wants: object, got: object)\n";

#define PI "3.141592653589793"
#define STRUCT5 "{\"bool\":false,\"int\":2,\"float\":" PI ",\"string\":\"a lot of string\"}"
#define MAP "{\"foo\":\"Foo\",\"bar\":\"Bar\"}"
#define SET "{\"one\":{},\"two\":{},\"three\":{}}"
#define MYTYPE                                                                                  \
        "{\"object\":{\"method\":\"org.varlink.certification.Test09\",\"parameters\":{\"map\":" MAP "}}," \
        "\"enum\":\"two\",\"struct\":{\"first\":1,\"second\":\"2\"},"                          \
        "\"array\":[\"one\",\"two\",\"three\"],\"dictionary\":" MAP ",\"stringset\":" SET ","  \
        "\"nullable\":null,\"nullable_array_struct\":null,"                                    \
        "\"interface\":{\"foo\":[null,{\"Foo\":\"foo\",\"Bar\":\"bar\"},null,{\"one\":\"foo\",\"two\":\"bar\"}]," \
        "\"anon\":{\"foo\":true,\"bar\":false}}}"

/* Test N (1 … 9): its parameters besides client_id, and its reply. Test N+1's parameters
 * are test N's reply. */
static const char *const cert_tests[][2] = {
        { "{}",                          "{\"bool\":true}" },
        { "{\"bool\":true}",             "{\"int\":1}" },
        { "{\"int\":1}",                 "{\"float\":1.0}" },
        { "{\"float\":1.0}",             "{\"string\":\"ping\"}" },
        { "{\"string\":\"ping\"}",       STRUCT5 },
        { STRUCT5,                       "{\"struct\":" STRUCT5 "}" },
        { "{\"struct\":" STRUCT5 "}",    "{\"map\":" MAP "}" },
        { "{\"map\":" MAP "}",           "{\"set\":" SET "}" },
        { "{\"set\":" SET "}",           "{\"mytype\":" MYTYPE "}" },
};
#define TEST10_PARAMETERS "{\"mytype\":" MYTYPE "}"

static json_object *json_parse_const(const char *s) {
        json_object *j = json_tokener_parse(s);

        /* The literals above are ours: a typo is a bug of this file. */
        if (!j)
                abort();
        return j;
}

/* Equality as a typed reader sees it: numbers by value, a null member as an absent one. */
static bool json_same(json_object *a, json_object *b);

static bool json_object_members_in(json_object *a, json_object *b) {
        json_object_object_foreach(a, key, va) {
                json_object *vb = NULL;

                (void) json_object_object_get_ex(b, key, &vb);
                if (!json_same(va, vb))
                        return false;
        }
        return true;
}

static bool json_same(json_object *a, json_object *b) {
        json_type ta = json_object_get_type(a), tb = json_object_get_type(b);

        if ((ta == json_type_int || ta == json_type_double) && (tb == json_type_int || tb == json_type_double))
                return ta == json_type_int && tb == json_type_int ?
                        json_object_get_int64(a) == json_object_get_int64(b) :
                        json_object_get_double(a) == json_object_get_double(b);
        if (ta != tb)
                return false;
        switch (ta) {
        case json_type_null:
                return true;
        case json_type_boolean:
                return json_object_get_boolean(a) == json_object_get_boolean(b);
        case json_type_string:
                return streq(json_object_get_string(a), json_object_get_string(b));
        case json_type_object:
                return json_object_members_in(a, b) && json_object_members_in(b, a);
        case json_type_array:
                if (json_object_array_length(a) != json_object_array_length(b))
                        return false;
                for (size_t i = 0; i < json_object_array_length(a); i++)
                        if (!json_same(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i)))
                                return false;
                return true;
        default:
                return false;
        }
}

static json_object *test11_parameters(void) {
        json_object *p = json_object_new_object(), *a = json_object_new_array();

        if (!p || !a)
                abort();
        for (int i = 1; i <= CERT_TEST10_REPLIES; i++) {
                char s[32];
                snprintf(s, sizeof(s), "Reply number %i", i);
                if (json_object_array_add(a, json_object_new_string(s)) < 0)
                        abort();
        }
        if (json_add(p, "last_more_replies", a) < 0)
                abort();
        return p;
}

/* ---- the server ---- */

typedef struct CertClient {
        char id[SD_ID128_UUID_STRING_MAX];
        unsigned next;        /* the test expected next: 1 … 11, then 12 for End */
        bool ok;
} CertClient;

static CertClient cert_clients[CERT_CLIENTS_MAX];
static unsigned cert_n_clients;

static CertClient *cert_client_find(json_object *parameters) {
        json_object *v;

        if (!json_object_object_get_ex(parameters, "client_id", &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        for (unsigned i = 0; i < cert_n_clients; i++)
                if (streq(cert_clients[i].id, json_object_get_string(v)))
                        return &cert_clients[i];
        return NULL;
}

static int cert_start(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();
        CertClient *c;
        sd_id128_t id;
        int r;

        if (!p)
                return -ENOMEM;
        r = sd_id128_randomize(&id);
        if (r < 0)
                return r;
        /* Beyond the table's size the oldest client goes, as varlink-go's forgets old ones. */
        if (cert_n_clients == CERT_CLIENTS_MAX) {
                memmove(cert_clients, cert_clients + 1, sizeof(CertClient) * (CERT_CLIENTS_MAX - 1));
                cert_n_clients--;
        }
        c = &cert_clients[cert_n_clients++];
        *c = (CertClient) { .next = 1, .ok = true };
        sd_id128_to_uuid_string(id, c->id);

        r = json_add(p, "client_id", json_object_new_string(c->id));
        if (r < 0)
                return r;
        return varlink_call_reply(call, p);
}

/* The parameters of test n (1 … 11) as the server expects them, besides client_id. */
static json_object *cert_expected_parameters(unsigned n) {
        if (n <= ELEMENTSOF(cert_tests))
                return json_parse_const(cert_tests[n - 1][0]);
        if (n == 10)
                return json_parse_const(TEST10_PARAMETERS);
        return test11_parameters();
}

static int cert_error(VarlinkCall *call, CertClient *c, json_object *wants, json_object *got) {
        _cleanup_json_ json_object *p = json_object_new_object();

        c->ok = false;
        if (!p || json_add(p, "wants", json_object_get(wants)) < 0 || json_add(p, "got", json_object_get(got)) < 0)
                return -ENOMEM;
        return varlink_call_error(call, CERT_INTERFACE ".CertificationError", p);
}

/* Checks call n of client c. 1 if it may be answered, 0 if answered with an error. */
static int cert_check(VarlinkCall *call, json_object *parameters, unsigned n, CertClient **ret) {
        _cleanup_json_ json_object *wants = NULL, *got = NULL;
        CertClient *c = cert_client_find(parameters);
        int r;

        if (!c) {
                r = varlink_call_error(call, CERT_INTERFACE ".ClientIdError", NULL);
                return r < 0 ? r : 0;
        }
        if (c->next != n)
                c->ok = false;   /* out of order: End will say so */

        got = json_object_new_object();
        if (!got)
                return -ENOMEM;
        json_object_object_foreach(parameters, key, v)
                if (!streq(key, "client_id") && json_add(got, key, json_object_get(v)) < 0)
                        return -ENOMEM;
        wants = cert_expected_parameters(n);
        if (!json_same(wants, got)) {
                r = cert_error(call, c, wants, got);
                return r < 0 ? r : 0;
        }
        c->next = n + 1;
        *ret = c;
        return 1;
}

static int cert_test(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        unsigned n = (unsigned) (uintptr_t) userdata;
        _cleanup_json_ json_object *p = NULL;
        CertClient *c;
        int r;

        r = cert_check(call, parameters, n, &c);
        if (r <= 0)
                return r;
        p = json_parse_const(cert_tests[n - 1][1]);
        return varlink_call_reply(call, p);
}

/* Test10's stream: one reply per timer tick, from the event loop, as a method that streams
 * what it produces would send it. */
typedef struct CertStream {
        VarlinkCall *call;
        sd_event_source *timer;
        int sent;
} CertStream;

static void cert_stream_free(CertStream *s) {
        sd_event_source_disable_unref(s->timer);
        varlink_call_unref(s->call);
        free(s);
}

static void cert_stream_disconnected(VarlinkCall *call, void *userdata) {
        cert_stream_free(userdata);
}

static int cert_stream_next(sd_event_source *source, uint64_t usec, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();
        CertStream *s = userdata;
        char text[32];
        int r;

        s->sent++;
        snprintf(text, sizeof(text), "Reply number %i", s->sent);
        r = p ? json_add(p, "string", json_object_new_string(text)) : -ENOMEM;
        if (r >= 0)
                r = s->sent < CERT_TEST10_REPLIES ? varlink_call_notify(s->call, p) : varlink_call_reply(s->call, p);
        if (r < 0 || s->sent == CERT_TEST10_REPLIES) {
                if (r < 0)
                        fprintf(stderr, "Test10: failed to send reply %i: %s\n", s->sent, strerror(-r));
                cert_stream_free(s);
                return 0;
        }
        return sd_event_source_set_time_relative(source, CERT_STREAM_INTERVAL_USEC);
}

static int cert_test10(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        sd_event *event = userdata;
        CertStream *s;
        CertClient *c;
        int r;

        r = cert_check(call, parameters, 10, &c);
        if (r <= 0)
                return r;
        if (!(flags & VARLINK_CALL_MORE))
                return varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);

        s = calloc(1, sizeof(CertStream));
        if (!s)
                return -ENOMEM;
        r = sd_event_add_time_relative(event, &s->timer, CLOCK_MONOTONIC,
                                       CERT_STREAM_INTERVAL_USEC, 0, cert_stream_next, s);
        if (r < 0) {
                free(s);
                return r;
        }
        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ON);
        s->call = varlink_call_ref(call);
        varlink_call_set_disconnect_callback(call, cert_stream_disconnected, s);
        return 0;
}

static int cert_test11(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        CertClient *c;
        int r;

        r = cert_check(call, parameters, 11, &c);
        if (r <= 0)
                return r;
        if (!(flags & VARLINK_CALL_ONEWAY)) {
                c->ok = false;
                return varlink_call_error_invalid_parameter(call, "oneway");
        }
        return varlink_call_reply(call, NULL);
}

static int cert_end(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();
        CertClient *c = cert_client_find(parameters);
        int r;

        if (!p)
                return -ENOMEM;
        if (!c)
                return varlink_call_error(call, CERT_INTERFACE ".ClientIdError", NULL);
        r = json_add(p, "all_ok", json_object_new_boolean(c->ok && c->next == 12));
        if (r < 0)
                return r;
        /* The client is done: its slot goes to the last one's. */
        *c = cert_clients[--cert_n_clients];
        return varlink_call_reply(call, p);
}

static int on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int cert_server_bind(VarlinkServer *s, sd_event *event) {
        static const struct {
                const char *method;
                varlink_method_t callback;
        } methods[] = {
                { CERT_INTERFACE ".Start",  cert_start },
                { CERT_INTERFACE ".Test11", cert_test11 },
                { CERT_INTERFACE ".End",    cert_end },
        };
        char name[64];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                r = varlink_server_bind_method(s, methods[i].method, methods[i].callback, NULL);
                if (r < 0)
                        return r;
        }
        for (unsigned n = 1; n <= ELEMENTSOF(cert_tests); n++) {
                snprintf(name, sizeof(name), CERT_INTERFACE ".Test%02u", n);
                r = varlink_server_bind_method(s, name, cert_test, (void *) (uintptr_t) n);
                if (r < 0)
                        return r;
        }
        return varlink_server_bind_method(s, CERT_INTERFACE ".Test10", cert_test10, event);
}

static int run_server(const char *address) {
        _cleanup_(varlink_server_unrefp) VarlinkServer *s = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        r = sd_event_default(&event);
        if (r < 0)
                return r;
        if (sd_event_add_signal(event, NULL, SIGTERM, on_exit_signal, NULL) < 0 ||
            sd_event_add_signal(event, NULL, SIGINT, on_exit_signal, NULL) < 0)
                return -EIO;

        r = varlink_server_new(&s);
        if (r < 0)
                return r;
        r = varlink_server_set_info(s, "sandboxd", "varlink-certification", "1", "https://varlink.org");
        if (r < 0)
                return r;
        r = varlink_server_add_interface(s, cert_idl);
        if (r < 0)
                return r;
        r = cert_server_bind(s, event);
        if (r < 0)
                return r;
        r = varlink_server_listen_address(s, address, 0600);
        if (r < 0)
                return r;
        r = varlink_server_attach_event(s, event, 0);
        if (r < 0)
                return r;

        printf("ready\n");
        fflush(stdout);
        return sd_event_loop(event);
}

/* ---- the client ---- */

/* Calls method with parameters and client_id, and checks that the reply is expected. */
static int cert_call(VarlinkClient *c, const char *client_id, const char *method, json_object *parameters,
                     const char *expected, json_object **ret) {
        _cleanup_json_ json_object *p = json_object_new_object(), *reply = NULL, *wants = NULL;
        _cleanup_free_ char *error = NULL;
        char name[64];
        int r;

        if (!p)
                return -ENOMEM;
        if (parameters) {
                json_object_object_foreach(parameters, key, v)
                        if (json_add(p, key, json_object_get(v)) < 0)
                                return -ENOMEM;
        }
        if (client_id && json_add(p, "client_id", json_object_new_string(client_id)) < 0)
                return -ENOMEM;

        snprintf(name, sizeof(name), CERT_INTERFACE ".%s", method);
        r = varlink_client_call_sync(c, name, p, &reply, &error);
        if (r < 0)
                return r;
        if (r > 0) {
                fprintf(stderr, "%s() failed: %s %s\n", method, error, json_object_to_json_string(reply));
                return -EBADMSG;
        }
        printf("%s: %s\n", method, json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN));
        if (expected) {
                wants = json_parse_const(expected);
                if (!json_same(wants, reply)) {
                        fprintf(stderr, "%s() returned %s, not %s\n", method,
                                json_object_to_json_string(reply), expected);
                        return -EBADMSG;
                }
        }
        *ret = TAKE_PTR(reply);
        return 0;
}

typedef struct CertReplies {
        json_object *strings;   /* Test10's, in order */
        bool done;
        bool failed;
} CertReplies;

static int on_test10_reply(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        CertReplies *t = userdata;
        json_object *s;
        char expected[32];
        size_t n = json_object_array_length(t->strings);

        snprintf(expected, sizeof(expected), "Reply number %zu", n + 1);
        if (error || !json_object_object_get_ex(parameters, "string", &s) ||
            !streq(json_object_get_string(s), expected) ||
            !!(flags & VARLINK_REPLY_CONTINUES) != (n + 1 < CERT_TEST10_REPLIES)) {
                fprintf(stderr, "Test10() reply %zu unexpected: %s %s\n", n + 1, strna(error),
                        json_object_to_json_string(parameters));
                t->failed = true;
        } else {
                printf("  Receive: '%s'\n", expected);
                json_object_array_add(t->strings, json_object_get(s));
        }
        t->done = t->failed || !(flags & VARLINK_REPLY_CONTINUES);
        return 0;
}

/* Test10 with "more", then Test11 oneway with its replies: on the event loop. */
static int cert_client_stream(VarlinkClient *c, const char *client_id, json_object *mytype) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_json_ json_object *p = json_object_new_object(), *p11 = json_object_new_object();
        CertReplies t = { .strings = json_object_new_array() };
        int r;

        if (!p || !p11 || !t.strings || json_add(p, "client_id", json_object_new_string(client_id)) < 0 ||
            json_add(p11, "client_id", json_object_new_string(client_id)) < 0 ||
            json_add(p11, "last_more_replies", t.strings) < 0)
                return -ENOMEM;
        json_object_object_foreach(mytype, key, v)
                if (json_add(p, key, json_object_get(v)) < 0)
                        return -ENOMEM;

        r = sd_event_new(&event);
        if (r >= 0)
                r = varlink_client_attach_event(c, event, 0);
        if (r >= 0)
                r = varlink_client_call_async(c, CERT_INTERFACE ".Test10", p, VARLINK_CALL_MORE, on_test10_reply, &t);
        while (r >= 0 && !t.done)
                r = sd_event_run(event, 10 * 1000000U);   /* a server that never answers: the test's timeout */
        if (r < 0)
                return r;
        if (t.failed || json_object_array_length(t.strings) != CERT_TEST10_REPLIES)
                return -EBADMSG;

        r = varlink_client_call_async(c, CERT_INTERFACE ".Test11", p11, VARLINK_CALL_ONEWAY, NULL, NULL);
        if (r < 0)
                return r;
        printf("Test11: (oneway)\n");
        return 0;
}

/* The server describes the interface, in terms our reader of descriptions takes. */
static int cert_client_introspect(VarlinkClient *c) {
        _cleanup_json_ json_object *p = json_object_new_object(), *info = NULL, *desc = NULL;
        json_object *v;
        int r;

        r = varlink_client_call_sync(c, "org.varlink.service.GetInfo", NULL, &info, NULL);
        if (r != 0)
                return r < 0 ? r : -EBADMSG;
        printf("GetInfo: %s\n", json_object_to_json_string_ext(info, JSON_C_TO_STRING_PLAIN));
        if (!p || json_add(p, "interface", json_object_new_string(CERT_INTERFACE)) < 0)
                return -ENOMEM;
        r = varlink_client_call_sync(c, "org.varlink.service.GetInterfaceDescription", p, &desc, NULL);
        if (r != 0)
                return r < 0 ? r : -EBADMSG;
        if (!json_object_object_get_ex(desc, "description", &v) ||
            !strstr(json_object_get_string(v), "interface " CERT_INTERFACE))
                return -EBADMSG;
        return 0;
}

static int run_client(const char *address) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_json_ json_object *start = NULL, *end = NULL, *p = NULL;
        _cleanup_free_ char *client_id = NULL;
        json_object *v;
        int r;

        r = varlink_client_connect_address(&c, address);
        if (r < 0)
                return r;
        r = cert_client_introspect(c);
        if (r < 0)
                return r;

        r = cert_call(c, NULL, "Start", NULL, NULL, &start);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(start, "client_id", &v) || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        client_id = strdup(json_object_get_string(v));
        if (!client_id)
                return -ENOMEM;

        /* Each reply is the next call's parameters. */
        for (unsigned n = 1; n <= ELEMENTSOF(cert_tests); n++) {
                _cleanup_json_ json_object *reply = NULL;
                char method[16];

                snprintf(method, sizeof(method), "Test%02u", n);
                r = cert_call(c, client_id, method, p, cert_tests[n - 1][1], &reply);
                if (r < 0)
                        return r;
                json_object_put(p);
                p = TAKE_PTR(reply);
        }
        r = cert_client_stream(c, client_id, p);
        if (r < 0)
                return r;
        r = cert_call(c, client_id, "End", NULL, "{\"all_ok\":true}", &end);
        if (r < 0)
                return r;
        printf("certification passed\n");
        return 0;
}

static int parse_argv(int argc, char *argv[], const char **ret_address, bool *ret_client) {
        static const struct option options[] = {
                { "varlink", required_argument, NULL, 'v' },
                { "client",  no_argument,       NULL, 'c' },
                {}
        };
        int o;

        *ret_address = NULL;
        *ret_client = false;
        while ((o = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (o) {
                case 'v':
                        *ret_address = optarg;
                        break;
                case 'c':
                        *ret_client = true;
                        break;
                default:
                        return -EINVAL;
                }
        return *ret_address && optind == argc ? 0 : -EINVAL;
}

int main(int argc, char *argv[]) {
        const char *address;
        bool client;
        int r;

        if (parse_argv(argc, argv, &address, &client) < 0) {
                fprintf(stderr, "Usage: %s [--client] --varlink=unix:PATH\n", program_invocation_short_name);
                return 2;
        }
        r = client ? run_client(address) : run_server(address);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", client ? "certification failed" : "server failed", strerror(-r));
                return 1;
        }
        return 0;
}
