/*
 * rootdisk.c - see rootdisk.h.
 *
 * The mount work runs in a child of the worker (fork, no exec): setns into
 * dockerd's mount namespace needs a process that shares its file system
 * context with no thread, and the worker may have one (an MCP ticker). So
 * the child calls the kernel and formats with snprintf only (no malloc, no
 * stdio streams), and says what failed on a pipe.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "log.h"
#include "rootdisk.h"
#include "templates.h"

/* ext4 blocks; one inode per this many bytes at most (mke2fs's default ratio) */
#define RD_BLOCK 4096
#define RD_INODE_RATIO 16384
#define RD_MIN_INODES 256
/* mke2fs -O and -E: no journal, no room to grow, no inode table written now */
#define RD_FEATURES "^has_journal,^resize_inode"
#define RD_EXTENDED "lazy_itable_init=1,nodiscard"

int nb_rootdisk_wanted(const struct nb_conf *c, const char *image)
{
    return c->root_disk_max > 0 && nb_template_root(c, image);
}

/* getdents64's record (no libc: the child must not malloc, as opendir does) */
struct rd_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* ---- in the child ---------------------------------------------------------------- */

struct child_err {
    int fd; /* the pipe to the parent */
};

/* Say what failed (the errno's name: strerror is not safe after fork) and exit. */
static void cfail(struct child_err *ce, int err, const char *fmt, ...)
{
    char msg[512];
    size_t n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    n = strlen(msg);
    if (err && n < sizeof(msg))
        snprintf(msg + n, sizeof(msg) - n, ": %s",
                 strerrorname_np(err) ? strerrorname_np(err) : "?");
    if (write(ce->fd, msg, strlen(msg)) < 0) {
        /* nothing left to tell it with */
    }
    _exit(1);
}

/* dockerd's pid from its pid file (checked to be dockerd's), else 0. */
static pid_t dockerd_pid(void)
{
    static const char *const files[] = {"/var/run/docker.pid", "/run/docker.pid", NULL};
    for (size_t i = 0; files[i] != NULL; i++) {
        char buf[32], path[64];
        ssize_t n;
        long pid;
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        pid = strtol(buf, NULL, 10);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0 && !strncmp(buf, "dockerd\n", (size_t)n))
            return (pid_t)pid;
    }
    return 0;
}

/*
 * Into dockerd's mount namespace, where it mounts the container's root,
 * unless already there (or it cannot be found: then this one, which
 * nb_rootdisk_verify checks after the start).
 */
static void docker_mount_ns(struct child_err *ce)
{
    char path[64];
    struct stat mine, theirs;
    pid_t pid = dockerd_pid();
    int fd;
    if (pid == 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
    if (stat("/proc/self/ns/mnt", &mine) != 0 || stat(path, &theirs) != 0)
        return;
    if (mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino)
        return;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNS) != 0)
        cfail(ce, errno, "cannot enter dockerd's mount namespace");
    close(fd);
}

/* The layer directory's fd; *mounted: is it a mount point already (ours)? */
static int open_layer(struct child_err *ce, const char *layer, int *mounted)
{
    char parent[PATH_MAX];
    struct stat ls, ps;
    const char *slash = strrchr(layer, '/');
    int fd;
    if (slash == NULL || slash == layer || (size_t)(slash - layer) >= sizeof(parent))
        cfail(ce, 0, "bad layer directory %s", layer);
    memcpy(parent, layer, (size_t)(slash - layer));
    parent[slash - layer] = '\0';
    fd = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &ls) != 0 || stat(parent, &ps) != 0)
        cfail(ce, errno, "cannot open the container's layer %s", layer);
    *mounted = ls.st_dev != ps.st_dev;
    return fd;
}

