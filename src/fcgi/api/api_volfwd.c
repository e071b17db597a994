/*
 * api_volfwd.c - a cluster's volumes reached from any node (docs/CLUSTER.md,
 * "Volumes"): a volume stays on the node that made it, and the registry
 * (volreg.h) says which; a request for it, or a sandbox's create that
 * mounts it, is sent to that node under the cluster's secret and the key's
 * name (api_forward.c), never the client's key.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "api_common.h"
#include "volreg.h"
#include "volume.h"

int api_volume_route(struct nb_app *a, struct nb_req *r, const char *key, struct nb_apierr *ae)
{
    struct nb_volume v;
    char what[96];

    if (a->conf.cluster_secret[0] == '\0' || !nb_volreg_on(a) || nb_http_from_node(r))
        return 0;
    /* not in the registry (or etcd does not answer): this node's to answer */
    if (nb_volreg_find(a, nb_http_key(r)->name, key, &v) != 1 || !strcmp(v.node, a->conf.node_name))
        return 0;
    snprintf(what, sizeof(what), "volume %s", v.name);
    return api_forward_node(a, r, v.node, what, ae);
}

int api_place_volumes(struct nb_app *a, struct nb_req *r, yajl_val mounts, struct nb_apierr *ae)
{
    struct nb_volume_mount m[NB_VOLUMES_PER_SANDBOX];
    char names[NB_VOLUMES_PER_SANDBOX][NB_VOLUME_NAME_MAX + 1];
    char node[NB_VOLUMES_PER_SANDBOX][NB_NODE_NAME_MAX + 1], what[96];
    int up[NB_VOLUMES_PER_SANDBOX];
    struct nb_apierr parse_err;
    unsigned n = 0, at = 0;
    const char *where = NULL;

    if (!nb_volreg_on(a) || nb_http_from_node(r))
        return 0;
    /* a list the create refuses: let it say why, here */
    memset(&parse_err, 0, sizeof(parse_err));
    if (nb_volume_mounts_parse(mounts, m, &n, &parse_err) != 0 || n == 0)
        return 0;
    for (unsigned i = 0; i < n; i++)
        snprintf(names[i], sizeof(names[i]), "%s", m[i].name);
    if (nb_volreg_nodes(a, nb_http_key(r)->name, (const char(*)[NB_VOLUME_NAME_MAX + 1]) names, n,
                        node, up, ae) != 0)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        if (node[i][0] == '\0') /* not in the registry: the create says 404 */
            continue;
        if (where == NULL) {
            where = node[i];
            at = i;
        } else if (strcmp(where, node[i]) != 0) {
            nb_apierr_set(ae, NB_E_CONFLICT, "volumes_on_different_nodes",
                          "volume \"%s\" is on node %s and volume \"%s\" on node %s: a sandbox "
                          "mounts volumes of one node",
                          names[at], where, names[i], node[i]);
            return -1;
        }
    }
    if (where == NULL || !strcmp(where, a->conf.node_name))
        return 0;
    if (a->conf.cluster_secret[0] == '\0') {
        nb_apierr_set(ae, NB_E_CONFLICT, "volume_elsewhere",
                      "volume \"%s\" is on node %s: create the sandbox there (this node has no "
                      "cluster_secret to send it on)",
                      names[at], where);
        return -1;
    }
    snprintf(what, sizeof(what), "volume %s", names[at]);
    return api_forward_node(a, r, where, what, ae);
}
