/*
 * member.h - a cluster node's membership in etcd (docs/CLUSTER.md): a
 * child of the master of its own, started only when etcd_endpoints is set.
 */
#ifndef NB_MEMBER_H
#define NB_MEMBER_H

#include "app.h"

/*
 * The loop: claim the node's tag (<prefix>tags/<tag> = node_name, once and
 * for good), then hold a lease of node_lease_ttl seconds and the node's
 * record (<prefix>nodes/<node_name>, cluster.h) bound to it, renewed every
 * third of the TTL and rewritten when what it says changes (or every 30 s).
 * A name or tag another live node holds keeps this one out (logged, shown
 * by /healthz) until it is free. etcd away: the node goes on serving, and
 * rejoins when etcd answers. SIGTERM revokes the lease, so the record goes
 * at once; a node killed outright leaves it to lapse. Never returns.
 */
void nb_member_run(struct nb_app *a);

#endif
