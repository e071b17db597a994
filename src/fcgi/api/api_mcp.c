/*
 * api_mcp.c - the MCP Streamable HTTP transport: POST /mcp and DELETE /mcp
 * (see docs/MCP.md). The protocol and the tools are src/mcp/mcp.c's, as
 * for the stdio transport; what is here is the HTTP around them and the
 * backend that runs a tool's API calls as internal requests of the HTTP
 * layer (nb_http_dispatch_internal), with no loopback HTTP.
 *
 * The JSON-RPC errors below (rpc_fail) are answers of the MCP protocol,
 * not API errors: their body is a JSON-RPC envelope, so this handler sends
 * them as its answer and returns NB_OK.
 *
 * Each POST carries one JSON-RPC message (or a batch, before 2025-06-18)
 * and gets its one reply as application/json, but for a long call: a
 * tools/call with a progressToken, from a client that accepts
 * text/event-stream, is answered as an SSE stream once its first
 * notifications/progress is due, and its reply is the stream's last event.
 * While a long call's API request runs inside this worker, a ticker thread
 * ticks the core (progress, cancellation: see struct ticker below).
 * The server sends nothing outside a request's answer, so GET /mcp is
 * refused (405) as the spec allows. A notifications/cancelled, which may
 * reach another worker, is recorded in the sessions file
 * (nb_mcp_cancel_add) for the worker running the call to see.
 *
 * Sessions (mcp_sessions.c): initialize's answer carries a new
 * Mcp-Session-Id; a request naming an unknown or expired one gets 404, which
 * tells the client to initialize again. A request without one is served too,
 * as a stateless client's: the session only remembers the protocol
 * version, which such a client sends in MCP-Protocol-Version.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "http.h"
#include "log.h"
#include "mcp.h"
#include "mcp_sessions.h"

#define MCP_SESSION_NOT_FOUND -32001          /* JSON-RPC code of a 404 (the SDKs' choice) */
#define MCP_DEFAULT_HTTP_VERSION "2025-03-26" /* no MCP-Protocol-Version header: the spec's rule */

