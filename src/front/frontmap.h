/*
 * frontmap.h - what a front nginx routes by (docs/CLUSTER.md, "The
 * front"): the nginx include nanobox-front writes from the node records in
 * etcd. Pure: records in, text out (tests/unit/test_cluster.c).
 */
#ifndef NB_FRONTMAP_H
#define NB_FRONTMAP_H

#include <stddef.h>

#include "buf.h"
#include "cluster.h"

/*
 * host:port of an http:// URL (a path after it is dropped), as an nginx
 * server line takes it: 0, or -1 for another scheme or a host of other
 * characters than letters, digits, '.', '-', ':' and '[' ']'.
 */
int nb_front_server(const char *url, char *out, size_t outlen);

/*
 * The include, at nginx's http {} level: an upstream per node
 * (nb_node_<name>), the pool of nodes that take new sandboxes (nb_nodes:
 * every node not drained; none: a server marked down, so nginx answers 502),
 * every node (nb_all, where an id without a tag is looked for, $nb_tag
 * "legacy" mapping to nb_legacy),
 * and the map from $nb_tag (the front's config finds it in the request) to
 * the upstream: a node's tag (computed from its name, which
 * nb_node_info_parse checked) to its node, another tag to nb_gone (the
 * sandbox's node is not in the cluster), no tag to nb_nodes. A record whose
 * URL nb_front_server refuses is left out, and counted in *skipped.
 */
void nb_front_map(const struct nb_node_info *nodes, size_t n, struct nb_buf *out,
                  unsigned *skipped);

#endif
