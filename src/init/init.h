/*
 * init.h - what the parts of nanobox-init share: its limits, the epoll
 * watch every file descriptor is registered with, the clock and deferred
 * freeing.
 *
 * nanobox-init is one thread and one epoll loop (main.c, over loop.c's
 * epoll set). Every fd in the loop is a struct init_watch embedded in the
 * object that owns it; the event's data.ptr points at the watch. An object that goes away during a
 * batch of events may still be named by a later event of the same batch,
 * so its watch is closed at once (fd -1: later events are skipped) and its
 * memory is only freed after the batch (init_defer_free).
 */
#ifndef INIT_INIT_H
#define INIT_INIT_H

#include <stddef.h>
#include <stdint.h>

#define INIT_MAX_CONNS 128            /* connections served at once; more are closed */
#define INIT_OUT_MAX (256u * 1024u)   /* bytes queued to one host connection, at most */
#define INIT_OUT_RESERVE (8u * 1024u) /* of those, kept for control frames (x, ., !, f, l) */
#define INIT_MAX_BG 64                /* background processes kept */
#define INIT_RING_SIZE \
    (1u << 20) /* last bytes of stdout (and of stderr) kept per background process */
#define INIT_STDIN_MAX (1u << 20)       /* bytes buffered for a command's stdin */
#define INIT_DEFAULT_MAXOUT (16u << 20) /* exec output forwarded when M is absent */
#define INIT_GRACE_MS 200     /* after exit, wait this long for pipes held by background children */
#define INIT_SHUTDOWN_MS 2000 /* after SIGTERM, exit when everything is gone or this much later */
#define INIT_REQ_TIMEOUT_MS 10000   /* a connection must deliver its request within this */
#define INIT_FLUSH_TIMEOUT_MS 30000 /* and read the end of its reply within this */
#define INIT_LINGER_MS 1000         /* after our last byte, wait this long for the host to close */
#define INIT_ARGV_SHOWN 4096        /* bytes of argv kept (and listed) per background process */
#define INIT_RM_DEPTH 256           /* directory levels a recursive delete descends */
#define INIT_MAX_SIGNAL 64          /* signal numbers accepted: 0 or 1..64 */
#define INIT_MAX_FWATCH 32          /* directory watches (I, J) at once; more: EAGAIN */
#define INIT_WATCHER_EVENTS 1024    /* events a polling watcher (J) keeps until polled */
#define INIT_WATCHER_IDLE_MS 600000 /* a polling watcher not polled this long is removed */

enum init_watch_kind {
    INIT_W_LISTEN,  /* the agent's socket */
    INIT_W_SIGNAL,  /* the signalfd */
    INIT_W_CONN,    /* a host connection (obj: struct init_conn) */
    INIT_W_PIPE,    /* a command's stdin, stdout or stderr (obj: struct init_proc) */
    INIT_W_INOTIFY, /* a directory watch's inotify fd (obj: struct fwatch, fwatch.c) */
};

struct init_watch {
    int fd;             /* -1 once closed: pending events are ignored */
    uint8_t kind;       /* enum init_watch_kind */
    uint8_t stream;     /* pipes: 0 stdin, 1 stdout, 2 stderr */
    uint8_t registered; /* in the epoll set (pipes leave it while they have no interest) */
    uint32_t events;    /* the epoll interest registered now */
    void *obj;          /* owner */
};

/* loop.c: the epoll set. main.c opens it (0 or -1 with errno) and waits on it. */
struct epoll_event;
int init_loop_open(void);
int init_loop_wait(struct epoll_event *evs, int max, int timeout_ms);

/* Register fd (already non-blocking) with the loop; 0 or -1 with errno. */
int init_watch_add(struct init_watch *w, int fd, uint8_t kind, uint8_t stream, void *obj,
                   uint32_t events);
/* Change the interest (level-triggered); a no-op when unchanged. */
void init_watch_set(struct init_watch *w, uint32_t events);
/* Remove from the loop and close; the watch becomes fd -1. */
void init_watch_close(struct init_watch *w);

/* Free p after the current batch of events (see the top of this file). */
void init_defer_free(void *p);
/* main.c, after each batch: free what was deferred. */
void init_defer_run(void);

/* fwatch.c: an inotify fd is readable */
void init_fwatch_event(void *obj);
/* fwatch.c: how long a polling watcher lives unpolled (ms, > 0; --watcher-idle-ms) */
extern int64_t init_watcher_idle_ms;
/* fwatch.c: the nearest expiry of an idle polling watcher (0: none); remove those due by now */
int64_t init_fwatch_next_deadline(void);
void init_fwatch_tick(int64_t now);

/* loop.c: running as PID 1 (in a container) rather than as a plain host
 * process; main.c sets it at start. */
extern int init_is_pid1;

#endif
