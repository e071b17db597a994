/*
 * keysync.c - see keysync.h.
 *
 * A key is one etcd key, so two nodes adding two keys at once both land;
 * two edits of the same key: the later put wins, as in one file. A key
 * removed on one node is deleted in etcd and then from every file. What
 * the node last agreed with the cluster (synced) tells a local removal
 * from a key the cluster added meanwhile.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cluster.h"
#include "keysync.h"
#include "log.h"

#define KEYS_TEXT_MAX (NB_KEYS_MAX * 512)

static void key_path(const char *prefix, const char *name, char *out, size_t outlen)
{
    char dir[200];
    nb_cluster_keys_key(prefix, dir, sizeof(dir));
    snprintf(out, outlen, "%s%s", dir, name);
}

/* the last fault of the keys in etcd, and of the file, each said once, not
 * at every round it lasts */
static char said[256], said_local[512];

static int add_line(void *arg, const struct nb_etcd_kv *kv)
{
    struct nb_buf *b = arg;
    nb_buf_append(b, kv->value, kv->value_len);
    nb_buf_append(b, "\n", 1);
    return 0;
}

/* The cluster's keys: 0, or -1 (no answer, or lines that do not parse: logged). */
static int read_cluster(struct nb_etcd *e, const char *prefix, struct nb_keys *out, int64_t *rev)
{
    struct nb_buf text;
    char key[256], err[256];
    int rc = 0;

    nb_buf_init(&text, KEYS_TEXT_MAX);
    nb_cluster_keys_key(prefix, key, sizeof(key));
    if (nb_etcd_get(e, key, 1, add_line, &text) < 0) {
        nb_buf_free(&text);
        return -1;
    }
    *rev = e->revision;
    if (nb_keys_parse(text.data ? text.data : "", text.len, out, err, sizeof(err)) != 0) {
        if (strcmp(said, err) != 0)
            nb_error("cluster keys: the keys in etcd (%s) do not parse: %s; every node keeps "
                     "the keys it has",
                     key, err);
        snprintf(said, sizeof(said), "%s", err);
        rc = -1;
    } else {
        said[0] = '\0';
    }
    nb_buf_free(&text);
    return rc;
}

static int same_key(const struct nb_key *a, const struct nb_key *b)
{
    char la[512], lb[512];
    nb_key_format(a, la, sizeof(la));
    nb_key_format(b, lb, sizeof(lb));
    return !strcmp(la, lb);
}

/* Do two sets hold the same keys, whatever their order? */
static int same_set(const struct nb_keys *a, const struct nb_keys *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct nb_key *o = nb_keys_find(b, a->v[i].name);
        if (o == NULL || !same_key(&a->v[i], o))
            return 0;
    }
    return 1;
}

static int put_key(struct nb_etcd *e, const char *prefix, const struct nb_key *k, int only_new)
{
    char key[256], line[512];
    key_path(prefix, k->name, key, sizeof(key));
    nb_key_format(k, line, sizeof(line));
    if (only_new)
        return nb_etcd_create(e, key, line, strlen(line), 0, NULL, NULL) < 0 ? -1 : 0;
    return nb_etcd_put(e, key, line, strlen(line), 0);
}

static int file_changed(const struct nb_keysync *ks, const struct stat *st, int have)
{
    if (have != ks->seen_have)
        return 1;
    return have &&
           (st->st_ino != ks->seen.st_ino || st->st_dev != ks->seen.st_dev ||
            st->st_size != ks->seen.st_size || st->st_mtim.tv_sec != ks->seen.st_mtim.tv_sec ||
            st->st_mtim.tv_nsec != ks->seen.st_mtim.tv_nsec);
}

