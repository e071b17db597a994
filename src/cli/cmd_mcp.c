/*
 * cmd_mcp.c - "nanobox mcp": the MCP server on stdin/stdout, for MCP
 * clients (Claude Code, editors, agent harnesses) that start it as a child.
 *
 * The stdio transport only: newline-delimited JSON-RPC in, one reply line
 * per request out, nothing else on stdout (messages go to stderr, which MCP
 * clients log). The protocol and the tools are src/mcp/mcp.c's; their
 * API calls go through client_call, against the server the rest of the CLI
 * uses (--url, NANOBOX_URL, cli.conf). Requests are served one at a time.
 *
 * The backend has no config (mcp_backend.conf is NULL): the server is
 * remote, and the API has no route that tells its settings (/healthz gives
 * usage and capacity only), so the tool descriptions name the settings
 * (default_ttl, exec_timeout_max, ...) rather than quote the shipped
 * defaults, which this server may not use.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "mcp.h"

#define MCP_READ_CHUNK 65536 /* bytes read from stdin at a time */

/* The backend: one API call over the CLI's HTTP client. */
static int stdio_api_call(void *ctx, const char *method, const char *path, const char *body,
                          size_t body_len, const char *content_type, long *status,
                          struct nb_buf *answer)
{
    struct client *c = ctx;
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

/* Write one reply line; -1 when stdout is gone (the client left). */
static int send_line(const struct nb_buf *reply)
{
    if (fwrite(reply->data, 1, reply->len, stdout) != reply->len || fputc('\n', stdout) == EOF ||
        fflush(stdout) != 0)
        return -1;
    return 0;
}

/* One complete line from stdin (the '\n' removed, NUL-terminated in line). */
static int serve_line(struct mcp_session *s, struct nb_buf *line, struct nb_buf *reply)
{
    if (line->len > 0 && line->data[line->len - 1] == '\r')
        line->data[--line->len] = '\0';
    if (line->len == 0)
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
    nb_buf_free(&line);
    nb_buf_free(&reply);
    free(chunk);
    return rc;
}

int cmd_mcp(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct mcp_backend backend = {.call = stdio_api_call, .ctx = c, .conf = NULL};
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
    mcp_session_init(&session, &backend);
    rc = mcp_serve_stdio(&session);
out:
    free(pos.v);
    return rc;
}
