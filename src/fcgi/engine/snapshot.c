/*
 * snapshot.c - see snapshot.h.
 *
 * Files under <sandbox_dir>/templates while a snapshot is taken (removed
 * after it, whatever the outcome):
 *   snap-<name>.tar      the sandbox's /workspace and /tmp as one tar
 *   snap-<name>.layer.tar  the new layer: that tar at NB_SNAPSHOT_TAR, and
 *                        for a sandbox with a root, what it wrote into its
 *                        image (the container's overlay2 upper directory)
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "docker.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "registry.h"
#include "snapshot.h"
#include "table.h"
#include "templates.h"
#include "url.h"

#define DEPTH_MAX 128
#define CHUNK (256 * 1024)

/* ---- capture ---- */

struct cap {
    struct archive *ar;
    uint64_t total, max;
    dev_t dev;
    int upper;        /* an overlay upper directory: its whiteouts become the layer's */
    const char *what; /* what max caps, for the 413 */
    enum nb_err err;  /* of the error: NB_E_TOO_LARGE or NB_E_INTERNAL */
    char msg[256];
};

__attribute__((format(printf, 3, 4))) static int cap_fail(struct cap *cp, enum nb_err err,
                                                          const char *fmt, ...)
{
    va_list ap;
    cp->err = err;
    va_start(ap, fmt);
    vsnprintf(cp->msg, sizeof(cp->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static int layer_entry(struct archive *ar, const char *name, int64_t size, mode_t type, mode_t perm)
{
    struct archive_entry *e = archive_entry_new();
    int rc;
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, size);
    archive_entry_set_filetype(e, (unsigned)type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_mtime(e, time(NULL), 0);
    rc = archive_write_header(ar, e) == ARCHIVE_OK ? 0 : -1;
    archive_entry_free(e);
    return rc;
}

/*
 * The names a layer gives a deletion (the image spec's whiteouts, which
 * Docker's commit of the snapshot's container passes on as it finds them):
 * .wh.<name> for an entry of the layers below that is gone, .wh..wh..opq in
 * a directory that hides all of theirs. overlayfs says the same with a 0:0
 * character device and the trusted.overlay.opaque attribute.
 */
#define WHITEOUT ".wh."
#define OPAQUE ".wh..wh..opq"

/* The empty file dir/<mark><name>: a whiteout (mark WHITEOUT) or an opaque directory's marker */
static int cap_whiteout(struct cap *cp, const char *dir, const char *mark, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s%s%s%s", dir, dir[0] ? "/" : "", mark, name) >=
        (int)sizeof(path))
        return cap_fail(cp, NB_E_TOO_LARGE, "%s: a path longer than PATH_MAX", dir);
    if (layer_entry(cp->ar, path, 0, AE_IFREG, 0600) != 0)
        return cap_fail(cp, NB_E_INTERNAL, "cannot write the snapshot: %s",
                        archive_error_string(cp->ar));
    return 0;
}

/* 1 if the overlay directory fd hides the layers below (opaque), 0 if not, -1 unknown */
static int overlay_opaque(int fd)
{
    char v[2];
    ssize_t n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
    if (n < 0)
        return errno == ENODATA || errno == ENOTSUP ? 0 : -1;
    return n == 1 && v[0] == 'y';
}

static int cap_data(struct cap *cp, int fd, const char *path)
{
    char *buf = malloc(CHUNK);
    ssize_t n;
    int rc = 0;
    if (buf == NULL)
        abort();
    while ((n = read(fd, buf, CHUNK)) > 0)
        if (archive_write_data(cp->ar, buf, (size_t)n) != n) {
            rc = cap_fail(cp, NB_E_INTERNAL, "cannot write the snapshot: %s",
                          archive_error_string(cp->ar));
            break;
        }
    if (n < 0)
        rc = cap_fail(cp, NB_E_INTERNAL, "cannot read %s", path);
    free(buf);
    return rc;
}

static int cap_tree(struct cap *cp, int dirfd, const char *prefix, int depth, int shadow);

/*
 * Entry name of dirfd (st) in an older layer, under shadow, the same
 * directory of a newer layer written before it: 1 when the newer layer has
 * it (its own entry, or a whiteout), so it is not written; for a directory
 * in both, its entries are walked (those the newer layer does not hide),
 * and 1. 0: the newer one has nothing there. -1 with cp's error.
 */
static int cap_shadowed(struct cap *cp, int dirfd, const char *name, const struct stat *st,
                        const char *path, int depth, int shadow)
{
    struct stat ns;
    int sub, nsub, opaque, rc;
    if (fstatat(shadow, name, &ns, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    if (!S_ISDIR(ns.st_mode) || !S_ISDIR(st->st_mode))
        return 1;
    nsub = openat(shadow, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (nsub < 0)
        return cap_fail(cp, NB_E_INTERNAL, "cannot open directory %s", path);
    if ((opaque = overlay_opaque(nsub)) != 0) {
        close(nsub);
        return opaque < 0
                   ? cap_fail(cp, NB_E_INTERNAL, "cannot read the overlay attributes of %s", path)
                   : 1; /* the newer one hides all the older had in it */
    }
    sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
        close(nsub);
        return cap_fail(cp, NB_E_INTERNAL, "cannot open directory %s", path);
    }
    rc = cap_tree(cp, sub, path, depth + 1, nsub);
    close(sub);
    close(nsub);
    return rc == 0 ? 1 : -1;
}

/*
 * Every entry under the open directory dirfd, named prefix/... in the tar
 * (prefix "": no prefix). In an upper directory (cp->upper), a whiteout is
 * written as the layer's, and its /.nanobox is left out: the layer's own
 * is written after it. shadow (-1: none) is the same directory of a newer
 * layer, written already: what it has or hides is not written again.
 */
static int cap_tree(struct cap *cp, int dirfd, const char *prefix, int depth, int shadow)
{
    DIR *d;
    struct dirent *de;
    int dup_fd = dup(dirfd), rc = 0;

    if (depth > DEPTH_MAX)
        return cap_fail(cp, NB_E_TOO_LARGE, "%s: directories deeper than 128 levels", prefix);
    if (dup_fd < 0 || (d = fdopendir(dup_fd)) == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        return cap_fail(cp, NB_E_INTERNAL, "cannot read directory %s", prefix);
    }
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat st;
        struct archive_entry *e;
        int fd = -1;

        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (cp->upper && depth == 0 && !strcmp(de->d_name, ".nanobox"))
            continue;
        if (snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) >=
            (int)sizeof(path)) {
            rc = cap_fail(cp, NB_E_TOO_LARGE, "%s: a path longer than PATH_MAX", prefix);
            break;
        }
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* gone */
        if (shadow >= 0 && st.st_dev == cp->dev &&
            (rc = cap_shadowed(cp, dirfd, de->d_name, &st, path, depth, shadow)) != 0) {
            rc = rc < 0 ? -1 : 0;
            continue;
        }
        if (cp->upper && S_ISCHR(st.st_mode) && st.st_rdev == 0) {
            rc = cap_whiteout(cp, prefix, WHITEOUT, de->d_name);
            continue;
        }
        if (st.st_dev != cp->dev || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode) ||
            S_ISBLK(st.st_mode))
            continue; /* another mount, or nothing a tar keeps */
        e = archive_entry_new();
        archive_entry_copy_stat(e, &st);
        archive_entry_set_nlink(e, 1); /* hard links become copies */
        archive_entry_set_pathname(e, path);
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(dirfd, de->d_name, target, sizeof(target) - 1);
            if (n < 0) {
                archive_entry_free(e);
                continue;
            }
            target[n] = '\0';
            archive_entry_set_symlink(e, target);
        } else if (S_ISREG(st.st_mode)) {
            cp->total += (uint64_t)st.st_size;
            if (cp->total > cp->max) {
                archive_entry_free(e);
                cp->err = NB_E_TOO_LARGE;
                snprintf(cp->msg, sizeof(cp->msg), "%s hold more than snapshot_max (%llu bytes)",
                         cp->what, (unsigned long long)cp->max);
                rc = -1;
                break;
            }
            fd = openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
                archive_entry_free(e);
                rc = cap_fail(cp, NB_E_INTERNAL, "cannot open %s", path);
                break;
            }
        }
        if (archive_write_header(cp->ar, e) != ARCHIVE_OK)
            rc = cap_fail(cp, NB_E_INTERNAL, "cannot write the snapshot: %s",
                          archive_error_string(cp->ar));
        else if (fd >= 0)
            rc = cap_data(cp, fd, path);
        archive_entry_free(e);
        if (fd >= 0)
            close(fd);
        if (rc == 0 && S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int opaque = 0;
            if (sub < 0) {
                rc = cap_fail(cp, NB_E_INTERNAL, "cannot open directory %s", path);
                break;
            }
            if (cp->upper && (opaque = overlay_opaque(sub)) < 0)
                rc = cap_fail(cp, NB_E_INTERNAL, "cannot read the overlay attributes of %s", path);
            else if (opaque == 1)
                rc = cap_whiteout(cp, path, OPAQUE, "");
            if (rc == 0)
                rc = cap_tree(cp, sub, path, depth + 1, -1);
            close(sub);
        }
    }
    closedir(d);
    return rc;
}

