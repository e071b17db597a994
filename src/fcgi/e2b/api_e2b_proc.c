/*
 * api_e2b_proc.c - envd's process.Process service of the E2B facade
 * (docs/E2B.md), in Connect-RPC with JSON (e2b_rpc.h), over the engines the
 * native API uses: a command is started by exec.c as a background process
 * of the sandbox's agent, and everything after (its output, stdin,
 * signals, the list) goes through procs.c, as GET/POST/DELETE
 * /sandbox/{id}/processes/... do.
 *
 *   Start    (stream)  {process: {cmd, args, envs, cwd}, stdin?}  -> start, data*, end
 *   Connect  (stream)  {process: {pid}}                           -> start, data*, end
 *   List               {}                                         -> {processes: [...]}
 *   SendInput          {process: {pid}, input: {stdin: base64}}   -> {}
 *   CloseStdin         {process: {pid}}                           -> {}
 *   SendSignal         {process: {pid}, signal: SIGNAL_SIGKILL}   -> {}
 *   Update             {process: {pid}, pty: {size: {cols, rows}}} -> {}
 *
 * With pty: {size: {cols, rows}} (sbx.pty.create) Start runs the command
 * on a terminal as a background process of the agent (B with Y): its
 * output comes as pty data events, and like any command it outlives its
 * stream, so Connect on its pid (sbx.pty.connect) streams it again, as pty
 * events, and List shows it. SendInput's input.pty types into it, Update
 * sets its window, SendSignal signals it, all through the agent's requests
 * Y and S from any worker. An agent from before B with Y (one that does
 * not announce it, nb_exec_bg_pty) gets a PTY session of the stream
 * instead (exec.c, as POST
 * /sandbox/{id}/exec with "pty"), hung up when the stream closes, and
 * Connect on it is unimplemented.
 *
 * As envd does, a command outlives its stream: a client that goes away
 * leaves it running (commands.run(.., {background: true}) then disconnect()
 * or a dropped connection); the Connect-Timeout-Ms of Start is the
 * command's own timeout (the agent kills it then), that of Connect only the
 * stream's. A stream is the processes engine's follow (nb_procs_follow:
 * the agent answers as soon as the process prints or ends) shaped into
 * events here, with a keepalive event after every Keepalive-Ping-Interval
 * seconds (the SDK says 50) without one.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "clock.h"
#include "api_common.h"
#include "e2b_api.h"
#include "e2b_common.h"
#include "e2b_rpc.h"
#include "exec.h"
#include "json.h"
#include "procs.h"
#include "sandbox.h"

#define RPC_KEEPALIVE_S 50
#define RPC_KEEPALIVE_MAX_S 600
/* Output bytes per data event (base64 makes it 4/3 of that). */
#define RPC_CHUNK (64 * 1024)

/* A uint32 in protobuf-JSON: a number, or a string of digits. */
static int uint32_of(yajl_val v, uint32_t *out)
{
    char *end;
    unsigned long long n;
    if (v != NULL && YAJL_IS_INTEGER(v)) {
        long long i = YAJL_GET_INTEGER(v);
        if (i < 0 || i > 0xffffffffLL)
            return -1;
        *out = (uint32_t)i;
        return 0;
    }
    if (v == NULL || !YAJL_IS_STRING(v) || !isdigit((unsigned char)nb_json_string(v)[0]))
        return -1;
    errno = 0;
    n = strtoull(nb_json_string(v), &end, 10);
    if (errno != 0 || *end != '\0' || n > 0xffffffffULL)
        return -1;
    *out = (uint32_t)n;
    return 0;
}

/* The ProcessSelector of body.process: its pid (a tag selects nothing here). */
static int selector_pid(yajl_val body, uint32_t *pid, struct nb_apierr *ae)
{
    yajl_val sel = e2b_rpc_member(body, "process", NULL);
    if (sel == NULL || !YAJL_IS_OBJECT(sel)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "process must be an object ({\"pid\": N})");
        return -1;
    }
    if (e2b_rpc_member(sel, "pid", NULL) == NULL && e2b_rpc_member(sel, "tag", NULL) != NULL) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no process has the tag %.64s (nanobox has no tags)",
                      nb_json_string(e2b_rpc_member(sel, "tag", NULL)));
        return -1;
    }
    if (uint32_of(e2b_rpc_member(sel, "pid", NULL), pid) != 0 || *pid == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "process.pid must be a process id");
        return -1;
    }
    return 0;
}

