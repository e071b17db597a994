/*
 * fcopy.c - a move across mounts (see fcopy.h): rename(2) cannot cross
 * file systems (/workspace and /tmp are separate tmpfs mounts), so the
 * tree is copied next to its destination under a temporary name, renamed
 * into place (atomically, with rename's own rules for what it replaces)
 * and only then removed from its source. Any failure removes the copy and
 * leaves the source as it was.
 *
 * The walk uses openat(O_NOFOLLOW) and fstatat(AT_SYMLINK_NOFOLLOW): a
 * symlink is copied as a symlink (its target as readlink gives it), never
 * followed. Modes (07777 as the sandbox user may set them) and mtimes are
 * kept; FIFOs are recreated; devices and sockets are refused (EINVAL).
 * A mount point, or a tree with a mount inside, is not moved (EXDEV, what
 * rename said), nor a source its parent does not let the user remove.
 *
 * init_fcopy_rm_tree, which removes that source, is also files.c's
 * recursive delete (D with r).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fcopy.h"
#include "init.h"
#include "root.h"

#define FCOPY_BUF (64u * 1024u)
#define FCOPY_TMP_TRIES 16

/* A regular file's bytes: src (open) into a new file name in dirfd. */
static int fcopy_file(int sfd, int dirfd, const char *name, const struct stat *st)
{
    static char buf[FCOPY_BUF];
    int dfd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int e = 0;

    if (dfd == -1)
        return errno;
    for (;;) {
        ssize_t n = read(sfd, buf, sizeof(buf)), off = 0;
        if (n == 0)
            break;
        if (n == -1) {
            if (errno == EINTR)
                continue;
            e = errno;
            break;
        }
        while (off < n && e == 0) {
            ssize_t w = write(dfd, buf + off, (size_t)(n - off));
            if (w == -1 && errno != EINTR)
                e = errno;
            else if (w > 0)
                off += w;
        }
        if (e != 0)
            break;
    }
    if (e == 0 && fchmod(dfd, st->st_mode & 07777) == -1)
        e = errno;
    if (e == 0) {
        struct timespec ts[2] = {st->st_atim, st->st_mtim};
        futimens(dfd, ts); /* best effort */
    }
    close(dfd);
    return e;
}

static int fcopy_tree(int sdir, const char *sname, int ddir, const char *dname, int depth,
                      dev_t dev);

/* A directory's entries, then its mode and times. */
static int fcopy_dir(int sdir, const char *sname, int ddir, const char *dname,
                     const struct stat *st, int depth, dev_t dev)
{
    int sfd, dfd, e = 0;
    DIR *d;
    struct dirent *de;

    if (depth > INIT_RM_DEPTH)
        return ELOOP;
    sfd = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (sfd == -1)
        return errno;
    if (mkdirat(ddir, dname, 0700) == -1) {
        e = errno;
        close(sfd);
        return e;
    }
    dfd = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd == -1) {
        e = errno;
        close(sfd);
        return e;
    }
    d = fdopendir(sfd);
    if (d == NULL) {
        close(sfd);
        close(dfd);
        return ENOMEM;
    }
    while (e == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        e = fcopy_tree(dirfd(d), de->d_name, dfd, de->d_name, depth + 1, dev);
    }
    closedir(d);
    if (e == 0 && fchmod(dfd, st->st_mode & 07777) == -1)
        e = errno;
    if (e == 0) {
        struct timespec ts[2] = {st->st_atim, st->st_mtim};
        futimens(dfd, ts);
    }
    close(dfd);
    return e;
}

/* sname in sdir, whatever it is, as dname in ddir (which must not exist); nothing on
 * another file system than dev (a mount inside the tree: EXDEV, as rename says). */
