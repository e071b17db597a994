/*
 * api_e2b.c - the E2B facade's control plane (docs/E2B.md): E2B's REST
 * paths and JSON shapes, as the official E2B SDKs send and read them, over
 * the very engines the native API calls (sandbox.c: create through the warm
 * pool, get, extend, pause, resume, destroy). Nothing here keeps state of
 * its own: an E2B sandbox is a nanobox sandbox, its sandboxID nanobox's id.
 *
 * Errors go back through the HTTP layer like every handler's; it writes
 * them in E2B's shape, {"code": <status>, "message"}, on these routes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_common.h"
#include "cgstat.h"
#include "clock.h"
#include "e2b_api.h"
#include "e2b_common.h"
#include "fork.h"
#include "isolation.h"
#include "json.h"
#include "query.h"
#include "registry.h"
#include "sandbox.h"
#include "templates.h"
#include "usage.h"

/*
 * The envd version the facade claims. The SDK gates features on it
 * (src/envd/versions.ts and filesystem/index.ts): 0.6.4 is the newest it
 * gates on, and the data plane serves each: octet-stream uploads (0.5.7),
 * file metadata (0.6.2), entries in watch events (0.6.3), watches on
 * network mounts (0.6.4) (docs/E2B.md, the envd version).
 */
#define E2B_ENVD_VERSION "0.6.4"
/* E2B's deprecated clientID: the same for every sandbox. */
#define E2B_CLIENT_ID "nanobox"
/* The template names E2B's SDKs default to. */
#define E2B_TEMPLATE_BASE "base"
#define E2B_TEMPLATE_CODE "code-interpreter-v1"
/* @e2b/desktop's: desktop_image, where it is built (image.sh desktop) */
#define E2B_TEMPLATE_DESKTOP "desktop"
/* E2B's timeout when a v2 create or connect names none (its API's default). */
#define E2B_DEFAULT_TIMEOUT 300
/* E2B's page size: 100 by default and at most. */
#define E2B_LIST_MAX 100

#define MiB (1024ULL * 1024ULL)

/* The template name an image is shown as: E2B's three defaults, else the image. */
static const char *template_of(const struct nb_conf *c, const char *image)
{
    if (!strcmp(image, c->images[0]))
        return E2B_TEMPLATE_BASE;
    if (!strcmp(image, c->code_image))
        return E2B_TEMPLATE_CODE;
    if (c->desktop_image[0] && !strcmp(image, c->desktop_image))
        return E2B_TEMPLATE_DESKTOP;
    return image;
}

/*
 * The image of a templateID: base, code-interpreter-v1, desktop, or an
 * allowed image by name. desktop is desktop_image without its being in
 * `images`: it is allowed where it is built, which the create finds out
 * (desktop_missing).
 */
static int image_of(const struct nb_conf *c, const char *tpl, char *out, size_t outlen)
{
    const char *img = tpl;
    if (!strcmp(tpl, E2B_TEMPLATE_BASE))
        img = c->images[0];
    else if (!strcmp(tpl, E2B_TEMPLATE_CODE))
        img = c->code_image;
    else if (!strcmp(tpl, E2B_TEMPLATE_DESKTOP) && c->desktop_image[0])
        img = c->desktop_image;
    if (img != c->desktop_image && !nb_conf_image_allowed(c, img))
        return -1;
    snprintf(out, outlen, "%s", img);
    return 0;
}

/* "2024-05-01T10:00:00.123Z" or with "+02:00": unix seconds; -1 if it is not one. */
static int parse_time(const char *s, int64_t *out)
{
    struct tm tm;
    int y, mo, d, h, mi, sec, n = 0, oh, om;
    long off = 0;
    time_t t;

    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19)
        return -1;
    s += n;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return -1;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'Z' || *s == 'z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        if (sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5)
            return -1;
        off = (oh * 60L + om) * 60L * (*s == '-' ? -1 : 1);
        s += 1 + n;
    } else {
        return -1;
    }
    if (*s != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = timegm(&tm);
    *out = (int64_t)t - off;
    return 0;
}

/* The sandbox's metadata, kept as JSON text, as an object. */
static void kv_metadata(yajl_gen g, const struct nb_slot *s)
{
    char err[64];
    yajl_val meta = NULL;
    nb_json_cstr(g, "metadata");
    if (nb_json_parse(s->metadata, strlen(s->metadata), 4, &meta, err, sizeof(err)) == 0 && meta)
        nb_json_tree(g, meta);
    else {
        yajl_gen_map_open(g);
        yajl_gen_map_close(g);
    }
    yajl_tree_free(meta);
}

