/*
 * agent.c - see agent.h. The only place the host opens a connection into a
 * sandbox's agent; exec.c, files.c and procs.c speak through it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agentproto.h"
#include "clock.h"
#include "log.h"
#include "procstat.h"

/*
 * A fresh sandbox's agent may not have bound its socket yet: retry this
 * long. Its PID 1 starts when Docker's start returns; on a loaded machine
 * (50 cold creates at once on 2 cores) it took more than 2 s to listen.
 */
#define AGENT_START_GRACE_MS 5000
/* Sandboxes started longer ago get no retry: no agent means none will come. */
#define AGENT_YOUNG_S 5
#define AGENT_CONNECT_TIMEOUT_S 2
/* How long a broken connection waits to see whether PID 1 is dying. */
#define AGENT_DYING_WAIT_MS 300

/* Is pid still in the cgroup of container cid (i.e. its PID 1, not a reused pid)? */
static int pid_in_container(pid_t pid, const char *cid)
{
    char path[64], buf[8192];
    ssize_t n;
    int fd;
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return cid[0] != '\0' && strstr(buf, cid) != NULL;
}

/* Our own network namespace, opened once per process. */
static int self_netns(void)
{
    static int fd = -1;
    static pid_t owner;
    if (fd >= 0 && owner == getpid())
        return fd;
    fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    owner = getpid();
    return fd;
}

/* A unix socket created inside the namespace netns; -1 with errno. */
static int socket_in_netns(int netns)
{
    int self = self_netns(), fd, saved;
    if (self < 0)
        return -1;
    if (setns(netns, CLONE_NEWNET) != 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    saved = errno;
    if (setns(self, CLONE_NEWNET) != 0) {
        /* never go on serving requests from inside a sandbox's namespace */
        nb_error("cannot return to the host network namespace: %s", strerror(errno));
        abort();
    }
    errno = saved;
    return fd;
}

static int connect_once(int netns, pid_t init_pid, int *fd_out)
{
    struct sockaddr_un sa;
    struct timeval tv = {AGENT_CONNECT_TIMEOUT_S, 0};
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    socklen_t len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(NBA_SOCKET_NAME));
    int fd = socket_in_netns(netns);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, NBA_SOCKET_NAME, strlen(NBA_SOCKET_NAME));
    /* connect honours SO_SNDTIMEO on unix sockets: a stuck agent cannot hang us */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.pid != init_pid) {
        nb_warn(
            "the process answering as the agent (pid %d) is not the sandbox's PID 1 (%d): refused",
            (int)cred.pid, (int)init_pid);
        close(fd);
        errno = EPERM;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *fd_out = fd;
    return 0;
}

int nb_agent_connect(const struct nb_slot *slot, struct nb_agent *ag, struct nb_apierr *ae)
{
    char path[64];
    int netns, fd = -1, rc;
    int64_t until = nb_clock_mono_ms() + AGENT_START_GRACE_MS;
    /*
     * Young since the slot became what it is (a create's commit once the
     * container started, a hand-out, a resume), not since `created`: a cold
     * create that waited on a busy Docker for longer than AGENT_YOUNG_S was
     * never young, and the first call after it got agent_unavailable.
     */
    int64_t since = slot->state_since > slot->created ? slot->state_since : slot->created;
    int young = since > 0 && nb_clock_real_s() - since <= AGENT_YOUNG_S;

    memset(ag, 0, sizeof(*ag));
    ag->fd = -1;
    if (slot->init_pid <= 0) {
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "the sandbox's agent is not reachable (no init pid)");
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)slot->init_pid);
    /* open first, then check: the namespace held is that of the process checked */
    netns = open(path, O_RDONLY | O_CLOEXEC);
    if (netns < 0 || !pid_in_container(slot->init_pid, slot->container_id)) {
        if (netns >= 0)
            close(netns);
        nb_apierr_set(ae, NB_E_CONFLICT, "not_running", "the sandbox's container is not running");
        return -1;
    }
    for (;;) {
        rc = connect_once(netns, slot->init_pid, &fd);
        if (rc == 0 || !young || (errno != ECONNREFUSED && errno != ENOENT) ||
            nb_clock_mono_ms() >= until)
            break;
        usleep(2000);
    }
    close(netns);
    if (rc != 0) {
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "the sandbox's agent does not answer: %s", strerror(errno));
        return -1;
    }
    ag->fd = fd;
    ag->init_pid = slot->init_pid;
    snprintf(ag->cid, sizeof(ag->cid), "%s", slot->container_id);
    ag->in_cap = NBA_HDR + NBA_MAX_BODY;
    ag->in = nb_xmalloc(ag->in_cap);
    nb_buf_init(&ag->out, (size_t)64 * 1024 * 1024);
    return 0;
}

