/*
 * volreg.c - see volreg.h. The workers use the sandbox registry's etcd
 * handle (registry.h); the member its own. A volume's create costs two
 * etcd calls (a read of the owner's rows and guard, then the claim under
 * them), a removal two, a find or a list one read of the owner's rows
 * (a handful: the quotas bound them).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"
#include "volreg.h"

#define VOLREG_TRIES 8     /* claims of one create when others of its owner come between */
#define VOLREG_YOUNG_S 60  /* a row claimed this recently may be a create still at work */
#define VOLREG_KEY_MAX 320 /* prefix, owner (32), node (32), name (63) */
/* a node is gone this long at least before its rows go, whatever
 * volume_orphan_after says: the collector's view of the nodes up is the
 * member's last read of the records (every 5 s), and a node that has just
 * come back must not be taken for gone */
#define VOLREG_GONE_MIN_S 10

int nb_volreg_on(const struct nb_app *a)
{
    return a->conf.etcd_endpoints[0] != '\0' && a->conf.node_name[0] != '\0';
}

static void rows_key(const struct nb_app *a, const char *owner, char *out, size_t len)
{
    snprintf(out, len, "%svolumes/%s/", a->conf.etcd_prefix, owner);
}

static void row_key(const struct nb_app *a, const char *owner, const char *name, char *out,
                    size_t len)
{
    snprintf(out, len, "%svolumes/%s/%s", a->conf.etcd_prefix, owner, name);
}

static void marks_key(const struct nb_app *a, char *out, size_t len)
{
    snprintf(out, len, "%svolnode/%s/", a->conf.etcd_prefix, a->conf.node_name);
}

static void mark_key(const struct nb_app *a, const char *owner, const char *name, char *out,
                     size_t len)
{
    snprintf(out, len, "%svolnode/%s/%s/%s", a->conf.etcd_prefix, a->conf.node_name, owner, name);
}

static void guard_key(const struct nb_app *a, const char *owner, char *out, size_t len)
{
    snprintf(out, len, "%svolowners/%s", a->conf.etcd_prefix, owner);
}

/* v's row, on this node (malloc'd JSON text). */
static char *row_json(const struct nb_app *a, const struct nb_volume *v)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", v->name);
    nb_json_kv_str(g, "id", v->id);
    nb_json_kv_str(g, "owner", v->owner);
    nb_json_kv_str(g, "node", a->conf.node_name);
    nb_json_kv_int(g, "size", (long long)v->size);
    nb_json_kv_int(g, "created", v->created);
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/* A row back into a volume (node_up not set): 0, or -1 for one it cannot read. */
static int row_parse(const char *text, size_t len, struct nb_volume *v)
{
    static const char *const keys[] = {"name", "id", "owner", "node"};
    char *const dst[] = {v->name, v->id, v->owner, v->node};
    const size_t cap[] = {sizeof(v->name), sizeof(v->id), sizeof(v->owner), sizeof(v->node)};
    const char *path[] = {NULL, NULL};
    char err[64];
    yajl_val root = NULL, x;

    memset(v, 0, sizeof(*v));
    if (nb_json_parse(text, len, 4, &root, err, sizeof(err)) != 0 || !YAJL_IS_OBJECT(root)) {
        yajl_tree_free(root);
        return -1;
    }
    for (size_t i = 0; i < 4; i++) {
        path[0] = keys[i];
        x = yajl_tree_get(root, path, yajl_t_string);
        snprintf(dst[i], cap[i], "%s", x ? nb_json_string(x) : "");
    }
    path[0] = "size";
    x = yajl_tree_get(root, path, yajl_t_number);
    v->size =
        x && YAJL_IS_INTEGER(x) && YAJL_GET_INTEGER(x) > 0 ? (uint64_t)YAJL_GET_INTEGER(x) : 0;
    path[0] = "created";
    x = yajl_tree_get(root, path, yajl_t_number);
    v->created = x && YAJL_IS_INTEGER(x) ? YAJL_GET_INTEGER(x) : 0;
    yajl_tree_free(root);
    return v->name[0] && v->node[0] ? 0 : -1;
}

