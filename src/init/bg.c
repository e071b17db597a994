/*
 * bg.c - background processes (X with B) and the requests about them:
 * L list, Q query, W write stdin, S signal.
 *
 * Up to INIT_MAX_BG entries. Each keeps the last INIT_RING_SIZE bytes of
 * stdout and of stderr in a ring that grows as output arrives (a quiet
 * process costs little). Offsets count bytes since the start. An entry is
 * shown as exited once it is done (exited and its pipes closed), so a
 * query that sees it exited has all its output. A done entry stays (so a
 * client may read it as often as it likes) until S forgets it or, once a
 * query has shown it exited, a new process needs its place (the oldest
 * such entry goes first). An exit nobody has read is never dropped: with
 * INIT_MAX_BG entries running or unread, a start is refused (EAGAIN).
 *
 * Replies that may be long (L, Q) are sent as the connection has room:
 * their state lives in a small cursor, and an entry a reply is reading is
 * pinned (queries > 0) so it is not removed underneath.
 *
 * With Y the process runs on a PTY (proc.c): what the master reads is its
 * stdout (a terminal has one output), kept as a pipe's; its input and
 * window come through the request Y (exec.c), as a PTY session's, W
 * writes to it too, and its entry says 't'. Removing the entry closes the
 * master, which hangs the terminal up.
 *
 * A query with W that would find nothing new (no output past its offsets,
 * the process still running) waits, pinned, on its entry's list of
 * waiters: the entry's next output or its end answers it at once. So a
 * host following a process is told rather than asking again and again.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentproto.h"
#include "clock.h"
#include "reply.h"
#include "init.h"
#include "ops.h"
#include "proc.h"

#define BG_ENTRY_MAX (INIT_ARGV_SHOWN + 256) /* bytes of one 'l' body */

struct bg_query;

struct init_ring {
    unsigned char *data; /* grows up to INIT_RING_SIZE, then wraps */
    size_t size;
    uint64_t total; /* bytes ever appended */
};

struct init_bg {
    struct init_proc proc; /* first: the ops get a struct init_proc * */
    uint64_t id;           /* start order */
    unsigned char *argv;   /* 'A' fields, already encoded (at most INIT_ARGV_SHOWN bytes) */
    size_t argv_len;
    struct init_ring ring[2]; /* stdout, stderr */
    uint64_t started;         /* unix seconds */
    unsigned queries;         /* replies reading this entry */
    int exit_read;            /* a query showed it exited: its place may be reused */
    struct bg_query *waiters; /* queries with W waiting for output or the end */
};

static struct init_bg *bg_table[INIT_MAX_BG];
static uint64_t bg_next_id = 1;

/* --- rings ------------------------------------------------------------------ */

static uint64_t ring_oldest(const struct init_ring *r)
{
    return r->total > INIT_RING_SIZE ? r->total - INIT_RING_SIZE : 0;
}

static void ring_append(struct init_ring *r, const unsigned char *d, size_t n)
{
    if (r->total + n > r->size && r->size < INIT_RING_SIZE) {
        size_t ns = r->size ? r->size : 4096;
        unsigned char *p;
        while (ns < r->total + n && ns < INIT_RING_SIZE)
            ns *= 2;
        if (ns > INIT_RING_SIZE)
            ns = INIT_RING_SIZE;
        p = realloc(r->data, ns);
        if (p == NULL) {
            r->total += n; /* the bytes are lost, the count stays true */
            return;
        }
        r->data = p;
        r->size = ns;
    }
    /* While the ring has not wrapped, total < size and the index is total. */
    while (n > 0) {
        size_t at = (size_t)(r->total % INIT_RING_SIZE);
        size_t k = INIT_RING_SIZE - at < n ? INIT_RING_SIZE - at : n;
        if (at + k > r->size) { /* cannot happen after the growth above */
            r->total += n;
            return;
        }
        memcpy(r->data + at, d, k);
        r->total += k;
        d += k;
        n -= k;
    }
}

/* Copy up to n bytes from offset from (>= ring_oldest). */
static size_t ring_read(const struct init_ring *r, uint64_t from, unsigned char *dst, size_t n)
{
    size_t at, k;

    if (from >= r->total || r->data == NULL)
        return 0;
    if (n > r->total - from)
        n = (size_t)(r->total - from);
    at = (size_t)(from % INIT_RING_SIZE);
    k = INIT_RING_SIZE - at < n ? INIT_RING_SIZE - at : n;
    memcpy(dst, r->data + at, k);
    if (k < n)
        memcpy(dst + k, r->data, n - k);
    return n;
}

