/*
 * pool.h - the master's process supervision: a dynamic pool of workers
 * (php-fpm's "pm = dynamic": workers_min always, grow while every worker is
 * busy up to workers_max, retire extras idle for worker_idle_timeout) plus
 * the reaper child. Workers report busy/idle in a scoreboard kept in an
 * anonymous shared mapping made before the first fork.
 */
#ifndef NB_POOL_H
#define NB_POOL_H

#include <stdint.h>
#include <sys/types.h>

#include "app.h"

struct nb_pool_slot {
    pid_t pid;                /* 0: unused */
    volatile int busy;        /* serving a request */
    volatile int64_t since;   /* unix seconds of the last busy/idle change */
    volatile uint64_t served; /* requests served */
    volatile int bulk;        /* serving a NB_ROUTE_BULK request (a file's bytes) */
};

/*
 * Workers moving a file's bytes (NB_ROUTE_BULK) do not count toward
 * workers_max, up to this many times workers_max of them; a transfer past
 * that counts as any request does.
 */
#define NB_POOL_BULK_FACTOR 2

/* Run the master until SIGTERM/SIGINT; returns the exit status. */
int nb_pool_run(struct nb_app *a, int listen_fd);

#endif
