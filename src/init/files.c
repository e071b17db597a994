/*
 * files.c - the file requests: R read or list (H levels deep), T stat,
 * U write, D delete, N mkdir, V move (across mounts: fcopy.c).
 *
 * Paths come checked by request.c (absolute, no . or ..) and are used as
 * the sandbox user would use them. Only regular files and directories are
 * opened: the type is checked with stat before open (so a FIFO or a device
 * is never opened) and again with fstat after (in case it changed), and
 * the open itself is O_NONBLOCK so that even a race cannot block the loop.
 * A recursive delete walks with openat(O_NOFOLLOW|O_DIRECTORY) and
 * unlinkat, so a symlink in the tree is removed, never followed.
 *
 * Reads and listings are sent as the connection has room; an upload
 * writes each data frame as it comes (a regular file write does not
 * block for long) into a temporary file renamed into place at the end.
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
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agentproto.h"
#include "reply.h"
#include "fcopy.h"
#include "init.h"
#include "ops.h"
#include "root.h"

/* Longest owner or group name sent; a longer one goes as its number. */
#define FILES_NAME_MAX 64
/* body of 'f' or 'n': F name, K, Z, M, Y, y, u, g, L, m, a, x* */
#define FILES_INFO_MAX                                                                             \
    (11 * NBA_HDR + NBA_MAX_PATH + 1 + 8 + 4 + 8 + 4 + 2 * FILES_NAME_MAX + 2 * NBA_MAX_PATH + 4 + \
     NBA_META_MAX * (NBA_HDR + 1) + NBA_META_BYTES)
#define FILES_TMP_TRIES 16

static char *path_dup(const struct init_slice *s)
{
    char *p = malloc((size_t)s->len + 1);

    if (p != NULL) {
        memcpy(p, s->p, s->len);
        p[s->len] = '\0';
    }
    return p;
}

static uint8_t files_kind(mode_t m)
{
    if (S_ISREG(m))
        return NBA_KIND_FILE;
    if (S_ISDIR(m))
        return NBA_KIND_DIR;
    if (S_ISLNK(m))
        return NBA_KIND_LINK;
    return NBA_KIND_OTHER;
}

/*
 * Owner and group names, as the sandbox's /etc/passwd and /etc/group say
 * (the agent is static: no NSS), the last of each kept for a listing's
 * next entries.
 */
struct files_names {
    int have_uid, have_gid;
    uid_t uid;
    gid_t gid;
    char user[FILES_NAME_MAX], group[FILES_NAME_MAX];
};

/* The name of id in db ("name:x:id:..." lines), or id in decimal. */
static void files_id_name(const char *db, unsigned long id, char *out, size_t outlen)
{
    char line[1024];
    FILE *f = fopen(db, "re");

    snprintf(out, outlen, "%lu", id);
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *c1 = strchr(line, ':'), *c2, *end;
        unsigned long v;
        if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL || c1 == line ||
            (size_t)(c1 - line) >= outlen)
            continue;
        v = strtoul(c2 + 1, &end, 10);
        if (end == c2 + 1 || *end != ':' || v != id)
            continue;
        snprintf(out, outlen, "%.*s", (int)(c1 - line), line);
        break;
    }
    fclose(f);
}

static void files_names_of(struct files_names *nm, const struct stat *st)
{
    if (!nm->have_uid || nm->uid != st->st_uid) {
        files_id_name("/etc/passwd", (unsigned long)st->st_uid, nm->user, sizeof(nm->user));
        nm->uid = st->st_uid;
        nm->have_uid = 1;
    }
    if (!nm->have_gid || nm->gid != st->st_gid) {
        files_id_name("/etc/group", (unsigned long)st->st_gid, nm->group, sizeof(nm->group));
        nm->gid = st->st_gid;
        nm->have_gid = 1;
    }
}

/*
 * A symlink's real path (dirfd/at as for readlinkat) into out (PATH_MAX
 * bytes), every link followed as the sandbox user may, as envd's
 * filepath.EvalSymlinks gives it: the kernel resolves it (openat2,
 * O_PATH) and names what it reached (/proc/self/fd). RESOLVE_NO_MAGICLINKS
 * keeps /proc's magic links (/proc/self/cwd, /proc/1/fd/N, .../root) out
 * of it: through them the agent would see its own open files and
 * namespaces, not what the sandbox user sees. -1 when it does not
 * resolve (dangling, a loop, a magic link, no right to look).
 */
