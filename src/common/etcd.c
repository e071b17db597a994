/*
 * etcd.c - see etcd.h.
 *
 * Each call is one POST of a JSON body to /v3/<service>/<method> of an
 * endpoint; the answer is JSON. The gateway spells int64 fields as
 * strings and leaves out fields that are zero (a lease that is gone
 * answers a keepalive without "TTL"), so every number is read through
 * jnum() and an absent one is 0.
 */
#include "config.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "conf.h"
#include "etcd.h"
#include "json.h"
#include "metrics.h"

#define ETCD_CONNECT_TIMEOUT_MS 500
#define ETCD_MAX_DEPTH 16
#define ETCD_KEY_MAX 1024 /* bytes of a key we name (ours are short paths) */

int nb_etcd_init(struct nb_etcd *e, const char *endpoints, long timeout_ms, size_t max_response)
{
    memset(e, 0, sizeof(*e));
    if (nb_conf_endpoints(endpoints, e->endpoints, &e->n, e->err, sizeof(e->err)) != 0)
        return -1;
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    nb_buf_init(&e->resp, max_response);
    e->curl = curl_easy_init();
    if (e->curl == NULL) {
        snprintf(e->err, sizeof(e->err), "cannot make a curl handle");
        return -1;
    }
    return 0;
}

void nb_etcd_set_tls(struct nb_etcd *e, const char *cacert, const char *cert, const char *key)
{
    snprintf(e->cacert, sizeof(e->cacert), "%s", cacert ? cacert : "");
    snprintf(e->cert, sizeof(e->cert), "%s", cert ? cert : "");
    snprintf(e->key, sizeof(e->key), "%s", key ? key : "");
}

int nb_etcd_init_conf(struct nb_etcd *e, const struct nb_conf *c, long timeout_ms,
                      size_t max_response)
{
    if (nb_etcd_init(e, c->etcd_endpoints, timeout_ms, max_response) != 0)
        return -1;
    nb_etcd_set_tls(e, c->etcd_cacert, c->etcd_cert, c->etcd_key);
    return 0;
}

/* The handle's TLS files on curl handle c. */
static void use_tls(const struct nb_etcd *e, CURL *c)
{
    if (e->cacert[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, e->cacert);
    if (e->cert[0]) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, e->key);
    }
}

void nb_etcd_cleanup(struct nb_etcd *e)
{
    if (e->curl)
        curl_easy_cleanup(e->curl);
    e->curl = NULL;
    nb_buf_free(&e->resp);
}

static size_t resp_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct nb_buf *b = userdata;
    size_t n = size * nmemb;
    return nb_buf_append(b, ptr, n) == NB_OK ? n : 0;
}

