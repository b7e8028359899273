/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The manager's own state (src/core/manager.c) through its entry points, without a system
 * (fake-payload.h): templates created, replaced and removed through the API; names (taken,
 * reused, freed by a stop), lookups across tenants and ListSandboxes' filters and pages; a
 * template's requirements and idle defaults; a create that fails to start (out of
 * descriptors or otherwise) leaving nothing registered; quotas (creates a second, a
 * tenant's over the fleet, the maximum by descriptors) and the turns of creates; a manager
 * that cannot start; a restarted sandboxd adopting what its state files and systemd's fd
 * store say (garbled and unclaimed files, units gone, a payload not to be found or gone,
 * orphaned units stopped once, the fd store told what to keep and what to forget); the
 * warm pool drained at a clean stop. What a user sees is asserted: the error's name and
 * message, the state after, what is left registered and on disk. */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <systemd/sd-daemon.h>

#include "fake-payload.h"
#include "manager-quota.h"
#include "sandbox-errors.h"
#include "statistics.h"
#include "strv.h"

#define SHELL_TEMPLATE                                                                          \
        "{ \"description\": \"a shell\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"] }"
#define IDLE_TEMPLATE                                                                           \
        "{ \"description\": \"idles\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"      \
        "  \"limits\": { \"IdleTimeout\": 600 }, \"idle_action\": \"pause\" }"
#define NEEDS_TEMPLATE                                                                          \
        "{ \"description\": \"needs a tool\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"\
        "  \"requires\": [ { \"path\": \"/usr/lib/no-such-tool-for-sandboxd\","                \
        "                    \"install\": \"apt-get install no-such-tool\" } ] }"

/* A bwrap template with only a description. */
#define DESCRIBED(d) "{ \"description\": \"" d "\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"] }"

static const char *const templates[] = { "shell", SHELL_TEMPLATE, "idle", IDLE_TEMPLATE, "needs", NEEDS_TEMPLATE,
                                         NULL };

static const SandboxCaller root = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .granted = true };

static void store_reserve(void);

static int setup(void **state) {
        fake_core_new(templates);
        return 0;
}

/* The core goes, and the fd store's descriptors are ours again (a test handed some to the
 * manager). */
static int teardown(void **state) {
        fake_core_free();
        store_reserve();
        return 0;
}

static const char *error_name(const SandboxError *e) {
        return sandbox_error_code_to_name(e->code);
}

/* A create of template by caller with config's name (NULL: none), answered: the sandbox. */
static Sandbox *create_as(const SandboxCaller *caller, const char *template, const char *name) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};

        if (name)
                snprintf(config.name, sizeof(config.name), "%s", name);
        assert_int_equal(manager_create_sandbox(manager, caller, template, &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_int_equal(a.state, SANDBOX_RUNNING);
        sandbox_config_done(&config);
        return a.sandbox;
}

/* ---- templates through the API ---- */

static unsigned n_template_records;
static char last_template_record[TEMPLATE_NAME_MAX + 1];

static void on_template_record(const TemplateRecordEvent *ev, void *userdata) {
        n_template_records++;
        snprintf(last_template_record, sizeof(last_template_record), "%s", ev->name);
}

/* The shipped templates in <state>/vendor, before the writable <state>/templates. */
static void use_vendor_dir(const char *name, const char *json) {
        char dir[256], path[512];

        snprintf(dir, sizeof(dir), "%s/vendor", state_dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/%s.json", dir, name);
        write_text(path, json);
        manager->settings.template_dirs = strv_free(manager->settings.template_dirs);
        assert_int_equal(strv_extend(&manager->settings.template_dirs, dir), 0);
        assert_int_equal(strv_extendf(&manager->settings.template_dirs, "%s/templates", state_dir), 0);
        assert_true(manager_load_templates(manager) > 0);
}

/* CreateTemplate that succeeds. */
static void create_template(const char *name, const char *json) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        int r = manager_create_template(manager, name, json, &error);

        if (r < 0)
                fprintf(stderr, "CreateTemplate %s: %s\n", name, sandbox_error_message(&error));
        assert_int_equal(r, 0);
}

static const char *template_description(const char *name) {
        const Template *t = template_set_find(manager_get_templates(manager), name);
        return t ? t->description : NULL;
}

static void test_create_template_refusals(void **state) {
        _cleanup_free_ char *big = NULL;
        char path[256];

        struct {
                const char *name, *json, *message;
        } refused[] = {
                { ".hidden", SHELL_TEMPLATE, "Invalid template name '.hidden'" },
                { "a/b", SHELL_TEMPLATE, "Invalid template name 'a/b'" },
                { "broken", "{ \"payload\": ", "Template broken: " },
                { "wrong", "{ \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"], \"idle_action\": \"sleep\" }",
                  "Template wrong: \"idle_action\" must be" },
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_create_template(manager, refused[i].name, refused[i].json, &error) < 0);
                assert_string_equal(error_name(&error), "InvalidOption");
                if (!strstr(sandbox_error_message(&error), refused[i].message))
                        fprintf(stderr, "MSG: %s\n", sandbox_error_message(&error));
                assert_non_null(strstr(sandbox_error_message(&error), refused[i].message));
                snprintf(path, sizeof(path), "%s/templates/%s.json", state_dir, refused[i].name);
                assert_int_equal(access(path, F_OK), -1);
                assert_null(template_set_find(manager_get_templates(manager), refused[i].name));
        }

        /* The loader's size bound, before anything is parsed. */
        big = malloc(TEMPLATE_FILE_MAX + 1);
        assert_non_null(big);
        memset(big, ' ', TEMPLATE_FILE_MAX);
        big[0] = '{';
        big[TEMPLATE_FILE_MAX - 1] = '}';
        big[TEMPLATE_FILE_MAX] = 0;
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_create_template(manager, "big", big, &error) < 0);
                assert_string_equal(error_name(&error), "InvalidOption");
                assert_non_null(strstr(sandbox_error_message(&error), "Template big: 65536 bytes or more."));
        }

        /* A writable directory that cannot be made: said, nothing loaded. */
        snprintf(path, sizeof(path), "%s/file", state_dir);
        write_text(path, "");
        manager->settings.template_dirs = strv_free(manager->settings.template_dirs);
        assert_int_equal(strv_extendf(&manager->settings.template_dirs, "%s/file/templates", state_dir), 0);
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_create_template(manager, "new", SHELL_TEMPLATE, &error) < 0);
                assert_non_null(strstr(sandbox_error_message(&error), "Failed to create"));
                assert_null(template_set_find(manager_get_templates(manager), "new"));
        }

        /* No template directory at all. */
        manager->settings.template_dirs = strv_free(manager->settings.template_dirs);
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_create_template(manager, "new", SHELL_TEMPLATE, &error) < 0);
                assert_string_equal(error_name(&error), "NotSupported");
                assert_string_equal(sandbox_error_message(&error), "sandboxd has no template directory.");
        }
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_remove_template(manager, "shell", &error) < 0);
                assert_string_equal(error_name(&error), "NoSuchTemplate");
        }
}

