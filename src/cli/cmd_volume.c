/*
 * cmd_volume.c - "volume create|ls|rm": the key's persistent volumes
 * (docs/API.md, Volumes), mounted into a sandbox with "create --volume
 * NAME:/PATH".
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "conf.h"
#include "json.h"
#include "output.h"
#include "url.h"

static int volume_create(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *size_s = NULL;
    const struct args_opt opts[] = {{"--size", ARG_VALUE, &size_s}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .path = "/volumes", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    uint64_t size = 0;
    char *body = NULL;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 1, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(cmd, "volume create needs one NAME");
        goto out;
    }
    if (size_s != NULL && (nb_parse_size(size_s, &size) != 0 || size == 0)) {
        rc = cli_usage_error(cmd, "--size must be a size like 512m, 1g or bytes, not \"%s\"",
                             size_s);
        goto out;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", pos.v[0]);
    if (size_s != NULL)
        nb_json_kv_int(g, "size", (long long)size);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        if (c->json)
            client_print_raw(&a);
        else
            printf("%s\n", out_str(a.json, "name"));
    }
out:
    client_answer_free(&a);
    free(body);
    free(pos.v);
    return rc;
}

static int volume_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .path = "/volumes", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n > 0) {
        rc = cli_usage_error(cmd, "unexpected argument \"%s\"", pos.v[0]);
        goto out;
    }
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        static const char *const headers[] = {"NAME", "ID", "SIZE", "NODE"};
        yajl_val list = out_get(a.json, "volumes", yajl_t_array);
        struct out_table t;
        int cluster = 0; /* a cluster's volumes say their node: one column more */
        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++)
            cluster |= out_get(list->u.array.values[i], "node", yajl_t_string) != NULL;
        out_table_init(&t, cluster ? 4 : 3, headers);
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
            yajl_val x = list->u.array.values[i];
            char size[32], node[64];
            const char *row[4];
            out_size(size, sizeof(size), out_int(x, "size", 0));
            snprintf(node, sizeof(node), "%s%s", out_str(x, "node"),
                     out_get(x, "node_up", yajl_t_false) != NULL ? " (down)" : "");
            row[0] = out_str(x, "name");
            row[1] = out_str(x, "volumeID");
            row[2] = size;
            row[3] = node;
            out_table_row(&t, row);
        }
        out_table_print(&t, stdout);
        out_table_free(&t);
    }
out:
    client_answer_free(&a);
    free(pos.v);
    return rc;
}

static int volume_rm(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    int rc, failed = 0;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n == 0) {
        rc = cli_usage_error(cmd, "volume rm needs a NAME");
        goto out;
    }
    for (int i = 0; i < pos.n; i++) {
        struct client_req req = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
        struct client_answer a = {0};
        struct nb_buf path;
        nb_buf_init(&path, 4096);
        nb_buf_printf(&path, "/volumes/");
        nb_url_escape(&path, pos.v[i]);
        req.path = path.data;
        if (client_call(c, &req, &a) == CLI_OK)
            printf("%s\n", pos.v[i]);
        else
            failed = 1;
        client_answer_free(&a);
        nb_buf_free(&path);
    }
    rc = failed ? CLI_FAIL : CLI_OK;
out:
    free(pos.v);
    return rc;
}

int cmd_volume(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd, "create, ls or rm?");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return cli_help(cmd);
    if (!strcmp(argv[1], "create"))
        return volume_create(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "ls"))
        return volume_ls(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm"))
        return volume_rm(c, cmd, argc - 1, argv + 1);
    return cli_usage_error(cmd, "unknown volume command \"%s\": create, ls or rm", argv[1]);
}