static int cluster_down(struct nb_apierr *ae, const char *why)
{
    nb_apierr_set(ae, NB_E_UNAVAILABLE, "cluster_unavailable",
                  "the cluster cannot take this now (%s); existing volumes and sandboxes keep "
                  "working",
                  why);
    return -1;
}

static uint32_t member_state(void)
{
    return nb_metrics != NULL ? __atomic_load_n(&nb_metrics->cluster.state, __ATOMIC_RELAXED)
                              : NB_MEMBER_JOINED;
}

/* The worker's etcd handle, if this node can write to the cluster now: else -1 with ae. */
static struct nb_etcd *writable(struct nb_app *a, struct nb_apierr *ae)
{
    struct nb_etcd *e;
    uint32_t st = member_state();
    if (st == NB_MEMBER_UNREACHABLE) {
        cluster_down(ae, "etcd does not answer");
        return NULL;
    }
    if (st == NB_MEMBER_CONFLICT) {
        cluster_down(ae, "this node's name is another node's");
        return NULL;
    }
    if ((e = nb_registry_etcd(a)) == NULL)
        cluster_down(ae, "no etcd client");
    return e;
}

/* Is node in the member's last read of the records? (This node always is.) */
static int up_in(const struct nb_app *a, const struct nb_mcluster *view, const char *node)
{
    if (!strcmp(node, a->conf.node_name))
        return 1;
    if (view == NULL)
        return 0;
    for (uint32_t i = 0; i < view->nodes_seen && i < NB_METRICS_NODES; i++)
        if (!strcmp(view->node[i].name, node))
            return 1;
    return 0;
}

static struct nb_mcluster *view_copy(void)
{
    struct nb_mcluster *view = malloc(sizeof(*view));
    if (view != NULL && nb_metrics_nodes_copy(view) != 0) {
        free(view);
        view = NULL;
    }
    return view;
}

void nb_volreg_here(const struct nb_app *a, struct nb_volume *v)
{
    if (!nb_volreg_on(a))
        return;
    snprintf(v->node, sizeof(v->node), "%s", a->conf.node_name);
    v->node_up = 1;
}

/* ---- the claim of a create ---- */

struct claim_read {
    const struct nb_app *a;
    const char *name;
    size_t count;    /* owner's volumes on the other nodes */
    uint64_t bytes;  /* ... and their sizes */
    int64_t row_rev; /* the name's row: its mod revision (0: absent) */
    char row_node[NB_NODE_NAME_MAX + 1];
    int64_t guard;
};

static int claim_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct claim_read *cr = arg;
    struct nb_volume v;
    if (row_parse(kv->value, kv->value_len, &v) != 0)
        return 0;
    if (!strcmp(v.name, cr->name)) {
        cr->row_rev = kv->mod_revision;
        snprintf(cr->row_node, sizeof(cr->row_node), "%s", v.node);
    }
    /* this node's own are counted from Docker, where they are exact */
    if (strcmp(v.node, cr->a->conf.node_name) != 0) {
        cr->count++;
        cr->bytes += v.size;
    }
    return 0;
}

static int take_rev(void *arg, const struct nb_etcd_kv *kv)
{
    *(int64_t *)arg = kv->mod_revision;
    return 0;
}

int nb_volreg_claim(struct nb_app *a, const struct nb_key *key, const struct nb_volume *v,
                    size_t n_here, uint64_t held_here, nb_volreg_quota_fn quota,
                    struct nb_apierr *ae)
{
    char rows[VOLREG_KEY_MAX], row[VOLREG_KEY_MAX], mark[VOLREG_KEY_MAX], guard[VOLREG_KEY_MAX];
    struct nb_etcd *e;
    char *text;
    int rc = -1;

