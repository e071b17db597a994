/*
 * fwatch.c - I: watch a directory (and, with r, every directory below it)
 * with inotify and send each change as a v frame until the host closes
 * the connection or sends '.'. The watch's inotify fd, its table of
 * watched directories and its state live exactly as long as the
 * connection: ops->gone frees them all.
 *
 * Events (v: K kind, F path relative to the watched directory), as Go's
 * fsnotify names them: create (IN_CREATE, IN_MOVED_TO), write
 * (IN_MODIFY), remove (IN_DELETE), rename (IN_MOVED_FROM), chmod
 * (IN_ATTRIB); overflow when the kernel's queue dropped events. The
 * agent's own temporary names (an upload's ".nanobox-upload.*", a move's
 * ".nanobox-move.*") are not shown: their rename into place is shown as
 * create then write of the final name, as a direct write would be.
 *
 * Backpressure: events are read from the inotify fd only while the
 * connection has room; meanwhile the kernel queues them (and reports an
 * overflow past fs.inotify.max_queued_events).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentproto.h"
#include "clock.h"
#include "reply.h"
#include "init.h"
#include "ops.h"
#include "root.h"

#define FWATCH_MASK                                                                \
    (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
     IN_DELETE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
#define FWATCH_BUF (64u * 1024u)
/* body of v: K (1) and F (a relative path of up to NBA_MAX_PATH) */
#define FWATCH_EV_MAX (2 * NBA_HDR + 1 + NBA_MAX_PATH)

struct fwatch_dir {
    int wd;
    char *rel; /* "" for the watched directory itself */
};

/* An event a polling watcher keeps until it is polled. */
struct fwatch_ev {
    uint8_t kind;
    char *path;
};

struct fwatch {
    struct init_watch w; /* the inotify fd */
    struct init_conn *c; /* a streamed watch's connection; NULL: a polling watcher */
    uint32_t id;         /* a polling watcher's id (0: streamed) */
    struct fwatch_ev *q; /* a polling watcher's events, oldest first: q[0..nq) */
    size_t nq, qcap;
    uint8_t lost;        /* events were dropped past INIT_WATCHER_EVENTS */
    int64_t idle_at;     /* a polling watcher is removed at this (monotonic ms) unless polled */
    struct fwatch *next; /* polling watchers */
    char *root;          /* the watched directory's path */
    uint8_t recursive;
    uint32_t max_dirs;
    struct fwatch_dir *dirs;
    size_t ndirs, cap;
    int root_wd;
    uint32_t hidden_cookie; /* the last IN_MOVED_FROM of one of our temporary names */
    unsigned char *buf;     /* events read, not yet sent: buf[off..len) */
    size_t off, len;
};

static unsigned n_fwatch;
static struct fwatch *watchers; /* the polling ones, by id */
static uint32_t last_watcher_id;
int64_t init_watcher_idle_ms = INIT_WATCHER_IDLE_MS;

static int hidden_name(const char *name)
{
    return strncmp(name, ".nanobox-upload.", 16) == 0 || strncmp(name, ".nanobox-move.", 14) == 0;
}

static struct fwatch_dir *dir_of(struct fwatch *fw, int wd)
{
    for (size_t i = 0; i < fw->ndirs; i++) {
        if (fw->dirs[i].wd == wd)
            return &fw->dirs[i];
    }
    return NULL;
}

/* Watch the directory at path (rel below the root); the same inode keeps its wd, rel updated. */
static int watch_one(struct fwatch *fw, const char *path, const char *rel)
{
    struct fwatch_dir *d;
    char *r;
    int wd;

    if (fw->ndirs >= fw->max_dirs)
        return ENOSPC;
    wd = inotify_add_watch(fw->w.fd, path, FWATCH_MASK);
    if (wd == -1)
        return errno;
    r = strdup(rel);
    if (r == NULL)
        return ENOMEM;
    d = dir_of(fw, wd);
    if (d != NULL) {
        free(d->rel);
        d->rel = r;
        return 0;
    }
    if (fw->ndirs == fw->cap) {
        size_t ncap = fw->cap ? fw->cap * 2 : 16;
        struct fwatch_dir *nv = realloc(fw->dirs, ncap * sizeof(*nv));
        if (nv == NULL) {
            free(r);
            return ENOMEM;
        }
        fw->dirs = nv;
        fw->cap = ncap;
    }
    fw->dirs[fw->ndirs].wd = wd;
    fw->dirs[fw->ndirs].rel = r;
    fw->ndirs++;
    return 0;
}

