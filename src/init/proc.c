/*
 * proc.c - see proc.h.
 *
 * Our ends of the pipes are non-blocking and live in the loop. A pipe with
 * nothing to do is taken out of the epoll set rather than left in it with
 * no interest: a pipe whose other end closed reports EPOLLHUP/EPOLLERR
 * whatever the interest, and a level-triggered loop would spin on it.
 *
 * The child is made with vfork(): it borrows init's memory until its exec,
 * so nothing is copied (fork() copied page tables and then took a
 * copy-on-write fault for every page either side touched; inside a sandbox
 * that was most of init's CPU per command, charged to the sandbox's CPU
 * quota). Between vfork and exec the child therefore only makes syscalls
 * on memory prepared before the vfork, and writes nothing of init's but
 * errno and its own stack frames: no malloc, no free, no stdio buffer. A
 * failure there goes to the command's stderr with exit code 127, as a
 * shell reports "command not found".
 *
 * Signals rely on one rule: init knows a command's pid only once the
 * command has exec'd (or exited) in a session and process group of its own
 * (setsid() in the child). Every signal init sends it (the host's 'k' and
 * 'S', SIGTERM passed on at shutdown, a timeout's kill) goes to that group
 * with kill(-pid) and reaches the command and whatever it started in it;
 * none can be sent earlier, since nobody has the pid. A real vfork() gives
 * the rule by itself (init resumes after the exec). Where vfork() is a
 * plain fork(), under valgrind, init would resume at once: a kill sent
 * before the child's setsid() finds no group, and one to the pid alone
 * reaches a child still run by valgrind, which can lose it before the
 * exec (seen: the command exec'd in its group with nothing pending). So
 * init does not count on vfork for it: it reads a close-on-exec pipe
 * of which only the child holds the write end, and end of file there
 * means exec'd or exited; after a real vfork that read returns at once.
 * Two other ways were weighed: init making the group itself with
 * setpgid(pid, pid) would make the child a group leader, which setsid()
 * refuses, and the command must lead its own session (no controlling
 * terminal; killtree.c finds what escaped the group by it); keeping a
 * signal to re-send once the group exists needs a moment at which init
 * knows it exists, and that moment is this one.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agentproto.h"
#include "clock.h"
#include "proc.h"
#include "root.h"

#define PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define PROC_HOLD_RETRY_MS 50 /* grace over while output is held: look again this much later */
#define PROC_FINAL_READS 16   /* reads per pipe when the grace ends */
#define PROC_PTY_TERM "TERM=xterm-256color" /* a PTY command's TERM unless E gives one */

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41) /* Linux 4.13 */
#endif

extern char **environ;

static struct init_proc *procs;
static unsigned char proc_readbuf[NBA_CHUNK];

/* --- the child, between fork and exec ------------------------------------ */

static const char *env_get(char **envp, const char *name)
{
    size_t n = strlen(name);

    for (; *envp != NULL; envp++) {
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    }
    return NULL;
}

/* A file execve refused as not an executable format: run it with sh, as
 * execvp does. */
static void child_exec_sh(char *file, char **argv, char **envp)
{
    static char sh[] = "/bin/sh";
    /* On the child's stack (malloc would change init's heap), sized by the
     * protocol's cap on argv entries (NBA_MAX_ARGS). */
    char *av[NBA_MAX_ARGS + 2];
    size_t argc = 0;

    while (argv[argc] != NULL && argc < NBA_MAX_ARGS)
        argc++;
    av[0] = sh;
    av[1] = file;
    for (size_t i = 1; i < argc; i++)
        av[i + 1] = argv[i];
    av[argc + 1] = NULL;
    execve("/bin/sh", av, envp);
    errno = ENOEXEC;
}

