/*
 * pool.c - see pool.h. The master does nothing slow: it waits for signals
 * with a short timeout, reaps children, and adjusts the pool. All Docker
 * work happens in workers and in the reaper child.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "member.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "reaper.h"
#include "worker.h"

#define TICK_NS 100000000L /* 100 ms between pool adjustments */
#define IDLE_KILL_GRACE 2  /* seconds an idle worker gets to leave on shutdown */

/*
 * The master's other children, each started again if it dies (at most
 * once a second): the reaper (reaper.c), the follower of Docker's events
 * (events.c) and, on a cluster node, its member in etcd (member.c). Each
 * has its own Docker handle, made after the fork. A helper without a run
 * function (no cluster) is not started.
 */
struct helper {
    const char *name;
    void (*run)(struct nb_app *a);
    pid_t pid;
    int64_t started;
};
#define NB_HELPERS 3

struct pool {
    struct nb_app *app;
    int listen_fd;
    struct nb_pool_slot *slots; /* shared scoreboard, workers_max entries */
    unsigned nslots;
    struct helper helpers[NB_HELPERS]; /* the reaper, the events follower, the member */
};

/*
 * systemd's readiness protocol (sd_notify(3), Type=notify): one datagram
 * "READY=1" (or "RELOADING=1", "STOPPING=1") to the unix socket named by
 * $NOTIFY_SOCKET ('@' for an abstract one). Written out rather than linked
 * from libsystemd: the protocol is this one sendto, and nanobox then needs
 * no systemd library. Read and unset at start, so no child inherits it.
 */
static char notify_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static void notify_init(void)
{
    const char *e = getenv("NOTIFY_SOCKET");
    if (e && (e[0] == '/' || e[0] == '@') && strlen(e) < sizeof(notify_path))
        snprintf(notify_path, sizeof(notify_path), "%s", e);
    unsetenv("NOTIFY_SOCKET");
}

static void notify(const char *state)
{
    struct sockaddr_un sun;
    size_t n = strlen(notify_path);
    socklen_t len;
    int fd;
    if (n == 0)
        return;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, notify_path, n);
    if (sun.sun_path[0] == '@')
        sun.sun_path[0] = '\0';
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun, len) < 0)
        nb_warn("cannot notify systemd (%s): %s", notify_path, strerror(errno));
    close(fd);
}

/*
 * In a new child: have the kernel send SIGTERM when the master dies, so a
 * SIGKILLed master does not leave workers serving a socket nobody supervises
 * (and that the next start replaces) or a reaper running beside the next
 * one. A worker finishes the request in hand first (SIGTERM stays blocked
 * until its handler is in place); the reaper ends its pass.
 */
static void follow_master(pid_t master)
{
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
        nb_warn("cannot ask to follow the master's death: %s", strerror(errno));
    if (getppid() != master) /* it died before the prctl */
        _exit(0);
}

static void worker_spawn(struct pool *p, unsigned idx)
{
    struct nb_pool_slot *s = &p->slots[idx];
    pid_t master = getpid(), pid;
    s->busy = 0;
    s->bulk = 0;
    s->since = nb_clock_real_s();
    s->served = 0;
    pid = fork();
    if (pid < 0) {
        nb_error("fork of a worker failed: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        follow_master(master);
        nb_worker_run(p->app, p->listen_fd, s, p->slots, p->nslots);
    }
    s->pid = pid;
}

static void helper_spawn(struct pool *p, struct helper *h)
{
    pid_t master = getpid(), pid = fork();
    if (pid < 0) {
        nb_error("fork of the %s failed: %s", h->name, strerror(errno));
        return;
    }
    if (pid == 0) {
        sigset_t none;
        int nul;
        follow_master(master);
        /* no request is the helpers': the listening socket is the workers'
         * alone (its number kept, on /dev/null) */
        if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
            dup2(nul, p->listen_fd);
            close(nul);
        }
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (nb_docker_init(&p->app->docker, p->app->conf.docker_socket,
                           p->app->conf.docker_max_response) != 0)
            _exit(1);
        h->run(p->app);
        _exit(1);
    }
    h->pid = pid;
    h->started = nb_clock_real_s();
}