static int send_event(struct fwatch *fw, uint8_t kind, const char *rel, const char *name);

/*
 * Watch rel (below the root) and, recursively, the directories in it; 0 or
 * an errno. With announce (a directory that just appeared), what is in it
 * already is sent as created: it came before its watch could see it.
 */
static int watch_tree(struct fwatch *fw, const char *rel, int depth, int announce)
{
    char *path, *sub;
    DIR *d;
    struct dirent *de;
    size_t plen;
    int e;

    if (depth > INIT_RM_DEPTH)
        return 0;
    plen = strlen(fw->root) + strlen(rel) + 2;
    path = malloc(plen);
    if (path == NULL)
        return ENOMEM;
    snprintf(path, plen, "%s%s%s", fw->root, rel[0] ? "/" : "", rel);
    e = watch_one(fw, path, rel);
    if (e != 0 || !fw->recursive) {
        free(path);
        return e;
    }
    d = opendir(path);
    free(path);
    if (d == NULL)
        return 0; /* gone or not ours to read: its own events are all we get */
    while (e == 0 && (de = readdir(d)) != NULL) {
        size_t slen;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            hidden_name(de->d_name))
            continue;
        if (announce)
            send_event(fw, NBA_EV_CREATE, rel, de->d_name); /* no room: dropped */
        if (de->d_type != DT_DIR)
            continue;
        slen = strlen(rel) + strlen(de->d_name) + 2;
        if (slen > NBA_MAX_PATH)
            continue;
        sub = malloc(slen);
        if (sub == NULL) {
            e = ENOMEM;
            break;
        }
        if (snprintf(sub, slen, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) < (int)slen)
            e = watch_tree(fw, sub, depth + 1, announce);
        free(sub);
    }
    closedir(d);
    return e;
}

static void fwatch_free(struct fwatch *fw)
{
    init_watch_close(&fw->w);
    for (size_t i = 0; i < fw->ndirs; i++)
        free(fw->dirs[i].rel);
    free(fw->dirs);
    free(fw->root);
    free(fw->buf);
    for (size_t i = 0; i < fw->nq; i++)
        free(fw->q[i].path);
    free(fw->q);
    for (struct fwatch **pp = &watchers; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == fw) {
            *pp = fw->next;
            break;
        }
    }
    n_fwatch--;
    init_defer_free(fw);
}

/* Room for n more events: always for a polling watcher (its queue drops instead). */
static int fw_room(const struct fwatch *fw, unsigned n)
{
    return fw->c == NULL || init_reply_room(fw->c, n * FWATCH_EV_MAX);
}

/* A polling watcher's event, queued (or counted lost past the cap). */
static void queue_event(struct fwatch *fw, uint8_t kind, const char *rel, const char *name)
{
    size_t rl = strlen(rel), nl = strlen(name);
    struct fwatch_ev *nv;
    char *p;

    if (fw->nq >= INIT_WATCHER_EVENTS || (p = malloc(rl + nl + 2)) == NULL) {
        fw->lost = 1;
        return;
    }
    snprintf(p, rl + nl + 2, "%s%s%s", rel, rl && nl ? "/" : "", name);
    if (fw->nq == fw->qcap) {
        size_t ncap = fw->qcap ? fw->qcap * 2 : 16;
        nv = realloc(fw->q, ncap * sizeof(*nv));
        if (nv == NULL) {
            free(p);
            fw->lost = 1;
            return;
        }
        fw->q = nv;
        fw->qcap = ncap;
    }
    fw->q[fw->nq].kind = kind;
    fw->q[fw->nq].path = p;
    fw->nq++;
}

