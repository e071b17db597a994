/*
 * api_volumes.c - the volumes' routes (docs/API.md, Volumes): make, list,
 * read and remove the key's persistent volumes. The work is volume.c's;
 * a sandbox mounts them at its create (api_sandbox.c, "volumes").
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "json.h"
#include "volreg.h"
#include "volume.h"

static void volume_json(yajl_gen g, const struct nb_volume *v)
{
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", v->name);
    nb_json_kv_str(g, "volumeID", v->id); /* E2B's key for it too */
    nb_json_kv_int(g, "size", (long long)v->size);
    nb_json_kv_int(g, "created_at", v->created);
    if (v->node[0]) { /* a cluster's: the node that holds it */
        nb_json_kv_str(g, "node", v->node);
        nb_json_kv_bool(g, "node_up", v->node_up);
    }
    yajl_gen_map_close(g);
}

int api_volumes_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
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
    yajl_gen_map_open(g);
    nb_json_cstr(g, "volumes");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++)
        volume_json(g, &v[i]);
    yajl_gen_array_close(g);
    if (partial) /* the registry did not answer: this node's alone */
        nb_json_kv_bool(g, "partial", 1);
    yajl_gen_map_close(g);
    free(v);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_volumes_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    struct nb_jfield f[] = {
        {"name", NB_JT_STRING, NULL},
        {"size", NB_JT_INT | NB_JT_STRING, NULL},
    };
    struct nb_volume v;
    uint64_t size = 0;
    char err[256];
    yajl_val body = NULL;
    yajl_gen g;
    int rc = NB_ERR;
    (void)ra;
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, 2, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[0].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "name is required");
        goto out;
    }
    if (f[1].val != NULL && (api_memory_value(f[1].val, &size) != 0 || size == 0)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "size is bytes or a size like \"512m\"");
        goto out;
    }
    if (nb_volume_create(a, nb_http_key(r), nb_json_string(f[0].val), size, &v, ae) != 0)
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

int api_volume_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    struct nb_volume v;
    yajl_gen g;
    int fwd = api_volume_route(a, r, ra->arg, ae); /* another node's: sent there */
    if (fwd != 0)
        return fwd > 0 ? NB_OK : NB_ERR;
    if (nb_volume_get(a, nb_http_key(r)->name, ra->arg, &v, ae) != 0)
        return NB_ERR;
    nb_volreg_here(a, &v);
    g = nb_json_gen();
    volume_json(g, &v);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_volume_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    int fwd = api_volume_route(a, r, ra->arg, ae); /* another node's: sent there */
    if (fwd != 0)
        return fwd > 0 ? NB_OK : NB_ERR;
    if (nb_volume_delete(a, nb_http_key(r)->name, ra->arg, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "volume_delete", ra->arg);
    nb_http_no_content(r);
    return NB_OK;
}
