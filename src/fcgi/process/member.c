/*
 * member.c - see member.h.
 *
 * Its own process, not a job of the reaper: a reconciliation that removes
 * a thousand containers keeps the reaper busy for minutes, and a node that
 * serves must not look dead meanwhile. Nothing here touches the table but
 * to read it, or Docker at all.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "etcd.h"
#include "keysync.h"
#include "log.h"
#include "member.h"
#include "metrics.h"
#include "procstat.h"
#include "regsync.h"
#include "templates.h"
#include "tplsync.h"
#include "volreg.h"

#define MEMBER_KEYS_WAIT_MS 500           /* the keys file is looked at (a stat) this often */
#define MEMBER_NODES_S 5                  /* the nodes are read for /metrics this often */
#define MEMBER_MEMORY_STEP (256ULL << 20) /* the record's memory, rounded down to it */
#define MEMBER_REWRITE_S 30               /* the record is rewritten at least this often */
#define MEMBER_VOLUMES_S 10               /* the volume registry's rows put right this often */
#define MEMBER_COLLECT_S 60               /* gone nodes' rows looked at this often */
#define MEMBER_TEMPLATES_S 5              /* the templates' registry looked at this often */
#define MEMBER_RESPONSE (16u << 20) /* bytes of one etcd answer: a node's index of ~50,000 rows */

static volatile sig_atomic_t member_stop;

static void member_on_term(int sig)
{
    (void)sig;
    member_stop = 1;
}

struct member {
    struct nb_app *a;
    struct nb_etcd etcd;
    char node_key[256], tag_key[256];
    int64_t lease;          /* 0: none held */
    int64_t renewed;        /* unix seconds of the last renewal or join */
    int64_t written;        /* unix seconds the record was last written */
    int64_t since;          /* unix seconds this process started */
    int64_t nodes_read;     /* unix seconds the nodes were last read (metrics) */
    int64_t collected;      /* unix seconds gone nodes' rows were last looked at */
    int64_t volcollected;   /* ... and their volumes' rows */
    int64_t tpl_synced;     /* unix seconds the templates' registry was last looked at */
    int64_t volsynced;      /* unix seconds the volumes' rows were last put right */
    struct nb_tplsync *tpl; /* its memory (NULL: no cluster_secret, no templates sent) */
    char *record;           /* the last record written, heartbeat left out */
    enum nb_member_state state;
    char holder[256]; /* who holds our name or tag, in a conflict */
};

/* A state change, logged once when it happens. */
static void set_state(struct member *m, enum nb_member_state st, int renewed)
{
    const struct nb_conf *c = &m->a->conf;
    if (st != m->state) {
        switch (st) {
        case NB_MEMBER_JOINED:
            nb_info("cluster: joined as node %s (tag %s) at %s", c->node_name, m->a->node_tag,
                    c->node_url);
            break;
        case NB_MEMBER_UNREACHABLE:
            nb_warn("cluster: etcd does not answer (%s); serving on, rejoining when it does",
                    m->etcd.err);
            break;
        case NB_MEMBER_CONFLICT:
            nb_error("cluster: %s; staying out of the cluster until it is free", m->holder);
            break;
        default:
            break;
        }
    }
    m->state = st;
    nb_metrics_member(st, renewed, nb_clock_real_s());
}

struct tpl_add {
    struct nb_node_info *n;
    const struct nb_conf *c;
};

static void add_template(void *arg, const struct nb_template *t)
{
    struct tpl_add *ta = arg;
    struct nb_node_info *n = ta->n;
    if (strcmp(t->status, "ready") != 0 || n->n_templates >= NB_NODE_TEMPLATES_MAX)
        return;
    nb_template_node_name(ta->c, t->name, t->owner, n->templates[n->n_templates],
                          sizeof(n->templates[0]));
    n->n_templates++;
}