/* E2B's Sandbox (the answer of create and connect). */
static void sandbox_json(yajl_gen g, const struct nb_conf *c, const struct nb_slot *s)
{
    char token[E2B_TOKEN_LEN + 1];
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxID", s->id);
    nb_json_kv_str(g, "templateID", template_of(c, s->image));
    nb_json_kv_str(g, "clientID", E2B_CLIENT_ID);
    nb_json_kv_str(g, "envdVersion", E2B_ENVD_VERSION);
    /* the SDK sends it as X-Access-Token on every envd call (e2b_data_authorized) */
    if (e2b_access_token(c, s->owner, s->id, token) == 0) {
        nb_json_kv_str(g, "envdAccessToken", token);
        nb_json_kv_str(g, "trafficAccessToken", token);
    }
    yajl_gen_map_close(g);
}

/* E2B's SandboxDetail / ListedSandbox (getInfo and the list). */
static void detail_json(yajl_gen g, const struct nb_conf *c, const struct nb_slot *s, int64_t now)
{
    int paused = s->state == NB_SLOT_PAUSED;
    /* a paused sandbox's TTL is stopped: it ends ttl_left after a resume */
    int64_t left = paused ? s->ttl_left : s->expires > now ? s->expires - now : 0;
    long long cpus = (long long)((s->nano_cpus + 999999999ULL) / 1000000000ULL);

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxID", s->id);
    nb_json_kv_str(g, "templateID", template_of(c, s->image));
    nb_json_kv_str(g, "clientID", E2B_CLIENT_ID);
    nb_json_kv_str(g, "state", paused ? "paused" : "running");
    e2b_json_time(g, "startedAt", s->created);
    e2b_json_time(g, "endAt", now + left);
    nb_json_kv_int(g, "cpuCount", cpus > 0 ? cpus : 1);
    nb_json_kv_int(g, "memoryMB", (long long)(s->memory / MiB));
    nb_json_kv_str(g, "envdVersion", E2B_ENVD_VERSION);
    kv_metadata(g, s);
    /* the SDK's info.lifecycle: what its timeout does, and traffic resuming it */
    nb_json_cstr(g, "lifecycle");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "onTimeout", s->lifecycle & NB_LIFE_PAUSE_ON_TIMEOUT ? "pause" : "kill");
    nb_json_kv_bool(g, "autoResume", (s->lifecycle & NB_LIFE_AUTO_RESUME) != 0);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
}

