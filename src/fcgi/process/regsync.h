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

#endif