/* One mount of the sandbox (where, inside it) as prefix/... entries. */
static int cap_mount(struct cap *cp, int root, const char *where, const char *prefix)
{
    struct stat st;
    int fd, rc;
    while (*where == '/')
        where++;
    fd = openat(root, where, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0; /* nothing mounted there: nothing to keep */
    if (fstat(fd, &st) != 0) {
        close(fd);
        return cap_fail(cp, NB_E_INTERNAL, "cannot read %s", where);
    }
    cp->dev = st.st_dev;
    rc = cap_tree(cp, fd, prefix, 0, -1);
    close(fd);
    return rc;
}

/* /workspace and /tmp of the container whose PID 1 is pid into the tar file path. */
static int capture(const struct nb_conf *c, const char *ws, pid_t pid, const char *path,
                   struct nb_apierr *ae)
{
    struct cap cp;
    char proot[64];
    int root, rc;

    memset(&cp, 0, sizeof(cp));
    cp.max = c->snapshot_max;
    cp.what = "/workspace and /tmp";
    snprintf(proot, sizeof(proot), "/proc/%d/root", (int)pid);
    root = open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot reach the sandbox's files: %s",
                      strerror(errno));
        return -1;
    }
    cp.ar = archive_write_new();
    archive_write_set_format_pax_restricted(cp.ar);
    if (archive_write_open_filename(cp.ar, path) != ARCHIVE_OK) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the snapshot: %s",
                      archive_error_string(cp.ar));
        archive_write_free(cp.ar);
        close(root);
        return -1;
    }
    rc = cap_mount(&cp, root, ws, "workspace");
    if (rc == 0)
        rc = cap_mount(&cp, root, "/tmp", "tmp");
    if (archive_write_close(cp.ar) != ARCHIVE_OK && rc == 0)
        rc = cap_fail(&cp, NB_E_INTERNAL, "cannot write the snapshot: %s",
                      archive_error_string(cp.ar));
    archive_write_free(cp.ar);
    close(root);
    if (rc != 0)
        nb_apierr_set(ae, cp.err, cp.err == NB_E_TOO_LARGE ? "too_large" : "internal", "%s",
                      cp.msg);
    return rc;
}

/* ---- the image ---- */

/*
 * What a root wrote into the image: the entries of the container's overlay
 * upper directory upper, its whiteouts as the layer's, into ar; then, when
 * lower is not NULL (a container resumed from its pause image: what root
 * wrote before that pause is that image's top layer, lower), what lower
 * holds that upper neither has nor hides; their bytes within max. One
 * layer on the sandbox's template's image, whatever it ran from. 0, or -1
 * with the error in ae.
 */
static int layer_upper(struct archive *ar, const char *upper, const char *lower, uint64_t max,
                       struct nb_apierr *ae)
{
    struct cap cp;
    struct stat st;
    int fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), lfd = -1, rc;

    if (fd < 0 || fstat(fd, &st) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot read the sandbox's writable layer: %s",
                      strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    memset(&cp, 0, sizeof(cp));
    cp.ar = ar;
    cp.max = max;
    cp.dev = st.st_dev;
    cp.upper = 1;
    cp.what = "/workspace, /tmp and what its root wrote into the image";
    rc = cap_tree(&cp, fd, "", 0, -1);
    if (rc == 0 && lower != NULL) {
        lfd = open(lower, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0 || fstat(lfd, &st) != 0)
            rc = cap_fail(&cp, NB_E_INTERNAL, "cannot read the sandbox's pause layer: %s",
                          strerror(errno));
        else {
            cp.dev = st.st_dev;
            rc = cap_tree(&cp, lfd, "", 0, fd);
        }
        if (lfd >= 0)
            close(lfd);
    }
    close(fd);
    if (rc != 0)
        nb_apierr_set(ae, cp.err, cp.err == NB_E_TOO_LARGE ? "too_large" : "internal", "%s",
                      cp.msg);
    return rc;
}

