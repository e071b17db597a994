/*
 * ports.c - see ports.h.
 *
 * A forwarder binds its listeners before it says it is ready, and the
 * worker waits for that word before answering: so a taken host port is a
 * clean 409 decided by bind(2) itself, never by a check that can race. The
 * forwarder is started through a double fork into its own session, so it
 * outlives the worker and any restart of nanobox-fcgi; the table remembers
 * its pid and start time, which is how a later process can tell it from an
 * unrelated process that reused the pid.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "helper.h"
#include "log.h"
#include "ports.h"
#include "procstat.h"
#include "registry.h"

#define FWD_READY_TIMEOUT_MS 5000
#define FWD_EXIT_WAIT_MS 1000 /* a refusing forwarder exits within this */
#define FWD_STOP_WAIT_MS 1000
#define PORT_ALLOC_TRIES 16

uint64_t nb_proc_starttime(pid_t pid)
{
    struct nb_procstat st;
    /* a zombie has finished: it only waits to be reaped */
    if (nb_procstat_read(pid, &st) != 0 || st.state == 'Z' || st.state == 'X')
        return 0;
    return st.start;
}

static int fwd_alive(pid_t pid, uint64_t start)
{
    return pid > 0 && start != 0 && nb_proc_starttime(pid) == start;
}

static void socket_path(const struct nb_conf *c, const char *id, uint16_t sandboxport, char *out,
                        size_t outlen)
{
    snprintf(out, outlen, "%s/%s-%u.sock", c->ports_dir, id, (unsigned)sandboxport);
}

/*
 * <id>-<port>.open: a regular file that is there while the port's forwarder
 * is recorded as open, for nginx's `if (-f ...)` (nanobox-ports.conf.in),
 * which cannot test the socket itself (it opens the file to test it). A
 * port without one costs nginx a call to nanobox-fcgi (ports on demand).
 */
static void open_path(const struct nb_conf *c, const char *id, uint16_t sandboxport, char *out,
                      size_t outlen)
{
    snprintf(out, outlen, "%s/%s-%u.open", c->ports_dir, id, (unsigned)sandboxport);
}

static void mark_open(const struct nb_conf *c, const char *id, uint16_t sandboxport)
{
    char path[PATH_MAX];
    int fd;
    open_path(c, id, sandboxport, path, sizeof(path));
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd == -1)
        nb_warn("sandbox %s: cannot create %s: %s", id, path, strerror(errno));
    else
        close(fd);
}

static void paused_path(const struct nb_conf *c, const char *id, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s.paused", c->ports_dir, id);
}

