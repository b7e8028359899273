/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Header injection (docs/SECRETS.md): a connection to a host that a secret of the sandbox
 * is bound to is not relayed as it is. Once the ClientHello is checked, a thread of its
 * own takes both sockets:
 *   - it ends the sandbox's TLS with a certificate for the host that it minted with the
 *     sandbox's CA (only that sandbox trusts it; the CA's key stays here),
 *   - opens TLS to the real host, verified as any client would (the system's roots and
 *     the admin's, --trust=), offering HTTP/1.1 only on both sides,
 *   - and forwards requests with the bound header set to the secret, whatever the sandbox
 *     sent under that name, following each body's length to find the next request.
 * Blocking I/O in a thread: two TLS sessions and an HTTP parser are far simpler so, and
 * the loop goes on with everything else. At most EGRESS_INJECT_MAX at once.
 */

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <systemd/sd-journal.h>

#include "egress-http.h"
#include "egress-tls.h"
#include "egress.h"
#include "inject.h"

#define INJECT_HANDSHAKE_SEC 10
#define INJECT_SEND_SEC 60
#define INJECT_IDLE_MSEC (600 * 1000)
#define INJECT_BUFFER (32U * 1024U)

static gnutls_certificate_credentials_t upstream_trust;
static atomic_uint n_running;

/* The running jobs per sandbox id (a thread may outlive its Box: counted by id). */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
        char id[EGRESS_ID_MAX + 1];
        unsigned n;
} slots[EGRESS_INJECT_MAX];

/* A job's place: -EBUSY when all sandboxes' or this one's are taken. */
static int slot_take(const char *id) {
        size_t free_slot = EGRESS_INJECT_MAX;
        int r = -EBUSY;

        pthread_mutex_lock(&slots_lock);
        if (atomic_load(&n_running) < EGRESS_INJECT_MAX) {
                for (size_t i = 0; i < EGRESS_INJECT_MAX; i++) {
                        if (slots[i].n > 0 && streq(slots[i].id, id)) {
                                free_slot = i;
                                break;
                        }
                        if (slots[i].n == 0 && free_slot == EGRESS_INJECT_MAX)
                                free_slot = i;
                }
                if (free_slot < EGRESS_INJECT_MAX && slots[free_slot].n < EGRESS_INJECT_BOX_MAX) {
                        if (slots[free_slot].n++ == 0)
                                snprintf(slots[free_slot].id, sizeof(slots[free_slot].id), "%s", id);
                        atomic_fetch_add(&n_running, 1);
                        r = 0;
                }
        }
        pthread_mutex_unlock(&slots_lock);
        return r;
}

static void slot_release(const char *id) {
        pthread_mutex_lock(&slots_lock);
        for (size_t i = 0; i < EGRESS_INJECT_MAX; i++)
                if (slots[i].n > 0 && streq(slots[i].id, id)) {
                        slots[i].n--;
                        atomic_fetch_sub(&n_running, 1);
                        break;
                }
        pthread_mutex_unlock(&slots_lock);
}

