/*
 * regsync.c - see regsync.h.
 *
 * The index holds, per sandbox, its owner and the hash of its row's text;
 * the row of a slot is always the same text (nb_registry_row), so a round
 * compares hashes and writes only what changed: a node whose sandboxes do
 * not change costs etcd one read a round.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "log.h"
#include "regsync.h"
#include "table.h"

#define REGSYNC_WRITES 256 /* rows put or taken out in one round, at most */
#define REGSYNC_YOUNG_S 2  /* a sandbox this young is its creating worker's to register */

struct mark {
    char id[NB_ID_LEN + 1];
    char owner[NB_OWNER_LEN + 8];
    uint64_t hash;
    int seen; /* a live slot of the table has it */
};

struct marks {
    struct mark *v;
    size_t n, cap;
    size_t skip; /* bytes of "<prefix>onnode/<tag>/" */
};

static int add_mark(void *arg, const struct nb_etcd_kv *kv)
{
    struct marks *ms = arg;
    struct mark *m;
    char val[NB_OWNER_LEN + 40];
    unsigned long long h = 0;

    if (kv->key_len != ms->skip + NB_ID_LEN)
        return 0;
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? ms->cap * 2 : 64;
        void *v = realloc(ms->v, cap * sizeof(*ms->v));
        if (v == NULL)
            return 1;
        ms->v = v;
        ms->cap = cap;
    }
    m = &ms->v[ms->n];
    memset(m, 0, sizeof(*m));
    memcpy(m->id, kv->key + ms->skip, NB_ID_LEN);
    snprintf(val, sizeof(val), "%.*s", (int)kv->value_len, kv->value);
    if (sscanf(val, "%39s %llx", m->owner, &h) < 1)
        return 0;
    if (!strcmp(m->owner, "-"))
        m->owner[0] = '\0';
    m->hash = h;
    ms->n++;
    return 0;
}

static int mark_cmp(const void *x, const void *y)
{
    return strcmp(((const struct mark *)x)->id, ((const struct mark *)y)->id);
}

/* The index entry of id (the marks sorted by id first: a thousand
 * sandboxes a node, looked up each round). */
static struct mark *find_mark(struct marks *ms, const char *id)
{
    struct mark key;
    snprintf(key.id, sizeof(key.id), "%s", id);
    return ms->n ? bsearch(&key, ms->v, ms->n, sizeof(ms->v[0]), mark_cmp) : NULL;
}

/* Put a sandbox's row and its index entry. 0 or -1. */
static int put_row(struct nb_app *a, struct nb_etcd *e, const struct nb_slot *s)
{
    struct nb_registry_ops w;
    struct nb_etcd_op ops[2];
    int rc;

    nb_registry_put_ops(&w, a->conf.etcd_prefix, a->node_tag, a->conf.node_name, s, ops);
    rc = nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0);
    nb_registry_ops_free(&w);
    return rc < 0 ? -1 : 0;
}

/* Take out the row of owner's id, and its entry in the index of the node of tag. */
static int drop_row(struct nb_app *a, struct nb_etcd *e, const char *tag, const char *owner,
                    const char *id)
{
    struct nb_registry_ops w;
    struct nb_etcd_op ops[2];

    nb_registry_del_ops(&w, a->conf.etcd_prefix, tag, owner, id, ops);
    return nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0) < 0 ? -1 : 0;
}

int nb_regsync_round(struct nb_app *a, struct nb_etcd *e)
{
    char prefix[NB_REG_KEY_MAX];
    struct marks ms = {NULL, 0, 0, 0};
    struct nb_etcd_op op;
    struct nb_slot *live = NULL;
    uint32_t n = 0, nslots = a->table.nslots;
    int64_t now = nb_clock_real_s();
    int writes = 0, rc = 0;

    snprintf(prefix, sizeof(prefix), "%sonnode/%s/", a->conf.etcd_prefix, a->node_tag);
    ms.skip = strlen(prefix);
    memset(&op, 0, sizeof(op));
    op.kind = NB_ETCD_RANGE;
    op.key = prefix;
    op.prefix = 1;
    op.fn = add_mark;
    op.arg = &ms;
    if (nb_etcd_range(e, &op) != 0) {
        free(ms.v);
        return -1;
    }
    if (ms.n > 1)
        qsort(ms.v, ms.n, sizeof(ms.v[0]), mark_cmp);
    live = calloc(nslots ? nslots : 1, sizeof(*live));
    if (live == NULL) {
        free(ms.v);
        return -1;
    }
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        struct mark *m;
        if (s->state == NB_SLOT_FREE || s->state == NB_SLOT_POOLED)
            continue;
        /* a slot being made or unmade keeps its row for now: its worker
         * registers it or takes it out */
        if ((m = find_mark(&ms, s->id)) != NULL)
            m->seen = 1;
        if ((s->state == NB_SLOT_RUNNING || s->state == NB_SLOT_PAUSED) && nb_slot_live(s, now) &&
            (m != NULL || s->created <= now - REGSYNC_YOUNG_S))
            live[n++] = *s;
    }
    nb_table_unlock(&a->table);

    for (uint32_t i = 0; i < n && writes < REGSYNC_WRITES; i++) {
        struct mark *m = find_mark(&ms, live[i].id);
        char *row = nb_registry_row(&live[i], a->conf.node_name);
        uint64_t h = nb_registry_hash(row, strlen(row));
        free(row);
        if (m != NULL && m->hash == h && !strcmp(m->owner, live[i].owner))
            continue;
        if (m != NULL && strcmp(m->owner, live[i].owner) != 0 &&
            drop_row(a, e, a->node_tag, m->owner, m->id) != 0) {
            rc = -1;
            break;
        }
        if (put_row(a, e, &live[i]) != 0) {
            rc = -1;
            break;
        }
        writes++;
    }
    for (size_t i = 0; rc == 0 && i < ms.n && writes < REGSYNC_WRITES; i++) {
        if (ms.v[i].seen)
            continue;
        if (drop_row(a, e, a->node_tag, ms.v[i].owner, ms.v[i].id) != 0) {
            rc = -1;
            break;
        }
        writes++;
    }
    free(live);
    free(ms.v);
    return rc < 0 ? -1 : writes;
}

