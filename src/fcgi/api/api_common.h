/*
 * api_common.h - what the handlers of both fronts share (api_common.c):
 * the helpers under them, which call engines and the HTTP layer but no
 * handler (docs/ARCHITECTURE.md, "Layers"), and the route guard the worker
 * hands the HTTP layer with the route table.
 */
#ifndef NB_API_COMMON_H
#define NB_API_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "app.h"
#include "http.h"
#include "route.h"

/*
 * The route guard (nb_http_set_routes): a route's {id} is a sandbox id
 * when nb_sandbox_id_valid says so; once the HTTP layer's own checks
 * passed, a route with an id answers the 404 of an unknown id, word for
 * word, when the sandbox is not the request's key's (an admin key sees
 * every one), and a route flagged NB_ROUTE_AWAKE answers 409 paused while
 * its sandbox is paused, unless it was created with auto_resume: then it
 * is resumed first (nb_sandbox_visible, nb_sandbox_awake).
 */
extern const struct nb_route_guard nb_api_route_guard;

/*
 * Read and parse the JSON body within the configured caps: 0, or -1 with
 * ae set (413, 400 bad_json). *out is NULL for an empty body; the caller
 * frees it with yajl_tree_free.
 */
int api_read_json(struct nb_app *a, struct nb_req *r, yajl_val *out, struct nb_apierr *ae);

/*
 * After a create made slot with its spec's register_late pointing at
 * flag: when flag says the create left its cluster registration to us,
 * that registration hooked to run once the answer has gone out (or done
 * now, if r has no room for another hook).
 */
void api_register_late(struct nb_app *a, struct nb_req *r, int flag, const struct nb_slot *made);

/*
 * A create (POST path) on a node of a cluster, of the template named
 * template as r's key names it (the operator's, or the key's own; NULL:
 * none): placed on another node that has it ready when placement picks
 * one (placement.h), whose answer is then sent as it is: 1. 0: make it
 * here (so is every create another node placed here, and MCP's, whose
 * next tool calls this node serves).
 */
int api_place_create(struct nb_app *a, struct nb_req *r, const char *path, const char *template);
/*
 * The same; a string holding an escaped NUL (\u0000), which every field
 * would silently cut short, is refused with 400 nul_code ("bad_field" for
 * api_read_json, "bad_path" where every string is a path).
 */
int api_read_json_nul(struct nb_app *a, struct nb_req *r, yajl_val *out, const char *nul_code,
                      struct nb_apierr *ae);
/* The same with a cap of its own instead of max_body (POST /templates: a build context). */
int api_read_json_cap(struct nb_app *a, struct nb_req *r, size_t cap, yajl_val *out,
                      const char *nul_code, struct nb_apierr *ae);

/*
 * Validate an env object ({NAME: "value"}) into "NAME=value" strings
 * (caller frees each and the array). -1 with ae set on a bad name/size.
 */
int api_env_list(const struct nb_conf *c, yajl_val env, char ***out, unsigned *n,
                 struct nb_apierr *ae);
void api_env_free(char **env, unsigned n);

/*
 * A create's metadata ({str: str}, NULL: none) as JSON text into out,
 * within the operator's max_metadata and max_metadata_bytes; -1 with ae
 * set (400 a value not a string, 422 too many or too large).
 */
int api_metadata_text(const struct nb_conf *c, yajl_val meta, char *out, size_t outlen,
                      struct nb_apierr *ae);

/*
 * A create's "network" value (NULL: none): "none", "bridge", or an object
 * {"mode", "allow", "deny"}; *bridge and the policy out. -1 with ae set:
 * 400 on a wrong type, 422 on a bad rule, 403 where the operator says no.
 */
struct nb_net_policy;
int api_network_value(const struct nb_conf *c, yajl_val v, int *bridge, struct nb_net_policy *p,
                      struct nb_apierr *ae);
/* The answer of PUT /sandbox/{id}/network: the policy as applied, rules in canonical text. */
void api_network_json(yajl_gen g, const char *id, const struct nb_net_policy *p);

/* A memory field: bytes as an integer, or a size string like "128m". 0, or -1. */
int api_memory_value(yajl_val v, uint64_t *out);

/*
 * A command's timeout field (NULL: exec_timeout) into *out; -1 with ae set
 * (422) when it is not in (0, exec_timeout_max].
 */
int api_exec_timeout(const struct nb_conf *c, yajl_val v, double *out, struct nb_apierr *ae);

/*
 * A code call's "language" field (NULL: none, *out left as it is) as the
 * bridge's name in *out; -1 with ae set (status: 422 native, 400 E2B's)
 * for a language there is no context of.
 */
int api_code_language(yajl_val v, enum nb_err err, const char **out, struct nb_apierr *ae);

/*
 * A code call's "code" field (NULL: none) in *out: required, not empty,
 * within code_max_bytes; -1 with ae set (400 bad_field, 413 too_large).
 */
int api_code_text(const struct nb_conf *c, yajl_val v, const char **out, struct nb_apierr *ae);