/* One POST to one endpoint: the status, or -1 when no answer came. */
static long post_one(struct nb_etcd *e, const char *url, const char *body)
{
    CURL *c = e->curl;
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    long status = 0;
    CURLcode rc;

    nb_buf_reset(&e->resp);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, resp_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &e->resp);
    use_tls(e, c);
    rc = curl_easy_perform(c);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        snprintf(e->err, sizeof(e->err), "etcd at %.120s: %s", url,
                 rc == CURLE_WRITE_ERROR ? "answer too large" : curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/*
 * POST body to path on the endpoints, the last one that answered first;
 * the parsed answer of the first 2xx in *out (the caller frees it). A 4xx
 * is the request's fault: no other endpoint is tried. -1 with e->err.
 */
/* An int64 as the gateway writes it: a string of digits or a number; absent: 0. */
static int64_t jnum(yajl_val v, const char *name)
{
    const char *path[] = {name, NULL};
    yajl_val f = v ? yajl_tree_get(v, path, yajl_t_any) : NULL;
    if (f == NULL)
        return 0;
    if (YAJL_IS_STRING(f))
        return strtoll(f->u.string, NULL, 10);
    return nb_json_int(f);
}

static int call_endpoints(struct nb_etcd *e, const char *path, const char *body, yajl_val *out);

static int call(struct nb_etcd *e, const char *path, const char *body, yajl_val *out)
{
    int rc = call_endpoints(e, path, body, out);
    nb_metrics_etcd(rc != 0);
    return rc;
}

static int call_endpoints(struct nb_etcd *e, const char *path, const char *body, yajl_val *out)
{
    char url[NB_ETCD_URL_MAX + 64], perr[128];
    *out = NULL;
    if (e->curl == NULL) {
        snprintf(e->err, sizeof(e->err), "etcd client not initialised");
        return -1;
    }
    for (unsigned i = 0; i < e->n; i++) {
        unsigned k = (e->cur + i) % e->n;
        long status;
        snprintf(url, sizeof(url), "%s%s", e->endpoints[k], path);
        status = post_one(e, url, body);
        if (status < 0)
            continue;
        if (status >= 200 && status < 300) {
            if (nb_json_parse(e->resp.data ? e->resp.data : "", e->resp.len, ETCD_MAX_DEPTH, out,
                              perr, sizeof(perr)) != 0 ||
                *out == NULL || !YAJL_IS_OBJECT(*out)) {
                yajl_tree_free(*out);
                *out = NULL;
                snprintf(e->err, sizeof(e->err),
                         "etcd at %.120s: an answer that is not a JSON object (%.60s)", url, perr);
                continue;
            }
            {
                const char *ph[] = {"header", NULL};
                e->revision = jnum(yajl_tree_get(*out, ph, yajl_t_object), "revision");
            }
            e->cur = k;
            return 0;
        }
        {
            const char *path_msg[] = {"message", NULL}, *path_err[] = {"error", NULL};
            yajl_val v = NULL, m;
            char msg[160] = "";
            if (e->resp.len > 0 &&
                nb_json_parse(e->resp.data, e->resp.len, ETCD_MAX_DEPTH, &v, perr, sizeof(perr)) ==
                    0 &&
                v != NULL) {
                m = yajl_tree_get(v, path_msg, yajl_t_string);
                if (m == NULL)
                    m = yajl_tree_get(v, path_err, yajl_t_string);
                if (m != NULL)
                    snprintf(msg, sizeof(msg), "%s", nb_json_string(m));
            }
            yajl_tree_free(v);
            snprintf(e->err, sizeof(e->err), "etcd at %.100s: HTTP %ld%s%.100s", url, status,
                     msg[0] ? ": " : "", msg);
        }
        if (status >= 400 && status < 500)
            return -1;
    }
    return -1;
}

static void gen_b64(yajl_gen g, const char *field, const void *data, size_t len)
{
    struct nb_buf b;
    nb_buf_init(&b, len / 3 * 4 + 8);
    nb_base64_encode(&b, data, len);
    yajl_gen_string(g, (const unsigned char *)field, strlen(field));
    yajl_gen_string(g, (const unsigned char *)(b.data ? b.data : ""), b.len);
    nb_buf_free(&b);
}

static void gen_num(yajl_gen g, const char *field, int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%lld", (long long)v);
    yajl_gen_string(g, (const unsigned char *)field, strlen(field));
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/* {"key": k, "value": v, "lease": l} (the body of a put, alone or in a txn) */
static void gen_put(yajl_gen g, const char *key, const void *value, size_t value_len, int64_t lease)
{
    yajl_gen_map_open(g);
    gen_b64(g, "key", key, strlen(key));
    gen_b64(g, "value", value, value_len);
    if (lease != 0)
        gen_num(g, "lease", lease);
    yajl_gen_map_close(g);
}

/* "range_end" of every key that starts with key: its last byte plus one */
static void gen_range_end(yajl_gen g, const char *key)
{
    char end[ETCD_KEY_MAX];
    size_t len = strlen(key);
    if (len == 0 || len >= sizeof(end)) {
        gen_b64(g, "range_end", "\0", 1); /* from key on: every key */
        return;
    }
    memcpy(end, key, len);
    while (len > 0 && (unsigned char)end[len - 1] == 0xff)
        len--;
    if (len == 0) {
        gen_b64(g, "range_end", "\0", 1);
        return;
    }
    end[len - 1] = (char)((unsigned char)end[len - 1] + 1);
    gen_b64(g, "range_end", end, len);
}

/* Call fn for each of the "kvs" of a range answer r; the count, or -1 (bad base64). */
static int each_kv(struct nb_etcd *e, yajl_val r, nb_etcd_kv_fn fn, void *arg)
{
    const char *path[] = {"kvs", NULL};
    yajl_val kvs = yajl_tree_get(r, path, yajl_t_array);
    int n = 0;
    if (kvs == NULL)
        return 0;
    for (size_t i = 0; i < kvs->u.array.len; i++) {
        yajl_val kv = kvs->u.array.values[i];
        const char *pk[] = {"key", NULL}, *pv[] = {"value", NULL};
        const char *k = nb_json_string(yajl_tree_get(kv, pk, yajl_t_string));
        const char *v = nb_json_string(yajl_tree_get(kv, pv, yajl_t_string));
        struct nb_buf kb, vb;
        struct nb_etcd_kv out;
        int stop = 0;

        nb_buf_init(&kb, strlen(k) + 4);
        nb_buf_init(&vb, strlen(v) + 4);
        if (nb_base64_decode(&kb, k, strlen(k)) != NB_OK ||
            nb_base64_decode(&vb, v, strlen(v)) != NB_OK) {
            nb_buf_free(&kb);
            nb_buf_free(&vb);
            snprintf(e->err, sizeof(e->err), "etcd: a key or value that is not base64");
            return -1;
        }
        out.key = kb.data ? kb.data : "";
        out.key_len = kb.len;
        out.value = vb.data ? vb.data : "";
        out.value_len = vb.len;
        out.lease = jnum(kv, "lease");
        out.mod_revision = jnum(kv, "mod_revision");
        n++;
        if (fn != NULL)
            stop = fn(arg, &out);
        nb_buf_free(&kb);
        nb_buf_free(&vb);
        if (stop)
            break;
    }
    return n;
}

int nb_etcd_grant(struct nb_etcd *e, long ttl, int64_t *lease)
{
    yajl_gen g = nb_json_gen();
    yajl_val r;
    char *body;
    int rc;

    yajl_gen_map_open(g);
    gen_num(g, "TTL", ttl);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    rc = call(e, "/v3/lease/grant", body, &r);
    free(body);
    if (rc != 0)
        return -1;
    *lease = jnum(r, "ID");
    yajl_tree_free(r);
    if (*lease == 0) {
        snprintf(e->err, sizeof(e->err), "etcd granted no lease");
        return -1;
    }
    return 0;
}

int nb_etcd_keepalive(struct nb_etcd *e, int64_t lease)
{
    const char *path[] = {"result", NULL};
    char body[64];
    yajl_val r;
    int alive;

    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    if (call(e, "/v3/lease/keepalive", body, &r) != 0)
        return -1;
    /* a stream of one answer: {"result": {..., "TTL": "5"}}; no TTL: gone */
    alive = jnum(yajl_tree_get(r, path, yajl_t_object), "TTL") > 0;
    yajl_tree_free(r);
    return alive;
}

int nb_etcd_revoke(struct nb_etcd *e, int64_t lease)
{
    char body[64];
    yajl_val r;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    if (call(e, "/v3/lease/revoke", body, &r) != 0)
        return -1;
    yajl_tree_free(r);
    return 0;
}

int nb_etcd_put(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                int64_t lease)
{
    yajl_gen g = nb_json_gen();
    yajl_val r;
    char *body;
    int rc;

    gen_put(g, key, value, value_len, lease);
    body = nb_json_gen_take(g);
    rc = call(e, "/v3/kv/put", body, &r);
    free(body);
    if (rc == 0)
        yajl_tree_free(r);
    return rc;
}

int nb_etcd_delete(struct nb_etcd *e, const char *key)
{
    yajl_gen g = nb_json_gen();
    yajl_val r;
    char *body;
    int rc;

    yajl_gen_map_open(g);
    gen_b64(g, "key", key, strlen(key));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    rc = call(e, "/v3/kv/deleterange", body, &r);
    free(body);
    if (rc == 0)
        yajl_tree_free(r);
    return rc;
}

/* the fields of a range request (alone, or as a txn's request_range) */
static void gen_range(yajl_gen g, const struct nb_etcd_op *op)
{
    yajl_gen_map_open(g);
    if (op->prefix && op->from != NULL)
        gen_b64(g, "key", op->from, op->from_len);
    else
        gen_b64(g, "key", op->key, strlen(op->key));
    if (op->prefix)
        gen_range_end(g, op->key);
    if (op->limit > 0)
        gen_num(g, "limit", op->limit);
    if (op->count_only) {
        yajl_gen_string(g, (const unsigned char *)"count_only", 10);
        yajl_gen_bool(g, 1);
    }
    if (op->serializable) {
        yajl_gen_string(g, (const unsigned char *)"serializable", 12);
        yajl_gen_bool(g, 1);
    }
    yajl_gen_map_close(g);
}

static void gen_cstr(yajl_gen g, const char *s)
{
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/* one op of a txn: {"request_put": {...}} and the like */
static void gen_op(yajl_gen g, const struct nb_etcd_op *op)
{
    yajl_gen_map_open(g);
    switch (op->kind) {
    case NB_ETCD_PUT:
        gen_cstr(g, "request_put");
        gen_put(g, op->key, op->value, op->value_len, op->lease);
        break;
    case NB_ETCD_DEL:
        gen_cstr(g, "request_delete_range");
        yajl_gen_map_open(g);
        gen_b64(g, "key", op->key, strlen(op->key));
        if (op->prefix)
            gen_range_end(g, op->key);
        yajl_gen_map_close(g);
        break;
    case NB_ETCD_RANGE:
        gen_cstr(g, "request_range");
        gen_range(g, op);
        break;
    }
    yajl_gen_map_close(g);
}

/* A range answer r into op: its pairs to op->fn, its count and more. 0 or -1. */
static int take_range(struct nb_etcd *e, yajl_val r, struct nb_etcd_op *op)
{
    const char *pmore[] = {"more", NULL};
    op->count = jnum(r, "count");
    op->more = yajl_tree_get(r, pmore, yajl_t_true) != NULL;
    return each_kv(e, r, op->fn, op->arg) < 0 ? -1 : 0;
}

int nb_etcd_range(struct nb_etcd *e, struct nb_etcd_op *op)
{
    yajl_gen g = nb_json_gen();
    yajl_val r;
    char *body;
    int rc;

    gen_range(g, op);
    body = nb_json_gen_take(g);
    rc = call(e, "/v3/kv/range", body, &r);
    free(body);
    if (rc != 0)
        return -1;
    rc = take_range(e, r, op);
    yajl_tree_free(r);
    return rc;
}

int nb_etcd_get(struct nb_etcd *e, const char *key, int prefix, nb_etcd_kv_fn fn, void *arg)
{
    struct nb_etcd_op op = {
        .kind = NB_ETCD_RANGE, .key = key, .prefix = prefix, .fn = fn, .arg = arg};
    int n = 0;
    if (nb_etcd_range(e, &op) != 0)
        return -1;
    n = op.count > INT32_MAX ? INT32_MAX : (int)op.count;
    return n;
}

int nb_etcd_txn(struct nb_etcd *e, const struct nb_etcd_cmp *cmp, size_t ncmp,
                struct nb_etcd_op *success, size_t nsuccess, struct nb_etcd_op *failure,
                size_t nfailure)
{
    static const char *targets[] = {"MOD", "CREATE", "LEASE"};
    static const char *fields[] = {"mod_revision", "create_revision", "lease"};
    const char *psucc[] = {"succeeded", NULL}, *presp[] = {"responses", NULL};
    const char *prange[] = {"response_range", NULL};
    yajl_gen g = nb_json_gen();
    yajl_val r, resps;
    struct nb_etcd_op *ran;
    size_t nran;
    char *body;
    int rc, ok;

    yajl_gen_map_open(g);
    gen_cstr(g, "compare");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < ncmp; i++) {
        yajl_gen_map_open(g);
        gen_b64(g, "key", cmp[i].key, strlen(cmp[i].key));
        gen_cstr(g, "target");
        gen_cstr(g, targets[cmp[i].target]);
        gen_cstr(g, "result");
        gen_cstr(g, "EQUAL");
        gen_num(g, fields[cmp[i].target], cmp[i].value);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    gen_cstr(g, "success");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < nsuccess; i++)
        gen_op(g, &success[i]);
    yajl_gen_array_close(g);
    gen_cstr(g, "failure");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < nfailure; i++)
        gen_op(g, &failure[i]);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    rc = call(e, "/v3/kv/txn", body, &r);
    free(body);
    if (rc != 0)
        return -1;
    ok = yajl_tree_get(r, psucc, yajl_t_true) != NULL;
    ran = ok ? success : failure;
    nran = ok ? nsuccess : nfailure;
    resps = yajl_tree_get(r, presp, yajl_t_array);
    /* one response per op, in order; a range's is {"response_range": {...}} */
    for (size_t i = 0; i < nran; i++) {
        yajl_val one, range;
        if (ran[i].kind != NB_ETCD_RANGE)
            continue;
        ran[i].count = 0;
        ran[i].more = 0;
        one = resps != NULL && i < resps->u.array.len ? resps->u.array.values[i] : NULL;
        range = one != NULL ? yajl_tree_get(one, prange, yajl_t_object) : NULL;
        if (range != NULL && take_range(e, range, &ran[i]) != 0) {
            yajl_tree_free(r);
            return -1;
        }
    }
    yajl_tree_free(r);
    return ok;
}

int nb_etcd_create(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                   int64_t lease, nb_etcd_kv_fn fn, void *arg)
{
    struct nb_etcd_cmp absent = {key, NB_ETCD_CREATE, 0};
    struct nb_etcd_op put = {
        .kind = NB_ETCD_PUT, .key = key, .value = value, .value_len = value_len, .lease = lease};
    struct nb_etcd_op read = {.kind = NB_ETCD_RANGE, .key = key, .fn = fn, .arg = arg};
    return nb_etcd_txn(e, &absent, 1, &put, 1, &read, 1);
}

int nb_etcd_keep_leased(struct nb_etcd *e, const char *key, const void *value, size_t value_len,
                        int64_t lease)
{
    struct nb_etcd_cmp ours = {key, NB_ETCD_LEASE, lease};
    struct nb_etcd_op put = {
        .kind = NB_ETCD_PUT, .key = key, .value = value, .value_len = value_len, .lease = lease};
    int rc = nb_etcd_txn(e, &ours, 1, NULL, 0, &put, 1);
    return rc < 0 ? -1 : !rc;
}

/* The watch stream's reader: a message with "events" is a change. */
struct watch_sink {
    int changed;
    int created;
    char tail[16]; /* the end of the last chunk: a key split across two */
};

/* Is needle in the stream's chunk ptr[0..n), or across its seam with tail
 * (the end of the chunk before, NUL-terminated, shorter than 16 bytes)? */
static int in_stream(const char *tail, const char *ptr, size_t n, const char *needle)
{
    char joined[64];
    size_t t = strlen(tail), head = n < sizeof(joined) - t - 1 ? n : sizeof(joined) - t - 1;

    if (memmem(ptr, n, needle, strlen(needle)) != NULL)
        return 1;
    memcpy(joined, tail, t);
    memcpy(joined + t, ptr, head);
    joined[t + head] = '\0';
    return strstr(joined, needle) != NULL;
}

/* The end of the chunk ptr[0..n) into tail (cap bytes), for the next one's seam. */
static void keep_tail(char *tail, size_t cap, const char *ptr, size_t n)
{
    size_t t = n < cap - 1 ? n : cap - 1;
    memcpy(tail, ptr + n - t, t);
    tail[t] = '\0';
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct watch_sink *w = userdata;
    size_t n = size * nmemb;

    if (in_stream(w->tail, ptr, n, "\"events\"")) {
        w->changed = 1;
        return 0; /* enough: end the transfer */
    }
    if (in_stream(w->tail, ptr, n, "\"created\""))
        w->created = 1;
    keep_tail(w->tail, sizeof(w->tail), ptr, n);
    return n;
}

/* A watch's request (malloc'd JSON): any key under prefix after revision
 * from_rev (0: from now), with etcd's progress messages if progress. */
static char *watch_request(const char *prefix, int64_t from_rev, int progress)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    gen_cstr(g, "create_request");
    yajl_gen_map_open(g);
    gen_b64(g, "key", prefix, strlen(prefix));
    gen_range_end(g, prefix);
    if (from_rev > 0)
        gen_num(g, "start_revision", from_rev);
    if (progress) {
        gen_cstr(g, "progress_notify");
        yajl_gen_bool(g, 1);
    }
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

int nb_etcd_watch(struct nb_etcd *e, const char *prefix, int64_t from_rev, long max_ms)
{
    char *body = watch_request(prefix, from_rev, 0), url[NB_ETCD_URL_MAX + 16];
    struct curl_slist *hdrs;
    int rc = -1;

    for (unsigned i = 0; i < e->n && rc < 0; i++) {
        unsigned k = (e->cur + i) % e->n;
        struct watch_sink w = {0, 0, ""};
        CURLcode cc;
        CURL *c = e->curl;

        snprintf(url, sizeof(url), "%s/v3/watch", e->endpoints[k]);
        hdrs = curl_slist_append(NULL, "Content-Type: application/json");
        hdrs = curl_slist_append(hdrs, "Expect:");
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, max_ms);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
        use_tls(e, c);
        cc = curl_easy_perform(c);
        curl_slist_free_all(hdrs);
        if (w.changed) {
            rc = 1;
        } else if (cc == CURLE_OPERATION_TIMEDOUT && w.created) {
            rc = 0; /* watched the whole time: nothing changed */
        } else {
            snprintf(e->err, sizeof(e->err), "etcd at %.100s: the watch ended: %s", url,
                     curl_easy_strerror(cc));
            continue;
        }
        e->cur = k;
    }
    free(body);
    nb_metrics_etcd(rc < 0);
    return rc;
}