    if (!nb_volreg_on(a))
        return 0;
    if ((e = writable(a, ae)) == NULL)
        return -1;
    rows_key(a, v->owner, rows, sizeof(rows));
    row_key(a, v->owner, v->name, row, sizeof(row));
    mark_key(a, v->owner, v->name, mark, sizeof(mark));
    guard_key(a, v->owner, guard, sizeof(guard));
    text = row_json(a, v);
    for (int tries = 0; tries < VOLREG_TRIES; tries++) {
        struct claim_read cr = {.a = a, .name = v->name};
        struct nb_etcd_op rd[2] = {
            {.kind = NB_ETCD_RANGE, .key = guard, .fn = take_rev, .arg = &cr.guard},
            {.kind = NB_ETCD_RANGE, .key = rows, .prefix = 1, .fn = claim_row, .arg = &cr},
        };
        struct nb_etcd_cmp cmp[2];
        struct nb_etcd_op w[3] = {
            {.kind = NB_ETCD_PUT, .key = row, .value = text, .value_len = strlen(text)},
            {.kind = NB_ETCD_PUT, .key = mark, .value = v->id, .value_len = strlen(v->id)},
            {.kind = NB_ETCD_PUT, .key = guard, .value = v->name, .value_len = strlen(v->name)},
        };
        int t;

        if (nb_etcd_txn(e, NULL, 0, rd, 2, NULL, 0) < 0) {
            nb_warn("volreg: cannot read the volumes of %s: %s", v->owner, e->err);
            cluster_down(ae, "etcd does not answer");
            goto out;
        }
        /* a row of this node's is one left from before (the member takes
         * such out): the create takes it over */
        if (cr.row_rev != 0 && strcmp(cr.row_node, a->conf.node_name) != 0) {
            nb_apierr_set(ae, NB_E_EXISTS, "exists", "volume \"%s\" exists (on node %s)", v->name,
                          cr.row_node);
            goto out;
        }
        if (quota(&a->conf, key, n_here + cr.count, held_here + cr.bytes, v->size, ae) != 0)
            goto out;
        cmp[0] = (struct nb_etcd_cmp){row, cr.row_rev ? NB_ETCD_MOD : NB_ETCD_CREATE, cr.row_rev};
        cmp[1] = (struct nb_etcd_cmp){guard, NB_ETCD_MOD, cr.guard};
        t = nb_etcd_txn(e, cmp, 2, w, 3, NULL, 0);
        if (t < 0) {
            nb_warn("volreg: cannot claim volume %s of %s: %s", v->name, v->owner, e->err);
            cluster_down(ae, "etcd does not answer");
            goto out;
        }
        if (t == 1) {
            rc = 0;
            goto out;
        }
        /* another create (or removal) of the owner's came between: again */
    }
    cluster_down(ae, "too many creates of the key's volumes at once");
out:
    free(text);
    return rc;
}

/* ---- reads ---- */

struct row_get {
    struct nb_volume v;
    int64_t rev; /* 0: none */
};

static int one_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct row_get *g = arg;
    if (row_parse(kv->value, kv->value_len, &g->v) == 0)
        g->rev = kv->mod_revision;
    return 0;
}

/* Take out the row of owner's name if it is this node's, and this node's
 * mark of it; 0 or -1 (etcd did not answer). */
static int forget_in(struct nb_app *a, struct nb_etcd *e, const char *owner, const char *name)
{
    char row[VOLREG_KEY_MAX], mark[VOLREG_KEY_MAX];
    struct row_get g = {0};
    struct nb_etcd_op del[2] = {{.kind = NB_ETCD_DEL, .key = mark},
                                {.kind = NB_ETCD_DEL, .key = row}};
    struct nb_etcd_cmp cmp = {row, NB_ETCD_MOD, 0};

    row_key(a, owner, name, row, sizeof(row));
    mark_key(a, owner, name, mark, sizeof(mark));
    if (nb_etcd_get(e, row, 0, one_row, &g) < 0)
        return -1;
    if (g.rev == 0 || strcmp(g.v.node, a->conf.node_name) != 0) /* another node's: leave it */
        return nb_etcd_delete(e, mark);
    cmp.value = g.rev;
    return nb_etcd_txn(e, &cmp, 1, del, 2, NULL, 0) < 0 ? -1 : 0;
}

