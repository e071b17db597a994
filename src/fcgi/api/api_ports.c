/*
 * api_ports.c - the port routes: open (ephemeralport), list, close. The
 * work is in ports.c; this file validates input and shapes the answers with
 * the original NanoBox keys (host, hostport, duration) kept as they were.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "json.h"
#include "log.h"
#include "ports.h"
#include "sandbox.h"
#include "tenant.h"

static void port_json(struct nb_app *a, yajl_gen g, const char *id, uint16_t sandboxport,
                      uint16_t hostport, int64_t expires)
{
    char url[512];
    nb_port_url(&a->conf, id, sandboxport, url, sizeof(url));
    nb_json_kv_str(g, "host", nb_port_public_host(a));
    nb_json_kv_int(g, "hostport", hostport);
    nb_json_kv_int(g, "sandboxport", sandboxport);
    nb_json_kv_str(g, "url", url);
    nb_json_kv_int(g, "expires_at", expires);
}

int api_port_open(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"sandboxport", NB_JT_INT, NULL},
        {"duration", NB_JT_INT, NULL},
        {"hostport", NB_JT_INT, NULL},
    };
    struct nb_port_open req;
    struct nb_port_info info;
    char err[256];
    yajl_val body = NULL;
    long long sp, dur, hp = 0;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (nb_json_fields(body, f, 3, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[0].val == NULL || f[1].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "fields \"sandboxport\" and \"duration\" (seconds) are required");
        goto out;
    }
    sp = nb_json_int(f[0].val);
    dur = nb_json_int(f[1].val);
    if (f[2].val)
        hp = nb_json_int(f[2].val);
    if (sp < 1 || sp > 65535) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "sandboxport must be between 1 and 65535");
        goto out;
    }
    if (f[2].val && (hp < c->port_min || hp > c->port_max)) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "hostport must be between %u and %u (port_range)", c->port_min, c->port_max);
        goto out;
    }
    if (dur <= 0 || dur > c->max_port_duration) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "duration must be between 1 and %u seconds (max_port_duration)",
                      c->max_port_duration);
        goto out;
    }
    req.sandboxport = (uint16_t)sp;
    req.hostport = (uint16_t)hp;
    req.duration = (unsigned)dur;
    req.key_max_ports = nb_http_key(r)->max_ports;
    req.key_name = nb_http_key(r)->name;
    if (nb_port_open(a, ra->id, &req, &info, ae) != 0)
        goto out;
    nb_http_audit(r, "port-open", ra->id);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    port_json(a, g, ra->id, info.sandboxport, info.hostport, info.expires);
    nb_json_kv_int(g, "duration", info.duration);
    yajl_gen_map_close(g);
    nb_http_json(r, 201, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    yajl_tree_free(body);
    return rc;
}

int api_port_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_gen g;
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "ports");
    yajl_gen_array_open(g);
    for (int i = 0; i < NB_MAX_PORTS; i++) {
        const struct nb_port *p = &slot.ports[i];
        if (p->sandboxport == 0 || p->fwd_start == 0)
            continue; /* still opening */
        yajl_gen_map_open(g);
        port_json(a, g, ra->id, p->sandboxport, p->hostport, p->expires);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    return NB_OK;
}

int api_port_close(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    const char *port = ra->arg;
    char *end;
    long sp = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || port[0] == '-' || port[0] == '+') {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "\"%.16s\" is not a port number", port);
        return NB_ERR;
    }
    if (sp < 1 || sp > 65535) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "sandboxport must be between 1 and 65535");
        return NB_ERR;
    }
    if (nb_port_close(a, ra->id, (uint16_t)sp, ae) != 0)
        return NB_ERR;
    nb_http_audit(r, "port-close", ra->id);
    nb_http_no_content(r);
    return NB_OK;
}

/* "<port>-<id>.<domain>": 0 with *port and id, -1 when host is not so. */
static int port_host(const char *host, unsigned *port, char *id, size_t idlen)
{
    size_t nd, ni;
    if (host == NULL)
        return -1;
    nd = strspn(host, "0123456789");
    if (nd < 1 || nd > 5 || host[nd] != '-')
        return -1;
    ni = strspn(host + nd + 1, "0123456789abcdef-");
    if (ni != 36 || host[nd + 1 + ni] != '.' || idlen <= ni)
        return -1;
    *port = (unsigned)strtoul(host, NULL, 10);
    memcpy(id, host + nd + 1, ni);
    id[ni] = '\0';
    return 0;
}

/* nb_port_open_on_demand with the quota of the sandbox's owner, as the owner's own request has */
static int open_on_demand(struct nb_app *a, const char *id, uint16_t port, struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct nb_key owner;
    if (nb_sandbox_get(a, id, &slot, ae) != 0)
        return -1;
    nb_tenant_refresh(a);
    if (slot.owner[0] == '\0' || nb_tenant_lookup(slot.owner, &owner) != 0)
        return nb_port_open_on_demand(a, id, port, 0, NULL, ae);
    return nb_port_open_on_demand(a, id, port, owner.max_ports, owner.name, ae);
}

int api_port_on_demand(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae)
{
    char id[40], reason[sizeof(ae->code)];
    unsigned port = 0;
    const char *why = NULL;

    if (port_host(nb_http_param(r, "NANOBOX_PORT_HOST"), &port, id, sizeof(id)) != 0 || port < 1 ||
        port > 65535)
        why = "out_of_range";
    else if (!nb_sandbox_id_valid(id))
        why = "not_found";
    else if (nb_port_mark_if_open(a, id, (uint16_t)port))
        why = NULL; /* open, but nginx had no .open file to see it by */
    else if (!a->conf.ports_on_demand)
        why = "off";
    else if (open_on_demand(a, id, (uint16_t)port, ae) != 0) {
        why = reason;
        snprintf(reason, sizeof(reason), "%s", ae->code);
        nb_debug("port %u of sandbox %s not opened on demand: %s", port, id, ae->msg);
    }
    if (why == NULL) {
        nb_http_no_content(r);
        return NB_OK;
    }
    /* auth_request lets only 2xx, 401 and 403 through: the reason rides in a header */
    nb_http_add_header(r, "X-Nanobox-Port", why);
    nb_apierr_set(ae, NB_E_FORBIDDEN, "not_opened", "port not opened on demand: %s", why);
    return NB_ERR;
}
