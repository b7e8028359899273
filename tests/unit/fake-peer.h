/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The code under test on one sd-bus connection, a fake peer (the bus daemon, systemd,
 * polkit) on the other, the two ends of a socketpair on one event loop. The fake acts as
 * the server: it answers what it is asked when the test says so, so a test decides the
 * order of replies and signals, and every wait is a turn of the loop, never a block.
 * For cmocka tests; each test file includes this once. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "time-util.h"

/* The one loop both ends run on. */
static sd_event *event;

#define RUN_UNTIL(cond)                                                                 \
        do {                                                                            \
                uint64_t _deadline = now_usec(CLOCK_MONOTONIC) + 10 * 1000000ULL;       \
                while (!(cond)) {                                                       \
                        assert_true(now_usec(CLOCK_MONOTONIC) < _deadline);             \
                        assert_true(sd_event_run(event, 100 * 1000) >= 0);              \
                }                                                                       \
        } while (0)

/* Runs the loop a while, for what should not happen. */
static inline void run_idle(void) {
        for (int i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
}

/* The loop and both connections, not started yet: each side adds its objects and
 * filters, then fake_peer_start(). */
static inline void fake_peer_new(sd_bus **ret_bus, sd_bus **ret_fake) {
        int pair[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
        assert_true(sd_event_new(&event) >= 0);

        assert_true(sd_bus_new(ret_fake) >= 0);
        assert_true(sd_bus_set_fd(*ret_fake, pair[1], pair[1]) >= 0);
        assert_true(sd_bus_set_server(*ret_fake, true,
                                      SD_ID128_MAKE(5a,4b,3c,2d,1e,0f,00,11,22,33,44,55,66,77,88,99)) >= 0);

        assert_true(sd_bus_new(ret_bus) >= 0);
        assert_true(sd_bus_set_fd(*ret_bus, pair[0], pair[0]) >= 0);
}

static inline void fake_peer_start(sd_bus *bus, sd_bus *fake) {
        assert_true(sd_bus_start(fake) >= 0);
        assert_true(sd_bus_attach_event(fake, event, 0) >= 0);
        assert_true(sd_bus_start(bus) >= 0);
        assert_true(sd_bus_attach_event(bus, event, 0) >= 0);
        RUN_UNTIL(sd_bus_is_ready(bus) > 0 && sd_bus_is_ready(fake) > 0);
}

static inline void fake_peer_done(sd_bus **bus, sd_bus **fake) {
        *bus = sd_bus_flush_close_unref(*bus);
        *fake = sd_bus_flush_close_unref(*fake);
        event = sd_event_unref(event);
}