static int fcopy_tree(int sdir, const char *sname, int ddir, const char *dname, int depth,
                      dev_t dev)
{
    struct stat st;
    char target[PATH_MAX];
    ssize_t n;
    int fd, e;

    if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) == -1)
        return errno;
    if (st.st_dev != dev)
        return EXDEV;
    if (S_ISDIR(st.st_mode))
        return fcopy_dir(sdir, sname, ddir, dname, &st, depth, dev);
    if (S_ISLNK(st.st_mode)) {
        n = readlinkat(sdir, sname, target, sizeof(target) - 1);
        if (n == -1)
            return errno;
        target[n] = '\0';
        return symlinkat(target, ddir, dname) == 0 ? 0 : errno;
    }
    if (S_ISFIFO(st.st_mode))
        return mkfifoat(ddir, dname, st.st_mode & 07777) == 0 ? 0 : errno;
    if (!S_ISREG(st.st_mode))
        return EINVAL; /* a device or a socket: not for the sandbox user to recreate */
    fd = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd == -1)
        return errno;
    e = fcopy_file(fd, ddir, dname, &st);
    close(fd);
    return e;
}

/* Remove path, whatever it is (a directory with all it holds); 0 or an errno. */
static int fcopy_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == -1)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 ? 0 : errno;
    return init_fcopy_rm_tree(AT_FDCWD, path, 0);
}

/*
 * May from be moved away by copy and delete? Its parent must let the
 * sandbox user remove it, and a mount point (/workspace itself) never is:
 * its contents would be deleted and the mount stay. 0 or an errno.
 */
static int fcopy_check(const char *from, struct stat *st)
{
    const char *slash = strrchr(from, '/');
    char *parent;
    struct stat pst;
    int e = 0;

    if (lstat(from, st) == -1)
        return errno;
    parent = strndup(from, slash != NULL && slash != from ? (size_t)(slash - from) : 1);
    if (parent == NULL)
        return ENOMEM;
    /* the directory the kernel resolves the parent to: /home/user/x's is the
     * workspace, which the link /home/user leads to, not the link on /home */
    if (stat(parent, &pst) == -1)
        e = errno;
    else if (pst.st_dev != st->st_dev)
        e = EXDEV; /* a mount point */
    else if (init_root_access(parent, W_OK | X_OK) == -1)
        e = errno;
    free(parent);
    return e;
}

int init_fcopy_move(const char *from, const char *to)
{
    static unsigned counter;
    const char *slash = strrchr(to, '/');
    size_t dlen = slash != NULL ? (size_t)(slash - to) : 0;
    size_t tlen = dlen + 64;
    char *tmp = malloc(tlen);
    struct stat st;
    int e;

    if (tmp == NULL)
        return ENOMEM;
    e = fcopy_check(from, &st);
    if (e != 0) {
        free(tmp);
        return e;
    }
    e = EEXIST;
    for (int i = 0; i < FCOPY_TMP_TRIES && e == EEXIST; i++) {
        snprintf(tmp, tlen, "%.*s/.nanobox-move.%d.%u", (int)dlen, to, (int)getpid(), counter++);
        e = fcopy_tree(AT_FDCWD, from, AT_FDCWD, tmp, 0, st.st_dev);
        if (e != 0 && e != EEXIST)
            fcopy_remove(tmp);
    }
    if (e == 0 && rename(tmp, to) == -1) {
        e = errno;
        fcopy_remove(tmp);
    }
    if (e == 0)
        e = fcopy_remove(from); /* the copy is in place: what is left of the source goes */
    free(tmp);
    return e;
}

int init_fcopy_rm_tree(int parent, const char *name, int depth)
{
    int fd, e = 0;
    DIR *d;
    struct dirent *de;

    if (depth > INIT_RM_DEPTH)
        return ELOOP;
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd == -1)
        return errno == ELOOP || errno == ENOTDIR
                   ? (unlinkat(parent, name, 0) == 0 ? 0 : errno) /* became a link or a file */
                   : errno;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return ENOMEM;
    }
    while (e == 0 && (de = readdir(d)) != NULL) {
        struct stat st;
        int isdir;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (de->d_type != DT_UNKNOWN)
            isdir = de->d_type == DT_DIR;
        else
            isdir = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (isdir)
            e = init_fcopy_rm_tree(fd, de->d_name, depth + 1);
        else if (unlinkat(fd, de->d_name, 0) == -1 && errno != ENOENT)
            e = errno;
    }
    closedir(d);
    if (e == 0 && unlinkat(parent, name, AT_REMOVEDIR) == -1)
        e = errno;
    return e;
}
