/*
 * etcd.h - a small client of etcd's v3 JSON gateway: the calls a cluster
 * node makes (leases, puts, reads of a key or a prefix, a put only if the
 * key is absent), over libcurl, as docker.h speaks to dockerd. No gRPC and
 * no new library: the gateway takes the same requests as JSON, with keys
 * and values in base64 and 64-bit numbers as strings (docs/CLUSTER.md).
 *
 * A handle holds the cluster's endpoints and one curl handle (its
 * connections kept between calls). A call tries the endpoint that answered
 * last, then the others in turn, once each: an endpoint that cannot be
 * reached, times out or answers 5xx (a member without a leader) is passed
 * over. Every answer is read into a buffer capped at max_response.
 */
#ifndef NB_ETCD_H
#define NB_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "conf.h"

struct nb_etcd {
    void *curl;
    char endpoints[NB_ETCD_ENDPOINTS_MAX][NB_ETCD_URL_MAX];
    unsigned n;   /* endpoints */
    unsigned cur; /* the one that answered last */
    long timeout_ms;
    int64_t revision; /* the store's revision in the last answer read (0: none) */
    struct nb_buf resp;
    char err[320]; /* what the last failed call met */
    /* TLS (https:// endpoints): CA file, client certificate and key; "": none */
    char cacert[NB_CONF_STR], cert[NB_CONF_STR], key[NB_CONF_STR];
};

/* One key-value pair of a read; key and value are not NUL-terminated. */
struct nb_etcd_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
    int64_t lease;        /* 0: none */
    int64_t mod_revision; /* the store's revision of its last change */
};

/* Called for each pair a read finds; a non-zero return stops the read. */
typedef int (*nb_etcd_kv_fn)(void *arg, const struct nb_etcd_kv *kv);

/*
 * endpoints: "http://host:port" URLs separated by commas, as
 * nb_conf_endpoints reads them. timeout_ms bounds one try of one endpoint.
 * -1 with e->err for a list it cannot take.
 */
int nb_etcd_init(struct nb_etcd *e, const char *endpoints, long timeout_ms, size_t max_response);
void nb_etcd_cleanup(struct nb_etcd *e);

/* etcd over TLS: the CA that signed the members' certificates and this
 * client's certificate and key (PEM files; "" or NULL: none, the system's
 * CAs and no client certificate). */
void nb_etcd_set_tls(struct nb_etcd *e, const char *cacert, const char *cert, const char *key);

/* nb_etcd_init with a config's endpoints and TLS files (etcd_cacert, ...). */
int nb_etcd_init_conf(struct nb_etcd *e, const struct nb_conf *c, long timeout_ms,
                      size_t max_response);

/* A lease of ttl seconds: 0 and *lease, or -1. */
int nb_etcd_grant(struct nb_etcd *e, long ttl, int64_t *lease);
/* Renew a lease: 1 renewed, 0 it is gone (lapsed or revoked), -1 no answer. */
int nb_etcd_keepalive(struct nb_etcd *e, int64_t lease);
/* End a lease and every key put with it: 0 or -1. */
int nb_etcd_revoke(struct nb_etcd *e, int64_t lease);

/* Put key = value (value_len bytes), bound to lease (0: none). 0 or -1. */
int nb_etcd_put(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                int64_t lease);
/* Remove key: 0 (also when absent) or -1. */
int nb_etcd_delete(struct nb_etcd *e, const char *key);

/* Read key, or every key under it when prefix: the number of pairs, or -1. */
int nb_etcd_get(struct nb_etcd *e, const char *key, int prefix, nb_etcd_kv_fn fn, void *arg);

/*
 * Put key = value only if key is absent, in one transaction: 1 it was
 * created; 0 it was there, and fn (if not NULL) is called with what is
 * there; -1 no answer.
 */
int nb_etcd_create(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                   int64_t lease, nb_etcd_kv_fn fn, void *arg);

/*
 * Put key = value bound to lease, unless key already is bound to lease,
 * in one transaction: 1 it was put, 0 it was already the lease's (and is
 * left as it is), -1 no answer. What a lease holder calls to keep its key
 * its own: a put by anyone else (another process of the same name) takes
 * the key to another lease, whose revoke would delete it.
 */