/* ---- a watch held open ---- */

/* The held watch's reader: it scans the stream for its messages' fields
 * (a message with "events" is a change; "created" and "canceled" say what
 * etcd did with the watch) and keeps reading. */
static size_t held_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct nb_etcd_watch *w = userdata;
    size_t n = size * nmemb;

    if (in_stream(w->tail, ptr, n, "\"events\""))
        w->changed = 1;
    if (in_stream(w->tail, ptr, n, "\"created\""))
        w->created = 1;
    if (in_stream(w->tail, ptr, n, "\"canceled\"")) {
        w->broken = 1;
        snprintf(w->err, sizeof(w->err), "etcd canceled the watch (%.*s)", (int)(n < 200 ? n : 200),
                 ptr);
        return 0; /* end the transfer */
    }
    keep_tail(w->tail, sizeof(w->tail), ptr, n);
    return n;
}

int nb_etcd_watch_held(const struct nb_etcd_watch *w)
{
    return w->multi != NULL;
}

void nb_etcd_watch_close(struct nb_etcd_watch *w)
{
    unsigned ep = w->ep;
    char err[sizeof(w->err)];
    memcpy(err, w->err, sizeof(err));
    if (w->multi != NULL && w->easy != NULL)
        curl_multi_remove_handle(w->multi, w->easy);
    if (w->easy != NULL)
        curl_easy_cleanup(w->easy);
    if (w->multi != NULL)
        curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->hdrs);
    free(w->body);
    memset(w, 0, sizeof(*w));
    w->ep = ep;
    memcpy(w->err, err, sizeof(err));
}