static int files_real(int dirfd, const char *at, char *out)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
    char fdpath[64];
    ssize_t n;
    int fd = (int)syscall(SYS_openat2, dirfd, at, &how, sizeof(how));

    if (fd == -1)
        return -1;
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
    n = readlink(fdpath, out, PATH_MAX - 1);
    close(fd);
    if (n <= 0 || out[0] != '/')
        return -1;
    out[n] = '\0';
    /* an unlinked or unreachable target (" (deleted)", another root) is not a path */
    return init_root_access(out, F_OK) == 0 ? 0 : -1;
}

/*
 * The x fields of a file's user metadata (its "user.<key>" xattrs), read
 * from fd, or from path when fd is -1 (a symlink not followed); those
 * that break the rules of NBA_META_* are left out, and those past its
 * caps. Returns the length.
 */
static size_t files_meta(unsigned char *out, int fd, const char *path)
{
    static char names[XATTR_LIST_MAX]; /* one request at a time runs here */
    char field[NBA_META_KEY_MAX + 1 + NBA_META_VALUE_MAX];
    size_t n = 0, total = 0;
    unsigned count = 0;
    ssize_t len =
        fd != -1 ? flistxattr(fd, names, sizeof(names)) : llistxattr(path, names, sizeof(names));

    for (ssize_t i = 0; i < len && count < NBA_META_MAX;) {
        const char *name = names + i;
        size_t nlen = strnlen(name, (size_t)(len - i)), klen = nlen - 5;
        ssize_t vlen;
        i += (ssize_t)nlen + 1;
        if (nlen <= 5 || strncmp(name, "user.", 5) != 0 || !nba_meta_key_ok(name + 5, klen))
            continue;
        memcpy(field, name + 5, klen);
        field[klen] = '\0';
        vlen = fd != -1 ? fgetxattr(fd, name, field + klen + 1, NBA_META_VALUE_MAX)
                        : lgetxattr(path, name, field + klen + 1, NBA_META_VALUE_MAX);
        if (vlen < 0 || !nba_meta_value_ok(field + klen + 1, (size_t)vlen))
            continue; /* gone meanwhile, too long (ERANGE), or not text */
        if (total + klen + (size_t)vlen > NBA_META_BYTES)
            break;
        total += klen + (size_t)vlen;
        count++;
        n += nba_field_put(out + n, NBA_T_META, field, (uint32_t)(klen + 1 + (size_t)vlen));
    }
    return n;
}

/*
 * The fields K Z M Y y u g (and for a symlink L and, when it resolves, m
 * and a: dirfd/at, as readlinkat and fstatat take them) of st, after an
 * optional F name, then a file's or a directory's metadata from xfd or
 * xpath (files_meta; neither: none); returns the length.
 */
static size_t files_info(unsigned char *out, const char *name, const struct stat *st,
                         struct files_names *nm, int dirfd, const char *at, int xfd,
                         const char *xpath)
{
    unsigned char v[8];
    uint8_t kind = files_kind(st->st_mode);
    size_t n = 0;

    if (name != NULL)
        n += nba_field_put(out + n, NBA_T_PATH, name, (uint32_t)strlen(name));
    n += nba_field_put(out + n, NBA_T_KIND, &kind, 1);
    nba_put_u64(v, (uint64_t)st->st_size);
    n += nba_field_put(out + n, NBA_T_CLOSE, v, 8);
    nba_put_u32(v, (uint32_t)(st->st_mode & 07777));
    n += nba_field_put(out + n, NBA_T_MAXOUT, v, 4);
    nba_put_u64(v, (uint64_t)(st->st_mtime < 0 ? 0 : st->st_mtime));
    n += nba_field_put(out + n, NBA_T_MTIME, v, 8);
    nba_put_u32(v, (uint32_t)(st->st_mtime < 0 ? 0 : st->st_mtim.tv_nsec));
    n += nba_field_put(out + n, NBA_T_MTIME_NS, v, 4);
    files_names_of(nm, st);
    n += nba_field_put(out + n, NBA_T_OWNER, nm->user, (uint32_t)strlen(nm->user));
    n += nba_field_put(out + n, NBA_T_GROUP, nm->group, (uint32_t)strlen(nm->group));
    if (S_ISLNK(st->st_mode) && at != NULL) {
        char target[NBA_MAX_PATH];
        ssize_t t = readlinkat(dirfd, at, target, sizeof(target));
        struct stat tst;
        if (t > 0)
            n += nba_field_put(out + n, NBA_T_TARGET, target, (uint32_t)t);
        if (fstatat(dirfd, at, &tst, 0) == 0) {
            char real[PATH_MAX];
            nba_put_u32(v, (uint32_t)tst.st_mode);
            n += nba_field_put(out + n, NBA_T_TMODE, v, 4);
            if (files_real(dirfd, at, real) == 0 && strlen(real) <= NBA_MAX_PATH)
                n += nba_field_put(out + n, NBA_T_REAL, real, (uint32_t)strlen(real));
        }
    }
    if ((S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) && (xfd != -1 || xpath != NULL))
        n += files_meta(out + n, xfd, xpath);
    return n;
}

