/*
 * proc.h - the commands nanobox-init runs: spawning one in its own session
 * with pipes for stdin, stdout and stderr, moving bytes through those pipes
 * inside the loop, reaping, timeouts, and killing a command with everything
 * it started.
 *
 * A struct init_proc is embedded in its owner (a foreground job in exec.c,
 * a background entry in bg.c), which gets the output and the end through
 * its init_proc_ops. A command is "done" when it has exited and both output
 * pipes reached end of file, or INIT_GRACE_MS after its exit if a process
 * it left behind still holds them (they are closed then; that process
 * keeps running, as after a shell exits).
 *
 * A command of a request with a window size (Y) runs on a PTY instead of
 * pipes: the slave is its controlling terminal and its stdin, stdout and
 * stderr; init holds the master twice (pipes[0] to write, pipes[1] to
 * read; pipes[2] stays closed), so all output comes as stdout.
 */
#ifndef INIT_PROC_H
#define INIT_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include "ibuf.h"
#include "init.h"
#include "request.h"

struct init_proc;

struct init_proc_ops {
    /* May stdout/stderr be read now? 0 holds both pipes (backpressure)
     * until init_proc_resume. */
    int (*can_read)(struct init_proc *p);
    /* Bytes from stdout (stream 1) or stderr (stream 2), at most NBA_CHUNK. */
    void (*output)(struct init_proc *p, int stream, const unsigned char *data, size_t len);
    /* Pending stdin fell under INIT_STDIN_MAX after init_proc_write_stdin
     * refused bytes (may be NULL). */
    void (*stdin_room)(struct init_proc *p);
    /* The command is done; its pipes are closed. */
    void (*done)(struct init_proc *p);
};

struct init_proc {
    pid_t pid;                  /* also its session and process group */
    struct init_watch pipes[3]; /* stdin, stdout, stderr (our ends); fd -1 once closed */
    struct init_buf stdin_buf;  /* bytes for stdin not yet written */
    uint8_t stdin_close;        /* close stdin once stdin_buf is written */
    uint8_t stdin_full;         /* stdin_room is owed to the owner */
    uint8_t held;               /* output pipes not read: can_read said 0 */
    uint8_t exited;             /* reaped */
    uint8_t done;               /* exited and pipes closed */
    uint8_t timed_out;          /* killed at its deadline (or when its host left) */
    uint8_t signal;             /* the signal that ended it, 0 if it exited */
    uint8_t pty;                /* runs on a PTY: pipes[0] and pipes[1] are its master */
    int exit_code;              /* WEXITSTATUS, or -1 if a signal ended it */
    int64_t deadline;           /* timeout, monotonic ms; 0 none */
    int64_t grace;              /* close pipes at this time; 0 none */
    const struct init_proc_ops *ops;
    struct init_proc *prev, *next; /* every command not yet released */
};

/* Start the command of an exec request. 0, or an errno with a message. */
/*
 * In a child between vfork and exec (syscalls only): its signals as a new
 * process's, none blocked and SIGPIPE at its default. The rest is at its
 * default already (main.c resets every signal at start, whatever init was
 * started with); what init blocks for its signalfd and ignores itself would
 * otherwise pass to the command across exec.
 */
void init_child_signals(void);

int init_proc_spawn(struct init_proc *p, const struct init_request *r,
                    const struct init_proc_ops *ops, char *err, size_t errlen);
/* Close everything and forget the command (it may still run). */
void init_proc_release(struct init_proc *p);

/* Queue bytes for stdin: 0, EAGAIN when INIT_STDIN_MAX would be passed
 * (stdin_room follows later), EPIPE when stdin is closed. */
int init_proc_write_stdin(struct init_proc *p, const unsigned char *data, size_t len);
/* Close stdin once what is queued is written. */
void init_proc_close_stdin(struct init_proc *p);
/* The owner has room again after can_read said 0. */
void init_proc_resume(struct init_proc *p);
/* kill(-pid, sig) while the command runs; 0 or an errno. */
int init_proc_signal(struct init_proc *p, int sig);
/* SIGKILL the process group, the session and every descendant. */
void init_proc_kill_tree(struct init_proc *p);

/* A PTY command: set its window (the kernel sends SIGWINCH to its
 * foreground group); 0 or EPIPE once the terminal is gone. */
int init_proc_resize(struct init_proc *p, unsigned cols, unsigned rows);
/* A PTY command: close the master, which hangs up its terminal. */
void init_proc_hangup(struct init_proc *p);
/* The PTY command with this pid still running and not being killed, or
 * NULL. */
struct init_proc *init_proc_find_pty(uint32_t pid);

/* From the loop. */
void init_proc_event(struct init_proc *p, int stream, uint32_t events);
/* A child was reaped (any child: orphans too). */
void init_proc_reaped(pid_t pid, int status);
int64_t init_proc_next_deadline(void);
void init_proc_tick(int64_t now);
/* Send sig to every command's process group (shutdown when not PID 1). */
void init_proc_signal_all(int sig);

/* killtree.c: SIGKILL every process whose session or process group is
 * pid, or that descends from pid, as /proc shows them. */
void init_killtree(pid_t pid);

#endif
