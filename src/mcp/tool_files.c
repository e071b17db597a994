/*
 * tool_files.c - the MCP file tools: sandbox_write_file, sandbox_read_file,
 * sandbox_list_files, sandbox_delete_file, sandbox_make_dir and
 * sandbox_move_file.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "base64.h"
#include "buf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"
#include "url.h"

/* Whether len bytes at p are UTF-8 text a model can read as is. */
static int is_text(const char *p, size_t len)
{
    size_t fixed_len;
    char *fixed;
    int ok;

    if (memchr(p, '\0', len) != NULL)
        return 0;
    fixed = nb_utf8_repair(p, len, &fixed_len);
    ok = fixed_len == len; /* each bad byte grows to U+FFFD's 3 */
    free(fixed);
    return ok;
}

/* ".../files?path=P" (the API takes a relative P from the workspace). */
static void files_path(struct nb_buf *p, struct tool_call *t, const char *path)
{
    mcp_sandbox_path(p, t, "/files?path=");
    nb_url_escape_path(p, path);
}

void mcp_tool_sandbox_write_file(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path, data;
    const char *content = mcp_arg_str(t, "content"), *file = mcp_arg_str(t, "path");

    nb_buf_init(&data, MCP_MAX_MESSAGE);
    files_path(&path, t, file);
    if (!strcmp(mcp_arg_str(t, "encoding"), "base64")) {
        if (nb_base64_decode(&data, content, strlen(content)) != NB_OK) {
            mcp_fail(t, "error: content is not valid base64");
            goto out;
        }
    } else {
        nb_buf_append(&data, content, strlen(content));
    }
    mcp_watch_start(t, (double)data.len, NULL, "sent");
    if (mcp_api_call(t, "PUT", path.data, data.len > 0 ? data.data : "", data.len,
                     "application/octet-stream", &a) == 0) {
        nb_buf_printf(&t->text, "Wrote ");
        mcp_put_size(&t->text, data.len);
        nb_buf_printf(&t->text, " to %s.",
                      YAJL_IS_STRING(mcp_member(a.json, "path")) ? mcp_member_str(a.json, "path")
                                                                 : file);
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
out:
    nb_buf_free(&data);
    nb_buf_free(&path);
}

/* A files answer that lists a directory: {"path":..., "entries":[...]}. */
static int is_listing(yajl_val j)
{
    yajl_val e = mcp_member(j, "entries");
    return e != NULL && YAJL_IS_ARRAY(e) && YAJL_IS_STRING(mcp_member(j, "path"));
}

static void put_listing(struct nb_buf *b, yajl_val j)
{
    yajl_val entries = mcp_member(j, "entries");
    size_t n = entries->u.array.len;

    nb_buf_printf(b, "%s: %zu entr%s\n", mcp_member_str(j, "path"), n, n == 1 ? "y" : "ies");
    if (n > 0)
        nb_buf_printf(b, "%-7s %10s  %-4s  %-23s  %s\n", "type", "size", "mode", "modified",
                      "name");
    for (size_t i = 0; i < n; i++) {
        yajl_val e = entries->u.array.values[i], mode = mcp_member(e, "mode");
        const char *type = mcp_member_str(e, "type");
        struct nb_buf size;

        nb_buf_init(&size, 64);
        mcp_put_size_val(&size, mcp_member(e, "size"));
        nb_buf_printf(b, "%-7s %10s  ", type, size.data != NULL ? size.data : "-");
        nb_buf_free(&size);
        if (mode != NULL && YAJL_IS_INTEGER(mode))
            nb_buf_printf(b, "%04llo", (unsigned long long)YAJL_GET_INTEGER(mode) & 07777u);
        else
            mcp_put_value(b, mode);
        nb_buf_printf(b, "  ");
        mcp_put_time(b, mcp_member(e, "mtime"));
        nb_buf_printf(b, "  %s%s\n", mcp_member_str(e, "name"), !strcmp(type, "dir") ? "/" : "");
    }
    if (YAJL_IS_TRUE(mcp_member(j, "truncated")))
        nb_buf_printf(b, "(the listing was cut short: the directory has more entries)\n");
}

void mcp_tool_sandbox_read_file(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    const char *file = mcp_arg_str(t, "path");

    files_path(&path, t, file);
    mcp_watch_start(t, 0, NULL, "received");
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        int binary = a.body.len > 0 && !is_text(a.body.data, a.body.len);

        yajl_gen_map_open(g);
        nb_json_kv_str(g, "path", file);
        nb_json_kv_str(g, "type", is_listing(a.json) ? "dir" : "file");
        if (!is_listing(a.json)) {
            nb_json_kv_int(g, "size", (long long)a.body.len);
            nb_json_kv_bool(g, "binary", binary);
        }
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
        if (is_listing(a.json)) {
            nb_buf_printf(&t->text, "%s is a directory, not a file. ", file);
            put_listing(&t->text, a.json);
        } else if (a.body.len == 0) {
            nb_buf_printf(&t->text, "(%s is empty: 0 bytes)", file);
        } else if (!binary) {
            nb_buf_append(&t->text, a.body.data, a.body.len);
        } else {
            nb_buf_printf(&t->text, "%s is binary (", file);
            mcp_put_size(&t->text, a.body.len);
            nb_buf_printf(&t->text, ", not UTF-8 text); its content in base64:\n");
            nb_base64_encode(&t->text, a.body.data, a.body.len);
        }
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

void mcp_tool_sandbox_list_files(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    const char *dir = mcp_arg_val(t, "path") != NULL ? mcp_arg_str(t, "path") : mcp_workspace(t->s);

    files_path(&path, t, dir);
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        if (is_listing(a.json)) {
            put_listing(&t->text, a.json);
            mcp_keep_structured(t, &a, NULL);
        } else {
            mcp_fail(t, "error: %s is a file, not a directory: sandbox_read_file reads it", dir);
        }
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

void mcp_tool_sandbox_delete_file(struct tool_call *t)
{
    const char *file = mcp_arg_str(t, "path");
    struct mcp_answer a;
    struct nb_buf path;

    files_path(&path, t, file);
    if (YAJL_IS_TRUE(mcp_arg_val(t, "recursive")))
        nb_buf_printf(&path, "&recursive=1");
    if (mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Deleted %s.", file);
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "path", file);
        nb_json_kv_bool(g, "deleted", 1);
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

/* POST .../files/OP with the tool's arguments but sandbox_id. */
static int files_op(struct tool_call *t, const char *op, struct mcp_answer *a)
{
    struct nb_buf path;
    char *body = mcp_body_from_args(t, "sandbox_id");
    int rc;

    mcp_sandbox_path(&path, t, op);
    rc = mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", a);
    nb_buf_free(&path);
    free(body);
    return rc;
}

void mcp_tool_sandbox_make_dir(struct tool_call *t)
{
    struct mcp_answer a;

    if (files_op(t, "/files/mkdir", &a) == 0) {
        nb_buf_printf(&t->text, "Directory %s is there.",
                      YAJL_IS_STRING(mcp_member(a.json, "path")) ? mcp_member_str(a.json, "path")
                                                                 : mcp_arg_str(t, "path"));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
}

void mcp_tool_sandbox_move_file(struct tool_call *t)
{
    struct mcp_answer a;

    if (files_op(t, "/files/move", &a) == 0) {
        nb_buf_printf(&t->text, "Moved %s to %s.", mcp_arg_str(t, "from"),
                      YAJL_IS_STRING(mcp_member(a.json, "path")) ? mcp_member_str(a.json, "path")
                                                                 : mcp_arg_str(t, "to"));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
}