/* The info frame of path (a symlink's target read when it is one), with
 * the metadata of xfd or xpath (files_info). */
static void files_send_info(struct init_conn *c, const struct stat *st, const char *path, int xfd,
                            const char *xpath)
{
    static unsigned char body[FILES_INFO_MAX]; /* one connection at a time runs here */
    struct files_names nm = {0};

    init_reply_send(c, NBA_INFO, body,
                    (uint32_t)files_info(body, NULL, st, &nm, AT_FDCWD, path, xfd, xpath));
}

static void files_ok(struct init_conn *c)
{
    init_reply_send(c, NBA_END, NULL, 0);
    init_reply_finish(c);
}

static void files_errno(struct init_conn *c, int e, const char *what, const char *path)
{
    init_reply_error(c, e, "%s %s: %s", what, path, strerror(e));
}

/* --- R -------------------------------------------------------------------- */

/*
 * A read: a regular file's fd, or the directories being listed, the one
 * asked for at the bottom of the stack and, with a depth above 1, the
 * subdirectories being walked above it (entries below the first level
 * are named by their path relative to the one asked for).
 */
struct files_read {
    int fd;                           /* a regular file, or -1 */
    DIR *dirs[NBA_MAX_DEPTH];         /* dirs[0..ndirs) */
    size_t prefix_len[NBA_MAX_DEPTH]; /* rel's length at each level */
    unsigned ndirs, depth;
    char rel[NBA_MAX_PATH + 1]; /* the relative path of dirs[ndirs - 1] ("" for the first) */
    char *top;                  /* the path asked for (an entry's metadata is read by path) */
    struct files_names names;
    unsigned char body[FILES_INFO_MAX];
};

static void files_read_close(struct files_read *fr)
{
    if (fr->fd != -1)
        close(fr->fd);
    while (fr->ndirs > 0)
        closedir(fr->dirs[--fr->ndirs]);
    free(fr->top);
    free(fr);
}

/* Walk into the subdirectory name (of the top directory), its path rel. */
static void files_read_descend(struct files_read *fr, const char *name, const char *rel)
{
    DIR *top = fr->dirs[fr->ndirs - 1];
    int fd;
    DIR *d;

    if (fr->ndirs >= fr->depth || strlen(rel) >= sizeof(fr->rel))
        return;
    /* never through a symlink, never blocking; one we may not read is listed, not walked */
    fd = openat(dirfd(top), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd == -1)
        return;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    fr->prefix_len[fr->ndirs] = strlen(rel);
    memcpy(fr->rel, rel, fr->prefix_len[fr->ndirs] + 1);
    fr->dirs[fr->ndirs++] = d;
}

