/*
 * e2bflow.h - where an E2B template build flow lives on a cluster
 * (docs/CLUSTER.md, "Templates on every node"; docs/E2B.md, "Templates").
 *
 * E2B's flow is several calls (POST /v3/templates, the upload link, the
 * build, its status) whose state (the uploads, the build's id and log) is
 * one node's: the node that took POST /v3/templates, the flow's home.
 * Its record <prefix>e2bflow/<owner>/<name> in etcd names that node (the
 * templates registry's entry, nb_tpl_meta), so that a node that takes a
 * later call of the flow sends it there. Only E2B's template calls read
 * it; the node is never the client's word.
 *
 * Off a cluster with cluster_secret each of these does nothing.
 */
#ifndef NB_E2BFLOW_H
#define NB_E2BFLOW_H

#include <stddef.h>

#include "app.h"

/* A cluster node whose E2B flows have homes (etcd, a tag, cluster_secret)? */
int nb_e2bflow_on(const struct nb_app *a);

/* owner's flow of name is this node's from now on: 0, or -1 with ae (503). */
int nb_e2bflow_claim(struct nb_app *a, const char *owner, const char *name, struct nb_apierr *ae);

/*
 * The home of owner's flow of name, into node: 1 (another node's or this
 * one's), 0 no flow, -1 with ae (503: etcd does not answer).
 */
int nb_e2bflow_home(struct nb_app *a, const char *owner, const char *name, char *node, size_t len,
                    struct nb_apierr *ae);

/* owner's flow of name is over (its template removed): best effort. */
void nb_e2bflow_drop(struct nb_app *a, const char *owner, const char *name);

#endif