static int answer_sandbox(struct nb_app *a, struct nb_req *r, int status, const struct nb_slot *s)
{
    yajl_gen g = nb_json_gen();
    sandbox_json(g, &a->conf, s);
    nb_http_json(r, status, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* A timeout in seconds (E2B's "timeout"): 1..max_ttl. */
static int timeout_value(const struct nb_conf *c, yajl_val v, unsigned *out, struct nb_apierr *ae)
{
    long long t;
    if (!YAJL_IS_INTEGER(v)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "timeout must be an integer number of seconds");
        return -1;
    }
    t = YAJL_GET_INTEGER(v);
    if (t < 1 || t > (long long)c->max_ttl) {
        nb_apierr_set(ae, NB_E_INVALID, "out_of_range",
                      "timeout must be between 1 and %u seconds (the operator's max_ttl)",
                      c->max_ttl);
        return -1;
    }
    *out = (unsigned)t;
    return 0;
}

/*
 * The value of key in the body object if it is there and not null, else
 * NULL; of another type than types (NB_JT_*): -1 with ae set. Keys the
 * facade does not know are ignored: each SDK release sends a few more.
 */
static int body_field(yajl_val body, const char *key, unsigned types, yajl_val *out,
                      struct nb_apierr *ae)
{
    const char *path[] = {key, NULL};
    yajl_val v;
    *out = NULL;
    if (body == NULL)
        return 0;
    v = yajl_tree_get(body, path, yajl_t_any);
    if (v == NULL || YAJL_IS_NULL(v))
        return 0;
    if (((types & NB_JT_STRING) && YAJL_IS_STRING(v)) ||
        ((types & NB_JT_INT) && YAJL_IS_INTEGER(v)) || ((types & NB_JT_BOOL) && YAJL_IS_TRUE(v)) ||
        ((types & NB_JT_BOOL) && YAJL_IS_FALSE(v)) ||
        ((types & NB_JT_OBJECT) && YAJL_IS_OBJECT(v))) {
        *out = v;
        return 0;
    }
    nb_apierr_set(ae, NB_E_INVALID, "bad_field", "field \"%s\" has the wrong type", key);
    return -1;
}

/* E2B's default timeout, or the operator's max_ttl when that is shorter. */
static unsigned default_timeout(const struct nb_conf *c)
{
    return c->max_ttl < E2B_DEFAULT_TIMEOUT ? (unsigned)c->max_ttl : E2B_DEFAULT_TIMEOUT;
}

/*
 * The desktop template on a host where its image is not built: E2B's
 * unknown template (404), saying how to build it, rather than the
 * engine's 503 image_missing.
 */
static void desktop_missing(const struct nb_conf *c, const char *image, struct nb_apierr *ae)
{
    if (!c->desktop_image[0] || strcmp(image, c->desktop_image) != 0 ||
        strcmp(ae->code, "image_missing") != 0)
        return;
    nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                  "template '" E2B_TEMPLATE_DESKTOP "' not found: its image %.128s is not built on "
                  "this host (src/setup/image.sh desktop)",
                  image);
}
/* E2B's NewSandbox (v1) and NewSandboxV2: the same fields; ttl when it names no timeout. */
static int create(struct nb_app *a, struct nb_req *r, unsigned ttl, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_sandbox_spec spec;
    struct nb_slot slot;
    yajl_val body = NULL, tpl, timeout, meta, envs, inet, autopause, autoresume, automem, vmounts;
    const char *tname = E2B_TEMPLATE_BASE, *vpath[] = {"volumeMounts", NULL};
    struct nb_volume_mount vm[NB_VOLUMES_PER_SANDBOX];
    int rc = NB_ERR, vlock = -1, late = 0;

    memset(&spec, 0, sizeof(spec));
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (body_field(body, "templateID", NB_JT_STRING, &tpl, ae) != 0 ||
        body_field(body, "timeout", NB_JT_INT, &timeout, ae) != 0 ||
        body_field(body, "metadata", NB_JT_OBJECT, &meta, ae) != 0 ||
        body_field(body, "envVars", NB_JT_OBJECT, &envs, ae) != 0 ||
        body_field(body, "allow_internet_access", NB_JT_BOOL, &inet, ae) != 0 ||
        body_field(body, "autoPause", NB_JT_BOOL, &autopause, ae) != 0 ||
        body_field(body, "autoResume", NB_JT_OBJECT, &autoresume, ae) != 0 ||
        body_field(body, "autoPauseMemory", NB_JT_BOOL, &automem, ae) != 0)
        goto out;
    vmounts = yajl_tree_get(body, vpath, yajl_t_any); /* [{name, path}] (volume.h) */
    if (tpl != NULL)
        tname = nb_json_string(tpl);
    /* E2B's defaults, an allowed image, or the key's own template (api_e2b_tpl.c) */
    if (image_of(c, tname, spec.image, sizeof(spec.image)) != 0 &&
        e2b_tpl_image(a, nb_http_key(r)->name, tname, spec.image, sizeof(spec.image)) != 0) {
        /* on a cluster: a template of the key's this node has not (a
         * snapshot is its node's alone) is made where a record lists it */
        if (vmounts == NULL && nb_template_name_ok(tname) &&
            api_place_create(a, r, r->path, tname)) {
            rc = NB_OK;
            goto out;
        }
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "template '%.100s' not found", tname);
        goto out;
    }
    /* on a cluster: one that mounts volumes goes to their node (api_volfwd.c) */
    if (vmounts != NULL) {
        int placed = api_place_volumes(a, r, vmounts, ae);
        if (placed != 0) {
            rc = placed > 0 ? NB_OK : NB_ERR;
            goto out;
        }
    }
    /* on a cluster: the better of two nodes, for the operator's images (a
     * built template's create stays where it was built) */
    for (unsigned i = 0; i < c->n_images; i++) {
        if (strcmp(spec.image, c->images[i]) != 0)
            continue;
        if (vmounts == NULL && api_place_create(a, r, r->path, NULL)) {
            rc = NB_OK;
            goto out;
        }
        break;
    }
    spec.ttl = ttl;
    if (timeout != NULL && timeout_value(c, timeout, &spec.ttl, ae) != 0)
        goto out;
    /* lifecycle: {onTimeout: 'pause', autoResume} */
    if (autopause != NULL && YAJL_IS_TRUE(autopause))
        spec.lifecycle |= NB_LIFE_PAUSE_ON_TIMEOUT;
    /* onTimeout: {action: 'pause', keepMemory: false}: a filesystem-only pause */
    if (automem != NULL && YAJL_IS_FALSE(automem))
        spec.lifecycle |= NB_LIFE_PAUSE_COLD;
    spec.idle_pause = c->idle_pause;
    if (autoresume != NULL) {
        const char *path[] = {"enabled", NULL};
        if (YAJL_IS_TRUE(yajl_tree_get(autoresume, path, yajl_t_true)))
            spec.lifecycle |= NB_LIFE_AUTO_RESUME;
    }
    /* E2B's user and home, unless the operator chose nanobox's (e2b_user_home) */
    if (nb_isolation_e2b_layout(c))
        spec.lifecycle |= NB_LIFE_E2B_HOME;
    spec.memory = c->memory;
    spec.nano_cpus = c->nano_cpus;
    spec.pids = c->pids;
    /* E2B's default is internet access: a bridge where the operator allows one */
    spec.network_bridge = (inet == NULL || YAJL_IS_TRUE(inet)) && c->allow_bridge;
    if (api_metadata_text(c, meta, spec.metadata, sizeof(spec.metadata), ae) != 0 ||
        api_env_list(c, envs, &spec.env, &spec.n_env, ae) != 0)
        goto out;
    spec.key = nb_http_key(r); /* its owner, and whose quotas it counts against */
    spec.volumes = vm;
    if (nb_volume_prepare_json(a, spec.key->name, nb_isolation_workspace(c, spec.lifecycle),
                               vmounts, vm, &spec.n_volumes, &vlock, ae) != 0)
        goto out;
    spec.register_late = &late;
    if (nb_sandbox_create(a, &spec, &slot, ae) != 0) {
        /* a full machine is E2B's concurrency limit: its SDK says RateLimitError */
        if (ae->err == NB_E_CAPACITY)
            ae->err = NB_E_LIMIT;
        desktop_missing(c, spec.image, ae);
        goto out;
    }
    api_register_late(a, r, late, &slot);
    rc = answer_sandbox(a, r, 201, &slot);
out:
    nb_volume_release(vlock);
    api_env_free(spec.env, spec.n_env);
    yajl_tree_free(body);
    return rc;
}

