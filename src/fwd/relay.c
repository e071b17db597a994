/*
 * relay.c - see relay.h.
 *
 * Each direction of a connection (a "flow") moves bytes socket -> pipe ->
 * socket with splice(2), so they never cross into user space. The pipe's
 * fill level is counted from splice's own results: when splicing into it
 * answers EAGAIN while it still holds bytes, the pipe may be full rather
 * than the socket empty, so the socket is only marked drained when EAGAIN
 * comes with an empty pipe (haproxy's raw_sock.c reasons the same way).
 *
 * Half-close: EOF from one side ends only its flow; the pipe is drained to
 * the other side, then shutdown(other, SHUT_WR) passes the EOF on. The pair
 * is closed when both flows are done. A write that fails (the peer is gone)
 * ends that flow without ending the other, so a reply already on its way
 * is still delivered.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "fwd.h"
#include "log.h"
#include "pipe_pool.h"
#include "relay.h"

#define RELAY_SPLICE_MAX (1u << 20) /* most bytes asked of one splice() */
#define RELAY_TURN_BYTES (4u << 20) /* bytes a flow moves before others get a turn */
#define RELAY_ACCEPT_BATCH 64       /* accepts per listener wake-up */
#define RELAY_POOL_KEEP 32          /* idle pipes kept open */
#define RELAY_DRAIN_MAX 65536       /* bytes read and dropped before closing a refused client */
#define RELAY_WARN_EVERY 10         /* seconds between two "full" warnings */

enum { SIDE_CLIENT = 0, SIDE_SERVER = 1 };
enum conn_state { CONN_FREE = 0, CONN_CONNECTING, CONN_RELAYING };

/* One direction: flow[0] is client -> server, flow[1] server -> client;
 * flow[d] reads side d and writes side !d. */
struct relay_flow {
    struct fwd_pipe *pipe; /* NULL while nothing is in flight */
    uint8_t eof;           /* the source side has no more to send */
    uint8_t done;          /* EOF passed on (or the destination is gone) */
};

struct relay_conn {
    int fd[2];           /* by side: the client, the upstream socket */
    uint8_t state;       /* enum conn_state */
    uint8_t readable[2]; /* by side: until a read answers EAGAIN */
    uint8_t writable[2]; /* by side: until a write answers EAGAIN */
    uint8_t pending;     /* on the pending list */
    struct relay_flow flow[2];
    uint32_t gen;       /* bumped on free: stale epoll events miss */
    int32_t prev, next; /* pending list; next is also the free list */
    int64_t deadline;   /* connect timeout, monotonic seconds */
};

static struct relay_conn *conns;
static size_t conns_max;
static size_t conns_hwm; /* slots ever used: the rest are untouched pages */
static int32_t free_head = -1;
static int32_t pending_head = -1, pending_tail = -1;
static size_t pending_count;
static size_t n_active, n_connecting;
static int relay_epfd = -1;
static int reserve_fd = -1; /* given up to accept-and-close when out of fds */
static struct upstream *relay_up;
static fwd_stop_fn *relay_stop;
static struct relay_stats stats;
static int64_t last_full_warn;

int relay_init(int epfd, struct upstream *up, size_t max_conns, size_t pipe_size, fwd_stop_fn *stop)
{
    relay_epfd = epfd;
    relay_up = up;
    relay_stop = stop;
    conns_max = max_conns;
    conns = nb_xcalloc(max_conns, sizeof(*conns));
    if (pipe_pool_init(2 * max_conns, RELAY_POOL_KEEP, pipe_size) == -1)
        return -1;
    reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return 0;
}

static int32_t slot_of(const struct relay_conn *c)
{
    return (int32_t)(c - conns);
}

static struct relay_conn *conn_alloc(void)
{
    struct relay_conn *c;

    if (free_head != -1) {
        c = &conns[free_head];
        free_head = c->next;
    } else if (conns_hwm < conns_max) {
        c = &conns[conns_hwm++];
    } else {
        return NULL;
    }
    uint32_t gen = c->gen;
    memset(c, 0, sizeof(*c));
    c->gen = gen;
    c->fd[0] = c->fd[1] = -1;
    c->prev = c->next = -1;
    n_active++;
    return c;
}

static void pending_remove(struct relay_conn *c)
{
    if (!c->pending)
        return;
    if (c->prev != -1)
        conns[c->prev].next = c->next;
    else
        pending_head = c->next;
    if (c->next != -1)
        conns[c->next].prev = c->prev;
    else
        pending_tail = c->prev;
    c->prev = c->next = -1;
    c->pending = 0;
    pending_count--;
}

static void pending_add(struct relay_conn *c)
{
    if (c->pending)
        return;
    c->pending = 1;
    c->next = -1;
    c->prev = pending_tail;
    if (pending_tail != -1)
        conns[pending_tail].next = slot_of(c);
    else
        pending_head = slot_of(c);
    pending_tail = slot_of(c);
    pending_count++;
}