int nb_ports_mark_paused(const struct nb_conf *c, const char *id, int paused)
{
    char path[PATH_MAX];
    int fd;

    paused_path(c, id, path, sizeof(path));
    if (!paused) {
        if (unlink(path) == 0 || errno == ENOENT)
            return 0;
        nb_warn("sandbox %s: cannot remove %s: %s", id, path, strerror(errno));
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd == -1) {
        nb_warn("sandbox %s: cannot create %s: %s", id, path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

/* SIGTERM, wait, SIGKILL if need be; the socket file goes either way. */
static void fwd_stop(const struct nb_conf *c, const char *id, uint16_t sandboxport, pid_t pid,
                     uint64_t start)
{
    char path[PATH_MAX];
    if (fwd_alive(pid, start)) {
        int waited = 0;
        kill(pid, SIGTERM);
        while (fwd_alive(pid, start) && waited < FWD_STOP_WAIT_MS) {
            usleep(5000);
            waited += 5;
        }
        if (fwd_alive(pid, start)) {
            nb_warn("forwarder %d did not stop on SIGTERM: killing it", (int)pid);
            kill(pid, SIGKILL);
        }
    }
    socket_path(c, id, sandboxport, path, sizeof(path));
    unlink(path);
    open_path(c, id, sandboxport, path, sizeof(path));
    unlink(path);
}

/* Read until '\n' or timeout; returns bytes read (NUL-terminated). */
static ssize_t read_line(int fd, char *buf, size_t len, int timeout_ms)
{
    size_t got = 0;
    while (got + 1 < len) {
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t n;
        int rc = poll(&pfd, 1, timeout_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break;
        n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(buf, '\n', got))
            break;
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

enum spawn_result { SPAWN_OK = 0, SPAWN_IN_USE = 1, SPAWN_FAILED = -1 };

/*
 * A forwarder that refused to start (its port in use, a bad argument)
 * exits by itself right after it says so; wait for that, so that the
 * answer, a 409 say, is only sent once the loser is gone and the caller
 * finds exactly the forwarders that serve. It is not our child (the
 * double fork), so "gone" means no process or a zombie: its sockets are
 * closed either way. Bounded: a forwarder that lingers is logged, not
 * waited for.
 */
static void fwd_wait_gone(pid_t pid)
{
    int64_t until = nb_clock_mono_ms() + FWD_EXIT_WAIT_MS;
    struct nb_procstat st;

    while (nb_procstat_read(pid, &st) == 0 && st.state != 'Z' && st.state != 'X') {
        if (nb_clock_mono_ms() >= until) {
            nb_warn("forwarder %d still running %d ms after it refused to start", (int)pid,
                    FWD_EXIT_WAIT_MS);
            return;
        }
        usleep(2000);
    }
}

/*
 * Start a forwarder for sandboxport on hostport. On SPAWN_OK *pid and
 * *start identify it; otherwise msg says why.
 */
static enum spawn_result fwd_spawn(const struct nb_conf *c, const char *id, pid_t init_pid,
                                   uint16_t sandboxport, uint16_t hostport, int64_t expires,
                                   pid_t *pid, uint64_t *start, char *msg, size_t msglen)
{
    char bin[PATH_MAX], sock[PATH_MAX], a_pid[24], a_port[8], a_listen[96], a_exp[24], a_mode[16];
    char line[256], a_paused[PATH_MAX];
    int ready[2], pidp[2];
    pid_t child, fwd = 0;
    int status;

    nb_helper_path(c->fwd_path, "nanobox-fwd", NB_SBINDIR "/nanobox-fwd", bin, sizeof(bin));
    socket_path(c, id, sandboxport, sock, sizeof(sock));
    snprintf(a_pid, sizeof(a_pid), "%d", (int)init_pid);
    snprintf(a_port, sizeof(a_port), "%u", (unsigned)sandboxport);
    snprintf(a_listen, sizeof(a_listen), "%s:%u", c->port_bind, (unsigned)hostport);
    snprintf(a_exp, sizeof(a_exp), "%lld", (long long)expires);
    snprintf(a_mode, sizeof(a_mode), "%o", c->socket_mode);
    paused_path(c, id, a_paused, sizeof(a_paused));

    if (pipe2(ready, O_CLOEXEC) != 0)
        goto sys_fail;
    if (pipe2(pidp, O_CLOEXEC) != 0) {
        close(ready[0]);
        close(ready[1]);
        goto sys_fail;
    }
    child = fork();
    if (child < 0) {
        close(ready[0]);
        close(ready[1]);
        close(pidp[0]);
        close(pidp[1]);
        goto sys_fail;
    }
    if (child == 0) {
        /* first child: a new session, then the forwarder, then leave */
        pid_t gc;
        setsid();
        gc = fork();
        if (gc != 0) {
            (void)!write(pidp[1], &gc, sizeof(gc));
            _exit(gc > 0 ? 0 : 1);
        }
        {
            const char *args[] = {bin,
                                  "--target-pid",
                                  a_pid,
                                  "--port",
                                  a_port,
                                  "--listen",
                                  a_listen,
                                  "--unix",
                                  sock,
                                  "--expires",
                                  a_exp,
                                  "--unix-mode",
                                  a_mode,
                                  "--unix-group",
                                  c->socket_group,
                                  "--ready-fd",
                                  "3",
                                  "--log-level",
                                  c->log_level,
                                  "--paused-file",
                                  a_paused,
                                  NULL};
            char *argv[sizeof(args) / sizeof(args[0])];
            sigset_t none;
            int devnull = open("/dev/null", O_RDONLY);
            struct sigaction sa;
            memset(&sa, 0, sizeof(sa));
            sa.sa_handler = SIG_DFL;
            for (int sig = 1; sig < NSIG; sig++)
                sigaction(sig, &sa, NULL);
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            if (devnull >= 0) {
                dup2(devnull, 0);
                close(devnull);
            }
            /* fd 3 = ready pipe; nothing else of the worker's (FastCGI sockets,
             * the table and its flock) may leak into a long-lived process */
            if (dup2(ready[1], 3) != 3)
                _exit(127);
            closefrom(4);
            /* execv's argv is char *const[] for history's sake: it writes
             * to none of the strings, and this child owns its copy of
             * memory anyway */
            for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
                argv[i] = (char *)(uintptr_t)args[i];
            execv(bin, argv);
            dprintf(3, "ERR EXEC cannot run %s: %s\n", bin, strerror(errno));
            _exit(127);
        }
    }
    close(ready[1]);
    close(pidp[1]);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (read(pidp[0], &fwd, sizeof(fwd)) != (ssize_t)sizeof(fwd))
        fwd = 0;
    close(pidp[0]);
    read_line(ready[0], line, sizeof(line), FWD_READY_TIMEOUT_MS);
    close(ready[0]);

    if (strncmp(line, "OK ", 3) == 0 && fwd > 0) {
        *pid = fwd;
        *start = nb_proc_starttime(fwd);
        if (*start != 0)
            return SPAWN_OK;
        snprintf(msg, msglen, "the forwarder exited right after starting");
        return SPAWN_FAILED;
    }
    if (fwd > 0 && line[0] == '\0')
        kill(fwd, SIGKILL); /* never answered: do not leave it half-started */
    if (fwd > 0)
        fwd_wait_gone(fwd);
    {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
    }
    if (strncmp(line, "ERR EADDRINUSE", 14) == 0) {
        snprintf(msg, msglen, "host port %u is in use", (unsigned)hostport);
        return SPAWN_IN_USE;
    }
    snprintf(msg, msglen, "the forwarder did not start: %.200s",
             line[0] ? line + (strncmp(line, "ERR ", 4) == 0 ? 4 : 0) : "no answer");
    return SPAWN_FAILED;

sys_fail:
    snprintf(msg, msglen, "cannot start a forwarder: %s", strerror(errno));
    return SPAWN_FAILED;
}

const char *nb_port_public_host(struct nb_app *a)
{
    static char host[128];
    struct ifaddrs *ifs, *i;
    if (a->conf.public_host[0])
        return a->conf.public_host;
    if (host[0])
        return host;
    snprintf(host, sizeof(host), "127.0.0.1");
    /* the machine's primary address, for LAN use as the original did */
    if (getifaddrs(&ifs) == 0) {
        for (i = ifs; i; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
                strncmp(i->ifa_name, "docker", 6) == 0 || strncmp(i->ifa_name, "veth", 4) == 0 ||
                strncmp(i->ifa_name, "br-", 3) == 0)
                continue;
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, host, sizeof(host));
            break;
        }
        freeifaddrs(ifs);
    }
    return host;
}

void nb_port_url(const struct nb_conf *c, const char *id, uint16_t sandboxport, char *out,
                 size_t outlen)
{
    const char *t = c->port_url;
    size_t o = 0;
    while (*t && o + 1 < outlen) {
        int n = 0;
        if (strncmp(t, "{port}", 6) == 0) {
            n = snprintf(out + o, outlen - o, "%u", (unsigned)sandboxport);
            t += 6;
        } else if (strncmp(t, "{id}", 4) == 0) {
            n = snprintf(out + o, outlen - o, "%s", id);
            t += 4;
        } else {
            out[o++] = *t++;
            continue;
        }
        if (n < 0 || (size_t)n >= outlen - o)
            break;
        o += (size_t)n;
    }
    out[o < outlen ? o : outlen - 1] = '\0';
}

/* Entry of slot s for sandboxport, or NULL. */
static struct nb_port *port_find(struct nb_slot *s, uint16_t sandboxport)
{
    for (int i = 0; i < NB_MAX_PORTS; i++)
        if (s->ports[i].sandboxport == sandboxport)
            return &s->ports[i];
    return NULL;
}

/* Is hostport recorded for any sandbox? (lock held) */
static int hostport_recorded(struct nb_table *t, uint16_t hostport)
{
    for (uint32_t i = 0; i < t->nslots; i++) {
        if (t->slots[i].state == NB_SLOT_FREE)
            continue;
        for (int j = 0; j < NB_MAX_PORTS; j++)
            if (t->slots[i].ports[j].sandboxport && t->slots[i].ports[j].hostport == hostport)
                return 1;
    }
    return 0;
}

/* The port opened here; elsewhere: the key's open ports on the cluster's other nodes. */
static int open_here(struct nb_app *a, const char *id, const struct nb_port_open *req,
                     unsigned elsewhere, struct nb_port_info *out, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_slot *s, copy;
    struct nb_port *p;
    uint16_t tries[PORT_ALLOC_TRIES];
    unsigned ntries = 0, open_count = 0, range = c->port_max - c->port_min + 1;
    int64_t now = nb_clock_real_s(), expires = 0;
    pid_t me = getpid(), fwd = 0;
    uint64_t start = 0;
    enum spawn_result rc = SPAWN_IN_USE;
    char msg[256] = "";
    uint16_t bound = 0;
    uint32_t gen = 0;
    int bad = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s == NULL || s->state != NB_SLOT_RUNNING || s->expires <= now) {
        bad = 404;
    } else if (port_find(s, req->sandboxport) != NULL) {
        bad = 409;
    } else {
        struct nb_table_usage u;
        if (req->key_max_ports)
            nb_table_usage(&a->table, s->owner, &u);
        for (int i = 0; i < NB_MAX_PORTS; i++)
            open_count += s->ports[i].sandboxport != 0;
        if (req->key_max_ports && u.ports + elsewhere >= req->key_max_ports) {
            bad = 4290; /* the key's quota, counted under the same lock as the port taken */
            open_count = u.ports + elsewhere;
        } else if (open_count >= c->max_ports || (p = port_find(s, 0)) == NULL) {
            bad = 429;
        } else {
            /* a pending entry: its owner is this worker until the forwarder answers */
            copy = *s;
            expires = now + req->duration;
            if (expires > copy.expires)
                expires = copy.expires; /* a port never outlives its sandbox */
            memset(p, 0, sizeof(*p));
            p->sandboxport = req->sandboxport;
            p->fwd_pid = me;
            p->expires = expires;
            gen = s->generation;
            if (req->hostport) {
                tries[ntries++] = req->hostport;
            } else {
                unsigned first = (unsigned)(now ^ me) % range;
                for (unsigned k = 0; k < range && ntries < PORT_ALLOC_TRIES; k++) {
                    uint16_t hp = (uint16_t)(c->port_min + (first + k) % range);
                    if (!hostport_recorded(&a->table, hp))
                        tries[ntries++] = hp;
                }
            }
        }
    }
    nb_table_unlock(&a->table);
    if (bad == 404) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    if (bad == 409) {
        nb_apierr_set(ae, NB_E_EXISTS, "port_open",
                      "port %u of this sandbox is already open: close it first",
                      (unsigned)req->sandboxport);
        return -1;
    }
    if (bad == 4290) {
        nb_apierr_set(ae, NB_E_LIMIT, "quota",
                      "quota max_ports=%u of key \"%s\" reached: its sandboxes have %u open ports",
                      req->key_max_ports, req->key_name ? req->key_name : "", open_count);
        return -1;
    }
    if (bad == 429) {
        nb_apierr_set(ae, NB_E_LIMIT, "too_many_ports",
                      "this sandbox already has %u open ports (max_ports)", open_count);
        return -1;
    }

    for (unsigned k = 0; k < ntries; k++) {
        rc = fwd_spawn(c, id, copy.init_pid, req->sandboxport, tries[k], expires, &fwd, &start, msg,
                       sizeof(msg));
        if (rc == SPAWN_OK)
            bound = tries[k];
        if (rc != SPAWN_IN_USE)
            break;
        nb_debug("host port %u is taken", (unsigned)tries[k]);
    }

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    p = s && s->generation == gen && s->state == NB_SLOT_RUNNING ? port_find(s, req->sandboxport)
                                                                 : NULL;
    if (p != NULL && !(p->fwd_pid == me && p->fwd_start == 0))
        p = NULL; /* not our pending entry any more */
    if (p != NULL) {
        if (rc == SPAWN_OK) {
            p->hostport = bound;
            p->fwd_pid = fwd;
            p->fwd_start = start;
        } else {
            memset(p, 0, sizeof(*p));
        }
    }
    nb_table_unlock(&a->table);

    if (rc == SPAWN_OK && p == NULL) {
        /* the sandbox went away while the forwarder started */
        fwd_stop(c, id, req->sandboxport, fwd, start);
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "sandbox %s was destroyed while the port was opening", id);
        return -1;
    }
    if (rc == SPAWN_IN_USE) {
        if (req->hostport)
            nb_apierr_set(ae, NB_E_CONFLICT, "port_in_use", "%s", msg);
        else
            nb_apierr_set(ae, NB_E_UNAVAILABLE, "no_free_port",
                          "no free host port found in %u-%u (port_range)", c->port_min,
                          c->port_max);
        return -1;
    }
    if (rc != SPAWN_OK) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "fwd_failed", "%s", msg);
        return -1;
    }
    mark_open(c, id, req->sandboxport);
    out->sandboxport = req->sandboxport;
    out->hostport = bound;
    out->expires = expires;
    out->duration = (unsigned)(expires - now); /* the same clock reading as expires */
    nb_info("opened port %u of sandbox %s on host port %u until %lld (forwarder %d)",
            (unsigned)req->sandboxport, id, (unsigned)bound, (long long)expires, (int)fwd);
    return 0;
}