/* What the node says of itself now (heartbeat 0). */
static void node_info(struct member *m, struct nb_node_info *n)
{
    struct nb_app *a = m->a;
    struct nb_apierr ae;
    struct tpl_add ta;
    uint32_t used, pooled;

    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", a->conf.node_name);
    snprintf(n->tag, sizeof(n->tag), "%s", a->node_tag);
    snprintf(n->url, sizeof(n->url), "%s", a->conf.node_url);
    snprintf(n->version, sizeof(n->version), "%s", PACKAGE_VERSION);
    nb_table_lock(&a->table);
    used = nb_table_count(&a->table);
    pooled = nb_table_count_state(&a->table, NB_SLOT_POOLED);
    nb_table_unlock(&a->table);
    n->slots = a->table.nslots;
    n->free = a->table.nslots - (used - pooled);
    n->running = used - pooled;
    /* in steps of MEMBER_MEMORY_STEP: MemAvailable moves at every read, and
     * each rewrite of the record wakes every front's watch */
    n->memory_available = nb_proc_number("/proc/meminfo", "MemAvailable:", 0) * 1024ULL /
                          MEMBER_MEMORY_STEP * MEMBER_MEMORY_STEP;
    n->drain = nb_cluster_draining(&a->conf);
    n->since = m->since;
    ta.n = n;
    ta.c = &a->conf;
    if (nb_template_list(a, NULL, add_template, &ta, &ae) != 0)
        nb_debug("cluster: the node's templates cannot be listed: %s", ae.msg);
}

/*
 * The record, heartbeat stamped, when it changed or is due; else only made
 * sure it is still under this member's lease (a member of the same node
 * that has not died yet, or a hand-made put, may have taken it to another
 * lease, whose end would delete it). 0 or -1.
 */
static int write_record(struct member *m, int force)
{
    struct nb_node_info n;
    int64_t now = nb_clock_real_s();
    char *same, *json;
    int rc;

    node_info(m, &n);
    same = nb_node_info_json(&n);
    if (!force && m->record != NULL && !strcmp(same, m->record) &&
        now - m->written < MEMBER_REWRITE_S) {
        free(same);
        n.heartbeat = m->written;
        json = nb_node_info_json(&n);
        rc = nb_etcd_keep_leased(&m->etcd, m->node_key, json, strlen(json), m->lease);
        free(json);
        if (rc == 1)
            nb_warn("cluster: the node's record was under another lease: written again");
        return rc < 0 ? -1 : 0;
    }
    n.heartbeat = now;
    json = nb_node_info_json(&n);
    rc = nb_etcd_put(&m->etcd, m->node_key, json, strlen(json), m->lease);
    free(json);
    if (rc != 0) {
        free(same);
        return -1;
    }
    free(m->record);
    m->record = same;
    m->written = now;
    return 0;
}

struct held {
    char value[256];
    int found;
};

static int read_held(void *arg, const struct nb_etcd_kv *kv)
{
    struct held *h = arg;
    snprintf(h->value, sizeof(h->value), "%.*s", (int)(kv->value_len < 255 ? kv->value_len : 255),
             kv->value);
    h->found = 1;
    return 1;
}

/*
 * Claim the tag for good, then create the record under a new lease, or
 * take over one of our own earlier life (the same URL). 1 joined, 0 kept
 * out (m->holder says by whom), -1 etcd did not answer.
 */
static int join(struct member *m)
{
    const struct nb_conf *c = &m->a->conf;
    struct held h = {"", 0};
    struct nb_node_info n, other;
    char *json;
    int rc;

    rc = nb_etcd_create(&m->etcd, m->tag_key, c->node_name, strlen(c->node_name), 0, read_held, &h);
    if (rc < 0)
        return -1;
    if (rc == 0 && strcmp(h.value, c->node_name) != 0) {
        snprintf(m->holder, sizeof(m->holder), "node tag %s of the name %s is node %s's",
                 m->a->node_tag, c->node_name, h.value);
        return 0;
    }
    if (nb_etcd_grant(&m->etcd, c->node_lease_ttl, &m->lease) != 0)
        return -1;
    node_info(m, &n);
    n.heartbeat = nb_clock_real_s();
    json = nb_node_info_json(&n);
    h.found = 0;
    rc = nb_etcd_create(&m->etcd, m->node_key, json, strlen(json), m->lease, read_held, &h);
    free(json);
    if (rc == 0 && (nb_node_info_parse(h.value, strlen(h.value), &other) != 0 ||
                    strcmp(other.url, c->node_url) != 0)) {
        snprintf(m->holder, sizeof(m->holder), "the node name %s is held by a live node at %.160s",
                 c->node_name, other.url[0] ? other.url : "(unreadable record)");
        rc = 0;
    } else if (rc == 0) {
        rc = write_record(m, 1) == 0 ? 1 : -1; /* ours, from before a restart */
    } else if (rc == 1) {
        free(m->record);
        m->record = NULL;
        rc = write_record(m, 1) == 0 ? 1 : -1; /* remember what it says */
    }
    if (rc != 1) {
        nb_etcd_revoke(&m->etcd, m->lease);
        m->lease = 0;
    }
    return rc;
}

