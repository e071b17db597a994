/*
 * exec.c - run a command in a sandbox and collect what it prints: the
 * engine behind POST /sandbox/{id}/exec and POST /run.
 *
 * The command goes to the sandbox's agent (nanobox-init, agent.c), which
 * runs it in its own process group, feeds stdin, enforces the timeout and
 * kills the group when the connection to it closes. When no agent answers
 * (a container made before it existed, an image run without it), the Docker
 * exec API does the work instead: output is demultiplexed as it streams in,
 * and on timeout the exec's process and every descendant are killed from
 * the host (Docker has no exec-kill call).
 *
 * Either way output is kept up to max_output bytes in total (stdout +
 * stderr; "output" holds the same bytes interleaved in arrival order); the
 * rest is dropped and the result says truncated. A streaming caller gets
 * each kept piece as it arrives.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agentproto.h"
#include "clock.h"
#include "demux.h"
#include "exec.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "procstat.h"
#include "templates.h"

_Static_assert(NB_EXEC_MAX_ARGS == NBA_MAX_ARGS, "the API's argv cap is the agent's");
_Static_assert(NB_EXEC_PTY_MAX == NBA_WINSIZE_MAX, "the API's window cap is the agent's");
_Static_assert(NB_EXEC_PTY_INPUT_MAX == NBA_MAX_BODY - 64, "room for the pid and data fields");

#define EXEC_PTY_OP_TIMEOUT_MS 10000

/* Where output goes: the result (capped) and the streaming callback. */
struct exec_sink {
    struct nb_exec_result *res;
    const struct nb_exec_req *rq;
};

/* Keep output under the cap; hand what was kept to the stream. -1: stop. */
static int exec_output(struct exec_sink *k, int is_stderr, const char *data, size_t len)
{
    struct nb_exec_result *o = k->res;
    size_t room = o->cap - o->kept, take = len < room ? len : room;

    if (k->rq->pty_cols > 0) {
        /* a terminal session: streamed as it comes, nothing kept, no cap */
        if (k->rq->on_output != NULL && k->rq->on_output(k->rq->ctx, is_stderr, data, len) != 0) {
            o->client_gone = 1;
            return -1;
        }
        return 0;
    }
    if (k->rq->stream_stdout && !is_stderr) {
        if (k->rq->on_output != NULL && k->rq->on_output(k->rq->ctx, 0, data, len) != 0) {
            o->client_gone = 1;
            return -1;
        }
        return 0;
    }
    if (take > 0) {
        nb_buf_append_some(is_stderr ? &o->err : &o->out, data, take);
        nb_buf_append_some(&o->all, data, take);
        o->kept += take;
        if (k->rq->on_output != NULL && k->rq->on_output(k->rq->ctx, is_stderr, data, take) != 0) {
            o->client_gone = 1;
            return -1;
        }
    }
    if (take < len)
        o->truncated = 1;
    return 0;
}

static int exec_collect(void *arg, enum nb_stream stream, const char *data, size_t len)
{
    if (stream == NB_STREAM_STDIN)
        return 0;
    return exec_output(arg, stream == NB_STREAM_STDERR, data, len);
}

/* Parent pid and session id of pid; -1 if gone. */
static int proc_stat(pid_t pid, pid_t *ppid, pid_t *sid)
{
    struct nb_procstat st;
    if (nb_procstat_read(pid, &st) != 0)
        return -1;
    *ppid = st.ppid;
    *sid = st.sid;
    return 0;
}