/*
 * The new layer, as a tar for Docker to extract at /: what a root wrote
 * into the image when upper (its overlay upper directory) is not NULL,
 * then the snapshot's tar at NB_SNAPSHOT_TAR, root's, mode 0600 (the
 * sandbox cannot read it); max caps the two together.
 */
static int write_layer(const char *path, const char *snap, const char *upper, const char *lower,
                       uint64_t max, struct nb_apierr *ae)
{
    struct archive *ar = archive_write_new();
    char *buf = NULL;
    struct stat st;
    int fd = open(snap, O_RDONLY | O_CLOEXEC), rc = -1;
    ssize_t n = 0;

    archive_write_set_format_pax_restricted(ar);
    if (fd < 0 || fstat(fd, &st) != 0 || archive_write_open_filename(ar, path) != ARCHIVE_OK)
        goto out;
    if (upper != NULL &&
        layer_upper(ar, upper, lower, max > (uint64_t)st.st_size ? max - (uint64_t)st.st_size : 0,
                    ae) != 0) {
        archive_write_free(ar);
        close(fd);
        return -1;
    }
    if (layer_entry(ar, ".nanobox", 0, AE_IFDIR, 0755) != 0 ||
        layer_entry(ar, NB_SNAPSHOT_TAR + 1, st.st_size, AE_IFREG, 0600) != 0)
        goto out;
    if ((buf = malloc(CHUNK)) == NULL)
        abort();
    while ((n = read(fd, buf, CHUNK)) > 0)
        if (archive_write_data(ar, buf, (size_t)n) != n)
            break;
    if (n == 0 && archive_write_close(ar) == ARCHIVE_OK)
        rc = 0;
out:
    if (rc != 0)
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the snapshot's layer: %s",
                      archive_error_string(ar) ? archive_error_string(ar) : strerror(errno));
    free(buf);
    archive_write_free(ar);
    if (fd >= 0)
        close(fd);
    return rc;
}

/*
 * Template name's image: a container of image (created, never started),
 * the layer extracted into it, committed with the snapshot's labels; the
 * container then goes. It has no nanobox.instance label, or reconciliation
 * would take it for an orphan sandbox and remove it mid-snapshot; if this
 * worker dies, the templates' sweep removes it by its name with the
 * snapshot's record (NB_SNAPSHOT_CTR).
 */
/*
 * Image ref: a container cname of image (created, never started), the
 * layer extracted into it, committed with commit ({"Labels": ...}, and
 * what else Docker's commit takes) merged over its config; the container
 * then goes (what: for the warning if it cannot).
 */
static int commit_layer(struct nb_app *a, const char *image, const char *layer, const char *ref,
                        const char *cname, const char *commit, const char *what,
                        struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    char cid[65] = "", *cfg;
    long timeout_ms = (long)a->conf.template_timeout * 1000L;
    yajl_gen g = nb_json_gen();
    int rc = -1;

    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Image", image);
    nb_json_cstr(g, "Cmd"); /* never run: the image may have no command of its own */
    yajl_gen_array_open(g);
    nb_json_cstr(g, NB_SNAPSHOT_TAR);
    yajl_gen_array_close(g);
    nb_json_kv_bool(g, "NetworkDisabled", 1);
    nb_json_cstr(g, "HostConfig");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "NetworkMode", "none");
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    cfg = nb_json_gen_take(g);

    if (nb_docker_create(&a->docker, cname, cfg, cid, &de) != 0) {
        nb_apierr_docker(ae, &de, "make the snapshot's container");
        goto out;
    }
    if (nb_docker_put_archive(&a->docker, cid, "/", layer, timeout_ms, &de) != 0) {
        nb_apierr_docker(ae, &de, "copy the snapshot into its image");
        goto out;
    }
    if (nb_docker_commit(&a->docker, cid, ref, commit, timeout_ms, &de) != 0) {
        nb_apierr_docker(ae, &de, "commit the snapshot's image");
        goto out;
    }
    rc = 0;
out:
    if (cid[0] && nb_docker_remove(&a->docker, cid, &de) != 0)
        nb_warn("%s: cannot remove the snapshot's container %.12s: %s", what, cid, de.msg);
    free(cfg);
    return rc;
}

static int commit_image(struct nb_app *a, const char *name, const char *owner, const char *image,
                        const char *layer, const char *parent, const char *parent_tpl,
                        int64_t created_at, struct nb_apierr *ae)
{
    char ref[128], ts[32], cname[128], what[128], key[NB_TPL_KEY_LEN + 1];
    char *labels;
    yajl_gen g = nb_json_gen();
    int rc;

    yajl_gen_map_open(g);
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "nanobox.instance", a->conf.instance);
    nb_json_kv_str(g, "nanobox.template", name);
    nb_json_kv_str(g, "nanobox.kind", "snapshot");
    nb_json_kv_str(g, "nanobox.status", "ready");
    snprintf(ts, sizeof(ts), "%lld", (long long)created_at);
    nb_json_kv_str(g, "nanobox.created_at", ts);
    nb_json_kv_str(g, "nanobox.parent", parent);
    nb_json_kv_str(g, "nanobox.parent_template", parent_tpl);
    nb_json_kv_str(g, "nanobox.owner", nb_template_owner(owner));
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    labels = nb_json_gen_take(g);

    nb_template_ref(&a->conf, owner, name, ref, sizeof(ref));
    nb_template_key(&a->conf, owner, name, key);
    snprintf(cname, sizeof(cname), NB_SNAPSHOT_CTR "%s", key);
    snprintf(what, sizeof(what), "template %s", name);
    rc = commit_layer(a, image, layer, ref, cname, labels, what, ae);
    free(labels);
    return rc;
}

/* ---- the call ---- */

