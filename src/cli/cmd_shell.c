/*
 * cmd_shell.c - "nanobox shell ID [-- COMMAND...]": an interactive terminal
 * in a sandbox, as docker exec -it gives one.
 *
 * The command runs on a PTY in the sandbox (POST exec with "pty"): the
 * answer streams the terminal's output, starting with its pid. A thread
 * makes that call, on its own client (its own curl handle), and writes the
 * output to ours as it comes. The main thread reads our stdin and sends
 * what is typed (POST .../pty/{pid}/input) and our window's size when it
 * changes (SIGWINCH: POST .../pty/{pid}/resize). The call ends when the
 * shell does; nanobox then exits with its exit status.
 *
 * On a terminal, ours goes into raw mode (no echo, no line editing, ^C and
 * ^Z are bytes for the sandbox's terminal) and is put back on every way
 * out: the normal end, an error, and a signal that ends us (the handler
 * restores it, then dies of the signal). Neither switch flushes the
 * terminal's input (TCSADRAIN, as ssh does): what was typed before nanobox
 * ran or before the shell started waits in our terminal's queue, is read
 * once the shell's pid is known and reaches it in order; what is typed
 * after the end stays for whatever reads the terminal next. Without a
 * terminal, stdin is sent as it is and its end is sent as ^D (which ends a
 * shell's input).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "args.h"
#include "base64.h"
#include "cli.h"
#include "client.h"
#include "json.h"
#include "output.h"

#define SHELL_DEFAULT_COLS 80
#define SHELL_DEFAULT_ROWS 24
#define SHELL_MAX_DIM 1000     /* the server's cap on a window's columns and rows */
#define SHELL_INPUT_CHUNK 4096 /* bytes of typing sent per request, at most */

/* Our terminal's settings before raw mode, for every way out. */
static struct termios shell_saved;
static volatile sig_atomic_t shell_raw;
static int shell_winch_pipe[2] = {-1, -1};

static void tty_restore(void)
{
    if (shell_raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &shell_saved);
        shell_raw = 0;
    }
}

/* A signal that ends us: the terminal back first (tcsetattr is
 * async-signal-safe), then die of it as we would have. */
static void on_fatal_signal(int sig)
{
    tty_restore();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_winch(int sig)
{
    int e = errno;
    char c = 'w';
    (void)sig;
    if (write(shell_winch_pipe[1], &c, 1) < 0) {
        /* full: a resize is already pending */
    }
    errno = e;
}

static int tty_raw(void)
{
    struct termios t;

    if (tcgetattr(STDIN_FILENO, &shell_saved) != 0)
        return -1;
    t = shell_saved;
    cfmakeraw(&t);
    shell_raw = 1;
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) != 0) {
        shell_raw = 0;
        return -1;
    }
    return 0;
}

/* Our window, or 80x24 when stdout is no terminal; within the server's cap. */
static void window_size(unsigned *cols, unsigned *rows)
{
    struct winsize ws;

    *cols = SHELL_DEFAULT_COLS;
    *rows = SHELL_DEFAULT_ROWS;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *cols = ws.ws_col > SHELL_MAX_DIM ? SHELL_MAX_DIM : ws.ws_col;
        *rows = ws.ws_row > SHELL_MAX_DIM ? SHELL_MAX_DIM : ws.ws_row;
    }
}

/* What the output thread and the main thread share. */
struct shell {
    struct client *c; /* the output thread's */
    struct client_req req;
    struct client_answer a;
    int call_rc;
    pthread_mutex_t mu;
    long long pid; /* from the start event; 0 until then */
    int have_exit; /* the exit event came */
    long long exit_code;
    int failed;       /* an error event came */
    int done_pipe[2]; /* the thread writes one byte when the call is over */
};

