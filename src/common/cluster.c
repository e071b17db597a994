/*
 * cluster.c - see cluster.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "cluster.h"
#include "table.h"
#include "conf.h"
#include "json.h"
#include "keys.h"

#define NODE_JSON_DEPTH 4

void nb_node_tag(const char *name, char tag[NB_NODE_TAG_LEN + 1])
{
    unsigned char h[NB_KEY_HASH_LEN];
    char in[NB_NODE_NAME_MAX + 32];
    snprintf(in, sizeof(in), "nanobox-node:%s", name);
    if (nb_key_hash(in, h) != 0)
        memset(h, 0, sizeof(h));
    for (int i = 0; i < NB_NODE_TAG_LEN / 2; i++)
        snprintf(tag + 2 * i, 3, "%02x", h[i]);
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

void nb_cluster_new_id(const char *tag, char id[37])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, id);
    if (tag == NULL || strlen(tag) != NB_NODE_TAG_LEN)
        return;
    id[14] = '8'; /* version 8: RFC 9562's custom layout; the variant stays 10xx */
    memcpy(id + 24, tag, NB_NODE_TAG_LEN);
}

int nb_cluster_id_tag(const char *id, char tag[NB_NODE_TAG_LEN + 1])
{
    if (strlen(id) != 36 || id[14] != '8' || id[23] != '-')
        return 0;
    for (int i = 0; i < NB_NODE_TAG_LEN; i++)
        if (!is_hex(id[24 + i]))
            return 0;
    memcpy(tag, id + 24, NB_NODE_TAG_LEN);
    tag[NB_NODE_TAG_LEN] = '\0';
    return 1;
}

static void gen_key(yajl_gen g, const char *k)
{
    yajl_gen_string(g, (const unsigned char *)k, strlen(k));
}

static void gen_kstr(yajl_gen g, const char *k, const char *v)
{
    gen_key(g, k);
    nb_json_str(g, v, strlen(v));
}

static void gen_kint(yajl_gen g, const char *k, long long v)
{
    gen_key(g, k);
    yajl_gen_integer(g, v);
}

char *nb_node_info_json(const struct nb_node_info *n)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    gen_kstr(g, "name", n->name);
    gen_kstr(g, "tag", n->tag);
    gen_kstr(g, "url", n->url);
    gen_kstr(g, "version", n->version);
    gen_kint(g, "slots", n->slots);
    gen_kint(g, "free", n->free);
    gen_kint(g, "running", n->running);
    gen_kint(g, "memory_available", (long long)n->memory_available);
    gen_key(g, "drain");
    yajl_gen_bool(g, n->drain);
    gen_kint(g, "since", n->since);
    gen_kint(g, "heartbeat", n->heartbeat);
    gen_key(g, "templates");
    yajl_gen_array_open(g);
    for (unsigned i = 0; i < n->n_templates && i < NB_NODE_TEMPLATES_MAX; i++)
        nb_json_str(g, n->templates[i], strlen(n->templates[i]));
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

static void get_str(yajl_val v, const char *name, char *out, size_t outlen)
{
    const char *path[] = {name, NULL};
    snprintf(out, outlen, "%s", nb_json_string(yajl_tree_get(v, path, yajl_t_string)));
}

static long long get_int(yajl_val v, const char *name)
{
    const char *path[] = {name, NULL};
    return nb_json_int(yajl_tree_get(v, path, yajl_t_number));
}

/* A JSON object of len bytes (not NUL-terminated) read from etcd: the tree, or NULL. */
static yajl_val parse_object(const char *text, size_t len)
{
    char *copy = malloc(len + 1), err[64];
    yajl_val v = NULL;
    int rc;

    if (copy == NULL)
        return NULL;
    memcpy(copy, text, len);
    copy[len] = '\0';
    rc = nb_json_parse(copy, len, NODE_JSON_DEPTH, &v, err, sizeof(err));
    free(copy);
    if (rc != 0 || v == NULL || !YAJL_IS_OBJECT(v)) {
        yajl_tree_free(v);
        return NULL;
    }
    return v;
}

