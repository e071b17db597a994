/*
 * api_e2b_snap.c - E2B's snapshots and fork (docs/E2B.md), as the official
 * SDK calls them, over nanobox's snapshot engine (snapshot.h) and fork
 * (fork.h): sbx.createSnapshot() is POST /sandboxes/{id}/snapshots,
 * Sandbox.listSnapshots() GET /snapshots (Sandbox.deleteSnapshot()'s
 * DELETE /templates/{templateID} is the template API's, api_e2b_tpl.c);
 * Sandbox.create(snapshotId) is a create whose templateID names the
 * snapshot (e2b_tpl_image), and sbx.fork() api_e2b.c's api_e2b_fork. An E2B snapshot is a nanobox template of kind
 * "snapshot"; its snapshotID is the template's name, and, as every
 * template, it is its key's own: another key's is not found.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "e2b_api.h"
#include "json.h"
#include "snapshot.h"
#include "templates.h"

/* E2B's page size of the snapshot list: 100 by default and at most. */
#define SNAP_LIST_MAX 100

/* The string or integer at key of the body object; NULL when absent or null. */
static yajl_val body_get(yajl_val body, const char *key, yajl_type t, struct nb_apierr *ae,
                         int *bad)
{
    const char *path[] = {key, NULL};
    yajl_val v =
        body != NULL && YAJL_IS_OBJECT(body) ? yajl_tree_get(body, path, yajl_t_any) : NULL;
    if (v == NULL || YAJL_IS_NULL(v))
        return NULL;
    if ((t == yajl_t_string && YAJL_IS_STRING(v)) || (t == yajl_t_number && YAJL_IS_INTEGER(v)))
        return v;
    nb_apierr_set(ae, NB_E_INVALID, "bad_field", "field \"%s\" has the wrong type", key);
    *bad = 1;
    return NULL;
}

static void snapshot_info(yajl_gen g, const char *name)
{
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "snapshotID", name);
    nb_json_cstr(g, "names");
    yajl_gen_array_open(g);
    nb_json_cstr(g, name);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
}

/* POST /sandboxes/{id}/snapshots {name?}: 201 SnapshotInfo, once the snapshot is ready. */
int api_e2b_snapshot_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae)
{
    struct nb_template t;
    yajl_val body = NULL, name;
    yajl_gen g;
    int bad = 0, rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    name = body_get(body, "name", yajl_t_string, ae, &bad);
    if (bad)
        goto out;
    if (nb_snapshot_take(a, ra->id, name ? nb_json_string(name) : NULL, nb_http_key(r)->name,
                         nb_http_key(r)->max_templates, &t, ae) != 0)
        goto out;
    nb_http_audit(r, "snapshot", t.name);
    g = nb_json_gen();
    snapshot_info(g, t.name);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

struct snap_list {
    yajl_gen g;
    const char *owner, *sandbox, *name, *after;
    unsigned limit, shown;
    int more;
    char last[NB_TPL_NAME_MAX + 1];
};

static void snap_cb(void *arg, const struct nb_template *t)
{
    struct snap_list *l = arg;
    if (strcmp(t->kind, "snapshot") != 0 || strcmp(t->owner, l->owner) != 0 ||
        strcmp(t->status, "ready") != 0)
        return;
    if ((l->sandbox[0] && strcmp(t->parent, l->sandbox) != 0) ||
        (l->name[0] && strcmp(t->name, l->name) != 0) ||
        (l->after[0] && strcmp(t->name, l->after) <= 0))
        return;
    if (l->shown == l->limit) {
        l->more = 1;
        return;
    }
    snapshot_info(l->g, t->name);
    snprintf(l->last, sizeof(l->last), "%s", t->name);
    l->shown++;
}

/* GET /snapshots ?sandboxID ?name ?limit ?nextToken: the key's snapshots by name, one page. */
int api_e2b_snapshots_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae)
{
    char sandbox[64], name[128], after[128], lim[16];
    struct snap_list l;

    (void)ra;
    memset(&l, 0, sizeof(l));
    if (nb_http_query(r, "sandboxID", sandbox, sizeof(sandbox)) != 0)
        sandbox[0] = '\0';
    if (nb_http_query(r, "name", name, sizeof(name)) != 0)
        name[0] = '\0';
    if (nb_http_query(r, "nextToken", after, sizeof(after)) != 0)
        after[0] = '\0';
    l.limit = SNAP_LIST_MAX;
    if (nb_http_query(r, "limit", lim, sizeof(lim)) == 0) {
        char *end;
        long n = strtol(lim, &end, 10);
        if (*lim == '\0' || *end != '\0' || n < 1 || n > SNAP_LIST_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "limit must be between 1 and %d",
                          SNAP_LIST_MAX);
            return NB_ERR;
        }
        l.limit = (unsigned)n;
    }
    l.owner = nb_template_owner(nb_http_key(r)->name);
    l.sandbox = sandbox;
    l.name = name;
    l.after = after;
    l.g = nb_json_gen();
    yajl_gen_array_open(l.g);
    if (nb_template_list(a, nb_http_key(r)->name, snap_cb, &l, ae) != 0) {
        yajl_gen_free(l.g);
        return NB_ERR;
    }
    yajl_gen_array_close(l.g);
    if (l.more)
        nb_http_add_header(r, "X-Next-Token", l.last);
    nb_http_json(r, 200, l.g);
    yajl_gen_free(l.g);
    return NB_OK;
}
