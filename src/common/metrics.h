/*
 * metrics.h - nanobox-fcgi's own counters and histograms, for GET /metrics
 * (Prometheus text exposition format, docs/API.md "Metrics").
 *
 * The workers and the reaper are separate processes, so the numbers live
 * in one block of shared memory: an anonymous MAP_SHARED mapping the
 * master makes before its first fork (nb_metrics_map), like the worker
 * scoreboard. Every child inherits it; every update is one or two
 * __atomic adds, with no lock. The block is not in the state table's file
 * on purpose: the table's layout stays as it is (an old state file is
 * still read), and the counters start again at 0 with the service, which
 * is what Prometheus expects of a counter (rate() handles the reset).
 *
 * What is a gauge of the present (sandboxes by state, open ports, the warm
 * pool's size) is not counted here: the /metrics handler reads it from the
 * table when asked.
 *
 * Until nb_metrics_map runs (unit tests, the CLI), nb_metrics is NULL and
 * every nb_metrics_* call does nothing.
 */
#ifndef NB_METRICS_H
#define NB_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ratelimit.h"

/* Histogram bucket upper bounds (seconds), the last bucket being +Inf. */
#define NB_HIST_BOUNDS 16

struct nb_hist {
    uint64_t bucket[NB_HIST_BOUNDS + 1]; /* observations per bucket (not cumulative) */
    uint64_t sum_us;                     /* their sum, microseconds */
};

/* The API calls timed, by route (the label "route"). */
enum nb_mroute {
    NB_MR_CREATE, /* POST /sandbox */
    NB_MR_LIST,
    NB_MR_GET,
    NB_MR_DESTROY,
    NB_MR_TIMEOUT,
    NB_MR_PAUSE,
    NB_MR_RESUME,
    NB_MR_NETWORK,
    NB_MR_EXEC,
    NB_MR_RUN,
    NB_MR_FILES,
    NB_MR_PROCESSES,
    NB_MR_CODE,
    NB_MR_CONTEXTS,
    NB_MR_PORTS,
    NB_MR_MCP,
    NB_MR_SANDBOX_METRICS,
    NB_MR_HEALTHZ,
    NB_MR_METRICS,
    NB_MR_OTHER,
    NB_MR_N
};

/* The Docker Engine API calls, by what they do (the label "op"). */
enum nb_mdocker {
    NB_MDK_PING,
    NB_MDK_CREATE,
    NB_MDK_START,
    NB_MDK_INSPECT,
    NB_MDK_REMOVE,
    NB_MDK_LIST,
    NB_MDK_PAUSE,
    NB_MDK_UNPAUSE,
    NB_MDK_EXEC_CREATE,
    NB_MDK_EXEC_START,
    NB_MDK_EXEC_INSPECT,
    NB_MDK_NETWORK,
    NB_MDK_OTHER,
    NB_MDK_N
};

/* Why a Docker call failed (the label "kind"). */
enum nb_mdocker_err {
    NB_MDE_UNREACHABLE, /* no connection, or it broke */
    NB_MDE_TIMEOUT,
    NB_MDE_PROTO,  /* an answer too big or not understood */
    NB_MDE_SERVER, /* dockerd answered 5xx */
    NB_MDE_N
};

/* Where a created sandbox came from (the label "source"). */
enum nb_mcreate { NB_MC_COLD, NB_MC_WARM, NB_MC_N };

/* Why a sandbox was destroyed (the label "cause"). */
enum nb_mdestroy {
    NB_MD_API,           /* DELETE /sandbox/{id} (and MCP's destroy) */
    NB_MD_RUN,           /* POST /run's sandbox, after the answer */
    NB_MD_EXPIRED,       /* its TTL ran out */
    NB_MD_PAUSE_EXPIRED, /* it stayed paused past max_pause */
    NB_MD_STOPPED,       /* reconciliation: its container stopped */
    NB_MD_VANISHED,      /* reconciliation: its container was gone (slot freed) */
    NB_MD_ABANDONED,     /* reconciliation: a create or destroy whose process died */
    NB_MD_WARM_POOL,     /* a warm sandbox: surplus, evicted for a slot, or dead */
    NB_MD_ROOT_DISK,     /* a root's writable layer passed root_disk_max */
    NB_MD_N
};

/* API errors by (status, code) slug; more distinct pairs than this count as "other". */
#define NB_METRICS_ERRORS 96
#define NB_METRICS_CODE_LEN 32

struct nb_merror {
    uint32_t state; /* 0 free, 1 being claimed, 2 ready (status and code set) */
    uint32_t status;
    char code[NB_METRICS_CODE_LEN];
    uint64_t count;
};

/*
 * One warm pool's demand (warm.c numbers the pools, the same in every
 * process since they come from the config): the workers count its hits and
 * misses and when it was last taken from; the reaper, which sizes it from
 * these (warmsize.h), publishes its target for GET /metrics and /healthz.
 */
#define NB_METRICS_WARM_KINDS 16
struct nb_mwarm {
    uint64_t hits, misses;
    int64_t last_take_ms; /* monotonic ms of the last take, hit or miss; 0: none */
    uint32_t target;      /* the reaper's target for it */
    uint32_t published;   /* 1 once the reaper set target */
};

