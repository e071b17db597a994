/*
 * regsync.h - the member's half of the sandbox registry (cluster.h,
 * registry.h): what the workers register and take out as they create and
 * destroy, this keeps true for everything else that changes a sandbox —
 * a pause or resume, a new TTL, the reaper's removals, a restart after
 * which the node's table and its rows in etcd disagree.
 */
#ifndef NB_REGSYNC_H
#define NB_REGSYNC_H

#include "app.h"
#include "etcd.h"

/*
 * One round: read the node's index (<prefix>onnode/<tag>/), put the row of
 * every live sandbox whose row is missing or differs (at most a few
 * hundred a round), take out the rows of sandboxes the table no longer
 * has. The number of rows changed, or -1 when etcd did not answer.
 */
int nb_regsync_round(struct nb_app *a, struct nb_etcd *e);

/*
 * The rows of nodes that are gone: for every tag under <prefix>tags/
 * whose node has no record (not one of the up[] names, n_up of them),
 * take out the rows its index lists whose sandbox's TTL (or pause) ended
 * more than grace seconds ago, or that are missing. A node that comes back
 * puts again the rows of what it still has. The number of rows taken out,
 * or -1 when etcd did not answer.
 */
int nb_regsync_collect(struct nb_app *a, struct nb_etcd *e, const char (*up)[33], unsigned n_up,
                       int64_t grace);

#endif