static void conn_free(struct relay_conn *c)
{
    pending_remove(c);
    if (c->state == CONN_CONNECTING)
        n_connecting--;
    for (int i = 0; i < 2; i++) {
        if (c->fd[i] != -1)
            close(c->fd[i]); /* also leaves the epoll set */
        c->fd[i] = -1;
        if (c->flow[i].pipe != NULL)
            pipe_pool_put(c->flow[i].pipe);
        c->flow[i].pipe = NULL;
    }
    c->state = CONN_FREE;
    c->gen++;
    c->next = free_head;
    free_head = slot_of(c);
    n_active--;
}

/* Close a client that gets nothing: FIN rather than RST, so read what it
 * already sent (closing with unread bytes makes the kernel reset). */
static void close_gently(int fd)
{
    static char sink[4096];
    size_t dropped = 0;
    ssize_t n;

    shutdown(fd, SHUT_WR);
    while (dropped < RELAY_DRAIN_MAX) {
        n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n <= 0)
            break;
        dropped += (size_t)n;
    }
    close(fd);
}

/* The app is not there (refused, or too slow to accept). */
static void conn_refuse(struct relay_conn *c, int err)
{
    nb_debug("upstream 127.0.0.1:%d: %s: closing the client", ntohs(relay_up->addr.sin_port),
             strerror(err));
    stats.refused++;
    close_gently(c->fd[SIDE_CLIENT]);
    c->fd[SIDE_CLIENT] = -1;
    conn_free(c);
}

static void warn_full(const char *why)
{
    int64_t now = nb_clock_mono_s();

    if (now - last_full_warn < RELAY_WARN_EVERY)
        return;
    last_full_warn = now;
    nb_warn("rejecting connections: %s (%zu active, %llu rejected so far)", why, n_active,
            (unsigned long long)stats.rejected);
}

/* A flow's destination is gone: nothing more can be delivered its way. */
static void flow_drop(struct relay_flow *f)
{
    f->eof = 1;
    f->done = 1;
    if (f->pipe != NULL)
        pipe_pool_put(f->pipe); /* closed, since it still holds bytes */
    f->pipe = NULL;
}

/* Move what can be moved for flow dir without blocking. Sets *more when the
 * flow stopped only because its turn was used up. Returns -1 when the flow
 * cannot get a pipe (out of fds): the connection must go. */
static int flow_pump(struct relay_conn *c, int dir, int *more)
{
    struct relay_flow *f = &c->flow[dir];
    const int src = dir, dst = !dir;
    size_t turn = RELAY_TURN_BYTES;
    ssize_t n;

    if (f->done)
        return 0;
    for (;;) {
        int progress = 0;

        if (!f->eof && c->readable[src] && turn > 0) {
            if (f->pipe == NULL && (f->pipe = pipe_pool_get()) == NULL)
                return -1;
            n = splice(c->fd[src], NULL, f->pipe->wfd, NULL, RELAY_SPLICE_MAX,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                f->pipe->data += (size_t)n;
                turn = (size_t)n >= turn ? 0 : turn - (size_t)n;
                progress = 1;
            } else if (n == 0) {
                f->eof = 1;
                progress = 1;
            } else if (errno == EAGAIN) {
                /* with bytes in the pipe this may mean "pipe full" */
                if (f->pipe->data == 0)
                    c->readable[src] = 0;
            } else if (errno != EINTR) {
                /* reset or error: deliver what we hold, then pass on EOF */
                nb_debug("read from %s: %s", src == SIDE_CLIENT ? "client" : "upstream",
                         strerror(errno));
                f->eof = 1;
                progress = 1;
            }
        }
        if (f->pipe != NULL && f->pipe->data > 0 && c->writable[dst]) {
            n = splice(f->pipe->rfd, NULL, c->fd[dst], NULL, f->pipe->data,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                f->pipe->data -= (size_t)n;
                if (dir == 0)
                    stats.bytes_up += (uint64_t)n;
                else
                    stats.bytes_down += (uint64_t)n;
                progress = 1;
            } else if (n == -1 && errno == EAGAIN) {
                c->writable[dst] = 0;
            } else if (n == 0 || errno != EINTR) {
                nb_debug("write to %s: %s", dst == SIDE_CLIENT ? "client" : "upstream",
                         n == 0 ? "no progress" : strerror(errno));
                flow_drop(f);
                return 0;
            }
        }
        if (f->eof && (f->pipe == NULL || f->pipe->data == 0)) {
            shutdown(c->fd[dst], SHUT_WR);
            f->done = 1;
            break;
        }
        if (!progress)
            break;
    }
    if (f->pipe != NULL && f->pipe->data == 0) {
        pipe_pool_put(f->pipe);
        f->pipe = NULL;
    }
    if (!f->done && !f->eof && turn == 0 && c->readable[src])
        *more = 1;
    return 0;
}

static void conn_process(struct relay_conn *c)
{
    int more = 0, err;

    if (c->state == CONN_CONNECTING) {
        if (!c->writable[SIDE_SERVER])
            return;
        err = upstream_connect_result(c->fd[SIDE_SERVER]);
        if (err != 0) {
            conn_refuse(c, err);
            return;
        }
        c->state = CONN_RELAYING;
        n_connecting--;
    }
    for (int dir = 0; dir < 2; dir++) {
        if (flow_pump(c, dir, &more) == -1) {
            nb_warn("no pipe for a connection: %s: closing it", strerror(errno));
            conn_free(c);
            return;
        }
    }
    if (c->flow[0].done && c->flow[1].done) {
        conn_free(c);
        return;
    }
    if (more)
        pending_add(c);
}