/*
 * After a failed read of slot's files: a sandbox destroyed (or expired)
 * meanwhile had its container removed under the read, so the error said
 * is Docker's ("is not running") or the file system's; the caller's is
 * the 404 of a sandbox that is not there.
 */
static void gone_meanwhile(struct nb_app *a, const struct nb_slot *slot, struct nb_apierr *ae)
{
    const struct nb_slot *s;
    int gone;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, slot->id);
    gone = s == NULL || s->generation != slot->generation || !nb_slot_live(s, nb_clock_real_s());
    nb_table_unlock(&a->table);
    if (gone)
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", slot->id);
}

/*
 * Freeze a running sandbox (docker pause) while its files are read: one
 * consistent state, and nothing moves under the walk. *froze: whether it
 * was (a paused one is read as it is).
 */
static int freeze(struct nb_app *a, const struct nb_slot *slot, int *froze, struct nb_apierr *ae)
{
    struct nb_derr de = {0};
    *froze = 0;
    if (slot->state != NB_SLOT_RUNNING)
        return 0;
    if (nb_docker_pause(&a->docker, slot->container_id, &de) != 0) {
        nb_apierr_docker(ae, &de, "freeze the sandbox for its snapshot");
        return -1;
    }
    *froze = 1;
    return 0;
}

/* Thaw what freeze froze, unless a pause was asked for meanwhile (the slot says so first). */
static void thaw(struct nb_app *a, const struct nb_slot *slot, int froze)
{
    struct nb_derr de = {0};
    struct nb_slot *s;
    int paused_since;
    if (!froze)
        return;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, slot->id);
    paused_since = s != NULL && s->generation == slot->generation && s->state == NB_SLOT_PAUSED;
    nb_table_unlock(&a->table);
    if (!paused_since && nb_docker_unpause(&a->docker, slot->container_id, &de) != 0)
        nb_warn("sandbox %s: cannot thaw it after its snapshot: %s", slot->id, de.msg);
}

/*
 * The overlay upper directory of the container of slot, whose root writes
 * into its image, into upper ("" for a sandbox without a root: it wrote
 * nothing there); and into lower, for one whose container runs from its
 * pause image (resumed after a pause without memory), that image's top
 * layer: what root wrote before the pause ("" otherwise). what: "a
 * snapshot", "a fork", for the 501. 0, or -1 with ae.
 */
static int rw_layers(struct nb_app *a, const struct nb_slot *slot, const char *what, char *upper,
                     char *lower, size_t len, struct nb_apierr *ae)
{
    const char *up[] = {"GraphDriver", "Data", "UpperDir", NULL};
    struct nb_derr de = {0};
    struct nb_buf b;
    char path[256], ref[160], err[64];
    yajl_val v = NULL, u;
    int64_t size_rw;
    long status = 0;
    int rc = -1;
    upper[0] = lower[0] = '\0';
    if (!nb_template_root(&a->conf, slot->image))
        return 0;
    if (nb_docker_rw_layer(&a->docker, slot->container_id, 0, upper, len, &size_rw, &de) != 0) {
        nb_apierr_docker(ae, &de, "find the sandbox's writable layer");
        return -1;
    }
    if (upper[0] == '\0') {
        nb_apierr_set(ae, NB_E_UNSUPPORTED, "not_implemented",
                      "%s of a sandbox with a root needs Docker's overlay2 storage "
                      "driver, which this engine does not use",
                      what);
        return -1;
    }
    if (!(slot->lifecycle & NB_LIFE_PAUSE_IMAGE))
        return 0;
    nb_snapshot_pause_ref(&a->conf, slot->id, ref, sizeof(ref));
    snprintf(path, sizeof(path), "/images/%s/json", ref);
    nb_buf_init(&b, 4u << 20);
    if (nb_docker_request(&a->docker, "GET", path, NULL, 30000, &status, &b, &de) != 0)
        nb_apierr_docker(ae, &de, "find the sandbox's pause layer");
    else if (status != 200 || nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0 ||
             (u = yajl_tree_get(v, up, yajl_t_string)) == NULL || strlen(nb_json_string(u)) >= len)
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                      "could not find the sandbox's pause layer (Docker answered %ld)", status);
    else {
        snprintf(lower, len, "%s", nb_json_string(u));
        rc = 0;
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}

int nb_snapshot_take(struct nb_app *a, const char *id, const char *name, const char *owner,
                     unsigned max_templates, struct nb_template *out, struct nb_apierr *ae)
{
    struct nb_slot slot, *s;
    struct nb_derr de = {0};
    char nm[NB_TPL_NAME_MAX + 1], parent_tpl[128], rec_id[80] = "", snap[PATH_MAX], ctx[PATH_MAX],
                                                   sub[128], upper[PATH_MAX] = "",
                                                   lower[PATH_MAX] = "", key[NB_TPL_KEY_LEN + 1];
    int64_t now = nb_clock_real_s();
    int found = 0, froze = 0, rc = -1;
    struct timespec t0, t1, t2;
    struct nb_registry_tpl reg;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (nb_slot_live(s, now)) {
        slot = *s;
        found = 1;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    if (slot.lifecycle & (NB_LIFE_RELEASED | NB_LIFE_BUSY)) {
        nb_apierr_set(ae, NB_E_CONFLICT, "paused",
                      "sandbox %s is paused without its memory: resume it first", id);
        return -1;
    }
    if (name && name[0] && (strlen(name) > NB_TPL_NAME_MAX || !nb_template_name_ok(name))) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "a template name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a "
                      "letter or digit");
        return -1;
    }
    if (name && name[0])
        snprintf(nm, sizeof(nm), "%s", name);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(nm, sizeof(nm), "snap-%.8s-%lld%03ld", id, (long long)ts.tv_sec,
                 ts.tv_nsec / 1000000);
    }
    /* a root's writes into its image are in the container's overlay upper
     * directory, read while frozen like the tmpfs mounts (other sandboxes'
     * images are read-only: they wrote nothing there) */
    if (rw_layers(a, &slot, "a snapshot", upper, lower, sizeof(upper), ae) != 0) {
        gone_meanwhile(a, &slot, ae);
        return -1;
    }
    nb_template_name_of(a, slot.image, parent_tpl, sizeof(parent_tpl));
    /* a cluster's: its entry first, where max_templates counts every node's */
    if (nb_registry_tpl_reserve(a, nb_template_owner(owner), nm, max_templates, &reg, ae) != 0)
        return -1;
    if (nb_template_claim(a, nm, owner, max_templates, id, parent_tpl, now, rec_id, ae) != 0) {
        nb_registry_tpl_release(a, &reg);
        return -1;
    }
    nb_template_key(&a->conf, owner, nm, key);
    snprintf(sub, sizeof(sub), "snap-%s.tar", key);
    nb_template_work_path(&a->conf, sub, snap, sizeof(snap));
    snprintf(sub, sizeof(sub), "snap-%s.layer.tar", key);
    nb_template_work_path(&a->conf, sub, ctx, sizeof(ctx));

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (freeze(a, &slot, &froze, ae) != 0) {
        gone_meanwhile(a, &slot, ae);
        goto out;
    }
    rc = capture(&a->conf, nb_isolation_workspace(&a->conf, slot.lifecycle), slot.init_pid, snap,
                 ae);
    if (rc == 0 && upper[0])
        rc = write_layer(ctx, snap, upper, lower[0] ? lower : NULL, a->conf.snapshot_max, ae);
    thaw(a, &slot, froze);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0) {
        gone_meanwhile(a, &slot, ae);
        goto out;
    }
    rc = -1;
    if (!upper[0] && write_layer(ctx, snap, NULL, NULL, a->conf.snapshot_max, ae) != 0)
        goto out;
    unlink(snap);
    if (commit_image(a, nm, owner, slot.image, ctx, id, parent_tpl, now, ae) != 0)
        goto out;
    clock_gettime(CLOCK_MONOTONIC, &t2);
    if (nb_template_get(a, nm, nb_template_owner(owner), out, ae) != 0 ||
        strcmp(out->status, "ready") != 0) {
        if (ae->err == NB_E_OK)
            nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "the snapshot's build made no image");
        goto out;
    }
    nb_info("template %s: snapshot of sandbox %s (frozen %.0f ms, committed in %.0f ms)", nm, id,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
            (double)(t2.tv_sec - t1.tv_sec) * 1e3 + (double)(t2.tv_nsec - t1.tv_nsec) / 1e6);
    rc = 0;
