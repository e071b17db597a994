/*
 * procs.c - see procs.h. Every operation is one small request to the
 * sandbox's agent through nb_agent_call (agent.c): the processes part of
 * the agent protocol (docs/AGENT-PROTOCOL.md) on the host's side.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agentproto.h"
#include "clock.h"
#include "procs.h"

_Static_assert(NB_PROCS_STDIN_MAX == NBA_MAX_BODY - 64, "room for the pid and data fields");

#define PROC_OP_TIMEOUT_MS 10000
/* Output a read hands over, per stream (the agent keeps 1 MiB of each). */
#define PROC_READ_MAX ((size_t)4 * 1024 * 1024)
/* A follow's longest wait on the agent, and its polling pauses (an agent too old to wait). */
#define FOLLOW_WAIT_MAX_MS 1000
#define FOLLOW_POLL_MIN_MS 1
#define FOLLOW_POLL_MAX_MS 50

static const struct {
    const char *name;
    int sig;
} proc_signals[] = {
    {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT},
};

const char nb_procs_signal_names[] = "KILL, TERM, INT, HUP, QUIT, USR1, USR2, STOP, CONT";

int nb_procs_signal_number(const char *name)
{
    const char *n = strncmp(name, "SIG", 3) ? name : name + 3;
    for (size_t i = 0; i < sizeof(proc_signals) / sizeof(proc_signals[0]); i++)
        if (!strcmp(n, proc_signals[i].name))
            return proc_signals[i].sig;
    return 0;
}

/* A process entry ('l' frame) into p; p points into body for the argv. */
static void proc_parse(const unsigned char *body, uint32_t len, struct nb_proc_info *p)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    char state = 0;
    memset(p, 0, sizeof(*p));
    p->fields = body;
    p->fields_len = len;
    nba_fields_init(&it, body, len);
    while (nba_fields_next(&it, &tag, &v, &l) == 1) {
        if (tag == NBA_T_PID && l == 4)
            p->pid = nba_get_u32(v);
        else if (tag == NBA_T_KIND && l == 1)
            state = (char)v[0];
        else if (tag == NBA_T_EXITCODE && l == 4)
            p->exit_code = (int32_t)nba_get_u32(v);
        else if (tag == NBA_T_SIG && l == 4)
            p->signal = nba_get_u32(v);
        else if (tag == NBA_T_OFF && l == 8)
            p->stdout_bytes = nba_get_u64(v);
        else if (tag == NBA_T_EOFF && l == 8)
            p->stderr_bytes = nba_get_u64(v);
        else if (tag == NBA_T_MTIME && l == 8)
            p->started_at = nba_get_u64(v);
        else if (tag == NBA_T_TTY)
            p->pty = 1;
    }
    p->running = state == NBA_PS_RUNNING;
    if (!p->running && p->signal)
        p->exit_code = 128 + (int32_t)p->signal;
}

int nb_proc_next_arg(const struct nb_proc_info *p, size_t *pos, const char **s, size_t *len)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;

    if (*pos > p->fields_len)
        return 0;
    nba_fields_init(&it, p->fields + *pos, p->fields_len - (uint32_t)*pos);
    while (nba_fields_next(&it, &tag, &v, &l) == 1) {
        if (tag != NBA_T_ARG)
            continue;
        *s = (const char *)v;
        *len = l;
        *pos = (size_t)(v + l - p->fields);
        return 1;
    }
    *pos = p->fields_len;
    return 0;
}

/* Processes need the agent: say so rather than the bare "does not answer". */
static int agent_needed(struct nb_apierr *ae)
{
    if (ae->err == NB_E_AGENT_DOWN)
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "this sandbox's agent (nanobox-init) does not answer; processes need it");
    return -1;
}

struct list_ctx {
    int (*each)(void *arg, const struct nb_proc_info *p);
    void *arg;
};

static int list_cb(void *ctx, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct list_ctx *l = ctx;
    struct nb_proc_info p;
    if (type != NBA_PROC)
        return 0;
    proc_parse(body, len, &p);
    return l->each(l->arg, &p);
}

int nb_procs_list(struct nb_app *a, const struct nb_slot *slot,
                  int (*each)(void *arg, const struct nb_proc_info *p), void *arg,
                  struct nb_apierr *ae)
{
    struct list_ctx l = {each, arg};
    (void)a;
    if (nb_agent_call(slot, NBA_PLIST, NULL, "list the processes", PROC_OP_TIMEOUT_MS, list_cb, &l,
                      ae) != 0)
        return agent_needed(ae);
    return 0;
}

static int read_cb(void *ctx, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct nb_proc_output *po = ctx;
    if (type == NBA_PROC && po->raw == NULL) {
        /* the entry's fields point into a buffer the next frame reuses: copy */
        po->raw = nb_xmalloc(len ? len : 1);
        memcpy(po->raw, body, len);
        proc_parse(po->raw, len, &po->info);
    } else if (type == NBA_STDOUT) {
        nb_buf_append_some(&po->out, body, len);
    } else if (type == NBA_STDERR) {
        nb_buf_append_some(&po->err, body, len);
    }
    return 0;
}