/* Collect dead children; free their scoreboard slots. */
static void reap_children(struct pool *p, int stopping)
{
    pid_t pid;
    int status;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int abnormal = !(WIFEXITED(status) && WEXITSTATUS(status) == 0), helper = 0;
        for (unsigned i = 0; i < NB_HELPERS; i++) {
            struct helper *h = &p->helpers[i];
            if (pid != h->pid)
                continue;
            h->pid = 0;
            helper = 1;
            /* the events follower ends by SIGTERM's own action (events.c) */
            if (stopping && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
                abnormal = 0;
            if (!stopping || abnormal)
                nb_log(abnormal ? NB_LOG_WARN : NB_LOG_INFO, "%s %d ended (%s %d)", h->name,
                       (int)pid, WIFSIGNALED(status) ? "signal" : "status",
                       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        }
        if (helper)
            continue;
        for (unsigned i = 0; i < p->nslots; i++) {
            if (p->slots[i].pid != pid)
                continue;
            p->slots[i].pid = 0;
            p->slots[i].busy = 0;
            p->slots[i].bulk = 0;
            if (abnormal && !stopping)
                nb_warn("worker %d died (%s %d); replacing it", (int)pid,
                        WIFSIGNALED(status) ? "signal" : "status",
                        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            break;
        }
    }
}

/* Keep workers_min alive, workers_spare idle (up to max), retire idle extras. */
static void adjust(struct pool *p)
{
    const struct nb_conf *c = &p->app->conf;
    unsigned alive = 0, idle = 0, bulk = 0, want, ceiling;
    int64_t now = nb_clock_real_s();
    int retired = 0;

    /* a helper that keeps dying must not spin: at most one start a second */
    for (unsigned i = 0; i < NB_HELPERS; i++)
        if (p->helpers[i].run && p->helpers[i].pid == 0 && now - p->helpers[i].started >= 1)
            helper_spawn(p, &p->helpers[i]);
    for (unsigned i = 0; i < p->nslots; i++) {
        if (p->slots[i].pid == 0)
            continue;
        alive++;
        if (!p->slots[i].busy)
            idle++;
        else if (p->slots[i].bulk)
            bulk++;
    }
    /*
     * Workers moving a file's bytes (NB_ROUTE_BULK: downloads, uploads) do
     * not count toward workers_max (up to NB_POOL_BULK_FACTOR x workers_max
     * of them; past that a transfer counts as any request): 48 stalled or
     * slow downloads leave every other request its workers_max, instead of
     * queueing /healthz and execs behind them in the backlog.
     */
    ceiling = c->workers_max + bulk;
    if (ceiling > p->nslots)
        ceiling = p->nslots;
    want = alive;
    if (idle < c->workers_spare)
        want = alive + (c->workers_spare - idle);
    if (want < c->workers_min)
        want = c->workers_min;
    if (want > ceiling)
        want = ceiling;
    for (unsigned i = 0; i < p->nslots && alive < want; i++) {
        if (p->slots[i].pid == 0) {
            worker_spawn(p, i);
            alive++;
        }
    }
    if (idle <= c->workers_spare || alive <= c->workers_min)
        return;
    /* one retirement per tick keeps the pool from collapsing on a lull */
    for (unsigned i = p->nslots; i-- > 0 && !retired;) {
        struct nb_pool_slot *s = &p->slots[i];
        if (s->pid != 0 && !s->busy && now - s->since >= (int64_t)c->worker_idle_timeout) {
            kill(s->pid, SIGTERM);
            s->since = now; /* not again next tick */
            retired = 1;
        }
    }
}

/* The scoreboard's busy and idle workers, for GET /metrics (metrics.h). */
static void publish_workers(const struct pool *p)
{
    unsigned alive = 0, busy = 0;
    for (unsigned i = 0; i < p->nslots; i++) {
        if (p->slots[i].pid == 0)
            continue;
        alive++;
        busy += p->slots[i].busy != 0;
    }
    nb_metrics_workers(alive, busy);
}

static unsigned count_alive(const struct pool *p)
{
    unsigned n = 0;
    for (unsigned i = 0; i < NB_HELPERS; i++)
        n += p->helpers[i].pid != 0;
    for (unsigned i = 0; i < p->nslots; i++)
        n += p->slots[i].pid != 0;
    return n;
}

static void shutdown_children(struct pool *p)
{
    const struct nb_conf *c = &p->app->conf;
    struct timespec ts = {0, TICK_NS};
    int64_t start = nb_clock_real_s();
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (unsigned i = 0; i < p->nslots; i++)
        if (p->slots[i].pid)
            kill(p->slots[i].pid, SIGTERM);
    for (unsigned i = 0; i < NB_HELPERS; i++)
        if (p->helpers[i].pid)
            kill(p->helpers[i].pid, SIGTERM);
    while (count_alive(p) > 0) {
        int64_t waited = nb_clock_real_s() - start;
        sigtimedwait(&set, NULL, &ts);
        reap_children(p, 1);
        /* an idle worker that missed the signal while entering accept() */
        if (waited >= IDLE_KILL_GRACE)
            for (unsigned i = 0; i < p->nslots; i++)
                if (p->slots[i].pid && !p->slots[i].busy)
                    kill(p->slots[i].pid, SIGKILL);
        if (waited >= (int64_t)c->shutdown_timeout) {
            nb_warn("shutdown_timeout passed: killing the remaining workers");
            for (unsigned i = 0; i < p->nslots; i++)
                if (p->slots[i].pid)
                    kill(p->slots[i].pid, SIGKILL);
            for (unsigned i = 0; i < NB_HELPERS; i++)
                if (p->helpers[i].pid)
                    kill(p->helpers[i].pid, SIGKILL);
        }
    }
}

int nb_pool_run(struct nb_app *a, int listen_fd)
{
    struct pool p;
    sigset_t set;
    struct timespec ts = {0, TICK_NS};

    notify_init();
    memset(&p, 0, sizeof(p));
    p.app = a;
    p.listen_fd = listen_fd;
    /* workers_max, and the bulk transfers beside them */
    p.nslots = (1 + NB_POOL_BULK_FACTOR) * a->conf.workers_max;
    p.slots = mmap(NULL, p.nslots * sizeof(*p.slots), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p.slots == MAP_FAILED) {
        nb_error("cannot map the worker scoreboard: %s", strerror(errno));
        return 1;
    }
    memset(p.slots, 0, p.nslots * sizeof(*p.slots));
    p.helpers[0].name = "reaper";
    p.helpers[0].run = nb_reaper_run;
    p.helpers[1].name = "events follower";
    p.helpers[1].run = nb_events_run;
    p.helpers[2].name = "cluster member";
    p.helpers[2].run = a->conf.etcd_endpoints[0] ? nb_member_run : NULL;

    /* signals are taken synchronously with sigtimedwait; children unblock them */
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1); /* a worker began a bulk transfer: adjust now */
    sigprocmask(SIG_BLOCK, &set, NULL);

    for (unsigned i = 0; i < NB_HELPERS; i++)
        if (p.helpers[i].run)
            helper_spawn(&p, &p.helpers[i]);
    adjust(&p);
    publish_workers(&p);
    nb_info("serving with %u worker(s) (max %u)", a->conf.workers_min, a->conf.workers_max);
    notify("READY=1");
    for (;;) {
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            notify("STOPPING=1");
            nb_info("stopping: finishing in-flight requests (sandboxes are kept)");
            break;
        }
        if (sig == SIGHUP) {
            /* the log file (logrotate's postrotate); workers follow at their next line */
            if (nb_log_reopen() > 0)
                nb_info("SIGHUP: log file reopened");
            else
                nb_info("SIGHUP: no log file to reopen (-l); restart to apply a new configuration");
        }
        reap_children(&p, 0);
        adjust(&p);
        publish_workers(&p);
    }
    shutdown_children(&p);
    munmap(p.slots, p.nslots * sizeof(*p.slots));
    nb_info("stopped");
    return 0;
}
