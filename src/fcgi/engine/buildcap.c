/*
 * buildcap.c - see buildcap.h.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buildcap.h"
#include "diskcap.h"
#include "log.h"

#define WATCH_MS 100
#define CTRS_MAX 256
#define BYTES_PER_INODE 16384
#define GONE_WAIT_S 30

struct ctr {
    char id[16];
    char upper[PATH_MAX];
    uint64_t bytes, inodes;
    int gone;
};

/* A 12-hex-digit id at s (Docker's short ids), copied into out. */
static int short_id(const char *s, char out[16])
{
    size_t n = strspn(s, "0123456789abcdef");
    if (n < 12)
        return 0;
    snprintf(out, 16, "%.12s", s);
    return 1;
}

/* Remove image id if no name holds it (a base image, a template, never); a used one stays. */
static void remove_untagged(struct nb_docker *d, const char *id)
{
    struct nb_docker_image im;
    struct nb_derr de = {0};
    if (nb_docker_image_inspect(d, id, &im, &de) != 0 || im.ref[0] != '\0')
        return;
    if (nb_docker_image_remove(d, id, 0, &de) != 0)
        nb_debug("build: image %s of a failed build stays: %s", id, de.msg);
}

/*
 * Empty every regular file under the directory dfd (which it closes), never
 * following a symlink: a file is opened O_PATH|O_NOFOLLOW relative to its
 * directory's descriptor, checked to be a regular file, and only then
 * reopened for writing through /proc/self/fd (the same inode, whatever was
 * renamed meanwhile), and truncated. What a build over the cap wrote stops
 * holding blocks at once, and a commit of it under way reads short and
 * fails, rather than copying it into a layer.
 */
