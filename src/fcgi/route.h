/*
 * route.h - which API route a request path names. A pure function of the
 * path (no request, no FastCGI), so the whole route table reads in one
 * place and can be fuzzed on its own (tests/fuzz/fuzz_route.c). The router
 * (worker.c) then checks method, auth and id syntax.
 */
#ifndef NB_ROUTE_H
#define NB_ROUTE_H

#include <stddef.h>

enum nb_route {
    NB_ROUTE_NONE,
    NB_ROUTE_HEALTHZ,
    NB_ROUTE_MCP,          /* /mcp */
    NB_ROUTE_RUN,          /* /run */
    NB_ROUTE_SANDBOXES,    /* /sandbox */
    NB_ROUTE_SANDBOX,      /* /sandbox/{id} */
    NB_ROUTE_TIMEOUT,      /* /sandbox/{id}/timeout */
    NB_ROUTE_EXEC,         /* /sandbox/{id}/exec */
    NB_ROUTE_PORT_OPEN,    /* /sandbox/{id}/ephemeralport */
    NB_ROUTE_PORTS,        /* /sandbox/{id}/ports */
    NB_ROUTE_PORT,         /* /sandbox/{id}/ports/{sandboxport} (arg: the port) */
    NB_ROUTE_FILES,        /* /sandbox/{id}/files[/mkdir|/move] (arg: the op) */
    NB_ROUTE_PROCS,        /* /sandbox/{id}/processes[/{pid}[/stdin]] (arg: pid, op: stdin) */
};

/*
 * Match a raw path (no query). Fills id with the {id} segment, cut to
 * idlen - 1 bytes and not yet checked (the caller does); arg and op as
 * noted above, or "" (each NUL-terminated within its length; all three
 * lengths must be at least 1). A path with more segments, or an arg or op
 * that does not fit, is NB_ROUTE_NONE.
 */
enum nb_route nb_route_match(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                             char *op, size_t oplen);

#endif
