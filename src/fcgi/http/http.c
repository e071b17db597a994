/*
 * http.c - see http.h. Every read of a request and every write of an answer
 * goes through here, which is what lets an internal request (r->capture)
 * stand in for a FastCGI one; and every request ends in nb_http_finalize,
 * the one place an error becomes an answer.
 */
#include "config.h"

#include <errno.h>
#include <fastcgi.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "query.h"
#include "tenant.h"

/* The two ends of an internal request: its body in, its answer out. */
struct nb_http_capture {
    const char *in; /* the request body */
    size_t in_len;
    size_t in_off;           /* bytes of it read so far */
    char *envp[3];           /* its CGI params, NULL-terminated */
    char content_length[48]; /* "CONTENT_LENGTH=n" */
    char content_type[96];   /* "CONTENT_TYPE=t" */
    struct nb_buf *out;      /* the answer's body, within its cap */
    int overflow;            /* the answer did not fit out's cap */
    int client_fd;           /* what nb_http_client_fd says for it; -1: none */
};

/* The table requests are routed by (nb_http_set_routes). */
static const struct nb_route_entry *http_routes;
static size_t http_n_routes;
static const struct nb_route_guard *http_guard;
/* The fronts, asked in order before the native table (nb_http_add_front). */
static const struct nb_front *http_fronts[NB_HTTP_FRONTS_MAX];
static size_t http_n_fronts;
/* Told when a request of a NB_ROUTE_BULK row begins (nb_http_set_bulk_hook). */
static void (*http_bulk_hook)(void);

/* What kind of stream an answer is, once nb_http_stream_begin ran. */
enum { HTTP_STREAM_NONE, HTTP_STREAM_BYTES, HTTP_STREAM_NDJSON };

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 501:
        return "Not Implemented";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

/* Split uri into r->path and r->query. */
static int set_uri(struct nb_req *r, const char *uri, struct nb_apierr *ae)
{
    const char *q = strchr(uri, '?');
    size_t plen;

    plen = q ? (size_t)(q - uri) : strlen(uri);
    r->path[0] = r->query[0] = '\0';
    if (plen >= sizeof(r->path) || (q && strlen(q + 1) >= sizeof(r->query))) {
        nb_apierr_set(ae, NB_E_URI_TOO_LONG, "too_large", "the URL is too long");
        return -1;
    }
    memcpy(r->path, uri, plen);
    r->path[plen] = '\0';
    if (q)
        snprintf(r->query, sizeof(r->query), "%s", q + 1);
    return 0;
}

int nb_http_parse(struct nb_req *r, FCGX_Request *fcgi, struct nb_apierr *ae)
{
    const char *uri;

    r->fcgi = fcgi;
    r->capture = NULL;
    r->outer = NULL;
    r->n_hooks = 0;
    r->envp = fcgi->envp;
    r->headers[0] = '\0';
    r->status = 0;
    r->answered = r->stream = r->gone = 0;
    r->front = NULL;
    r->stream_ctype = NULL;
    r->t0_us = nb_metrics_now_us();
    r->mroute = -1;
    memset(&r->who, 0, sizeof(r->who)); /* no one until a key passes */
    r->method = FCGX_GetParam("REQUEST_METHOD", fcgi->envp);
    if (r->method == NULL)
        r->method = "GET";
    uri = FCGX_GetParam("REQUEST_URI", fcgi->envp);
    if (uri == NULL)
        uri = FCGX_GetParam("DOCUMENT_URI", fcgi->envp);
    if (uri == NULL)
        uri = "/";
    return set_uri(r, uri, ae);
}

/*
 * Fill r as an internal request: method on uri, body_len bytes of body of
 * content_type (NULL: none); its answer goes to answer. cap holds both
 * ends and must outlive r. -1 with ae set if uri is too long.
 */
