/*
 * fuzz_route.c - libFuzzer harness over the router's path matching
 * (nb_route_match, src/fcgi/http/route.c, after the E2B front's
 * nb_e2b_match_path, src/fcgi/e2b/e2b_route.c, as http.c asks the fronts
 * first): the raw path of every request, as the client sent it, goes
 * through them before any check.
 *
 * Input: a path (cut at its first NUL and at NB_PATH_MAX - 1 bytes, as
 * request.c stores it). The outputs are exact-size heap buffers, so
 * AddressSanitizer catches a write past any of them; then every promise
 * of route.h is checked, and anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_route.h"
#include "route.h"

#define PATH_MAX_LEN 511 /* NB_PATH_MAX - 1, as request.c stores the path */
#define ID_LEN (36 + 8)  /* what worker.c passes */
#define ARG_LEN (64 + 8) /* NB_ROUTE_CTX_MAX + 8, as struct nb_route_args has it */
#define OP_LEN 16

static int has_sandbox_id(int rt)
{
    return (rt >= NB_ROUTE_SANDBOX && rt <= NB_ROUTE_RESUME) || rt == NB_ROUTE_USAGE ||
           rt == NB_ROUTE_PTY || rt == NB_ROUTE_SNAPSHOT || rt == NB_ROUTE_FORK;
}

/* The E2B facade's /sandboxes/{id}[/{op}] and /v2/sandboxes/{id}/{op}: the id after that prefix. */
static int has_e2b_id(int rt)
{
    return rt == NB_E2B_SANDBOX || rt == NB_E2B_OP || rt == NB_E2B_V2_OP;
}

static void check(const char *path, int rt, const char *id, size_t idlen, const char *arg,
                  size_t arglen, const char *op, size_t oplen)
{
    size_t il = strnlen(id, idlen), al = strnlen(arg, arglen), ol = strnlen(op, oplen);

    /* NB_E2B_DATA comes from the headers (nb_e2b_match_data), never a path */
    if (rt < 0 || rt >= NB_E2B_DATA)
        abort();
    if (il == idlen || al == arglen || ol == oplen)
        abort(); /* not NUL-terminated within its buffer */
    if (has_e2b_id(rt)) {
        const char *pre = rt == NB_E2B_V2_OP ? "/v2/sandboxes/" : "/sandboxes/";
        size_t pl = strlen(pre);
        if (strncmp(path, pre, pl) != 0 || strncmp(path + pl, id, il) != 0 ||
            memchr(id, '/', il) != NULL)
            abort();
        if (il < idlen - 1 && path[pl + il] != '\0' && path[pl + il] != '/')
            abort();
    } else if (!has_sandbox_id(rt)) {
        if (il != 0 && rt != NB_ROUTE_NONE)
            abort();
    } else {
        /* the id is the segment after /sandbox/, maybe cut, never with a slash */
        if (strncmp(path, "/sandbox/", 9) != 0 || strncmp(path + 9, id, il) != 0)
            abort();
        if (memchr(id, '/', il) != NULL)
            abort();
        if (il < idlen - 1 && path[9 + il] != '\0' && path[9 + il] != '/')
            abort();
    }
    if (memchr(arg, '/', al) != NULL || memchr(op, '/', ol) != NULL)
        abort();
    switch (rt) {
    case NB_ROUTE_HEALTHZ:
        if (strcmp(path, "/healthz") != 0)
            abort();
        break;
    case NB_ROUTE_METRICS:
        if (strcmp(path, "/metrics") != 0)
            abort();
        break;
    case NB_ROUTE_OPENAPI:
        if (strcmp(path, "/openapi.json") != 0)
            abort();
        break;
    case NB_ROUTE_PORT:
        if (al == 0 || strstr(path, "/ports/") == NULL)
            abort();
        break;
    case NB_ROUTE_FILES:
        if (al != 0 && strcmp(arg, "mkdir") != 0 && strcmp(arg, "move") != 0 &&
            strcmp(arg, "archive") != 0 && strcmp(arg, "watch") != 0)
            abort();
        break;
    case NB_ROUTE_TEMPLATES:
        if (strcmp(path, "/templates") != 0 && strcmp(path, "/templates/") != 0)
            abort();
        if (al != 0 || ol != 0)
            abort();
        break;
    case NB_ROUTE_TEMPLATE:
        if (al == 0 || strncmp(path, "/templates/", 11) != 0)
            abort(); /* a template route always names one */
        break;
    case NB_ROUTE_VOLUMES:
        if ((strcmp(path, "/volumes") != 0 && strcmp(path, "/volumes/") != 0) || al != 0 || ol != 0)
            abort();
        break;
    case NB_ROUTE_VOLUME:
        if (al == 0 || ol != 0 || strncmp(path, "/volumes/", 9) != 0 || strcmp(path + 9, arg) != 0)
            abort(); /* a volume route names one, whole */
        break;
    case NB_ROUTE_PTY:
        if (al == 0 || strstr(path, "/pty/") == NULL)
            abort(); /* a terminal route always names its pid */
        break;
    case NB_ROUTE_PROCS:
    case NB_ROUTE_CONTEXTS:
        if (ol != 0 && al == 0)
            abort(); /* an op only under a pid or a context */
        break;
    case NB_ROUTE_CODE:
        if ((al != 0 && strcmp(arg, "interrupt") != 0) || ol != 0)
            abort();
        break;
    case NB_E2B_OP:
    case NB_E2B_V2_OP:
        if (al == 0 || ol != 0 || strstr(path, arg) == NULL)
            abort();
        break;
    case NB_E2B_SANDBOXES:
    case NB_E2B_SANDBOX:
    case NB_E2B_LIST:
    case NB_E2B_OTHER:
        if (strncmp(path, "/sandboxes", 10) != 0 && strncmp(path, "/v2/sandboxes", 13) != 0)
            abort();
        if (al != 0 || ol != 0)
            abort();
        break;
    case NB_ROUTE_NONE:
    case NB_ROUTE_MCP:
    case NB_ROUTE_RUN:
    case NB_ROUTE_SANDBOXES:
    case NB_ROUTE_SANDBOX:
    case NB_ROUTE_TIMEOUT:
    case NB_ROUTE_EXEC:
    case NB_ROUTE_PORT_OPEN:
    case NB_ROUTE_PORTS:
    case NB_ROUTE_NETWORK:
    case NB_ROUTE_PAUSE:
    case NB_ROUTE_RESUME:
    case NB_ROUTE_USAGE:
    case NB_ROUTE_SNAPSHOT:
    case NB_ROUTE_FORK:
        if (al != 0 || ol != 0)
            abort(); /* no arg or op where the route has none */
        break;
    default:
        abort(); /* a shape no matcher returns from a path */
    }
}