/* POST /sandboxes: E2B's NewSandbox (SDKs before e2b 2.50); no timeout is default_ttl. */
int api_e2b_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    (void)ra;
    return create(a, r, (unsigned)a->conf.default_ttl, ae);
}

/*
 * POST /v2/sandboxes: E2B's NewSandboxV2 (e2b 2.50 on). Its fields are
 * NewSandbox's but "secure" (always secured: the access token is always
 * given anyway); the SDK leaves "timeout" out when the caller set none,
 * for E2B's default of 300 s.
 */
int api_e2b_create_v2(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    (void)ra;
    return create(a, r, default_timeout(&a->conf), ae);
}

/* The list's filters and page, from the query. */
struct e2b_list {
    char meta_keys[16][128];
    char meta_values[16][256];
    unsigned n_meta;
    int running, paused; /* states asked for */
    char template[128];
    int64_t started_after;
    int asc;
    unsigned limit;
    int has_cursor;
    int64_t cursor_created;
    char cursor_id[NB_ID_LEN + 1];
    int bad;
};

static int list_meta_cb(void *arg, const char *k, const char *v)
{
    struct e2b_list *l = arg;
    if (l->n_meta == 16) {
        l->bad = 1;
        return -1;
    }
    /* each key and value was %-encoded once more by the SDK */
    nb_query_decode(k, l->meta_keys[l->n_meta], sizeof(l->meta_keys[0]));
    nb_query_decode(v, l->meta_values[l->n_meta], sizeof(l->meta_values[0]));
    l->n_meta++;
    return 0;
}