static int on_shell_event(void *ctx, yajl_val ev, const char *line, size_t len)
{
    struct shell *s = ctx;
    const char *type = out_str(ev, "type");
    (void)line;
    (void)len;

    if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
        const char *d = out_str(ev, "data");
        size_t n = strlen(d), off = 0;
        while (off < n) {
            ssize_t w = write(STDOUT_FILENO, d + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return -1; /* our stdout is gone: end the session */
            off += (size_t)w;
        }
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    if (!strcmp(type, "start")) {
        s->pid = out_int(ev, "pid", 0);
    } else if (!strcmp(type, "exit")) {
        s->have_exit = out_get(ev, "exit_code", yajl_t_number) != NULL;
        s->exit_code = out_int(ev, "exit_code", -1);
    } else if (!strcmp(type, "error")) {
        tty_restore();
        fprintf(stderr, "nanobox: %s (%s)\n", out_str(ev, "error"), out_str(ev, "code"));
        s->failed = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (!strcmp(type, "start")) {
        char c = 's';
        if (write(s->done_pipe[1], &c, 1) < 0) {
            /* the main thread polls the pid anyway */
        }
    }
    /* keepalive, and types of later versions: nothing to do */
    return 0;
}

static void *shell_output(void *arg)
{
    struct shell *s = arg;
    char c = 'd';

    s->call_rc = client_call(s->c, &s->req, &s->a);
    if (write(s->done_pipe[1], &c, 1) < 0) {
        /* cannot happen: the pipe has room for two bytes */
    }
    return NULL;
}

/* One POST to the session's input or resize route; 0, or -1 (said why). */
static int shell_post(struct client *c, const char *id, long long pid, const char *op,
                      const char *body)
{
    struct client_req req = {.method = "POST", .body = body, .timeout = 30, .keep_errors = 1};
    struct client_answer a = {0};
    struct nb_buf path;
    char suffix[64];
    int rc = 0;

    snprintf(suffix, sizeof(suffix), "/pty/%lld/%s", pid, op);
    sandbox_path(&path, id, suffix);
    req.path = path.data;
    if (client_call(c, &req, &a) != CLI_OK) {
        /* 404: the shell has just ended; its output thread reports the end */
        if (a.status >= 300 && a.status != 404) {
            tty_restore();
            client_report(c, &a);
        }
        rc = -1;
    }
    client_answer_free(&a);
    nb_buf_free(&path);
    return rc;
}

static int shell_send_input(struct client *c, const char *id, long long pid, const char *data,
                            size_t len)
{
    struct nb_buf b64;
    yajl_gen g = nb_json_gen();
    char *body;
    int rc;

    nb_buf_init(&b64, (size_t)-1);
    nb_base64_encode(&b64, data, len);
    yajl_gen_map_open(g);
    nb_json_cstr(g, "data");
    nb_json_str(g, b64.data ? b64.data : "", b64.len);
    nb_json_kv_str(g, "encoding", "base64");
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    rc = shell_post(c, id, pid, "input", body);
    free(body);
    nb_buf_free(&b64);
    return rc;
}

static void shell_send_size(struct client *c, const char *id, long long pid)
{
    char body[64];
    unsigned cols, rows;

    window_size(&cols, &rows);
    snprintf(body, sizeof(body), "{\"cols\":%u,\"rows\":%u}", cols, rows);
    shell_post(c, id, pid, "resize", body);
}

/* Relay stdin and window changes until the output thread is done. */
static void shell_relay(struct shell *s, struct client *in, const char *id, int tty)
{
    char buf[SHELL_INPUT_CHUNK];
    long long pid = 0;
    int stdin_open = 1;

    for (;;) {
        struct pollfd p[3] = {{s->done_pipe[0], POLLIN, 0},
                              {shell_winch_pipe[0], POLLIN, 0},
                              {STDIN_FILENO, POLLIN, 0}};
        int np = pid > 0 && stdin_open ? 3 : 2;

        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents) {
            char c;
            if (read(s->done_pipe[0], &c, 1) == 1 && c == 'd')
                return;
            pthread_mutex_lock(&s->mu);
            pid = s->pid;
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        if (p[1].revents) {
            char c[16];
            if (read(shell_winch_pipe[0], c, sizeof(c)) > 0 && pid > 0)
                shell_send_size(in, id, pid);
        }
        if (np == 3 && p[2].revents) {
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                /* no terminal: the end of our input ends the shell's (^D) */
                stdin_open = 0;
                if (!tty)
                    shell_send_input(in, id, pid, "\x04", 1);
                continue;
            }
            shell_send_input(in, id, pid, buf, (size_t)n);
        }
    }
}

int cmd_shell(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const char *cwd = NULL;
    struct args_list env = {0};
    const struct args_opt opts[] = {{"--cwd", ARG_VALUE, &cwd}, {"--env", ARG_LIST, &env}};
    struct args_pos pos = {.v = nb_xcalloc((size_t)argc, sizeof(char *)), .stop_after = 1};
    struct shell s = {.c = c, .mu = PTHREAD_MUTEX_INITIALIZER, .done_pipe = {-1, -1}};
    struct client in;
    struct nb_buf path = {0};
    struct sigaction sa;
    char id[37], *body = NULL;
    unsigned cols, rows;
    int tty = isatty(STDIN_FILENO), rc;
    static const int fatal[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    pthread_t th;
    yajl_gen g;

    client_init(&in);
    if ((rc = args_parse(c, cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &pos)) !=
        ARGS_GO_ON)
        goto out;
    rc = CLI_USAGE;
    if (pos.n < 1) {
        cli_usage_error(cmd, "give a sandbox ID");
        goto out;
    }
    if (pos.n > 1 && pos.v[1][0] == '\0') {
        cli_usage_error(cmd, "the program (COMMAND's first word) is empty");
        goto out;
    }
    for (size_t i = 0; i < env.n; i++)
        if (args_kv(cmd, "--env", env.v[i]) != 0)
            goto out;
    if ((rc = sandbox_resolve_id(c, cmd, pos.v[0], id)) != CLI_OK)
        goto out;

    window_size(&cols, &rows);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_cstr(g, "argv");
    yajl_gen_array_open(g);
    if (pos.n > 1) {
        for (int i = 1; i < pos.n; i++)
            nb_json_cstr(g, pos.v[i]);
    } else {
        /* the sandbox's login shell: bash if it has one, else sh */
        nb_json_cstr(g, "/bin/sh");
        nb_json_cstr(g, "-c");
        nb_json_cstr(g, "if command -v bash >/dev/null; then exec bash -l; fi; exec sh -l");
    }
    yajl_gen_array_close(g);
    nb_json_cstr(g, "pty");
    yajl_gen_map_open(g);
    nb_json_kv_int(g, "cols", cols);
    nb_json_kv_int(g, "rows", rows);
    yajl_gen_map_close(g);
    if (cwd != NULL)
        nb_json_kv_str(g, "cwd", cwd);
    args_kv_map(g, "env", &env);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    sandbox_path(&path, id, "/exec");
    s.req = (struct client_req){.method = "POST",
                                .path = path.data,
                                .body = body,
                                .timeout = 0,
                                .keep_errors = 1, /* reported once the terminal is back */
                                .on_event = on_shell_event,
                                .ctx = &s};

    in.flag_url = c->flag_url;
    in.flag_key = c->flag_key;
    rc = CLI_FAIL;
    if (pipe(s.done_pipe) != 0 || pipe(shell_winch_pipe) != 0) {
        fprintf(stderr, "nanobox: pipe: %s\n", strerror(errno));
        goto out;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_winch;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGWINCH, &sa, NULL);
    if (tty) {
        if (tty_raw() != 0) {
            fprintf(stderr, "nanobox: cannot put the terminal in raw mode: %s\n", strerror(errno));
            goto out;
        }
        atexit(tty_restore);
        for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
            signal(fatal[i], on_fatal_signal);
    }
    if (pthread_create(&th, NULL, shell_output, &s) != 0) {
        tty_restore();
        fprintf(stderr, "nanobox: cannot start a thread\n");
        goto out;
    }
    shell_relay(&s, &in, id, tty);
    pthread_join(th, NULL);
    tty_restore();

    rc = s.call_rc;
    if (rc != CLI_OK) {
        if (s.a.status >= 300)
            client_report(c, &s.a); /* else client_call said why */
        goto out;
    }
    if (s.failed) {
        rc = CLI_FAIL;
    } else if (!s.have_exit) {
        fprintf(stderr, "nanobox: the terminal's stream ended without an exit status\n");
        rc = CLI_FAIL;
    } else if (s.exit_code < 0 || s.exit_code > 255) {
        fprintf(stderr, "nanobox: the shell's exit status could not be read (%lld)\n", s.exit_code);
        rc = CLI_FAIL;
    } else {
        rc = (int)s.exit_code;
    }
out:
    tty_restore();
    client_answer_free(&s.a);
    client_cleanup(&in);
    nb_buf_free(&path);
    free(body);
    free(pos.v);
    args_list_free(&env);
    return rc;
}