/* Ping, the pong's capabilities into *caps: 0, or -1 with ae set. */
static int agent_hello(const struct nb_slot *slot, int timeout_ms, unsigned *caps,
                       struct nb_apierr *ae)
{
    struct nb_agent ag;
    uint8_t type;
    const unsigned char *body;
    uint32_t len;
    int got;
    if (nb_agent_connect(slot, &ag, ae) != 0)
        return -1;
    nb_agent_queue(&ag, NBA_PING, NULL, 0);
    got = nb_agent_recv(&ag, timeout_ms, &type, &body, &len, ae);
    if (got == 1 && type == NBA_PONG)
        *caps = nb_agent_caps_parse(body, len);
    nb_agent_close(&ag);
    if (got == 1 && type == NBA_PONG)
        return 0;
    if (got >= 0)
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "the sandbox's agent did not answer a ping");
    return -1;
}

int nb_agent_ping(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae)
{
    unsigned caps;
    return agent_hello(slot, timeout_ms, &caps, ae);
}

unsigned nb_agent_caps_parse(const unsigned char *body, uint32_t len)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {
        {NBA_CAP_QUERY_WAIT, NB_AGENT_CAP_QUERY_WAIT},   {NBA_CAP_BG_PTY, NB_AGENT_CAP_BG_PTY},
        {NBA_CAP_BG_CLOSE, NB_AGENT_CAP_BG_CLOSE},       {NBA_CAP_META, NB_AGENT_CAP_META},
        {NBA_CAP_KERNEL_PIPE, NB_AGENT_CAP_KERNEL_PIPE},
    };
    unsigned caps = 0;
    uint32_t i = 0;

    /* "nanobox-init <version>" first: the words after it */
    for (int word = 0; i < len; word++) {
        uint32_t start, n;
        while (i < len && body[i] == ' ')
            i++;
        start = i;
        while (i < len && body[i] != ' ')
            i++;
        n = i - start;
        if (word < 2 || n == 0)
            continue;
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (strlen(names[k].name) == n && !memcmp(body + start, names[k].name, n))
                caps |= names[k].bit;
    }
    return caps;
}

/* Capabilities learnt in this process, by container and PID 1 (a few sandboxes per worker). */
#define AGENT_CAPS_CACHE 64
#define AGENT_CAPS_PING_MS 2000
static struct {
    char cid[NB_CID_LEN + 1];
    pid_t init_pid;
    unsigned caps;
} caps_cache[AGENT_CAPS_CACHE];
static unsigned caps_next;

unsigned nb_agent_caps(const struct nb_slot *slot)
{
    struct nb_apierr ae;
    unsigned caps = 0, i;

    for (i = 0; i < AGENT_CAPS_CACHE; i++)
        if (caps_cache[i].init_pid == slot->init_pid && slot->init_pid > 0 &&
            !strcmp(caps_cache[i].cid, slot->container_id))
            return caps_cache[i].caps;
    if (agent_hello(slot, AGENT_CAPS_PING_MS, &caps, &ae) != 0)
        return NB_AGENT_CAPS_ALL; /* not asked: the request that follows fails as it would */
    i = caps_next++ % AGENT_CAPS_CACHE;
    snprintf(caps_cache[i].cid, sizeof(caps_cache[i].cid), "%s", slot->container_id);
    caps_cache[i].init_pid = slot->init_pid;
    caps_cache[i].caps = caps;
    return caps;
}

void nb_agent_close(struct nb_agent *ag)
{
    if (ag->fd >= 0)
        close(ag->fd);
    ag->fd = -1;
    free(ag->in);
    ag->in = NULL;
    nb_buf_free(&ag->out);
}

void nb_agent_abandon(struct nb_agent *ag, int timeout_ms)
{
    int64_t end = nb_clock_mono_ms() + timeout_ms;
    char sink[4096];

    if (ag->fd >= 0 && shutdown(ag->fd, SHUT_WR) == 0) {
        for (;;) {
            int64_t left = end - nb_clock_mono_ms();
            struct pollfd p = {ag->fd, POLLIN, 0};
            ssize_t n;
            if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                break;
            n = recv(ag->fd, sink, sizeof(sink), MSG_DONTWAIT);
            if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR))
                break; /* the agent closed: its side is cleaned up */
        }
    }
    nb_agent_close(ag);
}

void nb_agent_field(struct nb_buf *b, uint8_t tag, const void *val, size_t len)
{
    unsigned char hdr[NBA_HDR];
    nba_frame_hdr(hdr, tag, (uint32_t)len);
    nb_buf_append(b, hdr, sizeof(hdr));
    if (len > 0)
        nb_buf_append(b, val, len);
}

