/*
 * tool_ports.c - the MCP port tools: sandbox_open_port, sandbox_list_ports
 * and sandbox_close_port.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "json.h"
#include "mcp_tool.h"

void mcp_tool_sandbox_open_port(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_val duration = mcp_arg_val(t, "duration");
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    nb_json_kv_int(g, "sandboxport", nb_json_int(mcp_arg_val(t, "port")));
    nb_json_kv_int(g, "duration",
                   duration != NULL ? nb_json_int(duration) : mcp_port_duration(t->s));
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    mcp_sandbox_path(&path, t, "/ephemeralport");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "url: %s\n", mcp_member_str(a.json, "url"));
        nb_buf_printf(&t->text, "tcp: %s:", mcp_member_str(a.json, "host"));
        mcp_put_value(&t->text, mcp_member(a.json, "hostport"));
        nb_buf_printf(&t->text, "\nsandboxport: ");
        mcp_put_value(&t->text, mcp_member(a.json, "sandboxport"));
        nb_buf_printf(&t->text, "\nexpires_at: ");
        mcp_put_time(&t->text, mcp_member(a.json, "expires_at"));
        nb_buf_printf(&t->text, "\nConnections are forwarded to 127.0.0.1:");
        mcp_put_value(&t->text, mcp_member(a.json, "sandboxport"));
        nb_buf_printf(&t->text, " inside the sandbox.");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_sandbox_list_ports(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_val list;

    mcp_sandbox_path(&path, t, "/ports");
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = mcp_member(a.json, "ports");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0)
            nb_buf_printf(&t->text, "No open ports.");
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++) {
            yajl_val p = list->u.array.values[i];
            nb_buf_printf(&t->text, "port ");
            mcp_put_value(&t->text, mcp_member(p, "sandboxport"));
            nb_buf_printf(&t->text, "  url: %s  tcp: %s:", mcp_member_str(p, "url"),
                          mcp_member_str(p, "host"));
            mcp_put_value(&t->text, mcp_member(p, "hostport"));
            nb_buf_printf(&t->text, "  closes at ");
            mcp_put_time(&t->text, mcp_member(p, "expires_at"));
            nb_buf_printf(&t->text, "\n");
        }
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

void mcp_tool_sandbox_close_port(struct tool_call *t)
{
    long long port = nb_json_int(mcp_arg_val(t, "port"));
    struct mcp_answer a;
    struct nb_buf path;
    char suffix[32];

    snprintf(suffix, sizeof(suffix), "/ports/%lld", port);
    mcp_sandbox_path(&path, t, suffix);
    if (mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Closed port %lld.", port);
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "sandboxport", port);
        nb_json_kv_bool(g, "closed", 1);
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}