out:
    if (rc == 0)
        nb_registry_tpl_snapshot(a, &reg);
    else
        nb_registry_tpl_release(a, &reg);
    /* the record goes: on success the name moved on to the image, on failure it frees it */
    if (rec_id[0] && nb_docker_image_remove(&a->docker, rec_id, 0, &de) != 0)
        nb_warn("template %s: cannot remove its snapshot record %s: %s", nm, rec_id, de.msg);
    unlink(snap);
    unlink(ctx);
    return rc;
}

/* ---- a pause that releases the memory ---- */

void nb_snapshot_pause_ref(const struct nb_conf *c, const char *id, char *out, size_t outlen)
{
    snprintf(out, outlen, "nanobox-pause-%s:%s", c->instance, id);
}

/*
 * Into the open map g: "Labels", the nanobox.* labels of container cid (its
 * slot's, for adoption: adopt.c reads a pause image's as a container's)
 * with those of a pause image over them, and "Env", its config's Env (its
 * create's HOME and the request's), which the table does not keep.
 */
static int container_conf(struct nb_app *a, const struct nb_slot *slot, yajl_gen g,
                          struct nb_apierr *ae)
{
    static const char *const mine[] = {"nanobox.instance",   "nanobox.kind",     "nanobox.paused",
                                       "nanobox.created_at", "nanobox.template", "nanobox.owner"};
    struct nb_derr de = {0};
    struct nb_buf b;
    char path[128], err[64], num[32];
    const char *ep[] = {"Config", "Env", NULL}, *lp[] = {"Config", "Labels", NULL};
    yajl_val v = NULL, env, lab;
    long status = 0;
    int rc = -1;

    nb_buf_init(&b, 4u << 20);
    snprintf(path, sizeof(path), "/containers/%s/json", slot->container_id);
    if (nb_docker_request(&a->docker, "GET", path, NULL, 30000, &status, &b, &de) != 0 ||
        status != 200) {
        if (status != 0)
            nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                          "could not read the sandbox container's config (Docker answered %ld)",
                          status);
        else
            nb_apierr_docker(ae, &de, "read the sandbox container's config");
        goto out;
    }
    if (nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error", "could not read the container's config");
        goto out;
    }
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    lab = yajl_tree_get(v, lp, yajl_t_object);
    for (size_t i = 0; lab != NULL && i < lab->u.object.len; i++) {
        const char *k = lab->u.object.keys[i];
        size_t m = 0;
        while (m < sizeof(mine) / sizeof(mine[0]) && strcmp(k, mine[m]) != 0)
            m++;
        if (m == sizeof(mine) / sizeof(mine[0]) && !strncmp(k, "nanobox.", 8) &&
            YAJL_IS_STRING(lab->u.object.values[i]))
            nb_json_kv_str(g, k, lab->u.object.values[i]->u.string);
    }
    nb_json_kv_str(g, "nanobox.instance", a->conf.instance);
    nb_json_kv_str(g, "nanobox.kind", "pause");
    nb_json_kv_str(g, "nanobox.paused", slot->id);
    nb_json_kv_str(g, "nanobox.owner", slot->owner); /* a warm one's label has none */
    snprintf(num, sizeof(num), "%lld", (long long)nb_clock_real_s());
    nb_json_kv_str(g, "nanobox.created_at", num);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "Env");
    yajl_gen_array_open(g);
    env = yajl_tree_get(v, ep, yajl_t_array);
    for (size_t i = 0; env != NULL && i < env->u.array.len; i++)
        if (YAJL_IS_STRING(env->u.array.values[i]))
            nb_json_cstr(g, env->u.array.values[i]->u.string);
    yajl_gen_array_close(g);
    rc = 0;
out:
    yajl_tree_free(v);
    nb_buf_free(&b);
    return rc;
}

