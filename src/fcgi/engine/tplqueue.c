/*
 * tplqueue.c - the reaper's side of the templates engine: each pump
 * (nb_templates_pump) reaps the builders that ended, fails the builds a
 * dead nanobox left "building" (the sweep), and starts the oldest queued
 * jobs, each in a builder child; the queue's inotify descriptor wakes the
 * reaper when a job is queued. Also the waits of a build log's follower.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "tplpriv.h"

#define SWEEP_EVERY 300 /* pumps (reaper subticks, ~30 s) between sweeps for orphaned builds */
#define BUILDERS_MAX 64

/* ---- the reaper's pump ---- */

static struct {
    pid_t pid;
    char name[NB_TPL_NAME_MAX + 1]; /* the job's key (nb_template_key) */
} builders[BUILDERS_MAX];
static unsigned n_builders;
static unsigned pump_ticks;

static int building_here(const char *name)
{
    for (unsigned i = 0; i < n_builders; i++)
        if (!strcmp(builders[i].name, name))
            return 1;
    return 0;
}

struct sweep_ctx {
    struct nb_app *a;
    struct nb_docker_image *im;
    size_t n, cap;
};

static void sweep_one(void *arg, const struct nb_docker_image *im)
{
    struct sweep_ctx *s = arg;
    if (strcmp(im->status, "building") != 0 || !nb_template_name_ok(im->name))
        return;
    /* a snapshot is taken by a worker, not a builder: judged only once it took too long */
    if (!strcmp(im->kind, "snapshot") &&
        im->created_at > (int64_t)time(NULL) - (int64_t)s->a->conf.template_timeout - 60)
        return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->im = realloc(s->im, s->cap * sizeof(*s->im));
        if (s->im == NULL)
            abort();
    }
    s->im[s->n++] = *im;
}

/*
 * Records "building" that no builder of ours serves and no job waits for:
 * failed. Under the names' lock, so no submit is half-way (record made, job
 * not yet written).
 */
static void sweep(struct nb_app *a)
{
    struct sweep_ctx s = {a, NULL, 0, 0};
    struct nb_derr de = {0};
    char ref[128], p[PATH_MAX];
    int lock = nb_tpl_lock(&a->conf);
    if (lock < 0) {
        nb_warn("templates: cannot lock the templates directory: %s", strerror(errno));
        return;
    }
    if (nb_docker_image_list(&a->docker, a->conf.instance, sweep_one, &s, &de) < 0)
        nb_debug("templates: cannot list images: %s", de.msg);
    for (size_t i = 0; i < s.n; i++) {
        const struct nb_docker_image *im = &s.im[i];
        char key[NB_TPL_KEY_LEN + 1];
        nb_template_key(&a->conf, im->owner, im->name, key);
        nb_tpl_key_ref(&a->conf, key, ref, sizeof(ref));
        if (strcmp(im->ref, ref) != 0 || building_here(key))
            continue;
        nb_tpl_job_path(&a->conf, "queue", key, "json", p, sizeof(p));
        if (access(p, F_OK) == 0)
            continue; /* queued */
        if (!strcmp(im->kind, "snapshot")) {
            /* its worker died during it: the name is free again */
            char ctr[128];
            nb_warn("template %s: a snapshot was cut short; removing its record", im->name);
            snprintf(ctr, sizeof(ctr), NB_SNAPSHOT_CTR "%s", key);
            if (nb_docker_remove(&a->docker, ctr, &de) != 0)
                nb_warn("template %s: cannot remove container %s: %s", im->name, ctr, de.msg);
            if (nb_docker_image_remove(&a->docker, im->id, 0, &de) != 0)
                nb_warn("template %s: cannot remove its record: %s", im->name, de.msg);
            continue;
        }
        nb_tpl_fail_build(&a->conf, &a->docker, im->name, im->owner, im->created_at, im->id,
                          "the build was cut short: nanobox-fcgi stopped or restarted during it");
    }
    nb_tpl_unlock(lock);
    free(s.im);
}

static void reap_builders(struct nb_app *a)
{
    for (unsigned i = 0; i < n_builders;) {
        int st;
        pid_t r = waitpid(builders[i].pid, &st, WNOHANG);
        if (r == 0) {
            i++;
            continue;
        }
        if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            struct nb_docker_image im;
            struct nb_derr de = {0};
            char ref[128];
            nb_tpl_key_ref(&a->conf, builders[i].name, ref, sizeof(ref));
            if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0 &&
                !strcmp(im.status, "building") && nb_tpl_named_image(&a->conf, &im)) {
                char why[512], marker[PATH_MAX];
                FILE *f;
                snprintf(why, sizeof(why), "the builder process died (%s %d)",
                         r > 0 && WIFSIGNALED(st) ? "signal" : "status",
                         r > 0 && WIFSIGNALED(st) ? WTERMSIG(st)
                         : r > 0                  ? WEXITSTATUS(st)
                                                  : -1);
                /* killed by its disk watcher (buildcap.h): the watcher says why */
                nb_tpl_job_path(&a->conf, "run", builders[i].name, "disk", marker, sizeof(marker));
                if ((f = fopen(marker, "re")) != NULL) {
                    size_t n = fread(why, 1, sizeof(why) - 1, f);
                    why[n] = '\0';
                    fclose(f);
                }
                nb_tpl_fail_build(&a->conf, &a->docker, im.name, im.owner, im.created_at, im.id,
                                  why);
            }
        }
        builders[i] = builders[--n_builders];
    }
}

