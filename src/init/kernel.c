/*
 * kernel.c - see kernel.h.
 *
 * A K connection is passed on, not served: init makes sure a bridge runs,
 * sends it the connection's fd with the message "K" followed by the bytes
 * init already read after the request (a host that knows kernel-pipe sends
 * the bridge's j request at once: its start, or all of it, came with the
 * K), and closes its own copy. The fd goes over in blocking mode:
 * the bridge's sockets are plain blocking sockets, and init, which made
 * the socket non-blocking for its loop, never touches it again.
 *
 * The bridge is spawned like a command (proc.c): vfork, and the child only
 * makes syscalls on memory prepared before it, so a failed execve is sent
 * back as an errno through a close-on-exec pipe rather than reported by
 * the child. init's end of the socketpair is close-on-exec and
 * non-blocking: a bridge that does not take connections fills the
 * socket's queue and K answers EAGAIN instead of stalling the loop.
 *
 * A bridge that died is noticed two ways: the reaper (init_kernel_reaped)
 * and sendmsg failing with EPIPE/ECONNREFUSED/ECONNRESET (its end closed
 * before the SIGCHLD was handled). Either way init forgets it, kills what
 * it left in its process group (node or bash children no bridge can reach
 * any more) and, on a K, starts a new one once.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentproto.h"
#include "reply.h"
#include "init.h"
#include "kernel.h"
#include "proc.h"
#include "root.h"
#include "ops.h"

#define KERNEL_PYTHON_DIRS "/usr/local/bin:/usr/bin:/bin"
#define KERNEL_FD 3 /* the bridge's end of the socketpair, in the bridge */
#define KERNEL_FD_ENV "NANOBOX_KERNEL_FD=3"
#define KERNEL_PATH_ENV "NANOBOX_KERNEL_BRIDGE" /* tests only: see kernel.h */
#define KERNEL_NO_PYTHON "this sandbox's image has no code interpreter (python3)"

extern char **environ;

static pid_t bridge_pid;                               /* 0: no bridge */
static int bridge_fd = -1;                             /* init's end of the socketpair */
static char bridge_path[PATH_MAX] = NBA_KERNEL_BRIDGE; /* argv[2] of the bridge */

void init_kernel_setup(void)
{
    const char *p = getenv(KERNEL_PATH_ENV);

    if (!init_is_pid1 && p != NULL && p[0] == '/' && strlen(p) < sizeof(bridge_path))
        snprintf(bridge_path, sizeof(bridge_path), "%s", p);
}

/* --- the bridge process ------------------------------------------------------ */

/* Forget the bridge (it died or its end of the socketpair is gone). */
static void bridge_forget(void)
{
    pid_t pid = bridge_pid;

    if (bridge_fd != -1)
        close(bridge_fd);
    bridge_fd = -1;
    bridge_pid = 0;
    /* Its process group outlives it only through what it started. */
    if (pid > 1)
        kill(-pid, SIGKILL);
}

void init_kernel_reaped(pid_t pid)
{
    if (bridge_pid != 0 && pid == bridge_pid)
        bridge_forget();
}

void init_kernel_signal(int sig)
{
    if (bridge_pid > 1)
        kill(-bridge_pid, sig);
}

/* Has the bridge exited, its SIGCHLD not yet handled? Reaps it then. */
static void bridge_check(void)
{
    int status;

    if (bridge_pid != 0 && waitpid(bridge_pid, &status, WNOHANG) == bridge_pid)
        bridge_forget();
}

/* python3 from the fixed list of directories (not the sandbox's PATH). */
static int find_python(char *out, size_t outlen)
{
    const char *p = KERNEL_PYTHON_DIRS;
    struct stat st;

    for (;;) {
        const char *end = strchrnul(p, ':');
        snprintf(out, outlen, "%.*s/python3", (int)(end - p), p);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        if (*end == '\0')
            return -1;
        p = end + 1;
    }
}

/* The bridge file, readable. */
static int bridge_file_ok(void)
{
    struct stat st;

    return stat(bridge_path, &st) == 0 && S_ISREG(st.st_mode) && access(bridge_path, R_OK) == 0;
}

/* init's environment with NANOBOX_KERNEL_FD=3 in place of any such entry.
 * The strings are environ's own: only the array is allocated. */
static char **env_build(void)
{
    static char fd_env[] = KERNEL_FD_ENV;
    size_t n = 0, k = 0;
    char **v;

    while (environ != NULL && environ[n] != NULL)
        n++;
    v = calloc(n + 2, sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "NANOBOX_KERNEL_FD=", 18) != 0)
            v[k++] = environ[i];
    }
    v[k] = fd_env;
    return v;
}

/* fd moved to a number above KERNEL_FD (close-on-exec), so that the
 * child's dup2 onto KERNEL_FD never closes it. -1 on failure (fd closed). */
static int fd_above(int fd)
{
    int nfd;

    if (fd > KERNEL_FD)
        return fd;
    nfd = fcntl(fd, F_DUPFD_CLOEXEC, KERNEL_FD + 1);
    close(fd);
    return nfd;
}

/* Between vfork and exec: syscalls only (see the top of proc.c). */
static void __attribute__((noreturn))
bridge_child(const char *python, char **argv, char **envp, int sock, int errfd)
{
    int e, null;

    init_child_signals();
    if (setsid() == -1)
        goto fail;
    null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null == -1 || dup2(null, 0) == -1)
        goto fail;
    /* dup2 clears close-on-exec on the new number: fd 3 survives exec. */
    if (dup2(sock, KERNEL_FD) == -1)
        goto fail;
    /* root mode: the bridge runs as the sandbox user, as commands do */
    if (init_root_child(0) == -1)
        goto fail;
    execve(python, argv, envp);
