/*
 * tplsync.h - a cluster node's templates kept in step with the templates'
 * registry in etcd (cluster.h; docs/CLUSTER.md, "A node that joins late"),
 * by its member process: a key's template that the cluster has and this
 * node lacks (it was away when it was built), or has from before it was
 * built again, is
 * built here from its recipe; one removed while this node was away is
 * removed here.
 */
#ifndef NB_TPLSYNC_H
#define NB_TPLSYNC_H

#include <stdint.h>

#include "app.h"
#include "etcd.h"

#define NB_TPLSYNC_SEEN 512

/* What the member remembers between rounds: the entries it acted on. */
struct nb_tplsync {
    struct nb_tplsync_seen {
        uint64_t h;     /* the entry's key and mod revision */
        unsigned tries; /* builds sent for it: at most a few in a member's life */
    } seen[NB_TPLSYNC_SEEN];
    unsigned next; /* the slot the next new entry takes (the oldest goes) */
};

/*
 * One round: read every entry, act on those this node is behind on. An
 * entry this node lacks is built only when it was already lacking at the
 * round before (a fresh build reaches every node up by the fan-out). A
 * build is sent to this node's own nginx (node_url) as the one another
 * node sends on: POST /templates under the cluster's secret and the key's
 * name, which this node checks against its copy of the keys. 0, or -1
 * etcd did not answer.
 */
int nb_tplsync_round(struct nb_tplsync *ts, struct nb_app *a, struct nb_etcd *e);

#endif