static int list_query(struct nb_req *r, struct e2b_list *l, struct nb_apierr *ae)
{
    char v[NB_QUERY_MAX];

    memset(l, 0, sizeof(*l));
    l->running = l->paused = 1;
    l->limit = E2B_LIST_MAX;
    l->started_after = INT64_MIN;
    if (nb_http_query(r, "metadata", v, sizeof(v)) == 0 &&
        (nb_query_each(v, list_meta_cb, l) != 0 || l->bad)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "at most 16 metadata filters");
        return -1;
    }
    if (nb_http_query(r, "state", v, sizeof(v)) == 0) {
        char *save = NULL;
        l->running = l->paused = 0;
        for (char *t = strtok_r(v, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "running"))
                l->running = 1;
            else if (!strcmp(t, "paused"))
                l->paused = 1;
            else {
                nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                              "state \"%.32s\" is not one of running, paused", t);
                return -1;
            }
        }
    }
    if (nb_http_query(r, "template", l->template, sizeof(l->template)) != 0)
        l->template[0] = '\0';
    if (nb_http_query(r, "startedAfter", v, sizeof(v)) == 0 &&
        parse_time(v, &l->started_after) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "startedAfter must be an RFC 3339 time");
        return -1;
    }
    if (nb_http_query(r, "order", v, sizeof(v)) == 0) {
        if (strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "order must be asc or desc");
            return -1;
        }
        l->asc = !strcmp(v, "asc");
    }
    if (nb_http_query(r, "limit", v, sizeof(v)) == 0) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || n < 1 || n > E2B_LIST_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "limit must be between 1 and %d",
                          E2B_LIST_MAX);
            return -1;
        }
        l->limit = (unsigned)n;
    }
    /* the token is where the last page ended: "<startedAt>_<sandboxID>" */
    if (nb_http_query(r, "nextToken", v, sizeof(v)) == 0 && v[0] != '\0') {
        char *end;
        long long t = strtoll(v, &end, 10);
        if (end == v || *end != '_' || !nb_sandbox_id_valid(end + 1)) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "nextToken is not one this server gave");
            return -1;
        }
        l->has_cursor = 1;
        l->cursor_created = t;
        snprintf(l->cursor_id, sizeof(l->cursor_id), "%s", end + 1);
    }
    return 0;
}

/* Oldest first, ties by id: the order of "asc" (and, turned round, "desc"). */
static int cmp_asc(int64_t ca, const char *ia, int64_t cb, const char *ib)
{
    if (ca != cb)
        return ca < cb ? -1 : 1;
    return strcmp(ia, ib);
}

static int list_asc;
static int slot_order(const void *x, const void *y)
{
    const struct nb_slot *a = x, *b = y;
    int c = cmp_asc(a->created, a->id, b->created, b->id);
    return list_asc ? c : -c;
}

static int list_keep(const struct nb_conf *c, const struct e2b_list *l, const struct nb_slot *s)
{
    if (s->state == NB_SLOT_PAUSED ? !l->paused : !l->running)
        return 0;
    if (s->created < l->started_after)
        return 0;
    if (l->template[0] && strcmp(l->template, template_of(c, s->image)) != 0)
        return 0;
    if (l->has_cursor) {
        int k = cmp_asc(s->created, s->id, l->cursor_created, l->cursor_id);
        if (l->asc ? k <= 0 : k >= 0)
            return 0;
    }
    return api_metadata_matches(s->metadata, (const char(*)[128])l->meta_keys,
                                (const char(*)[256])l->meta_values, l->n_meta);
}

/* GET /v2/sandboxes (and E2B's older GET /sandboxes): one page, the next one's token in a header. */
int api_e2b_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae)
{
    struct e2b_list l;
    struct nb_sandbox_list all;
    struct nb_slot *copy;
    uint32_t n = 0, kept = 0, shown;
    int64_t now = nb_clock_real_s();
    char want[NB_OWNER_LEN + 1] = "";
    const char *owner;
    yajl_gen g;

    (void)ra;
    if (list_query(r, &l, ae) != 0)
        return NB_ERR;
    /* a user key lists its own sandboxes; an admin all, or ?owner=NAME's */
    if (nb_http_query(r, "owner", want, sizeof(want)) < 0)
        want[0] = '\0';
    owner = nb_http_list_owner(r, want);
    /* this node's, and on a cluster node every other node's from the registry */
    nb_registry_list(a, owner, now, &all);
    copy = all.v;
    n = all.n;
    for (uint32_t i = 0; i < n; i++)
        if (list_keep(&a->conf, &l, &copy[i]))
            copy[kept++] = copy[i];
    n = kept;
    list_asc = l.asc;
    qsort(copy, n, sizeof(*copy), slot_order);
    shown = n < l.limit ? n : l.limit;
    if (shown < n) {
        char token[NB_ID_LEN + 32];
        const struct nb_slot *last = &copy[shown - 1];
        snprintf(token, sizeof(token), "%lld_%s", (long long)last->created, last->id);
        nb_http_add_header(r, "X-Next-Token", token);
    }
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (uint32_t i = 0; i < shown; i++)
        detail_json(g, &a->conf, &copy[i], now);
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    nb_registry_list_free(&all);
    return NB_OK;
}

