/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Terminal sessions: the pseudo-terminal of a "tty" exec, opened on the sandbox's own
 * devpts (bwrap --dev), and the process that relays it to the caller's descriptors, so
 * that a slow reader never stalls PID 1.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "sandbox-init.h"

/* At most PIPE_BUF: a write of that much to a pipe that poll() calls writable does not
 * block, so the relay never sits in write() while the other direction waits. */
#define RELAY_BUFFER_SIZE 4096U

int pty_open(const struct agent_winsize *ws, int *ret_master, int *ret_slave) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        struct winsize w = { .ws_row = ws->rows, .ws_col = ws->cols };
        char name[64];
        int r;

        /* O_NOCTTY on both ends: bwrap --new-session made the agent a session leader
         * without a terminal, and the first one it opened would otherwise become its own. */
        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        if (grantpt(master) < 0 || unlockpt(master) < 0)
                return -errno;

        /* The peer straight from the master (Linux 4.13+), not by name in /dev/pts, where
         * the sandbox's code could race us; by name on older kernels. */
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
                if (errno != EINVAL && errno != ENOTTY)
                        return -errno;
                r = ptsname_r(master, name, sizeof(name));
                if (r != 0)
                        return -r;
                slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (slave < 0)
                        return -errno;
        }

        /* Set before the session starts, so that its first TIOCGWINSZ sees it. */
        if (ioctl(master, TIOCSWINSZ, &w) < 0)
                return -errno;

        *ret_master = TAKE_FD(master);
        *ret_slave = TAKE_FD(slave);
        return 0;
}

struct relay_buffer {
        char data[RELAY_BUFFER_SIZE];
        size_t start, end;
};

static bool relay_buffer_empty(const struct relay_buffer *b) {
        return b->start == b->end;
}

/* Reads into an empty buffer: > 0 bytes read, 0 on EOF, -EAGAIN to retry, or -errno. */
static ssize_t relay_fill(int fd, struct relay_buffer *b) {
        ssize_t n = read(fd, b->data, sizeof(b->data));

        if (n < 0)
                return errno == EINTR ? -EAGAIN : -errno;
        b->start = 0;
        b->end = (size_t) n;
        return n;
}

/* Writes what it can of the buffer: 0, or -errno (not -EAGAIN). */
static int relay_drain(int fd, struct relay_buffer *b) {
        ssize_t n = write(fd, b->data + b->start, b->end - b->start);

        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 0 : -errno;
        b->start += (size_t) n;
        return 0;
}

_noreturn_ void tty_relay(int master, int in, int out) {
        struct relay_buffer to_master = {}, to_out = {};
        bool in_open = true, master_hup = false;
        sigset_t none;
        ssize_t n;

        /* The agent's signal setup, minus what it needs as PID 1: a caller that went away
         * must be EPIPE here, not a signal. */
        for (int sig = 1; sig < _NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        (void) signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        /* Nothing but the session's descriptors: above all not the control socket, nor the
         * terminals of other sessions. Only the master is ours to make non-blocking. */
        if (close_all_but((int[]) { master, in, out }, 3) < 0 ||
            fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK) < 0)
                _exit(EXIT_FAILURE);

        for (;;) {
                struct pollfd p[] = {
                        { .fd = in_open && relay_buffer_empty(&to_master) ? in : -1, .events = POLLIN },
                        { .fd = master },
                        { .fd = out, .events = relay_buffer_empty(&to_out) ? 0 : POLLOUT },
                };

                /* A hung-up master reports POLLHUP for as long as we poll it: only then, when
                 * what is left of the output is on its way, read the rest and its EIO. */
                if (relay_buffer_empty(&to_out))
                        p[1].events |= POLLIN;
                if (!master_hup && !relay_buffer_empty(&to_master))
                        p[1].events |= POLLOUT;
                if (p[1].events == 0)
                        p[1].fd = -1;

                if (poll(p, ELEMENTSOF(p), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(EXIT_FAILURE);
                }

                /* The caller closed its end of the output: the session has nobody left. */
                if (p[2].revents & (POLLERR | POLLHUP | POLLNVAL))
                        _exit(EXIT_SUCCESS);

                if (p[0].revents) {
                        n = relay_fill(in, &to_master);
                        /* EOF on input ends the input only: the session may still write. */
                        if (n == 0 || (n < 0 && n != -EAGAIN))
                                in_open = false;
                }

                if (p[1].revents & POLLHUP)
                        master_hup = true;
                if ((p[1].revents & POLLOUT) && !relay_buffer_empty(&to_master) &&
                    relay_drain(master, &to_master) < 0)
                        master_hup = true;
                if (master_hup)
                        to_master.start = to_master.end = 0; /* nobody left to read it */

                if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && relay_buffer_empty(&to_out)) {
                        n = relay_fill(master, &to_out);
                        /* EIO: every process of the session has closed the terminal, and
                         * all it wrote has been read. */
                        if (n == 0 || (n < 0 && n != -EAGAIN))
                                _exit(EXIT_SUCCESS);
                }

                if ((p[2].revents & POLLOUT) && relay_drain(out, &to_out) < 0)
                        _exit(EXIT_SUCCESS); /* EPIPE: the caller is gone */
        }
}