/*
 * On a node of a cluster, a key's max_ports counts its open ports on every
 * node (docs/CLUSTER.md, "Quotas over the cluster"), the way a create's
 * quotas do: what it holds elsewhere read with the guard's revision, the
 * port opened, its sandbox's row (with its count of ports) put under the
 * guard; a port of the same key opened elsewhere in between moves the
 * guard, and the count is judged again (the port closed when over).
 */
int nb_port_open(struct nb_app *a, const char *id, const struct nb_port_open *req,
                 struct nb_port_info *out, struct nb_apierr *ae)
{
    struct nb_registry_claim claim;
    struct nb_apierr dae;
    struct nb_key k;

    if (!req->key_max_ports || req->key_name == NULL)
        return open_here(a, id, req, 0, out, ae);
    memset(&k, 0, sizeof(k));
    snprintf(k.name, sizeof(k.name), "%s", req->key_name);
    if (nb_registry_usage(a, &k, &claim, ae) != 0)
        return -1;
    if (open_here(a, id, req, claim.elsewhere.ports, out, ae) != 0)
        return -1;
    if (!claim.on)
        return 0;
    for (int tries = 0; tries < 8; tries++) {
        struct nb_table_usage u;
        struct nb_slot made, *s;
        int rc, live;

        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, id);
        live = s != NULL && s->state == NB_SLOT_RUNNING;
        if (live)
            made = *s;
        nb_table_usage(&a->table, req->key_name, &u);
        nb_table_unlock(&a->table);
        if (!live)
            return 0; /* gone meanwhile: its row goes with it */
        if (tries > 0 && u.ports + claim.elsewhere.ports > req->key_max_ports) {
            nb_apierr_set(ae, NB_E_LIMIT, "quota",
                          "quota max_ports=%u of key \"%s\" reached: its sandboxes have %u open "
                          "ports",
                          req->key_max_ports, req->key_name, u.ports - 1 + claim.elsewhere.ports);
            break;
        }
        rc = nb_registry_after(a, &k, &claim, &made, ae);
        if (rc == 0)
            return 0;
        if (rc < 0)
            break;
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "cluster_unavailable",
                      "the cluster is too busy registering ports of key \"%s\": try again",
                      req->key_name);
    }
    if (nb_port_close(a, id, req->sandboxport, &dae) != 0)
        nb_warn("port %u of sandbox %s: over the key's quota, and not closed: %s",
                (unsigned)req->sandboxport, id, dae.msg);
    return -1;
}

