/*
 * tplsync.c - see tplsync.h.
 *
 * A build goes through this node's own API rather than straight to the
 * templates engine: the request is the one the first node took, and it
 * meets every check a build meets here (the Dockerfile's FROM against the
 * key's own templates, the sizes, the key itself), with no parser of it
 * but the API's.
 */
#include "config.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "placement.h"
#include "templates.h"
#include "tplsync.h"

#define TPLSYNC_LOCAL_MAX 4096   /* this node's templates looked at */
#define TPLSYNC_ENTRIES_MAX 8192 /* the registry's entries looked at a round */
#define TPLSYNC_TRIES 3          /* builds sent for one entry in a member's life */
#define TPLSYNC_STALE_S 60       /* an entry this much newer than the copy here: rebuilt */
#define TPLSYNC_TIMEOUT_MS 30000L

struct local {
    char owner[NB_KEY_NAME_MAX + 1];
    char name[NB_TPL_NAME_MAX + 1];
    char status[16];
    int64_t created_at;
};

struct locals {
    struct local *v;
    unsigned n;
};

static void add_local(void *arg, const struct nb_template *t)
{
    struct locals *l = arg;
    struct local *o;
    if (strcmp(t->kind, "build") != 0 || l->n >= TPLSYNC_LOCAL_MAX)
        return; /* the operator's images are everywhere; a snapshot is one node's */
    o = &l->v[l->n++];
    snprintf(o->owner, sizeof(o->owner), "%s", nb_template_owner(t->owner));
    snprintf(o->name, sizeof(o->name), "%s", t->name);
    snprintf(o->status, sizeof(o->status), "%s", t->status);
    o->created_at = t->created_at;
}

struct entry {
    char owner[NB_KEY_NAME_MAX + 1];
    char name[NB_TPL_NAME_MAX + 1];
    struct nb_tpl_meta m;
    uint64_t h;
};

struct entries {
    size_t skip; /* the prefix's length */
    struct entry *v;
    unsigned n;
};

static int add_entry(void *arg, const struct nb_etcd_kv *kv)
{
    struct entries *es = arg;
    struct entry *o;
    const char *rest, *slash;
    size_t olen, nlen;
    char rev[24];

    if (es->n >= TPLSYNC_ENTRIES_MAX || kv->key_len <= es->skip)
        return 0;
    o = &es->v[es->n];
    rest = kv->key + es->skip;
    slash = memchr(rest, '/', kv->key_len - es->skip);
    if (slash == NULL)
        return 0;
    olen = (size_t)(slash - rest);
    nlen = kv->key_len - es->skip - olen - 1;
    if (olen == 0 || olen > NB_KEY_NAME_MAX || nlen == 0 || nlen > NB_TPL_NAME_MAX)
        return 0;
    memcpy(o->owner, rest, olen);
    o->owner[olen] = '\0';
    memcpy(o->name, slash + 1, nlen);
    o->name[nlen] = '\0';
    if (!nb_template_name_ok(o->name) || strchr(o->owner, '/') != NULL ||
        nb_tpl_meta_parse(kv->value, kv->value_len, &o->m) != 0)
        return 0;
    o->h = nb_registry_hash(kv->key, kv->key_len);
    snprintf(rev, sizeof(rev), "@%lld", (long long)kv->mod_revision);
    o->h ^= nb_registry_hash(rev, strlen(rev)) * 31;
    es->n++;
    return 0;
}

static struct nb_tplsync_seen *seen_of(struct nb_tplsync *ts, uint64_t h)
{
    struct nb_tplsync_seen *s;
    for (unsigned i = 0; i < NB_TPLSYNC_SEEN; i++)
        if (ts->seen[i].h == h)
            return &ts->seen[i];
    s = &ts->seen[ts->next];
    ts->next = (ts->next + 1) % NB_TPLSYNC_SEEN;
    s->h = h;
    s->tries = 0;
    return s;
}

struct recipe {
    char *body;
    size_t len;
};

static int take_recipe(void *arg, const struct nb_etcd_kv *kv)
{
    struct recipe *rc = arg;
    free(rc->body);
    rc->body = malloc(kv->value_len + 1);
    if (rc->body != NULL) {
        memcpy(rc->body, kv->value, kv->value_len);
        rc->body[kv->value_len] = '\0';
        rc->len = kv->value_len;
    }
    return 0;
}

static size_t keep_answer(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    char *out = userdata;
    size_t used = strlen(out), n = size * nmemb;
    if (used < 255)
        snprintf(out + used, 256 - used, "%.*s", (int)(n < 255 - used ? n : 255 - used), ptr);
    return n;
}

/* Is the recipe a build of e's name (its key's)? A recipe is built as the
 * owner its key names, and only under the name its key names. */
static int recipe_of(const struct recipe *rc, const struct entry *e)
{
    const char *pn[] = {"name", NULL};
    yajl_val v = NULL;
    char err[64];
    int ok;
    if (nb_json_parse(rc->body, rc->len, 8, &v, err, sizeof(err)) != 0 || v == NULL)
        return 0;
    ok = !strcmp(nb_json_string(yajl_tree_get(v, pn, yajl_t_string)), e->name);
    yajl_tree_free(v);
    return ok;
}