static int http_internal(struct nb_req *r, struct nb_http_capture *cap, const char *method,
                         const char *uri, const char *body, size_t body_len,
                         const char *content_type, struct nb_buf *answer, struct nb_apierr *ae)
{
    size_t n = 0;

    memset(cap, 0, sizeof(*cap));
    cap->client_fd = -1;
    cap->in = body;
    cap->in_len = body != NULL ? body_len : 0;
    cap->out = answer;
    snprintf(cap->content_length, sizeof(cap->content_length), "CONTENT_LENGTH=%zu", cap->in_len);
    cap->envp[n++] = cap->content_length;
    if (content_type != NULL) {
        snprintf(cap->content_type, sizeof(cap->content_type), "CONTENT_TYPE=%s", content_type);
        cap->envp[n++] = cap->content_type;
    }
    cap->envp[n] = NULL;

    r->fcgi = NULL;
    r->capture = cap;
    r->envp = cap->envp;
    r->method = method;
    r->headers[0] = '\0';
    r->status = 0;
    r->answered = r->stream = r->gone = 0;
    r->front = NULL;
    r->stream_ctype = NULL;
    r->t0_us = nb_metrics_now_us();
    r->mroute = -1;
    return set_uri(r, uri, ae);
}

int nb_http_is_internal(const struct nb_req *r)
{
    return r->capture != NULL;
}

void nb_http_set_routes(const struct nb_route_entry *tab, size_t n,
                        const struct nb_route_guard *guard)
{
    http_routes = tab;
    http_n_routes = n;
    http_guard = guard;
}

void nb_http_add_front(const struct nb_front *f)
{
    if (http_n_fronts == NB_HTTP_FRONTS_MAX) {
        nb_error("front %s not registered: no room for more than %d fronts", f->name,
                 NB_HTTP_FRONTS_MAX);
        return;
    }
    http_fronts[http_n_fronts++] = f;
}

/* The rows of one table, with extra (a front's name, NULL: none) among each row's flags. */
static void print_rows(FILE *f, const struct nb_route_entry *tab, size_t n,
                       const char *(*path)(enum nb_route), const char *extra)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{NB_ROUTE_PUBLIC, "public"}, {NB_ROUTE_ID, "id"},
                 {NB_ROUTE_PID, "pid"},       {NB_ROUTE_HEAD, "head"},
                 {NB_ROUTE_CTX, "ctx"},       {NB_ROUTE_AWAKE, "awake"},
                 {NB_ROUTE_ID_404, "id_404"}, {NB_ROUTE_METRICS_AUTH, "metrics_token"},
                 {NB_ROUTE_BULK, "bulk"}};

    for (size_t i = 0; i < n; i++) {
        const struct nb_route_entry *e = &tab[i];
        const char *base = path(e->shape);
        int any = 0;
        fprintf(f, "%s\t%s%s%s\t", e->method ? e->method : "-", base ? base : "?",
                e->sub[0] && base && base[0] ? "/" : "", e->sub);
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (e->flags & names[k].bit) {
                fprintf(f, "%s%s", any ? "," : "", names[k].name);
                any = 1;
            }
        if (extra != NULL) {
            fprintf(f, "%s%s", any ? "," : "", extra);
            any = 1;
        }
        fprintf(f, "%s\n", any ? "" : "-");
    }
}

void nb_http_routes_print(FILE *f)
{
    print_rows(f, http_routes, http_n_routes, nb_route_path, NULL);
    for (size_t i = 0; i < http_n_fronts; i++)
        print_rows(f, http_fronts[i]->routes, http_fronts[i]->n_routes, http_fronts[i]->path,
                   http_fronts[i]->name);
}

void nb_http_set_bulk_hook(void (*fn)(void))
{
    http_bulk_hook = fn;
}

/* The 401's message; nginx's @nanobox_unauthorized (nanobox.conf.in)
 * repeats it word for word. */
#define HTTP_UNAUTHORIZED \
    "missing or wrong API key: send \"Authorization: Bearer <key>\" or \"X-API-Key: <key>\""

int nb_http_auth_only(const struct nb_req *r)
{
    return nb_http_param(r, "NANOBOX_AUTH_ONLY") != NULL;
}

int nb_http_pass_auth(struct nb_req *r)
{
    nb_http_no_content(r);
    return NB_OK;
}

/*
 * Who sent r (tenant.h): the key the request sends (Bearer, or X-API-Key)
 * is api_key (the admin "default") or a key of the keys file, and r->who
 * gets it; for a row that allows it (GET /metrics) metrics_token passes
 * too, as an admin named "metrics". On a front's request whose clients
 * send the key behind a prefix (key_prefix), the key with that prefix
 * passes too, as does the bare key. 0 when no key passes.
 */
