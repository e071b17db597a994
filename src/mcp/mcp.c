/*
 * mcp.c - the MCP core's protocol (see mcp.h): one JSON-RPC 2.0 message in
 * (or a batch, before 2025-06-18), its reply out. The envelope is checked
 * here (jsonrpc, id, method, params, duplicate keys), then the methods:
 * initialize (the version negotiated, the server's instructions), ping,
 * tools/list (the tool table of tools.c with its schemas, as the
 * negotiated version has them) and tools/call (the tool looked up in the
 * table, its arguments checked, its run, and its result as content and
 * structuredContent). The tools are reached only through the table.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "mcp.h"
#include "mcp_tool.h"

const char *const mcp_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

int mcp_version_supported(const char *version)
{
    for (size_t i = 0; mcp_versions[i] != NULL; i++)
        if (!strcmp(version, mcp_versions[i]))
            return 1;
    return 0;
}

void mcp_session_init(struct mcp_session *s, const struct mcp_backend *backend)
{
    memset(s, 0, sizeof(*s));
    s->backend = backend;
    snprintf(s->version, sizeof(s->version), "%s", MCP_VERSION_LATEST);
}

/* Protocol versions compare as dates. */
static int version_at_least(const struct mcp_session *s, const char *v)
{
    return strcmp(s->version, v) >= 0;
}

/* -------------------------------------------------------------- replies */

/* Append to out, or undo everything appended since start and say why. */
static void reply_text(struct nb_buf *out, size_t start, const char *id_json, const char *key,
                       const char *value_json)
{
    if (nb_buf_printf(out, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"%s\":", id_json, key) == NB_OK &&
        nb_buf_append(out, value_json, strlen(value_json)) == NB_OK &&
        nb_buf_append(out, "}", 1) == NB_OK)
        return;
    out->len = start;
    if (out->data != NULL)
        out->data[start] = '\0';
    nb_buf_printf(out,
                  "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":"
                  "\"the reply is larger than this transport's cap\"}}",
                  id_json, MCP_INTERNAL_ERROR);
}

static char *id_text(yajl_val id)
{
    yajl_gen g = nb_json_gen();
    nb_json_tree(g, id);
    return nb_json_gen_take(g);
}

static void reply_result(struct nb_buf *out, yajl_val id, yajl_gen result)
{
    char *idj = id_text(id), *res = nb_json_gen_take(result);
    reply_text(out, out->len, idj, "result", res);
    free(idj);
    free(res);
}

static void reply_error(struct nb_buf *out, yajl_val id, int code, const char *message)
{
    yajl_gen g = nb_json_gen();
    char *idj = id_text(id), *err;

    yajl_gen_map_open(g);
    nb_json_kv_int(g, "code", code);
    nb_json_kv_str(g, "message", message);
    yajl_gen_map_close(g);
    err = nb_json_gen_take(g);
    reply_text(out, out->len, idj, "error", err);
    free(idj);
    free(err);
}

void mcp_error_reply(struct nb_buf *out, int code, const char *message)
{
    reply_error(out, NULL, code, message);
}

/* ------------------------------------------------------------- methods */

static int do_initialize(struct mcp_session *s, yajl_val id, yajl_val params, int in_batch,
                         struct nb_buf *out)
{
    yajl_val asked = mcp_member(params, "protocolVersion");
    yajl_gen g;

    if (in_batch) {
        reply_error(out, id, MCP_INVALID_REQUEST, "initialize must not be part of a batch");
        return MCP_REPLY;
    }
    if (asked == NULL || !YAJL_IS_STRING(asked)) {
        reply_error(
            out, id, MCP_INVALID_PARAMS,
            "initialize needs params.protocolVersion, a string such as \"" MCP_VERSION_LATEST "\"");
        return MCP_REPLY;
    }
    /* the client's version when we speak it, else our latest: the client decides */
    snprintf(s->version, sizeof(s->version), "%s",
             mcp_version_supported(asked->u.string) ? asked->u.string : MCP_VERSION_LATEST);
    s->initialized = 1;
    s->last = MCP_MSG_INITIALIZE;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "protocolVersion", s->version);
    nb_json_cstr(g, "capabilities");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "tools");
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "listChanged", 0);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "serverInfo");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", "nanobox");
    if (version_at_least(s, "2025-06-18"))
        nb_json_kv_str(g, "title", "nanobox sandboxes");
    nb_json_kv_str(g, "version", PACKAGE_VERSION);
    yajl_gen_map_close(g);
    mcp_gen_description(g, "instructions", mcp_instructions, s);
    yajl_gen_map_close(g);
    reply_result(out, id, g);
    return MCP_REPLY;
}

