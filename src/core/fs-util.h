/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

/* Removes path and everything below it without following any symlink (the tree was
 * written by untrusted code). */
int rm_rf(const char *path);
/* The same in a child process, so a huge tree never stalls the event loop. */
int rm_rf_async(sd_event *event, const char *path);