int nb_node_info_parse(const char *text, size_t len, struct nb_node_info *n)
{
    const char *pt[] = {"templates", NULL}, *pd[] = {"drain", NULL};
    yajl_val v, t;

    memset(n, 0, sizeof(*n));
    if ((v = parse_object(text, len)) == NULL)
        return -1;
    get_str(v, "name", n->name, sizeof(n->name));
    get_str(v, "tag", n->tag, sizeof(n->tag));
    get_str(v, "url", n->url, sizeof(n->url));
    get_str(v, "version", n->version, sizeof(n->version));
    n->slots = (unsigned)get_int(v, "slots");
    n->free = (unsigned)get_int(v, "free");
    n->running = (unsigned)get_int(v, "running");
    n->memory_available = (uint64_t)get_int(v, "memory_available");
    n->drain = yajl_tree_get(v, pd, yajl_t_true) != NULL;
    n->since = get_int(v, "since");
    n->heartbeat = get_int(v, "heartbeat");
    t = yajl_tree_get(v, pt, yajl_t_array);
    for (size_t i = 0; t != NULL && i < t->u.array.len && i < NB_NODE_TEMPLATES_MAX; i++)
        snprintf(n->templates[n->n_templates++], sizeof(n->templates[0]), "%s",
                 nb_json_string(t->u.array.values[i]));
    yajl_tree_free(v);
    return nb_conf_node_name_ok(n->name) ? 0 : -1;
}

void nb_cluster_node_key(const char *prefix, const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%snodes/%s", prefix, name);
}

void nb_cluster_tag_key(const char *prefix, const char *tag, char *out, size_t outlen)
{
    snprintf(out, outlen, "%stags/%s", prefix, tag);
}

void nb_cluster_keys_key(const char *prefix, char *out, size_t outlen)
{
    snprintf(out, outlen, "%skeys/", prefix);
}

int nb_cluster_draining(const struct nb_conf *c)
{
    char path[NB_CONF_STR + 8];
    if (c->node_drain)
        return 1;
    snprintf(path, sizeof(path), "%s.drain", c->state_file);
    return access(path, F_OK) == 0;
}

static const char *owner_seg(const char *owner)
{
    return owner != NULL && owner[0] != '\0' ? owner : "-";
}

void nb_registry_row_key(const char *prefix, const char *owner, const char *id, char *out,
                         size_t outlen)
{
    snprintf(out, outlen, "%ssandboxes/%s/%s", prefix, owner_seg(owner), id);
}

void nb_registry_rows_key(const char *prefix, const char *owner, char *out, size_t outlen)
{
    if (owner == NULL)
        snprintf(out, outlen, "%ssandboxes/", prefix);
    else
        snprintf(out, outlen, "%ssandboxes/%s/", prefix, owner_seg(owner));
}

void nb_registry_mark_key(const char *prefix, const char *tag, const char *id, char *out,
                          size_t outlen)
{
    snprintf(out, outlen, "%sonnode/%s/%s", prefix, tag, id);
}

void nb_registry_guard_key(const char *prefix, const char *owner, char *out, size_t outlen)
{
    snprintf(out, outlen, "%sowners/%s", prefix, owner_seg(owner));
}

