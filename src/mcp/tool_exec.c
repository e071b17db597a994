/*
 * tool_exec.c - the MCP tools that run commands: sandbox_exec (a
 * foreground exec, or with a progressToken a background one polled to its
 * end) and the background processes' sandbox_start_process,
 * sandbox_list_processes, sandbox_read_process_output,
 * sandbox_write_process_stdin and sandbox_kill_process.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "buf.h"
#include "clock.h"
#include "conf.h"
#include "json.h"
#include "mcp.h"
#include "mcp_tool.h"

#define MCP_EXEC_TIMEOUT 30       /* a watched exec's timeout when the config is unknown */
#define MCP_MAX_OUTPUT (1u << 20) /* a watched exec's output cap when the config is unknown */
#define MCP_POLL_MAX_MS 1000      /* a watched exec's longest wait between two polls */

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Append s to b within *room bytes; 1 when some of it did not fit. */
static int keep_output(struct nb_buf *b, const char *s, size_t *room)
{
    size_t n = strlen(s), take = n < *room ? n : *room;

    nb_buf_append(b, s, take);
    *room -= take;
    return take < n;
}

/*
 * sandbox_exec with a progressToken: the command starts in the background
 * (POST exec, "background": true) and is polled until it ends
 * (GET .../processes/{pid} from the offsets the last answer gave), with a
 * notifications/progress every MCP_PROGRESS_EVERY_MS. The timeout is
 * enforced here (DELETE .../processes/{pid}?signal=KILL), as on cancellation.
 * The answer has the foreground exec's fields but output (stdout and
 * stderr interleaved) and oom_killed; its entry is forgotten at the end.
 */
static void exec_watched(struct tool_call *t)
{
    const struct nb_conf *c = mcp_conf(t->s);
    yajl_val targ = mcp_arg_val(t, "timeout");
    double timeout = targ != NULL ? nb_json_double(targ)
                     : c != NULL  ? c->exec_timeout
                                  : MCP_EXEC_TIMEOUT;
    size_t room = c != NULL && c->max_output > 0 ? (size_t)c->max_output : MCP_MAX_OUTPUT;
    int64_t start = nb_clock_mono_ms(), deadline = start + (int64_t)(timeout * 1000.0), wait = 20,
            killed_at = 0;
    long long out_off = 0, err_off = 0, exit_code = -1, pid;
    int timed_out = 0, truncated = 0, killed = 0, ended = 0, rc;
    struct nb_buf path, proc, out, err;
    struct mcp_answer a;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || !strcmp(t->tool->args[i].name, "sandbox_id"))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    nb_json_kv_bool(g, "background", 1);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    t->polling = 1; /* this loop ticks the watch itself */
    mcp_watch_start(t, timeout, "killed", NULL);
    mcp_sandbox_path(&path, t, "/exec");
    nb_buf_init(&out, MCP_MAX_TEXT);
    nb_buf_init(&err, MCP_MAX_TEXT);
    nb_buf_init(&proc, 8192);
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) != 0) {
        mcp_answer_free(&a);
        goto out;
    }
    pid = nb_json_int(mcp_member(a.json, "pid"));
    mcp_answer_free(&a);
    mcp_sandbox_path(&proc, t, "/processes/");
    nb_buf_printf(&proc, "%lld", pid);

    while (!ended) {
        int64_t now;
        yajl_val st;

        nb_buf_reset(&path);
        nb_buf_printf(&path, "%s?stdout_offset=%lld&stderr_offset=%lld", proc.data, out_off,
                      err_off);
        if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) != 0) {
            mcp_answer_free(&a);
            /* a cancellation may cut the poll short (stdio drops a cancelled call's
             * connection): the command is killed all the same */
            if (killed || !mcp_cancelled(t))
                break;
        } else {
            /* output older than the offset asked for is gone: the agent keeps the last MiB */
            truncated |= nb_json_int(mcp_member(a.json, "stdout_offset")) > out_off ||
                         nb_json_int(mcp_member(a.json, "stderr_offset")) > err_off;
            truncated |= keep_output(&out, mcp_member_str(a.json, "stdout"), &room);
            truncated |= keep_output(&err, mcp_member_str(a.json, "stderr"), &room);
            out_off = nb_json_int(mcp_member(a.json, "stdout_next"));
            err_off = nb_json_int(mcp_member(a.json, "stderr_next"));
            st = mcp_member(a.json, "running");
            ended = st != NULL && YAJL_IS_FALSE(st);
            if (ended)
                exit_code = mcp_member(a.json, "exit_code") != NULL &&
                                    YAJL_IS_INTEGER(mcp_member(a.json, "exit_code"))
                                ? YAJL_GET_INTEGER(mcp_member(a.json, "exit_code"))
                                : -1;
            mcp_answer_free(&a);
            if (ended)
                break;
        }
        now = nb_clock_mono_ms();
        if (!killed && (mcp_cancelled(t) || now >= deadline)) {
            timed_out = !t->cancelled;
            killed = 1;
            killed_at = now;
            nb_buf_reset(&path);
            nb_buf_printf(&path, "%s?signal=KILL", proc.data);
            rc = mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a);
            mcp_answer_free(&a);
            if (rc != 0)
                break;
            wait = 20;
        } else if (killed && now >= killed_at + 10000) {
            break; /* killed 10 s ago and still listed as running: answer what we have */
        }
        if (!killed && now >= t->watch.next && mcp_watch_tick(&t->watch, -1, -1))
            continue; /* a client gone is a cancellation: kill at once */
        sleep_ms(wait);
        wait = wait * 2 > MCP_POLL_MAX_MS ? MCP_POLL_MAX_MS : wait * 2;
    }
    if (ended || killed) { /* forget the entry (an ended process's DELETE does); best effort */
        const struct mcp_backend *be = t->s->backend;
        struct nb_buf ignored;
        long status;
        nb_buf_init(&ignored, 65536);
        be->call(be->ctx, "DELETE", proc.data, NULL, 0, NULL, &status, &ignored, NULL);
        nb_buf_free(&ignored);
    }
    if (t->is_error || t->cancelled)
        goto out;

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "exit_code", timed_out ? 137 : exit_code);
    nb_json_kv_bool(g, "timed_out", timed_out);
    nb_json_kv_bool(g, "truncated", truncated);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, out.data != NULL ? out.data : "", out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, err.data != NULL ? err.data : "", err.len);
    nb_json_kv_int(g, "duration_ms", nb_clock_mono_ms() - start);
    nb_json_kv_int(g, "pid", pid);
    yajl_gen_map_close(g);
    mcp_set_structured(t, g);
    mcp_put_exec_result(t, t->structured);