/* A pid the agent does not know is Connect's not_found. */
static int proc_err(struct nb_apierr *ae, uint32_t pid)
{
    if (ae->err == NB_E_NOT_FOUND) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "process with pid %u not found", pid);
    } else if (nb_err_is_down(ae->err) ||
               (ae->err == NB_E_CONFLICT && !strcmp(ae->code, "not_running"))) {
        /* the agent or the container is gone: the sandbox is. unavailable, as
         * E2B's proxy answers for a dead sandbox (the SDK's TimeoutError), in
         * the words of the SDK's own error for a sandbox killed under a call */
        char was[sizeof(ae->msg)];
        snprintf(was, sizeof(was), "%s", ae->msg);
        nb_apierr_set(ae, NB_E_UPSTREAM, "unavailable",
                      "the sandbox was killed or reached its end of life while the request "
                      "was in flight (%.150s)",
                      was);
    }
    return -1;
}

/* The unary answer of the calls that return nothing. */
static int rpc_empty(struct nb_req *r)
{
    nb_http_body(r, 200, "application/json", "{}", 2);
    return NB_OK;
}

/* ---------------------------------------------------------------- streams */

/* A stream of ProcessEvents: what the follow (nb_procs_follow) or a PTY session hands it. */
struct stream {
    struct nb_app *a;
    struct nb_req *r;
    const struct nb_slot *slot;
    const char *out_key; /* the data event's key for stdout: "stdout", or "pty" on a terminal */
    struct nb_procs_follow pf; /* the pid, the offsets, the deadline and the keepalive */
};

/* A generator with {"event": {"<kind>": { open. */
static yajl_gen event_open(const char *kind)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "event");
    yajl_gen_map_open(g);
    nb_json_cstr(g, kind);
    yajl_gen_map_open(g);
    return g;
}

/* One ProcessEvent ({"event": {...}}) in its envelope; -1 when the client is gone. */
static int event_close(struct stream *s, yajl_gen g)
{
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    return e2b_rpc_stream_send(s->r, g);
}

static int send_start(struct stream *s)
{
    yajl_gen g = event_open("start");
    nb_json_kv_int(g, "pid", s->pf.pid);
    return event_close(s, g);
}

/* Output as data events of at most RPC_CHUNK bytes, base64 (protobuf-JSON bytes). */
static int send_data(struct stream *s, const char *key, const char *data, size_t len)
{
    for (size_t off = 0; off < len; off += RPC_CHUNK) {
        size_t n = len - off < RPC_CHUNK ? len - off : RPC_CHUNK;
        struct nb_buf b64;
        yajl_gen g = event_open("data");
        nb_buf_init(&b64, RPC_CHUNK * 2);
        nb_base64_encode(&b64, data + off, n);
        nb_json_str(g, key, strlen(key));
        nb_json_str(g, b64.data, b64.len);
        nb_buf_free(&b64);
        if (event_close(s, g) != 0)
            return -1;
    }
    return 0;
}

/* envd's EndEvent, from Go's ProcessState: "exit status 1", "signal: killed". */
static int send_end(struct stream *s, const struct nb_proc_info *p)
{
    char status[64];
    yajl_gen g = event_open("end");
    if (p->signal != 0) {
        const char *sig = strsignal((int)p->signal);
        snprintf(status, sizeof(status), "signal: %c%s", tolower((unsigned char)sig[0]), sig + 1);
        nb_json_kv_int(g, "exitCode", -1);
        nb_json_kv_bool(g, "exited", 0);
    } else {
        snprintf(status, sizeof(status), "exit status %d", (int)p->exit_code);
        nb_json_kv_int(g, "exitCode", p->exit_code);
        nb_json_kv_bool(g, "exited", 1);
    }
    nb_json_kv_str(g, "status", status);
    if (p->signal != 0 || p->exit_code != 0)
        nb_json_kv_str(g, "error", status);
    return event_close(s, g);
}

