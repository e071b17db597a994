/*
 * cmd_port.c - "port open|ls|close": expose a port of a sandbox on the host
 * for a while (POST /sandbox/{id}/ephemeralport), list the open ones, close
 * one early.
 *
 * An open port is reachable two ways, and "port open" prints both: the URL
 * through nginx, and host:hostport, a plain TCP port for anything that is
 * not HTTP.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "clock.h"
#include "json.h"
#include "output.h"

#define PORT_DEFAULT_DURATION 600L

/* "/sandbox/<id>/<rest>" for the sandbox arg names. */
static int port_path(struct client *c, const struct cli_cmd *cmd, const char *arg, const char *rest,
                     struct nb_buf *path, char id[37])
{
    int rc = sandbox_resolve_id(c, cmd, arg, id);

    if (rc == CLI_OK)
        sandbox_path(path, id, rest);
    return rc;
}

static int port_open(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *duration_s = NULL, *hostport_s = NULL;
    const struct args_opt opts[] = {
        {"--duration", ARG_VALUE, &duration_s},
        {"--hostport", ARG_VALUE, &hostport_s},
    };
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    long port, duration = PORT_DEFAULT_DURATION, hostport = 0;
    char id[37], *body = NULL;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n != 2) {
        cli_usage_error(cmd, "port open needs an ID and a SANDBOXPORT");
        goto out;
    }
    if (args_long(cmd, "SANDBOXPORT", pos.v[1], 1, 65535, &port) != 0 ||
        (duration_s != NULL &&
         args_long(cmd, "--duration", duration_s, 1, 1L << 30, &duration) != 0) ||
        (hostport_s != NULL && args_long(cmd, "--hostport", hostport_s, 1, 65535, &hostport) != 0))
        goto out;
    if ((rc = port_path(c, cmd, pos.v[0], "/ephemeralport", &path, id)) != CLI_OK)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "sandboxport", port);
    nb_json_kv_int(g, "duration", duration);
    if (hostport_s != NULL)
        nb_json_kv_int(g, "hostport", hostport);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        long long at = out_int(a.json, "expires_at", 0);
        char when[64], left[32];

        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_time(when, sizeof(when), at);
        out_duration(left, sizeof(left), at - (long long)nb_clock_real_s());
        printf("url      %s\n", out_str(a.json, "url"));
        printf("host     %s:%lld\n", out_str(a.json, "host"), out_int(a.json, "hostport", 0));
        printf("expires  in %s (%s)\n", left, when);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    return rc;
}

static int port_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[37];
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(cmd, "port ls needs one ID");
        goto out;
    }
    if ((rc = port_path(c, cmd, pos.v[0], "/ports", &path, id)) != CLI_OK)
        goto out;
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        static const char *const headers[] = {"SANDBOXPORT", "HOST", "EXPIRES IN", "URL"};
        yajl_val list = out_get(a.json, "ports", yajl_t_array);
        struct out_table t;

        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_table_init(&t, 4, headers);
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
            yajl_val p = list->u.array.values[i];
            char sport[16], host[320], left[32];
            const char *row[4] = {sport, host, left, out_str(p, "url")};
            snprintf(sport, sizeof(sport), "%lld", out_int(p, "sandboxport", 0));
            snprintf(host, sizeof(host), "%.300s:%lld", out_str(p, "host"),
                     out_int(p, "hostport", 0));
            out_duration(left, sizeof(left),
                         out_int(p, "expires_at", 0) - (long long)nb_clock_real_s());
            out_table_row(&t, row);
        }
        out_table_print(&t, stdout);
        out_table_free(&t);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}

static int port_close(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[37], rest[32];
    long port;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n != 2) {
        cli_usage_error(cmd, "port close needs an ID and a SANDBOXPORT");
        goto out;
    }
    if (args_long(cmd, "SANDBOXPORT", pos.v[1], 1, 65535, &port) != 0)
        goto out;
    snprintf(rest, sizeof(rest), "/ports/%ld", port);
    if ((rc = port_path(c, cmd, pos.v[0], rest, &path, id)) != CLI_OK)
        goto out;
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        /* 204, no body: --json gets what was done */
        if (c->json)
            printf("{\"sandboxId\":\"%s\",\"sandboxport\":%ld,\"closed\":true}\n", id, port);
        else
            printf("closed port %ld of %s\n", port, id);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}

int cmd_port(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd, "open, ls or close?");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return cli_help(cmd);
    if (!strcmp(argv[1], "open"))
        return port_open(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "ls"))
        return port_ls(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "close"))
        return port_close(c, cmd, argc - 1, argv + 1);
    return cli_usage_error(cmd, "unknown port command \"%s\" (open, ls or close)", argv[1]);
}
