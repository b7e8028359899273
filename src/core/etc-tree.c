/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "etc-tree.h"
#include "fd-util.h"
#include "strv.h"
#include "template.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Host files copied as they are: no larger than this. */
#define ETC_HOST_FILE_MAX (1024U * 1024U)

/* uid 0 and 65534 are not mapped in the sandbox's user namespace (files of the host's
 * show as nobody); they are named all the same, as programs expect them. */
static const char etc_passwd[] =
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        SANDBOX_USER ":x:" STRINGIFY(SANDBOX_UID) ":" STRINGIFY(SANDBOX_GID) ":" SANDBOX_USER ":"
        SANDBOX_HOME ":" SANDBOX_SHELL "\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";

static const char etc_group[] =
        "root:x:0:\n"
        SANDBOX_USER ":x:" STRINGIFY(SANDBOX_GID) ":\n"
        "nogroup:x:65534:\n";

/* The sandbox's own name resolves to loopback like localhost (as Debian's 127.0.1.1). */
static const char etc_hosts[] =
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        "127.0.1.1\t" SANDBOX_HOSTNAME "\n";

/* Files only: a sandbox has no network, so there is no DNS to ask. When sandboxes get
 * network (an egress allowlist), "hosts:" gains "dns" and the tree a resolv.conf that
 * names the resolver the sandbox may reach. */
static const char etc_nsswitch[] =
        "passwd:         files\n"
        "group:          files\n"
        "shadow:         files\n"
        "hosts:          files\n"
        "networks:       files\n"
        "protocols:      files\n"
        "services:       files\n"
        "ethers:         files\n"
        "rpc:            files\n"
        "netgroup:       files\n";

/* Every address of a name in /etc/hosts, not just the first line's (localhost: ::1 too). */
static const char etc_host_conf[] = "multi on\n";

static const char etc_hostname[] = SANDBOX_HOSTNAME "\n";

static const struct {
        const char *name;
        const char *contents;
} etc_generated[] = {
        { "passwd", etc_passwd },
        { "group", etc_group },
        { "hosts", etc_hosts },
        { "nsswitch.conf", etc_nsswitch },
        { "host.conf", etc_host_conf },
        { "hostname", etc_hostname },
        /* Empty here: each sandbox's own is bound over it. */
        { "machine-id", "" },
};

/* Copied from the host's /etc: what the files describe is the same inside. */
static const char * const etc_host_copies[] = { "services", "protocols", "os-release" };

/* Never the template's: the identity files above, the host copies, the time zone, and
 * what names users or resolvers (a template's own would contradict the generated ones). */
static const char * const etc_reserved[] = {
        "passwd", "group", "hosts", "nsswitch.conf", "host.conf", "hostname", "machine-id", "services", "protocols",
        "os-release", "localtime", "resolv.conf", "shadow", "gshadow", "subuid", "subgid", "timezone",
};

int machine_id_generate(char ret[static SANDBOX_MACHINE_ID_LEN + 1]) {
        uint8_t b[SANDBOX_MACHINE_ID_LEN / 2];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return -EIO;
        /* A version 4 UUID, as systemd makes them. */
        b[6] = (b[6] & 0x0F) | 0x40;
        b[8] = (b[8] & 0x3F) | 0x80;
        for (size_t i = 0; i < sizeof(b); i++)
                sprintf(ret + 2 * i, "%02x", b[i]);
        return 0;
}

void etc_tree_done(EtcTree *tree) {
        for (size_t i = 0; i < tree->n; i++) {
                free(tree->entries[i].path);
                free(tree->entries[i].data);
        }
        tree->entries = mfree(tree->entries);
        tree->n = 0;
}

bool etc_name_is_reserved(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(etc_reserved); i++) {
                size_t n = strlen(etc_reserved[i]);
                if (strncmp(name, etc_reserved[i], n) == 0 && (name[n] == 0 || name[n] == '/'))
                        return true;
        }
        return false;
}

static bool path_chars_are_valid(const char *path, bool allow_plus) {
        for (const char *p = path; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '-' || *p == '_' || *p == '.' || *p == '/' || (allow_plus && *p == '+')))
                        return false;
        return true;
}

/* Relative, no empty, "." or ".." component, none hidden. */
static bool path_components_are_valid(const char *path) {
        const char *c = path;

        if (isempty(path) || path[0] == '/')
                return false;
        for (;;) {
                const char *e = strchrnul(c, '/');
                if (e == c || c[0] == '.')
                        return false;
                if (!*e)
                        return true;
                c = e + 1;
        }
}

bool etc_file_path_is_valid(const char *path) {
        return path && strlen(path) <= ETC_FILE_PATH_MAX && path_chars_are_valid(path, false) &&
                path_components_are_valid(path);
}

bool timezone_is_valid(const char *tz) {
        return tz && strlen(tz) <= 64 && path_chars_are_valid(tz, true) && path_components_are_valid(tz);
}

static int tree_add(EtcTree *tree, const char *path, EtcEntryType type, const char *data, size_t size) {
        EtcEntry *a;
        char *p, *d = NULL;

        /* Parents first, each once. */
        for (size_t i = 0; i < tree->n; i++)
                if (streq(tree->entries[i].path, path))
                        return tree->entries[i].type == type && type == ETC_ENTRY_DIR ? 0 : -EEXIST;
        for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                _cleanup_free_ char *parent = strndup(path, (size_t) (s - path));
                int r;

                if (!parent)
                        return -ENOMEM;
                r = tree_add(tree, parent, ETC_ENTRY_DIR, NULL, 0);
                if (r < 0)
                        return r;
        }

        p = strdup(path);
        if (data) {
                d = malloc(size + 1);
                if (d) {
                        memcpy(d, data, size);
                        d[size] = 0;
                }
        }
        a = realloc(tree->entries, sizeof(EtcEntry) * (tree->n + 1));
        if (!p || (data && !d) || !a) {
                free(p);
                free(d);
                if (a)
                        tree->entries = a;
                return -ENOMEM;
        }
        tree->entries = a;
        tree->entries[tree->n++] = (EtcEntry) { .path = p, .type = type, .data = d, .size = size };
        return 0;
}

