/*
 * cmd_template.c - "template build|ls|rm|logs": templates, the images
 * sandboxes start from (docs/API.md, Templates). "build" sends a local
 * Dockerfile and the files its COPY lines need; the build runs on the
 * server, and "logs -f" (or "build -f") follows it to its end.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base64.h"
#include "cli.h"
#include "client.h"
#include "conf.h"
#include "json.h"
#include "output.h"
#include "url.h"

#define TEMPLATE_FILE_MAX (1024u * 1024u * 1024u) /* the server's cap applies first */
#define TEMPLATE_FOLLOW_TIMEOUT 0L                /* a build may take long: no limit */

/* The whole of a local file into b; CLI_OK, else CLI_FAIL after saying why. */
static int read_file(const char *path, struct nb_buf *b)
{
    FILE *f = fopen(path, "rb");
    char chunk[65536];
    size_t n;
    if (f == NULL) {
        fprintf(stderr, "nanobox: cannot read %s: %m\n", path);
        return CLI_FAIL;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (nb_buf_append(b, chunk, n) != NB_OK) {
            fprintf(stderr, "nanobox: %s is too large\n", path);
            fclose(f);
            return CLI_FAIL;
        }
    }
    fclose(f);
    return CLI_OK;
}

/* The end of a followed log: 0 ready, 1 failed, -1 not seen yet. */
struct follow {
    int outcome;
};

static int log_event(void *ctx, yajl_val ev, const char *line, size_t len)
{
    struct follow *fl = ctx;
    const char *s;
    (void)line;
    (void)len;
    if ((s = out_str(ev, "stream"))[0]) {
        fputs(s, stdout);
        fflush(stdout);
    } else if ((s = out_str(ev, "error"))[0] && !out_str(ev, "status")[0]) {
        fprintf(stderr, "%s\n", s);
    } else if ((s = out_str(ev, "status"))[0]) {
        fl->outcome = strcmp(s, "ready") != 0;
        if (fl->outcome)
            fprintf(stderr, "nanobox: the build failed: %s\n", out_str(ev, "error"));
    }
    return 0;
}

static int follow_log(struct client *c, const char *name, int follow)
{
    struct nb_buf path;
    struct follow fl = {-1};
    struct client_req req = {.method = "GET", .timeout = TEMPLATE_FOLLOW_TIMEOUT};
    struct client_answer a = {0};
    int rc;
    nb_buf_init(&path, 4096);
    nb_buf_printf(&path, "/templates/");
    nb_url_escape(&path, name);
    nb_buf_printf(&path, "/logs%s", follow ? "?follow=1" : "");
    req.path = path.data;
    req.on_event = log_event;
    req.ctx = &fl;
    rc = client_call(c, &req, &a);
    client_answer_free(&a);
    nb_buf_free(&path);
    if (rc != CLI_OK)
        return rc;
    return fl.outcome == 1 ? CLI_FAIL : CLI_OK;
}

static int template_build(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *dockerfile = NULL, *memory_s = NULL, *cpus_s = NULL;
    struct args_list files = {0};
    int follow = 0;
    const struct args_opt opts[] = {
        {"-f", ARG_VALUE, &dockerfile},     {"--file", ARG_LIST, &files},
        {"--memory", ARG_VALUE, &memory_s}, {"--cpus", ARG_VALUE, &cpus_s},
        {"--follow", ARG_FLAG, &follow},
    };
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .path = "/templates", .timeout = 300};
    struct client_answer a = {0};
    struct nb_buf df, data, enc;
    double cpus = 0;
    uint64_t memory = 0;
    char *body = NULL;
    yajl_gen g = NULL;
    int rc;

    nb_buf_init(&df, TEMPLATE_FILE_MAX);
    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n != 1 || dockerfile == NULL) {
        cli_usage_error(cmd, "template build needs a NAME and -f DOCKERFILE");
        goto out;
    }
    if ((cpus_s != NULL && args_double(cmd, "--cpus", cpus_s, 0.001, 4096, &cpus) != 0))
        goto out;
    if (memory_s != NULL && (nb_parse_size(memory_s, &memory) != 0 || memory == 0)) {
        cli_usage_error(cmd, "--memory must be a size like 512m, not \"%s\"", memory_s);
        goto out;
    }
    for (size_t i = 0; i < files.n; i++)
        if (args_kv(cmd, "--file", files.v[i]) != 0)
            goto out;
    if ((rc = read_file(dockerfile, &df)) != CLI_OK)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "name", pos.v[0]);
    nb_json_cstr(g, "dockerfile");
    nb_json_str(g, df.data ? df.data : "", df.len);
    if (memory_s != NULL)
        nb_json_kv_int(g, "memory", (long long)memory);
    if (cpus_s != NULL)
        nb_json_kv_double(g, "cpus", cpus);
    if (files.n > 0) {
        nb_json_cstr(g, "files");
        yajl_gen_map_open(g);
        for (size_t i = 0; i < files.n; i++) {
            const char *eq = strchr(files.v[i], '=');
            nb_buf_init(&data, TEMPLATE_FILE_MAX);
            nb_buf_init(&enc, TEMPLATE_FILE_MAX / 3 * 4 + 4);
            if ((rc = read_file(eq + 1, &data)) != CLI_OK) {
                nb_buf_free(&data);
                goto out;
            }
            nb_base64_encode(&enc, data.data ? data.data : "", data.len);
            nb_json_str(g, files.v[i], (size_t)(eq - files.v[i]));
            nb_json_str(g, enc.data ? enc.data : "", enc.len);
            nb_buf_free(&data);
            nb_buf_free(&enc);
        }
        yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    g = NULL;
    if ((rc = client_call(c, &req, &a)) != CLI_OK)
        goto out;
    if (c->json && !follow)
        client_print_raw(&a);
    else if (!follow)
        printf("%s %s\n", out_str(a.json, "name"), out_str(a.json, "status"));
    else
        rc = follow_log(c, pos.v[0], 1);
out:
    if (g)
        yajl_gen_free(g);
    client_answer_free(&a);
    nb_buf_free(&df);
    free(body);
    free(pos.v);
    args_list_free(&files);
    return rc;
}