/* execvp, with PATH taken from the command's environment. */
static void child_exec_search(char **argv, char **envp)
{
    const char *file = argv[0], *path, *p;
    char buf[PATH_MAX];
    int saw_eacces = 0;
    size_t flen = strlen(file);

    if (strchr(file, '/') != NULL) {
        execve(file, argv, envp);
        if (errno == ENOEXEC)
            child_exec_sh(argv[0], argv, envp);
        return;
    }
    path = env_get(envp, "PATH");
    if (path == NULL)
        path = PROC_DEFAULT_PATH;
    for (p = path;; p++) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        if (dlen == 0) {
            buf[0] = '.';
            dlen = 1;
        } else if (dlen < sizeof(buf)) {
            memcpy(buf, p, dlen);
        }
        if (dlen + 1 + flen < sizeof(buf)) {
            buf[dlen] = '/';
            memcpy(buf + dlen + 1, file, flen + 1);
            execve(buf, argv, envp);
            switch (errno) {
            case EACCES:
                saw_eacces = 1;
                break;
            case ENOENT:
            case ENOTDIR:
            case ELOOP:
            case ENAMETOOLONG:
            case ESTALE:
            case ENODEV:
            case ETIMEDOUT:
                break;
            case ENOEXEC:
                child_exec_sh(buf, argv, envp);
                return;
            default:
                return;
            }
        }
        if (*end == '\0')
            break;
        p = end;
    }
    errno = saw_eacces ? EACCES : ENOENT;
}

/* Report on the command's stderr, as a shell would, and exit 127. Nothing
 * is freed: the memory is init's (vfork), and init frees it when it
 * resumes. */
static void __attribute__((noreturn)) child_fail(const char *what, const char *arg)
{
    dprintf(2, "nanobox-init: %s%s: %s\n", what, arg, strerror(errno));
    _exit(127);
}

void init_child_signals(void)
{
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
}

static void __attribute__((noreturn))
child_run(char **argv, char **envp, const char *cwd, const int fds[3], int pty, int as_root)
{
    init_child_signals();
    /* Never fails for a new process (its pid is no group's id yet); the
     * check keeps a command from ever running outside its own group. */
    if (setsid() == -1)
        child_fail("setsid", "");
    /* A PTY's slave (fds[0..2]) becomes the new session's controlling terminal. */
    if (pty && ioctl(fds[0], TIOCSCTTY, 0) == -1)
        child_fail("TIOCSCTTY", "");
    /* fds 0-2 of init are always open (main.c), so pipe ends are >= 3. */
    if (dup2(fds[0], 0) == -1 || dup2(fds[1], 1) == -1 || dup2(fds[2], 2) == -1)
        _exit(127);
    /* root mode: the sandbox user, or root without capabilities (root.c) */
    if (init_root_child(as_root) == -1)
        child_fail("drop privileges", "");
    if (cwd != NULL && chdir(cwd) == -1)
        child_fail("cd ", cwd);
    child_exec_search(argv, envp);
    child_fail("", argv[0]);
}

/* --- spawning --------------------------------------------------------------- */

static char *slice_dup(const struct init_slice *s)
{
    char *p = malloc((size_t)s->len + 1);

    if (p != NULL) {
        memcpy(p, s->p, s->len);
        p[s->len] = '\0';
    }
    return p;
}