static int do_tools_list(struct mcp_session *s, yajl_val id, struct nb_buf *out)
{
    yajl_gen g = nb_json_gen();

    yajl_gen_map_open(g);
    nb_json_cstr(g, "tools");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < mcp_n_tools; i++) {
        const struct mcp_tool *tool = &mcp_tools[i];
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "name", tool->name);
        if (version_at_least(s, "2025-06-18"))
            nb_json_kv_str(g, "title", tool->title);
        mcp_gen_description(g, "description", tool->description, s);
        mcp_gen_input_schema(g, tool, s);
        if (version_at_least(s, "2025-06-18") && tool->output_schema != NULL) {
            yajl_val os = NULL;
            char err[128];
            if (nb_json_parse(tool->output_schema, strlen(tool->output_schema), MCP_MAX_DEPTH, &os,
                              err, sizeof(err)) == 0) {
                nb_json_cstr(g, "outputSchema");
                nb_json_tree(g, os);
            } else {
                nb_error("MCP: the output schema of %s is not JSON: %s", tool->name, err);
            }
            yajl_tree_free(os);
        }
        if (version_at_least(s, "2025-03-26")) {
            nb_json_cstr(g, "annotations");
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "title", tool->title);
            nb_json_kv_bool(g, "readOnlyHint", (tool->hints & HINT_READ_ONLY) != 0);
            nb_json_kv_bool(g, "destructiveHint", (tool->hints & HINT_DESTRUCTIVE) != 0);
            nb_json_kv_bool(g, "idempotentHint", (tool->hints & HINT_IDEMPOTENT) != 0);
            nb_json_kv_bool(g, "openWorldHint", 0);
            yajl_gen_map_close(g);
        }
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    reply_result(out, id, g);
    return MCP_REPLY;
}

