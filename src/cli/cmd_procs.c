/*
 * cmd_procs.c - a sandbox's background processes (started by
 * "nanobox exec -d"): "ps ID", "logs ID PID [-f]" and "kill ID PID [-s SIG]",
 * over /sandbox/{id}/processes (see docs/API.md, "Background processes").
 *
 * logs prints what the agent still keeps (the last 1 MiB of stdout and of
 * stderr), stdout to ours and stderr to ours; -f then polls with the
 * offsets the answer gives (stdout_next, stderr_next), so nothing is
 * printed twice, until the process has exited.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"

#define LOGS_POLL_MIN_US 100000  /* -f: the first polls come quickly */
#define LOGS_POLL_MAX_US 1000000 /* then at most a second apart */

/* "/sandbox/ID/processes[/PID]<rest>" for the ID and PID arguments. */
static int procs_path(struct client *c, const struct cli_cmd *cmd, const char *id_arg,
                      const char *pid_arg, const char *rest, struct nb_buf *path, long *pid)
{
    char id[37], suffix[128];
    int rc;

    if (pid_arg != NULL && args_long(cmd, "PID", pid_arg, 1, 0x7fffffffL, pid) != 0)
        return CLI_USAGE;
    if ((rc = sandbox_resolve_id(c, cmd, id_arg, id)) != CLI_OK)
        return rc;
    if (pid_arg != NULL)
        snprintf(suffix, sizeof(suffix), "/processes/%ld%s", *pid, rest);
    else
        snprintf(suffix, sizeof(suffix), "/processes");
    sandbox_path(path, id, suffix);
    return CLI_OK;
}

/* The argv of an entry, joined with spaces. Caller frees. */
static char *command_text(yajl_val p)
{
    yajl_val argv = out_get(p, "command", yajl_t_array);
    struct nb_buf b;

    nb_buf_init(&b, 1u << 20);
    nb_buf_append(&b, "", 0);
    for (size_t i = 0; argv != NULL && i < argv->u.array.len; i++)
        nb_buf_printf(&b, "%s%s", i ? " " : "", nb_json_string(argv->u.array.values[i]));
    return nb_buf_steal(&b);
}

int cmd_ps(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    static const char *const hdr[] = {"PID", "STATUS", "STARTED", "OUTPUT", "COMMAND"};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    struct out_table t;
    yajl_val list;
    long pid;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, NULL, 0, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 1) {
        rc = cli_usage_error(cmd, "give one sandbox ID");
        goto out;
    }
    if ((rc = procs_path(c, cmd, pos.v[0], NULL, "", &path, &pid)) != CLI_OK)
        goto out;
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) != CLI_OK)
        goto out;
    if (c->json) {
        client_print_raw(&a);
        goto out;
    }
    list = out_get(a.json, "processes", yajl_t_array);
    out_table_init(&t, 5, hdr);
    for (size_t i = 0; list != NULL && i < list->u.array.len; i++) {
        yajl_val p = list->u.array.values[i];
        char spid[32], status[64], ago[32], when[48], output[64], outs[16], errs[16];
        char *command = command_text(p);
        snprintf(spid, sizeof(spid), "%lld", out_int(p, "pid", 0));
        if (out_bool(p, "running"))
            snprintf(status, sizeof(status), "running");
        else if (out_int(p, "signal", 0) > 0)
            snprintf(status, sizeof(status), "exited %lld (signal %lld)",
                     out_int(p, "exit_code", -1), out_int(p, "signal", 0));
        else
            snprintf(status, sizeof(status), "exited %lld", out_int(p, "exit_code", -1));
        out_duration(ago, sizeof(ago), (long long)time(NULL) - out_int(p, "started_at", 0));
        snprintf(when, sizeof(when), "%s ago", ago);
        out_size(outs, sizeof(outs), out_int(p, "stdout_bytes", 0));
        out_size(errs, sizeof(errs), out_int(p, "stderr_bytes", 0));
        snprintf(output, sizeof(output), "%s/%s", outs, errs);
        out_table_row(&t, (const char *const[]){spid, status, when, output, command});
        free(command);
    }
    out_table_print(&t, stdout);
    out_table_free(&t);
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}

