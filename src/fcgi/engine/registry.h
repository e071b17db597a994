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
    int late_ok;                     /* no quota counts its row: registered after the answer */
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
 * The same read for a key whatever its quotas (max_ports: a port opened
 * is registered under the guard too, with nb_registry_after).
 */
int nb_registry_usage(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
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

/*
 * made registered after its create was answered, for a key that nothing
 * counts its rows against (c->late_ok): one etcd write taken off the
 * create's time. Skipped if the sandbox is gone meanwhile; a write that
 * fails (or one that lands after a destroy) is put right by the member's
 * next round (nb_regsync_round), as for any row.
 */
void nb_registry_late(struct nb_app *a, const struct nb_slot *made);

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

/*
 * A key's template build on a cluster node with cluster_secret (docs/
 * CLUSTER.md, "A node that joins late"): its entry in the templates'
 * registry, reserved before the build is queued, so that max_templates
 * counts the key's templates on every node (under the key's guard, as a
 * create's quotas do) and a node that was away builds it from its recipe.
 */
struct nb_registry_tpl {
    int on;      /* registered: release or commit after */
    char *prior; /* the entry before ours (NULL: none), put back by a release */
    size_t prior_len;
    char ekey[NB_REG_KEY_MAX], rkey[NB_REG_KEY_MAX];
};
/*
 * Reserve owner's template name: 0 (t->on tells whether it was
 * registered), or -1 with ae: 429 quota (max_templates reached over the
 * cluster), 503 cluster_unavailable.
 */
int nb_registry_tpl_reserve(struct nb_app *a, const char *owner, const char *name,
                            unsigned max_templates, struct nb_registry_tpl *t,
                            struct nb_apierr *ae);
/* The build was refused here: the entry as it was before. */
void nb_registry_tpl_release(struct nb_app *a, struct nb_registry_tpl *t);
/* The build was queued: its recipe (the request's body) stored beside the entry. */
void nb_registry_tpl_commit(struct nb_app *a, struct nb_registry_tpl *t, const char *body,
                            size_t len);
/*
 * A snapshot was taken here under t's reservation: the entry stays, marked
 * a snapshot (this node's alone: no recipe, so no other node builds it),
 * and counts for the key's max_templates on every node.
 */
void nb_registry_tpl_snapshot(struct nb_app *a, struct nb_registry_tpl *t);
/* owner's template name was removed here: every node drops its copy, now or when it is back. */
void nb_registry_tpl_removed(struct nb_app *a, const char *owner, const char *name);

/*
 * The node that the nb_tpl_meta text at etcd key names (a template's
 * entry, or an E2B build flow's record): 1 with it in node; 0 none (with
 * snapshot: none that is a live snapshot's entry); -1 no etcd answer.
 */
int nb_registry_meta_node(struct nb_app *a, const char *key, int snapshot, char *node, size_t len);

/*
 * The node of owner's snapshot name, by its entry in the templates'
 * registry: 1 with its name in node; 0 no such snapshot (or no cluster,
 * or etcd did not answer).
 */
int nb_registry_snapshot_node(struct nb_app *a, const char *owner, const char *name, char *node,
                              size_t len);

#endif