static int conn_watch(struct relay_conn *c, int side)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = FWD_TAG(side == SIDE_CLIENT ? FWD_TAG_CLIENT : FWD_TAG_SERVER,
                          (uint32_t)slot_of(c), c->gen);
    return epoll_ctl(relay_epfd, EPOLL_CTL_ADD, c->fd[side], &ev);
}

/* Out of fds: accept the oldest waiting connection with the reserve fd and
 * close it, so a level-triggered listener does not spin on it. */
static void accept_reject_out_of_fds(int listen_fd)
{
    int fd;

    if (reserve_fd != -1) {
        close(reserve_fd);
        reserve_fd = -1;
    }
    fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd != -1) {
        close(fd);
        stats.rejected++;
    }
    reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    warn_full("out of file descriptors");
}

void relay_accept(int listen_fd, int is_tcp)
{
    struct relay_conn *c;
    int fd, up_fd, fatal, r, one = 1;

    for (int i = 0; i < RELAY_ACCEPT_BATCH; i++) {
        fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                /* idle pipes first: they are only a cache */
                if (pipe_pool_trim() == 0)
                    accept_reject_out_of_fds(listen_fd);
                continue;
            }
            if (errno != EAGAIN)
                nb_warn("accept: %s", strerror(errno));
            return;
        }
        c = conn_alloc();
        if (c == NULL) {
            close(fd);
            stats.rejected++;
            warn_full("all --max-conns slots are in use");
            continue;
        }
        if (is_tcp)
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd[SIDE_CLIENT] = fd;

        up_fd = upstream_socket(relay_up, &fatal);
        if (up_fd == -1) {
            if (fatal) {
                nb_error("cannot return to our own network namespace: %s", strerror(errno));
                relay_stop("setns back to our own namespace failed", 1);
            } else if (errno == EMFILE || errno == ENFILE) {
                warn_full("out of file descriptors");
            } else {
                nb_warn("cannot create a socket in the sandbox: %s", strerror(errno));
            }
            close(fd);
            c->fd[SIDE_CLIENT] = -1;
            stats.rejected++;
            conn_free(c);
            if (fatal)
                return;
            continue;
        }
        c->fd[SIDE_SERVER] = up_fd;
        stats.accepted++;

        r = upstream_connect(relay_up, up_fd);
        if (r == -1) {
            conn_refuse(c, errno);
            continue;
        }
        if (conn_watch(c, SIDE_CLIENT) == -1 || conn_watch(c, SIDE_SERVER) == -1) {
            nb_warn("epoll_ctl: %s", strerror(errno));
            conn_free(c);
            continue;
        }
        if (r == 1) {
            c->state = CONN_CONNECTING;
            c->deadline = nb_clock_mono_s() + RELAY_CONNECT_TIMEOUT;
            n_connecting++;
        } else {
            c->state = CONN_RELAYING;
            /* registration reported what is already there: act on it from
             * the events, not here */
        }
    }
}

void relay_event(uint64_t tag, uint32_t events)
{
    uint32_t slot = FWD_TAG_SLOT(tag);
    int side = FWD_TAG_KIND(tag) == FWD_TAG_CLIENT ? SIDE_CLIENT : SIDE_SERVER;
    struct relay_conn *c;

    if (slot >= conns_hwm)
        return;
    c = &conns[slot];
    if (c->state == CONN_FREE || c->gen != FWD_TAG_GEN(tag))
        return; /* closed earlier in this batch */
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->readable[side] = 1;
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
        c->writable[side] = 1;
    conn_process(c);
}

int relay_run_pending(void)
{
    size_t n = pending_count; /* those re-queued now wait for the next round */

    while (n-- > 0 && pending_head != -1) {
        struct relay_conn *c = &conns[pending_head];
        pending_remove(c);
        conn_process(c);
    }
    return pending_head != -1;
}

void relay_tick(void)
{
    int64_t now = nb_clock_mono_s();

    for (size_t i = 0; i < conns_hwm && n_connecting > 0; i++) {
        struct relay_conn *c = &conns[i];
        if (c->state == CONN_CONNECTING && now >= c->deadline)
            conn_refuse(c, ETIMEDOUT);
    }
}

size_t relay_connecting(void)
{
    return n_connecting;
}

size_t relay_active(void)
{
    return n_active;
}

const struct relay_stats *relay_get_stats(void)
{
    return &stats;
}

void relay_shutdown(void)
{
    for (size_t i = 0; i < conns_hwm; i++) {
        if (conns[i].state != CONN_FREE)
            conn_free(&conns[i]);
    }
    pipe_pool_destroy();
    free(conns);
    conns = NULL;
    conns_hwm = conns_max = 0;
    free_head = -1;
    if (reserve_fd != -1)
        close(reserve_fd);
    reserve_fd = -1;
}
