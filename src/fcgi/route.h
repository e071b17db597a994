/*
 * route.h - which API route a request path names. A pure function of the
 * path (no request, no FastCGI), so the whole route table reads in one
 * place and can be fuzzed on its own (tests/fuzz/fuzz_route.c). The router
 * (worker.c) then checks method, auth and id syntax.
 */
#ifndef NB_ROUTE_H
#define NB_ROUTE_H

#include <stddef.h>
#include <stdint.h>

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

/* A {pid} segment: 1..4194304 (pid_max), digits only, no leading 0. 0, or -1. */
int nb_route_pid(const char *s, uint32_t *out);

/* The parts of a path a handler is given (nb_route_match's outputs). */
struct nb_route_args {
    char id[36 + 8];            /* {id}: a sandbox id once the router checked it */
    char arg[32];               /* {sandboxport}, {pid}, or the files op */
    char op[16];                /* the op under a pid ("stdin") */
};

/*
 * A handler: serves r and answers it (NB_OK), or fills ae and answers
 * nothing (NB_ERR): the HTTP layer answers errors, once (http.h).
 */
struct nb_app;
struct nb_req;
struct nb_apierr;
typedef int (*nb_route_handler)(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                                struct nb_apierr *ae);

#endif