/*
 * Run rq (code, context, language, timeout, env and on_event set by the
 * front) for request r in slot: the output cap is max_output and the
 * client's leaving interrupts the execution. 0 once the end event went to
 * on_event; -1 with ae set: the engine's errors (code.h), client_gone
 * (NB_E_CANCELLED) when the client left, bad_gateway when the bridge ended
 * without an end event.
 */
struct nb_code_run;
int api_code_exec(struct nb_app *a, struct nb_req *r, const struct nb_slot *slot,
                  struct nb_code_run *rq, struct nb_apierr *ae);

/*
 * A sandbox's cgroup numbers (cgstat.h), read from the host: 0, or -1 with
 * ae set (503 metrics_unavailable).
 */
struct nb_slot;
struct nb_cgstat;
int api_sandbox_cgstat(const struct nb_slot *slot, struct nb_cgstat *st, struct nb_apierr *ae);

/*
 * The range of a usage history read (GET /sandbox/{id}/metrics, E2B's
 * getMetrics): the query's start and end, unix seconds, each optional
 * (*start 0, *end INT64_MAX when absent); *given: was either there. 0, or
 * -1 with ae set (400 bad_field): not a whole number of seconds from 0 to
 * API_RANGE_MAX, or end before start.
 */
#define API_RANGE_MAX 9999999999LL /* ten digits: the year 2286 */
struct nb_req;
int api_metrics_range(struct nb_req *r, int *given, int64_t *start, int64_t *end,
                      struct nb_apierr *ae);

/* Does a sandbox's metadata (JSON) hold every keys[i] = values[i]? 1 yes (n 0: yes), 0 no. */
int api_metadata_matches(const char *metadata, const char (*keys)[128], const char (*values)[256],
                         unsigned n);

/*
 * api_forward.c: on a cluster node, a request naming a sandbox of another
 * node (the tag in id) is sent to that node and its answer relayed: 1
 * answered; 0 the sandbox is not another node's (serve it here); -1 with
 * ae (503 node_unavailable: that node is down or unknown).
 */
int api_forward_foreign(struct nb_app *a, struct nb_req *r, const char *id, struct nb_apierr *ae);

/*
 * api_forward.c: on a cluster node, r (a template's build or removal, once
 * it succeeded here) sent to every other node of the cluster, as it came,
 * under the cluster's secret and the key's name, one after the other; each
 * answer logged. The number of nodes that took it (2xx).
 */
unsigned api_fanout(struct nb_app *a, struct nb_req *r);

/* A request of a node's own making, for api_fanout_req (NULL fields: none). */
struct api_fwd_req {
    const char *method, *path, *query, *ctype;
    const char *body;
    size_t body_len;
};

/*
 * api_fanout's send of q (another request than r: an E2B build's
 * equivalent native build or removal) to every other node, under the
 * cluster's secret and r's key's name; sent even when r came from a node
 * (the E2B flow's home node sends what its flow made). The number of
 * nodes that took it (2xx).
 */
unsigned api_fanout_req(struct nb_app *a, struct nb_req *r, const struct api_fwd_req *q);

/* The header a relay carries the client's origin in (api_origin). */
#define API_ORIGIN_HEADER "X-Nanobox-Origin"

/*
 * The origin ("http://host:port") the client of r reached: its Host (with
 * nginx's port when it names none) and scheme; for a request a node relayed
 * (nb_http_from_node), the origin that node's client reached, which the
 * relay sends in API_ORIGIN_HEADER. A link handed to the client (an E2B
 * upload link) is made of it.
 */
void api_origin(struct nb_req *r, char *out, size_t n);

/*
 * api_forward.c: r sent to the node named name and its answer relayed, as
 * api_forward_foreign does: 1, or -1 with ae (503 node_unavailable: the
 * node is down or does not answer). what names the object ("volume x").
 */
int api_forward_node(struct nb_app *a, struct nb_req *r, const char *name, const char *what,
                     struct nb_apierr *ae);

/*
 * api_forward.c: r, about owner's snapshot name that this node does not
 * have (a snapshot is its node's alone), sent to the snapshot's node (its
 * entry in the templates' registry) and its answer relayed: 1; -1 with
 * ae; 0 no other node's snapshot (or no cluster, or r came from a node):
 * answer it here.
 */
int api_forward_template(struct nb_app *a, struct nb_req *r, const char *owner, const char *name,
                         struct nb_apierr *ae);

/*
 * api_volfwd.c, a cluster's volumes (docs/CLUSTER.md, "Volumes"): a route
 * naming owner's volume key (a name or an id) that another node holds is
 * sent there: 1 answered, 0 serve it here, -1 with ae (503
 * node_unavailable).
 */
int api_volume_route(struct nb_app *a, struct nb_req *r, const char *key, struct nb_apierr *ae);

/*
 * A sandbox's create that mounts the volumes of mounts (its "volumes" or
 * "volumeMounts") goes to the node that holds them: 1 sent there and
 * answered, 0 make it here, -1 with ae (409 the volumes are on different
 * nodes, 503 node_unavailable or cluster_unavailable).
 */
int api_place_volumes(struct nb_app *a, struct nb_req *r, yajl_val mounts, struct nb_apierr *ae);

#endif
