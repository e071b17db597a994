/*
 * worker.h - a pre-forked worker: accept a FastCGI request, route it, answer,
 * repeat. One request at a time; a long exec holds its worker throughout,
 * which is why the pool grows on demand (pool.c).
 */
#ifndef NB_WORKER_H
#define NB_WORKER_H

#include "app.h"
#include "pool.h"

/*
 * Never returns: serves until told to stop, then _exit(0). me is its entry
 * of the scoreboard board (nboard entries), which it reads to count the
 * bulk transfers under way (NB_POOL_BULK_MAX).
 */
/*
 * Register with the HTTP layer what serves requests: the native API's
 * route table and guard (api.h), then each front compiled in (the E2B
 * front unless ./configure --disable-e2b). Once per process.
 */
void nb_worker_routes(void);

void nb_worker_run(struct nb_app *a, int listen_fd, struct nb_pool_slot *me,
                   const struct nb_pool_slot *board, unsigned nboard) __attribute__((noreturn));

#endif