static int authorized(struct nb_app *a, struct nb_req *r, unsigned flags)
{
    const char *h;

    nb_tenant_refresh(a);
    if (!nb_tenant_auth_on(a)) {
        nb_tenant_anyone(&r->who);
        return 1;
    }
    h = nb_http_param(r, "HTTP_AUTHORIZATION");
    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
        while (*h == ' ')
            h++;
    } else {
        h = nb_http_param(r, "HTTP_X_API_KEY");
        if (h == NULL)
            return 0;
    }
    if (nb_tenant_identify(a, h, r->front != NULL ? r->front->key_prefix : NULL, &r->who) == 0)
        return 1;
    if ((flags & NB_ROUTE_METRICS_AUTH) && a->conf.metrics_token[0] != '\0' &&
        nb_tenant_equal(h, a->conf.metrics_token)) {
        nb_tenant_anyone(&r->who);
        snprintf(r->who.name, sizeof(r->who.name), "metrics");
        return 1;
    }
    return 0;
}

const struct nb_key *nb_http_key(const struct nb_req *r)
{
    return &r->who;
}

int nb_http_sees(const struct nb_req *r, const char *owner)
{
    return r->who.admin || !strcmp(owner, r->who.name);
}

const char *nb_http_list_owner(const struct nb_req *r, const char *owner)
{
    if (!r->who.admin)
        return r->who.name;
    return owner != NULL && owner[0] != '\0' ? owner : NULL;
}

void nb_http_audit(const struct nb_req *r, const char *action, const char *what)
{
    nb_info("audit: key=%s action=%s %s", r->who.name[0] ? r->who.name : "-", action,
            what != NULL && what[0] ? what : "-");
}

/*
 * The key's request rate (`rate=` in the keys file, ratelimit.h): one
 * token of its bucket per request it sends, internal ones (MCP's tool
 * calls) riding on their outer request's. 0 with a 429 "quota" and a
 * Retry-After (whole seconds, at least 1) when the bucket is empty.
 */
static int rate_ok(struct nb_req *r, struct nb_apierr *ae)
{
    int64_t retry_ms;
    char secs[24];
    if (r->who.rate[0] == '\0' || nb_metrics == NULL ||
        nb_rate_take(&nb_metrics->rate, r->who.name, r->who.rate, nb_rate_now_ns(), &retry_ms))
        return 1;
    snprintf(secs, sizeof(secs), "%lld", (long long)(retry_ms + 999) / 1000);
    nb_http_add_header(r, "Retry-After", secs);
    nb_apierr_set(ae, NB_E_LIMIT, "quota",
                  "quota rate=%s of key \"%s\" reached: try again in %lld ms", r->who.rate,
                  r->who.name, (long long)retry_ms);
    return 0;
}

/* The native API's 401, or the front's that claimed r. */
static const char *unauthorized(const struct nb_req *r)
{
    return r->front != NULL ? r->front->unauthorized : HTTP_UNAUTHORIZED;
}

/*
 * The shape of r and its args: the first front's that claims it, else the
 * native API's (route.h). r->front says whose it is; tab and n get its rows.
 */
static enum nb_route http_match(struct nb_req *r, struct nb_route_args *ra, const char **sub,
                                const struct nb_route_entry **tab, size_t *n)
{
    enum nb_route shape;
    for (size_t i = 0; i < http_n_fronts; i++) {
        const struct nb_front *f = http_fronts[i];
        shape = f->match(r, ra);
        if (shape != NB_ROUTE_NONE) {
            r->front = f;
            *sub = f->sub(shape, ra);
            *tab = f->routes;
            *n = f->n_routes;
            return shape;
        }
    }
    shape = nb_route_match(r->path, ra->id, sizeof(ra->id), ra->arg, sizeof(ra->arg), ra->op,
                           sizeof(ra->op));
    *sub = nb_route_sub(shape, ra);
    *tab = http_routes;
    *n = http_n_routes;
    return shape;
}