static void strv_free(char **v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

static char **argv_build(const struct init_request *r)
{
    char **v = calloc((size_t)r->nargv + 1, sizeof(*v));

    if (v == NULL)
        return NULL;
    for (uint32_t i = 0; i < r->nargv; i++) {
        if ((v[i] = slice_dup(&r->argv[i])) == NULL) {
            strv_free(v);
            return NULL;
        }
    }
    return v;
}

/* init's environment, then (on a PTY) TERM, then (as root) root's HOME,
 * USER and LOGNAME, then each E entry, each replacing the one of its name. */
static char **env_build(const struct init_request *r)
{
    static const char *const root_env[] = {"HOME=/root", "USER=root", "LOGNAME=root"};
    const char *defaults[4];
    size_t n = 0, k, nd = 0;
    char **v;

    if (r->pty)
        defaults[nd++] = PROC_PTY_TERM;
    for (size_t i = 0; r->root && i < 3; i++)
        defaults[nd++] = root_env[i];
    while (environ != NULL && environ[n] != NULL)
        n++;
    v = calloc(n + nd + r->nenv + 1, sizeof(*v));
    if (v == NULL)
        return NULL;
    for (k = 0; k < n; k++) {
        if ((v[k] = strdup(environ[k])) == NULL)
            goto fail;
    }
    /* entries 0..nd-1 are the defaults, nd.. the request's */
    for (size_t i = 0; i < nd + r->nenv; i++) {
        char *e = i < nd ? strdup(defaults[i]) : slice_dup(&r->env[i - nd]);
        size_t name, j;
        if (e == NULL)
            goto fail;
        name = (size_t)(strchr(e, '=') - e); /* request.c made sure there is one */
        for (j = 0; j < k; j++) {
            if (strncmp(v[j], e, name + 1) == 0)
                break;
        }
        if (j < k) {
            free(v[j]);
            v[j] = e;
        } else {
            v[k++] = e;
        }
    }
    return v;
fail:
    strv_free(v);
    return NULL;
}

static int proc_fail(char *err, size_t errlen, int e, const char *what)
{
    snprintf(err, errlen, "%s: %s", what, strerror(e));
    return e;
}

static int cwd_check(const char *cwd, char *err, size_t errlen)
{
    struct stat st;

    if (stat(cwd, &st) == -1) {
        int e = errno;
        snprintf(err, errlen, "working directory %s: %s", cwd, strerror(e));
        return e;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "working directory %s: %s", cwd, strerror(ENOTDIR));
        return ENOTDIR;
    }
    return 0;
}

static void fds_close(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (fds[i] != -1)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* vfork in a frame of its own: nothing of the caller's is live across it
 * (-Wclobbered), and the child leaves this frame only through exec or
 * _exit. */
static pid_t __attribute__((noinline))
proc_vfork(char **argv, char **envp, const char *cwd, const int fds[3], int pty, int as_root)
{
    pid_t pid = vfork();

    if (pid == 0)
        child_run(argv, envp, cwd, fds, pty, as_root);
    return pid;
}

/*
 * A new PTY of cols x rows: *master (ours) and *slave (the child's), both
 * close-on-exec and neither our controlling terminal. The slave is opened
 * through the master (TIOCGPTPEER), not by a path in /dev/pts that the
 * sandbox could replace. 0, or an errno with a message: EAGAIN when the
 * sandbox's devpts holds as many as it may (its max, sandbox_ptys).
 */
static int pty_open(int *master, int *slave, unsigned cols, unsigned rows, char *err, size_t errlen)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    struct termios t;
    int unlock = 0, e;

    *master = *slave = -1;
    *master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*master == -1) {
        e = errno;
        if (e == ENOSPC || e == EAGAIN) {
            snprintf(err, errlen,
                     "no PTY left: this sandbox holds as many as it may (sandbox_ptys); "
                     "close a terminal first");
            return EAGAIN;
        }
        return proc_fail(err, errlen, e, "open /dev/ptmx");
    }
    if (ioctl(*master, TIOCSPTLCK, &unlock) == -1)
        goto fail;
    *slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*slave == -1)
        goto fail;
    if (ioctl(*master, TIOCSWINSZ, &ws) == -1)
        goto fail;
    /* a UTF-8 line discipline: erase removes a whole character */
    if (tcgetattr(*slave, &t) == 0) {
        t.c_iflag |= IUTF8;
        tcsetattr(*slave, TCSANOW, &t);
    }
    return 0;
fail:
    e = errno;
    close(*master);
    if (*slave != -1)
        close(*slave);
    *master = *slave = -1;
    return proc_fail(err, errlen, e, "pty");
}

/* Returns once the child has exec'd or exited (see the top of the file):
 * the write end is close-on-exec and init's copy is closed here, so end of
 * file on the read end is the child's exec or exit. Nothing is written. */
static void proc_wait_exec(int exec_pipe[2])
{
    char c;

    close(exec_pipe[1]);
    exec_pipe[1] = -1;
    while (read(exec_pipe[0], &c, 1) == -1 && errno == EINTR)
        ;
    close(exec_pipe[0]);
    exec_pipe[0] = -1;
}

