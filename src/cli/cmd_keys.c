/*
 * cmd_keys.c - nanobox keys add|ls|rm: the operator's edits of the
 * server's keys file (docs/CLI.md, "keys"). It runs on the server's host
 * and edits the file itself (atomically: a temporary file renamed over
 * it); the service re-reads it on its next request. Only rm --destroy
 * talks to the API, as the CLI's own (admin) key.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "conf.h"
#include "json.h"
#include "keys.h"

struct keys_conf {
    char keys_file[NB_CONF_STR];
};

/* Only keys_file matters in the server's config. */
static int keys_conf_kv(void *ctx, const char *key, const char *value, char *msg, size_t msglen)
{
    struct keys_conf *k = ctx;
    (void)msg;
    (void)msglen;
    if (!strcmp(key, "keys_file"))
        snprintf(k->keys_file, sizeof(k->keys_file), "%s", value);
    return 0;
}

/* The keys file of the server config conf (--config, NANOBOX_CONFIG, the default). */
static int keys_path(const char *conf, char *out, size_t outlen)
{
    struct keys_conf k = {""};
    char err[1200];
    const char *slash;

    if (conf == NULL || conf[0] == '\0')
        conf = getenv("NANOBOX_CONFIG");
    if (conf == NULL || conf[0] == '\0')
        conf = CLIENT_SERVER_CONF;
    if (nb_conf_read(conf, keys_conf_kv, &k, err, sizeof(err)) != 0 && errno != ENOENT) {
        fprintf(stderr, "nanobox: %s\n", err);
        return CLI_FAIL;
    }
    if (k.keys_file[0] != '\0') {
        snprintf(out, outlen, "%s", k.keys_file);
        return CLI_OK;
    }
    /* nb_conf_load's default: "keys" next to the config file */
    slash = strrchr(conf, '/');
    if (slash == NULL)
        snprintf(out, outlen, "keys");
    else
        snprintf(out, outlen, "%.*s/keys", slash == conf ? 0 : (int)(slash - conf), conf);
    return CLI_OK;
}

/* the keys file's lock, from the read to the write (or the exit) */
static int keys_lock_fd = -1;

