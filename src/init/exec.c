/*
 * exec.c - the foreground exec request (X without B): run a command for
 * the connection that asked, stream its output, take its stdin, and end
 * with the exit frame.
 *
 * The job and the connection can each end first. If the host goes away
 * (or breaks the protocol) the command is killed with its whole tree and
 * the job lives on, detached, until the command is reaped. The exit frame
 * is the last frame: every o/r frame of the command comes before it.
 *
 * With a window size (Y) the command runs on a PTY (proc.c): its output
 * comes as 'o' frames, 'w' frames resize it, and the host leaving hangs up
 * the terminal after the tree is killed. Other connections reach a running
 * PTY session by its pid with Y: input, a new window, or both.
 *
 * With I the host passed the command's stdin, stdout and stderr as fds
 * (conn.c): the command uses them directly, so no o/r frames come and
 * the host sends no i/e; s, k and x are as usual.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentproto.h"
#include "reply.h"
#include "init.h"
#include "ops.h"
#include "proc.h"

struct init_job {
    struct init_proc proc;  /* first: the ops get a struct init_proc * */
    struct init_conn *conn; /* NULL once the host is gone */
    uint32_t left;          /* output bytes still forwarded (M) */
    uint8_t truncated;      /* output was dropped past M */
    uint8_t stdio;          /* I: the command's stdio are the host's fds */
    long long ooms;         /* the cgroup's OOM kills when it started; -1 unknown */
};

/*
 * OOM kills so far in the sandbox's memory cgroup ("oom_kill N" in
 * memory.oom_control under cgroup v1, memory.events under v2), -1 when
 * neither is readable. A kill between a command's start and its end is
 * reported as its OOM: with several commands at once it means "an OOM
 * kill happened in this sandbox while it ran".
 *
 * The file is opened once and read again with pread (a cgroup file
 * regenerates its text at offset 0): two opens and closes fewer per
 * command. The sandbox's cgroup never changes under PID 1.
 */
static long long job_oom_kills(void)
{
    static const char *const files[] = {"/sys/fs/cgroup/memory/memory.oom_control",
                                        "/sys/fs/cgroup/memory.events"};
    static int fd = -1, tried;
    char buf[512];
    const char *p;
    ssize_t n;

    if (!tried) {
        tried = 1;
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && fd == -1; i++)
            fd = open(files[i], O_RDONLY | O_CLOEXEC);
    }
    if (fd == -1)
        return -1;
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    p = strstr(buf, "oom_kill ");
    return p != NULL ? strtoll(p + 9, NULL, 10) : -1;
}

static struct init_job *job_of(struct init_proc *p)
{
    return (struct init_job *)p;
}

static int job_can_read(struct init_proc *p)
{
    struct init_job *j = job_of(p);

    /* Output that is dropped anyway is read at full speed. */
    if (j->conn == NULL || j->left == 0 || init_reply_room(j->conn, NBA_CHUNK))
        return 1;
    init_reply_wait_room(j->conn);
    return 0;
}

static void job_output(struct init_proc *p, int stream, const unsigned char *data, size_t len)
{
    struct init_job *j = job_of(p);
    size_t fwd = len < j->left ? len : j->left;

    if (fwd < len)
        j->truncated = 1;
    if (j->conn == NULL || fwd == 0)
        return;
    j->left -= (uint32_t)fwd;
    init_reply_send(j->conn, stream == 1 ? NBA_STDOUT : NBA_STDERR, data, (uint32_t)fwd);
}

static void job_stdin_room(struct init_proc *p)
{
    struct init_job *j = job_of(p);

    if (j->conn != NULL)
        init_reply_resume_input(j->conn);
}

static void job_done(struct init_proc *p)
{
    struct init_job *j = job_of(p);
    unsigned char x[6];

    if (j->conn != NULL) {
        nba_put_u32(x, (uint32_t)p->exit_code);
        x[4] = p->signal;
        x[5] = (uint8_t)((p->timed_out ? NBA_EXIT_TIMEDOUT : 0) |
                         (j->truncated ? NBA_EXIT_TRUNCATED : 0) |
                         (j->ooms >= 0 && job_oom_kills() > j->ooms ? NBA_EXIT_OOM : 0));
        init_reply_send(j->conn, NBA_EXIT, x, sizeof(x));
        init_reply_finish(j->conn);
        j->conn = NULL;
    }
    init_proc_release(p);
    init_defer_free(j);
}

static const struct init_proc_ops job_proc_ops = {
    .can_read = job_can_read,
    .output = job_output,
    .stdin_room = job_stdin_room,
    .done = job_done,
};

/* The host left first, or broke the protocol: kill what it started. */
static void job_gone(struct init_conn *c)
{
    struct init_job *j = c->op;

    j->conn = NULL;
    if (!j->proc.done) {
        j->proc.timed_out = 1;
        init_proc_kill_tree(&j->proc);
        init_proc_resume(&j->proc); /* read and drop what is left */
        init_proc_hangup(&j->proc); /* a PTY: close the master (may end the job) */
    }
}

