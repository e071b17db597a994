/*
 * cmd_mcp.c - "nanobox mcp": the MCP server on stdin/stdout, for MCP
 * clients (Claude Code, editors, agent harnesses) that start it as a child.
 *
 * The stdio transport only: newline-delimited JSON-RPC in, one reply line
 * per request out, nothing else on stdout (messages go to stderr, which MCP
 * clients log). The protocol and the tools are src/mcp/mcp.c's; their
 * API calls go through client_call, against the server the rest of the CLI
 * uses (--url, NANOBOX_URL, cli.conf).
 *
 * Tool calls run concurrently, each in a thread of its own with its own
 * libcurl handle (at most MCP_STDIO_CALLS at once; the reader waits for a
 * free place past that), so a quick call is not stuck behind a long one and
 * replies may come out of order, as JSON-RPC allows. Everything else
 * (initialize, ping, tools/list, notifications) is answered by the reader
 * at once. Lines to stdout (replies, progress notifications) are written
 * whole under one lock. notifications/cancelled marks the call for the core,
 * which kills a watched command (see mcp.h).
 *
 * The backend has no config (mcp_backend.conf is NULL): the server is
 * remote, and the API has no route that tells its settings (/healthz gives
 * usage and capacity only), so the tool descriptions name the settings
 * (default_ttl, exec_timeout_max, ...) rather than quote the shipped
 * defaults, which this server may not use.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "json.h"
#include "mcp.h"

#define MCP_READ_CHUNK 65536 /* bytes read from stdin at a time */
#define MCP_STDIO_CALLS 16   /* tool calls running at once */
#define MCP_CANCELS 64       /* cancelled request ids remembered (the oldest goes) */
#define MCP_ID_LEN 64        /* bytes of a request id (JSON text) a cancellation can name */

/* What the reader and the call threads share. */
static struct {
    pthread_mutex_t lock; /* stdout, running, cancels */
    pthread_cond_t done;  /* a call ended */
    unsigned running;
    int out_gone; /* stdout failed: the client left */
    char cancels[MCP_CANCELS][MCP_ID_LEN];
    unsigned next_cancel;
} srv = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {{0}}, 0};

/* A backend's context: the client to call with, and the tool call it serves. */
struct stdio_ctx {
    struct client *c;
    char id[MCP_ID_LEN]; /* the request's id as JSON text; "" outside a tool call */
};

/* Was request id cancelled? take: forget it then. */
static int cancel_seen(const char *id, int take)
{
    int found = 0;

    pthread_mutex_lock(&srv.lock);
    for (unsigned i = 0; i < MCP_CANCELS && !found; i++) {
        if (srv.cancels[i][0] && !strcmp(srv.cancels[i], id)) {
            if (take)
                srv.cancels[i][0] = '\0';
            found = 1;
        }
    }
    pthread_mutex_unlock(&srv.lock);
    return found;
}

/* client_req.abort_check: a cancelled call drops its connection, which kills its command. */
static int call_aborted(void *arg, long long done, long long total)
{
    const struct stdio_ctx *x = arg;
    (void)done;
    (void)total;
    return cancel_seen(x->id, 0);
}

/* client_req.abort_check of a watched call: the core's tick, in this call's thread. */
struct stdio_watch {
    const struct mcp_watch *w;
};

static int call_watched(void *arg, long long done, long long total)
{
    const struct stdio_watch *sw = arg;
    return sw->w->tick(sw->w->arg, done, total);
}

/* The backend: one API call over the CLI's HTTP client. */
static int stdio_api_call(void *ctx, const char *method, const char *path, const char *body,
                          size_t body_len, const char *content_type, long *status,
                          struct nb_buf *answer, const struct mcp_watch *watch)
{
    struct stdio_ctx *x = ctx;
    struct client *c = x->c;
    struct stdio_watch watched = {watch};
    size_t plen = strlen(path);
    /* exec, run and code last as long as the command: the server enforces its timeout */
    int runs_code = !strcmp(method, "POST") &&
                    (!strcmp(path, "/run") || (plen > 5 && !strcmp(path + plen - 5, "/exec")) ||
                     (plen > 5 && !strcmp(path + plen - 5, "/code")));
    struct client_req req = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body_len,
        .content_type = content_type,
        .timeout = runs_code ? 0L : CLIENT_CALL_TIMEOUT,
        .keep_errors = 1,
        .raw_answer = 1,
        .abort_check = watch != NULL ? call_watched
                       : x->id[0]    ? call_aborted
                                     : NULL,
        .abort_ctx = watch != NULL ? (void *)&watched : (void *)x,
    };
    struct client_answer a;
    int rc = 0;

    client_call(c, &req, &a);
    if (a.status == 0) {
        nb_buf_printf(answer,
                      "error: no answer from the nanobox server at %s (the MCP "
                      "server's log on stderr says why)",
                      c->url);
        rc = -1;
    } else if (nb_buf_append(answer, a.body.data != NULL ? a.body.data : "", a.body.len) != NB_OK) {
        nb_buf_reset(answer);
        nb_buf_printf(answer, "error: the nanobox server's answer is larger than %zu bytes",
                      answer->cap);
        rc = -1;
    }
    *status = a.status;
    client_answer_free(&a);
    return rc;
}