void nb_volreg_forget(struct nb_app *a, const char *owner, const char *name)
{
    struct nb_etcd *e;
    if (!nb_volreg_on(a) || (e = nb_registry_etcd(a)) == NULL)
        return;
    if (forget_in(a, e, owner, name) != 0)
        nb_warn("volreg: cannot take out volume %s of %s (the member will): %s", name, owner,
                e->err);
}

/* A read of owner's rows, each passed to fn; 0 or -1. */
static int read_rows(struct nb_app *a, const char *owner, nb_etcd_kv_fn fn, void *arg)
{
    char rows[VOLREG_KEY_MAX];
    struct nb_etcd *e = nb_registry_etcd(a);
    struct nb_etcd_op op = {.kind = NB_ETCD_RANGE,
                            .key = rows,
                            .prefix = 1,
                            .serializable = member_state() == NB_MEMBER_UNREACHABLE,
                            .fn = fn,
                            .arg = arg};
    if (e == NULL)
        return -1;
    rows_key(a, owner, rows, sizeof(rows));
    if (nb_etcd_range(e, &op) != 0) {
        nb_warn("volreg: cannot read the volumes of %s: %s", owner, e->err);
        return -1;
    }
    return 0;
}

struct find {
    const char *key;
    struct nb_volume *out;
    int found; /* 2 by name, 1 by id */
};

static int find_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct find *f = arg;
    struct nb_volume v;
    if (row_parse(kv->value, kv->value_len, &v) != 0)
        return 0;
    if (!strcmp(v.name, f->key) || (f->found < 1 && !strcmp(v.id, f->key))) {
        f->found = !strcmp(v.name, f->key) ? 2 : 1;
        *f->out = v;
    }
    return f->found == 2;
}

int nb_volreg_find(struct nb_app *a, const char *owner, const char *key, struct nb_volume *out)
{
    struct find f = {key, out, 0};
    struct nb_mcluster *view;
    if (!nb_volreg_on(a))
        return 0;
    if (read_rows(a, owner, find_row, &f) != 0)
        return -1;
    if (!f.found)
        return 0;
    view = view_copy();
    out->node_up = up_in(a, view, out->node);
    free(view);
    return 1;
}

struct nodes_read {
    const char (*names)[NB_VOLUME_NAME_MAX + 1];
    unsigned n;
    char (*node)[NB_NODE_NAME_MAX + 1];
};

static int node_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct nodes_read *nr = arg;
    struct nb_volume v;
    if (row_parse(kv->value, kv->value_len, &v) != 0)
        return 0;
    for (unsigned i = 0; i < nr->n; i++)
        if (!strcmp(nr->names[i], v.name) || !strcmp(nr->names[i], v.id)) /* a name, or an id */
            snprintf(nr->node[i], sizeof(nr->node[0]), "%s", v.node);
    return 0;
}

int nb_volreg_nodes(struct nb_app *a, const char *owner,
                    const char (*names)[NB_VOLUME_NAME_MAX + 1], unsigned n,
                    char (*node)[NB_NODE_NAME_MAX + 1], int *up, struct nb_apierr *ae)
{
    struct nodes_read nr = {names, n, node};
    struct nb_mcluster *view;
    for (unsigned i = 0; i < n; i++)
        node[i][0] = '\0', up[i] = 0;
    if (!nb_volreg_on(a) || n == 0)
        return 0;
    /* a create needs the cluster as any create does */
    if (writable(a, ae) == NULL)
        return -1;
    if (read_rows(a, owner, node_row, &nr) != 0)
        return cluster_down(ae, "etcd does not answer");
    view = view_copy();
    for (unsigned i = 0; i < n; i++)
        up[i] = node[i][0] != '\0' && up_in(a, view, node[i]);
    free(view);
    return 0;
}

