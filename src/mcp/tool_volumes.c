/*
 * tool_volumes.c - the MCP tools of persistent volumes: volume_create,
 * volume_list and volume_delete (docs/API.md, Volumes). sandbox_create
 * mounts them (its "volumes" argument).
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

void mcp_tool_volume_create(struct tool_call *t)
{
    struct mcp_answer a;
    char *body = mcp_body_from_args(t, NULL);

    if (mcp_api_call(t, "POST", "/volumes", body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Created volume \"%s\" (", mcp_member_str(a.json, "name"));
        mcp_put_size_val(&t->text, mcp_member(a.json, "size"));
        nb_buf_printf(&t->text,
                      "). Mount it with sandbox_create's volumes: [{\"name\": \"%s\", "
                      "\"path\": \"/data\"}]; its files outlive the sandboxes.",
                      mcp_member_str(a.json, "name"));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    free(body);
}

void mcp_tool_volume_list(struct tool_call *t)
{
    struct mcp_answer a;
    yajl_val list;

    if (mcp_api_call(t, "GET", "/volumes", NULL, 0, NULL, &a) == 0) {
        list = mcp_member(a.json, "volumes");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0) {
            nb_buf_printf(&t->text, "No volumes.");
        } else {
            for (size_t i = 0; i < list->u.array.len; i++) {
                yajl_val v = list->u.array.values[i];
                nb_buf_printf(&t->text, "%s  id=%s  size=", mcp_member_str(v, "name"),
                              mcp_member_str(v, "volumeID"));
                mcp_put_size_val(&t->text, mcp_member(v, "size"));
                if (mcp_member(v, "node") != NULL) /* a cluster's: the node that holds it */
                    nb_buf_printf(&t->text, "  node=%s%s", mcp_member_str(v, "node"),
                                  YAJL_IS_FALSE(mcp_member(v, "node_up")) ? " (down)" : "");
                nb_buf_printf(&t->text, "\n");
            }
        }
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
}

void mcp_tool_volume_delete(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;

    nb_buf_init(&path, 4096);
    nb_buf_printf(&path, "/volumes/");
    nb_url_escape(&path, mcp_arg_str(t, "name"));
    if (mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Deleted volume \"%s\" and its files.", mcp_arg_str(t, "name"));
        yajl_gen_map_open(g);
        nb_json_kv_str(g, "name", mcp_arg_str(t, "name"));
        nb_json_kv_bool(g, "deleted", 1);
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}
