/*
 * templates.c - see templates.h: the record images (a template's state
 * while it builds or after it failed), and the calls that read and change
 * templates: get, list, delete, image, claim (a snapshot's name), and the
 * move of templates of the old naming. Submits are tplcontext.c's, builds
 * tplbuild.c's and tplqueue.c's; names and paths tplname.c's (tplpriv.h).
 */
#include "config.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "log.h"
#include "tplpriv.h"

/* ---- records ---- */

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

int nb_tpl_put_record(struct nb_docker *d, const struct nb_conf *c, const char *name,
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

void nb_tpl_log_final(const struct nb_conf *c, const char *owner, const char *name,
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

void nb_tpl_fail_build(const struct nb_conf *c, struct nb_docker *d, const char *name,
                       const char *owner, int64_t created_at, const char *old_id, const char *error)
{
    struct nb_derr de = {0};
    char id[80] = "", p[PATH_MAX], key[NB_TPL_KEY_LEN + 1];
    nb_template_key(c, owner, name, key);
    nb_warn("template %s (of %s): build failed: %s", name, nb_template_owner(owner), error);
    if (nb_tpl_put_record(d, c, name, owner, "failed", created_at, error, id, &de) != 0)
        nb_warn("template %s: cannot record the failure: %s", name, de.msg);
    else if (old_id && old_id[0] && strcmp(old_id, id) != 0 &&
             nb_docker_image_remove(d, old_id, 0, &de) != 0)
        nb_warn("template %s: cannot remove its old record %s: %s", name, old_id, de.msg);
    /* the log's last line only once Docker says failed: a reader that saw it may act on it
     * (a reader that finds the state ended first gets the line from the logs route) */
    nb_tpl_log_final(c, owner, name, "failed", error);
    nb_tpl_job_path(c, "run", key, "json", p, sizeof(p));
    unlink(p);
    nb_tpl_job_path(c, "run", key, "disk", p, sizeof(p));
    unlink(p);
    nb_tpl_job_path(c, "queue", key, "tar", p, sizeof(p));
    unlink(p);
}

/* ---- the API's calls ---- */

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
    int ci = nb_tpl_conf_template(&a->conf, name);
    memset(t, 0, sizeof(*t));
    if (ci >= 0) {
        conf_fill(a, (unsigned)ci, t);
        return 0;
    }
    if (!nb_template_name_ok(name)) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no template \"%.80s\"", name);
        return -1;
    }
    /* names are the owner's own: viewer's "foo" is another image than any other key's */
    nb_template_ref(&a->conf, viewer, name, t->image, sizeof(t->image));
    if (nb_docker_image_inspect(&a->docker, t->image, &im, &de) != 0) {
        if (de.kind == NB_DERR_HTTP && de.status == 404)
            nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no template \"%s\"", name);
        else
            nb_apierr_docker(ae, &de, "read the template");
        return -1;
    }
    if (strcmp(im.instance, a->conf.instance) != 0 || strcmp(im.name, name) != 0 ||
        strcmp(nb_template_owner(im.owner), nb_template_owner(viewer)) != 0) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found", "no template \"%s\"", name);
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

int nb_tpl_named_image(const struct nb_conf *c, const struct nb_docker_image *im)
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
    if (!nb_tpl_named_image(l->c, im))
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

static void count_one(void *arg, const struct nb_template *t)
{
    struct {
        const char *owner;
        unsigned n;
    } *cnt = arg;
    cnt->n += t->owner[0] != '\0' && !strcmp(t->owner, cnt->owner);
}