static void test_create_replace_remove_template(void **state) {
        ManagerHooks hooks = { .template_record = on_template_record };
        char path[256];

        use_vendor_dir("vendored", DESCRIBED("shipped"));
        n_template_records = 0;
        assert_int_equal(manager_subscribe(manager, &hooks, NULL, NULL), 0);

        /* Created: on disk, listed, recorded, and a sandbox of it starts at once. */
        create_template("mine", DESCRIBED("first"));
        snprintf(path, sizeof(path), "%s/templates/mine.json", state_dir);
        assert_int_equal(access(path, F_OK), 0);
        assert_string_equal(template_description("mine"), "first");
        assert_int_equal(n_template_records, 1);
        assert_string_equal(last_template_record, "mine");
        fake_destroy(create_as(&root, "mine", NULL));

        /* Replaced in place. */
        create_template("mine", DESCRIBED("second"));
        assert_string_equal(template_description("mine"), "second");
        assert_int_equal(n_template_records, 2);

        /* Removed: gone from disk and from the set; a create of it says so. */
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                SandboxConfig config = {};
                Answer a = {};

                assert_int_equal(manager_remove_template(manager, "mine", &error), 0);
                assert_int_equal(access(path, F_OK), -1);
                assert_null(template_set_find(manager_get_templates(manager), "mine"));
                assert_true(manager_create_sandbox(manager, &root, "mine", &config, on_sandbox, &a, &error) < 0);
                assert_string_equal(error_name(&error), "NoSuchTemplate");
                assert_string_equal(sandbox_error_message(&error), "No template 'mine'.");
                assert_int_equal(manager_n_sandboxes(manager), 0);
        }
        /* Twice: there is none. */
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_remove_template(manager, "mine", &error) < 0);
                assert_string_equal(error_name(&error), "NoSuchTemplate");
                assert_string_equal(sandbox_error_message(&error), "No template 'mine'.");
        }
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_remove_template(manager, "../shell", &error) < 0);
                assert_string_equal(error_name(&error), "NoSuchTemplate");
                assert_non_null(template_set_find(manager_get_templates(manager), "shell"));
        }

        /* A shipped one is read-only; overridden, removing the override brings it back. */
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                assert_true(manager_remove_template(manager, "vendored", &error) < 0);
                assert_string_equal(error_name(&error), "TemplateReadOnly");
                assert_non_null(strstr(sandbox_error_message(&error), "Template vendored is shipped with sandboxd"));
                assert_string_equal(template_description("vendored"), "shipped");
        }
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                create_template("vendored", DESCRIBED("local"));
                assert_string_equal(template_description("vendored"), "local");
                assert_int_equal(manager_remove_template(manager, "vendored", &error), 0);
                assert_string_equal(template_description("vendored"), "shipped");
        }
}

/* ---- names, lookups, lists ---- */

static void test_names_taken_and_reused(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Sandbox *s = create_as(&root, "shell", "build"), *found = NULL;
        char message[256];
        Answer a = {};

        /* Taken. */
        snprintf(config.name, sizeof(config.name), "build");
        assert_true(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error) < 0);
        assert_string_equal(error_name(&error), "SandboxExists");
        snprintf(message, sizeof(message), "A sandbox named 'build' exists already: %s.", s->id);
        assert_string_equal(sandbox_error_message(&error), message);
        sandbox_error_done(&error);

        /* Reused, of its own template only. */
        config.reuse_existing = true;
        assert_true(manager_create_sandbox(manager, &root, "idle", &config, on_sandbox, &a, &error) < 0);
        assert_string_equal(error_name(&error), "SandboxExists");
        snprintf(message, sizeof(message), "Sandbox 'build' (%s) is of template shell, not idle.", s->id);
        assert_string_equal(sandbox_error_message(&error), message);
        sandbox_error_done(&error);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_ptr_equal(a.sandbox, s);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(backend.n_start, 1);

        /* Found by name by its owner, not by another uid, not for a tenant. */
        assert_int_equal(manager_lookup_sandbox(manager, &root, "build", &found, &error), 0);
        assert_ptr_equal(found, s);
        assert_int_equal(manager_lookup_sandbox(manager, &root, s->id, &found, &error), 0);
        assert_ptr_equal(found, s);
        found = NULL;
        assert_true(manager_lookup_sandbox(manager, &(SandboxCaller) { .uid = 1000 }, "build", &found, &error) < 0);
        assert_string_equal(error_name(&error), "NoSuchSandbox");
        assert_string_equal(sandbox_error_message(&error), "No sandbox 'build'.");
        sandbox_error_done(&error);
        assert_true(manager_lookup_sandbox(manager, &(SandboxCaller) { .uid = 0, .tenant = "acme", .granted = true },
                                           s->id, &found, &error) < 0);
        assert_string_equal(error_name(&error), "NoSuchSandbox");
        sandbox_error_done(&error);
        assert_true(manager_lookup_sandbox(manager, &root, "no such/name", &found, &error) < 0);
        assert_string_equal(error_name(&error), "NoSuchSandbox");
        sandbox_error_done(&error);
        assert_null(found);

        /* A stopping sandbox's name is free again. */
        backend.hold_stop = true;
        a = (Answer) {};
        assert_int_equal(sandbox_destroy(s, on_sandbox, &a), 0);
        RUN_UNTIL(backend.stop_held);
        assert_true(manager_lookup_sandbox(manager, &root, "build", &found, &error) < 0);
        sandbox_error_done(&error);
        Sandbox *again = create_as(&root, "shell", "build");
        assert_ptr_not_equal(again, s);
        fake_payload_stopped();
        RUN_UNTIL(a.n > 0);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        sandbox_config_done(&config);
        fake_destroy(again);
}

