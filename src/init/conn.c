/*
 * conn.c - see conn.h.
 *
 * Sockets are level-triggered; the interest of each follows its state
 * (conn_update), so a connection that may not read (its operation is busy,
 * or it is flushing) simply is not woken for input. A failure found while
 * an operation is running a callback (a frame that does not fit) is not
 * acted on there: the connection's deadline is set to "now" and the next
 * tick tears it down from the top of the loop, where nothing is half done.
 *
 * Reads are recvmsg calls that take file descriptors too (SCM_RIGHTS):
 * those that come while the request is read belong to it (an exec with
 * I takes exactly three: the command's stdin, stdout and stderr); any
 * other request closes them unused, and any that come later are closed
 * at once. They arrive close-on-exec (MSG_CMSG_CLOEXEC), so no command
 * inherits one by accident.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentproto.h"
#include "clock.h"
#include "conn.h"
#include "init.h"
#include "ibuf.h"
#include "ops.h"
#include "reply.h"
#include "request.h"

#define CONN_ACCEPT_BATCH 64
#define CONN_READ_MIN (16u * 1024u) /* smallest read attempted */
#define CONN_ERRMSG_MAX 512         /* as reply.c's: an error message's bytes, at most */
#define CONN_CMSG_FDS 8 /* fds one read takes; more are closed by the kernel (MSG_CTRUNC) */

#define INIT_CONN_FDS 3 /* fds a request may carry: exec with I (NBA_STDIO_FDS) */

enum init_conn_state { INIT_CONN_REQUEST, INIT_CONN_ACTIVE, INIT_CONN_FLUSH, INIT_CONN_LINGER };

/* A host connection; handlers see only pub (reply.h). */
struct conn {
    struct init_conn pub;      /* reply: conn_reply; ops, op: the operation that owns it */
    struct init_watch w;       /* the socket */
    struct init_buf in;        /* bytes read, not yet handled */
    struct init_buf out;       /* bytes to send */
    uint8_t state;             /* enum init_conn_state */
    uint8_t in_paused;         /* ops->frame said "not now" */
    uint8_t in_eof;            /* the host shut down its sending side */
    uint8_t want_room;         /* call ops->drain when there is room */
    uint32_t req_bytes;        /* bytes of the request frame (header included) */
    uint8_t n_passed;          /* fds received while the request was read (SCM_RIGHTS) */
    uint8_t passed_bad;        /* more than INIT_CONN_FDS of them came (or were cut off) */
    int passed[INIT_CONN_FDS]; /* the request's fds (exec with I) */
    int64_t deadline;          /* monotonic ms; 0 none */
    struct conn *prev, *next;  /* all connections */
};

static const struct init_reply conn_reply; /* below: what handlers answer through */

static struct conn *conns;
static size_t n_conns;

static void conn_process(struct conn *c);

size_t init_conn_count(void)
{
    return n_conns;
}

static void conn_update(struct conn *c)
{
    uint32_t ev = 0;

    if (c->w.fd < 0)
        return;
    switch (c->state) {
    case INIT_CONN_REQUEST:
    case INIT_CONN_LINGER:
        ev = EPOLLIN;
        break;
    case INIT_CONN_ACTIVE:
        if (!c->in_paused && !c->in_eof)
            ev |= EPOLLIN;
        break;
    default:
        break;
    }
    if (init_buf_pending(&c->out) > 0)
        ev |= EPOLLOUT;
    init_watch_set(&c->w, ev);
}

static void conn_passed_close(struct conn *c)
{
    for (size_t i = 0; i < c->n_passed; i++)
        close(c->passed[i]);
    c->n_passed = 0;
}

/* Close now; the operation, if any, is told first. */
static void conn_destroy(struct conn *c)
{
    const struct init_conn_ops *ops = c->pub.ops;

    conn_passed_close(c);
    c->pub.ops = NULL;
    if (ops != NULL && ops->gone != NULL)
        ops->gone(&c->pub);
    c->pub.op = NULL;
    init_watch_close(&c->w);
    init_buf_free(&c->in);
    init_buf_free(&c->out);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    n_conns--;
    init_defer_free(c);
}

/* Tear down from the next tick rather than inside a callback. */
static void conn_break(struct conn *c)
{
    c->deadline = 1;
    c->state = INIT_CONN_FLUSH;
    init_buf_consume(&c->out, init_buf_pending(&c->out));
}

