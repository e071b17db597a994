/*
 * cmd_sandbox.c - the sandbox lifecycle: create, ls, info, rm, ttl,
 * pause, resume ("ls ID" and "rm ID:PATH" hand over to cmd_files.c; an id
 * prefix becomes a full id in helpers.c).
 *
 * Human output is meant to be read, and "create"'s to be captured
 * (ID=$(nanobox create)); --json prints the server's answer unchanged.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "clock.h"
#include "conf.h"
#include "json.h"
#include "output.h"
#include "url.h"

/* ----------------------------------------------------------------- create */

int cmd_create(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *image = NULL, *ttl_s = NULL, *memory_s = NULL, *cpus_s = NULL, *pids_s = NULL,
               *network = NULL, *template = NULL, *on_timeout = NULL;
    struct args_list env = {0}, meta = {0}, vols = {0};
    int auto_resume = 0;
    const struct args_opt opts[] = {
        {"--image", ARG_VALUE, &image},
        {"--ttl", ARG_VALUE, &ttl_s},
        {"--memory", ARG_VALUE, &memory_s},
        {"--cpus", ARG_VALUE, &cpus_s},
        {"--pids", ARG_VALUE, &pids_s},
        {"--network", ARG_VALUE, &network},
        {"--env", ARG_LIST, &env},
        {"--meta", ARG_LIST, &meta},
        {"--auto-resume", ARG_FLAG, &auto_resume},
        {"--template", ARG_VALUE, &template},
        {"--on-timeout", ARG_VALUE, &on_timeout},
        {"--volume", ARG_LIST, &vols},
    };
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .path = "/sandbox", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    long ttl = 0, pids = 0;
    double cpus = 0;
    uint64_t memory = 0;
    char *body = NULL;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n > 0) {
        cli_usage_error(cmd, "unexpected argument \"%s\"", pos.v[0]);
        goto out;
    }
    if ((ttl_s != NULL && args_long(cmd, "--ttl", ttl_s, 1, 1L << 30, &ttl) != 0) ||
        (pids_s != NULL && args_long(cmd, "--pids", pids_s, 1, 1L << 30, &pids) != 0) ||
        (cpus_s != NULL && args_double(cmd, "--cpus", cpus_s, 0.001, 4096, &cpus) != 0))
        goto out;
    if (memory_s != NULL &&
        (nb_parse_size(memory_s, &memory) != 0 || memory == 0 || memory > (uint64_t)INT64_MAX)) {
        cli_usage_error(cmd,
                        "--memory must be a size like 128m, 1g or a number of bytes, not "
                        "\"%s\"",
                        memory_s);
        goto out;
    }
    if (network != NULL && strcmp(network, "none") != 0 && strcmp(network, "bridge") != 0) {
        cli_usage_error(cmd, "--network must be none or bridge, not \"%s\"", network);
        goto out;
    }
    if (on_timeout != NULL && strcmp(on_timeout, "destroy") != 0 &&
        strcmp(on_timeout, "pause") != 0) {
        cli_usage_error(cmd, "--on-timeout must be destroy or pause, not \"%s\"", on_timeout);
        goto out;
    }
    for (size_t i = 0; i < env.n; i++)
        if (args_kv(cmd, "--env", env.v[i]) != 0)
            goto out;
    for (size_t i = 0; i < meta.n; i++)
        if (args_kv(cmd, "--meta", meta.v[i]) != 0)
            goto out;
    for (size_t i = 0; i < vols.n; i++) {
        const char *colon = strchr(vols.v[i], ':');
        if (colon == NULL || colon == vols.v[i] || colon[1] != '/') {
            cli_usage_error(cmd, "--volume must be NAME:/PATH, not \"%s\"", vols.v[i]);
            goto out;
        }
    }

    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (image != NULL)
        nb_json_kv_str(g, "image", image);
    if (template != NULL)
        nb_json_kv_str(g, "template", template);
    if (ttl_s != NULL)
        nb_json_kv_int(g, "ttl", ttl);
    if (memory_s != NULL)
        nb_json_kv_int(g, "memory", (long long)memory);
    if (cpus_s != NULL)
        nb_json_kv_double(g, "cpus", cpus);
    if (pids_s != NULL)
        nb_json_kv_int(g, "pids", pids);
    if (network != NULL)
        nb_json_kv_str(g, "network", network);
    if (auto_resume)
        nb_json_kv_bool(g, "auto_resume", 1);
    if (on_timeout != NULL)
        nb_json_kv_str(g, "on_timeout", on_timeout);
    args_kv_map(g, "env", &env);
    args_kv_map(g, "metadata", &meta);
    if (vols.n > 0) {
        /* [{name, path}]: the key's persistent volumes (nanobox volume ls) */
        nb_json_cstr(g, "volumes");
        yajl_gen_array_open(g);
        for (size_t i = 0; i < vols.n; i++) {
            const char *colon = strchr(vols.v[i], ':');
            yajl_gen_map_open(g);
            nb_json_cstr(g, "name");
            nb_json_str(g, vols.v[i], (size_t)(colon - vols.v[i]));
            nb_json_kv_str(g, "path", colon + 1);
            yajl_gen_map_close(g);
        }
        yajl_gen_array_close(g);
    }
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);

    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        if (c->json)
            client_print_raw(&a);
        else
            printf("%s\n", out_str(a.json, "sandboxId"));
    }
