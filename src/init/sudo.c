/*
 * sudo.c - see sudo.h.
 *
 * The host bind-mounts nanobox-init read-only at /usr/local/bin/sudo in a
 * root-mode sandbox; run under that name it connects to the agent's
 * socket (@nanobox-init, or $NANOBOX_INIT_SOCKET), sends one exec request
 * with R (run as root) and I (its own fds 0, 1 and 2 passed with the
 * request), passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on as k frames and
 * exits with the command's status (128 + signal if a signal ended it).
 * No password: in root mode anything in the sandbox may ask the agent
 * anyway (docs/AGENT-PROTOCOL.md). The options are those of Debian's sudo
 * that make sense here; the environment is reset as its env_reset does.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agentproto.h"
#include "sudo.h"

#define SUDO_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SUDO_ROOT_SHELL "/bin/bash"
#define SUDO_ENV_MAX (NBA_MAX_ENV - 16) /* caller's entries passed with -E, at most */
#define SUDO_FIELD_MAX 4096             /* bytes of one built value (SUDO_COMMAND, -c) */

extern char **environ;

struct sudo_req {
    unsigned char *buf; /* a whole frame: header, then fields */
    size_t len, cap;
    int full; /* over NBA_MAX_BODY, or out of memory */
};

struct sudo_user {
    char name[64], home[PATH_MAX], shell[PATH_MAX];
};

static void usage(FILE *out)
{
    fprintf(out, "usage: sudo [-EHknS] [-u user] [--] command [args...]\n"
                 "       sudo [-EHknS] [-u user] -i | -s [command [args...]]\n"
                 "       sudo -V | -h\n"
                 "\n"
                 "Runs the command as root through this sandbox's nanobox-init: uid 0 with no\n"
                 "capabilities and no password. -u with this sandbox's user runs it as that\n"
                 "user. -E keeps the environment, -i runs a login shell, -s a shell;\n"
                 "-H, -k, -n and -S are accepted and change nothing.\n");
}

static void req_add(struct sudo_req *q, uint8_t tag, const void *val, size_t len)
{
    if (q->full || len > NBA_MAX_BODY || q->len + NBA_HDR + len > NBA_HDR + NBA_MAX_BODY) {
        q->full = 1;
        return;
    }
    if (q->len + NBA_HDR + len > q->cap) {
        size_t ncap = (q->len + NBA_HDR + len) * 2;
        unsigned char *nb = realloc(q->buf, ncap);
        if (nb == NULL) {
            q->full = 1;
            return;
        }
        q->buf = nb;
        q->cap = ncap;
    }
    q->len += nba_field_put(q->buf + q->len, tag, val, (uint32_t)len);
}

static void req_str(struct sudo_req *q, uint8_t tag, const char *s)
{
    req_add(q, tag, s, strlen(s));
}

/* "NAME=value" */
static void req_env(struct sudo_req *q, const char *name, const char *value)
{
    char e[SUDO_FIELD_MAX + 64];

    snprintf(e, sizeof(e), "%s=%s", name, value);
    req_str(q, NBA_T_ENV, e);
}

/* The entry of uid in /etc/passwd; 0 found, -1 not. */
static int pw_find(unsigned long uid, struct sudo_user *u)
{
    FILE *f = fopen("/etc/passwd", "re");
    char line[1024];
    int found = -1;

    if (f == NULL)
        return -1;
    while (found != 0 && fgets(line, sizeof(line), f) != NULL) {
        char *fld[7], *p = line;
        int n = 0;
        line[strcspn(line, "\n")] = '\0';
        while (n < 7 && p != NULL) {
            fld[n++] = p;
            p = strchr(p, ':');
            if (p != NULL)
                *p++ = '\0';
        }
        if (n < 7 || strtoul(fld[2], NULL, 10) != uid || fld[2][0] == '\0')
            continue;
        snprintf(u->name, sizeof(u->name), "%s", fld[0]);
        snprintf(u->home, sizeof(u->home), "%s", fld[5]);
        snprintf(u->shell, sizeof(u->shell), "%s", fld[6]);
        found = 0;
    }
    fclose(f);
    return found;
}