/* Inode of pid's pid namespace, 0 if unreadable. */
static ino_t proc_pidns(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/*
 * Stop the exec's process, its descendants and everything still in its
 * session (runc makes each exec a session leader, so a background job whose
 * parent already exited is still found), repeating until a pass finds
 * nothing new (SIGSTOP first: nothing forks while we look), then SIGKILL
 * them all. A process that called setsid() and was re-parented away before
 * the timeout escapes this; the in-sandbox agent (issue 4) closes that gap.
 */
static void kill_tree(pid_t root, pid_t init_pid)
{
    pid_t found[4096], root_ppid, root_sid;
    size_t n = 0, before;
    int passes = 0;
    /*
     * Only processes in the sandbox's pid namespace are candidates: pids
     * are host pids and may have been reused by then, and this runs as root.
     */
    ino_t ns = init_pid > 0 ? proc_pidns(init_pid) : 0;

    if (ns == 0) {
        nb_warn("cannot read the sandbox's pid namespace: timed-out command not killed");
        return;
    }
    if (proc_pidns(root) != ns || proc_stat(root, &root_ppid, &root_sid) != 0) {
        root_sid = root; /* the leader exited; its session may live on */
    } else {
        if (root_sid != root)
            root_sid = -1; /* not a session leader: follow the tree only */
        found[n++] = root;
        kill(root, SIGSTOP);
    }
    do {
        DIR *d = opendir("/proc");
        struct dirent *de;
        before = n;
        if (d == NULL)
            break;
        while ((de = readdir(d)) != NULL && n < sizeof(found) / sizeof(found[0])) {
            pid_t pid = (pid_t)atoi(de->d_name), pp, sid;
            size_t i;
            if (pid <= 0)
                continue;
            for (i = 0; i < n && found[i] != pid; i++)
                ;
            if (i < n || pid == init_pid || proc_stat(pid, &pp, &sid) != 0)
                continue;
            for (i = 0; i < n && found[i] != pp; i++)
                ;
            if ((i < n || (root_sid > 0 && sid == root_sid)) && proc_pidns(pid) == ns) {
                kill(pid, SIGSTOP);
                found[n++] = pid;
            }
        }
        closedir(d);
    } while (n > before && ++passes < 64);
    for (size_t i = 0; i < n; i++)
        kill(found[i], SIGKILL);
    if (n > 0)
        nb_info("killed %zu process(es) of a timed-out command (session %d)", n, (int)root);
}

static char *exec_config(const char *const *argv, const char *cwd, char **env, unsigned n_env)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "AttachStdin", 0);
    nb_json_kv_bool(g, "AttachStdout", 1);
    nb_json_kv_bool(g, "AttachStderr", 1);
    nb_json_kv_bool(g, "Tty", 0);
    /* no "User": the container's own, the uid of its slot */
    nb_json_kv_str(g, "WorkingDir", cwd);
    nb_json_cstr(g, "Cmd");
    yajl_gen_array_open(g);
    for (const char *const *a = argv; *a; a++)
        nb_json_cstr(g, *a);
    yajl_gen_array_close(g);
    if (n_env > 0) {
        nb_json_cstr(g, "Env");
        yajl_gen_array_open(g);
        for (unsigned i = 0; i < n_env; i++)
            nb_json_cstr(g, env[i]);
        yajl_gen_array_close(g);
    }
    yajl_gen_map_close(g);
    return nb_json_gen_take(g);
}

/* Wait up to ms for the exec to stop running; its exit code or -1. */
static int exec_wait(struct nb_docker *d, const char *exec_id, int ms, pid_t *pid)
{
    int64_t until = nb_clock_mono_ms() + ms;
    int running = 1, code = -1;
    useconds_t nap = 1000;
    struct nb_derr de;
    do {
        if (nb_docker_exec_inspect(d, exec_id, &running, &code, pid, &de) != 0)
            return -1;
        if (!running)
            return code;
        /* dockerd records the exit a moment after the stream ends: poll fast first */
        usleep(nap);
        if (nap < 32000)
            nap *= 2;
    } while (nb_clock_mono_ms() < until);
    return -1;
}

void nb_exec_result_init(struct nb_exec_result *res, size_t cap)
{
    memset(res, 0, sizeof(*res));
    nb_buf_init(&res->out, cap);
    nb_buf_init(&res->err, cap);
    nb_buf_init(&res->all, cap);
    res->cap = cap;
    res->exit_code = -1;
}

void nb_exec_result_free(struct nb_exec_result *res)
{
    nb_buf_free(&res->out);
    nb_buf_free(&res->err);
    nb_buf_free(&res->all);
}

int nb_exec_user(const struct nb_conf *c, const char *name)
{
    if (name[0] == '\0' || !strcmp(name, "user") || !strcmp(name, c->sandbox_user_name))
        return 0;
    return !strcmp(name, "root") || !strcmp(name, "0") ? 1 : -1;
}