/* One v frame of kind and path rel/name on c. */
static void put_event(struct init_conn *c, uint8_t kind, const char *rel, const char *name)
{
    unsigned char body[FWATCH_EV_MAX];
    size_t n = 0, rl = strlen(rel), nl = strlen(name), pl;

    pl = rl + (rl && nl ? 1 : 0) + nl;
    if (pl > NBA_MAX_PATH)
        return; /* too long to name: dropped */
    n += nba_field_put(body + n, NBA_T_KIND, &kind, 1);
    body[n] = NBA_T_PATH;
    nba_put_u32(body + n + 1, (uint32_t)pl);
    n += NBA_HDR;
    memcpy(body + n, rel, rl);
    n += rl;
    if (rl && nl)
        body[n++] = '/';
    memcpy(body + n, name, nl);
    n += nl;
    init_reply_send(c, NBA_FEVENT, body, (uint32_t)n);
}

/* One event to the host or the queue; -1 when there is no room (the caller waits). */
static int send_event(struct fwatch *fw, uint8_t kind, const char *rel, const char *name)
{
    if (fw->c == NULL) {
        queue_event(fw, kind, rel, name);
        return 0;
    }
    if (!init_reply_room(fw->c, FWATCH_EV_MAX))
        return -1;
    put_event(fw->c, kind, rel, name);
    return 0;
}

/*
 * One inotify event: 0 handled, -1 no room (try again later), 1 the watch
 * is over (the directory went: '.' sent).
 */
static int handle_one(struct fwatch *fw, const struct inotify_event *ev)
{
    const char *name = ev->len > 0 ? ev->name : "";
    struct fwatch_dir *d;
    uint8_t kind = 0;

    if (ev->mask & IN_Q_OVERFLOW)
        return send_event(fw, NBA_EV_OVERFLOW, "", "");
    d = dir_of(fw, ev->wd);
    if (ev->mask & IN_IGNORED) {
        if (ev->wd == fw->root_wd) {
            if (fw->c != NULL)
                init_reply_send(fw->c, NBA_END, NULL, 0);
            return 1;
        }
        if (d != NULL) {
            free(d->rel);
            *d = fw->dirs[--fw->ndirs];
        }
        return 0;
    }
    if (d == NULL || (ev->mask & IN_DELETE_SELF))
        return 0; /* the parent's watch reported it */
    if (hidden_name(name)) {
        if (ev->mask & IN_MOVED_FROM)
            fw->hidden_cookie = ev->cookie;
        return 0;
    }
    if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
        int from_tmp =
            (ev->mask & IN_MOVED_TO) && ev->cookie != 0 && ev->cookie == fw->hidden_cookie;
        int is_file = !(ev->mask & IN_ISDIR);
        if (!fw_room(fw, 2))
            return -1;
        send_event(fw, NBA_EV_CREATE, d->rel, name);
        if (from_tmp) {
            /* an upload's temporary file renamed into place: a write too, as envd shows it */
            fw->hidden_cookie = 0;
            if (is_file)
                send_event(fw, NBA_EV_WRITE, d->rel, name);
        }
        if (fw->recursive && !is_file) {
            size_t sl = strlen(d->rel) + strlen(name) + 2;
            char *sub = malloc(sl);
            if (sub != NULL) {
                snprintf(sub, sl, "%s%s%s", d->rel, d->rel[0] ? "/" : "", name);
                watch_tree(fw, sub, 0, 1); /* past the cap: not watched */
                free(sub);
            }
        }
        return 0;
    }
    if (ev->mask & IN_MODIFY) {
        kind = NBA_EV_WRITE;
    } else if (ev->mask & IN_DELETE) {
        kind = NBA_EV_REMOVE;
    } else if (ev->mask & IN_MOVED_FROM) {
        kind = NBA_EV_RENAME;
    } else if (ev->mask & IN_ATTRIB) {
        kind = NBA_EV_CHMOD;
    }
    return kind != 0 ? send_event(fw, kind, d->rel, name) : 0;
}

