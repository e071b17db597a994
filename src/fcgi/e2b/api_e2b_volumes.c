/*
 * api_e2b_volumes.c - E2B's volume API (docs/E2B.md, Volumes): POST and
 * GET /volumes, GET and DELETE /volumes/{volumeID}, in E2B's shapes, over
 * volume.c, the native API's volumes (a volume made one way is seen the
 * other). A request is E2B's when its X-API-Key has E2B's "e2b_" prefix
 * (e2b_route.h, nb_e2b_volume_path): the native API serves the same paths.
 * The volume content API (/volumecontent/..., with a volume's own token)
 * is not offered.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "e2b_api.h"
#include "json.h"
#include "volreg.h"
#include "volume.h"

/* E2B's Volume: volumeID and name (no token: there is no content API to use it with). */
static void volume_json(yajl_gen g, const struct nb_volume *v)
{
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "volumeID", v->id);
    nb_json_kv_str(g, "name", v->name);
    if (v->node[0]) { /* a cluster's: the node that holds it */
        nb_json_kv_str(g, "node", v->node);
        nb_json_kv_bool(g, "node_up", v->node_up);
    }
    yajl_gen_map_close(g);
}

int api_e2b_volumes_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    struct nb_volume *v;
    size_t n;
    yajl_gen g;
    int partial;
    (void)ra;
    /* every node's, on a cluster's node (volreg.h) */
    if (nb_volreg_list(a, nb_http_key(r)->name, nb_volume_list, &v, &n, &partial, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++)
        volume_json(g, &v[i]);
    yajl_gen_array_close(g);
    free(v);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_e2b_volumes_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae)
{
    const char *np[] = {"name", NULL};
    struct nb_volume v;
    yajl_val body = NULL, name;
    yajl_gen g;
    int rc = NB_ERR;
    (void)ra;
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    name = yajl_tree_get(body, np, yajl_t_string);
    if (name == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "name is required");
        goto out;
    }
    /* E2B's create names no size: the operator's volume_size_default */
    if (nb_volume_create(a, nb_http_key(r), nb_json_string(name), 0, &v, ae) != 0)
        goto out;
    nb_http_audit(r, "volume_create", v.name);
    nb_volreg_here(a, &v);
    g = nb_json_gen();
    volume_json(g, &v);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

int api_e2b_volume_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    struct nb_volume v;
    yajl_gen g;
    /* another node's: its row says all E2B's answer holds (a request sent
     * there would reach the native route: it bears no E2B key) */
    if (nb_volreg_on(a) && nb_volreg_find(a, nb_http_key(r)->name, ra->arg, &v) == 1 &&
        strcmp(v.node, a->conf.node_name) != 0) {
        if (!v.node_up) {
            nb_apierr_set(ae, NB_E_UNAVAILABLE, "node_unavailable",
                          "the node of volume %s is down: it answers again when the node is back",
                          v.name);
            return NB_ERR;
        }
    } else if (nb_volume_get(a, nb_http_key(r)->name, ra->arg, &v, ae) != 0) {
        return NB_ERR;
    } else {
        nb_volreg_here(a, &v);
    }
    g = nb_json_gen();
    volume_json(g, &v);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_e2b_volume_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                          struct nb_apierr *ae)
{
    /* another node's: sent there (its native route answers the same 204) */
    int fwd = api_volume_route(a, r, ra->arg, ae);
    if (fwd != 0)
        return fwd > 0 ? NB_OK : NB_ERR;
    if (nb_volume_delete(a, nb_http_key(r)->name, ra->arg, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "volume_delete", ra->arg);
    nb_http_no_content(r);
    return NB_OK;
}
