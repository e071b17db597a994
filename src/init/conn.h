/*
 * conn.h - host connections: accept, read the request, hand it to the
 * handler that serves it (ops.h), carry that handler's frames both ways,
 * and close. Handlers see a connection only through reply.h: conn.c fills
 * in the struct init_conn at the head of each connection with its reply
 * table.
 *
 * A connection goes through four states: REQUEST (reading the first
 * frame), ACTIVE (an operation owns it: its ops and op), FLUSH (the
 * operation is over, the last bytes are being sent) and LINGER (our side
 * is shut down; we wait briefly for the host to close so that it reads
 * EOF, not a reset).
 */
#ifndef INIT_CONN_H
#define INIT_CONN_H

#include <stddef.h>
#include <stdint.h>

/* Accept what waits on the listening socket; -1 when out of fds or memory
 * (the caller pauses the listener: it would wake the loop again at once). */
int init_conn_accept(int listen_fd);
/* An epoll event on a connection (obj: its watch's owner). */
void init_conn_event(void *obj, uint32_t events);
/* Deadlines: the nearest one (0: none), and acting on those passed. */
int64_t init_conn_next_deadline(void);
void init_conn_tick(int64_t now);
size_t init_conn_count(void);

#endif
