/*
 * main.c - nanobox-init: PID 1 of a sandbox and the agent the host talks
 * to (docs/AGENT-PROTOCOL.md).
 *
 * The abstract socket is bound before anything else, so nothing in the
 * sandbox can take the name first. Then one thread runs one epoll loop:
 * the listening socket, a signalfd (SIGCHLD, SIGTERM, SIGINT, SIGHUP), the
 * host connections and the commands' pipes. Timeouts are deadlines kept by
 * each module; epoll_wait sleeps until the nearest.
 *
 * It makes itself non-dumpable first: the code in the sandbox runs as the
 * same uid and must not ptrace it or read its memory (docs/SECURITY.md).
 *
 * As PID 1 it reaps every zombie, and on SIGTERM/SIGINT/SIGHUP from
 * outside the sandbox (docker stop; one sent from inside is ignored:
 * signal_may_end) passes the signal to every process (kill(-1)) and exits
 * once none is left, or INIT_SHUTDOWN_MS later. Any other signal sent
 * from inside, SIGKILL and SIGSTOP included, the kernel drops itself: a
 * namespace's init without a handler for it. Run as a plain process (the
 * tests), it makes itself a child subreaper and only signals the commands
 * it started and the code bridge (kernel.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentproto.h"
#include "clock.h"
#include "conn.h"
#include "init.h"
#include "kernel.h"
#include "proc.h"
#include "root.h"
#include "sudo.h"

#define INIT_EVENTS 64 /* epoll events taken per wait */
#define INIT_BACKLOG 128
#define INIT_ACCEPT_PAUSE_MS 100 /* listener rest when accept runs out of fds */

static int64_t shutdown_at; /* 0: running; else exit at this time at the latest */
static struct init_watch listen_w;
static int64_t listen_resume_at; /* 0: listening; else resume then */

/* --- start-up -------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: nanobox-init [--user UID:GID] [--socket NAME] [--watcher-idle-ms MS]\n"
            "                    [-- ARGS...]\n"
            "       nanobox-init --version\n"
            "\n"
            "PID 1 and agent of a nanobox sandbox: reaps zombies, passes on SIGTERM,\n"
            "and serves docs/AGENT-PROTOCOL.md on the abstract unix socket @NAME\n"
            "(default @%s). Arguments after -- are reserved and ignored.\n"
            "--user: root mode (started as uid 0): files are handled and commands run\n"
            "as UID:GID, and a command may ask to run as root without capabilities.\n"
            "--watcher-idle-ms: a polling watcher (J) not polled for MS is removed\n"
            "(default %d).\n"
            "Run under the name sudo, it is a sudo for the sandbox (sudo --help).\n",
            NBA_SOCKET_NAME, INIT_WATCHER_IDLE_MS);
}

/* 0 to run, 1 to exit with 0, 2 to exit with 2. */
static int parse_args(int argc, char **argv, const char **name, const char **user)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "--version") == 0) {
            printf("nanobox-init %d\n", NBA_VERSION);
            return 1;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            *name = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
            *user = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--watcher-idle-ms") == 0 && i + 1 < argc) {
            char *end;
            long long ms = strtoll(argv[++i], &end, 10);
            if (*argv[i] != '\0' && *end == '\0' && ms > 0 && ms <= 86400000LL) {
                init_watcher_idle_ms = ms;
                continue;
            }
        }
        usage(stderr);
        return 2;
    }
    return 0;
}

static int listen_abstract(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    int fd;

    if (len == 0 || len > sizeof(sa.sun_path) - 1) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path + 1, name, len); /* sun_path[0] = '\0': abstract */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) == -1 ||
        listen(fd, INIT_BACKLOG) == -1) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Commands get fds 0-2 by dup2 over their pipes: those must not be 0-2. */
static void stdio_ensure(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int n = open("/dev/null", O_RDWR);
            if (n != -1 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
    }
}

/* --- signals and children ---------------------------------------------------- */

/* Are all our children gone (nothing left to reap or wait for)? */
static int children_gone(void)
{
    siginfo_t si;

    memset(&si, 0, sizeof(si));
    return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == -1 && errno == ECHILD;
}

static void reap_all(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        init_proc_reaped(pid, status);
        init_kernel_reaped(pid);
    }
}

static void shutdown_begin(int sig)
{
    if (init_is_pid1)
        kill(-1, sig);
    else {
        init_proc_signal_all(sig);
        init_kernel_signal(sig);
    }
    if (shutdown_at == 0)
        shutdown_at = nb_clock_mono_ms() + INIT_SHUTDOWN_MS;
}

/*
 * May this SIGTERM, SIGINT or SIGHUP end the sandbox? As PID 1, only when
 * it comes from outside the sandbox's pid namespace: docker stop and
 * docker kill (runc's kill(2) from the host) arrive as SI_USER with
 * si_pid 0, the kernel's way of saying that the sender has no pid in our
 * namespace. One sent from inside (root's kill -TERM 1, or the sandbox
 * user's, whose uid PID 1 shares) carries the sender's pid, and is
 * ignored. The code must be SI_USER: sigqueue() lets a sender write
 * si_pid 0 itself, but only with a code below 0 (SI_QUEUE), and F_SETSIG
 * on a file it owns sends POLL_* codes with no pid; neither can pose as
 * kill(2). Run as a plain process (the tests), every one counts.
 */
