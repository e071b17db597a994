/*
 * request.c - see http.h. A request's reads and its answer's writes:
 * the FastCGI params, the URI split into path and query, the body, the
 * extra headers, the status line and a whole body; and the request's
 * "after the answer" hooks. Every byte in or out goes through here (and
 * stream.c), which is what lets an internal request (r->capture,
 * internal.c) stand in for a FastCGI one.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "httppriv.h"
#include "log.h"
#include "metrics.h"
#include "query.h"

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
int nb_http_set_uri(struct nb_req *r, const char *uri, struct nb_apierr *ae)
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

void nb_http_req_start(struct nb_req *r)
{
    r->headers[0] = '\0';
    r->status = 0;
    r->answered = r->stream = r->gone = 0;
    r->front = NULL;
    r->stream_ctype = NULL;
    r->t0_us = nb_metrics_now_us();
    r->mroute = -1;
}

int nb_http_parse(struct nb_req *r, FCGX_Request *fcgi, struct nb_apierr *ae)
{
    const char *uri;

    r->fcgi = fcgi;
    r->capture = NULL;
    r->outer = NULL;
    r->n_hooks = 0;
    r->envp = fcgi->envp;
    nb_http_req_start(r);
    memset(&r->who, 0, sizeof(r->who)); /* no one until a key passes */
    r->from_node = 0;
    r->method = FCGX_GetParam("REQUEST_METHOD", fcgi->envp);
    if (r->method == NULL)
        r->method = "GET";
    uri = FCGX_GetParam("REQUEST_URI", fcgi->envp);
    if (uri == NULL)
        uri = FCGX_GetParam("DOCUMENT_URI", fcgi->envp);
    if (uri == NULL)
        uri = "/";
    return nb_http_set_uri(r, uri, ae);
}

int nb_http_is_internal(const struct nb_req *r)
{
    return r->capture != NULL;
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
int nb_http_put(struct nb_req *r, const void *data, size_t len)
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

void nb_http_send_head(struct nb_req *r, int status, const char *ctype, int stream)
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
    nb_http_send_head(r, status, "application/json", 0);
    if (nb_http_put(r, buf, len) == 0)
        nb_http_put(r, "\n", 1);
}

void nb_http_body(struct nb_req *r, int status, const char *ctype, const void *data, size_t len)
{
    nb_http_send_head(r, status, ctype, 0);
    nb_http_put(r, data, len);
}

void nb_http_no_content(struct nb_req *r)
{
    nb_http_send_head(r, 204, NULL, 0);
}

/* The "after the answer" hooks, on the outermost request. */
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