static int keys_read(const char *path, struct nb_keys *k)
{
    char err[1200];
    if (keys_lock_fd < 0)
        keys_lock_fd = nb_keys_lock(path);
    if (nb_keys_load(path, k, err, sizeof(err)) != 0) {
        fprintf(stderr, "nanobox: %s\n", err);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int keys_write(const char *path, const struct nb_keys *k)
{
    char err[1200];
    int rc = nb_keys_save(path, k, err, sizeof(err));
    if (keys_lock_fd >= 0)
        close(keys_lock_fd);
    keys_lock_fd = -1;
    if (rc != 0) {
        fprintf(stderr, "nanobox: %s\n", err);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* "max_x=VALUE" through the file parser's own checks, so what is written reads back. */
static int set_quota(const struct cli_cmd *cmd, struct nb_key *k, const char *name,
                     const char *value)
{
    char line[400], err[300];
    struct nb_keys one;
    if (value == NULL)
        return 0;
    snprintf(line, sizeof(line), "x user %064d %s=%s", 0, name, value);
    if (nb_keys_parse(line, strlen(line), &one, err, sizeof(err)) != 0) {
        cli_usage_error(cmd, "--%s %s: %s", name, value,
                        strchr(err, ':') ? strchr(err, ':') + 2 : err);
        return -1;
    }
    if (!strcmp(name, "max_sandboxes"))
        k->max_sandboxes = one.v[0].max_sandboxes;
    else if (!strcmp(name, "max_memory"))
        k->max_memory = one.v[0].max_memory;
    else if (!strcmp(name, "max_cpus"))
        k->max_nano_cpus = one.v[0].max_nano_cpus;
    else if (!strcmp(name, "max_ports"))
        k->max_ports = one.v[0].max_ports;
    else if (!strcmp(name, "max_templates"))
        k->max_templates = one.v[0].max_templates;
    else if (!strcmp(name, "max_volumes"))
        k->max_volumes = one.v[0].max_volumes;
    else if (!strcmp(name, "max_volume_bytes"))
        k->max_volume_bytes = one.v[0].max_volume_bytes;
    else
        memcpy(k->rate, one.v[0].rate, sizeof(k->rate));
    nb_keys_free(&one);
    return 0;
}

static int keys_add(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *conf = NULL, *role = "user", *q[8] = {NULL};
    static const char *qn[8] = {"max_sandboxes", "max_memory", "max_cpus",    "max_ports",
                                "max_templates", "rate",       "max_volumes", "max_volume_bytes"};
    const struct args_opt opts[] = {
        {"--config", ARG_VALUE, &conf},        {"--role", ARG_VALUE, &role},
        {"--max-sandboxes", ARG_VALUE, &q[0]}, {"--max-memory", ARG_VALUE, &q[1]},
        {"--max-cpus", ARG_VALUE, &q[2]},      {"--max-ports", ARG_VALUE, &q[3]},
        {"--max-templates", ARG_VALUE, &q[4]}, {"--rate", ARG_VALUE, &q[5]},
        {"--max-volumes", ARG_VALUE, &q[6]},   {"--max-volume-bytes", ARG_VALUE, &q[7]},
    };
    struct args_pos pos = {.v = argv, .stop_after = -1};
    char path[NB_CONF_STR + 16], keyhex[65];
    unsigned char raw[32];
    struct nb_keys k;
    struct nb_key nk, *nv;
    int rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos);

    if (rc != ARGS_GO_ON)
        return rc;
    if (pos.n != 1)
        return cli_usage_error(cmd, "keys add takes one NAME");
    if (!nb_key_name_valid(pos.v[0]) || !strcmp(pos.v[0], NB_KEY_DEFAULT))
        return cli_usage_error(
            cmd, "\"%s\" is not a key name (1 to %d of A-Z a-z 0-9 _ . -; not \"%s\")", pos.v[0],
            NB_KEY_NAME_MAX, NB_KEY_DEFAULT);
    memset(&nk, 0, sizeof(nk));
    snprintf(nk.name, sizeof(nk.name), "%s", pos.v[0]);
    if (!strcmp(role, "admin"))
        nk.admin = 1;
    else if (strcmp(role, "user") != 0)
        return cli_usage_error(cmd, "--role is user or admin");
    for (int i = 0; i < 8; i++)
        if (set_quota(cmd, &nk, qn[i], q[i]) != 0)
            return CLI_USAGE;
    if ((rc = keys_path(conf, path, sizeof(path))) != CLI_OK ||
        (rc = keys_read(path, &k)) != CLI_OK)
        return rc;
    if (nb_keys_find(&k, nk.name) != NULL) {
        fprintf(stderr, "nanobox: %s already has a key named \"%s\" (keys rm it first)\n", path,
                nk.name);
        nb_keys_free(&k);
        return CLI_FAIL;
    }
    /* 256 random bits, shown once; only their hash is kept */
    if (RAND_bytes(raw, sizeof(raw)) != 1) {
        fprintf(stderr, "nanobox: no random bytes for the key\n");
        nb_keys_free(&k);
        return CLI_FAIL;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(keyhex + 2 * i, 3, "%02x", raw[i]);
    if (nb_key_hash(keyhex, nk.hash) != 0 || (nv = realloc(k.v, (k.n + 1) * sizeof(*nv))) == NULL) {
        nb_keys_free(&k);
        return CLI_FAIL;
    }
    k.v = nv;
    k.v[k.n++] = nk;
    rc = keys_write(path, &k);
    nb_keys_free(&k);
    if (rc != CLI_OK)
        return rc;
    if (c->json)
        printf("{\"name\":\"%s\",\"role\":\"%s\",\"key\":\"%s\"}\n", nk.name,
               nk.admin ? "admin" : "user", keyhex);
    else
        printf("%s\n", keyhex);
    fprintf(stderr, "nanobox: key \"%s\" added to %s; it is shown only this once\n", nk.name, path);
    return CLI_OK;
}

static int keys_ls(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *conf = NULL;
    const struct args_opt opts[] = {{"--config", ARG_VALUE, &conf}};
    struct args_pos pos = {.v = argv, .stop_after = -1};
    char path[NB_CONF_STR + 16], quotas[256];
    struct nb_keys k;
    int rc = args_parse(c, cmd, argc, argv, opts, 1, &pos);

    if (rc != ARGS_GO_ON)
        return rc;
    if (pos.n != 0)
        return cli_usage_error(cmd, "keys ls takes no argument");
    if ((rc = keys_path(conf, path, sizeof(path))) != CLI_OK ||
        (rc = keys_read(path, &k)) != CLI_OK)
        return rc;
    if (c->json) {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        nb_json_cstr(g, "keys");
        yajl_gen_array_open(g);
        for (size_t i = 0; i < k.n; i++) {
            yajl_gen_map_open(g);
            nb_json_kv_str(g, "name", k.v[i].name);
            nb_json_kv_str(g, "role", k.v[i].admin ? "admin" : "user");
            nb_key_quotas(&k.v[i], quotas, sizeof(quotas));
            nb_json_kv_str(g, "quotas", quotas);
            yajl_gen_map_close(g);
        }
        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
        char *text = nb_json_gen_take(g);
        printf("%s\n", text);
        free(text);
    } else {
        printf("%-32s  %-5s  %s\n", "NAME", "ROLE", "QUOTAS");
        for (size_t i = 0; i < k.n; i++) {
            nb_key_quotas(&k.v[i], quotas, sizeof(quotas));
            printf("%-32s  %-5s  %s\n", k.v[i].name, k.v[i].admin ? "admin" : "user",
                   quotas[0] ? quotas : "-");
        }
    }
    nb_keys_free(&k);
    return CLI_OK;
}

/* Destroy the live sandboxes of owner name, as the CLI's (admin) key. */
static int destroy_owned(struct client *c, const char *name)
{
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    const char *sp[] = {"sandboxes", NULL}, *ip[] = {"sandboxId", NULL};
    yajl_val list;
    int rc, failures = 0;

    if ((rc = client_ready(c)) != CLI_OK)
        return rc;
    nb_buf_init(&path, 256);
    nb_buf_printf(&path, "/sandbox?owner=%s", name); /* a key name needs no %-encoding */
    req.path = path.data;
    rc = client_call(c, &req, &a);
    nb_buf_free(&path);
    if (rc != CLI_OK)
        return rc;
    list = yajl_tree_get(a.json, sp, yajl_t_array);
    for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
        yajl_val id = yajl_tree_get(list->u.array.values[i], ip, yajl_t_string);
        struct client_req del = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
        struct client_answer d = {0};
        struct nb_buf dp = {0};
        if (id == NULL)
            continue;
        sandbox_path(&dp, YAJL_GET_STRING(id), "");
        del.path = dp.data;
        if (client_call(c, &del, &d) == CLI_OK)
            printf("%s\n", YAJL_GET_STRING(id));
        else
            failures++;
        client_answer_free(&d);
        nb_buf_free(&dp);
    }
    client_answer_free(&a);
    return failures ? CLI_FAIL : CLI_OK;
}

static int keys_rm(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *conf = NULL;
    int destroy = 0;
    const struct args_opt opts[] = {{"--config", ARG_VALUE, &conf},
                                    {"--destroy", ARG_FLAG, &destroy}};
    struct args_pos pos = {.v = argv, .stop_after = -1};
    char path[NB_CONF_STR + 16];
    struct nb_keys k;
    size_t vi;
    int rc = args_parse(c, cmd, argc, argv, opts, 2, &pos);

    if (rc != ARGS_GO_ON)
        return rc;
    if (pos.n != 1)
        return cli_usage_error(cmd, "keys rm takes one NAME");
    if ((rc = keys_path(conf, path, sizeof(path))) != CLI_OK ||
        (rc = keys_read(path, &k)) != CLI_OK)
        return rc;
    for (vi = 0; vi < k.n && strcmp(k.v[vi].name, pos.v[0]) != 0; vi++)
        ;
    if (vi == k.n) {
        fprintf(stderr, "nanobox: %s has no key named \"%s\"\n", path, pos.v[0]);
        nb_keys_free(&k);
        return CLI_FAIL;
    }
    /* the key stops first: nothing new is made with it while its sandboxes go */
    memmove(&k.v[vi], &k.v[vi + 1], (k.n - vi - 1) * sizeof(k.v[0]));
    k.n--;
    rc = keys_write(path, &k);
    nb_keys_free(&k);
    if (rc != CLI_OK)
        return rc;
    fprintf(stderr, "nanobox: key \"%s\" removed from %s\n", pos.v[0], path);
    return destroy ? destroy_owned(c, pos.v[0]) : CLI_OK;
}

int cmd_keys(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd, "add, ls or rm?");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return cli_help(cmd);
    if (!strcmp(argv[1], "add"))
        return keys_add(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "ls"))
        return keys_ls(c, cmd, argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm"))
        return keys_rm(c, cmd, argc - 1, argv + 1);
    return cli_usage_error(cmd, "unknown keys command \"%s\": add, ls or rm", argv[1]);
}
