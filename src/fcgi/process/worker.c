/*
 * worker.c - see worker.h. The FastCGI accept loop around the HTTP layer:
 * parse, dispatch through the API's route table, finalize (http.c), log
 * one access line, finish the request, then run its "after the answer"
 * hooks (POST /run's container removal) while the client already has its
 * answer.
 */
#include "config.h"

#include <errno.h>
#include <fcgiapp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "sandbox.h"
#include "worker.h"
#ifdef NB_WITH_E2B
#include "e2b_front.h"
#endif

static volatile sig_atomic_t worker_stop;

/* This worker's scoreboard entry, the scoreboard and its master, for the bulk hook. */
static struct nb_pool_slot *worker_me;
static const struct nb_pool_slot *worker_board;
static unsigned worker_nboard, worker_bulk_max;
static pid_t worker_master;
static int worker_nice; /* the priority it was started with, and returns to */

/*
 * The nice value of a worker moving a file's bytes: the copies of many
 * downloads at once must not take the CPU from /healthz and execs (the
 * kernel's weight at 10 is a tenth of the default's).
 */
#define WORKER_BULK_NICE 10

/*
 * A file's bytes from here to the end of the request: outside workers_max
 * (pool.c), at a lower priority. With NB_POOL_BULK_FACTOR x workers_max
 * others already so, it is served as any request, inside workers_max: it
 * waits for a worker rather than being refused, and the processes stay
 * bounded.
 */
static void worker_bulk(void)
{
    unsigned others = 0;
    for (unsigned i = 0; i < worker_nboard; i++)
        others += &worker_board[i] != worker_me && worker_board[i].pid != 0 && worker_board[i].bulk;
    if (others >= worker_bulk_max) {
        nb_debug("%u file transfers under way: this one counts toward workers_max", others);
        return;
    }
    worker_me->bulk = 1;
    /* the master starts a spare now, not at its next tick (pool.c) */
    if (getppid() == worker_master)
        kill(worker_master, SIGUSR1);
    if (worker_nice < WORKER_BULK_NICE && setpriority(PRIO_PROCESS, 0, WORKER_BULK_NICE) != 0)
        nb_debug("bulk transfer at the usual priority: %s", strerror(errno));
}

/* After a bulk request: back to the usual priority, or leave (the master starts a fresh worker). */
static int worker_unbulk(void)
{
    if (!worker_me->bulk)
        return 0;
    worker_me->bulk = 0;
    if (getpriority(PRIO_PROCESS, 0) != worker_nice &&
        setpriority(PRIO_PROCESS, 0, worker_nice) != 0) {
        nb_info("cannot take back the usual priority after a download (%s): this worker leaves",
                strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Seconds a write to nginx may block before the request is given up: a
 * client that stops reading a streamed answer (nginx passes those on
 * unbuffered) would otherwise hold this worker until it leaves. The work
 * is then ended as when the client leaves (docs/NGINX.md).
 */
#define WORKER_SEND_TIMEOUT_S 5

static void worker_on_term(int sig)
{
    (void)sig;
    worker_stop = 1;
    FCGX_ShutdownPending();
}

/*
 * End a FastCGI connection so that nginx breaks off the client's answer
 * (nb_http_break_off): its stdout is flushed already; a record header of
 * no FastCGI version makes nginx give up on the upstream with an error,
 * and an answer whose header went out is then cut (no last chunk), where
 * a plain close would read as its end (fastcgi_keep_conn off).
 */
static void break_off(int fd)
{
    static const unsigned char bad[8] = {0};
    if (write(fd, bad, sizeof(bad)) != (ssize_t)sizeof(bad))
        nb_warn("breaking off an answer: %s", strerror(errno));
    shutdown(fd, SHUT_RDWR);
}

void nb_worker_routes(void)
{
    nb_http_set_routes(nb_api_routes, nb_api_n_routes, &nb_api_route_guard);
#ifdef NB_WITH_E2B
    nb_http_add_front(&nb_e2b_front);
#endif
}

void nb_worker_run(struct nb_app *a, int listen_fd, struct nb_pool_slot *me,
                   const struct nb_pool_slot *board, unsigned nboard)
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
    nb_worker_routes();
    worker_me = me;
    worker_board = board;
    worker_nboard = nboard;
    worker_bulk_max = NB_POOL_BULK_FACTOR * a->conf.workers_max;
    worker_master = getppid();
    worker_nice = getpriority(PRIO_PROCESS, 0);
    nb_http_set_bulk_hook(worker_bulk);
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
        me->since = nb_clock_real_s();
        t0 = nb_clock_mono_ms();
        {
            struct timeval tv = {WORKER_SEND_TIMEOUT_S, 0};
            if (setsockopt(fr.ipcFd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
                nb_warn("SO_SNDTIMEO on the FastCGI connection: %s", strerror(errno));
        }
        memset(&req, 0, sizeof(req));
        nb_buf_init(&req.body, 0);
        if (nb_http_parse(&req, &fr, &ae) != 0)
            rc = nb_http_auth_only(&req) ? nb_http_pass_auth(&req) : NB_ERR;
        else if (nb_http_param(&req, "NANOBOX_PORT_ON_DEMAND") != NULL)
            rc = nb_api_port_on_demand(a, &req, &ae); /* nginx's, never a client's */
        else
            rc = nb_http_dispatch(a, &req, &ae);
        nb_http_finalize(&req, rc, &ae);
        nb_info("%s %.200s %d %lldms", req.method, req.path, req.status,
                (long long)(nb_clock_mono_ms() - t0));
        nb_buf_free(&req.body);
        /* a write gave up (WORKER_SEND_TIMEOUT_S): Finish must not wait again */
        if (FCGX_GetError(fr.out) != 0)
            shutdown(fr.ipcFd, SHUT_RDWR);
        else if (req.broken)
            break_off(fr.ipcFd);
        FCGX_Finish_r(&fr);
        nb_http_run_after(a, &req);
        me->served++;
        me->since = nb_clock_real_s();
        if (worker_unbulk() != 0)
            worker_stop = 1;
        me->busy = 0;
    }
    nb_docker_cleanup(&a->docker);
    _exit(0);
}