/* The oldest queued job's name, or -1 when none waits. */
static int oldest_job(const struct nb_conf *c, char *name, size_t namelen)
{
    char dir[PATH_MAX], p[PATH_MAX + 300];
    DIR *d;
    struct dirent *e;
    struct timespec best = {0, 0};
    int found = -1;
    nb_tpl_path(c, "queue", dir, sizeof(dir));
    d = opendir(dir);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        struct stat st;
        char nm[NB_TPL_NAME_MAX + 1];
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0 || n - 5 > NB_TPL_NAME_MAX)
            continue;
        snprintf(nm, sizeof(nm), "%.*s", (int)(n - 5), e->d_name);
        if (!nb_template_name_ok(nm) || building_here(nm))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (stat(p, &st) != 0)
            continue;
        if (found < 0 || st.st_mtim.tv_sec < best.tv_sec ||
            (st.st_mtim.tv_sec == best.tv_sec && st.st_mtim.tv_nsec < best.tv_nsec)) {
            best = st.st_mtim;
            snprintf(name, namelen, "%s", nm);
            found = 0;
        }
    }
    closedir(d);
    return found;
}

static void start_builders(struct nb_app *a)
{
    char name[NB_TPL_NAME_MAX + 1], from[PATH_MAX], to[PATH_MAX];
    while (n_builders < a->conf.template_builds_max && n_builders < BUILDERS_MAX &&
           oldest_job(&a->conf, name, sizeof(name)) == 0) {
        pid_t parent = getpid(), pid;
        nb_tpl_job_path(&a->conf, "queue", name, "json", from, sizeof(from));
        nb_tpl_job_path(&a->conf, "run", name, "json", to, sizeof(to));
        if (rename(from, to) != 0) {
            nb_warn("template %s: cannot start its build: %s", name, strerror(errno));
            return;
        }
        nb_tpl_build_net_prepare(a); /* the builder inherits it: no iptables run per build */
        pid = fork();
        if (pid < 0) {
            nb_warn("template %s: cannot fork a builder: %s", name, strerror(errno));
            rename(to, from);
            return;
        }
        if (pid == 0) {
            struct nb_docker d;
            /* dies with the reaper: a build in progress then is failed by the next one */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            nb_log_set_role("builder");
            if (nb_docker_init(&d, a->conf.docker_socket, a->conf.docker_max_response) != 0)
                _exit(1);
            a->docker = d; /* this process's own connection, not the reaper's */
            nb_template_build_job(a, &a->docker, name); /* a failed build is recorded */
            _exit(0);
        }
        builders[n_builders].pid = pid;
        snprintf(builders[n_builders].name, sizeof(builders[0].name), "%s", name);
        n_builders++;
    }
}

void nb_templates_pump(struct nb_app *a)
{
    if (pump_ticks == 0 && nb_tpl_ensure_dirs(&a->conf) != 0)
        nb_warn("templates: cannot create the templates directory: %s", strerror(errno));
    reap_builders(a);
    if (pump_ticks == 0 && nb_template_migrate(a) != 0)
        nb_warn("templates: some templates of the old naming keep it (see above); they are not "
                "found by name until moved");
    if (pump_ticks % SWEEP_EVERY == 0)
        sweep(a); /* at the reaper's start: builds a dead nanobox left "building" */
    start_builders(a);
    pump_ticks++;
}

/* An inotify descriptor on <templates>/sub for mask, or -1 (errno). */
static int watch_dir(const struct nb_conf *c, const char *sub, uint32_t mask)
{
    char dir[PATH_MAX];
    int fd = nb_tpl_ensure_dirs(c) == 0 ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
    nb_tpl_path(c, sub, dir, sizeof(dir));
    if (fd >= 0 && inotify_add_watch(fd, dir, mask) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

void nb_template_wait(int fd, unsigned usec)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char buf[4096];
    if (fd < 0) {
        usleep(usec);
        return;
    }
    if (poll(&pfd, 1, (int)(usec / 1000)) > 0)
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
}

int nb_template_log_watch(const struct nb_conf *c)
{
    return watch_dir(c, "", IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE);
}

int nb_templates_queue_fd(const struct nb_conf *c)
{
    /* a job is queued by a rename of its .json into place */
    int fd = watch_dir(c, "queue", IN_MOVED_TO | IN_CLOSE_WRITE);
    if (fd < 0)
        nb_warn("templates: cannot watch the queue (%s): a queued build waits for the next "
                "subtick",
                strerror(errno));
    return fd;
}