struct list_read {
    struct nb_app *a;
    struct nb_volume **v;
    size_t *n, cap;
    struct nb_mcluster *view;
};

static int list_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct list_read *lr = arg;
    struct nb_volume v;
    if (row_parse(kv->value, kv->value_len, &v) != 0 || !strcmp(v.node, lr->a->conf.node_name))
        return 0; /* this node's: from Docker */
    if (*lr->n == lr->cap) {
        size_t cap = lr->cap ? lr->cap * 2 : 16;
        struct nb_volume *nv = realloc(*lr->v, cap * sizeof(*nv));
        if (nv == NULL)
            return 1;
        *lr->v = nv;
        lr->cap = cap;
    }
    v.node_up = up_in(lr->a, lr->view, v.node);
    (*lr->v)[(*lr->n)++] = v;
    return 0;
}

int nb_volreg_list(struct nb_app *a, const char *owner, nb_volreg_list_fn list,
                   struct nb_volume **out, size_t *n, int *partial, struct nb_apierr *ae)
{
    struct list_read lr = {a, out, n, 0, NULL};
    *partial = 0;
    if (list(a, owner, out, n, ae) != 0)
        return -1;
    lr.cap = *n;
    for (size_t i = 0; i < *n; i++)
        nb_volreg_here(a, &(*out)[i]);
    if (!nb_volreg_on(a))
        return 0;
    lr.view = view_copy();
    if (read_rows(a, owner, list_row, &lr) != 0)
        *partial = 1;
    free(lr.view);
    return 0;
}

/* ---- the member's round ---- */

struct mark {
    char owner[NB_KEY_NAME_MAX + 1];
    char name[NB_VOLUME_NAME_MAX + 1];
    char id[NB_VOLUME_ID_LEN + 1];
};

struct marks_read {
    size_t skip; /* the prefix's length */
    struct mark *m;
    size_t n, cap;
};

static int add_mark(void *arg, const struct nb_etcd_kv *kv)
{
    struct marks_read *mr = arg;
    const char *rest = kv->key + mr->skip, *slash;
    size_t len = kv->key_len - mr->skip;
    struct mark *m;

    if (kv->key_len <= mr->skip || (slash = memchr(rest, '/', len)) == NULL)
        return 0;
    if (mr->n == mr->cap) {
        size_t cap = mr->cap ? mr->cap * 2 : 32;
        struct mark *nm = realloc(mr->m, cap * sizeof(*nm));
        if (nm == NULL)
            return 1;
        mr->m = nm;
        mr->cap = cap;
    }
    m = &mr->m[mr->n++];
    snprintf(m->owner, sizeof(m->owner), "%.*s", (int)(slash - rest), rest);
    snprintf(m->name, sizeof(m->name), "%.*s", (int)(len - (size_t)(slash - rest) - 1), slash + 1);
    snprintf(m->id, sizeof(m->id), "%.*s", (int)kv->value_len, kv->value);
    return 0;
}

/* Is this the first time v's name is found another node's? (The member's
 * memory: a few volumes at most are in that state.) */
static int first_conflict(const struct nb_volume *v)
{
    static uint64_t said[64];
    static unsigned n;
    char who[NB_KEY_NAME_MAX + NB_VOLUME_NAME_MAX + NB_VOLUME_ID_LEN + 4];
    uint64_t h;

    snprintf(who, sizeof(who), "%s/%s/%s", v->owner, v->name, v->id);
    h = nb_registry_hash(who, strlen(who));
    for (unsigned i = 0; i < n && i < 64; i++)
        if (said[i] == h)
            return 0;
    said[n++ % 64] = h;
    return 1;
}

