/*
 * cmd_exec.c - running code: "exec" (a shell command in a sandbox) and
 * "run" (a program in a fresh one-shot sandbox, POST /run).
 *
 * Both relay the program's stdout and stderr to ours and exit with its exit
 * status, so `nanobox exec ID -- make test && deploy` works as it would
 * locally; 124 means it timed out (as timeout(1) says).
 *
 * exec's COMMAND, as for docker exec and kubectl exec: several words are
 * the program and its arguments, sent as "argv" and passed to it exactly
 * (`exec ID -- python3 -c 'print(6*7)'`), no shell in between. One word is
 * a shell string for /bin/sh -c (`exec ID 'make && ./app'`), and --sh
 * joins several words with spaces into one shell string, as ssh does
 * (`exec ID --sh echo '$HOME'` expands in the sandbox).
 *
 * (code, a cell of a sandbox's interpreter session, is cmd_code.c's: it
 * reads its code and sets its timeout as run does, with the same helpers,
 * in helpers.c.)
 *
 * exec asks for a streamed answer ("stream": true; not with --json, which
 * prints the one final object) and relays it event by event as it arrives;
 * /run answers once the program is over. An NDJSON answer
 * (application/x-ndjson) is made of:
 *   {"type":"stdout"|"stderr","data":"..."}
 *   {"type":"exit","exit_code":N,"timed_out":B[,"truncated":B]}
 *   {"type":"error","error":"...","code":"..."}
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base64.h"
#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"

#define RUN_MAX_CODE (16u * 1024u * 1024u) /* nginx's client_max_body_size */

struct exec_outcome {
    struct client *c;
    const char *what;    /* "command" or "program", for notes */
    const char *timeout; /* --timeout as given, or NULL */
    int have_exit;
    long long exit_code;
    int timed_out;
    int truncated;
    int failed; /* the stream carried an error event */
};

static void write_all(FILE *f, const char *s)
{
    fputs(s, f);
    fflush(f);
}