/* The Q request's fields: pid and offsets (and W for a wait). */
static void query_fields(struct nb_buf *f, uint32_t pid, uint64_t off_out, uint64_t off_err)
{
    nb_buf_init(f, NBA_MAX_BODY);
    nb_agent_field_u32(f, NBA_T_PID, pid);
    nb_agent_field_u64(f, NBA_T_OFF, off_out);
    nb_agent_field_u64(f, NBA_T_EOFF, off_err);
}

static void output_init(struct nb_proc_output *po)
{
    memset(po, 0, sizeof(*po));
    nb_buf_init(&po->out, PROC_READ_MAX);
    nb_buf_init(&po->err, PROC_READ_MAX);
}

int nb_procs_read(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, uint64_t off_out,
                  uint64_t off_err, struct nb_proc_output *po, struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc = 0;

    (void)a;
    output_init(po);
    query_fields(&f, pid, off_out, off_err);
    if (nb_agent_call(slot, NBA_PQUERY, &f, "read the process", PROC_OP_TIMEOUT_MS, read_cb, po,
                      ae) != 0) {
        rc = agent_needed(ae);
    } else if (po->raw == NULL) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                      "the sandbox's agent answered without the process");
        rc = -1;
    }
    nb_buf_free(&f);
    return rc;
}

int nb_procs_wait(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, uint64_t off_out,
                  uint64_t off_err, int wait_ms, int watch_fd, struct nb_proc_output *po,
                  struct nb_apierr *ae)
{
    struct nb_agent ag;
    struct nb_buf f;
    int64_t until = nb_clock_mono_ms() + wait_ms;
    int answered = 0, rc = -1;

    (void)a;
    output_init(po);
    if (nb_agent_connect(slot, &ag, ae) != 0)
        return agent_needed(ae);
    query_fields(&f, pid, off_out, off_err);
    nb_agent_field(&f, NBA_T_WAIT, NULL, 0);
    nb_agent_queue(&ag, NBA_PQUERY, f.data, f.len);
    nb_buf_free(&f);
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        /* once the answer begins, the rest of it follows at once */
        int left = (int)(until - nb_clock_mono_ms()), got;
        if (answered)
            left = PROC_OP_TIMEOUT_MS;
        got = left <= 0 ? 0
                        : nb_agent_recv_watch(&ag, left, answered ? -1 : watch_fd, &type, &body,
                                              &len, ae);
        if (got < 0)
            break;
        if (got == 2 || (got == 0 && !answered)) {
            rc = got == 2 ? 2 : 1; /* closing the connection ends the wait */
            break;
        }
        if (got == 0) {
            nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout",
                          "the sandbox's agent did not answer in time");
            break;
        }
        answered = 1;
        if (type == NBA_ERROR) {
            nb_agent_error(body, len, "read the process", ae);
            break;
        }
        if (type == NBA_END) {
            rc = 0;
            if (po->raw == NULL) {
                nb_apierr_set(ae, NB_E_UPSTREAM, "agent_error",
                              "the sandbox's agent answered without the process");
                rc = -1;
            }
            break;
        }
        read_cb(po, type, body, len);
    }
    nb_agent_close(&ag);
    return rc == -1 ? agent_needed(ae) : rc;
}

void nb_proc_output_free(struct nb_proc_output *po)
{
    free(po->raw);
    po->raw = NULL;
    nb_buf_free(&po->out);
    nb_buf_free(&po->err);
}

int nb_procs_stdin(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, const void *data,
                   size_t len, int eof, struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc = 0;

    (void)a;
    if (len > NB_PROCS_STDIN_MAX) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large", "send at most %u bytes of stdin per call",
                      NB_PROCS_STDIN_MAX);
        return -1;
    }
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field(&f, NBA_T_DATA, data, len);
    if (eof)
        nb_agent_field(&f, NBA_T_CLOSE, NULL, 0);
    if (nb_agent_call(slot, NBA_PSTDIN, &f, "write to the process", PROC_OP_TIMEOUT_MS, NULL, NULL,
                      ae) != 0)
        rc = agent_needed(ae);
    nb_buf_free(&f);
    return rc;
}

int nb_procs_signal(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, int sig,
                    struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc = 0;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field_u32(&f, NBA_T_SIG, (uint32_t)sig);
    if (nb_agent_call(slot, NBA_PSIGNAL, &f, "signal the process", PROC_OP_TIMEOUT_MS, NULL, NULL,
                      ae) != 0)
        rc = agent_needed(ae);
    nb_buf_free(&f);
    return rc;
}

/* ------------------------------------------------------------------ follow */

struct follow_state {
    struct nb_procs_follow *f;
    int64_t last_said;   /* when a callback last ran (or the follow began) */
    int64_t last_output; /* when output last came (or the follow began) */
    int watch_fd;        /* f->watch_fd; -1 once it shows data that is no close */
    int polling;         /* the agent cannot wait (no query-wait): poll it */
};

