/*
 * procs.h - the background processes engine: list, read, feed and signal
 * the commands a sandbox's agent keeps running in the background (started
 * by the exec engine with background set, exec.h). Knows no HTTP: results
 * are plain C structs, errors a struct nb_apierr.
 *
 * The agent keeps each process's last 1 MiB of stdout and of stderr;
 * offsets count bytes since the process started, so a reader polls with
 * the totals of its previous read and never misses or repeats output that
 * is still kept.
 */
#ifndef NB_PROCS_H
#define NB_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "buf.h"

/* Most bytes of stdin one nb_procs_stdin call can carry. */
#define NB_PROCS_STDIN_MAX (1024u * 1024u - 64u)
/* One background process as the agent reports it. */
struct nb_proc_info {
    uint32_t pid;
    int running;
    int32_t exit_code;     /* when not running: 128+N if signal N ended it */
    uint32_t signal;       /* the signal that ended it, 0 if none */
    uint64_t started_at;   /* unix seconds */
    uint64_t stdout_bytes; /* written since it started (kept or not) */
    uint64_t stderr_bytes;
    int pty;                     /* runs on a PTY: its output is all stdout */
    const unsigned char *fields; /* the agent's entry, for nb_proc_next_arg */
    uint32_t fields_len;
};

/*
 * Walk p's command line (as much of it as the agent keeps): start with
 * *pos = 0; 1 with the next entry in *s (*len bytes, not NUL-terminated),
 * 0 after the last.
 */
int nb_proc_next_arg(const struct nb_proc_info *p, size_t *pos, const char **s, size_t *len);

/*
 * Each background process of the sandbox, in turn, to each (the entry is
 * valid during the call only; a non-zero return is an error). 0, or -1
 * with ae set.
 */
int nb_procs_list(struct nb_app *a, const struct nb_slot *slot,
                  int (*each)(void *arg, const struct nb_proc_info *p), void *arg,
                  struct nb_apierr *ae);

/* A process and the output it still keeps past the offsets asked for. */
struct nb_proc_output {
    struct nb_proc_info info;
    struct nb_buf out, err; /* the output from the offsets on (4 MiB cap each) */
    unsigned char *raw;     /* the copy of the entry info points into */
};

/*
 * Read process pid: its state, and its stdout from byte off_out and its
 * stderr from byte off_err on. Free po with nb_proc_output_free, whatever
 * the result. 0, or -1 with ae set (404 no_process for an unknown pid).
 */
int nb_procs_read(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, uint64_t off_out,
                  uint64_t off_err, struct nb_proc_output *po, struct nb_apierr *ae);

/*
 * nb_procs_read that waits: the agent answers once pid has output past
 * the offsets or has ended (at once if it already has), so a follower is
 * told of both as they happen. Up to wait_ms, watching watch_fd (the
 * FastCGI connection, -1 none) with nb_agent_peer_left. 0 with po as
 * nb_procs_read; 1 when wait_ms passed with nothing new; 2 when
 * watch_fd's peer left; -1 with ae set (an agent too old to wait, one
 * without NB_AGENT_CAP_QUERY_WAIT, refuses it: nb_procs_read works there).
 * Free po whatever the result.
 */
int nb_procs_wait(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, uint64_t off_out,
                  uint64_t off_err, int wait_ms, int watch_fd, struct nb_proc_output *po,
                  struct nb_apierr *ae);
void nb_proc_output_free(struct nb_proc_output *po);

/*
 * Following a background process: its output as it comes, then its end.
 * The caller fills pid, the offsets to start from, the callbacks and what
 * bounds the follow; nb_procs_follow moves the offsets on as output is
 * handed over. A callback returns -1 when the client is gone (the process
 * lives on), 0 otherwise.
 */
struct nb_procs_follow {
    uint32_t pid;
    uint64_t off_out, off_err; /* bytes of each stream handed over (or skipped) so far */
    int64_t deadline;          /* monotonic ms the follow ends at; 0: none */
    int64_t idle_ms;           /* on_idle after this long without a callback */
    int watch_fd;              /* watched for the client leaving (nb_http_client_fd); -1 none */
    void *ctx;
    int (*on_output)(void *ctx, int is_stderr, const char *data, size_t len);
    int (*on_end)(void *ctx, const struct nb_proc_info *p);
    int (*on_idle)(void *ctx); /* nothing said for idle_ms: a keepalive */
};

/* How a follow ended (nb_procs_follow's answer when not -1). */
enum nb_procs_follow_end {
    NB_FOLLOW_ENDED,    /* the process ended: on_end was called */
    NB_FOLLOW_LEFT,     /* the client left (a callback said so, or watch_fd's peer) */
    NB_FOLLOW_KILLED,   /* the agent killed it at the deadline before its end was seen */
    NB_FOLLOW_DEADLINE, /* the deadline passed: the process runs on */
    NB_FOLLOW_STOPPING, /* this worker is asked to stop (SIGTERM pending): it runs on */
};

/*
 * Follow f->pid until one of enum nb_procs_follow_end, or -1 with ae set
 * (as nb_procs_read). The agent answers each wait as soon as there is
 * output or the process has ended (Q with W), so both are pushed, not
 * polled for; an agent too old to wait (it does not announce query-wait,
 * nb_agent_caps) is polled, every quarter of the time its output was quiet
 * (1 to 50 ms). Each wait lasts at most a
 * second, so a worker asked to stop is seen within that.
 */
int nb_procs_follow(struct nb_app *a, const struct nb_slot *slot, struct nb_procs_follow *f,
                    struct nb_apierr *ae);

/* Write len bytes (at most NB_PROCS_STDIN_MAX) to pid's stdin, then close it if eof. */
int nb_procs_stdin(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, const void *data,
                   size_t len, int eof, struct nb_apierr *ae);

/* Send signal sig to pid's process group. */
int nb_procs_signal(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, int sig,
                    struct nb_apierr *ae);

/*
 * The signals a process may be sent, by name ("KILL" or "SIGKILL"): the
 * number, or 0 for any other name. nb_procs_signal_names lists them for a
 * message ("KILL, TERM, ...").
 */
int nb_procs_signal_number(const char *name);
extern const char nb_procs_signal_names[];

#endif