static int send_keepalive(struct stream *s)
{
    return event_close(s, event_open("keepalive"));
}

/* The follow's callbacks: its output, its end and its keepalives as events. */
static int follow_output(void *ctx, int is_stderr, const char *data, size_t len)
{
    struct stream *s = ctx;
    return send_data(s, is_stderr ? "stderr" : s->out_key, data, len);
}

static int follow_end(void *ctx, const struct nb_proc_info *p)
{
    return send_end(ctx, p);
}

static int follow_idle(void *ctx)
{
    return send_keepalive(ctx);
}

/* The stream's end-of-stream envelope, {} (an error goes through nb_http_finalize). */
static int end_stream(struct nb_req *r)
{
    struct nb_buf b;
    nb_buf_init(&b, 64);
    nb_rpc_end_stream(&b, NULL, NULL);
    nb_http_stream_bytes(r, b.data, b.len);
    nb_buf_free(&b);
    return NB_OK;
}

/*
 * Stream the process's output from the offsets on until it ends (end event
 * and end of stream), the client leaves (NB_OK: the process lives on) or
 * the deadline passes (NB_ERR deadline_exceeded) or the worker is asked to
 * stop (NB_ERR unavailable). The stream has begun.
 */
static int follow(struct stream *s, struct nb_apierr *ae)
{
    uint32_t pid = s->pf.pid;

    switch (nb_procs_follow(s->a, s->slot, &s->pf, ae)) {
    case NB_FOLLOW_ENDED:
        return end_stream(s->r);
    case NB_FOLLOW_LEFT:
        return NB_OK; /* the client left: the process does not */
    case NB_FOLLOW_KILLED:
        nb_apierr_set(ae, NB_E_TIMEOUT, "deadline_exceeded",
                      "process %u was killed at its Connect-Timeout-Ms", pid);
        return NB_ERR;
    case NB_FOLLOW_DEADLINE:
        nb_apierr_set(ae, NB_E_TIMEOUT, "deadline_exceeded",
                      "the stream of process %u passed its Connect-Timeout-Ms", pid);
        return NB_ERR;
    case NB_FOLLOW_STOPPING:
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "unavailable",
                      "nanobox-fcgi is stopping: this stream ends, process %u runs on "
                      "(%s.connect(%u) follows it again)",
                      pid, strcmp(s->out_key, "pty") ? "commands" : "pty", pid);
        return NB_ERR;
    default:
        proc_err(ae, pid);
        return NB_ERR;
    }
}

/* A stream's timing: Connect-Timeout-Ms and Keepalive-Ping-Interval. -1 with ae set. */
static int stream_init(struct stream *s, struct nb_app *a, struct nb_req *r,
                       const struct nb_slot *slot, int64_t *timeout_ms, struct nb_apierr *ae)
{
    const char *ka = nb_http_param(r, "HTTP_KEEPALIVE_PING_INTERVAL");
    long secs = ka != NULL ? strtol(ka, NULL, 10) : RPC_KEEPALIVE_S;

    memset(s, 0, sizeof(*s));
    s->a = a;
    s->r = r;
    s->slot = slot;
    if (nb_rpc_timeout_ms(nb_http_param(r, "HTTP_CONNECT_TIMEOUT_MS"), timeout_ms) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "Connect-Timeout-Ms must be 1 to 10 digits");
        return -1;
    }
    s->pf.deadline = *timeout_ms > 0 ? nb_clock_mono_ms() + *timeout_ms : 0;
    if (secs < 1 || secs > RPC_KEEPALIVE_MAX_S)
        secs = RPC_KEEPALIVE_S;
    s->pf.idle_ms = secs * 1000L;
    s->pf.watch_fd = nb_http_client_fd(r);
    s->pf.ctx = s;
    s->pf.on_output = follow_output;
    s->pf.on_end = follow_end;
    s->pf.on_idle = follow_idle;
    s->out_key = "stdout";
    return 0;
}
/* ----------------------------------------------------------------- Start */

