/*
 * volreg.h - the volume registry of a cluster (docs/CLUSTER.md, "Volumes"):
 * where each volume is, so that every node can list, find and reach it.
 * A volume stays on the node that made it (its ext4 file is there); etcd
 * holds, per volume,
 *
 *   <prefix>volumes/<owner>/<name>        {"name","id","owner","node","size","created"}
 *   <prefix>volnode/<node>/<owner>/<name>  its id: the node's index of its rows
 *   <prefix>volowners/<owner>             touched by each create of owner: the
 *                                         guard its quotas are counted under
 *
 * A name is the owner's once in the cluster: a create claims its row only
 * if absent, in the transaction that counts the owner's volumes on every
 * node. On a node without etcd_endpoints each of these does nothing.
 */
#ifndef NB_VOLREG_H
#define NB_VOLREG_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "etcd.h"
#include "keys.h"
#include "volume.h"

/*
 * What volume.c does that this needs, handed in by the caller (volume.c
 * calls this file: a call back would make the two a cycle): its quota
 * check (nb_volume_quota) and its list of a node's volumes (nb_volume_list).
 */
typedef int (*nb_volreg_quota_fn)(const struct nb_conf *c, const struct nb_key *key, size_t n,
                                  uint64_t held, uint64_t size, struct nb_apierr *ae);
typedef int (*nb_volreg_list_fn)(struct nb_app *a, const char *owner, struct nb_volume **out,
                                 size_t *n, struct nb_apierr *ae);

/* Is this node a cluster's (etcd_endpoints and a node name)? */
int nb_volreg_on(const struct nb_app *a);

/*
 * Before v (owner, name, id, size, created filled in) is made on this
 * node, whose n_here volumes of owner hold held_here bytes: claim its
 * name for this node, with key's volume quotas counted over every node.
 * 0 claimed (or not a cluster's node); -1 with ae: 409 exists (on another
 * node), 429 quota, 503 cluster_unavailable (etcd has no quorum).
 */
int nb_volreg_claim(struct nb_app *a, const struct nb_key *key, const struct nb_volume *v,
                    size_t n_here, uint64_t held_here, nb_volreg_quota_fn quota,
                    struct nb_apierr *ae);

/* owner's volume name is gone from this node: its row out (best effort:
 * the member's round takes out what this misses). */
void nb_volreg_forget(struct nb_app *a, const char *owner, const char *name);

/*
 * owner's volume whose name or id is key, in the registry: 1 (*out
 * filled, its node and node_up too), 0 not there, -1 etcd did not answer.
 */
int nb_volreg_find(struct nb_app *a, const char *owner, const char *key, struct nb_volume *out);

/*
 * The nodes of owner's volumes names[0..n-1] into node[i] ("": not in the
 * registry) and whether each is up. 0, or -1 with a 503
 * cluster_unavailable (etcd has no quorum: a create cannot be placed).
 */
int nb_volreg_nodes(struct nb_app *a, const char *owner,
                    const char (*names)[NB_VOLUME_NAME_MAX + 1], unsigned n,
                    char (*node)[NB_NODE_NAME_MAX + 1], int *up, struct nb_apierr *ae);

/*
 * owner's volumes of the whole cluster: this node's (nb_volume_list) and
 * the other nodes' rows, each with its node and node_up. *partial: the
 * registry could not be read (only this node's are in). 0, or -1 with ae.
 */
int nb_volreg_list(struct nb_app *a, const char *owner, nb_volreg_list_fn list,
                   struct nb_volume **out, size_t *n, int *partial, struct nb_apierr *ae);

/* v is this node's: on a cluster's node, its node and node_up say so. */
void nb_volreg_here(const struct nb_app *a, struct nb_volume *v);

/*
 * The member's round (member.c): the node's index read, its volumes
 * listed from Docker; rows of volumes the node no longer has are taken
 * out (those claimed less than a minute ago are left: a create may be
 * making them), and volumes with no row get theirs back. The number of
 * rows changed, or -1 (etcd or Docker did not answer).
 */
int nb_volreg_sync(struct nb_app *a, struct nb_etcd *e, nb_volreg_list_fn list);

/*
 * The collector's round (member.c, on the first node by name of those
 * up[0..n_up-1]): each node gone (tags/ names it, no record) gets
 * <prefix>gone/<name> = the unix second it was first seen gone; once it
 * has been gone volume_orphan_after seconds (0: never), its volumes' rows
 * (those that still name it) and its index are taken out, their names free
 * for others. An up node's gone/ key is taken out. The number of rows
 * taken out, or -1 (etcd did not answer).
 */
int nb_volreg_collect(struct nb_app *a, struct nb_etcd *e, const char (*up)[33], unsigned n_up);

/* A node back: its gone/ key out (a later absence counts from then). 0 or -1. */
int nb_volreg_back(struct nb_app *a, struct nb_etcd *e);

#endif
