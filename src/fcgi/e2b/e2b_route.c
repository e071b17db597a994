/*
 * e2b_route.c - see e2b_route.h. Plain string comparisons, as route.c's.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "e2b_route.h"

enum nb_route nb_e2b_match_path(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                                char *op, size_t oplen)
{
    const char *rest, *slash;
    size_t n;
    int v2 = 0;

    id[0] = arg[0] = '\0';
    if (oplen > 0)
        op[0] = '\0';
    if (strncmp(path, "/sandboxes", 10) != 0 && strncmp(path, "/v2/sandboxes", 13) != 0)
        return NB_ROUTE_NONE;
    if (!strcmp(path, "/sandboxes") || !strcmp(path, "/sandboxes/"))
        return NB_E2B_SANDBOXES;
    if (!strcmp(path, "/v2/sandboxes") || !strcmp(path, "/v2/sandboxes/"))
        return NB_E2B_LIST;
    if (!strncmp(path, "/sandboxes/", 11))
        rest = path + 11;
    else if (!strncmp(path, "/v2/sandboxes/", 14))
        rest = path + 14, v2 = 1;
    else
        return NB_E2B_OTHER;
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0)
        return NB_E2B_OTHER;
    if (n >= idlen)
        n = idlen - 1;
    memcpy(id, rest, n);
    id[n] = '\0';
    if (!v2 && (slash == NULL || !strcmp(slash, "/")))
        return NB_E2B_SANDBOX;
    n = slash ? strlen(slash + 1) : 0;
    if (n == 0 || n >= arglen || strchr(slash + 1, '/') != NULL) {
        id[0] = '\0';
        return NB_E2B_OTHER;
    }
    memcpy(arg, slash + 1, n + 1);
    return v2 ? NB_E2B_V2_OP : NB_E2B_OP;
}

enum nb_route nb_e2b_match_volume(const char *path, const char *key, char *arg, size_t arglen)
{
    size_t n;
    if (key == NULL || strncmp(key, "e2b_", 4) != 0 || strncmp(path, "/volumes", 8) != 0)
        return NB_ROUTE_NONE;
    if (!strcmp(path + 8, "") || !strcmp(path + 8, "/"))
        return NB_E2B_VOLUMES;
    if (path[8] != '/')
        return NB_ROUTE_NONE;
    n = strlen(path + 9);
    if (n == 0 || n >= arglen || strchr(path + 9, '/') != NULL)
        return NB_ROUTE_NONE;
    memcpy(arg, path + 9, n + 1);
    return NB_E2B_VOLUME;
}

int nb_e2b_host(const char *host, char *id, size_t idlen, char *port, size_t portlen)
{
    size_t n;
    if (host == NULL || (strncmp(host, "49983-", 6) != 0 && strncmp(host, "49999-", 6) != 0))
        return 0;
    n = strspn(host + 6, "0123456789abcdef-");
    if (n != 36 || host[6 + n] != '.' || idlen <= n || portlen <= 5)
        return 0;
    memcpy(id, host + 6, n);
    id[n] = '\0';
    memcpy(port, host, 5);
    port[5] = '\0';
    return 1;
}

enum nb_route nb_e2b_match_data(const char *path, const char *sandbox_id, const char *port,
                                char *id, size_t idlen, char *arg, size_t arglen, char *op,
                                size_t oplen)
{
    snprintf(id, idlen, "%s", sandbox_id);
    snprintf(op, oplen, "%s", port != NULL ? port : "");
    if (strlen(path) < arglen)
        snprintf(arg, arglen, "%s", path);
    else
        arg[0] = '\0';
    return NB_E2B_DATA;
}

enum nb_route nb_e2b_match_snapshots(const char *path, char *arg, size_t arglen)
{
    arg[0] = '\0';
    (void)arglen;
    if (!strcmp(path, "/snapshots") || !strcmp(path, "/snapshots/"))
        return NB_E2B_SNAPSHOTS;
    return NB_ROUTE_NONE;
}

/* The code interpreter's /contexts/<ctx>[/restart] as a row's sub; else the path as it is. */
static const char *data_sub(const char *path)
{
    const char *ctx, *slash;
    if (strncmp(path, "/contexts/", 10) != 0)
        return path;
    ctx = path + 10;
    slash = strchr(ctx, '/');
    if (slash == ctx)
        return path;
    if (slash == NULL)
        return "/contexts/{ctx}";
    return !strcmp(slash, "/restart") ? "/contexts/{ctx}/restart" : path;
}

