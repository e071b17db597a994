/*
 * api_forward.c - a node of a cluster as a front for the others
 * (docs/CLUSTER.md, "Every node a front"): a request that names a sandbox
 * of another node (by the tag in its id) is sent there, under the
 * cluster's secret and the key's name, and its answer relayed as it comes
 * (streams stay streams). So a client, or an MCP session, that reaches
 * any node reaches every sandbox.
 */
#include "config.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_common.h"
#include "cluster.h"
#include "log.h"
#include "metrics.h"
#include "placement.h"
#include "registry.h"
#include "templates.h"

#define FWD_CONNECT_MS 1000L
#define FWD_TIMEOUT_MS (3600L * 1000L) /* the other node ends its own long calls first */
#define FWD_BUFFERED_MAX (64u << 20)   /* an answer that is not a stream, relayed whole */

struct fwd {
    struct nb_req *r;
    char ctype[128];
    char extra[512]; /* answer headers passed on: "Name: value\r\n" each */
    long status;
    int streaming; /* the answer is relayed as it comes */
    int begun;     /* its status went out */
    int gone;      /* the client left: the transfer is cut */
    struct nb_buf body;
};

/* Answer headers worth passing on (a stream's type, a session, a port). */
static int passed_on(const char *name, size_t len)
{
    static const char *const names[] = {"Mcp-Session-Id",      "X-Nanobox-Port", "X-Next-Token",
                                        "Content-Disposition", "Retry-After",    "Allow"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0)
            return 1;
    return 0;
}

static size_t fwd_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct fwd *f = userdata;
    size_t n = size * nmemb, name_len;
    const char *colon = memchr(ptr, ':', n), *v;
    size_t vlen;

    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) { /* a new answer (after a 100) */
        f->ctype[0] = f->extra[0] = '\0';
        return n;
    }
    if (colon == NULL)
        return n;
    name_len = (size_t)(colon - ptr);
    v = colon + 1;
    vlen = n - name_len - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
        vlen--;
    if (name_len == 12 && strncasecmp(ptr, "Content-Type", 12) == 0)
        snprintf(f->ctype, sizeof(f->ctype), "%.*s", (int)vlen, v);
    else if (passed_on(ptr, name_len)) {
        size_t used = strlen(f->extra);
        snprintf(f->extra + used, sizeof(f->extra) - used, "%.*s: %.*s\r\n", (int)name_len, ptr,
                 (int)vlen, v);
    }
    return n;
}

/* The answer's headers, once: its status, its type, what is passed on. */
static void begin(struct fwd *f, CURL *c)
{
    char *line, *save = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &f->status);
    for (line = strtok_r(f->extra, "\r\n", &save); line != NULL;
         line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        nb_http_add_header(f->r, line, colon + 2);
    }
    f->streaming = !strncmp(f->ctype, "application/x-ndjson", 20) ||
                   !strncmp(f->ctype, "application/octet-stream", 24) ||
                   !strncmp(f->ctype, "text/event-stream", 17);
    if (f->streaming)
        nb_http_stream_begin(f->r, (int)f->status, f->ctype);
    f->begun = 1;
}

static CURL *fwd_curl; /* one a process, its connections kept */

static size_t fwd_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct fwd *f = userdata;
    size_t n = size * nmemb;
    if (!f->begun)
        begin(f, fwd_curl);
    if (f->streaming) {
        if (nb_http_stream_bytes(f->r, ptr, n) != 0) {
            f->gone = 1;
            return 0; /* the client left: cut the transfer */
        }
        return n;
    }
    return nb_buf_append(&f->body, ptr, n) == NB_OK ? n : 0;
}

/* what: "sandbox <id>", "volume <name>" */
static int node_down(struct nb_apierr *ae, const char *what, const char *how)
{
    nb_apierr_set(ae, NB_E_UNAVAILABLE, "node_unavailable",
                  "the node of %s %s: it answers again when the node is back", what, how);
    return -1;
}

