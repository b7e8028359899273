/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fs-util.h"
#include "macro.h"

static int rm_rf_children(int dir_fd) {
        DIR *d = fdopendir(dir_fd);
        struct dirent *de;
        int r = 0;

        if (!d) {
                safe_close(dir_fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                /* O_NOFOLLOW|O_DIRECTORY: a symlink is unlinked, never entered. */
                int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) {
                        int k = rm_rf_children(fd);
                        if (k < 0 && r == 0)
                                r = k;
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && r == 0)
                                r = -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int rm_rf(const char *path) {
        int fd, r;

        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        r = rm_rf_children(fd);
        if (rmdir(path) < 0 && r == 0)
                r = -errno;
        return r;
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        sd_event_source_unref(s);
        return 0;
}

int rm_rf_async(sd_event *event, const char *path) {
        sd_event_source *source = NULL;
        pid_t pid;
        int r;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                (void) signal(SIGTERM, SIG_DFL);
                _exit(rm_rf(path) < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
        }
        r = sd_event_add_child(event, &source, pid, WEXITED, on_child, NULL);
        if (r < 0) {
                /* Cannot watch it: wait here rather than leave a zombie. */
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        return 0;
}
