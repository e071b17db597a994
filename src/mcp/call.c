/*
 * call.c - one MCP tool call: its arguments, its result (the text of
 * content[0], the images and text items after it, structuredContent), and
 * its API calls through the backend, an API error becoming an isError
 * result with the API's message.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"
#include "url.h"

/* The argument name as the call gave it, or NULL. */
yajl_val mcp_arg_val(struct tool_call *t, const char *name)
{
    for (size_t i = 0; t->tool->args[i].name != NULL; i++)
        if (!strcmp(t->tool->args[i].name, name))
            return t->f[i].val;
    return NULL;
}

const char *mcp_arg_str(struct tool_call *t, const char *name)
{
    return nb_json_string(mcp_arg_val(t, name));
}

void mcp_items_free(struct tool_call *t)
{
    for (size_t i = 0; i < t->n_items; i++)
        nb_buf_free(&t->items[i].data);
    free(t->items);
    t->items = NULL;
    t->n_items = 0;
}

/* Make t an isError result saying why. */
void mcp_fail(struct tool_call *t, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    nb_buf_reset(&t->text);
    nb_buf_printf(&t->text, "%s", msg);
    mcp_items_free(t);
    t->is_error = 1;
    yajl_tree_free(t->structured);
    t->structured = NULL;
}

static struct content_item *item_push(struct tool_call *t, const char *mime)
{
    struct content_item *it;

    t->items = nb_xrealloc(t->items, (t->n_items + 1) * sizeof(*t->items));
    it = &t->items[t->n_items++];
    it->mime = mime;
    nb_buf_init(&it->data, MCP_MAX_TEXT);
    return it;
}

/* Where the next text goes: content[0] until an image came, then the text item after it. */
struct nb_buf *mcp_text_out(struct tool_call *t)
{
    if (t->n_items == 0)
        return &t->text;
    if (t->items[t->n_items - 1].mime == NULL)
        return &t->items[t->n_items - 1].data;
    return &item_push(t, NULL)->data;
}

/* An image content item: b64 as the API gave it, without the line breaks some kernels add. */
void mcp_add_image(struct tool_call *t, const char *mime, const char *b64)
{
    struct content_item *it = item_push(t, mime);

    while (*b64 != '\0') {
        size_t n = strcspn(b64, "\r\n \t");
        nb_buf_append(&it->data, b64, n);
        b64 += n;
        b64 += strspn(b64, "\r\n \t");
    }
}

void mcp_answer_free(struct mcp_answer *a)
{
    yajl_tree_free(a->json);
    a->json = NULL;
    nb_buf_free(&a->body);
}

/* One API call of t; 0 for a 2xx answer, else -1 with t an isError result
 * (mcp_tool.h). */
int mcp_api_call(struct tool_call *t, const char *method, const char *path, const char *body,
                 size_t body_len, const char *content_type, struct mcp_answer *a)
{
    const struct mcp_backend *be = t->s->backend;
    struct mcp_watch w = {mcp_watch_tick, &t->watch};
    int watched = t->progress_token != NULL && !t->polling && be != NULL && be->notify != NULL;
    char err[256];

    memset(a, 0, sizeof(*a));
    nb_buf_init(&a->body, MCP_MAX_ANSWER);
    if (be == NULL || be->call == NULL) {
        mcp_fail(t, "internal error: this MCP server has no API backend");
        return -1;
    }
    if (be->call(be->ctx, method, path, body, body_len, content_type, &a->status, &a->body,
                 watched ? &w : NULL) != 0) {
        mcp_fail(t, "%s", a->body.len > 0 ? a->body.data : "no answer from the nanobox server");
        return -1;
    }
    if (a->body.len > 0 &&
        nb_json_parse(a->body.data, a->body.len, MCP_MAX_DEPTH, &a->json, err, sizeof(err)) != 0)
        a->json = NULL;
    if (a->status / 100 == 2)
        return 0;

    if (mcp_member(a->json, "error") != NULL) {
        const char *code = mcp_member_str(a->json, "code");
        mcp_fail(t, "error: %s (code %s, HTTP %ld)", mcp_member_str(a->json, "error"),
                 code[0] ? code : "none", a->status);
        if (a->status == 404 && !strcmp(code, "no_route"))
            nb_buf_printf(&t->text,
                          "\nThis nanobox server does not serve %s yet, so %s "
                          "cannot work with it.",
                          method, t->tool->name);
    } else {
        mcp_fail(t,
                 "error: the nanobox server answered HTTP %ld without a nanobox error "
                 "message",
                 a->status);
    }
    return -1;
}

/* "/sandbox/ID" + suffix, the id %-encoded. */
void mcp_sandbox_path(struct nb_buf *p, struct tool_call *t, const char *suffix)
{
    nb_buf_init(p, 8192);
    nb_buf_printf(p, "/sandbox/");
    nb_url_escape_path(p, mcp_arg_str(t, "sandbox_id"));
    nb_buf_printf(p, "%s", suffix);
}

/* A request body holding the tool's given arguments, but the one named skip. */
char *mcp_body_from_args(struct tool_call *t, const char *skip)
{
    yajl_gen g = nb_json_gen();

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || (skip != NULL && !strcmp(skip, t->tool->args[i].name)))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/* Hand the parsed answer over as structuredContent. */
void mcp_keep_structured(struct tool_call *t, struct mcp_answer *a, const char *omit)
{
    if (a->json == NULL || !YAJL_IS_OBJECT(a->json))
        return;
    yajl_tree_free(t->structured);
    t->structured = a->json;
    t->structured_omit = omit;
    a->json = NULL;
}

/* structuredContent built here: the object g generated. */
void mcp_set_structured(struct tool_call *t, yajl_gen g)
{
    char *text = nb_json_gen_take(g), err[128];
    yajl_val v = NULL;

    if (nb_json_parse(text, strlen(text), MCP_MAX_DEPTH, &v, err, sizeof(err)) == 0) {
        yajl_tree_free(t->structured);
        t->structured = v;
        t->structured_omit = NULL;
    }
    free(text);
}

/* exec's and run's answer as text (both have the same fields). */
void mcp_put_exec_result(struct tool_call *t, yajl_val r)
{
    static const char *const flags[] = {"exit_code", "timed_out", "truncated", NULL};
    yajl_val out = mcp_member(r, "stdout"), err = mcp_member(r, "stderr");

    mcp_put_fields(&t->text, r, flags);
    nb_buf_printf(&t->text, "--- stdout ---\n%s", nb_json_string(out));
    if (YAJL_IS_STRING(out) && out->u.string[0] != '\0' &&
        out->u.string[strlen(out->u.string) - 1] != '\n')
        nb_buf_printf(&t->text, "\n");
    nb_buf_printf(&t->text, "--- stderr ---\n%s", nb_json_string(err));
}