/* Send what is read, read more while there is room. */
static void fwatch_pump(struct fwatch *fw)
{
    for (;;) {
        while (fw->off < fw->len) {
            const struct inotify_event *ev = (const void *)(fw->buf + fw->off);
            int rc = handle_one(fw, ev);
            if (rc < 0) {
                init_watch_set(&fw->w, 0);
                init_reply_wait_room(fw->c);
                return;
            }
            fw->off += sizeof(*ev) + ev->len;
            if (rc > 0 && fw->c == NULL) {
                /* a polling watcher's directory went: it keeps what it has until removed */
                init_watch_close(&fw->w);
                fw->off = fw->len = 0;
                return;
            }
            if (rc > 0) {
                struct init_conn *c = fw->c;
                fwatch_free(fw);
                init_reply_finish(c);
                return;
            }
        }
        ssize_t n = read(fw->w.fd, fw->buf, FWATCH_BUF);
        if (n <= 0) {
            fw->off = fw->len = 0;
            init_watch_set(&fw->w, EPOLLIN);
            return;
        }
        fw->off = 0;
        fw->len = (size_t)n;
    }
}

void init_fwatch_event(void *obj)
{
    fwatch_pump(obj);
}

static void fwatch_drain(struct init_conn *c)
{
    fwatch_pump(c->op);
}

static void fwatch_gone(struct init_conn *c)
{
    fwatch_free(c->op);
}

/* The host may end the watch with '.' (answered with '.'); other frames are ignored. */
static int fwatch_frame(struct init_conn *c, uint8_t type, const unsigned char *body, uint32_t len)
{
    (void)body;
    (void)len;
    if (type == NBA_END) {
        fwatch_free(c->op);
        init_reply_send(c, NBA_END, NULL, 0);
        init_reply_finish(c);
    }
    return 0;
}

static const struct init_conn_ops fwatch_ops = {fwatch_frame, fwatch_drain, fwatch_gone};

/* A new watch of r's directory (set up, watching); NULL with the error sent on c. */
static struct fwatch *fwatch_new(struct init_conn *c, const struct init_request *r,
                                 struct init_conn *owner)
{
    struct fwatch *fw;
    struct stat st;
    int fd, e;

