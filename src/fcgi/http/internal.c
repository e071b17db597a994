/*
 * internal.c - see http.h. Internal requests (POST /mcp's tool calls): a
 * request whose body comes from memory and whose answer lands in a buffer
 * (struct nb_http_capture, which request.c reads and writes), routed and
 * finalized by http.c as a client's, acting as its outer request's key.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "http.h"
#include "httppriv.h"
#include "log.h"
#include "tenant.h"

/*
 * Fill r as an internal request: method on uri, body_len bytes of body of
 * content_type (NULL: none); its answer goes to answer. cap holds both
 * ends and must outlive r. -1 with ae set if uri is too long.
 */
static int http_internal(struct nb_req *r, struct nb_http_capture *cap, const char *method,
                         const char *uri, const char *body, size_t body_len,
                         const char *content_type, struct nb_buf *answer, struct nb_apierr *ae)
{
    size_t n = 0;

    memset(cap, 0, sizeof(*cap));
    cap->client_fd = -1;
    cap->in = body;
    cap->in_len = body != NULL ? body_len : 0;
    cap->out = answer;
    snprintf(cap->content_length, sizeof(cap->content_length), "CONTENT_LENGTH=%zu", cap->in_len);
    cap->envp[n++] = cap->content_length;
    if (content_type != NULL) {
        snprintf(cap->content_type, sizeof(cap->content_type), "CONTENT_TYPE=%s", content_type);
        cap->envp[n++] = cap->content_type;
    }
    cap->envp[n] = NULL;

    r->fcgi = NULL;
    r->capture = cap;
    r->envp = cap->envp;
    r->method = method;
    nb_http_req_start(r);
    return nb_http_set_uri(r, uri, ae);
}

int nb_http_dispatch_internal(struct nb_app *a, struct nb_req *outer, const char *method,
                              const char *uri, const char *body, size_t body_len,
                              const char *content_type, int client_fd, struct nb_buf *answer,
                              long *status)
{
    struct nb_http_capture cap;
    struct nb_req ir;
    struct nb_apierr ae;
    size_t start = answer->len;
    int rc;

    memset(&ir, 0, sizeof(ir));
    nb_buf_init(&ir.body, 0);
    ir.outer = outer;
    /* an internal request acts as the key of the request it serves (MCP's tool calls) */
    if (outer != NULL)
        ir.who = outer->who;
    else
        nb_tenant_anyone(&ir.who);
    if (http_internal(&ir, &cap, method, uri, body, body_len, content_type, answer, &ae) != 0)
        rc = NB_ERR;
    else {
        cap.client_fd = client_fd;
        rc = nb_http_dispatch(a, &ir, &ae);
    }
    nb_http_finalize(&ir, rc, &ae);
    rc = 0;
    if (cap.overflow) {
        answer->len = start;
        if (answer->data != NULL)
            answer->data[start] = '\0';
        nb_buf_printf(answer, "error: the answer to %s %.200s is larger than %zu bytes", method,
                      ir.path, answer->cap);
        rc = -1;
    }
    *status = ir.status;
    nb_info("internal: %s %.200s %d", method, ir.path, ir.status);
    nb_buf_free(&ir.body);
    return rc;
}
