/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libsandbox-client over D-Bus: the file methods. Paths are resolved inside the sandbox, by
 * its agent; Upload and Download hand the caller's descriptor to the agent itself. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-client-internal.h"

void sandbox_file_entry_done(SandboxFileEntry *e) {
        free(e->path);
        free(e->type);
        free(e->target);
        free(e->path_raw);
        free(e->target_raw);
        *e = (SandboxFileEntry) {};
}

static void file_entry_done(void *item) {
        sandbox_file_entry_done(item);
}

void sandbox_file_entry_array_free(SandboxFileEntry *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxFileEntry), file_entry_done);
}

/* The exact bytes of a name that is not UTF-8 (an "ay" of the entry); none: NULL. */
static int raw_name_read(sd_bus_message *m, void **ret, size_t *ret_size) {
        const void *p;
        size_t n;
        int r;

        r = sd_bus_message_read_array(m, 'y', &p, &n);
        if (r < 0 || n == 0)
                return r;
        *ret = malloc(n);
        if (!*ret)
                return -ENOMEM;
        memcpy(*ret, p, n);
        *ret_size = n;
        return 0;
}

/* 1 with an entry, 0 at the end of an array. */
static int file_entry_read(sd_bus_message *m, void *item) {
        SandboxFileEntry *e = item;
        const char *path, *type, *target;
        int r;

        r = sd_bus_message_enter_container(m, 'r', "sstuxsayay");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "sstuxs", &path, &type, &e->size, &e->mode, &e->mtime, &target);
        if (r < 0)
                return r;
        e->path = strdup(path);
        e->type = strdup(type);
        e->target = strdup(target);
        if (!e->path || !e->type || !e->target)
                return -ENOMEM;
        r = raw_name_read(m, &e->path_raw, &e->path_raw_size);
        if (r >= 0)
                r = raw_name_read(m, &e->target_raw, &e->target_raw_size);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 1;
}

int client_read_file_entry(sd_bus_message *m, SandboxFileEntry *ret) {
        SandboxFileEntry e = {};
        int r;

        r = file_entry_read(m, &e);
        if (r <= 0) {
                sandbox_file_entry_done(&e);
                return r < 0 ? r : -EBADMSG;
        }
        *ret = e;
        return 0;
}

static int file_call_new(SandboxHandle *h, const char *member, const char *path, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = client_new_call(h->client, h, member, &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", path);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

static int append_write_options(sd_bus_message *m, const SandboxWriteOptions *o) {
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && o && o->mode >= 0)
                r = sd_bus_message_append(m, "{sv}", "Mode", "u", (uint32_t) o->mode);
        if (r >= 0 && o && o->create_parents)
                r = sd_bus_message_append(m, "{sv}", "CreateParents", "b", 1);
        if (r >= 0 && o && o->append)
                r = sd_bus_message_append(m, "{sv}", "Append", "b", 1);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* Sends m (built) and reads its "t" reply into *ret_bytes (may be NULL). */
static int call_bytes(SandboxHandle *h, sd_bus_message *m, uint64_t usec, bool interruptible,
                      uint64_t *ret_bytes, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint64_t bytes;
        int r;

        r = client_call(h->client, m, usec, interruptible, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "t", &bytes);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        if (ret_bytes)
                *ret_bytes = bytes;
        return 0;
}

int sandbox_handle_read_file(SandboxHandle *h, const char *path, uint64_t offset, uint64_t length,
                             void **ret_data, size_t *ret_size, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = file_call_new(h, "ReadFile", path, &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "tt", offset, length);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        return client_read_bytes(reply, ret_data, ret_size);
}

int sandbox_handle_write_file(SandboxHandle *h, const char *path, const void *data, size_t size,
                              const SandboxWriteOptions *o, uint64_t *ret_bytes, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = file_call_new(h, "WriteFile", path, &m);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', data, size);
        if (r >= 0)
                r = append_write_options(m, o);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        return call_bytes(h, m, 0, /* interruptible= */ false, ret_bytes, error);
}

int sandbox_handle_upload(SandboxHandle *h, const char *path, int fd, const SandboxWriteOptions *o,
                          uint64_t *ret_bytes, SandboxClientError *error) {
        /* The message holds a copy of fd: freed on return, so that a pipe's reader sees its end. */
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = file_call_new(h, "Upload", path, &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "h", fd);
        if (r >= 0)
                r = append_write_options(m, o);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        /* A large file takes as long as it takes. */
        return call_bytes(h, m, UINT64_MAX, /* interruptible= */ true, ret_bytes, error);
}

int sandbox_handle_download(SandboxHandle *h, const char *path, int fd, uint64_t max, uint64_t *ret_bytes,
                            SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = file_call_new(h, "Download", path, &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "h", fd);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && max != UINT64_MAX)
                r = sd_bus_message_append(m, "{sv}", "Max", "t", max);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        return call_bytes(h, m, UINT64_MAX, /* interruptible= */ true, ret_bytes, error);
}

int sandbox_handle_list_files(SandboxHandle *h, const char *path, unsigned depth, SandboxFileEntry **ret,
                              size_t *ret_n, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = file_call_new(h, "ListFiles", path, &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "u", (uint32_t) depth);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        return client_read_array(reply, "(sstuxsayay)", sizeof(SandboxFileEntry), file_entry_read, file_entry_done,
                                 (void **) ret, ret_n);
}

int sandbox_handle_stat(SandboxHandle *h, const char *path, SandboxFileEntry *ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = file_call_new(h, "Stat", path, &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        return client_read_file_entry(reply, ret);
}

int sandbox_handle_mkdir(SandboxHandle *h, const char *path, bool parents, SandboxClientError *error) {
        return client_call_method(h->client, h, "MakeDirectory", error, "sb", path, (int) parents);
}

int sandbox_handle_remove(SandboxHandle *h, const char *path, bool recursive, SandboxClientError *error) {
        return client_call_method(h->client, h, "Remove", error, "sb", path, (int) recursive);
}

int sandbox_handle_move(SandboxHandle *h, const char *path, const char *to, SandboxClientError *error) {
        return client_call_method(h->client, h, "Move", error, "ss", path, to);
}