int nb_etcd_watch_open(struct nb_etcd_watch *w, const struct nb_etcd *e, const char *prefix,
                       int64_t from_rev)
{
    char url[NB_ETCD_URL_MAX + 16];
    unsigned ep = e->n ? w->ep % e->n : 0;
    CURL *c;

    nb_etcd_watch_close(w);
    w->err[0] = '\0';
    if (e->n == 0) {
        snprintf(w->err, sizeof(w->err), "no etcd endpoint");
        return -1;
    }
    /* etcd's progress messages (every 10 min) keep a quiet stream moving */
    w->body = watch_request(prefix, from_rev, 1);
    w->multi = curl_multi_init();
    w->easy = c = curl_easy_init();
    if (w->multi == NULL || c == NULL || w->body == NULL) {
        nb_etcd_watch_close(w);
        snprintf(w->err, sizeof(w->err), "cannot make a curl handle");
        return -1;
    }
    w->ep = ep;
    snprintf(url, sizeof(url), "%s/v3/watch", e->endpoints[ep]);
    w->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    w->hdrs = curl_slist_append(w->hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_TIMEOUT_MS);
    /* no timeout of the transfer: it is meant to last; a peer gone without
     * a word is found by TCP's keepalives */
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(w->body));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, (struct curl_slist *)w->hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, held_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
    use_tls(e, c);
    if (curl_multi_add_handle(w->multi, c) != CURLM_OK) {
        nb_etcd_watch_close(w);
        snprintf(w->err, sizeof(w->err), "cannot start the watch");
        return -1;
    }
    return 0;
}