/* Is there a LISTEN (state 0A) line for port in a /proc/net/tcp{,6} file? */
static int proc_net_listens(const char *path, uint16_t port)
{
    char line[512];
    int found = 0;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof(line), f)) {
        /* "  0: 0100007F:1F40 00000000:0000 0A ..." (the header line fails the scan) */
        char local[64], remote[64];
        unsigned st, lport;
        const char *colon;
        if (sscanf(line, " %*u: %63s %63s %x", local, remote, &st) != 3)
            continue;
        colon = strrchr(local, ':');
        if (colon == NULL || sscanf(colon + 1, "%x", &lport) != 1)
            continue;
        found = st == 0x0A && lport == port;
    }
    fclose(f);
    return found;
}

int nb_port_listening(pid_t init_pid, uint16_t port)
{
    char path[64];
    int v4, v6;
    snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)init_pid);
    v4 = proc_net_listens(path, port);
    if (v4 == 1)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/net/tcp6", (int)init_pid);
    v6 = proc_net_listens(path, port);
    if (v6 == 1)
        return 1;
    return v4 < 0 && v6 < 0 ? -1 : 0;
}

/*
 * Wait (bounded) until the entry of sandboxport is no longer half-open: a
 * concurrent request is starting its forwarder. 1 open, 0 not (any more).
 */
