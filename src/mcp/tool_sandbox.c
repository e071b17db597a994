/*
 * tool_sandbox.c - the MCP tools of a sandbox's life: sandbox_create,
 * sandbox_list, sandbox_destroy, sandbox_pause, sandbox_resume,
 * sandbox_snapshot, sandbox_fork and sandbox_set_timeout.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "mcp_tool.h"
#include "url.h"

void mcp_tool_sandbox_create(struct tool_call *t)
{
    static const char *const keys[] = {"image", "status", "network", NULL};
    static const char *const keys2[] = {"cpus", "pids", "ttl", NULL};
    struct mcp_answer a;
    char *body = mcp_body_from_args(t, NULL);

    if (mcp_api_call(t, "POST", "/sandbox", body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Created sandbox %s.\n", mcp_member_str(a.json, "sandboxId"));
        nb_buf_printf(&t->text, "sandbox_id: %s\n", mcp_member_str(a.json, "sandboxId"));
        mcp_put_fields(&t->text, a.json, keys);
        nb_buf_printf(&t->text, "memory: ");
        mcp_put_size_val(&t->text, mcp_member(a.json, "memory"));
        nb_buf_printf(&t->text, "\n");
        mcp_put_fields(&t->text, a.json, keys2);
        nb_buf_printf(&t->text, "expires_at: ");
        mcp_put_time(&t->text, mcp_member(a.json, "expires_at"));
        nb_buf_printf(&t->text, "\nmetadata: ");
        mcp_put_value(&t->text, mcp_member(a.json, "metadata"));
        nb_buf_printf(&t->text, "\nCommands run in %s, which keeps its files between calls.",
                      mcp_workspace(t->s));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    free(body);
}

void mcp_tool_sandbox_list(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_val meta = mcp_arg_val(t, "metadata"), list;

    nb_buf_init(&path, 65536);
    nb_buf_printf(&path, "/sandbox");
    for (size_t i = 0; meta != NULL && i < meta->u.object.len; i++) {
        if (!YAJL_IS_STRING(meta->u.object.values[i])) {
            mcp_fail(t, "error: metadata values must be strings (\"%.64s\" is not)",
                     meta->u.object.keys[i]);
            goto out;
        }
        nb_buf_printf(&path, "%smetadata.", i == 0 ? "?" : "&");
        nb_url_escape_path(&path, meta->u.object.keys[i]);
        nb_buf_printf(&path, "=");
        nb_url_escape_path(&path, meta->u.object.values[i]->u.string);
    }
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = mcp_member(a.json, "sandboxes");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0) {
            nb_buf_printf(&t->text, "No live sandboxes%s.", meta != NULL ? " match" : "");
        } else {
            nb_buf_printf(&t->text, "%zu live sandbox%s:\n", list->u.array.len,
                          list->u.array.len == 1 ? "" : "es");
            for (size_t i = 0; i < list->u.array.len; i++) {
                yajl_val sb = list->u.array.values[i];
                nb_buf_printf(&t->text,
                              "%s  image=%s  ttl_remaining=", mcp_member_str(sb, "sandboxId"),
                              mcp_member_str(sb, "image"));
                mcp_put_value(&t->text, mcp_member(sb, "ttl_remaining"));
                nb_buf_printf(&t->text, "s  network=%s  metadata=", mcp_member_str(sb, "network"));
                mcp_put_value(&t->text, mcp_member(sb, "metadata"));
                if (mcp_member(sb, "node") != NULL) /* a cluster's: where it runs */
                    nb_buf_printf(&t->text, "  node=%s%s", mcp_member_str(sb, "node"),
                                  YAJL_IS_FALSE(mcp_member(sb, "node_up")) ? " (down)" : "");
                nb_buf_printf(&t->text, "\n");
            }
        }
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
out:
    nb_buf_free(&path);
}

void mcp_tool_sandbox_destroy(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;

    mcp_sandbox_path(&path, t, "");
    if (mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Destroyed sandbox %s.", mcp_arg_str(t, "sandbox_id"));
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "sandboxId", mcp_arg_str(t, "sandbox_id"));
        nb_json_kv_bool(g, "destroyed", 1);
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

/* POST /sandbox/{id}/pause or /resume: the sandbox's state and TTL left. */
static void pause_or_resume(struct tool_call *t, const char *op)
{
    struct mcp_answer a;
    struct nb_buf path;

    /* pause's keep_memory false: its files saved, its memory released */
    const char *body =
        mcp_arg_val(t, "keep_memory") != NULL && YAJL_IS_FALSE(mcp_arg_val(t, "keep_memory"))
            ? "{\"keep_memory\":false}"
            : NULL;

    mcp_sandbox_path(&path, t, op);
    if (mcp_api_call(t, "POST", path.data, body, body ? strlen(body) : 0,
                     body ? "application/json" : NULL, &a) == 0) {
        nb_buf_printf(&t->text, "Sandbox %s is %s; ttl_remaining: ", mcp_arg_str(t, "sandbox_id"),
                      mcp_member_str(a.json, "state"));
        mcp_put_value(&t->text, mcp_member(a.json, "ttl_remaining"));
        nb_buf_printf(&t->text, "s");
        if (mcp_member(a.json, "pause_expires_at") != NULL) {
            nb_buf_printf(&t->text, "; destroyed if still paused at ");
            mcp_put_time(&t->text, mcp_member(a.json, "pause_expires_at"));
        }
        nb_buf_printf(&t->text, ".");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

void mcp_tool_sandbox_pause(struct tool_call *t)
{
    pause_or_resume(t, "/pause");
}

void mcp_tool_sandbox_resume(struct tool_call *t)
{
    pause_or_resume(t, "/resume");
}

/* POST /sandbox/{id}/snapshot: the new template. */
void mcp_tool_sandbox_snapshot(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    if (mcp_arg_val(t, "name") != NULL)
        nb_json_kv_str(g, "name", mcp_arg_str(t, "name"));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    mcp_sandbox_path(&path, t, "/snapshot");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text,
                      "Saved sandbox %s as template \"%s\": sandbox_create with template "
                      "\"%s\" starts from it.",
                      mcp_arg_str(t, "sandbox_id"), mcp_member_str(a.json, "name"),
                      mcp_member_str(a.json, "name"));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

/* POST /sandbox/{id}/fork: the new sandboxes. */
void mcp_tool_sandbox_fork(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    char *body = mcp_body_from_args(t, "sandbox_id");
    yajl_val list;

    mcp_sandbox_path(&path, t, "/fork");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        list = mcp_member(a.json, "sandboxes");
        nb_buf_printf(&t->text, "Forked sandbox %s into", mcp_arg_str(t, "sandbox_id"));
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++)
            nb_buf_printf(&t->text, "%s %s", i ? "," : "",
                          mcp_member_str(list->u.array.values[i], "sandboxId"));
        nb_buf_printf(&t->text, ": each has its files, env and metadata; its processes were "
                                "not copied (start them again).");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_sandbox_set_timeout(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    char *body = mcp_body_from_args(t, "sandbox_id");

    mcp_sandbox_path(&path, t, "/timeout");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Sandbox %s is now destroyed at ", mcp_arg_str(t, "sandbox_id"));
        mcp_put_time(&t->text, mcp_member(a.json, "expires_at"));
        nb_buf_printf(&t->text, ", ");
        mcp_put_seconds(&t->text, (unsigned long long)nb_json_int(mcp_arg_val(t, "ttl")));
        nb_buf_printf(&t->text, " from now.");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}
