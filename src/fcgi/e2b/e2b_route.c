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
    case NB_E2B_VOLUMES:
        return "/volumes";
    case NB_E2B_VOLUME:
        return "/volumes/{volumeID}";
    default:
        return NULL;
    }
}