/* A create of "web" whose unit systemd holds, and a second one with ReuseExisting. */
static void create_twice_while_starting(Answer *a, Answer *b) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig first = {}, second = { .reuse_existing = true };

        snprintf(first.name, sizeof(first.name), "web");
        snprintf(second.name, sizeof(second.name), "web");
        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &first, on_sandbox, a, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &second, on_sandbox, b, &error), 0);
        sandbox_config_done(&first);
        sandbox_config_done(&second);
}

/* The second is answered with the one sandbox once it runs; one unit started. */
static void test_reuse_while_starting(void **state) {
        Answer a = {}, b = {};

        create_twice_while_starting(&a, &b);
        run_briefly();
        assert_int_equal(a.n + b.n, 0);
        fake_systemd_release();
        RUN_UNTIL(a.n > 0 && b.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_int_equal(b.code, SANDBOX_ERR_NONE);
        assert_ptr_equal(a.sandbox, b.sandbox);
        assert_int_equal(b.state, SANDBOX_RUNNING);
        assert_int_equal(systemd_fake.n_start, 1);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        fake_destroy(a.sandbox);
}

/* Destroyed before it runs: both creates are answered with the failure, the destroy as
 * done, and nothing is left. */
static void test_reuse_then_destroy_while_starting(void **state) {
        Answer a = {}, b = {}, d = {};

        create_twice_while_starting(&a, &b);
        assert_int_equal(sandbox_destroy(manager_next_sandbox(manager, NULL), on_sandbox, &d), 0);
        fake_systemd_release();
        RUN_UNTIL(a.n > 0 && b.n > 0 && d.n > 0);
        assert_int_equal(a.n, 1);
        assert_int_equal(b.n, 1);
        assert_int_equal(a.code, SANDBOX_ERR_SANDBOX_FAILED);
        assert_string_equal(a.message, "Failed to start sandbox: it stopped while starting.");
        assert_int_equal(b.code, a.code);
        assert_string_equal(b.message, a.message);
        assert_int_equal(d.code, SANDBOX_ERR_NONE);
        run_briefly();
        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_int_equal(backend.n_unit_started, 0);
}

typedef struct Listed {
        unsigned n;
        Sandbox *sandboxes[8];
        int fail_at;    /* the callback fails at this one (1-based); 0 never */
} Listed;

static int on_listed(Sandbox *s, void *userdata) {
        Listed *l = userdata;

        assert_true(l->n < ELEMENTSOF(l->sandboxes));
        l->sandboxes[l->n++] = s;
        return (int) l->n == l->fail_at ? -ECANCELED : 0;
}

static void list(const SandboxCaller *caller, const SandboxListQuery *q, Listed *l, uint64_t *total) {
        *l = (Listed) { .fail_at = l->fail_at };
        assert_int_equal(manager_list_sandboxes(manager, caller, q, on_listed, l, total), 0);
}

static void test_list_filters_and_pages(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxCaller user = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000 };
        Sandbox *a = create_as(&root, "shell", "a"), *b = create_as(&root, "idle", "b"),
                *c = create_as(&root, "shell", NULL);
        SandboxListQuery q = SANDBOX_LIST_QUERY_INIT;
        Answer p = {};
        uint64_t total = 0;
        Listed l = {};

        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 3);
        assert_int_equal(total, 3);
        assert_ptr_equal(l.sandboxes[0], a);
        assert_ptr_equal(l.sandboxes[1], b);
        assert_ptr_equal(l.sandboxes[2], c);

        /* A page: the total is of all that match. */
        q.offset = 1;
        q.limit = 1;
        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 1);
        assert_ptr_equal(l.sandboxes[0], b);
        assert_int_equal(total, 3);
        q.offset = 5;
        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 0);
        assert_int_equal(total, 3);
        q.offset = 0;
        q.limit = 0;

        snprintf(q.template_name, sizeof(q.template_name), "shell");
        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 2);
        assert_ptr_equal(l.sandboxes[1], c);
        snprintf(q.name, sizeof(q.name), "a");
        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 1);
        assert_ptr_equal(l.sandboxes[0], a);
        q = (SandboxListQuery) SANDBOX_LIST_QUERY_INIT;

        assert_int_equal(sandbox_pause(b, on_sandbox, &p, &error), 0);
        RUN_UNTIL(p.n > 0);
        q.state = SANDBOX_PAUSED;
        list(&root, &q, &l, &total);
        assert_int_equal(l.n, 1);
        assert_ptr_equal(l.sandboxes[0], b);
        assert_int_equal(total, 1);
        q.state = -1;

        /* Another uid sees none of root's; a tenant's caller none of no tenant's. */
        list(&user, &q, &l, &total);
        assert_int_equal(l.n, 0);
        assert_int_equal(total, 0);
        list(&(SandboxCaller) { .uid = 0, .tenant = "acme", .granted = true }, &q, &l, &total);
        assert_int_equal(l.n, 0);

        /* The callback's error stops the walk and is returned. */
        l = (Listed) { .fail_at = 2 };
        assert_int_equal(manager_list_sandboxes(manager, &root, &q, on_listed, &l, &total), -ECANCELED);
        assert_int_equal(l.n, 2);

        fake_destroy(a);
        fake_destroy(b);
        fake_destroy(c);
        list(&root, &q, &l, &total);
        assert_int_equal(total, 0);
}

/* ---- what a template asks for ---- */

