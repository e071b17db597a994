/*
 * registry.c - see registry.h.
 *
 * Each worker keeps its own etcd handle (its connection kept between
 * calls). A create costs one etcd transaction, or two for a key with
 * quotas (a read of what it holds elsewhere, then the put under the
 * guard); a destroy one; a list one read (of any member's copy while
 * etcd has no quorum, so a list still answers then).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "etcd.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"

#define REG_TIMEOUT_MS 1000      /* one try of one endpoint */
#define REG_RESPONSE (64u << 20) /* bytes of one answer: ~80,000 rows */
#define REG_PAGE 1000            /* rows of one read of a list (~600 KB) */

static struct nb_etcd reg_etcd;
static int reg_ready;

static int on(const struct nb_app *a)
{
    return a->conf.etcd_endpoints[0] != '\0' && a->node_tag[0] != '\0';
}

static struct nb_etcd *etcd_of(struct nb_app *a)
{
    if (!reg_ready) {
        if (nb_etcd_init_conf(&reg_etcd, &a->conf, REG_TIMEOUT_MS, REG_RESPONSE) != 0) {
            nb_warn("registry: %s", reg_etcd.err);
            nb_etcd_cleanup(&reg_etcd);
            return NULL;
        }
        reg_ready = 1;
    }
    return &reg_etcd;
}

struct nb_etcd *nb_registry_etcd(struct nb_app *a)
{
    return on(a) ? etcd_of(a) : NULL;
}

static int unavailable(struct nb_apierr *ae, const char *why)
{
    nb_apierr_set(ae, NB_E_UNAVAILABLE, "cluster_unavailable",
                  "the cluster cannot take new sandboxes now (%s); existing ones keep working",
                  why);
    return -1;
}

/* Is a row's sandbox still live at now (its TTL, or its pause's, not over)? */
static int row_live(const struct nb_slot *s, int64_t now)
{
    return s->state == NB_SLOT_PAUSED ? s->pause_expires > now : s->expires > now;
}

/* The key's rows on other nodes, summed into a usage. */
struct usage_read {
    struct nb_app *a;
    int64_t now;
    struct nb_table_usage *u;
};

static int add_usage(void *arg, const struct nb_etcd_kv *kv)
{
    struct usage_read *ur = arg;
    struct nb_slot s;
    char node[NB_REG_NODE_MAX], tag[NB_NODE_TAG_LEN + 1];
    unsigned ports = 0;
    if (nb_registry_row_parse_ports(kv->value, kv->value_len, &s, node, &ports) != 0 ||
        !row_live(&s, ur->now))
        return 0;
    /* this node's own are counted from its table, where they are exact */
    if (nb_cluster_id_tag(s.id, tag) && !strcmp(tag, ur->a->node_tag))
        return 0;
    ur->u->sandboxes++;
    ur->u->memory += s.memory;
    ur->u->nano_cpus += s.nano_cpus;
    ur->u->ports += ports;
    return 0;
}

static int take_guard(void *arg, const struct nb_etcd_kv *kv)
{
    *(int64_t *)arg = kv->mod_revision;
    return 0;
}

/* The two reads of what a key holds elsewhere (as txn ops), filled from c. */
static void usage_ops(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                      struct usage_read *ur, char *gkey, char *rkey, struct nb_etcd_op ops[2])
{
    nb_registry_guard_key(a->conf.etcd_prefix, k->name, gkey, NB_REG_KEY_MAX);
    nb_registry_rows_key(a->conf.etcd_prefix, k->name, rkey, NB_REG_KEY_MAX);
    memset(&c->elsewhere, 0, sizeof(c->elsewhere));
    c->guard = 0;
    ur->a = a;
    ur->now = nb_clock_real_s();
    ur->u = &c->elsewhere;
    memset(ops, 0, 2 * sizeof(ops[0]));
    ops[0].kind = NB_ETCD_RANGE;
    ops[0].key = gkey;
    ops[0].fn = take_guard;
    ops[0].arg = &c->guard;
    ops[1].kind = NB_ETCD_RANGE;
    ops[1].key = rkey;
    ops[1].prefix = 1;
    ops[1].fn = add_usage;
    ops[1].arg = ur;
}

