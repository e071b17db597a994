/*
 * metrics.c - see metrics.h. Recording is a handful of relaxed atomic
 * adds on the shared block; rendering reads each number once with an
 * atomic load, so a scrape during traffic sees every counter as it was at
 * some moment of the scrape (a histogram's _count is the sum of the
 * buckets it printed, so the two always agree).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "clock.h"
#include "metrics.h"

struct nb_metrics *nb_metrics;

/* Upper bounds in microseconds, and as the le labels print them. */
static const int64_t hist_bound_us[NB_HIST_BOUNDS] = {
    1000,   2500,    5000,    10000,   25000,    50000,    100000,   250000,
    500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000};
static const char *const hist_bound_txt[NB_HIST_BOUNDS] = {
    "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
    "0.5",   "1",      "2.5",   "5",    "10",    "30",   "60",  "300"};

static const char *const route_names[NB_MR_N] = {
    [NB_MR_CREATE] = "create",
    [NB_MR_LIST] = "list",
    [NB_MR_GET] = "get",
    [NB_MR_DESTROY] = "destroy",
    [NB_MR_TIMEOUT] = "timeout",
    [NB_MR_PAUSE] = "pause",
    [NB_MR_RESUME] = "resume",
    [NB_MR_NETWORK] = "network",
    [NB_MR_EXEC] = "exec",
    [NB_MR_RUN] = "run",
    [NB_MR_FILES] = "files",
    [NB_MR_PROCESSES] = "processes",
    [NB_MR_CODE] = "code",
    [NB_MR_CONTEXTS] = "contexts",
    [NB_MR_PORTS] = "ports",
    [NB_MR_MCP] = "mcp",
    [NB_MR_SANDBOX_METRICS] = "sandbox_metrics",
    [NB_MR_HEALTHZ] = "healthz",
    [NB_MR_METRICS] = "metrics",
    [NB_MR_OTHER] = "other",
};

static const char *const docker_names[NB_MDK_N] = {
    [NB_MDK_PING] = "ping",
    [NB_MDK_CREATE] = "create",
    [NB_MDK_START] = "start",
    [NB_MDK_INSPECT] = "inspect",
    [NB_MDK_REMOVE] = "remove",
    [NB_MDK_LIST] = "list",
    [NB_MDK_PAUSE] = "pause",
    [NB_MDK_UNPAUSE] = "unpause",
    [NB_MDK_EXEC_CREATE] = "exec_create",
    [NB_MDK_EXEC_START] = "exec_start",
    [NB_MDK_EXEC_INSPECT] = "exec_inspect",
    [NB_MDK_NETWORK] = "network",
    [NB_MDK_OTHER] = "other",
};

static const char *const docker_err_names[NB_MDE_N] = {
    [NB_MDE_UNREACHABLE] = "unreachable",
    [NB_MDE_TIMEOUT] = "timeout",
    [NB_MDE_PROTO] = "bad_answer",
    [NB_MDE_SERVER] = "server_error",
};

static const char *const create_names[NB_MC_N] = {[NB_MC_COLD] = "cold", [NB_MC_WARM] = "warm"};

static const char *const destroy_names[NB_MD_N] = {
    [NB_MD_API] = "api",
    [NB_MD_RUN] = "run",
    [NB_MD_EXPIRED] = "expired",
    [NB_MD_PAUSE_EXPIRED] = "pause_expired",
    [NB_MD_STOPPED] = "stopped",
    [NB_MD_VANISHED] = "vanished",
    [NB_MD_ABANDONED] = "abandoned",
    [NB_MD_WARM_POOL] = "warm_pool",
    [NB_MD_ROOT_DISK] = "root_disk",
};

int nb_metrics_map(char *err, size_t errlen)
{
    void *p = mmap(NULL, sizeof(struct nb_metrics), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map the metrics block: %s", strerror(errno));
        return -1;
    }
    memset(p, 0, sizeof(struct nb_metrics));
    nb_metrics = p;
    nb_metrics->started = nb_clock_real_s();
    return 0;
}

void nb_metrics_unmap(void)
{
    if (nb_metrics != NULL)
        munmap(nb_metrics, sizeof(*nb_metrics));
    nb_metrics = NULL;
}