/* argv joined by spaces; quote: escape what a shell would take apart, as
 * sudo does for -i/-s with a command. NULL when it does not fit. */
static char *args_join(char **argv, int n, int quote)
{
    static char out[SUDO_FIELD_MAX];
    size_t k = 0;

    for (int i = 0; i < n; i++) {
        if (i > 0 && k + 1 < sizeof(out))
            out[k++] = ' ';
        for (const char *p = argv[i]; *p != '\0'; p++) {
            int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                        (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '$';
            if (k + 3 >= sizeof(out))
                return NULL;
            if (quote && !plain)
                out[k++] = '\\';
            out[k++] = *p;
        }
    }
    out[k] = '\0';
    return out;
}

static int env_kept(const char *e)
{
    static const char *const keep[] = {
        "TERM=", "COLORTERM=", "DISPLAY=", "LANG=", "LANGUAGE=", "TZ=", "LC_"};

    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        if (strncmp(e, keep[i], strlen(keep[i])) == 0)
            return 1;
    }
    return 0;
}

static int sudo_connect(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *name = getenv(NBA_SOCKET_ENV);
    size_t len;
    int fd;

    if (name == NULL || name[0] == '\0')
        name = NBA_SOCKET_NAME;
    len = strlen(name);
    if (len > sizeof(sa.sun_path) - 1) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path + 1, name, len);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) == -1) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The request with fds 0, 1, 2 attached to its first bytes. */
static int send_request(int fd, unsigned char *buf, size_t len)
{
    int fds[NBA_STDIO_FDS] = {0, 1, 2};
    union {
        char buf[CMSG_SPACE(sizeof(fds))];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cbuf.buf,
                         .msg_controllen = sizeof(cbuf.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    ssize_t n;

    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    while ((n = sendmsg(fd, &msg, MSG_NOSIGNAL)) == -1 && errno == EINTR)
        ;
    if (n == -1)
        return -1;
    for (size_t off = (size_t)n; off < len; off += (size_t)n) {
        while ((n = send(fd, buf + off, len - off, MSG_NOSIGNAL)) == -1 && errno == EINTR)
            ;
        if (n == -1)
            return -1;
    }
    return 0;
}

/* Wait for the exit frame, passing signals on; the exit status. */
static int sudo_wait(int fd, int sfd)
{
    unsigned char buf[4096];
    size_t have = 0;

    for (;;) {
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        uint8_t type;
        const unsigned char *body;
        uint32_t blen;
        long fl;
        ssize_t n;

        while ((fl = nba_frame_peek(buf, have, sizeof(buf) - NBA_HDR, &type, &body, &blen)) > 0) {
            if (type == NBA_EXIT && blen == 6)
                return body[4] != 0 ? 128 + body[4] : (int)(nba_get_u32(body) & 0xff);
            if (type == NBA_ERROR && blen >= 4) {
                fprintf(stderr, "sudo: %.*s\n", (int)(blen - 4), (const char *)body + 4);
                return 1;
            }
            /* s (the pid) and anything else: nothing to do */
            memmove(buf, buf + fl, have - (size_t)fl);
            have -= (size_t)fl;
        }
        if (fl < 0) {
            fprintf(stderr, "sudo: nanobox-init answered with a frame too long\n");
            return 1;
        }
        if (poll(pf, 2, -1) == -1) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "sudo: poll: %s\n", strerror(errno));
            return 1;
        }
        if (pf[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                unsigned char k[NBA_HDR + 1];
                nba_frame_hdr(k, NBA_KILL, 1);
                k[NBA_HDR] = (unsigned char)si.ssi_signo;
                send(fd, k, sizeof(k), MSG_NOSIGNAL);
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            n = read(fd, buf + have, sizeof(buf) - have);
            if (n == -1 && errno == EINTR)
                continue;
            if (n <= 0) {
                fprintf(stderr, "sudo: nanobox-init closed the connection before the command "
                                "ended\n");
                return 1;
            }
            have += (size_t)n;
        }
    }
}

struct sudo_opts {
    int keep_env, set_home, login, shell, reset_only;
    const char *user;
};

/* 0: run with the command at argv[*first]; else exit with rc - 1 */
static int parse_opts(int argc, char **argv, struct sudo_opts *o, int *first)
{
    int i;

    for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("nanobox-init %d sudo: root without capabilities through the sandbox's "
                   "agent\n",
                   NBA_VERSION);
            return 1;
        }
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--user") == 0 && i + 1 < argc) {
            o->user = argv[++i];
            continue;
        }
        if (strncmp(a, "--user=", 7) == 0) {
            o->user = a + 7;
            continue;
        }
        if (strcmp(a, "--preserve-env") == 0) {
            o->keep_env = 1;
            continue;
        }
        if (strcmp(a, "--login") == 0 || strcmp(a, "--shell") == 0) {
            *(a[2] == 'l' ? &o->login : &o->shell) = 1;
            continue;
        }
        if (a[1] == '-') {
            fprintf(stderr, "sudo: unknown option: %s\n", a);
            usage(stderr);
            return 2;
        }
        for (const char *p = a + 1, *end = a + strlen(a); p < end; p++) {
            switch (*p) {
            case 'E':
                o->keep_env = 1;
                break;
            case 'H':
                o->set_home = 1;
                break;
            case 'n':
            case 'S':
                break; /* no password is ever asked */
            case 'k':
            case 'K':
                o->reset_only = 1;
                break;
            case 'i':
                o->login = 1;
                break;
            case 's':
                o->shell = 1;
                break;
            case 'h':
                usage(stdout);
                return 1;
            case 'b':
                fprintf(stderr, "sudo: -b is not supported in a nanobox sandbox: run "
                                "\"sudo CMD &\" or \"sudo nohup CMD &\" instead\n");
                return 2;
            case 'u':
                if (p[1] != '\0')
                    o->user = p + 1;
                else if (i + 1 < argc)
                    o->user = argv[++i];
                else {
                    fprintf(stderr, "sudo: option -u requires a user\n");
                    usage(stderr);
                    return 2;
                }
                p = end - 1; /* the rest of this argument was the user */
                break;
            default:
                fprintf(stderr, "sudo: unknown option: -%c\n", *p);
                usage(stderr);
                return 2;
            }
        }
    }
    *first = i;
    if (i == argc && !o->login && !o->shell) {
        if (o->reset_only)
            return 1; /* sudo -k: no timestamp to forget */
        usage(stderr);
        return 2;
    }
    if (o->login && o->shell) {
        fprintf(stderr, "sudo: only one of -i and -s may be given\n");
        return 2;
    }
    return 0;
}