/* mke2fs on the image (fd img), waited for. */
static void make_fs(struct child_err *ce, int img, unsigned long inodes)
{
    static const char *const tools[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs", NULL};
    char nbuf[32];
    const char *tool = NULL;
    int status;
    pid_t pid;
    for (size_t i = 0; tools[i] != NULL && tool == NULL; i++)
        if (access(tools[i], X_OK) == 0)
            tool = tools[i];
    if (tool == NULL)
        cfail(ce, 0, "mke2fs is not installed (e2fsprogs)");
    snprintf(nbuf, sizeof(nbuf), "%lu", inodes);
    pid = fork();
    if (pid == 0) {
        /* no journal: the file system lives as long as its container, which
         * a reboot ends; -m 0: root_disk_max is all the sandbox's */
        const char *argv[] = {
            "mke2fs", "-q", "-F", "-t", "ext4",      "-b", "4096",      "-m",
            "0",      "-N", nbuf, "-O", RD_FEATURES, "-E", RD_EXTENDED, "/proc/self/fd/3",
            NULL};
        static char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
        char *envp[] = {path_env, NULL};
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) != 0 || dup2(null, 1) != 1 || dup2(img, 3) != 3)
            _exit(126);
        dup2(ce->fd, 2); /* its complaint goes to the parent as ours */
        closefrom(4);
        execve(tool, (char *const *)(uintptr_t)argv, envp);
        _exit(127);
    }
    if (pid < 0)
        cfail(ce, errno, "fork mke2fs");
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            cfail(ce, errno, "waitpid mke2fs");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        cfail(ce, 0, "mke2fs failed (status %d)", status);
}

/* A free loop device bound to img; its fd (its number into *num). */
static int loop_bind(struct child_err *ce, int img, int *num)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        cfail(ce, errno, "cannot open /dev/loop-control");
    for (int tries = 0; tries < 16; tries++) {
        struct loop_config cfg;
        char dev[32];
        int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;
        if (n < 0)
            cfail(ce, errno, "no free loop device");
        snprintf(dev, sizeof(dev), "/dev/loop%d", n);
        fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            cfail(ce, errno, "cannot open %s", dev);
        memset(&cfg, 0, sizeof(cfg));
        cfg.fd = (uint32_t)img;
        cfg.block_size = RD_BLOCK;
        /* direct I/O: the pages are cached once (the sandbox's), not again as the file's */
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
            close(ctl);
            *num = n;
            return fd;
        }
        if (errno == EINVAL) {
            cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR; /* no direct I/O on that file system */
            if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
                close(ctl);
                *num = n;
                return fd;
            }
        }
        close(fd);
        if (errno != EBUSY) /* EBUSY: another worker took it first */
            cfail(ce, errno, "cannot bind %s", dev);
    }
    cfail(ce, EBUSY, "no loop device could be bound");
    return -1;
}

/*
 * The ext4 file system in the file img, mounted detached (an O_PATH fd of
 * the mount, for move_mount) through a loop device that the mount holds:
 * on its last unmount the device unbinds itself. attr: MOUNT_ATTR_* flags.
 */
static int fs_mount(struct child_err *ce, int img, unsigned attr)
{
    char dev[32];
    int loop, num, fsfd, mnt;
    loop = loop_bind(ce, img, &num);
    snprintf(dev, sizeof(dev), "/dev/loop%d", num);
    fsfd = fsopen("ext4", FSOPEN_CLOEXEC);
    if (fsfd < 0 || fsconfig(fsfd, FSCONFIG_SET_STRING, "source", dev, 0) != 0 ||
        fsconfig(fsfd, FSCONFIG_SET_FLAG, "discard", NULL, 0) != 0 ||
        fsconfig(fsfd, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) != 0 ||
        fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0)
        cfail(ce, errno, "cannot mount the file system (%s)", dev);
    mnt = fsmount(fsfd, FSMOUNT_CLOEXEC, attr);
    if (mnt < 0)
        cfail(ce, errno, "fsmount");
    close(fsfd);
    close(loop);
    return mnt;
}

