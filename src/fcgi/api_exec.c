/*
 * api_exec.c - POST /sandbox/{id}/exec: validate the request, then run
 * /bin/sh -c COMMAND through the exec engine (exec.c) and answer with the
 * original NanoBox keys (output, exit_code, timed_out) and the new ones,
 * as one JSON object or, when asked, as NDJSON events while it runs. With
 * "background" the command is started and its pid answered at once.
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

int api_exec_timeout(const struct nb_conf *c, yajl_val v, double *out, struct nb_apierr *ae)
{
    *out = c->exec_timeout;
    if (v == NULL)
        return 0;
    *out = nb_json_double(v);
    /* below 1 ms the agent's whole milliseconds would say 0, which means none */
    if (!(*out >= 0.001) || *out > c->exec_timeout_max) {
        nb_apierr_set(ae, 422, "out_of_range",
                      "timeout must be at least 0.001 and at most %u seconds (exec_timeout_max)",
                      c->exec_timeout_max);
        return -1;
    }
    return 0;
}

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
        nb_apierr_set(ae, 400, "bad_field",
                      command == NULL ? "give \"command\" (a shell command line) or \"argv\" "
                                        "(an array: the program and its arguments)"
                                      : "give \"command\" or \"argv\", not both");
        return -1;
    }
    if (command != NULL) {
        const char *s = nb_json_string(command);
        if (*s == '\0' || strlen(s) > c->max_command) {
            nb_apierr_set(ae, *s ? 422 : 400, *s ? "out_of_range" : "bad_field",
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
        nb_apierr_set(ae, n ? 422 : 400, n ? "out_of_range" : "bad_field",
                      "argv must hold 1 to %u strings", NB_EXEC_MAX_ARGS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        yajl_val e = argv->u.array.values[i];
        if (!YAJL_IS_STRING(e)) {
            nb_apierr_set(ae, 400, "bad_field", "argv[%zu] must be a string", i);
            return -1;
        }
        total += strlen(nb_json_string(e));
    }
    if (nb_json_string(argv->u.array.values[0])[0] == '\0') {
        nb_apierr_set(ae, 400, "bad_field", "argv[0], the program, must not be empty");
        return -1;
    }
    if (total > c->max_command) {
        nb_apierr_set(ae, 422, "out_of_range",
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

/* The stdin field, decoded per stdin_encoding into b; -1 with ae set. */
static int exec_stdin(yajl_val in, yajl_val enc, struct nb_buf *b, struct nb_apierr *ae)
{
    const char *text, *e = enc ? nb_json_string(enc) : "utf-8";
    if (in == NULL) {
        if (enc != NULL) {
            nb_apierr_set(ae, 400, "bad_field", "stdin_encoding given without stdin");
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
            nb_apierr_set(ae, 400, "bad_field", "stdin is not valid base64");
            return -1;
        }
        return 0;
    }
    nb_apierr_set(ae, 400, "bad_field", "stdin_encoding must be \"utf-8\" or \"base64\"");
    return -1;
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
        {"argv", NB_JT_ARRAY, NULL},
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
        F_ARGV
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
        nb_apierr_set(ae, 400, "bad_field", "%s", err);
        goto out;
    }
    if (exec_argv(c, f[F_COMMAND].val, f[F_ARGV].val, &argv, ae) != 0)
        goto out;
    if (api_exec_timeout(c, f[F_TIMEOUT].val, &timeout, ae) != 0)
        goto out;
    if (f[F_CWD].val) {
        cwd = nb_json_string(f[F_CWD].val);
        if (cwd[0] != '/' || strlen(cwd) > 1024) {
            nb_apierr_set(ae, 400, "bad_field", "cwd must be an absolute path inside the sandbox");
            goto out;
        }
    }
    if (exec_stdin(f[F_STDIN].val, f[F_STDIN_ENC].val, &in, ae) != 0)
        goto out;
    rq.background = f[F_BACKGROUND].val != NULL && YAJL_IS_TRUE(f[F_BACKGROUND].val);
    stream = f[F_STREAM].val ? YAJL_IS_TRUE(f[F_STREAM].val) : nb_http_wants_ndjson(r);
    if (rq.background && stream) {
        nb_apierr_set(ae, 400, "bad_field",
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
        rq.ctx = &st;
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