/* Write one line whole (the caller holds srv.lock); -1 when stdout is gone. */
static int write_line_locked(const char *data, size_t len)
{
    if (srv.out_gone || fwrite(data, 1, len, stdout) != len || fputc('\n', stdout) == EOF ||
        fflush(stdout) != 0) {
        srv.out_gone = 1;
        return -1;
    }
    return 0;
}

static int send_line(const struct nb_buf *reply)
{
    int rc;

    pthread_mutex_lock(&srv.lock);
    rc = write_line_locked(reply->data, reply->len);
    pthread_mutex_unlock(&srv.lock);
    return rc;
}

/* The backend's notify: a progress notification, between whole lines. */
static int stdio_notify(void *ctx, const char *msg, size_t len)
{
    (void)ctx;
    int rc;

    pthread_mutex_lock(&srv.lock);
    rc = write_line_locked(msg, len);
    pthread_mutex_unlock(&srv.lock);
    return rc;
}

static void stdio_cancel(void *ctx, const char *id_json)
{
    (void)ctx;
    if (strlen(id_json) >= MCP_ID_LEN)
        return; /* no call of ours has such an id */
    pthread_mutex_lock(&srv.lock);
    snprintf(srv.cancels[srv.next_cancel], MCP_ID_LEN, "%s", id_json);
    srv.next_cancel = (srv.next_cancel + 1) % MCP_CANCELS;
    pthread_mutex_unlock(&srv.lock);
}

static int stdio_is_cancelled(void *ctx, const char *id_json)
{
    (void)ctx;
    return cancel_seen(id_json, 1);
}

/* One tool call in a thread of its own: its line, its client, its backend. */
struct call_job {
    struct client client;
    struct stdio_ctx x;
    struct mcp_backend backend;
    struct mcp_session session;
    char *line;
    size_t len;
};

static void *call_thread(void *arg)
{
    struct call_job *job = arg;
    struct nb_buf reply;

    nb_buf_init(&reply, MCP_MAX_REPLY);
    /* a cancelled call gets no reply, as the spec says */
    if (mcp_handle(&job->session, job->line, job->len, &reply) == MCP_REPLY &&
        !cancel_seen(job->x.id, 1))
        send_line(&reply);
    nb_buf_free(&reply);
    curl_easy_cleanup(job->client.curl);
    free(job->line);
    free(job);
    pthread_mutex_lock(&srv.lock);
    srv.running--;
    pthread_cond_broadcast(&srv.done);
    pthread_mutex_unlock(&srv.lock);
    return NULL;
}

/* Is this line a tools/call request (the one method that may take long)? Its id in id. */
static int is_tool_call(const char *line, size_t len, char id[MCP_ID_LEN])
{
    yajl_val m = NULL, method, idv;
    const char *id_path[] = {"id", NULL}, *method_path[] = {"method", NULL};
    char err[64];
    int yes;

    if (nb_json_parse(line, len, MCP_MAX_DEPTH, &m, err, sizeof(err)) != 0 || m == NULL)
        return 0;
    method = yajl_tree_get(m, method_path, yajl_t_string);
    idv = yajl_tree_get(m, id_path, yajl_t_any);
    yes = YAJL_IS_OBJECT(m) && idv != NULL && method != NULL &&
          !strcmp(method->u.string, "tools/call");
    if (yes) {
        yajl_gen g = nb_json_gen();
        char *text;
        nb_json_tree(g, idv);
        text = nb_json_gen_take(g);
        snprintf(id, MCP_ID_LEN, "%s", strlen(text) < MCP_ID_LEN ? text : "");
        free(text);
    }
    yajl_tree_free(m);
    return yes;
}

/* Start a thread for the tool call in line; 0, or -1 when none could start (served here). */
static int start_call(struct mcp_session *s, const struct client *c, struct nb_buf *line,
                      const char *id)
{
    struct call_job *job = nb_xcalloc(1, sizeof(*job));
    pthread_attr_t attr;
    pthread_t th;
    int rc;

    job->client = *c;
    job->client.curl = curl_easy_init();
    job->x.c = &job->client;
    snprintf(job->x.id, sizeof(job->x.id), "%s", id);
    job->backend = *s->backend;
    job->backend.ctx = &job->x;
    job->session = *s;
    job->session.backend = &job->backend;
    job->line = nb_xmalloc(line->len + 1);
    memcpy(job->line, line->data, line->len + 1);
    job->len = line->len;
    if (job->client.curl == NULL)
        goto fail;
    pthread_mutex_lock(&srv.lock);
    while (srv.running >= MCP_STDIO_CALLS)
        pthread_cond_wait(&srv.done, &srv.lock);
    srv.running++;
    pthread_mutex_unlock(&srv.lock);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, call_thread, job);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return 0;
    pthread_mutex_lock(&srv.lock);
    srv.running--;
    pthread_mutex_unlock(&srv.lock);
