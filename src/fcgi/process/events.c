/*
 * events.c - see events.h.
 *
 * A child of the master of its own, beside the reaper: the stream blocks
 * in one long GET /events, and the reaper's loop must not wait on it (nor
 * it on a reaper removing containers or running a build). Each event is
 * judged and acted on as it comes, with SIGTERM held off meanwhile, so a
 * stop never cuts a destroy in half. What it misses (it was down, dockerd
 * restarted and lost its event history) the reaper's reconciliation finds.
 */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "log.h"
#include "reaper.h"

#define EVENTS_STREAM_MS (3600L * 1000L) /* one stream at most; then reconnect */
#define EVENTS_RETRY_US 1000000          /* between tries while Docker is away */

struct follow {
    struct nb_app *app;
    int64_t last; /* unix second of the last event seen: a reconnect asks from there */
};

static void on_event(void *arg, const struct nb_docker_event *ev)
{
    struct follow *f = arg;
    sigset_t set, old;
    int gone = !strcmp(ev->action, "destroy");

    if (ev->time > f->last)
        f->last = ev->time;
    if (strcmp(ev->action, "die") != 0 && strcmp(ev->action, "oom") != 0 && !gone)
        return;
    nb_debug("Docker event %s of container %.12s (sandbox %s)", ev->action, ev->id,
             ev->sandbox[0] ? ev->sandbox : "-");
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, &old);
    if (nb_reaper_container_event(f->app, ev->sandbox, ev->id, gone) < 0)
        nb_warn("sandbox %s: Docker reported %s of its container but cannot say more; "
                "reconciliation will judge it",
                ev->sandbox, ev->action);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void nb_events_run(struct nb_app *a)
{
    struct nb_docker stream;
    struct follow f = {a, 0};
    int failing = 0;

    nb_log_set_role("events");
    prctl(PR_SET_NAME, "nanobox-events"); /* ps and top name it */
    /* SIGTERM keeps its default action (it ends the process) but is held
     * off while an event is handled (on_event) */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (nb_docker_init(&stream, a->conf.docker_socket, a->conf.docker_max_response) != 0)
        _exit(1);
    for (;;) {
        struct nb_derr de = {0};
        int64_t since = f.last;
        if (failing) {
            if (nb_docker_ping(&stream, &de) != 0) {
                usleep(EVENTS_RETRY_US);
                continue;
            }
            nb_info("Docker answers again: following its events");
            failing = 0;
        }
        /* connected from now: what died before (a restart of this process) is
         * the reaper's start-up reconciliation's */
        if (since == 0)
            f.last = nb_clock_real_s();
        if (nb_docker_events(&stream, a->conf.instance, since, EVENTS_STREAM_MS, on_event, &f,
                             &de) == 0)
            continue; /* the stream's hour is up */
        nb_warn("Docker's event stream: %s; retrying every second (reconciliation covers the "
                "gap)",
                de.msg);
        failing = 1;
        usleep(EVENTS_RETRY_US);
    }
}
