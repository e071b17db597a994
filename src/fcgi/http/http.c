/*
 * http.c - see http.h. The router: the route table and the fronts the
 * worker registers, a request's route found and its checks run (auth.c's
 * key check and rate, the ids' syntax, the method, the table's guard)
 * before its handler; and every request's end, nb_http_finalize, the one
 * place an error becomes an answer. Reads and writes are request.c's and
 * stream.c's.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "http.h"
#include "httppriv.h"
#include "json.h"
#include "log.h"
#include "metrics.h"

/* The table requests are routed by (nb_http_set_routes). */
static const struct nb_route_entry *http_routes;
static size_t http_n_routes;
static const struct nb_route_guard *http_guard;
/* The fronts, asked in order before the native table (nb_http_add_front). */
static const struct nb_front *http_fronts[NB_HTTP_FRONTS_MAX];
static size_t http_n_fronts;
/* Told when a request of a NB_ROUTE_BULK row begins (nb_http_set_bulk_hook). */
static void (*http_bulk_hook)(void);

void nb_http_set_routes(const struct nb_route_entry *tab, size_t n,
                        const struct nb_route_guard *guard)
{
    http_routes = tab;
    http_n_routes = n;
    http_guard = guard;
}

void nb_http_add_front(const struct nb_front *f)
{
    if (http_n_fronts == NB_HTTP_FRONTS_MAX) {
        nb_error("front %s not registered: no room for more than %d fronts", f->name,
                 NB_HTTP_FRONTS_MAX);
        return;
    }
    http_fronts[http_n_fronts++] = f;
}

/* The rows of one table, with extra (a front's name, NULL: none) among each row's flags. */
static void print_rows(FILE *f, const struct nb_route_entry *tab, size_t n,
                       const char *(*path)(enum nb_route), const char *extra)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{NB_ROUTE_PUBLIC, "public"}, {NB_ROUTE_ID, "id"},
                 {NB_ROUTE_PID, "pid"},       {NB_ROUTE_HEAD, "head"},
                 {NB_ROUTE_CTX, "ctx"},       {NB_ROUTE_AWAKE, "awake"},
                 {NB_ROUTE_ID_404, "id_404"}, {NB_ROUTE_METRICS_AUTH, "metrics_token"},
                 {NB_ROUTE_BULK, "bulk"}};

    for (size_t i = 0; i < n; i++) {
        const struct nb_route_entry *e = &tab[i];
        const char *base = path(e->shape);
        int any = 0;
        fprintf(f, "%s\t%s%s%s\t", e->method ? e->method : "-", base ? base : "?",
                e->sub[0] && base && base[0] ? "/" : "", e->sub);
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (e->flags & names[k].bit) {
                fprintf(f, "%s%s", any ? "," : "", names[k].name);
                any = 1;
            }
        if (extra != NULL) {
            fprintf(f, "%s%s", any ? "," : "", extra);
            any = 1;
        }
        fprintf(f, "%s\n", any ? "" : "-");
    }
}

void nb_http_routes_print(FILE *f)
{
    print_rows(f, http_routes, http_n_routes, nb_route_path, NULL);
    for (size_t i = 0; i < http_n_fronts; i++)
        print_rows(f, http_fronts[i]->routes, http_fronts[i]->n_routes, http_fronts[i]->path,
                   http_fronts[i]->name);
}

void nb_http_set_bulk_hook(void (*fn)(void))
{
    http_bulk_hook = fn;
}

/*
 * The shape of r and its args: the first front's that claims it, else the
 * native API's (route.h). r->front says whose it is; tab and n get its rows.
 */
static enum nb_route http_match(struct nb_req *r, struct nb_route_args *ra, const char **sub,
                                const struct nb_route_entry **tab, size_t *n)
{
    enum nb_route shape;
    for (size_t i = 0; i < http_n_fronts; i++) {
        const struct nb_front *f = http_fronts[i];
        shape = f->match(r, ra);
        if (shape != NB_ROUTE_NONE) {
            r->front = f;
            *sub = f->sub(shape, ra);
            *tab = f->routes;
            *n = f->n_routes;
            return shape;
        }
    }
    shape = nb_route_match(r->path, ra->id, sizeof(ra->id), ra->arg, sizeof(ra->arg), ra->op,
                           sizeof(ra->op));
    *sub = nb_route_sub(shape, ra);
    *tab = http_routes;
    *n = http_n_routes;
    return shape;
}