    if (n_fwatch >= INIT_MAX_FWATCH) {
        init_reply_error(c, EAGAIN, "%d directory watches are open already", INIT_MAX_FWATCH);
        return NULL;
    }
    fw = calloc(1, sizeof(*fw));
    if (fw == NULL || (fw->root = malloc((size_t)r->path.len + 1)) == NULL ||
        (fw->buf = malloc(FWATCH_BUF)) == NULL) {
        if (fw != NULL) {
            free(fw->root);
            free(fw);
        }
        init_reply_error(c, ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(fw->root, r->path.p, r->path.len);
    fw->root[r->path.len] = '\0';
    fw->c = owner;
    fw->recursive = r->recursive;
    fw->max_dirs = r->maxout;
    fw->w.fd = -1;
    n_fwatch++;
    e = 0;
    if (lstat(fw->root, &st) == -1)
        e = errno;
    else if (!S_ISDIR(st.st_mode))
        e = ENOTDIR;
    else if ((fd = init_root_inotify_init(IN_NONBLOCK | IN_CLOEXEC)) == -1)
        e = errno == EMFILE ? EAGAIN : errno;
    else if (init_watch_add(&fw->w, fd, INIT_W_INOTIFY, 0, fw, EPOLLIN) == -1) {
        e = errno;
        close(fd);
    }
    if (e == 0)
        e = watch_tree(fw, "", 0, 0);
    if (e != 0) {
        if (e == ENOSPC)
            init_reply_error(c, e, "watch %s: more than %u directories to watch", fw->root,
                             fw->max_dirs);
        else
            init_reply_error(c, e, "watch %s: %s", fw->root, strerror(e));
        fwatch_free(fw);
        return NULL;
    }
    fw->root_wd = fw->dirs[0].wd;
    return fw;
}

/* s: dirs:u32 watches:u32 [id:u32] */
static void send_started(struct init_conn *c, const struct fwatch *fw)
{
    unsigned char started[12];
    nba_put_u32(started, (uint32_t)fw->ndirs);
    nba_put_u32(started + 4, n_fwatch);
    nba_put_u32(started + 8, fw->id);
    init_reply_send(c, NBA_STARTED, started, fw->id != 0 ? 12 : 8);
}

void init_fwatch_start(struct init_conn *c, const struct init_request *r)
{
    struct fwatch *fw = fwatch_new(c, r, c);

    if (fw == NULL)
        return;
    send_started(c, fw);
    c->ops = &fwatch_ops;
    c->op = fw;
}

/* --- polling watchers: J create, G take the events, O remove ---------------- */

/*
 * A polling watcher lives while it is polled: one left unpolled for
 * init_watcher_idle_ms (a client that forgot O) is removed as O would,
 * its inotify fd closed and its slot of INIT_MAX_FWATCH freed; a later G
 * or O for it finds no watcher (ESRCH).
 */
int64_t init_fwatch_next_deadline(void)
{
    int64_t d = 0;
    for (const struct fwatch *fw = watchers; fw != NULL; fw = fw->next) {
        if (d == 0 || fw->idle_at < d)
            d = fw->idle_at;
    }
    return d;
}

void init_fwatch_tick(int64_t now)
{
    struct fwatch *fw = watchers;
    while (fw != NULL) {
        struct fwatch *next = fw->next;
        if (fw->idle_at <= now)
            fwatch_free(fw);
        fw = next;
    }
}

static struct fwatch *watcher_of(uint32_t id)
{
    for (struct fwatch *fw = watchers; fw != NULL; fw = fw->next) {
        if (fw->id == id)
            return fw;
    }
    return NULL;
}

void init_fwatch_create(struct init_conn *c, const struct init_request *r)
{
    struct fwatch *fw = fwatch_new(c, r, NULL);

    if (fw == NULL)
        return;
    do
        fw->id = ++last_watcher_id;
    while (fw->id == 0 || watcher_of(fw->id) != NULL);
    fw->next = watchers;
    watchers = fw;
    fw->idle_at = nb_clock_mono_ms() + init_watcher_idle_ms;
    send_started(c, fw);
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}

void init_fwatch_poll(struct init_conn *c, const struct init_request *r)
{
    struct fwatch *fw = watcher_of(r->pid);
    size_t sent = 0;

    if (fw == NULL) {
        init_reply_error(c, ESRCH, "no watcher %u", r->pid);
        return;
    }
    fw->idle_at = nb_clock_mono_ms() + init_watcher_idle_ms;
    fwatch_pump(fw); /* what the kernel holds now */
    if (fw->lost && init_reply_room(c, FWATCH_EV_MAX)) {
        put_event(c, NBA_EV_OVERFLOW, "", "");
        fw->lost = 0;
    }
    /* as many as fit; the rest wait for the next poll */
    while (sent < fw->nq && init_reply_room(c, FWATCH_EV_MAX)) {
        put_event(c, fw->q[sent].kind, "", fw->q[sent].path);
        free(fw->q[sent].path);
        sent++;
    }
    memmove(fw->q, fw->q + sent, (fw->nq - sent) * sizeof(*fw->q));
    fw->nq -= sent;
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}

void init_fwatch_remove(struct init_conn *c, const struct init_request *r)
{
    struct fwatch *fw = watcher_of(r->pid);

    if (fw == NULL) {
        init_reply_error(c, ESRCH, "no watcher %u", r->pid);
        return;
    }
    fwatch_free(fw);
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}