int nb_http_dispatch(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae)
{
    struct nb_route_args ra;
    const struct nb_route_entry *row, *tab;
    enum nb_route shape;
    enum nb_route_found found;
    unsigned flags;
    uint32_t pid;
    char allowed[64];
    const char *sub;
    size_t n;

    shape = http_match(r, &ra, &sub, &tab, &n);
    found = shape == NB_ROUTE_NONE ? NB_ROUTE_NO_ROWS
                                   : nb_route_lookup(tab, n, shape, sub, r->method, &row, &flags,
                                                     allowed, sizeof(allowed));
    /* a sub-route the table does not name (an op, a path): its shape's catch-all row, if any */
    if (found == NB_ROUTE_NO_ROWS && shape != NB_ROUTE_NONE)
        found =
            nb_route_lookup(tab, n, shape, "*", r->method, &row, &flags, allowed, sizeof(allowed));
    /*
     * nginx's check before it reads a body (auth_request, nanobox.conf.in):
     * 204 where the request would pass the key check below, else its 401;
     * every other error is the request's own, once its body is read.
     */
    if (nb_http_auth_only(r)) {
        if (found == NB_ROUTE_NO_ROWS || (flags & NB_ROUTE_PUBLIC) || authorized(a, r, flags))
            return nb_http_pass_auth(r);
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthorized", "%s", unauthorized(r));
        return NB_ERR;
    }
    if (found == NB_ROUTE_NO_ROWS) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "no_route", "no such route: %.200s", r->path);
        return NB_ERR;
    }
    if (found == NB_ROUTE_FOUND)
        r->mroute = (int)row->metric; /* its latency histogram (metrics.h) */
    if (!(flags & NB_ROUTE_PUBLIC) && !nb_http_is_internal(r) && !authorized(a, r, flags)) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthorized", "%s", unauthorized(r));
        return NB_ERR;
    }
    /* the service's own numbers (GET /metrics) are an operator's, not a user key's */
    if ((flags & NB_ROUTE_METRICS_AUTH) && !nb_http_is_internal(r) && !r->who.admin) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden", "%s is for admin keys and the metrics_token",
                      r->path);
        return NB_ERR;
    }
    if (!nb_http_is_internal(r) && !rate_ok(r, ae))
        return NB_ERR;
    /* ids opaque to a front's clients: one that is not ours names no sandbox */
    if ((flags & NB_ROUTE_ID_404) && (flags & NB_ROUTE_ID) && !http_guard->id_valid(ra.id)) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "sandbox \"%.64s\" not found", ra.id);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_ID) && !http_guard->id_valid(ra.id)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_id",
                      "\"%.64s\" is not a sandbox id (a lowercase UUID)", ra.id);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_PID) && nb_route_pid(ra.arg, &pid) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_pid", "\"%.32s\" is not a process id", ra.arg);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_CTX) && nb_route_ctx(ra.arg) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_context",
                      "\"%.72s\" is not a context id (1 to %d of a-z, 0-9 and -)", ra.arg,
                      NB_ROUTE_CTX_MAX);
        return NB_ERR;
    }
    if (found == NB_ROUTE_NO_METHOD) {
        if (allowed[0] == '\0') {
            nb_apierr_set(ae, NB_E_NOT_FOUND, "no_route", "no such route: %.200s", r->path);
            return NB_ERR;
        }
        nb_http_add_header(r, "Allow", allowed);
        nb_apierr_set(ae, NB_E_METHOD, "method_not_allowed", "%s is not allowed here; use %s",
                      r->method, allowed);
        return NB_ERR;
    }
    /* the sandbox's own checks (the guard's): its key's to see, awake where the row asks */
    if ((flags & (NB_ROUTE_ID | NB_ROUTE_AWAKE)) && http_guard->check(a, r, flags, &ra, ae) != 0)
        return NB_ERR;
    if ((flags & NB_ROUTE_BULK) && http_bulk_hook != NULL && !nb_http_is_internal(r))
        http_bulk_hook();
    return row->handler(a, r, &ra, ae);
}

int nb_http_dispatch_internal(struct nb_app *a, struct nb_req *outer, const char *method,
                              const char *uri, const char *body, size_t body_len,
                              const char *content_type, int client_fd, struct nb_buf *answer,
                              long *status)
{
    struct nb_http_capture cap;
    struct nb_req ir;
    struct nb_apierr ae;
    size_t start = answer->len;
    int rc;

    memset(&ir, 0, sizeof(ir));
    nb_buf_init(&ir.body, 0);
    ir.outer = outer;
    /* an internal request acts as the key of the request it serves (MCP's tool calls) */
    if (outer != NULL)
        ir.who = outer->who;
    else
        nb_tenant_anyone(&ir.who);
    if (http_internal(&ir, &cap, method, uri, body, body_len, content_type, answer, &ae) != 0)
        rc = NB_ERR;
    else {
        cap.client_fd = client_fd;
        rc = nb_http_dispatch(a, &ir, &ae);
    }
    nb_http_finalize(&ir, rc, &ae);
    rc = 0;
    if (cap.overflow) {
        answer->len = start;
        if (answer->data != NULL)
            answer->data[start] = '\0';
        nb_buf_printf(answer, "error: the answer to %s %.200s is larger than %zu bytes", method,
                      ir.path, answer->cap);
        rc = -1;
    }
    *status = ir.status;
    nb_info("internal: %s %.200s %d", method, ir.path, ir.status);
    nb_buf_free(&ir.body);
    return rc;
}