struct node_view {
    struct nb_mnode node[NB_METRICS_NODES];
    uint32_t count; /* records read, past NB_METRICS_NODES too */
};

static int add_mnode(void *arg, const struct nb_etcd_kv *kv)
{
    struct node_view *v = arg;
    struct nb_node_info n;
    if (nb_node_info_parse(kv->value, kv->value_len, &n) != 0)
        return 0;
    if (v->count < NB_METRICS_NODES) {
        struct nb_mnode *o = &v->node[v->count];
        snprintf(o->name, sizeof(o->name), "%s", n.name);
        nb_node_tag(n.name, o->tag); /* from the name, whatever the record says */
        snprintf(o->url, sizeof(o->url), "%s", n.url);
        o->running = n.running;
        o->free = n.free;
        o->drain = (uint32_t)n.drain;
        for (unsigned t = 0; t < n.n_templates && t < 64; t++)
            o->templates[o->n_templates++] =
                nb_registry_hash(n.templates[t], strlen(n.templates[t]));
    }
    v->count++;
    return 0;
}

/* Every node's record into the shared metrics (nodes up, their sandboxes). */
static void read_nodes(struct member *m)
{
    struct node_view *v = calloc(1, sizeof(*v));
    char prefix[256];
    if (v == NULL)
        return;
    snprintf(prefix, sizeof(prefix), "%snodes/", m->a->conf.etcd_prefix);
    if (nb_etcd_get(&m->etcd, prefix, 1, add_mnode, v) >= 0)
        nb_metrics_nodes(v->node, v->count, nb_clock_real_s());
    free(v);
}

/*
 * The names of the nodes up (the member's last read of the records) into
 * up[0..*n-1]: 1 if this node is the first by name of them, the one that
 * collects gone nodes' rows (so the cluster does it once, with no election
 * for it); 0 not, or the view is not whole (past its first 64 records).
 * *up is malloc'd (NULL on failure, then 0).
 */
static int collector(struct member *m, char (**up)[33], unsigned *n)
{
    struct nb_mcluster *view = malloc(sizeof(*view));
    int first = 1;

    *n = 0;
    *up = NULL;
    if (view == NULL || nb_metrics_nodes_copy(view) != 0 ||
        (*up = calloc(NB_METRICS_NODES, sizeof(**up))) == NULL) {
        free(view);
        return 0;
    }
    for (uint32_t i = 0; i < view->nodes_seen && i < NB_METRICS_NODES; i++) {
        snprintf((*up)[(*n)++], sizeof((*up)[0]), "%s", view->node[i].name);
        first &= strcmp(m->a->conf.node_name, view->node[i].name) <= 0;
    }
    first &= view->nodes_up <= NB_METRICS_NODES;
    free(view);
    return first;
}

/* The rows of nodes that are gone, past their sandboxes' end (a minute's grace). */
static void collect(struct member *m)
{
    char(*up)[33];
    unsigned n;
    if (collector(m, &up, &n) &&
        nb_regsync_collect(m->a, &m->etcd, (const char(*)[33])up, n, MEMBER_COLLECT_S) < 0)
        nb_debug("cluster: gone nodes' rows not looked at: %s", m->etcd.err);
    free(up);
}

/* The volume rows of nodes gone longer than volume_orphan_after. */
static void collect_volumes(struct member *m)
{
    char(*up)[33];
    unsigned n;
    if (collector(m, &up, &n) && nb_volreg_collect(m->a, &m->etcd, (const char(*)[33])up, n) < 0)
        nb_debug("cluster: gone nodes' volume rows not looked at: %s", m->etcd.err);
    free(up);
}

/* How often gone nodes' volume rows are looked at: a minute, or oftener
 * for a shorter volume_orphan_after (half of it, a second at least). */
