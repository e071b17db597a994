/*
 * api_metrics.c - GET /metrics: the service's numbers in Prometheus's text
 * format (the counters and histograms of metrics.h, and gauges read from
 * the state table now); GET /sandbox/{id}/metrics: what one sandbox uses,
 * from its cgroup and its tmpfs mounts (cgstat.h), as JSON.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_common.h"
#include "cgstat.h"
#include "clock.h"
#include "isolation.h"
#include "json.h"
#include "metrics.h"
#include "sandbox.h"
#include "usage.h"
#include "warm.h"

/* Where the host shows cgroups and processes. */

/* Longest ?interval= a CPU reading may wait, ms. */
#define CPU_INTERVAL_MAX 5000

/* The answer's cap: far above what 65536 slots of distinct images would print. */
#define METRICS_MAX (4u << 20)

static const char *const state_names[] = {
    [NB_SLOT_FREE] = "free",       [NB_SLOT_CREATING] = "creating",
    [NB_SLOT_RUNNING] = "running", [NB_SLOT_DESTROYING] = "destroying",
    [NB_SLOT_POOLED] = "pooled",   [NB_SLOT_PAUSED] = "paused",
};
#define N_STATES (sizeof(state_names) / sizeof(state_names[0]))

/* Slots counted by (state, image). */
struct census_row {
    uint32_t state;
    char image[NB_IMAGE_LEN];
    uint32_t n;
};

struct census {
    struct census_row *rows;
    size_t n;
    uint32_t free_slots, ports_open;
};

static void census_add(struct census *c, uint32_t state, const char *image, uint32_t n)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rows[i].state == state && !strcmp(c->rows[i].image, image)) {
            c->rows[i].n += n;
            return;
        }
    c->rows[c->n].state = state;
    snprintf(c->rows[c->n].image, sizeof(c->rows[c->n].image), "%s", image);
    c->rows[c->n].n = n;
    c->n++;
}

static uint32_t census_get(const struct census *c, uint32_t state, const char *image)
{
    uint32_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->rows[i].state == state && !strcmp(c->rows[i].image, image))
            n += c->rows[i].n;
    return n;
}

/*
 * Count the table: every allowed image gets a row of each state (0
 * included, so the series do not come and go), plus whatever else the
 * table holds (an image no longer allowed).
 */
static void census_take(struct nb_app *a, struct census *c)
{
    const struct nb_conf *conf = &a->conf;

    c->rows = nb_xcalloc((size_t)a->table.nslots + conf->n_images * N_STATES, sizeof(*c->rows));
    c->n = 0;
    c->free_slots = c->ports_open = 0;
    for (unsigned i = 0; i < conf->n_images; i++)
        for (uint32_t st = NB_SLOT_CREATING; st < N_STATES; st++)
            census_add(c, st, conf->images[i], 0);
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        if (s->state == NB_SLOT_FREE) {
            c->free_slots++;
            continue;
        }
        if (s->state < N_STATES)
            census_add(c, s->state, s->image, 1);
        for (unsigned p = 0; p < NB_MAX_PORTS; p++)
            c->ports_open += s->ports[p].sandboxport != 0;
    }
    nb_table_unlock(&a->table);
}

/*
 * Paused sandboxes by whether they keep their memory, and the memory they
 * hold: a frozen one its cgroup's (memory.current, read from the host), a
 * released one none (no container; its files are in its pause image).
 */