int64_t nb_metrics_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void add(uint64_t *c, uint64_t n)
{
    __atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void nb_hist_observe(struct nb_hist *h, int64_t us)
{
    unsigned i = 0;

    if (us < 0)
        us = 0;
    while (i < NB_HIST_BOUNDS && us > hist_bound_us[i])
        i++;
    add(&h->bucket[i], 1);
    add(&h->sum_us, (uint64_t)us);
}

void nb_metrics_route(enum nb_mroute r, int64_t us)
{
    if (nb_metrics != NULL && (unsigned)r < NB_MR_N)
        nb_hist_observe(&nb_metrics->route[r], us);
}

void nb_metrics_docker(enum nb_mdocker op, int64_t us, int err)
{
    if (nb_metrics == NULL || (unsigned)op >= NB_MDK_N)
        return;
    nb_hist_observe(&nb_metrics->docker[op], us);
    if (err >= 0 && err < NB_MDE_N)
        add(&nb_metrics->docker_errors[op][err], 1);
}

void nb_metrics_create(enum nb_mcreate source)
{
    if (nb_metrics != NULL && (unsigned)source < NB_MC_N)
        add(&nb_metrics->creates[source], 1);
}

void nb_metrics_destroy(enum nb_mdestroy cause)
{
    if (nb_metrics != NULL && (unsigned)cause < NB_MD_N)
        add(&nb_metrics->destroys[cause], 1);
}

void nb_metrics_warm(int hit)
{
    if (nb_metrics != NULL)
        add(hit ? &nb_metrics->warm_hits : &nb_metrics->warm_misses, 1);
}

void nb_metrics_reconciled(int64_t now)
{
    if (nb_metrics == NULL)
        return;
    add(&nb_metrics->reconciles, 1);
    __atomic_store_n(&nb_metrics->reconciled, now, __ATOMIC_RELAXED);
}

void nb_metrics_member(enum nb_member_state state, int renewed, int64_t now)
{
    if (nb_metrics == NULL)
        return;
    if (state == NB_MEMBER_JOINED &&
        __atomic_load_n(&nb_metrics->cluster.state, __ATOMIC_RELAXED) != NB_MEMBER_JOINED)
        __atomic_store_n(&nb_metrics->cluster.joined, now, __ATOMIC_RELAXED);
    if (renewed)
        __atomic_store_n(&nb_metrics->cluster.renewed, now, __ATOMIC_RELAXED);
    __atomic_store_n(&nb_metrics->cluster.state, (uint32_t)state, __ATOMIC_RELAXED);
}

void nb_metrics_nodes(const struct nb_mnode *nodes, uint32_t n, int64_t now)
{
    struct nb_mcluster *c;
    uint32_t keep = n < NB_METRICS_NODES ? n : NB_METRICS_NODES;
    if (nb_metrics == NULL)
        return;
    c = &nb_metrics->cluster;
    __atomic_add_fetch(&c->nodes_seq, 1, __ATOMIC_ACQ_REL); /* odd: being written */
    memcpy(c->node, nodes, keep * sizeof(*nodes));
    c->nodes_up = n;
    c->nodes_seen = keep;
    c->nodes_read = now;
    __atomic_add_fetch(&c->nodes_seq, 1, __ATOMIC_ACQ_REL);
}

int nb_metrics_nodes_copy(struct nb_mcluster *out)
{
    const struct nb_mcluster *c;
    int tries = 0;
    uint32_t seq;
    if (nb_metrics == NULL)
        return -1;
    c = &nb_metrics->cluster;
    /* copied whole between two equal even sequence counts */
    do {
        seq = __atomic_load_n(&c->nodes_seq, __ATOMIC_ACQUIRE);
        memcpy(out, c, sizeof(*out));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (((seq & 1) || seq != __atomic_load_n(&c->nodes_seq, __ATOMIC_ACQUIRE)) &&
             ++tries < 100);
    if (tries == 100 || out->nodes_read == 0)
        return -1;
    for (uint32_t i = 0; i < out->nodes_seen && i < NB_METRICS_NODES; i++) {
        out->node[i].name[sizeof(out->node[i].name) - 1] = '\0';
        out->node[i].url[sizeof(out->node[i].url) - 1] = '\0';
    }
    return 0;
}

void nb_metrics_etcd(int failed)
{
    if (nb_metrics == NULL)
        return;
    add(&nb_metrics->cluster.etcd_calls, 1);
    if (failed)
        add(&nb_metrics->cluster.etcd_failures, 1);
}

const char *nb_metrics_member_name(enum nb_member_state state)
{
    static const char *const names[NB_MEMBER_N] = {
        [NB_MEMBER_OFF] = "off",
        [NB_MEMBER_JOINING] = "joining",
        [NB_MEMBER_JOINED] = "member",
        [NB_MEMBER_UNREACHABLE] = "etcd_unreachable",
        [NB_MEMBER_CONFLICT] = "name_conflict",
    };
    return (unsigned)state < NB_MEMBER_N ? names[state] : "off";
}

void nb_metrics_warm_take(unsigned kind, int hit, int64_t now_ms)
{
    struct nb_mwarm *w;
    if (nb_metrics == NULL || kind >= NB_METRICS_WARM_KINDS)
        return;
    w = &nb_metrics->warm[kind];
    add(hit ? &w->hits : &w->misses, 1);
    __atomic_store_n(&w->last_take_ms, now_ms, __ATOMIC_RELAXED);
}

void nb_metrics_warm_target(unsigned kind, unsigned target)
{
    if (nb_metrics == NULL || kind >= NB_METRICS_WARM_KINDS)
        return;
    __atomic_store_n(&nb_metrics->warm[kind].target, target, __ATOMIC_RELAXED);
    __atomic_store_n(&nb_metrics->warm[kind].published, 1, __ATOMIC_RELAXED);
}

void nb_metrics_warm_read(unsigned kind, struct nb_mwarm *out)
{
    const struct nb_mwarm *w;
    memset(out, 0, sizeof(*out));
    if (nb_metrics == NULL || kind >= NB_METRICS_WARM_KINDS)
        return;
    w = &nb_metrics->warm[kind];
    out->hits = load(&w->hits);
    out->misses = load(&w->misses);
    out->last_take_ms = __atomic_load_n(&w->last_take_ms, __ATOMIC_RELAXED);
    out->target = __atomic_load_n(&w->target, __ATOMIC_RELAXED);
    out->published = __atomic_load_n(&w->published, __ATOMIC_RELAXED);
}

void nb_metrics_workers(unsigned alive, unsigned busy)
{
    if (nb_metrics == NULL)
        return;
    __atomic_store_n(&nb_metrics->workers_alive, alive, __ATOMIC_RELAXED);
    __atomic_store_n(&nb_metrics->workers_busy, busy, __ATOMIC_RELAXED);
}

/* A code slug as stored: [a-z0-9_] only, cut to fit, "unknown" if empty. */
static void code_clean(char out[NB_METRICS_CODE_LEN], const char *code)
{
    size_t n = 0;

    for (; code != NULL && code[n] && n < NB_METRICS_CODE_LEN - 1; n++) {
        char c = code[n];
        out[n] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ? c : '_';
    }
    out[n] = '\0';
    if (n == 0)
        snprintf(out, NB_METRICS_CODE_LEN, "unknown");
}

/*
 * The (status, code) pairs are claimed once each, in order, by whichever
 * process meets them first. Two processes meeting a new pair at once may
 * claim two entries for it: rendering adds those up, so no lock is needed.
 */
void nb_metrics_error(int status, const char *code)
{
    char key[NB_METRICS_CODE_LEN];

    if (nb_metrics == NULL)
        return;
    code_clean(key, code);
    for (unsigned i = 0; i < NB_METRICS_ERRORS; i++) {
        struct nb_merror *e = &nb_metrics->errors[i];
        uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (st == 0) {
            uint32_t expect = 0;
            if (!__atomic_compare_exchange_n(&e->state, &expect, 1, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                st = expect;
            } else {
                e->status = (uint32_t)status;
                memcpy(e->code, key, sizeof(e->code));
                __atomic_store_n(&e->state, 2, __ATOMIC_RELEASE);
                add(&e->count, 1);
                return;
            }
        }
        if (st == 2 && e->status == (uint32_t)status && !strcmp(e->code, key)) {
            add(&e->count, 1);
            return;
        }
    }
    add(&nb_metrics->errors_other, 1);
}

/* The path after "/containers/<id>" or "/exec/<id>": "" or "/start" and so on. */
static const char *after_id(const char *p)
{
    const char *slash = strchr(p, '/');
    const char *q = strchr(p, '?');
    if (slash == NULL || (q != NULL && q < slash))
        return "";
    return slash;
}

/* Does s start with word, followed by its end, a '?' or nothing more? */
static int is(const char *s, const char *word)
{
    size_t n = strlen(word);
    return !strncmp(s, word, n) && (s[n] == '\0' || s[n] == '?');
}

enum nb_mdocker nb_metrics_docker_op(const char *method, const char *path)
{
    const char *rest;

    if (is(path, "/_ping"))
        return NB_MDK_PING;
    if (!strncmp(path, "/networks", 9))
        return NB_MDK_NETWORK;
    if (!strncmp(path, "/exec/", 6)) {
        rest = after_id(path + 6);
        if (is(rest, "/start"))
            return NB_MDK_EXEC_START;
        if (is(rest, "/json"))
            return NB_MDK_EXEC_INSPECT;
        return NB_MDK_OTHER;
    }
    if (strncmp(path, "/containers/", 12) != 0)
        return NB_MDK_OTHER;
    path += 12;
    if (is(path, "create"))
        return NB_MDK_CREATE;
    if (is(path, "json"))
        return NB_MDK_LIST;
    rest = after_id(path);
    if (rest[0] == '\0' || rest[0] == '?')
        return !strcmp(method, "DELETE") ? NB_MDK_REMOVE : NB_MDK_OTHER;
    if (is(rest, "/start"))
        return NB_MDK_START;
    if (is(rest, "/json"))
        return NB_MDK_INSPECT;
    if (is(rest, "/pause"))
        return NB_MDK_PAUSE;
    if (is(rest, "/unpause"))
        return NB_MDK_UNPAUSE;
    if (is(rest, "/exec"))
        return NB_MDK_EXEC_CREATE;
    return NB_MDK_OTHER;
}

const char *nb_metrics_route_name(enum nb_mroute r)
{
    return (unsigned)r < NB_MR_N ? route_names[r] : "other";
}

void nb_metrics_family(struct nb_buf *out, const char *name, const char *type, const char *help)
{
    nb_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void nb_metrics_label(struct nb_buf *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            nb_buf_append(out, "\\\\", 2);
        else if (*v == '"')
            nb_buf_append(out, "\\\"", 2);
        else if (*v == '\n')
            nb_buf_append(out, "\\n", 2);
        else
            nb_buf_append(out, v, 1);
    }
}

static uint64_t hist_count(const struct nb_hist *h)
{
    uint64_t n = 0;
    for (unsigned i = 0; i <= NB_HIST_BOUNDS; i++)
        n += load(&h->bucket[i]);
    return n;
}

/* One histogram's series under name, with the label lname="lvalue". */
static void hist_render(struct nb_buf *out, const char *name, const char *lname, const char *lvalue,
                        const struct nb_hist *h)
{
    uint64_t cum = 0;
    uint64_t sum = load(&h->sum_us);

    for (unsigned i = 0; i <= NB_HIST_BOUNDS; i++) {
        cum += load(&h->bucket[i]);
        nb_buf_printf(out, "%s_bucket{%s=\"%s\",le=\"%s\"} %llu\n", name, lname, lvalue,
                      i < NB_HIST_BOUNDS ? hist_bound_txt[i] : "+Inf", (unsigned long long)cum);
    }
    nb_buf_printf(out, "%s_sum{%s=\"%s\"} %llu.%06llu\n", name, lname, lvalue,
                  (unsigned long long)(sum / 1000000), (unsigned long long)(sum % 1000000));
    nb_buf_printf(out, "%s_count{%s=\"%s\"} %llu\n", name, lname, lvalue, (unsigned long long)cum);
}

static void render_routes(struct nb_buf *out, const struct nb_metrics *m)
{
    nb_metrics_family(out, "nanobox_request_duration_seconds", "histogram",
                      "Time from routing an API request to its answer's end, by route "
                      "(streams and files included).");
    for (unsigned r = 0; r < NB_MR_N; r++) {
        /* the calls an operator watches are always listed; the others once seen */
        int always = r == NB_MR_CREATE || r == NB_MR_EXEC || r == NB_MR_FILES || r == NB_MR_CODE;
        if (always || hist_count(&m->route[r]) > 0)
            hist_render(out, "nanobox_request_duration_seconds", "route", route_names[r],
                        &m->route[r]);
    }
}

static void render_docker(struct nb_buf *out, const struct nb_metrics *m)
{
    nb_metrics_family(out, "nanobox_docker_request_duration_seconds", "histogram",
                      "Time of each call to the Docker Engine API, by operation.");
    for (unsigned op = 0; op < NB_MDK_N; op++)
        if (hist_count(&m->docker[op]) > 0)
            hist_render(out, "nanobox_docker_request_duration_seconds", "op", docker_names[op],
                        &m->docker[op]);
    nb_metrics_family(out, "nanobox_docker_errors_total", "counter",
                      "Docker Engine API calls that failed (no answer, timeout, an answer not "
                      "understood, or a 5xx), by operation and kind.");
    for (unsigned op = 0; op < NB_MDK_N; op++)
        for (unsigned k = 0; k < NB_MDE_N; k++) {
            uint64_t n = load(&m->docker_errors[op][k]);
            if (n > 0)
                nb_buf_printf(out, "nanobox_docker_errors_total{op=\"%s\",kind=\"%s\"} %llu\n",
                              docker_names[op], docker_err_names[k], (unsigned long long)n);
        }
}

static void render_errors(struct nb_buf *out, const struct nb_metrics *m)
{
    uint64_t other = load(&m->errors_other);

    nb_metrics_family(out, "nanobox_api_errors_total", "counter",
                      "Error answers of the API, by HTTP status and error code.");
    for (unsigned i = 0; i < NB_METRICS_ERRORS; i++) {
        const struct nb_merror *e = &m->errors[i];
        uint64_t n = 0;
        int dup = 0;
        if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != 2)
            continue;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = __atomic_load_n(&m->errors[j].state, __ATOMIC_ACQUIRE) == 2 &&
                  m->errors[j].status == e->status && !strcmp(m->errors[j].code, e->code);
        if (dup)
            continue; /* added to the first entry of its pair */
        for (unsigned j = i; j < NB_METRICS_ERRORS; j++)
            if (__atomic_load_n(&m->errors[j].state, __ATOMIC_ACQUIRE) == 2 &&
                m->errors[j].status == e->status && !strcmp(m->errors[j].code, e->code))
                n += load(&m->errors[j].count);
        nb_buf_printf(out, "nanobox_api_errors_total{status=\"%u\",code=\"%s\"} %llu\n", e->status,
                      e->code, (unsigned long long)n);
    }
    if (other > 0)
        nb_buf_printf(out, "nanobox_api_errors_total{status=\"other\",code=\"other\"} %llu\n",
                      (unsigned long long)other);
}

void nb_metrics_render(struct nb_buf *out, const struct nb_metrics *m)
{
    nb_metrics_family(out, "nanobox_start_time_seconds", "gauge",
                      "When nanobox-fcgi started (unix seconds): the counters count from here.");
    nb_buf_printf(out, "nanobox_start_time_seconds %lld\n", (long long)m->started);

    nb_metrics_family(out, "nanobox_sandbox_creates_total", "counter",
                      "Sandboxes created through the API, by source (a new container, or one "
                      "taken from the warm pool).");
    for (unsigned s = 0; s < NB_MC_N; s++)
        nb_buf_printf(out, "nanobox_sandbox_creates_total{source=\"%s\"} %llu\n", create_names[s],
                      (unsigned long long)load(&m->creates[s]));
    nb_metrics_family(out, "nanobox_sandbox_destroys_total", "counter",
                      "Sandboxes destroyed, by cause (expired: their TTL ran out).");
    for (unsigned c = 0; c < NB_MD_N; c++)
        nb_buf_printf(out, "nanobox_sandbox_destroys_total{cause=\"%s\"} %llu\n", destroy_names[c],
                      (unsigned long long)load(&m->destroys[c]));

    nb_metrics_family(out, "nanobox_warm_pool_hits_total", "counter",
                      "Creates served by a ready sandbox of the warm pool.");
    nb_buf_printf(out, "nanobox_warm_pool_hits_total %llu\n",
                  (unsigned long long)load(&m->warm_hits));
    nb_metrics_family(out, "nanobox_warm_pool_misses_total", "counter",
                      "Creates the warm pool could have served but had no ready sandbox for.");
    nb_buf_printf(out, "nanobox_warm_pool_misses_total %llu\n",
                  (unsigned long long)load(&m->warm_misses));

    nb_metrics_family(out, "nanobox_reconciliations_total", "counter",
                      "Reconciliations of the table with Docker's containers (at start-up, "
                      "every 30 s, and as soon as Docker answers again after it was away).");
    nb_buf_printf(out, "nanobox_reconciliations_total %llu\n",
                  (unsigned long long)load(&m->reconciles));
    nb_metrics_family(out, "nanobox_reconciliation_last_time_seconds", "gauge",
                      "When the last reconciliation ended (unix seconds; 0: none yet).");
    nb_buf_printf(out, "nanobox_reconciliation_last_time_seconds %lld\n",
                  (long long)__atomic_load_n(&m->reconciled, __ATOMIC_RELAXED));

    nb_metrics_family(out, "nanobox_cluster_member", "gauge",
                      "1 while this node holds its lease and record in the cluster's etcd "
                      "(docs/CLUSTER.md); 0 otherwise, and always on a single machine.");
    nb_buf_printf(out, "nanobox_cluster_member %d\n",
                  __atomic_load_n(&m->cluster.state, __ATOMIC_RELAXED) == NB_MEMBER_JOINED);
    nb_metrics_family(out, "nanobox_etcd_requests_total", "counter",
                      "Calls this node made to etcd, by result (failed: no endpoint answered).");
    nb_buf_printf(
        out, "nanobox_etcd_requests_total{result=\"ok\"} %llu\n",
        (unsigned long long)(load(&m->cluster.etcd_calls) - load(&m->cluster.etcd_failures)));
    nb_buf_printf(out, "nanobox_etcd_requests_total{result=\"failed\"} %llu\n",
                  (unsigned long long)load(&m->cluster.etcd_failures));

    {
        struct nb_mcluster copy;
        if (nb_metrics_nodes_copy(&copy) == 0) {
            nb_metrics_family(out, "nanobox_cluster_nodes_up", "gauge",
                              "Nodes whose record is in the cluster's etcd, as this node last "
                              "read them (every few seconds).");
            nb_buf_printf(out, "nanobox_cluster_nodes_up %u\n", copy.nodes_up);
            nb_metrics_family(out, "nanobox_cluster_node_sandboxes", "gauge",
                              "Live sandboxes of each node, as its record says.");
            for (uint32_t i = 0; i < copy.nodes_seen && i < NB_METRICS_NODES; i++)
                nb_buf_printf(out, "nanobox_cluster_node_sandboxes{node=\"%s\"} %u\n",
                              copy.node[i].name, copy.node[i].running);
            nb_metrics_family(out, "nanobox_cluster_node_free_slots", "gauge",
                              "Slots a create can still take on each node, as its record says "
                              "(0 for a drained node).");
            for (uint32_t i = 0; i < copy.nodes_seen && i < NB_METRICS_NODES; i++)
                nb_buf_printf(out, "nanobox_cluster_node_free_slots{node=\"%s\"} %u\n",
                              copy.node[i].name, copy.node[i].drain ? 0 : copy.node[i].free);
        }
    }

    nb_metrics_family(out, "nanobox_workers", "gauge",
                      "nanobox-fcgi worker processes, busy (serving a request) or idle.");
    {
        uint32_t alive = __atomic_load_n(&m->workers_alive, __ATOMIC_RELAXED);
        uint32_t busy = __atomic_load_n(&m->workers_busy, __ATOMIC_RELAXED);
        if (busy > alive)
            busy = alive;
        nb_buf_printf(out, "nanobox_workers{state=\"busy\"} %u\n", busy);
        nb_buf_printf(out, "nanobox_workers{state=\"idle\"} %u\n", alive - busy);
    }

    render_routes(out, m);
    render_errors(out, m);
    render_docker(out, m);
}