/* The Docker exec path: no stdin, no background; used when there is no agent. */
static int exec_docker(struct nb_app *a, const struct nb_slot *slot, const struct nb_exec_req *rq,
                       struct nb_exec_result *res, struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    struct nb_demux dm;
    struct exec_sink sink = {res, rq};
    char exec_id[65];
    pid_t pid = 0;
    char *json;

    if (rq->stdin_data != NULL || rq->background || rq->pty_cols > 0 || rq->root) {
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "this sandbox has no agent (nanobox-init): stdin, background, pty and "
                      "root need it");
        return -1;
    }
    if (nb_template_root(&a->conf, slot->image)) {
        /* its container's user is 0, with the agent's capabilities */
        nb_apierr_set(ae, NB_E_AGENT_DOWN, "agent_unavailable",
                      "this sandbox's agent (nanobox-init) does not answer; a sandbox with a "
                      "root runs commands only through it");
        return -1;
    }
    json =
        exec_config(rq->argv, rq->cwd ? rq->cwd : nb_isolation_workspace(&a->conf, slot->lifecycle),
                    rq->env, rq->n_env);
    if (nb_docker_exec_create(&a->docker, slot->container_id, json, exec_id, &de) != 0) {
        free(json);
        nb_apierr_docker(ae, &de, "run the command");
        if (ae->err == NB_E_NOT_FOUND || ae->err == NB_E_CONFLICT)
            nb_apierr_set(ae, NB_E_CONFLICT, "not_running",
                          "the sandbox's container is not running: %s", de.msg);
        return -1;
    }
    free(json);
    json = NULL;
    res->via_docker = 1;
    nb_demux_init(&dm, exec_collect, &sink);
    if (nb_docker_exec_start(&a->docker, exec_id, (long)(rq->timeout * 1000.0), &dm, &de) != 0) {
        if (de.kind != NB_DERR_TIMEOUT && !res->client_gone) {
            nb_apierr_docker(ae, &de, "run the command");
            return -1;
        }
        res->timed_out = !res->client_gone;
        /* even if the shell is gone, what it left behind holds the stream open */
        exec_wait(&a->docker, exec_id, 0, &pid);
        if (pid > 0)
            kill_tree(pid, slot->init_pid);
    }
    res->exit_code = exec_wait(&a->docker, exec_id, 3000, &pid);
    if (res->exit_code > 128)
        res->signal = res->exit_code - 128;
    return 0;
}

/* Most stdin queued for the agent at a time (the rest waits for room). */
#define EXEC_STDIN_WINDOW (1024u * 1024u)

/* Slack past the command's own timeout before the host gives up on the agent. */
#define EXEC_AGENT_SLACK_MS 5000
/* how long a background command's agent has to answer that it started */
#define EXEC_BG_START_MS 30000

/* The agent path. 1: no agent answers (fall back); 0 ran; -1 error (ae set). */
static int exec_agent(struct nb_app *a, const struct nb_slot *slot, const struct nb_exec_req *rq,
                      struct nb_exec_result *res, struct nb_apierr *ae)
{
    struct nb_agent ag;
    struct nb_buf f;
    struct exec_sink sink = {res, rq};
    int pty = rq->pty_cols > 0;
    /* a PTY session without a timeout lasts as long as its client (or sandbox);
     * a background command has no timeout, and its agent EXEC_BG_START_MS to
     * say it started */
    int64_t deadline =
        pty && rq->timeout <= 0 && !rq->background ? INT64_MAX
        : rq->timeout <= 0 && rq->background
            ? nb_clock_mono_ms() + EXEC_BG_START_MS
            : nb_clock_mono_ms() + (int64_t)(rq->timeout * 1000.0) + EXEC_AGENT_SLACK_MS;
    int64_t idle_at = nb_clock_mono_ms() + NB_EXEC_IDLE_MS;
    size_t stdin_off = 0, stdin_len = rq->stdin_data != NULL ? rq->stdin_len : 0;
    int eof_sent = 0;
    int rc = -1;

    if (nb_agent_connect(slot, &ag, ae) != 0)
        return ae->err == NB_E_AGENT_DOWN ? 1 : -1;
    nb_buf_init(&f, NBA_MAX_BODY);
    for (const char *const *p = rq->argv; *p; p++)
        nb_agent_field_str(&f, NBA_T_ARG, *p);
    for (unsigned i = 0; i < rq->n_env; i++)
        nb_agent_field_str(&f, NBA_T_ENV, rq->env[i]);
    nb_agent_field_str(&f, NBA_T_CWD,
                       rq->cwd ? rq->cwd : nb_isolation_workspace(&a->conf, slot->lifecycle));
    nb_agent_field_u32(&f, NBA_T_TIMEOUT, (uint32_t)(rq->timeout * 1000.0));
    if (pty)
        nb_agent_field_u32(&f, NBA_T_WINSIZE, rq->pty_cols << 16 | rq->pty_rows); /* no cap */
    else
        nb_agent_field_u32(&f, NBA_T_MAXOUT, (uint32_t)res->cap);
    if (rq->background)
        nb_agent_field(&f, NBA_T_BG, NULL, 0);
    if (rq->background && rq->bg_no_stdin)
        nb_agent_field(&f, NBA_T_CLOSE, NULL, 0);
    if (rq->root)
        nb_agent_field(&f, NBA_T_ROOT, NULL, 0);
    nb_agent_queue(&ag, NBA_EXEC, f.data, f.len);
    nb_buf_free(&f);

