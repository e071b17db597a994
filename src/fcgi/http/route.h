/*
 * route.h - which API route a request path names, and the route table's
 * type and lookup. Pure functions of the path and the method (no request,
 * no FastCGI), so path matching is fuzzed on its own
 * (tests/fuzz/fuzz_route.c) and the lookup is unit-tested
 * (tests/unit/test_route.c). The table itself, {path shape, sub-route,
 * method, flags, metric label, handler} rows, is the handlers'
 * (api_routes.c, and a front's own rows with its own shapes: http.h,
 * struct nb_front); the HTTP layer (http.c, nb_http_dispatch) checks auth,
 * the id and the pid as the row's flags say, times the call in the row's
 * histogram, then calls its handler.
 */
#ifndef NB_ROUTE_H
#define NB_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

/*
 * The native API's path shapes, each declared once here:
 * X(name, the path as the API's docs write it), in enum order. The enum
 * (NB_ROUTE_<name>) and nb_route_path follow from this list; which path
 * is which shape is nb_route_match's (route.c). A new shape is a line
 * here, its match in route.c and its rows in the table (api_routes.c).
 */
#define NB_ROUTE_SHAPES(X)                                                             \
    X(HEALTHZ, "/healthz")                                                             \
    X(MCP, "/mcp")                                                                     \
    X(RUN, "/run")                                                                     \
    X(SANDBOXES, "/sandbox")                                                           \
    X(SANDBOX, "/sandbox/{id}")                                                        \
    X(TIMEOUT, "/sandbox/{id}/timeout")                                                \
    X(EXEC, "/sandbox/{id}/exec")                                                      \
    X(NETWORK, "/sandbox/{id}/network")                                                \
    X(PORT_OPEN, "/sandbox/{id}/ephemeralport")                                        \
    X(PORTS, "/sandbox/{id}/ports")                                                    \
    /* arg: the port */                                                                \
    X(PORT, "/sandbox/{id}/ports/{sandboxport}")                                       \
    /* [/mkdir|/move|/archive|/watch] (arg: the op) */                                 \
    X(FILES, "/sandbox/{id}/files")                                                    \
    /* [/{pid}[/stdin]] (arg: pid, op: stdin) */                                       \
    X(PROCS, "/sandbox/{id}/processes")                                                \
    /* [/interrupt] (arg: the op) */                                                   \
    X(CODE, "/sandbox/{id}/code")                                                      \
    /* [/{ctx}[/restart]] (arg: ctx, op: restart) */                                   \
    X(CONTEXTS, "/sandbox/{id}/contexts")                                              \
    X(PAUSE, "/sandbox/{id}/pause")                                                    \
    X(RESUME, "/sandbox/{id}/resume")                                                  \
    X(METRICS, "/metrics")                                                             \
    X(USAGE, "/sandbox/{id}/metrics")                                                  \
    /* /{pid}[/input|/resize] (arg: pid, op: input, resize); its sub makes the path */ \
    X(PTY, "/sandbox/{id}/pty")                                                        \
    X(TEMPLATES, "/templates")                                                         \
    /* /{name}[/logs] (arg: the name, op: logs); its sub makes the path */             \
    X(TEMPLATE, "/templates")                                                          \
    X(SNAPSHOT, "/sandbox/{id}/snapshot")                                              \
    X(FORK, "/sandbox/{id}/fork")                                                      \
    X(OPENAPI, "/openapi.json")                                                        \
    X(VOLUMES, "/volumes")                                                             \
    /* arg: the volume's name or id */                                                 \
    X(VOLUME, "/volumes/{name}")

#define NB_ROUTE_ENUM_(name, path) NB_ROUTE_##name,
enum nb_route {
    NB_ROUTE_NONE,
    NB_ROUTE_SHAPES(NB_ROUTE_ENUM_)
    /* a front's own shapes (http.h, struct nb_front) are this and above */
    NB_ROUTE_FRONT = 64,
};
#undef NB_ROUTE_ENUM_

/*
 * Match a raw path (no query). Fills id with the {id} segment, cut to
 * idlen - 1 bytes and not yet checked (the caller does); arg and op as
 * noted above, or "" (each NUL-terminated within its length; all three
 * lengths must be at least 1). A path with more segments, or an arg or op
 * that does not fit, is NB_ROUTE_NONE.
 */
enum nb_route nb_route_match(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                             char *op, size_t oplen);

