/*
 * api_network.c - the network object a client sends: on create (`network:
 * "bridge"` or `{"mode", "allow", "deny"}`) and as the body of PUT
 * /sandbox/{id}/network (api_sandbox.c), and the policy as answered.
 * Validation only: the rules themselves are network.c's. Nothing is
 * changed until every entry has parsed and passed the operator's limits.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "api.h"
#include "json.h"
#include "network.h"

/* One of allow/deny: an array of rule strings, each parsed into l. */
static int rule_list(yajl_val v, const char *name, struct nb_netrules *l, struct nb_apierr *ae)
{
    char err[200];
    l->n = 0;
    if (v == NULL)
        return 0;
    if (!YAJL_IS_ARRAY(v)) {
        nb_apierr_set(ae, 400, "bad_field", "network.%s must be an array of strings", name);
        return -1;
    }
    if (YAJL_GET_ARRAY(v)->len > NB_NETRULES_MAX) {
        nb_apierr_set(ae, 422, "out_of_range", "network.%s holds at most %d rules", name,
                      NB_NETRULES_MAX);
        return -1;
    }
    for (size_t i = 0; i < YAJL_GET_ARRAY(v)->len; i++) {
        yajl_val e = YAJL_GET_ARRAY(v)->values[i];
        if (!YAJL_IS_STRING(e)) {
            nb_apierr_set(ae, 400, "bad_field", "network.%s[%zu] must be a string", name, i);
            return -1;
        }
        if (nb_netrules_add(l, YAJL_GET_STRING(e), err, sizeof(err)) != 0) {
            nb_apierr_set(ae, 422, "bad_rule", "network.%s[%zu]: %s", name, i, err);
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
        nb_apierr_set(ae, 400, "bad_field", "network: %s", err);
        return -1;
    }
    *mode_bridge = 1;
    if (f[F_MODE].val != NULL) {
        const char *m = nb_json_string(f[F_MODE].val);
        if (!strcmp(m, "none")) {
            *mode_bridge = 0;
        } else if (strcmp(m, "bridge") != 0) {
            nb_apierr_set(ae, 400, "bad_field", "network.mode must be \"none\" or \"bridge\"");
            return -1;
        }
    }
    if (rule_list(f[F_ALLOW].val, "allow", &p->allow, ae) != 0 ||
        rule_list(f[F_DENY].val, "deny", &p->deny, ae) != 0)
        return -1;
    if (!*mode_bridge && (p->allow.n || p->deny.n)) {
        nb_apierr_set(ae, 422, "bad_rule",
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
            nb_apierr_set(ae, 400, "bad_field",
                          "network must be \"none\", \"bridge\" or a network object");
            return -1;
        }
    } else if (policy_object(c, v, bridge, p, ae) != 0) {
        return -1;
    }
    if (*bridge && !c->allow_bridge) {
        nb_apierr_set(ae, 403, "forbidden",
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