/* A create's (or a port's) read before: what k holds elsewhere, when guarded. */
static int before(struct nb_app *a, const struct nb_key *k, int guarded,
                  struct nb_registry_claim *c, struct nb_apierr *ae)
{
    char gkey[NB_REG_KEY_MAX], rkey[NB_REG_KEY_MAX];
    struct nb_etcd_op ops[2];
    struct usage_read ur;
    struct nb_etcd *e;
    uint32_t st;

    memset(c, 0, sizeof(*c));
    if (!on(a))
        return 0;
    c->on = 1;
    st = nb_metrics != NULL ? __atomic_load_n(&nb_metrics->cluster.state, __ATOMIC_RELAXED)
                            : NB_MEMBER_JOINED;
    if (st == NB_MEMBER_UNREACHABLE)
        return unavailable(ae, "etcd does not answer");
    if (st == NB_MEMBER_CONFLICT)
        return unavailable(ae, "this node's name is another node's");
    if ((e = etcd_of(a)) == NULL)
        return unavailable(ae, "no etcd client");
    if (k == NULL || !guarded) {
        c->late_ok = k == NULL || !k->max_ports;
        return 0;
    }
    c->guarded = 1;
    usage_ops(a, k, c, &ur, gkey, rkey, ops);
    if (nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0) < 0) {
        nb_warn("registry: cannot read what key %s holds: %s", k->name, e->err);
        return unavailable(ae, "etcd does not answer");
    }
    return 0;
}

int nb_registry_before(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                       struct nb_apierr *ae)
{
    return before(a, k, k != NULL && (k->max_sandboxes || k->max_memory || k->max_nano_cpus), c,
                  ae);
}

int nb_registry_usage(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                      struct nb_apierr *ae)
{
    return before(a, k, 1, c, ae);
}

int nb_registry_after(struct nb_app *a, const struct nb_key *k, struct nb_registry_claim *c,
                      const struct nb_slot *made, struct nb_apierr *ae)
{
    char gkey[NB_REG_KEY_MAX], rows[NB_REG_KEY_MAX];
    struct nb_etcd_op ops[3], reread[2];
    struct nb_registry_ops w;
    struct nb_etcd_cmp cmp;
    struct usage_read ur;
    struct nb_etcd *e;
    int rc;

    if (!c->on)
        return 0;
    if ((e = etcd_of(a)) == NULL)
        return unavailable(ae, "no etcd client");
    nb_registry_put_ops(&w, a->conf.etcd_prefix, a->node_tag, a->conf.node_name, made, ops);
    if (!c->guarded) {
        rc = nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0);
    } else {
        /* the guard moves with every create of the key: one that came
         * between the read and now fails the compare, and the failure
         * branch reads again what the key holds */
        cmp.key = gkey;
        cmp.target = NB_ETCD_MOD;
        cmp.value = c->guard;
        usage_ops(a, k, c, &ur, gkey, rows, reread); /* (c->elsewhere and c->guard reset) */
        memset(&ops[2], 0, sizeof(ops[2]));
        ops[2].kind = NB_ETCD_PUT;
        ops[2].key = gkey;
        ops[2].value = made->id;
        ops[2].value_len = strlen(made->id);
        rc = nb_etcd_txn(e, &cmp, 1, ops, 3, reread, 2);
    }
    nb_registry_ops_free(&w);
    if (rc < 0) {
        nb_warn("registry: cannot register sandbox %s: %s", made->id, e->err);
        return unavailable(ae, "etcd does not answer");
    }
    if (rc == 0)
        return 1;
    return 0;
}

void nb_registry_late(struct nb_app *a, const struct nb_slot *made)
{
    struct nb_registry_claim c;
    struct nb_apierr ae;
    struct nb_slot *s, now;
    int live;

    /* its row as the slot is now (a port may have opened since the answer) */
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, made->id);
    live = s != NULL && s->generation == made->generation && nb_slot_live(s, nb_clock_real_s());
    if (live)
        now = *s;
    nb_table_unlock(&a->table);
    if (!live)
        return; /* destroyed before its answer went out: no row to leave */
    memset(&c, 0, sizeof(c));
    c.on = 1;
    if (nb_registry_after(a, NULL, &c, &now, &ae) != 0)
        nb_warn("registry: sandbox %s not registered yet (the member will): %s", made->id, ae.msg);
}

