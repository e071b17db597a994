/*
 * code.c - see code.h.
 *
 * One exchange per call, on one agent connection: request K (empty), the
 * bridge's hello ('p' "nanobox-kernel 1"), one 'j' frame holding the JSON
 * request, then 'j' frames (one JSON object each) until '.' or an error
 * frame '!'. Every object is checked before it is handed on (a JSON object
 * holding the key the op promises as a string), and the bytes of an answer
 * are capped, so a bridge that misbehaves (it runs as the sandbox's user,
 * like anything else in there) costs the host a bounded amount and gets a
 * 502, never a malformed answer to the client.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agentproto.h"
#include "clock.h"
#include "code.h"
#include "json.h"
#include "log.h"

/* The bridge may be starting (python3 and its imports): its hello can take this long. */
#define CODE_HELLO_MS 30000
/* After a run's own timeout, the host's backstop. */
#define CODE_RUN_SLACK_MS 10000
/* A context's kernel starting (create, restart). */
#define CODE_START_MS 60000
/*
 * A run's backstop ends under nginx's fastcgi_read_timeout (330 s), so
 * that the client gets the app's answer; the room left there goes to a
 * kernel's start.
 */
#define CODE_RUN_CAP_MS 320000
/* Ops that answer at once (list, interrupt, delete). */
#define CODE_QUICK_MS 15000
/* Nesting an object of the bridge may have (application/json results are user data):
 * within yajl_gen's 128 levels once the collected answer wraps it in 3 more. */
#define CODE_MAX_DEPTH 100
/* Bytes of the objects of an answer that is not a run's. */
#define CODE_MAX_INFO (4u * 1024u * 1024u)

const char *nb_code_language(const char *s)
{
    if (!strcmp(s, "python"))
        return "python";
    if (!strcmp(s, "javascript") || !strcmp(s, "js"))
        return "javascript";
    if (!strcmp(s, "typescript") || !strcmp(s, "ts"))
        return "typescript";
    if (!strcmp(s, "bash"))
        return "bash";
    return NULL;
}

/* One exchange with the bridge. */
struct code_call {
    const char *what; /* for messages: "run the code" */
    const char *need; /* the string key every object must hold ("type", "id") */
    int is_run;       /* EINVAL means another language's context */
    int answer_ms;    /* from the request sent to the end */
    int hello_ms;     /* for the bridge's hello */
    int client_fd;    /* -1: none */
    size_t max_bytes; /* of all the objects together */
    nb_code_object_fn cb;
    void *ctx;
    int client_gone; /* out */
};

static void bad_data(struct nb_apierr *ae, const char *why)
{
    nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway", "the sandbox's code bridge sent bad data: %s",
                  why);
}

/*
 * The bridge's (or, before the hello, the agent's) error frame. The cases
 * the API names get their own status; the bridge's message is kept.
 */
static void code_error(const struct code_call *c, int hello, const unsigned char *body,
                       uint32_t len, struct nb_apierr *ae)
{
    int e = len >= 4 ? (int)nba_get_u32(body) : EPROTO;
    int mlen = len > 4 ? (int)(len - 4 > 240 ? 240 : len - 4) : 0;
    const char *msg = (const char *)body + 4;

    if (e == ENOEXEC && mlen > 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "no_kernel", "%.*s", mlen, msg);
    } else if (e == ENOEXEC) {
        nb_apierr_set(ae, NB_E_CONFLICT, "no_kernel",
                      "this sandbox's image has no code interpreter");
    } else if (hello && e == EINVAL) {
        /* an agent from before the code bridge: it does not know request K */
        nb_apierr_set(ae, NB_E_CONFLICT, "no_kernel",
                      "this sandbox's agent has no code interpreter (a sandbox made by an older "
                      "nanobox): create a new sandbox");
    } else if (!hello && e == ENOENT) {
        nb_apierr_set(ae, NB_E_NO_CONTEXT, "unknown_context", "%.*s", mlen,
                      mlen > 0 ? msg : "no such context");
    } else if (!hello && c->is_run && e == EINVAL) {
        nb_apierr_set(ae, NB_E_OUT_OF_RANGE, "language_mismatch", "%.*s", mlen,
                      mlen > 0 ? msg : "the context is of another language");
    } else {
        nb_agent_error(body, len, c->what, ae);
    }
}