static void test_template_requires_and_idle_defaults(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer a = {};
        Sandbox *s;

        assert_true(manager_create_sandbox(manager, &root, "needs", &config, on_sandbox, &a, &error) < 0);
        assert_string_equal(error_name(&error), "NotSupported");
        assert_string_equal(sandbox_error_message(&error),
                            "Template needs needs /usr/lib/no-such-tool-for-sandboxd, which is not installed on this "
                            "host. As root: apt-get install no-such-tool");
        run_briefly();
        assert_int_equal(a.n, 0);
        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_int_equal(backend.n_start, 0);
        assert_int_equal(systemd_fake.n_start, 0);
        sandbox_config_done(&config);

        /* The template's IdleTimeout and idle_action, unless the caller said otherwise. */
        s = create_as(&root, "idle", NULL);
        assert_int_equal(s->config.idle_timeout_sec, 600);
        assert_int_equal(s->config.idle_action, IDLE_ACTION_PAUSE);
        fake_destroy(s);

        config = (SandboxConfig) { .idle_timeout_sec = 30, .idle_timeout_set = true,
                                   .idle_action = IDLE_ACTION_DESTROY, .idle_action_set = true };
        a = (Answer) {};
        assert_int_equal(manager_create_sandbox(manager, &root, "idle", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        assert_int_equal(a.sandbox->config.idle_timeout_sec, 30);
        assert_int_equal(a.sandbox->config.idle_action, IDLE_ACTION_DESTROY);
        sandbox_config_done(&config);
        fake_destroy(a.sandbox);
}

/* ---- a create that cannot start ---- */

static void test_start_failure_leaves_nothing(void **state) {
        struct {
                int error;
                const char *name, *message;
        } cases[] = {
                { -EMFILE, "TooManySandboxes",
                  "Failed to start sandbox: sandboxd is out of file descriptors (0 sandboxes, RLIMIT_NOFILE): " },
                { -ENFILE, "TooManySandboxes", "Failed to start sandbox: sandboxd is out of file descriptors" },
                { -EIO, "SandboxFailed", "Failed to start sandbox: Input/output error" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                SandboxConfig config = {};
                Answer a = {};

                backend.start_error = cases[i].error;
                snprintf(config.name, sizeof(config.name), "named");
                assert_true(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error) < 0);
                assert_string_equal(error_name(&error), cases[i].name);
                assert_non_null(strstr(sandbox_error_message(&error), cases[i].message));
                run_briefly();
                assert_int_equal(a.n, 0);
                assert_int_equal(manager_n_sandboxes(manager), 0);
                assert_null(manager_next_sandbox(manager, NULL));
                assert_int_equal(manager->statistics.create_failures, i + 1);
                assert_int_equal(manager_creates_waiting(manager), 0);
                sandbox_config_done(&config);
        }
        /* Its name was not taken, nor a turn: the next create runs. */
        backend.start_error = 0;
        fake_destroy(create_as(&root, "shell", "named"));
}

/* ---- quotas and turns ---- */

static int create_refused(const SandboxCaller *caller, const char *template, SandboxError *error) {
        SandboxConfig config = {};
        Answer a = {};
        int r;

        r = manager_create_sandbox(manager, caller, template, &config, on_sandbox, &a, error);
        run_briefly();
        assert_int_equal(a.n, 0);
        sandbox_config_done(&config);
        return r;
}

/* [OwnerQuota] CreatesPerSecond=: the second create within the second is refused, with
 * its name and message, and starts nothing; root's own have no quota. */
static void test_creates_per_second(void **state) {
        SandboxCaller user = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000, .granted = true };
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s, *r1, *r2;

        manager->settings.tenancy.quota.owner.creates_per_sec = 1;
        manager->settings.tenancy.quota.owner.creates_burst = 1;
        s = create_as(&user, "shell", NULL);
        assert_true(create_refused(&user, "shell", &error) < 0);
        assert_string_equal(error_name(&error), "QuotaExceeded");
        assert_string_equal(sandbox_error_message(&error),
                            "Quota exceeded: owner 1000 may create 1 sandboxes a second (CreatesPerSecond=, a "
                            "burst of 1); try again later.");
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(backend.n_start, 1);

        r1 = create_as(&root, "shell", NULL);
        r2 = create_as(&root, "shell", NULL);
        fake_destroy(r1);
        fake_destroy(r2);
        fake_destroy(s);
}

/* [TenantQuota] Sandboxes=, counted over the fleet: what the other nodes hold (as last
 * read) counts; what this node holds is what manager_tenant_uses() tells them. */
static void test_tenant_quota_over_the_fleet(void **state) {
        SandboxCaller acme = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000, .tenant = "acme", .granted = true };
        SandboxCaller other = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 1000, .tenant = "other", .granted = true };
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        TenantUse *uses = NULL, *fleet;
        QuotaReport report;
        size_t n = 0;
        Sandbox *s;

        manager->settings.tenancy.quota.tenant.sandboxes = 2;
        s = create_as(&acme, "shell", NULL);
        assert_string_equal(sandbox_get_tenant(s), "acme");
        /* A sandbox of no tenant is no tenant's use. */
        Sandbox *mine = create_as(&root, "shell", NULL);

        assert_int_equal(manager_tenant_uses(manager, &uses, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(uses[0].tenant, "acme");
        assert_int_equal(uses[0].use.sandboxes, 1);
        free(uses);

        /* Another node holds one of acme's: acme is full. */
        fleet = calloc(2, sizeof(TenantUse));
        assert_non_null(fleet);
        snprintf(fleet[0].tenant, sizeof(fleet[0].tenant), "acme");
        fleet[0].use.sandboxes = 1;
        snprintf(fleet[1].tenant, sizeof(fleet[1].tenant), "elsewhere");
        fleet[1].use.sandboxes = 5;
        manager_fleet_uses_set(manager, fleet, 2);
        assert_true(create_refused(&acme, "shell", &error) < 0);
        assert_string_equal(error_name(&error), "QuotaExceeded");
        assert_string_equal(sandbox_error_message(&error),
                            "Quota exceeded: tenant acme has 2 of 2 sandboxes (Sandboxes=).");
        sandbox_error_done(&error);
        assert_int_equal(manager_get_quota(manager, &acme, &report), 0);
        assert_string_equal(report.scope, "tenant acme");
        assert_int_equal(report.entries[QUOTA_SANDBOXES].limit, 2);
        assert_int_equal(report.entries[QUOTA_SANDBOXES].use, 2);
        /* Another tenant's quota is its own. */
        fake_destroy(create_as(&other, "shell", NULL));
        assert_int_equal(manager_n_sandboxes(manager), 2);

        /* The other node's use gone: room again. */
        manager_fleet_uses_set(manager, NULL, 0);
        fake_destroy(create_as(&acme, "shell", NULL));
        fake_destroy(s);
        fake_destroy(mine);
        assert_int_equal(manager_tenant_uses(manager, &uses, &n), 0);
        assert_int_equal(n, 0);
        free(uses);
}

/* The maximum of sandboxes, lowered to what RLIMIT_NOFILE has room for (sandboxd.c):
 * refused with TooManySandboxes saying why, before a start could fail with EMFILE. */
static void test_maximum_by_descriptors(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s;

        assert_int_equal(sandbox_fds_needed(10), SANDBOX_FDS_BASE + 10 * SANDBOX_FDS_PER_SANDBOX);
        assert_int_equal(sandbox_fds_room(sandbox_fds_needed(10)), 10);
        assert_int_equal(sandbox_fds_room(1024), 1);
        assert_int_equal(sandbox_fds_room(UINT64_MAX), UINT_MAX);

        manager->settings.max_sandboxes = 1;
        manager->settings.max_sandboxes_by_fds = true;
        s = create_as(&root, "shell", NULL);
        assert_true(create_refused(&root, "shell", &error) < 0);
        assert_string_equal(error_name(&error), "TooManySandboxes");
        assert_string_equal(sandbox_error_message(&error),
                            "The maximum of 1 sandboxes is reached (all sandboxd's descriptor limit, RLIMIT_NOFILE, "
                            "has room for).");
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(backend.n_start, 1);
        fake_destroy(s);
        fake_destroy(create_as(&root, "shell", NULL));
}

/* A create waiting for its turn ([Node] StartsInFlight=) whose template is removed
 * meanwhile: answered NoSuchTemplate when its turn comes, nothing started for it. */
static void test_template_removed_while_waiting(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer first = {}, waiting = {};

        create_template("brief", DESCRIBED("short-lived"));
        manager->settings.tenancy.node.starts_in_flight = 1;
        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &first, &error), 0);
        assert_int_equal(manager_create_sandbox(manager, &root, "brief", &config, on_sandbox, &waiting, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        assert_int_equal(manager_creates_waiting(manager), 1);

        assert_int_equal(manager_remove_template(manager, "brief", &error), 0);
        fake_systemd_release();
        RUN_UNTIL(first.n > 0 && waiting.n > 0);
        assert_int_equal(first.code, SANDBOX_ERR_NONE);
        assert_int_equal(waiting.code, SANDBOX_ERR_NO_SUCH_TEMPLATE);
        assert_string_equal(waiting.message, "Template 'brief' was removed while the create waited.");
        assert_int_equal(manager_creates_waiting(manager), 0);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(backend.n_start, 1);
        sandbox_config_done(&config);
        fake_destroy(first.sandbox);
}

/* Creates still waiting for their turn when sandboxd stops are answered NoReply (what
 * the bus would say), the one starting goes (it has no state to be adopted by). */
static void test_stop_answers_the_waiting(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig config = {};
        Answer first = {}, waiting = {};
        char id[SANDBOX_ID_LEN + 1];

        manager->settings.tenancy.node.starts_in_flight = 1;
        systemd_fake.hold = "StartTransientUnit";
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &first, &error), 0);
        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &waiting, &error), 0);
        RUN_UNTIL(systemd_fake.n_held > 0);
        snprintf(id, sizeof(id), "%s", manager_next_sandbox(manager, NULL)->id);

        manager = manager_free(manager);
        assert_int_equal(waiting.n, 1);
        assert_int_equal(waiting.code, SANDBOX_ERR_NO_REPLY);
        assert_string_equal(waiting.message, "sandboxd stopped before the call was answered.");
        assert_int_equal(first.n, 1);
        assert_int_equal(first.code, SANDBOX_ERR_NO_REPLY);
        assert_int_equal(backend.n_detach, 0);
        assert_false(state_file_exists(id));
        sandbox_config_done(&config);
}