/* The command of a StartRequest's ProcessConfig: argv (cmd, args...), env, cwd. */
struct start_cmd {
    int root; /* as root: its home is /root */
    const char **argv;
    char **env;
    unsigned n_env;
    char cwd[1024];
};

static void start_cmd_free(struct start_cmd *sc)
{
    free(sc->argv);
    api_env_free(sc->env, sc->n_env);
}

/*
 * HOME (E2B's home) and PWD (the cwd as named: /home/user is a link to
 * the workspace, and a shell keeps the name it is given) go first, so
 * the command's own envs replace them.
 */
static int start_env_home(struct nb_app *a, struct start_cmd *sc)
{
    char **env = nb_xcalloc(sc->n_env + 2, sizeof(*env));
    const char *home = sc->root ? NB_ROOT_HOME : e2b_home(&a->conf);
    size_t n = strlen(home) + 6, m = strlen(sc->cwd) + 5;

    env[0] = nb_xmalloc(n);
    snprintf(env[0], n, "HOME=%s", home);
    env[1] = nb_xmalloc(m);
    snprintf(env[1], m, "PWD=%s", sc->cwd);
    for (unsigned i = 0; i < sc->n_env; i++)
        env[i + 2] = sc->env[i];
    free(sc->env);
    sc->env = env;
    sc->n_env += 2;
    return 0;
}

/*
 * The user a command runs as: the SDK names one (commands.run(cmd, {user}))
 * in Authorization: Basic base64("<user>:"). The sandbox user answers to
 * "user" and to its own name; "root" sets *root: the agent runs it as
 * root where the operator gave the sandbox's template one, and refuses
 * it (403 permission_denied) elsewhere, never running it as the user
 * under root's name.
 */
static int start_user(struct nb_app *a, struct nb_req *r, int *root, struct nb_apierr *ae)
{
    const char *h = nb_http_param(r, "HTTP_AUTHORIZATION");
    struct nb_buf dec;
    char name[64];

    if (h == NULL || strncasecmp(h, "Basic ", 6) != 0)
        return 0;
    for (h += 6; *h == ' '; h++)
        ;
    nb_buf_init(&dec, 256);
    if (nb_base64_decode(&dec, h, strlen(h)) != 0 || dec.data == NULL) {
        nb_buf_free(&dec);
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "Authorization: Basic must be base64 of \"user:\"");
        return -1;
    }
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(dec.data, ":"), dec.data);
    nb_buf_free(&dec);
    *root = nb_exec_user(&a->conf, name);
    if (*root >= 0)
        return 0;
    nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "no user \"%.32s\" in the sandbox (user)",
                  name);
    return -1;
}

static int start_cmd_parse(struct nb_app *a, yajl_val body, int root, struct start_cmd *sc,
                           struct nb_apierr *ae)
{
    yajl_val proc = e2b_rpc_member(body, "process", NULL), cmd, args, envs, cwd;
    size_t n = 0;