const char *nb_e2b_sub(enum nb_route shape, const struct nb_route_args *ra)
{
    if ((int)shape == NB_E2B_DATA)
        return data_sub(ra->arg);
    if ((int)shape == NB_E2B_OP || (int)shape == NB_E2B_V2_OP)
        return ra->arg;
    return "";
}

const char *nb_e2b_path(enum nb_route shape)
{
    switch ((int)shape) {
    case NB_E2B_SANDBOXES:
        return "/sandboxes";
    case NB_E2B_SANDBOX:
    case NB_E2B_OP:
        return "/sandboxes/{id}";
    case NB_E2B_LIST:
        return "/v2/sandboxes";
    case NB_E2B_V2_OP:
        return "/v2/sandboxes/{id}";
    case NB_E2B_OTHER:
        return "/sandboxes/*";
    case NB_E2B_DATA:
        return "";
    case NB_E2B_SNAPSHOTS:
        return "/snapshots";
    case NB_E2B_TPL_V3:
        return "/v3/templates";
    case NB_E2B_TPL_BUILD:
        return "/v2/templates/{id}/builds/{buildID}";
    case NB_E2B_TPL_STATUS:
        return "/templates/{id}/builds/{buildID}/status";
    case NB_E2B_TPL_FILES:
        return "/templates/{id}/files/{hash}";
    case NB_E2B_TPL_ALIAS:
        return "/templates/aliases/{alias}";
    case NB_E2B_TPL_ONE:
        return "/templates/{id}";
    case NB_E2B_TPL_LIST:
        return "/templates";
    case NB_E2B_TPL_OTHER:
        return "/templates/*";
    case NB_E2B_VOLUMES:
        return "/volumes";
    case NB_E2B_VOLUME:
        return "/volumes/{volumeID}";
    default:
        return NULL;
    }
}

/* The number of segments of path below prefix ("" after a trailing '/' counts), or -1. */
static int tpl_segs(const char *path, const char *prefix, const char **seg2, const char **seg3)
{
    size_t pl = strlen(prefix);
    const char *p;
    int n = 1;
    *seg2 = *seg3 = "";
    if (strncmp(path, prefix, pl) != 0 || (path[pl] != '\0' && path[pl] != '/'))
        return -1;
    p = path + pl;
    if (*p == '\0' || !strcmp(p, "/"))
        return 0;
    for (p++; (p = strchr(p, '/')) != NULL; p++) {
        n++;
        if (n == 2)
            *seg2 = p + 1;
        if (n == 3)
            *seg3 = p + 1;
    }
    return n;
}

enum nb_route nb_e2b_match_tpl(const char *path, int e2b_key)
{
    const char *s2, *s3;
    int n;
    if ((n = tpl_segs(path, "/v3/templates", &s2, &s3)) >= 0)
        return n == 0 ? NB_E2B_TPL_V3 : NB_E2B_TPL_OTHER;
    if ((n = tpl_segs(path, "/v2/templates", &s2, &s3)) >= 0)
        return n == 3 && !strncmp(s2, "builds/", 7) ? NB_E2B_TPL_BUILD : NB_E2B_TPL_OTHER;
    if ((n = tpl_segs(path, "/templates", &s2, &s3)) < 0)
        return NB_ROUTE_NONE;
    if (n == 3 && !strncmp(s2, "files/", 6) && s3 - s2 == 6)
        return NB_E2B_TPL_FILES;
    if (n == 4 && !strncmp(s2, "builds/", 7) && !strcmp(s3 + strcspn(s3, "/"), "/status"))
        return NB_E2B_TPL_STATUS;
    if (!e2b_key)
        return NB_ROUTE_NONE;
    if (n == 2 && !strncmp(path, "/templates/aliases/", 19))
        return NB_E2B_TPL_ALIAS;
    if (n == 0)
        return NB_E2B_TPL_LIST;
    return n == 1 ? NB_E2B_TPL_ONE : NB_E2B_TPL_OTHER;
}