static int wait_opened(struct nb_app *a, const char *id, uint16_t sandboxport)
{
    int64_t until = nb_clock_mono_ms() + FWD_READY_TIMEOUT_MS;
    for (;;) {
        struct nb_slot *s;
        struct nb_port *p;
        int st = 0; /* 0 gone, 1 open, 2 half-open */
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, id);
        if (s != NULL && s->state == NB_SLOT_RUNNING && (p = port_find(s, sandboxport)) != NULL)
            st = p->fwd_start != 0 ? 1 : 2;
        nb_table_unlock(&a->table);
        if (st != 2)
            return st;
        if (nb_clock_mono_ms() >= until)
            return 0;
        usleep(5000);
    }
}

int nb_port_mark_if_open(struct nb_app *a, const char *id, uint16_t sandboxport)
{
    struct nb_slot *s;
    int open = 0;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    open = s != NULL && s->state == NB_SLOT_RUNNING && port_find(s, sandboxport) != NULL;
    nb_table_unlock(&a->table);
    if (!open || !wait_opened(a, id, sandboxport))
        return 0;
    mark_open(&a->conf, id, sandboxport);
    return 1;
}

int nb_port_open_on_demand(struct nb_app *a, const char *id, uint16_t sandboxport,
                           unsigned key_max_ports, const char *key_name, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_port_open req;
    struct nb_port_info info;
    struct nb_slot *s;
    pid_t init_pid = 0;
    int listening;

    if (nb_port_mark_if_open(a, id, sandboxport))
        return 0; /* another request opened it (or was opening it) meanwhile */
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->state == NB_SLOT_RUNNING && s->expires > nb_clock_real_s())
        init_pid = s->init_pid;
    nb_table_unlock(&a->table);
    if (init_pid <= 0) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    /*
     * Only a port something listens on: an outsider who tries port after
     * port takes no forwarder, no host port and none of max_ports for the
     * ones that would only answer "nothing listens" anyway.
     */
    listening = nb_port_listening(init_pid, sandboxport);
    if (listening != 1) {
        if (listening < 0)
            nb_warn("sandbox %s: cannot read the listening sockets of pid %d", id, (int)init_pid);
        nb_apierr_set(ae, NB_E_UPSTREAM, "not_listening",
                      "nothing listens on port %u inside sandbox %s", (unsigned)sandboxport, id);
        return -1;
    }
    memset(&req, 0, sizeof(req));
    req.sandboxport = sandboxport;
    req.duration = c->ports_on_demand_duration;
    if (req.duration == 0 || req.duration > c->max_port_duration)
        req.duration = c->max_port_duration;
    req.key_max_ports = key_max_ports;
    req.key_name = key_name;
    if (nb_port_open(a, id, &req, &info, ae) != 0) {
        if (ae->err == NB_E_EXISTS && nb_port_mark_if_open(a, id, sandboxport))
            return 0; /* a concurrent first request won the race: it is open */
        return -1;
    }
    nb_info("port %u of sandbox %s opened on demand", (unsigned)sandboxport, id);
    return 0;
}