/* The tags of the cluster and the names they were claimed for. */
struct tags {
    char (*tag)[NB_NODE_TAG_LEN + 1];
    char (*name)[NB_NODE_NAME_MAX + 1];
    size_t n, cap;
    size_t skip;
};

static int add_tag(void *arg, const struct nb_etcd_kv *kv)
{
    struct tags *ts = arg;
    if (kv->key_len != ts->skip + NB_NODE_TAG_LEN || kv->value_len > NB_NODE_NAME_MAX)
        return 0;
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 16;
        void *t = realloc(ts->tag, cap * sizeof(*ts->tag)), *nm;
        if (t == NULL)
            return 1;
        ts->tag = t;
        nm = realloc(ts->name, cap * sizeof(*ts->name));
        if (nm == NULL)
            return 1;
        ts->name = nm;
        ts->cap = cap;
    }
    memcpy(ts->tag[ts->n], kv->key + ts->skip, NB_NODE_TAG_LEN);
    ts->tag[ts->n][NB_NODE_TAG_LEN] = '\0';
    memcpy(ts->name[ts->n], kv->value, kv->value_len);
    ts->name[ts->n][kv->value_len] = '\0';
    ts->n++;
    return 0;
}

/* A row read back: is its sandbox past its end by more than grace? */
struct row_end {
    int found;
    int over;
    int64_t before; /* now - grace */
};

static int judge_row(void *arg, const struct nb_etcd_kv *kv)
{
    struct row_end *re = arg;
    struct nb_slot s;
    char node[NB_REG_NODE_MAX];
    re->found = 1;
    if (nb_registry_row_parse(kv->value, kv->value_len, &s, node) != 0) {
        re->over = 1; /* not a row nanobox wrote: nothing to keep */
        return 0;
    }
    re->over = (s.state == NB_SLOT_PAUSED ? s.pause_expires : s.expires) < re->before;
    return 0;
}

int nb_regsync_collect(struct nb_app *a, struct nb_etcd *e, const char (*up)[33], unsigned n_up,
                       int64_t grace)
{
    char prefix[NB_REG_KEY_MAX];
    struct tags ts = {NULL, NULL, 0, 0, 0};
    struct nb_etcd_op op;
    int64_t before = nb_clock_real_s() - grace;
    int dropped = 0, rc = 0;

    snprintf(prefix, sizeof(prefix), "%stags/", a->conf.etcd_prefix);
    ts.skip = strlen(prefix);
    memset(&op, 0, sizeof(op));
    op.kind = NB_ETCD_RANGE;
    op.key = prefix;
    op.prefix = 1;
    op.fn = add_tag;
    op.arg = &ts;
    if (nb_etcd_range(e, &op) != 0) {
        rc = -1;
        goto out;
    }
    for (size_t t = 0; t < ts.n && rc == 0 && dropped < REGSYNC_WRITES; t++) {
        struct marks ms = {NULL, 0, 0, 0};
        int live = !strcmp(ts.tag[t], a->node_tag), was = dropped;
        for (unsigned i = 0; i < n_up && !live; i++)
            live = !strcmp(up[i], ts.name[t]);
        if (live)
            continue;
        snprintf(prefix, sizeof(prefix), "%sonnode/%s/", a->conf.etcd_prefix, ts.tag[t]);
        ms.skip = strlen(prefix);
        op.key = prefix;
        op.fn = add_mark;
        op.arg = &ms;
        if (nb_etcd_range(e, &op) != 0)
            rc = -1;
        for (size_t i = 0; rc == 0 && i < ms.n && dropped < REGSYNC_WRITES; i++) {
            char rkey[NB_REG_KEY_MAX];
            struct row_end re = {0, 0, before};
            struct nb_etcd_op get = {
                .kind = NB_ETCD_RANGE, .key = rkey, .fn = judge_row, .arg = &re};
            nb_registry_row_key(a->conf.etcd_prefix, ms.v[i].owner, ms.v[i].id, rkey, sizeof(rkey));
            if (nb_etcd_range(e, &get) != 0) {
                rc = -1;
                break;
            }
            if (re.found && !re.over)
                continue;
            if (drop_row(a, e, ts.tag[t], ms.v[i].owner, ms.v[i].id) != 0) {
                rc = -1;
                break;
            }
            dropped++;
        }
        if (dropped > was)
            nb_info("cluster: node %s is gone: %d of its rows past their end taken out", ts.name[t],
                    dropped - was);
        free(ms.v);
    }
out:
    free(ts.tag);
    free(ts.name);
    return rc < 0 ? -1 : dropped;
}
