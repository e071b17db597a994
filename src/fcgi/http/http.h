/*
 * http.h - the HTTP layer: one request as the worker sees it through
 * FastCGI, its routing through the route table (route.h) to a handler,
 * and the one way to answer it (JSON body, no content, a stream), with
 * errors answered in one place, nb_http_finalize.
 *
 * A request can also be internal: nb_http_dispatch_internal runs a request
 * whose body comes from memory and whose answer lands in a buffer instead
 * of the FastCGI stream, through the same table (POST /mcp's tool calls).
 * Only this layer touches the FastCGI streams, so the handlers cannot tell
 * the two apart.
 *
 * Its files (httppriv.h lists them in order): request.c reads a request
 * and writes its answer, stream.c streams one, auth.c checks who sent it
 * (key, tenancy, rate) and writes the audit line, http.c routes it and
 * answers its errors, internal.c runs internal requests. Under them:
 * route.c, query.c and multipart.c (pure functions), tenant.c (the keys).
 *
 * The layers (docs/ARCHITECTURE.md): worker.c accepts, this layer routes and
 * answers, handlers (api_*.c) validate and shape answers, engines
 * (sandbox.c, exec.c, files.c, procs.c, ports.c) do the work over the
 * table, Docker and the agent. Nothing below calls up: the handlers are
 * known to this layer only through the table the worker registers.
 */
#ifndef NB_HTTP_H
#define NB_HTTP_H

#include <fcgiapp.h>
#include <stddef.h>
#include <stdio.h>
#include <yajl/yajl_gen.h>

#include "app.h"
#include "buf.h"
#include "keys.h"
#include "route.h"

#define NB_PATH_MAX 512
#define NB_QUERY_MAX 2048

#define NB_HEADERS_MAX 256

/* Most fronts one process registers (nb_http_add_front). */
#define NB_HTTP_FRONTS_MAX 4

/* Most "after the answer" hooks one request can carry (nb_http_after). */
#define NB_HTTP_HOOKS_MAX 4

struct nb_http_capture; /* an internal request's two ends (httppriv.h) */
struct nb_front;        /* a front's paths, rows, key style and errors (below) */

/* Work to do once the answer went out (nb_http_after); arg is the hook's. */
typedef void (*nb_http_hook_fn)(struct nb_app *a, void *arg);

struct nb_req {
    FCGX_Request *fcgi;              /* NULL for an internal request */
    struct nb_http_capture *capture; /* non-NULL for an internal request */
    struct nb_req *outer;            /* an internal request's FastCGI request; NULL otherwise */
    char **envp;                     /* CGI params (fcgi->envp or the capture's) */
    const char *method;
    char path[NB_PATH_MAX];       /* raw path of REQUEST_URI, no query */
    char query[NB_QUERY_MAX];     /* raw query string */
    struct nb_buf body;           /* capped at conf.max_body */
    char headers[NB_HEADERS_MAX]; /* extra answer headers, "Name: value\r\n" each */
    int status;                   /* status sent, for the access log */
    /* the HTTP layer's own bookkeeping: handlers report through their result instead */
    int answered;                 /* the status went out */
    int stream;                   /* HTTP_STREAM_* once a streamed answer began */
    int gone;                     /* a write failed: the client left (or the capture is full) */
    int broken;                   /* nb_http_break_off: the connection ends, not the answer */
    const struct nb_front *front; /* the front that claimed it; NULL: the native API */
    const char *stream_ctype;     /* its stream's content type, once one began */
    struct {
        nb_http_hook_fn fn;
        void *arg;
    } hooks[NB_HTTP_HOOKS_MAX]; /* run after the answer, in order */
    unsigned n_hooks;
    /* for the latency histograms (metrics.h) */
    int64_t t0_us; /* when parsed (monotonic clock) */
    int mroute;    /* its enum nb_mroute once routed; -1: not timed */
    /* who sent it (tenant.h): its key's name, role and quotas; an internal
     * request is its outer request's key */
    struct nb_key who;
    int from_node; /* another node of the cluster sent it, for who (placement.h) */
};

/* The key r was sent with (the admin "default" when the service checks none). */
const struct nb_key *nb_http_key(const struct nb_req *r);

/*
 * The owner whose sandboxes a list shows to r: a user key's own name; for
 * an admin, owner (its ?owner=NAME filter) or NULL for all. Never fails.
 */
const char *nb_http_list_owner(const struct nb_req *r, const char *owner);

/* Did another node of the cluster send r, for a key it checked (auth.c)? */
int nb_http_from_node(const struct nb_req *r);

/* Does r see (and touch) a sandbox of owner? An admin sees all. */
int nb_http_sees(const struct nb_req *r, const char *owner);

/* The audit line of a state change: key name, action, what it acted on. */
void nb_http_audit(const struct nb_req *r, const char *action, const char *what);

/* Fill r from the FastCGI params. -1 with ae set if the path is too long. */
int nb_http_parse(struct nb_req *r, FCGX_Request *fcgi, struct nb_apierr *ae);