static int on_exec_event(void *ctx, yajl_val ev, const char *line, size_t len)
{
    struct exec_outcome *o = ctx;
    const char *type = out_str(ev, "type");

    if (o->c->json) {
        fwrite(line, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        if (!o->c->json)
            write_all(type[3] == 'o' ? stdout : stderr, out_str(ev, "data"));
    } else if (!strcmp(type, "exit")) {
        o->have_exit = out_get(ev, "exit_code", yajl_t_number) != NULL;
        o->exit_code = out_int(ev, "exit_code", -1);
        o->timed_out = out_bool(ev, "timed_out");
        o->truncated = out_bool(ev, "truncated");
    } else if (!strcmp(type, "error")) {
        fprintf(stderr, "nanobox: %s (%s)\n", out_str(ev, "error"), out_str(ev, "code"));
        o->failed = 1;
    }
    /* other types are for later versions: skipped */
    return 0;
}

/* The exit status nanobox should end with, after the notes a person needs. */
static int exec_finish(struct exec_outcome *o, const struct client_answer *a)
{
    struct client *c = o->c;

    if (!a->streamed) {
        if (c->json) {
            client_print_raw(a);
        } else {
            write_all(stdout, out_str(a->json, "stdout"));
            write_all(stderr, out_str(a->json, "stderr"));
        }
        o->have_exit = out_get(a->json, "exit_code", yajl_t_number) != NULL;
        o->exit_code = out_int(a->json, "exit_code", -1);
        o->timed_out = out_bool(a->json, "timed_out");
        o->truncated = out_bool(a->json, "truncated");
    }
    if (o->failed)
        return CLI_FAIL;
    if (!o->have_exit) {
        fprintf(stderr, "nanobox: the server's answer has no exit status%s\n",
                a->streamed ? " (the stream ended early)" : "");
        return CLI_FAIL;
    }
    if (o->truncated && !c->json)
        fprintf(stderr, "nanobox: output truncated: the server keeps at most max_output bytes "
                        "of stdout and stderr together\n");
    if (o->timed_out) {
        if (!c->json) {
            if (o->timeout != NULL)
                fprintf(stderr, "nanobox: the %s timed out after %s s and was killed\n", o->what,
                        o->timeout);
            else
                fprintf(stderr,
                        "nanobox: the %s timed out (the server's default timeout) and "
                        "was killed; --timeout sets another\n",
                        o->what);
        }
        return CLI_TIMED_OUT;
    }
    if (o->exit_code < 0 || o->exit_code > 255) {
        fprintf(stderr, "nanobox: the %s's exit status could not be read (%lld)\n", o->what,
                o->exit_code);
        return CLI_FAIL;
    }
    return (int)o->exit_code;
}

/* ------------------------------------------------------------------- exec */

/* Most bytes --stdin sends (base64 grows it by a third; the server's
 * max_body is the real limit and answers 413 past it). */
#define EXEC_MAX_STDIN (48u * 1024u * 1024u)

int cmd_exec(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *timeout_s = NULL, *cwd = NULL, *stdin_path = NULL, *user = NULL;
    struct args_list env = {0};
    int sh = 0, detach = 0;
    const struct args_opt opts[] = {
        {"--timeout", ARG_VALUE, &timeout_s},
        {"--cwd", ARG_VALUE, &cwd},
        {"--env", ARG_LIST, &env},
        {"--stdin", ARG_VALUE, &stdin_path},
        {"--sh", ARG_FLAG, &sh},
        {"-d", ARG_FLAG, &detach},
        {"--detach", ARG_FLAG, &detach},
        {"--user", ARG_VALUE, &user},
        {"-u", ARG_VALUE, &user},
    };
    /* options end at the first word after ID, or at "--": the rest is the command */
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = 1};
    struct exec_outcome o = {.c = c, .what = "command"};
    struct client_req req = {.method = "POST", .on_event = on_exec_event, .ctx = &o};
    struct client_answer a = {0};
    struct nb_buf path = {0}, command, input;
    char id[37], *body = NULL;
    double timeout = 0;
    yajl_gen g;
    int rc;

    nb_buf_init(&command, 1u << 26);
    nb_buf_init(&input, EXEC_MAX_STDIN);
    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n < 2) {
        cli_usage_error(cmd, pos.n == 0 ? "give a sandbox ID and a COMMAND" : "give a COMMAND");
        goto out;
    }
    if (timeout_s != NULL && args_double(cmd, "--timeout", timeout_s, 0.001, 1e6, &timeout) != 0)
        goto out;
    for (size_t i = 0; i < env.n; i++)
        if (args_kv(cmd, "--env", env.v[i]) != 0)
            goto out;
    /* one word or --sh: a shell string; else an argv (see the top) */
    sh = sh || pos.n == 2;
    for (int i = 1; sh && i < pos.n; i++) {
        if (i > 1)
            nb_buf_append(&command, " ", 1);
        nb_buf_append(&command, pos.v[i], strlen(pos.v[i]));
    }
    if (sh ? command.len == 0 : pos.v[1][0] == '\0') {
        cli_usage_error(cmd, sh ? "the COMMAND is empty"
                                : "the program (COMMAND's first word) is empty");
        goto out;
    }
    o.timeout = timeout_s;

    if (stdin_path != NULL && (rc = cli_read_bytes(stdin_path, &input)) != CLI_OK)
        goto out;
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (sh) {
        nb_json_kv_str(g, "command", command.data);
    } else {
        nb_json_cstr(g, "argv");
        yajl_gen_array_open(g);
        for (int i = 1; i < pos.n; i++)
            nb_json_cstr(g, pos.v[i]);
        yajl_gen_array_close(g);
    }
    /* output as it happens; --json keeps the one final object. -d: the
     * command runs on, its pid is the answer (ps, logs, kill) */
    if (detach)
        nb_json_kv_bool(g, "background", 1);
    else if (!c->json)
        nb_json_kv_bool(g, "stream", 1);
    if (stdin_path != NULL) {
        struct nb_buf b64;
        nb_buf_init(&b64, (size_t)-1);
        nb_base64_encode(&b64, input.data ? input.data : "", input.len);
        nb_json_cstr(g, "stdin");
        nb_json_str(g, b64.data ? b64.data : "", b64.len);
        nb_json_kv_str(g, "stdin_encoding", "base64");
        nb_buf_free(&b64);
    }
    if (timeout_s != NULL)
        nb_json_kv_double(g, "timeout", timeout);
    if (cwd != NULL)
        nb_json_kv_str(g, "cwd", cwd);
    if (user != NULL)
        nb_json_kv_str(g, "user", user);
    args_kv_map(g, "env", &env);
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    sandbox_path(&path, id, "/exec");
    req.path = path.data;
    req.timeout = cli_http_timeout(timeout);

    if ((rc = client_call(c, &req, &a)) == CLI_OK) {
        if (!detach)
            rc = exec_finish(&o, &a);
        else if (c->json)
            client_print_raw(&a);
        else
            printf("%lld\n", out_int(a.json, "pid", -1));
    }
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    nb_buf_free(&command);
    nb_buf_free(&input);
    free(body);
    free(pos.v);
    args_list_free(&env);
    return rc;
}

