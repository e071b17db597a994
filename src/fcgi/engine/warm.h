/*
 * warm.h - the warm pools: sandboxes of the default configuration started
 * ahead of demand (slot state POOLED), so a create that asks for nothing
 * but the defaults is served without waiting for Docker; beside them
 * sandboxes of code_image whose default python kernel was started before
 * they joined the pool, so their first POST /sandbox/{id}/code does not
 * wait for a kernel either; the same two in E2B's layout, for E2B's
 * creates; and those of warm_pool_template.
 *
 * Each pool sizes itself from demand (warmsize.h): warm_pool and
 * warm_pool_code are floors, a burst of creates that find a pool empty
 * grows it up to its ceiling (warm_pool_max, warm_pool_code_max,
 * warm_pool_e2b_max), warm_pool_idle seconds unused shrink it by one, and
 * warm_pool_memory and the host's MemAvailable cap them all. The workers
 * count each pool's hits and misses in shared memory (metrics.h); the
 * reaper reads them at every refill.
 *
 * The reaper refills the pool; a create takes from it through the
 * lifecycle's source hook (struct nb_sandbox_source in sandbox.h), so the
 * lifecycle never calls the pool by name and the pool builds on the
 * lifecycle (nb_sandbox_make, nb_sandbox_finish_destroy) without a cycle.
 */
#ifndef NB_WARM_H
#define NB_WARM_H

#include "app.h"
#include "sandbox.h"
#include "templates.h"

/* The pool as a source of ready sandboxes: main.c sets app.warm to it. */
extern const struct nb_sandbox_source nb_warm_source;

/*
 * Can a create request be served by a warm sandbox (it asks for the
 * defaults only, with the image and layout of a pool)?
 */
int nb_warm_fits(const struct nb_conf *c, const struct nb_sandbox_spec *spec);

/*
 * Hand out a warm sandbox for spec: it becomes RUNNING with the request's
 * TTL and metadata, copied to *out. -1 when spec does not fit, none is
 * ready, or the one taken does not answer (it is destroyed; the caller
 * creates one cold).
 */
int nb_warm_take(struct nb_app *a, const struct nb_sandbox_spec *spec, struct nb_slot *out);

/*
 * How many warm sandboxes image's pools keep ready now (0: no pool of it):
 * the reaper's targets, or the floors before its first refill.
 */
unsigned nb_warm_target(const struct nb_conf *c, const char *image);

/* One pool as GET /metrics and /healthz show it. */
struct nb_warm_pool {
    char image[NB_IMAGE_LEN];
    char tpl[NB_TPL_NAME_MAX + 1]; /* its template of warm_pool_template, or "" */
    const char *layout;            /* "nanobox", or "e2b": E2B's user and home */
    unsigned floor, ceiling, target, ready;
    uint64_t hits, misses;
};

/* The pools of the config into out (at most max): how many. */
unsigned nb_warm_pools(struct nb_app *a, struct nb_warm_pool *out, unsigned max);

/* Destroy one warm sandbox so a cold create gets its slot; 0 if one was. */
int nb_warm_evict(struct nb_app *a);

/*
 * How many warm sandboxes of one pool a refill pass should start, given
 * pooled ready ones of its image and free_slots free slots: up to
 * warm_pool ready, but never into the last warm_pool free slots (those are
 * users').
 */
unsigned nb_warm_wanted(unsigned warm_pool, uint32_t pooled, uint32_t free_slots);

/*
 * Reaper, every pass: size each pool from its demand (warmsize.h), remove
 * one surplus warm sandbox (more than its pool wants, or of a kind no pool
 * holds), then start the ones nb_warm_wanted says for each pool, the
 * default one first (within a time budget, so a
 * slow Docker does not hold up the reaper). A code sandbox is committed
 * POOLED only once its kernel started (or failed to), so a create never
 * takes one whose kernel is still starting. -1 when a create found Docker
 * unreachable (503 docker_unavailable): the reaper then waits for Docker
 * instead of trying again at every pass; else 0.
 */
int nb_warm_refill(struct nb_app *a);

#endif