static void empty_tree(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    struct dirent *e;
    if (d == NULL) {
        close(dfd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        char proc[64];
        int fd, w;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        fd = openat(dirfd(d), e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (fstat(fd, &st) != 0) {
            close(fd);
        } else if (S_ISREG(st.st_mode)) {
            snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
            w = open(proc, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (w >= 0 && ftruncate(w, 0) != 0)
                nb_debug("build cap: cannot empty %s", e->d_name);
            if (w >= 0)
                close(w);
            close(fd);
        } else if (S_ISDIR(st.st_mode) && depth < 128) {
            int sub = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            close(fd);
            if (sub >= 0)
                empty_tree(sub, depth + 1);
        } else {
            close(fd);
        }
    }
    closedir(d);
}

static void cleanup(struct nb_docker *d, struct ctr *ct, unsigned n, char (*images)[16],
                    unsigned n_images)
{
    struct nb_derr de = {0};
    time_t until = time(NULL) + GONE_WAIT_S;
    for (unsigned i = 0; i < n; i++) {
        int running = 0;
        pid_t pid = 0;
        if (ct[i].gone)
            continue;
        /* Docker removes it itself once it sees the build cancelled; make sure */
        while (nb_docker_remove(d, ct[i].id, &de) != 0 && time(NULL) < until)
            usleep(200000);
        while (nb_docker_inspect(d, ct[i].id, &running, &pid, &de) == 0 && time(NULL) < until)
            usleep(200000);
    }
    for (unsigned i = n_images; i-- > 0;)
        remove_untagged(d, images[i]);
}

static void watch(const struct nb_conf *c, int rfd, pid_t builder, const char *marker, uint64_t cap)
{
    static struct ctr ct[CTRS_MAX];
    static char images[NB_BUILDCAP_IMAGES][16];
    unsigned n = 0, n_images = 0;
    uint64_t max_inodes = cap / BYTES_PER_INODE;
    char buf[4096], line[256];
    size_t ll = 0;
    struct nb_docker d;
    int warned = 0;

    if (nb_docker_init(&d, c->docker_socket, c->docker_max_response) != 0)
        _exit(1);
    for (;;) {
        struct pollfd pfd = {rfd, POLLIN, 0};
        uint64_t bytes = 0, inodes = 0;
        if (poll(&pfd, 1, WATCH_MS) > 0) {
            ssize_t r = read(rfd, buf, sizeof(buf));
            if (r == 0)
                _exit(0); /* the build's call returned */
            for (ssize_t i = 0; i < r; i++) {
                if (buf[i] != '\n') {
                    if (ll + 1 < sizeof(line))
                        line[ll++] = buf[i];
                    continue;
                }
                line[ll] = '\0';
                ll = 0;
                if (line[0] == 'c' && n < CTRS_MAX) {
                    memset(&ct[n], 0, sizeof(ct[n]));
                    if (short_id(line + 2, ct[n].id))
                        n++;
                } else if (line[0] == 'i' && n_images < NB_BUILDCAP_IMAGES) {
                    n_images += short_id(line + 2, images[n_images]);
                }
            }
        }
        for (unsigned i = 0; i < n; i++) {
            struct ctr *k = &ct[i];
            if (!k->gone && k->upper[0] == '\0') {
                struct nb_derr de = {0};
                int64_t size_rw;
                if (nb_docker_rw_layer(&d, k->id, 0, k->upper, sizeof(k->upper), &size_rw, &de) !=
                        0 ||
                    k->upper[0] == '\0') {
                    k->gone = de.kind == NB_DERR_HTTP && de.status == 404;
                    if (!k->gone && !warned++)
                        nb_warn("build cap: cannot find the writable layer of %s: %s", k->id,
                                de.kind ? de.msg : "no UpperDir (not overlay2)");
                    k->gone = 1;
                }
            }
            if (!k->gone) {
                uint64_t entries = 0;
                int64_t used = nb_diskcap_walk_count(k->upper, cap + 1, &entries);
                if (used < 0) {
                    k->gone = 1; /* committed and removed: its last count stays */
                } else {
                    k->bytes = (uint64_t)used;
                    k->inodes = entries;
                }
            }
            bytes += k->bytes;
            inodes += k->inodes;
        }
        if (bytes > cap || inodes > max_inodes) {
            char why[300];
            int fd;
            snprintf(why, sizeof(why),
                     "the build wrote over template_disk_max (%llu bytes, or %llu files): "
                     "%llu bytes in %llu files when it was stopped",
                     (unsigned long long)cap, (unsigned long long)max_inodes,
                     (unsigned long long)bytes, (unsigned long long)inodes);
            fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd >= 0) {
                if (write(fd, why, strlen(why)) < 0)
                    nb_warn("build cap: cannot write %s", marker);
                close(fd);
            }
            nb_warn("build cap: %s", why);
            /* the disk back first: what the steps wrote is emptied where it lies */
            for (unsigned i = 0; i < n; i++) {
                int dfd;
                if (ct[i].gone || ct[i].upper[0] == '\0')
                    continue;
                dfd = open(ct[i].upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd >= 0)
                    empty_tree(dfd, 0);
            }
            /* outlive the builder: its death is what cancels the build in Docker */
            prctl(PR_SET_PDEATHSIG, 0);
            kill(builder, SIGKILL);
            cleanup(&d, ct, n, images, n_images);
            _exit(0);
        }
    }
}

int nb_buildcap_start(struct nb_buildcap *w, const struct nb_conf *c, const char *marker,
                      uint64_t cap)
{
    int p[2];
    pid_t builder = getpid();
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    if (cap == 0)
        return 0;
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    w->pid = fork();
    if (w->pid < 0) {
        close(p[0]);
        close(p[1]);
        w->pid = 0;
        return -1;
    }
    if (w->pid == 0) {
        close(p[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != builder)
            _exit(0);
        nb_log_set_role("buildcap");
        watch(c, p[0], builder, marker, cap);
        _exit(0);
    }
    close(p[0]);
    w->fd = p[1];
    fcntl(w->fd, F_SETFL, O_NONBLOCK); /* the build never waits on the watcher */
    return 0;
}

void nb_buildcap_line(struct nb_buildcap *w, const char *text)
{
    const char *p;
    char id[16], msg[24];
    if ((p = strstr(text, "---> Running in ")) != NULL && short_id(p + 16, id)) {
        snprintf(msg, sizeof(msg), "c %s\n", id);
    } else if ((p = strstr(text, "---> ")) != NULL && short_id(p + 5, id) &&
               (p[17] == '\n' || p[17] == '\0')) {
        if (w->n_images < NB_BUILDCAP_IMAGES)
            snprintf(w->images[w->n_images++], sizeof(w->images[0]), "%s", id);
        snprintf(msg, sizeof(msg), "i %s\n", id);
    } else {
        return;
    }
    if (w->fd >= 0 && write(w->fd, msg, strlen(msg)) < 0)
        nb_debug("build cap: the watcher's pipe is full");
}

void nb_buildcap_stop(struct nb_buildcap *w)
{
    if (w->fd >= 0)
        close(w->fd); /* EOF: it exits at its next look */
    w->fd = -1;
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    w->pid = 0;
}

void nb_buildcap_cleanup(struct nb_buildcap *w, struct nb_docker *d)
{
    for (unsigned i = w->n_images; i-- > 0;)
        remove_untagged(d, w->images[i]);
}