fail:
    if (job->client.curl != NULL)
        curl_easy_cleanup(job->client.curl);
    free(job->line);
    free(job);
    return -1;
}

/* One complete line from stdin (the '\n' removed, NUL-terminated in line). */
static int serve_line(struct mcp_session *s, struct nb_buf *line, struct nb_buf *reply)
{
    if (line->len > 0 && line->data[line->len - 1] == '\r')
        line->data[--line->len] = '\0';
    if (line->len == 0)
        return 0;
    char id[MCP_ID_LEN] = "";

    if (is_tool_call(line->data, line->len, id) &&
        start_call(s, ((struct stdio_ctx *)s->backend->ctx)->c, line, id) == 0)
        return 0;
    nb_buf_reset(reply);
    if (mcp_handle(s, line->data, line->len, reply) != MCP_REPLY)
        return 0;
    return send_line(reply);
}

static int serve_too_long(struct nb_buf *reply)
{
    char msg[128];

    snprintf(msg, sizeof(msg), "message longer than %u bytes: not read", MCP_MAX_MESSAGE);
    nb_buf_reset(reply);
    mcp_error_reply(reply, MCP_PARSE_ERROR, msg);
    return send_line(reply);
}

/*
 * Read stdin to its end, one message per line. A line over MCP_MAX_MESSAGE
 * is skipped to its newline and answered with a parse error, so one bad
 * message costs neither memory nor the session.
 */
static int mcp_serve_stdio(struct mcp_session *s)
{
    char *chunk = nb_xmalloc(MCP_READ_CHUNK);
    struct nb_buf line, reply;
    int skipping = 0, rc = CLI_OK;

    nb_buf_init(&line, MCP_MAX_MESSAGE);
    nb_buf_init(&reply, MCP_MAX_REPLY);
    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, MCP_READ_CHUNK);
        const char *p = chunk;
        size_t left;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "nanobox mcp: cannot read stdin: %s\n", strerror(errno));
            rc = CLI_FAIL;
            break;
        }
        if (n == 0) {
            /* a last message without its newline still counts */
            if (!skipping && line.len > 0 && serve_line(s, &line, &reply) != 0)
                rc = CLI_FAIL;
            else if (skipping && serve_too_long(&reply) != 0)
                rc = CLI_FAIL;
            break;
        }
        for (left = (size_t)n; left > 0;) {
            const char *nl = memchr(p, '\n', left);
            size_t part = nl != NULL ? (size_t)(nl - p) : left;
            if (!skipping && nb_buf_append(&line, p, part) != NB_OK) {
                skipping = 1;
                nb_buf_reset(&line);
            }
            if (nl == NULL)
                break;
            if ((skipping ? serve_too_long(&reply) : serve_line(s, &line, &reply)) != 0) {
                rc = CLI_FAIL; /* stdout is gone: nobody to serve */
                goto out;
            }
            skipping = 0;
            nb_buf_reset(&line);
            p = nl + 1;
            left -= part + 1;
        }
    }
out:
    /* the calls still running answer before we go */
    pthread_mutex_lock(&srv.lock);
    while (srv.running > 0)
        pthread_cond_wait(&srv.done, &srv.lock);
    pthread_mutex_unlock(&srv.lock);
    nb_buf_free(&line);
    nb_buf_free(&reply);
    free(chunk);
    return rc;
}

int cmd_mcp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct stdio_ctx main_ctx = {.c = c, .id = ""};
    struct mcp_backend backend = {.call = stdio_api_call,
                                  .ctx = &main_ctx,
                                  .conf = NULL,
                                  .notify = stdio_notify,
                                  .cancel = stdio_cancel,
                                  .is_cancelled = stdio_is_cancelled};
    struct mcp_session session;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 0) {
        rc = cli_usage_error(cmd, "mcp takes no arguments");
        goto out;
    }
    c->json = 0;              /* stdout carries JSON-RPC and nothing else */
    signal(SIGPIPE, SIG_IGN); /* a client that left is seen as a write error */
    if (isatty(STDIN_FILENO))
        fprintf(stderr, "nanobox mcp: serving MCP (JSON-RPC, one message per line) on "
                        "stdin/stdout; an MCP client normally starts this (docs/MCP.md)\n");
    if ((rc = client_ready(c)) != CLI_OK)
        goto out; /* before any thread copies it */
    mcp_session_init(&session, &backend);
    rc = mcp_serve_stdio(&session);
out:
    free(pos.v);
    return rc;
}