/* Put v's row back (v is this node's and has no mark): 1 put, 0 the name is
 * another node's, -1 etcd did not answer. */
static int put_back(struct nb_app *a, struct nb_etcd *e, const struct nb_volume *v)
{
    char row[VOLREG_KEY_MAX], mark[VOLREG_KEY_MAX];
    struct row_get g = {0};
    char *text = row_json(a, v);
    struct nb_etcd_op w[2] = {
        {.kind = NB_ETCD_PUT, .key = row, .value = text, .value_len = strlen(text)},
        {.kind = NB_ETCD_PUT, .key = mark, .value = v->id, .value_len = strlen(v->id)},
    };
    struct nb_etcd_cmp cmp = {row, NB_ETCD_CREATE, 0};
    int rc;

    row_key(a, v->owner, v->name, row, sizeof(row));
    mark_key(a, v->owner, v->name, mark, sizeof(mark));
    if (nb_etcd_get(e, row, 0, one_row, &g) < 0) {
        free(text);
        return -1;
    }
    if (g.rev != 0 && strcmp(g.v.node, a->conf.node_name) != 0) {
        /* never clobbered: the name went to that node while this one was
         * away (its rows collected); said once per volume, each round
         * would say it again */
        if (first_conflict(v))
            nb_warn("volreg: volume %s of %s (id %s) is here and on node %s: the cluster's "
                    "name is that node's; this one keeps its volume, reached here by its id",
                    v->name, v->owner, v->id, g.v.node);
        free(text);
        return 0;
    }
    if (g.rev != 0)
        cmp = (struct nb_etcd_cmp){row, NB_ETCD_MOD, g.rev};
    rc = nb_etcd_txn(e, &cmp, 1, w, 2, NULL, 0);
    free(text);
    return rc < 0 ? -1 : rc;
}

/* The mark's volume is not here: its row out, unless it is young (a create
 * at work) or another node's. 1 taken out, 0 left, -1 no answer. */
static int take_out(struct nb_app *a, struct nb_etcd *e, const struct mark *m)
{
    char row[VOLREG_KEY_MAX];
    struct row_get g = {0};
    row_key(a, m->owner, m->name, row, sizeof(row));
    if (nb_etcd_get(e, row, 0, one_row, &g) < 0)
        return -1;
    if (g.rev != 0 && !strcmp(g.v.node, a->conf.node_name) &&
        g.v.created > (int64_t)time(NULL) - VOLREG_YOUNG_S)
        return 0;
    nb_info("volreg: volume %s of %s is no longer on this node: its row taken out", m->name,
            m->owner);
    return forget_in(a, e, m->owner, m->name) < 0 ? -1 : 1;
}

int nb_volreg_sync(struct nb_app *a, struct nb_etcd *e, nb_volreg_list_fn list)
{
    char marks[VOLREG_KEY_MAX];
    struct marks_read mr = {0};
    struct nb_volume *v = NULL;
    struct nb_apierr ae;
    size_t n = 0;
    int changed = 0, rc;

    if (!nb_volreg_on(a))
        return 0;
    /* the index before the volumes: a volume made in between has its mark
     * already (its create claims it first), one removed is gone from both */
    marks_key(a, marks, sizeof(marks));
    mr.skip = strlen(marks);
    if (nb_etcd_get(e, marks, 1, add_mark, &mr) < 0) {
        free(mr.m);
        return -1;
    }
    memset(&ae, 0, sizeof(ae));
    if (list(a, NULL, &v, &n, &ae) != 0) {
        free(mr.m);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int marked = 0;
        for (size_t j = 0; j < mr.n && !marked; j++)
            marked = !strcmp(mr.m[j].owner, v[i].owner) && !strcmp(mr.m[j].name, v[i].name) &&
                     !strcmp(mr.m[j].id, v[i].id);
        if (marked || !v[i].owner[0])
            continue;
        if ((rc = put_back(a, e, &v[i])) < 0)
            goto fail;
        changed += rc;
    }
    /* (a mark of an older volume of the same name was put right above) */
    for (size_t j = 0; j < mr.n; j++) {
        int here = 0;
        for (size_t i = 0; i < n && !here; i++)
            here = !strcmp(mr.m[j].owner, v[i].owner) && !strcmp(mr.m[j].name, v[i].name);
        if (here)
            continue;
        if ((rc = take_out(a, e, &mr.m[j])) < 0)
            goto fail;
        changed += rc;
    }
    free(v);
    free(mr.m);
    return changed;
fail:
    free(v);
    free(mr.m);
    return -1;
}