int nb_port_close(struct nb_app *a, const char *id, uint16_t sandboxport, struct nb_apierr *ae)
{
    struct nb_slot *s;
    struct nb_port *p;
    pid_t pid = 0;
    uint64_t start = 0;
    int found = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->state == NB_SLOT_RUNNING && (p = port_find(s, sandboxport)) != NULL &&
        p->fwd_start != 0) {
        pid = p->fwd_pid;
        start = p->fwd_start;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        if (s == NULL)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                          "no sandbox %s (it may have expired or been destroyed)", id);
        else
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "port %u of sandbox %s is not open",
                          (unsigned)sandboxport, id);
        return -1;
    }
    /* stop first, free after: a concurrent re-open meanwhile sees 409, not a half-closed port */
    fwd_stop(&a->conf, id, sandboxport, pid, start);
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && (p = port_find(s, sandboxport)) != NULL && p->fwd_pid == pid &&
        p->fwd_start == start)
        memset(p, 0, sizeof(*p));
    nb_table_unlock(&a->table);
    nb_info("closed port %u of sandbox %s", (unsigned)sandboxport, id);
    return 0;
}

void nb_ports_stop_all(struct nb_app *a, const char *id)
{
    struct nb_port ports[NB_MAX_PORTS];
    struct nb_slot *s;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL) {
        memcpy(ports, s->ports, sizeof(ports));
        memset(s->ports, 0, sizeof(s->ports));
    } else {
        memset(ports, 0, sizeof(ports));
    }
    nb_table_unlock(&a->table);
    for (int i = 0; i < NB_MAX_PORTS; i++)
        if (ports[i].sandboxport && ports[i].fwd_start)
            fwd_stop(&a->conf, id, ports[i].sandboxport, ports[i].fwd_pid, ports[i].fwd_start);
}