/* --- the table ---------------------------------------------------------------- */

static void bg_remove(int slot)
{
    struct init_bg *b = bg_table[slot];

    bg_table[slot] = NULL;
    init_proc_release(&b->proc);
    free(b->argv);
    free(b->ring[0].data);
    free(b->ring[1].data);
    init_defer_free(b);
}

static void bg_remove_entry(struct init_bg *b)
{
    for (int i = 0; i < INIT_MAX_BG; i++) {
        if (bg_table[i] == b) {
            bg_remove(i);
            return;
        }
    }
}

/* A free slot, making one from the oldest entry whose exit was read; -1 if none. */
static int bg_slot(void)
{
    int oldest = -1;

    for (int i = 0; i < INIT_MAX_BG; i++) {
        if (bg_table[i] == NULL)
            return i;
        if (bg_table[i]->proc.done && bg_table[i]->exit_read && bg_table[i]->queries == 0 &&
            (oldest == -1 || bg_table[i]->id < bg_table[oldest]->id))
            oldest = i;
    }
    if (oldest != -1)
        bg_remove(oldest);
    return oldest;
}

/* The newest entry with this pid (a pid may come back after an old one exited). */
static struct init_bg *bg_find(uint32_t pid)
{
    struct init_bg *found = NULL;

    for (int i = 0; i < INIT_MAX_BG; i++) {
        struct init_bg *b = bg_table[i];
        if (b != NULL && (uint32_t)b->proc.pid == pid && (found == NULL || b->id > found->id))
            found = b;
    }
    return found;
}

static int bg_can_read(struct init_proc *p)
{
    return 1; /* the rings drop the oldest bytes: never hold a background pipe */
}

static void bg_wake(struct init_bg *b);

static void bg_output(struct init_proc *p, int stream, const unsigned char *data, size_t len)
{
    ring_append(&((struct init_bg *)p)->ring[stream - 1], data, len);
    bg_wake((struct init_bg *)p);
}

static void bg_done(struct init_proc *p)
{
    bg_wake((struct init_bg *)p);
}

static const struct init_proc_ops bg_proc_ops = {
    .can_read = bg_can_read,
    .output = bg_output,
    .stdin_room = NULL,
    .done = bg_done,
};

/* Keep argv as 'A' fields for listings, the first INIT_ARGV_SHOWN bytes. */
static int bg_keep_argv(struct init_bg *b, const struct init_request *r)
{
    size_t room = INIT_ARGV_SHOWN;

    b->argv = malloc(room);
    if (b->argv == NULL)
        return -1;
    for (uint32_t i = 0; i < r->nargv && room > NBA_HDR; i++) {
        uint32_t len = r->argv[i].len;
        if (len > room - NBA_HDR)
            len = (uint32_t)(room - NBA_HDR);
        b->argv_len += nba_field_put(b->argv + b->argv_len, NBA_T_ARG, r->argv[i].p, len);
        room -= NBA_HDR + len;
    }
    return 0;
}