/* The node whose sandboxes carry tag, from the member's last read: its url. */
static int node_of_tag(const char *tag, char *url, size_t urllen, char *name, size_t namelen)
{
    struct nb_mcluster *view = malloc(sizeof(*view));
    int found = 0;
    if (view == NULL)
        return 0;
    if (nb_metrics_nodes_copy(view) == 0)
        for (uint32_t i = 0; i < view->nodes_seen && i < NB_METRICS_NODES && !found; i++)
            if (!strcmp(view->node[i].tag, tag) && view->node[i].url[0] != '\0') {
                snprintf(url, urllen, "%s", view->node[i].url);
                snprintf(name, namelen, "%s", view->node[i].name);
                found = 1;
            }
    free(view);
    return found;
}

void api_origin(struct nb_req *r, char *out, size_t n)
{
    const char *host = nb_http_param(r, "HTTP_HOST"), *https = nb_http_param(r, "HTTPS");
    const char *port = nb_http_param(r, "SERVER_PORT"), *fwd;
    int tls = https != NULL && !strcmp(https, "on");
    /* a node's relay says whom the client reached: believed of a node only */
    if (nb_http_from_node(r) && (fwd = nb_http_param(r, "HTTP_X_NANOBOX_ORIGIN")) != NULL) {
        const char *h = !strncmp(fwd, "http://", 7)    ? fwd + 7
                        : !strncmp(fwd, "https://", 8) ? fwd + 8
                                                       : NULL;
        if (h != NULL && h[0] != '\0' && strlen(fwd) < 300 &&
            strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]_") ==
                strlen(h)) {
            snprintf(out, n, "%s", fwd);
            return;
        }
    }
    if (host == NULL)
        host = "localhost";
    /* the host as the client named it; nginx's port when the Host header has none */
    if (strchr(host, ':') == NULL && host[0] != '[' && port != NULL &&
        strcmp(port, tls ? "443" : "80") != 0)
        snprintf(out, n, "%s://%.200s:%.16s", tls ? "https" : "http", host, port);
    else
        snprintf(out, n, "%s://%.250s", tls ? "https" : "http", host);
}

/*
 * fwd_curl set up to send r (its method, path, query, body, Content-Type
 * and Accept; or q's, where q gives them) to the node at base, under the
 * cluster's secret and the key's name, with the origin the client reached
 * (api_origin). The headers' list, for the caller to free, and the URL in
 * *url (nb_buf_free after).
 */
static struct curl_slist *request_setup(CURL *c, struct nb_app *a, struct nb_req *r,
                                        const struct api_fwd_req *q, const char *base,
                                        struct nb_buf *url)
{
    struct curl_slist *hdrs = NULL;
    const char *v, *method = q ? q->method : r->method;
    const char *body = q ? q->body : r->body.data;
    size_t body_len = q ? q->body_len : r->body.len;
    char h[400];

    nb_buf_init(url, NB_CONF_STR + NB_PATH_MAX + NB_QUERY_MAX);
    if (q != NULL)
        nb_buf_printf(url, "%s%s%s%s", base, q->path, q->query && q->query[0] ? "?" : "",
                      q->query ? q->query : "");
    else
        nb_buf_printf(url, "%s%s%s%s", base, r->path, r->query[0] ? "?" : "", r->query);
    snprintf(h, sizeof(h), NB_CLUSTER_SECRET_HEADER ": %s", a->conf.cluster_secret);
    hdrs = curl_slist_append(hdrs, h);
    snprintf(h, sizeof(h), NB_CLUSTER_OWNER_HEADER ": %s", nb_http_key(r)->name);
    hdrs = curl_slist_append(hdrs, h);
    {
        char origin[340];
        api_origin(r, origin, sizeof(origin));
        snprintf(h, sizeof(h), API_ORIGIN_HEADER ": %s", origin);
        hdrs = curl_slist_append(hdrs, h);
    }
    v = q ? q->ctype : nb_http_param(r, "CONTENT_TYPE");
    if (v != NULL && v[0] != '\0') {
        snprintf(h, sizeof(h), "Content-Type: %.280s", v);
        hdrs = curl_slist_append(hdrs, h);
    }
    if ((v = nb_http_param(r, "HTTP_ACCEPT")) != NULL && v[0] != '\0') {
        snprintf(h, sizeof(h), "Accept: %.280s", v);
        hdrs = curl_slist_append(hdrs, h);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url->data);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, FWD_CONNECT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, FWD_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body_len > 0 || strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    return hdrs;
}

