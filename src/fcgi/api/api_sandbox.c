/*
 * api_sandbox.c - the sandbox routes: create, list, get, delete, timeout,
 * and /healthz. Validation lives here: a request that fails it changes
 * nothing, because nothing is reserved until every field has passed.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "fork.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"
#include "sandbox.h"
#include "templates.h"
#include "volume.h"
#include "warm.h"

#define MiB (1024ULL * 1024ULL)

/*
 * Writes the public view of a sandbox (the keys of docs/API.md); on a
 * cluster node (node not NULL) also the node it runs on and whether that
 * node is up.
 */
static void sandbox_info(yajl_gen g, const struct nb_slot *s, int64_t now, const char *node, int up)
{
    char err[64];
    yajl_val meta = NULL;
    int paused = s->state == NB_SLOT_PAUSED;
    /* a paused sandbox's TTL is stopped: it expires ttl_left after a resume */
    int64_t left = paused ? s->ttl_left : s->expires > now ? s->expires - now : 0;
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxId", s->id);
    nb_json_kv_str(g, "status", paused ? "paused" : "running");
    nb_json_kv_str(g, "state", paused ? "paused" : "running");
    nb_json_kv_str(g, "image", s->image);
    nb_json_kv_int(g, "created_at", s->created);
    nb_json_kv_int(g, "expires_at", now + left);
    nb_json_kv_int(g, "ttl", now + left - s->created); /* lifetime granted so far */
    nb_json_kv_int(g, "ttl_remaining", left);
    if (paused) {
        nb_json_kv_int(g, "paused_at", s->state_since);
        nb_json_kv_int(g, "pause_expires_at", s->pause_expires);
        /* paused without its memory: no container, its files saved; a resume boots afresh */
        nb_json_kv_bool(g, "memory_released", (s->lifecycle & NB_LIFE_RELEASED) != 0);
    }
    nb_json_kv_bool(g, "pause_keep_memory", (s->lifecycle & NB_LIFE_PAUSE_COLD) == 0);
    nb_json_kv_int(g, "idle_pause", s->idle_pause);
    nb_json_kv_bool(g, "auto_resume", (s->lifecycle & NB_LIFE_AUTO_RESUME) != 0);
    nb_json_kv_str(g, "on_timeout", s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT ? "pause" : "destroy");
    nb_json_kv_int(g, "memory", (long long)s->memory);
    nb_json_kv_double(g, "cpus", (double)s->nano_cpus / 1e9);
    nb_json_kv_int(g, "pids", s->pids);
    nb_json_kv_str(g, "network", s->network_bridge ? "bridge" : "none");
    nb_json_kv_str(g, "owner", s->owner); /* the name of the key that created it */
    if (node != NULL) {
        nb_json_kv_str(g, "node", node);
        nb_json_kv_bool(g, "node_up", up);
    }
    nb_json_cstr(g, "metadata");
    if (nb_json_parse(s->metadata, strlen(s->metadata), 4, &meta, err, sizeof(err)) == 0 && meta)
        nb_json_tree(g, meta);
    else {
        yajl_gen_map_open(g);
        yajl_gen_map_close(g);
    }
    yajl_tree_free(meta);
    yajl_gen_map_close(g);
}

/* This node's name in a sandbox's view: on a cluster node only. */
static const char *self_node(const struct nb_app *a)
{
    return a->conf.etcd_endpoints[0] != '\0' ? a->conf.node_name : NULL;
}