out:
    client_answer_free(&a);
    free(body);
    free(pos.v);
    args_list_free(&env);
    args_list_free(&meta);
    args_list_free(&vols);
    return rc;
}

/* --------------------------------------------------------------------- ls */

int cmd_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_list meta = {0};
    const struct args_opt opts[] = {{"--meta", ARG_LIST, &meta}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path;
    int rc;

    nb_buf_init(&path, 1u << 16);
    if ((rc = args_parse(c, cmd, argc, argv, opts, 1, &pos)) != ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n > 0 && meta.n > 0) {
        cli_usage_error(cmd, "--meta filters sandboxes: it takes no ID");
        goto out;
    }
    if (pos.n > 0) { /* ls ID [PATH]: a sandbox's files */
        rc = files_ls(c, cmd, &pos);
        goto out;
    }
    nb_buf_printf(&path, "/sandbox");
    for (size_t i = 0; i < meta.n; i++) {
        const char *eq;
        char *key;
        if (args_kv(cmd, "--meta", meta.v[i]) != 0)
            goto out;
        eq = strchr(meta.v[i], '=');
        key = nb_xmalloc((size_t)(eq - meta.v[i]) + 1);
        memcpy(key, meta.v[i], (size_t)(eq - meta.v[i]));
        key[eq - meta.v[i]] = '\0';
        nb_buf_printf(&path, "%smetadata.", i ? "&" : "?");
        nb_url_escape(&path, key);
        nb_buf_printf(&path, "=");
        nb_url_escape(&path, eq + 1);
        free(key);
    }
    req.path = path.data;

    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        static const char *const headers[] = {"ID",   "IMAGE",    "EXPIRES IN", "MEMORY",
                                              "CPUS", "METADATA", "NODE"};
        yajl_val list = out_get(a.json, "sandboxes", yajl_t_array);
        struct out_table t;
        int cluster = 0; /* a cluster's rows say their node: one column more */

        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++)
            cluster |= out_get(list->u.array.values[i], "node", yajl_t_string) != NULL;
        out_table_init(&t, cluster ? 7 : 6, headers);
        for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
            yajl_val s = list->u.array.values[i];
            char expires[32], mem[32], cpus[32], node[64],
                *md = out_metadata(out_get(s, "metadata", yajl_t_object));
            const char *row[7];
            out_duration(expires, sizeof(expires), out_int(s, "ttl_remaining", 0));
            out_size(mem, sizeof(mem), out_int(s, "memory", 0));
            out_number(cpus, sizeof(cpus), out_get(s, "cpus", yajl_t_number));
            snprintf(node, sizeof(node), "%s%s", out_str(s, "node"),
                     out_get(s, "node_up", yajl_t_false) != NULL ? " (down)" : "");
            row[0] = out_str(s, "sandboxId");
            row[1] = out_str(s, "image");
            row[2] = expires;
            row[3] = mem;
            row[4] = cpus;
            row[5] = md;
            row[6] = node;
            out_table_row(&t, row);
            free(md);
        }
        if (out_get(a.json, "partial", yajl_t_true) != NULL)
            fprintf(stderr,
                    "nanobox: etcd did not answer: only this node's sandboxes are listed\n");
        out_table_print(&t, stdout);
        out_table_free(&t);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    args_list_free(&meta);
    return rc;
}

