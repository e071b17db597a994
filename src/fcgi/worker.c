/*
 * worker.c - see worker.h. Routing is a plain table of method + path shape;
 * auth and id syntax are checked here once so handlers can trust both.
 */
#include "config.h"

#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "http.h"
#include "log.h"
#include "sandbox.h"
#include "worker.h"

static volatile sig_atomic_t worker_stop;

static void worker_on_term(int sig)
{
    (void)sig;
    worker_stop = 1;
    FCGX_ShutdownPending();
}

/* Constant-time comparison: the key must not leak through timing. */
static int key_equal(const char *given, const char *want)
{
    size_t gl = strlen(given), wl = strlen(want);
    unsigned char diff = (unsigned char)(gl != wl);
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)(want[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}

static int authorized(const struct nb_app *a, const struct nb_req *r)
{
    const char *h;
    if (a->conf.api_key[0] == '\0')
        return 1;
    h = nb_http_param(r, "HTTP_AUTHORIZATION");
    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        h += 7;
        while (*h == ' ')
            h++;
        return key_equal(h, a->conf.api_key);
    }
    h = nb_http_param(r, "HTTP_X_API_KEY");
    return h != NULL && key_equal(h, a->conf.api_key);
}

enum route_id {
    R_NONE,
    R_HEALTHZ,
    R_MCP,          /* /mcp */
    R_RUN,          /* /run */
    R_SANDBOXES,    /* /sandbox */
    R_SANDBOX,      /* /sandbox/{id} */
    R_TIMEOUT,      /* /sandbox/{id}/timeout */
    R_EXEC,         /* /sandbox/{id}/exec */
    R_PORT_OPEN,    /* /sandbox/{id}/ephemeralport */
    R_PORTS,        /* /sandbox/{id}/ports */
    R_PORT,         /* /sandbox/{id}/ports/{sandboxport} */
    R_FILES,        /* /sandbox/{id}/files[/mkdir|/move] (arg: the op) */
    R_PROCS,        /* /sandbox/{id}/processes[/{pid}[/stdin]] (arg: pid, op: stdin) */
};

/* Split the path; fills id (possibly invalid: checked by the caller) and arg. */
static enum route_id route_match(const char *path, char *id, size_t idlen, char *arg, size_t arglen,
                                 char *op, size_t oplen)
{
    const char *rest, *slash;
    size_t n;
    id[0] = '\0';
    if (!strcmp(path, "/healthz"))
        return R_HEALTHZ;
    if (!strcmp(path, "/run"))
        return R_RUN;
    if (!strcmp(path, "/mcp"))
        return R_MCP;
    if (!strcmp(path, "/sandbox") || !strcmp(path, "/sandbox/"))
        return R_SANDBOXES;
    if (strncmp(path, "/sandbox/", 9) != 0)
        return R_NONE;
    rest = path + 9;
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n >= idlen)
        n = idlen - 1;
    memcpy(id, rest, n);
    id[n] = '\0';
    if (slash == NULL || !strcmp(slash, "/"))
        return R_SANDBOX;
    if (!strcmp(slash, "/timeout"))
        return R_TIMEOUT;
    if (!strcmp(slash, "/exec"))
        return R_EXEC;
    if (!strcmp(slash, "/ephemeralport"))
        return R_PORT_OPEN;
    if (!strcmp(slash, "/ports") || !strcmp(slash, "/ports/"))
        return R_PORTS;
    if (!strncmp(slash, "/ports/", 7) && strlen(slash + 7) < arglen && !strchr(slash + 7, '/')) {
        snprintf(arg, arglen, "%s", slash + 7);
        return R_PORT;
    }
    if (!strcmp(slash, "/files") || !strcmp(slash, "/files/mkdir") || !strcmp(slash, "/files/move")) {
        snprintf(arg, arglen, "%s", slash[6] ? slash + 7 : "");
        return R_FILES;
    }
    if (!strcmp(slash, "/processes") || !strcmp(slash, "/processes/"))
        return R_PROCS;
    if (!strncmp(slash, "/processes/", 11)) {
        const char *pid = slash + 11, *sub = strchr(pid, '/');
        size_t pl = sub ? (size_t)(sub - pid) : strlen(pid);
        if (pl == 0 || pl >= arglen || (sub && (strlen(sub + 1) >= oplen || strchr(sub + 1, '/'))))
            return R_NONE;
        memcpy(arg, pid, pl);
        arg[pl] = '\0';
        snprintf(op, oplen, "%s", sub ? sub + 1 : "");
        return R_PROCS;
    }
    return R_NONE;
}