/* r sent to node (named node, at base) and its answer relayed: 1, or -1 with ae. */
static int relay(struct nb_app *a, struct nb_req *r, const char *base, const char *node,
                 const char *what, struct nb_apierr *ae)
{
    char h[320];
    struct curl_slist *hdrs;
    struct nb_buf url;
    struct fwd f;
    CURLcode cc;

    /* (a handler that sends r on has read its body already) */
    if (r->body.data == NULL && nb_http_read_body(r, a->conf.max_body, ae) != 0)
        return -1;
    if (fwd_curl == NULL && (fwd_curl = curl_easy_init()) == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot make a curl handle");
        return -1;
    }
    memset(&f, 0, sizeof(f));
    f.r = r;
    nb_buf_init(&f.body, FWD_BUFFERED_MAX);
    hdrs = request_setup(fwd_curl, a, r, NULL, base, &url);
    curl_easy_setopt(fwd_curl, CURLOPT_HEADERFUNCTION, fwd_header);
    curl_easy_setopt(fwd_curl, CURLOPT_HEADERDATA, &f);
    curl_easy_setopt(fwd_curl, CURLOPT_WRITEFUNCTION, fwd_body);
    curl_easy_setopt(fwd_curl, CURLOPT_WRITEDATA, &f);
    cc = curl_easy_perform(fwd_curl);
    curl_slist_free_all(hdrs);
    nb_buf_free(&url);
    if (cc != CURLE_OK && !f.begun) {
        nb_buf_free(&f.body);
        nb_warn("forward: node %s did not answer for %s: %s", node, what, curl_easy_strerror(cc));
        return node_down(ae, what, "does not answer");
    }
    if (!f.begun) /* an answer without a body (204) */
        begin(&f, fwd_curl);
    if (!f.streaming) {
        if (cc != CURLE_OK) {
            nb_buf_free(&f.body);
            nb_apierr_set(ae, NB_E_UPSTREAM, "upstream_unavailable",
                          "the node of %s broke off its answer (%s)", what, curl_easy_strerror(cc));
            return -1;
        }
        /* its nginx up but its nanobox-fcgi not: the node is down all the same */
        if (f.status == 502 && f.body.data != NULL &&
            memmem(f.body.data, f.body.len, "\"upstream_unavailable\"", 22) != NULL) {
            nb_buf_free(&f.body);
            return node_down(ae, what, "does not answer");
        }
        /* an empty answer says so (a client such as openapi-fetch reads a body unless it does) */
        if (f.body.len == 0 && f.status != 204 && f.status != 304 && strcmp(r->method, "HEAD"))
            nb_http_add_header(r, "Content-Length", "0");
        nb_http_body(r, (int)f.status, f.ctype[0] ? f.ctype : "application/json",
                     f.body.data ? f.body.data : "", f.body.len);
    }
    nb_buf_free(&f.body);
    snprintf(h, sizeof(h), "on node %s (HTTP %ld)", node, f.status);
    nb_http_audit(r, "forwarded", h);
    return 1;
}