/* ---- a manager that cannot start ---- */

/* manager_new() over state directory dir: its error; nothing is left behind (under ASan:
 * no leak of what it had built). */
static int manager_new_in(const char *dir) {
        ManagerSettings settings;
        Manager *m = NULL;
        int r;

        fake_settings_init(&settings, dir);
        r = manager_new(event, core_bus, &settings, &m);
        manager_settings_done(&settings);
        if (r >= 0)
                manager_free(m);
        else
                assert_null(m);
        return r;
}

static void test_manager_new_refusals(void **state) {
        char dir[256], path[512];

        /* The empty directory bound over /proc's hidden parts has something in it. */
        snprintf(dir, sizeof(dir), "%s/other", state_dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/empty", dir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/empty/planted", dir);
        write_text(path, "");
        assert_int_equal(manager_new_in(dir), -ENOTEMPTY);

        /* The state directory is a file. */
        snprintf(dir, sizeof(dir), "%s/a-file", state_dir);
        write_text(dir, "");
        assert_int_equal(manager_new_in(dir), -ENOTDIR);

        /* Emptied, the first starts. */
        snprintf(dir, sizeof(dir), "%s/other", state_dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(manager_new_in(dir), 0);

        /* The manager of the test is untouched by all this. */
        fake_destroy(create_as(&root, "shell", NULL));
}

/* ---- a restarted sandboxd ---- */

/* systemd's fd store, as sd_listen_fds() hands it over: descriptors 3 to 6, kept ours
 * (on /dev/null) from main() on, so that a test can put a sandbox's socket there. */
#define STORE_FDS 4

static void store_reserve(void) {
        for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + STORE_FDS; fd++)
                if (fcntl(fd, F_GETFD) < 0) {
                        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

                        assert_true(null >= 0);
                        if (null != fd) {
                                assert_int_equal(dup2(null, fd), fd);
                                safe_close(null);
                        }
                }
}

/* What systemd's fd store gives the next sandboxd: the descriptors from 3 on, named by
 * names (colon-separated), in the environment as sd_listen_fds() reads it. */
static void store_hand_over(unsigned n, const char *names) {
        char text[32];

        assert_true(n <= STORE_FDS);
        assert_int_equal(setenv("LISTEN_FDNAMES", names, 1), 0);
        snprintf(text, sizeof(text), "%u", n);
        assert_int_equal(setenv("LISTEN_FDS", text, 1), 0);
        snprintf(text, sizeof(text), "%d", (int) getpid());
        assert_int_equal(setenv("LISTEN_PID", text, 1), 0);
}

/* The fake systemd, answering from a thread while the manager asks it synchronously
 * (manager_adopt_sandboxes() does, before sandboxd serves). */
static volatile bool answering;

static void *answer_thread(void *arg) {
        while (answering) {
                int r = sd_bus_process(fake_bus, NULL);
                assert_true(r >= 0);
                if (r == 0)
                        (void) sd_bus_wait(fake_bus, 10 * 1000);
        }
        return NULL;
}

static int adopt_answered(void) {
        pthread_t thread;
        int n;

        answering = true;
        assert_int_equal(pthread_create(&thread, NULL, answer_thread, NULL), 0);
        n = manager_adopt_sandboxes(manager);
        answering = false;
        assert_int_equal(pthread_join(thread, NULL), 0);
        return n;
}

/* What a test keeps of sandbox s across a restart (s itself goes): its id and unit. */
static void remember(Sandbox *s, char id[static SANDBOX_ID_LEN + 1], char **ret_unit) {
        snprintf(id, SANDBOX_ID_LEN + 1, "%s", s->id);
        *ret_unit = strdup(s->unit);
        assert_non_null(*ret_unit);
}