/* The recipe of e, sent to this node's own API as another node's build. */
static void build_here(struct nb_app *a, struct nb_etcd *etcd, const struct entry *e)
{
    const struct nb_conf *c = &a->conf;
    char rkey[NB_REG_KEY_MAX], h[320], answer[256] = "";
    struct recipe rc = {NULL, 0};
    struct curl_slist *hdrs = NULL;
    struct nb_buf url;
    long status = 0;
    CURLcode cc;
    CURL *curl;

    nb_cluster_tpl_key(c->etcd_prefix, "recipes", e->owner, e->name, rkey, sizeof(rkey));
    if (nb_etcd_get(etcd, rkey, 0, take_recipe, &rc) < 0 || rc.body == NULL) {
        nb_warn("cluster: template %s of %s: its recipe cannot be read (%s)", e->name, e->owner,
                rc.body == NULL ? "none stored" : etcd->err);
        free(rc.body);
        return;
    }
    if (!recipe_of(&rc, e)) {
        nb_warn("cluster: template %s of %s: its recipe is not a build of that name", e->name,
                e->owner);
        free(rc.body);
        return;
    }
    if ((curl = curl_easy_init()) == NULL) {
        free(rc.body);
        return;
    }
    nb_buf_init(&url, NB_CONF_STR + 32);
    nb_buf_printf(&url, "%s/templates", c->node_url);
    snprintf(h, sizeof(h), NB_CLUSTER_SECRET_HEADER ": %s", c->cluster_secret);
    hdrs = curl_slist_append(hdrs, h);
    snprintf(h, sizeof(h), NB_CLUSTER_OWNER_HEADER ": %s", e->owner);
    hdrs = curl_slist_append(hdrs, h);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url.data);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, TPLSYNC_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, rc.body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)rc.len);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, (void *)answer);
    cc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc == CURLE_OK && status == 202)
        nb_info("cluster: template %s of %s (built on node %s): built here too, from its recipe",
                e->name, e->owner, e->m.node);
    else
        nb_warn("cluster: template %s of %s: its build here was refused (%s %ld): %s", e->name,
                e->owner, cc == CURLE_OK ? "HTTP" : curl_easy_strerror(cc), status, answer);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(curl);
    nb_buf_free(&url);
    free(rc.body);
}

static const struct local *local_of(const struct locals *l, const struct entry *e)
{
    for (unsigned i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].owner, e->owner) && !strcmp(l->v[i].name, e->name))
            return &l->v[i];
    return NULL;
}

static int drop_here(struct nb_app *a, const struct entry *e, const char *why)
{
    struct nb_apierr ae;
    if (nb_template_delete(a, e->name, e->owner, 1, &ae) != 0) {
        nb_warn("cluster: template %s of %s (%s) cannot be removed here: %s", e->name, e->owner,
                why, ae.msg);
        return -1;
    }
    nb_info("cluster: template %s of %s %s: removed here", e->name, e->owner, why);
    return 0;
}

int nb_tplsync_round(struct nb_tplsync *ts, struct nb_app *a, struct nb_etcd *e)
{
    const struct nb_conf *c = &a->conf;
    struct locals l = {calloc(TPLSYNC_LOCAL_MAX, sizeof(struct local)), 0};
    struct entries es = {0, calloc(TPLSYNC_ENTRIES_MAX, sizeof(struct entry)), 0};
    struct nb_apierr ae;
    char prefix[NB_REG_KEY_MAX];
    int rc = 0;

    if (l.v == NULL || es.v == NULL)
        goto out;
    nb_cluster_tpl_key(c->etcd_prefix, "templates", NULL, NULL, prefix, sizeof(prefix));
    es.skip = strlen(prefix);
    if (nb_etcd_get(e, prefix, 1, add_entry, &es) < 0) {
        rc = -1;
        goto out;
    }
    if (es.n == 0)
        goto out;
    if (nb_template_list(a, NULL, add_local, &l, &ae) != 0) {
        nb_debug("cluster: the node's templates cannot be listed: %s", ae.msg);
        goto out;
    }
    for (unsigned i = 0; i < es.n; i++) {
        const struct entry *en = &es.v[i];
        const struct local *lo = local_of(&l, en);
        struct nb_tplsync_seen *s;
        int stale;

        if (en->m.snapshot)
            continue; /* one node's (its only copy), with no recipe to build */
        if (en->m.removed) {
            /* removed while this node was away (or its removal did not reach it) */
            if (lo != NULL && strcmp(lo->status, "building") != 0)
                drop_here(a, en, "was removed from the cluster");
            continue;
        }
        stale = lo != NULL && !strcmp(lo->status, "ready") &&
                en->m.at > lo->created_at + TPLSYNC_STALE_S;
        /* a build that failed here fails on the others too: the key sees it and builds again */
        if (!en->m.recipe || (lo != NULL && !stale))
            continue;
        /* behind on it: at the second round that finds it so, at most a few times */
        s = seen_of(ts, en->h);
        if (s->tries++ == 0 || s->tries > TPLSYNC_TRIES + 1)
            continue;
        if (lo != NULL && drop_here(a, en, "was built again elsewhere") != 0)
            continue;
        build_here(a, e, en);
    }
out:
    free(l.v);
    free(es.v);
    return rc;
}