void nb_registry_forget(struct nb_app *a, const char *id, const char *owner)
{
    struct nb_registry_ops w;
    struct nb_etcd_op ops[2];
    struct nb_etcd *e;

    if (!on(a) || (e = etcd_of(a)) == NULL)
        return;
    nb_registry_del_ops(&w, a->conf.etcd_prefix, a->node_tag, owner, id, ops);
    if (nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0) < 0)
        nb_warn("registry: cannot take out sandbox %s (the member will): %s", id, e->err);
}

/* A list being gathered: this node's slots first, then the others' rows. */
struct list_read {
    struct nb_app *a;
    int64_t now;
    struct nb_sandbox_list *l;
    uint32_t cap;
    struct nb_mcluster *view;      /* NULL: no view of the nodes yet */
    char last[NB_REG_KEY_MAX + 1]; /* the last key read, and "\0": where the next page starts */
    size_t last_len;
    int full; /* no memory for more rows */
};

static int list_grow(struct list_read *lr)
{
    struct nb_sandbox_list *l = lr->l;
    uint32_t cap = lr->cap ? lr->cap * 2 : 64;
    void *v = realloc(l->v, (size_t)cap * sizeof(*l->v));
    if (v == NULL)
        return -1;
    l->v = v;
    v = realloc(l->node, (size_t)cap * sizeof(*l->node));
    if (v == NULL)
        return -1;
    l->node = v;
    v = realloc(l->up, cap);
    if (v == NULL)
        return -1;
    l->up = v;
    lr->cap = cap;
    return 0;
}

static int node_up(const struct list_read *lr, const char *node)
{
    if (lr->view == NULL)
        return 0;
    for (uint32_t i = 0; i < lr->view->nodes_seen && i < NB_METRICS_NODES; i++)
        if (!strcmp(lr->view->node[i].name, node))
            return 1;
    return 0;
}

static int add_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct list_read *lr = arg;
    struct nb_sandbox_list *l = lr->l;
    char tag[NB_NODE_TAG_LEN + 1];
    struct nb_slot s;
    char node[NB_REG_NODE_MAX];

    if (kv->key_len < NB_REG_KEY_MAX) {
        memcpy(lr->last, kv->key, kv->key_len);
        lr->last[kv->key_len] = '\0';
        lr->last_len = kv->key_len + 1;
    }
    if (nb_registry_row_parse(kv->value, kv->value_len, &s, node) != 0 || !row_live(&s, lr->now))
        return 0;
    if (nb_cluster_id_tag(s.id, tag) && !strcmp(tag, lr->a->node_tag))
        return 0; /* this node's: from its table */
    if (l->n == lr->cap && list_grow(lr) != 0) {
        lr->full = 1;
        return 1;
    }
    l->v[l->n] = s;
    snprintf(l->node[l->n], sizeof(l->node[0]), "%s", node);
    l->up[l->n] = (unsigned char)node_up(lr, node);
    l->n++;
    return 0;
}