int nb_tpl_count_owned(struct nb_app *a, const char *owner, unsigned *n, struct nb_apierr *ae)
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
    if (nb_tpl_conf_template(&a->conf, name) >= 0) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                      "template \"%s\" is one of the operator's images (the images setting)", name);
        return -1;
    }
    if ((lock = nb_tpl_lock(&a->conf)) < 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        return -1;
    }
    if (nb_template_get(a, name, viewer, &t, ae) != 0)
        goto out;
    if (!strcmp(t.status, "building")) {
        nb_apierr_set(ae, NB_E_CONFLICT, "building",
                      "template \"%s\" is building; delete it once it ends", name);
        goto out;
    }
    users = users_of(a, t.image);
    if (users > 0 && !force) {
        nb_apierr_set(ae, NB_E_CONFLICT, "in_use",
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
    nb_tpl_unlock(lock);
    return rc;
}

void nb_template_node_name(const struct nb_conf *c, const char *name, const char *owner, char *out,
                           size_t n)
{
    if (owner == NULL || owner[0] == '\0' || nb_tpl_conf_template(c, name) >= 0)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%.39s/%.80s", owner, name);
}

int nb_template_image(struct nb_app *a, const char *name, const char *viewer, char *image, size_t n,
                      struct nb_apierr *ae)
{
    struct nb_template t;
    if (nb_template_get(a, name, viewer, &t, ae) != 0)
        return -1;
    if (strcmp(t.status, "ready") != 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "not_ready", "template \"%s\" is %s%s%.300s", name,
                      t.status, t.error[0] ? ": " : "", t.error);
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
    nb_tpl_repo(&a->conf, repo, sizeof(repo));
    rl = strlen(repo);
    if (strncmp(image, repo, rl) != 0 || image[rl] != ':' ||
        strspn(image + rl + 1, "0123456789abcdef") != NB_TPL_KEY_LEN ||
        image[rl + 1 + NB_TPL_KEY_LEN] != '\0')
        return 0;
    /* a template's image: ready, of this instance, and the viewer's own (an admin: anyone's) */
    return nb_docker_image_inspect(&a->docker, image, &im, &de) == 0 &&
           nb_tpl_named_image(&a->conf, &im) && !strcmp(im.instance, a->conf.instance) &&
           !strcmp(im.status, "ready") &&
           (viewer == NULL || !strcmp(nb_template_owner(im.owner), viewer));
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
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "a template name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a "
                      "letter or digit");
        return -1;
    }
    if (nb_tpl_conf_template(c, name) >= 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "name_taken", "\"%s\" names one of the operator's images",
                      name);
        return -1;
    }
    if (nb_tpl_ensure_dirs(c) != 0 || (lock = nb_tpl_lock(c)) < 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        return -1;
    }
    nb_template_ref(c, owner, name, ref, sizeof(ref));
    if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "name_taken", "template \"%s\" exists (DELETE it first)",
                      name);
        goto out;
    }
    if (!(de.kind == NB_DERR_HTTP && de.status == 404)) {
        nb_apierr_docker(ae, &de, "check the template name");
        goto out;
    }
    /* a snapshot is one of its owner's templates: the same quota as a build */
    if (max_templates && owner != NULL) {
        unsigned mine = 0;
        if (nb_tpl_count_owned(a, owner, &mine, ae) != 0)
            goto out;
        if (mine >= max_templates) {
            nb_apierr_set(ae, NB_E_LIMIT, "quota",
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
    nb_tpl_unlock(lock);
    return rc;
}

void nb_template_name_of(struct nb_app *a, const char *image, char *out, size_t outlen)
{
    struct nb_docker_image im;
    struct nb_derr de = {0};
    char repo[90];
    size_t rl;
    nb_tpl_repo(&a->conf, repo, sizeof(repo));
    rl = strlen(repo);
    if (!strncmp(image, repo, rl) && image[rl] == ':' &&
        nb_docker_image_inspect(&a->docker, image, &im, &de) == 0 &&
        nb_tpl_named_image(&a->conf, &im))
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
    nb_tpl_repo(m->c, old, sizeof(old));
    if (!nb_template_name_ok(im->name) || strcmp(im->instance, m->c->instance) != 0)
        return;
    snprintf(old + strlen(old), sizeof(old) - strlen(old), ":%s", im->name);
    if (strcmp(im->ref, old) != 0 || nb_tpl_named_image(m->c, im))
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
    nb_tpl_repo(&a->conf, repo, sizeof(repo));
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