static void test_adopt_after_restart(void **state) {
        _cleanup_free_ char *unit_kept = NULL, *unit_gone = NULL, *unit_lost = NULL;
        char kept[SANDBOX_ID_LEN + 1], gone[SANDBOX_ID_LEN + 1], lost[SANDBOX_ID_LEN + 1], path[256],
             names[256];
        Sandbox *s_kept = create_as(&root, "shell", "kept"), *s_gone = create_as(&root, "shell", NULL),
                *s_lost = create_as(&root, "shell", NULL), *s;
        const char *orphan = "sandbox-0123456789abcdef.scope";

        remember(s_kept, kept, &unit_kept);
        remember(s_gone, gone, &unit_gone);
        remember(s_lost, lost, &unit_lost);

        /* What systemd keeps in its fd store: kept's and gone's control sockets, the daemon's
         * own (not ours to close), and the output of a process of a sandbox nobody knows. */
        assert_int_equal(dup2(s_kept->control_fd, SD_LISTEN_FDS_START), SD_LISTEN_FDS_START);
        assert_int_equal(dup2(s_gone->control_fd, SD_LISTEN_FDS_START + 1), SD_LISTEN_FDS_START + 1);
        snprintf(names, sizeof(names), "ctl-%s:ctl-%s:varlink:out-0123456789abcdef-1", kept, gone);
        store_hand_over(4, names);

        manager = manager_free(manager);
        assert_int_equal(backend.n_detach, 3);
        assert_true(state_file_exists(kept) && state_file_exists(gone) && state_file_exists(lost));
        /* A state file garbled, one not of ours, a hidden one. */
        snprintf(path, sizeof(path), "%s/sandboxes/fedcba9876543210.json", state_dir);
        write_text(path, "{ \"id\": ");
        snprintf(path, sizeof(path), "%s/sandboxes/notes.txt", state_dir);
        write_text(path, "kept");
        snprintf(path, sizeof(path), "%s/sandboxes/.partial.json", state_dir);
        write_text(path, "{");

        /* systemd runs kept's unit and an orphan (a sandboxd that crashed while starting
         * it), and units whose names are not ours; gone's and lost's are not active any more. */
        assert_int_equal(strv_extend(&systemd_fake.units, unit_kept), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, orphan), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, "sandbox-ab.slice"), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, "sandbox-0123456789ABCDEF.scope"), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, "sandbox-0123456789abcdef.service"), 0);
        systemd_fake.n_stop = 0;

        fake_manager_new();
        assert_int_equal(adopt_answered(), 1);
        run_briefly();

        /* The environment is consumed; gone's socket and the unclaimed descriptor of ours
         * closed, the daemon's left open. */
        assert_null(getenv("LISTEN_FDS"));
        assert_true(fcntl(SD_LISTEN_FDS_START + 1, F_GETFD) < 0);
        assert_true(fcntl(SD_LISTEN_FDS_START + 2, F_GETFD) >= 0);
        assert_true(fcntl(SD_LISTEN_FDS_START + 3, F_GETFD) < 0);

        /* kept is back, running, by name too, its state file kept. */
        s = manager_get_sandbox(manager, kept);
        assert_non_null(s);
        assert_int_equal(sandbox_get_state(s), SANDBOX_RUNNING);
        assert_string_equal(sandbox_get_name(s), "kept");
        assert_int_equal(s->control_fd, SD_LISTEN_FDS_START);
        assert_true(state_file_exists(kept));
        assert_int_equal(manager_n_sandboxes(manager), 1);

        /* gone (its unit ended) and lost (its socket not kept) were stopped and forgotten;
         * so was the orphan unit, and only it of the units nobody has. */
        assert_null(manager_get_sandbox(manager, gone));
        assert_null(manager_get_sandbox(manager, lost));
        assert_false(state_file_exists(gone));
        assert_false(state_file_exists(lost));
        assert_int_equal(systemd_fake.n_stop, 3);
        assert_true(strv_contains(systemd_fake.stopped, unit_gone));
        assert_true(strv_contains(systemd_fake.stopped, unit_lost));
        assert_true(strv_contains(systemd_fake.stopped, orphan));
        assert_false(strv_contains(systemd_fake.stopped, unit_kept));

        /* The garbled state file is removed, what is not a state file is not. */
        snprintf(path, sizeof(path), "%s/sandboxes/fedcba9876543210.json", state_dir);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/sandboxes/notes.txt", state_dir);
        assert_int_equal(access(path, F_OK), 0);
        snprintf(path, sizeof(path), "%s/sandboxes/.partial.json", state_dir);
        assert_int_equal(access(path, F_OK), 0);

        fake_destroy(s);
        assert_false(state_file_exists(kept));
}

/* A sandbox whose state file and socket are there but that cannot be taken up (here: the
 * backend finds no payload of it): stopped and forgotten, its socket closed, nothing left
 * registered; an ephemeral one taken up is stopped at once (its one command went). */
static void test_adopt_failure_releases_everything(void **state) {
        _cleanup_free_ char *unit = NULL, *eunit = NULL;
        Sandbox *s = create_as(&root, "shell", "doomed"), *e;
        char id[SANDBOX_ID_LEN + 1], eid[SANDBOX_ID_LEN + 1], names[128];
        SandboxConfig config = { .ephemeral = true };
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Answer a = {};

        assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
        RUN_UNTIL(a.n > 0);
        assert_int_equal(a.code, SANDBOX_ERR_NONE);
        e = a.sandbox;
        remember(s, id, &unit);
        remember(e, eid, &eunit);
        assert_int_equal(dup2(s->control_fd, SD_LISTEN_FDS_START), SD_LISTEN_FDS_START);
        assert_int_equal(dup2(e->control_fd, SD_LISTEN_FDS_START + 1), SD_LISTEN_FDS_START + 1);
        snprintf(names, sizeof(names), "ctl-%s:ctl-%s", id, eid);
        store_hand_over(2, names);

        manager = manager_free(manager);
        assert_true(state_file_exists(id));
        /* Its payload is not to be found by the next sandboxd's backend. */
        for (unsigned i = 0; i < n_agents; i++)
                if (streq(agents[i].id, id))
                        agents[i].id[0] = 0;
        assert_int_equal(strv_extend(&systemd_fake.units, unit), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, eunit), 0);
        systemd_fake.n_stop = 0;

        fake_manager_new();
        /* The ephemeral one is taken up, to be stopped. */
        assert_int_equal(adopt_answered(), 1);
        RUN_UNTIL(manager_n_sandboxes(manager) == 0);
        run_briefly();
        assert_null(manager_get_sandbox(manager, id));
        assert_null(manager_get_sandbox(manager, eid));
        assert_false(state_file_exists(id));
        assert_false(state_file_exists(eid));
        assert_true(strv_contains(systemd_fake.stopped, unit));
        /* The descriptors systemd gave back are all let go of. */
        assert_true(fcntl(SD_LISTEN_FDS_START, F_GETFD) < 0);
        assert_true(fcntl(SD_LISTEN_FDS_START + 1, F_GETFD) < 0);
        sandbox_config_done(&config);
}