out:
    nb_buf_free(&proc);
    nb_buf_free(&out);
    nb_buf_free(&err);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_sandbox_exec(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    char *body;

    if (t->progress_token != NULL) {
        exec_watched(t);
        return;
    }
    body = mcp_body_from_args(t, "sandbox_id");

    mcp_sandbox_path(&path, t, "/exec");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        mcp_put_exec_result(t, a.json);
        mcp_keep_structured(t, &a, "output"); /* stdout + stderr again */
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_sandbox_start_process(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_gen g = nb_json_gen();
    char *body;

    yajl_gen_map_open(g);
    for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
        if (t->f[i].val == NULL || !strcmp(t->tool->args[i].name, "sandbox_id"))
            continue;
        nb_json_cstr(g, t->tool->args[i].name);
        nb_json_tree(g, t->f[i].val);
    }
    nb_json_kv_bool(g, "background", 1);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    mcp_sandbox_path(&path, t, "/exec");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Started process ");
        mcp_put_value(&t->text, mcp_member(a.json, "pid"));
        nb_buf_printf(&t->text, " in the background. Read its output with "
                                "sandbox_read_process_output; stop it with sandbox_kill_process.");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

/* One process entry as a line: pid, state, command. */
static void put_process(struct nb_buf *b, yajl_val p)
{
    yajl_val cmd = mcp_member(p, "command");

    nb_buf_printf(b, "pid ");
    mcp_put_value(b, mcp_member(p, "pid"));
    if (YAJL_IS_TRUE(mcp_member(p, "running"))) {
        nb_buf_printf(b, "  running");
    } else {
        nb_buf_printf(b, "  exited with ");
        mcp_put_value(b, mcp_member(p, "exit_code"));
    }
    nb_buf_printf(b, "  stdout ");
    mcp_put_size_val(b, mcp_member(p, "stdout_bytes"));
    nb_buf_printf(b, ", stderr ");
    mcp_put_size_val(b, mcp_member(p, "stderr_bytes"));
    nb_buf_printf(b, "  command:");
    for (size_t i = 0; cmd != NULL && YAJL_IS_ARRAY(cmd) && i < cmd->u.array.len; i++)
        nb_buf_printf(b, " %s", nb_json_string(cmd->u.array.values[i]));
    nb_buf_printf(b, "\n");
}

void mcp_tool_sandbox_list_processes(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    yajl_val list;

    mcp_sandbox_path(&path, t, "/processes");
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        list = mcp_member(a.json, "processes");
        if (list == NULL || !YAJL_IS_ARRAY(list) || list->u.array.len == 0)
            nb_buf_printf(&t->text, "No background processes.");
        for (size_t i = 0; list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len; i++)
            put_process(&t->text, list->u.array.values[i]);
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

/* ".../processes/PID" + suffix */
static void process_path(struct nb_buf *p, struct tool_call *t, const char *suffix)
{
    mcp_sandbox_path(p, t, "/processes/");
    nb_buf_printf(p, "%lld%s", nb_json_int(mcp_arg_val(t, "pid")), suffix);
}

void mcp_tool_sandbox_read_process_output(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;

    process_path(&path, t, "");
    nb_buf_printf(
        &path, "?stdout_offset=%lld&stderr_offset=%lld",
        mcp_arg_val(t, "stdout_offset") ? nb_json_int(mcp_arg_val(t, "stdout_offset")) : 0LL,
        mcp_arg_val(t, "stderr_offset") ? nb_json_int(mcp_arg_val(t, "stderr_offset")) : 0LL);
    if (mcp_api_call(t, "GET", path.data, NULL, 0, NULL, &a) == 0) {
        put_process(&t->text, a.json);
        nb_buf_printf(&t->text, "stdout_next: ");
        mcp_put_value(&t->text, mcp_member(a.json, "stdout_next"));
        nb_buf_printf(&t->text, "  stderr_next: ");
        mcp_put_value(&t->text, mcp_member(a.json, "stderr_next"));
        nb_buf_printf(&t->text, "\n--- stdout ---\n");
        mcp_put_block(&t->text, mcp_member_str(a.json, "stdout"));
        nb_buf_printf(&t->text, "--- stderr ---\n");
        mcp_put_block(&t->text, mcp_member_str(a.json, "stderr"));
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}

void mcp_tool_sandbox_write_process_stdin(struct tool_call *t)
{
    struct mcp_answer a;
    struct nb_buf path;
    char *body;

    { /* the body: data, encoding, eof */
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        for (size_t i = 0; t->tool->args[i].name != NULL; i++) {
            const char *n = t->tool->args[i].name;
            if (t->f[i].val == NULL || !strcmp(n, "sandbox_id") || !strcmp(n, "pid"))
                continue;
            nb_json_cstr(g, n);
            nb_json_tree(g, t->f[i].val);
        }
        yajl_gen_map_close(g);
        body = nb_json_gen_take(g);
    }
    process_path(&path, t, "/stdin");
    if (mcp_api_call(t, "POST", path.data, body, strlen(body), "application/json", &a) == 0) {
        nb_buf_printf(&t->text, "Wrote ");
        mcp_put_size_val(&t->text, mcp_member(a.json, "written"));
        nb_buf_printf(&t->text, " to the stdin of process %lld%s.",
                      nb_json_int(mcp_arg_val(t, "pid")),
                      YAJL_IS_TRUE(mcp_arg_val(t, "eof")) ? ", then closed it" : "");
        mcp_keep_structured(t, &a, NULL);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
    free(body);
}

void mcp_tool_sandbox_kill_process(struct tool_call *t)
{
    const char *sig = mcp_arg_val(t, "signal") != NULL ? mcp_arg_str(t, "signal") : "KILL";
    struct mcp_answer a;
    struct nb_buf path;

    process_path(&path, t, "?signal=");
    nb_buf_printf(&path, "%s", sig);
    if (mcp_api_call(t, "DELETE", path.data, NULL, 0, NULL, &a) == 0) {
        yajl_gen g = nb_json_gen();
        nb_buf_printf(&t->text, "Sent SIG%s to process %lld.", sig,
                      nb_json_int(mcp_arg_val(t, "pid")));
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "pid", nb_json_int(mcp_arg_val(t, "pid")));
        nb_json_kv_str(g, "signal", sig);
        yajl_gen_map_close(g);
        mcp_set_structured(t, g);
    }
    mcp_answer_free(&a);
    nb_buf_free(&path);
}
