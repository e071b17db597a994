/*
 * pipe_pool.c - see pipe_pool.h.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "pipe_pool.h"

static struct fwd_pipe *pool_records; /* max records, handed out in order */
static size_t pool_max;               /* records in pool_records */
static size_t pool_used_hwm;          /* records ever handed out: the rest are untouched */
static struct fwd_pipe *pool_idle;    /* records with an open, empty pipe */
static size_t pool_idle_count;
static size_t pool_keep;            /* most idle pipes kept open */
static struct fwd_pipe *pool_spare; /* records without a pipe */
static size_t pool_want_size;       /* F_SETPIPE_SZ asked for, 0 for none */
static int pool_size_warned;

int pipe_pool_init(size_t max, size_t keep, size_t size)
{
    /* calloc'd pages stay untouched (and out of the RSS) until a record is
     * first used, so a large --max-conns costs nothing while idle. */
    pool_records = nb_xcalloc(max, sizeof(*pool_records));
    pool_max = max;
    pool_keep = keep;
    pool_want_size = size;
    return 0;
}

static int pipe_open(struct fwd_pipe *p)
{
    int fds[2];

    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1)
        return -1;
    if (pool_want_size > 0) {
        if (fcntl(fds[1], F_SETPIPE_SZ, (int)pool_want_size) == -1 && !pool_size_warned) {
            /* EPERM past /proc/sys/fs/pipe-max-size or the user's quota:
             * the default size still works, only slower. */
            nb_warn("cannot set pipe size to %zu bytes: %s: using the default", pool_want_size,
                    strerror(errno));
            pool_size_warned = 1;
        }
    }
    p->rfd = fds[0];
    p->wfd = fds[1];
    p->data = 0;
    return 0;
}

static void pipe_close(struct fwd_pipe *p)
{
    close(p->rfd);
    close(p->wfd);
    p->rfd = -1;
    p->wfd = -1;
    p->data = 0;
}

struct fwd_pipe *pipe_pool_get(void)
{
    struct fwd_pipe *p;

    if (pool_idle != NULL) {
        p = pool_idle;
        pool_idle = p->next;
        pool_idle_count--;
        p->next = NULL;
        return p;
    }
    if (pool_spare != NULL) {
        p = pool_spare;
        pool_spare = p->next;
    } else if (pool_used_hwm < pool_max) {
        p = &pool_records[pool_used_hwm++];
    } else {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe_open(p) == -1) {
        int saved = errno;
        p->next = pool_spare;
        pool_spare = p;
        errno = saved;
        return NULL;
    }
    p->next = NULL;
    return p;
}

void pipe_pool_put(struct fwd_pipe *p)
{
    if (p->data == 0 && pool_idle_count < pool_keep) {
        p->next = pool_idle;
        pool_idle = p;
        pool_idle_count++;
        return;
    }
    /* bytes still inside (the connection died mid-transfer) or enough idle
     * pipes already: close it rather than keep it */
    pipe_close(p);
    p->next = pool_spare;
    pool_spare = p;
}

size_t pipe_pool_trim(void)
{
    size_t n = 0;

    while (pool_idle != NULL) {
        struct fwd_pipe *p = pool_idle;
        pool_idle = p->next;
        pipe_close(p);
        p->next = pool_spare;
        pool_spare = p;
        n++;
    }
    pool_idle_count = 0;
    return n;
}

void pipe_pool_destroy(void)
{
    pipe_pool_trim();
    pool_spare = NULL;
    free(pool_records);
    pool_records = NULL;
    pool_max = 0;
    pool_used_hwm = 0;
}