int inject_init(char * const *trust_files, const char *trust_dir) {
        glob_t g = {};
        char *pattern = NULL;
        int r;

        r = gnutls_certificate_allocate_credentials(&upstream_trust);
        if (r < 0)
                return -ENOMEM;
        r = gnutls_certificate_set_x509_system_trust(upstream_trust);
        if (r < 0)
                sd_journal_send("MESSAGE=Cannot load the system's trusted certificates: %s", gnutls_strerror(r),
                                "PRIORITY=%i", LOG_WARNING, NULL);
        for (char * const *f = trust_files; f && *f; f++) {
                r = gnutls_certificate_set_x509_trust_file(upstream_trust, *f, GNUTLS_X509_FMT_PEM);
                if (r <= 0)
                        return log_trust_failure(*f, r);
        }
        if (trust_dir && asprintf(&pattern, "%s/*.pem", trust_dir) > 0 && glob(pattern, 0, NULL, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++) {
                        r = gnutls_certificate_set_x509_trust_file(upstream_trust, g.gl_pathv[i], GNUTLS_X509_FMT_PEM);
                        if (r <= 0) {
                                (void) log_trust_failure(g.gl_pathv[i], r);
                                continue;
                        }
                        sd_journal_send("MESSAGE=Trusting the certificates of %s as well as the system's.",
                                        g.gl_pathv[i], "PRIORITY=%i", LOG_INFO, NULL);
                }
        globfree(&g);
        free(pattern);
        return 0;
}

int log_trust_failure(const char *path, int g) {
        sd_journal_send("MESSAGE=Cannot load trusted certificates from %s: %s", path,
                        g == 0 ? "no certificate in it" : gnutls_strerror(g), "PRIORITY=%i", LOG_ERR, NULL);
        return -EINVAL;
}

void inject_done(void) {
        if (upstream_trust)
                gnutls_certificate_free_credentials(upstream_trust);
        upstream_trust = NULL;
}

unsigned inject_running(void) {
        return atomic_load(&n_running);
}

typedef struct Job {
        char id[EGRESS_ID_MAX + 1];
        char host[EGRESS_HOST_MAX + 1];
        uint16_t port;
        int client_fd, server_fd;
        uint8_t *early;          /* the ClientHello the loop read to check */
        size_t early_len, early_off;
        char *header, *value;
        char *chain_pem, *key_pem;
} Job;

static void job_free(Job *j) {
        if (!j)
                return;
        safe_close(j->client_fd);
        safe_close(j->server_fd);
        free(j->early);
        free(j->header);
        if (j->value) {
                explicit_bzero(j->value, strlen(j->value));
                free(j->value);
        }
        free(j->chain_pem);
        if (j->key_pem) {
                explicit_bzero(j->key_pem, strlen(j->key_pem));
                free(j->key_pem);
        }
        free(j);
}

static void job_log(const Job *j, int priority, const char *verdict, const char *what) {
        sd_journal_send("MESSAGE=%s: %s %s:%u: %s", j->id, streq(verdict, "allow") ? "allowed" : "failed", j->host,
                        (unsigned) j->port, what,
                        "PRIORITY=%i", priority,
                        "SANDBOX_ID=%s", j->id,
                        "EGRESS_VERDICT=%s", verdict,
                        "EGRESS_HOST=%s", j->host,
                        "EGRESS_PORT=%u", (unsigned) j->port,
                        "EGRESS_INJECTED=%s", j->header,
                        NULL);
}

/* The sandbox's side reads the ClientHello the loop already took first. */
static ssize_t client_pull(gnutls_transport_ptr_t p, void *buf, size_t n) {
        Job *j = p;

        if (j->early_off < j->early_len) {
                size_t k = MIN(n, j->early_len - j->early_off);
                memcpy(buf, j->early + j->early_off, k);
                j->early_off += k;
                return (ssize_t) k;
        }
        return recv(j->client_fd, buf, n, 0);
}

static ssize_t client_push(gnutls_transport_ptr_t p, const void *buf, size_t n) {
        Job *j = p;
        return send(j->client_fd, buf, n, MSG_NOSIGNAL);
}

/* TLS writes a handshake flight as several records: without this, each waits for the
 * peer's delayed ACK (Nagle), some 40 ms a flight. */
static void set_nodelay(int fd) {
        int one = 1;
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void set_timeouts(int fd, int rcv_sec, int snd_sec) {
        struct timeval rcv = { .tv_sec = rcv_sec }, snd = { .tv_sec = snd_sec };

        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd));
}

static int handshake(gnutls_session_t s) {
        int r;
        do
                r = gnutls_handshake(s);
        while (r < 0 && !gnutls_error_is_fatal(r));
        return r;
}