/* Check one 'j' body and hand it on. 0 go on, 1 stop (the caller left), -1 bad (ae set). */
static int code_object(struct code_call *c, const unsigned char *body, uint32_t len,
                       struct nb_apierr *ae)
{
    char err[128];
    char *text = nb_xmalloc((size_t)len + 1);
    yajl_val v = NULL, key;
    const char *path[2] = {c->need, NULL};
    int rc = -1;

    memcpy(text, body, len);
    text[len] = '\0';
    if (nb_json_parse(text, len, CODE_MAX_DEPTH, &v, err, sizeof(err)) != 0) {
        bad_data(ae, err);
    } else if (v == NULL || !YAJL_IS_OBJECT(v)) {
        bad_data(ae, "not a JSON object");
    } else if ((key = yajl_tree_get(v, path, yajl_t_string)) == NULL) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                      "the sandbox's code bridge sent bad data: an object without a string \"%s\"",
                      c->need);
    } else {
        int took = c->cb != NULL ? c->cb(c->ctx, v) : 0;
        if (took == 1)
            v = NULL; /* the callee's now */
        rc = took < 0 ? 1 : 0;
    }
    yajl_tree_free(v);
    free(text);
    return rc;
}

/* how long a failed call waits to see whether its sandbox is being killed */
#define CODE_DYING_WAIT_MS 1000

/* code_call_once's answer when an agent refused the request sent with K */
#define CODE_UNPIPE (-2)
/* The largest request sent with K: it fits the socket's buffer whole, so an
 * agent's error frame (no python3, say) is read, never a broken write. */
#define CODE_PIPE_MAX (60u * 1024u)

/*
 * One connection: K, the bridge's hello, the request, the answers. With
 * piped, the request goes out with the K (an agent with kernel-pipe passes
 * what it read of it to the bridge), which spares a round trip; without,
 * only after the hello. CODE_UNPIPE: the agent refused the bytes after K
 * (one that knows no kernel-pipe); nothing reached the bridge.
 */
static int code_call_once(const struct nb_slot *slot, const char *req, size_t req_len,
                          struct code_call *c, int piped, struct nb_apierr *ae)
{
    struct nb_agent ag;
    size_t bytes = 0;
    int64_t until;
    int hello = 1, rc = -1;

    if (nb_agent_connect(slot, &ag, ae) != 0)
        return -1;
    nb_agent_queue(&ag, NBA_KERNEL, NULL, 0);
    if (piped)
        nb_agent_queue(&ag, NBA_JSON, req, req_len);
    until = nb_clock_mono_ms() + c->hello_ms;
    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        int left = (int)(until - nb_clock_mono_ms()), got;
        if (left <= 0) {
            nb_apierr_set(ae, NB_E_TIMEOUT, "agent_timeout", "the sandbox's code bridge %s in time",
                          hello ? "did not start" : "did not answer");
            break;
        }
        got = nb_agent_recv_watch(&ag, left, c->client_fd, &type, &body, &len, ae);
        if (got < 0)
            break;
        if (got == 2) {
            /* closing the connection makes the bridge interrupt the execution */
            c->client_gone = 1;
            rc = 0;
            break;
        }
        if (got == 0)
            continue;
        if (type == NBA_ERROR) {
            if (hello && piped && len >= 4 && nba_get_u32(body) == EPROTO) {
                rc = CODE_UNPIPE;
                break;
            }
            code_error(c, hello, body, len, ae);
            break;
        }
        if (hello) {
            if (type != NBA_PONG || len != strlen(NBA_KERNEL_HELLO) ||
                memcmp(body, NBA_KERNEL_HELLO, len) != 0) {
                bad_data(ae, "no hello");
                break;
            }
            hello = 0;
            if (!piped)
                nb_agent_queue(&ag, NBA_JSON, req, req_len);
            until = nb_clock_mono_ms() + c->answer_ms;
            continue;
        }
        if (type == NBA_END) {
            rc = 0;
            break;
        }
        if (type != NBA_JSON)
            continue; /* frames of later versions */
        bytes += len;
        if (bytes > c->max_bytes) {
            nb_apierr_set(ae, NB_E_UPSTREAM, "bad_gateway",
                          "the sandbox's code bridge sent bad data: more than %zu bytes",
                          c->max_bytes);
            break;
        }
        got = code_object(c, body, len, ae);
        if (got < 0)
            break;
        if (got == 1) {
            c->client_gone = 1;
            rc = 0;
            break;
        }
    }
    nb_agent_close(&ag);
    return rc;
}