/*
 * A route table's guard: the checks of a route with a sandbox id that
 * need the sandboxes, which the HTTP layer does not know (the handler
 * layer's, api_common.c). id_valid says whether a row's {id} (NB_ROUTE_ID)
 * is a sandbox id at all (else 400 bad_id, or 404 with NB_ROUTE_ID_404); check runs once
 * every check of the HTTP layer has passed, before the handler of a row
 * flagged NB_ROUTE_ID or NB_ROUTE_AWAKE: 0, -1 with ae set, or 1 when it
 * answered the request itself (a cluster node sent it to the sandbox's node).
 */
struct nb_route_guard {
    int (*id_valid)(const char *id);
    int (*check)(struct nb_app *a, struct nb_req *r, unsigned flags, const struct nb_route_args *ra,
                 struct nb_apierr *ae);
};

/*
 * The route table the requests of this process are served by, and its
 * guard (not NULL; the worker registers the API's, api.h, at start): the
 * HTTP layer knows the handlers and the sandboxes only through them.
 */
void nb_http_set_routes(const struct nb_route_entry *tab, size_t n,
                        const struct nb_route_guard *guard);
/*
 * A front: another way to speak to nanobox over HTTP, with its own paths,
 * rows, key style and error shapes (docs/ARCHITECTURE.md, Layers), which a
 * front module registers at start as an nginx module does. The native API
 * is the default (nb_http_set_routes): what no front claims is its. A
 * front's rows go through the same checks and the same route guard.
 */
struct nb_front {
    const char *name; /* a flag on its rows in `nanobox-fcgi -R` */
    /* r's shape (NB_ROUTE_FRONT and above) with ra filled, or NB_ROUTE_NONE: not the front's */
    enum nb_route (*match)(const struct nb_req *r, struct nb_route_args *ra);
    /* the sub-route (route.h, nb_route_sub) and the docs' path (nb_route_path) of its shapes */
    const char *(*sub)(enum nb_route shape, const struct nb_route_args *ra);
    const char *(*path)(enum nb_route shape);
    const struct nb_route_entry *routes; /* its rows, as the native table's */
    size_t n_routes;
    /* its key style: a prefix its clients may send before the key (NULL: none), its 401 message */
    const char *key_prefix;
    const char *unauthorized;
    /* its error answer while nothing went out yet (nb_http_finalize) */
    void (*error)(struct nb_req *r, const struct nb_apierr *ae);
    /* its error once a stream of ctype began: 1 when written, 0 to leave it to the HTTP layer */
    int (*stream_error)(struct nb_req *r, const char *ctype, const struct nb_apierr *ae);
};

/* Register a front (kept, not copied), asked after the ones before it. */
void nb_http_add_front(const struct nb_front *f);

/*
 * Print the native table, then each front's rows, one row a line: METHOD
 * PATH FLAGS ("-" for none; a front's rows carry its name too),
 * tab-separated (`nanobox-fcgi -R`; the OpenAPI check compares it with
 * docs/openapi.yaml).
 */
void nb_http_routes_print(FILE *f);

/*
 * fn is called when a request of a NB_ROUTE_BULK row (a file's bytes) is
 * about to be handled, after every check passed: the worker marks itself
 * in the scoreboard so the pool does not count it toward workers_max.
 */
void nb_http_set_bulk_hook(void (*fn)(void));

/*
 * Is r nginx's key check (auth_request to /.nanobox/auth, before the
 * body is read)? It is answered 204 when the real request may go on
 * (nb_http_pass_auth) and 401 when it may not; nb_http_dispatch decides.
 */
int nb_http_auth_only(const struct nb_req *r);
int nb_http_pass_auth(struct nb_req *r);

/*
 * Route r through the table and call its handler: the path's shape (404
 * no_route), the API key unless the row is public or r internal (401),
 * the id's syntax (400 bad_id), the pid's (400 bad_pid) and the context
 * id's (400 bad_context) where the row asks, the method (405, with an
 * Allow header), then the table's guard (nb_route_guard: the sandbox's
 * own checks). The handler's result (or the router's own error in ae)
 * is for nb_http_finalize.
 *
 * The registered fronts (nb_http_add_front) are asked first, in order: the
 * first that claims r routes it through its own rows, its key style and
 * its error writers, with the same checks. A sub-route no row names goes
 * to its shape's "*" row, when there is one.
 */
int nb_http_dispatch(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae);

/*
 * One internal request, routed, served and finalized as a client's would
 * be but without auth (the outer request had it): method on uri (path and
 * query), with body_len bytes of body (not copied) of content_type (NULL:
 * none). Its answer's body is appended to answer, within answer's cap, and
 * its status stored in *status. Its "after the answer" hooks go to outer,
 * the FastCGI request it serves. client_fd (-1: none) stands for its
 * client's connection (nb_http_client_fd): a socket whose peer closing
 * reads as the client gone, which interrupts a code cell or kills a
 * command as for a client that leaves. 0; -1 when the answer did not fit
 * (answer then holds a one-line "error: ..." in its place).
 */
