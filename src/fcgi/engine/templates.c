/*
 * templates.c - see templates.h.
 *
 * Files under <sandbox_dir>/templates:
 *   .lock              flock'd while a name is checked and claimed, or removed
 *   queue/<name>.tar   the build context (Dockerfile + files), written by the worker
 *   queue/<name>.json  the job ({"memory", "nano_cpus"}), written last: a queued build
 *   run/<name>.json    the job once the reaper handed it to a builder
 *   <name>.log         the build's output, NDJSON, capped at NB_TPL_LOG_MAX
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "buildcap.h"
#include "dockerfile.h"
#include "isolation.h"
#include "json.h"
#include "keys.h"
#include "log.h"
#include "network.h"
#include "templates.h"

#define SWEEP_EVERY 300 /* reaper ticks (~30 s) between sweeps for orphaned builds */
#define BUILDERS_MAX 64

/* ---- names and paths ---- */

int nb_template_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > NB_TPL_NAME_MAX ||
        !((s[0] >= 'a' && s[0] <= 'z') || isdigit((unsigned char)s[0])))
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

int nb_template_path_ok(const char *p)
{
    size_t n = strlen(p);
    const char *seg = p;
    if (n == 0 || n > 255 || p[0] == '/' || !strcmp(p, "Dockerfile") || p[n - 1] == '/')
        return -1;
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '\\')
            return -1;
    while (seg) {
        const char *slash = strchr(seg, '/');
        size_t len = slash ? (size_t)(slash - seg) : strlen(seg);
        if (len == 0 || (len == 1 && seg[0] == '.') || (len == 2 && !strncmp(seg, "..", 2)))
            return -1;
        seg = slash ? slash + 1 : NULL;
    }
    return 0;
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* nanobox-tpl-<instance as a Docker repository component> */
static void tpl_repo(const struct nb_conf *c, char *out, size_t outlen)
{
    char r[48];
    size_t k = 0;
    int changed = 0;
    for (const char *p = c->instance; *p; p++) {
        char ch = *p;
        if (k == 40) {
            changed = 1;
            break;
        }
        if (ch >= 'A' && ch <= 'Z') {
            ch = (char)(ch - 'A' + 'a');
            changed = 1;
        }
        if (!((ch >= 'a' && ch <= 'z') || isdigit((unsigned char)ch))) {
            if (ch != '-')
                changed = 1;
            ch = '-';
        }
        if (ch == '-' && k == 0) {
            changed = 1;
            continue;
        }
        r[k++] = ch;
    }
    while (k > 0 && r[k - 1] == '-') {
        k--;
        changed = 1;
    }
    r[k] = '\0';
    if (changed || k == 0)
        snprintf(out, outlen, "nanobox-tpl-%s%s%08x", r, k ? "-" : "", fnv1a(c->instance));
    else
        snprintf(out, outlen, "nanobox-tpl-%s", r);
}

static void tpl_path(const struct nb_conf *c, const char *sub, char *out, size_t outlen);

/*
 * The instance's secret for the image names (<templates>/.secret, 32
 * random bytes made on first use): read once per process.
 */
static int tpl_secret(const struct nb_conf *c, unsigned char key[32])
{
    static unsigned char cached[32];
    static int have;
    char p[PATH_MAX], tmp[PATH_MAX + 32];
    int fd;
    if (have) {
        memcpy(key, cached, 32);
        return 0;
    }
    tpl_path(c, "", p, sizeof(p));
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return -1;
    tpl_path(c, ".secret", p, sizeof(p));
    fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        unsigned char fresh[32];
        int w;
        snprintf(tmp, sizeof(tmp), "%s.%ld", p, (long)getpid());
        if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh))
            return -1;
        w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w < 0)
            return -1;
        if (write(w, fresh, sizeof(fresh)) != (ssize_t)sizeof(fresh) || fsync(w) != 0) {
            close(w);
            unlink(tmp);
            return -1;
        }
        close(w);
        /* link: the first process's secret wins, never replaced */
        if (link(tmp, p) != 0 && errno != EEXIST) {
            unlink(tmp);
            return -1;
        }
        unlink(tmp);
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0)
        return -1;
    if (read(fd, cached, sizeof(cached)) != (ssize_t)sizeof(cached)) {
        close(fd);
        return -1;
    }
    close(fd);
    have = 1;
    memcpy(key, cached, 32);
    return 0;
}

const char *nb_template_owner(const char *owner)
{
    return owner != NULL && owner[0] ? owner : NB_KEY_DEFAULT;
}