int nb_keysync_round(struct nb_keysync *ks, struct nb_etcd *e, const char *prefix, const char *path,
                     int pull)
{
    struct nb_keys local = {NULL, 0}, cluster = {NULL, 0};
    struct stat st;
    char err[512], key[256];
    int have = stat(path, &st) == 0, pushed = 0, rc = 0, lock;

    if (ks->synced_ok && !pull && !file_changed(ks, &st, have))
        return 0;
    /* what the file holds, and what it looked like then, under its lock */
    lock = nb_keys_lock(path);
    have = stat(path, &st) == 0;
    rc = nb_keys_load(path, &local, err, sizeof(err));
    if (lock >= 0)
        close(lock);
    if (rc != 0) {
        rc = 0;
        if (strcmp(said_local, err) != 0)
            nb_warn("cluster keys: %s; not shared until it reads again", err);
        snprintf(said_local, sizeof(said_local), "%s", err);
        ks->seen_have = have;
        if (have)
            ks->seen = st;
        return 0;
    }
    said_local[0] = '\0';
    if (!ks->synced_ok) {
        /* joining: the node's own keys go to the cluster unless it has them */
        for (size_t i = 0; i < local.n; i++) {
            if (put_key(e, prefix, &local.v[i], 1) != 0)
                goto no_answer;
            pushed = 1;
        }
    } else if (file_changed(ks, &st, have) && !have) {
        pull = 1; /* a file gone is not every key removed: the cluster's come back */
    } else if (file_changed(ks, &st, have)) {
        for (size_t i = 0; i < local.n; i++) {
            const struct nb_key *was = nb_keys_find(&ks->synced, local.v[i].name);
            if (was != NULL && same_key(was, &local.v[i]))
                continue;
            if (put_key(e, prefix, &local.v[i], 0) != 0)
                goto no_answer;
            nb_info("audit: key=- action=cluster-key-put name=%s", local.v[i].name);
            pushed = 1;
        }
        for (size_t i = 0; i < ks->synced.n; i++) {
            if (nb_keys_find(&local, ks->synced.v[i].name) != NULL)
                continue;
            key_path(prefix, ks->synced.v[i].name, key, sizeof(key));
            if (nb_etcd_delete(e, key) != 0)
                goto no_answer;
            nb_info("audit: key=- action=cluster-key-delete name=%s", ks->synced.v[i].name);
            pushed = 1;
        }
    }
    if (!pull && !pushed && ks->synced_ok) {
        /* the file changed to what the cluster has already */
        ks->seen_have = have;
        if (have)
            ks->seen = st;
        nb_keys_free(&local);
        return 0;
    }
    if (read_cluster(e, prefix, &cluster, &ks->rev) != 0)
        goto no_answer;
    if (!same_set(&cluster, &local)) {
        /* not over a change made since the read (`nanobox keys add` in
         * between): the next round pushes that change first */
        struct stat now;
        int now_have;
        lock = nb_keys_lock(path);
        now_have = stat(path, &now) == 0;
        if (now_have != have || (have && (now.st_ino != st.st_ino || now.st_size != st.st_size ||
                                          now.st_mtim.tv_sec != st.st_mtim.tv_sec ||
                                          now.st_mtim.tv_nsec != st.st_mtim.tv_nsec))) {
            if (lock >= 0)
                close(lock);
            nb_keys_free(&local);
            nb_keys_free(&cluster);
            return 0; /* seen and synced stay as they were: the change is found */
        }
        if (nb_keys_save(path, &cluster, err, sizeof(err)) != 0) {
            nb_error("cluster keys: %s", err);
        } else {
            nb_info("audit: key=- action=keys-from-cluster keys=%zu file=%s", cluster.n, path);
            rc = 1;
        }
        have = stat(path, &st) == 0;
        if (lock >= 0)
            close(lock);
    }
    ks->seen_have = have;
    if (have)
        ks->seen = st;
    nb_keys_free(&ks->synced);
    ks->synced = cluster;
    ks->synced_ok = 1;
    nb_keys_free(&local);
    return rc;

no_answer:
    nb_keys_free(&local);
    nb_keys_free(&cluster);
    return -1;
}

void nb_keysync_free(struct nb_keysync *ks)
{
    nb_keys_free(&ks->synced);
    ks->synced_ok = 0;
}