/* ------------------------------------------------------------------- info */

int cmd_info(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[CLI_UUID_LEN + 1];
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(
            cmd, pos.n == 0 ? "which sandbox? give its ID" : "one ID at a time (got %d arguments)",
            pos.n);
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    sandbox_path(&path, id, "");
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        yajl_val s = a.json;
        char created[64], expires[64], left[32], mem[32], cpus[32], *md;

        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_time(created, sizeof(created), out_int(s, "created_at", 0));
        out_time(expires, sizeof(expires), out_int(s, "expires_at", 0));
        out_duration(left, sizeof(left), out_int(s, "ttl_remaining", 0));
        out_size(mem, sizeof(mem), out_int(s, "memory", 0));
        out_number(cpus, sizeof(cpus), out_get(s, "cpus", yajl_t_number));
        md = out_metadata(out_get(s, "metadata", yajl_t_object));
        printf("id          %s\n", out_str(s, "sandboxId"));
        printf("status      %s\n", out_str(s, "status"));
        if (out_int(s, "pause_expires_at", 0) != 0) {
            char until[64];
            out_time(until, sizeof(until), out_int(s, "pause_expires_at", 0));
            printf("paused      until %s (then destroyed); resume keeps the TTL left\n", until);
        }
        printf("image       %s\n", out_str(s, "image"));
        printf("created     %s\n", created);
        printf("expires     in %s (%s)\n", left, expires);
        printf("memory      %s\n", mem);
        printf("cpus        %s\n", cpus);
        printf("pids        %lld\n", out_int(s, "pids", 0));
        printf("network     %s\n", out_str(s, "network"));
        printf("metadata    %s\n", md[0] ? md : "-");
        free(md);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}

/* --------------------------------------------------------------------- rm */

int cmd_rm(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    int recursive = 0, files = 0;
    const struct args_opt opts[] = {{"-r", ARG_FLAG, &recursive},
                                    {"--recursive", ARG_FLAG, &recursive}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    yajl_gen removed = NULL, failed = NULL;
    int rc, failures = 0;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n == 0) {
        rc = cli_usage_error(cmd, "which sandboxes? give their IDs (or ID:PATH for files)");
        goto out;
    }
    for (int i = 0; i < pos.n; i++)
        files += files_is_remote(pos.v[i]);
    if (files > 0 && files < pos.n) {
        rc = cli_usage_error(cmd, "give sandbox IDs or ID:PATH files, not both");
        goto out;
    }
    if (files > 0) {
        rc = files_rm(c, cmd, &pos, recursive);
        goto out;
    }
    /* nothing is destroyed unless every argument names a sandbox: "rm ID
     * notes.txt" must not take the sandbox away and then fail on the file */
    for (int i = 0; i < pos.n; i++)
        if (!sandbox_is_id(pos.v[i])) {
            rc = cli_usage_error(
                cmd, "\"%s\" is not a sandbox ID (to delete a file: nanobox rm ID:PATH)", pos.v[i]);
            goto out;
        }
    if (recursive) {
        rc = cli_usage_error(cmd, "-r is for files (ID:PATH); a sandbox goes whole");
        goto out;
    }
    if (c->json) {
        /* DELETE answers 204 with no body: --json gets a summary instead */
        removed = nb_json_gen();
        failed = nb_json_gen();
        yajl_gen_array_open(removed);
        yajl_gen_array_open(failed);
    }
    for (int i = 0; i < pos.n; i++) {
        struct client_req req = {
            .method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT, .keep_errors = 1};
        struct client_answer a = {0};
        struct nb_buf path = {0};
        char id[CLI_UUID_LEN + 1], text[1400];

        if (sandbox_resolve_id(c, cmd, pos.v[i], id) != CLI_OK) {
            failures++;
            if (failed != NULL) {
                yajl_gen_map_open(failed);
                nb_json_kv_str(failed, "sandboxId", pos.v[i]);
                nb_json_kv_str(failed, "error", "no single live sandbox has this id or prefix");
                yajl_gen_map_close(failed);
            }
            continue;
        }
        sandbox_path(&path, id, "");
        req.path = path.data;
        if (client_call(c, &req, &a) == CLI_OK) {
            if (removed != NULL)
                nb_json_cstr(removed, id);
            else
                printf("%s\n", id);
        } else {
            failures++;
            if (a.status >= 300) { /* an HTTP error: ours to report */
                client_error_text(c, &a, text, sizeof(text));
                fprintf(stderr, "nanobox: %s: %s\n", id, text);
            }
            if (failed != NULL) {
                yajl_gen_map_open(failed);
                nb_json_kv_str(failed, "sandboxId", id);
                nb_json_kv_str(failed, "error",
                               a.status >= 300 ? out_str(a.json, "error")
                                               : "no usable answer from the server");
                nb_json_kv_str(failed, "code", out_str(a.json, "code"));
                nb_json_kv_int(failed, "status", a.status);
                yajl_gen_map_close(failed);
            }
        }
        client_answer_free(&a);
        nb_buf_free(&path);
        fflush(stdout);
        if (a.status == 0 && failures > 0)
            break; /* the server is out of reach: so are the rest */
    }
    if (c->json) {
        char *r, *f;
        yajl_gen_array_close(removed);
        yajl_gen_array_close(failed);
        r = nb_json_gen_take(removed);
        f = nb_json_gen_take(failed);
        removed = failed = NULL;
        printf("{\"removed\":%s,\"failed\":%s}\n", r, f);
        free(r);
        free(f);
    }
    rc = failures ? CLI_FAIL : CLI_OK;
out:
    if (removed != NULL)
        yajl_gen_free(removed);
    if (failed != NULL)
        yajl_gen_free(failed);
    free(pos.v);
    return rc;
}