static int send_all(gnutls_session_t s, const void *data, size_t n) {
        const char *p = data;

        while (n > 0) {
                ssize_t k = gnutls_record_send(s, p, n);
                if (k == GNUTLS_E_INTERRUPTED)
                        continue;
                if (k <= 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* A short answer of our own to the sandbox's client, over its TLS. */
static void reply_error(gnutls_session_t s, const char *status, const char *text) {
        char buf[1024];
        int n = snprintf(buf, sizeof(buf),
                         "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                         status, strlen(text), text);
        if (n > 0)
                (void) send_all(s, buf, MIN((size_t) n, sizeof(buf) - 1));
}

static const char *const alpn_http11 = "http/1.1";

static int session_alpn(gnutls_session_t s, unsigned flags) {
        gnutls_datum_t p = { (unsigned char *) alpn_http11, (unsigned) strlen(alpn_http11) };
        return gnutls_alpn_set_protocols(s, &p, 1, flags);
}

/* Requests from the sandbox to the server, heads rewritten: 0 to go on, < 0 to end. */
static int forward_requests(Job *j, gnutls_session_t to_server, gnutls_session_t to_client, char *buf,
                            size_t *len, EgressBody *body) {
        while (*len > 0) {
                size_t used;

                if (body->kind == EGRESS_BODY_NONE) {
                        _cleanup_free_ char *head = NULL;
                        size_t head_len;
                        ssize_t end = egress_http_head_end(buf, *len);

                        if (end == 0)
                                return 0; /* more to come */
                        if (end < 0 || egress_http_rewrite_request(buf, (size_t) end, j->host, j->header, j->value,
                                                                   &head, &head_len, body) < 0) {
                                job_log(j, LOG_NOTICE, "deny",
                                        "a request this proxy does not take (HTTP/1.1 only, Host as connected)");
                                reply_error(to_client, "400 Bad Request",
                                            "sandboxd-egress: a request head it cannot read for certain; the "
                                            "bound header is added to plain HTTP/1.1 requests only, with a path "
                                            "as target and no Host but the one connected to.\n");
                                return -EBADMSG;
                        }
                        int r = send_all(to_server, head, head_len);
                        explicit_bzero(head, head_len);
                        if (r < 0)
                                return r;
                        used = (size_t) end;
                } else {
                        ssize_t k = egress_http_body_feed(body, buf, *len);
                        if (k < 0) {
                                job_log(j, LOG_NOTICE, "deny", "a malformed chunked body");
                                return -EBADMSG;
                        }
                        if (send_all(to_server, buf, (size_t) k) < 0)
                                return -EIO;
                        used = (size_t) k;
                }
                memmove(buf, buf + used, *len - used);
                *len -= used;
        }
        return 0;
}

static void relay(Job *j, gnutls_session_t cs, gnutls_session_t ss) {
        _cleanup_free_ char *in = malloc(EGRESS_HTTP_HEAD_MAX + INJECT_BUFFER), *out = malloc(INJECT_BUFFER);
        EgressBody body = { .kind = EGRESS_BODY_NONE };
        size_t in_len = 0;

        if (!in || !out)
                return;
        set_timeouts(j->client_fd, 0, INJECT_SEND_SEC);
        set_timeouts(j->server_fd, 0, INJECT_SEND_SEC);
        for (;;) {
                struct pollfd p[2] = { { .fd = j->client_fd, .events = POLLIN }, { .fd = j->server_fd, .events = POLLIN } };
                bool from_client = gnutls_record_check_pending(cs) > 0, from_server = gnutls_record_check_pending(ss) > 0;

                if (!from_client && !from_server) {
                        int r = poll(p, 2, INJECT_IDLE_MSEC);
                        if (r < 0 && errno == EINTR)
                                continue;
                        if (r <= 0)
                                return; /* idle, as a relay would be ended */
                        from_client = p[0].revents != 0;
                        from_server = p[1].revents != 0;
                }
                if (from_client) {
                        size_t room = EGRESS_HTTP_HEAD_MAX + INJECT_BUFFER - in_len;
                        ssize_t k = gnutls_record_recv(cs, in + in_len, MIN(room, (size_t) INJECT_BUFFER));
                        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                                continue;
                        if (k <= 0)
                                return; /* the sandbox is done (or went) */
                        in_len += (size_t) k;
                        if (forward_requests(j, ss, cs, in, &in_len, &body) < 0)
                                return;
                        if (in_len >= EGRESS_HTTP_HEAD_MAX) {
                                reply_error(cs, "431 Request Header Fields Too Large",
                                            "sandboxd-egress: the request head is too large.\n");
                                return;
                        }
                }
                if (from_server) {
                        ssize_t k = gnutls_record_recv(ss, out, INJECT_BUFFER);
                        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                                continue;
                        if (k <= 0) {
                                (void) gnutls_bye(cs, GNUTLS_SHUT_WR);
                                return;
                        }
                        if (send_all(cs, out, (size_t) k) < 0)
                                return;
                }
        }
}

static void *job_run(void *userdata) {
        Job *j = userdata;
        gnutls_certificate_credentials_t mine = NULL;
        gnutls_session_t cs = NULL, ss = NULL;
        gnutls_datum_t chain = { (unsigned char *) j->chain_pem, (unsigned) strlen(j->chain_pem) };
        gnutls_datum_t key = { (unsigned char *) j->key_pem, (unsigned) strlen(j->key_pem) };
        char what[512];
        int r;

        /* Blocking from here on, within bounds of time. */
        (void) fcntl(j->client_fd, F_SETFL, fcntl(j->client_fd, F_GETFL) & ~O_NONBLOCK);
        (void) fcntl(j->server_fd, F_SETFL, fcntl(j->server_fd, F_GETFL) & ~O_NONBLOCK);
        set_timeouts(j->client_fd, INJECT_HANDSHAKE_SEC, INJECT_HANDSHAKE_SEC);
        set_timeouts(j->server_fd, INJECT_HANDSHAKE_SEC, INJECT_HANDSHAKE_SEC);
        set_nodelay(j->client_fd);
        set_nodelay(j->server_fd);

        /* The sandbox's side: our certificate for the host. */
        r = gnutls_certificate_allocate_credentials(&mine);
        if (r >= 0)
                r = gnutls_certificate_set_x509_key_mem(mine, &chain, &key, GNUTLS_X509_FMT_PEM);
        if (r >= 0)
                r = gnutls_init(&cs, GNUTLS_SERVER);
        if (r >= 0)
                r = gnutls_set_default_priority(cs);
        if (r >= 0)
                r = gnutls_credentials_set(cs, GNUTLS_CRD_CERTIFICATE, mine);
        if (r >= 0)
                r = session_alpn(cs, GNUTLS_ALPN_SERVER_PRECEDENCE);
        if (r < 0) {
                snprintf(what, sizeof(what), "cannot set up TLS: %s", gnutls_strerror(r));
                job_log(j, LOG_ERR, "fail", what);
                goto finish;
        }
        gnutls_transport_set_ptr(cs, j);
        gnutls_transport_set_pull_function(cs, client_pull);
        gnutls_transport_set_push_function(cs, client_push);
        r = handshake(cs);
        if (r < 0) {
                snprintf(what, sizeof(what), "the sandbox's TLS handshake failed (does it trust its CA?): %s",
                         gnutls_strerror(r));
                job_log(j, LOG_NOTICE, "fail", what);
                goto finish;
        }

        /* The server's side: verified as any client verifies it. */
        r = gnutls_init(&ss, GNUTLS_CLIENT);
        if (r >= 0)
                r = gnutls_set_default_priority(ss);
        if (r >= 0)
                r = gnutls_credentials_set(ss, GNUTLS_CRD_CERTIFICATE, upstream_trust);
        if (r >= 0)
                r = gnutls_server_name_set(ss, GNUTLS_NAME_DNS, j->host, strlen(j->host));
        if (r >= 0)
                r = session_alpn(ss, 0);
        if (r >= 0) {
                gnutls_session_set_verify_cert(ss, j->host, 0);
                gnutls_transport_set_int(ss, j->server_fd);
                r = handshake(ss);
        }
        if (r < 0) {
                char text[sizeof(what) + sizeof(j->host) + 64];

                if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                        gnutls_datum_t out = {};
                        unsigned status = gnutls_session_get_verify_cert_status(ss);
                        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) >= 0) {
                                snprintf(what, sizeof(what), "the server's certificate does not verify: %s",
                                         (const char *) out.data);
                                gnutls_free(out.data);
                        } else
                                snprintf(what, sizeof(what), "the server's certificate does not verify");
                } else
                        snprintf(what, sizeof(what), "TLS to the server failed: %s", gnutls_strerror(r));
                job_log(j, LOG_NOTICE, "fail", what);
                snprintf(text, sizeof(text), "sandboxd-egress: %s:%u: %s.\n", j->host, (unsigned) j->port, what);
                reply_error(cs, "502 Bad Gateway", text);
                goto finish;
        }

        snprintf(what, sizeof(what), "header %s added", j->header);
        job_log(j, LOG_INFO, "allow", what);
        relay(j, cs, ss);
        (void) gnutls_bye(cs, GNUTLS_SHUT_WR);

finish:
        if (ss)
                gnutls_deinit(ss);
        if (cs)
                gnutls_deinit(cs);
        if (mine)
                gnutls_certificate_free_credentials(mine);
        slot_release(j->id);
        job_free(j);
        return NULL;
}

int inject_start(const Box *b, const char *host, uint16_t port, int client_fd, int server_fd, const uint8_t *early,
                 size_t early_len, const char *header, const char *value, const char *chain_pem, const char *key_pem) {
        pthread_attr_t attr;
        pthread_t t;
        Job *j;
        int r;

        r = slot_take(b->id);
        if (r < 0)
                return r;
        j = calloc(1, sizeof(Job));
        if (!j) {
                slot_release(b->id);
                return -ENOMEM;
        }
        *j = (Job) { .client_fd = -EBADF, .server_fd = -EBADF, .port = port };
        snprintf(j->id, sizeof(j->id), "%s", b->id);
        snprintf(j->host, sizeof(j->host), "%s", host);
        j->early = malloc(early_len ?: 1);
        j->header = strdup(header);
        j->value = strdup(value);
        j->chain_pem = strdup(chain_pem);
        j->key_pem = strdup(key_pem);
        if (!j->early || !j->header || !j->value || !j->chain_pem || !j->key_pem) {
                job_free(j);
                slot_release(b->id);
                return -ENOMEM;
        }
        memcpy(j->early, early, early_len);
        j->early_len = early_len;

        r = pthread_attr_init(&attr);
        if (r == 0)
                r = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (r == 0)
                r = pthread_attr_setstacksize(&attr, 256 * 1024);
        if (r == 0) {
                /* The sockets are the job's from here: taken only once it runs. */
                j->client_fd = client_fd;
                j->server_fd = server_fd;
                r = pthread_create(&t, &attr, job_run, j);
                if (r != 0)
                        j->client_fd = j->server_fd = -EBADF;
        }
        pthread_attr_destroy(&attr);
        if (r != 0) {
                job_free(j);
                slot_release(b->id);
                return -r;
        }
        return 0;
}