static int do_tools_call(struct mcp_session *s, yajl_val id, yajl_val params, struct nb_buf *out)
{
    yajl_val name = mcp_member(params, "name"), args = mcp_member(params, "arguments");
    yajl_val token = mcp_member(mcp_member(params, "_meta"), "progressToken");
    struct tool_call t = {.s = s};
    char *idj;
    char msg[256];
    yajl_gen g;

    if (name == NULL || !YAJL_IS_STRING(name)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "tools/call needs params.name, a tool's name");
        return MCP_REPLY;
    }
    if (args != NULL && !YAJL_IS_OBJECT(args) && !YAJL_IS_NULL(args)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "params.arguments must be an object");
        return MCP_REPLY;
    }
    t.tool = mcp_tool_find(name->u.string);
    if (t.tool == NULL) {
        snprintf(msg, sizeof(msg), "unknown tool \"%.64s\" (tools/list names the tools)",
                 name->u.string);
        reply_error(out, id, MCP_INVALID_PARAMS, msg);
        return MCP_REPLY;
    }

    if (token != NULL && (YAJL_IS_STRING(token) || YAJL_IS_INTEGER(token)))
        t.progress_token = token;
    mcp_watch_start(&t, 0, NULL, NULL); /* seconds, no total: a tool may say more */
    idj = id_text(id);
    t.id_json = idj;
    nb_buf_init(&t.text, MCP_MAX_TEXT);
    if (mcp_check_args(&t, args != NULL && YAJL_IS_OBJECT(args) ? args : NULL) == 0)
        t.tool->run(&t);
    free(idj);
    t.id_json = NULL;
    if (t.cancelled) { /* the client gave up on it: the spec wants no reply */
        s->last = MCP_MSG_CANCELLED;
        yajl_tree_free(t.structured);
        mcp_items_free(&t);
        nb_buf_free(&t.text);
        return MCP_NO_REPLY;
    }

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "content");
    yajl_gen_array_open(g);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "type", "text");
    nb_json_cstr(g, "text");
    nb_json_str(g, t.text.data != NULL ? t.text.data : "", t.text.len);
    yajl_gen_map_close(g);
    for (size_t i = 0; i < t.n_items; i++) {
        const struct content_item *it = &t.items[i];
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "type", it->mime != NULL ? "image" : "text");
        nb_json_cstr(g, it->mime != NULL ? "data" : "text");
        nb_json_str(g, it->data.data != NULL ? it->data.data : "", it->data.len);
        if (it->mime != NULL)
            nb_json_kv_str(g, "mimeType", it->mime);
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    if (t.structured != NULL && !t.is_error && version_at_least(s, "2025-06-18")) {
        nb_json_cstr(g, "structuredContent");
        yajl_gen_map_open(g);
        for (size_t i = 0; i < t.structured->u.object.len; i++) {
            if (t.structured_omit != NULL &&
                !strcmp(t.structured->u.object.keys[i], t.structured_omit))
                continue;
            nb_json_cstr(g, t.structured->u.object.keys[i]);
            nb_json_tree(g, t.structured->u.object.values[i]);
        }
        yajl_gen_map_close(g);
    }
    nb_json_kv_bool(g, "isError", t.is_error);
    yajl_gen_map_close(g);
    reply_result(out, id, g);

    yajl_tree_free(t.structured);
    mcp_items_free(&t);
    nb_buf_free(&t.text);
    return MCP_REPLY;
}

/* ------------------------------------------------------------- dispatch */

static int handle_one(struct mcp_session *s, yajl_val m, int in_batch, struct nb_buf *out)
{
    yajl_val id, jsonrpc, method, params;
    int has_id;
    char msg[256];

    if (!YAJL_IS_OBJECT(m)) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "a JSON-RPC message must be an object");
        return MCP_REPLY;
    }
    id = mcp_member(m, "id");
    has_id = id != NULL;
    if (has_id && !YAJL_IS_STRING(id) && !YAJL_IS_INTEGER(id)) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "\"id\" must be a string or an integer");
        return MCP_REPLY;
    }
    jsonrpc = mcp_member(m, "jsonrpc");
    if (jsonrpc == NULL || !YAJL_IS_STRING(jsonrpc) || strcmp(jsonrpc->u.string, "2.0") != 0) {
        reply_error(out, id, MCP_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
        return MCP_REPLY;
    }
    method = mcp_member(m, "method");
    if (method == NULL) {
        /* a response to a request of ours: we send none, so nothing to match */
        if (mcp_member(m, "result") != NULL || mcp_member(m, "error") != NULL)
            return MCP_NO_REPLY;
        reply_error(out, id, MCP_INVALID_REQUEST, "a request needs a \"method\"");
        return MCP_REPLY;
    }
    if (!YAJL_IS_STRING(method)) {
        reply_error(out, id, MCP_INVALID_REQUEST, "\"method\" must be a string");
        return MCP_REPLY;
    }
    if (!has_id) {
        /* notifications: initialized, cancelled (calls run to the end), the rest ignored */
        if (!strcmp(method->u.string, "notifications/initialized"))
            s->initialized = 1;
        if (!strcmp(method->u.string, "notifications/cancelled") && s->backend != NULL &&
            s->backend->cancel != NULL) {
            yajl_val req = mcp_member(mcp_member(m, "params"), "requestId");
            if (req != NULL && (YAJL_IS_STRING(req) || YAJL_IS_INTEGER(req))) {
                char *rid = id_text(req);
                s->backend->cancel(s->backend->ctx, rid);
                free(rid);
            }
        }
        return MCP_NO_REPLY;
    }
    params = mcp_member(m, "params");
    if (params != NULL && !YAJL_IS_OBJECT(params)) {
        reply_error(out, id, MCP_INVALID_PARAMS, "\"params\" must be an object");
        return MCP_REPLY;
    }

    if (!strcmp(method->u.string, "initialize"))
        return do_initialize(s, id, params, in_batch, out);
    if (!strcmp(method->u.string, "ping")) {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        yajl_gen_map_close(g);
        reply_result(out, id, g);
        return MCP_REPLY;
    }
    if (!strcmp(method->u.string, "tools/list"))
        return do_tools_list(s, id, out);
    if (!strcmp(method->u.string, "tools/call"))
        return do_tools_call(s, id, params, out);
    snprintf(msg, sizeof(msg),
             "unknown method \"%.64s\" (this server has initialize, ping, "
             "tools/list and tools/call)",
             method->u.string);
    reply_error(out, id, MCP_METHOD_NOT_FOUND, msg);
    return MCP_REPLY;
}