int init_proc_spawn(struct init_proc *p, const struct init_request *r,
                    const struct init_proc_ops *ops, char *err, size_t errlen)
{
    /* fds[2*s] is the child's end of stream s, fds[2*s+1] ours. */
    int fds[6] = {-1, -1, -1, -1, -1, -1}, child_fds[3], exec_pipe[2] = {-1, -1};
    char **argv = NULL, **envp = NULL, *cwd = NULL;
    int e = 0;
    pid_t pid;

    for (int s = 0; s < 3; s++)
        p->pipes[s].fd = -1;
    init_buf_init(&p->stdin_buf, INIT_STDIN_MAX);
    p->ops = ops;
    if (r->root && !init_root_mode) {
        snprintf(err, errlen, "%s", NBA_NO_ROOT_MSG);
        return EPERM;
    }
    if (r->cwd.len > 0 && ((cwd = slice_dup(&r->cwd)) == NULL))
        return proc_fail(err, errlen, ENOMEM, "exec");
    if (cwd != NULL) {
        /* with the rights the command will have */
        if (r->root)
            init_root_fs_root();
        e = cwd_check(cwd, err, errlen);
        if (r->root)
            init_root_fs_user();
        if (e != 0)
            goto out;
    }
    argv = argv_build(r);
    envp = env_build(r);
    if (argv == NULL || envp == NULL) {
        e = proc_fail(err, errlen, ENOMEM, "exec");
        goto out;
    }
    p->pty = r->pty;
    if (r->pty) {
        /* fds[0] the slave; fds[1] and fds[3] the master twice (stdin, stdout); no stderr */
        if ((e = pty_open(&fds[1], &fds[0], r->cols, r->rows, err, errlen)) != 0)
            goto out;
        fds[3] = fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
        if (fds[3] == -1) {
            e = proc_fail(err, errlen, errno, "pty");
            goto out;
        }
    }
    for (int s = 0; s < 3 && !r->pty && !r->stdio; s++) {
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) == -1) {
            e = proc_fail(err, errlen, errno, "pipe");
            goto out;
        }
        /* stdin: the child reads pfd[0]; stdout/stderr: the child writes pfd[1]. */
        fds[2 * s] = s == 0 ? pfd[0] : pfd[1];
        fds[2 * s + 1] = s == 0 ? pfd[1] : pfd[0];
    }
    if (pipe2(exec_pipe, O_CLOEXEC) == -1) {
        e = proc_fail(err, errlen, errno, "pipe");
        goto out;
    }
    /* I: the fds the host passed, which its connection owns and closes */
    for (int s = 0; s < 3; s++)
        child_fds[s] = r->stdio ? r->stdio_fds[s] : r->pty ? fds[0] : fds[2 * s];
    pid = proc_vfork(argv, envp, cwd, child_fds, r->pty, r->root);
    if (pid == -1) {
        e = proc_fail(err, errlen, errno == ENOMEM ? EAGAIN : errno, "fork");
        goto out;
    }
    proc_wait_exec(exec_pipe);
    p->pid = pid;
    for (int s = 0; s < 3; s++) {
        int fd = fds[2 * s + 1];
        if (fds[2 * s] != -1)
            close(fds[2 * s]);
        fds[2 * s] = fds[2 * s + 1] = -1;
        if (fd == -1)
            continue; /* a PTY has no stderr of its own */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        /* stdin joins the loop when there is something to write. */
        p->pipes[s].fd = fd;
        p->pipes[s].kind = INIT_W_PIPE;
        p->pipes[s].stream = (uint8_t)s;
        p->pipes[s].obj = p;
        if (s > 0)
            init_watch_set(&p->pipes[s], EPOLLIN);
    }
    if (r->timeout_ms > 0)
        p->deadline = nb_clock_mono_ms() + r->timeout_ms;
    p->prev = NULL;
    p->next = procs;
    if (procs != NULL)
        procs->prev = p;
    procs = p;
out:
    fds_close(fds, 6);
    fds_close(exec_pipe, 2);
    strv_free(argv);
    strv_free(envp);
    free(cwd);
    return e;
}