int init_conn_accept(int listen_fd)
{
    for (int i = 0; i < CONN_ACCEPT_BATCH; i++) {
        struct conn *c;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd == -1)
            return errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ? -1
                                                                                             : 0;
        if (n_conns >= INIT_MAX_CONNS || (c = calloc(1, sizeof(*c))) == NULL) {
            close(fd);
            continue;
        }
        c->pub.reply = &conn_reply;
        init_buf_init(&c->in, NBA_HDR + NBA_MAX_BODY);
        init_buf_init(&c->out, INIT_OUT_MAX);
        c->state = INIT_CONN_REQUEST;
        c->deadline = nb_clock_mono_ms() + INIT_REQ_TIMEOUT_MS;
        if (init_watch_add(&c->w, fd, INIT_W_CONN, 0, c, EPOLLIN) == -1) {
            close(fd);
            free(c);
            continue;
        }
        c->next = conns;
        if (conns != NULL)
            conns->prev = c;
        conns = c;
        n_conns++;
    }
    return 0;
}

/* --- the reply table (reply.h): pub is a connection's first member ------- */

static struct conn *conn_of(struct init_conn *pc)
{
    return (struct conn *)pc;
}

static const struct conn *conn_of_const(const struct init_conn *pc)
{
    return (const struct conn *)pc;
}

static int conn_room(const struct init_conn *pc, uint32_t body_len)
{
    const struct conn *c = conn_of_const(pc);

    return init_buf_pending(&c->out) + NBA_HDR + body_len + INIT_OUT_RESERVE <= INIT_OUT_MAX;
}

static void conn_wait_room(struct init_conn *pc)
{
    conn_of(pc)->want_room = 1;
}

static int conn_send(struct init_conn *pc, uint8_t type, const void *body, uint32_t len)
{
    struct conn *c = conn_of(pc);
    unsigned char *p;

    if (c->state != INIT_CONN_ACTIVE && c->state != INIT_CONN_REQUEST)
        return -1;
    p = init_buf_reserve(&c->out, NBA_HDR + (size_t)len);
    if (p == NULL) {
        conn_break(c);
        return -1;
    }
    nba_frame_hdr(p, type, len);
    if (len > 0)
        memcpy(p + NBA_HDR, body, len);
    init_buf_commit(&c->out, NBA_HDR + (size_t)len);
    conn_update(c);
    return 0;
}

static void conn_finish(struct init_conn *pc)
{
    struct conn *c = conn_of(pc);

    /* The operation lets go even of a broken connection (conn_break). */
    c->pub.ops = NULL;
    c->pub.op = NULL;
    c->want_room = 0;
    if (c->state != INIT_CONN_ACTIVE && c->state != INIT_CONN_REQUEST)
        return;
    c->state = INIT_CONN_FLUSH;
    c->deadline = nb_clock_mono_ms() + INIT_FLUSH_TIMEOUT_MS;
    conn_update(c);
}

static void conn_error(struct init_conn *pc, int err, const char *msg, size_t len)
{
    unsigned char body[4 + CONN_ERRMSG_MAX];

    if (len >= CONN_ERRMSG_MAX)
        len = CONN_ERRMSG_MAX - 1;
    nba_put_u32(body, (uint32_t)err);
    memcpy(body + 4, msg, len);
    pc->ops = NULL;
    pc->op = NULL;
    conn_send(pc, NBA_ERROR, body, 4 + (uint32_t)len);
    conn_finish(pc);
}

static void conn_resume_input(struct init_conn *pc)
{
    struct conn *c = conn_of(pc);

    if (!c->in_paused)
        return;
    c->in_paused = 0;
    conn_process(c);
}

static size_t conn_extra_input(const struct init_conn *pc, const unsigned char **data)
{
    const struct conn *c = conn_of_const(pc);
    size_t pending = init_buf_pending(&c->in);

    if (data != NULL)
        *data = pending > c->req_bytes ? init_buf_head(&c->in) + c->req_bytes : NULL;
    return pending > c->req_bytes ? pending - c->req_bytes : 0;
}

static int conn_fd(const struct init_conn *pc)
{
    return conn_of_const(pc)->w.fd;
}

static void conn_handed_off(struct init_conn *pc)
{
    struct conn *c = conn_of(pc);

    c->pub.ops = NULL;
    c->pub.op = NULL;
    c->want_room = 0;
    init_watch_close(&c->w);
    /* conn_process stops here; the next tick frees the rest. */
    c->state = INIT_CONN_FLUSH;
    c->deadline = 1;
}

static const struct init_reply conn_reply = {
    .room = conn_room,
    .wait_room = conn_wait_room,
    .send = conn_send,
    .error = conn_error,
    .finish = conn_finish,
    .resume_input = conn_resume_input,
    .extra_input = conn_extra_input,
    .fd = conn_fd,
    .handed_off = conn_handed_off,
};

