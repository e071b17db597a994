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

static struct mark *find_mark(struct marks *ms, const char *id)
{
    for (size_t i = 0; i < ms->n; i++)
        if (!strcmp(ms->v[i].id, id))
            return &ms->v[i];
    return NULL;
}

/* Put a sandbox's row and its index entry. 0 or -1. */
static int put_row(struct nb_app *a, struct nb_etcd *e, const struct nb_slot *s)
{
    char rkey[NB_REG_KEY_MAX], mkey[NB_REG_KEY_MAX], mark[NB_OWNER_LEN + 40];
    char *row = nb_registry_row(s, a->conf.node_name);
    struct nb_etcd_op ops[2];
    int rc;

    nb_registry_row_key(a->conf.etcd_prefix, s->owner, s->id, rkey, sizeof(rkey));
    nb_registry_mark_key(a->conf.etcd_prefix, a->node_tag, s->id, mkey, sizeof(mkey));
    snprintf(mark, sizeof(mark), "%s %016llx", s->owner[0] ? s->owner : "-",
             (unsigned long long)nb_registry_hash(row, strlen(row)));
    memset(ops, 0, sizeof(ops));
    ops[0].kind = ops[1].kind = NB_ETCD_PUT;
    ops[0].key = rkey;
    ops[0].value = row;
    ops[0].value_len = strlen(row);
    ops[1].key = mkey;
    ops[1].value = mark;
    ops[1].value_len = strlen(mark);
    rc = nb_etcd_txn(e, NULL, 0, ops, 2, NULL, 0);
    free(row);
    return rc < 0 ? -1 : 0;
}

static int drop_row(struct nb_app *a, struct nb_etcd *e, const struct mark *m)
{
    char rkey[NB_REG_KEY_MAX], mkey[NB_REG_KEY_MAX];
    struct nb_etcd_op ops[2];

    nb_registry_row_key(a->conf.etcd_prefix, m->owner, m->id, rkey, sizeof(rkey));
    nb_registry_mark_key(a->conf.etcd_prefix, a->node_tag, m->id, mkey, sizeof(mkey));
    memset(ops, 0, sizeof(ops));
    ops[0].kind = ops[1].kind = NB_ETCD_DEL;
    ops[0].key = rkey;
    ops[1].key = mkey;
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
        if (m != NULL && strcmp(m->owner, live[i].owner) != 0 && drop_row(a, e, m) != 0) {
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
        if (drop_row(a, e, &ms.v[i]) != 0) {
            rc = -1;
            break;
        }
        writes++;
    }
    free(live);
    free(ms.v);
    return rc < 0 ? -1 : writes;
}