/* GET /sandboxes/{id}: E2B's SandboxDetail. */
int api_e2b_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_gen g;
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    detail_json(g, &a->conf, &slot, nb_clock_real_s());
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* DELETE /sandboxes/{id}: 204; 404 {"code": 404} is how the SDK's kill() says false. */
int api_e2b_kill(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae)
{
    if (nb_sandbox_destroy(a, ra->id, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "destroy", ra->id);
    nb_http_no_content(r);
    return NB_OK;
}

/*
 * The body's "timeout" (seconds) into *ttl; required unless dflt is not 0.
 * memory, when not NULL: the body's "memory" (1 when it is not there).
 */
static int body_timeout(struct nb_app *a, struct nb_req *r, unsigned dflt, unsigned *ttl,
                        int *memory, struct nb_apierr *ae)
{
    yajl_val body = NULL, v, mem;
    int rc = -1;

    if (api_read_json(a, r, &body, ae) != 0)
        return -1;
    if (body_field(body, "timeout", NB_JT_INT, &v, ae) != 0 ||
        (memory != NULL && body_field(body, "memory", NB_JT_BOOL, &mem, ae) != 0))
        goto out;
    if (memory != NULL)
        *memory = mem == NULL || YAJL_IS_TRUE(mem);
    if (v == NULL) {
        if (dflt == 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "field \"timeout\" (seconds) is required");
            goto out;
        }
        *ttl = dflt;
    } else if (timeout_value(&a->conf, v, ttl, ae) != 0) {
        goto out;
    }
    rc = 0;
out:
    yajl_tree_free(body);
    return rc;
}

/* POST /sandboxes/{id}/timeout: it ends timeout seconds from now, sooner or later than it would. */
int api_e2b_timeout(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    unsigned ttl;
    int64_t expires;
    if (body_timeout(a, r, 0, &ttl, NULL, ae) != 0 ||
        nb_sandbox_extend(a, ra->id, ttl, &expires, ae) != 0)
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}

/*
 * Resume if paused, then make it last at least ttl more seconds (never
 * less than it had). *resumed: whether it was paused.
 */
static int wake(struct nb_app *a, const char *id, unsigned ttl, struct nb_slot *slot, int *resumed,
                struct nb_apierr *ae)
{
    int64_t expires;
    if (nb_sandbox_get(a, id, slot, ae) != 0)
        return -1;
    *resumed = slot->state == NB_SLOT_PAUSED;
    if (*resumed && nb_sandbox_resume(a, id, slot, ae) != 0)
        return -1;
    if (nb_sandbox_extend_min(a, id, ttl, &expires, ae) != 0)
        return -1;
    return nb_sandbox_get(a, id, slot, ae);
}

/*
 * Connect: 200 running (201 resumed), never a shorter timeout. v1 (POST
 * /sandboxes/{id}/connect) needs the timeout. v2 (POST
 * /v2/sandboxes/{id}/connect, e2b 2.50 on) has an optional body: no
 * timeout is E2B's 300 s, and {"memory": false} (the SDK's onResume:
 * 'reboot') resumes a paused sandbox from its disk alone: one paused
 * without its memory boots afresh anyway; one paused with it cannot drop
 * it, so that is 501 and the sandbox stays paused.
 */
static int connect_sandbox(struct nb_app *a, struct nb_req *r, const char *id, int v2,
                           struct nb_apierr *ae)
{
    struct nb_slot slot;
    unsigned ttl;
    int resumed, memory = 1;
    if (body_timeout(a, r, v2 ? default_timeout(&a->conf) : 0, &ttl, v2 ? &memory : NULL, ae) != 0)
        return NB_ERR;
    if (!memory) {
        if (nb_sandbox_get(a, id, &slot, ae) != 0)
            return NB_ERR;
        if (slot.state == NB_SLOT_PAUSED && !(slot.lifecycle & NB_LIFE_RELEASED)) {
            nb_apierr_set(ae, NB_E_UNSUPPORTED, "not_implemented",
                          "resuming without memory (onResume: 'reboot') is not supported by "
                          "nanobox: a paused sandbox resumes with its memory");
            return NB_ERR;
        }
    }
    if (wake(a, id, ttl, &slot, &resumed, ae) != 0)
        return NB_ERR;
    return answer_sandbox(a, r, resumed ? 201 : 200, &slot);
}