void init_proc_release(struct init_proc *p)
{
    for (int s = 0; s < 3; s++)
        init_watch_close(&p->pipes[s]);
    init_buf_free(&p->stdin_buf);
    if (p->prev != NULL)
        p->prev->next = p->next;
    else if (procs == p)
        procs = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

/* --- moving bytes ----------------------------------------------------------- */

static void proc_finish(struct init_proc *p)
{
    if (p->done)
        return;
    p->done = 1;
    p->deadline = p->grace = 0;
    for (int s = 0; s < 3; s++)
        init_watch_close(&p->pipes[s]);
    init_buf_free(&p->stdin_buf);
    p->ops->done(p);
}

static void proc_check_done(struct init_proc *p)
{
    if (p->exited && p->pipes[1].fd < 0 && p->pipes[2].fd < 0)
        proc_finish(p);
}

/* Write what stdin holds; owed_room: call stdin_room when it drained. */
static void proc_stdin_flush(struct init_proc *p, int call_room)
{
    struct init_watch *w = &p->pipes[0];

    while (w->fd >= 0 && init_buf_pending(&p->stdin_buf) > 0) {
        ssize_t n = write(w->fd, init_buf_head(&p->stdin_buf), init_buf_pending(&p->stdin_buf));
        if (n > 0) {
            init_buf_consume(&p->stdin_buf, (size_t)n);
            continue;
        }
        if (n == -1 && (errno == EAGAIN || errno == EINTR))
            break;
        /* The command closed its stdin: what is left can never be read. */
        init_watch_close(w);
    }
    if (init_buf_pending(&p->stdin_buf) == 0) {
        init_buf_free(&p->stdin_buf);
        if (p->stdin_close)
            init_watch_close(w);
    }
    if (w->fd >= 0)
        init_watch_set(w, init_buf_pending(&p->stdin_buf) > 0 ? EPOLLOUT : 0);
    if (call_room && p->stdin_full && (w->fd < 0 || init_buf_pending(&p->stdin_buf) == 0)) {
        p->stdin_full = 0;
        if (p->ops->stdin_room != NULL)
            p->ops->stdin_room(p);
    }
}

int init_proc_write_stdin(struct init_proc *p, const unsigned char *data, size_t len)
{
    size_t pending = init_buf_pending(&p->stdin_buf);

    if (p->pipes[0].fd < 0 || p->stdin_close)
        return EPIPE;
    if (pending > 0 && pending + len > INIT_STDIN_MAX) {
        p->stdin_full = 1;
        return EAGAIN;
    }
    if (init_buf_append(&p->stdin_buf, data, len) == -1) {
        p->stdin_full = 1;
        return EAGAIN;
    }
    proc_stdin_flush(p, 0);
    return 0;
}

void init_proc_close_stdin(struct init_proc *p)
{
    /* A terminal has no end of input to close: ^D (VEOF) is typed as input. */
    if (p->pty)
        return;
    p->stdin_close = 1;
    proc_stdin_flush(p, 0);
}

static void proc_hold(struct init_proc *p)
{
    p->held = 1;
    init_watch_set(&p->pipes[1], 0);
    init_watch_set(&p->pipes[2], 0);
}

void init_proc_resume(struct init_proc *p)
{
    if (!p->held)
        return;
    p->held = 0;
    init_watch_set(&p->pipes[1], EPOLLIN);
    init_watch_set(&p->pipes[2], EPOLLIN);
}

/* One read from an output pipe: 1 bytes came, 0 nothing now, -1 closed. */
static int proc_read(struct init_proc *p, int stream)
{
    struct init_watch *w = &p->pipes[stream];
    ssize_t n;

    if (w->fd < 0)
        return -1;
    n = read(w->fd, proc_readbuf, sizeof(proc_readbuf));
    if (n > 0) {
        p->ops->output(p, stream, proc_readbuf, (size_t)n);
        return 1;
    }
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return 0;
    init_watch_close(w);
    return -1;
}

void init_proc_event(struct init_proc *p, int stream, uint32_t events)
{
    if (stream == 0) {
        proc_stdin_flush(p, 1);
        return;
    }
    if (!p->ops->can_read(p)) {
        proc_hold(p);
        return;
    }
    if (proc_read(p, stream) == -1)
        proc_check_done(p);
}

/* --- ending ----------------------------------------------------------------- */

/* The command's group, which exists from init_proc_spawn's return until
 * the last process in it is gone (the command, a session leader, cannot
 * leave it): see the top of the file. */
static int proc_kill(const struct init_proc *p, int sig)
{
    if (kill(-p->pid, sig) == -1)
        return errno;
    return 0;
}

int init_proc_signal(struct init_proc *p, int sig)
{
    if (p->exited)
        return ESRCH;
    return proc_kill(p, sig);
}

void init_proc_kill_tree(struct init_proc *p)
{
    if (p->done)
        return;
    init_killtree(p->pid);
}

int init_proc_resize(struct init_proc *p, unsigned cols, unsigned rows)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    int fd = p->pipes[1].fd >= 0 ? p->pipes[1].fd : p->pipes[0].fd;

    if (!p->pty || fd < 0 || ioctl(fd, TIOCSWINSZ, &ws) == -1)
        return EPIPE;
    return 0;
}