void nb_agent_field_str(struct nb_buf *b, uint8_t tag, const char *s)
{
    nb_agent_field(b, tag, s, strlen(s));
}

void nb_agent_field_u32(struct nb_buf *b, uint8_t tag, uint32_t v)
{
    unsigned char x[4];
    nba_put_u32(x, v);
    nb_agent_field(b, tag, x, sizeof(x));
}

void nb_agent_field_u64(struct nb_buf *b, uint8_t tag, uint64_t v)
{
    unsigned char x[8];
    nba_put_u64(x, v);
    nb_agent_field(b, tag, x, sizeof(x));
}

void nb_agent_queue(struct nb_agent *ag, uint8_t type, const void *body, size_t len)
{
    nb_agent_field(&ag->out, type, body, len); /* a frame has the layout of a field */
}

/*
 * Is the sandbox's PID 1 gone (exited, a zombie, or not the container's any
 * more)? A PID 1 that was just killed closes its sockets before it becomes
 * a zombie, so a connection can break a moment before this turns true:
 * look again for up to wait_ms.
 */
static int init_gone(pid_t pid, const char *cid, int wait_ms)
{
    int64_t until = nb_clock_mono_ms() + wait_ms;
    for (;;) {
        struct nb_procstat st;
        if (nb_procstat_read(pid, &st) != 0 || st.state == 'Z' || st.state == 'X' ||
            !pid_in_container(pid, cid))
            return 1;
        if (nb_clock_mono_ms() >= until)
            return 0;
        usleep(5000);
    }
}

int nb_agent_sandbox_gone(const struct nb_slot *slot, int wait_ms)
{
    return init_gone(slot->init_pid, slot->container_id, wait_ms);
}

/*
 * The connection broke: if the sandbox's PID 1 is gone too, the sandbox
 * stopped under us (409, as for any request to a stopped sandbox), not an
 * agent fault (502).
 */
static void agent_broken(const struct nb_agent *ag, struct nb_apierr *ae)
{
    if (init_gone(ag->init_pid, ag->cid, AGENT_DYING_WAIT_MS))
        nb_apierr_set(ae, NB_E_CONFLICT, "not_running", "the sandbox's container stopped");
}

/* Send what the socket takes now. 0, or -1 on a broken connection. */
static int agent_write(struct nb_agent *ag)
{
    while (ag->out.len > 0) {
        ssize_t n = send(ag->fd, ag->out.data, ag->out.len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return -1;
        }
        memmove(ag->out.data, ag->out.data + n, ag->out.len - (size_t)n);
        ag->out.len -= (size_t)n;
    }
    return 0;
}

int nb_agent_flush(struct nb_agent *ag, int timeout_ms, struct nb_apierr *ae)
{
    int64_t until = nb_clock_mono_ms() + timeout_ms;
    while (ag->out.len > 0) {
        struct pollfd p = {ag->fd, POLLOUT, 0};
        int left = (int)(until - nb_clock_mono_ms());
        if (agent_write(ag) != 0) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                          "lost the connection to the sandbox's agent: %s", strerror(errno));
            agent_broken(ag, ae);
            return -1;
        }
        if (ag->out.len == 0)
            break;
        if (left <= 0 || poll(&p, 1, left) == 0) {
            nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout", "the sandbox's agent stopped reading");
            return -1;
        }
    }
    return 0;
}

int nb_agent_poll_frame(struct nb_agent *ag, uint8_t *type, const unsigned char **body,
                        uint32_t *len, struct nb_apierr *ae)
{
    long got;
    if (ag->consumed > 0) {
        memmove(ag->in, ag->in + ag->consumed, ag->in_len - ag->consumed);
        ag->in_len -= ag->consumed;
        ag->consumed = 0;
    }
    if (agent_write(ag) != 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                      "lost the connection to the sandbox's agent: %s", strerror(errno));
        agent_broken(ag, ae);
        return -1;
    }
    for (;;) {
        ssize_t n;
        got = nba_frame_peek(ag->in, ag->in_len, NBA_MAX_BODY, type, body, len);
        if (got < 0) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                          "the sandbox's agent sent a malformed frame");
            return -1;
        }
        if (got > 0) {
            ag->consumed = (size_t)got;
            return 1;
        }
        n = recv(ag->fd, ag->in + ag->in_len, ag->in_cap - ag->in_len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n <= 0) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                          "the sandbox's agent closed the connection%s%s", n < 0 ? ": " : " early",
                          n < 0 ? strerror(errno) : "");
            agent_broken(ag, ae);
            return -1;
        }
        ag->in_len += (size_t)n;
    }
}

