/*
 * api_processes.c - the routes of background commands, over the
 * processes engine (procs.c):
 *
 *   POST   /sandbox/{id}/exec {"background": true, ...}  -> 201 {pid}  (api_exec.c)
 *   GET    /sandbox/{id}/processes                       -> {processes: [...]}
 *   GET    /sandbox/{id}/processes/{pid}?stdout_offset=&stderr_offset=
 *                                                        -> status + output since the offsets
 *   POST   /sandbox/{id}/processes/{pid}/stdin {data, encoding?, eof?}
 *   DELETE /sandbox/{id}/processes/{pid}?signal=KILL     -> 204
 *
 * The agent keeps each process's last 1 MiB of stdout and of stderr; offsets
 * count bytes since the process started, so a client polls with the "next"
 * offsets of the previous answer and never misses or repeats output that
 * is still kept. What is here is HTTP: path, query and body in, JSON out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "base64.h"
#include "json.h"
#include "procs.h"
#include "sandbox.h"

/* The entry's keys into an open map. */
static void proc_json(yajl_gen g, const struct nb_proc_info *p)
{
    const char *arg;
    size_t len, pos = 0;

    nb_json_kv_int(g, "pid", p->pid);
    nb_json_cstr(g, "command");
    yajl_gen_array_open(g);
    while (nb_proc_next_arg(p, &pos, &arg, &len))
        nb_json_str(g, arg, len);
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "running", p->running);
    nb_json_cstr(g, "exit_code");
    if (p->running)
        yajl_gen_null(g);
    else
        yajl_gen_integer(g, p->exit_code);
    nb_json_kv_int(g, "signal", p->signal);
    nb_json_kv_int(g, "started_at", (long long)p->started_at);
    nb_json_kv_int(g, "stdout_bytes", (long long)p->stdout_bytes);
    nb_json_kv_int(g, "stderr_bytes", (long long)p->stderr_bytes);
}

static int proc_slot(struct nb_app *a, struct nb_req *r, const char *id, struct nb_slot *slot)
{
    struct nb_apierr ae;
    if (nb_sandbox_get(a, id, slot, &ae) != 0) {
        nb_http_error(r, &ae);
        return -1;
    }
    return 0;
}

static int list_each(void *arg, const struct nb_proc_info *p)
{
    yajl_gen g = arg;
    yajl_gen_map_open(g);
    proc_json(g, p);
    yajl_gen_map_close(g);
    return 0;
}

static void proc_list(struct nb_app *a, struct nb_req *r, const char *id)
{
    struct nb_slot slot;
    struct nb_apierr ae;
    yajl_gen g;
    if (proc_slot(a, r, id, &slot) != 0)
        return;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "processes");
    yajl_gen_array_open(g);
    if (nb_procs_list(a, &slot, list_each, g, &ae) != 0) {
        nb_http_error(r, &ae);
    } else {
        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
    }
    yajl_gen_free(g);
}

/* A pid path segment: 1..2^22 (pid_max), digits only. */
static int parse_pid(const char *s, uint32_t *out)
{
    char *end;
    unsigned long v;
    if (*s < '1' || *s > '9' || strlen(s) > 7)
        return -1;
    v = strtoul(s, &end, 10);
    if (*end != '\0' || v > 4194304)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A non-negative offset query parameter; -1 after answering. */
static int query_offset(struct nb_req *r, const char *key, uint64_t *out)
{
    char v[32], *end;
    *out = 0;
    if (nb_http_query(r, key, v, sizeof(v)) != 0)
        return 0;
    *out = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0') {
        nb_http_fail(r, 400, "bad_field", "%s must be a byte offset (0 or more)", key);
        return -1;
    }
    return 0;
}

static void proc_get(struct nb_app *a, struct nb_req *r, const char *id, uint32_t pid)
{
    struct nb_slot slot;
    struct nb_apierr ae;
    struct nb_proc_output po;
    uint64_t off_out, off_err;
    yajl_gen g;

    if (query_offset(r, "stdout_offset", &off_out) != 0 || query_offset(r, "stderr_offset", &off_err) != 0 ||
        proc_slot(a, r, id, &slot) != 0)
        return;
    if (nb_procs_read(a, &slot, pid, off_out, off_err, &po, &ae) != 0) {
        nb_http_error(r, &ae);
        nb_proc_output_free(&po);
        return;
    }
    g = nb_json_gen();
    yajl_gen_map_open(g);
    proc_json(g, &po.info);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, po.out.data ? po.out.data : "", po.out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, po.err.data ? po.err.data : "", po.err.len);
    /* what was sent ends at the totals: where it began follows */
    nb_json_kv_int(g, "stdout_offset", (long long)(po.info.stdout_bytes - po.out.len));
    nb_json_kv_int(g, "stderr_offset", (long long)(po.info.stderr_bytes - po.err.len));
    nb_json_kv_int(g, "stdout_next", (long long)po.info.stdout_bytes);
    nb_json_kv_int(g, "stderr_next", (long long)po.info.stderr_bytes);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    nb_proc_output_free(&po);
}

