/*
 * api_exec.c - POST /sandbox/{id}/exec: validate the request, then run
 * /bin/sh -c COMMAND through the exec engine (exec.c) and answer with the
 * original NanoBox keys (output, exit_code, timed_out) and the new ones,
 * as one JSON object or, when asked, as NDJSON events while it runs. With
 * "background" the command is started and its pid answered at once.
 *
 * With "pty": {cols, rows} the command runs on a terminal: the answer is
 * always a stream (a start event with the pid, output, keepalives, the
 * exit), and POST /sandbox/{id}/pty/{pid}/input and .../resize, served by
 * other workers, reach it through the agent by that pid. The stream's end
 * (the client gone) hangs the terminal up and kills what runs on it.
 * With "pty" and "background" the terminal is a background process of the
 * agent instead (201 {pid}): it runs on without a client, its output is
 * read as any background process's (GET /sandbox/{id}/processes/{pid}).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "base64.h"
#include "exec.h"
#include "json.h"
#include "sandbox.h"

/*
 * What to run: "command" (a /bin/sh -c string) or "argv" (the program and
 * its arguments, passed as they are), exactly one of them. max_command caps
 * the bytes of either (argv: all its strings together). *out is argv for the
 * engine, NULL-terminated; the caller frees the array (not the strings, which
 * are the request's).
 */
static int exec_argv(const struct nb_conf *c, yajl_val command, yajl_val argv, const char ***out,
                     struct nb_apierr *ae)
{
    const char **v;
    size_t n, total = 0;

    *out = NULL;
    if ((command == NULL) == (argv == NULL)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      command == NULL ? "give \"command\" (a shell command line) or \"argv\" "
                                        "(an array: the program and its arguments)"
                                      : "give \"command\" or \"argv\", not both");
        return -1;
    }
    if (command != NULL) {
        const char *s = nb_json_string(command);
        if (*s == '\0' || strlen(s) > c->max_command) {
            nb_apierr_set(ae, *s ? NB_E_OUT_OF_RANGE : NB_E_INVALID,
                          *s ? "out_of_range" : "bad_field",
                          "command must be 1 to %zu bytes (max_command)", c->max_command);
            return -1;
        }
        v = nb_xcalloc(4, sizeof(*v));
        v[0] = "/bin/sh";
        v[1] = "-c";
        v[2] = s;
        *out = v;
        return 0;
    }
    n = argv->u.array.len;
    if (n == 0 || n > NB_EXEC_MAX_ARGS) {
        nb_apierr_set(ae, n ? NB_E_OUT_OF_RANGE : NB_E_INVALID, n ? "out_of_range" : "bad_field",
                      "argv must hold 1 to %u strings", NB_EXEC_MAX_ARGS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        yajl_val e = argv->u.array.values[i];
        if (!YAJL_IS_STRING(e)) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "argv[%zu] must be a string", i);
            return -1;
        }
        total += strlen(nb_json_string(e));
    }
    if (nb_json_string(argv->u.array.values[0])[0] == '\0') {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "argv[0], the program, must not be empty");
        return -1;
    }
    if (total > c->max_command) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range",
                      "argv must be at most %zu bytes in all (max_command)", c->max_command);
        return -1;
    }
    v = nb_xcalloc(n + 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = nb_json_string(argv->u.array.values[i]);
    *out = v;
    return 0;
}

/* A streamed exec: one NDJSON line per piece of output, UTF-8 kept whole. */
struct exec_stream {
    struct nb_req *r;
    yajl_gen g;
    char carry[2][4]; /* an incomplete UTF-8 sequence held for the next piece */
    size_t n_carry[2];
    int gone;
};

