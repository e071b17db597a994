/*
 * api_common.c - what the handlers of both fronts (api/, e2b/) share, under
 * them (docs/ARCHITECTURE.md, "Layers"): reading a JSON body, the fields
 * several routes take (env, metadata, memory, network, a command's timeout,
 * a code language), and the route guard the HTTP layer runs before a
 * handler (api_common.h). No handler here, and no call to one.
 */
#include "config.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "placement.h"
#include "registry.h"
#include "cgstat.h"
#include "code.h"
#include "json.h"
#include "network.h"
#include "sandbox.h"
#include "templates.h"

/* ---------------------------------------------------------------- the route guard */

/*
 * The one ownership check, for every route with a sandbox id: a user
 * key's request on a sandbox that is not its own answers the 404 of an
 * unknown id, word for word (tests/integration/test_keys.py walks the
 * route table through `nanobox-fcgi -R`). The E2B data plane carries no
 * key: its access token is the owner's (e2b_common.c). Then one check for
 * every route that reaches the processes: not while paused. On a cluster
 * node, first: a sandbox of another node is sent there (api_forward.c),
 * and 1 says the request is answered.
 */
static int route_guard(struct nb_app *a, struct nb_req *r, unsigned flags,
                       const struct nb_route_args *ra, struct nb_apierr *ae)
{
    int fwd;
    /* a cluster's: a sandbox of another node is that node's to serve */
    if ((flags & NB_ROUTE_ID) && (fwd = api_forward_foreign(a, r, ra->id, ae)) != 0)
        return fwd;
    if ((flags & NB_ROUTE_ID) && !r->who.admin &&
        nb_sandbox_visible(a, ra->id, r->who.name, ae) != 0)
        return -1;
    if (flags & NB_ROUTE_ID)
        nb_sandbox_touch(a, ra->id); /* a call naming it: not idle (the idle pause) */
    if ((flags & NB_ROUTE_AWAKE) && nb_sandbox_awake(a, ra->id, ae) != 0)
        return -1;
    return 0;
}

const struct nb_route_guard nb_api_route_guard = {nb_sandbox_id_valid, route_guard};

/* ---------------------------------------------------------------- bodies */

int api_read_json(struct nb_app *a, struct nb_req *r, yajl_val *out, struct nb_apierr *ae)
{
    return api_read_json_nul(a, r, out, "bad_field", ae);
}

int api_read_json_nul(struct nb_app *a, struct nb_req *r, yajl_val *out, const char *nul_code,
                      struct nb_apierr *ae)
{
    return api_read_json_cap(a, r, a->conf.max_body, out, nul_code, ae);
}

int api_read_json_cap(struct nb_app *a, struct nb_req *r, size_t cap, yajl_val *out,
                      const char *nul_code, struct nb_apierr *ae)
{
    char err[256];
    *out = NULL;
    if (nb_http_read_body(r, cap, ae) != 0)
        return -1;
    if (nb_json_parse(r->body.data, r->body.len, a->conf.max_json_depth, out, err, sizeof(err)) !=
        0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_json", "%s", err);
        return -1;
    }
    if (*out != NULL && !YAJL_IS_OBJECT(*out)) {
        yajl_tree_free(*out);
        *out = NULL;
        nb_apierr_set(ae, NB_E_INVALID, "bad_json", "the body must be a JSON object");
        return -1;
    }
    /* yajl hands a string with \u0000 over NUL-terminated: it would silently end there */
    if (nb_json_has_nul(r->body.data, r->body.len)) {
        yajl_tree_free(*out);
        *out = NULL;
        nb_apierr_set(ae, NB_E_INVALID, nul_code,
                      "a string contains a NUL byte (\\u0000), which no field can "
                      "hold; send binary data base64-encoded (stdin_encoding, encoding)");
        return -1;
    }
    return 0;
}