static int match(const char *path, size_t idlen, size_t arglen, size_t oplen)
{
    char *id = malloc(idlen), *arg = malloc(arglen), *op = malloc(oplen);
    int rt;

    if (id == NULL || arg == NULL || op == NULL)
        abort();
    memset(id, 'x', idlen);
    memset(arg, 'x', arglen);
    memset(op, 'x', oplen);
    rt = (int)nb_e2b_match_path(path, id, idlen, arg, arglen, op, oplen);
    if (rt == NB_ROUTE_NONE)
        rt = (int)nb_route_match(path, id, idlen, arg, arglen, op, oplen);
    check(path, rt, id, idlen, arg, arglen, op, oplen);
    free(id);
    free(arg);
    free(op);
    return rt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size < PATH_MAX_LEN ? size : PATH_MAX_LEN;
    char *path = malloc(n + 1);
    int rt;

    if (path == NULL)
        return 0;
    memcpy(path, data, n);
    path[n] = '\0';
    /* E2B's template paths: a pure function of the path and the key's kind, whose
     * answer is one of its shapes; with an E2B key it claims at least what it does without */
    {
        int t0 = (int)nb_e2b_match_tpl(path, 0), t1 = (int)nb_e2b_match_tpl(path, 1);
        if ((t0 != NB_ROUTE_NONE && (t0 < NB_E2B_TPL_V3 || t0 > NB_E2B_TPL_OTHER)) ||
            (t1 != NB_ROUTE_NONE && (t1 < NB_E2B_TPL_V3 || t1 > NB_E2B_TPL_OTHER)) ||
            (t0 != NB_ROUTE_NONE && t1 != t0))
            abort();
    }
    rt = match(path, ID_LEN, ARG_LEN, OP_LEN);
    /* the same path with the smallest buffers: cut, or no route, never past them */
    if (match(path, 1, 1, 1) != rt && rt != NB_ROUTE_PORT && rt != NB_ROUTE_PROCS &&
        rt != NB_ROUTE_FILES && rt != NB_ROUTE_CODE && rt != NB_ROUTE_CONTEXTS && rt != NB_E2B_OP &&
        rt != NB_E2B_V2_OP && rt != NB_ROUTE_TEMPLATE && rt != NB_ROUTE_PTY &&
        rt != NB_ROUTE_VOLUME)
        abort();
    /* the same bytes as an E2B_DOMAIN host: an id of 36 and a port of 5, or nothing */
    {
        char hid[40], hport[8];
        if (nb_e2b_host(path, hid, sizeof(hid), hport, sizeof(hport)) &&
            (strlen(hid) != 36 || strlen(hport) != 5 || strncmp(path + 6, hid, 36) != 0))
            abort();
        if (nb_e2b_host(path, hid, 36, hport, sizeof(hport)))
            abort(); /* no room for the id */
    }
    free(path);
    return 0;
}