/* Whose payload process is gone (its pid dead, or alive but not in its unit: reused) is
 * not adopted; what systemd's fd store keeps of a sandbox not adopted, and of ours nobody
 * claims, systemd is told to forget (FDSTOREREMOVE), and nothing else. */
static void test_adopt_payload_gone_fd_store_cleared(void **state) {
        _cleanup_close_ int notify = -EBADF;
        _cleanup_free_ char *said = NULL, *unit_dead = NULL, *unit_reused = NULL;
        char dead[SANDBOX_ID_LEN + 1], reused[SANDBOX_ID_LEN + 1], names[256], line[128];
        Sandbox *s;
        pid_t child;

        /* A pid that was a process and is none now. */
        child = fork();
        assert_true(child >= 0);
        if (child == 0)
                _exit(0);
        assert_int_equal(waitpid(child, NULL, 0), child);
        backend.payload_pid = child;
        s = create_as(&root, "shell", NULL);
        remember(s, dead, &unit_dead);
        assert_int_equal(dup2(s->control_fd, SD_LISTEN_FDS_START), SD_LISTEN_FDS_START);
        /* A live process (the test) that is not in the sandbox's unit. */
        backend.payload_pid = getpid();
        s = create_as(&root, "shell", NULL);
        remember(s, reused, &unit_reused);
        assert_int_equal(dup2(s->control_fd, SD_LISTEN_FDS_START + 1), SD_LISTEN_FDS_START + 1);
        snprintf(names, sizeof(names), "ctl-%s:ctl-%s:varlink:err-0123456789abcdef-2", dead, reused);
        store_hand_over(4, names);

        manager = manager_free(manager);
        assert_int_equal(strv_extend(&systemd_fake.units, unit_dead), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, unit_reused), 0);
        fake_manager_new();
        notify = notify_socket_new();
        assert_int_equal(adopt_answered(), 0);
        assert_int_equal(unsetenv("NOTIFY_SOCKET"), 0);
        run_briefly();

        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_false(state_file_exists(dead));
        assert_false(state_file_exists(reused));
        /* Each stopped once: not again as an orphan (whose warning would blame a crash). */
        assert_int_equal(strv_length(systemd_fake.stopped), 2);
        assert_true(strv_contains(systemd_fake.stopped, unit_dead));
        assert_true(strv_contains(systemd_fake.stopped, unit_reused));
        assert_true(fcntl(SD_LISTEN_FDS_START, F_GETFD) < 0);
        assert_true(fcntl(SD_LISTEN_FDS_START + 1, F_GETFD) < 0);
        assert_true(fcntl(SD_LISTEN_FDS_START + 3, F_GETFD) < 0);

        said = notify_read_all(notify);
        for (size_t i = 0; i < 2; i++) {
                const char *id = i == 0 ? dead : reused;

                snprintf(line, sizeof(line), "FDSTOREREMOVE=1\nFDNAME=ctl-%s\n", id);
                assert_non_null(strstr(said, line));
                snprintf(line, sizeof(line), "FDSTOREREMOVE=1\nFDNAME=egr-%s\n", id);
                assert_non_null(strstr(said, line));
        }
        assert_non_null(strstr(said, "FDSTOREREMOVE=1\nFDNAME=err-0123456789abcdef-2\n"));
        assert_null(strstr(said, "varlink"));
}

/* Under systemd: a sandbox's control socket goes into the fd store once it is ready (an
 * ephemeral one's does not: a restart stops it anyway), a restarted sandboxd adopts the
 * sandbox from exactly that descriptor, and its destroy takes it out again. */
static void test_fd_store_round_trip(void **state) {
        _cleanup_close_ int notify = notify_socket_new(), stored = -EBADF;
        char id[SANDBOX_ID_LEN + 1], text[256], expect[128];
        Sandbox *s;
        int fd;

        s = create_as(&root, "shell", "keep");
        snprintf(id, sizeof(id), "%s", s->id);
        assert_true(notify_recv(notify, text, sizeof(text), &stored));
        snprintf(expect, sizeof(expect), "FDSTORE=1\nFDNAME=ctl-%s", id);
        assert_string_equal(text, expect);
        assert_true(stored >= 0);
        /* The sandbox's own control socket. */
        {
                struct stat a, b;

                assert_int_equal(fstat(stored, &a), 0);
                assert_int_equal(fstat(s->control_fd, &b), 0);
                assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
        }
        assert_false(notify_recv(notify, text, sizeof(text), &fd));

        /* An ephemeral one: nothing stored, nothing to drop. */
        {
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                SandboxConfig config = { .ephemeral = true };
                Answer a = {};

                assert_int_equal(manager_create_sandbox(manager, &root, "shell", &config, on_sandbox, &a, &error), 0);
                RUN_UNTIL(a.n > 0);
                assert_int_equal(a.code, SANDBOX_ERR_NONE);
                fake_destroy(a.sandbox);
                sandbox_config_done(&config);
                assert_false(notify_recv(notify, text, sizeof(text), &fd));
        }

        /* sandboxd restarts; systemd hands back what it stored. */
        manager = manager_free(manager);
        assert_false(notify_recv(notify, text, sizeof(text), &fd));
        assert_int_equal(dup2(stored, SD_LISTEN_FDS_START), SD_LISTEN_FDS_START);
        stored = safe_close(stored);
        snprintf(text, sizeof(text), "ctl-%s", id);
        store_hand_over(1, text);
        assert_int_equal(strv_consume(&systemd_fake.units, sandbox_unit_name(id, "scope")), 0);
        fake_manager_new();
        assert_int_equal(adopt_answered(), 1);
        s = manager_get_sandbox(manager, id);
        assert_non_null(s);
        assert_int_equal(sandbox_get_state(s), SANDBOX_RUNNING);
        assert_int_equal(s->control_fd, SD_LISTEN_FDS_START);

        /* Destroyed: dropped from the store. */
        fake_destroy(s);
        assert_true(notify_recv(notify, text, sizeof(text), &fd));
        assert_true(fd < 0);
        snprintf(expect, sizeof(expect), "FDSTOREREMOVE=1\nFDNAME=ctl-%s", id);
        assert_string_equal(text, expect);
        assert_int_equal(unsetenv("NOTIFY_SOCKET"), 0);
}

