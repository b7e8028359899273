/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "bus-caller.h"
#include "bus-flow.h"
#include "bus-util.h"
#include "config.h"
#include "secret-store.h"
#include "log.h"
#include "manager.h"
#include "payload.h"
#include "recorder-dbus.h"
#include "sandboxd-conf.h"
#include "sandbox-dbus.h"
#include "sandbox-varlink.h"
#include "seccomp-policy.h"
#include "strv.h"
#include "time-util.h"

typedef struct Daemon {
        sd_event *event;
        sd_bus *bus;
        Manager *manager;
        Recorder *recorder;
        BusFrontend bus_frontend;
        VarlinkFrontend varlink_frontend;
} Daemon;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Runs sandboxes for untrusted code as transient systemd scopes.\n\n"
               "  -h --help                 Show this help\n"
               "     --version              Show package version\n"
               "     --template-dir=DIR     Load templates from DIR (repeatable; replaces the\n"
               "                            defaults; later directories override earlier ones)\n"
               "     --state-dir=DIR        Where the state of running sandboxes is kept,\n"
               "                            for adopting them after a restart (default %s)\n"
               "     --agent=PATH           The sandbox-init binary (default %s)\n"
               "     --bwrap=PATH           The bubblewrap binary (default %s)\n"
               "     --docker-socket=PATH   The Docker Engine API socket (default %s)\n"
               "     --max-sandboxes=N      Refuse to create more than N sandboxes (default %u)\n"
               "     --config=PATH          Read PATH and PATH.d/*.conf instead of\n"
               "                            %s and its .d (sandboxd.conf(5))\n"
               "     --workspace-dir=DIR    The pool of workspaces on disk (default %s)\n"
               "     --secrets-dir=DIR      The secret store (default %s)\n"
               "     --setup-workspaces     Make the pool (a btrfs with quotas) and exit\n"
               "     --debug                Log debug messages\n"
               "     --dump-seccomp         Print the sandboxes' seccomp policy as a Docker\n"
               "                            seccomp profile (JSON) and exit\n"
               "\nSee the sandboxd(8) man page for details.\n",
               program_invocation_short_name, SANDBOX_RUNTIME_DIR, SANDBOX_AGENT_PATH, BWRAP_PATH, DOCKER_SOCKET_DEFAULT,
               SANDBOX_MAX_DEFAULT, SANDBOX_CONF_FILE, SANDBOX_WORKSPACE_DIR, SECRETS_DIR_DEFAULT);
}

static int set_path(char **dest, const char *arg, const char *what) {
        if (arg[0] != '/')
                return log_error_errno(EINVAL, "%s must be an absolute path: %s", what, arg);
        char *d = strdup(arg);
        if (!d)
                return log_error_errno(ENOMEM, "Out of memory.");
        free(*dest);
        *dest = d;
        return 0;
}