int nb_etcd_watch_wait(struct nb_etcd_watch *w, long max_ms)
{
    int running = 0, left, was = w->created;
    CURLMsg *msg;

    if (w->multi == NULL) {
        snprintf(w->err, sizeof(w->err), "the watch is not open");
        return -1;
    }
    curl_multi_perform(w->multi, &running);
    if (running && !w->changed && !w->broken && max_ms > 0) {
        curl_multi_poll(w->multi, NULL, 0, max_ms > INT32_MAX ? INT32_MAX : (int)max_ms, NULL);
        curl_multi_perform(w->multi, &running);
    }
    while ((msg = curl_multi_info_read(w->multi, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE && !w->broken) {
            char *url = NULL;
            curl_easy_getinfo(w->easy, CURLINFO_EFFECTIVE_URL, &url);
            w->broken = 1;
            snprintf(w->err, sizeof(w->err), "etcd at %.120s: the watch ended: %s", url ? url : "?",
                     curl_easy_strerror(msg->data.result));
        }
    if (!running && !w->broken) {
        w->broken = 1;
        snprintf(w->err, sizeof(w->err), "etcd: the watch ended");
    }
    /* one request a watch, counted once: when etcd made it, or it failed */
    if (w->created && !was)
        nb_metrics_etcd(0);
    if (w->changed) {
        w->changed = 0;
        return 1; /* a break after it is found by the next wait */
    }
    if (w->broken) {
        if (!w->created)
            nb_metrics_etcd(1);
        w->ep++; /* the next open tries the next endpoint */
        nb_etcd_watch_close(w);
        return -1;
    }
    return 0;
}