static int code_call(const struct nb_slot *slot, const char *req, size_t req_len,
                     struct code_call *c, struct nb_apierr *ae)
{
    int rc;

    if (req_len > NBA_MAX_BODY) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
                      "the request is %zu bytes as JSON; the code bridge takes at most %u", req_len,
                      NBA_MAX_BODY);
        return -1;
    }
    /* an agent from before kernel-pipe, or a large request, goes the older
     * way: K alone, and the request after the hello */
    rc = code_call_once(
        slot, req, req_len, c,
        req_len <= CODE_PIPE_MAX && (nb_agent_caps(slot) & NB_AGENT_CAP_KERNEL_PIPE) != 0, ae);
    if (rc == CODE_UNPIPE)
        rc = code_call_once(slot, req, req_len, c, 0, ae);
    /* the bridge failing as its sandbox is killed (its kernel gone a moment
     * before it): the sandbox stopped under the call, not a bridge fault */
    if (rc < 0 && nb_err_is_fault(ae->err) && nb_agent_sandbox_gone(slot, CODE_DYING_WAIT_MS))
        nb_apierr_set(ae, NB_E_CONFLICT, "not_running", "the sandbox's container stopped");
    return rc;
}

/* A call with no client to watch, within the caps of the small answers. */
static struct code_call quick_call(const char *what, const char *need, int answer_ms,
                                   nb_code_object_fn cb, void *ctx)
{
    struct code_call c = {.what = what,
                          .need = need,
                          .answer_ms = answer_ms,
                          .hello_ms = CODE_HELLO_MS,
                          .client_fd = -1,
                          .max_bytes = CODE_MAX_INFO,
                          .cb = cb,
                          .ctx = ctx};
    return c;
}

/* {NAME: value} of "NAME=value" strings, or null. */
static void env_json(yajl_gen g, char **env, unsigned n_env)
{
    nb_json_cstr(g, "env");
    if (n_env == 0) {
        yajl_gen_null(g);
        return;
    }
    yajl_gen_map_open(g);
    for (unsigned i = 0; i < n_env; i++) {
        const char *eq = strchr(env[i], '=');
        if (eq == NULL)
            continue;
        nb_json_str(g, env[i], (size_t)(eq - env[i]));
        nb_json_cstr(g, eq + 1);
    }
    yajl_gen_map_close(g);
}

static void str_or_null(yajl_gen g, const char *key, const char *v)
{
    nb_json_cstr(g, key);
    if (v != NULL)
        nb_json_cstr(g, v);
    else
        yajl_gen_null(g);
}

/* A request of one op with a context (or none): the JSON text, malloc'd. */
static char *simple_request(const char *op, const char *context)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "op", op);
    if (context != NULL)
        nb_json_kv_str(g, "context", context);
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

static int simple_call(const struct nb_slot *slot, const char *op, const char *context,
                       struct code_call *c, struct nb_apierr *ae)
{
    char *req = simple_request(op, context);
    int rc = code_call(slot, req, strlen(req), c, ae);
    free(req);
    return rc;
}

/*
 * How long a run may take from the request to its end: the cell's timeout
 * and slack, and room for the context's kernel to start first (the first
 * cell of a fresh sandbox, a kernel restarted after it died), which the
 * bridge does before the cell's timeout begins: 50 python kernels starting
 * at once on 2 cores took ~46 s, past a 30 s cell's 40 s.
 */