/* ---- the collector of gone nodes' rows ---- */

struct names_read {
    char (*name)[NB_NODE_NAME_MAX + 1];
    int64_t *since; /* gone/: the second first seen gone; tags/: unused */
    size_t n, cap, skip;
};

/* tags/<tag> = name (the value), or gone/<name> = since (the key) */
static int add_name(void *arg, const char *name, size_t len, int64_t since)
{
    struct names_read *nr = arg;
    if (len == 0 || len > NB_NODE_NAME_MAX)
        return 0;
    if (nr->n == nr->cap) {
        size_t cap = nr->cap ? nr->cap * 2 : 16;
        char(*nn)[NB_NODE_NAME_MAX + 1] = realloc(nr->name, cap * sizeof(*nn));
        int64_t *ns = nn ? realloc(nr->since, cap * sizeof(*ns)) : NULL;
        if (nn != NULL)
            nr->name = nn;
        if (ns == NULL)
            return 1;
        nr->since = ns;
        nr->cap = cap;
    }
    snprintf(nr->name[nr->n], sizeof(nr->name[0]), "%.*s", (int)len, name);
    nr->since[nr->n++] = since;
    return 0;
}

static int add_tag_name(void *arg, const struct nb_etcd_kv *kv)
{
    return add_name(arg, kv->value, kv->value_len, 0);
}

static int add_gone(void *arg, const struct nb_etcd_kv *kv)
{
    struct names_read *nr = arg;
    char num[24];
    if (kv->key_len <= nr->skip)
        return 0;
    snprintf(num, sizeof(num), "%.*s", (int)(kv->value_len < 23 ? kv->value_len : 23), kv->value);
    return add_name(arg, kv->key + nr->skip, kv->key_len - nr->skip, strtoll(num, NULL, 10));
}

/* Is node this one, or one of up[0..n_up-1]? */
static int node_up(const struct nb_app *a, const char (*up)[33], unsigned n_up, const char *node)
{
    int live = !strcmp(node, a->conf.node_name);
    for (unsigned i = 0; i < n_up && !live; i++)
        live = !strcmp(up[i], node);
    return live;
}

static void gone_key(const struct nb_app *a, const char *node, char *out, size_t len)
{
    snprintf(out, len, "%sgone/%s", a->conf.etcd_prefix, node);
}

/* Every row gone node still has, and its index, out. The rows taken out, or -1. */
static int collect_node(struct nb_app *a, struct nb_etcd *e, const char *node)
{
    char marks[VOLREG_KEY_MAX];
    struct marks_read mr = {0};
    int dropped = 0;

    snprintf(marks, sizeof(marks), "%svolnode/%s/", a->conf.etcd_prefix, node);
    mr.skip = strlen(marks);
    if (nb_etcd_get(e, marks, 1, add_mark, &mr) < 0) {
        free(mr.m);
        return -1;
    }
    for (size_t j = 0; j < mr.n; j++) {
        char row[VOLREG_KEY_MAX], mark[VOLREG_KEY_MAX];
        struct row_get g = {0};
        struct nb_etcd_op del[2] = {{.kind = NB_ETCD_DEL, .key = mark},
                                    {.kind = NB_ETCD_DEL, .key = row}};
        struct nb_etcd_cmp cmp = {row, NB_ETCD_MOD, 0};
        int t;

        row_key(a, mr.m[j].owner, mr.m[j].name, row, sizeof(row));
        snprintf(mark, sizeof(mark), "%s%s/%s", marks, mr.m[j].owner, mr.m[j].name);
        if (nb_etcd_get(e, row, 0, one_row, &g) < 0)
            goto fail;
        /* a row another node holds now (or none): only the stale mark goes */
        if (g.rev == 0 || strcmp(g.v.node, node) != 0) {
            if (nb_etcd_delete(e, mark) != 0)
                goto fail;
            continue;
        }
        cmp.value = g.rev;
        if ((t = nb_etcd_txn(e, &cmp, 1, del, 2, NULL, 0)) < 0)
            goto fail;
        dropped += t;
    }
    free(mr.m);
    return dropped;
fail:
    free(mr.m);
    return -1;
}

