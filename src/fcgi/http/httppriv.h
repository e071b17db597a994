/*
 * httppriv.h - what the files of the HTTP layer share; http.h is the
 * layer's interface, this header is for its own files only.
 *
 * The layer's files that serve a request, each calling only those above
 * it in this list (and the parts under them: route.c, query.c, tenant.c):
 *   request.c   a request's reads (the FastCGI params, the URI, the query,
 *               the body) and its answer's writes (status line, headers,
 *               a body), to FastCGI or into an internal request's
 *               capture; its "after the answer" hooks
 *   stream.c    streamed answers: NDJSON lines and raw bytes, the big
 *               pieces as FastCGI records of their own
 *   auth.c      who sent a request: the API key check (and nginx's
 *               auth_request), what its key sees, the audit line, the
 *               key's request rate
 *   http.c      routing through the table and the fronts, and the one
 *               error answer (nb_http_finalize)
 *   internal.c  internal requests (MCP's tool calls): a body from memory,
 *               the answer into a buffer, through http.c's routing
 */
#ifndef NB_HTTPPRIV_H
#define NB_HTTPPRIV_H

#include <stddef.h>

#include "http.h"

/* The two ends of an internal request: its body in, its answer out. */
struct nb_http_capture {
    const char *in; /* the request body */
    size_t in_len;
    size_t in_off;           /* bytes of it read so far */
    char *envp[3];           /* its CGI params, NULL-terminated */
    char content_length[48]; /* "CONTENT_LENGTH=n" */
    char content_type[96];   /* "CONTENT_TYPE=t" */
    struct nb_buf *out;      /* the answer's body, within its cap */
    int overflow;            /* the answer did not fit out's cap */
    int client_fd;           /* what nb_http_client_fd says for it; -1: none */
};

/* What kind of stream an answer is, once nb_http_stream_begin ran. */
enum { HTTP_STREAM_NONE, HTTP_STREAM_BYTES, HTTP_STREAM_NDJSON };

/* ---- request.c ---- */

/* Split uri into r->path and r->query: 0, or -1 with ae set (414) if too long. */
/* A request's answer and timing state, fresh (a FastCGI request's or an internal one's). */
void nb_http_req_start(struct nb_req *r);
int nb_http_set_uri(struct nb_req *r, const char *uri, struct nb_apierr *ae);
/* The answer's bytes: to the FastCGI stream, or into the capture buffer. 0, or -1. */
int nb_http_put(struct nb_req *r, const void *data, size_t len);
/* The status and headers of the answer (stream: not buffered by nginx). */
void nb_http_send_head(struct nb_req *r, int status, const char *ctype, int stream);

/* ---- auth.c ---- */

/* Does a key r sends pass for a row of flags (r->who gets it)? 1, or 0. */
int nb_http_authorized(struct nb_app *a, struct nb_req *r, unsigned flags);
/* The 401's message: the native API's, or that of the front that claimed r. */
const char *nb_http_unauthorized(const struct nb_req *r);
/* A token of r's key's rate: 1, or 0 with a 429 in ae and a Retry-After. */
int nb_http_rate_ok(struct nb_req *r, struct nb_apierr *ae);

#endif
