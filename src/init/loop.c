/*
 * loop.c - the epoll set every part of nanobox-init registers its fds with
 * (init.h), deferred freeing, and whether init runs as PID 1. main.c opens
 * the set, waits on it and frees what was deferred after each batch; the
 * other parts only add, change and close their watches, so they depend on
 * this file and not on main.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "init.h"

int init_is_pid1;

static int epfd = -1;
static void **deferred;
static size_t n_deferred, cap_deferred;

int init_loop_open(void)
{
    epfd = epoll_create1(EPOLL_CLOEXEC);
    return epfd == -1 ? -1 : 0;
}

int init_loop_wait(struct epoll_event *evs, int max, int timeout_ms)
{
    return epoll_wait(epfd, evs, max, timeout_ms);
}

int init_watch_add(struct init_watch *w, int fd, uint8_t kind, uint8_t stream, void *obj,
                   uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};

    w->fd = fd;
    w->kind = kind;
    w->stream = stream;
    w->obj = obj;
    w->events = events;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == -1)
        return -1;
    w->registered = 1;
    return 0;
}

void init_watch_set(struct init_watch *w, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};

    if (w->fd < 0 || (w->registered && w->events == events))
        return;
    if (events == 0 && w->kind == INIT_W_PIPE) {
        /* A pipe stays out of the set while idle (see proc.c). */
        if (w->registered)
            epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->registered = 0;
    } else if (w->registered) {
        epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev);
    } else if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev) == 0) {
        w->registered = 1;
    }
    w->events = events;
}

void init_watch_close(struct init_watch *w)
{
    if (w->fd < 0)
        return;
    /* DEL before close: a forked child may hold a copy of the fd for an
     * instant, and the registration would outlive our close. */
    if (w->registered)
        epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
    close(w->fd);
    w->fd = -1;
    w->registered = 0;
    w->events = 0;
}

void init_defer_free(void *p)
{
    if (n_deferred == cap_deferred) {
        size_t ncap = cap_deferred ? cap_deferred * 2 : 64;
        void **nv = realloc(deferred, ncap * sizeof(*nv));
        if (nv == NULL) {
            /* Out of memory: leaking beats a use after free. */
            return;
        }
        deferred = nv;
        cap_deferred = ncap;
    }
    deferred[n_deferred++] = p;
}

void init_defer_run(void)
{
    for (size_t i = 0; i < n_deferred; i++)
        free(deferred[i]);
    n_deferred = 0;
}
