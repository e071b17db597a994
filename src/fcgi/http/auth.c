/*
 * auth.c - see http.h. Who sent a request and what it may do: the API key
 * it sends checked (tenant.h; the metrics token, a front's key prefix),
 * nginx's key check before the body (auth_request), which sandboxes its
 * key sees, the audit line of a state change, and its key's request rate
 * (ratelimit.h). The router (http.c) runs the checks.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "httppriv.h"
#include "log.h"
#include "metrics.h"
#include "tenant.h"

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
 * passes too, as does the bare key. A call from another node of the
 * cluster passes with the cluster's secret, as the key it names. 0 when no
 * key passes.
 */
int nb_http_authorized(struct nb_app *a, struct nb_req *r, unsigned flags)
{
    const char *h;

    nb_tenant_refresh(a);
    if (!nb_tenant_auth_on(a)) {
        nb_tenant_anyone(&r->who);
        return 1;
    }
    h = nb_http_param(r, "HTTP_X_NANOBOX_CLUSTER");
    if (h != NULL) {
        /* another node of the cluster, with a create it placed here for a
         * key it checked (placement.h): the cluster's secret, and the key's
         * name, whose role and quotas are this node's copy of the key. A
         * wrong secret passes nothing, whatever else the request sends. */
        const char *owner = nb_http_param(r, "HTTP_X_NANOBOX_OWNER");
        r->from_node = a->conf.cluster_secret[0] != '\0' && owner != NULL &&
                       nb_tenant_equal(h, a->conf.cluster_secret) &&
                       nb_tenant_lookup(owner, &r->who) == 0;
        return r->from_node;
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

int nb_http_from_node(const struct nb_req *r)
{
    return r->from_node;
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
int nb_http_rate_ok(struct nb_req *r, struct nb_apierr *ae)
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
const char *nb_http_unauthorized(const struct nb_req *r)
{
    return r->front != NULL ? r->front->unauthorized : HTTP_UNAUTHORIZED;
}
