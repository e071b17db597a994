/*
 * registry.h - a cluster node's side of the sandbox registry in etcd
 * (cluster.h has the keys and the row; docs/CLUSTER.md, "One view"):
 * a create is registered before it is answered, under the key's quotas
 * counted over the whole cluster; a destroy takes its row out; a list
 * reads every node's rows, with this node's own from its table.
 *
 * On a node without etcd_endpoints each of these does nothing (a list is
 * this node's table), so a single machine works as it always has.
 */
#ifndef NB_REGISTRY_H
#define NB_REGISTRY_H

#include <stdint.h>

#include "app.h"
#include "keys.h"
#include "table.h"

/* The worker's etcd handle (volreg.c shares it); NULL off a cluster or
 * when it cannot be made. */
struct nb_etcd;
struct nb_etcd *nb_registry_etcd(struct nb_app *a);

/* What a create learned of the cluster before it made its sandbox. */
struct nb_registry_claim {
    int on;                          /* a cluster node: register what is made */
    int guarded;                     /* the key has quotas: register under its guard */
    int64_t guard;                   /* the guard's mod revision read (0: absent) */
    struct nb_table_usage elsewhere; /* what the key holds on the other nodes */
};

/*
 * Before a create for key k (NULL: none): on a cluster node, check that
 * the cluster can take it (503 "cluster_unavailable" when etcd has no
 * quorum or this node is out of it), and for a key with quotas read what
 * it holds on the other nodes, into c->elsewhere. 0, or -1 with ae.
 */
int nb_registry_before(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                       struct nb_apierr *ae);

/*
 * After made (a copy of the new RUNNING slot) was made: register its row,
 * for a key with quotas under the guard read before. 0 registered; 1
 * another create of the same key came between (c->elsewhere and c->guard
 * are read again: check the quotas once more and call again); -1 with ae
 * (503 cluster_unavailable): the caller destroys what it made.
 */
int nb_registry_after(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                      const struct nb_slot *made, struct nb_apierr *ae);

/* A sandbox of owner is gone: take its row out (best effort: the member
 * takes out what this misses). */
void nb_registry_forget(struct nb_app *a, const char *id, const char *owner);

/*
 * The sandboxes a list shows: this node's live ones of owner (NULL: all)
 * and, on a cluster node, every other node's rows of owner in the
 * registry, each with its node and whether that node is up. partial: the
 * registry could not be read (only this node's are in).
 */
struct nb_sandbox_list {
    struct nb_slot *v;
    char (*node)[NB_NODE_NAME_MAX + 1];
    unsigned char *up;
    uint32_t n;
    int cluster; /* rows carry a node */
    int partial;
};
void nb_registry_list(struct nb_app *a, const char *owner, int64_t now,
                      struct nb_sandbox_list *out);
void nb_registry_list_free(struct nb_sandbox_list *l);

#endif