void nb_registry_list(struct nb_app *a, const char *owner, int64_t now, struct nb_sandbox_list *out)
{
    struct list_read lr = {a, now, out, 0, NULL, "", 0, 0};
    char rkey[NB_REG_KEY_MAX];
    struct nb_etcd *e;

    memset(out, 0, sizeof(*out));
    out->cluster = on(a);
    if (list_grow(&lr) != 0)
        abort();
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        if (!nb_slot_live(s, now) || (owner != NULL && strcmp(s->owner, owner) != 0))
            continue;
        if (out->n == lr.cap && list_grow(&lr) != 0)
            break;
        out->v[out->n] = *s;
        snprintf(out->node[out->n], sizeof(out->node[0]), "%s", a->conf.node_name);
        out->up[out->n] = 1;
        out->n++;
    }
    nb_table_unlock(&a->table);
    if (!out->cluster)
        return;
    lr.view = malloc(sizeof(*lr.view));
    if (lr.view != NULL && nb_metrics_nodes_copy(lr.view) != 0) {
        free(lr.view);
        lr.view = NULL;
    }
    nb_registry_rows_key(a->conf.etcd_prefix, owner, rkey, sizeof(rkey));
    {
        /* a member's read sees every create answered before it; without a
         * quorum, any member's copy (which may be a moment behind) */
        uint32_t st = nb_metrics != NULL
                          ? __atomic_load_n(&nb_metrics->cluster.state, __ATOMIC_RELAXED)
                          : NB_MEMBER_JOINED;
        /* in pages of REG_PAGE rows, each from the last key of the one
         * before: one answer stays small, whatever the cluster holds */
        struct nb_etcd_op op = {.kind = NB_ETCD_RANGE,
                                .key = rkey,
                                .prefix = 1,
                                .serializable = st == NB_MEMBER_UNREACHABLE,
                                .limit = REG_PAGE,
                                .fn = add_row,
                                .arg = &lr};
        e = etcd_of(a);
        do {
            lr.last_len = 0;
            if (e == NULL || nb_etcd_range(e, &op) != 0) {
                nb_warn("registry: cannot read the sandboxes of other nodes: %s",
                        e != NULL ? e->err : "no etcd client");
                out->partial = 1;
                break;
            }
            op.from = lr.last;
            op.from_len = lr.last_len;
        } while (op.more && lr.last_len > 0 && !lr.full);
    }
    free(lr.view);
}

void nb_registry_list_free(struct nb_sandbox_list *l)
{
    free(l->v);
    free(l->node);
    free(l->up);
    memset(l, 0, sizeof(*l));
}

/* The templates' registry: what an owner's entries say, as a reserve reads them. */
struct tpl_read {
    const char *ekey; /* the entry of the name being built */
    unsigned live;    /* the owner's live entries, that one left out */
    char *prior;      /* that one's text, if it is there */
    size_t prior_len;
    int64_t prior_mod;
};

static int add_tpl(void *arg, const struct nb_etcd_kv *kv)
{
    struct tpl_read *tr = arg;
    struct nb_tpl_meta m;
    if (kv->key_len == strlen(tr->ekey) && !memcmp(kv->key, tr->ekey, kv->key_len)) {
        free(tr->prior);
        tr->prior = malloc(kv->value_len + 1);
        if (tr->prior != NULL) {
            memcpy(tr->prior, kv->value, kv->value_len);
            tr->prior_len = kv->value_len;
        }
        tr->prior_mod = kv->mod_revision;
        return 0;
    }
    if (nb_tpl_meta_parse(kv->value, kv->value_len, &m) == 0 && !m.removed)
        tr->live++;
    return 0;
}

static int tpl_on(const struct nb_app *a)
{
    return on(a) && a->conf.cluster_secret[0] != '\0';
}

/* An entry of this node's, as of now (malloc'd JSON). */
static char *entry_json(const struct nb_app *a, int removed, int recipe)
{
    struct nb_tpl_meta m;
    memset(&m, 0, sizeof(m));
    m.at = nb_clock_real_s();
    snprintf(m.node, sizeof(m.node), "%s", a->conf.node_name);
    m.removed = removed;
    m.recipe = recipe;
    return nb_tpl_meta_json(&m);
}