int api_healthz(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    int docker_ok = nb_docker_ping(&a->docker, &de) == 0;
    uint32_t used, warm = 0;
    struct nb_warm_pool pools[NB_METRICS_WARM_KINDS];
    unsigned n_pools;
    yajl_gen g = nb_json_gen();
    nb_table_lock(&a->table);
    used = nb_table_count(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++)
        warm += a->table.slots[i].state == NB_SLOT_POOLED;
    nb_table_unlock(&a->table);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "status", "ok");
    nb_json_kv_bool(g, "docker", docker_ok);
    if (!docker_ok)
        nb_json_kv_str(g, "docker_error", de.msg);
    nb_json_kv_int(g, "sandboxes", used);
    nb_json_kv_int(g, "capacity", a->table.nslots);
    nb_json_kv_int(g, "warm", warm);
    if (a->conf.node_name[0] != '\0') {
        /* a cluster node: who it is and whether etcd has it (member.c); not
         * its node_url: /healthz answers anyone, and that address is internal */
        const struct nb_mcluster *mc = nb_metrics ? &nb_metrics->cluster : NULL;
        uint32_t st = mc ? __atomic_load_n(&mc->state, __ATOMIC_RELAXED) : NB_MEMBER_OFF;
        nb_json_cstr(g, "node");
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "name", a->conf.node_name);
        nb_json_kv_str(g, "tag", a->node_tag);
        nb_json_kv_str(g, "cluster", nb_metrics_member_name((enum nb_member_state)st));
        nb_json_kv_bool(g, "drain", nb_cluster_draining(&a->conf));
        if (mc != NULL)
            nb_json_kv_int(g, "renewed", __atomic_load_n(&mc->renewed, __ATOMIC_RELAXED));
        yajl_gen_map_close(g);
    }
    /* each warm pool: its size now, between floor and ceiling, and its demand */
    n_pools = nb_warm_pools(a, pools, NB_METRICS_WARM_KINDS);
    nb_json_cstr(g, "pools");
    yajl_gen_array_open(g);
    for (unsigned i = 0; i < n_pools; i++) {
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "image", pools[i].image);
        nb_json_kv_str(g, "layout", pools[i].layout);
        if (pools[i].tpl[0])
            nb_json_kv_str(g, "template", pools[i].tpl);
        nb_json_kv_int(g, "floor", pools[i].floor);
        nb_json_kv_int(g, "ceiling", pools[i].ceiling);
        nb_json_kv_int(g, "target", pools[i].target);
        nb_json_kv_int(g, "ready", pools[i].ready);
        nb_json_kv_int(g, "hits", (long long)pools[i].hits);
        nb_json_kv_int(g, "misses", (long long)pools[i].misses);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    (void)ra;
    (void)ae;
    return NB_OK;
}