/* Batches were part of 2025-03-26 (and plain JSON-RPC before it); 2025-06-18 dropped them. */
static int handle_batch(struct mcp_session *s, yajl_val batch, struct nb_buf *out)
{
    struct nb_buf one;
    size_t start = out->len, replies = 0;
    char msg[160];

    if (version_at_least(s, "2025-06-18")) {
        snprintf(msg, sizeof(msg),
                 "JSON-RPC batches are not part of MCP %s: send one message "
                 "at a time",
                 s->version);
        reply_error(out, NULL, MCP_INVALID_REQUEST, msg);
        return MCP_REPLY;
    }
    if (batch->u.array.len == 0) {
        reply_error(out, NULL, MCP_INVALID_REQUEST, "empty batch");
        return MCP_REPLY;
    }
    nb_buf_init(&one, out->cap);
    for (size_t i = 0; i < batch->u.array.len; i++) {
        nb_buf_reset(&one);
        if (handle_one(s, batch->u.array.values[i], 1, &one) != MCP_REPLY)
            continue;
        if (nb_buf_append(out, replies == 0 ? "[" : ",", 1) != NB_OK ||
            nb_buf_append(out, one.data, one.len) != NB_OK) {
            out->len = start;
            if (out->data != NULL)
                out->data[start] = '\0';
            nb_buf_free(&one);
            reply_error(out, NULL, MCP_INTERNAL_ERROR,
                        "the batch's replies are larger than "
                        "this transport's cap");
            return MCP_REPLY;
        }
        replies++;
    }
    nb_buf_free(&one);
    if (replies == 0)
        return MCP_NO_REPLY;
    nb_buf_append(out, "]", 1);
    return MCP_REPLY;
}

int mcp_handle(struct mcp_session *s, const char *msg, size_t len, struct nb_buf *out)
{
    yajl_val root = NULL;
    char err[256];
    int rc;

    s->last = MCP_MSG_OTHER;
    if (nb_json_parse(msg, len, MCP_MAX_DEPTH, &root, err, sizeof(err)) != 0) {
        s->last = MCP_MSG_NOT_JSON;
        reply_error(out, NULL, MCP_PARSE_ERROR, err);
        return MCP_REPLY;
    }
    if (root == NULL) {
        s->last = MCP_MSG_EMPTY;
        return MCP_NO_REPLY; /* a blank line */
    }
    if (nb_json_no_dup_keys(root, err, sizeof(err)) != 0) {
        /* as the REST side refuses it: yajl would keep one of the two silently */
        yajl_val id = YAJL_IS_OBJECT(root) ? mcp_member(root, "id") : NULL;
        char why[320];
        snprintf(why, sizeof(why), "invalid request: %s", err);
        reply_error(out,
                    id != NULL && (YAJL_IS_STRING(id) || YAJL_IS_INTEGER(id)) &&
                            !strstr(err, "\"id\"")
                        ? id
                        : NULL,
                    MCP_INVALID_REQUEST, why);
        yajl_tree_free(root);
        return MCP_REPLY;
    }
    rc = YAJL_IS_ARRAY(root) ? handle_batch(s, root, out) : handle_one(s, root, 0, out);
    yajl_tree_free(root);
    return rc;
}