static void render_paused(struct nb_app *a, struct nb_buf *out)
{
    struct held {
        pid_t pid;
        char cid[NB_CID_LEN + 1];
    } *h = nb_xcalloc((size_t)a->table.nslots + 1, sizeof(*h));
    unsigned kept = 0, released = 0;
    uint64_t bytes = 0;

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        if (s->state != NB_SLOT_PAUSED)
            continue;
        if (s->lifecycle & NB_LIFE_RELEASED) {
            released++;
            continue;
        }
        h[kept].pid = s->init_pid;
        snprintf(h[kept].cid, sizeof(h[kept].cid), "%s", s->container_id);
        kept++;
    }
    nb_table_unlock(&a->table);
    for (unsigned i = 0; i < kept; i++) {
        struct nb_cgstat st;
        char err[128];
        if (h[i].pid > 0 &&
            nb_cgstat_read(NB_CGSTAT_PROC_ROOT, NB_CGSTAT_CG_ROOT, h[i].pid, h[i].cid, &st, err,
                           sizeof(err)) == 0 &&
            st.mem_current > 0)
            bytes += (uint64_t)st.mem_current;
    }
    free(h);
    nb_metrics_family(out, "nanobox_paused_sandboxes", "gauge",
                      "Paused sandboxes: memory=\"kept\" frozen (docker pause), \"released\" "
                      "paused without their memory (files saved, no container).");
    nb_buf_printf(out, "nanobox_paused_sandboxes{memory=\"kept\"} %u\n", kept);
    nb_buf_printf(out, "nanobox_paused_sandboxes{memory=\"released\"} %u\n", released);
    nb_metrics_family(out, "nanobox_paused_memory_bytes", "gauge",
                      "Memory the paused sandboxes hold (their cgroups' memory.current); "
                      "released ones hold none.");
    nb_buf_printf(out, "nanobox_paused_memory_bytes{memory=\"kept\"} %llu\n",
                  (unsigned long long)bytes);
    nb_buf_printf(out, "nanobox_paused_memory_bytes{memory=\"released\"} 0\n");
}

/* What each key's live sandboxes hold (their owner in the table; "" warm or made before owners). */
struct key_use {
    char owner[NB_OWNER_LEN + 8];
    struct nb_table_usage u;
};

static void render_keys(struct nb_app *a, struct nb_buf *out)
{
    struct key_use *k = nb_xcalloc((size_t)a->table.nslots + 1, sizeof(*k));
    size_t n = 0;

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        size_t j;
        if (s->owner[0] == '\0' || (s->state != NB_SLOT_CREATING && s->state != NB_SLOT_RUNNING &&
                                    s->state != NB_SLOT_PAUSED))
            continue;
        for (j = 0; j < n && strcmp(k[j].owner, s->owner) != 0; j++)
            ;
        if (j == n) {
            snprintf(k[n].owner, sizeof(k[n].owner), "%s", s->owner);
            nb_table_usage(&a->table, s->owner, &k[n].u);
            n++;
        }
    }
    nb_table_unlock(&a->table);
    nb_metrics_family(out, "nanobox_key_sandboxes", "gauge",
                      "Live sandboxes of each API key (keys file; \"default\": api_key).");
    for (size_t j = 0; j < n; j++) {
        nb_buf_printf(out, "nanobox_key_sandboxes{key=\"");
        nb_metrics_label(out, k[j].owner);
        nb_buf_printf(out, "\"} %u\n", k[j].u.sandboxes);
    }
    nb_metrics_family(out, "nanobox_key_memory_bytes", "gauge",
                      "Memory limits of each API key's live sandboxes, summed (max_memory).");
    for (size_t j = 0; j < n; j++) {
        nb_buf_printf(out, "nanobox_key_memory_bytes{key=\"");
        nb_metrics_label(out, k[j].owner);
        nb_buf_printf(out, "\"} %llu\n", (unsigned long long)k[j].u.memory);
    }
    nb_metrics_family(out, "nanobox_key_cpus", "gauge",
                      "CPUs of each API key's live sandboxes, summed (max_cpus).");
    for (size_t j = 0; j < n; j++) {
        nb_buf_printf(out, "nanobox_key_cpus{key=\"");
        nb_metrics_label(out, k[j].owner);
        nb_buf_printf(out, "\"} %.3f\n", (double)k[j].u.nano_cpus / 1e9);
    }
    nb_metrics_family(out, "nanobox_key_ports_open", "gauge",
                      "Open ports of each API key's sandboxes (max_ports).");
    for (size_t j = 0; j < n; j++) {
        nb_buf_printf(out, "nanobox_key_ports_open{key=\"");
        nb_metrics_label(out, k[j].owner);
        nb_buf_printf(out, "\"} %u\n", k[j].u.ports);
    }
    free(k);
}