    memset(sc, 0, sizeof(*sc));
    sc->root = root;
    if (proc == NULL || !YAJL_IS_OBJECT(proc)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "process must be an object ({\"cmd\": ...})");
        return -1;
    }
    cmd = e2b_rpc_member(proc, "cmd", NULL);
    args = e2b_rpc_member(proc, "args", NULL);
    envs = e2b_rpc_member(proc, "envs", NULL);
    cwd = e2b_rpc_member(proc, "cwd", NULL);
    if (cmd == NULL || !YAJL_IS_STRING(cmd) || nb_json_string(cmd)[0] == '\0') {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "process.cmd must be a non-empty string");
        return -1;
    }
    if (args != NULL && !YAJL_IS_ARRAY(args)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "process.args must be an array of strings");
        return -1;
    }
    n = args != NULL ? YAJL_GET_ARRAY(args)->len : 0;
    if (n + 1 > NB_EXEC_MAX_ARGS) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "at most %d arguments",
                      NB_EXEC_MAX_ARGS - 1);
        return -1;
    }
    sc->argv = nb_xcalloc(n + 2, sizeof(*sc->argv));
    sc->argv[0] = nb_json_string(cmd);
    for (size_t i = 0; i < n; i++) {
        yajl_val s = YAJL_GET_ARRAY(args)->values[i];
        if (!YAJL_IS_STRING(s)) {
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                          "process.args must be an array of strings");
            return -1;
        }
        sc->argv[i + 1] = nb_json_string(s);
    }
    if (envs != NULL && !YAJL_IS_OBJECT(envs)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "process.envs must be an object of strings");
        return -1;
    }
    if (envs != NULL && api_env_list(&a->conf, envs, &sc->env, &sc->n_env, ae) != 0) {
        ae->err = NB_E_INVALID;
        return -1;
    }
    if (cwd != NULL && !YAJL_IS_STRING(cwd)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "process.cwd must be a string");
        return -1;
    }
    /* the user's home is the default cwd, and a relative cwd is under it, as envd's */
    {
        const char *c = cwd != NULL ? nb_json_string(cwd) : "";
        if ((size_t)snprintf(sc->cwd, sizeof(sc->cwd), "%s%s%s",
                             c[0] == '/' ? ""
                             : root      ? NB_ROOT_HOME
                                         : e2b_home(&a->conf),
                             c[0] == '/' || c[0] == '\0' ? "" : "/", c) >= sizeof(sc->cwd)) {
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "process.cwd is too long");
            return -1;
        }
    }
    return start_env_home(a, sc);
}

/* The PTY of a StartRequest or an UpdateRequest: pty.size {cols, rows}, each 1..1000. */
static int pty_size_of(yajl_val pty, unsigned *cols, unsigned *rows, struct nb_apierr *ae)
{
    yajl_val size = e2b_rpc_member(pty, "size", NULL);
    uint32_t c, r;

    if (pty == NULL || !YAJL_IS_OBJECT(pty) || size == NULL || !YAJL_IS_OBJECT(size) ||
        uint32_of(e2b_rpc_member(size, "cols", NULL), &c) != 0 ||
        uint32_of(e2b_rpc_member(size, "rows", NULL), &r) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "pty must be {\"size\": {\"cols\": C, \"rows\": R}}");
        return -1;
    }
    if (c < 1 || r < 1 || c > NB_EXEC_PTY_MAX || r > NB_EXEC_PTY_MAX) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "pty.size: cols and rows must be 1 to %d", NB_EXEC_PTY_MAX);
        return -1;
    }
    *cols = c;
    *rows = r;
    return 0;
}

/* A PTY session's stream (an agent from before B with Y): exec.c calls these while the command runs. */
struct pty_stream {
    struct stream s;
    int gone; /* the client left: the session ends with its connection */
};

static void pty_started(void *ctx, int pid)
{
    struct pty_stream *ps = ctx;
    ps->s.pf.pid = (uint32_t)pid;
    nb_http_stream_begin(ps->s.r, 200, NB_RPC_STREAM_CTYPE);
    if (send_start(&ps->s) != 0)
        ps->gone = 1;
}

static int pty_output(void *ctx, int is_stderr, const char *data, size_t len)
{
    struct pty_stream *ps = ctx;
    (void)is_stderr; /* a terminal has one output */
    if (!ps->gone && send_data(&ps->s, "pty", data, len) != 0)
        ps->gone = 1;
    return ps->gone ? -1 : 0;
}

static int pty_idle(void *ctx)
{
    struct pty_stream *ps = ctx;
    if (!ps->gone && send_keepalive(&ps->s) != 0)
        ps->gone = 1;
    return ps->gone ? -1 : 0;
}

/* Run rq on a terminal, its events streamed until it ends (or the client leaves). */
static int pty_run(struct pty_stream *ps, struct nb_exec_req *rq, struct nb_apierr *ae)
{
    struct nb_exec_result res;
    struct nb_proc_info end;
    int rc = NB_ERR;

    nb_exec_result_init(&res, 0);
    rq->background = 0;
    rq->client_fd = ps->s.pf.watch_fd;
    rq->on_start = pty_started;
    rq->on_output = pty_output;
    rq->on_idle = pty_idle;
    rq->ctx = ps;
    if (nb_exec_run(ps->s.a, ps->s.slot, rq, &res, ae) != 0) {
        proc_err(ae, 0);
    } else if (ps->gone || res.client_gone) {
        rc = NB_OK; /* nobody to tell: the session was hung up */
    } else if (res.timed_out) {
        nb_apierr_set(ae, NB_E_TIMEOUT, "deadline_exceeded",
                      "PTY process %u was killed at its Connect-Timeout-Ms", ps->s.pf.pid);
    } else {
        memset(&end, 0, sizeof(end));
        end.exit_code = res.exit_code;
        end.signal = (uint32_t)res.signal;
        rc = send_end(&ps->s, &end) != 0 ? NB_OK : end_stream(ps->s.r);
    }
    nb_exec_result_free(&res);
    return rc;
}