int api_e2b_connect(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    return connect_sandbox(a, r, ra->id, 0, ae);
}

int api_e2b_connect_v2(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    return connect_sandbox(a, r, ra->id, 1, ae);
}

/* POST /sandboxes/{id}/resume (E2B's older call): 409 when it is not paused. */
int api_e2b_resume(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    struct nb_slot slot;
    unsigned ttl;
    int resumed;
    /* E2B's ResumedSandbox: 15 s when the body names no timeout */
    if (body_timeout(a, r, 15, &ttl, NULL, ae) != 0 || nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    if (slot.state != NB_SLOT_PAUSED) {
        nb_apierr_set(ae, NB_E_CONFLICT, "conflict", "sandbox %s is already running", ra->id);
        return NB_ERR;
    }
    if (wake(a, ra->id, ttl, &slot, &resumed, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "resume", ra->id);
    return answer_sandbox(a, r, 201, &slot);
}

/* POST /sandboxes/{id}/pause: 204; 409 when it already is (the SDK's pause() says false). */
int api_e2b_pause(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL, mem;
    int keep_memory;

    /* {"memory": false} (the SDK's pause({keepMemory: false})): its files only, memory released */
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (body_field(body, "memory", NB_JT_BOOL, &mem, ae) != 0) {
        yajl_tree_free(body);
        return NB_ERR;
    }
    keep_memory = mem == NULL || YAJL_IS_TRUE(mem);
    yajl_tree_free(body);
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    if (slot.state == NB_SLOT_PAUSED) {
        nb_apierr_set(ae, NB_E_CONFLICT, "conflict", "sandbox %s is already paused", ra->id);
        return NB_ERR;
    }
    if (nb_sandbox_pause_how(a, ra->id, keep_memory, NULL, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "pause", ra->id);
    nb_http_no_content(r);
    return NB_OK;
}

/* envd's GET /health: 204 while it runs; 502, as E2B's proxy says, when not (paused, gone). */
int api_e2b_health(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    struct nb_slot slot;
    if (!nb_sandbox_id_valid(ra->id) || nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        slot.state != NB_SLOT_RUNNING) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "not_running", "sandbox \"%.64s\" is not running", ra->id);
        return NB_ERR;
    }
    nb_http_no_content(r);
    return NB_OK;
}

int api_e2b_not_implemented(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                            struct nb_apierr *ae)
{
    (void)a;
    nb_apierr_set(ae, NB_E_UNSUPPORTED, "not_implemented",
                  "%.16s %.200s is not implemented by nanobox's E2B facade (docs/E2B.md)",
                  r->method, r->path);
    (void)ra;
    return NB_ERR;
}

/* One of E2B's SandboxMetric: at t_ms, cpu in hundredths of a percent of one CPU. */
static void e2b_metric(yajl_gen g, int64_t t_ms, double cpus, double centi, uint64_t mem,
                       uint64_t mem_total, uint64_t disk, uint64_t disk_total)
{
    char ts[32];
    struct tm tm;
    time_t tt = (time_t)(t_ms / 1000);
    double pct = centi / 100.0 / cpus;

    gmtime_r(&tt, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm); /* whole seconds, as E2B's */
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "timestamp", ts);
    nb_json_kv_int(g, "timestampUnix", (long long)(t_ms / 1000));
    nb_json_kv_int(g, "cpuCount", (long long)(cpus < 1 ? 1 : cpus + 0.999));
    nb_json_kv_double(g, "cpuUsedPct", pct > 100 ? 100 : pct);
    nb_json_kv_int(g, "memUsed", (long long)mem);
    nb_json_kv_int(g, "memTotal", (long long)mem_total);
    nb_json_kv_int(g, "diskUsed", (long long)disk);
    nb_json_kv_int(g, "diskTotal", (long long)disk_total);
    yajl_gen_map_close(g);
}

/*
 * GET /sandboxes/{id}/metrics of the E2B facade (docs/E2B.md): the
 * sandbox's usage history (usage.h) in [start, end] (unix seconds; the
 * whole of it by default), as E2B's SandboxMetric array, oldest first.
 * CPU is over the time since the sample before, over its CPU limit. A
 * sandbox with no sample in the range yet, when the range holds now, gets
 * one read from its cgroup now (CPU averaged since it started), as E2B's
 * first sample would be.
 */
