/*
 * e2b_rpc.c - see e2b_rpc.h. The protocol is Connect's
 * (connectrpc.com/docs/protocol): its envelope, its end-of-stream message
 * and its table of error codes and HTTP statuses.
 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include "e2b_rpc.h"
#include "json.h"

int nb_rpc_envelope(struct nb_buf *out, unsigned flags, const void *msg, size_t len)
{
    unsigned char head[NB_RPC_ENVELOPE_HEAD];
    if (len > 0xffffffffu)
        return NB_ETOOBIG;
    head[0] = (unsigned char)flags;
    head[1] = (unsigned char)(len >> 24);
    head[2] = (unsigned char)(len >> 16);
    head[3] = (unsigned char)(len >> 8);
    head[4] = (unsigned char)len;
    if (out->len + sizeof(head) + len > out->cap)
        return NB_ETOOBIG;
    nb_buf_append(out, head, sizeof(head));
    return len > 0 ? nb_buf_append(out, msg, len) : NB_OK;
}

int nb_rpc_unenvelope(const void *data, size_t len, const char **msg, size_t *msglen)
{
    const unsigned char *p = data;
    size_t n;
    if (len < NB_RPC_ENVELOPE_HEAD)
        return -1;
    n = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
    if (n != len - NB_RPC_ENVELOPE_HEAD)
        return -1;
    if (p[0] & NB_RPC_FLAG_COMPRESSED)
        return -2;
    if (p[0] != 0)
        return -1;
    *msg = (const char *)p + NB_RPC_ENVELOPE_HEAD;
    *msglen = n;
    return 0;
}

/* {"code", "message"} into an open map. */
static void error_keys(yajl_gen g, const char *code, const char *msg)
{
    nb_json_kv_str(g, "code", code);
    nb_json_kv_str(g, "message", msg != NULL ? msg : "");
}

static int take(struct nb_buf *out, yajl_gen g, int envelope, unsigned flags)
{
    const unsigned char *buf;
    size_t len;
    int rc;
    yajl_gen_get_buf(g, &buf, &len);
    rc = envelope ? nb_rpc_envelope(out, flags, buf, len) : nb_buf_append(out, buf, len);
    yajl_gen_free(g);
    return rc;
}

int nb_rpc_end_stream(struct nb_buf *out, const char *code, const char *msg)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    if (code != NULL) {
        nb_json_cstr(g, "error");
        yajl_gen_map_open(g);
        error_keys(g, code, msg);
        yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    return take(out, g, 1, NB_RPC_FLAG_END);
}

int nb_rpc_error_body(struct nb_buf *out, const char *code, const char *msg)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    error_keys(g, code, msg);
    yajl_gen_map_close(g);
    return take(out, g, 0, 0);
}

/* Connect's codes and the HTTP status each answers with. */
static const struct {
    const char *code;
    int status;
} rpc_codes[] = {
    {"canceled", 499},
    {"unknown", 500},
    {"invalid_argument", 400},
    {"deadline_exceeded", 504},
    {"not_found", 404},
    {"already_exists", 409},
    {"permission_denied", 403},
    {"resource_exhausted", 429},
    {"failed_precondition", 400},
    {"aborted", 409},
    {"out_of_range", 400},
    {"unimplemented", 501},
    {"internal", 500},
    {"unavailable", 503},
    {"data_loss", 500},
    {"unauthenticated", 401},
};

int nb_rpc_code_valid(const char *code)
{
    for (size_t i = 0; code != NULL && i < sizeof(rpc_codes) / sizeof(rpc_codes[0]); i++)
        if (!strcmp(code, rpc_codes[i].code))
            return 1;
    return 0;
}

int nb_rpc_http_status(const char *code)
{
    for (size_t i = 0; code != NULL && i < sizeof(rpc_codes) / sizeof(rpc_codes[0]); i++)
        if (!strcmp(code, rpc_codes[i].code))
            return rpc_codes[i].status;
    return 500;
}

const char *nb_rpc_code(enum nb_err err, const char *code)
{
    if (nb_rpc_code_valid(code))
        return code;
    switch (err) {
    case NB_E_INVALID:
    case NB_E_OUT_OF_RANGE:
        return "invalid_argument";
    case NB_E_UNAUTHENTICATED:
        return "unauthenticated";
    case NB_E_FORBIDDEN:
        return "permission_denied";
    case NB_E_NOT_FOUND:
    case NB_E_NO_CONTEXT:
        return "not_found";
    case NB_E_TIMEOUT:
        return "deadline_exceeded";
    case NB_E_EXISTS:
        return "already_exists";
    case NB_E_CONFLICT:
        /* a conflict named "exists" (EEXIST), or a state that forbids it */
        return code != NULL && strstr(code, "exist") != NULL ? "already_exists"
                                                             : "failed_precondition";
    case NB_E_TOO_LARGE:
    case NB_E_URI_TOO_LONG:
    case NB_E_LIMIT:
    case NB_E_NO_SPACE:
        return "resource_exhausted";
    case NB_E_CANCELLED:
        return "canceled";
    case NB_E_METHOD: /* a procedure is POST only */
    case NB_E_UNSUPPORTED:
        return "unimplemented";
    case NB_E_UPSTREAM:
    case NB_E_UNAVAILABLE:
    case NB_E_AGENT_DOWN:
    case NB_E_DOCKER_DOWN:
    case NB_E_CAPACITY:
        return "unavailable";
    default:
        return "internal";
    }
}

int nb_rpc_is_procedure(const char *path)
{
    const char *slash, *dot;
    if (path == NULL || path[0] != '/')
        return 0;
    slash = strchr(path + 1, '/');
    if (slash == NULL || slash == path + 1 || slash[1] == '\0' || strchr(slash + 1, '/') != NULL)
        return 0;
    dot = memchr(path + 1, '.', (size_t)(slash - path - 1));
    return dot != NULL && dot > path + 1 && dot + 1 < slash;
}

int nb_rpc_is_stream_ctype(const char *ctype)
{
    size_t n = strlen(NB_RPC_STREAM_CTYPE);
    return ctype != NULL && strncasecmp(ctype, NB_RPC_STREAM_CTYPE, n) == 0 &&
           (ctype[n] == '\0' || ctype[n] == ';' || ctype[n] == ' ');
}

int nb_rpc_timeout_ms(const char *header, int64_t *ms)
{
    size_t n;
    *ms = 0;
    if (header == NULL)
        return 0;
    n = strspn(header, "0123456789");
    if (n < 1 || n > 10 || header[n] != '\0')
        return -1;
    for (size_t i = 0; i < n; i++)
        *ms = *ms * 10 + (header[i] - '0');
    return 0;
}