int etc_tree_build(const Template *t, const char *host_etc, EtcTree *ret) {
        _cleanup_close_ int host_fd = -EBADF;
        _cleanup_free_ char *zone = NULL;
        EtcTree tree = {};
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(etc_generated); i++)
                r = tree_add(&tree, etc_generated[i].name, ETC_ENTRY_FILE, etc_generated[i].contents,
                             strlen(etc_generated[i].contents));

        /* A link, as on the host: programs read the zone's name from it. Where tzdata is
         * missing it dangles, and the C library falls back to UTC. */
        if (r >= 0 && asprintf(&zone, "/usr/share/zoneinfo/%s", t->timezone ?: SANDBOX_TIMEZONE_DEFAULT) < 0)
                r = -ENOMEM;
        if (r >= 0)
                r = tree_add(&tree, "localtime", ETC_ENTRY_SYMLINK, zone, strlen(zone));

        host_fd = open(host_etc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; r >= 0 && host_fd >= 0 && i < ELEMENTSOF(etc_host_copies); i++) {
                _cleanup_free_ char *data = NULL;
                size_t size = 0;

                if (read_regular_file_at(host_fd, etc_host_copies[i], ETC_HOST_FILE_MAX, &data, &size) < 0)
                        continue;
                r = tree_add(&tree, etc_host_copies[i], ETC_ENTRY_FILE, data, size);
        }

        /* Where the template binds host files or directories into /etc, bwrap needs
         * something to mount them on (the tree is read-only to it). */
        for (char * const *b = t->ro_binds; r >= 0 && b && *b; b++) {
                const char *rel;
                struct stat st;

                if (!startswith_str(*b, "/etc/"))
                        continue;
                rel = *b + strlen("/etc/");
                if (stat(*b, &st) < 0)
                        continue;
                r = tree_add(&tree, rel, S_ISDIR(st.st_mode) ? ETC_ENTRY_DIR : ETC_ENTRY_FILE,
                             S_ISDIR(st.st_mode) ? NULL : "", 0);
        }

        for (char * const *f = t->etc_files; r >= 0 && f && f[0] && f[1]; f += 2)
                r = tree_add(&tree, f[0], ETC_ENTRY_FILE, f[1], strlen(f[1]));

        if (r < 0) {
                etc_tree_done(&tree);
                return r;
        }
        *ret = tree;
        return 0;
}

/* FNV-1a: names the tree by what it holds (not a security boundary: the daemon alone
 * writes there). */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                h ^= ((const uint8_t *) p)[i];
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

static uint64_t etc_tree_hash(const EtcTree *tree) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (size_t i = 0; i < tree->n; i++) {
                const EtcEntry *e = &tree->entries[i];
                uint8_t type = (uint8_t) e->type;

                h = hash_bytes(h, e->path, strlen(e->path) + 1);
                h = hash_bytes(h, &type, 1);
                h = hash_bytes(h, &e->size, sizeof(e->size));
                if (e->data)
                        h = hash_bytes(h, e->data, e->size);
        }
        return h;
}

static int write_file_at(int dir_fd, const char *path, const char *data, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        size_t done = 0;

        fd = openat(dir_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        while (done < size) {
                ssize_t n = write(fd, data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        /* Whatever the umask: sandboxes run as uids of their own. */
        if (fchmod(fd, 0644) < 0)
                return -errno;
        return 0;
}

static int etc_tree_write_at(const EtcTree *tree, int dir_fd) {
        for (size_t i = 0; i < tree->n; i++) {
                const EtcEntry *e = &tree->entries[i];
                int r = 0;

                switch (e->type) {
                case ETC_ENTRY_DIR:
                        if (mkdirat(dir_fd, e->path, 0755) < 0 || fchmodat(dir_fd, e->path, 0755, 0) < 0)
                                r = -errno;
                        break;
                case ETC_ENTRY_SYMLINK:
                        if (symlinkat(e->data, dir_fd, e->path) < 0)
                                r = -errno;
                        break;
                case ETC_ENTRY_FILE:
                        r = write_file_at(dir_fd, e->path, e->data, e->size);
                        break;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path) < 0 ? -1 : 0;
}

static int rm_rf(const char *path) {
        return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

int etc_tree_write(const Template *t, const char *host_etc, const char *root, char **ret_path) {
        _cleanup_(etc_tree_done) EtcTree tree = {};
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        int r;

        r = etc_tree_build(t, host_etc, &tree);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s-%016" PRIx64, root, t->name, etc_tree_hash(&tree)) < 0 ||
            asprintf(&tmp, "%s/.%s-XXXXXX", root, t->name) < 0)
                return -ENOMEM;
        if (access(path, F_OK) >= 0)
                goto done;

        if (!mkdtemp(tmp))
                return -errno;
        dir_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0 || fchmod(dir_fd, 0755) < 0)
                r = -errno;
        if (r >= 0)
                r = etc_tree_write_at(&tree, dir_fd);
        /* Complete or not at all; a tree of the same name is one of the same contents. */
        if (r >= 0 && rename(tmp, path) < 0 && errno != EEXIST && errno != ENOTEMPTY)
                r = -errno;
        if (r < 0 || access(tmp, F_OK) >= 0)
                (void) rm_rf(tmp);
        if (r < 0)
                return r;
done:
        *ret_path = TAKE_PTR(path);
        return 0;
}