/* A protocol error while an operation runs: it lets go, the host is told. */
static void conn_fail(struct conn *c, int err, const char *msg)
{
    const struct init_conn_ops *ops = c->pub.ops;

    c->pub.ops = NULL;
    if (ops != NULL && ops->gone != NULL)
        ops->gone(&c->pub);
    init_reply_error(&c->pub, err, "%s", msg);
}

static void conn_ping(struct conn *c)
{
    char pong[96];
    int n = snprintf(pong, sizeof(pong), "nanobox-init %d " NBA_CAPS, NBA_VERSION);

    conn_send(&c->pub, NBA_PONG, pong, (uint32_t)n);
    conn_finish(&c->pub);
}

static void conn_dispatch(struct conn *c, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct init_request r;
    char err[CONN_ERRMSG_MAX];
    int e = init_request_parse(&r, type, body, len, err, sizeof(err));

    c->state = INIT_CONN_ACTIVE;
    c->deadline = 0;
    if (e == 0 && r.stdio && (c->n_passed != NBA_STDIO_FDS || c->passed_bad)) {
        init_request_free(&r);
        e = EINVAL;
        snprintf(err, sizeof(err),
                 "'I' needs exactly %d file descriptors (stdin, stdout, stderr) passed with "
                 "the request, not %u%s",
                 NBA_STDIO_FDS, c->n_passed, c->passed_bad ? " or more" : "");
    }
    if (e != 0) {
        conn_passed_close(c);
        init_reply_error(&c->pub, e, "%s", err);
        return;
    }
    for (int i = 0; r.stdio && i < NBA_STDIO_FDS; i++)
        r.stdio_fds[i] = c->passed[i];
    switch (type) {
    case NBA_PING:
        conn_ping(c);
        break;
    case NBA_EXEC:
        init_exec_start(&c->pub, &r);
        break;
    case NBA_PLIST:
        init_bg_list(&c->pub, &r);
        break;
    case NBA_PQUERY:
        init_bg_query(&c->pub, &r);
        break;
    case NBA_PSTDIN:
        init_bg_stdin(&c->pub, &r);
        break;
    case NBA_PSIGNAL:
        init_bg_signal(&c->pub, &r);
        break;
    case NBA_FREAD:
        init_files_read(&c->pub, &r);
        break;
    case NBA_FSTAT:
        init_files_stat(&c->pub, &r);
        break;
    case NBA_FWRITE:
        init_files_write(&c->pub, &r);
        break;
    case NBA_FDELETE:
        init_files_delete(&c->pub, &r);
        break;
    case NBA_FMKDIR:
        init_files_mkdir(&c->pub, &r);
        break;
    case NBA_FMOVE:
        init_files_move(&c->pub, &r);
        break;
    case NBA_KERNEL:
        init_kernel_start(&c->pub, &r);
        break;
    case NBA_PTY:
        init_exec_pty(&c->pub, &r);
        break;
    case NBA_FWATCH:
        init_fwatch_start(&c->pub, &r);
        break;
    case NBA_WCREATE:
        init_fwatch_create(&c->pub, &r);
        break;
    case NBA_WPOLL:
        init_fwatch_poll(&c->pub, &r);
        break;
    case NBA_WREMOVE:
        init_fwatch_remove(&c->pub, &r);
        break;
    default:
        init_reply_error(&c->pub, EINVAL, "unknown request type 0x%02x", type);
        break;
    }
    init_request_free(&r);
    /* the command has its copies (I); unused ones are dropped */
    conn_passed_close(c);
}

/* The fds a read brought: kept for the request while it is read, else closed. */
static void conn_take_fds(struct conn *c, struct msghdr *msg)
{
    if ((msg->msg_flags & MSG_CTRUNC) && c->state == INIT_CONN_REQUEST)
        c->passed_bad = 1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
        size_t n;
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (c->state == INIT_CONN_REQUEST && c->n_passed < INIT_CONN_FDS) {
                c->passed[c->n_passed++] = fd;
                continue;
            }
            if (c->state == INIT_CONN_REQUEST)
                c->passed_bad = 1;
            close(fd);
        }
    }
}

