/*
 * api_exec.c - POST /sandbox/{id}/exec: validate the request, then run
 * /bin/sh -c COMMAND through the exec engine (exec.c) and answer with the
 * original NanoBox keys (output, exit_code, timed_out) and the new ones.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "exec.h"
#include "json.h"
#include "sandbox.h"

int api_exec_timeout(const struct nb_conf *c, yajl_val v, double *out, struct nb_req *r)
{
    *out = c->exec_timeout;
    if (v == NULL)
        return 0;
    *out = nb_json_double(v);
    if (!(*out > 0) || *out > c->exec_timeout_max) {
        nb_http_fail(r, 422, "out_of_range", "timeout must be more than 0 and at most %u seconds (exec_timeout_max)",
                     c->exec_timeout_max);
        return -1;
    }
    return 0;
}

void api_sandbox_exec(struct nb_app *a, struct nb_req *r, const char *id)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"command", NB_JT_STRING, NULL},
        {"timeout", NB_JT_NUMBER, NULL},
        {"cwd", NB_JT_STRING, NULL},
        {"env", NB_JT_OBJECT, NULL},
    };
    enum { F_COMMAND, F_TIMEOUT, F_CWD, F_ENV };
    struct nb_exec_result res;
    struct nb_apierr ae;
    struct nb_slot slot;
    char err[256];
    char **env = NULL;
    unsigned n_env = 0;
    const char *command, *cwd = NULL;
    double timeout = c->exec_timeout;
    const char *argv[4] = {"/bin/sh", "-c", NULL, NULL};
    yajl_val body = NULL;
    yajl_gen g;

    nb_exec_result_init(&res, c->max_output);

    if (api_read_json(a, r, &body) != 0)
        goto out;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_http_fail(r, 400, "bad_field", "%s", err);
        goto out;
    }
    if (f[F_COMMAND].val == NULL) {
        nb_http_fail(r, 400, "bad_field", "field \"command\" (a shell command line) is required");
        goto out;
    }
    command = nb_json_string(f[F_COMMAND].val);
    if (*command == '\0' || strlen(command) > c->max_command) {
        nb_http_fail(r, *command ? 422 : 400, *command ? "out_of_range" : "bad_field",
                     "command must be 1 to %zu bytes (max_command)", c->max_command);
        goto out;
    }
    if (api_exec_timeout(c, f[F_TIMEOUT].val, &timeout, r) != 0)
        goto out;
    if (f[F_CWD].val) {
        cwd = nb_json_string(f[F_CWD].val);
        if (cwd[0] != '/' || strlen(cwd) > 1024) {
            nb_http_fail(r, 400, "bad_field", "cwd must be an absolute path inside the sandbox");
            goto out;
        }
    }
    if (api_env_list(c, f[F_ENV].val, &env, &n_env, &ae) != 0) {
        nb_http_error(r, &ae);
        goto out;
    }
    if (nb_sandbox_get(a, id, &slot, &ae) != 0) {
        nb_http_error(r, &ae);
        goto out;
    }

    argv[2] = command;
    if (nb_exec_run(a, &slot, argv, cwd, env, n_env, timeout, &res, &ae) != 0) {
        nb_http_error(r, &ae);
        goto out;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_exec_result_json(g, &res, 1);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);

out:
    api_env_free(env, n_env);
    yajl_tree_free(body);
    nb_exec_result_free(&res);
}
