/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A fleet's tenant quotas (sandboxd.conf [Fleet] QuotaInterval=, docs/SCALE-OUT.md). Every
 * interval the event loop takes what each tenant holds on this node (the core counts it)
 * and a thread of its own hands it to MariaDB (table fleet_usage, this node's rows
 * replaced) and reads back what the tenants hold on the other nodes; the loop gives that
 * to the core, which counts it in every tenant's quota check and GetQuota. A create
 * never waits for the database: it is checked against the last sums read. */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <mysql.h>

#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "recorder-internal.h"
#include "recorder-mariadb.h"
#include "time-util.h"

/* The other nodes' rows count while they are this fresh: a node that stopped telling
 * (dead, or cut off from the database) stops counting after three of its rounds. */
#define FLEET_FRESH_INTERVALS 3U

struct FleetQuota {
        Recorder *r;
        Manager *m;
        unsigned node;
        uint64_t interval_usec;
        sd_event_source *timer, *done_source;
        int done_fd;
        bool running;            /* a round's thread is under way: the fields below are its */
        pthread_t thread;
        RecorderDB *db;          /* kept from round to round while it works */
        TenantUse *mine, *others;
        size_t n_mine, n_others;
        int error;
        char *why;
        bool failing;            /* said once, until a round works again */
};

static void *fleet_round(void *userdata) {
        FleetQuota *f = userdata;
        int k = 0;

        mysql_thread_init();
        if (!f->db)
                k = recorder_db_connect(&f->r->settings, &f->db, &f->why);
        if (k >= 0) {
                k = recorder_db_fleet_usage(f->db, f->node, f->mine, f->n_mine,
                                            FLEET_FRESH_INTERVALS * f->interval_usec, &f->others, &f->n_others);
                if (k < 0) {
                        f->why = strdup(recorder_db_error(f->db));
                        f->db = recorder_db_free(f->db);  /* a new connection next round */
                }
        }
        mysql_thread_end();
        f->error = k;
        (void) eventfd_write(f->done_fd, 1);
        return NULL;
}

static void fleet_round_join(FleetQuota *f) {
        if (!f->running)
                return;
        pthread_join(f->thread, NULL);
        f->running = false;
        f->mine = mfree(f->mine);
        f->n_mine = 0;
}

static int on_round_done(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        FleetQuota *f = userdata;
        eventfd_t n;

        (void) eventfd_read(fd, &n);
        if (!f->running)
                return 0;
        fleet_round_join(f);
        if (f->error < 0) {
                /* The last sums stay: better the fleet's use of a while ago than none. */
                if (!f->failing)
                        log_warning("Fleet quotas: the tenants' use on the other nodes is not readable (%s); "
                                    "counting what was read last.", strna(f->why));
                f->failing = true;
        } else {
                if (f->failing)
                        log_info("Fleet quotas: the tenants' use on the other nodes is readable again.");
                f->failing = false;
                manager_fleet_uses_set(f->m, TAKE_PTR(f->others), f->n_others);
        }
        f->others = mfree(f->others);
        f->n_others = 0;
        f->why = mfree(f->why);
        return 0;
}

static int on_round_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        FleetQuota *f = userdata;
        int k;

        /* The next from now: a slow loop delays the rounds rather than bunching them. */
        (void) sd_event_source_set_time_relative(source, f->interval_usec);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
        if (f->running)
                return 0;       /* the last round is slow (the database): skip this one */
        k = manager_tenant_uses(f->m, &f->mine, &f->n_mine);
        if (k < 0)
                return 0;
        k = recorder_thread_start(&f->thread, "sandboxd-fleet", fleet_round, f);
        if (k < 0) {
                f->mine = mfree(f->mine);
                f->n_mine = 0;
                return 0;
        }
        f->running = true;
        return 0;
}

static int fleet_quota_setup(Recorder *r, Manager *m, unsigned node) {
        FleetQuota *f;
        int k;

        f = r->fleet = calloc(1, sizeof(FleetQuota));
        if (!f)
                return -ENOMEM;
        *f = (FleetQuota) { .r = r, .m = m, .node = node,
                            .interval_usec = r->settings.fleet_quota_interval_sec * USEC_PER_SEC, .done_fd = -EBADF };
        f->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (f->done_fd < 0)
                return -errno;
        k = sd_event_add_io(r->event, &f->done_source, f->done_fd, EPOLLIN, on_round_done, f);
        if (k < 0)
                return k;
        /* The first round at once. */
        k = sd_event_add_time(r->event, &f->timer, CLOCK_MONOTONIC, 0, 0, on_round_timer, f);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(f->timer, "fleet-quota");
        return 0;
}

int recorder_fleet_quota_start(Recorder *r, Manager *m) {
        unsigned node = r ? r->settings.fleet_node : 0;
        int k;

        if (!r || r->fleet || node == 0 || r->settings.fleet_quota_interval_sec == 0)
                return 0;
        if (!r->use_db) {
                log_warning("[Fleet] QuotaInterval= is set but the records have no MariaDB: the tenants' quotas "
                            "are this node's alone.");
                return 0;
        }
        k = fleet_quota_setup(r, m, node);
        if (k < 0) {
                recorder_fleet_quota_stop(r);
                return k;
        }
        log_info("Fleet quotas: node %u shares its tenants' use every %" PRIu64 " s.", node,
                 r->settings.fleet_quota_interval_sec);
        return 0;
}

void recorder_fleet_quota_stop(Recorder *r) {
        FleetQuota *f = r ? r->fleet : NULL;

        if (!f)
                return;
        f->timer = sd_event_source_disable_unref(f->timer);
        f->done_source = sd_event_source_disable_unref(f->done_source);
        fleet_round_join(f);          /* bounded by the connection's timeouts */
        if (f->m)
                manager_fleet_uses_set(f->m, NULL, 0);
        recorder_db_free(f->db);
        free(f->others);
        free(f->why);
        safe_close(f->done_fd);
        r->fleet = mfree(f);
}
