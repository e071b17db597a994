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
    if (p->pty)
        nb_json_kv_bool(g, "pty", 1); /* a terminal: all its output is stdout */
}

static int list_each(void *arg, const struct nb_proc_info *p)
{
    yajl_gen g = arg;
    yajl_gen_map_open(g);
    proc_json(g, p);
    yajl_gen_map_close(g);
    return 0;
}

/* GET .../processes */
int api_procs_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_gen g;
    int rc = NB_ERR;

    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "processes");
    yajl_gen_array_open(g);
    if (nb_procs_list(a, &slot, list_each, g, ae) == 0) {
        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
        rc = NB_OK;
    }
    yajl_gen_free(g);
    return rc;
}

/* A non-negative offset query parameter (absent: 0); -1 with ae set. */
static int query_offset(struct nb_req *r, const char *key, uint64_t *out, struct nb_apierr *ae)
{
    char v[32], *end;
    *out = 0;
    if (nb_http_query(r, key, v, sizeof(v)) != 0)
        return 0;
    *out = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0') {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s must be a byte offset (0 or more)", key);
        return -1;
    }
    return 0;
}

/* The {pid} segment (the router checked its syntax). */
static uint32_t route_pid(const struct nb_route_args *ra)
{
    uint32_t pid = 0;
    nb_route_pid(ra->arg, &pid);
    return pid;
}

/* GET .../processes/{pid}?stdout_offset=&stderr_offset= */
int api_procs_get(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct nb_proc_output po;
    uint64_t off_out, off_err;
    yajl_gen g;

    if (query_offset(r, "stdout_offset", &off_out, ae) != 0 ||
        query_offset(r, "stderr_offset", &off_err, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        return NB_ERR;
    if (nb_procs_read(a, &slot, route_pid(ra), off_out, off_err, &po, ae) != 0) {
        nb_proc_output_free(&po);
        return NB_ERR;
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
    return NB_OK;
}

/* POST .../processes/{pid}/stdin {data, encoding?, eof?} */
int api_procs_stdin(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                    struct nb_apierr *ae)
{
    struct nb_jfield f[] = {
        {"data", NB_JT_STRING, NULL},
        {"encoding", NB_JT_STRING, NULL},
        {"eof", NB_JT_BOOL, NULL},
    };
    struct nb_slot slot;
    struct nb_buf data;
    yajl_val body = NULL;
    char err[256];
    const char *enc;
    yajl_gen g;
    int rc = NB_ERR;

    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    nb_buf_init(&data, a->conf.max_body);
    if (nb_json_fields(body, f, 3, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    enc = f[1].val ? nb_json_string(f[1].val) : "utf-8";
    if (f[0].val != NULL) {
        const char *text = nb_json_string(f[0].val);
        if (!strcmp(enc, "base64")) {
            if (nb_base64_decode(&data, text, strlen(text)) != NB_OK) {
                nb_apierr_set(ae, NB_E_INVALID, "bad_field", "data is not valid base64");
                goto out;
            }
        } else if (!strcmp(enc, "utf-8") || !strcmp(enc, "utf8")) {
            nb_buf_append(&data, text, strlen(text));
        } else {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "encoding must be \"utf-8\" or \"base64\"");
            goto out;
        }
    }
    if (data.len > NB_PROCS_STDIN_MAX) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large", "send at most %u bytes of stdin per call",
                      NB_PROCS_STDIN_MAX);
        goto out;
    }
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_procs_stdin(a, &slot, route_pid(ra), data.data, data.len,
                       f[2].val != NULL && YAJL_IS_TRUE(f[2].val), ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "written", (long long)data.len);
    yajl_gen_map_close(g);
    nb_http_json(r, 200, g);
    yajl_gen_free(g);
    rc = NB_OK;
out:
    nb_buf_free(&data);
    yajl_tree_free(body);
    return rc;
}

/* DELETE .../processes/{pid}?signal=KILL */
int api_procs_signal(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    char name[16] = "KILL";
    struct nb_slot slot;
    int sig;

    nb_http_query(r, "signal", name, sizeof(name));
    sig = nb_procs_signal_number(name);
    if (sig == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "signal must be one of %s",
                      nb_procs_signal_names);
        return NB_ERR;
    }
    if (nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_procs_signal(a, &slot, route_pid(ra), sig, ae) != 0)
        return NB_ERR;
    nb_http_no_content(r);
    return NB_OK;
}