static int run_answer_ms(double timeout)
{
    int cell = (int)(timeout * 1000.0) + CODE_RUN_SLACK_MS;
    int room = CODE_RUN_CAP_MS - cell;
    return cell + (room <= 0 ? 0 : room < CODE_START_MS ? room : CODE_START_MS);
}

int nb_code_run(const struct nb_slot *slot, const struct nb_code_run *rq, int *client_gone,
                struct nb_apierr *ae)
{
    /* JSON escapes can take 6 bytes for one, and every event has its keys: room for both */
    struct code_call c = {.what = "run the code",
                          .need = "type",
                          .is_run = 1,
                          .answer_ms = run_answer_ms(rq->timeout),
                          .hello_ms = CODE_HELLO_MS,
                          .client_fd = rq->client_fd,
                          .max_bytes = rq->max_output * 8 + CODE_MAX_INFO,
                          .cb = rq->on_event,
                          .ctx = rq->ctx};
    yajl_gen g = nb_json_gen();
    char *req;
    int rc;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "op", "run");
    nb_json_kv_str(g, "code", rq->code);
    str_or_null(g, "context", rq->context);
    str_or_null(g, "language", rq->language);
    nb_json_kv_int(g, "timeout_ms", (long long)(rq->timeout * 1000.0));
    env_json(g, rq->env, rq->n_env);
    nb_json_kv_int(g, "max_output", (long long)rq->max_output);
    yajl_gen_map_close(g);
    req = nb_json_gen_take(g);
    rc = code_call(slot, req, strlen(req), &c, ae);
    free(req);
    *client_gone = c.client_gone;
    return rc;
}

int nb_code_interrupt(const struct nb_slot *slot, const char *context, struct nb_apierr *ae)
{
    struct code_call c = quick_call("interrupt the execution", "type", CODE_QUICK_MS, NULL, NULL);
    return simple_call(slot, "interrupt", context, &c, ae);
}

int nb_code_contexts(const struct nb_slot *slot, nb_code_object_fn cb, void *ctx,
                     struct nb_apierr *ae)
{
    struct code_call c = quick_call("list the contexts", "id", CODE_QUICK_MS, cb, ctx);
    return simple_call(slot, "contexts", NULL, &c, ae);
}

int nb_code_create(const struct nb_slot *slot, const char *language, const char *cwd, char **env,
                   unsigned n_env, nb_code_object_fn cb, void *ctx, struct nb_apierr *ae)
{
    struct code_call c = quick_call("create the context", "id", CODE_START_MS, cb, ctx);
    yajl_gen g = nb_json_gen();
    char *req;
    int rc;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "op", "create");
    nb_json_kv_str(g, "language", language);
    str_or_null(g, "cwd", cwd);
    env_json(g, env, n_env);
    yajl_gen_map_close(g);
    req = nb_json_gen_take(g);
    rc = code_call(slot, req, strlen(req), &c, ae);
    free(req);
    /* ENOENT here is the cwd's, not a context's */
    if (rc != 0 && ae->err == NB_E_NO_CONTEXT) {
        char msg[sizeof(ae->msg)];
        memcpy(msg, ae->msg, sizeof(msg));
        nb_apierr_set(ae, NB_E_INVALID, "bad_field", "could not create the context: %s", msg);
    }
    return rc;
}

int nb_code_restart(const struct nb_slot *slot, const char *context, nb_code_object_fn cb,
                    void *ctx, struct nb_apierr *ae)
{
    struct code_call c = quick_call("restart the context", "id", CODE_START_MS, cb, ctx);
    return simple_call(slot, "restart", context, &c, ae);
}

int nb_code_delete(const struct nb_slot *slot, const char *context, struct nb_apierr *ae)
{
    struct code_call c = quick_call("delete the context", "type", CODE_QUICK_MS, NULL, NULL);
    return simple_call(slot, "delete", context, &c, ae);
}

int nb_code_warm(const struct nb_slot *slot, int timeout_ms, struct nb_apierr *ae)
{
    struct code_call c = quick_call("start the python kernel", "type", timeout_ms, NULL, NULL);

    c.hello_ms = timeout_ms;
    return simple_call(slot, "warm", NULL, &c, ae);
}
