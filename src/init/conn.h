/*
 * conn.h - host connections: accept, read the request, hand it to the
 * module that serves it, carry that module's frames both ways, and close.
 *
 * A connection goes through four states: REQUEST (reading the first
 * frame), ACTIVE (an operation owns it: c->ops and c->op), FLUSH (the
 * operation is over, the last bytes are being sent) and LINGER (our side
 * is shut down; we wait briefly for the host to close so that it reads
 * EOF, not a reset).
 *
 * Output goes through one buffer of at most INIT_OUT_MAX bytes. Producers
 * of bulk data (command output, file bytes, listings) ask
 * init_conn_room() first; when there is none they call init_conn_wait_room
 * and their ops->drain runs once the host has read enough. The last
 * INIT_OUT_RESERVE bytes are kept for control frames, so those always fit.
 */
#ifndef INIT_CONN_H
#define INIT_CONN_H

#include <stdint.h>

#include "ibuf.h"
#include "init.h"

struct init_conn;

/* What an operation that owns a connection is told. */
struct init_conn_ops {
    /* A frame from the host after the request: 0 handled, 1 not now (the
     * connection stops reading until init_conn_resume_input). NULL: the
     * operation takes no frames and any frame is a protocol error. */
    int (*frame)(struct init_conn *c, uint8_t type, const unsigned char *body, uint32_t len);
    /* There is room again after init_conn_wait_room. */
    void (*drain)(struct init_conn *c);
    /* The connection is going away first (host gone, protocol error, a
     * timeout): forget c, which must not be used after this returns. */
    void (*gone)(struct init_conn *c);
};

#define INIT_CONN_FDS 3 /* fds a request may carry: exec with I (NBA_STDIO_FDS) */

enum init_conn_state { INIT_CONN_REQUEST, INIT_CONN_ACTIVE, INIT_CONN_FLUSH, INIT_CONN_LINGER };

struct init_conn {
    struct init_watch w; /* the socket */
    struct init_buf in;  /* bytes read, not yet handled */
    struct init_buf out; /* bytes to send */
    uint8_t state;       /* enum init_conn_state */
    uint8_t in_paused;   /* ops->frame said "not now" */
    uint8_t in_eof;      /* the host shut down its sending side */
    uint8_t want_room;   /* call ops->drain when there is room */
    uint32_t req_bytes;  /* bytes of the request frame (header included) */
    uint8_t n_passed;    /* fds received while the request was read (SCM_RIGHTS) */
    uint8_t passed_bad;  /* more than INIT_CONN_FDS of them came (or were cut off) */
    int passed[3];       /* INIT_CONN_FDS: the request's fds (exec with I) */
    const struct init_conn_ops *ops;
    void *op;                      /* the operation's state */
    int64_t deadline;              /* monotonic ms; 0 none */
    struct init_conn *prev, *next; /* all connections */
};

/* Accept what waits on the listening socket; -1 when out of fds or memory
 * (the caller pauses the listener: it would wake the loop again at once). */
int init_conn_accept(int listen_fd);
/* An epoll event on a connection. */
void init_conn_event(struct init_conn *c, uint32_t events);
/* Deadlines: the nearest one (0: none), and acting on those passed. */
int64_t init_conn_next_deadline(void);
void init_conn_tick(int64_t now);
size_t init_conn_count(void);

/* For operations. */
int init_conn_room(const struct init_conn *c, uint32_t body_len);
void init_conn_wait_room(struct init_conn *c);
/* Queue a frame; -1 (and the connection is aborted later) if it cannot fit. */
int init_conn_send(struct init_conn *c, uint8_t type, const void *body, uint32_t len);
/* An error frame, then the connection ends. The operation must have let go
 * of c (no ops->gone is called). */
void init_conn_error(struct init_conn *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The operation is done: send what is queued, then close. */
void init_conn_finish(struct init_conn *c);
/* Take the frame that ops->frame refused earlier, and read again. */
void init_conn_resume_input(struct init_conn *c);
/* While the request is being dispatched: bytes read after its frame. */
size_t init_conn_extra_input(const struct init_conn *c);
/* The connection's fd was passed to another process (kernel.c): close
 * init's copy now, send nothing, forget the connection. */
void init_conn_handed_off(struct init_conn *c);

#endif