static void proc_stdin(struct nb_app *a, struct nb_req *r, const char *id, uint32_t pid)
{
    struct nb_jfield f[] = {
        {"data", NB_JT_STRING, NULL},
        {"encoding", NB_JT_STRING, NULL},
        {"eof", NB_JT_BOOL, NULL},
    };
    struct nb_slot slot;
    struct nb_apierr ae;
    struct nb_buf data;
    yajl_val body = NULL;
    char err[256];
    const char *enc;

    if (api_read_json(a, r, &body) != 0)
        return;
    nb_buf_init(&data, a->conf.max_body);
    if (nb_json_fields(body, f, 3, err, sizeof(err)) != 0) {
        nb_http_fail(r, 400, "bad_field", "%s", err);
        goto out;
    }
    enc = f[1].val ? nb_json_string(f[1].val) : "utf-8";
    if (f[0].val != NULL) {
        const char *text = nb_json_string(f[0].val);
        if (!strcmp(enc, "base64")) {
            if (nb_base64_decode(&data, text, strlen(text)) != NB_OK) {
                nb_http_fail(r, 400, "bad_field", "data is not valid base64");
                goto out;
            }
        } else if (!strcmp(enc, "utf-8") || !strcmp(enc, "utf8")) {
            nb_buf_append(&data, text, strlen(text));
        } else {
            nb_http_fail(r, 400, "bad_field", "encoding must be \"utf-8\" or \"base64\"");
            goto out;
        }
    }
    if (data.len > NB_PROCS_STDIN_MAX) {
        nb_http_fail(r, 413, "too_large", "send at most %u bytes of stdin per call", NB_PROCS_STDIN_MAX);
        goto out;
    }
    if (proc_slot(a, r, id, &slot) != 0)
        goto out;
    if (nb_procs_stdin(a, &slot, pid, data.data, data.len, f[2].val != NULL && YAJL_IS_TRUE(f[2].val),
                       &ae) != 0) {
        nb_http_error(r, &ae);
    } else {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        nb_json_kv_int(g, "written", (long long)data.len);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
        yajl_gen_free(g);
    }
out:
    nb_buf_free(&data);
    yajl_tree_free(body);
}

static void proc_signal(struct nb_app *a, struct nb_req *r, const char *id, uint32_t pid)
{
    char name[16] = "KILL";
    struct nb_slot slot;
    struct nb_apierr ae;
    int sig;

    nb_http_query(r, "signal", name, sizeof(name));
    sig = nb_procs_signal_number(name);
    if (sig == 0) {
        nb_http_fail(r, 400, "bad_field", "signal must be one of %s", nb_procs_signal_names);
        return;
    }
    if (proc_slot(a, r, id, &slot) != 0)
        return;
    if (nb_procs_signal(a, &slot, pid, sig, &ae) != 0)
        nb_http_error(r, &ae);
    else
        nb_http_no_content(r);
}

void api_processes(struct nb_app *a, struct nb_req *r, const char *id, const char *pid_s,
                   const char *op)
{
    const char *m = r->method;
    uint32_t pid;
    if (pid_s[0] == '\0') {
        if (!strcmp(m, "GET"))
            proc_list(a, r, id);
        else
            nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use GET", m);
        return;
    }
    if (parse_pid(pid_s, &pid) != 0) {
        nb_http_fail(r, 400, "bad_pid", "\"%.32s\" is not a process id", pid_s);
        return;
    }
    if (!strcmp(op, "stdin")) {
        if (!strcmp(m, "POST"))
            proc_stdin(a, r, id, pid);
        else
            nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use POST", m);
    } else if (op[0] != '\0') {
        nb_http_fail(r, 404, "no_route", "no such route: %.200s", r->path);
    } else if (!strcmp(m, "GET")) {
        proc_get(a, r, id, pid);
    } else if (!strcmp(m, "DELETE")) {
        proc_signal(a, r, id, pid);
    } else {
        nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use GET, DELETE", m);
    }
}