static int env_name_valid(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (s++; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

void api_env_free(char **env, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

int api_env_list(const struct nb_conf *c, yajl_val env, char ***out, unsigned *n,
                 struct nb_apierr *ae)
{
    char **list;
    size_t len;
    *out = NULL;
    *n = 0;
    if (env == NULL)
        return 0;
    len = env->u.object.len;
    if (len > c->max_env) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "env has %zu entries; the limit is %u (max_env)", len, c->max_env);
        return -1;
    }
    list = nb_xcalloc(len ? len : 1, sizeof(char *));
    for (size_t i = 0; i < len; i++) {
        const char *k = env->u.object.keys[i];
        yajl_val v = env->u.object.values[i];
        size_t need;
        if (!env_name_valid(k)) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "env name \"%.64s\" is not a valid variable name", k);
            goto fail;
        }
        if (!YAJL_IS_STRING(v)) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "env value of %.64s must be a string", k);
            goto fail;
        }
        need = strlen(k) + 1 + strlen(nb_json_string(v));
        if (need > c->max_env_bytes) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                          "env %.64s is %zu bytes; the limit is %zu (max_env_bytes)", k, need,
                          c->max_env_bytes);
            goto fail;
        }
        list[i] = nb_xmalloc(need + 1);
        snprintf(list[i], need + 1, "%s=%s", k, nb_json_string(v));
        (*n)++;
    }
    *out = list;
    return 0;
fail:
    api_env_free(list, *n);
    *n = 0;
    return -1;
}

/* Metadata: {str: str}, few and small; serialized into out (the E2B facade's too). */
int api_metadata_text(const struct nb_conf *c, yajl_val meta, char *out, size_t outlen,
                      struct nb_apierr *ae)
{
    yajl_gen g;
    const unsigned char *buf;
    size_t len;
    if (meta == NULL) {
        snprintf(out, outlen, "{}");
        return 0;
    }
    if (meta->u.object.len > c->max_metadata) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "metadata has %zu entries; the limit is %u (max_metadata)",
                      meta->u.object.len, c->max_metadata);
        return -1;
    }
    for (size_t i = 0; i < meta->u.object.len; i++) {
        if (!YAJL_IS_STRING(meta->u.object.values[i])) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "metadata value of \"%.64s\" must be a string", meta->u.object.keys[i]);
            return -1;
        }
    }
    g = nb_json_gen();
    nb_json_tree(g, meta);
    yajl_gen_get_buf(g, &buf, &len);
    if (len > c->max_metadata_bytes || len >= outlen) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "metadata is %zu bytes as JSON; the limit is %zu (max_metadata_bytes)", len,
                      c->max_metadata_bytes);
        yajl_gen_free(g);
        return -1;
    }
    memcpy(out, buf, len);
    out[len] = '\0';
    yajl_gen_free(g);
    return 0;
}

/* memory: bytes as an integer, or a size string like "128m". */
int api_memory_value(yajl_val v, uint64_t *out)
{
    if (YAJL_IS_STRING(v))
        return nb_parse_size(nb_json_string(v), out);
    if (nb_json_int(v) < 0)
        return -1;
    *out = (uint64_t)nb_json_int(v);
    return 0;
}

int api_metadata_matches(const char *metadata, const char (*keys)[128], const char (*values)[256],
                         unsigned n)
{
    char err[64];
    yajl_val meta = NULL;
    int ok = 1;
    if (n == 0)
        return 1;
    if (nb_json_parse(metadata, strlen(metadata), 4, &meta, err, sizeof(err)) != 0 || !meta)
        return 0;
    for (unsigned i = 0; ok && i < n; i++) {
        const char *path[] = {keys[i], NULL};
        yajl_val v = yajl_tree_get(meta, path, yajl_t_string);
        ok = v != NULL && !strcmp(nb_json_string(v), values[i]);
    }
    yajl_tree_free(meta);
    return ok;
}

/* ---------------------------------------------------------------- fields */

int api_exec_timeout(const struct nb_conf *c, yajl_val v, double *out, struct nb_apierr *ae)
{
    *out = c->exec_timeout;
    if (v == NULL)
        return 0;
    *out = nb_json_double(v);
    /* below 1 ms the agent's whole milliseconds would say 0, which means none */
    if (!(*out >= 0.001) || *out > c->exec_timeout_max) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "timeout must be at least 0.001 and at most %u seconds (exec_timeout_max)",
                      c->exec_timeout_max);
        return -1;
    }
    return 0;
}

int api_code_language(yajl_val v, enum nb_err err, const char **out, struct nb_apierr *ae)
{
    if (v == NULL)
        return 0;
    *out = nb_code_language(nb_json_string(v));
    if (*out == NULL) {
        nb_apierr_set(
            ae, err, "unsupported_language",
            "language \"%.32s\" is not one of python, javascript (js), typescript (ts), bash",
            nb_json_string(v));
        return -1;
    }
    return 0;
}