static int64_t volumes_collect_s(const struct nb_conf *c)
{
    int64_t half = (int64_t)c->volume_orphan_after / 2;
    return half >= MEMBER_COLLECT_S ? MEMBER_COLLECT_S : half > 1 ? half : 1;
}

/* One round: join, or renew and rewrite. */
static void round_once(struct member *m)
{
    const struct nb_conf *c = &m->a->conf;
    int64_t now = nb_clock_real_s();
    int rc;

    if (m->lease == 0) {
        rc = join(m);
        if (rc == 1) {
            m->renewed = now;
            set_state(m, NB_MEMBER_JOINED, 1);
            /* back: a later absence counts from its own start */
            if (nb_volreg_back(m->a, &m->etcd) != 0)
                nb_debug("cluster: the node's gone/ key not taken out: %s", m->etcd.err);
        } else {
            set_state(m, rc == 0 ? NB_MEMBER_CONFLICT : NB_MEMBER_UNREACHABLE, 0);
        }
        return;
    }
    rc = nb_etcd_keepalive(&m->etcd, m->lease);
    if (rc == 1 && write_record(m, 0) == 0) {
        m->renewed = now;
        set_state(m, NB_MEMBER_JOINED, 1);
        if (now - m->nodes_read >= MEMBER_NODES_S) {
            read_nodes(m);
            m->nodes_read = now;
        }
        /* the registry's rows of this node, as its table has them */
        if (nb_regsync_round(m->a, &m->etcd) < 0)
            nb_debug("cluster: the registry's rows not brought up to date: %s", m->etcd.err);
        /* the volume registry's rows of this node, as Docker has its volumes */
        if (now - m->volsynced >= MEMBER_VOLUMES_S) {
            if (nb_volreg_sync(m->a, &m->etcd, nb_volume_list) < 0)
                nb_debug("cluster: the volumes' rows not brought up to date: %s", m->etcd.err);
            m->volsynced = now;
        }
        if (m->nodes_read != 0 && now - m->collected >= MEMBER_COLLECT_S) {
            collect(m);
            m->collected = now;
        }
        if (m->nodes_read != 0 && c->volume_orphan_after != 0 &&
            now - m->volcollected >= volumes_collect_s(c)) {
            collect_volumes(m);
            m->volcollected = now;
        }
        /* the cluster's templates this node is behind on (it was away) */
        if (m->tpl != NULL && now - m->tpl_synced >= MEMBER_TEMPLATES_S) {
            if (nb_tplsync_round(m->tpl, m->a, &m->etcd) < 0)
                nb_debug("cluster: the templates' registry not looked at: %s", m->etcd.err);
            m->tpl_synced = now;
        }
        return;
    }
    if (rc == 0) {
        nb_warn("cluster: the node's lease lapsed in etcd; joining again");
        m->lease = 0;
        set_state(m, NB_MEMBER_JOINING, 0);
        round_once(m);
        return;
    }
    /* no answer: the lease may still run out its TTL; past it, it is gone */
    if (now - m->renewed >= (int64_t)c->node_lease_ttl)
        m->lease = 0;
    set_state(m, NB_MEMBER_UNREACHABLE, 0);
}

static void member_sleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!member_stop && nanosleep(&ts, &ts) != 0)
        ;
}