/* -u: root (1), the caller (0), anybody else: -1 with a message. */
static int target_is_root(const char *user, const struct sudo_user *me, unsigned long uid)
{
    const char *u = user;
    char *end;
    unsigned long n;

    if (u == NULL)
        return 1;
    if (u[0] == '#')
        u++;
    n = strtoul(u, &end, 10);
    if (strcmp(u, "root") == 0 || (u[0] != '\0' && *end == '\0' && n == 0))
        return 1;
    if (strcmp(u, me->name) == 0 || (u[0] != '\0' && *end == '\0' && n == uid))
        return 0;
    fprintf(stderr, "sudo: a nanobox sandbox runs commands as root or as %s only, not as %s\n",
            me->name, user);
    return -1;
}

int init_sudo_main(int argc, char **argv)
{
    struct sudo_opts o = {0};
    struct sudo_user me, target;
    struct sudo_req q = {0};
    unsigned long uid = (unsigned long)getuid(), gid = (unsigned long)getgid();
    char cwd[PATH_MAX], num[32], *shell_argv[4], *cmd_str, *shell_cmd = NULL;
    char **cmd;
    int first, rc, root, ncmd, fd, sfd;
    sigset_t mask;

    rc = parse_opts(argc, argv, &o, &first);
    if (rc != 0)
        return rc - 1;
    for (int f = 0; f < 3; f++) {
        if (fcntl(f, F_GETFD) == -1 && open("/dev/null", O_RDWR) == -1)
            return 1;
    }
    if (pw_find(uid, &me) != 0) {
        snprintf(me.name, sizeof(me.name), "%lu", uid);
        snprintf(me.home, sizeof(me.home), "%s", getenv("HOME") ? getenv("HOME") : "/");
        snprintf(me.shell, sizeof(me.shell), "/bin/sh");
    }
    root = target_is_root(o.user, &me, uid);
    if (root < 0)
        return 1;
    target = me;
    if (root) {
        snprintf(target.name, sizeof(target.name), "root");
        snprintf(target.home, sizeof(target.home), "/root");
        snprintf(target.shell, sizeof(target.shell), "%s",
                 access(SUDO_ROOT_SHELL, X_OK) == 0 ? SUDO_ROOT_SHELL : "/bin/sh");
    }
    cmd = argv + first;
    ncmd = argc - first;
    if (o.login || o.shell) {
        static char dash_l[] = "-l", dash_c[] = "-c";
        char *sh = o.shell && getenv("SHELL") ? getenv("SHELL") : target.shell;
        int k = 0;
        shell_argv[k++] = sh;
        if (o.login)
            shell_argv[k++] = dash_l;
        if (ncmd > 0) {
            char *joined = args_join(cmd, ncmd, 1);
            if (joined == NULL) {
                fprintf(stderr, "sudo: the command is too long for -i/-s\n");
                return 1;
            }
            /* a copy: args_join's buffer is reused for SUDO_COMMAND below */
            if ((shell_cmd = strdup(joined)) == NULL)
                return 1;
            shell_argv[k++] = dash_c;
            shell_argv[k++] = shell_cmd;
        }
        cmd = shell_argv;
        ncmd = k;
    }
    cmd_str = args_join(cmd, ncmd, 0);

    /* the frame header is written at the end */
    q.cap = 4096;
    q.len = NBA_HDR;
    if ((q.buf = malloc(q.cap)) == NULL)
        return 1;
    for (int i = 0; i < ncmd; i++)
        req_str(&q, NBA_T_ARG, cmd[i]);
    if (o.keep_env) {
        int n = 0;
        for (char **e = environ; *e != NULL && n < SUDO_ENV_MAX; e++) {
            if (strchr(*e, '=') != NULL && **e != '=') {
                req_str(&q, NBA_T_ENV, *e);
                n++;
            }
        }
    } else {
        for (char **e = environ; *e != NULL; e++) {
            if (env_kept(*e))
                req_str(&q, NBA_T_ENV, *e);
        }
        req_str(&q, NBA_T_ENV, SUDO_PATH);
        req_env(&q, "SHELL", root ? SUDO_ROOT_SHELL : target.shell);
    }
    if (!o.keep_env || o.set_home || o.login)
        req_env(&q, "HOME", target.home);
    req_env(&q, "USER", target.name);
    req_env(&q, "LOGNAME", target.name);
    req_env(&q, "SUDO_USER", me.name);
    snprintf(num, sizeof(num), "%lu", uid);
    req_env(&q, "SUDO_UID", num);
    snprintf(num, sizeof(num), "%lu", gid);
    req_env(&q, "SUDO_GID", num);
    req_env(&q, "SUDO_COMMAND", cmd_str != NULL ? cmd_str : cmd[0]);
    if (o.login)
        snprintf(cwd, sizeof(cwd), "%s", target.home);
    else if (getcwd(cwd, sizeof(cwd)) == NULL || !nba_path_ok(cwd, strlen(cwd)))
        snprintf(cwd, sizeof(cwd), "/");
    req_str(&q, NBA_T_CWD, cwd);
    if (root)
        req_add(&q, NBA_T_ROOT, NULL, 0);
    req_add(&q, NBA_T_STDIO, NULL, 0);
    if (q.full) {
        fprintf(stderr, "sudo: the command and its environment are too large\n");
        free(shell_cmd);
        free(q.buf);
        return 1;
    }
    nba_frame_hdr(q.buf, NBA_EXEC, (uint32_t)(q.len - NBA_HDR));
    free(shell_cmd); /* in the request now */

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    fd = sudo_connect();
    if (fd == -1 || sfd == -1 || send_request(fd, q.buf, q.len) == -1) {
        fprintf(stderr, "sudo: cannot reach nanobox-init: %s\n", strerror(errno));
        free(q.buf);
        return 1;
    }
    free(q.buf);
    return sudo_wait(fd, sfd);
}