/* -------------------------------------------------------------------- ttl */

int cmd_ttl(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[CLI_UUID_LEN + 1], *body = NULL;
    long ttl;
    yajl_gen g;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 2) {
        rc = cli_usage_error(cmd, "give an ID and SECONDS");
        goto out;
    }
    if (args_long(cmd, "SECONDS", pos.v[1], 1, 1L << 30, &ttl) != 0) {
        rc = CLI_USAGE;
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "ttl", ttl);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    sandbox_path(&path, id, "/timeout");
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
        printf("%s expires in %s (%s)\n", id, left, when);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    return rc;
}

/* --------------------------------------------------------- pause, resume */

/* POST /sandbox/{id}/pause or /resume for one ID; prints "<id> paused". */
static int pause_or_resume(struct client *c, const struct cli_cmd *cmd, int argc, char **argv,
                           const char *op)
{
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "POST", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char id[CLI_UUID_LEN + 1], sub[16];
    int rc, no_memory = 0;
    /* pause's --no-memory: its files saved, its container removed (docs/API.md) */
    const struct args_opt opts[] = {{"--no-memory", ARG_FLAG, &no_memory}};

    if ((rc = args_parse(c, cmd, argc, argv, opts, !strcmp(op, "pause") ? 1 : 0, &pos)) !=
        ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(
            cmd, pos.n == 0 ? "which sandbox? give its ID" : "one ID at a time (got %d arguments)",
            pos.n);
        goto out;
    }
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    snprintf(sub, sizeof(sub), "/%s", op);
    sandbox_path(&path, id, sub);
    req.path = path.data;
    if (no_memory)
        req.body = "{\"keep_memory\":false}";
    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        char left[32];

        if (c->json) {
            client_print_raw(&a);
            goto out;
        }
        out_duration(left, sizeof(left), out_int(a.json, "ttl_remaining", 0));
        printf("%s %s (%s of TTL left)\n", id, out_str(a.json, "state"), left);
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}

int cmd_pause(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    return pause_or_resume(c, cmd, argc, argv, "pause");
}

int cmd_resume(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    return pause_or_resume(c, cmd, argc, argv, "resume");
}
