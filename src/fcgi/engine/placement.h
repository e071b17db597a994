/*
 * placement.h - where a create on a node of a cluster runs (docs/CLUSTER.md,
 * "Placement"): here, or on the better of two nodes drawn at random from
 * those that take sandboxes, the way E2B's orchestrator places them; the
 * create is then sent there, under the cluster's secret and the key's name.
 */
#ifndef NB_PLACEMENT_H
#define NB_PLACEMENT_H

#include <stddef.h>

#include "app.h"
#include "buf.h"

/* The headers of a call between nodes (their FastCGI names in http.c). */
#define NB_CLUSTER_SECRET_HEADER "X-Nanobox-Cluster"
#define NB_CLUSTER_OWNER_HEADER "X-Nanobox-Owner"

struct nb_placed {
    long status;        /* the other node's answer */
    char ctype[128];    /* its Content-Type */
    struct nb_buf body; /* its body (capped); the caller frees it */
    char node[NB_NODE_NAME_MAX + 1];
};

/*
 * A create of path (POST, body of len bytes) for the key named owner, of
 * the template template_key ("name" of the operator's, "owner/name" of a
 * key's; NULL: none), placed only on a node that has it ready: 0
 * to make it here (no cluster_secret, no other node takes sandboxes or
 * has more room, or the one drawn did not answer or was full: the next is
 * this one); 1 when another node made it or refused it, its answer in
 * *out (nb_buf_free(&out->body) after).
 */
int nb_place_create(struct nb_app *a, const char *path, const char *body, size_t len,
                    const char *owner, const char *template_key, struct nb_placed *out);

#endif
