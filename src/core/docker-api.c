/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdio.h>

#include <curl/curl.h>

#include "docker-api.h"
#include "list.h"
#include "log.h"

#define DOCKER_REPLY_MAX (4U * 1024U * 1024U)
#define DOCKER_REQUEST_TIMEOUT_MS 120000L

typedef struct DockerRequest DockerRequest;
struct DockerRequest {
        DockerClient *client;
        CURL *easy;
        struct curl_slist *headers;
        char *reply;
        size_t reply_size;
        bool reply_too_big;
        docker_callback_t cb;
        void *userdata;
        DockerRequest *next, *prev;
};

struct DockerClient {
        sd_event *event;
        char *socket_path;
        CURLM *multi;
        sd_event_source *timer;
        DockerRequest *requests;
        char *cgroup_driver;    /* what the daemon said (GET /info), NULL until asked */
};

static void request_free(DockerRequest *r) {
        DockerClient *c = r->client;

        LIST_REMOVE(c->requests, r);
        if (r->easy) {
                curl_multi_remove_handle(c->multi, r->easy);
                curl_easy_cleanup(r->easy);
        }
        curl_slist_free_all(r->headers);
        free(r->reply);
        free(r);
}

static void client_process_done(DockerClient *c) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(c->multi, &left))) {
                DockerRequest *r = NULL;
                json_object *body = NULL;
                long status = 0;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &r);
                (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
                if (msg->data.result != CURLE_OK)
                        status = 0;
                if (log_get_max_level() >= LOG_DEBUG) {
                        curl_off_t total = 0, first = 0;
                        const char *url = NULL, *method = NULL;
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_TOTAL_TIME_T, &total);
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_STARTTRANSFER_TIME_T, &first);
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_EFFECTIVE_URL, &url);
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_EFFECTIVE_METHOD, &method);
                        log_debug("Docker %s %s: HTTP %ld in %.1f ms (first byte at %.1f ms).", strna(method),
                                  strna(url), status, total / 1000.0, first / 1000.0);
                }
                if (status > 0 && r->reply_size > 0 && !r->reply_too_big)
                        body = json_tokener_parse(r->reply);

                docker_callback_t cb = r->cb;
                void *userdata = r->userdata;
                const char *error = msg->data.result != CURLE_OK ? curl_easy_strerror(msg->data.result) :
                                    r->reply_too_big ? "reply too large" : NULL;
                char ebuf[256];
                snprintf(ebuf, sizeof(ebuf), "%s", strempty(error));
                request_free(r);
                if (cb)
                        cb(status, body, error ? ebuf : NULL, userdata);
                json_object_put(body);
        }
}

static int on_socket_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        DockerClient *c = userdata;
        int action = 0, running;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;
        (void) curl_multi_socket_action(c->multi, fd, action, &running);
        client_process_done(c);
        return 0;
}

/* curl tells us which sockets to watch; each gets an sd-event source of its own. */
static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userdata, void *socketp) {
        DockerClient *c = userdata;
        sd_event_source *s = socketp;
        uint32_t events = 0;

        if (what == CURL_POLL_REMOVE) {
                sd_event_source_disable_unref(s);
                curl_multi_assign(c->multi, fd, NULL);
                return 0;
        }
        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;
        if (s)
                return sd_event_source_set_io_events(s, events) < 0 ? -1 : 0;
        if (sd_event_add_io(c->event, &s, fd, events, on_socket_event, c) < 0)
                return -1;
        curl_multi_assign(c->multi, fd, s);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        DockerClient *c = userdata;
        int running;

        (void) curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        client_process_done(c);
        return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userdata) {
        DockerClient *c = userdata;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(c->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
        if (sd_event_source_set_time_relative(c->timer, (uint64_t) timeout_ms * 1000ULL) < 0 ||
            sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT) < 0)
                return -1;
        return 0;
}