/*
 * Remove the <id>-<port>.open files of ports the table does not hold open
 * (a forwarder stopped by a restart's adoption, a crash between the two):
 * nginx would otherwise skip nanobox-fcgi for a port nothing serves.
 */
static void sweep_open_marks(struct nb_app *a)
{
    DIR *d = opendir(a->conf.ports_dir);
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char id[NB_ID_LEN + 1], path[PATH_MAX];
        unsigned port;
        size_t n = strlen(e->d_name);
        struct nb_slot *s;
        struct nb_port *p;
        int keep;
        size_t nd = n > NB_ID_LEN + 1 + 5 ? n - (NB_ID_LEN + 1) - 5 : 0; /* digits of the port */
        if (nd < 1 || nd > 5 || e->d_name[NB_ID_LEN] != '-' ||
            strcmp(e->d_name + n - 5, ".open") != 0 ||
            strspn(e->d_name + NB_ID_LEN + 1, "0123456789") != nd)
            continue;
        memcpy(id, e->d_name, NB_ID_LEN);
        id[NB_ID_LEN] = '\0';
        port = (unsigned)strtoul(e->d_name + NB_ID_LEN + 1, NULL, 10);
        if (port < 1 || port > 65535)
            continue;
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, id);
        p = s != NULL ? port_find(s, (uint16_t)port) : NULL;
        keep = p != NULL; /* open, or being opened */
        nb_table_unlock(&a->table);
        if (keep)
            continue;
        snprintf(path, sizeof(path), "%s/%s", a->conf.ports_dir, e->d_name);
        if (unlink(path) == 0)
            nb_debug("removed %s: no open port of that name", path);
    }
    closedir(d);
}

struct stale_port {
    char id[NB_ID_LEN + 1];
    struct nb_port port;
};

void nb_ports_reap(struct nb_app *a)
{
    struct stale_port *list = NULL;
    size_t n = 0, alloc = 0;
    int64_t now = nb_clock_real_s();

    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++) {
        struct nb_slot *s = &a->table.slots[i];
        if (s->state == NB_SLOT_FREE)
            continue;
        for (int j = 0; j < NB_MAX_PORTS; j++) {
            struct nb_port *p = &s->ports[j];
            if (p->sandboxport == 0)
                continue;
            if (p->fwd_start == 0) {
                /* half-open: its worker died before the forwarder answered */
                if (kill(p->fwd_pid, 0) != 0 && errno == ESRCH)
                    memset(p, 0, sizeof(*p));
                continue;
            }
            if (p->expires > now && fwd_alive(p->fwd_pid, p->fwd_start))
                continue;
            if (n == alloc) {
                alloc = alloc ? alloc * 2 : 16;
                list = nb_xrealloc(list, alloc * sizeof(*list));
            }
            snprintf(list[n].id, sizeof(list[n].id), "%s", s->id);
            list[n].port = *p;
            n++;
        }
    }
    nb_table_unlock(&a->table);

    for (size_t k = 0; k < n; k++) {
        struct nb_port *q = &list[k].port;
        struct nb_slot *s;
        struct nb_port *p;
        int expired = q->expires <= now;
        fwd_stop(&a->conf, list[k].id, q->sandboxport, q->fwd_pid, q->fwd_start);
        nb_table_lock(&a->table);
        s = nb_table_find(&a->table, list[k].id);
        if (s != NULL && (p = port_find(s, q->sandboxport)) != NULL && p->fwd_pid == q->fwd_pid &&
            p->fwd_start == q->fwd_start)
            memset(p, 0, sizeof(*p));
        nb_table_unlock(&a->table);
        nb_info("%s port %u of sandbox %s", expired ? "expired" : "forwarder gone: freed",
                (unsigned)q->sandboxport, list[k].id);
    }
    free(list);
    sweep_open_marks(a);
}