/*
 * The path of shape as the API's docs write it ("/sandbox/{id}/exec"),
 * before its sub-route (nb_route_sub): a row's path is this, then "/" and
 * its sub when that is not empty. For `nanobox-fcgi -R`, which the OpenAPI
 * check reads (tests/integration/test_openapi.py). NULL for NB_ROUTE_NONE.
 */
const char *nb_route_path(enum nb_route shape);

/* A {pid} segment: 1..4194304 (pid_max), digits only, no leading 0. 0, or -1. */
int nb_route_pid(const char *s, uint32_t *out);

/* A {ctx} segment (a code context id): 1..64 of a-z, 0-9 and '-'. 0, or -1. */
#define NB_ROUTE_CTX_MAX 64
int nb_route_ctx(const char *s);

/* The parts of a path a handler is given (nb_route_match's outputs). */
struct nb_route_args {
    char id[36 + 8];                /* {id}: a sandbox id once the router checked it */
    char arg[NB_ROUTE_CTX_MAX + 8]; /* {sandboxport}, {pid}, {ctx}, or the files/code op */
    char op[16];                    /* the op under a pid ("stdin") */
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

/* Row flags: the checks a path needs before its method is looked at. */
#define NB_ROUTE_PUBLIC 0x1u /* served without the API key (/healthz) */
#define NB_ROUTE_ID 0x2u     /* {id} must be a sandbox id (else 400 bad_id) */
#define NB_ROUTE_PID 0x4u    /* {pid} must be a process id (else 400 bad_pid) */
#define NB_ROUTE_HEAD 0x8u   /* HEAD is served as GET (and not listed in Allow) */
#define NB_ROUTE_CTX 0x10u   /* {ctx} must be a context id (else 400 bad_context) */
#define NB_ROUTE_ID_404 \
    0x40u /* an {id} that is not a sandbox id names no sandbox: 404 not_found \
             (a front whose ids are opaque to its clients) */
#define NB_ROUTE_AWAKE \
    0x20u /* reaches the sandbox's processes: 409 paused while it is paused \
                                (or resumed first with auto_resume) */

#define NB_ROUTE_METRICS_AUTH 0x80u /* also served with metrics_token (GET /metrics) */
#define NB_ROUTE_BULK \
    0x100u /* moves a file's worth of bytes (downloads, uploads): its worker does \
              not count toward workers_max while it does (pool.c) */

/* One row of the route table. */
struct nb_route_entry {
    enum nb_route shape;
    const char *sub;       /* which sub-route of shape (nb_route_sub) */
    const char *method;    /* NULL: none (a known path that no handler serves: 404);
                           "*": every method (a catch-all's row) */
    unsigned flags;        /* NB_ROUTE_*; the same on every row of one shape and sub */
    enum nb_mroute metric; /* the latency histogram its calls go to (metrics.h, label "route") */
    nb_route_handler handler;
};

/*
 * The sub-route of a matched path, to tell the rows of one shape apart:
 * for NB_ROUTE_FILES and NB_ROUTE_CODE its op ("", "mkdir", "move", "archive";
 * "", "interrupt"); for NB_ROUTE_PROCS "" (the list), "{pid}",
 * "{pid}/stdin", or "{pid}/{op}" for any other op; for NB_ROUTE_PTY "{pid}",
 * "{pid}/input", "{pid}/resize" or "{pid}/{op}"; for NB_ROUTE_CONTEXTS
 * "" (the list), "{ctx}", "{ctx}/restart", or "{ctx}/{op}"; ""
 * for every other shape. A sub that no row names goes to the shape's "*"
 * row, when it has one (http.c).
 */
const char *nb_route_sub(enum nb_route shape, const struct nb_route_args *ra);

/* What nb_route_lookup found. */
enum nb_route_found {
    NB_ROUTE_FOUND,     /* *row serves the method */
    NB_ROUTE_NO_METHOD, /* rows exist, none for this method (allowed lists theirs) */
    NB_ROUTE_NO_ROWS,   /* the table has no row for this shape and sub */
};

/*
 * Look up method on (shape, sub) in tab[0..n). *flags gets the flags of
 * the path's rows (0 if none); for NB_ROUTE_NO_METHOD, allowed gets the
 * methods served there, ", "-separated in table order ("" when no row has
 * one), cut to allowedlen - 1 bytes.
 */
enum nb_route_found nb_route_lookup(const struct nb_route_entry *tab, size_t n, enum nb_route shape,
                                    const char *sub, const char *method,
                                    const struct nb_route_entry **row, unsigned *flags,
                                    char *allowed, size_t allowedlen);

#endif