/* A window size frame or field: cols:u16 rows:u16, each 1..NBA_WINSIZE_MAX. */
static int winsize_parse(const unsigned char *body, uint32_t len, unsigned *cols, unsigned *rows)
{
    if (len != 4)
        return -1;
    *cols = (unsigned)body[0] << 8 | body[1];
    *rows = (unsigned)body[2] << 8 | body[3];
    return *cols >= 1 && *rows >= 1 && *cols <= NBA_WINSIZE_MAX && *rows <= NBA_WINSIZE_MAX ? 0
                                                                                            : -1;
}

static void job_protocol_error(struct init_conn *c, const char *msg)
{
    job_gone(c);
    init_reply_error(c, EPROTO, "%s", msg);
}

static int job_frame(struct init_conn *c, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct init_job *j = c->op;

    if (j->stdio && (type == NBA_STDIN || type == NBA_EOF)) {
        job_protocol_error(c, "the command's stdin was passed with the request ('I'): no 'i' or "
                              "'e' frames");
        return 0;
    }
    switch (type) {
    case NBA_STDIN:
        /* Input for a command that closed its stdin is dropped, as a pipe would. */
        if (init_proc_write_stdin(&j->proc, body, len) == EAGAIN)
            return 1;
        return 0;
    case NBA_EOF:
        if (len != 0) {
            job_protocol_error(c, "frame 'e' must be empty");
            return 0;
        }
        init_proc_close_stdin(&j->proc);
        return 0;
    case NBA_KILL:
        if (len != 1 || body[0] == 0 || body[0] > INIT_MAX_SIGNAL) {
            job_protocol_error(c, "frame 'k' must hold one signal number (1-64)");
            return 0;
        }
        init_proc_signal(&j->proc, body[0]);
        return 0;
    case NBA_WINSIZE: {
        unsigned cols, rows;
        if (!j->proc.pty) {
            job_protocol_error(c, "frame 'w' is for a command on a PTY (exec with 'Y')");
            return 0;
        }
        if (winsize_parse(body, len, &cols, &rows) != 0) {
            job_protocol_error(c, "frame 'w' must hold cols:u16 rows:u16, each 1-1000");
            return 0;
        }
        init_proc_resize(&j->proc, cols, rows); /* a terminal already gone has no size */
        return 0;
    }
    default:
        job_protocol_error(c, "unexpected frame during exec");
        return 0;
    }
}

static void job_drain(struct init_conn *c)
{
    struct init_job *j = c->op;

    init_proc_resume(&j->proc);
}

static const struct init_conn_ops job_conn_ops = {
    .frame = job_frame,
    .drain = job_drain,
    .gone = job_gone,
};

void init_exec_start(struct init_conn *c, const struct init_request *r)
{
    struct init_job *j;
    char err[512];
    unsigned char pid[4];
    int e;

    if (r->background) {
        init_bg_start(c, r);
        return;
    }
    j = calloc(1, sizeof(*j));
    if (j == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    j->left = r->maxout;
    j->stdio = r->stdio;
    j->ooms = job_oom_kills();
    e = init_proc_spawn(&j->proc, r, &job_proc_ops, err, sizeof(err));
    if (e != 0) {
        init_proc_release(&j->proc);
        free(j);
        init_reply_error(c, e, "%s", err);
        return;
    }
    j->conn = c;
    c->ops = &job_conn_ops;
    c->op = j;
    nba_put_u32(pid, (uint32_t)j->proc.pid);
    init_reply_send(c, NBA_STARTED, pid, sizeof(pid));
}

void init_exec_pty(struct init_conn *c, const struct init_request *r)
{
    struct init_proc *p = init_proc_find_pty(r->pid);
    int e;

    if (p == NULL) {
        init_reply_error(c, ESRCH, "no PTY session %u", r->pid);
        return;
    }
    if (r->data.len > 0) {
        e = init_proc_write_stdin(p, r->data.p, r->data.len);
        if (e == EAGAIN) {
            /* nobody waits for stdin_room here: the host retries */
            init_reply_error(c, EAGAIN, "PTY session %u has %u bytes of input pending", r->pid,
                             (unsigned)init_buf_pending(&p->stdin_buf));
            return;
        }
        if (e != 0) {
            init_reply_error(c, EPIPE, "the terminal of PTY session %u is closed", r->pid);
            return;
        }
    }
    if (r->pty && init_proc_resize(p, r->cols, r->rows) != 0) {
        init_reply_error(c, EPIPE, "the terminal of PTY session %u is closed", r->pid);
        return;
    }
    /* after the input and the window: the E2B facade's pty.kill() */
    if (r->sig != 0 && init_proc_signal(p, (int)r->sig) != 0) {
        init_reply_error(c, ESRCH, "PTY session %u has exited", r->pid);
        return;
    }
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}