/* Bytes at the end of p[0..n) that start a UTF-8 sequence not yet complete. */
static size_t utf8_tail(const unsigned char *p, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = p[n - back];
        size_t need;
        if ((c & 0xC0) == 0x80)
            continue; /* continuation byte: look further back */
        need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

static int stream_event(struct exec_stream *st, int is_stderr, const char *data, size_t len)
{
    yajl_gen_map_open(st->g);
    nb_json_kv_str(st->g, "type", is_stderr ? "stderr" : "stdout");
    nb_json_cstr(st->g, "data");
    nb_json_str(st->g, data, len);
    yajl_gen_map_close(st->g);
    if (nb_http_stream_line(st->r, st->g) != 0)
        st->gone = 1;
    return st->gone ? -1 : 0;
}

static int stream_output(void *ctx, int is_stderr, const char *data, size_t len)
{
    struct exec_stream *st = ctx;
    struct nb_buf b;
    size_t keep;
    int rc;
    if (st->gone)
        return -1;
    nb_buf_init(&b, len + sizeof(st->carry[0]));
    nb_buf_append(&b, st->carry[is_stderr], st->n_carry[is_stderr]);
    nb_buf_append(&b, data, len);
    keep = utf8_tail((const unsigned char *)b.data, b.len);
    memcpy(st->carry[is_stderr], b.data + b.len - keep, keep);
    st->n_carry[is_stderr] = keep;
    rc = b.len > keep ? stream_event(st, is_stderr, b.data, b.len - keep) : 0;
    nb_buf_free(&b);
    return rc;
}

/* Output held back for an incomplete UTF-8 sequence goes out now. */
static void stream_flush(struct exec_stream *st)
{
    for (int i = 0; i < 2; i++)
        if (st->n_carry[i] > 0 && !st->gone)
            stream_event(st, i, st->carry[i], st->n_carry[i]); /* repaired as U+FFFD */
}

/*
 * The last line: the exit event. (An error event, when the command could
 * not run, is the HTTP layer's: nb_http_finalize ends an NDJSON stream so.)
 */
static void stream_exit(struct exec_stream *st, const struct nb_exec_result *res)
{
    if (st->gone)
        return;
    yajl_gen_map_open(st->g);
    nb_json_kv_str(st->g, "type", "exit");
    nb_json_kv_int(st->g, "exit_code", res->exit_code);
    nb_json_kv_bool(st->g, "timed_out", res->timed_out);
    nb_json_kv_bool(st->g, "oom_killed", res->oom_killed);
    nb_json_kv_bool(st->g, "truncated", res->truncated);
    nb_json_kv_int(st->g, "duration_ms", res->duration_ms);
    yajl_gen_map_close(st->g);
    nb_http_stream_line(st->r, st->g);
}

/* A data field (named name) decoded per its encoding field (named enc_name)
 * into b; -1 with ae set. */
static int exec_data(yajl_val in, yajl_val enc, const char *name, const char *enc_name,
                     struct nb_buf *b, struct nb_apierr *ae)
{
    const char *text, *e = enc ? nb_json_string(enc) : "utf-8";
    if (in == NULL) {
        if (enc != NULL) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s given without %s", enc_name, name);
            return -1;
        }
        return 0;
    }
    text = nb_json_string(in);
    if (!strcmp(e, "utf-8") || !strcmp(e, "utf8")) {
        nb_buf_append(b, text, strlen(text));
        return 0;
    }
    if (!strcmp(e, "base64")) {
        if (nb_base64_decode(b, text, strlen(text)) != NB_OK) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s is not valid base64", name);
            return -1;
        }
        return 0;
    }
    nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s must be \"utf-8\" or \"base64\"", enc_name);
    return -1;
}

/* {cols, rows} of a terminal (the "pty" object, a resize's body); -1 with ae set. */
static int pty_size(yajl_val v, const char *what, unsigned *cols, unsigned *rows,
                    struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"cols", NB_JT_INT, NULL}, {"rows", NB_JT_INT, NULL}};
    char err[256];
    long long c, r;

    if (nb_json_fields(v, f, 2, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s: %s", what, err);
        return -1;
    }
    if (f[0].val == NULL || f[1].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s needs \"cols\" and \"rows\"", what);
        return -1;
    }
    c = nb_json_int(f[0].val);
    r = nb_json_int(f[1].val);
    if (c < 1 || r < 1 || c > NB_EXEC_PTY_MAX || r > NB_EXEC_PTY_MAX) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "out_of_range", "%s: cols and rows must be 1 to %d",
                      what, NB_EXEC_PTY_MAX);
        return -1;
    }
    *cols = (unsigned)c;
    *rows = (unsigned)r;
    return 0;
}

/* A PTY session's first line: its pid, for the input and resize routes.
 * Its headers go out only now: one that cannot start (no PTY left: 429)
 * gets its own status. */