    for (;;) {
        uint8_t type;
        const unsigned char *body;
        uint32_t len;
        int got;
        /* stdin goes out as the agent takes it, EXEC_STDIN_WINDOW queued at
         * most: a large one (a tar to extract) is not copied whole */
        while (stdin_off < stdin_len && ag.out.len < EXEC_STDIN_WINDOW) {
            size_t n = stdin_len - stdin_off < NBA_CHUNK ? stdin_len - stdin_off : NBA_CHUNK;
            nb_agent_queue(&ag, NBA_STDIN, rq->stdin_data + stdin_off, n);
            stdin_off += n;
        }
        if (stdin_off == stdin_len && !eof_sent) {
            eof_sent = 1;
            if (!pty) /* a terminal's input stays open: POST .../pty/{pid}/input */
                nb_agent_queue(&ag, NBA_EOF, NULL, 0);
        }
        got = nb_agent_poll_frame(&ag, &type, &body, &len, ae);
        if (got < 0)
            break;
        if (got == 0) {
            struct pollfd p[2] = {{ag.fd, POLLIN, 0}, {rq->client_fd, POLLIN | POLLRDHUP, 0}};
            int64_t left = deadline - nb_clock_mono_ms();
            if (ag.out.len > 0)
                p[0].events |= POLLOUT;
            if (left <= 0) {
                /* the agent enforces the timeout; this is the host's backstop */
                res->timed_out = 1;
                res->signal = 9;
                res->exit_code = 128 + 9;
                rc = 0;
                break;
            }
            if (poll(p, rq->client_fd >= 0 ? 2 : 1, left > 1000 ? 1000 : (int)left) < 0 &&
                errno != EINTR) {
                nb_apierr_set(ae, NB_E_INTERNAL, "internal", "poll: %s", strerror(errno));
                break;
            }
            if (p[1].revents != 0 && nb_agent_peer_left(rq->client_fd)) {
                /* closing the connection makes the agent kill the command */
                res->client_gone = 1;
                rc = 0;
                break;
            }
            if (rq->on_idle != NULL && nb_clock_mono_ms() >= idle_at) {
                idle_at = nb_clock_mono_ms() + NB_EXEC_IDLE_MS;
                if (rq->on_idle(rq->ctx) != 0) {
                    res->client_gone = 1;
                    rc = 0;
                    break;
                }
            }
            continue;
        }
        idle_at = nb_clock_mono_ms() + NB_EXEC_IDLE_MS;
        switch (type) {
        case NBA_STARTED:
            if (len == 4)
                res->pid = (int)nba_get_u32(body);
            if (rq->on_start != NULL)
                rq->on_start(rq->ctx, res->pid);
            if (rq->background) {
                rc = 0;
                goto done;
            }
            break;
        case NBA_STDOUT:
        case NBA_STDERR:
            if (exec_output(&sink, type == NBA_STDERR, (const char *)body, len) != 0) {
                rc = 0;
                goto done;
            }
            break;
        case NBA_EXIT:
            if (len >= 6) {
                int32_t code = (int32_t)nba_get_u32(body);
                res->signal = body[4];
                res->exit_code = res->signal ? 128 + res->signal : code;
                res->timed_out = (body[5] & NBA_EXIT_TIMEDOUT) != 0;
                if (body[5] & NBA_EXIT_TRUNCATED)
                    res->truncated = 1;
                res->oom_killed = (body[5] & NBA_EXIT_OOM) != 0;
            }
            rc = 0;
            goto done;
        case NBA_ERROR:
            nb_agent_error(body, len, "run the command", ae);
            if (ae->err == NB_E_NOT_FOUND) {
                /* ENOENT at start: the cwd (a missing program is the shell's 127) */
                char msg[sizeof(ae->msg)];
                memcpy(msg, ae->msg, sizeof(msg));
                nb_apierr_set(ae, NB_E_INVALID, "bad_field", "%s", msg);
            }
            goto done;
        default:
            break; /* frames of later versions */
        }
    }
done:
    nb_agent_close(&ag);
    return rc;
}

/*
 * An agent from before Z on a background exec (it does not announce
 * bg-close) would refuse the field: start the command without it, then
 * close its stdin with a request of its own.
 */
