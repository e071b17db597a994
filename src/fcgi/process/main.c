/*
 * main.c - nanobox-fcgi: read the config, map the state table, open (or
 * inherit from spawn-fcgi, on fd 0) the FastCGI socket, then hand over to
 * the master loop in pool.c.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api.h"
#include "app.h"
#include "isolation.h"
#include "log.h"
#include "history.h"
#include "metrics.h"
#include "pool.h"
#include "reaper.h"
#include "tenant.h"
#include "warm.h"
#include "worker.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nanobox-fcgi [-c CONFIG] [-p PIDFILE] [-l LOG] [-o k=v]... [-t] | -R\n"
               "  -c CONFIG   configuration file (default /etc/nanobox/nanobox.conf)\n"
               "  -p PIDFILE  write the master's pid here\n"
               "  -l LOG      log to the file LOG (appended; reopened on SIGHUP), not stderr\n"
               "  -o k=v      override one configuration key\n"
               "  -t          check the configuration and exit\n"
               "  -R          print the route table (METHOD PATH FLAGS) and exit\n"
               "Runs in the foreground and logs to stderr (or -l). Tells systemd it is\n"
               "ready when $NOTIFY_SOCKET is set (Type=notify). Under spawn-fcgi the\n"
               "FastCGI socket is inherited on fd 0; otherwise it is `listen`.\n");
}

/* Is fd a listening socket (spawn-fcgi hands us one on fd 0)? */
static int is_listening_socket(int fd)
{
    int val = 0;
    socklen_t len = sizeof(val);
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) == 0 && val;
}

/* 1 if something accepts connections on the unix socket at path. */
static int socket_in_use(const char *path)
{
    struct sockaddr_un sun;
    int fd, rc;
    if (strlen(path) >= sizeof(sun.sun_path))
        return 0;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, path, strlen(path));
    rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    close(fd);
    return rc == 0;
}

static int open_listen_socket(const struct nb_conf *c)
{
    int fd;
    if (socket_in_use(c->listen)) {
        nb_error("%s is in use: is another nanobox-fcgi running?", c->listen);
        return -1;
    }
    unlink(c->listen);
    /* past workers_max, requests wait here; the kernel caps it at
     * net.core.somaxconn (4096 by default), and nginx answers 502 past it */
    fd = FCGX_OpenSocket(c->listen, (int)c->listen_backlog);
    if (fd < 0) {
        nb_error("cannot listen on %s: %s", c->listen, strerror(errno));
        return -1;
    }
    if (c->socket_group[0]) {
        struct group *gr = getgrnam(c->socket_group);
        if (gr == NULL) {
            nb_error("socket_group %s does not exist", c->socket_group);
            return -1;
        }
        if (chown(c->listen, (uid_t)-1, gr->gr_gid) != 0) {
            nb_error("chown %s: %s", c->listen, strerror(errno));
            return -1;
        }
    }
    if (chmod(c->listen, (mode_t)c->socket_mode) != 0) {
        nb_error("chmod %s: %s", c->listen, strerror(errno));
        return -1;
    }
    return fd;
}

