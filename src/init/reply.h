/*
 * reply.h - how a request handler answers the host: the interface conn.c
 * hands every handler (ops.h), so that the handlers depend on this file
 * and conn.c depends on them, not both ways.
 *
 * A handler gets a struct init_conn: the part of a host connection it may
 * see. conn.c's connection begins with it and fills in reply, the table of
 * conn.c's functions, when it accepts; the init_reply_* functions below
 * (reply.c) call through that table. A handler answers at once (send, then
 * finish or error), or takes the connection over by setting ops and op
 * until it is done.
 *
 * Output goes through one buffer of at most INIT_OUT_MAX bytes. Producers
 * of bulk data (command output, file bytes, listings) ask
 * init_reply_room() first; when there is none they call
 * init_reply_wait_room and their ops->drain runs once the host has read
 * enough. The last INIT_OUT_RESERVE bytes are kept for control frames, so
 * those always fit.
 */
#ifndef INIT_REPLY_H
#define INIT_REPLY_H

#include <stddef.h>
#include <stdint.h>

struct init_conn;

/* What an operation that owns a connection is told. */
struct init_conn_ops {
    /* A frame from the host after the request: 0 handled, 1 not now (the
     * connection stops reading until init_reply_resume_input). NULL: the
     * operation takes no frames and any frame is a protocol error. */
    int (*frame)(struct init_conn *c, uint8_t type, const unsigned char *body, uint32_t len);
    /* There is room again after init_reply_wait_room. */
    void (*drain)(struct init_conn *c);
    /* The connection is going away first (host gone, protocol error, a
     * timeout): forget c, which must not be used after this returns. */
    void (*gone)(struct init_conn *c);
};

/* The connection's side of the interface: conn.c's functions. */
struct init_reply {
    int (*room)(const struct init_conn *c, uint32_t body_len);
    void (*wait_room)(struct init_conn *c);
    int (*send)(struct init_conn *c, uint8_t type, const void *body, uint32_t len);
    void (*error)(struct init_conn *c, int err, const char *msg, size_t len);
    void (*finish)(struct init_conn *c);
    void (*resume_input)(struct init_conn *c);
    size_t (*extra_input)(const struct init_conn *c, const unsigned char **data);
    int (*fd)(const struct init_conn *c);
    void (*handed_off)(struct init_conn *c);
};

struct init_conn {
    const struct init_reply *reply;  /* set by conn.c for the connection's life */
    const struct init_conn_ops *ops; /* the operation that took the connection over */
    void *op;                        /* the operation's state */
};

/* Is there room for a frame of body_len bytes (beyond the reserve)? */
int init_reply_room(const struct init_conn *c, uint32_t body_len);
/* Call ops->drain once there is. */
void init_reply_wait_room(struct init_conn *c);
/* Queue a frame; -1 (and the connection is aborted later) if it cannot fit. */
int init_reply_send(struct init_conn *c, uint8_t type, const void *body, uint32_t len);
/* An error frame, then the connection ends. The operation must have let go
 * of c (no ops->gone is called). */
void init_reply_error(struct init_conn *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The operation is done: send what is queued, then close. */
void init_reply_finish(struct init_conn *c);
/* Take the frame that ops->frame refused earlier, and read again. */
void init_reply_resume_input(struct init_conn *c);
/* While the request is being dispatched: bytes read after its frame, the
 * first of them at *data (data may be NULL). */
size_t init_reply_extra_input(const struct init_conn *c, const unsigned char **data);
/* The connection's socket, to pass to another process (kernel.c). */
int init_reply_fd(const struct init_conn *c);
/* The socket was passed on: close init's copy now, send nothing, forget
 * the connection. */
void init_reply_handed_off(struct init_conn *c);

#endif
