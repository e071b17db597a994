/*
 * ops.h - the request handlers conn.c dispatches to, one per request type.
 * Each answers through the interface conn.c hands it (reply.h): either at
 * once, ending with init_reply_finish / init_reply_error, or by taking
 * the connection over (sets c->ops and c->op) until it is done.
 * The request's slices point into the connection's input buffer and are
 * only valid during the call: a handler copies what it keeps.
 */
#ifndef INIT_OPS_H
#define INIT_OPS_H

#include "reply.h"
#include "request.h"

/* exec.c: X (foreground, on pipes or a PTY; background is handed to bg.c) */
void init_exec_start(struct init_conn *c, const struct init_request *r);
/* exec.c: Y (input for, or the window of, a running PTY session) */
void init_exec_pty(struct init_conn *c, const struct init_request *r);

/* bg.c: X with B, L, Q, W, S */
void init_bg_start(struct init_conn *c, const struct init_request *r);
void init_bg_list(struct init_conn *c, const struct init_request *r);
void init_bg_query(struct init_conn *c, const struct init_request *r);
void init_bg_stdin(struct init_conn *c, const struct init_request *r);
void init_bg_signal(struct init_conn *c, const struct init_request *r);

/* files.c: R T U D N V */
void init_files_read(struct init_conn *c, const struct init_request *r);
void init_files_stat(struct init_conn *c, const struct init_request *r);
void init_files_write(struct init_conn *c, const struct init_request *r);
void init_files_delete(struct init_conn *c, const struct init_request *r);
void init_files_mkdir(struct init_conn *c, const struct init_request *r);
void init_files_move(struct init_conn *c, const struct init_request *r);

/* fwatch.c: I (watch a directory with inotify until the host leaves) */
void init_fwatch_start(struct init_conn *c, const struct init_request *r);
/* fwatch.c: J (a polling watcher), G (its events so far), O (remove it) */
void init_fwatch_create(struct init_conn *c, const struct init_request *r);
void init_fwatch_poll(struct init_conn *c, const struct init_request *r);
void init_fwatch_remove(struct init_conn *c, const struct init_request *r);

/* kernel.c: K (the connection is handed to the code bridge, see kernel.h) */
void init_kernel_start(struct init_conn *c, const struct init_request *r);

#endif