void init_proc_hangup(struct init_proc *p)
{
    if (!p->pty)
        return;
    init_watch_close(&p->pipes[0]);
    init_watch_close(&p->pipes[1]);
    init_buf_free(&p->stdin_buf);
    proc_check_done(p);
}

struct init_proc *init_proc_find_pty(uint32_t pid)
{
    for (struct init_proc *p = procs; p != NULL; p = p->next) {
        /* timed_out: being killed (its deadline, or its host left), so
         * already gone for whoever would type into it or watch it */
        if (p->pty && !p->done && !p->timed_out && (uint32_t)p->pid == pid)
            return p;
    }
    return NULL;
}

void init_proc_reaped(pid_t pid, int status)
{
    struct init_proc *p;

    for (p = procs; p != NULL; p = p->next) {
        if (p->pid == pid && !p->exited)
            break;
    }
    if (p == NULL)
        return; /* an orphan */
    p->exited = 1;
    p->deadline = 0;
    if (WIFSIGNALED(status)) {
        p->exit_code = -1;
        p->signal = (uint8_t)WTERMSIG(status);
    } else {
        p->exit_code = WEXITSTATUS(status);
    }
    if (p->pipes[1].fd < 0 && p->pipes[2].fd < 0)
        proc_finish(p);
    else
        p->grace = nb_clock_mono_ms() + INIT_GRACE_MS;
}

/* The grace is over: take what the pipes hold now, then stop listening. */
static void proc_grace_end(struct init_proc *p, int64_t now)
{
    if (p->held) {
        p->grace = now + PROC_HOLD_RETRY_MS;
        return;
    }
    for (int s = 1; s <= 2; s++) {
        for (int i = 0; i < PROC_FINAL_READS && p->ops->can_read(p); i++) {
            if (proc_read(p, s) != 1)
                break;
        }
    }
    if (!p->ops->can_read(p) && (p->pipes[1].fd >= 0 || p->pipes[2].fd >= 0)) {
        proc_hold(p);
        p->grace = now + PROC_HOLD_RETRY_MS;
        return;
    }
    proc_finish(p);
}

int64_t init_proc_next_deadline(void)
{
    int64_t d = 0;

    for (struct init_proc *p = procs; p != NULL; p = p->next) {
        if (p->deadline != 0 && (d == 0 || p->deadline < d))
            d = p->deadline;
        if (p->grace != 0 && (d == 0 || p->grace < d))
            d = p->grace;
    }
    return d;
}

void init_proc_tick(int64_t now)
{
    struct init_proc *p, *next;

    for (p = procs; p != NULL; p = next) {
        next = p->next;
        if (p->deadline != 0 && p->deadline <= now && !p->exited) {
            p->deadline = 0;
            p->timed_out = 1;
            init_proc_kill_tree(p);
        }
        if (p->grace != 0 && p->grace <= now)
            proc_grace_end(p, now);
    }
}

void init_proc_signal_all(int sig)
{
    for (struct init_proc *p = procs; p != NULL; p = p->next) {
        if (!p->exited)
            proc_kill(p, sig);
    }
}