int nb_http_dispatch(struct nb_app *a, struct nb_req *r, struct nb_apierr *ae)
{
    struct nb_route_args ra;
    const struct nb_route_entry *row, *tab;
    enum nb_route shape;
    enum nb_route_found found;
    unsigned flags;
    uint32_t pid;
    char allowed[64];
    const char *sub;
    size_t n;

    shape = http_match(r, &ra, &sub, &tab, &n);
    found = shape == NB_ROUTE_NONE ? NB_ROUTE_NO_ROWS
                                   : nb_route_lookup(tab, n, shape, sub, r->method, &row, &flags,
                                                     allowed, sizeof(allowed));
    /* a sub-route the table does not name (an op, a path): its shape's catch-all row, if any */
    if (found == NB_ROUTE_NO_ROWS && shape != NB_ROUTE_NONE)
        found =
            nb_route_lookup(tab, n, shape, "*", r->method, &row, &flags, allowed, sizeof(allowed));
    /*
     * nginx's check before it reads a body (auth_request, nanobox.conf.in):
     * 204 where the request would pass the key check below, else its 401;
     * every other error is the request's own, once its body is read.
     */
    if (nb_http_auth_only(r)) {
        if (found == NB_ROUTE_NO_ROWS || (flags & NB_ROUTE_PUBLIC) ||
            nb_http_authorized(a, r, flags))
            return nb_http_pass_auth(r);
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthorized", "%s", nb_http_unauthorized(r));
        return NB_ERR;
    }
    if (found == NB_ROUTE_NO_ROWS) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "no_route", "no such route: %.200s", r->path);
        return NB_ERR;
    }
    if (found == NB_ROUTE_FOUND)
        r->mroute = (int)row->metric; /* its latency histogram (metrics.h) */
    if (!(flags & NB_ROUTE_PUBLIC) && !nb_http_is_internal(r) && !nb_http_authorized(a, r, flags)) {
        nb_apierr_set(ae, NB_E_UNAUTHENTICATED, "unauthorized", "%s", nb_http_unauthorized(r));
        return NB_ERR;
    }
    /* the service's own numbers (GET /metrics) are an operator's, not a user key's */
    if ((flags & NB_ROUTE_METRICS_AUTH) && !nb_http_is_internal(r) && !r->who.admin) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden", "%s is for admin keys and the metrics_token",
                      r->path);
        return NB_ERR;
    }
    if (!nb_http_is_internal(r) && !nb_http_rate_ok(r, ae))
        return NB_ERR;
    /* ids opaque to a front's clients: one that is not ours names no sandbox */
    if ((flags & NB_ROUTE_ID_404) && (flags & NB_ROUTE_ID) && !http_guard->id_valid(ra.id)) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "sandbox \"%.64s\" not found", ra.id);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_ID) && !http_guard->id_valid(ra.id)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_id",
                      "\"%.64s\" is not a sandbox id (a lowercase UUID)", ra.id);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_PID) && nb_route_pid(ra.arg, &pid) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_pid", "\"%.32s\" is not a process id", ra.arg);
        return NB_ERR;
    }
    if ((flags & NB_ROUTE_CTX) && nb_route_ctx(ra.arg) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_context",
                      "\"%.72s\" is not a context id (1 to %d of a-z, 0-9 and -)", ra.arg,
                      NB_ROUTE_CTX_MAX);
        return NB_ERR;
    }
    if (found == NB_ROUTE_NO_METHOD) {
        if (allowed[0] == '\0') {
            nb_apierr_set(ae, NB_E_NOT_FOUND, "no_route", "no such route: %.200s", r->path);
            return NB_ERR;
        }
        nb_http_add_header(r, "Allow", allowed);
        nb_apierr_set(ae, NB_E_METHOD, "method_not_allowed", "%s is not allowed here; use %s",
                      r->method, allowed);
        return NB_ERR;
    }
    /* the sandbox's own checks (the guard's): its key's to see, awake where the row asks */
    if (flags & (NB_ROUTE_ID | NB_ROUTE_AWAKE)) {
        int g = http_guard->check(a, r, flags, &ra, ae);
        if (g < 0)
            return NB_ERR;
        if (g > 0)
            return NB_OK; /* the guard answered: another node's sandbox, sent there */
    }
    if ((flags & NB_ROUTE_BULK) && http_bulk_hook != NULL && !nb_http_is_internal(r))
        http_bulk_hook();
    return row->handler(a, r, &ra, ae);
}