/* {image="…",layout="…"} of a pool, and its template's name when it has one */
static void pool_labels(struct nb_buf *out, const char *name, const struct nb_warm_pool *p)
{
    nb_buf_printf(out, "%s{image=\"", name);
    nb_metrics_label(out, p->image);
    nb_buf_printf(out, "\",layout=\"%s\",template=\"", p->layout);
    nb_metrics_label(out, p->tpl);
    nb_buf_printf(out, "\"}");
}

/* Each warm pool (warm.h): its target, ready sandboxes, hits and misses. */
static void render_pools(struct nb_app *a, struct nb_buf *out)
{
    struct nb_warm_pool p[NB_METRICS_WARM_KINDS];
    unsigned n = nb_warm_pools(a, p, NB_METRICS_WARM_KINDS);
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"nanobox_warm_pool_kind_target", "gauge",
         "Warm sandboxes each pool keeps ready now (between its floor and ceiling, within "
         "warm_pool_memory), by image and layout."},
        {"nanobox_warm_pool_kind_ready", "gauge", "Warm sandboxes of each pool ready now."},
        {"nanobox_warm_pool_kind_hits_total", "counter",
         "Creates each pool served with a ready sandbox."},
        {"nanobox_warm_pool_kind_misses_total", "counter",
         "Creates each pool could have served but found empty (they grow it)."},
    };

    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        nb_metrics_family(out, fam[f].name, fam[f].type, fam[f].help);
        for (unsigned i = 0; i < n; i++) {
            unsigned long long v = f == 0   ? p[i].target
                                   : f == 1 ? p[i].ready
                                   : f == 2 ? p[i].hits
                                            : p[i].misses;
            pool_labels(out, fam[f].name, &p[i]);
            nb_buf_printf(out, " %llu\n", v);
        }
    }
}