/* systemd failing what adoption asks: without the list of units, the sandboxes are still
 * taken up (orphans wait for the next start); a StopUnit that fails leaves no state file
 * or sandbox behind all the same. */
static void test_adopt_when_systemd_fails(void **state) {
        _cleanup_free_ char *unit_kept = NULL, *unit_lost = NULL;
        Sandbox *kept = create_as(&root, "shell", NULL), *lost = create_as(&root, "shell", NULL);
        char id_kept[SANDBOX_ID_LEN + 1], id_lost[SANDBOX_ID_LEN + 1], names[64];

        remember(kept, id_kept, &unit_kept);
        remember(lost, id_lost, &unit_lost);
        assert_int_equal(dup2(kept->control_fd, SD_LISTEN_FDS_START), SD_LISTEN_FDS_START);
        snprintf(names, sizeof(names), "ctl-%s", id_kept);
        store_hand_over(1, names);
        manager = manager_free(manager);

        assert_int_equal(strv_extend(&systemd_fake.units, unit_kept), 0);
        assert_int_equal(strv_extend(&systemd_fake.units, "sandbox-0123456789abcdef.scope"), 0);
        fake_manager_new();
        systemd_fake.fail = "ListUnitsByPatterns";
        assert_int_equal(adopt_answered(), 1);
        run_briefly();
        assert_non_null(manager_get_sandbox(manager, id_kept));
        assert_null(manager_get_sandbox(manager, id_lost));
        assert_false(state_file_exists(id_lost));
        /* lost's unit only: the orphan was not listed. */
        assert_int_equal(strv_length(systemd_fake.stopped), 1);
        assert_string_equal(systemd_fake.stopped[0], unit_lost);

        /* Now its stop fails: the sandbox is gone for the caller all the same. */
        systemd_fake.fail = "StopUnit";
        fake_destroy(manager_get_sandbox(manager, id_kept));
        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_false(state_file_exists(id_kept));
        systemd_fake.fail = NULL;
}

/* Without the fd store (sandboxd not run by systemd), nothing can be taken up: every
 * sandbox left is stopped, and adopting twice finds nothing more. */
static void test_adopt_without_fd_store(void **state) {
        Sandbox *a = create_as(&root, "shell", NULL), *b = create_as(&root, "idle", NULL);
        char ida[SANDBOX_ID_LEN + 1], idb[SANDBOX_ID_LEN + 1];

        snprintf(ida, sizeof(ida), "%s", a->id);
        snprintf(idb, sizeof(idb), "%s", b->id);
        assert_int_equal(unsetenv("LISTEN_FDS"), 0);
        manager = manager_free(manager);
        fake_manager_new();
        systemd_fake.n_stop = 0;
        assert_int_equal(adopt_answered(), 0);
        run_briefly();
        assert_int_equal(manager_n_sandboxes(manager), 0);
        assert_int_equal(systemd_fake.n_stop, 2);
        assert_false(state_file_exists(ida));
        assert_false(state_file_exists(idb));
        assert_int_equal(backend.n_adopt, 0);

        assert_int_equal(adopt_answered(), 0);
        run_briefly();
        assert_int_equal(systemd_fake.n_stop, 2);
}

/* ---- the warm pool at a clean stop ---- */

#define POOL_TEMPLATE                                                                           \
        "{ \"description\": \"pooled\", \"payload\": \"bwrap\", \"ro_binds\": [\"/usr\"],"    \
        "  \"pool\": { \"size\": 1 } }"

static int setup_pool(void **state) {
        static const char *const pool_templates[] = { "pooled", POOL_TEMPLATE, "shell", SHELL_TEMPLATE, NULL };

        fake_core_new(pool_templates);
        return 0;
}

static void on_drained(void *userdata) {
        (*(unsigned *) userdata)++;
}

/* DrainPool: the pool's sandboxes go, the callback once they are gone, no refill after;
 * a caller's sandbox is not the pool's and stays. */
static void test_drain_pool(void **state) {
        Sandbox *mine = create_as(&root, "shell", NULL), *pooled;
        unsigned drained = 0, n_start;

        pool_schedule_refill(manager, 0);
        RUN_UNTIL(manager->pooled && manager->pooled->state == SANDBOX_RUNNING);
        pooled = manager->pooled;
        assert_int_equal(manager_n_sandboxes(manager), 2);

        backend.hold_stop = true;
        assert_int_equal(manager_drain_pool(manager, on_drained, &drained), 1);
        RUN_UNTIL(backend.stop_held == pooled);
        run_briefly();
        assert_int_equal(drained, 0);
        fake_payload_stopped();
        RUN_UNTIL(drained > 0);
        assert_int_equal(drained, 1);
        assert_null(manager->pooled);
        assert_int_equal(manager_n_sandboxes(manager), 1);
        assert_int_equal(mine->state, SANDBOX_RUNNING);

        /* Drained for good: nothing refills it. */
        n_start = backend.n_start;
        pool_schedule_refill(manager, 0);
        run_briefly();
        assert_int_equal(backend.n_start, n_start);
        assert_null(manager->pooled);

        /* Nothing to drain: at once. */
        assert_int_equal(manager_drain_pool(manager, on_drained, &drained), 0);
        assert_int_equal(drained, 2);
        fake_destroy(mine);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_template_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_replace_remove_template, setup, teardown),
                cmocka_unit_test_setup_teardown(test_names_taken_and_reused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reuse_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reuse_then_destroy_while_starting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_filters_and_pages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_template_requires_and_idle_defaults, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_failure_leaves_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_creates_per_second, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tenant_quota_over_the_fleet, setup, teardown),
                cmocka_unit_test_setup_teardown(test_maximum_by_descriptors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_template_removed_while_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_answers_the_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_manager_new_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_after_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_failure_releases_everything, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_payload_gone_fd_store_cleared, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fd_store_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_when_systemd_fails, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt_without_fd_store, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drain_pool, setup_pool, teardown),
        };

        store_reserve();
        return cmocka_run_group_tests(tests, NULL, NULL);
}