static int exec_agent_bg_no_stdin(struct nb_app *a, const struct nb_slot *slot,
                                  const struct nb_exec_req *rq, struct nb_exec_result *res,
                                  struct nb_apierr *ae)
{
    struct nb_exec_req plain = *rq;
    struct nb_apierr ignored;
    struct nb_buf f;
    int rc;

    plain.bg_no_stdin = 0;
    rc = exec_agent(a, slot, &plain, res, ae);
    if (rc != 0 || res->pid <= 0)
        return rc;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, (uint32_t)res->pid);
    nb_agent_field(&f, NBA_T_CLOSE, NULL, 0);
    nb_agent_call(slot, NBA_PSTDIN, &f, "close the process's stdin", EXEC_PTY_OP_TIMEOUT_MS, NULL,
                  NULL, &ignored);
    nb_buf_free(&f);
    return 0;
}

int nb_exec_run(struct nb_app *a, const struct nb_slot *slot, const struct nb_exec_req *rq,
                struct nb_exec_result *res, struct nb_apierr *ae)
{
    int64_t t0 = nb_clock_mono_ms();
    int rc;

    if (rq->background && rq->bg_no_stdin && !(nb_agent_caps(slot) & NB_AGENT_CAP_BG_CLOSE))
        rc = exec_agent_bg_no_stdin(a, slot, rq, res, ae);
    else
        rc = exec_agent(a, slot, rq, res, ae);
    if (rc == 1) {
        nb_info("sandbox %s: %s; using docker exec", slot->id, ae->msg);
        rc = exec_docker(a, slot, rq, res, ae);
        /* no agent because PID 1 was dying: Docker's error says less than this */
        if (rc != 0 && nb_err_is_fault(ae->err) && nb_agent_sandbox_gone(slot, 300))
            nb_apierr_set(ae, NB_E_CONFLICT, "not_running", "the sandbox's container stopped");
    }
    res->duration_ms = nb_clock_mono_ms() - t0;
    return rc;
}

int nb_exec_bg_pty(const struct nb_slot *slot)
{
    return (nb_agent_caps(slot) & NB_AGENT_CAP_BG_PTY) != 0;
}

int nb_exec_pty_input(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, const void *data,
                      size_t len, struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    if (len > NB_EXEC_PTY_INPUT_MAX) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large", "send at most %u bytes of input per call",
                      NB_EXEC_PTY_INPUT_MAX);
        return -1;
    }
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field(&f, NBA_T_DATA, data, len);
    rc = nb_agent_call(slot, NBA_PTY, &f, "type into the terminal", EXEC_PTY_OP_TIMEOUT_MS, NULL,
                       NULL, ae);
    nb_buf_free(&f);
    return rc;
}

int nb_exec_pty_resize(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, unsigned cols,
                       unsigned rows, struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field_u32(&f, NBA_T_WINSIZE, cols << 16 | rows);
    rc = nb_agent_call(slot, NBA_PTY, &f, "resize the terminal", EXEC_PTY_OP_TIMEOUT_MS, NULL, NULL,
                       ae);
    nb_buf_free(&f);
    return rc;
}

int nb_exec_pty_signal(struct nb_app *a, const struct nb_slot *slot, uint32_t pid, int sig,
                       struct nb_apierr *ae)
{
    struct nb_buf f;
    int rc;

    (void)a;
    nb_buf_init(&f, NBA_MAX_BODY);
    nb_agent_field_u32(&f, NBA_T_PID, pid);
    nb_agent_field_u32(&f, NBA_T_SIG, (uint32_t)sig);
    rc = nb_agent_call(slot, NBA_PTY, &f, "signal the terminal's command", EXEC_PTY_OP_TIMEOUT_MS,
                       NULL, NULL, ae);
    nb_buf_free(&f);
    return rc;
}

void nb_exec_result_json(yajl_gen g, const struct nb_exec_result *res, int with_output)
{
    if (with_output) {
        nb_json_cstr(g, "output");
        nb_json_str(g, res->all.data ? res->all.data : "", res->all.len);
    }
    nb_json_kv_int(g, "exit_code", res->exit_code);
    nb_json_kv_bool(g, "timed_out", res->timed_out);
    nb_json_kv_bool(g, "oom_killed", res->oom_killed);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, res->out.data ? res->out.data : "", res->out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, res->err.data ? res->err.data : "", res->err.len);
    nb_json_kv_bool(g, "truncated", res->truncated);
    nb_json_kv_int(g, "duration_ms", res->duration_ms);
}