static void render_table(struct nb_app *a, struct nb_buf *out)
{
    const struct nb_conf *conf = &a->conf;
    struct census c;

    census_take(a, &c);
    nb_metrics_family(out, "nanobox_sandboxes", "gauge",
                      "Sandboxes in the state table, by state and image (pooled: warm, not "
                      "handed out yet).");
    for (size_t i = 0; i < c.n; i++) {
        nb_buf_printf(out, "nanobox_sandboxes{state=\"%s\",image=\"", state_names[c.rows[i].state]);
        nb_metrics_label(out, c.rows[i].image);
        nb_buf_printf(out, "\"} %u\n", c.rows[i].n);
    }
    nb_metrics_family(out, "nanobox_sandbox_slots", "gauge",
                      "Slots of the state table (max_sandboxes): the most sandboxes at once.");
    nb_buf_printf(out, "nanobox_sandbox_slots %u\n", a->table.nslots);
    nb_metrics_family(out, "nanobox_sandbox_slots_free", "gauge",
                      "Slots of the state table no sandbox holds.");
    nb_buf_printf(out, "nanobox_sandbox_slots_free %u\n", c.free_slots);

    /* the pools' images: those with a pool, or with warm sandboxes left from one */
    nb_metrics_family(out, "nanobox_warm_pool_size", "gauge",
                      "Warm sandboxes ready to be handed out, by image.");
    for (unsigned i = 0; i < conf->n_images; i++) {
        uint32_t ready = census_get(&c, NB_SLOT_POOLED, conf->images[i]);
        if (nb_warm_target(conf, conf->images[i]) == 0 && ready == 0)
            continue;
        nb_buf_printf(out, "nanobox_warm_pool_size{image=\"");
        nb_metrics_label(out, conf->images[i]);
        nb_buf_printf(out, "\"} %u\n", ready);
    }
    nb_metrics_family(
        out, "nanobox_warm_pool_target", "gauge",
        "Warm sandboxes the pools of each image keep ready now (their sizes adapt to demand).");
    for (unsigned i = 0; i < conf->n_images; i++) {
        unsigned target = nb_warm_target(conf, conf->images[i]);
        if (target == 0 && census_get(&c, NB_SLOT_POOLED, conf->images[i]) == 0)
            continue;
        nb_buf_printf(out, "nanobox_warm_pool_target{image=\"");
        nb_metrics_label(out, conf->images[i]);
        nb_buf_printf(out, "\"} %u\n", target);
    }

    render_pools(a, out);

    nb_metrics_family(out, "nanobox_ports_open", "gauge",
                      "Sandbox ports open to the outside, each served by a forwarder "
                      "(nanobox-fwd).");
    nb_buf_printf(out, "nanobox_ports_open %u\n", c.ports_open);
    nb_metrics_family(out, "nanobox_workers_max", "gauge",
                      "workers_max: the most requests served at once.");
    nb_buf_printf(out, "nanobox_workers_max %u\n", conf->workers_max);
    nb_metrics_family(out, "nanobox_build_info", "gauge", "The running nanobox's version.");
    nb_buf_printf(out, "nanobox_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
    render_keys(a, out);
    render_paused(a, out);
    free(c.rows);
}

int api_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae)
{
    struct nb_buf out;

    (void)ra;
    nb_buf_init(&out, METRICS_MAX);
    render_table(a, &out);
    if (nb_metrics != NULL)
        nb_metrics_render(&out, nb_metrics);
    if (out.len >= METRICS_MAX - 1) {
        nb_buf_free(&out);
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "the metrics are larger than %u bytes",
                      METRICS_MAX);
        return NB_ERR;
    }
    nb_http_body(r, 200, "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "",
                 out.len);
    nb_buf_free(&out);
    return NB_OK;
}

/* A count, or null when it is not known (or, for a limit, when there is none). */
static void kv_count(yajl_gen g, const char *key, int64_t v)
{
    nb_json_cstr(g, key);
    if (v < 0)
        yajl_gen_null(g);
    else
        yajl_gen_integer(g, (long long)v);
}

static void kv_fs(yajl_gen g, const char *key, pid_t pid, const char *path)
{
    int64_t used = -1, size = -1;

    nb_json_cstr(g, key);
    if (nb_cgstat_fs(NB_CGSTAT_PROC_ROOT, pid, path, &used, &size) != 0) {
        yajl_gen_null(g);
        return;
    }
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "path", path);
    nb_json_kv_int(g, "used", (long long)used);
    nb_json_kv_int(g, "size", (long long)size);
    yajl_gen_map_close(g);
}

/* ?interval=MS: 0..CPU_INTERVAL_MAX, 0 when absent. 0, or -1 (400 in ae). */
static int cpu_interval(struct nb_req *r, unsigned *ms, struct nb_apierr *ae)
{
    char v[16], *end;
    unsigned long n;

    *ms = 0;
    if (nb_http_query(r, "interval", v, sizeof(v)) != 0)
        return 0;
    n = strtoul(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || n > CPU_INTERVAL_MAX) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "interval must be a whole number of milliseconds from 0 to %d",
                      CPU_INTERVAL_MAX);
        return -1;
    }
    *ms = (unsigned)n;
    return 0;
}

/*
 * "history": the samples of the sandbox's usage history (usage.h) in
 * [start, end], each with the CPU it used since the sample before it.
 */
