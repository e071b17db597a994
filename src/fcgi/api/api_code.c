/*
 * api_code.c - the code interpreter's routes: POST /sandbox/{id}/code (run
 * a cell in a stateful context, its events streamed as NDJSON or collected
 * into one answer), POST /sandbox/{id}/code/interrupt, and the contexts:
 * GET/POST /sandbox/{id}/contexts, DELETE /sandbox/{id}/contexts/{ctx},
 * POST /sandbox/{id}/contexts/{ctx}/restart. Validation here; the
 * sandbox's code bridge does the work through the code engine (code.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "code.h"
#include "json.h"
#include "sandbox.h"

/* A "context" field (NULL: none) in *out, checked like a path's {ctx}. */
static int code_context(yajl_val v, const char **out, struct nb_apierr *ae)
{
    *out = NULL;
    if (v == NULL)
        return 0;
    *out = nb_json_string(v);
    if (nb_route_ctx(*out) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_context",
                      "\"%.72s\" is not a context id (1 to %d of a-z, 0-9 and -)", *out,
                      NB_ROUTE_CTX_MAX);
        return -1;
    }
    return 0;
}

/* The body checked against fields: 0, or -1 with ae set (the caller frees *body). */
static int code_body(struct nb_app *a, struct nb_req *r, yajl_val *body, struct nb_jfield *f,
                     size_t n, struct nb_apierr *ae)
{
    char err[256];
    if (api_read_json(a, r, body, ae) != 0)
        return -1;
    if (nb_json_fields(*body, f, n, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        return -1;
    }
    return 0;
}

/* ---- POST /sandbox/{id}/code ---- */

/* Where a run's events go: the stream, or the collected answer. */
struct code_sink {
    struct nb_req *r;
    int stream;
    int began;         /* stream: status and headers went out */
    yajl_gen g;        /* stream: the line being written */
    struct nb_buf out; /* collected: stdout, stderr */
    struct nb_buf err;
    yajl_val *results; /* collected: the result events, kept */
    size_t n_results;
    yajl_val error; /* collected: the last error event, kept */
    yajl_val end;   /* the end event, kept */
};

static const char *ev_str(yajl_val ev, const char *key)
{
    const char *path[2] = {key, NULL};
    yajl_val v = yajl_tree_get(ev, path, yajl_t_string);
    return v != NULL ? YAJL_GET_STRING(v) : NULL;
}

static yajl_val ev_get(yajl_val ev, const char *key)
{
    const char *path[2] = {key, NULL};
    return yajl_tree_get(ev, path, yajl_t_any);
}

static int code_event(void *ctx, yajl_val ev)
{
    struct code_sink *k = ctx;
    const char *type = ev_str(ev, "type"), *text;
    int is_end = !strcmp(type, "end");

    if (k->end != NULL)
        return 0; /* nothing counts after the end */
    if (k->stream) {
        if (!k->began) {
            /* the status with the first event: errors before it keep theirs */
            nb_http_stream_begin(k->r, 200, "application/x-ndjson");
            k->began = 1;
        }
        nb_json_tree(k->g, ev);
        if (nb_http_stream_line(k->r, k->g) != 0)
            return -1;
    } else if ((!strcmp(type, "stdout") || !strcmp(type, "stderr")) &&
               (text = ev_str(ev, "text")) != NULL) {
        nb_buf_append_some(!strcmp(type, "stdout") ? &k->out : &k->err, text, strlen(text));
    } else if (!strcmp(type, "result")) {
        k->results = nb_xrealloc(k->results, (k->n_results + 1) * sizeof(k->results[0]));
        k->results[k->n_results++] = ev;
        return 1;
    } else if (!strcmp(type, "error")) {
        yajl_tree_free(k->error);
        k->error = ev;
        return 1;
    }
    if (!is_end)
        return 0;
    k->end = ev;
    return 1;
}

/* key: the value of ev's key if of type t, else null. */
static void kv_or_null(yajl_gen g, const char *key, yajl_val ev, yajl_type t)
{
    const char *path[2] = {key, NULL};
    yajl_val v = ev != NULL ? yajl_tree_get(ev, path, t) : NULL;
    nb_json_cstr(g, key);
    if (v != NULL)
        nb_json_tree(g, v);
    else
        yajl_gen_null(g);
}

static void kv_bool(yajl_gen g, const char *key, yajl_val ev)
{
    nb_json_kv_bool(g, key, YAJL_IS_TRUE(ev_get(ev, key)));
}

/* The collected answer, from the events kept. */
static void code_answer(yajl_gen g, const struct code_sink *k)
{
    const char *status = ev_str(k->end, "status");
    yajl_val dur = ev_get(k->end, "duration_ms");

    yajl_gen_map_open(g);
    kv_or_null(g, "context", k->end, yajl_t_string);
    kv_or_null(g, "language", k->end, yajl_t_string);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, k->out.data ? k->out.data : "", k->out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, k->err.data ? k->err.data : "", k->err.len);
    nb_json_cstr(g, "results");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < k->n_results; i++) {
        yajl_val data = ev_get(k->results[i], "data"), chart = ev_get(k->results[i], "chart");
        yajl_gen_map_open(g);
        kv_bool(g, "is_main_result", k->results[i]);
        nb_json_cstr(g, "data");
        if (data != NULL && YAJL_IS_OBJECT(data)) {
            nb_json_tree(g, data);
        } else {
            yajl_gen_map_open(g);
            yajl_gen_map_close(g);
        }
        /* a figure's chart (the bridge's display.py), beside its PNG */
        if (chart != NULL && YAJL_IS_OBJECT(chart)) {
            nb_json_cstr(g, "chart");
            nb_json_tree(g, chart);
        }
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    nb_json_cstr(g, "error");
    if (k->error != NULL) {
        const char *keys[] = {"name", "value", "traceback"};
        yajl_gen_map_open(g);
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            const char *v = ev_str(k->error, keys[i]);
            nb_json_kv_str(g, keys[i], v ? v : "");
        }
        yajl_gen_map_close(g);
    } else {
        yajl_gen_null(g);
    }
    kv_or_null(g, "execution_count", k->end, yajl_t_number);
    nb_json_kv_str(g, "status", status ? status : "error");
    kv_bool(g, "timed_out", k->end);
    kv_bool(g, "truncated", k->end);
    kv_bool(g, "kernel_restarted", k->end);
    nb_json_kv_int(g, "duration_ms",
                   dur != NULL && YAJL_IS_NUMBER(dur) ? (long long)nb_json_double(dur) : 0);
    yajl_gen_map_close(g);
}