int api_sandbox_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"image", NB_JT_STRING, NULL},
        {"ttl", NB_JT_INT, NULL},
        {"memory", NB_JT_INT | NB_JT_STRING, NULL},
        {"cpus", NB_JT_NUMBER, NULL},
        {"pids", NB_JT_INT, NULL},
        {"env", NB_JT_OBJECT, NULL},
        {"network", NB_JT_STRING | NB_JT_OBJECT, NULL},
        {"metadata", NB_JT_OBJECT, NULL},
        {"auto_resume", NB_JT_BOOL, NULL},
        {"template", NB_JT_STRING, NULL},
        {"on_timeout", NB_JT_STRING, NULL},
        {"volumes", NB_JT_ARRAY, NULL},
        {"idle_pause", NB_JT_INT, NULL},
        {"pause_keep_memory", NB_JT_BOOL, NULL},
    };
    enum {
        F_IMAGE,
        F_TTL,
        F_MEMORY,
        F_CPUS,
        F_PIDS,
        F_ENV,
        F_NETWORK,
        F_METADATA,
        F_AUTO_RESUME,
        F_TEMPLATE,
        F_ON_TIMEOUT,
        F_VOLUMES,
        F_IDLE_PAUSE,
        F_PAUSE_KEEP_MEMORY
    };
    struct nb_volume_mount vm[NB_VOLUMES_PER_SANDBOX];
    int vlock = -1, late = 0;
    struct nb_sandbox_spec spec;
    struct nb_slot slot;
    char err[256];
    yajl_val body = NULL;
    yajl_gen g;
    int rc = NB_ERR;

    (void)ra;
    memset(&spec, 0, sizeof(spec));
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    /* on a cluster: the better of two nodes (of those that have the
     * template ready: the operator's by its name, a key's as owner/name) */
    /* one that mounts volumes goes to their node (api_volfwd.c) */
    if (f[F_VOLUMES].val != NULL) {
        int placed = api_place_volumes(a, r, f[F_VOLUMES].val, ae);
        if (placed != 0) {
            rc = placed > 0 ? NB_OK : NB_ERR;
            goto out;
        }
    } else if (f[F_TEMPLATE].val == NULL || YAJL_IS_STRING(f[F_TEMPLATE].val)) {
        const char *tn = f[F_TEMPLATE].val ? nb_json_string(f[F_TEMPLATE].val) : NULL;
        if (api_place_create(a, r, "/sandbox", tn)) {
            rc = NB_OK;
            goto out;
        }
    }

    snprintf(spec.image, sizeof(spec.image), "%s", c->images[0]);
    if (f[F_IMAGE].val && f[F_TEMPLATE].val) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "give image or template, not both");
        goto out;
    }
    if (f[F_TEMPLATE].val &&
        nb_template_image(a, nb_json_string(f[F_TEMPLATE].val), nb_http_key(r)->name, spec.image,
                          sizeof(spec.image), ae) != 0)
        goto out;
    if (f[F_IMAGE].val) {
        const char *img = nb_json_string(f[F_IMAGE].val);
        /* the allow-list: the operator's images and the ready templates */
        if (!nb_template_image_allowed(a, img, nb_http_list_owner(r, NULL))) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                          "image \"%.100s\" is not in the operator's allow-list", img);
            goto out;
        }
        snprintf(spec.image, sizeof(spec.image), "%s", img);
    }

    spec.ttl = c->default_ttl;
    if (f[F_TTL].val) {
        long long ttl = nb_json_int(f[F_TTL].val);
        if (ttl <= 0 || ttl > (long long)c->max_ttl) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "ttl must be between 1 and %u seconds (max_ttl)", c->max_ttl);
            goto out;
        }
        spec.ttl = (unsigned)ttl;
    }

    spec.memory = c->memory;
    if (f[F_MEMORY].val) {
        uint64_t m;
        if (api_memory_value(f[F_MEMORY].val, &m) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "memory must be bytes or a size like \"128m\"");
            goto out;
        }
        if (m < 6 * MiB || m > c->memory) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "memory must be between 6m and %llu bytes (the operator's limit)",
                          (unsigned long long)c->memory);
            goto out;
        }
        spec.memory = m;
    }

    spec.nano_cpus = c->nano_cpus;
    if (f[F_CPUS].val) {
        double cpus = nb_json_double(f[F_CPUS].val);
        if (!(cpus >= 0.01) || cpus * 1e9 > (double)c->nano_cpus + 0.5) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "cpus must be between 0.01 and %g (the operator's limit)",
                          (double)c->nano_cpus / 1e9);
            goto out;
        }
        spec.nano_cpus = (uint64_t)(cpus * 1e9 + 0.5);
    }

    spec.pids = c->pids;
    if (f[F_PIDS].val) {
        long long pids = nb_json_int(f[F_PIDS].val);
        if (pids < 8 || pids > c->pids) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "pids must be between 8 and %lld (the operator's limit)",
                          (long long)c->pids);
            goto out;
        }
        spec.pids = pids;
    }

    if (api_network_value(c, f[F_NETWORK].val, &spec.network_bridge, &spec.egress, ae) != 0)
        goto out;

    if (api_metadata_text(c, f[F_METADATA].val, spec.metadata, sizeof(spec.metadata), ae) != 0 ||
        api_env_list(c, f[F_ENV].val, &spec.env, &spec.n_env, ae) != 0)
        goto out;

    if (f[F_AUTO_RESUME].val != NULL && YAJL_IS_TRUE(f[F_AUTO_RESUME].val))
        spec.lifecycle |= NB_LIFE_AUTO_RESUME;
    if (f[F_ON_TIMEOUT].val != NULL) {
        const char *ot = nb_json_string(f[F_ON_TIMEOUT].val);
        if (!strcmp(ot, "pause"))
            spec.lifecycle |= NB_LIFE_PAUSE_ON_TIMEOUT;
        else if (strcmp(ot, "destroy") != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "on_timeout is \"destroy\" or \"pause\"");
            goto out;
        }
    }

    if (f[F_PAUSE_KEEP_MEMORY].val != NULL && YAJL_IS_FALSE(f[F_PAUSE_KEEP_MEMORY].val))
        spec.lifecycle |= NB_LIFE_PAUSE_COLD;
    spec.idle_pause = c->idle_pause;
    if (f[F_IDLE_PAUSE].val != NULL) {
        long long idle = nb_json_int(f[F_IDLE_PAUSE].val);
        if (idle != 0 && (idle < 60 || idle > (long long)c->max_ttl)) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "idle_pause is 0 (never) or between 60 and %u seconds (max_ttl)",
                          c->max_ttl);
            goto out;
        }
        spec.idle_pause = idle;
    }

    spec.key = nb_http_key(r); /* its owner, and whose quotas it counts against */
    spec.volumes = vm;
    if (nb_volume_prepare_json(a, spec.key->name, nb_isolation_workspace(c, spec.lifecycle),
                               f[F_VOLUMES].val, vm, &spec.n_volumes, &vlock, ae) != 0)
        goto out;
    spec.register_late = &late;
    if (nb_sandbox_create(a, &spec, &slot, ae) != 0)
        goto out;
    api_register_late(a, r, late, &slot);
    nb_http_audit(r, "create", slot.id);
    g = nb_json_gen();
    sandbox_info(g, &slot, nb_clock_real_s(), self_node(a), 1);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    nb_volume_release(vlock);
    api_env_free(spec.env, spec.n_env);
    yajl_tree_free(body);
    return rc;
}

