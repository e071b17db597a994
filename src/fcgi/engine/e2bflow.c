/*
 * e2bflow.c - see e2bflow.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "e2bflow.h"
#include "etcd.h"
#include "log.h"
#include "registry.h"
#include "templates.h"

#define E2BFLOW_WHAT "e2bflow"

int nb_e2bflow_on(const struct nb_app *a)
{
    return a->conf.etcd_endpoints[0] != '\0' && a->node_tag[0] != '\0' &&
           a->conf.cluster_secret[0] != '\0';
}

static void flow_key(const struct nb_app *a, const char *owner, const char *name, char *out,
                     size_t n)
{
    nb_cluster_tpl_key(a->conf.etcd_prefix, E2BFLOW_WHAT, nb_template_owner(owner), name, out, n);
}

static int unavailable(struct nb_apierr *ae, const char *err)
{
    nb_apierr_set(ae, NB_E_UNAVAILABLE, "cluster_unavailable",
                  "the cluster cannot keep the template's build now (etcd: %.200s)", err);
    return -1;
}

int nb_e2bflow_claim(struct nb_app *a, const char *owner, const char *name, struct nb_apierr *ae)
{
    char key[NB_REG_KEY_MAX], *json;
    struct nb_tpl_meta m;
    struct nb_etcd *e;
    int rc;
    if (!nb_e2bflow_on(a))
        return 0;
    if ((e = nb_registry_etcd(a)) == NULL)
        return unavailable(ae, "no client");
    memset(&m, 0, sizeof(m));
    m.at = (int64_t)time(NULL);
    snprintf(m.node, sizeof(m.node), "%s", a->conf.node_name);
    flow_key(a, owner, name, key, sizeof(key));
    if ((json = nb_tpl_meta_json(&m)) == NULL)
        return unavailable(ae, "out of memory");
    rc = nb_etcd_put(e, key, json, strlen(json), 0);
    free(json);
    return rc == 0 ? 0 : unavailable(ae, e->err);
}

int nb_e2bflow_home(struct nb_app *a, const char *owner, const char *name, char *node, size_t len,
                    struct nb_apierr *ae)
{
    char key[NB_REG_KEY_MAX];
    int rc;
    if (!nb_e2bflow_on(a))
        return 0;
    flow_key(a, owner, name, key, sizeof(key));
    if ((rc = nb_registry_meta_node(a, key, 0, node, len)) < 0)
        return unavailable(ae, "etcd does not answer");
    return rc;
}

void nb_e2bflow_drop(struct nb_app *a, const char *owner, const char *name)
{
    char key[NB_REG_KEY_MAX];
    struct nb_etcd *e;
    if (!nb_e2bflow_on(a) || (e = nb_registry_etcd(a)) == NULL)
        return;
    flow_key(a, owner, name, key, sizeof(key));
    if (nb_etcd_delete(e, key) != 0)
        nb_warn("e2bflow: cannot drop %s: %s", key, e->err);
}
