/*
 * cluster.h - what nodes of a nanobox cluster agree on: a node's tag, the
 * sandbox ids that carry it, the keys they use in etcd and the record a
 * node keeps there (docs/CLUSTER.md).
 *
 * A sandbox id is a UUID (RFC 9562) either way, so every client, path and
 * DNS label that takes one today takes it unchanged:
 *
 *   single node:   xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx   version 4, random
 *   cluster node:  xxxxxxxx-xxxx-8xxx-Vxxx-TTTTTTTTTTTT   version 8, its
 *                  last 12 hex digits the node's tag (V is 8, 9, a or b)
 *
 * The tag is the first 48 bits of SHA-256("nanobox-node:" + node_name), in
 * hex: a front finds a sandbox's node from its id alone (nginx's map on
 * the last group), with no lookup. 74 random bits stay in the rest.
 */
#ifndef NB_CLUSTER_H
#define NB_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "etcd.h"

#define NB_NODE_TAG_LEN 12
#define NB_NODE_TEMPLATES_MAX 64

/* tag (NB_NODE_TAG_LEN hex digits + NUL) of a node name */
void nb_node_tag(const char *name, char tag[NB_NODE_TAG_LEN + 1]);

/*
 * A new sandbox id (36 characters + NUL): random version 4 when tag is
 * NULL or "", else version 8 ending in tag.
 */
void nb_cluster_new_id(const char *tag, char id[37]);

/* The node tag id carries: 1 and tag filled for a version 8 id, else 0. */
int nb_cluster_id_tag(const char *id, char tag[NB_NODE_TAG_LEN + 1]);

/*
 * What a node says of itself in etcd, under <prefix>nodes/<name>, bound to
 * its lease: it vanishes when the node stops renewing it.
 */
struct nb_node_info {
    char name[NB_NODE_NAME_MAX + 1];
    char tag[NB_NODE_TAG_LEN + 1];
    char url[256];             /* how fronts and other nodes reach its nginx */
    char version[32];          /* nanobox's */
    unsigned slots;            /* max_sandboxes */
    unsigned free;             /* slots a create can still take (warm ones count as free) */
    unsigned running;          /* live sandboxes */
    uint64_t memory_available; /* bytes, the host's MemAvailable */
    int drain;                 /* takes no new sandboxes */
    int64_t since;             /* unix second it joined */
    int64_t heartbeat;         /* unix second of this record */
    unsigned n_templates;      /* images and ready templates it can start */
    char templates[NB_NODE_TEMPLATES_MAX][128];
};

/*
 * Is the node drained: node_drain in its config, or the file
 * <state_file>.drain there (made and removed while it runs:
 * docs/CLUSTER.md, "Draining a node")?
 */
int nb_cluster_draining(const struct nb_conf *c);

/* The record as JSON (malloc'd, NUL-terminated). */
char *nb_node_info_json(const struct nb_node_info *n);
/* Parse a record (len bytes, not NUL-terminated): 0, or -1 for one it cannot read. */
int nb_node_info_parse(const char *text, size_t len, struct nb_node_info *n);

/* etcd keys: <prefix>nodes/<name>, <prefix>tags/<tag>, and <prefix>keys/ (the API keys) */
void nb_cluster_node_key(const char *prefix, const char *name, char *out, size_t outlen);
void nb_cluster_tag_key(const char *prefix, const char *tag, char *out, size_t outlen);
void nb_cluster_keys_key(const char *prefix, char *out, size_t outlen);

/*
 * The sandbox registry (docs/CLUSTER.md, "One view"): every sandbox of the
 * cluster is a row, put by the node that runs it, under no lease (a node
 * that dies leaves its rows, shown as on a node that is down):
 *
 *   <prefix>sandboxes/<owner>/<id>  the row: what a list shows of it (JSON)
 *   <prefix>onnode/<tag>/<id>       "<owner> <hash>": the node's index of
 *                                   its rows, with the hash of each row's text
 *   <prefix>owners/<owner>          touched by each create of an owner with
 *                                   quotas: the transaction's guard
 *
 * <owner> is the key's name, or "-" for a sandbox made without keys.
 */
struct nb_slot;