char *nb_registry_row(const struct nb_slot *s, const char *node)
{
    yajl_gen g = nb_json_gen();
    int paused = s->state == NB_SLOT_PAUSED;
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "id", s->id);
    nb_json_kv_str(g, "node", node);
    nb_json_kv_str(g, "owner", s->owner);
    nb_json_kv_str(g, "state", paused ? "paused" : "running");
    nb_json_kv_str(g, "image", s->image);
    nb_json_kv_int(g, "created", s->created);
    nb_json_kv_int(g, "expires", s->expires);
    nb_json_kv_int(g, "memory", (long long)s->memory);
    nb_json_kv_int(g, "nano_cpus", (long long)s->nano_cpus);
    nb_json_kv_int(g, "pids", s->pids);
    nb_json_kv_int(g, "network", s->network_bridge);
    nb_json_kv_int(g, "lifecycle", s->lifecycle);
    if (paused) {
        nb_json_kv_int(g, "paused_at", s->state_since);
        nb_json_kv_int(g, "ttl_left", s->ttl_left);
        nb_json_kv_int(g, "pause_expires", s->pause_expires);
    }
    nb_json_kv_str(g, "metadata", s->metadata[0] ? s->metadata : "{}");
    {
        /* for max_ports over the cluster; left out at 0, as rows were before */
        unsigned ports = 0;
        for (int i = 0; i < NB_MAX_PORTS; i++)
            ports += s->ports[i].sandboxport != 0;
        if (ports)
            nb_json_kv_int(g, "ports", ports);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

uint64_t nb_registry_hash(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void nb_registry_put_ops(struct nb_registry_ops *w, const char *prefix, const char *tag,
                         const char *node, const struct nb_slot *s, struct nb_etcd_op ops[2])
{
    w->row = nb_registry_row(s, node);
    nb_registry_row_key(prefix, s->owner, s->id, w->rkey, sizeof(w->rkey));
    nb_registry_mark_key(prefix, tag, s->id, w->mkey, sizeof(w->mkey));
    snprintf(w->mark, sizeof(w->mark), "%s %016llx", owner_seg(s->owner),
             (unsigned long long)nb_registry_hash(w->row, strlen(w->row)));
    memset(ops, 0, 2 * sizeof(ops[0]));
    ops[0].kind = ops[1].kind = NB_ETCD_PUT;
    ops[0].key = w->rkey;
    ops[0].value = w->row;
    ops[0].value_len = strlen(w->row);
    ops[1].key = w->mkey;
    ops[1].value = w->mark;
    ops[1].value_len = strlen(w->mark);
}

void nb_registry_del_ops(struct nb_registry_ops *w, const char *prefix, const char *tag,
                         const char *owner, const char *id, struct nb_etcd_op ops[2])
{
    w->row = NULL;
    w->mark[0] = '\0';
    nb_registry_row_key(prefix, owner, id, w->rkey, sizeof(w->rkey));
    nb_registry_mark_key(prefix, tag, id, w->mkey, sizeof(w->mkey));
    memset(ops, 0, 2 * sizeof(ops[0]));
    ops[0].kind = ops[1].kind = NB_ETCD_DEL;
    ops[0].key = w->rkey;
    ops[1].key = w->mkey;
}

void nb_registry_ops_free(struct nb_registry_ops *w)
{
    free(w->row);
    w->row = NULL;
}

int nb_registry_row_parse(const char *text, size_t len, struct nb_slot *s,
                          char node[NB_REG_NODE_MAX])
{
    return nb_registry_row_parse_ports(text, len, s, node, NULL);
}

int nb_registry_row_parse_ports(const char *text, size_t len, struct nb_slot *s,
                                char node[NB_REG_NODE_MAX], unsigned *ports)
{
    char state[16];
    yajl_val v;

    memset(s, 0, sizeof(*s));
    node[0] = '\0';
    if ((v = parse_object(text, len)) == NULL)
        return -1;
    get_str(v, "id", s->id, sizeof(s->id));
    get_str(v, "node", node, NB_REG_NODE_MAX);
    get_str(v, "owner", s->owner, sizeof(s->owner));
    get_str(v, "state", state, sizeof(state));
    get_str(v, "image", s->image, sizeof(s->image));
    get_str(v, "metadata", s->metadata, sizeof(s->metadata));
    s->state = !strcmp(state, "paused") ? NB_SLOT_PAUSED : NB_SLOT_RUNNING;
    s->created = get_int(v, "created");
    s->expires = get_int(v, "expires");
    s->memory = (uint64_t)get_int(v, "memory");
    s->nano_cpus = (uint64_t)get_int(v, "nano_cpus");
    s->pids = get_int(v, "pids");
    s->network_bridge = get_int(v, "network") != 0;
    s->lifecycle = (uint32_t)get_int(v, "lifecycle");
    s->state_since = get_int(v, "paused_at");
    s->ttl_left = get_int(v, "ttl_left");
    s->pause_expires = get_int(v, "pause_expires");
    if (ports != NULL)
        *ports = (unsigned)get_int(v, "ports");
    yajl_tree_free(v);
    if (s->metadata[0] == '\0')
        snprintf(s->metadata, sizeof(s->metadata), "{}");
    return strlen(s->id) == NB_ID_LEN && state[0] != '\0' ? 0 : -1;
}

void nb_cluster_tpl_key(const char *prefix, const char *what, const char *owner, const char *name,
                        char *out, size_t outlen)
{
    if (owner == NULL)
        snprintf(out, outlen, "%s%s/", prefix, what);
    else if (name == NULL)
        snprintf(out, outlen, "%s%s/%s/", prefix, what, owner_seg(owner));
    else
        snprintf(out, outlen, "%s%s/%s/%s", prefix, what, owner_seg(owner), name);
}

char *nb_tpl_meta_json(const struct nb_tpl_meta *m)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    gen_kint(g, "at", m->at);
    gen_kstr(g, "node", m->node);
    gen_key(g, "removed");
    yajl_gen_bool(g, m->removed);
    gen_key(g, "recipe");
    yajl_gen_bool(g, m->recipe);
    if (m->snapshot) {
        gen_key(g, "snapshot");
        yajl_gen_bool(g, 1);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

int nb_tpl_meta_parse(const char *text, size_t len, struct nb_tpl_meta *m)
{
    const char *pr[] = {"removed", NULL}, *pc[] = {"recipe", NULL}, *ps[] = {"snapshot", NULL};
    yajl_val v;

    memset(m, 0, sizeof(*m));
    if ((v = parse_object(text, len)) == NULL)
        return -1;
    m->at = get_int(v, "at");
    get_str(v, "node", m->node, sizeof(m->node));
    m->removed = yajl_tree_get(v, pr, yajl_t_true) != NULL;
    m->recipe = yajl_tree_get(v, pc, yajl_t_true) != NULL;
    m->snapshot = yajl_tree_get(v, ps, yajl_t_true) != NULL;
    yajl_tree_free(v);
    return 0;
}
