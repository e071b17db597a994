/*
 * main.c - nanobox-fwd: the command line, start-up and the event loop.
 *
 * Start-up does everything that can fail (namespaces, both listeners, the
 * connection slots) before one line goes to --ready-fd: "OK <hostport>" or
 * "ERR <errno-name> <message>". The worker that spawned us waits for that
 * line before it answers, which is what turns a taken port into a clean
 * 409. After that the process only ends at --expires, on SIGTERM/SIGINT,
 * or when the sandbox's process is gone, and always removes its socket.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fwd.h"
#include "listener.h"
#include "log.h"
#include "relay.h"
#include "upstream.h"

#define FWD_EXIT_OK 0
#define FWD_EXIT_FAIL 1
#define FWD_EXIT_ADDRINUSE 3

#define FWD_DEFAULT_MAX_CONNS 1024
#define FWD_MAX_MAX_CONNS (1u << 20) /* the slot must fit its epoll tag */
#define FWD_DEFAULT_PIPE_SIZE (256u << 10)
#define FWD_DEFAULT_UNIX_MODE 0660
#define FWD_EVENTS 128 /* epoll events taken per wait */

struct fwd_opts {
    pid_t target_pid;        /* --target-pid: a process inside the sandbox */
    int port;                /* --port: the app's port inside the sandbox */
    const char *listen;      /* --listen ADDR:PORT, or NULL */
    const char *unix_path;   /* --unix PATH, or NULL */
    time_t expires;          /* --expires: wall-clock UNIX time */
    mode_t unix_mode;        /* --unix-mode, octal */
    const char *unix_group;  /* --unix-group, "" for none */
    int ready_fd;            /* --ready-fd, -1 for none */
    size_t max_conns;        /* --max-conns */
    size_t pipe_size;        /* --pipe-size, bytes per splice pipe */
    enum nb_log_level level; /* --log-level */
    const char *paused_file; /* --paused-file: while it exists, new connections are refused */
};

static const char *stop_reason;
static int stop_status;
static const char *paused_file;

static void fwd_stop(const char *reason, int status)
{
    if (stop_reason != NULL)
        return;
    stop_reason = reason;
    stop_status = status;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: nanobox-fwd --target-pid PID --port SANDBOXPORT --listen ADDR:PORT\n"
            "                   --unix PATH --expires UNIXTIME [options]\n"
            "\n"
            "Forward a host TCP port and a unix socket to 127.0.0.1:SANDBOXPORT inside\n"
            "the network namespace of process PID, until UNIXTIME.\n"
            "\n"
            "  --target-pid PID      a process of the sandbox (its PID 1)\n"
            "  --port N              the app's port inside the sandbox (1-65535)\n"
            "  --listen ADDR:PORT    host listener; PORT 0 lets the kernel choose\n"
            "  --unix PATH           unix socket listener (for nginx)\n"
            "  --expires UNIXTIME    exit at this wall-clock time (seconds)\n"
            "  --unix-mode MODE      octal mode of the unix socket (default 0660)\n"
            "  --unix-group GROUP    group of the unix socket (default: unchanged)\n"
            "  --ready-fd FD         write \"OK <hostport>\" or \"ERR <errno> <message>\"\n"
            "                        there once listening, then close it\n"
            "  --max-conns N         concurrent connections (default %u)\n"
            "  --pipe-size BYTES     splice pipe size (default %u)\n"
            "  --log-level LEVEL     debug, info, warn or error (default info)\n"
            "  --paused-file PATH    while PATH exists the sandbox is paused: new\n"
            "                        connections are closed at once\n"
            "\n"
            "Exit status: 0 at the end of its life, 3 when an address is in use,\n"
            "1 for any other start-up failure.\n",
            FWD_DEFAULT_MAX_CONNS, FWD_DEFAULT_PIPE_SIZE);
}