int nb_http_after(struct nb_req *r, nb_http_hook_fn fn, void *arg)
{
    while (r->outer != NULL)
        r = r->outer;
    if (r->n_hooks == NB_HTTP_HOOKS_MAX) {
        nb_warn("%s %.200s: no room for another after-the-answer hook (%d): done now", r->method,
                r->path, NB_HTTP_HOOKS_MAX);
        return -1;
    }
    r->hooks[r->n_hooks].fn = fn;
    r->hooks[r->n_hooks].arg = arg;
    r->n_hooks++;
    return 0;
}

void nb_http_run_after(struct nb_app *a, struct nb_req *r)
{
    for (unsigned i = 0; i < r->n_hooks; i++)
        r->hooks[i].fn(a, r->hooks[i].arg);
    r->n_hooks = 0;
}

int nb_http_client_fd(const struct nb_req *r)
{
    if (r->capture != NULL)
        return r->capture->client_fd;
    return r->fcgi != NULL ? r->fcgi->ipcFd : -1;
}

int nb_http_read_some(struct nb_req *r, void *buf, size_t n)
{
    struct nb_http_capture *cap = r->capture;

    if (n > INT_MAX)
        n = INT_MAX;
    if (cap == NULL)
        return FCGX_GetStr(buf, (int)n, r->fcgi->in);
    if (n > cap->in_len - cap->in_off)
        n = cap->in_len - cap->in_off;
    if (n > 0)
        memcpy(buf, cap->in + cap->in_off, n);
    cap->in_off += n;
    return (int)n;
}

/* The answer's bytes: to the FastCGI stream, or into the capture buffer. */
static int put(struct nb_req *r, const void *data, size_t len)
{
    struct nb_http_capture *cap = r->capture;

    if (cap == NULL)
        return len > 0 && FCGX_PutStr(data, (int)len, r->fcgi->out) < 0 ? -1 : 0;
    if (cap->overflow || nb_buf_append(cap->out, data, len) != NB_OK) {
        cap->overflow = 1; /* treated as a client that left: the handler stops */
        return -1;
    }
    return 0;
}

int nb_http_read_body(struct nb_req *r, size_t cap, struct nb_apierr *ae)
{
    const char *cl = nb_http_param(r, "CONTENT_LENGTH");
    unsigned long long want = 0;
    char chunk[16384];
    int n;

    if (cl != NULL && *cl) {
        char *end;
        want = strtoull(cl, &end, 10);
        if (*end != '\0') {
            nb_apierr_set(ae, NB_E_INVALID, "bad_request", "Content-Length is not a number");
            return -1;
        }
    }
    if (want > cap) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "the body is %llu bytes; the limit is %zu (max_body)", want, cap);
        return -1;
    }
    nb_buf_init(&r->body, cap);
    nb_buf_append(&r->body, "", 0);
    while ((n = nb_http_read_some(r, chunk, sizeof(chunk))) > 0) {
        if (nb_buf_append(&r->body, chunk, (size_t)n) != NB_OK) {
            nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                          "the body is larger than %zu bytes (max_body)", cap);
            return -1;
        }
    }
    return 0;
}

const char *nb_http_param(const struct nb_req *r, const char *name)
{
    return FCGX_GetParam(name, r->envp);
}

int nb_http_query_each(const struct nb_req *r, int (*cb)(void *arg, const char *k, const char *v),
                       void *arg)
{
    return nb_query_each(r->query, cb, arg);
}

int nb_http_query_bytes(const struct nb_req *r, const char *key, struct nb_buf *out)
{
    return nb_query_bytes(r->query, key, out);
}

int nb_http_query(const struct nb_req *r, const char *key, char *out, size_t outlen)
{
    return nb_query_get(r->query, key, out, outlen);
}

void nb_http_add_header(struct nb_req *r, const char *name, const char *value)
{
    size_t used = strlen(r->headers);
    int n = snprintf(r->headers + used, sizeof(r->headers) - used, "%s: %s\r\n", name, value);

    if (n < 0 || (size_t)n >= sizeof(r->headers) - used) {
        r->headers[used] = '\0';
        nb_warn("answer header %s dropped: over %d bytes of extra headers", name, NB_HEADERS_MAX);
    }
}

