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
};

/* Run the master until SIGTERM/SIGINT; returns the exit status. */
int nb_pool_run(struct nb_app *a, int listen_fd);

#endif
