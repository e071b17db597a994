/*
 * api_processes.c - background commands, kept by the sandbox's agent:
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
 * is still kept.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "api.h"
#include "base64.h"
#include "json.h"
#include "sandbox.h"

#define PROC_OP_TIMEOUT_MS 10000

/* A process entry ('l' frame) as the agent reports it. */
struct proc_info {
    uint32_t pid;
    char state;
    int32_t exit_code;
    uint32_t signal;
    uint64_t out_total, err_total, started;
    const unsigned char *body; /* for the argv fields */
    uint32_t len;
};

static void proc_parse(const unsigned char *body, uint32_t len, struct proc_info *p)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    memset(p, 0, sizeof(*p));
    p->body = body;
    p->len = len;
    nba_fields_init(&it, body, len);
    while (nba_fields_next(&it, &tag, &v, &l) == 1) {
        if (tag == NBA_T_PID && l == 4)
            p->pid = nba_get_u32(v);
        else if (tag == NBA_T_KIND && l == 1)
            p->state = (char)v[0];
        else if (tag == NBA_T_EXITCODE && l == 4)
            p->exit_code = (int32_t)nba_get_u32(v);
        else if (tag == NBA_T_SIG && l == 4)
            p->signal = nba_get_u32(v);
        else if (tag == NBA_T_OFF && l == 8)
            p->out_total = nba_get_u64(v);
        else if (tag == NBA_T_EOFF && l == 8)
            p->err_total = nba_get_u64(v);
        else if (tag == NBA_T_MTIME && l == 8)
            p->started = nba_get_u64(v);
    }
}

/* The entry's keys into an open map. */
static void proc_json(yajl_gen g, const struct proc_info *p)
{
    struct nba_fields it;
    uint8_t tag;
    const unsigned char *v;
    uint32_t l;
    int running = p->state == NBA_PS_RUNNING;

    nb_json_kv_int(g, "pid", p->pid);
    nb_json_cstr(g, "command");
    yajl_gen_array_open(g);
    nba_fields_init(&it, p->body, p->len);
    while (nba_fields_next(&it, &tag, &v, &l) == 1)
        if (tag == NBA_T_ARG)
            nb_json_str(g, (const char *)v, l);
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "running", running);
    nb_json_cstr(g, "exit_code");
    if (running)
        yajl_gen_null(g);
    else
        yajl_gen_integer(g, p->signal ? 128 + (long long)p->signal : p->exit_code);
    nb_json_kv_int(g, "signal", p->signal);
    nb_json_kv_int(g, "started_at", (long long)p->started);
    nb_json_kv_int(g, "stdout_bytes", (long long)p->out_total);
    nb_json_kv_int(g, "stderr_bytes", (long long)p->err_total);
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

static void proc_fail(struct nb_req *r, struct nb_apierr *ae)
{
    if (ae->status == 503 && !strcmp(ae->code, "agent_unavailable"))
        nb_apierr_set(ae, 503, "agent_unavailable",
                      "this sandbox's agent (nanobox-init) does not answer; processes need it");
    nb_http_error(r, ae);
}