fail:
    e = errno;
    while (write(errfd, &e, sizeof(e)) == -1 && errno == EINTR)
        ;
    _exit(127);
}

static pid_t __attribute__((noinline))
bridge_vfork(const char *python, char **argv, char **envp, int sock, int errfd)
{
    pid_t pid = vfork();

    if (pid == 0)
        bridge_child(python, argv, envp, sock, errfd);
    return pid;
}

/* Start the bridge. 0, or an errno with a message for the host. */
static int bridge_spawn(char *err, size_t errlen)
{
    static char arg0[] = "python3", arg1[] = "-I";
    char python[64], *argv[4] = {arg0, arg1, bridge_path, NULL}, **envp;
    int sv[2] = {-1, -1}, ep[2] = {-1, -1}, child_err = 0, e = 0;
    ssize_t n;
    pid_t pid;

    if (find_python(python, sizeof(python)) != 0 || !bridge_file_ok()) {
        snprintf(err, errlen, "%s", KERNEL_NO_PYTHON);
        return ENOEXEC;
    }
    envp = env_build();
    if (envp == NULL) {
        snprintf(err, errlen, "start the code bridge: %s", strerror(ENOMEM));
        return ENOMEM;
    }
    /* Not SOCK_NONBLOCK: that would be the bridge's end's mode too. */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1 ||
        pipe2(ep, O_CLOEXEC) == -1 || (sv[1] = fd_above(sv[1])) == -1 ||
        (ep[1] = fd_above(ep[1])) == -1 ||
        fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) == -1) {
        e = errno;
        goto out;
    }
    pid = bridge_vfork(python, argv, envp, sv[1], ep[1]);
    if (pid == -1) {
        e = errno == ENOMEM ? EAGAIN : errno;
        goto out;
    }
    /* After a real vfork the child has exec'd or exited by now; either
     * way its copy of ep[1] is closed once ours is, and the read ends. */
    close(ep[1]);
    ep[1] = -1;
    while ((n = read(ep[0], &child_err, sizeof(child_err))) == -1 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof(child_err)) {
        while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
            ;
        e = child_err;
        goto out;
    }
    bridge_pid = pid;
    bridge_fd = sv[0];
    sv[0] = -1;
out:
    if (e != 0)
        snprintf(err, errlen, "start the code bridge: %s", strerror(e));
    for (int i = 0; i < 2; i++) {
        if (sv[i] != -1)
            close(sv[i]);
        if (ep[i] != -1)
            close(ep[i]);
    }
    free(envp);
    return e;
}

/* --- handing a connection over --------------------------------------------- */

/* sendmsg of "K" with SCM_RIGHTS [fd]: 0 or an errno. */
static int bridge_send(int fd, const unsigned char *extra, size_t extra_len)
{
    char k = 'K';
    /* iov_base is not const; sendmsg only reads it */
    union {
        const unsigned char *c;
        void *v;
    } ex = {.c = extra};
    struct iovec iov[2] = {{.iov_base = &k, .iov_len = 1},
                           {.iov_base = ex.v, .iov_len = extra_len}};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m;
    struct cmsghdr *cm;
    ssize_t n;

    memset(&u, 0, sizeof(u));
    memset(&m, 0, sizeof(m));
    m.msg_iov = iov;
    m.msg_iovlen = extra_len > 0 ? 2 : 1;
    m.msg_control = u.buf;
    m.msg_controllen = sizeof(u.buf);
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    while ((n = sendmsg(bridge_fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL)) == -1 && errno == EINTR)
        ;
    if (n == -1)
        return errno;
    return (size_t)n == 1 + extra_len ? 0 : EMSGSIZE;
}

/* Pass the connection in blocking mode; on failure it stays as it was. */
static int bridge_pass(int fd, const unsigned char *extra, size_t extra_len)
{
    int fl = fcntl(fd, F_GETFL), e;

    if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
        return errno;
    e = bridge_send(fd, extra, extra_len);
    if (e != 0)
        fcntl(fd, F_SETFL, fl);
    return e;
}

void init_kernel_start(struct init_conn *c, const struct init_request *r)
{
    char err[256];
    int e = EPIPE;
    const unsigned char *extra = NULL;
    size_t extra_len = init_reply_extra_input(c, &extra);

    (void)r;
    if (extra_len > NBA_KERNEL_PASS_MAX) {
        init_reply_error(c, EPROTO,
                         "more than %u bytes after the K request: send the rest after the "
                         "bridge's first frame",
                         NBA_KERNEL_PASS_MAX);
        return;
    }
    bridge_check();
    for (int attempt = 0; attempt < 2; attempt++) {
        if (bridge_pid == 0 && (e = bridge_spawn(err, sizeof(err))) != 0) {
            init_reply_error(c, e, "%s", err);
            return;
        }
        e = bridge_pass(init_reply_fd(c), extra, extra_len);
        if (e == 0) {
            init_reply_handed_off(c);
            return;
        }
        if (e != EPIPE && e != ECONNREFUSED && e != ECONNRESET)
            break;
        /* Its end is closed: it died or is dying. A new one, once. */
        bridge_forget();
    }
    if (e == EAGAIN || e == ETOOMANYREFS || e == ENOBUFS)
        init_reply_error(c, EAGAIN, "the code bridge is not taking connections (too many waiting)");
    else if (e == EPIPE || e == ECONNREFUSED || e == ECONNRESET)
        init_reply_error(c, EPIPE, "the code bridge exited as soon as it started");
    else
        init_reply_error(c, e, "pass the connection to the code bridge: %s", strerror(e));
}