static int template_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .path = "/templates", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n > 0) {
        rc = cli_usage_error(cmd, "unexpected argument \"%s\"", pos.v[0]);
        goto out;
    }
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        static const char *const headers[] = {"NAME", "STATUS", "KIND", "SIZE", "IMAGE"};
        yajl_val list = out_get(a.json, "templates", yajl_t_array);
        struct out_table t;
        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_table_init(&t, 5, headers);
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
            yajl_val x = list->u.array.values[i];
            char size[32];
            const char *row[5];
            if (out_int(x, "size", 0) > 0)
                out_size(size, sizeof(size), out_int(x, "size", 0));
            else
                snprintf(size, sizeof(size), "-");
            row[0] = out_str(x, "name");
            row[1] = out_str(x, "status");
            row[2] = out_str(x, "kind");
            row[3] = size;
            row[4] = out_str(x, "image");
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

static int template_rm(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    int force = 0;
    const struct args_opt opts[] = {{"--force", ARG_FLAG, &force}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    int rc, failed = 0;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 1, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n == 0) {
        rc = cli_usage_error(cmd, "template rm needs a NAME");
        goto out;
    }
    for (int i = 0; i < pos.n; i++) {
        struct client_req req = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
        struct client_answer a = {0};
        struct nb_buf path;
        nb_buf_init(&path, 4096);
        nb_buf_printf(&path, "/templates/");
        nb_url_escape(&path, pos.v[i]);
        if (force)
            nb_buf_printf(&path, "?force=1");
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

static int template_logs(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    int follow = 0;
    const struct args_opt opts[] = {{"-f", ARG_FLAG, &follow}, {"--follow", ARG_FLAG, &follow}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(cmd, "template logs needs one NAME");
        goto out;
    }
    rc = follow_log(c, pos.v[0], follow);
out:
    free(pos.v);
    return rc;
}

int cmd_template(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd, "build, ls, rm or logs?");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return cli_help(cmd);
    if (!strcmp(argv[1], "build"))
        return template_build(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "ls"))
        return template_ls(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm"))
        return template_rm(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "logs"))
        return template_logs(c, cmd, argc - 1, argv + 1);
    return cli_usage_error(cmd, "unknown template command \"%s\": build, ls, rm or logs", argv[1]);
}

/* "snapshot ID [--name N]": POST /sandbox/{id}/snapshot; prints the new template's name. */
int cmd_snapshot(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *name = NULL;
    const struct args_opt opts[] = {{"--name", ARG_VALUE, &name}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    /* a snapshot builds an image: as long as a build may take */
    struct client_req req = {.method = "POST", .timeout = 0};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[37], *body = NULL;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 1, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(
            cmd, pos.n == 0 ? "which sandbox? give its ID" : "one ID at a time (got %d arguments)",
            pos.n);
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    sandbox_path(&path, id, "/snapshot");
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (name != NULL)
        nb_json_kv_str(g, "name", name);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        char size[32];
        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_size(size, sizeof(size), out_int(a.json, "size", 0));
        printf("%s\t(snapshot of %s, %s)\n", out_str(a.json, "name"), id, size);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    return rc;
}

/* "fork ID [--count N] [--ttl S]": POST /sandbox/{id}/fork; prints each new sandbox's id. */
int cmd_fork(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *count_s = NULL, *ttl_s = NULL;
    const struct args_opt opts[] = {{"--count", ARG_VALUE, &count_s}, {"--ttl", ARG_VALUE, &ttl_s}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    /* N creates and a copy of the files each: as long as a build may take */
    struct client_req req = {.method = "POST", .timeout = 0};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[37], *body = NULL;
    long count = 0, ttl = 0;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(
            cmd, pos.n == 0 ? "which sandbox? give its ID" : "one ID at a time (got %d arguments)",
            pos.n);
        goto out;
    }
    if ((count_s != NULL && args_long(cmd, "--count", count_s, 1, 1L << 20, &count) != 0) ||
        (ttl_s != NULL && args_long(cmd, "--ttl", ttl_s, 1, 1L << 30, &ttl) != 0)) {
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    sandbox_path(&path, id, "/fork");
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (count_s != NULL)
        nb_json_kv_int(g, "count", count);
    if (ttl_s != NULL)
        nb_json_kv_int(g, "ttl", ttl);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        yajl_val list = out_get(a.json, "sandboxes", yajl_t_array);
        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++)
            printf("%s\n", out_str(list->u.array.values[i], "sandboxId"));
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    return rc;
}
