/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <signal.h>
#include <sys/syscall.h>

#include "payload.h"

static const char * const payload_kind_table[_PAYLOAD_KIND_MAX] = {
        [PAYLOAD_BWRAP] = "bwrap",
        [PAYLOAD_DOCKER] = "docker",
};

const char *payload_kind_to_string(PayloadKind k) {
        return k >= 0 && k < _PAYLOAD_KIND_MAX ? payload_kind_table[k] : NULL;
}

PayloadKind payload_kind_from_string(const char *s) {
        for (PayloadKind k = 0; k < _PAYLOAD_KIND_MAX; k++)
                if (s && streq(s, payload_kind_table[k]))
                        return k;
        return _PAYLOAD_KIND_INVALID;
}

int payload_release(PayloadProcess *p) {
        static const char go = 'G';
        ssize_t n;

        if (p->release_fd < 0)
                return -EBADF;
        n = write(p->release_fd, &go, 1);
        p->release_fd = safe_close(p->release_fd);
        return n == 1 ? 0 : -EPIPE;
}

void payload_process_abort(PayloadProcess *p) {
        /* Kill first: EOF on the block pipe would let bwrap go on (it reads "anything"
         * as go). The child dies with its monitor (--die-with-parent). */
        if (p->pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        payload_process_done(p);
}

void payload_process_done(PayloadProcess *p) {
        p->release_fd = safe_close(p->release_fd);
        p->info_fd = safe_close(p->info_fd);
        p->child_pid = 0;
        p->pidfd = safe_close(p->pidfd);
        p->pid = 0;
}