/* Print one answer's new output; note what the agent no longer kept. */
static void logs_print(yajl_val p, long long next_out, long long next_err)
{
    long long off_out = out_int(p, "stdout_offset", 0), off_err = out_int(p, "stderr_offset", 0);

    if (off_out > next_out || off_err > next_err)
        fprintf(stderr,
                "nanobox: %lld bytes of stdout and %lld of stderr are no longer kept (the "
                "agent keeps the last 1 MiB of each)\n",
                off_out > next_out ? off_out - next_out : 0,
                off_err > next_err ? off_err - next_err : 0);
    fputs(out_str(p, "stdout"), stdout);
    fflush(stdout);
    fputs(out_str(p, "stderr"), stderr);
    fflush(stderr);
}

int cmd_logs(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    int follow = 0;
    const struct args_opt opts[] = {{"-f", ARG_FLAG, &follow}, {"--follow", ARG_FLAG, &follow}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct nb_buf base = {0};
    long long next_out = 0, next_err = 0;
    useconds_t nap = LOGS_POLL_MIN_US;
    long pid;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 2) {
        rc = cli_usage_error(cmd, "give a sandbox ID and a PID");
        goto out;
    }
    if ((rc = procs_path(c, cmd, pos.v[0], pos.v[1], "", &base, &pid)) != CLI_OK)
        goto out;
    for (;;) {
        struct client_req req = {.method = "GET", .timeout = CLIENT_CALL_TIMEOUT};
        struct client_answer a = {0};
        struct nb_buf path;
        int running;
        nb_buf_init(&path, 1u << 20);
        nb_buf_printf(&path, "%s?stdout_offset=%lld&stderr_offset=%lld", base.data, next_out,
                      next_err);
        req.path = path.data;
        rc = client_call(c, &req, &a);
        nb_buf_free(&path);
        if (rc == CLI_OK) {
            if (c->json)
                client_print_raw(&a);
            else
                logs_print(a.json, next_out, next_err);
            next_out = out_int(a.json, "stdout_next", next_out);
            next_err = out_int(a.json, "stderr_next", next_err);
        }
        running = out_bool(a.json, "running");
        client_answer_free(&a);
        if (rc != CLI_OK || !follow || !running)
            break;
        usleep(nap);
        if (nap < LOGS_POLL_MAX_US)
            nap *= 2;
    }
out:
    nb_buf_free(&base);
    free(pos.v);
    return rc;
}

int cmd_kill(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *sig_arg = NULL;
    const struct args_opt opts[] = {{"-s", ARG_VALUE, &sig_arg}, {"--signal", ARG_VALUE, &sig_arg}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = -1};
    struct client_req req = {.method = "DELETE", .timeout = CLIENT_CALL_TIMEOUT};
    struct client_answer a = {0};
    struct nb_buf path = {0};
    char sig[16], rest[32];
    const char *s;
    size_t n = 0;
    long pid;
    int rc;

    if ((rc = args_parse(c, cmd, argc, argv, opts, 2, &pos)) != ARGS_GO_ON)
        goto out;
    if (pos.n != 2) {
        rc = cli_usage_error(cmd, "give a sandbox ID and a PID");
        goto out;
    }
    /* TERM, term, SIGTERM: the API's name (as kill(1), TERM by default) */
    s = sig_arg != NULL ? sig_arg : "TERM";
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (; s[n] != '\0' && n + 1 < sizeof(sig); n++) {
        if (!isalnum((unsigned char)s[n]))
            break;
        sig[n] = (char)toupper((unsigned char)s[n]);
    }
    sig[n] = '\0';
    if (n == 0 || s[n] != '\0') {
        rc = cli_usage_error(cmd, "-s takes a signal name like TERM or KILL, not \"%s\"", sig_arg);
        goto out;
    }
    snprintf(rest, sizeof(rest), "?signal=%s", sig);
    if ((rc = procs_path(c, cmd, pos.v[0], pos.v[1], rest, &path, &pid)) != CLI_OK)
        goto out;
    req.path = path.data;
    if ((rc = client_call(c, &req, &a)) == CLI_OK && c->json)
        /* 204, no body: --json gets what was done */
        printf("{\"pid\":%ld,\"signal\":\"%s\",\"sent\":true}\n", pid, sig);
out:
    client_answer_free(&a);
    nb_buf_free(&path);
    free(pos.v);
    return rc;
}