/*
 * The one mapping of a domain code (nberr.h) to an HTTP status: every
 * error answer's, the native API's and the fronts'.
 */
int nb_http_status_of(enum nb_err err)
{
    static const short status[NB_E_COUNT] = {
        [NB_E_OK] = 500, /* an error without a code is nanobox's fault */
        [NB_E_INVALID] = 400,     [NB_E_OUT_OF_RANGE] = 422, [NB_E_UNAUTHENTICATED] = 401,
        [NB_E_FORBIDDEN] = 403,   [NB_E_NOT_FOUND] = 404,    [NB_E_NO_CONTEXT] = 404,
        [NB_E_METHOD] = 405,      [NB_E_CONFLICT] = 409,     [NB_E_EXISTS] = 409,
        [NB_E_TOO_LARGE] = 413,   [NB_E_URI_TOO_LONG] = 414, [NB_E_LIMIT] = 429,
        [NB_E_CANCELLED] = 499,   [NB_E_INTERNAL] = 500,     [NB_E_UNSUPPORTED] = 501,
        [NB_E_UPSTREAM] = 502,    [NB_E_UNAVAILABLE] = 503,  [NB_E_AGENT_DOWN] = 503,
        [NB_E_DOCKER_DOWN] = 503, [NB_E_CAPACITY] = 503,     [NB_E_TIMEOUT] = 504,
        [NB_E_NO_SPACE] = 507,
    };
    return (unsigned)err < NB_E_COUNT && status[err] != 0 ? status[err] : 500;
}

/* The error answer: the native API's {"error", "code"}, or the front's own. */
static void http_error(struct nb_req *r, const struct nb_apierr *ae)
{
    yajl_gen g;
    if (r->front != NULL && r->front->error != NULL) {
        r->front->error(r, ae);
        return;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "error", ae->msg);
    nb_json_kv_str(g, "code", ae->code);
    yajl_gen_map_close(g);
    nb_http_json(r, nb_http_status_of(ae->err), g);
    yajl_gen_free(g);
}

/* Answer r's error (or its missing answer), as nb_http_finalize says. */
static void finalize_answer(struct nb_req *r, int rc, const struct nb_apierr *ae)
{
    if (rc == NB_OK) {
        if (!r->answered) {
            struct nb_apierr none;
            nb_apierr_set(&none, NB_E_INTERNAL, "internal", "the request got no answer");
            nb_metrics_error(nb_http_status_of(none.err), none.code);
            http_error(r, &none);
        }
        return;
    }
    nb_metrics_error(nb_http_status_of(ae->err), ae->code);
    if (!r->answered) {
        http_error(r, ae);
    } else if (r->stream != HTTP_STREAM_NONE && r->front != NULL &&
               r->front->stream_error != NULL && r->front->stream_error(r, r->stream_ctype, ae)) {
        /* the front ended its stream its way */
    } else if (r->stream == HTTP_STREAM_NDJSON) {
        /* the stream's own error event: the status went out long ago */
        yajl_gen g;
        if (r->gone)
            return;
        g = nb_json_gen();
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "type", "error");
        nb_json_kv_str(g, "error", ae->msg);
        nb_json_kv_str(g, "code", ae->code);
        yajl_gen_map_close(g);
        nb_http_stream_line(r, g);
        yajl_gen_free(g);
    } else {
        /* a byte stream can only end short: the client sees a body cut off */
        nb_warn("%s %.200s: the answer broke off after it began: %s", r->method, r->path, ae->msg);
    }
}

/* Every request ends here: its error answered, its errors and latency counted. */
void nb_http_finalize(struct nb_req *r, int rc, const struct nb_apierr *ae)
{
    finalize_answer(r, rc, ae);
    if (r->mroute >= 0)
        nb_metrics_route((enum nb_mroute)r->mroute, nb_metrics_now_us() - r->t0_us);
}