int api_e2b_proc_start(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct start_cmd sc = {0};
    struct nb_exec_req rq;
    struct nb_exec_result res;
    struct pty_stream ps;
    struct stream st;
    yajl_val body = NULL, in, pty;
    int64_t timeout_ms;
    int root = 0, rc = NB_ERR;

    nb_exec_result_init(&res, 0);
    memset(&rq, 0, sizeof(rq));
    if (e2b_rpc_request(a, r, 1, &body, ae) != 0 || start_user(a, r, &root, ae) != 0 ||
        e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 || start_cmd_parse(a, body, root, &sc, ae) != 0 ||
        stream_init(&st, a, r, &slot, &timeout_ms, ae) != 0)
        goto out;
    in = e2b_rpc_member(body, "stdin", NULL);
    if (in != NULL && !YAJL_IS_TRUE(in) && !YAJL_IS_FALSE(in)) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "stdin must be a boolean");
        goto out;
    }
    pty = e2b_rpc_member(body, "pty", NULL);
    if (pty != NULL && pty_size_of(pty, &rq.pty_cols, &rq.pty_rows, ae) != 0)
        goto out;
    rq.argv = sc.argv;
    rq.cwd = sc.cwd[0] ? sc.cwd : NULL;
    rq.env = sc.env;
    rq.n_env = sc.n_env;
    rq.timeout = (double)timeout_ms / 1000.0; /* 0: none (the agent kills it at the timeout) */
    rq.background = 1;
    rq.root = root;
    /* stdin: false (the SDK's default) is a closed stdin, as envd's /dev/null */
    rq.bg_no_stdin = in != NULL && YAJL_IS_FALSE(in);
    rq.client_fd = -1;
    if (pty != NULL) {
        /* a terminal's stdin is the keyboard (SendInput's input.pty), and its output one stream */
        rq.bg_no_stdin = 0;
        st.out_key = "pty";
    }
    if (pty != NULL && !nb_exec_bg_pty(&slot)) {
        /* an agent from before B with Y: a terminal for this stream only */
        ps.s = st;
        ps.gone = 0;
        rc = pty_run(&ps, &rq, ae);
        goto out;
    }
    if (nb_exec_run(a, &slot, &rq, &res, ae) != 0) {
        proc_err(ae, 0);
        goto out;
    }
    st.pf.pid = (uint32_t)res.pid;
    nb_http_stream_begin(r, 200, NB_RPC_STREAM_CTYPE);
    rc = send_start(&st) != 0 ? NB_OK : follow(&st, ae);
out:
    nb_exec_result_free(&res);
    start_cmd_free(&sc);
    yajl_tree_free(body);
    return rc;
}

/* --------------------------------------------------------------- Connect */

