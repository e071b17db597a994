/*
 * exec.c - run a command in a sandbox through the Docker exec API and
 * collect what it prints: the engine behind POST /sandbox/{id}/exec and
 * POST /run.
 *
 * Output is demultiplexed as it streams in and kept up to max_output bytes
 * in total (stdout + stderr; "output" holds the same bytes interleaved in
 * arrival order); the rest is read and dropped so the command is not
 * blocked on a full pipe, and the result says truncated. On timeout the
 * exec's process and every descendant are stopped and killed from the host
 * (Docker has no exec-kill call).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "demux.h"
#include "exec.h"
#include "json.h"
#include "log.h"

static int exec_collect(void *arg, enum nb_stream stream, const char *data, size_t len)
{
    struct nb_exec_result *o = arg;
    size_t room = o->cap - o->kept, take = len < room ? len : room;
    if (stream == NB_STREAM_STDIN)
        return 0;
    if (take > 0) {
        nb_buf_append_some(stream == NB_STREAM_STDOUT ? &o->out : &o->err, data, take);
        nb_buf_append_some(&o->all, data, take);
        o->kept += take;
    }
    if (take < len)
        o->truncated = 1;
    return 0;
}

int64_t nb_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Parent pid and session id of pid from /proc/pid/stat; -1 if gone. */
static int proc_stat(pid_t pid, pid_t *ppid, pid_t *sid)
{
    char path[64], buf[512], *p;
    FILE *f;
    long pp = -1, pg = -1, sd = -1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f == NULL)
        return -1;
    /* the command name may hold spaces and parentheses: parse after the last ')' */
    if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
        sscanf(p + 1, " %*c %ld %ld %ld", &pp, &pg, &sd);
    fclose(f);
    *ppid = (pid_t)pp;
    *sid = (pid_t)sd;
    return pp < 0 ? -1 : 0;
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

static char *exec_config(const struct nb_conf *c, const char *const *argv, const char *cwd,
                         char **env, unsigned n_env)
{
    yajl_gen g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_bool(g, "AttachStdin", 0);
    nb_json_kv_bool(g, "AttachStdout", 1);
    nb_json_kv_bool(g, "AttachStderr", 1);
    nb_json_kv_bool(g, "Tty", 0);
    nb_json_kv_str(g, "User", c->sandbox_user);
    nb_json_kv_str(g, "WorkingDir", cwd ? cwd : c->workspace);
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
    int64_t until = nb_mono_ms() + ms;
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
    } while (nb_mono_ms() < until);
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

int nb_exec_run(struct nb_app *a, const struct nb_slot *slot, const char *const *argv,
                const char *cwd, char **env, unsigned n_env, double timeout,
                struct nb_exec_result *res, struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    struct nb_demux dm;
    char exec_id[65];
    int64_t t0 = nb_mono_ms();
    pid_t pid = 0;
    char *json = exec_config(&a->conf, argv, cwd, env, n_env);

    if (nb_docker_exec_create(&a->docker, slot->container_id, json, exec_id, &de) != 0) {
        free(json);
        nb_apierr_docker(ae, &de, "run the command");
        if (ae->status == 404 || ae->status == 409)
            nb_apierr_set(ae, 409, "not_running", "the sandbox's container is not running: %s", de.msg);
        return -1;
    }
    free(json);
    json = NULL;
    nb_demux_init(&dm, exec_collect, res);
    if (nb_docker_exec_start(&a->docker, exec_id, (long)(timeout * 1000.0), &dm, &de) != 0) {
        if (de.kind != NB_DERR_TIMEOUT) {
            nb_apierr_docker(ae, &de, "run the command");
            return -1;
        }
        res->timed_out = 1;
        /* even if the shell is gone, what it left behind holds the stream open */
        exec_wait(&a->docker, exec_id, 0, &pid);
        if (pid > 0)
            kill_tree(pid, slot->init_pid);
    }
    res->exit_code = exec_wait(&a->docker, exec_id, 3000, &pid);
    res->duration_ms = nb_mono_ms() - t0;
    return 0;
}

void nb_exec_result_json(yajl_gen g, const struct nb_exec_result *res, int with_output)
{
    if (with_output) {
        nb_json_cstr(g, "output");
        nb_json_str(g, res->all.data ? res->all.data : "", res->all.len);
    }
    nb_json_kv_int(g, "exit_code", res->exit_code);
    nb_json_kv_bool(g, "timed_out", res->timed_out);
    nb_json_cstr(g, "stdout");
    nb_json_str(g, res->out.data ? res->out.data : "", res->out.len);
    nb_json_cstr(g, "stderr");
    nb_json_str(g, res->err.data ? res->err.data : "", res->err.len);
    nb_json_kv_bool(g, "truncated", res->truncated);
    nb_json_kv_int(g, "duration_ms", res->duration_ms);
}