static int list_cb(void *ctx, uint8_t type, const unsigned char *body, uint32_t len)
{
    yajl_gen g = ctx;
    struct proc_info p;
    if (type != NBA_PROC)
        return 0;
    proc_parse(body, len, &p);
    yajl_gen_map_open(g);
    proc_json(g, &p);
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
    if (nb_agent_call(&slot, NBA_PLIST, NULL, "list the processes", PROC_OP_TIMEOUT_MS, list_cb, g,
                      &ae) != 0) {
        proc_fail(r, &ae);
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

struct query_ctx {
    struct proc_info p;
    int have;
    struct nb_buf out, err;
};

static int query_cb(void *ctx, uint8_t type, const unsigned char *body, uint32_t len)
{
    struct query_ctx *q = ctx;
    if (type == NBA_PROC && !q->have) {
        /* the entry's fields point into a buffer the next frame reuses: copy */
        unsigned char *copy = nb_xmalloc(len ? len : 1);
        memcpy(copy, body, len);
        proc_parse(copy, len, &q->p);
        q->have = 1;
    } else if (type == NBA_STDOUT) {
        nb_buf_append_some(&q->out, body, len);
    } else if (type == NBA_STDERR) {
        nb_buf_append_some(&q->err, body, len);
    }
    return 0;
}

static void proc_get(struct nb_app *a, struct nb_req *r, const char *id, uint32_t pid)
{
    struct nb_slot slot;
    struct nb_apierr ae;
    struct query_ctx q;
    struct nb_buf f;
    uint64_t off_out, off_err;

    if (query_offset(r, "stdout_offset", &off_out) != 0 || query_offset(r, "stderr_offset", &off_err) != 0 ||
        proc_slot(a, r, id, &slot) != 0)
        return;
    memset(&q, 0, sizeof(q));
    nb_buf_init(&q.out, (size_t)4 * 1024 * 1024);
    nb_buf_init(&q.err, (size_t)4 * 1024 * 1024);
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field_u64(&f, NBA_T_OFF, off_out);
    nb_agent_field_u64(&f, NBA_T_EOFF, off_err);
    if (nb_agent_call(&slot, NBA_PQUERY, &f, "read the process", PROC_OP_TIMEOUT_MS, query_cb, &q, &ae) != 0) {
        proc_fail(r, &ae);
    } else if (!q.have) {
        nb_http_fail(r, 502, "agent_error", "the sandbox's agent answered without the process");
    } else {
        yajl_gen g = nb_json_gen();
        yajl_gen_map_open(g);
        proc_json(g, &q.p);
        nb_json_cstr(g, "stdout");
        nb_json_str(g, q.out.data ? q.out.data : "", q.out.len);
        nb_json_cstr(g, "stderr");
        nb_json_str(g, q.err.data ? q.err.data : "", q.err.len);
        /* what was sent ends at the totals: where it began follows */
        nb_json_kv_int(g, "stdout_offset", (long long)(q.p.out_total - q.out.len));
        nb_json_kv_int(g, "stderr_offset", (long long)(q.p.err_total - q.err.len));
        nb_json_kv_int(g, "stdout_next", (long long)q.p.out_total);
        nb_json_kv_int(g, "stderr_next", (long long)q.p.err_total);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
        yajl_gen_free(g);
    }
    if (q.have)
        free((void *)q.p.body);
    nb_buf_free(&f);
    nb_buf_free(&q.out);
    nb_buf_free(&q.err);
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
    struct nb_buf data, fields;
    yajl_val body = NULL;
    char err[256];
    const char *enc;

    if (api_read_json(a, r, &body) != 0)
        return;
    nb_buf_init(&data, a->conf.max_body);
    nb_buf_init(&fields, NBA_MAX_BODY);
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
    if (data.len > NBA_MAX_BODY - 64) {
        nb_http_fail(r, 413, "too_large", "send at most %u bytes of stdin per call", NBA_MAX_BODY - 64);
        goto out;
    }
    if (proc_slot(a, r, id, &slot) != 0)
        goto out;
    nb_agent_field_u32(&fields, NBA_T_PID, pid);
    nb_agent_field(&fields, NBA_T_DATA, data.data, data.len);
    if (f[2].val != NULL && YAJL_IS_TRUE(f[2].val))
        nb_agent_field(&fields, NBA_T_CLOSE, NULL, 0);
    if (nb_agent_call(&slot, NBA_PSTDIN, &fields, "write to the process", PROC_OP_TIMEOUT_MS, NULL, NULL,
                      &ae) != 0) {
        proc_fail(r, &ae);
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
    nb_buf_free(&fields);
    yajl_tree_free(body);
}

static const struct {
    const char *name;
    int sig;
} proc_signals[] = {
    {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP},
    {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT},
};

static void proc_signal(struct nb_app *a, struct nb_req *r, const char *id, uint32_t pid)
{
    char name[16] = "KILL";
    const char *n;
    struct nb_slot slot;
    struct nb_apierr ae;
    struct nb_buf f;
    int sig = 0;

    nb_http_query(r, "signal", name, sizeof(name));
    n = strncmp(name, "SIG", 3) ? name : name + 3;
    for (size_t i = 0; i < sizeof(proc_signals) / sizeof(proc_signals[0]); i++)
        if (!strcmp(n, proc_signals[i].name))
            sig = proc_signals[i].sig;
    if (sig == 0) {
        nb_http_fail(r, 400, "bad_field", "signal must be one of KILL, TERM, INT, HUP, QUIT, USR1, USR2, STOP, CONT");
        return;
    }
    if (proc_slot(a, r, id, &slot) != 0)
        return;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field_u32(&f, NBA_T_SIG, (uint32_t)sig);
    if (nb_agent_call(&slot, NBA_PSIGNAL, &f, "signal the process", PROC_OP_TIMEOUT_MS, NULL, NULL, &ae) != 0)
        proc_fail(r, &ae);
    else
        nb_http_no_content(r);
    nb_buf_free(&f);
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