int nb_snapshot_save(struct nb_app *a, const struct nb_slot *slot, struct nb_apierr *ae)
{
    char ref[160], cname[96], what[96], snap[PATH_MAX], ctx[PATH_MAX], sub[96],
        upper[PATH_MAX] = "", lower[PATH_MAX] = "";
    char *commit = NULL;
    struct timespec t0, t1;
    yajl_gen g;
    int rc = -1;

    if (rw_layers(a, slot, "a pause without memory", upper, lower, sizeof(upper), ae) != 0)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (container_conf(a, slot, g, ae) != 0) {
        yajl_gen_free(g);
        return -1;
    }
    yajl_gen_map_close(g);
    commit = nb_json_gen_take(g);

    snprintf(sub, sizeof(sub), "pause-%s.tar", slot->id);
    nb_template_work_path(&a->conf, sub, snap, sizeof(snap));
    snprintf(sub, sizeof(sub), "pause-%s.layer.tar", slot->id);
    nb_template_work_path(&a->conf, sub, ctx, sizeof(ctx));
    if (capture(&a->conf, nb_isolation_workspace(&a->conf, slot->lifecycle), slot->init_pid, snap,
                ae) != 0 ||
        write_layer(ctx, snap, upper[0] ? upper : NULL, lower[0] ? lower : NULL,
                    a->conf.snapshot_max, ae) != 0)
        goto out;
    unlink(snap);
    nb_snapshot_pause_ref(&a->conf, slot->id, ref, sizeof(ref));
    snprintf(cname, sizeof(cname), "nanobox-pausing-%s", slot->id);
    snprintf(what, sizeof(what), "sandbox %s", slot->id);
    /* the tar holds all of the tmpfs mounts, and a root's writes since its create (those
     * before an earlier pause too): one layer on its template's image, never a chain */
    if (commit_layer(a, slot->image, ctx, ref, cname, commit, what, ae) != 0)
        goto out;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    nb_info("sandbox %s: files saved for a pause without memory in %.0f ms", slot->id,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    rc = 0;
out:
    free(commit);
    unlink(snap);
    unlink(ctx);
    return rc;
}

/* Remove a pause image of sandbox sid, which is gone (an image in use stays). */
static void remove_gone(struct nb_app *a, const char *sid, const char *image_id)
{
    struct nb_derr de = {0};
    if (nb_docker_image_remove(&a->docker, image_id, 0, &de) == 0)
        nb_info("removed the pause image %.19s of sandbox %s, which is gone", image_id, sid);
    else
        nb_debug("pause image %.19s of sandbox %s: not removed: %s", image_id, sid, de.msg);
}

struct drop_arg {
    struct nb_app *a;
    const char *id;
};

/* One more of a gone sandbox's pause images: an earlier one, untagged. */
static void drop_one(void *arg, const char *sid, const char *image_id, const void *labels)
{
    const struct drop_arg *d = arg;
    (void)labels;
    if (strcmp(sid, d->id) == 0)
        remove_gone(d->a, sid, image_id);
}

int nb_snapshot_drop(struct nb_app *a, const char *id)
{
    struct nb_derr de = {0};
    char ref[160];
    struct drop_arg arg = {a, id};
    int rc = 0;
    nb_snapshot_pause_ref(&a->conf, id, ref, sizeof(ref));
    if (nb_docker_image_remove(&a->docker, ref, 1, &de) != 0) {
        nb_warn("sandbox %s: cannot remove its pause image %s: %s", id, ref, de.msg);
        rc = -1;
    }
    /* a pause of a sandbox that ran from an earlier pause's image, destroyed
     * meanwhile: that earlier image lost its tag to the new one, and is not
     * its parent (the new one is built from a context), so it would wait
     * for the reaper's sweep */
    nb_snapshot_pause_images(a, drop_one, &arg);
    return rc;
}

int nb_snapshot_pause_images(struct nb_app *a, nb_pause_image_fn cb, void *arg)
{
    struct nb_derr de = {0};
    struct nb_buf b, path;
    char filter[256], err[64];
    const char *lp[] = {"Labels", NULL}, *pp[] = {"nanobox.paused", NULL}, *ip[] = {"Id", NULL};
    yajl_val v = NULL;
    long status = 0;
    int n = 0;

    if (a->docker.ops != &nb_docker_curl_ops)
        return 0; /* a Docker of another kind (the unit tests' fake) has no images to list */
    snprintf(filter, sizeof(filter), "{\"label\":[\"nanobox.instance=%s\",\"nanobox.kind=pause\"]}",
             a->conf.instance);
    nb_buf_init(&path, 1024);
    nb_buf_printf(&path, "/images/json?filters=");
    nb_url_escape(&path, filter);
    nb_buf_init(&b, 4u << 20);
    if (nb_docker_request(&a->docker, "GET", path.data, NULL, 30000, &status, &b, &de) != 0 ||
        status != 200 || nb_json_parse(b.data, b.len, 64, &v, err, sizeof(err)) != 0 ||
        !YAJL_IS_ARRAY(v)) {
        nb_debug("pause images: cannot list them (%ld): %s", status, de.msg);
        n = -1;
    }
    for (size_t i = 0; n >= 0 && i < v->u.array.len; i++) {
        yajl_val im = v->u.array.values[i], lab = yajl_tree_get(im, lp, yajl_t_object);
        yajl_val sid = yajl_tree_get(lab, pp, yajl_t_string),
                 iid = yajl_tree_get(im, ip, yajl_t_string);
        if (lab == NULL || sid == NULL || iid == NULL)
            continue;
        cb(arg, sid->u.string, iid->u.string, lab);
        n++;
    }
    yajl_tree_free(v);
    nb_buf_free(&b);
    nb_buf_free(&path);
    return n;
}

static void sweep_one(void *arg, const char *sid, const char *image_id, const void *labels)
{
    struct nb_app *a = arg;
    const struct nb_slot *s;
    int orphan;
    (void)labels;
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, sid);
    orphan = s == NULL || !(s->lifecycle & (NB_LIFE_PAUSE_IMAGE | NB_LIFE_BUSY));
    nb_table_unlock(&a->table);
    if (orphan)
        remove_gone(a, sid, image_id);
}

int nb_snapshot_sweep(struct nb_app *a)
{
    return nb_snapshot_pause_images(a, sweep_one, a);
}

/* ---- restore ---- */

/* workspace/x -> <workspace>/x, tmp/x -> tmp/x (relative to the sandbox's root); 0 if neither. */
static int map_path(const char *ws, const char *in, char *out, size_t outlen)
{
    while (*ws == '/')
        ws++;
    if (!strncmp(in, "workspace/", 10))
        return snprintf(out, outlen, "%s/%s", ws, in + 10) < (int)outlen;
    if (!strncmp(in, "tmp/", 4))
        return snprintf(out, outlen, "%s", in) < (int)outlen;
    return 0;
}