int api_code_text(const struct nb_conf *c, yajl_val v, const char **out, struct nb_apierr *ae)
{
    size_t len;
    if (v == NULL || *nb_json_string(v) == '\0') {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "field \"code\" (the code to run) is required");
        return -1;
    }
    *out = nb_json_string(v);
    len = strlen(*out);
    if (len > c->code_max_bytes) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "code is %zu bytes; the limit is %zu (code_max_bytes)", len,
                      c->code_max_bytes);
        return -1;
    }
    return 0;
}

/* A run's events on their way to the front's callback: was the end among them? */
struct code_run_sink {
    nb_code_object_fn on_event;
    void *ctx;
    int ended;
};

static int code_run_event(void *ctx, yajl_val ev)
{
    struct code_run_sink *k = ctx;
    const char *path[2] = {"type", NULL};
    yajl_val type = yajl_tree_get(ev, path, yajl_t_string);
    if (type != NULL && !strcmp(nb_json_string(type), "end"))
        k->ended = 1;
    return k->on_event(k->ctx, ev);
}

int api_code_exec(struct nb_app *a, struct nb_req *r, const struct nb_slot *slot,
                  struct nb_code_run *rq, struct nb_apierr *ae)
{
    struct code_run_sink k = {rq->on_event, rq->ctx, 0};
    int gone = 0;

    rq->max_output = a->conf.max_output;
    rq->client_fd = nb_http_client_fd(r);
    rq->on_event = code_run_event;
    rq->ctx = &k;
    if (nb_code_run(slot, rq, &gone, ae) != 0)
        return -1;
    if (gone) {
        nb_apierr_set(ae, NB_E_CANCELLED, "client_gone",
                      "the client went away; the execution was interrupted");
        return -1;
    }
    if (!k.ended) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                      "the sandbox's code bridge sent bad data: the answer has no end event");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- network */

/* One of allow/deny: an array of rule strings, each parsed into l. */
static int rule_list(yajl_val v, const char *name, struct nb_netrules *l, struct nb_apierr *ae)
{
    char err[200];
    l->n = 0;
    if (v == NULL)
        return 0;
    if (!YAJL_IS_ARRAY(v)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "network.%s must be an array of strings",
                      name);
        return -1;
    }
    if (YAJL_GET_ARRAY(v)->len > NB_NETRULES_MAX) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range", "network.%s holds at most %d rules",
                      name, NB_NETRULES_MAX);
        return -1;
    }
    for (size_t i = 0; i < YAJL_GET_ARRAY(v)->len; i++) {
        yajl_val e = YAJL_GET_ARRAY(v)->values[i];
        if (!YAJL_IS_STRING(e)) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "network.%s[%zu] must be a string", name,
                          i);
            return -1;
        }
        if (nb_netrules_add(l, YAJL_GET_STRING(e), err, sizeof(err)) != 0) {
            nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "bad_rule", "network.%s[%zu]: %s", name, i, err);
            return -1;
        }
    }
    return 0;
}

/* The fields of a network object; *mode_bridge from "mode" (default bridge). */
static int policy_object(const struct nb_conf *c, yajl_val v, int *mode_bridge,
                         struct nb_net_policy *p, struct nb_apierr *ae)
{
    struct nb_jfield f[] = {
        {"mode", NB_JT_STRING, NULL},
        {"allow", NB_JT_ARRAY, NULL},
        {"deny", NB_JT_ARRAY, NULL},
    };
    enum { F_MODE, F_ALLOW, F_DENY };
    char err[256];

    if (nb_json_fields(v, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "network: %s", err);
        return -1;
    }
    *mode_bridge = 1;
    if (f[F_MODE].val != NULL) {
        const char *m = nb_json_string(f[F_MODE].val);
        if (!strcmp(m, "none")) {
            *mode_bridge = 0;
        } else if (strcmp(m, "bridge") != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "network.mode must be \"none\" or \"bridge\"");
            return -1;
        }
    }
    if (rule_list(f[F_ALLOW].val, "allow", &p->allow, ae) != 0 ||
        rule_list(f[F_DENY].val, "deny", &p->deny, ae) != 0)
        return -1;
    if (!*mode_bridge && (p->allow.n || p->deny.n)) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "bad_rule",
                      "network.allow and network.deny apply to mode \"bridge\" only");
        return -1;
    }
    return *mode_bridge ? nb_network_policy_check(c, p, ae) : 0;
}