/* The one line the spawning worker waits for; the fd is closed after it. */
static void ready_report(struct fwd_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ready_report(struct fwd_opts *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;
    size_t off = 0;

    if (o->ready_fd == -1)
        return;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++) {
        if (line[i] == '\n')
            line[i] = ' ';
    }
    line[n++] = '\n';
    while (off < (size_t)n) {
        ssize_t w = write(o->ready_fd, line + off, (size_t)n - off);
        if (w == -1 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(o->ready_fd);
    o->ready_fd = -1;
}

static const char *errno_name(int err)
{
    const char *name = strerrorname_np(err);
    return name != NULL ? name : "EIO";
}

/* Report a start-up failure everywhere it must be seen; returns the exit
 * code. */
static int startup_fail(struct fwd_opts *o, int err, const char *msg)
{
    nb_error("cannot start: %s", msg);
    ready_report(o, "ERR %s %s", errno_name(err), msg);
    return err == EADDRINUSE ? FWD_EXIT_ADDRINUSE : FWD_EXIT_FAIL;
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

#define OPT_FAIL(...)                       \
    do {                                    \
        snprintf(err, errlen, __VA_ARGS__); \
        return -1;                          \
    } while (0)

/* Returns 0, or -1 with a message in err (and *help set for --help). */
static int opts_parse(int argc, char **argv, struct fwd_opts *o, int *help, char *err,
                      size_t errlen)
{
    enum {
        O_PID = 256,
        O_PORT,
        O_LISTEN,
        O_UNIX,
        O_EXPIRES,
        O_MODE,
        O_GROUP,
        O_READY,
        O_MAXCONNS,
        O_PIPESIZE,
        O_LOGLEVEL,
        O_PAUSED,
        O_HELP
    };
    static const struct option longopts[] = {
        {"target-pid", required_argument, NULL, O_PID},
        {"port", required_argument, NULL, O_PORT},
        {"listen", required_argument, NULL, O_LISTEN},
        {"unix", required_argument, NULL, O_UNIX},
        {"expires", required_argument, NULL, O_EXPIRES},
        {"unix-mode", required_argument, NULL, O_MODE},
        {"unix-group", required_argument, NULL, O_GROUP},
        {"ready-fd", required_argument, NULL, O_READY},
        {"max-conns", required_argument, NULL, O_MAXCONNS},
        {"pipe-size", required_argument, NULL, O_PIPESIZE},
        {"log-level", required_argument, NULL, O_LOGLEVEL},
        {"paused-file", required_argument, NULL, O_PAUSED},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    long v;
    int opt;
    char *end;

    memset(o, 0, sizeof(*o));
    o->target_pid = -1;
    o->expires = -1;
    o->unix_mode = FWD_DEFAULT_UNIX_MODE;
    o->unix_group = "";
    o->ready_fd = -1;
    o->max_conns = FWD_DEFAULT_MAX_CONNS;
    o->pipe_size = FWD_DEFAULT_PIPE_SIZE;
    o->level = NB_LOG_INFO;
    *help = 0;
    err[0] = '\0';

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case O_PID:
            if (parse_long(optarg, 1, 0x3fffffff, &v) == -1)
                OPT_FAIL("--target-pid %s is not a pid", optarg);
            o->target_pid = (pid_t)v;
            break;
        case O_PORT:
            if (parse_long(optarg, 1, 65535, &v) == -1)
                OPT_FAIL("--port %s is not 1-65535", optarg);
            o->port = (int)v;
            break;
        case O_LISTEN:
            o->listen = optarg;
            break;
        case O_UNIX:
            o->unix_path = optarg;
            break;
        case O_EXPIRES:
            if (parse_long(optarg, 1, 0x7fffffffffffL, &v) == -1)
                OPT_FAIL("--expires %s is not a UNIX time", optarg);
            o->expires = (time_t)v;
            break;
        case O_MODE:
            errno = 0;
            v = strtol(optarg, &end, 8);
            if (errno != 0 || end == optarg || *end != '\0' || v < 0 || v > 07777)
                OPT_FAIL("--unix-mode %s is not an octal mode", optarg);
            o->unix_mode = (mode_t)v;
            break;
        case O_GROUP:
            o->unix_group = optarg;
            break;
        case O_READY:
            if (parse_long(optarg, 0, 1 << 20, &v) == -1 || fcntl((int)v, F_GETFD) == -1)
                OPT_FAIL("--ready-fd %s is not an open fd", optarg);
            o->ready_fd = (int)v;
            break;
        case O_MAXCONNS:
            if (parse_long(optarg, 1, FWD_MAX_MAX_CONNS, &v) == -1)
                OPT_FAIL("--max-conns %s is not 1-%u", optarg, FWD_MAX_MAX_CONNS);
            o->max_conns = (size_t)v;
            break;
        case O_PIPESIZE:
            if (parse_long(optarg, 0, 1L << 30, &v) == -1)
                OPT_FAIL("--pipe-size %s is not a size in bytes", optarg);
            o->pipe_size = (size_t)v;
            break;
        case O_LOGLEVEL:
            if (nb_log_level_parse(optarg, &o->level) == -1)
                OPT_FAIL("--log-level %s: use debug, info, warn or error", optarg);
            break;
        case O_PAUSED:
            o->paused_file = optarg;
            break;
        case O_HELP:
            *help = 1;
            return -1;
        default:
            OPT_FAIL("unknown or incomplete option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        OPT_FAIL("unexpected argument %s", argv[optind]);
    if (o->target_pid == -1 || o->port == 0 || o->expires == -1)
        OPT_FAIL("--target-pid, --port and --expires are required");
    if (o->listen == NULL && o->unix_path == NULL)
        OPT_FAIL("give --listen, --unix or both");
    return 0;
}

/* Room for every connection's two sockets and, at worst, two pipes. */
static void raise_fd_limit(size_t max_conns)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_conns * 6 + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur < want)
        nb_warn("file descriptor limit %llu is low for %zu connections",
                (unsigned long long)rl.rlim_cur, max_conns);
}

static int epoll_watch(int epfd, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.u64 = tag;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void on_signal(int sfd)
{
    struct signalfd_siginfo si;

    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM)
            fwd_stop("SIGTERM", 0);
        else if (si.ssi_signo == SIGINT)
            fwd_stop("SIGINT", 0);
    }
}

static int is_paused(void)
{
    return paused_file != NULL && access(paused_file, F_OK) == 0;
}

/*
 * While paused nothing is relayed to the frozen processes (a client would
 * hang until the resume): each waiting connection is taken and closed at
 * once. nginx answers its own 409 page before it connects (it checks the
 * same file, nanobox-ports.conf), so this is what a host port's client
 * sees, and nginx only in the instant of a pause.
 */
static void refuse_paused(int listen_fd)
{
    for (int i = 0; i < FWD_EVENTS; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        close(fd);
    }
}

/* The event loop; returns when fwd_stop() was called. */
static void fwd_run(int epfd, int tcp_fd, int unix_fd, int sig_fd, int timer_fd,
                    struct upstream *up)
{
    struct epoll_event evs[FWD_EVENTS];
    int pending = 0, n, timeout;
    int64_t last_tick = nb_clock_mono_ms();
    uint64_t expirations;

    while (stop_reason == NULL) {
        if (pending)
            timeout = 0;
        else if (relay_connecting() > 0 || up->pidfd == -1)
            timeout = 1000;
        else
            timeout = -1;
        n = epoll_wait(epfd, evs, FWD_EVENTS, timeout);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            nb_error("epoll_wait: %s", strerror(errno));
            fwd_stop("epoll_wait failed", 1);
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            switch (FWD_TAG_KIND(tag)) {
            case FWD_TAG_TCP_LISTEN:
                if (is_paused())
                    refuse_paused(tcp_fd);
                else
                    relay_accept(tcp_fd, 1);
                break;
            case FWD_TAG_UNIX_LISTEN:
                if (is_paused())
                    refuse_paused(unix_fd);
                else
                    relay_accept(unix_fd, 0);
                break;
            case FWD_TAG_SIGNAL:
                on_signal(sig_fd);
                break;
            case FWD_TAG_EXPIRY:
                if (read(timer_fd, &expirations, sizeof(expirations)) > 0)
                    fwd_stop("expired", 0);
                break;
            case FWD_TAG_TARGET:
                fwd_stop("the sandbox's process is gone", 0);
                break;
            default:
                relay_event(tag, evs[i].events);
                break;
            }
        }
        pending = relay_run_pending();
        if (nb_clock_mono_ms() - last_tick >= 1000) {
            last_tick = nb_clock_mono_ms();
            relay_tick();
            if (up->pidfd == -1 && !upstream_target_alive(up))
                fwd_stop("the sandbox's process is gone", 0);
        }
    }
}

static void format_time(time_t t, char *out, size_t len)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "tcp 0.0.0.0:4000 and unix /run/nanobox/ports/x.sock", with the port
 * really bound when --listen asked for port 0. */
static void describe_listeners(const struct fwd_opts *o, int hostport, char *out, size_t len)
{
    int n = 0;

    out[0] = '\0';
    if (o->listen != NULL) {
        const char *colon = strrchr(o->listen, ':');
        n = snprintf(out, len, "tcp %.*s:%d", (int)(colon - o->listen), o->listen, hostport);
    }
    if (o->unix_path != NULL && n >= 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "%sunix %s", n > 0 ? " and " : "", o->unix_path);
}

int main(int argc, char **argv)
{
    struct fwd_opts o;
    struct upstream up = {.pidfd = -1, .target_ns = -1, .self_ns = -1};
    struct listener_unix lu = {{0}, 0, 0};
    struct itimerspec its;
    sigset_t mask;
    char err[512], until[32], where[256];
    int help, rc, hostport = 0, devnull;
    int tcp_fd = -1, unix_fd = -1, epfd = -1, sig_fd = -1, timer_fd = -1;
    const struct relay_stats *st;

    /* A dead peer (or spawner, on the ready fd) or a lost terminal must not
     * kill the process. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    nb_log_init("nanobox-fwd", NB_LOG_INFO);
    if (opts_parse(argc, argv, &o, &help, err, sizeof(err)) == -1) {
        if (help) {
            usage(stdout);
            return FWD_EXIT_OK;
        }
        fprintf(stderr, "nanobox-fwd: %s\n", err);
        usage(stderr);
        return startup_fail(&o, EINVAL, err);
    }
    nb_log_init("nanobox-fwd", o.level);
    paused_file = o.paused_file;
    if (o.ready_fd != -1)
        (void)fcntl(o.ready_fd, F_SETFD, FD_CLOEXEC);

    /* The spawner detached us: nothing is for us on stdin. */
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull != -1 && devnull != STDIN_FILENO) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    if (o.expires <= nb_clock_real_s()) {
        snprintf(err, sizeof(err), "--expires %lld is in the past", (long long)o.expires);
        return startup_fail(&o, EINVAL, err);
    }
    raise_fd_limit(o.max_conns);

    if (upstream_open(&up, o.target_pid, o.port, err, sizeof(err)) == -1) {
        rc = startup_fail(&o, errno, err);
        goto out;
    }
    if (o.listen != NULL) {
        tcp_fd = listener_tcp_bind(o.listen, &hostport, err, sizeof(err));
        if (tcp_fd == -1) {
            rc = startup_fail(&o, errno, err);
            goto out;
        }
    }
    if (o.unix_path != NULL) {
        unix_fd = listener_unix_bind(o.unix_path, o.unix_mode, o.unix_group, &lu, err, sizeof(err));
        if (unix_fd == -1) {
            rc = startup_fail(&o, errno, err);
            goto out;
        }
    }

    epfd = epoll_create1(EPOLL_CLOEXEC);
    sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    /* CLOCK_REALTIME with an absolute time: --expires is wall-clock, like
     * the expires_at the API answered */
    timer_fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = o.expires;
    if (epfd == -1 || sig_fd == -1 || timer_fd == -1 ||
        timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == -1 ||
        epoll_watch(epfd, sig_fd, EPOLLIN, FWD_TAG_SIGNAL) == -1 ||
        epoll_watch(epfd, timer_fd, EPOLLIN, FWD_TAG_EXPIRY) == -1 ||
        (up.pidfd != -1 && epoll_watch(epfd, up.pidfd, EPOLLIN, FWD_TAG_TARGET) == -1) ||
        (tcp_fd != -1 && epoll_watch(epfd, tcp_fd, EPOLLIN, FWD_TAG_TCP_LISTEN) == -1) ||
        (unix_fd != -1 && epoll_watch(epfd, unix_fd, EPOLLIN, FWD_TAG_UNIX_LISTEN) == -1)) {
        int saved = errno;
        snprintf(err, sizeof(err), "event loop set-up: %s", strerror(saved));
        rc = startup_fail(&o, saved, err);
        goto out;
    }
    if (relay_init(epfd, &up, o.max_conns, o.pipe_size, fwd_stop) == -1) {
        int saved = errno;
        snprintf(err, sizeof(err), "connection slots: %s", strerror(saved));
        rc = startup_fail(&o, saved, err);
        goto out;
    }

    format_time(o.expires, until, sizeof(until));
    describe_listeners(&o, hostport, where, sizeof(where));
    nb_info("forwarding %s to 127.0.0.1:%d in the network namespace of pid %d until %s "
            "(max %zu connections%s)",
            where, o.port, (int)o.target_pid, until, o.max_conns,
            up.pidfd == -1 ? ", no pidfd: polling the pid" : "");
    ready_report(&o, "OK %d", hostport);

    fwd_run(epfd, tcp_fd, unix_fd, sig_fd, timer_fd, &up);

    st = relay_get_stats();
    nb_info("exiting: %s; %llu connections (%zu open at exit), %llu refused upstream, "
            "%llu rejected, %llu bytes to the app, %llu bytes from it",
            stop_reason, (unsigned long long)st->accepted, relay_active(),
            (unsigned long long)st->refused, (unsigned long long)st->rejected,
            (unsigned long long)st->bytes_up, (unsigned long long)st->bytes_down);
    relay_shutdown();
    rc = stop_status;

out:
    if (tcp_fd != -1)
        close(tcp_fd);
    if (unix_fd != -1) {
        close(unix_fd);
        listener_unix_unlink(&lu);
    }
    if (timer_fd != -1)
        close(timer_fd);
    if (sig_fd != -1)
        close(sig_fd);
    if (epfd != -1)
        close(epfd);
    upstream_close(&up);
    return rc;
}