void nb_template_key(const struct nb_conf *c, const char *owner, const char *name,
                     char out[NB_TPL_KEY_LEN + 1])
{
    unsigned char secret[32], md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    struct nb_buf msg;
    nb_buf_init(&msg, 1024);
    nb_buf_printf(&msg, "%s\n%s\n%s", c->instance, nb_template_owner(owner), name);
    if (tpl_secret(c, secret) != 0) {
        /* no secret (the directory is not writable): nothing can be built or found */
        nb_warn("templates: cannot read or make the templates' secret: %s", strerror(errno));
        memset(secret, 0, sizeof(secret));
        getrandom(secret, sizeof(secret), 0);
    }
    HMAC(EVP_sha256(), secret, sizeof(secret), (const unsigned char *)msg.data, msg.len, md,
         &mdlen);
    nb_buf_free(&msg);
    for (unsigned i = 0; i < NB_TPL_KEY_LEN / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[NB_TPL_KEY_LEN] = '\0';
}

void nb_template_ref(const struct nb_conf *c, const char *owner, const char *name, char *out,
                     size_t outlen)
{
    char repo[64], key[NB_TPL_KEY_LEN + 1];
    tpl_repo(c, repo, sizeof(repo));
    nb_template_key(c, owner, name, key);
    snprintf(out, outlen, "%s:%s", repo, key);
}

/* The image of the job key (what nb_template_key gave). */
static void key_ref(const struct nb_conf *c, const char *key, char *out, size_t outlen)
{
    char repo[64];
    tpl_repo(c, repo, sizeof(repo));
    snprintf(out, outlen, "%s:%s", repo, key);
}

void nb_template_conf_name(const char *image, char *out, size_t outlen)
{
    size_t n = strlen(image), k = 0;
    if (n > 7 && !strcmp(image + n - 7, ":latest"))
        n -= 7;
    for (size_t i = 0; i < n && k + 1 < outlen && k < NB_TPL_NAME_MAX; i++) {
        char ch = (char)tolower((unsigned char)image[i]);
        out[k++] = strchr("abcdefghijklmnopqrstuvwxyz0123456789._-", ch) && ch ? ch : '-';
    }
    out[k] = '\0';
}

static void tpl_path(const struct nb_conf *c, const char *sub, char *out, size_t outlen)
{
    char dir[PATH_MAX - 512];
    nb_isolation_path(c, "templates", 0, dir, sizeof(dir));
    snprintf(out, outlen, "%s%s%s", dir, sub[0] ? "/" : "", sub);
}

static void key_log_path(const struct nb_conf *c, const char *key, char *out, size_t outlen)
{
    char sub[128];
    snprintf(sub, sizeof(sub), "%.100s.log", key);
    tpl_path(c, sub, out, outlen);
}

void nb_template_log_path(const struct nb_conf *c, const char *owner, const char *name, char *out,
                          size_t outlen)
{
    char key[NB_TPL_KEY_LEN + 1];
    nb_template_key(c, owner, name, key);
    key_log_path(c, key, out, outlen);
}

/* queue/<name>.<ext> or run/<name>.<ext> */
static void job_path(const struct nb_conf *c, const char *where, const char *name, const char *ext,
                     char *out, size_t outlen)
{
    char sub[160];
    snprintf(sub, sizeof(sub), "%.8s/%.80s.%.8s", where, name, ext);
    tpl_path(c, sub, out, outlen);
}

static int ensure_dirs(const struct nb_conf *c)
{
    char p[PATH_MAX];
    const char *subs[] = {"", "queue", "run"};
    for (size_t i = 0; i < 3; i++) {
        tpl_path(c, subs[i], p, sizeof(p));
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

static int lock_names(const struct nb_conf *c)
{
    char p[PATH_MAX];
    int fd;
    tpl_path(c, ".lock", p, sizeof(p));
    fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void unlock_names(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock */
}

/* ---- FROM ---- */

/* docker.io/library/x -> x; a name without a tag gets :latest */
static void norm_image(const char *in, char *out, size_t outlen)
{
    const char *p = in, *slash, *last;
    if (!strncmp(p, "docker.io/", 10))
        p += 10;
    if (!strncmp(p, "library/", 8))
        p += 8;
    slash = strrchr(p, '/');
    last = slash ? slash + 1 : p;
    if (strchr(last, ':') || strchr(p, '@'))
        snprintf(out, outlen, "%s", p);
    else
        snprintf(out, outlen, "%s:latest", p);
}

int nb_template_from_allowed(const struct nb_conf *c, const char *image)
{
    char want[300], have[300];
    norm_image(image, want, sizeof(want));
    if (c->template_from[0]) {
        char tmp[NB_CONF_LIST], *save = NULL, *tok;
        snprintf(tmp, sizeof(tmp), "%s", c->template_from);
        for (tok = strtok_r(tmp, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
            norm_image(tok, have, sizeof(have));
            if (!strcmp(want, have))
                return 1;
        }
        return 0;
    }
    for (unsigned i = 0; i < c->n_images; i++) {
        norm_image(c->images[i], have, sizeof(have));
        if (!strcmp(want, have))
            return 1;
    }
    return 0;
}

/* The resolver of nb_template_check_from: the operator's base images only. */
static int conf_resolve(void *arg, const char *image, int from_line, char *out, size_t outlen,
                        struct nb_apierr *ae)
{
    (void)from_line;
    (void)out;
    (void)outlen;
    (void)ae;
    return nb_template_from_allowed(arg, image);
}

int nb_template_check_from(const struct nb_conf *c, const char *df, size_t len,
                           struct nb_apierr *ae)
{
    struct nb_buf out;
    char esc;
    int rc;
    nb_buf_init(&out, len * 2 + 4096);
    rc = nb_dockerfile_rewrite(df, len, conf_resolve, (void *)(uintptr_t)c, &out, &esc, ae);
    nb_buf_free(&out);
    return rc;
}

/*
 * The record labels as one LABEL instruction after the Dockerfile: Docker
 * 20.10's builder makes a step (a container and a commit, 0.1-0.3 s) of
 * every label passed to POST /build, one instruction makes one. Values are
 * quoted, with esc (the Dockerfile's escape character) before '"', '$' and
 * esc itself.
 */
static void label_line(struct nb_buf *b, const char *key, const char *val, char esc)
{
    nb_buf_printf(b, " %s=\"", key);
    for (const char *p = val; *p; p++) {
        if ((unsigned char)*p < 0x20)
            continue;
        if (*p == '"' || *p == '$' || *p == esc)
            nb_buf_append(b, &esc, 1);
        nb_buf_append(b, p, 1);
    }
    nb_buf_append(b, "\"", 1);
}

static void record_labels(struct nb_buf *b, const struct nb_conf *c, const char *name,
                          const char *owner, int64_t created_at, char esc)
{
    char ts[32];
    snprintf(ts, sizeof(ts), "%lld", (long long)created_at);
    nb_buf_printf(b, "\nLABEL");
    label_line(b, "nanobox.instance", c->instance, esc);
    label_line(b, "nanobox.template", name, esc);
    label_line(b, "nanobox.kind", "build", esc);
    label_line(b, "nanobox.status", "ready", esc);
    label_line(b, "nanobox.created_at", ts, esc);
    label_line(b, "nanobox.owner", owner ? owner : "", esc);
    nb_buf_append(b, "\n", 1);
}

/* ---- tar (libarchive) ---- */

static int tar_add(struct archive *ar, const char *path, const void *data, size_t len)
{
    struct archive_entry *e = archive_entry_new();
    int rc = 0;
    archive_entry_set_pathname(e, path);
    archive_entry_set_size(e, (la_int64_t)len);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, time(NULL), 0);
    if (archive_write_header(ar, e) != ARCHIVE_OK ||
        (len > 0 && archive_write_data(ar, data, len) != (la_ssize_t)len))
        rc = -1;
    archive_entry_free(e);
    return rc;
}

static int write_context(const char *path, const struct nb_conf *c,
                         const struct nb_template_req *rq, const struct nb_buf *checked,
                         int64_t created_at, char esc, struct nb_apierr *ae)
{
    struct archive *ar = archive_write_new();
    struct nb_buf df;
    int rc = 0;
    archive_write_set_format_pax_restricted(ar);
    if (archive_write_open_filename(ar, path) != ARCHIVE_OK) {
        nb_apierr_set(ae, 500, "internal", "cannot write the build context: %s",
                      archive_error_string(ar));
        archive_write_free(ar);
        return -1;
    }
    nb_buf_init(&df, checked->len + 4096);
    nb_buf_append(&df, checked->data, checked->len);
    record_labels(&df, c, rq->name, nb_template_owner(rq->owner), created_at, esc);
    rc = tar_add(ar, "Dockerfile", df.data, df.len);
    nb_buf_free(&df);
    for (size_t i = 0; rc == 0 && i < rq->n_files; i++)
        rc = tar_add(ar, rq->files[i].path, rq->files[i].data, rq->files[i].len);
    if (archive_write_close(ar) != ARCHIVE_OK)
        rc = -1;
    if (rc != 0)
        nb_apierr_set(ae, 500, "internal", "cannot write the build context: %s",
                      archive_error_string(ar));
    archive_write_free(ar);
    if (rc != 0)
        unlink(path);
    return rc;
}

/* The empty filesystem a record image is imported from. */
static int empty_tar(char *buf, size_t cap, size_t *used)
{
    struct archive *ar = archive_write_new();
    int rc = -1;
    archive_write_set_format_pax_restricted(ar);
    archive_write_set_bytes_per_block(ar, 512);
    if (archive_write_open_memory(ar, buf, cap, used) == ARCHIVE_OK &&
        archive_write_close(ar) == ARCHIVE_OK)
        rc = 0;
    archive_write_free(ar);
    return rc;
}

/* ---- records ---- */

/* The name's record image (status "building" or "failed"); its id into id. */
static int put_record_kind(struct nb_docker *d, const struct nb_conf *c, const char *name,
                           const char *owner, const char *kind, const char *parent,
                           const char *parent_tpl, const char *status, int64_t created_at,
                           const char *error, char id[80], struct nb_derr *de)
{
    char ref[128], l[9][600], tar[4096];
    const char *labels[10];
    size_t used = 0, n = 0;
    nb_template_ref(c, owner, name, ref, sizeof(ref));
    snprintf(l[n], sizeof(l[n]), "nanobox.instance=%s", c->instance), n++;
    snprintf(l[n], sizeof(l[n]), "nanobox.template=%s", name), n++;
    snprintf(l[n], sizeof(l[n]), "nanobox.kind=%s", kind), n++;
    if (parent && parent[0])
        snprintf(l[n], sizeof(l[n]), "nanobox.parent=%s", parent), n++;
    if (parent_tpl && parent_tpl[0])
        snprintf(l[n], sizeof(l[n]), "nanobox.parent_template=%s", parent_tpl), n++;
    snprintf(l[n], sizeof(l[n]), "nanobox.status=%s", status), n++;
    snprintf(l[n], sizeof(l[n]), "nanobox.created_at=%lld", (long long)created_at), n++;
    snprintf(l[n], sizeof(l[n]), "nanobox.owner=%s", nb_template_owner(owner)), n++;
    if (error && error[0])
        snprintf(l[n], sizeof(l[n]), "nanobox.error=%.500s", error), n++;
    for (size_t i = 0; i < n; i++)
        labels[i] = l[i];
    labels[n] = NULL;
    if (empty_tar(tar, sizeof(tar), &used) != 0) {
        de->kind = NB_DERR_PROTO;
        snprintf(de->msg, sizeof(de->msg), "cannot make an empty tar");
        return -1;
    }
    return nb_docker_image_import(d, ref, labels, tar, used, id, de);
}

static int put_record(struct nb_docker *d, const struct nb_conf *c, const char *name,
                      const char *owner, const char *status, int64_t created_at, const char *error,
                      char id[80], struct nb_derr *de)
{
    return put_record_kind(d, c, name, owner, "build", NULL, NULL, status, created_at, error, id,
                           de);
}

static void from_image(const struct nb_docker_image *im, struct nb_template *t)
{
    snprintf(t->name, sizeof(t->name), "%s", im->name);
    snprintf(t->status, sizeof(t->status), "%s", im->status);
    snprintf(t->kind, sizeof(t->kind), "%s", im->kind[0] ? im->kind : "build");
    snprintf(t->parent, sizeof(t->parent), "%s", im->parent);
    snprintf(t->parent_tpl, sizeof(t->parent_tpl), "%s", im->parent_tpl);
    snprintf(t->error, sizeof(t->error), "%s", im->error);
    snprintf(t->owner, sizeof(t->owner), "%s", im->owner);
    t->created_at = im->created_at;
    if (!strcmp(im->status, "ready")) {
        t->size = im->size;
        snprintf(t->digest, sizeof(t->digest), "%s", im->id);
    }
}

/* Append one {"status": ..., "error"?: ...} line: the log's end. */
static void log_final(const struct nb_conf *c, const char *owner, const char *name,
                      const char *status, const char *error)
{
    char path[PATH_MAX];
    yajl_gen g = nb_json_gen();
    const unsigned char *buf;
    size_t len;
    int fd;
    nb_template_log_path(c, owner, name, path, sizeof(path));
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "status", status);
    if (error && error[0])
        nb_json_kv_str(g, "error", error);
    yajl_gen_map_close(g);
    yajl_gen_get_buf(g, &buf, &len);
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (write(fd, buf, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
            nb_warn("template %s: cannot write its log", name);
        close(fd);
    }
    yajl_gen_free(g);
}

/* Turn name's record (old_id) into a failed one; the job's files go. */
static void fail_build(const struct nb_conf *c, struct nb_docker *d, const char *name,
                       const char *owner, int64_t created_at, const char *old_id, const char *error)
{
    struct nb_derr de = {0};
    char id[80] = "", p[PATH_MAX], key[NB_TPL_KEY_LEN + 1];
    nb_template_key(c, owner, name, key);
    nb_warn("template %s (of %s): build failed: %s", name, nb_template_owner(owner), error);
    if (put_record(d, c, name, owner, "failed", created_at, error, id, &de) != 0)
        nb_warn("template %s: cannot record the failure: %s", name, de.msg);
    else if (old_id && old_id[0] && strcmp(old_id, id) != 0 &&
             nb_docker_image_remove(d, old_id, 0, &de) != 0)
        nb_warn("template %s: cannot remove its old record %s: %s", name, old_id, de.msg);
    /* the log's last line only once Docker says failed: a reader that saw it may act on it
     * (a reader that finds the state ended first gets the line from the logs route) */
    log_final(c, owner, name, "failed", error);
    job_path(c, "run", key, "json", p, sizeof(p));
    unlink(p);
    job_path(c, "run", key, "disk", p, sizeof(p));
    unlink(p);
    job_path(c, "queue", key, "tar", p, sizeof(p));
    unlink(p);
}

/* ---- the API's calls ---- */

static int conf_template(const struct nb_conf *c, const char *name)
{
    char n[NB_TPL_NAME_MAX + 1];
    for (unsigned i = 0; i < c->n_images; i++) {
        nb_template_conf_name(c->images[i], n, sizeof(n));
        if (!strcmp(n, name))
            return (int)i;
    }
    return -1;
}

static void conf_fill(struct nb_app *a, unsigned i, struct nb_template *t)
{
    struct nb_docker_image im;
    struct nb_derr de = {0};
    memset(t, 0, sizeof(*t));
    nb_template_conf_name(a->conf.images[i], t->name, sizeof(t->name));
    snprintf(t->image, sizeof(t->image), "%s", a->conf.images[i]);
    snprintf(t->kind, sizeof(t->kind), "image");
    snprintf(t->status, sizeof(t->status), "ready");
    if (nb_docker_image_inspect(&a->docker, a->conf.images[i], &im, &de) == 0) {
        t->size = im.size;
        snprintf(t->digest, sizeof(t->digest), "%s", im.id);
    } else if (de.kind == NB_DERR_HTTP && de.status == 404) {
        snprintf(t->status, sizeof(t->status), "failed");
        snprintf(t->error, sizeof(t->error),
                 "image %s is not on the Docker host (src/setup/image.sh builds it)",
                 a->conf.images[i]);
    }
}

/* May viewer (NULL: an admin) see t? Its owner may, and everyone a shared one ("" owner). */
static int tpl_visible(const struct nb_template *t, const char *viewer)
{
    return viewer == NULL || t->owner[0] == '\0' || !strcmp(t->owner, viewer);
}

int nb_template_get(struct nb_app *a, const char *name, const char *viewer, struct nb_template *t,
                    struct nb_apierr *ae)
{
    struct nb_docker_image im;
    struct nb_derr de = {0};
    int ci = conf_template(&a->conf, name);
    memset(t, 0, sizeof(*t));
    if (ci >= 0) {
        conf_fill(a, (unsigned)ci, t);
        return 0;
    }
    if (!nb_template_name_ok(name)) {
        nb_apierr_set(ae, 404, "not_found", "no template \"%.80s\"", name);
        return -1;
    }
    /* names are the owner's own: viewer's "foo" is another image than any other key's */
    nb_template_ref(&a->conf, viewer, name, t->image, sizeof(t->image));
    if (nb_docker_image_inspect(&a->docker, t->image, &im, &de) != 0) {
        if (de.kind == NB_DERR_HTTP && de.status == 404)
            nb_apierr_set(ae, 404, "not_found", "no template \"%s\"", name);
        else
            nb_apierr_docker(ae, &de, "read the template");
        return -1;
    }
    if (strcmp(im.instance, a->conf.instance) != 0 || strcmp(im.name, name) != 0 ||
        strcmp(nb_template_owner(im.owner), nb_template_owner(viewer)) != 0) {
        nb_apierr_set(ae, 404, "not_found", "no template \"%s\"", name);
        return -1;
    }
    from_image(&im, t);
    return 0;
}

struct list_ctx {
    const struct nb_conf *c;
    struct nb_template *t;
    size_t n, cap;
};

/* Is im the image its (owner, name) points at (a record being replaced is not)? */
static int named_image(const struct nb_conf *c, const struct nb_docker_image *im)
{
    char ref[128];
    if (!nb_template_name_ok(im->name))
        return 0;
    nb_template_ref(c, im->owner, im->name, ref, sizeof(ref));
    return !strcmp(im->ref, ref);
}

static void list_one(void *arg, const struct nb_docker_image *im)
{
    struct list_ctx *l = arg;
    if (!named_image(l->c, im))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->t = realloc(l->t, l->cap * sizeof(*l->t));
        if (l->t == NULL)
            abort();
    }
    memset(&l->t[l->n], 0, sizeof(l->t[0]));
    from_image(im, &l->t[l->n]);
    snprintf(l->t[l->n].image, sizeof(l->t[0].image), "%s", im->ref);
    l->n++;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(((const struct nb_template *)x)->name, ((const struct nb_template *)y)->name);
}

int nb_template_list(struct nb_app *a, const char *viewer, nb_template_fn cb, void *arg,
                     struct nb_apierr *ae)
{
    struct list_ctx l = {&a->conf, NULL, 0, 0};
    struct nb_derr de = {0};
    struct nb_template t;
    if (nb_docker_image_list(&a->docker, a->conf.instance, list_one, &l, &de) < 0) {
        free(l.t);
        nb_apierr_docker(ae, &de, "list the templates");
        return -1;
    }
    for (unsigned i = 0; i < a->conf.n_images; i++) {
        conf_fill(a, i, &t);
        cb(arg, &t);
    }
    if (l.n > 1)
        qsort(l.t, l.n, sizeof(l.t[0]), by_name);
    for (size_t i = 0; i < l.n; i++)
        if (tpl_visible(&l.t[i], viewer))
            cb(arg, &l.t[i]);
    free(l.t);
    return 0;
}

/* The built templates (any status) of owner into *n. -1 with ae. */
static void count_one(void *arg, const struct nb_template *t)
{
    struct {
        const char *owner;
        unsigned n;
    } *cnt = arg;
    cnt->n += t->owner[0] != '\0' && !strcmp(t->owner, cnt->owner);
}

static int count_owned(struct nb_app *a, const char *owner, unsigned *n, struct nb_apierr *ae)
{
    struct {
        const char *owner;
        unsigned n;
    } cnt = {owner, 0};
    if (nb_template_list(a, owner, count_one, &cnt, ae) != 0)
        return -1;
    *n = cnt.n;
    return 0;
}

static int write_job(const char *path, const struct nb_conf *c, const struct nb_template_req *rq)
{
    char tmp[PATH_MAX + 8];
    FILE *f;
    int ok;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "we");
    if (f == NULL)
        return -1;
    ok = fprintf(f, "{\"memory\":%llu,\"nano_cpus\":%llu}\n",
                 (unsigned long long)(rq->memory ? rq->memory : c->template_memory),
                 (unsigned long long)(rq->nano_cpus ? rq->nano_cpus : c->template_nano_cpus)) > 0;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

struct own_ctx {
    struct nb_app *a;
    const char *owner;
};

/*
 * The images a build of owner may name: the operator's (template_from, or
 * the images setting), and owner's own ready templates and snapshots by
 * name, rewritten to their images. Another key's names are not found.
 */
static int own_resolve(void *arg, const char *image, int from_line, char *out, size_t outlen,
                       struct nb_apierr *ae)
{
    struct own_ctx *o = arg;
    struct nb_template t;
    struct nb_apierr e2 = {0};
    (void)from_line;
    if (nb_template_from_allowed(&o->a->conf, image))
        return 1;
    if (!nb_template_name_ok(image) || conf_template(&o->a->conf, image) >= 0)
        return 0;
    if (nb_template_get(o->a, image, nb_template_owner(o->owner), &t, &e2) != 0) {
        if (e2.status == 404)
            return 0;
        *ae = e2;
        return -1;
    }
    if (strcmp(t.status, "ready") != 0)
        return 0;
    snprintf(out, outlen, "%s", t.image);
    return 1;
}

int nb_template_submit(struct nb_app *a, const struct nb_template_req *rq, struct nb_template *out,
                       struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_docker_image im;
    struct nb_derr de = {0};
    struct own_ctx own = {a, rq->owner};
    struct nb_buf checked;
    char ref[128], tarp[PATH_MAX], jobp[PATH_MAX], logp[PATH_MAX], id[80];
    char key[NB_TPL_KEY_LEN + 1];
    size_t total = 1024 + 512 + rq->dockerfile_len;
    int64_t now = time(NULL);
    int lock, rc = -1;
    char esc;

    if (c->template_builds_max == 0) {
        nb_apierr_set(ae, 403, "forbidden",
                      "template builds are off on this server (template_builds_max = 0)");
        return -1;
    }
    if (!nb_template_name_ok(rq->name)) {
        nb_apierr_set(ae, 400, "bad_name",
                      "a template name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a "
                      "letter or digit");
        return -1;
    }
    if (conf_template(c, rq->name) >= 0) {
        nb_apierr_set(ae, 409, "name_taken", "\"%s\" names one of the operator's images", rq->name);
        return -1;
    }
    for (size_t i = 0; i < rq->n_files; i++) {
        if (nb_template_path_ok(rq->files[i].path) != 0) {
            nb_apierr_set(ae, 400, "bad_path",
                          "files: \"%.100s\" must be a relative path without . or .. segments, "
                          "and not Dockerfile",
                          rq->files[i].path);
            return -1;
        }
        total += 512 + ((rq->files[i].len + 511) / 512) * 512;
    }
    if (total > c->template_context_max) {
        nb_apierr_set(ae, 413, "too_large",
                      "the build context (Dockerfile and files) is over template_context_max "
                      "(%zu bytes)",
                      c->template_context_max);
        return -1;
    }
    /* what Docker gets: every image it names checked, the owner's templates by their images */
    nb_buf_init(&checked, rq->dockerfile_len * 2 + 4096);
    if (nb_dockerfile_rewrite(rq->dockerfile, rq->dockerfile_len, own_resolve, &own, &checked, &esc,
                              ae) != 0) {
        nb_buf_free(&checked);
        return -1;
    }
    if (ensure_dirs(c) != 0 || (lock = lock_names(c)) < 0) {
        nb_apierr_set(ae, 500, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        nb_buf_free(&checked);
        return -1;
    }
    nb_template_key(c, rq->owner, rq->name, key);
    key_ref(c, key, ref, sizeof(ref));
    job_path(c, "queue", key, "tar", tarp, sizeof(tarp));
    job_path(c, "queue", key, "json", jobp, sizeof(jobp));
    key_log_path(c, key, logp, sizeof(logp));
    if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0) {
        nb_apierr_set(ae, 409, "name_taken", "template \"%s\" exists (DELETE it first)", rq->name);
        goto out;
    }
    /* the key's quota, counted under the names lock that every submit holds */
    if (rq->max_templates && rq->owner != NULL) {
        unsigned mine = 0;
        if (count_owned(a, rq->owner, &mine, ae) != 0)
            goto out;
        if (mine >= rq->max_templates) {
            nb_apierr_set(ae, 429, "quota",
                          "quota max_templates=%u of key \"%s\" reached: it has %u templates",
                          rq->max_templates, rq->owner, mine);
            goto out;
        }
    }
    if (!(de.kind == NB_DERR_HTTP && de.status == 404)) {
        nb_apierr_docker(ae, &de, "check the template name");
        goto out;
    }
    if (write_context(tarp, c, rq, &checked, now, esc, ae) != 0)
        goto out;
    unlink(logp);
    if (put_record(&a->docker, c, rq->name, rq->owner ? rq->owner : "", "building", now, NULL, id,
                   &de) != 0) {
        nb_apierr_docker(ae, &de, "record the template");
        unlink(tarp);
        goto out;
    }
    if (write_job(jobp, c, rq) != 0) {
        nb_apierr_set(ae, 500, "internal", "cannot queue the build: %s", strerror(errno));
        nb_docker_image_remove(&a->docker, ref, 1, &de);
        unlink(tarp);
        goto out;
    }
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", rq->name);
    snprintf(out->image, sizeof(out->image), "%s", ref);
    snprintf(out->status, sizeof(out->status), "building");
    snprintf(out->kind, sizeof(out->kind), "build");
    out->created_at = now;
    snprintf(out->owner, sizeof(out->owner), "%s", nb_template_owner(rq->owner));
    nb_info("template %s (of %s): build queued as %s", rq->name, out->owner, key);
    rc = 0;
out:
    unlock_names(lock);
    nb_buf_free(&checked);
    return rc;
}

/*
 * Sandboxes (any state but free) whose image is ref. Warm ones do not
 * count: nobody uses them yet, and the pool drops them once the template
 * is gone (warm.c).
 */
static unsigned users_of(struct nb_app *a, const char *ref)
{
    unsigned n = 0;
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots; i++)
        n += a->table.slots[i].state != NB_SLOT_FREE && a->table.slots[i].state != NB_SLOT_POOLED &&
             !strcmp(a->table.slots[i].image, ref);
    nb_table_unlock(&a->table);
    return n;
}

int nb_template_delete(struct nb_app *a, const char *name, const char *viewer, int force,
                       struct nb_apierr *ae)
{
    struct nb_template t;
    struct nb_derr de = {0};
    char logp[PATH_MAX];
    unsigned users;
    int lock, rc = -1;
    if (conf_template(&a->conf, name) >= 0) {
        nb_apierr_set(ae, 403, "forbidden",
                      "template \"%s\" is one of the operator's images (the images setting)", name);
        return -1;
    }
    if ((lock = lock_names(&a->conf)) < 0) {
        nb_apierr_set(ae, 500, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        return -1;
    }
    if (nb_template_get(a, name, viewer, &t, ae) != 0)
        goto out;
    if (!strcmp(t.status, "building")) {
        nb_apierr_set(ae, 409, "building", "template \"%s\" is building; delete it once it ends",
                      name);
        goto out;
    }
    users = users_of(a, t.image);
    if (users > 0 && !force) {
        nb_apierr_set(ae, 409, "in_use",
                      "%u sandbox(es) run template \"%s\"; ?force=1 removes it anyway (they keep "
                      "running)",
                      users, name);
        goto out;
    }
    if (nb_docker_image_remove(&a->docker, t.image, 1, &de) != 0) {
        nb_apierr_docker(ae, &de, "remove the template");
        goto out;
    }
    nb_template_log_path(&a->conf, viewer, name, logp, sizeof(logp));
    unlink(logp);
    nb_info("template %s removed%s", name, users ? " (forced, sandboxes of it still run)" : "");
    rc = 0;
out:
    unlock_names(lock);
    return rc;
}

int nb_template_image(struct nb_app *a, const char *name, const char *viewer, char *image, size_t n,
                      struct nb_apierr *ae)
{
    struct nb_template t;
    if (nb_template_get(a, name, viewer, &t, ae) != 0)
        return -1;
    if (strcmp(t.status, "ready") != 0) {
        nb_apierr_set(ae, 409, "not_ready", "template \"%s\" is %s%s%.300s", name, t.status,
                      t.error[0] ? ": " : "", t.error);
        return -1;
    }
    snprintf(image, n, "%s", t.image);
    return 0;
}

int nb_template_image_allowed(struct nb_app *a, const char *image, const char *viewer)
{
    char repo[90];
    struct nb_docker_image im;
    struct nb_derr de = {0};
    size_t rl;
    if (nb_conf_image_allowed(&a->conf, image))
        return 1;
    tpl_repo(&a->conf, repo, sizeof(repo));
    rl = strlen(repo);
    if (strncmp(image, repo, rl) != 0 || image[rl] != ':' ||
        strspn(image + rl + 1, "0123456789abcdef") != NB_TPL_KEY_LEN ||
        image[rl + 1 + NB_TPL_KEY_LEN] != '\0')
        return 0;
    /* a template's image: ready, of this instance, and the viewer's own (an admin: anyone's) */
    return nb_docker_image_inspect(&a->docker, image, &im, &de) == 0 &&
           named_image(&a->conf, &im) && !strcmp(im.instance, a->conf.instance) &&
           !strcmp(im.status, "ready") &&
           (viewer == NULL || !strcmp(nb_template_owner(im.owner), viewer));
}

/* ---- the builder ---- */

struct build_log {
    int fd;
    size_t written;
    int truncated;
    char error[512];
    struct nb_buildcap *cap; /* told of the containers and images the build makes */
    int fsize_hit;           /* a step said a file hit RLIMIT_FSIZE (template_disk_max) */
};

static void log_line(struct build_log *bl, const char *key, const char *text)
{
    yajl_gen g;
    const unsigned char *buf;
    size_t len;
    if (bl->fd < 0 || bl->truncated)
        return;
    g = nb_json_gen();
    yajl_gen_map_open(g);
    if (bl->written + strlen(text) + 32 > NB_TPL_LOG_MAX) {
        nb_json_kv_str(g, "stream", "[nanobox: the log is over its cap; the rest is not kept]\n");
        bl->truncated = 1;
    } else {
        nb_json_kv_str(g, key, text);
    }
    yajl_gen_map_close(g);
    yajl_gen_get_buf(g, &buf, &len);
    if (write(bl->fd, buf, len) == (ssize_t)len && write(bl->fd, "\n", 1) == 1)
        bl->written += len + 1;
    yajl_gen_free(g);
}

static void on_build_line(void *arg, const char *line, size_t len)
{
    struct build_log *bl = arg;
    char err[64];
    yajl_val v = NULL, s;
    const char *sp[] = {"stream", NULL}, *ep[] = {"error", NULL}, *mp[] = {"message", NULL};
    if (nb_json_parse(line, len, 16, &v, err, sizeof(err)) != 0 || !YAJL_IS_OBJECT(v)) {
        yajl_tree_free(v);
        return;
    }
    if ((s = yajl_tree_get(v, sp, yajl_t_string)) != NULL) {
        const char *text = nb_json_string(s);
        log_line(bl, "stream", text);
        if (bl->cap)
            nb_buildcap_line(bl->cap, text);
        if (strstr(text, "File too large") || strstr(text, "File size limit exceeded"))
            bl->fsize_hit = 1;
    } else if ((s = yajl_tree_get(v, ep, yajl_t_string)) != NULL ||
               (s = yajl_tree_get(v, mp, yajl_t_string)) != NULL) {
        snprintf(bl->error, sizeof(bl->error), "%s", nb_json_string(s));
        log_line(bl, "error", nb_json_string(s));
    }
    yajl_tree_free(v);
}

static void read_job(const char *path, const struct nb_conf *c, uint64_t *memory,
                     uint64_t *nano_cpus)
{
    char buf[512], err[64];
    yajl_val v = NULL, m;
    const char *mp[] = {"memory", NULL}, *cp[] = {"nano_cpus", NULL};
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    *memory = c->template_memory;
    *nano_cpus = c->template_nano_cpus;
    if (f)
        fclose(f);
    if (nb_json_parse(buf, n, 4, &v, err, sizeof(err)) == 0 && v) {
        if ((m = yajl_tree_get(v, mp, yajl_t_number)) && YAJL_GET_INTEGER(m) > 0)
            *memory = (uint64_t)YAJL_GET_INTEGER(m);
        if ((m = yajl_tree_get(v, cp, yajl_t_number)) && YAJL_GET_INTEGER(m) > 0)
            *nano_cpus = (uint64_t)YAJL_GET_INTEGER(m);
    }
    yajl_tree_free(v);
}

/*
 * The image the name points at once Docker said the build ended: asked up
 * to three times, since a failure recorded now would take the name off an
 * image that was built.
 */
static int inspect_built(struct nb_docker *d, const char *ref, struct nb_docker_image *im,
                         struct nb_derr *de)
{
    for (int i = 0;; i++) {
        if (nb_docker_image_inspect(d, ref, im, de) == 0)
            return 0;
        if (i == 2 || (de->kind == NB_DERR_HTTP && de->status == 404))
            return -1;
        nb_warn("template: cannot inspect %s after its build (%s); asking again", ref, de->msg);
        usleep(200000);
    }
}

/*
 * The builds' network as the reaper last made sure of it (at most
 * BUILD_NET_FRESH_S old when a builder forks, which inherits it): at 0, the
 * builder makes sure itself (a direct call, the unit tests').
 */
#define BUILD_NET_FRESH_S 10
static struct {
    int64_t at;
    char name[160];
    char err[512];
} build_net;

static void build_net_prepare(struct nb_app *a)
{
    struct nb_apierr ae = {0};
    int64_t now = time(NULL);
    if (strcmp(a->conf.template_network, "bridge") != 0 ||
        (build_net.at != 0 && now - build_net.at < BUILD_NET_FRESH_S && !build_net.err[0]))
        return;
    build_net.err[0] = '\0';
    if (nb_network_build_ensure(a, build_net.name, sizeof(build_net.name), &ae) != 0) {
        snprintf(build_net.err, sizeof(build_net.err), "%s", ae.msg);
        nb_warn("templates: the builds' network: %s", ae.msg);
    }
    build_net.at = now;
}

int nb_template_build_job(struct nb_app *a, struct nb_docker *d, const char *key)
{
    const struct nb_conf *c = &a->conf;
    struct nb_docker_image rec, im;
    struct nb_derr de = {0};
    struct build_log bl = {-1, 0, 0, "", NULL, 0};
    struct nb_docker_build b;
    struct nb_buildcap cap;
    char ref[128], jobp[PATH_MAX], tarp[PATH_MAX], logp[PATH_MAX], error[512] = "";
    char net[160] = "none", marker[PATH_MAX];
    const char *name;
    uint64_t memory, nano_cpus;

    key_ref(c, key, ref, sizeof(ref));
    job_path(c, "run", key, "json", jobp, sizeof(jobp));
    job_path(c, "queue", key, "tar", tarp, sizeof(tarp));
    key_log_path(c, key, logp, sizeof(logp));
    read_job(jobp, c, &memory, &nano_cpus);
    if (nb_docker_image_inspect(d, ref, &rec, &de) != 0 || strcmp(rec.status, "building") != 0 ||
        strcmp(rec.instance, c->instance) != 0 || !named_image(c, &rec)) {
        nb_warn("template job %s: no build record (%s); dropping the job", key,
                de.kind ? de.msg : rec.status);
        unlink(jobp);
        unlink(tarp);
        return -1;
    }
    name = rec.name;
    bl.fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    memset(&b, 0, sizeof(b));
    b.context = tarp;
    b.tag = ref;
    /* the labels are the context's last instruction (record_labels): one step, not five */
    /* RUN steps: on the builds' own network (a bridge sandbox's rules), or none; never the host's */
    if (!strcmp(c->template_network, "bridge")) {
        struct nb_apierr nae = {0};
        if (build_net.at == 0 &&
            nb_network_build_ensure(a, build_net.name, sizeof(build_net.name), &nae) != 0)
            snprintf(build_net.err, sizeof(build_net.err), "%s", nae.msg);
        if (build_net.err[0]) {
            if (bl.fd >= 0)
                close(bl.fd);
            fail_build(c, d, name, rec.owner, rec.created_at, rec.id, build_net.err);
            return -1;
        }
        snprintf(net, sizeof(net), "%s", build_net.name);
    }
    b.network = net;
    b.memory = memory;
    b.nano_cpus = nano_cpus;
    b.fsize = c->template_disk_max; /* no one file past the cap: the kernel's bound */
    b.timeout_ms = (long)c->template_timeout * 1000L;
    job_path(c, "run", key, "disk", marker, sizeof(marker));
    unlink(marker);
    memset(&cap, 0, sizeof(cap));
    cap.fd = -1;
    /* the watcher of the whole (the real Docker only: the unit tests' is in this process) */
    if (d->ops == &nb_docker_curl_ops &&
        nb_buildcap_start(&cap, c, marker, c->template_disk_max) != 0)
        nb_warn("template %s: no disk watcher (%s): template_disk_max bounds each file only", name,
                strerror(errno));
    bl.cap = &cap;
    nb_info("template %s: building", name);
    if (nb_docker_build(d, &b, on_build_line, &bl, &de) != 0) {
        if (de.kind == NB_DERR_TIMEOUT ||
            (de.kind == NB_DERR_UNREACHABLE && strstr(de.msg, "imeout") != NULL))
            snprintf(error, sizeof(error), "the build took longer than template_timeout (%u s)",
                     c->template_timeout);
        else
            snprintf(error, sizeof(error), "%s", bl.error[0] ? bl.error : de.msg);
    } else if (bl.error[0]) {
        if (bl.fsize_hit)
            snprintf(error, sizeof(error),
                     "the build wrote a file over template_disk_max (%llu bytes): %.300s",
                     (unsigned long long)c->template_disk_max, bl.error);
        else
            snprintf(error, sizeof(error), "%s", bl.error);
    } else if (inspect_built(d, ref, &im, &de) != 0) {
        snprintf(error, sizeof(error), "the build ended, but its image: %s", de.msg);
    } else if (!strcmp(im.id, rec.id) || strcmp(im.status, "ready") != 0) {
        /* its last instruction is the labels' LABEL: another image took the tag */
        snprintf(error, sizeof(error), "the build ended without an image (%s is %s, status %s)",
                 ref, im.id, im.status[0] ? im.status : "none");
    }
    nb_buildcap_stop(&cap);
    if (error[0]) {
        if (bl.fd >= 0)
            close(bl.fd);
        nb_buildcap_cleanup(&cap, d); /* the images its steps made: a failed build leaves none */
        fail_build(c, d, name, rec.owner, rec.created_at, rec.id, error);
        return -1;
    }
    if (nb_docker_image_remove(d, rec.id, 0, &de) != 0)
        nb_warn("template %s: cannot remove its build record %s: %s", name, rec.id, de.msg);
    if (bl.fd >= 0)
        close(bl.fd);
    log_final(c, rec.owner, name, "ready", NULL);
    unlink(jobp);
    unlink(tarp);
    nb_info("template %s: ready (%s)", name, im.id);
    return 0;
}

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
    int lock = lock_names(&a->conf);
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
        key_ref(&a->conf, key, ref, sizeof(ref));
        if (strcmp(im->ref, ref) != 0 || building_here(key))
            continue;
        job_path(&a->conf, "queue", key, "json", p, sizeof(p));
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
        fail_build(&a->conf, &a->docker, im->name, im->owner, im->created_at, im->id,
                   "the build was cut short: nanobox-fcgi stopped or restarted during it");
    }
    unlock_names(lock);
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
            key_ref(&a->conf, builders[i].name, ref, sizeof(ref));
            if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0 &&
                !strcmp(im.status, "building") && named_image(&a->conf, &im)) {
                char why[512], marker[PATH_MAX];
                FILE *f;
                snprintf(why, sizeof(why), "the builder process died (%s %d)",
                         r > 0 && WIFSIGNALED(st) ? "signal" : "status",
                         r > 0 && WIFSIGNALED(st) ? WTERMSIG(st)
                         : r > 0                  ? WEXITSTATUS(st)
                                                  : -1);
                /* killed by its disk watcher (buildcap.h): the watcher says why */
                job_path(&a->conf, "run", builders[i].name, "disk", marker, sizeof(marker));
                if ((f = fopen(marker, "re")) != NULL) {
                    size_t n = fread(why, 1, sizeof(why) - 1, f);
                    why[n] = '\0';
                    fclose(f);
                }
                fail_build(&a->conf, &a->docker, im.name, im.owner, im.created_at, im.id, why);
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
    tpl_path(c, "queue", dir, sizeof(dir));
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
        job_path(&a->conf, "queue", name, "json", from, sizeof(from));
        job_path(&a->conf, "run", name, "json", to, sizeof(to));
        if (rename(from, to) != 0) {
            nb_warn("template %s: cannot start its build: %s", name, strerror(errno));
            return;
        }
        build_net_prepare(a); /* the builder inherits it: no iptables run per build */
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
    if (pump_ticks == 0 && ensure_dirs(&a->conf) != 0)
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
    int fd = ensure_dirs(c) == 0 ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
    tpl_path(c, sub, dir, sizeof(dir));
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

void nb_templates_sleep(struct nb_app *a, unsigned usec)
{
    static int ifd = -2;
    if (ifd == -2) {
        /* a job is queued by a rename of its .json into place */
        ifd = watch_dir(&a->conf, "queue", IN_MOVED_TO | IN_CLOSE_WRITE);
        if (ifd < 0)
            nb_warn("templates: cannot watch the queue (%s): a queued build waits for the next "
                    "tick",
                    strerror(errno));
    }
    nb_template_wait(ifd, usec);
}

/* ---- for snapshots (snapshot.c) ---- */

void nb_template_work_path(const struct nb_conf *c, const char *file, char *out, size_t outlen)
{
    tpl_path(c, file, out, outlen);
}

void nb_template_of_image(const struct nb_conf *c, const char *image, char *out, size_t outlen)
{
    char repo[90];
    size_t rl;
    tpl_repo(c, repo, sizeof(repo));
    rl = strlen(repo);
    if (!strncmp(image, repo, rl) && image[rl] == ':')
        snprintf(out, outlen, "%s", image + rl + 1);
    else if (nb_conf_image_allowed(c, image))
        nb_template_conf_name(image, out, outlen);
    else
        snprintf(out, outlen, "%s", image);
}

int nb_template_root(const struct nb_conf *c, const char *image)
{
    char name[300], tmp[NB_CONF_LIST], *save = NULL, *tok;
    nb_template_of_image(c, image, name, sizeof(name));
    snprintf(tmp, sizeof(tmp), "%s", c->root_templates);
    for (tok = strtok_r(tmp, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        char ref[128];
        const char *slash = strchr(tok, '/');
        if (!strcmp(tok, "*") || !strcmp(tok, name))
            return 1; /* all, or one of the operator's images by its template name */
        /* a built template or snapshot: OWNER/NAME, or NAME of the admin key's (names are
         * each key's own, so a bare name never gives another key's "NAME" a root) */
        if (slash != NULL) {
            char owner[NB_TPL_NAME_MAX + 1];
            snprintf(owner, sizeof(owner), "%.*s", (int)(slash - tok), tok);
            nb_template_ref(c, owner, slash + 1, ref, sizeof(ref));
        } else {
            nb_template_ref(c, NULL, tok, ref, sizeof(ref));
        }
        if (!strcmp(ref, image))
            return 1;
    }
    return 0;
}

int nb_template_claim(struct nb_app *a, const char *name, const char *owner, unsigned max_templates,
                      const char *parent, const char *parent_tpl, int64_t now, char rec_id[80],
                      struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_docker_image im;
    struct nb_derr de = {0};
    char ref[128];
    int lock, rc = -1;
    if (!nb_template_name_ok(name)) {
        nb_apierr_set(ae, 400, "bad_name",
                      "a template name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a "
                      "letter or digit");
        return -1;
    }
    if (conf_template(c, name) >= 0) {
        nb_apierr_set(ae, 409, "name_taken", "\"%s\" names one of the operator's images", name);
        return -1;
    }
    if (ensure_dirs(c) != 0 || (lock = lock_names(c)) < 0) {
        nb_apierr_set(ae, 500, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        return -1;
    }
    nb_template_ref(c, owner, name, ref, sizeof(ref));
    if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0) {
        nb_apierr_set(ae, 409, "name_taken", "template \"%s\" exists (DELETE it first)", name);
        goto out;
    }
    if (!(de.kind == NB_DERR_HTTP && de.status == 404)) {
        nb_apierr_docker(ae, &de, "check the template name");
        goto out;
    }
    /* a snapshot is one of its owner's templates: the same quota as a build */
    if (max_templates && owner != NULL) {
        unsigned mine = 0;
        if (count_owned(a, owner, &mine, ae) != 0)
            goto out;
        if (mine >= max_templates) {
            nb_apierr_set(ae, 429, "quota",
                          "quota max_templates=%u of key \"%s\" reached: it has %u templates",
                          max_templates, owner, mine);
            goto out;
        }
    }
    if (put_record_kind(&a->docker, c, name, owner ? owner : "", "snapshot", parent, parent_tpl,
                        "building", now, NULL, rec_id, &de) != 0) {
        nb_apierr_docker(ae, &de, "record the snapshot");
        goto out;
    }
    rc = 0;
out:
    unlock_names(lock);
    return rc;
}

void nb_template_name_of(struct nb_app *a, const char *image, char *out, size_t outlen)
{
    struct nb_docker_image im;
    struct nb_derr de = {0};
    char repo[90];
    size_t rl;
    tpl_repo(&a->conf, repo, sizeof(repo));
    rl = strlen(repo);
    if (!strncmp(image, repo, rl) && image[rl] == ':' &&
        nb_docker_image_inspect(&a->docker, image, &im, &de) == 0 && named_image(&a->conf, &im))
        snprintf(out, outlen, "%s", im.name);
    else
        nb_template_of_image(&a->conf, image, out, outlen);
}

/* ---- templates of the old naming (the tag was the name) ---- */

struct migrate_ctx {
    const struct nb_conf *c;
    struct nb_docker_image *im;
    size_t n, cap;
};

static void migrate_one(void *arg, const struct nb_docker_image *im)
{
    struct migrate_ctx *m = arg;
    char old[128];
    tpl_repo(m->c, old, sizeof(old));
    if (!nb_template_name_ok(im->name) || strcmp(im->instance, m->c->instance) != 0)
        return;
    snprintf(old + strlen(old), sizeof(old) - strlen(old), ":%s", im->name);
    if (strcmp(im->ref, old) != 0 || named_image(m->c, im))
        return;
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 8;
        m->im = realloc(m->im, m->cap * sizeof(*m->im));
        if (m->im == NULL)
            abort();
    }
    m->im[m->n++] = *im;
}

int nb_template_migrate(struct nb_app *a)
{
    struct migrate_ctx m = {&a->conf, NULL, 0, 0};
    struct nb_derr de = {0};
    int failed = 0;
    char repo[90];
    tpl_repo(&a->conf, repo, sizeof(repo));
    if (nb_docker_image_list(&a->docker, a->conf.instance, migrate_one, &m, &de) < 0) {
        nb_warn("templates: cannot list images to move old names: %s", de.msg);
        return 1;
    }
    for (size_t i = 0; i < m.n; i++) {
        const struct nb_docker_image *im = &m.im[i];
        char key[NB_TPL_KEY_LEN + 1], path[512];
        struct nb_buf resp;
        long status = 0;
        nb_template_key(&a->conf, im->owner, im->name, key);
        /* the image keeps its id and labels; only its name changes (a tag, then the old untagged) */
        snprintf(path, sizeof(path), "/images/%s/tag?repo=%s&tag=%s", im->id, repo, key);
        nb_buf_init(&resp, 64 * 1024);
        if (nb_docker_request(&a->docker, "POST", path, NULL, 0, &status, &resp, &de) != 0 ||
            status != 201) {
            nb_warn("template %s (of %s): cannot move it to its new name (status %ld)", im->name,
                    nb_template_owner(im->owner), status);
            failed++;
        } else if (nb_docker_image_remove(&a->docker, im->ref, 0, &de) != 0) {
            nb_warn("template %s: moved, but its old name %s stays: %s", im->name, im->ref, de.msg);
        } else {
            nb_info("template %s (of %s): moved from %s to its owner's hidden name", im->name,
                    nb_template_owner(im->owner), im->ref);
        }
        nb_buf_free(&resp);
    }
    free(m.im);
    return failed;
}