/* Copy directory src's entries into dst (the layer's few: link, lower, diff/, work/). */
static void copy_tree(struct child_err *ce, int src, int dst, int depth)
{
    char buf[8192];
    long n;
    if (depth > 8)
        cfail(ce, 0, "the container's layer is deeper than expected");
    while ((n = syscall(SYS_getdents64, src, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n;) {
            struct rd_dirent *d = (struct rd_dirent *)(void *)(buf + off);
            struct stat st;
            off += d->reclen;
            if (!strcmp(d->name, ".") || !strcmp(d->name, ".."))
                continue;
            if (fstatat(src, d->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                cfail(ce, errno, "stat %s in the layer", d->name);
            if (S_ISDIR(st.st_mode)) {
                int s2, d2;
                if (mkdirat(dst, d->name, 0700) != 0 && errno != EEXIST)
                    cfail(ce, errno, "mkdir %s", d->name);
                s2 = openat(src, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                d2 = openat(dst, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s2 < 0 || d2 < 0)
                    cfail(ce, errno, "open %s", d->name);
                copy_tree(ce, s2, d2, depth + 1);
                if (fchown(d2, st.st_uid, st.st_gid) != 0 || fchmod(d2, st.st_mode & 07777) != 0)
                    cfail(ce, errno, "chown %s", d->name);
                close(s2);
                close(d2);
            } else if (S_ISREG(st.st_mode)) {
                char data[4096];
                ssize_t r;
                int s2 = openat(src, d->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC),
                    d2 = openat(dst, d->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (s2 < 0 || d2 < 0)
                    cfail(ce, errno, "open %s", d->name);
                while ((r = read(s2, data, sizeof(data))) > 0)
                    if (write(d2, data, (size_t)r) != r)
                        cfail(ce, errno, "write %s", d->name);
                if (r < 0 || fchown(d2, st.st_uid, st.st_gid) != 0 ||
                    fchmod(d2, st.st_mode & 07777) != 0)
                    cfail(ce, errno, "copy %s", d->name);
                close(s2);
                close(d2);
            } else if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t r = readlinkat(src, d->name, target, sizeof(target) - 1);
                if (r < 0)
                    cfail(ce, errno, "readlink %s", d->name);
                target[r] = '\0';
                if (symlinkat(target, dst, d->name) != 0 ||
                    fchownat(dst, d->name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
                    cfail(ce, errno, "symlink %s", d->name);
            }
        }
    }
    if (n < 0)
        cfail(ce, errno, "read the layer directory");
}

static void child_attach(struct child_err *ce, const char *layer, uint64_t bytes,
                         unsigned long inodes)
{
    char parent[PATH_MAX];
    struct stat ls;
    int lfd, img, mnt, root, mounted;
    const char *slash;

    docker_mount_ns(ce);
    lfd = open_layer(ce, layer, &mounted);
    if (mounted)
        _exit(0); /* a create retried after a partial failure: already bounded */
    if (fstat(lfd, &ls) != 0)
        cfail(ce, errno, "stat %s", layer);
    slash = strrchr(layer, '/');
    memcpy(parent, layer, (size_t)(slash - layer));
    parent[slash - layer] = '\0';
    /* where the layer would have lived: Docker's storage; unnamed, so that
     * nothing is left behind once the loop device lets it go */
    img = open(parent, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (img < 0)
        cfail(ce, errno, "cannot make the file of the layer's file system in %s", parent);
    if (ftruncate(img, (off_t)bytes) != 0)
        cfail(ce, errno, "size the layer's file system");
    make_fs(ce, img, inodes);
    mnt = fs_mount(ce, img, 0);
    close(img);                                                  /* the loop device holds it */
    root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* mnt is an O_PATH */
    if (root < 0)
        cfail(ce, errno, "open the layer's file system");
    if (unlinkat(root, "lost+found", AT_REMOVEDIR) != 0 && errno != ENOENT)
        cfail(ce, errno, "rmdir lost+found");
    copy_tree(ce, lfd, root, 0);
    if (fchown(root, ls.st_uid, ls.st_gid) != 0 || fchmod(root, ls.st_mode & 07777) != 0)
        cfail(ce, errno, "chown the layer's file system");
    close(root);
    if (move_mount(mnt, "", AT_FDCWD, layer, MOVE_MOUNT_F_EMPTY_PATH) != 0)
        cfail(ce, errno, "cannot mount the layer's file system over %s", layer);
    _exit(0);
}

static void child_detach(struct child_err *ce, const char *layer)
{
    int mounted;
    docker_mount_ns(ce);
    close(open_layer(ce, layer, &mounted));
    /* lazily: whatever still holds it (a container's last exiting
     * process) lets it go by itself, and with it the device and file */
    if (mounted && umount2(layer, MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
        cfail(ce, errno, "cannot unmount %s", layer);
    _exit(0);
}

/* ---- persistent volumes (volume.c): the same file system, in a named file ----------- */

/* Is directory dir a mount point (not on its parent's file system)? */
static int is_mount(struct child_err *ce, const char *dir)
{
    char parent[PATH_MAX];
    struct stat ds, ps;
    if (snprintf(parent, sizeof(parent), "%s/..", dir) >= (int)sizeof(parent))
        cfail(ce, 0, "path too long: %s", dir);
    if (lstat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) || stat(parent, &ps) != 0)
        cfail(ce, errno, "cannot stat the volume's directory %s", dir);
    return ds.st_dev != ps.st_dev;
}

/*
 * Is img bound to a loop device already? Its file system is then mounted
 * somewhere (a bind of it that outlived the mount on dir): a second mount
 * of the same file would corrupt it.
 */
static int img_bound(const char *img)
{
    char buf[8192], path[PATH_MAX], back[PATH_MAX + 2];
    long n;
    int found = 0, dir = open("/sys/block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    while (!found && (n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n && !found;) {
            struct rd_dirent *d = (struct rd_dirent *)(void *)(buf + off);
            ssize_t r;
            int fd;
            off += d->reclen;
            if (strncmp(d->name, "loop", 4) != 0)
                continue;
            snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", d->name);
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue; /* not bound */
            r = read(fd, back, sizeof(back) - 1);
            close(fd);
            if (r <= 0)
                continue;
            back[r] = '\0';
            if (back[r - 1] == '\n')
                back[r - 1] = '\0';
            found = !strcmp(back, img);
        }
    }
    close(dir);
    return found;
}

/* img's file system on dir (nosuid, nodev), unless it is there already. */
static void vol_mount(struct child_err *ce, const char *img, const char *dir)
{
    int fd, mnt;
    if (is_mount(ce, dir))
        return;
    /* a loop device's auto-clear after the last unmount runs a moment later (a work queue's) */
    for (int i = 0; i < 40 && img_bound(img); i++)
        usleep(50000);
    if (img_bound(img))
        cfail(ce, 0,
              "%s is in use by a loop device but not mounted on %s: unmount what holds it "
              "(a bind of its file system) first",
              img, dir);
    fd = open(img, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        cfail(ce, errno, "cannot open the volume's file system %s", img);
    mnt = fs_mount(ce, fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    close(fd);
    if (move_mount(mnt, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH) != 0)
        cfail(ce, errno, "cannot mount the volume's file system on %s", dir);
    close(mnt);
}

/*
 * A new volume: the file (sparse, bytes), ext4 in it, mounted on dir, its
 * root 0777 with a default ACL of rwx for owner, group and others: what
 * one of the owner's sandboxes (each its own uid) makes there, the others
 * may read and write (the mount itself is what keeps other owners out).
 */
static void child_vcreate(struct child_err *ce, const char *img, const char *dir, uint64_t bytes,
                          unsigned long inodes)
{
    /* posix_acl_xattr: version 2, then {tag, perm, id} entries (little endian) */
    static const unsigned char acl[4 + 3 * 8] = {
        2,    0, 0, 0,                         /* a_version */
        0x01, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_USER_OBJ rwx */
        0x04, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_GROUP_OBJ rwx */
        0x20, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_OTHER rwx */
    };
    int fd, root;
    docker_mount_ns(ce);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        cfail(ce, errno, "cannot make the volume's directory %s", dir);
    fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        cfail(ce, errno, "cannot make the volume's file %s", img);
    if (ftruncate(fd, (off_t)bytes) != 0)
        cfail(ce, errno, "size the volume's file system");
    make_fs(ce, fd, inodes);
    close(fd);
    vol_mount(ce, img, dir);
    root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (root < 0)
        cfail(ce, errno, "open the volume's file system");
    if (unlinkat(root, "lost+found", AT_REMOVEDIR) != 0 && errno != ENOENT)
        cfail(ce, errno, "rmdir lost+found");
    if (fchmod(root, 0777) != 0)
        cfail(ce, errno, "chmod the volume's root");
    if (fsetxattr(root, "system.posix_acl_default", acl, sizeof(acl), 0) != 0 &&
        errno != EOPNOTSUPP)
        cfail(ce, errno, "set the volume's default ACL");
    close(root);
    _exit(0);
}

/* Unmount dir (lazily: a process still in it lets go by itself), remove img and dir. */
static void child_vremove(struct child_err *ce, const char *img, const char *dir)
{
    struct stat st;
    docker_mount_ns(ce);
    if (lstat(dir, &st) == 0 && is_mount(ce, dir) &&
        umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
        cfail(ce, errno, "cannot unmount %s", dir);
    if (unlink(img) != 0 && errno != ENOENT)
        cfail(ce, errno, "cannot remove %s", img);
    if (rmdir(dir) != 0 && errno != ENOENT)
        cfail(ce, errno, "cannot remove %s", dir);
    _exit(0);
}

static void child_volume(struct child_err *ce, int op, const char *img, const char *dir,
                         uint64_t bytes, unsigned long inodes)
{
    if (op == NB_RDV_CREATE)
        child_vcreate(ce, img, dir, bytes, inodes);
    if (op == NB_RDV_REMOVE)
        child_vremove(ce, img, dir);
    docker_mount_ns(ce);
    vol_mount(ce, img, dir);
    _exit(0);
}

/* Run fn(ce, layer, ...) in a child; 0, or -1 with its message. */
static int in_child(int attach, const char *layer, uint64_t bytes, unsigned long inodes, char *err,
                    size_t errlen, int vop, const char *img)
{
    int p[2], status;
    ssize_t n;
    size_t got = 0;
    pid_t pid;
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        struct child_err ce = {p[1]};
        close(p[0]);
        signal(SIGPIPE, SIG_DFL);
        if (img != NULL)
            child_volume(&ce, vop, img, layer, bytes, inodes);
        else if (attach)
            child_attach(&ce, layer, bytes, inodes);
        else
            child_detach(&ce, layer);
        _exit(0);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    err[0] = '\0';
    while (got + 1 < errlen && (n = read(p[0], err + got, errlen - 1 - got)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        got += (size_t)n;
    }
    err[got] = '\0';
    close(p[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            break;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (got == 0)
        snprintf(err, errlen, "the mount helper ended with status %d", status);
    while (got > 0 && (err[got - 1] == '\n' || err[got - 1] == ' '))
        err[--got] = '\0';
    return -1;
}

/* The layer directory (overlay2: the upper directory's parent) of container cid. */
static int layer_dir(struct nb_app *a, const char *cid, char *layer, size_t len, char *err,
                     size_t errlen)
{
    char upper[PATH_MAX];
    int64_t size_rw;
    struct nb_derr de = {0};
    char *slash;
    if (nb_docker_rw_layer(&a->docker, cid, 0, upper, sizeof(upper), &size_rw, &de) != 0) {
        snprintf(err, errlen, "inspect the container: %s", de.msg);
        return -1;
    }
    slash = strrchr(upper, '/');
    if (upper[0] != '/' || slash == NULL || strcmp(slash, "/diff") != 0 || slash == upper) {
        snprintf(err, errlen,
                 "Docker's storage driver gives the container no overlay2 upper directory "
                 "(\"%s\"): root_disk_max needs overlay2 (or set root_disk_max = 0)",
                 upper);
        return -1;
    }
    *slash = '\0';
    if (strlen(upper) >= len) {
        snprintf(err, errlen, "layer path too long");
        return -1;
    }
    snprintf(layer, len, "%s", upper);
    return 0;
}

int nb_rootdisk_attach(struct nb_app *a, const char *cid, char *err, size_t errlen)
{
    char layer[PATH_MAX], work[PATH_MAX + 8];
    struct stat st;
    uint64_t bytes = a->conf.root_disk_max / RD_BLOCK * RD_BLOCK;
    unsigned long inodes = a->conf.root_disk_inodes;
    int64_t t0 = nb_clock_mono_ms();
    if (layer_dir(a, cid, layer, sizeof(layer), err, errlen) != 0)
        return -1;
    /* overlay wants upper and work on one file system: both under the layer */
    snprintf(work, sizeof(work), "%s/work", layer);
    if (stat(work, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "the container's layer %s has no work directory", layer);
        return -1;
    }
    if (inodes > bytes / RD_INODE_RATIO)
        inodes = (unsigned long)(bytes / RD_INODE_RATIO);
    if (inodes < RD_MIN_INODES)
        inodes = RD_MIN_INODES;
    if (in_child(1, layer, bytes, inodes, err, errlen, 0, NULL) != 0)
        return -1;
    nb_debug("container %.12s: layer %s bounded to %llu bytes, %lu inodes (%lld ms)", cid, layer,
             (unsigned long long)bytes, inodes, (long long)(nb_clock_mono_ms() - t0));
    return 0;
}

int nb_rootdisk_verify(const struct nb_conf *c, pid_t pid, char *err, size_t errlen)
{
    char root[64];
    struct statfs sf;
    uint64_t total;
    snprintf(root, sizeof(root), "/proc/%d/root/", (int)pid);
    if (statfs(root, &sf) != 0) {
        snprintf(err, errlen, "statfs %s: %s", root, strerror(errno));
        return -1;
    }
    total = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
    /* its inode count too (mke2fs rounds it up to whole inode table
     * blocks per group): the test that holds when root_disk_max is larger
     * than the host's disk */
    if (total > c->root_disk_max ||
        (uint64_t)sf.f_files > (uint64_t)c->root_disk_inodes + c->root_disk_inodes / 4 + 4096) {
        snprintf(err, errlen,
                 "the sandbox's image writes to a file system of %llu bytes, not the bounded one "
                 "nanobox mounted (is dockerd's pid file, /var/run/docker.pid, another's?)",
                 (unsigned long long)total);
        return -1;
    }
    return 0;
}

int nb_rootdisk_bounded(const char *upper)
{
    char layer[PATH_MAX], parent[PATH_MAX];
    struct stat ls, ps;
    char *slash;
    if (snprintf(layer, sizeof(layer), "%s", upper) >= (int)sizeof(layer))
        return 0;
    if ((slash = strrchr(layer, '/')) == NULL || slash == layer)
        return 0;
    *slash = '\0';
    snprintf(parent, sizeof(parent), "%s", layer);
    if ((slash = strrchr(parent, '/')) == NULL || slash == parent)
        return 0;
    *slash = '\0';
    return stat(layer, &ls) == 0 && stat(parent, &ps) == 0 && ls.st_dev != ps.st_dev;
}

/* Kill the container, wait until it has stopped, unmount its layer. */
static int detach(struct nb_app *a, const char *id)
{
    char path[256], layer[PATH_MAX], err[512];
    long status = 0;
    struct nb_derr de = {0};
    if (layer_dir(a, id, layer, sizeof(layer), err, sizeof(err)) != 0)
        return -1; /* gone, or no layer of ours: the removal says */
    snprintf(path, sizeof(path), "/containers/%s/kill", id);
    if (nb_docker_request(&a->docker, "POST", path, NULL, 30000, &status, NULL, &de) != 0)
        return -1;
    snprintf(path, sizeof(path), "/containers/%s/wait?condition=not-running", id);
    if (nb_docker_request(&a->docker, "POST", path, NULL, 30000, &status, NULL, &de) != 0)
        return -1;
    if (in_child(0, layer, 0, 0, err, sizeof(err), 0, NULL) != 0) {
        nb_warn("container %.12s: %s", id, err);
        return -1;
    }
    return 0;
}

int nb_rootdisk_remove(struct nb_app *a, const char *id, int root, struct nb_derr *de)
{
    if (root)
        detach(a, id);
    if (nb_docker_remove(&a->docker, id, de) == 0)
        return 0;
    if (root || strstr(de->msg, "busy") == NULL)
        return -1;
    /* made with a root under another configuration: its layer is ours */
    if (detach(a, id) != 0)
        return -1;
    memset(de, 0, sizeof(*de));
    return nb_docker_remove(&a->docker, id, de);
}

int nb_rootdisk_volume(int op, const char *img, const char *dir, uint64_t bytes, char *err,
                       size_t errlen)
{
    unsigned long inodes = (unsigned long)(bytes / RD_INODE_RATIO);
    if (inodes < RD_MIN_INODES)
        inodes = RD_MIN_INODES;
    return in_child(0, dir, bytes / RD_BLOCK * RD_BLOCK, inodes, err, errlen, op, img);
}