static void send_head(struct nb_req *r, int status, const char *ctype, int stream)
{
    r->status = status;
    r->answered = 1;
    if (r->capture != NULL)
        return; /* the caller reads r->status; headers have nowhere to go */
    FCGX_FPrintF(r->fcgi->out, "Status: %d %s\r\n", status, reason(status));
    if (ctype)
        FCGX_FPrintF(r->fcgi->out, "Content-Type: %s\r\n", ctype);
    /* nginx passes each chunk of a stream on as it comes (fastcgi_buffering per answer) */
    if (stream)
        FCGX_FPrintF(r->fcgi->out, "X-Accel-Buffering: no\r\n");
    FCGX_FPrintF(r->fcgi->out, "%sCache-Control: no-store\r\n\r\n", r->headers);
}

void nb_http_json(struct nb_req *r, int status, yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    send_head(r, status, "application/json", 0);
    if (put(r, buf, len) == 0)
        put(r, "\n", 1);
}

void nb_http_body(struct nb_req *r, int status, const char *ctype, const void *data, size_t len)
{
    send_head(r, status, ctype, 0);
    put(r, data, len);
}

/*
 * The one mapping of a domain code (nberr.h) to an HTTP status: every
 * error answer's, the native API's and the fronts'.
 */
int nb_http_status_of(enum nb_err err)
{
    static const short status[NB_E_COUNT] = {
        [NB_E_OK] = 500, /* an error without a code is nanobox's fault */
        [NB_E_INVALID] = 400,     [NB_E_OUT_OF_RANGE] = 422, [NB_E_UNAUTHENTICATED] = 401,
        [NB_E_FORBIDDEN] = 403,   [NB_E_NOT_FOUND] = 404,    [NB_E_NO_CONTEXT] = 404,
        [NB_E_METHOD] = 405,      [NB_E_CONFLICT] = 409,     [NB_E_EXISTS] = 409,
        [NB_E_TOO_LARGE] = 413,   [NB_E_URI_TOO_LONG] = 414, [NB_E_LIMIT] = 429,
        [NB_E_CANCELLED] = 499,   [NB_E_INTERNAL] = 500,     [NB_E_UNSUPPORTED] = 501,
        [NB_E_UPSTREAM] = 502,    [NB_E_UNAVAILABLE] = 503,  [NB_E_AGENT_DOWN] = 503,
        [NB_E_DOCKER_DOWN] = 503, [NB_E_CAPACITY] = 503,     [NB_E_TIMEOUT] = 504,
        [NB_E_NO_SPACE] = 507,
    };
    return (unsigned)err < NB_E_COUNT && status[err] != 0 ? status[err] : 500;
}

/* The error answer: the native API's {"error", "code"}, or the front's own. */
static void http_error(struct nb_req *r, const struct nb_apierr *ae)
{
    yajl_gen g;
    if (r->front != NULL && r->front->error != NULL) {
        r->front->error(r, ae);
        return;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "error", ae->msg);
    nb_json_kv_str(g, "code", ae->code);
    yajl_gen_map_close(g);
    nb_http_json(r, nb_http_status_of(ae->err), g);
    yajl_gen_free(g);
}

void nb_http_no_content(struct nb_req *r)
{
    send_head(r, 204, NULL, 0);
}

int nb_http_wants_ndjson(const struct nb_req *r)
{
    const char *acc = nb_http_param(r, "HTTP_ACCEPT");
    return acc != NULL && strstr(acc, "application/x-ndjson") != NULL;
}

void nb_http_stream_begin(struct nb_req *r, int status, const char *ctype)
{
    r->stream_ctype = ctype;
    if (ctype != NULL && !strcmp(ctype, "application/x-ndjson"))
        r->stream = HTTP_STREAM_NDJSON;
    else
        r->stream = HTTP_STREAM_BYTES;
    send_head(r, status, ctype, 1);
    if (r->capture == NULL)
        FCGX_FFlush(r->fcgi->out);
}

/* All of iov written to fd (blocking, with the send timeout the worker set): 0 or -1. */
static int writev_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* Record content of a multiple of 8 bytes: no padding needed. */
#define HTTP_RECORD_MAX (FCGI_MAX_LENGTH & ~7u)