int docker_client_new(sd_event *event, const char *socket_path, DockerClient **ret) {
        _cleanup_(docker_client_freep) DockerClient *c = NULL;
        int r;

        c = calloc(1, sizeof(DockerClient));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(event);
        c->socket_path = strdup(socket_path);
        c->multi = curl_multi_init();
        if (!c->socket_path || !c->multi)
                return -ENOMEM;
        /* Accuracy 1 µs, not 0: 0 means sd-event's default of 250 ms, and libcurl asks for a
         * 0 ms timeout to start every request it is handed — each Docker call would wait for
         * the next coalesced wake-up (seen: 140–230 ms per call of a sandbox's start). */
        r = sd_event_add_time_relative(event, &c->timer, CLOCK_MONOTONIC, UINT64_MAX / 2, 1, on_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK)
                return -EIO;
        *ret = TAKE_PTR(c);
        return 0;
}

DockerClient *docker_client_free(DockerClient *c) {
        if (!c)
                return NULL;
        while (c->requests)
                request_free(c->requests);
        if (c->multi)
                curl_multi_cleanup(c->multi);
        sd_event_source_disable_unref(c->timer);
        sd_event_unref(c->event);
        free(c->socket_path);
        free(c->cgroup_driver);
        return mfree(c);
}

const char *docker_client_cgroup_driver(DockerClient *c) {
        return c->cgroup_driver;
}

int docker_client_set_cgroup_driver(DockerClient *c, const char *driver) {
        char *d = strdup(driver);

        if (!d)
                return -ENOMEM;
        free(c->cgroup_driver);
        c->cgroup_driver = d;
        return 0;
}

void docker_client_cancel(DockerClient *c, void *userdata) {
        for (DockerRequest *r = c ? c->requests : NULL; r; r = r->next)
                if (r->userdata == userdata)
                        r->cb = NULL; /* the transfer finishes; nobody hears of it */
}

static size_t on_data(char *ptr, size_t size, size_t n, void *userdata) {
        DockerRequest *r = userdata;
        size_t len = size * n;

        if (r->reply_size + len > DOCKER_REPLY_MAX) {
                r->reply_too_big = true;
                return len;
        }
        char *p = realloc(r->reply, r->reply_size + len + 1);
        if (!p)
                return 0; /* makes curl fail the transfer */
        memcpy(p + r->reply_size, ptr, len);
        r->reply = p;
        r->reply_size += len;
        r->reply[r->reply_size] = 0;
        return len;
}

int docker_request(DockerClient *c, const char *method, const char *path, json_object *body,
                   docker_callback_t cb, void *userdata) {
        _cleanup_free_ char *url = NULL;
        DockerRequest *r;

        r = calloc(1, sizeof(DockerRequest));
        if (!r)
                return -ENOMEM;
        r->client = c;
        r->cb = cb;
        r->userdata = userdata;
        LIST_PREPEND(c->requests, r);

        /* The host part is ignored on a unix socket; the API version is the daemon's own. */
        r->easy = curl_easy_init();
        if (!r->easy || asprintf(&url, "http://localhost%s", path) < 0)
                goto oom;
        r->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!r->headers)
                goto oom;
        if (curl_easy_setopt(r->easy, CURLOPT_UNIX_SOCKET_PATH, c->socket_path) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, DOCKER_REQUEST_TIMEOUT_MS) != CURLE_OK ||
            curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK)
                goto oom;
        if (body) {
                if (curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS,
                                     json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN)) != CURLE_OK)
                        goto oom;
        } else if (streq(method, "POST") && curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, 0L) != CURLE_OK)
                goto oom;

        if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK)
                goto oom;
        return 0;
oom:
        request_free(r);
        return -ENOMEM;
}

const char *docker_error_message(long status, json_object *body, const char *error, char *buf, size_t size) {
        json_object *m;

        if (error)
                snprintf(buf, size, "cannot reach Docker: %s", error);
        else if (body && json_object_object_get_ex(body, "message", &m) && json_object_is_type(m, json_type_string))
                snprintf(buf, size, "Docker says: %s", json_object_get_string(m));
        else
                snprintf(buf, size, "Docker answered HTTP %ld", status);
        return buf;
}