int api_code_run(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"code", NB_JT_STRING, NULL},
        {"context", NB_JT_STRING | NB_JT_NULL, NULL},
        {"language", NB_JT_STRING | NB_JT_NULL, NULL},
        {"timeout", NB_JT_NUMBER, NULL},
        {"env", NB_JT_OBJECT, NULL},
        {"stream", NB_JT_BOOL, NULL},
    };
    enum { F_CODE, F_CONTEXT, F_LANGUAGE, F_TIMEOUT, F_ENV, F_STREAM };
    struct nb_code_run rq = {0};
    struct code_sink k = {0};
    struct nb_slot slot;
    yajl_val body = NULL;
    char **env = NULL;
    unsigned n_env = 0;
    int rc = NB_ERR;

    nb_buf_init(&k.out, c->max_output);
    nb_buf_init(&k.err, c->max_output);
    if (code_body(a, r, &body, f, sizeof(f) / sizeof(f[0]), ae) != 0)
        goto out;
    if (api_code_text(c, f[F_CODE].val, &rq.code, ae) != 0 ||
        api_code_language(f[F_LANGUAGE].val, NB_E_OUT_OF_RANGE, &rq.language, ae) != 0 ||
        code_context(f[F_CONTEXT].val, &rq.context, ae) != 0 ||
        api_exec_timeout(c, f[F_TIMEOUT].val, &rq.timeout, ae) != 0 ||
        api_env_list(c, f[F_ENV].val, &env, &n_env, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        goto out;

    k.r = r;
    k.stream = f[F_STREAM].val ? YAJL_IS_TRUE(f[F_STREAM].val) : nb_http_wants_ndjson(r);
    if (k.stream)
        k.g = nb_json_gen();
    rq.env = env;
    rq.n_env = n_env;
    rq.on_event = code_event;
    rq.ctx = &k;
    if (api_code_exec(a, r, &slot, &rq, ae) != 0)
        goto out;
    if (!k.stream) {
        yajl_gen g = nb_json_gen();
        code_answer(g, &k);
        nb_http_json(r, 200, g);
        yajl_gen_free(g);
    }
    rc = NB_OK;

out:
    if (k.g != NULL)
        yajl_gen_free(k.g);
    for (size_t i = 0; i < k.n_results; i++)
        yajl_tree_free(k.results[i]);
    free(k.results);
    yajl_tree_free(k.error);
    yajl_tree_free(k.end);
    nb_buf_free(&k.out);
    nb_buf_free(&k.err);
    api_env_free(env, n_env);
    yajl_tree_free(body);
    return rc;
}

/* ---- POST /sandbox/{id}/code/interrupt ---- */

int api_code_interrupt(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"context", NB_JT_STRING | NB_JT_NULL, NULL}};
    struct nb_slot slot;
    yajl_val body = NULL;
    const char *context = NULL;
    yajl_gen g;
    int rc = NB_ERR;

    if (code_body(a, r, &body, f, 1, ae) != 0 || code_context(f[0].val, &context, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        goto out;
    if (context == NULL)
        context = "python";
    if (nb_code_interrupt(&slot, context, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "interrupted", 1);
    nb_json_kv_str(g, "context", context);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

/* ---- the contexts ---- */

/* Context infos as they come: each into the open array of g, or the one kept. */
static int info_into(void *ctx, yajl_val info)
{
    nb_json_tree(ctx, info);
    return 0;
}

static int info_keep(void *ctx, yajl_val info)
{
    yajl_val *kept = ctx;
    if (*kept != NULL)
        return 0; /* one info per answer: the first */
    *kept = info;
    return 1;
}

/* Answer one context's info (NULL: the bridge sent none). */
static int info_answer(struct nb_req *r, int status, yajl_val info, struct nb_apierr *ae)
{
    yajl_gen g;
    if (info == NULL) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                      "the sandbox's code bridge sent bad data: no context in its answer");
        return NB_ERR;
    }
    g = nb_json_gen();
    nb_json_tree(g, info);
    nb_http_json(r, status, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_contexts_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_gen g;

    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "contexts");
    yajl_gen_array_open(g);
    if (nb_code_contexts(&slot, info_into, g, ae) != 0) {
        yajl_gen_free(g);
        return NB_ERR;
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_contexts_create(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_jfield f[] = {
        {"language", NB_JT_STRING | NB_JT_NULL, NULL},
        {"cwd", NB_JT_STRING | NB_JT_NULL, NULL},
        {"env", NB_JT_OBJECT | NB_JT_NULL, NULL},
    };
    enum { F_LANGUAGE, F_CWD, F_ENV };
    struct nb_slot slot;
    yajl_val body = NULL, info = NULL;
    const char *language = NULL, *cwd = NULL;
    char **env = NULL;
    unsigned n_env = 0;
    int rc = NB_ERR;

    if (code_body(a, r, &body, f, sizeof(f) / sizeof(f[0]), ae) != 0 ||
        api_code_language(f[F_LANGUAGE].val, NB_E_OUT_OF_RANGE, &language, ae) != 0)
        goto out;
    if (f[F_CWD].val != NULL) {
        cwd = nb_json_string(f[F_CWD].val);
        if (cwd[0] != '/' || strlen(cwd) > 1024) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "cwd must be an absolute path inside the sandbox");
            goto out;
        }
    }
    if (api_env_list(&a->conf, f[F_ENV].val, &env, &n_env, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        goto out;
    if (nb_code_create(&slot, language ? language : "python", cwd, env, n_env, info_keep, &info,
                       ae) != 0)
        goto out;
    rc = info_answer(r, 201, info, ae);
out:
    yajl_tree_free(info);
    api_env_free(env, n_env);
    yajl_tree_free(body);
    return rc;
}

int api_contexts_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_slot slot;
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 || nb_code_delete(&slot, ra->arg, ae) != 0)
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}

int api_contexts_restart(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL, info = NULL;
    int rc = NB_ERR;

    /* no fields: an empty body or {} */
    if (code_body(a, r, &body, NULL, 0, ae) != 0 || nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_code_restart(&slot, ra->arg, info_keep, &info, ae) != 0)
        goto out;
    rc = info_answer(r, 200, info, ae);
out:
    yajl_tree_free(info);
    yajl_tree_free(body);
    return rc;
}