#define NB_REG_KEY_MAX 256
#define NB_REG_NODE_MAX (NB_NODE_NAME_MAX + 1)

void nb_registry_row_key(const char *prefix, const char *owner, const char *id, char *out,
                         size_t outlen);
/* every row of owner (NULL: of every owner) */
void nb_registry_rows_key(const char *prefix, const char *owner, char *out, size_t outlen);
void nb_registry_mark_key(const char *prefix, const char *tag, const char *id, char *out,
                          size_t outlen);
void nb_registry_guard_key(const char *prefix, const char *owner, char *out, size_t outlen);

/*
 * A live sandbox (RUNNING or PAUSED) as its row (malloc'd JSON text): the
 * same slot always gives the same text. node: the node it runs on.
 */
char *nb_registry_row(const struct nb_slot *s, const char *node);
/*
 * The two ops that register s on the node of tag (named node): its row and
 * its index entry ("<owner> <hash>"), into ops[0..1] as puts; or that take
 * the row of owner's id and its entry out, as deletes. Their keys and
 * texts live in w until nb_registry_ops_free(w).
 */
struct nb_registry_ops {
    char rkey[NB_REG_KEY_MAX], mkey[NB_REG_KEY_MAX], mark[96];
    char *row;
};
void nb_registry_put_ops(struct nb_registry_ops *w, const char *prefix, const char *tag,
                         const char *node, const struct nb_slot *s, struct nb_etcd_op ops[2]);
void nb_registry_del_ops(struct nb_registry_ops *w, const char *prefix, const char *tag,
                         const char *owner, const char *id, struct nb_etcd_op ops[2]);
void nb_registry_ops_free(struct nb_registry_ops *w);

/* 64-bit FNV-1a of a row's text, as the index keeps it */
uint64_t nb_registry_hash(const char *text, size_t len);

/*
 * Parse a row (len bytes) back into a slot (state RUNNING or PAUSED, the
 * fields a list shows) and its node's name: 0, or -1 for one it cannot read.
 */
int nb_registry_row_parse(const char *text, size_t len, struct nb_slot *s,
                          char node[NB_REG_NODE_MAX]);
/* The same, and the row's count of open ports (its "ports"; 0 when absent) into *ports. */
int nb_registry_row_parse_ports(const char *text, size_t len, struct nb_slot *s,
                                char node[NB_REG_NODE_MAX], unsigned *ports);

/*
 * The templates' registry (docs/CLUSTER.md, "A node that joins late"):
 * every build a node accepts for a key, and every removal, so that a node
 * that was away builds what it lacks and drops what was removed:
 *
 *   <prefix>templates/<owner>/<name>  {"at", "node", "removed", "recipe"}
 *   <prefix>recipes/<owner>/<name>    its build request, as POST /templates
 *                                     took it (JSON): the recipe a node
 *                                     that lacks it builds from
 *
 * Live entries of an owner are its templates, counted over the cluster for
 * max_templates under the owner's guard (<prefix>owners/<owner>).
 */
struct nb_tpl_meta {
    int64_t at;                      /* unix seconds the build (or removal) was accepted */
    char node[NB_NODE_NAME_MAX + 1]; /* the node that accepted it */
    int removed;                     /* a removal: nodes drop their copy */
    int recipe;                      /* a recipe is stored (not when over NB_TPL_RECIPE_MAX) */
    int snapshot; /* a snapshot: the node's alone (no recipe), counted for max_templates */
};
/* a recipe over this (bytes of the request) is not stored: etcd takes 1.5 MiB a request */
#define NB_TPL_RECIPE_MAX (1024u * 1024u)

/* <prefix><what>/<owner>/<name>, what "templates" or "recipes"; name NULL: the owner's prefix,
 * owner NULL too: every owner's */
void nb_cluster_tpl_key(const char *prefix, const char *what, const char *owner, const char *name,
                        char *out, size_t outlen);
/* The entry as JSON (malloc'd). */
char *nb_tpl_meta_json(const struct nb_tpl_meta *m);
/* Parse an entry (len bytes): 0, or -1 for one it cannot read. */
int nb_tpl_meta_parse(const char *text, size_t len, struct nb_tpl_meta *m);

#endif