int nb_etcd_keep_leased(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                        int64_t lease);

/*
 * A transaction (etcd's Txn): if every compare holds, the success ops run,
 * else the failure ops, all at one revision.
 */
enum nb_etcd_target { NB_ETCD_MOD, NB_ETCD_CREATE, NB_ETCD_LEASE };
struct nb_etcd_cmp {
    const char *key;
    enum nb_etcd_target target; /* key's mod revision, create revision or lease */
    int64_t value;              /* ... equals this (0: the key is absent / has none) */
};
enum nb_etcd_opkind { NB_ETCD_PUT, NB_ETCD_DEL, NB_ETCD_RANGE };
struct nb_etcd_op {
    enum nb_etcd_opkind kind;
    const char *key;
    const void *value; /* PUT */
    size_t value_len;
    int64_t lease;    /* PUT: 0 none */
    int prefix;       /* DEL, RANGE: every key under key */
    int count_only;   /* RANGE: only how many */
    int serializable; /* RANGE: any member's copy, also without a quorum (maybe stale) */
    int64_t limit;    /* RANGE: at most this many pairs (0: all) */
    /* RANGE with prefix: from this key on (from_len bytes; NULL: from key), to
     * the end of key's prefix: the next page after a limit, from its last key + "\0" */
    const char *from;
    size_t from_len;
    /* RANGE results: fn for each pair (it may be NULL), and what came back */
    nb_etcd_kv_fn fn;
    void *arg;
    int64_t count; /* keys in the range (all of them, whatever the limit) */
    int more;      /* the limit cut the answer short */
};

/*
 * Run a transaction: 1 the compares held (the success ops ran), 0 they
 * did not (the failure ops ran), -1 no answer (or a range's pairs could
 * not be read). Range ops of the branch that ran get their results.
 */
int nb_etcd_txn(struct nb_etcd *e, const struct nb_etcd_cmp *cmp, size_t ncmp,
                struct nb_etcd_op *success, size_t nsuccess, struct nb_etcd_op *failure,
                size_t nfailure);

/* A read alone: op is a RANGE; 0 (its results filled in) or -1. */
int nb_etcd_range(struct nb_etcd *e, struct nb_etcd_op *op);

/*
 * Wait up to max_ms for a change to any key under prefix after revision
 * from_rev (0: from now), through the gateway's watch stream: 1 a change
 * came, 0 none came in time, -1 no endpoint would watch.
 */
int nb_etcd_watch(struct nb_etcd *e, const char *prefix, int64_t from_rev, long max_ms);

/*
 * A watch held open: one streaming POST /v3/watch that stays open across
 * waits, on curl handles of its own (the handle's calls go on beside it),
 * so that waiting for a change costs etcd nothing. Zeroed: closed.
 */
struct nb_etcd_watch {
    void *multi, *easy, *hdrs;
    char *body;
    int created; /* etcd said the watch is made */
    int changed; /* a change came since the last wait */
    int broken;  /* etcd ended it (a cancel, a compaction) */
    unsigned ep; /* the endpoint it is on: the next one after a break */
    char tail[16];
    char err[320]; /* why it ended, after a wait answered -1 */
};

/* Open w on e's endpoints for any key under prefix after revision from_rev
 * (0: from now): 0 (it connects in the waits), -1 with w->err. */
int nb_etcd_watch_open(struct nb_etcd_watch *w, const struct nb_etcd *e, const char *prefix,
                       int64_t from_rev);
/*
 * Wait up to max_ms on w: 1 a change came (it stays open), 0 none yet
 * (it may answer before max_ms), -1 it ended or never connected (closed,
 * w->err says why: open it again).
 */
int nb_etcd_watch_wait(struct nb_etcd_watch *w, long max_ms);
/* Is w open? */
int nb_etcd_watch_held(const struct nb_etcd_watch *w);
/* Close w (a closed one too). */
void nb_etcd_watch_close(struct nb_etcd_watch *w);

#endif
