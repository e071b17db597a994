/*
 * route.c - see route.h. Plain string comparisons against the path shapes
 * and the table's rows; nothing is decoded here (a %2f stays three bytes,
 * so it can never split or join segments: the id check then refuses it).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

/* "{pid}[/{op}]" at s into arg and op: 0, or -1 when it does not fit. */
static int pid_op(const char *s, char *arg, size_t arglen, char *op, size_t oplen)
{
    const char *sub = strchr(s, '/');
    size_t pl = sub ? (size_t)(sub - s) : strlen(s);
    if (pl == 0 || pl >= arglen || (sub && (strlen(sub + 1) >= oplen || strchr(sub + 1, '/'))))
        return -1;
    memcpy(arg, s, pl);
    arg[pl] = '\0';
    snprintf(op, oplen, "%s", sub ? sub + 1 : "");
    return 0;
}

enum nb_route nb_route_match(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                             char *op, size_t oplen)
{
    const char *rest, *slash;
    size_t n;
    id[0] = arg[0] = op[0] = '\0';
    if (!strcmp(path, "/healthz"))
        return NB_ROUTE_HEALTHZ;
    if (!strcmp(path, "/run"))
        return NB_ROUTE_RUN;
    if (!strcmp(path, "/mcp"))
        return NB_ROUTE_MCP;
    if (!strcmp(path, "/metrics"))
        return NB_ROUTE_METRICS;
    if (!strcmp(path, "/openapi.json"))
        return NB_ROUTE_OPENAPI;
    if (!strcmp(path, "/sandbox") || !strcmp(path, "/sandbox/"))
        return NB_ROUTE_SANDBOXES;
    if (!strcmp(path, "/templates") || !strcmp(path, "/templates/"))
        return NB_ROUTE_TEMPLATES;
    if (!strncmp(path, "/templates/", 11)) {
        const char *name = path + 11, *sub = strchr(name, '/');
        size_t nl = sub ? (size_t)(sub - name) : strlen(name);
        if (nl == 0 || nl >= arglen || (sub && (strlen(sub + 1) >= oplen || strchr(sub + 1, '/'))))
            return NB_ROUTE_NONE;
        memcpy(arg, name, nl);
        arg[nl] = '\0';
        snprintf(op, oplen, "%s", sub ? sub + 1 : "");
        return NB_ROUTE_TEMPLATE;
    }
    if (!strcmp(path, "/volumes") || !strcmp(path, "/volumes/"))
        return NB_ROUTE_VOLUMES;
    if (!strncmp(path, "/volumes/", 9)) {
        size_t nl = strlen(path + 9);
        if (nl == 0 || nl >= arglen || strchr(path + 9, '/'))
            return NB_ROUTE_NONE;
        memcpy(arg, path + 9, nl + 1);
        return NB_ROUTE_VOLUME;
    }
    if (strncmp(path, "/sandbox/", 9) != 0)
        return NB_ROUTE_NONE;
    rest = path + 9;
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n >= idlen)
        n = idlen - 1;
    memcpy(id, rest, n);
    id[n] = '\0';
    if (slash == NULL || !strcmp(slash, "/"))
        return NB_ROUTE_SANDBOX;
    if (!strcmp(slash, "/timeout"))
        return NB_ROUTE_TIMEOUT;
    if (!strcmp(slash, "/pause"))
        return NB_ROUTE_PAUSE;
    if (!strcmp(slash, "/resume"))
        return NB_ROUTE_RESUME;
    if (!strcmp(slash, "/snapshot"))
        return NB_ROUTE_SNAPSHOT;
    if (!strcmp(slash, "/fork"))
        return NB_ROUTE_FORK;
    if (!strcmp(slash, "/metrics"))
        return NB_ROUTE_USAGE;
    if (!strcmp(slash, "/exec"))
        return NB_ROUTE_EXEC;
    if (!strcmp(slash, "/network"))
        return NB_ROUTE_NETWORK;
    if (!strcmp(slash, "/ephemeralport"))
        return NB_ROUTE_PORT_OPEN;
    if (!strcmp(slash, "/ports") || !strcmp(slash, "/ports/"))
        return NB_ROUTE_PORTS;
    if (!strncmp(slash, "/ports/", 7) && strlen(slash + 7) < arglen && !strchr(slash + 7, '/')) {
        snprintf(arg, arglen, "%s", slash + 7);
        return NB_ROUTE_PORT;
    }
    if (!strcmp(slash, "/files") || !strcmp(slash, "/files/mkdir") ||
        !strcmp(slash, "/files/move") || !strcmp(slash, "/files/archive") ||
        !strcmp(slash, "/files/watch")) {
        snprintf(arg, arglen, "%s", slash[6] ? slash + 7 : "");
        return NB_ROUTE_FILES;
    }
    if (!strcmp(slash, "/processes") || !strcmp(slash, "/processes/"))
        return NB_ROUTE_PROCS;
    if (!strncmp(slash, "/processes/", 11))
        return pid_op(slash + 11, arg, arglen, op, oplen) ? NB_ROUTE_NONE : NB_ROUTE_PROCS;
    if (!strncmp(slash, "/pty/", 5))
        return pid_op(slash + 5, arg, arglen, op, oplen) ? NB_ROUTE_NONE : NB_ROUTE_PTY;
    if (!strcmp(slash, "/code") || !strcmp(slash, "/code/interrupt")) {
        snprintf(arg, arglen, "%s", slash[5] ? slash + 6 : "");
        return NB_ROUTE_CODE;
    }
    if (!strcmp(slash, "/contexts") || !strcmp(slash, "/contexts/"))
        return NB_ROUTE_CONTEXTS;
    if (!strncmp(slash, "/contexts/", 10)) {
        const char *ctx = slash + 10, *sub = strchr(ctx, '/');
        size_t cl = sub ? (size_t)(sub - ctx) : strlen(ctx);
        if (cl == 0 || (sub && (strlen(sub + 1) >= oplen || strchr(sub + 1, '/'))))
            return NB_ROUTE_NONE;
        /* cut like the id: a context id too long for arg then fails nb_route_ctx (400) */
        if (cl >= arglen)
            cl = arglen - 1;
        memcpy(arg, ctx, cl);
        arg[cl] = '\0';
        snprintf(op, oplen, "%s", sub ? sub + 1 : "");
        return NB_ROUTE_CONTEXTS;
    }
    return NB_ROUTE_NONE;
}