/* -------------------------------------------------------------------- run */

int cmd_run(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *timeout_s = NULL, *stdin_path = NULL;
    const struct args_opt opts[] = {
        {"--timeout", ARG_VALUE, &timeout_s},
        {"--stdin", ARG_VALUE, &stdin_path},
    };
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct exec_outcome o = {.c = c, .what = "program"};
    struct client_req req = {
        .method = "POST", .path = "/run", .on_event = on_exec_event, .ctx = &o, .keep_errors = 1};
    struct client_answer a = {0};
    struct nb_buf code, input;
    char *body = NULL;
    double timeout = 0;
    yajl_gen g;
    int rc;

    nb_buf_init(&code, RUN_MAX_CODE);
    nb_buf_init(&input, RUN_MAX_CODE);
    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n != 2) {
        cli_usage_error(cmd, "give a LANGUAGE and a FILE (\"-\" for stdin)");
        goto out;
    }
    if (timeout_s != NULL && args_double(cmd, "--timeout", timeout_s, 0.001, 1e6, &timeout) != 0)
        goto out;
    if (stdin_path != NULL && !strcmp(stdin_path, "-") && !strcmp(pos.v[1], "-")) {
        cli_usage_error(cmd, "the code and --stdin cannot both come from stdin");
        goto out;
    }
    o.timeout = timeout_s;
    if ((rc = cli_read_text(pos.v[1], &code)) != CLI_OK ||
        (stdin_path != NULL && (rc = cli_read_text(stdin_path, &input)) != CLI_OK))
        goto out;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "language", pos.v[0]);
    nb_json_str(g, "code", 4);
    nb_json_str(g, code.data, code.len);
    if (timeout_s != NULL)
        nb_json_kv_double(g, "timeout", timeout);
    if (stdin_path != NULL) {
        nb_json_str(g, "stdin", 5);
        nb_json_str(g, input.data, input.len);
    }
    yajl_gen_map_close(g);
    req.body = body = nb_json_gen_take(g);
    req.timeout = cli_http_timeout(timeout);

    rc = client_call(c, &req, &a);
    if (rc == CLI_OK) {
        rc = exec_finish(&o, &a);
    } else if (a.status >= 300) {
        client_report(c, &a);
        if (a.status == 404 && !strcmp(out_str(a.json, "code"), "no_route"))
            fprintf(stderr, "nanobox: this server does not serve POST /run yet\n");
    }
out:
    client_answer_free(&a);
    nb_buf_free(&code);
    nb_buf_free(&input);
    free(body);
    free(pos.v);
    return rc;
}