static void history_json(struct nb_app *a, yajl_gen g, const struct nb_slot *slot, int64_t start,
                         int64_t end)
{
    uint32_t cap = nb_usage_capacity();
    struct nb_hsample *hs = nb_xcalloc(cap ? cap : 1, sizeof(*hs));
    uint64_t disk_size = 0;
    size_t n = nb_usage_history(a, slot, start, end, hs, cap, &disk_size);

    nb_json_cstr(g, "history");
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "interval", (long long)a->conf.metrics_interval);
    nb_json_kv_int(g, "capacity", (long long)cap);
    nb_json_kv_int(g, "disk_size", (long long)disk_size);
    nb_json_cstr(g, "samples");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++) {
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "at", (long long)(hs[i].t_ms / 1000));
        nb_json_kv_int(g, "at_ms", (long long)hs[i].t_ms);
        nb_json_kv_int(g, "cpu_usec", (long long)hs[i].cpu_usec);
        nb_json_kv_double(g, "cpu_percent", (double)hs[i].cpu_centi / 100.0);
        nb_json_kv_int(g, "memory", (long long)hs[i].mem);
        nb_json_kv_int(g, "disk", (long long)hs[i].disk);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    free(hs);
}

int api_sandbox_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    int ranged;
    int64_t start, end;
    struct nb_slot slot;
    struct nb_cgstat st;
    char err[256];
    unsigned interval;
    double percent = -1;
    int64_t now = nb_clock_real_s(), alive;
    yajl_gen g;

    if (cpu_interval(r, &interval, ae) != 0 ||
        api_metrics_range(r, &ranged, &start, &end, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    if (api_sandbox_cgstat(&slot, &st, ae) != 0)
        return NB_ERR;
    if (interval > 0 && st.cpu_usage_usec >= 0) {
        struct nb_cgstat st2;
        int64_t t0 = nb_metrics_now_us(), dt;
        struct timespec ts = {interval / 1000, (long)(interval % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (nb_cgstat_read(NB_CGSTAT_PROC_ROOT, NB_CGSTAT_CG_ROOT, slot.init_pid, slot.container_id,
                           &st2, err, sizeof(err)) == 0 &&
            st2.cpu_usage_usec >= st.cpu_usage_usec && (dt = nb_metrics_now_us() - t0) > 0) {
            percent = 100.0 * (double)(st2.cpu_usage_usec - st.cpu_usage_usec) / (double)dt;
            st = st2;
        }
    }
    alive = now - slot.created;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxId", slot.id);
    nb_json_kv_str(g, "state", slot.state == NB_SLOT_PAUSED ? "paused" : "running");
    nb_json_kv_int(g, "cgroup_version", st.version);

    nb_json_cstr(g, "cpu");
    yajl_gen_map_open(g);
    kv_count(g, "usage_usec", st.cpu_usage_usec);
    kv_count(g, "user_usec", st.cpu_user_usec);
    kv_count(g, "system_usec", st.cpu_system_usec);
    nb_json_cstr(g, "percent");
    if (percent < 0)
        yajl_gen_null(g);
    else
        yajl_gen_double(g, percent);
    nb_json_cstr(g, "percent_avg");
    if (st.cpu_usage_usec < 0 || alive <= 0)
        yajl_gen_null(g);
    else
        yajl_gen_double(g, (double)st.cpu_usage_usec / ((double)alive * 1e4));
    nb_json_kv_double(g, "limit_cpus", (double)slot.nano_cpus / 1e9);
    yajl_gen_map_close(g);

    nb_json_cstr(g, "memory");
    yajl_gen_map_open(g);
    kv_count(g, "current", st.mem_current);
    kv_count(g, "peak", st.mem_peak);
    kv_count(g, "limit", st.mem_limit);
    yajl_gen_map_close(g);

    nb_json_cstr(g, "pids");
    yajl_gen_map_open(g);
    kv_count(g, "current", st.pids_current);
    kv_count(g, "limit", st.pids_limit);
    yajl_gen_map_close(g);

    nb_json_cstr(g, "disk");
    yajl_gen_map_open(g);
    kv_fs(g, "workspace", slot.init_pid, nb_isolation_workspace(&a->conf, slot.lifecycle));
    kv_fs(g, "tmp", slot.init_pid, "/tmp");
    yajl_gen_map_close(g);

    if (ranged)
        history_json(a, g, &slot, start, end);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}