int nb_http_dispatch_internal(struct nb_app *a, struct nb_req *outer, const char *method,
                              const char *uri, const char *body, size_t body_len,
                              const char *content_type, int client_fd, struct nb_buf *answer,
                              long *status);

/* Whether r is an internal request (the router then skips auth). */
int nb_http_is_internal(const struct nb_req *r);

/*
 * Run fn(a, arg) once r's answer went out and its connection is finished
 * (for an internal request: its outer request's). The hook owns arg. -1,
 * logged, when the request has NB_HTTP_HOOKS_MAX hooks already: the caller
 * still owns arg and does the work now.
 */
int nb_http_after(struct nb_req *r, nb_http_hook_fn fn, void *arg);

/* Run r's hooks in order and forget them (the worker, after the answer). */
void nb_http_run_after(struct nb_app *a, struct nb_req *r);

/* The client's connection, to notice it leaving; for an internal request
 * the one nb_http_dispatch_internal was given (-1: none). */
int nb_http_client_fd(const struct nb_req *r);

/* Read the body up to cap bytes; 413 in ae if CONTENT_LENGTH says more. */
int nb_http_read_body(struct nb_req *r, size_t cap, struct nb_apierr *ae);

/* Read up to n bytes of the body as it comes (no cap of its own): the bytes
 * read, 0 at its end, -1 on an error. For bodies streamed through (files). */
int nb_http_read_some(struct nb_req *r, void *buf, size_t n);

/* A request header by CGI name (e.g. "HTTP_AUTHORIZATION"), or NULL. */
const char *nb_http_param(const struct nb_req *r, const char *name);

/* The request's query through query.h (the decoding rules are there). */

/* Decoded value of query key (first match) into out; 0 found, -1 not. */
int nb_http_query(const struct nb_req *r, const char *key, char *out, size_t outlen);

/*
 * Decoded value of query key, byte-exact (NUL bytes kept, out->len says how
 * many), within out's cap: 0 found, -1 absent, -2 longer than the cap.
 */
int nb_http_query_bytes(const struct nb_req *r, const char *key, struct nb_buf *out);

/*
 * Walk the decoded "key=value" pairs of the query: calls cb for each;
 * stops and returns -1 if cb does.
 */
int nb_http_query_each(const struct nb_req *r, int (*cb)(void *arg, const char *k, const char *v),
                       void *arg);

/* One more header for the answer (before it is sent; dropped with a warning
 * past NB_HEADERS_MAX bytes of them). */
void nb_http_add_header(struct nb_req *r, const char *name, const char *value);

/*
 * Answers. A handler sends its successful answer with one of these and
 * returns NB_OK; it never answers an error itself: it fills its struct
 * nb_apierr and returns NB_ERR, and nb_http_finalize answers.
 */
void nb_http_json(struct nb_req *r, int status, yajl_gen g);
void nb_http_no_content(struct nb_req *r);
/* A body that is ready as bytes (ctype NULL and len 0: no body at all, e.g. 202). */
void nb_http_body(struct nb_req *r, int status, const char *ctype, const void *data, size_t len);

/* The HTTP status of a domain code (nberr.h): the one mapping. */
int nb_http_status_of(enum nb_err err);

/*
 * The one place a request's end is answered, as nginx's finalize: called
 * once per request with its handler's result. rc NB_ERR answers ae
 * ({"error": msg, "code": code} with ae's status) if nothing went out yet.
 * After a stream began no status can follow: an NDJSON stream gets the
 * error as its last line, {"type":"error","error":msg,"code":code}, and a
 * byte stream (a download) is cut short, the error logged. On a front's
 * request (struct nb_front) the front's error writers come first: its
 * error answer, and its stream's end where it writes one.
 * rc NB_OK with nothing answered is a bug, answered 500 internal.
 */
void nb_http_finalize(struct nb_req *r, int rc, const struct nb_apierr *ae);

/* Did the client ask for NDJSON (Accept: application/x-ndjson)? */
int nb_http_wants_ndjson(const struct nb_req *r);

/*
 * A streamed answer: status and headers now (unbuffered by nginx), then
 * one JSON value per line (ctype application/x-ndjson), each flushed at
 * once, or raw bytes. nb_http_stream_line returns -1 when the client is
 * gone (the caller stops the work).
 */
void nb_http_stream_begin(struct nb_req *r, int status, const char *ctype);
int nb_http_stream_line(struct nb_req *r, yajl_gen g);
/* Raw bytes of a streamed body (files); -1 when the client is gone. */
int nb_http_stream_bytes(struct nb_req *r, const void *data, size_t len);
/*
 * Break off r's streamed answer instead of ending it: what was written is
 * flushed, then the FastCGI connection is shut down with no end of
 * request, so nginx drops the client's connection mid-body (no last
 * chunk). For a client that must tell "the server died under me" from an
 * answer that ended (E2B's /execute when the sandbox is killed). An
 * internal request's answer is left to end as usual.
 */
void nb_http_break_off(struct nb_req *r);

#endif