void nb_member_run(struct nb_app *a)
{
    const struct nb_conf *c = &a->conf;
    struct member m;
    struct sigaction sa;
    /* a third of the TTL: two renewals may fail before the lease lapses */
    long period_ms = (long)c->node_lease_ttl * 1000 / 3;
    struct nb_keysync ks;
    char keys_prefix[256];
    int64_t next_round = 0;
    int changed = 0, watch_broke = 0;
    struct nb_etcd_watch kw; /* the cluster's keys, watched */

    pid_t master = getppid();

    nb_log_set_role("member");
    /* ps and top name it (15 bytes at most) */
    prctl(PR_SET_NAME, "nanobox-member");
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = member_on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(&m, 0, sizeof(m));
    memset(&ks, 0, sizeof(ks));
    m.a = a;
    m.since = nb_clock_real_s();
    m.state = NB_MEMBER_OFF;
    /* templates are sent between nodes under the cluster's secret only */
    if (c->cluster_secret[0] != '\0')
        m.tpl = calloc(1, sizeof(*m.tpl));
    nb_cluster_node_key(c->etcd_prefix, c->node_name, m.node_key, sizeof(m.node_key));
    nb_cluster_tag_key(c->etcd_prefix, a->node_tag, m.tag_key, sizeof(m.tag_key));
    /* one try of one endpoint fits in a period, with room for a second */
    if (nb_etcd_init_conf(&m.etcd, c, period_ms / 2 > 200 ? period_ms / 2 : 200, MEMBER_RESPONSE) !=
        0) {
        nb_error("cluster: %s", m.etcd.err);
        _exit(1);
    }
    set_state(&m, NB_MEMBER_JOINING, 0);
    nb_cluster_keys_key(c->etcd_prefix, keys_prefix, sizeof(keys_prefix));
    memset(&kw, 0, sizeof(kw));
    while (!member_stop) {
        int64_t now = nb_clock_mono_ms(), wait;
        int pull = 0, rc;
        /* the master gone without its death signal reaching us (seen once
         * in a test): a member of no node must not keep its record alive */
        if (getppid() != master)
            break;
        if (now >= next_round) {
            round_once(&m);
            next_round = now + (m.state == NB_MEMBER_JOINED ? period_ms : 1000);
            /* the keys read again at each renewal only while no watch is
             * held (the slow poll, while it is broken): one held misses
             * nothing, from the revision of the last read on */
            pull = !nb_etcd_watch_held(&kw);
        }
        wait = next_round - nb_clock_mono_ms();
        if (m.state != NB_MEMBER_JOINED || c->keys_file[0] == '\0') {
            nb_etcd_watch_close(&kw); /* opened again, from a read, once joined */
            member_sleep(wait > 0 ? (long)wait : 0);
            continue;
        }
        /* the keys file <-> etcd; then wait for a change of the cluster's
         * keys on the watch held open (or a short while, for a change of
         * the file: it is looked at every MEMBER_KEYS_WAIT_MS) */
        rc = nb_keysync_round(&ks, &m.etcd, c->etcd_prefix, c->keys_file, pull || changed);
        if (rc < 0)
            wait = wait < MEMBER_KEYS_WAIT_MS ? wait : MEMBER_KEYS_WAIT_MS;
        changed = 0;
        /* (re)opened right after a read (at a renewal): from the keys read
         * then on; none read yet: from now (a watch from revision 1 would
         * replay the history at once) */
        if (pull && rc >= 0 && !nb_etcd_watch_held(&kw)) {
            if (nb_etcd_watch_open(&kw, &m.etcd, keys_prefix, ks.rev ? ks.rev + 1 : 0) != 0)
                nb_debug("cluster keys: no watch: %s", kw.err);
        }
        if (wait > MEMBER_KEYS_WAIT_MS)
            wait = MEMBER_KEYS_WAIT_MS;
        if (wait <= 0 || member_stop)
            continue;
        if (!nb_etcd_watch_held(&kw)) {
            member_sleep((long)wait);
            continue;
        }
        rc = nb_etcd_watch_wait(&kw, wait);
        if (rc == 1) {
            changed = 1;
            if (watch_broke) /* back */
                nb_info("cluster keys: watching etcd again");
            watch_broke = 0;
        } else if (rc < 0) {
            /* the slow poll until the next renewal opens it again */
            if (!watch_broke)
                nb_warn("cluster keys: %s; the keys read at each renewal until it is back", kw.err);
            watch_broke = 1;
            member_sleep((long)wait);
        } else if (watch_broke && kw.created) {
            nb_info("cluster keys: watching etcd again");
            watch_broke = 0;
        }
    }
    nb_etcd_watch_close(&kw);
    nb_keysync_free(&ks);
    /* leaving: the record goes with the lease, at once (a slow etcd gets
     * longer than a renewal would: the master waits for us) */
    m.etcd.timeout_ms = 2000;
    if (m.lease != 0 && nb_etcd_revoke(&m.etcd, m.lease) == 0)
        nb_info("cluster: left (lease revoked)");
    nb_metrics_member(NB_MEMBER_OFF, 0, nb_clock_real_s());
    free(m.record);
    free(m.tpl);
    nb_etcd_cleanup(&m.etcd);
    nb_docker_cleanup(&a->docker);
    _exit(0);
}