/*
 * Each entry of the tar at fd, as fn(arg, entry) says (1: written to the
 * disk as it then is, relative to the current directory, owners and
 * modes kept; 0: skipped; -1: stop, err set), libarchive's secure
 * extraction refusing symlinks, ".." and absolute paths on the way.
 */
typedef int (*extract_fn)(void *arg, struct archive_entry *e, char *err, size_t errlen);

static int extract(int fd, extract_fn fn, void *arg, char *err, size_t errlen)
{
    struct archive *r = archive_read_new(), *w = archive_write_disk_new();
    struct archive_entry *e;
    int rc = 0, st;

    archive_read_support_format_tar(r);
    archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                          ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                          ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
    if (archive_read_open_fd(r, fd, CHUNK) != ARCHIVE_OK) {
        snprintf(err, errlen, "%s", archive_error_string(r));
        rc = -1;
    }
    while (rc == 0 && (st = archive_read_next_header(r, &e)) != ARCHIVE_EOF) {
        const void *blk;
        size_t sz;
        la_int64_t off;
        int want;
        if (st != ARCHIVE_OK && st != ARCHIVE_WARN) {
            snprintf(err, errlen, "%s", archive_error_string(r));
            rc = -1;
            break;
        }
        if ((want = fn(arg, e, err, errlen)) <= 0) {
            rc = want;
            continue;
        }
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            snprintf(err, errlen, "%s: %s", archive_entry_pathname(e), archive_error_string(w));
            rc = -1;
            break;
        }
        while ((st = archive_read_data_block(r, &blk, &sz, &off)) == ARCHIVE_OK)
            if (archive_write_data_block(w, blk, sz, off) != ARCHIVE_OK) {
                st = ARCHIVE_FATAL;
                break;
            }
        if (st != ARCHIVE_EOF || archive_write_finish_entry(w) != ARCHIVE_OK) {
            snprintf(err, errlen, "%s: %s", archive_entry_pathname(e),
                     archive_error_string(w) ? archive_error_string(w) : archive_error_string(r));
            rc = -1;
        }
    }
    /* directories' modes and times are set here, relative to the current directory */
    if (archive_write_close(w) != ARCHIVE_OK && rc == 0) {
        snprintf(err, errlen, "%s", archive_error_string(w));
        rc = -1;
    }
    archive_write_free(w);
    archive_read_free(r);
    return rc;
}

struct unpack_arg {
    const char *ws;
    unsigned long uid, gid;
};

/* A snapshot's entry: under the workspace or /tmp, owned by the slot's uid. */
static int unpack_entry(void *arg, struct archive_entry *e, char *err, size_t errlen)
{
    const struct unpack_arg *u = arg;
    char path[PATH_MAX];
    (void)err;
    (void)errlen;
    if (!map_path(u->ws, archive_entry_pathname(e), path, sizeof(path)) ||
        archive_entry_hardlink(e) != NULL)
        return 0; /* the snapshot writes none of these */
    archive_entry_set_pathname(e, path);
    archive_entry_set_uid(e, (la_int64_t)u->uid);
    archive_entry_set_gid(e, (la_int64_t)u->gid);
    return 1;
}

static int unpack(const char *ws, int tarfd, unsigned long uid, unsigned long gid, char *err,
                  size_t errlen)
{
    struct unpack_arg u = {ws, uid, gid};
    return extract(tarfd, unpack_entry, &u, err, errlen);
}

int nb_snapshot_restore(const struct nb_conf *c, uint32_t slot, pid_t pid, const char *ws,
                        char *err, size_t errlen)
{
    char proot[64];
    unsigned long uid, gid;
    int root, tarfd, here, rc;

    snprintf(proot, sizeof(proot), "/proc/%d/root", (int)pid);
    root = open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 && errno == ENOENT)
        return 0; /* no such process: a container that is gone has nothing to fill */
    if (root < 0) {
        snprintf(err, errlen, "cannot reach the sandbox's files: %s", strerror(errno));
        return -1;
    }
    tarfd = openat(root, NB_SNAPSHOT_TAR + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (tarfd < 0) {
        int e = errno;
        close(root);
        if (e == ENOENT || e == ENOTDIR)
            return 0; /* not a snapshot */
        snprintf(err, errlen, "cannot open %s: %s", NB_SNAPSHOT_TAR, strerror(e));
        return -1;
    }
    here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (here < 0 || fchdir(root) != 0) {
        snprintf(err, errlen, "cannot enter the sandbox's root: %s", strerror(errno));
        rc = -1;
    } else {
        nb_isolation_ids(c, slot, &uid, &gid);
        rc = unpack(ws, tarfd, uid, gid, err, errlen);
        if (fchdir(here) != 0)
            nb_warn("snapshot restore: cannot return to the working directory");
    }
    if (here >= 0)
        close(here);
    close(tarfd);
    close(root);
    return rc;
}

/* ---- fork: the same files, with no image ---- */

int nb_snapshot_capture(struct nb_app *a, const struct nb_slot *src, const char *files_tar,
                        const char *root_tar, int *has_root, struct nb_apierr *ae)
{
    char upper[PATH_MAX] = "", lower[PATH_MAX] = "";
    struct stat st;
    int froze = 0, rc;

    if (rw_layers(a, src, "a fork", upper, lower, sizeof(upper), ae) != 0 ||
        freeze(a, src, &froze, ae) != 0) {
        gone_meanwhile(a, src, ae);
        return -1;
    }
    *has_root = upper[0] != '\0';
    rc = capture(&a->conf, nb_isolation_workspace(&a->conf, src->lifecycle), src->init_pid,
                 files_tar, ae);
    if (rc == 0 && *has_root) {
        /* what root wrote into its image, whiteouts as a layer's, within what is left of the cap */
        struct archive *ar = archive_write_new();
        uint64_t used = stat(files_tar, &st) == 0 ? (uint64_t)st.st_size : 0;
        archive_write_set_format_pax_restricted(ar);
        if (archive_write_open_filename(ar, root_tar) != ARCHIVE_OK) {
            nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the fork's layer: %s",
                          archive_error_string(ar));
            rc = -1;
        } else {
            rc = layer_upper(ar, upper, lower[0] ? lower : NULL,
                             a->conf.snapshot_max > used ? a->conf.snapshot_max - used : 0, ae);
            if (archive_write_close(ar) != ARCHIVE_OK && rc == 0) {
                nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the fork's layer: %s",
                              archive_error_string(ar));
                rc = -1;
            }
        }
        archive_write_free(ar);
    }
    thaw(a, src, froze);
    if (rc != 0)
        gone_meanwhile(a, src, ae);
    return rc;
}