int api_e2b_proc_connect(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                         struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct nb_proc_output po;
    struct stream st;
    yajl_val body = NULL;
    int64_t timeout_ms;
    uint32_t pid;
    int rc = NB_ERR;

    if (e2b_rpc_request(a, r, 1, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        selector_pid(body, &pid, ae) != 0 || stream_init(&st, a, r, &slot, &timeout_ms, ae) != 0)
        goto out;
    st.pf.pid = pid;
    /* as envd: the output from now on (what came before went to the stream of Start) */
    if (nb_procs_read(a, &slot, pid, 0, 0, &po, ae) != 0) {
        struct nb_apierr probe = {0};
        nb_proc_output_free(&po);
        if (ae->err == NB_E_NOT_FOUND && nb_exec_pty_input(a, &slot, pid, "", 0, &probe) == 0) {
            nb_apierr_set(ae, NB_E_UNSUPPORTED, "unimplemented",
                          "process %u is a PTY session of the stream that started it (a "
                          "native streamed exec, or an agent too old to keep a PTY in the "
                          "background): nanobox cannot connect a second one; sendInput, "
                          "resize and kill reach it",
                          pid);
            goto out;
        }
        proc_err(ae, pid);
        goto out;
    }
    st.pf.off_out = po.info.stdout_bytes;
    st.pf.off_err = po.info.stderr_bytes;
    if (po.info.pty)
        st.out_key = "pty"; /* sbx.pty.connect: a terminal's output comes as pty events */
    nb_proc_output_free(&po);
    nb_http_stream_begin(r, 200, NB_RPC_STREAM_CTYPE);
    rc = send_start(&st) != 0 ? NB_OK : follow(&st, ae);
out:
    yajl_tree_free(body);
    return rc;
}

/* ----------------------------------------------------------------- unary */

static int list_each(void *arg, const struct nb_proc_info *p)
{
    yajl_gen g = arg;
    const char *s;
    size_t len, pos = 0;
    int first = 1;

    if (!p->running)
        return 0; /* envd lists the processes that run */
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "pid", p->pid);
    nb_json_cstr(g, "config");
    yajl_gen_map_open(g);
    nb_json_cstr(g, "args");
    yajl_gen_array_open(g);
    while (nb_proc_next_arg(p, &pos, &s, &len)) {
        if (first) {
            yajl_gen_array_close(g);
            nb_json_cstr(g, "cmd");
            nb_json_str(g, s, len);
            nb_json_cstr(g, "args");
            yajl_gen_array_open(g);
            first = 0;
        } else {
            nb_json_str(g, s, len);
        }
    }
    yajl_gen_array_close(g);
    /* the agent keeps no command's env: none is shown */
    nb_json_cstr(g, "envs");
    yajl_gen_map_open(g);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    return 0;
}

int api_e2b_proc_list(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                      struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    yajl_gen g;
    int rc = NB_ERR;

    if (e2b_rpc_request(a, r, 0, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0)
        goto out;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "processes");
    yajl_gen_array_open(g);
    if (nb_procs_list(a, &slot, list_each, g, ae) == 0) {
        yajl_gen_array_close(g);
        yajl_gen_map_close(g);
        nb_http_json(r, 200, g);
        rc = NB_OK;
    } else {
        proc_err(ae, 0);
    }
    yajl_gen_free(g);
out:
    yajl_tree_free(body);
    return rc;
}

int api_e2b_proc_input(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                       struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct nb_buf data;
    yajl_val body = NULL, input, in, pty;
    uint32_t pid;
    int rc = NB_ERR;

    nb_buf_init(&data, NB_PROCS_STDIN_MAX);
    if (e2b_rpc_request(a, r, 0, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        selector_pid(body, &pid, ae) != 0)
        goto out;
    input = e2b_rpc_member(body, "input", NULL);
    pty = input != NULL && YAJL_IS_OBJECT(input) ? e2b_rpc_member(input, "pty", NULL) : NULL;
    in = pty != NULL ? pty : e2b_rpc_member(input, "stdin", NULL);
    if (input == NULL || !YAJL_IS_OBJECT(input) || (in != NULL && !YAJL_IS_STRING(in))) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "input must be {\"stdin\": \"<base64>\"} or {\"pty\": \"<base64>\"}");
        goto out;
    }
    if (in != NULL) {
        int d = nb_base64_decode(&data, nb_json_string(in), strlen(nb_json_string(in)));
        if (d == NB_ETOOBIG) {
            nb_apierr_set(ae, NB_E_TOO_LARGE, "resource_exhausted",
                          "send at most %u bytes of stdin per call", NB_PROCS_STDIN_MAX);
            goto out;
        }
        if (d != NB_OK) {
            nb_apierr_set(ae, NB_E_INVALID, "invalid_argument", "input.%s is not valid base64",
                          pty != NULL ? "pty" : "stdin");
            goto out;
        }
    }
    if (pty != NULL ? nb_exec_pty_input(a, &slot, pid, data.data, data.len, ae) != 0
                    : nb_procs_stdin(a, &slot, pid, data.data, data.len, 0, ae) != 0) {
        proc_err(ae, pid);
        goto out;
    }
    rc = rpc_empty(r);
