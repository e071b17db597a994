/*
 * pipe_pool.h - the pipes that splice(2) moves bytes through, after
 * haproxy's pipe.c: a connection takes a pipe only while bytes are in
 * flight and gives it back when it runs empty, so idle connections hold
 * none and a busy forwarder reuses the same few.
 *
 * All pipe records are preallocated (two per connection at most), so the
 * pool never grows the heap after start-up; only the kernel pipes behind
 * them are created and closed as needed, and at most `keep` idle ones stay
 * open for reuse.
 */
#ifndef FWD_PIPE_POOL_H
#define FWD_PIPE_POOL_H

#include <stddef.h>

struct fwd_pipe {
    int rfd;               /* read end: splice from here to a socket */
    int wfd;               /* write end: splice from a socket to here */
    size_t data;           /* bytes in the pipe, counted from splice's results */
    struct fwd_pipe *next; /* free list link */
};

/* max: pipes that may be in use at once; keep: idle pipes kept open;
 * size: F_SETPIPE_SZ to ask for (0: the kernel's default). */
int pipe_pool_init(size_t max, size_t keep, size_t size);
/* An empty pipe, or NULL with errno set (EMFILE, ENFILE, ENOMEM). */
struct fwd_pipe *pipe_pool_get(void);
/* Give a pipe back. A pipe still holding bytes is closed, not reused. */
void pipe_pool_put(struct fwd_pipe *p);
/* Close the idle pipes (when out of fds); returns how many were closed. */
size_t pipe_pool_trim(void);
void pipe_pool_destroy(void);

#endif
