/*
 * mcp.h - the Model Context Protocol server core: a protocol (JSON-RPC 2.0,
 * MCP's initialize / ping / tools/list / tools/call) and a tool set
 * (nanobox's sandbox tools), transport-independent: one message in, the
 * reply bytes out (none for a notification).
 *
 * It lives in src/mcp, not src/common: it is not plumbing every program
 * shares but a front of its own, with two transports around it. It does no
 * I/O of its own (a watched exec sleeps between polls, see below): every
 * tool is one or a few calls of the HTTP API made through a backend callback, so the stdio transport (the CLI's "nanobox mcp", over
 * libcurl) and the Streamable HTTP transport (POST /mcp in the FastCGI
 * pool, dispatching the request internally) share everything but the bytes
 * on the wire.
 *
 * The tool descriptions a model reads (defaults, ceilings, caps, the
 * workspace) come from the operator's config when the backend has it
 * (mcp_backend.conf); without it (the stdio front talks to a remote server
 * whose config it cannot read) they name the settings instead of quoting
 * numbers that may be wrong.
 *
 * Tool failures (an API error, an unreachable server, bad arguments) are
 * results with isError: true and the API's message, for the model to read;
 * JSON-RPC errors are kept for messages that are not valid requests.
 */
#ifndef NB_MCP_H
#define NB_MCP_H

#include <stddef.h>

#include "buf.h"
#include "conf.h"

#define MCP_MAX_MESSAGE (4u * 1024u * 1024u) /* bytes in one JSON-RPC message (one stdio line) */
#define MCP_MAX_DEPTH 64u                    /* JSON nesting accepted in a message */
#define MCP_MAX_ANSWER (16u * 1024u * 1024u) /* bytes of one API answer a tool reads */
#define MCP_MAX_TEXT (2u * MCP_MAX_ANSWER)   /* a tool's text: an answer, base64'd */
#define MCP_MAX_REPLY (2u * MCP_MAX_TEXT)    /* one reply: that text, JSON-escaped */

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR -32700
#define MCP_INVALID_REQUEST -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS -32602
#define MCP_INTERNAL_ERROR -32603

/* Protocol versions this server speaks, newest first. */
#define MCP_VERSION_LATEST "2025-06-18"
extern const char *const mcp_versions[];

/* mcp_handle's results. */
#define MCP_REPLY 1    /* out holds a reply */
#define MCP_NO_REPLY 0 /* a notification or a response: nothing to send */

/*
 * A watched API call (one of a long tools/call's): while it waits for the
 * answer the backend calls tick about once a second (done and total -1),
 * and may call it more often with a transfer's bytes (done of total sent
 * or received; total -1 when unknown). tick sends the call's progress when
 * due and returns 1 when the call is to be given up (notifications/
 * cancelled named it, or the client left): the backend then drops the API
 * call as a client that goes away would (the server interrupts a code
 * cell, kills a command) and returns -1. tick may run on another thread
 * than the call's (the HTTP transport's ticker), never two at once.
 */
struct mcp_watch {
    int (*tick)(void *arg, long long done, long long total);
    void *arg;
};

/*
 * One HTTP API call: method and path (query string included, relative to
 * the API's root), a body of body_len bytes (NULL: none) of content_type,
 * watched when watch is not NULL (see above). Returns 0 when an answer
 * came, with *status and its body in answer (appended; the answer's cap
 * applies); -1 when none did, with a message for the model in answer
 * ("cannot reach nanobox at ...").
 */
typedef int (*mcp_call_fn)(void *ctx, const char *method, const char *path, const char *body,
                           size_t body_len, const char *content_type, long *status,
                           struct nb_buf *answer, const struct mcp_watch *watch);

/*
 * A long call. A tools/call whose params._meta carries a progressToken is
 * watched: every MCP_PROGRESS_EVERY_MS a notifications/progress goes to the
 * client through notify, and the work stops when notifications/cancelled
 * names the call (is_cancelled) or when notify says the client is gone.
 * sandbox_exec starts its command in the background and polls it (and
 * kills it); run_code, the file tools and sandbox_create make their one API
 * call watched (struct mcp_watch: the backend ticks while it waits), and a
 * file transfer reports its bytes.
 */
#define MCP_PROGRESS_EVERY_MS 5000

/* One message for the client while a call runs (a JSON-RPC notification,
 * len bytes, no newline). 0 sent or dropped; -1: the client is gone. */
typedef int (*mcp_notify_fn)(void *ctx, const char *msg, size_t len);
/* notifications/cancelled came for the request whose id is id_json (the
 * id as JSON text: 7, "abc"). */
typedef void (*mcp_cancel_fn)(void *ctx, const char *id_json);
/* Was the request of id_json cancelled? 1 yes, 0 no. */
typedef int (*mcp_is_cancelled_fn)(void *ctx, const char *id_json);

struct mcp_backend {
    mcp_call_fn call;
    void *ctx;
    /* The config of the server call reaches, for tools/list's descriptions
     * and the defaults the core fills in; NULL when unknown. */
    const struct nb_conf *conf;
    /* Optional (NULL: no progress, no cancellation). */
    mcp_notify_fn notify;
    mcp_cancel_fn cancel;
    mcp_is_cancelled_fn is_cancelled;
};

/* What the last message was (mcp_session.last), for a transport that answers
 * each message on its own (HTTP: status code, a new session). */
#define MCP_MSG_OTHER 0      /* anything else, valid or not */
#define MCP_MSG_EMPTY 1      /* nothing but white space */
#define MCP_MSG_NOT_JSON 2   /* not JSON, or too deep: the reply is a parse error */
#define MCP_MSG_INITIALIZE 3 /* an initialize request answered with a result */
#define MCP_MSG_CANCELLED 4  /* a tools/call that was cancelled: no reply, as the spec says */

/* What one connection remembers between messages. */
struct mcp_session {
    const struct mcp_backend *backend;
    char version[16]; /* negotiated protocol version; MCP_VERSION_LATEST until then */
    int initialized;  /* initialize was answered */
    int last;         /* MCP_MSG_*: what mcp_handle's last message was */
};

void mcp_session_init(struct mcp_session *s, const struct mcp_backend *backend);

/*
 * Handle one message of len bytes (msg[len] must be '\0', as nb_json_parse
 * wants). The reply, if any, is appended to out as one line of JSON without
 * the newline. Returns MCP_REPLY or MCP_NO_REPLY; never fails otherwise.
 */
int mcp_handle(struct mcp_session *s, const char *msg, size_t len, struct nb_buf *out);

/* A JSON-RPC error reply with a null id (a message the transport could not
 * even hand over: a line over MCP_MAX_MESSAGE). */
void mcp_error_reply(struct nb_buf *out, int code, const char *message);

/* Whether version is one of mcp_versions (HTTP: the MCP-Protocol-Version header). */
int mcp_version_supported(const char *version);

#endif