int api_forward_foreign(struct nb_app *a, struct nb_req *r, const char *id, struct nb_apierr *ae)
{
    char tag[NB_NODE_TAG_LEN + 1], base[NB_CONF_STR], node[NB_NODE_NAME_MAX + 1], what[64];

    if (a->conf.cluster_secret[0] == '\0' || a->node_tag[0] == '\0' ||
        !nb_cluster_id_tag(id, tag) || !strcmp(tag, a->node_tag) || nb_http_from_node(r))
        return 0; /* ours, a single machine's, or sent here by a node already */
    snprintf(what, sizeof(what), "sandbox %.40s", id);
    if (!node_of_tag(tag, base, sizeof(base), node, sizeof(node)))
        return node_down(ae, what, "is down or unknown");
    return relay(a, r, base, node, what, ae);
}

int api_forward_node(struct nb_app *a, struct nb_req *r, const char *name, const char *what,
                     struct nb_apierr *ae)
{
    char base[NB_CONF_STR], node[NB_NODE_NAME_MAX + 1];
    char tag[NB_NODE_TAG_LEN + 1];
    nb_node_tag(name, tag);
    if (!node_of_tag(tag, base, sizeof(base), node, sizeof(node)) || strcmp(node, name) != 0)
        return node_down(ae, what, "is down or unknown");
    return relay(a, r, base, node, what, ae);
}

int api_forward_template(struct nb_app *a, struct nb_req *r, const char *owner, const char *name,
                         struct nb_apierr *ae)
{
    char node[NB_NODE_NAME_MAX + 1], what[128];
    if (a->conf.cluster_secret[0] == '\0' || a->node_tag[0] == '\0' || nb_http_from_node(r) ||
        !nb_template_name_ok(name) ||
        !nb_registry_snapshot_node(a, nb_template_owner(owner), name, node, sizeof(node)) ||
        !strcmp(node, a->conf.node_name))
        return 0;
    snprintf(what, sizeof(what), "snapshot %.100s", name);
    return api_forward_node(a, r, node, what, ae);
}

/* A discard of an answer's body (a fan-out reads only the status). */
static size_t fwd_discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    (void)ptr;
    (void)userdata;
    return size * nmemb;
}

unsigned api_fanout(struct nb_app *a, struct nb_req *r)
{
    return api_fanout_req(a, r, NULL);
}

unsigned api_fanout_req(struct nb_app *a, struct nb_req *r, const struct api_fwd_req *q)
{
    struct nb_mcluster *view;
    unsigned ok = 0;

    /* r as it came is sent on by the node that took it from the client only */
    if (a->conf.cluster_secret[0] == '\0' || a->node_tag[0] == '\0' ||
        (q == NULL && nb_http_from_node(r)))
        return 0;
    if ((view = malloc(sizeof(*view))) == NULL || nb_metrics_nodes_copy(view) != 0 ||
        (fwd_curl == NULL && (fwd_curl = curl_easy_init()) == NULL)) {
        free(view);
        return 0;
    }
    for (uint32_t i = 0; i < view->nodes_seen && i < NB_METRICS_NODES; i++) {
        const struct nb_mnode *n = &view->node[i];
        struct curl_slist *hdrs;
        struct nb_buf url;
        long status = 0;
        CURLcode cc;
        char what[128];

        if (!strcmp(n->name, a->conf.node_name) || n->url[0] == '\0')
            continue;
        hdrs = request_setup(fwd_curl, a, r, q, n->url, &url);
        curl_easy_setopt(fwd_curl, CURLOPT_WRITEFUNCTION, fwd_discard);
        cc = curl_easy_perform(fwd_curl);
        curl_easy_getinfo(fwd_curl, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdrs);
        nb_buf_free(&url);
        snprintf(what, sizeof(what), "to node %s (%s %ld)", n->name,
                 cc == CURLE_OK ? "HTTP" : curl_easy_strerror(cc), status);
        nb_http_audit(r, "fanned-out", what);
        ok += cc == CURLE_OK && status >= 200 && status < 300;
    }
    free(view);
    return ok;
}