int nb_registry_tpl_reserve(struct nb_app *a, const char *owner, const char *name,
                            unsigned max_templates, struct nb_registry_tpl *t, struct nb_apierr *ae)
{
    char gkey[NB_REG_KEY_MAX], okey[NB_REG_KEY_MAX];
    struct nb_etcd *e;
    uint32_t st;
    char *json;

    memset(t, 0, sizeof(*t));
    if (!tpl_on(a))
        return 0;
    st = nb_metrics != NULL ? __atomic_load_n(&nb_metrics->cluster.state, __ATOMIC_RELAXED)
                            : NB_MEMBER_JOINED;
    if (st == NB_MEMBER_UNREACHABLE || st == NB_MEMBER_CONFLICT || (e = etcd_of(a)) == NULL)
        return unavailable(ae, "etcd does not answer, or this node is out of the cluster");
    nb_registry_guard_key(a->conf.etcd_prefix, owner, gkey, sizeof(gkey));
    nb_cluster_tpl_key(a->conf.etcd_prefix, "templates", owner, NULL, okey, sizeof(okey));
    nb_cluster_tpl_key(a->conf.etcd_prefix, "templates", owner, name, t->ekey, sizeof(t->ekey));
    nb_cluster_tpl_key(a->conf.etcd_prefix, "recipes", owner, name, t->rkey, sizeof(t->rkey));
    json = entry_json(a, 0, 0);
    /* a build of the key elsewhere between the read and the put moves the
     * guard (or the entry): read again, judge again */
    for (int tries = 0; tries < 8; tries++) {
        struct tpl_read tr = {t->ekey, 0, NULL, 0, 0};
        struct nb_etcd_op rd[2], wr[2];
        struct nb_etcd_cmp cmp[2];
        int64_t guard = 0;
        size_t ncmp = 0, nwr = 1;
        int rc;

        memset(rd, 0, sizeof(rd));
        rd[0].kind = NB_ETCD_RANGE;
        rd[0].key = gkey;
        rd[0].fn = take_guard;
        rd[0].arg = &guard;
        rd[1].kind = NB_ETCD_RANGE;
        rd[1].key = okey;
        rd[1].prefix = 1;
        rd[1].fn = add_tpl;
        rd[1].arg = &tr;
        if (nb_etcd_txn(e, NULL, 0, rd, 2, NULL, 0) < 0) {
            free(tr.prior);
            break;
        }
        if (max_templates && tr.live >= max_templates) {
            free(tr.prior);
            free(json);
            nb_apierr_set(ae, NB_E_LIMIT, "quota",
                          "quota max_templates=%u of key \"%s\" reached: it has %u templates",
                          max_templates, owner, tr.live);
            return -1;
        }
        cmp[ncmp].key = t->ekey;
        cmp[ncmp].target = NB_ETCD_MOD;
        cmp[ncmp++].value = tr.prior_mod;
        memset(wr, 0, sizeof(wr));
        wr[0].kind = NB_ETCD_PUT;
        wr[0].key = t->ekey;
        wr[0].value = json;
        wr[0].value_len = strlen(json);
        if (max_templates) {
            cmp[ncmp].key = gkey;
            cmp[ncmp].target = NB_ETCD_MOD;
            cmp[ncmp++].value = guard;
            wr[1].kind = NB_ETCD_PUT;
            wr[1].key = gkey;
            wr[1].value = name;
            wr[1].value_len = strlen(name);
            nwr = 2;
        }
        rc = nb_etcd_txn(e, cmp, ncmp, wr, nwr, NULL, 0);
        if (rc == 1) {
            t->on = 1;
            t->prior = tr.prior;
            t->prior_len = tr.prior_len;
            free(json);
            return 0;
        }
        free(tr.prior);
        if (rc < 0)
            break;
    }
    free(json);
    nb_warn("registry: cannot register template %s of %s: %s", name, owner, e->err);
    return unavailable(ae, "etcd does not answer");
}

void nb_registry_tpl_release(struct nb_app *a, struct nb_registry_tpl *t)
{
    struct nb_etcd *e;
    int rc;
    if (!t->on)
        return;
    t->on = 0;
    if ((e = etcd_of(a)) == NULL)
        rc = -1;
    else if (t->prior != NULL)
        rc = nb_etcd_put(e, t->ekey, t->prior, t->prior_len, 0);
    else
        rc = nb_etcd_delete(e, t->ekey);
    if (rc != 0)
        nb_warn("registry: cannot take back the entry %s: %s", t->ekey, e ? e->err : "no etcd");
    free(t->prior);
    t->prior = NULL;
}

/* A reserved entry's reservation over (its prior text let go): 0 if none was held. */
static int tpl_end(struct nb_registry_tpl *t)
{
    if (!t->on)
        return 0;
    t->on = 0;
    free(t->prior);
    t->prior = NULL;
    return 1;
}