struct list_filter {
    char owner[NB_OWNER_LEN + 1]; /* ?owner=NAME (an admin's filter) */
    char keys[16][128];
    char values[16][256];
    unsigned n;
    int bad;
};

static int list_filter_cb(void *arg, const char *k, const char *v)
{
    struct list_filter *lf = arg;
    if (!strcmp(k, "owner")) {
        snprintf(lf->owner, sizeof(lf->owner), "%s", v);
        return 0;
    }
    if (strncmp(k, "metadata.", 9) != 0 || k[9] == '\0') {
        lf->bad = 1;
        return -1;
    }
    if (lf->n == 16) {
        lf->bad = 2;
        return -1;
    }
    snprintf(lf->keys[lf->n], sizeof(lf->keys[0]), "%s", k + 9);
    snprintf(lf->values[lf->n], sizeof(lf->values[0]), "%s", v);
    lf->n++;
    return 0;
}

int api_sandbox_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    struct list_filter lf;
    struct nb_sandbox_list l;
    const char *owner;
    uint32_t n = 0;
    int64_t now = nb_clock_real_s();
    yajl_gen g;

    (void)ra;
    memset(&lf, 0, sizeof(lf));
    nb_http_query_each(r, list_filter_cb, &lf);
    if (lf.bad) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      lf.bad == 1
                          ? "the only filters are metadata.<key>=<value> and owner=<key name>"
                          : "at most 16 metadata filters");
        return NB_ERR;
    }
    /* a user key lists its own sandboxes; an admin all, or one owner's */
    owner = nb_http_list_owner(r, lf.owner);
    /* this node's from its table; on a cluster node every other node's
     * from the registry, each with its node and whether that node is up */
    nb_registry_list(a, owner, now, &l);

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "sandboxes");
    yajl_gen_array_open(g);
    for (uint32_t i = 0; i < l.n; i++)
        if (api_metadata_matches(l.v[i].metadata, (const char(*)[128])lf.keys,
                                 (const char(*)[256])lf.values, lf.n)) {
            sandbox_info(g, &l.v[i], now, l.cluster ? l.node[i] : NULL, l.up[i]);
            n++;
        }
    yajl_gen_array_close(g);
    if (l.cluster && l.partial)
        nb_json_kv_bool(g, "partial", 1); /* the registry could not be read: this node's only */
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    nb_registry_list_free(&l);
    (void)n;
    return NB_OK;
}

int api_sandbox_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_gen g;
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    sandbox_info(g, &slot, nb_clock_real_s(), self_node(a), 1);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_sandbox_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    if (nb_sandbox_destroy(a, ra->id, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "destroy", ra->id);
    nb_metrics_destroy(NB_MD_API);
    nb_http_no_content(r);
    return NB_OK;
}

/* The body of pause and resume: none, or an empty JSON object. */
static int no_fields(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae)
{
    char err[256];
    yajl_val body = NULL;
    int rc = 0;

    if (api_read_json(a, r, &body, ae) != 0)
        return -1;
    if (nb_json_fields(body, NULL, 0, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s (this call takes no fields)", err);
        rc = -1;
    }
    yajl_tree_free(body);
    return rc;
}

/* The body of pause: none, or {"keep_memory": bool} (true when absent). */
static int pause_fields(struct nb_app *a, struct nb_req *r, int *keep_memory, struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"keep_memory", NB_JT_BOOL, NULL}};
    char err[256];
    yajl_val body = NULL;
    int rc = 0;

    if (api_read_json(a, r, &body, ae) != 0)
        return -1;
    if (nb_json_fields(body, f, 1, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        rc = -1;
    }
    *keep_memory = f[0].val == NULL || YAJL_IS_TRUE(f[0].val);
    yajl_tree_free(body);
    return rc;
}