void nb_worker_route(struct nb_app *a, struct nb_req *r)
{
    char id[NB_ID_LEN + 8], arg[32] = "", op[16] = "";
    enum route_id rt = route_match(r->path, id, sizeof(id), arg, sizeof(arg), op, sizeof(op));
    const char *m = r->method;
    const char *allowed = NULL;

    if (rt == R_NONE) {
        nb_http_fail(r, 404, "no_route", "no such route: %.200s", r->path);
        return;
    }
    if (rt == R_HEALTHZ) {
        if (strcmp(m, "GET") && strcmp(m, "HEAD"))
            allowed = "GET";
        else
            api_healthz(a, r);
        goto done;
    }
    if (!nb_http_is_internal(r) && !authorized(a, r)) {
        nb_http_fail(r, 401, "unauthorized",
                     "missing or wrong API key: send \"Authorization: Bearer <key>\" or \"X-API-Key: <key>\"");
        return;
    }
    if (rt == R_RUN) {
        if (!strcmp(m, "POST"))
            api_run(a, r);
        else
            allowed = "POST";
        goto done;
    }
    if (rt == R_MCP) {
        /* no GET: the server sends nothing unasked, so it offers no SSE stream */
        if (!strcmp(m, "POST"))
            api_mcp_post(a, r);
        else if (!strcmp(m, "DELETE"))
            api_mcp_delete(a, r);
        else
            allowed = "POST, DELETE";
        goto done;
    }
    if (rt != R_SANDBOXES && !nb_sandbox_id_valid(id)) {
        nb_http_fail(r, 400, "bad_id", "\"%.64s\" is not a sandbox id (a lowercase UUID)", id);
        return;
    }
    switch (rt) {
    case R_SANDBOXES:
        if (!strcmp(m, "POST"))
            api_sandbox_create(a, r);
        else if (!strcmp(m, "GET"))
            api_sandbox_list(a, r);
        else
            allowed = "GET, POST";
        break;
    case R_SANDBOX:
        if (!strcmp(m, "GET"))
            api_sandbox_get(a, r, id);
        else if (!strcmp(m, "DELETE"))
            api_sandbox_delete(a, r, id);
        else
            allowed = "GET, DELETE";
        break;
    case R_TIMEOUT:
        if (!strcmp(m, "POST"))
            api_sandbox_timeout(a, r, id);
        else
            allowed = "POST";
        break;
    case R_EXEC:
        if (!strcmp(m, "POST"))
            api_sandbox_exec(a, r, id);
        else
            allowed = "POST";
        break;
    case R_PORT_OPEN:
        if (!strcmp(m, "POST"))
            api_port_open(a, r, id);
        else
            allowed = "POST";
        break;
    case R_PORTS:
        if (!strcmp(m, "GET"))
            api_port_list(a, r, id);
        else
            allowed = "GET";
        break;
    case R_PORT:
        if (!strcmp(m, "DELETE"))
            api_port_close(a, r, id, arg);
        else
            allowed = "DELETE";
        break;
    case R_FILES:
        api_files(a, r, id, arg); /* checks its methods */
        break;
    case R_PROCS:
        api_processes(a, r, id, arg, op);
        break;
    default:
        break;
    }
done:
    if (allowed) {
        nb_http_add_header(r, "Allow", allowed);
        nb_http_fail(r, 405, "method_not_allowed", "%s is not allowed here; use %s", m, allowed);
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nb_worker_run(struct nb_app *a, int listen_fd, struct nb_pool_slot *me)
{
    FCGX_Request fr;
    struct sigaction sa;
    sigset_t none, term;

    nb_log_set_role("worker");
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = worker_on_term; /* no SA_RESTART: accept must fail with EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    if (nb_docker_init(&a->docker, a->conf.docker_socket, a->conf.docker_max_response) != 0) {
        nb_error("cannot initialise the Docker client");
        _exit(1);
    }
    if (FCGX_InitRequest(&fr, listen_fd, FCGI_FAIL_ACCEPT_ON_INTR) != 0) {
        nb_error("FCGX_InitRequest failed");
        _exit(1);
    }
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    while (!worker_stop) {
        struct nb_req req;
        struct nb_apierr ae;
        int64_t t0;
        int rc;

        /*
         * SIGTERM may interrupt only the wait for a request: while one is
         * served it stays pending, so no read or write of it sees EINTR.
         */
        sigprocmask(SIG_UNBLOCK, &term, NULL);
        rc = worker_stop ? -1 : FCGX_Accept_r(&fr);
        sigprocmask(SIG_BLOCK, &term, NULL);
        if (rc < 0) {
            if (worker_stop)
                break;
            /* a connection nginx dropped before sending: just try again */
            continue;
        }
        me->busy = 1;
        me->since = nb_now();
        t0 = now_ms();
        memset(&req, 0, sizeof(req));
        nb_buf_init(&req.body, 0);
        if (nb_http_parse(&req, &fr, &ae) != 0)
            nb_http_error(&req, &ae);
        else
            nb_worker_route(a, &req);
        if (!req.answered)
            nb_http_fail(&req, 500, "internal", "the request got no answer");
        nb_info("%s %.200s %d %lldms", req.method, req.path, req.status,
                (long long)(now_ms() - t0));
        nb_buf_free(&req.body);
        FCGX_Finish_r(&fr);
        me->served++;
        me->since = nb_now();
        me->busy = 0;
    }
    nb_docker_cleanup(&a->docker);
    _exit(0);
}