void init_bg_start(struct init_conn *c, const struct init_request *r)
{
    struct init_bg *b;
    char err[512];
    unsigned char pid[4];
    int slot = bg_slot(), e;

    if (slot == -1) {
        init_reply_error(c, EAGAIN,
                         "%d background processes are kept (running, or exited and not read yet): "
                         "read or delete one first",
                         INIT_MAX_BG);
        return;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL || bg_keep_argv(b, r) == -1) {
        if (b != NULL)
            free(b->argv);
        free(b);
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    e = init_proc_spawn(&b->proc, r, &bg_proc_ops, err, sizeof(err));
    if (e != 0) {
        init_proc_release(&b->proc);
        free(b->argv);
        free(b);
        init_reply_error(c, e, "%s", err);
        return;
    }
    if (r->close_stdin)
        init_proc_close_stdin(&b->proc); /* reads end of file at once, as from /dev/null */
    b->id = bg_next_id++;
    b->started = (uint64_t)nb_clock_real_s();
    bg_table[slot] = b;
    nba_put_u32(pid, (uint32_t)b->proc.pid);
    init_reply_send(c, NBA_STARTED, pid, sizeof(pid));
    init_reply_finish(c);
}

/* The 'l' frame of an entry. */
static void bg_send_entry(struct init_conn *c, const struct init_bg *b)
{
    unsigned char body[BG_ENTRY_MAX], v[8];
    size_t n = 0;
    uint8_t state = b->proc.done ? NBA_PS_EXITED : NBA_PS_RUNNING;

    nba_put_u32(v, (uint32_t)b->proc.pid);
    n += nba_field_put(body + n, NBA_T_PID, v, 4);
    memcpy(body + n, b->argv, b->argv_len);
    n += b->argv_len;
    n += nba_field_put(body + n, NBA_T_KIND, &state, 1);
    nba_put_u32(v, (uint32_t)(b->proc.done ? b->proc.exit_code : 0));
    n += nba_field_put(body + n, NBA_T_EXITCODE, v, 4);
    nba_put_u32(v, b->proc.done ? b->proc.signal : 0);
    n += nba_field_put(body + n, NBA_T_SIG, v, 4);
    nba_put_u64(v, b->ring[0].total);
    n += nba_field_put(body + n, NBA_T_OFF, v, 8);
    nba_put_u64(v, b->ring[1].total);
    n += nba_field_put(body + n, NBA_T_EOFF, v, 8);
    nba_put_u64(v, b->started);
    n += nba_field_put(body + n, NBA_T_MTIME, v, 8);
    if (b->proc.pty)
        n += nba_field_put(body + n, NBA_T_TTY, NULL, 0);
    init_reply_send(c, NBA_PROC, body, (uint32_t)n);
}

/* --- L ------------------------------------------------------------------------ */

struct bg_list {
    uint64_t next_id; /* entries from this id on are still to send */
};

static void bg_list_pump(struct init_conn *c)
{
    struct bg_list *l = c->op;

    for (;;) {
        struct init_bg *b = NULL;
        for (int i = 0; i < INIT_MAX_BG; i++) {
            struct init_bg *t = bg_table[i];
            if (t != NULL && t->id >= l->next_id && (b == NULL || t->id < b->id))
                b = t;
        }
        if (b == NULL)
            break;
        if (!init_reply_room(c, BG_ENTRY_MAX)) {
            init_reply_wait_room(c);
            return;
        }
        bg_send_entry(c, b);
        l->next_id = b->id + 1;
    }
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
    free(l);
}

static void bg_list_gone(struct init_conn *c)
{
    free(c->op);
}

static const struct init_conn_ops bg_list_ops = {
    .frame = NULL,
    .drain = bg_list_pump,
    .gone = bg_list_gone,
};

void init_bg_list(struct init_conn *c, const struct init_request *r)
{
    struct bg_list *l = calloc(1, sizeof(*l));

    if (l == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    c->ops = &bg_list_ops;
    c->op = l;
    bg_list_pump(c);
}

/* --- Q ------------------------------------------------------------------------ */

struct bg_query {
    struct init_bg *b;     /* pinned */
    uint64_t cur[2];       /* next offset to send, by stream */
    uint64_t end[2];       /* the totals when the query came (or was woken) */
    struct init_conn *c;   /* while waiting */
    struct bg_query *next; /* on b->waiters */
    int waiting;
};

static void bg_query_end(struct bg_query *q)
{
    q->b->queries--;
    free(q);
}

static void bg_query_pump(struct init_conn *c)
{
    struct bg_query *q = c->op;
    unsigned char chunk[NBA_CHUNK];

    for (int s = 0; s < 2; s++) {
        const struct init_ring *r = &q->b->ring[s];
        while (q->cur[s] < q->end[s]) {
            size_t n;
            if (!init_reply_room(c, NBA_CHUNK)) {
                init_reply_wait_room(c);
                return;
            }
            /* Bytes overwritten since the query came are skipped. */
            if (q->cur[s] < ring_oldest(r))
                q->cur[s] = ring_oldest(r);
            n = (size_t)(q->end[s] - q->cur[s] < NBA_CHUNK ? q->end[s] - q->cur[s] : NBA_CHUNK);
            n = ring_read(r, q->cur[s], chunk, n);
            if (n == 0)
                break;
            init_reply_send(c, s == 0 ? NBA_STDOUT : NBA_STDERR, chunk, (uint32_t)n);
            q->cur[s] += n;
        }
    }
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
    bg_query_end(q);
}

static void bg_query_gone(struct init_conn *c)
{
    struct bg_query *q = c->op;

    if (q->waiting) {
        struct bg_query **pp = &q->b->waiters;
        while (*pp != NULL && *pp != q)
            pp = &(*pp)->next;
        if (*pp == q)
            *pp = q->next;
    }
    bg_query_end(q);
}

static const struct init_conn_ops bg_query_ops = {
    .frame = NULL,
    .drain = bg_query_pump,
    .gone = bg_query_gone,
};

/* Answer a query: the entry as it is now, then its output up to now. */
static void bg_query_answer(struct init_conn *c, struct bg_query *q)
{
    struct init_bg *b = q->b;

    if (b->proc.done)
        b->exit_read = 1; /* the entry sent below says so, with all its output */
    for (int s = 0; s < 2; s++)
        q->end[s] = b->ring[s].total;
    bg_send_entry(c, b);
    bg_query_pump(c);
}

/* The entry has new output or has ended: answer every query waiting for it. */
static void bg_wake(struct init_bg *b)
{
    struct bg_query *q = b->waiters, *next;

    b->waiters = NULL;
    for (; q != NULL; q = next) {
        next = q->next;
        q->waiting = 0;
        bg_query_answer(q->c, q); /* may free q */
    }
}

void init_bg_query(struct init_conn *c, const struct init_request *r)
{
    struct init_bg *b = bg_find(r->pid);
    struct bg_query *q;
    uint64_t off[2] = {r->off_out, r->off_err};

    if (b == NULL) {
        init_reply_error(c, ESRCH, "no background process %u", r->pid);
        return;
    }
    q = calloc(1, sizeof(*q));
    if (q == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    q->b = b;
    b->queries++;
    for (int s = 0; s < 2; s++) {
        uint64_t oldest = ring_oldest(&b->ring[s]);
        q->end[s] = b->ring[s].total;
        q->cur[s] = off[s] < oldest ? oldest : off[s] > q->end[s] ? q->end[s] : off[s];
    }
    c->ops = &bg_query_ops;
    c->op = q;
    if (r->wait && !b->proc.done && q->cur[0] >= q->end[0] && q->cur[1] >= q->end[1]) {
        /* nothing new yet: the next output or the end answers */
        q->c = c;
        q->waiting = 1;
        q->next = b->waiters;
        b->waiters = q;
        return;
    }
    bg_query_answer(c, q);
}

/* --- W, S ----------------------------------------------------------------------- */

void init_bg_stdin(struct init_conn *c, const struct init_request *r)
{
    struct init_bg *b = bg_find(r->pid);
    int e;

    if (b == NULL) {
        init_reply_error(c, ESRCH, "no background process %u", r->pid);
        return;
    }
    if (b->proc.exited) {
        init_reply_error(c, EPIPE, "process %u has exited", r->pid);
        return;
    }
    e = init_proc_write_stdin(&b->proc, r->data.p, r->data.len);
    if (e == EAGAIN) {
        b->proc.stdin_full = 0; /* bg has no stdin_room: the host retries */
        init_reply_error(c, EAGAIN, "process %u has %u bytes of stdin pending", r->pid,
                         (unsigned)init_buf_pending(&b->proc.stdin_buf));
        return;
    }
    if (e != 0 && r->data.len > 0) {
        init_reply_error(c, e, "stdin of process %u is closed", r->pid);
        return;
    }
    if (r->close_stdin)
        init_proc_close_stdin(&b->proc);
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}

void init_bg_signal(struct init_conn *c, const struct init_request *r)
{
    struct init_bg *b = bg_find(r->pid);
    int e;

    if (b == NULL) {
        init_reply_error(c, ESRCH, "no background process %u", r->pid);
        return;
    }
    if (b->proc.done && b->queries == 0) {
        /* signalling what has ended forgets it: the host's DELETE */
        bg_remove_entry(b);
        init_reply_send(c, NBA_END, NULL, 0);
        init_reply_finish(c);
        return;
    }
    e = init_proc_signal(&b->proc, (int)r->sig);
    if (e != 0) {
        init_reply_error(c, e, "signal %u to process %u: %s", r->sig, r->pid, strerror(e));
        return;
    }
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}
