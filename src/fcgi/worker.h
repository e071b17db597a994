/*
 * worker.h - a pre-forked worker: accept a FastCGI request, route it, answer,
 * repeat. One request at a time; a long exec holds its worker throughout,
 * which is why the pool grows on demand (pool.c).
 */
#ifndef NB_WORKER_H
#define NB_WORKER_H

#include "app.h"
#include "http.h"
#include "pool.h"

/*
 * Route one request to its handler: a FastCGI request, or an internal one
 * (POST /mcp's tool calls; auth was the outer one's). The handler's result
 * (NB_OK answered, NB_ERR with ae set) for nb_http_finalize.
 */
int nb_worker_route(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae);

/*
 * Finish destroying a sandbox (already marked with nb_sandbox_mark_destroy)
 * once the current request's answer has gone out: POST /run answers
 * without waiting for Docker to remove its container. -1 if it cannot be
 * deferred (the caller finishes it now).
 */
int nb_worker_defer_destroy(const char *id, const char *cid, uint32_t gen);

/* Never returns: serves until told to stop, then _exit(0). */
void nb_worker_run(struct nb_app *a, int listen_fd, struct nb_pool_slot *me) __attribute__((noreturn));

#endif