static int signal_may_end(const struct signalfd_siginfo *si)
{
    return !init_is_pid1 || (si->ssi_code == SI_USER && si->ssi_pid == 0);
}

static void signal_event(int sfd)
{
    struct signalfd_siginfo si;

    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD || !signal_may_end(&si))
            continue;
        shutdown_begin((int)si.ssi_signo);
    }
    reap_all();
}

/* --- the loop -------------------------------------------------------------- */

static int next_timeout(int64_t now)
{
    int64_t d = init_conn_next_deadline(), p = init_proc_next_deadline();
    int64_t w = init_fwatch_next_deadline();

    if (p != 0 && (d == 0 || p < d))
        d = p;
    if (w != 0 && (d == 0 || w < d))
        d = w;
    if (shutdown_at != 0 && (d == 0 || shutdown_at < d))
        d = shutdown_at;
    if (listen_resume_at != 0 && (d == 0 || listen_resume_at < d))
        d = listen_resume_at;
    if (d == 0)
        return -1;
    if (d <= now)
        return 0;
    return d - now > 60000 ? 60000 : (int)(d - now);
}

static void dispatch(struct epoll_event *ev, int listen_fd, int sfd)
{
    struct init_watch *w = ev->data.ptr;

    if (w->fd < 0)
        return; /* closed earlier in this batch */
    switch (w->kind) {
    case INIT_W_LISTEN:
        if (init_conn_accept(listen_fd) == -1) {
            init_watch_set(&listen_w, 0);
            listen_resume_at = nb_clock_mono_ms() + INIT_ACCEPT_PAUSE_MS;
        }
        break;
    case INIT_W_SIGNAL:
        signal_event(sfd);
        break;
    case INIT_W_CONN:
        init_conn_event(w->obj, ev->events);
        break;
    case INIT_W_PIPE:
        init_proc_event(w->obj, w->stream, ev->events);
        break;
    case INIT_W_INOTIFY:
        init_fwatch_event(w->obj);
        break;
    default:
        break;
    }
}

static int run(int listen_fd, int sfd)
{
    struct epoll_event evs[INIT_EVENTS];
    struct init_watch sw = {0};

    if (init_watch_add(&listen_w, listen_fd, INIT_W_LISTEN, 0, NULL, EPOLLIN) == -1 ||
        init_watch_add(&sw, sfd, INIT_W_SIGNAL, 0, NULL, EPOLLIN) == -1) {
        fprintf(stderr, "nanobox-init: epoll: %s\n", strerror(errno));
        return 1;
    }
    for (;;) {
        int64_t now = nb_clock_mono_ms();
        int n = init_loop_wait(evs, INIT_EVENTS, next_timeout(now));

        if (n == -1 && errno != EINTR) {
            fprintf(stderr, "nanobox-init: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++)
            dispatch(&evs[i], listen_fd, sfd);
        now = nb_clock_mono_ms();
        init_proc_tick(now);
        init_conn_tick(now);
        init_fwatch_tick(now);
        if (listen_resume_at != 0 && now >= listen_resume_at) {
            listen_resume_at = 0;
            init_watch_set(&listen_w, EPOLLIN);
        }
        init_defer_run();
        if (shutdown_at != 0) {
            reap_all();
            if (children_gone() || now >= shutdown_at)
                return 0;
        }
    }
}

int main(int argc, char **argv)
{
    const char *name = NBA_SOCKET_NAME, *user = NULL, *base;
    sigset_t mask;
    int listen_fd, sfd, rc;

    base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base != NULL ? base + 1 : argc > 0 ? argv[0] : "";
    if (strcmp(base, "sudo") == 0)
        return init_sudo_main(argc, argv);
    rc = parse_args(argc, argv, &name, &user);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (user != NULL && init_root_setup(user, &rc) != 0)
        return rc;
    /* The sandbox's code runs as our uid: without this it could ptrace us
     * (no Yama on these hosts, ptrace allowed by Docker's seccomp profile),
     * read /proc/1/mem, environ and root, and answer the host's connections
     * as PID 1 so that the SO_PEERCRED check passes. Commands regain
     * dumpability at execve. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    listen_fd = listen_abstract(name);
    if (listen_fd == -1) {
        fprintf(stderr, "nanobox-init: bind @%s: %s\n", name, strerror(errno));
        return 1;
    }
    init_is_pid1 = getpid() == 1;
    if (!init_is_pid1)
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    init_kernel_setup();
    stdio_ensure();
    /* Every signal at its default first: one it was started with ignored (a
     * background job's SIGINT, a SIGCHLD that would reap behind waitpid's
     * back) would be lost to the signalfd below and pass to its commands. */
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL); /* SIGKILL and SIGSTOP refuse, and need not */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    rc = init_loop_open();
    sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (rc == -1 || sfd == -1) {
        fprintf(stderr, "nanobox-init: %s\n", strerror(errno));
        return 1;
    }
    /* A child that exited before the signalfd existed is reaped now. */
    reap_all();
    return run(listen_fd, sfd);
}