/* A JSON-RPC error with a null id, as an HTTP answer of status. */
static void rpc_fail(struct nb_req *r, int status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rpc_fail(struct nb_req *r, int status, int code, const char *fmt, ...)
{
    struct nb_buf out;
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    nb_buf_init(&out, sizeof(msg) * 6 +
                          128); /* the message JSON-escaped (\u00XX at worst) and the envelope */
    mcp_error_reply(&out, code, msg);
    nb_buf_append(&out, "\n", 1);
    nb_http_body(r, status, "application/json", out.data, out.len);
    nb_buf_free(&out);
}

/* What a tool's API call needs: the process, the request it serves, its session. */
struct mcp_call_ctx {
    struct nb_app *a;
    struct nb_req *r;
    const char *sid; /* Mcp-Session-Id, or "" */
    int sse_ok;      /* the client accepts text/event-stream */
    int streaming;   /* the answer became an SSE stream */
};

/*
 * A watched call's ticker: a thread that ticks the core's watch about once
 * a second while the worker's thread is inside the internal request. It is
 * the only one to write to the POST's answer meanwhile (the internal
 * request's answer goes to a buffer), and the internal request's "client
 * connection" is one end of a socket pair whose other end it closes when
 * the tick says stop: the engine then sees its client gone, as when a
 * client of the API leaves (a code cell interrupted, a command killed).
 */
struct ticker {
    const struct mcp_watch *w;
    int peer;    /* the socket pair's end the ticker holds */
    int done;    /* the call returned: stop */
    int stopped; /* the tick said stop: the peer was shut */
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void *ticker_run(void *arg)
{
    struct ticker *k = arg;
    struct timespec until;

    pthread_mutex_lock(&k->lock);
    clock_gettime(CLOCK_REALTIME, &until);
    while (!k->done && !k->stopped) {
        until.tv_sec += 1;
        if (pthread_cond_timedwait(&k->cond, &k->lock, &until) != ETIMEDOUT || k->done)
            continue;
        pthread_mutex_unlock(&k->lock);
        if (k->w->tick(k->w->arg, -1, -1) != 0) {
            shutdown(k->peer, SHUT_RDWR); /* the internal request's client leaves */
            k->stopped = 1;
        }
        pthread_mutex_lock(&k->lock);
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

/* The backend: one API call as an internal request of the HTTP layer. */
static int internal_api_call(void *ctx, const char *method, const char *path, const char *body,
                             size_t body_len, const char *content_type, long *status,
                             struct nb_buf *answer, const struct mcp_watch *watch)
{
    struct mcp_call_ctx *c = ctx;
    struct ticker k = {.w = watch, .peer = -1};
    int sp[2] = {-1, -1}, rc, ticking = 0;
    sigset_t all, old;
    pthread_t th;

    if (watch != NULL && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0) {
        k.peer = sp[1];
        pthread_mutex_init(&k.lock, NULL);
        pthread_cond_init(&k.cond, NULL);
        sigfillset(&all); /* the worker's signals stay the worker thread's */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ticking = pthread_create(&th, NULL, ticker_run, &k) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!ticking)
            nb_warn("MCP: no ticker thread for %s %.200s: no progress while it runs", method, path);
    } else if (watch != NULL) {
        nb_warn("MCP: socketpair: %s: no progress while %s %.200s runs", strerror(errno), method,
                path);
    }
    rc = nb_http_dispatch_internal(c->a, c->r, method, path, body, body_len, content_type,
                                   ticking ? sp[0] : -1, answer, status);
    if (ticking) {
        pthread_mutex_lock(&k.lock);
        k.done = 1;
        pthread_cond_signal(&k.cond);
        pthread_mutex_unlock(&k.lock);
        pthread_join(th, NULL);
        pthread_cond_destroy(&k.cond);
        pthread_mutex_destroy(&k.lock);
        if (k.stopped) { /* cancelled: whatever came back is not an answer */
            nb_buf_reset(answer);
            nb_buf_printf(answer, "error: the call was cancelled");
            rc = -1;
        }
    }
    if (sp[0] >= 0) {
        close(sp[0]);
        close(sp[1]);
    }
    return rc;
}

/* One SSE event carrying a JSON-RPC message; -1 when the client is gone. */
static int sse_event(struct mcp_call_ctx *c, const char *msg, size_t len)
{
    if (!c->streaming) {
        nb_http_stream_begin(c->r, 200, "text/event-stream");
        c->streaming = 1;
    }
    if (nb_http_stream_bytes(c->r, "event: message\ndata: ", 21) != 0 ||
        nb_http_stream_bytes(c->r, msg, len) != 0 || nb_http_stream_bytes(c->r, "\n\n", 2) != 0)
        return -1;
    return 0;
}

/* A notification while a call runs: the POST's answer turns into an SSE stream. */
static int sse_notify(void *ctx, const char *msg, size_t len)
{
    struct mcp_call_ctx *c = ctx;
    return c->sse_ok ? sse_event(c, msg, len) : 0;
}

/* notifications/cancelled: recorded for the worker that runs the call. */
static void record_cancel(void *ctx, const char *id_json)
{
    struct mcp_call_ctx *c = ctx;
    struct nb_apierr ae = {0};

    if (c->sid[0] && nb_mcp_cancel_add(&c->a->conf, c->sid, id_json, &ae) < 0)
        nb_warn("MCP cancellation of request %s not recorded: %s", id_json, ae.msg);
}

static int was_cancelled(void *ctx, const char *id_json)
{
    struct mcp_call_ctx *c = ctx;
    return c->sid[0] && nb_mcp_cancel_take(&c->a->conf, c->sid, id_json);
}

int api_mcp_post(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                 struct nb_apierr *ae)
{
    const char *sid = nb_http_param(r, "HTTP_MCP_SESSION_ID");
    const char *hver = nb_http_param(r, "HTTP_MCP_PROTOCOL_VERSION");
    size_t cap = a->conf.max_body < MCP_MAX_MESSAGE ? a->conf.max_body : MCP_MAX_MESSAGE;
    const char *accept = nb_http_param(r, "HTTP_ACCEPT");
    struct mcp_call_ctx call_ctx = {a, r, sid != NULL ? sid : "",
                                    accept != NULL && strstr(accept, "text/event-stream") != NULL,
                                    0};
    struct mcp_backend backend = {.call = internal_api_call,
                                  .ctx = &call_ctx,
                                  .conf = &a->conf,
                                  .notify = sse_notify,
                                  .cancel = record_cancel,
                                  .is_cancelled = was_cancelled};
    struct mcp_session s;
    struct nb_buf reply;
    char version[NB_MCP_VERSION_LEN] = MCP_DEFAULT_HTTP_VERSION;
    char new_sid[NB_MCP_SESSION_ID_LEN + 1];
    int rc;

    (void)ra;
    if (nb_http_is_internal(r)) { /* no tool calls /mcp: a loop would be a bug */
        nb_apierr_set(ae, NB_E_INVALID, "bad_request", "/mcp is not a tool's API call");
        return NB_ERR;
    }
    if (hver != NULL && *hver && !mcp_version_supported(hver)) {
        rpc_fail(r, 400, MCP_INVALID_REQUEST,
                 "MCP-Protocol-Version \"%.32s\" is not supported: "
                 "this server speaks %s, %s and %s",
                 hver, mcp_versions[0], mcp_versions[1], mcp_versions[2]);
        return NB_OK;
    }
    if (nb_http_read_body(r, cap, ae) != 0) {
        rpc_fail(r, nb_http_status_of(ae->err), MCP_PARSE_ERROR, "%s", ae->msg);
        return NB_OK;
    }
    if (sid != NULL && *sid) {
        rc = nb_mcp_session_find(&a->conf, nb_http_key(r)->name, sid, version, sizeof(version), ae);
        if (rc < 0) {
            rpc_fail(r, nb_http_status_of(ae->err), MCP_INTERNAL_ERROR, "%s", ae->msg);
            return NB_OK;
        }
        if (rc == 0) {
            rpc_fail(r, 404, MCP_SESSION_NOT_FOUND,
                     "no MCP session %.64s (it expired, was "
                     "ended, or the server forgot it): initialize a new one",
                     sid);
            return NB_OK;
        }
    }
    if (hver != NULL && *hver)
        snprintf(version, sizeof(version), "%s", hver);

    mcp_session_init(&s, &backend);
    snprintf(s.version, sizeof(s.version), "%s", version);
    nb_buf_init(&reply, MCP_MAX_REPLY);
    rc = mcp_handle(&s, r->body.data != NULL ? r->body.data : "", r->body.len, &reply);
    if (call_ctx.streaming) {
        /* progress went out as events: the reply is the last one (none if cancelled) */
        if (rc == MCP_REPLY)
            sse_event(&call_ctx, reply.data, reply.len);
    } else if (s.last == MCP_MSG_CANCELLED) {
        nb_http_stream_begin(r, 200, "text/event-stream"); /* no reply, as the spec says */
    } else if (s.last == MCP_MSG_EMPTY) {
        rpc_fail(r, 400, MCP_PARSE_ERROR, "the body is empty: POST one JSON-RPC message");
    } else if (s.last == MCP_MSG_NOT_JSON) {
        nb_buf_append(&reply, "\n", 1);
        nb_http_body(r, 400, "application/json", reply.data, reply.len);
    } else if (rc != MCP_REPLY) {
        nb_http_body(r, 202, NULL, NULL, 0); /* a notification or a response */
    } else {
        if (s.last == MCP_MSG_INITIALIZE) {
            /* no session file: serve on statelessly rather than fail the client */
            if (nb_mcp_session_new(&a->conf, a->node_tag, nb_http_key(r)->name, s.version, new_sid,
                                   ae) == 0)
                nb_http_add_header(r, "Mcp-Session-Id", new_sid);
            else
                nb_warn("MCP initialize answered without a session: %s", ae->msg);
        }
        nb_buf_append(&reply, "\n", 1);
        nb_http_body(r, 200, "application/json", reply.data, reply.len);
    }
    nb_buf_free(&reply);
    return NB_OK;
}

int api_mcp_delete(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    const char *sid = nb_http_param(r, "HTTP_MCP_SESSION_ID");
    int rc;

    (void)ra;
    if (sid == NULL || !*sid) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_request",
                      "DELETE /mcp ends a session: send its Mcp-Session-Id "
                      "header");
        return NB_ERR;
    }
    rc = nb_mcp_session_end(&a->conf, nb_http_key(r)->name, sid, ae);
    if (rc < 0)
        return NB_ERR;
    if (rc == 0) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no MCP session %.64s (it expired or was ended)", sid);
        return NB_ERR;
    }
    nb_http_no_content(r);
    return NB_OK;
}