int api_e2b_metrics(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct nb_cgstat st;
    struct nb_hsample *hs;
    uint32_t cap = nb_usage_capacity();
    int64_t now = nb_clock_real_s(), alive, disk_used = 0, disk_size = 0, start, end;
    uint64_t disk_total = 0;
    double cpus, centi = 0;
    size_t n;
    int ranged;
    yajl_gen g;

    if (api_metrics_range(r, &ranged, &start, &end, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    cpus = slot.nano_cpus > 0 ? (double)slot.nano_cpus / 1e9 : 1.0;
    hs = nb_xcalloc(cap ? cap : 1, sizeof(*hs));
    n = nb_usage_history(a, &slot, start, end, hs, cap, &disk_total);
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++)
        e2b_metric(g, hs[i].t_ms, cpus, (double)hs[i].cpu_centi, hs[i].mem, slot.memory, hs[i].disk,
                   disk_total);
    free(hs);
    if (n == 0 && start <= now && now <= end) {
        if (api_sandbox_cgstat(&slot, &st, ae) != 0) {
            yajl_gen_free(g);
            return NB_ERR;
        }
        alive = now - slot.created;
        if (st.cpu_usage_usec > 0 && alive > 0)
            centi = (double)st.cpu_usage_usec / ((double)alive * 1e4) * 100.0;
        nb_cgstat_fs(NB_CGSTAT_PROC_ROOT, slot.init_pid,
                     nb_isolation_workspace(&a->conf, slot.lifecycle), &disk_used, &disk_size);
        e2b_metric(g, now * 1000, cpus, centi, st.mem_current < 0 ? 0 : (uint64_t)st.mem_current,
                   st.mem_limit > 0 ? (uint64_t)st.mem_limit : slot.memory,
                   disk_used < 0 ? 0 : (uint64_t)disk_used,
                   disk_size < 0 ? 0 : (uint64_t)disk_size);
    }
    yajl_gen_array_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

/* E2B's timeout of a fork when the body names none (SandboxForkRequest's default). */
#define FORK_DEFAULT_TIMEOUT 15

/*
 * POST /sandboxes/{id}/fork {timeout?, count?}: 201, one SandboxForkResult
 * ({"sandbox": Sandbox}) per fork. nanobox's fork is all or nothing: a
 * fork that cannot start fails the whole call (its error, nothing made).
 */
int api_e2b_fork(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_slot *made = NULL;
    yajl_val body = NULL, tv, cv;
    long long timeout = FORK_DEFAULT_TIMEOUT, count = 1;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (body_field(body, "timeout", NB_JT_INT, &tv, ae) != 0 ||
        body_field(body, "count", NB_JT_INT, &cv, ae) != 0)
        goto out;
    if (tv != NULL)
        timeout = YAJL_GET_INTEGER(tv);
    if (cv != NULL)
        count = YAJL_GET_INTEGER(cv);
    if (timeout < 1 || timeout > (long long)c->max_ttl) {
        nb_apierr_set(ae, NB_E_INVALID, "out_of_range",
                      "timeout must be between 1 and %u seconds (the operator's max_ttl)",
                      c->max_ttl);
        goto out;
    }
    if (count < 1 || count > (long long)c->fork_max) {
        nb_apierr_set(ae, NB_E_INVALID, "out_of_range",
                      "count must be between 1 and %u (the operator's fork_max)", c->fork_max);
        goto out;
    }
    made = nb_xcalloc((size_t)count, sizeof(*made));
    if (nb_sandbox_fork(a, ra->id, (unsigned)count, (unsigned)timeout, nb_http_key(r), made, ae) !=
        0) {
        /* a full machine is E2B's concurrency limit: its SDK says RateLimitError */
        if (ae->err == NB_E_CAPACITY)
            ae->err = NB_E_LIMIT;
        goto out;
    }
    g = nb_json_gen();
    yajl_gen_array_open(g);
    for (long long i = 0; i < count; i++) {
        nb_http_audit(r, "fork", made[i].id);
        yajl_gen_map_open(g);
        nb_json_cstr(g, "sandbox");
        sandbox_json(g, c, &made[i]);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    free(made);
    yajl_tree_free(body);
    return rc;
}