int nb_agent_recv(struct nb_agent *ag, int timeout_ms, uint8_t *type, const unsigned char **body,
                  uint32_t *len, struct nb_apierr *ae)
{
    return nb_agent_recv_watch(ag, timeout_ms, -1, type, body, len, ae);
}

int nb_agent_peer_left(int fd)
{
    char c;
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    if (fd < 0 || poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
        return 1;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

int nb_agent_recv_watch(struct nb_agent *ag, int timeout_ms, int watch_fd, uint8_t *type,
                        const unsigned char **body, uint32_t *len, struct nb_apierr *ae)
{
    int64_t until = nb_clock_mono_ms() + timeout_ms;
    int watching = watch_fd >= 0; /* in the poll set: until it shows data that is no close */
    for (;;) {
        struct pollfd p[2] = {{ag->fd, POLLIN, 0}, {watch_fd, POLLIN | POLLRDHUP, 0}};
        int left, rc = nb_agent_poll_frame(ag, type, body, len, ae);
        if (rc != 0)
            return rc;
        left = (int)(until - nb_clock_mono_ms());
        if (left <= 0)
            return 0;
        if (ag->out.len > 0)
            p[0].events |= POLLOUT;
        /* unwatched (it had data), the peer is looked at once a second instead */
        if (poll(p, watching ? 2 : 1, left > 1000 ? 1000 : left) < 0 && errno != EINTR) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "poll: %s", strerror(errno));
            return -1;
        }
        if (watch_fd >= 0 && (p[1].revents != 0 || !watching) && nb_agent_peer_left(watch_fd))
            return 2;
        if (p[1].revents != 0)
            watching = 0;
    }
}

void nb_agent_error(const unsigned char *body, uint32_t len, const char *what, struct nb_apierr *ae)
{
    int e = len >= 4 ? (int)nba_get_u32(body) : EPROTO;
    int mlen = len > 4 ? (int)(len - 4 > 200 ? 200 : len - 4) : 0;
    const char *msg = mlen > 0 ? (const char *)body + 4 : strerror(e);
    enum nb_err err = NB_E_INTERNAL;
    const char *code = "agent_error";

    if (mlen == 0)
        mlen = (int)strlen(msg);
    switch (e) {
    case ENOENT:
        err = NB_E_NOT_FOUND;
        code = "not_found";
        break;
    case EACCES:
    case EPERM:
    case EROFS:
        err = NB_E_FORBIDDEN;
        code = "forbidden";
        break;
    case EEXIST:
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
    case EXDEV:
    case EBUSY:
    case EPIPE:
        err = NB_E_CONFLICT;
        code = "conflict";
        break;
    case EFBIG:
        err = NB_E_TOO_LARGE;
        code = "too_large";
        break;
    case ENOSPC:
    case EDQUOT:
        err = NB_E_NO_SPACE;
        code = "no_space";
        break;
    case EINVAL:
    case EPROTO:
    case ENAMETOOLONG:
    case ELOOP:
        err = NB_E_INVALID;
        code = "bad_request";
        break;
    case EAGAIN:
        err = NB_E_LIMIT;
        code = "busy";
        break;
    case ESRCH:
        err = NB_E_NOT_FOUND;
        code = "no_process";
        break;
    default:
        break;
    }
    nb_apierr_set(ae, err, code, "could not %s: %.*s", what, mlen, msg);
}

int nb_agent_call(const struct nb_slot *slot, uint8_t req, const struct nb_buf *fields,
                  const char *what, int timeout_ms, nb_agent_frame_fn cb, void *ctx,
                  struct nb_apierr *ae)
{
    struct nb_agent ag;
    int64_t until = nb_clock_mono_ms() + timeout_ms;
    int rc = -1;

    if (nb_agent_connect(slot, &ag, ae) != 0)
        return -1;
    nb_agent_queue(&ag, req, fields ? fields->data : NULL, fields ? fields->len : 0);
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        int left = (int)(until - nb_clock_mono_ms()), got;
        if (left <= 0) {
            nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout",
                          "the sandbox's agent did not answer in time");
            break;
        }
        got = nb_agent_recv(&ag, left, &type, &body, &len, ae);
        if (got < 0)
            break;
        if (got == 0)
            continue;
        if (type == NBA_ERROR) {
            nb_agent_error(body, len, what, ae);
            break;
        }
        if (type == NBA_END) {
            rc = 0;
            break;
        }
        if (cb != NULL && cb(ctx, type, body, len) != 0) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                          "unexpected answer from the sandbox's agent");
            break;
        }
    }
    nb_agent_close(&ag);
    return rc;
}
