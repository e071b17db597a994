/*
 * upstream.c - see upstream.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procstat.h"
#include "upstream.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif

static int pidfd_open_compat(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* State letter and start time of pid; -1 if gone. */
static int proc_stat(pid_t pid, char *state, unsigned long long *start)
{
    struct nb_procstat st;
    if (nb_procstat_read(pid, &st) != 0)
        return -1;
    *state = st.state;
    *start = st.start;
    return 0;
}

int upstream_open(struct upstream *up, pid_t pid, int port, char *err, size_t errlen)
{
    char path[64];
    int saved;
    struct pollfd pfd;
    char state;

    memset(up, 0, sizeof(*up));
    up->pid = pid;
    up->target_ns = -1;
    up->self_ns = -1;
    up->addr.sin_family = AF_INET;
    up->addr.sin_port = htons((uint16_t)port);
    up->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    /* The pidfd first: once held, pid cannot be reused under us, so the
     * namespace opened next (checked below) is that process's. */
    up->pidfd = pidfd_open_compat(pid);
    if (up->pidfd == -1) {
        saved = errno;
        if (saved == ESRCH) {
            snprintf(err, errlen, "no process %d", (int)pid);
            goto fail;
        }
        if (saved != ENOSYS && saved != EINVAL) {
            snprintf(err, errlen, "pidfd_open(%d): %s", (int)pid, strerror(saved));
            goto fail;
        }
        /* kernel before 5.3: fall back to polling /proc */
    }
    if (proc_stat(pid, &state, &up->start) == -1 || state == 'Z' || state == 'X') {
        saved = ESRCH;
        snprintf(err, errlen, "no process %d", (int)pid);
        goto fail;
    }

    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
    up->target_ns = open(path, O_RDONLY | O_CLOEXEC);
    if (up->target_ns == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(saved));
        if (saved == ENOENT)
            saved = ESRCH;
        goto fail;
    }
    up->self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (up->self_ns == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot open /proc/self/ns/net: %s", strerror(saved));
        goto fail;
    }
    if (up->pidfd != -1) {
        pfd.fd = up->pidfd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 0) == 1) {
            saved = ESRCH;
            snprintf(err, errlen, "process %d exited during start-up", (int)pid);
            goto fail;
        }
    }
    /* Try the round trip once now, so a missing privilege is a start-up
     * error rather than a refused connection later. */
    if (setns(up->target_ns, CLONE_NEWNET) == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot enter the network namespace of %d: %s", (int)pid,
                 strerror(saved));
        goto fail;
    }
    if (setns(up->self_ns, CLONE_NEWNET) == -1) {
        saved = errno;
        snprintf(err, errlen, "cannot return to our network namespace: %s", strerror(saved));
        goto fail;
    }
    return 0;

fail:
    upstream_close(up);
    errno = saved;
    return -1;
}

int upstream_socket(struct upstream *up, int *fatal)
{
    int fd, saved, one = 1;

    *fatal = 0;
    if (setns(up->target_ns, CLONE_NEWNET) == -1)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    saved = errno;
    if (setns(up->self_ns, CLONE_NEWNET) == -1) {
        *fatal = 1;
        saved = errno;
        if (fd != -1)
            close(fd);
        errno = saved;
        return -1;
    }
    if (fd == -1) {
        errno = saved;
        return -1;
    }
    /* we relay what arrives as it arrives: the sender already batched */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int upstream_connect(const struct upstream *up, int fd)
{
    if (connect(fd, (const struct sockaddr *)&up->addr, sizeof(up->addr)) == 0)
        return 0;
    if (errno == EINPROGRESS)
        return 1;
    return -1;
}

int upstream_connect_result(int fd)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == -1)
        return errno;
    return soerr;
}

int upstream_target_alive(const struct upstream *up)
{
    char state;
    unsigned long long start;

    if (proc_stat(up->pid, &state, &start) == -1)
        return 0;
    return state != 'Z' && state != 'X' && start == up->start;
}

void upstream_close(struct upstream *up)
{
    if (up->pidfd != -1)
        close(up->pidfd);
    up->pidfd = -1;
    if (up->target_ns != -1)
        close(up->target_ns);
    up->target_ns = -1;
    if (up->self_ns != -1)
        close(up->self_ns);
    up->self_ns = -1;
}