/* The directory rel (relative, "" for dirfd itself) under dirfd, no symlink followed; -1 if none. */
static int open_dir_at(int dirfd, const char *rel)
{
    char buf[PATH_MAX], *save = NULL;
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    snprintf(buf, sizeof(buf), "%s", rel);
    for (char *c = strtok_r(buf, "/", &save); c != NULL && fd >= 0;
         c = strtok_r(NULL, "/", &save)) {
        int next = !strcmp(c, ".") || !strcmp(c, "..")
                       ? -1
                       : openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        fd = next;
    }
    return fd;
}

/* Remove name under dirfd, a directory with all it holds; one that is not there is removed. */
static int remove_tree(int dirfd, const char *name, int depth)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc = 0;
        DIR *d;
        struct dirent *de;
        if (fd < 0 || depth > DEPTH_MAX || (d = fdopendir(fd)) == NULL) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        while (rc == 0 && (de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                rc = remove_tree(fd, de->d_name, depth + 1);
        closedir(d);
        if (rc != 0)
            return -1;
        return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
    }
    return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
}

/* A whiteout of the layer at path (dir/.wh.name, or dir/.wh..wh..opq) applied under root. */
static int apply_whiteout(int root, const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *base = strrchr(path, '/');
    int fd, rc = 0;
    snprintf(dir, sizeof(dir), "%.*s", base ? (int)(base - path) : 0, path);
    base = base ? base + 1 : path;
    if ((fd = open_dir_at(root, dir)) < 0)
        return 0; /* its directory is not there: nothing to hide */
    if (!strcmp(base, OPAQUE)) {
        /* the directory hides what the image had in it */
        DIR *d = fdopendir(dup(fd));
        struct dirent *de;
        if (d == NULL)
            rc = -1;
        while (d != NULL && rc == 0 && (de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                rc = remove_tree(fd, de->d_name, 0);
        if (d != NULL)
            closedir(d);
    } else {
        const char *gone = base + strlen(WHITEOUT);
        /* a file a root named ".wh..": never a way out of the directory (from
         * the container's root, ".." is the host's) */
        if (gone[0] != '\0' && strcmp(gone, ".") != 0 && strcmp(gone, "..") != 0)
            rc = remove_tree(fd, gone, 0);
    }
    close(fd);
    if (rc != 0)
        snprintf(err, errlen, "cannot remove what %s hides: %s", path, strerror(errno));
    return rc;
}

/*
 * The container's own mounts, which its image's layer never held: the
 * tmpfs mounts (their files are the other tar's), and the files nanobox
 * binds read-only (sandbox.c). Their entries in a layer are skipped.
 */
static int mounted(const char *path, const char *ws)
{
    static const char *const top[] = {"tmp", "dev", "proc", "sys", "home", ".nanobox", NULL};
    static const char *const files[] = {"etc/passwd", "etc/group",       "etc/hostname",
                                        "etc/hosts",  "etc/resolv.conf", "usr/local/bin/sudo",
                                        NULL};
    size_t n;
    while (*ws == '/')
        ws++;
    n = strlen(ws);
    if (n > 0 && !strncmp(path, ws, n) && (path[n] == '\0' || path[n] == '/'))
        return 1;
    for (unsigned i = 0; top[i] != NULL; i++) {
        size_t k = strlen(top[i]);
        if (!strncmp(path, top[i], k) && (path[k] == '\0' || path[k] == '/'))
            return 1;
    }
    for (unsigned i = 0; files[i] != NULL; i++)
        if (!strcmp(path, files[i]))
            return 1;
    return 0;
}

struct layer_arg {
    int root;
    const char *ws;
};

/* A layer's entry: not under the tmpfs mounts; a whiteout removes what it names. */
static int apply_entry(void *arg, struct archive_entry *e, char *err, size_t errlen)
{
    const struct layer_arg *l = arg;
    const char *path = archive_entry_pathname(e), *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (mounted(path, l->ws) || archive_entry_hardlink(e) != NULL)
        return 0;
    if (!strncmp(base, WHITEOUT, strlen(WHITEOUT)))
        return apply_whiteout(l->root, path, err, errlen) == 0 ? 0 : -1;
    return 1;
}

/* The layer tar at fd applied on the image under root (the current directory): owners as they were. */
static int apply_layer(int root, int fd, const char *ws, char *err, size_t errlen)
{
    struct layer_arg l = {root, ws};
    return extract(fd, apply_entry, &l, err, errlen);
}

int nb_snapshot_apply(const struct nb_conf *c, uint32_t slot, pid_t pid, const char *ws,
                      const char *files_tar, const char *root_tar, char *err, size_t errlen)
{
    char proot[64];
    unsigned long uid, gid;
    int root, here, fd, rc = -1;

    snprintf(proot, sizeof(proot), "/proc/%d/root", (int)pid);
    root = open(proot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        snprintf(err, errlen, "cannot reach the sandbox's files: %s", strerror(errno));
        return -1;
    }
    here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (here < 0 || fchdir(root) != 0) {
        snprintf(err, errlen, "cannot enter the sandbox's root: %s", strerror(errno));
        goto out;
    }
    if (root_tar != NULL) {
        if ((fd = open(root_tar, O_RDONLY | O_CLOEXEC)) < 0) {
            snprintf(err, errlen, "cannot open the fork's layer: %s", strerror(errno));
            goto back;
        }
        rc = apply_layer(root, fd, ws, err, errlen);
        close(fd);
        if (rc != 0)
            goto back;
        rc = -1;
    }
    if ((fd = open(files_tar, O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "cannot open the fork's files: %s", strerror(errno));
        goto back;
    }
    nb_isolation_ids(c, slot, &uid, &gid);
    rc = unpack(ws, fd, uid, gid, err, errlen);
    close(fd);
back:
    if (fchdir(here) != 0)
        nb_warn("fork: cannot return to the working directory");
out:
    if (here >= 0)
        close(here);
    close(root);
    return rc;
}