void nb_registry_tpl_commit(struct nb_app *a, struct nb_registry_tpl *t, const char *body,
                            size_t len)
{
    struct nb_etcd_op ops[2];
    struct nb_etcd *e;
    char *json;

    if (!tpl_end(t))
        return;
    if (len > NB_TPL_RECIPE_MAX) {
        nb_warn("registry: the build request of %s is %zu bytes, over %u: not stored, so a node "
                "that joins later does not build it by itself",
                t->ekey, len, NB_TPL_RECIPE_MAX);
        return;
    }
    if ((e = etcd_of(a)) == NULL)
        return;
    json = entry_json(a, 0, 1);
    memset(ops, 0, sizeof(ops));
    ops[0].kind = NB_ETCD_PUT;
    ops[0].key = t->rkey;
    ops[0].value = body;
    ops[0].value_len = len;
    ops[1].kind = NB_ETCD_PUT;
    ops[1].key = t->ekey;
    ops[1].value = json;
    ops[1].value_len = strlen(json);
    if (nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0) < 0)
        nb_warn("registry: cannot store the recipe of %s: %s", t->ekey, e->err);
    free(json);
}

void nb_registry_tpl_removed(struct nb_app *a, const char *owner, const char *name)
{
    char ekey[NB_REG_KEY_MAX], rkey[NB_REG_KEY_MAX];
    struct nb_etcd_op ops[2];
    struct nb_etcd *e;
    char *json;

    if (!tpl_on(a) || (e = etcd_of(a)) == NULL)
        return;
    nb_cluster_tpl_key(a->conf.etcd_prefix, "templates", owner, name, ekey, sizeof(ekey));
    nb_cluster_tpl_key(a->conf.etcd_prefix, "recipes", owner, name, rkey, sizeof(rkey));
    json = entry_json(a, 1, 0);
    memset(ops, 0, sizeof(ops));
    ops[0].kind = NB_ETCD_PUT;
    ops[0].key = ekey;
    ops[0].value = json;
    ops[0].value_len = strlen(json);
    ops[1].kind = NB_ETCD_DEL;
    ops[1].key = rkey;
    if (nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0) < 0)
        nb_warn("registry: cannot record the removal of %s: %s", ekey, e->err);
    free(json);
}

void nb_registry_tpl_snapshot(struct nb_app *a, struct nb_registry_tpl *t)
{
    struct nb_tpl_meta m;
    struct nb_etcd *e;
    char *json;

    if (!tpl_end(t) || (e = etcd_of(a)) == NULL)
        return;
    memset(&m, 0, sizeof(m));
    m.at = nb_clock_real_s();
    snprintf(m.node, sizeof(m.node), "%s", a->conf.node_name);
    m.snapshot = 1;
    json = nb_tpl_meta_json(&m);
    if (nb_etcd_put(e, t->ekey, json, strlen(json), 0) != 0)
        nb_warn("registry: cannot mark %s a snapshot: %s", t->ekey, e->err);
    free(json);
}

struct meta_read {
    int snapshot; /* a live snapshot's entry only */
    char *node;
    size_t len;
    int found;
};

static int meta_node(void *arg, const struct nb_etcd_kv *kv)
{
    struct meta_read *mr = arg;
    struct nb_tpl_meta m;
    if (nb_tpl_meta_parse(kv->value, kv->value_len, &m) == 0 && m.node[0] != '\0' &&
        (!mr->snapshot || (m.snapshot && !m.removed))) {
        snprintf(mr->node, mr->len, "%s", m.node);
        mr->found = 1;
    }
    return 0;
}

int nb_registry_meta_node(struct nb_app *a, const char *key, int snapshot, char *node, size_t len)
{
    struct meta_read mr = {snapshot, node, len, 0};
    struct nb_etcd *e;
    if (!on(a) || (e = etcd_of(a)) == NULL || nb_etcd_get(e, key, 0, meta_node, &mr) < 0)
        return -1;
    return mr.found;
}

int nb_registry_snapshot_node(struct nb_app *a, const char *owner, const char *name, char *node,
                              size_t len)
{
    char ekey[NB_REG_KEY_MAX];
    if (!tpl_on(a))
        return 0;
    nb_cluster_tpl_key(a->conf.etcd_prefix, "templates", owner, name, ekey, sizeof(ekey));
    return nb_registry_meta_node(a, ekey, 1, node, len) == 1;
}