static int write_pidfile(const char *path)
{
    char buf[32];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int n;
    if (fd < 0)
        return -1;
    n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (write(fd, buf, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    return close(fd);
}

int main(int argc, char **argv)
{
    static struct nb_app app;
    const char *conf_path = "/etc/nanobox/nanobox.conf", *pidfile = NULL, *logfile = NULL;
    char err[512];
    enum nb_log_level level;
    int check_only = 0, inherited, listen_fd, opt, rc;
    char *overrides[64];
    int n_over = 0;

    nb_log_init("nanobox-fcgi", NB_LOG_INFO);
    while ((opt = getopt(argc, argv, "c:p:l:o:tRh")) != -1) {
        switch (opt) {
        case 'c':
            conf_path = optarg;
            break;
        case 'p':
            pidfile = optarg;
            break;
        case 'l':
            logfile = optarg;
            break;
        case 'o':
            if (n_over == 64) {
                fprintf(stderr, "too many -o options\n");
                return 2;
            }
            overrides[n_over++] = optarg;
            break;
        case 't':
            check_only = 1;
            break;
        case 'R':
            nb_worker_routes();
            nb_http_routes_print(stdout);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }

    nb_conf_defaults(&app.conf);
    if (nb_conf_load(&app.conf, conf_path, err, sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    for (int i = 0; i < n_over; i++) {
        char *eq = strchr(overrides[i], '=');
        if (eq == NULL) {
            nb_error("-o %s: expected key=value", overrides[i]);
            return 2;
        }
        *eq = '\0';
        if (nb_conf_set(&app.conf, overrides[i], eq + 1, err, sizeof(err)) != 0) {
            nb_error("-o: %s", err);
            return 2;
        }
    }
    if (nb_conf_check(&app.conf, err, sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    if (app.conf.node_name[0] != '\0')
        nb_node_tag(app.conf.node_name, app.node_tag);
    if (nb_log_level_parse(app.conf.log_level, &level) != 0) {
        nb_error("log_level must be debug, info, warn or error");
        return 1;
    }
    nb_log_init("nanobox-fcgi", level);
    /* a keys file that is there must be good (mode 0600, each line well-formed) */
    if (nb_tenant_init(&app, err, sizeof(err)) != 0) {
        nb_error("keys file: %s", err);
        return 1;
    }
    if (check_only) {
        printf("%s: configuration OK\n", conf_path);
        return 0;
    }
    /* before the first fork: every worker shares the reopen generation */
    if (logfile && nb_log_open_file(logfile, err, sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    if (!nb_tenant_auth_on(&app))
        nb_warn("api_key is empty: every route is open to anyone who reaches nginx");

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        nb_error("curl_global_init failed");
        return 1;
    }
    if (nb_table_open(&app.table, app.conf.state_file, app.conf.max_sandboxes, err, sizeof(err)) !=
        0) {
        nb_error("state table: %s", err);
        return 1;
    }
    /* counters every worker and the reaper add to: mapped before the first fork */
    if (nb_metrics_map(err, sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    /* each sandbox's usage history (history.h): one ring per slot, shared the same way */
    if (nb_history_map(app.table.nslots, app.conf.metrics_history, app.conf.metrics_interval, err,
                       sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    if (nb_isolation_prepare(&app, err, sizeof(err)) != 0) {
        nb_error("%s", err);
        return 1;
    }
    if (app.table.hdr->flags & NB_TABLE_ADOPT_PENDING) {
        /*
         * A fresh table (an upgrade, a lost file): the running sandboxes are
         * adopted from Docker before any worker can take their slots. If
         * Docker does not answer now, the reaper's first reconciliation that
         * reaches it does it (docs/ARCHITECTURE.md, "Adoption").
         */
        if (nb_docker_init(&app.docker, app.conf.docker_socket, app.conf.docker_max_response) ==
            0) {
            if (nb_reaper_reconcile(&app) < 0)
                nb_warn("Docker does not answer: the running sandboxes are adopted once it "
                        "does");
            nb_docker_cleanup(&app.docker);
        }
    }
    app.warm = &nb_warm_source; /* creates take from the warm pool first */
    if (FCGX_Init() != 0) {
        nb_error("FCGX_Init failed");
        return 1;
    }
    /* FCGX_Init installs its own handlers: ours come after it */
    signal(SIGPIPE, SIG_IGN);

    inherited = is_listening_socket(0);
    listen_fd = inherited ? 0 : open_listen_socket(&app.conf);
    if (listen_fd < 0)
        return 1;
    if (pidfile && write_pidfile(pidfile) != 0) {
        nb_error("cannot write %s: %s", pidfile, strerror(errno));
        return 1;
    }
    nb_log_set_role("master");
    nb_info("nanobox-fcgi %s listening on %s, state %s (%u slots), instance %s", PACKAGE_VERSION,
            inherited ? "fd 0 (spawn-fcgi)" : app.conf.listen, app.conf.state_file,
            app.table.nslots, app.conf.instance);

    /*
     * Forwarders leave their worker by a double fork; as a subreaper the
     * master, not whatever PID 1 the machine has, reaps them when they end.
     */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        nb_warn("cannot become a child subreaper: %s", strerror(errno));
    rc = nb_pool_run(&app, listen_fd);
    if (!inherited)
        unlink(app.conf.listen);
    if (pidfile)
        unlink(pidfile);
    nb_table_close(&app.table);
    nb_metrics_unmap();
    nb_history_unmap();
    curl_global_cleanup();
    return rc;
}
