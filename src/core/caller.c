/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>

#include "caller.h"
#include "fd-util.h"
#include "macro.h"

int process_get_start_time(pid_t pid, uint64_t *ret) {
        char path[64], buf[2048], *p;
        unsigned long long start;
        ssize_t n;

        if (pid <= 0)
                return -EINVAL;
        snprintf(path, sizeof(path), "/proc/%i/stat", (int) pid);
        n = read_file_head_at(AT_FDCWD, path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        /* The command (field 2) may hold spaces and parentheses: count from its end. */
        p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        /* Fields 3 (state) to 21 come before starttime. */
        for (unsigned field = 3; field <= 22; field++) {
                p += strspn(p, " ");
                if (!*p)
                        return -EIO;
                if (field == 22)
                        break;
                p += strcspn(p, " ");
        }
        if (sscanf(p, "%llu", &start) != 1)
                return -EIO;
        *ret = (uint64_t) start;
        return 0;
}

int sandbox_caller_from_ucred(const struct ucred *ucred, SandboxCaller *ret) {
        uint64_t start_time;
        int r;

        if (ucred->pid <= 0)
                return -EIO;
        r = process_get_start_time(ucred->pid, &start_time);
        if (r < 0)
                return r;
        *ret = (SandboxCaller) {
                .kind = SANDBOX_CALLER_UNIX_PROCESS,
                .uid = ucred->uid,
                .pid = ucred->pid,
                .start_time = start_time,
        };
        return 0;
}

int sandbox_caller_from_socket(int fd, SandboxCaller *ret) {
        struct ucred ucred;
        socklen_t l = sizeof(ucred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &ucred, &l) < 0)
                return -errno;
        if (l != sizeof(ucred))
                return -EIO;
        return sandbox_caller_from_ucred(&ucred, ret);
}
