/*
 * placement.c - see placement.h.
 *
 * The nodes and their free slots come from the member's last read of
 * their records (the shared metrics block, every few seconds): no etcd
 * call on a create. A count a few seconds old can send two creates to a
 * node that has room for one; that node refuses the second (capacity) and
 * it is made here instead, so a stale count costs a hop, never a failure.
 */
#include "config.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "log.h"
#include "metrics.h"
#include "placement.h"

#define PLACE_TIMEOUT_MS (330L * 1000L) /* a create's longest, a cold image included */
#define PLACE_ANSWER_MAX (1u << 20)

static size_t placed_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct nb_buf *b = userdata;
    size_t n = size * nmemb;
    return nb_buf_append(b, ptr, n) == NB_OK ? n : 0;
}

static size_t placed_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct nb_placed *p = userdata;
    size_t n = size * nmemb;
    if (n > 13 && strncasecmp(ptr, "Content-Type:", 13) == 0) {
        const char *v = ptr + 13;
        size_t len = n - 13;
        while (len > 0 && (*v == ' ' || *v == '\t'))
            v++, len--;
        while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n'))
            len--;
        snprintf(p->ctype, sizeof(p->ctype), "%.*s", (int)len, v);
    }
    return n;
}

static int seeded; /* each worker draws its own */

/* Does node have the template of hash h ready (h 0: no template asked)? */
static int has_template(const struct nb_mnode *node, uint64_t h)
{
    if (h == 0)
        return 1;
    for (uint32_t i = 0; i < node->n_templates && i < 64; i++)
        if (node->templates[i] == h)
            return 1;
    return 0;
}

/* The node a create goes to: the better of two drawn at random from those
 * that take sandboxes and have the template; -1 none. */
static int pick(const struct nb_mcluster *view, const char *self, uint64_t tpl)
{
    int ok[NB_METRICS_NODES], n = 0, a, b;
    for (uint32_t i = 0; i < view->nodes_seen && i < NB_METRICS_NODES; i++)
        if (!view->node[i].drain && view->node[i].free > 0 && view->node[i].url[0] != '\0' &&
            has_template(&view->node[i], tpl))
            ok[n++] = (int)i;
    if (n == 0)
        return -1;
    if (!seeded) {
        srandom((unsigned)getpid() ^ (unsigned)time(NULL));
        seeded = 1;
    }
    a = ok[random() % n];
    if (n == 1)
        return a;
    do
        b = ok[random() % n];
    while (b == a);
    if (view->node[b].free > view->node[a].free ||
        (view->node[b].free == view->node[a].free && !strcmp(view->node[b].name, self)))
        return b; /* more room wins; a tie stays here */
    return a;
}

int nb_place_create(struct nb_app *a, const char *path, const char *body, size_t len,
                    const char *owner, const char *template_key, struct nb_placed *out)
{
    static CURL *curl;
    struct nb_mcluster *view;
    struct curl_slist *hdrs = NULL;
    char url[NB_CONF_STR + 64], h[256];
    CURLcode cc;
    int k;

    memset(out, 0, sizeof(*out));
    if (a->conf.cluster_secret[0] == '\0' || a->conf.node_name[0] == '\0')
        return 0;
    view = malloc(sizeof(*view));
    if (view == NULL || nb_metrics_nodes_copy(view) != 0) {
        free(view);
        return 0;
    }
    k = pick(view, a->conf.node_name,
             template_key != NULL ? nb_registry_hash(template_key, strlen(template_key)) : 0);
    if (k < 0 || !strcmp(view->node[k].name, a->conf.node_name)) {
        free(view);
        return 0;
    }
    snprintf(out->node, sizeof(out->node), "%s", view->node[k].name);
    snprintf(url, sizeof(url), "%s%s", view->node[k].url, path);
    free(view);
    if (curl == NULL && (curl = curl_easy_init()) == NULL)
        return 0;
    nb_buf_init(&out->body, PLACE_ANSWER_MAX);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    snprintf(h, sizeof(h), NB_CLUSTER_SECRET_HEADER ": %s", a->conf.cluster_secret);
    hdrs = curl_slist_append(hdrs, h);
    snprintf(h, sizeof(h), NB_CLUSTER_OWNER_HEADER ": %s", owner);
    hdrs = curl_slist_append(hdrs, h);
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, PLACE_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body != NULL ? body : "");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, placed_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out->body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, placed_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    cc = curl_easy_perform(curl);
    curl_slist_free_all(hdrs);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    /* no answer, or the node full or in trouble: this node is the next */
    if (cc != CURLE_OK || out->status >= 500 || out->status < 200) {
        nb_warn("placement: node %s did not take the create (%s, HTTP %ld); made here", out->node,
                cc != CURLE_OK ? curl_easy_strerror(cc) : "answered", out->status);
        nb_buf_free(&out->body);
        return 0;
    }
    if (out->ctype[0] == '\0')
        snprintf(out->ctype, sizeof(out->ctype), "application/json");
    return 1;
}