int api_network_value(const struct nb_conf *c, yajl_val v, int *bridge, struct nb_net_policy *p,
                      struct nb_apierr *ae)
{
    memset(p, 0, sizeof(*p));
    *bridge = 0;
    if (v == NULL)
        return 0;
    if (YAJL_IS_STRING(v)) {
        const char *net = YAJL_GET_STRING(v);
        if (!strcmp(net, "bridge")) {
            *bridge = 1;
        } else if (strcmp(net, "none") != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "network must be \"none\", \"bridge\" or a network object");
            return -1;
        }
    } else if (policy_object(c, v, bridge, p, ae) != 0) {
        return -1;
    }
    if (*bridge && !c->allow_bridge) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                      "network \"bridge\" is disabled by the operator (allow_bridge)");
        return -1;
    }
    return 0;
}

void api_network_json(yajl_gen g, const char *id, const struct nb_net_policy *p)
{
    const struct nb_netrules *lists[] = {&p->allow, &p->deny};
    const char *names[] = {"allow", "deny"};
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "sandboxId", id);
    nb_json_kv_str(g, "mode", "bridge");
    for (int k = 0; k < 2; k++) {
        nb_json_cstr(g, names[k]);
        yajl_gen_array_open(g);
        for (unsigned i = 0; i < lists[k]->n; i++) {
            char text[NB_NETRULE_TEXT];
            nb_netrule_format(&lists[k]->r[i], text, sizeof(text));
            nb_json_cstr(g, text);
        }
        yajl_gen_array_close(g);
    }
    yajl_gen_map_close(g);
}

int api_sandbox_cgstat(const struct nb_slot *slot, struct nb_cgstat *st, struct nb_apierr *ae)
{
    char err[256];
    if (nb_cgstat_read(NB_CGSTAT_PROC_ROOT, NB_CGSTAT_CG_ROOT, slot->init_pid, slot->container_id,
                       st, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "metrics_unavailable",
                      "cannot read the usage of sandbox %s: %s", slot->id, err);
        return -1;
    }
    return 0;
}

/* One bound of api_metrics_range: 0 absent, 1 read into *v, -1 bad (ae set). */
static int range_bound(struct nb_req *r, const char *key, int64_t *v, struct nb_apierr *ae)
{
    char text[32];
    size_t len;

    if (nb_http_query(r, key, text, sizeof(text)) != 0)
        return 0;
    len = strlen(text);
    if (len == 0 || len > 10 || strspn(text, "0123456789") != len) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "%s must be a time in unix seconds: a whole number from 0 to %lld", key,
                      API_RANGE_MAX);
        return -1;
    }
    *v = strtoll(text, NULL, 10);
    return 1;
}

int api_metrics_range(struct nb_req *r, int *given, int64_t *start, int64_t *end,
                      struct nb_apierr *ae)
{
    int s, e;

    *start = 0;
    *end = INT64_MAX;
    if ((s = range_bound(r, "start", start, ae)) < 0 || (e = range_bound(r, "end", end, ae)) < 0)
        return -1;
    *given = s || e;
    if (*end < *start) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "end (%lld) is before start (%lld)",
                      (long long)*end, (long long)*start);
        return -1;
    }
    return 0;
}

static void register_late_hook(struct nb_app *a, void *arg)
{
    nb_registry_late(a, arg);
    free(arg);
}

void api_register_late(struct nb_app *a, struct nb_req *r, int flag, const struct nb_slot *made)
{
    struct nb_slot *copy;
    if (!flag)
        return;
    if ((copy = malloc(sizeof(*copy))) == NULL) {
        nb_registry_late(a, made);
        return;
    }
    *copy = *made;
    if (nb_http_after(r, register_late_hook, copy) != 0)
        register_late_hook(a, copy);
}

int api_place_create(struct nb_app *a, struct nb_req *r, const char *path, const char *template)
{
    char what[128], tkey[NB_OWNER_LEN + 160];
    struct nb_placed p;
    if (nb_http_from_node(r))
        return 0;
    if (template != NULL)
        nb_template_node_name(&a->conf, template, nb_http_key(r)->name, tkey, sizeof(tkey));
    /* MCP's tool calls too: the session's next calls on the sandbox, which
     * reach this node, are sent on to its node (api_forward.c) */
    if (nb_place_create(a, path, r->body.data, r->body.len, nb_http_key(r)->name,
                        template != NULL ? tkey : NULL, &p) != 1)
        return 0;
    nb_http_body(r, (int)p.status, p.ctype, p.body.data ? p.body.data : "", p.body.len);
    snprintf(what, sizeof(what), "on node %s (HTTP %ld)", p.node, p.status);
    nb_http_audit(r, "create-placed", what);
    nb_buf_free(&p.body);
    return 1;
}