/* POST /sandbox/{id}/pause and /resume: the sandbox as it is after (200 even if it already was). */
static int pause_or_resume(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                           struct nb_apierr *ae, int pause)
{
    struct nb_slot slot;
    yajl_gen g;
    int keep_memory = 1;

    if ((pause ? pause_fields(a, r, &keep_memory, ae) : no_fields(a, r, ae)) != 0)
        return NB_ERR;
    if ((pause ? nb_sandbox_pause_how(a, ra->id, keep_memory, &slot, ae)
               : nb_sandbox_resume(a, ra->id, &slot, ae)) != 0)
        return NB_ERR;
    nb_http_audit(r, pause ? "pause" : "resume", ra->id);
    g = nb_json_gen();
    sandbox_info(g, &slot, nb_clock_real_s(), self_node(a), 1);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_sandbox_pause(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    return pause_or_resume(a, r, ra, ae, 1);
}

int api_sandbox_resume(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    return pause_or_resume(a, r, ra, ae, 0);
}

int api_sandbox_timeout(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"ttl", NB_JT_INT, NULL}};
    char err[256];
    yajl_val body = NULL;
    int64_t expires;
    long long ttl;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, 1, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[0].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "field \"ttl\" (seconds from now) is required");
        goto out;
    }
    ttl = nb_json_int(f[0].val);
    if (ttl <= 0 || ttl > (long long)a->conf.max_ttl) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "ttl must be between 1 and %u seconds (max_ttl)", a->conf.max_ttl);
        goto out;
    }
    if (nb_sandbox_extend(a, ra->id, (unsigned)ttl, &expires, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxId", ra->id);
    nb_json_kv_int(g, "expires_at", expires);
    nb_json_kv_int(g, "ttl", ttl);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* PUT /sandbox/{id}/network: a running bridge sandbox's new egress policy. */
int api_sandbox_network(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_net_policy p;
    yajl_val body = NULL;
    yajl_gen g;
    int bridge = 0, rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (body == NULL || !YAJL_IS_OBJECT(body)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_json",
                      "the body must be a network object: {\"allow\": [...], \"deny\": [...]}");
        goto out;
    }
    if (api_network_value(&a->conf, body, &bridge, &p, ae) != 0)
        goto out;
    if (!bridge) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "bad_rule",
                      "a running sandbox's network mode cannot change; "
                      "only a bridge sandbox's allow and deny can");
        goto out;
    }
    if (nb_network_set_policy(a, ra->id, &p, ae) != 0)
        goto out;
    g = nb_json_gen();
    api_network_json(g, ra->id, &p);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* POST /sandbox/{id}/fork {count?, ttl?}: 201 {"sandboxes": [...]}, the new ones. */
int api_sandbox_fork(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {{"count", NB_JT_INT, NULL}, {"ttl", NB_JT_INT, NULL}};
    struct nb_slot *made = NULL;
    char err[256];
    yajl_val body = NULL;
    long long count = 1, ttl = c->default_ttl;
    int64_t now;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, 2, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[0].val != NULL)
        count = nb_json_int(f[0].val);
    if (count < 1 || count > (long long)c->fork_max) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "count must be between 1 and %u (the operator's fork_max)", c->fork_max);
        goto out;
    }
    if (f[1].val != NULL)
        ttl = nb_json_int(f[1].val);
    if (ttl <= 0 || ttl > (long long)c->max_ttl) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "ttl must be between 1 and %u seconds (max_ttl)", c->max_ttl);
        goto out;
    }
    made = nb_xcalloc((size_t)count, sizeof(*made));
    if (nb_sandbox_fork(a, ra->id, (unsigned)count, (unsigned)ttl, nb_http_key(r), made, ae) != 0)
        goto out;
    now = nb_clock_real_s();
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "parent", ra->id);
    nb_json_cstr(g, "sandboxes");
    yajl_gen_array_open(g);
    for (long long i = 0; i < count; i++) {
        nb_http_audit(r, "fork", made[i].id);
        sandbox_info(g, &made[i], now, self_node(a), 1);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    free(made);
    yajl_tree_free(body);
    return rc;
}