static void stream_start(void *ctx, int pid)
{
    struct exec_stream *st = ctx;
    nb_http_stream_begin(st->r, 200, "application/x-ndjson");
    yajl_gen_map_open(st->g);
    nb_json_kv_str(st->g, "type", "start");
    nb_json_kv_int(st->g, "pid", pid);
    yajl_gen_map_close(st->g);
    if (nb_http_stream_line(st->r, st->g) != 0)
        st->gone = 1;
}

/* A line while a terminal is quiet: nginx's read timeout does not cut it,
 * and a client gone is found by the write. */
static int stream_keepalive(void *ctx)
{
    struct exec_stream *st = ctx;
    if (st->gone)
        return -1;
    yajl_gen_map_open(st->g);
    nb_json_kv_str(st->g, "type", "keepalive");
    yajl_gen_map_close(st->g);
    if (nb_http_stream_line(st->r, st->g) != 0)
        st->gone = 1;
    return st->gone ? -1 : 0;
}

int api_sandbox_exec(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                     struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_jfield f[] = {
        {"command", NB_JT_STRING, NULL}, {"timeout", NB_JT_NUMBER, NULL},
        {"cwd", NB_JT_STRING, NULL},     {"env", NB_JT_OBJECT, NULL},
        {"stdin", NB_JT_STRING, NULL},   {"stdin_encoding", NB_JT_STRING, NULL},
        {"stream", NB_JT_BOOL, NULL},    {"background", NB_JT_BOOL, NULL},
        {"argv", NB_JT_ARRAY, NULL},     {"pty", NB_JT_OBJECT, NULL},
        {"user", NB_JT_STRING, NULL},
    };
    enum {
        F_COMMAND,
        F_TIMEOUT,
        F_CWD,
        F_ENV,
        F_STDIN,
        F_STDIN_ENC,
        F_STREAM,
        F_BACKGROUND,
        F_ARGV,
        F_PTY,
        F_USER
    };
    struct nb_exec_result res;
    struct nb_slot slot;
    struct nb_exec_req rq = {0};
    struct exec_stream st = {0};
    struct nb_buf in;
    char err[256];
    char **env = NULL;
    unsigned n_env = 0;
    const char *cwd = NULL;
    double timeout = c->exec_timeout;
    const char **argv = NULL;
    yajl_val body = NULL;
    yajl_gen g;
    int stream, rc = NB_ERR;

    nb_exec_result_init(&res, c->max_output);
    nb_buf_init(&in, c->max_body);

    if (api_read_json(a, r, &body, ae) != 0)
        goto out;
    if (nb_json_fields(body, f, sizeof(f) / sizeof(f[0]), err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (exec_argv(c, f[F_COMMAND].val, f[F_ARGV].val, &argv, ae) != 0)
        goto out;
    if (api_exec_timeout(c, f[F_TIMEOUT].val, &timeout, ae) != 0)
        goto out;
    if (f[F_PTY].val != NULL) {
        if (pty_size(f[F_PTY].val, "pty", &rq.pty_cols, &rq.pty_rows, ae) != 0)
            goto out;
        if (f[F_TIMEOUT].val == NULL)
            timeout = 0; /* a terminal lasts as long as its client */
    }
    if (f[F_CWD].val) {
        cwd = nb_json_string(f[F_CWD].val);
        if (cwd[0] != '/' || strlen(cwd) > 1024) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                          "cwd must be an absolute path inside the sandbox");
            goto out;
        }
    }
    if (exec_data(f[F_STDIN].val, f[F_STDIN_ENC].val, "stdin", "stdin_encoding", &in, ae) != 0)
        goto out;
    if (f[F_USER].val != NULL && (rq.root = nb_exec_user(c, nb_json_string(f[F_USER].val))) < 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "user must be \"root\" or the sandbox user (\"%s\")",
                      c->sandbox_user_name[0] ? c->sandbox_user_name : "user");
        goto out;
    }
    rq.background = f[F_BACKGROUND].val != NULL && YAJL_IS_TRUE(f[F_BACKGROUND].val);
    if (rq.background)
        timeout = 0; /* a background command runs until it exits or the sandbox ends */
    stream = f[F_STREAM].val ? YAJL_IS_TRUE(f[F_STREAM].val) : nb_http_wants_ndjson(r);
    if (rq.pty_cols > 0 && !rq.background && f[F_STREAM].val != NULL && !stream) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "a pty session is streamed while it runs, or kept in the background "
                      "(\"background\": true): not \"stream\": false");
        goto out;
    }
    if (rq.pty_cols > 0 && rq.background && f[F_STDIN].val != NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "a background pty takes its input from POST /sandbox/{id}/pty/{pid}/input, "
                      "not \"stdin\"");
        goto out;
    }
    if (rq.pty_cols > 0 && !rq.background)
        stream = 1;
    if (rq.background && stream) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field",
                      "a background command is not streamed: read its output "
                      "with GET /sandbox/{id}/processes/{pid}");
        goto out;
    }
    if (api_env_list(c, f[F_ENV].val, &env, &n_env, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0)
        goto out;

    rq.argv = argv;
    rq.cwd = cwd;
    rq.env = env;
    rq.n_env = n_env;
    rq.timeout = timeout;
    rq.client_fd = nb_http_client_fd(r);
    if (f[F_STDIN].val) {
        rq.stdin_data = in.data ? in.data : "";
        rq.stdin_len = in.len;
    }
    if (stream) {
        /* headers now: the first output reaches the client as soon as it exists */
        st.r = r;
        st.g = nb_json_gen();
        rq.on_output = stream_output;
        if (rq.pty_cols > 0) {
            rq.on_start = stream_start;
            rq.on_idle = stream_keepalive;
        }
        rq.ctx = &st;
        if (rq.pty_cols == 0)
            nb_http_stream_begin(r, 200, "application/x-ndjson");
        rc = nb_exec_run(a, &slot, &rq, &res, ae) == 0 ? NB_OK : NB_ERR;
        stream_flush(&st);
        if (rc == NB_OK)
            stream_exit(&st, &res);
        yajl_gen_free(st.g);
        goto out;
    }
    if (nb_exec_run(a, &slot, &rq, &res, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (rq.background) {
        nb_json_kv_int(g, "pid", res.pid);
        nb_json_kv_bool(g, "background", 1);
        yajl_gen_map_close(g);
        nb_http_json(r, 201, g);
    } else {
        nb_exec_result_json(g, &res, 1);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
    }
    yajl_gen_free(g);
    rc = NB_OK;

out:
    free(argv);
    api_env_free(env, n_env);
    yajl_tree_free(body);
    nb_buf_free(&in);
    nb_exec_result_free(&res);
    return rc;
}

/* POST /sandbox/{id}/pty/{pid}/input {data, encoding?}: keystrokes for a PTY session */
int api_pty_input(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                  struct nb_apierr *ae)
{
    struct nb_jfield f[] = {{"data", NB_JT_STRING, NULL}, {"encoding", NB_JT_STRING, NULL}};
    struct nb_slot slot;
    struct nb_buf data;
    yajl_val body = NULL;
    char err[256];
    uint32_t pid = 0;
    yajl_gen g;
    int rc = NB_ERR;

    nb_route_pid(ra->arg, &pid); /* the router checked it */
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    nb_buf_init(&data, a->conf.max_body);
    if (nb_json_fields(body, f, 2, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", err);
        goto out;
    }
    if (f[0].val == NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "give \"data\": the bytes typed");
        goto out;
    }
    if (exec_data(f[0].val, f[1].val, "data", "encoding", &data, ae) != 0 ||
        nb_sandbox_get(a, ra->id, &slot, ae) != 0 ||
        nb_exec_pty_input(a, &slot, pid, data.data, data.len, ae) != 0)
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

/* POST /sandbox/{id}/pty/{pid}/resize {cols, rows} */
int api_pty_resize(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                   struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    unsigned cols, rows;
    uint32_t pid = 0;
    int rc = NB_ERR;

    nb_route_pid(ra->arg, &pid);
    if (api_read_json(a, r, &body, ae) != 0)
        return NB_ERR;
    if (pty_size(body, "resize", &cols, &rows, ae) == 0 &&
        nb_sandbox_get(a, ra->id, &slot, ae) == 0 &&
        nb_exec_pty_resize(a, &slot, pid, cols, rows, ae) == 0) {
        nb_http_no_content(r);
        rc = NB_OK;
    }
    yajl_tree_free(body);
    return rc;
}
