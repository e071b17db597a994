/*
 * worker.c - see worker.h. Routing is the path shape (route.c), then the
 * method; auth and id syntax are checked here once so handlers can trust both.
 */
#include "config.h"

#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "http.h"
#include "log.h"
#include "route.h"
#include "sandbox.h"
#include "worker.h"

static volatile sig_atomic_t worker_stop;

/*
 * Seconds a write to nginx may block before the request is given up: a
 * client that stops reading a streamed answer (nginx passes those on
 * unbuffered) would otherwise hold this worker until it leaves. The work
 * is then ended as when the client leaves (docs/NGINX.md).
 */
#define WORKER_SEND_TIMEOUT_S 5

#define WORKER_UNAUTHORIZED \
    "missing or wrong API key: send \"Authorization: Bearer <key>\" or \"X-API-Key: <key>\""

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

void nb_worker_route(struct nb_app *a, struct nb_req *r)
{
    char id[NB_ID_LEN + 8], arg[32] = "", op[16] = "";
    enum nb_route rt = nb_route_match(r->path, id, sizeof(id), arg, sizeof(arg), op, sizeof(op));
    const char *m = r->method;
    const char *allowed = NULL;

    /*
     * nginx's check before it reads a body (auth_request, nanobox.conf.in):
     * 204 where the request would pass the key check below, else its 401.
     */
    if (nb_http_param(r, "NANOBOX_AUTH_ONLY") != NULL) {
        if (rt == NB_ROUTE_NONE || rt == NB_ROUTE_HEALTHZ || authorized(a, r))
            nb_http_no_content(r);
        else
            nb_http_fail(r, 401, "unauthorized", WORKER_UNAUTHORIZED);
        return;
    }
    if (rt == NB_ROUTE_NONE) {
        nb_http_fail(r, 404, "no_route", "no such route: %.200s", r->path);
        return;
    }
    if (rt == NB_ROUTE_HEALTHZ) {
        if (strcmp(m, "GET") && strcmp(m, "HEAD"))
            allowed = "GET";
        else
            api_healthz(a, r);
        goto done;
    }
    if (!nb_http_is_internal(r) && !authorized(a, r)) {
        nb_http_fail(r, 401, "unauthorized", WORKER_UNAUTHORIZED);
        return;
    }
    if (rt == NB_ROUTE_RUN) {
        if (!strcmp(m, "POST"))
            api_run(a, r);
        else
            allowed = "POST";
        goto done;
    }
    if (rt == NB_ROUTE_MCP) {
        /* no GET: the server sends nothing unasked, so it offers no SSE stream */
        if (!strcmp(m, "POST"))
            api_mcp_post(a, r);
        else if (!strcmp(m, "DELETE"))
            api_mcp_delete(a, r);
        else
            allowed = "POST, DELETE";
        goto done;
    }
    if (rt != NB_ROUTE_SANDBOXES && !nb_sandbox_id_valid(id)) {
        nb_http_fail(r, 400, "bad_id", "\"%.64s\" is not a sandbox id (a lowercase UUID)", id);
        return;
    }
    switch (rt) {
    case NB_ROUTE_SANDBOXES:
        if (!strcmp(m, "POST"))
            api_sandbox_create(a, r);
        else if (!strcmp(m, "GET"))
            api_sandbox_list(a, r);
        else
            allowed = "GET, POST";
        break;
    case NB_ROUTE_SANDBOX:
        if (!strcmp(m, "GET"))
            api_sandbox_get(a, r, id);
        else if (!strcmp(m, "DELETE"))
            api_sandbox_delete(a, r, id);
        else
            allowed = "GET, DELETE";
        break;
    case NB_ROUTE_TIMEOUT:
        if (!strcmp(m, "POST"))
            api_sandbox_timeout(a, r, id);
        else
            allowed = "POST";
        break;
    case NB_ROUTE_EXEC:
        if (!strcmp(m, "POST"))
            api_sandbox_exec(a, r, id);
        else
            allowed = "POST";
        break;
    case NB_ROUTE_PORT_OPEN:
        if (!strcmp(m, "POST"))
            api_port_open(a, r, id);
        else
            allowed = "POST";
        break;
    case NB_ROUTE_PORTS:
        if (!strcmp(m, "GET"))
            api_port_list(a, r, id);
        else
            allowed = "GET";
        break;
    case NB_ROUTE_PORT:
        if (!strcmp(m, "DELETE"))
            api_port_close(a, r, id, arg);
        else
            allowed = "DELETE";
        break;
    case NB_ROUTE_FILES:
        api_files(a, r, id, arg); /* checks its methods */
        break;
    case NB_ROUTE_PROCS:
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

/* Destroys to finish after the current answer (nb_worker_defer_destroy). */
#define WORKER_MAX_DEFERRED 8
static struct {
    char id[NB_ID_LEN + 1];
    char cid[NB_CID_LEN + 1];
    uint32_t gen;
} worker_deferred[WORKER_MAX_DEFERRED];
static unsigned worker_n_deferred;

int nb_worker_defer_destroy(const char *id, const char *cid, uint32_t gen)
{
    if (worker_n_deferred == WORKER_MAX_DEFERRED)
        return -1;
    snprintf(worker_deferred[worker_n_deferred].id, sizeof(worker_deferred[0].id), "%s", id);
    snprintf(worker_deferred[worker_n_deferred].cid, sizeof(worker_deferred[0].cid), "%s", cid);
    worker_deferred[worker_n_deferred].gen = gen;
    worker_n_deferred++;
    return 0;
}

static void worker_run_deferred(struct nb_app *a)
{
    for (unsigned i = 0; i < worker_n_deferred; i++) {
        struct nb_derr de = {0};
        if (nb_sandbox_finish_destroy(a, worker_deferred[i].id, worker_deferred[i].cid,
                                      worker_deferred[i].gen, &de) != 0)
            /* left DESTROYING: reconciliation retries once it counts as stuck */
            nb_warn("could not remove sandbox %s after answering: %s", worker_deferred[i].id, de.msg);
    }
    worker_n_deferred = 0;
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
        {
            struct timeval tv = {WORKER_SEND_TIMEOUT_S, 0};
            if (setsockopt(fr.ipcFd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
                nb_warn("SO_SNDTIMEO on the FastCGI connection: %s", strerror(errno));
        }
        memset(&req, 0, sizeof(req));
        nb_buf_init(&req.body, 0);
        if (nb_http_parse(&req, &fr, &ae) == 0)
            nb_worker_route(a, &req);
        else if (nb_http_param(&req, "NANOBOX_AUTH_ONLY") != NULL)
            nb_http_no_content(&req); /* nginx's key check: the request itself gets the error */
        else
            nb_http_error(&req, &ae);
        if (!req.answered)
            nb_http_fail(&req, 500, "internal", "the request got no answer");
        nb_info("%s %.200s %d %lldms", req.method, req.path, req.status,
                (long long)(now_ms() - t0));
        nb_buf_free(&req.body);
        /* a write gave up (WORKER_SEND_TIMEOUT_S): Finish must not wait again */
        if (FCGX_GetError(fr.out) != 0)
            shutdown(fr.ipcFd, SHUT_RDWR);
        FCGX_Finish_r(&fr);
        worker_run_deferred(a);
        me->served++;
        me->since = nb_now();
        me->busy = 0;
    }
    nb_docker_cleanup(&a->docker);
    _exit(0);
}