out:
    nb_buf_free(&data);
    yajl_tree_free(body);
    return rc;
}

int api_e2b_proc_close_stdin(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                             struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    uint32_t pid;
    int rc = NB_ERR;

    if (e2b_rpc_request(a, r, 0, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        selector_pid(body, &pid, ae) != 0)
        goto out;
    if (nb_procs_stdin(a, &slot, pid, NULL, 0, 1, ae) != 0) {
        proc_err(ae, pid);
        goto out;
    }
    rc = rpc_empty(r);
out:
    yajl_tree_free(body);
    return rc;
}

/* process.Signal: SIGNAL_SIGTERM (15) and SIGNAL_SIGKILL (9), by name or number. */
static int signal_of(yajl_val v)
{
    if (v != NULL && YAJL_IS_INTEGER(v))
        return YAJL_GET_INTEGER(v) == SIGKILL   ? SIGKILL
               : YAJL_GET_INTEGER(v) == SIGTERM ? SIGTERM
                                                : 0;
    if (v != NULL && YAJL_IS_STRING(v)) {
        if (!strcmp(nb_json_string(v), "SIGNAL_SIGKILL"))
            return SIGKILL;
        if (!strcmp(nb_json_string(v), "SIGNAL_SIGTERM"))
            return SIGTERM;
    }
    return 0;
}

struct find_ctx {
    uint32_t pid;
    int running;
};

static int find_each(void *arg, const struct nb_proc_info *p)
{
    struct find_ctx *fc = arg;
    if (p->pid == fc->pid && p->running)
        fc->running = 1;
    return 0;
}

int api_e2b_proc_signal(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_slot slot;
    struct find_ctx fc = {0, 0};
    yajl_val body = NULL;
    uint32_t pid;
    int sig, rc = NB_ERR;

    if (e2b_rpc_request(a, r, 0, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        selector_pid(body, &pid, ae) != 0)
        goto out;
    sig = signal_of(e2b_rpc_member(body, "signal", NULL));
    if (sig == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "invalid_argument",
                      "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM (9 or 15)");
        goto out;
    }
    /* envd knows only the processes that run: one that ended is not found (kill() says false) */
    fc.pid = pid;
    if (nb_procs_list(a, &slot, find_each, &fc, ae) != 0) {
        proc_err(ae, pid);
        goto out;
    }
    if (!fc.running) {
        /* a PTY session (sbx.pty.kill), or nothing that runs */
        if (nb_exec_pty_signal(a, &slot, pid, sig, ae) != 0) {
            proc_err(ae, pid);
            goto out;
        }
    } else if (nb_procs_signal(a, &slot, pid, sig, ae) != 0) {
        proc_err(ae, pid);
        goto out;
    }
    rc = rpc_empty(r);
out:
    yajl_tree_free(body);
    return rc;
}

/* Update (sbx.pty.resize): a PTY session's window; the program gets SIGWINCH. */
int api_e2b_proc_update(struct nb_app *a, struct nb_req *r, const struct nb_route_args *ra,
                        struct nb_apierr *ae)
{
    struct nb_slot slot;
    yajl_val body = NULL;
    unsigned cols, rows;
    uint32_t pid;
    int rc = NB_ERR;

    if (e2b_rpc_request(a, r, 0, &body, ae) != 0 || e2b_rpc_sandbox(a, r, ra, &slot, ae) != 0 ||
        selector_pid(body, &pid, ae) != 0 ||
        pty_size_of(e2b_rpc_member(body, "pty", NULL), &cols, &rows, ae) != 0)
        goto out;
    if (nb_exec_pty_resize(a, &slot, pid, cols, rows, ae) != 0) {
        proc_err(ae, pid);
        goto out;
    }
    rc = rpc_empty(r);
out:
    yajl_tree_free(body);
    return rc;
}
