/*
 * relay.h - the connections: accept, connect upstream, then move bytes both
 * ways with splice(2) until both directions are done.
 *
 * Every connection lives in one slot of an array preallocated for
 * --max-conns, so memory does not grow with traffic; beyond that many, new
 * connections are accepted and closed at once. Sockets are registered
 * edge-triggered once; each slot remembers which of its sockets are
 * readable and writable until a syscall answers EAGAIN.
 */
#ifndef FWD_RELAY_H
#define FWD_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "fwd.h"
#include "upstream.h"

#define RELAY_CONNECT_TIMEOUT 10 /* seconds for the app to accept */

struct relay_stats {
    uint64_t accepted;   /* connections taken into a slot */
    uint64_t refused;    /* upstream refused or timed out: client closed */
    uint64_t rejected;   /* no free slot (or no fd): closed at once */
    uint64_t bytes_up;   /* client → app */
    uint64_t bytes_down; /* app → client */
};

/* epfd: the loop's epoll; up: how to reach the app; max_conns: slots;
 * stop: how to stop the loop when relaying cannot go on (fwd.h). */
int relay_init(int epfd, struct upstream *up, size_t max_conns, size_t pipe_size,
               fwd_stop_fn *stop);

/* Accept what is waiting on a listening socket. */
void relay_accept(int listen_fd, int is_tcp);

/* An epoll event for a connection (FWD_TAG_CLIENT / FWD_TAG_SERVER). */
void relay_event(uint64_t tag, uint32_t events);

/* Connections that used up their turn and still have work: run them again.
 * Returns nonzero while some remain (the loop then polls without waiting). */
int relay_run_pending(void);

/* Once a second while relay_connecting() is nonzero: drop connects to the
 * app that took longer than RELAY_CONNECT_TIMEOUT. */
void relay_tick(void);
size_t relay_connecting(void);

size_t relay_active(void);
const struct relay_stats *relay_get_stats(void);

/* Close every connection and free the slots. */
void relay_shutdown(void);

#endif