/*
 * Bytes of a streamed answer straight to nginx, as FastCGI stdout records
 * of up to 64k: libfcgi's stream cuts everything into records of 8k, one
 * write each, and nginx then reads and forwards 8k at a time (a 1 MiB
 * download was 128 of each). What the stream holds is flushed first, so
 * the order stays; FCGX_Finish_r ends the stream as usual. 0, or -1 (the
 * client left, or a write blocked for the worker's send timeout: the
 * connection is then shut, so that finishing the request does not wait
 * again).
 */
static int put_records(struct nb_req *r, const unsigned char *p, size_t len)
{
    int fd = r->fcgi->ipcFd, id = r->fcgi->requestId;

    if (FCGX_FFlush(r->fcgi->out) < 0 || FCGX_GetError(r->fcgi->out) != 0)
        return -1;
    while (len > 0) {
        size_t n = len < HTTP_RECORD_MAX ? len : HTTP_RECORD_MAX;
        unsigned char hdr[FCGI_HEADER_LEN] = {FCGI_VERSION_1,
                                              FCGI_STDOUT,
                                              (unsigned char)(id >> 8),
                                              (unsigned char)id,
                                              (unsigned char)(n >> 8),
                                              (unsigned char)n,
                                              0,
                                              0};
        struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)(uintptr_t)p, n}};
        if (writev_all(fd, iov, 2) != 0) {
            shutdown(fd, SHUT_RDWR);
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

/* Below this, a piece goes through libfcgi's stream (one record, one write). */
#define HTTP_DIRECT_MIN 8192

int nb_http_stream_bytes(struct nb_req *r, const void *data, size_t len)
{
    if (r->gone)
        goto gone;
    if (r->capture == NULL && len >= HTTP_DIRECT_MIN)
        return put_records(r, data, len) == 0 ? 0 : (r->gone = 1, -1);
    if (put(r, data, len) != 0)
        goto gone;
    if (r->capture != NULL)
        return 0;
    if (FCGX_FFlush(r->fcgi->out) < 0 || FCGX_GetError(r->fcgi->out) != 0)
        goto gone;
    return 0;
gone:
    r->gone = 1;
    return -1;
}

int nb_http_stream_line(struct nb_req *r, yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    if (r->gone || put(r, buf, len) != 0 || put(r, "\n", 1) != 0) {
        r->gone = 1;
        return -1;
    }
    yajl_gen_clear(g);
    yajl_gen_reset(g, NULL); /* ready for the next line's value */
    return nb_http_stream_bytes(r, NULL, 0);
}

/* Answer r's error (or its missing answer), as nb_http_finalize says. */
static void finalize_answer(struct nb_req *r, int rc, const struct nb_apierr *ae)
{
    if (rc == NB_OK) {
        if (!r->answered) {
            struct nb_apierr none;
            nb_apierr_set(&none, NB_E_INTERNAL, "internal", "the request got no answer");
            nb_metrics_error(nb_http_status_of(none.err), none.code);
            http_error(r, &none);
        }
        return;
    }
    nb_metrics_error(nb_http_status_of(ae->err), ae->code);
    if (!r->answered) {
        http_error(r, ae);
    } else if (r->stream != HTTP_STREAM_NONE && r->front != NULL &&
               r->front->stream_error != NULL && r->front->stream_error(r, r->stream_ctype, ae)) {
        /* the front ended its stream its way */
    } else if (r->stream == HTTP_STREAM_NDJSON) {
        /* the stream's own error event: the status went out long ago */
        yajl_gen g;
        if (r->gone)
            return;
        g = nb_json_gen();
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "type", "error");
        nb_json_kv_str(g, "error", ae->msg);
        nb_json_kv_str(g, "code", ae->code);
        yajl_gen_map_close(g);
        nb_http_stream_line(r, g);
        yajl_gen_free(g);
    } else {
        /* a byte stream can only end short: the client sees a body cut off */
        nb_warn("%s %.200s: the answer broke off after it began: %s", r->method, r->path, ae->msg);
    }
}

/* Every request ends here: its error answered, its errors and latency counted. */
void nb_http_finalize(struct nb_req *r, int rc, const struct nb_apierr *ae)
{
    finalize_answer(r, rc, ae);
    if (r->mroute >= 0)
        nb_metrics_route((enum nb_mroute)r->mroute, nb_metrics_now_us() - r->t0_us);
}