/* A cluster node's membership in etcd (member.c writes it; /healthz, /metrics read it). */
enum nb_member_state {
    NB_MEMBER_OFF = 0,     /* no etcd_endpoints: one machine alone */
    NB_MEMBER_JOINING,     /* starting; not yet in the cluster */
    NB_MEMBER_JOINED,      /* its lease and record are in etcd */
    NB_MEMBER_UNREACHABLE, /* etcd does not answer (its lease may still run) */
    NB_MEMBER_CONFLICT,    /* its name or tag is another node's: it stays out */
    NB_MEMBER_N
};
/* The cluster's nodes as the member last read them (every few seconds). */
#define NB_METRICS_NODES 64
struct nb_mnode {
    char name[33];
    char tag[13];  /* its tag (cluster.h): the last group of its sandboxes' ids */
    char url[256]; /* its node_url */
    uint32_t running, free, drain;
    /* its ready templates ("name", "owner/name"), by nb_registry_hash of each */
    uint32_t n_templates;
    uint64_t templates[64];
};
struct nb_mcluster {
    uint32_t state;  /* enum nb_member_state */
    int64_t joined;  /* unix seconds it last joined; 0: never */
    int64_t renewed; /* unix seconds its lease was last renewed */
    uint64_t etcd_calls, etcd_failures;
    /* the nodes' view: a sequence count, odd while the member writes it */
    uint32_t nodes_seq;
    uint32_t nodes_up;   /* records in etcd (every node, past the first 64 too) */
    uint32_t nodes_seen; /* of them in node[] */
    int64_t nodes_read;  /* unix seconds of the read; 0: none */
    struct nb_mnode node[NB_METRICS_NODES];
};

struct nb_metrics {
    int64_t started; /* unix seconds the block was made (the service's start) */
    struct nb_hist route[NB_MR_N];
    struct nb_hist docker[NB_MDK_N];
    uint64_t docker_errors[NB_MDK_N][NB_MDE_N];
    uint64_t creates[NB_MC_N];
    uint64_t destroys[NB_MD_N];
    uint64_t warm_hits;   /* creates served from the warm pool */
    uint64_t warm_misses; /* creates the warm pool could have served but had none ready */
    struct nb_mwarm warm[NB_METRICS_WARM_KINDS]; /* the same, by pool */
    uint64_t reconciles;                  /* reconciliations that listed Docker's containers */
    int64_t reconciled;                   /* unix seconds the last one ended; 0: none yet */
    uint32_t workers_alive, workers_busy; /* the master's scoreboard, every 100 ms */
    struct nb_merror errors[NB_METRICS_ERRORS];
    uint64_t errors_other;
    struct nb_rate_table rate; /* the keys' request rate buckets (ratelimit.h) */
    struct nb_mcluster cluster;
};

/* The block of this process and its children; NULL: nothing is recorded. */
extern struct nb_metrics *nb_metrics;

/* Map a zeroed block (MAP_SHARED | MAP_ANONYMOUS) before forking. 0, or -1 with err. */
int nb_metrics_map(char *err, size_t errlen);
void nb_metrics_unmap(void);

/* Microseconds on the monotonic clock, for the durations below. */
int64_t nb_metrics_now_us(void);

/* Record one observation of us microseconds. */
void nb_hist_observe(struct nb_hist *h, int64_t us);

/* One API call to route that took us microseconds. */
void nb_metrics_route(enum nb_mroute r, int64_t us);
/* One Docker call; err is an nb_mdocker_err, or -1 when it succeeded. */
void nb_metrics_docker(enum nb_mdocker op, int64_t us, int err);
void nb_metrics_create(enum nb_mcreate source);
void nb_metrics_destroy(enum nb_mdestroy cause);
void nb_metrics_warm(int hit);
/* A reconciliation (reaper.c) listed the containers and judged every slot, at now. */
void nb_metrics_reconciled(int64_t now);
/* The member process's state; renewed: 1 when its lease was just renewed (or it joined). */
void nb_metrics_member(enum nb_member_state state, int renewed, int64_t now);
/* The member's read of every node record: n of them (the first
 * NB_METRICS_NODES kept, in the order given). */
void nb_metrics_nodes(const struct nb_mnode *nodes, uint32_t n, int64_t now);
/* A whole copy of the nodes' view (never half of one the member is
 * writing): 0, or -1 when there is none yet. */
int nb_metrics_nodes_copy(struct nb_mcluster *out);
/* An etcd call made, and whether it failed. */
void nb_metrics_etcd(int failed);
/* The state's name in /healthz ("off", "joining", "member", "etcd_unreachable", "name_conflict"). */
const char *nb_metrics_member_name(enum nb_member_state state);
/* One take from warm pool kind at now_ms (monotonic): a hit or a miss. */
void nb_metrics_warm_take(unsigned kind, int hit, int64_t now_ms);
/* The reaper: kind's target now. */
void nb_metrics_warm_target(unsigned kind, unsigned target);
/* A copy of kind's counters (zeros when nothing is recorded or kind is out of range). */
void nb_metrics_warm_read(unsigned kind, struct nb_mwarm *out);
/* One error answer: status and its code slug ("not_found"). */
void nb_metrics_error(int status, const char *code);
void nb_metrics_workers(unsigned alive, unsigned busy);

/* Which Docker call method on path (the part after /v1.xx) is. */
enum nb_mdocker nb_metrics_docker_op(const char *method, const char *path);

const char *nb_metrics_route_name(enum nb_mroute r);

/*
 * Append m's families in the exposition format (text/plain; version=0.0.4):
 * the API latency histograms, the Docker ones and errors, the creates,
 * destroys, warm pool hits and misses, API errors and the worker pool.
 */
void nb_metrics_render(struct nb_buf *out, const struct nb_metrics *m);

/* "# HELP name help\n# TYPE name type\n" */
void nb_metrics_family(struct nb_buf *out, const char *name, const char *type, const char *help);
/* v as a label value: \, " and newline escaped (no quotes added). */
void nb_metrics_label(struct nb_buf *out, const char *v);

#endif