/* One directory entry; 0 sent or skipped, 1 no room, -1 at the end (errno set on an error). */
static int files_read_dirent(struct init_conn *c, struct files_read *fr)
{
    char rel[NBA_MAX_PATH + 1], full[NBA_MAX_PATH + 1];
    struct dirent *de;
    struct stat st;
    DIR *top;
    int n;

    if (!init_reply_room(c, FILES_INFO_MAX))
        return 1;
    top = fr->dirs[fr->ndirs - 1];
    errno = 0;
    de = readdir(top);
    if (de == NULL) {
        if (fr->ndirs == 1 || errno != 0)
            return -1;
        /* a subdirectory is done: back to its parent */
        closedir(fr->dirs[--fr->ndirs]);
        fr->rel[fr->prefix_len[fr->ndirs - 1]] = '\0';
        if (fr->ndirs == 1)
            fr->rel[0] = '\0';
        return 0;
    }
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        return 0;
    /* An entry removed since readdir saw it is left out. */
    if (fstatat(dirfd(top), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
        return 0;
    n = fr->ndirs == 1 ? snprintf(rel, sizeof(rel), "%s", de->d_name)
                       : snprintf(rel, sizeof(rel), "%s/%s", fr->rel, de->d_name);
    if (n < 0 || (size_t)n >= sizeof(rel))
        return 0; /* deeper than a path may be long */
    /* its metadata by its full path; one too long to name has none */
    n = snprintf(full, sizeof(full), "%s%s%s", fr->top, strcmp(fr->top, "/") ? "/" : "", rel);
    init_reply_send(c, NBA_DIRENT, fr->body,
                    (uint32_t)files_info(fr->body, rel, &st, &fr->names, dirfd(top), de->d_name, -1,
                                         n > 0 && (size_t)n < sizeof(full) ? full : NULL));
    if (S_ISDIR(st.st_mode))
        files_read_descend(fr, de->d_name, rel);
    return 0;
}

static void files_read_pump(struct init_conn *c)
{
    struct files_read *fr = c->op;
    unsigned char chunk[NBA_CHUNK];

    for (;;) {
        ssize_t n;
        if (fr->ndirs > 0) {
            int rc = files_read_dirent(c, fr);
            if (rc == 1)
                break;
            if (rc == -1) {
                if (errno != 0) {
                    init_reply_error(c, errno, "reading the directory: %s", strerror(errno));
                    files_read_close(fr);
                    return;
                }
                files_ok(c);
                files_read_close(fr);
                return;
            }
            continue;
        }
        if (!init_reply_room(c, NBA_CHUNK))
            break;
        n = read(fr->fd, chunk, sizeof(chunk));
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1) {
            int e = errno;
            init_reply_error(c, e, "reading the file: %s", strerror(e));
            files_read_close(fr);
            return;
        }
        if (n == 0) {
            files_ok(c);
            files_read_close(fr);
            return;
        }
        init_reply_send(c, NBA_DATA, chunk, (uint32_t)n);
    }
    init_reply_wait_room(c);
}

static void files_read_gone(struct init_conn *c)
{
    files_read_close(c->op);
}

static const struct init_conn_ops files_read_ops = {
    .frame = NULL,
    .drain = files_read_pump,
    .gone = files_read_gone,
};

/* Open a regular file or a directory without ever blocking; -1 with errno
 * (EINVAL for anything else). */
static int files_open_checked(const char *path, struct stat *st)
{
    int fd;

    if (stat(path, st) == -1)
        return -1;
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
        errno = EINVAL;
        return -1;
    }
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd == -1)
        return -1;
    if (fstat(fd, st) == -1 || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

void init_files_read(struct init_conn *c, const struct init_request *r)
{
    char *path = path_dup(&r->path);
    struct files_read *fr = calloc(1, sizeof(*fr));
    struct stat st;
    int fd;

    if (path == NULL || fr == NULL) {
        free(path);
        free(fr);
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    fd = files_open_checked(path, &st);
    if (fd == -1) {
        files_errno(c, errno, "read", path);
        free(path);
        free(fr);
        return;
    }
    fr->top = path;
    fr->fd = -1;
    fr->depth = r->depth > 0 ? r->depth : 1;
    if (S_ISDIR(st.st_mode)) {
        fr->dirs[0] = fdopendir(fd);
        if (fr->dirs[0] == NULL) {
            close(fd);
            free(fr->top);
            free(fr);
            init_reply_error(c, ENOMEM, "out of memory");
            return;
        }
        fr->ndirs = 1;
    } else {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        fr->fd = fd;
    }
    files_send_info(c, &st, NULL, fr->ndirs > 0 ? dirfd(fr->dirs[0]) : fr->fd, NULL);
    c->ops = &files_read_ops;
    c->op = fr;
    files_read_pump(c);
}

/* --- T -------------------------------------------------------------------- */

void init_files_stat(struct init_conn *c, const struct init_request *r)
{
    char *path = path_dup(&r->path);
    struct stat st;

    if (path == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    if (lstat(path, &st) == -1) {
        files_errno(c, errno, "stat", path);
    } else {
        files_send_info(c, &st, path, -1, path);
        files_ok(c);
    }
    free(path);
}

/* --- N -------------------------------------------------------------------- */

/* mkdir -p: each missing component in turn; 0 or an errno. */
static int files_mkdirs(char *path)
{
    struct stat st;
    size_t len = strlen(path);

    for (size_t i = 1; i <= len; i++) {
        char saved;
        if (i < len && path[i] != '/')
            continue;
        if (path[i - 1] == '/')
            continue; /* "//" */
        saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) == -1) {
            int e = errno;
            if (e != EEXIST) {
                path[i] = saved;
                return e;
            }
            if (stat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
                path[i] = saved;
                return i == len ? EEXIST : ENOTDIR;
            }
        }
        path[i] = saved;
    }
    return 0;
}

void init_files_mkdir(struct init_conn *c, const struct init_request *r)
{
    char *path = path_dup(&r->path);
    int e;

    if (path == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    e = files_mkdirs(path);
    if (e != 0)
        files_errno(c, e, "mkdir", path);
    else
        files_ok(c);
    free(path);
}

/* --- D -------------------------------------------------------------------- */

void init_files_delete(struct init_conn *c, const struct init_request *r)
{
    char *path = path_dup(&r->path);
    struct stat st;
    int e = 0;

    if (path == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    if (lstat(path, &st) == -1)
        e = errno;
    else if (!S_ISDIR(st.st_mode))
        e = unlink(path) == 0 ? 0 : errno;
    else if (!r->recursive)
        e = rmdir(path) == 0 ? 0 : errno;
    else
        e = init_fcopy_rm_tree(AT_FDCWD, path, 0);
    if (e != 0)
        files_errno(c, e, "delete", path);
    else
        files_ok(c);
    free(path);
}

/* --- V -------------------------------------------------------------------- */

void init_files_move(struct init_conn *c, const struct init_request *r)
{
    char *from = path_dup(&r->path), *to = path_dup(&r->dest);

    if (from == NULL || to == NULL) {
        init_reply_error(c, ENOMEM, "out of memory");
    } else if (rename(from, to) == -1) {
        int e = errno;
        /* another mount (/workspace and /tmp are two): copy, then delete */
        if (e == EXDEV)
            e = init_fcopy_move(from, to);
        if (e != 0)
            init_reply_error(c, e, "move %s to %s: %s", from, to, strerror(e));
        else
            files_ok(c);
    } else {
        files_ok(c);
    }
    free(from);
    free(to);
}

/* --- U -------------------------------------------------------------------- */

struct files_upload {
    int fd;     /* the temporary file */
    char *tmp;  /* its path */
    char *path; /* where it goes */
    mode_t mode;
};

static void files_upload_free(struct files_upload *u, int unlink_tmp)
{
    if (u->fd != -1)
        close(u->fd);
    if (unlink_tmp && u->tmp != NULL)
        unlink(u->tmp);
    free(u->tmp);
    free(u->path);
    free(u);
}

static void files_upload_fail(struct init_conn *c, struct files_upload *u, int e, const char *what)
{
    init_reply_error(c, e, "%s %s: %s", what, u->path, strerror(e));
    files_upload_free(u, 1);
}

static void files_upload_commit(struct init_conn *c, struct files_upload *u)
{
    struct stat st;

    if (fchmod(u->fd, u->mode) == -1) {
        files_upload_fail(c, u, errno, "chmod");
        return;
    }
    if (close(u->fd) == -1) {
        u->fd = -1;
        files_upload_fail(c, u, errno, "write");
        return;
    }
    u->fd = -1;
    if (rename(u->tmp, u->path) == -1) {
        files_upload_fail(c, u, errno, "rename into");
        return;
    }
    if (lstat(u->path, &st) == -1) {
        files_upload_fail(c, u, errno, "stat");
        return;
    }
    files_send_info(c, &st, NULL, -1, u->path);
    files_ok(c);
    files_upload_free(u, 0);
}

static int files_upload_frame(struct init_conn *c, uint8_t type, const unsigned char *body,
                              uint32_t len)
{
    struct files_upload *u = c->op;

    if (type == NBA_END && len == 0) {
        files_upload_commit(c, u);
        return 0;
    }
    if (type != NBA_DATA) {
        init_reply_error(c, EPROTO, "only 'd' frames and '.' may follow an upload request");
        files_upload_free(u, 1);
        return 0;
    }
    while (len > 0) {
        ssize_t n = write(u->fd, body, len);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1) {
            files_upload_fail(c, u, errno == EDQUOT ? ENOSPC : errno, "write");
            return 0;
        }
        body += n;
        len -= (uint32_t)n;
    }
    return 0;
}

static void files_upload_gone(struct init_conn *c)
{
    files_upload_free(c->op, 1);
}

static const struct init_conn_ops files_upload_ops = {
    .frame = files_upload_frame,
    .drain = NULL,
    .gone = files_upload_gone,
};

/* The target must be absent, a regular file or a symlink (replaced, not
 * followed); its parents are created. */
static int files_upload_prepare(char *path)
{
    struct stat st;
    char *slash = strrchr(path, '/');
    int e;

    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return EISDIR;
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return EINVAL;
    } else if (errno != ENOENT) {
        return errno;
    }
    if (slash == path)
        return 0;
    *slash = '\0';
    e = files_mkdirs(path);
    *slash = '/';
    return e;
}

static int files_upload_tmp(struct files_upload *u)
{
    static unsigned counter;
    size_t dlen = (size_t)(strrchr(u->path, '/') - u->path);

    u->tmp = malloc(dlen + 64);
    if (u->tmp == NULL)
        return ENOMEM;
    for (int i = 0; i < FILES_TMP_TRIES; i++) {
        snprintf(u->tmp, dlen + 64, "%.*s/.nanobox-upload.%d.%u", (int)dlen, u->path, (int)getpid(),
                 counter++);
        u->fd = open(u->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (u->fd != -1)
            return 0;
        if (errno != EEXIST)
            return errno;
    }
    return EEXIST;
}

/* The metadata asked for (checked: request.c) onto the temporary file; 0 or an errno. */
static int files_upload_meta(struct files_upload *u, const struct init_request *r)
{
    for (uint32_t i = 0; i < r->nmeta; i++) {
        char name[5 + NBA_META_KEY_MAX + 1];
        const char *v = (const char *)r->meta[i].p;
        size_t klen = (size_t)((const char *)memchr(v, '\0', r->meta[i].len) - v); /* checked */
        memcpy(name, "user.", 5);
        memcpy(name + 5, v, klen + 1);
        if (fsetxattr(u->fd, name, v + klen + 1, r->meta[i].len - klen - 1, 0) == -1)
            return errno == ENOTSUP ? EOPNOTSUPP : errno;
    }
    return 0;
}

void init_files_write(struct init_conn *c, const struct init_request *r)
{
    struct files_upload *u = calloc(1, sizeof(*u));
    int e;

    if (u == NULL || (u->path = path_dup(&r->path)) == NULL) {
        free(u);
        init_reply_error(c, ENOMEM, "out of memory");
        return;
    }
    u->fd = -1;
    u->mode = (mode_t)r->mode;
    e = files_upload_prepare(u->path);
    if (e == 0)
        e = files_upload_tmp(u);
    if (e == 0 && (e = files_upload_meta(u, r)) != 0) {
        init_reply_error(c, e, "metadata on %s: %s%s", u->path, strerror(e),
                         e == EOPNOTSUPP ? " (this filesystem keeps no user xattrs)" : "");
        files_upload_free(u, 1);
        return;
    }
    if (e != 0) {
        init_reply_error(c, e, "write %s: %s", u->path, strerror(e));
        free(u->tmp);
        u->tmp = NULL;
        files_upload_free(u, 0);
        return;
    }
    c->ops = &files_upload_ops;
    c->op = u;
}
