/*
 * worker.h - a pre-forked worker: accept a FastCGI request, route it, answer,
 * repeat. One request at a time; a long exec holds its worker throughout,
 * which is why the pool grows on demand (pool.c).
 */
#ifndef NB_WORKER_H
#define NB_WORKER_H

#include "app.h"
#include "pool.h"

/* Never returns: serves until told to stop, then _exit(0). */
void nb_worker_run(struct nb_app *a, int listen_fd, struct nb_pool_slot *me)
    __attribute__((noreturn));

#endif