int nb_volreg_collect(struct nb_app *a, struct nb_etcd *e, const char (*up)[33], unsigned n_up)
{
    char prefix[VOLREG_KEY_MAX], key[VOLREG_KEY_MAX];
    struct names_read tags = {0}, gone = {0};
    int64_t now = (int64_t)time(NULL), after = (int64_t)a->conf.volume_orphan_after;
    int total = 0, rc = 0;

    if (!nb_volreg_on(a) || after == 0)
        return 0;
    if (after < VOLREG_GONE_MIN_S)
        after = VOLREG_GONE_MIN_S;
    snprintf(prefix, sizeof(prefix), "%stags/", a->conf.etcd_prefix);
    if (nb_etcd_get(e, prefix, 1, add_tag_name, &tags) < 0)
        return -1;
    snprintf(prefix, sizeof(prefix), "%sgone/", a->conf.etcd_prefix);
    gone.skip = strlen(prefix);
    if (nb_etcd_get(e, prefix, 1, add_gone, &gone) < 0) {
        rc = -1;
        goto out;
    }
    /* an up node's gone/ key (its own take-out at its join failed) */
    for (size_t g = 0; g < gone.n && rc == 0; g++) {
        gone_key(a, gone.name[g], key, sizeof(key));
        if (node_up(a, up, n_up, gone.name[g]) && nb_etcd_delete(e, key) != 0)
            rc = -1;
    }
    for (size_t t = 0; t < tags.n && rc == 0; t++) {
        const char *node = tags.name[t];
        int seen = 0;
        int64_t since = 0;
        if (node_up(a, up, n_up, node))
            continue;
        for (size_t g = 0; g < gone.n && !seen; g++)
            if (!strcmp(gone.name[g], node))
                seen = 1, since = gone.since[g];
        if (!seen) {
            /* first seen gone now (only if absent: a collector that came
             * before has the earlier time) */
            char num[24];
            gone_key(a, node, key, sizeof(key));
            snprintf(num, sizeof(num), "%lld", (long long)now);
            if (nb_etcd_create(e, key, num, strlen(num), 0, NULL, NULL) < 0)
                rc = -1;
            continue;
        }
        if (now - since < after)
            continue;
        {
            int n = collect_node(a, e, node);
            if (n < 0) {
                rc = -1;
            } else if (n > 0) {
                nb_info("volreg: node %s is gone since %lld (%lld s, volume_orphan_after %lld): "
                        "its %d volume rows taken out, their names free",
                        node, (long long)since, (long long)(now - since), (long long)after, n);
                total += n;
            }
        }
    }
out:
    free(tags.name);
    free(tags.since);
    free(gone.name);
    free(gone.since);
    return rc < 0 ? -1 : total;
}

int nb_volreg_back(struct nb_app *a, struct nb_etcd *e)
{
    char key[VOLREG_KEY_MAX];
    if (!nb_volreg_on(a))
        return 0;
    gone_key(a, a->conf.node_name, key, sizeof(key));
    return nb_etcd_delete(e, key);
}