/* The documented path of each native shape, from route.h's list. */
#define ROUTE_PATH(name, path) [NB_ROUTE_##name] = path,
static const char *const route_paths[] = {[NB_ROUTE_NONE] = NULL, NB_ROUTE_SHAPES(ROUTE_PATH)};
#undef ROUTE_PATH
_Static_assert(sizeof(route_paths) / sizeof(route_paths[0]) <= NB_ROUTE_FRONT,
               "the native shapes run into the fronts' (NB_ROUTE_FRONT)");

const char *nb_route_path(enum nb_route shape)
{
    return (size_t)shape < sizeof(route_paths) / sizeof(route_paths[0]) ? route_paths[shape] : NULL;
}

int nb_route_pid(const char *s, uint32_t *out)
{
    char *end;
    unsigned long v;
    if (*s < '1' || *s > '9' || strlen(s) > 7)
        return -1;
    v = strtoul(s, &end, 10);
    if (*end != '\0' || v > 4194304)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int nb_route_ctx(const char *s)
{
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");
    return n >= 1 && n <= NB_ROUTE_CTX_MAX && s[n] == '\0' ? 0 : -1;
}

const char *nb_route_sub(enum nb_route shape, const struct nb_route_args *ra)
{
    if (shape == NB_ROUTE_FILES || shape == NB_ROUTE_CODE)
        return ra->arg;
    if (shape == NB_ROUTE_CONTEXTS) {
        if (ra->arg[0] == '\0')
            return "";
        if (ra->op[0] == '\0')
            return "{ctx}";
        return !strcmp(ra->op, "restart") ? "{ctx}/restart" : "{ctx}/{op}";
    }
    if (shape == NB_ROUTE_TEMPLATE)
        return ra->op[0] == '\0'         ? "{name}"
               : !strcmp(ra->op, "logs") ? "{name}/logs"
                                         : "{name}/{op}";
    if (shape == NB_ROUTE_PTY) {
        if (ra->op[0] == '\0')
            return "{pid}";
        return !strcmp(ra->op, "input")    ? "{pid}/input"
               : !strcmp(ra->op, "resize") ? "{pid}/resize"
                                           : "{pid}/{op}";
    }
    if (shape != NB_ROUTE_PROCS || ra->arg[0] == '\0')
        return "";
    if (ra->op[0] == '\0')
        return "{pid}";
    return !strcmp(ra->op, "stdin") ? "{pid}/stdin" : "{pid}/{op}";
}

enum nb_route_found nb_route_lookup(const struct nb_route_entry *tab, size_t n, enum nb_route shape,
                                    const char *sub, const char *method,
                                    const struct nb_route_entry **row, unsigned *flags,
                                    char *allowed, size_t allowedlen)
{
    size_t used = 0;
    int rows = 0;

    *row = NULL;
    *flags = 0;
    allowed[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const struct nb_route_entry *e = &tab[i];
        if (e->shape != shape || strcmp(e->sub, sub) != 0)
            continue;
        rows = 1;
        *flags = e->flags;
        if (e->method == NULL)
            continue;
        if (!strcmp(e->method, method) || !strcmp(e->method, "*") ||
            ((e->flags & NB_ROUTE_HEAD) && !strcmp(e->method, "GET") && !strcmp(method, "HEAD"))) {
            *row = e;
            return NB_ROUTE_FOUND;
        }
        if (used < allowedlen - 1) {
            int k =
                snprintf(allowed + used, allowedlen - used, "%s%s", used ? ", " : "", e->method);
            used = k < 0 ? used : used + (size_t)k;
            if (used >= allowedlen)
                used = allowedlen - 1;
        }
    }
    return rows ? NB_ROUTE_NO_METHOD : NB_ROUTE_NO_ROWS;
}