static int parse_argv(int argc, char *argv[], ManagerSettings *s, char **config_path, bool *setup_workspaces) {
        enum {
                ARG_VERSION = 0x100,
                ARG_TEMPLATE_DIR,
                ARG_STATE_DIR,
                ARG_AGENT,
                ARG_BWRAP,
                ARG_DOCKER_SOCKET,
                ARG_MAX_SANDBOXES,
                ARG_DEBUG,
                ARG_DUMP_SECCOMP,
                ARG_CONFIG,
                ARG_WORKSPACE_DIR,
                ARG_SETUP_WORKSPACES,
                ARG_SECRETS_DIR,
        };
        static const struct option options[] = {
                { "help",          no_argument,       NULL, 'h'               },
                { "version",       no_argument,       NULL, ARG_VERSION       },
                { "template-dir",  required_argument, NULL, ARG_TEMPLATE_DIR  },
                { "state-dir",     required_argument, NULL, ARG_STATE_DIR     },
                { "agent",         required_argument, NULL, ARG_AGENT         },
                { "bwrap",         required_argument, NULL, ARG_BWRAP         },
                { "docker-socket", required_argument, NULL, ARG_DOCKER_SOCKET },
                { "max-sandboxes", required_argument, NULL, ARG_MAX_SANDBOXES },
                { "debug",         no_argument,       NULL, ARG_DEBUG         },
                { "dump-seccomp",  no_argument,       NULL, ARG_DUMP_SECCOMP  },
                { "config",        required_argument, NULL, ARG_CONFIG        },
                { "workspace-dir", required_argument, NULL, ARG_WORKSPACE_DIR },
                { "setup-workspaces", no_argument,    NULL, ARG_SETUP_WORKSPACES },
                { "secrets-dir",   required_argument, NULL, ARG_SECRETS_DIR   },
                {}
        };
        bool template_dirs_given = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        puts(PACKAGE_VERSION);
                        return 0;
                case ARG_TEMPLATE_DIR:
                        if (!template_dirs_given) {
                                s->template_dirs = strv_free(s->template_dirs);
                                template_dirs_given = true;
                        }
                        if (optarg[0] != '/')
                                return log_error_errno(EINVAL, "--template-dir= must be an absolute path: %s", optarg);
                        if (strv_extend(&s->template_dirs, optarg) < 0)
                                return log_error_errno(ENOMEM, "Out of memory.");
                        break;
                case ARG_STATE_DIR:
                        r = set_path(&s->state_dir, optarg, "--state-dir=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_SECRETS_DIR:
                        r = set_path(&s->secrets_dir, optarg, "--secrets-dir=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_AGENT:
                        r = set_path(&s->agent_path, optarg, "--agent=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_BWRAP:
                        r = set_path(&s->bwrap_path, optarg, "--bwrap=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_DOCKER_SOCKET:
                        r = set_path(&s->docker_socket, optarg, "--docker-socket=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_MAX_SANDBOXES: {
                        char *end;
                        unsigned long n;
                        errno = 0;
                        n = strtoul(optarg, &end, 10);
                        if (errno != 0 || *end || end == optarg || n == 0 || n > 1000000)
                                return log_error_errno(EINVAL, "Invalid --max-sandboxes=: %s", optarg);
                        s->max_sandboxes = (unsigned) n;
                        break;
                }
                case ARG_DEBUG:
                        log_set_max_level(LOG_DEBUG);
                        break;
                case ARG_DUMP_SECCOMP: {
                        _cleanup_free_ char *json = NULL;
                        r = seccomp_policy_to_docker_json(&json);
                        if (r < 0)
                                return log_error_errno(r, "Failed to render the seccomp policy: %m");
                        puts(json);
                        return 0;
                }
                case ARG_CONFIG:
                        r = set_path(config_path, optarg, "--config=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_WORKSPACE_DIR:
                        r = set_path(&s->workspaces.directory, optarg, "--workspace-dir=");
                        if (r < 0)
                                return r;
                        break;
                case ARG_SETUP_WORKSPACES:
                        *setup_workspaces = true;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        abort();
                }

        if (optind < argc)
                return log_error_errno(EINVAL, "%s takes no arguments.", program_invocation_short_name);
        return 1;
}

static int check_executable(const char *path, const char *what) {
        if (access(path, X_OK) < 0)
                return log_error_errno(errno, "Cannot use %s %s: %m", what, path);
        return 0;
}

/* sandboxd.conf; --workspace-dir= wins over its Directory=. */
static int load_conf(RecorderSettings *rs, ManagerSettings *m, const char *config_path) {
        _cleanup_free_ char *dir = NULL;
        int r;

        if (m->workspaces.directory) {
                dir = strdup(m->workspaces.directory);
                if (!dir)
                        return log_error_errno(ENOMEM, "Out of memory.");
        }
        r = sandboxd_conf_load(rs, &m->snapshots, &m->tenancy, &m->workspaces, &m->fleet_node, config_path);
        if (dir) {
                free(m->workspaces.directory);
                m->workspaces.directory = TAKE_PTR(dir);
        }
        return r;
}

/* The record: without it sandboxd still runs (recording never stops an execution), and
 * says so loudly; ListExecutions then answers NotSupported. */
static int setup_recorder(Daemon *d, const char *config_path, ManagerSettings *m) {
        _cleanup_(recorder_settings_done) RecorderSettings rs = {};
        int r;

        r = recorder_settings_init(&rs);
        if (r < 0)
                return log_error_errno(r, "Out of memory.");
        r = load_conf(&rs, m, config_path);
        if (r < 0)
                return r;  /* a broken configuration is the administrator's to fix: refuse */
        if (!rs.enabled) {
                log_info("Recording is off (Record=no).");
                return 0;
        }
        rs.fleet_node = m->fleet_node;
        if (!rs.spool_dir && asprintf(&rs.spool_dir, "%s/spool", m->state_dir) < 0)
                return log_error_errno(ENOMEM, "Out of memory.");
        r = recorder_new(d->event, &rs, &d->recorder);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the record spool in %s, executions are NOT recorded: %m",
                                rs.spool_dir);
                return 0;
        }
        return 0;
}

static void on_pool_drained(void *userdata) {
        Daemon *d = userdata;
        (void) sd_event_exit(d->event, 0);
}

static int on_drain_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Daemon *d = userdata;
        log_warning("Pooled sandboxes did not stop in time, exiting regardless.");
        return sd_event_exit(d->event, 0);
}

static int on_terminate(sd_event_source *source, const struct signalfd_siginfo *si, void *userdata) {
        Daemon *d = userdata;

        /* Sandboxes outlive sandboxd: their control sockets wait in systemd's fd store and
         * the next sandboxd adopts them. Destroying them is for Destroy(). Only the warm
         * pools' sandboxes, nobody's, go with a clean stop. */
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Exiting; sandboxes keep running.");
        log_info("Received SIG%s, exiting; %zu sandbox(es) keep running.", sigabbrev_np(si->ssi_signo),
                 manager_n_sandboxes(d->manager));
        if (sd_event_add_time_relative(d->event, NULL, CLOCK_MONOTONIC, 10 * 1000000ULL, 0,
                                       on_drain_timeout, d) < 0)
                return sd_event_exit(d->event, 0);
        (void) manager_drain_pool(d->manager, on_pool_drained, d);
        return 0;
}

/* The varlink socket passed by sandboxd-varlink.socket, if sandboxd was started through it
 * (or beside it), by its name: -EBADF if none. Descriptors named "ctl-…", "egr-…", "out-…"
 * and "err-…" are the manager's (sandboxes' control sockets, egress listeners and
 * background processes' pipes kept in the fd store, manager_adopt_sandboxes()); any other
 * is no one's and closed. */
static int take_varlink_fd(void) {
        _cleanup_strv_free_ char **names = NULL;
        int n, fd = -EBADF;

        n = sd_listen_fds_with_names(false, &names);
        if (n < 0) {
                log_warning_errno(n, "Failed to get passed descriptors, ignoring: %m");
                return -EBADF;
        }
        for (int i = 0; i < n; i++) {
                const char *name = names && names[i] ? names[i] : "";

                if (streq(name, SANDBOX_VARLINK_FD_NAME) && fd < 0) {
                        fd = SD_LISTEN_FDS_START + i;
                        /* Passed descriptors are inherited by whatever we start: not this one. */
                        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                } else if (!startswith_str(name, "ctl-") && !startswith_str(name, "egr-") &&
                           !startswith_str(name, "out-") && !startswith_str(name, "err-")) {
                        log_warning("Closing a passed descriptor nobody takes (named '%s').", name);
                        safe_close(SD_LISTEN_FDS_START + i);
                }
        }
        return fd;
}

/* varlink beside D-Bus: on the socket the socket unit passed, else on one made here. Its
 * failure leaves D-Bus serving, except that a passed socket must be served (its callers
 * would wait in its backlog). */
static int setup_varlink(Daemon *d, int fd) {
        bool passed = fd >= 0;
        int r;

        d->varlink_frontend = (VarlinkFrontend) {
                .event = d->event, .bus = d->bus, .manager = d->manager, .recorder = d->recorder,
        };
        r = varlink_frontend_setup(&d->varlink_frontend);
        if (r >= 0)
                r = varlink_frontend_listen(&d->varlink_frontend, fd);
        if (r < 0 && passed)
                return log_error_errno(r, "Failed to serve varlink on the passed socket: %m");
        if (r < 0) {
                log_warning_errno(r, "Failed to serve varlink on %s, D-Bus only: %m", SANDBOX_VARLINK_SOCKET);
                varlink_frontend_done(&d->varlink_frontend);
                return 0;
        }
        log_debug("Serving varlink on %s%s.", SANDBOX_VARLINK_SOCKET, passed ? " (socket-activated)" : "");
        return 0;
}

/* sandboxd-workspaces.service: the pool, before sandboxd starts (it needs a mount in the
 * host's namespace, for Docker's daemon to bind from too; sandboxd's own is private). */
static int run_setup_workspaces(ManagerSettings *m, const char *config_path) {
        _cleanup_(recorder_settings_done) RecorderSettings rs = {};
        int r;

        r = recorder_settings_init(&rs);
        if (r < 0)
                return log_error_errno(r, "Out of memory.");
        r = load_conf(&rs, m, config_path);
        if (r < 0)
                return r;
        return workspace_pool_setup(m->workspaces.directory ?: SANDBOX_WORKSPACE_DIR, m->workspaces.pool_size,
                                    MKFS_BTRFS_PATH);
}

/* RLIMIT_NOFILE sized from --max-sandboxes (raised, hard limit too, with CAP_SYS_RESOURCE,
 * up to fs.nr_open); where it cannot be, fewer sandboxes: a create past them is refused
 * with TooManySandboxes rather than failing on EMFILE halfway. */
static void fit_descriptors(ManagerSettings *s) {
        uint64_t need = sandbox_fds_needed(s->max_sandboxes);
        struct rlimit rl;
        unsigned room;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return (void) log_warning_errno(errno, "Failed to read RLIMIT_NOFILE: %m");
        if (rl.rlim_cur < need) {
                struct rlimit want = { .rlim_cur = need, .rlim_max = MAX((uint64_t) rl.rlim_max, need) };
                if (setrlimit(RLIMIT_NOFILE, &want) >= 0)
                        rl = want;
                else {
                        /* The hard limit is the most we can have. */
                        rl.rlim_cur = rl.rlim_max;
                        (void) setrlimit(RLIMIT_NOFILE, &rl);
                        (void) getrlimit(RLIMIT_NOFILE, &rl);
                }
        }
        room = sandbox_fds_room(rl.rlim_cur);
        if (room < s->max_sandboxes) {
                log_warning("RLIMIT_NOFILE is %llu, %llu are needed for --max-sandboxes=%u (%u a sandbox and %u): "
                            "at most %u sandboxes. Raise LimitNOFILE= of sandboxd.service.",
                            (unsigned long long) rl.rlim_cur, (unsigned long long) need, s->max_sandboxes,
                            SANDBOX_FDS_PER_SANDBOX, SANDBOX_FDS_BASE, room);
                s->max_sandboxes = room;
                s->max_sandboxes_by_fds = true;
        } else
                log_debug("RLIMIT_NOFILE %llu: room for %u sandboxes.", (unsigned long long) rl.rlim_cur, room);
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_settings_done) ManagerSettings settings = {};
        _cleanup_free_ char *config_path = NULL;
        _cleanup_close_ int varlink_fd = -EBADF;
        Daemon d = {};
        sigset_t mask;
        int r;

        r = manager_settings_init(&settings);
        if (r < 0)
                return log_error_errno(r, "Out of memory.");
        bool setup_workspaces = false;
        r = parse_argv(argc, argv, &settings, &config_path, &setup_workspaces);
        if (r <= 0)
                return r;
        if (setup_workspaces)
                return run_setup_workspaces(&settings, config_path);
        /* Its memory holds the secret store's values: no core dump of it, and no
         * /proc/PID/mem or ptrace for a process without CAP_SYS_PTRACE (sandboxd(8),
         * SECURITY). Its children get theirs back as they execute (execve(2)). */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(-errno, "Failed to make sandboxd undumpable: %m");
        r = check_executable(settings.bwrap_path, "bubblewrap");
        if (r < 0)
                return r;
        r = check_executable(settings.agent_path, "sandbox-init");
        if (r < 0)
                return r;

        umask(0022);
        fit_descriptors(&settings);
        /* Signals are handled by the event loop; SIGCHLD for the work-directory cleaners. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        /* A caller that hangs up mid-reply must not kill us. */
        (void) signal(SIGPIPE, SIG_IGN);

        r = sd_bus_error_add_map(bus_sandbox_error_map);
        if (r < 0)
                return log_error_errno(r, "Failed to register D-Bus error map: %m");

        r = sd_event_default(&d.event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate event loop: %m");
        r = sd_event_set_watchdog(d.event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable watchdog, ignoring: %m");
        r = sd_event_add_signal(d.event, NULL, SIGTERM, on_terminate, &d);
        if (r >= 0)
                r = sd_event_add_signal(d.event, NULL, SIGINT, on_terminate, &d);
        if (r < 0)
                goto finish;

        r = setup_recorder(&d, config_path, &settings);
        if (r < 0)
                goto finish;

        r = sd_bus_open_system(&d.bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the system bus: %m");
                goto finish;
        }
        /* Without the bus we serve no one: exit, and let Restart= and adoption recover. */
        r = sd_bus_set_exit_on_disconnect(d.bus, true);
        if (r >= 0)
                r = sd_bus_attach_event(d.bus, d.event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                goto finish;

        r = manager_new(d.event, d.bus, &settings, &d.manager);
        if (r < 0) {
                log_error_errno(r, "Failed to set up manager: %m");
                goto finish;
        }
        /* Two subscribers: the record, and the D-Bus face (signals, property changes). */
        r = d.recorder ? recorder_subscribe(d.recorder, d.manager, NULL) : 0;
        if (r >= 0)
                r = recorder_fleet_quota_start(d.recorder, d.manager);
        if (r >= 0) {
                d.bus_frontend = (BusFrontend) { .bus = d.bus, .manager = d.manager, .recorder = d.recorder };
                r = bus_frontend_subscribe(&d.bus_frontend);
        }
        if (r < 0) {
                log_error_errno(r, "Failed to subscribe to the manager: %m");
                goto finish;
        }
        r = manager_load_templates(d.manager);
        if (r < 0)
                goto finish;
        varlink_fd = take_varlink_fd();
        (void) manager_adopt_sandboxes(d.manager);

        r = bus_frontend_register(&d.bus_frontend);
        if (r < 0) {
                log_error_errno(r, "Failed to register D-Bus objects: %m");
                goto finish;
        }
        r = setup_varlink(&d, TAKE_FD(varlink_fd));
        if (r < 0)
                goto finish;
        r = sd_bus_request_name(d.bus, SANDBOX_BUS_NAME, 0);
        if (r < 0) {
                log_error_errno(r, "Failed to acquire bus name %s: %m", SANDBOX_BUS_NAME);
                goto finish;
        }

        (void) sd_notify(false, "READY=1\nSTATUS=Running.");
        log_info("sandboxd %s running, %zu template(s).", PACKAGE_VERSION, manager_get_templates(d.manager)->n);

        r = sd_event_loop(d.event);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");

finish:
        if (r < 0 && r != -EINVAL)
                log_error_errno(r, "Exiting: %m");
        recorder_fleet_quota_stop(d.recorder);   /* it counts into the manager */
        d.manager = manager_free(d.manager); /* and with it the subscriptions */
        d.recorder = recorder_free(d.recorder);
        /* After the manager, whose calls in flight are answered NoReply as it goes; what
         * still waits on polkit lets go of the bus with its connection. */
        varlink_frontend_done(&d.varlink_frontend);
        /* What still waits on the bus daemon or polkit holds the bus: let go first. */
        bus_authorize_cancel_all();
        bus_caller_done();
        bus_flow_done();
        if (d.bus) {
                sd_bus_flush(d.bus);
                d.bus = sd_bus_flush_close_unref(d.bus);
        }
        d.event = sd_event_unref(d.event);
        return r;
}

int main(int argc, char *argv[]) {
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