/* Wait up to ms for the client to leave: 1 when it did. */
static int follow_client_left(struct follow_state *st, int ms)
{
    struct pollfd p = {st->watch_fd, POLLIN | POLLRDHUP, 0};
    if (st->watch_fd < 0) {
        poll(NULL, 0, ms);
        return 0;
    }
    if (poll(&p, 1, ms) <= 0)
        return 0;
    if (nb_agent_peer_left(st->watch_fd))
        return 1;
    st->watch_fd = -1; /* readable with data: it can tell no more; writes will */
    return 0;
}

/*
 * Is this worker asked to stop? SIGTERM stays pending while a request is
 * served (worker.c); a follow can last as long as its command, so it ends
 * rather than hold the shutdown up to shutdown_timeout.
 */
static int follow_stopping(void)
{
    sigset_t pending;
    return sigpending(&pending) == 0 &&
           (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1);
}

/* How long the next wait may last: until on_idle is due or the deadline, at most a second. */
static int follow_wait_ms(const struct follow_state *st, int64_t now)
{
    int64_t w = st->last_said + st->f->idle_ms - now;
    if (st->f->deadline > 0 && st->f->deadline - now < w)
        w = st->f->deadline - now;
    return w < 1 ? 1 : w > FOLLOW_WAIT_MAX_MS ? FOLLOW_WAIT_MAX_MS : (int)w;
}

/* Polling: pause a quarter of the time output was quiet; 1 when the client left meanwhile. */
static int follow_poll_pause(struct follow_state *st, int sent, int64_t now)
{
    int wait;
    if (sent)
        st->last_output = now;
    wait = (int)((now - st->last_output) / 4);
    wait = wait < FOLLOW_POLL_MIN_MS   ? FOLLOW_POLL_MIN_MS
           : wait > FOLLOW_POLL_MAX_MS ? FOLLOW_POLL_MAX_MS
                                       : wait;
    if (st->f->deadline > 0 && st->f->deadline - now < wait)
        wait = (int)(st->f->deadline - now);
    return follow_client_left(st, wait);
}

/* One look at the process: 0 with po, 1 nothing new, 2 the client left, -1 with ae set. */
static int follow_look(struct nb_app *a, const struct nb_slot *slot, struct follow_state *st,
                       struct nb_proc_output *po, struct nb_apierr *ae)
{
    struct nb_procs_follow *f = st->f;

    if (st->polling)
        return nb_procs_read(a, slot, f->pid, f->off_out, f->off_err, po, ae);
    return nb_procs_wait(a, slot, f->pid, f->off_out, f->off_err,
                         follow_wait_ms(st, nb_clock_mono_ms()), st->watch_fd, po, ae);
}

int nb_procs_follow(struct nb_app *a, const struct nb_slot *slot, struct nb_procs_follow *f,
                    struct nb_apierr *ae)
{
    struct follow_state st = {f, 0, 0, f->watch_fd, 0};

    /* an agent from before W (it does not announce query-wait) is polled */
    st.polling = !(nb_agent_caps(slot) & NB_AGENT_CAP_QUERY_WAIT);
    st.last_said = st.last_output = nb_clock_mono_ms();
    for (;;) {
        struct nb_proc_output po;
        int sent = 0, gone = 0, ended = 0, got = follow_look(a, slot, &st, &po, ae);
        int64_t now;

        if (got < 0 || got == 2) {
            nb_proc_output_free(&po);
            return got < 0 ? -1 : NB_FOLLOW_LEFT; /* the client left: the process does not */
        }
        if (got == 0 && po.out.len > 0) {
            gone |= f->on_output(f->ctx, 0, po.out.data, po.out.len) != 0;
            sent = 1;
        }
        if (got == 0 && po.err.len > 0 && !gone) {
            gone |= f->on_output(f->ctx, 1, po.err.data, po.err.len) != 0;
            sent = 1;
        }
        now = nb_clock_mono_ms();
        if (sent)
            st.last_said = now;
        if (got == 0) {
            f->off_out = po.info.stdout_bytes;
            f->off_err = po.info.stderr_bytes;
            if (!po.info.running && !gone && f->deadline > 0 && now >= f->deadline &&
                po.info.signal == SIGKILL) {
                /* the agent killed it at the same deadline before this follow looked again */
                nb_proc_output_free(&po);
                return NB_FOLLOW_KILLED;
            }
            if (!po.info.running && !gone) {
                gone |= f->on_end(f->ctx, &po.info) != 0;
                ended = 1;
            }
        }
        nb_proc_output_free(&po);
        if (gone)
            return NB_FOLLOW_LEFT;
        if (ended)
            return NB_FOLLOW_ENDED;
        if (follow_stopping())
            return NB_FOLLOW_STOPPING;
        if (f->deadline > 0 && now >= f->deadline)
            return NB_FOLLOW_DEADLINE;
        if (now - st.last_said >= f->idle_ms) {
            st.last_said = nb_clock_mono_ms();
            if (f->on_idle(f->ctx) != 0)
                return NB_FOLLOW_LEFT;
        }
        if (st.polling && follow_poll_pause(&st, sent, now))
            return NB_FOLLOW_LEFT;
    }
}
