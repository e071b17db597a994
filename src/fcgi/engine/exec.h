/*
 * exec.h - run a command in a sandbox and collect its output (exec.c): the
 * one exec path, shared by POST /sandbox/{id}/exec and POST /run.
 */
#ifndef NB_EXEC_H
#define NB_EXEC_H

#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "app.h"
#include "buf.h"

struct nb_exec_result {
    struct nb_buf out, err, all; /* stdout, stderr, both in arrival order */
    size_t kept;                 /* bytes kept across out + err */
    size_t cap;                  /* max_output */
    int truncated;               /* output passed the cap and was dropped */
    int timed_out;               /* killed at the timeout */
    int exit_code;               /* -1 if it could not be read; 128+N if signal N ended it */
    int signal;                  /* the signal that ended it, 0 if none */
    int oom_killed;              /* the sandbox ran out of memory while it ran */
    int pid;                     /* the command's pid in the sandbox (agent only) */
    int client_gone;             /* stopped because the client went away */
    int via_docker;              /* ran through docker exec (no agent) */
    int64_t duration_ms;
};

void nb_exec_result_init(struct nb_exec_result *res, size_t cap);
void nb_exec_result_free(struct nb_exec_result *res);

#define NB_EXEC_MAX_ARGS 4096 /* argv entries the agent takes (NBA_MAX_ARGS) */

/*
 * What to run. argv is NULL-terminated (no shell unless argv says so); cwd
 * NULL means the workspace; env entries are "NAME=value".
 */
struct nb_exec_req {
    const char *const *argv;
    const char *cwd;
    char **env;
    unsigned n_env;
    double timeout;         /* seconds */
    const char *stdin_data; /* NULL: stdin is empty (closed at once) */
    size_t stdin_len;
    int background;  /* start and return the pid (agent only) */
    int bg_no_stdin; /* background: its stdin closed from the start (reads end of file) */
    int root;        /* as root (agent only; 403 where the sandbox has none) */
    /* > 0: run on a PTY of pty_cols x pty_rows (agent only): all output comes
     * as stdout, none of it is kept in the result (it streams: on_output),
     * stdin_data is typed in, timeout 0 means none */
    unsigned pty_cols, pty_rows;
    /* stdout only streams through on_output, none of it kept (stderr is
     * kept as usual); the agent still stops forwarding output past the
     * result's cap. For a byte stream that is the answer (a tar). */
    int stream_stdout;
    int client_fd; /* the FastCGI connection: its loss kills the command; -1 none */
    /* Streaming: called with each piece of output as it arrives (after the
     * result has kept it); -1 stops the command (the client is gone). */
    int (*on_output)(void *ctx, int is_stderr, const char *data, size_t len);
    /* Called once with the command's pid when it started (may be NULL). */
    void (*on_start)(void *ctx, int pid);
    /* Called after NB_EXEC_IDLE_MS without output (may be NULL): a stream's
     * keepalive; -1 stops the command (the client is gone). */
    int (*on_idle)(void *ctx);
    void *ctx;
};

#define NB_EXEC_IDLE_MS 20000

/* A running PTY session (by its pid): type input, set its window. 0, or -1
 * with ae set (404 no_process when pid is no PTY session). */
int nb_exec_pty_input(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, const void *data,
                      size_t len, struct nb_apierr *ae);
int nb_exec_pty_resize(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, unsigned cols,
                       unsigned rows, struct nb_apierr *ae);
/* Send sig to a PTY session's command (its process group); 404 no_process as above. */
int nb_exec_pty_signal(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, int sig,
                       struct nb_apierr *ae);
/* The most input one nb_exec_pty_input call carries. */
#define NB_EXEC_PTY_INPUT_MAX (1024u * 1024u - 64u)
/* A window's columns and rows: 1..NB_EXEC_PTY_MAX. */
#define NB_EXEC_PTY_MAX 1000

/*
 * Run rq in the sandbox of slot as the sandbox user: through the sandbox's
 * agent (nanobox-init), or through docker exec when the agent does not
 * answer (logged). 0 when the command ran (whatever its exit code); -1 with
 * ae set when it could not be started.
 */
int nb_exec_run(struct nb_app *a, const struct nb_slot *slot, const struct nb_exec_req *rq,
                struct nb_exec_result *res, struct nb_apierr *ae);

/*
 * Can the sandbox's agent keep a PTY in the background (background with
 * pty_cols)? 1 yes; 0 for an agent from before that (a sandbox that
 * outlived an upgrade keeps its agent): a terminal is then a PTY session
 * of one connection. Asked once per sandbox (nb_agent_caps).
 */
int nb_exec_bg_pty(const struct nb_slot *slot);

/*
 * Who a request names as a command's user: 1 root, 0 the sandbox user
 * ("", "user" or sandbox_user_name), -1 no such user.
 */
int nb_exec_user(const struct nb_conf *c, const char *name);

/* The home of root in a sandbox that has one (HOME of its commands). */
#define NB_ROOT_HOME "/root"

/* The result's keys into an open JSON map; "output" only if with_output. */
void nb_exec_result_json(yajl_gen g, const struct nb_exec_result *res, int with_output);

#endif