/* read(), taking (and sorting out) any fds passed with the bytes */
static ssize_t conn_recv(struct conn *c, void *p, size_t len)
{
    union {
        char buf[CMSG_SPACE(CONN_CMSG_FDS * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = {.iov_base = p, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cbuf.buf,
                         .msg_controllen = sizeof(cbuf.buf)};
    ssize_t n = recvmsg(c->w.fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

    if (n >= 0)
        conn_take_fds(c, &msg);
    return n;
}

/* Handle the complete frames held, in order, until one must wait. */
static void conn_process(struct conn *c)
{
    while (c->state == INIT_CONN_REQUEST || (c->state == INIT_CONN_ACTIVE && !c->in_paused)) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        long n = nba_frame_peek(init_buf_head(&c->in), init_buf_pending(&c->in), NBA_MAX_BODY,
                                &type, &body, &len);
        if (n == 0)
            break;
        if (n < 0) {
            if (c->state == INIT_CONN_REQUEST)
                c->state = INIT_CONN_ACTIVE;
            conn_fail(c, EPROTO, "frame longer than 1 MiB");
            break;
        }
        if (c->state == INIT_CONN_REQUEST) {
            c->req_bytes = (uint32_t)n;
            conn_dispatch(c, type, body, len);
        } else if (c->pub.ops == NULL || c->pub.ops->frame == NULL) {
            conn_fail(c, EPROTO, "unexpected frame after the request");
            break;
        } else if (c->pub.ops->frame(&c->pub, type, body, len) == 1) {
            c->in_paused = 1;
            break;
        }
        init_buf_consume(&c->in, (size_t)n);
    }
    /* A request's megabyte is not kept for a connection that idles. */
    if (init_buf_pending(&c->in) == 0)
        init_buf_release(&c->in);
    conn_update(c);
}

static void conn_input_eof(struct conn *c)
{
    if (c->state == INIT_CONN_ACTIVE && c->pub.ops != NULL && c->pub.ops->frame == NULL) {
        /* A half-close after a request that needs nothing more: answer. */
        c->in_eof = 1;
        conn_update(c);
        return;
    }
    conn_destroy(c);
}

static void conn_read(struct conn *c)
{
    size_t pending = init_buf_pending(&c->in), want = CONN_READ_MIN, space;
    unsigned char *p;
    ssize_t n;

    if (c->state == INIT_CONN_LINGER) {
        unsigned char sink[4096];
        n = conn_recv(c, sink, sizeof(sink));
        if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR))
            conn_destroy(c);
        return;
    }
    if (pending >= NBA_HDR) {
        size_t need = NBA_HDR + (size_t)nba_get_u32(init_buf_head(&c->in) + 1);
        if (need > pending && need - pending > want)
            want = need - pending;
    }
    space = init_buf_space(&c->in);
    if (want > space)
        want = space;
    p = init_buf_reserve(&c->in, want);
    if (p == NULL || want == 0) {
        conn_fail(c, ENOMEM, "out of memory for the request");
        return;
    }
    n = conn_recv(c, p, want);
    if (n == 0) {
        conn_input_eof(c);
        return;
    }
    if (n == -1) {
        if (errno != EAGAIN && errno != EINTR)
            conn_destroy(c);
        return;
    }
    init_buf_commit(&c->in, (size_t)n);
    conn_process(c);
}

static void conn_write(struct conn *c)
{
    size_t pending = init_buf_pending(&c->out);
    ssize_t n;

    if (pending > 0) {
        n = send(c->w.fd, init_buf_head(&c->out), pending, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == -1) {
            if (errno != EAGAIN && errno != EINTR)
                conn_destroy(c);
            return;
        }
        init_buf_consume(&c->out, (size_t)n);
    }
    if (init_buf_pending(&c->out) > 0) {
        conn_update(c);
        return;
    }
    if (c->state == INIT_CONN_FLUSH) {
        init_buf_free(&c->in);
        init_buf_free(&c->out);
        shutdown(c->w.fd, SHUT_WR);
        c->state = INIT_CONN_LINGER;
        c->deadline = nb_clock_mono_ms() + INIT_LINGER_MS;
    }
    conn_update(c);
}

void init_conn_event(void *obj, uint32_t events)
{
    struct conn *c = obj;

    if (events & EPOLLOUT) {
        conn_write(c);
        if (c->w.fd < 0)
            return;
        if (c->state == INIT_CONN_ACTIVE && c->want_room && c->pub.ops != NULL &&
            conn_room(&c->pub, NBA_CHUNK)) {
            c->want_room = 0;
            if (c->pub.ops->drain != NULL)
                c->pub.ops->drain(&c->pub);
            if (c->w.fd < 0)
                return;
        }
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (c->w.events & EPOLLIN)) {
        conn_read(c);
        return;
    }
    if (events & (EPOLLHUP | EPOLLERR))
        conn_destroy(c);
}

int64_t init_conn_next_deadline(void)
{
    int64_t d = 0;

    for (struct conn *c = conns; c != NULL; c = c->next) {
        if (c->deadline != 0 && (d == 0 || c->deadline < d))
            d = c->deadline;
    }
    return d;
}

void init_conn_tick(int64_t now)
{
    struct conn *c = conns, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        if (c->deadline != 0 && c->deadline <= now)
            conn_destroy(c);
    }
}
