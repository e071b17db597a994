/*
 * tplcontext.c - a build's submission (nb_template_submit): every image
 * the Dockerfile names checked against the operator's images and the
 * owner's ready templates (dockerfile.h, FROM), the build context written
 * with libarchive (the checked Dockerfile, the record's labels as its last
 * instruction, the files), the record image made and the job queued for
 * the reaper (tplqueue.c).
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "dockerfile.h"
#include "log.h"
#include "tplpriv.h"

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
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the build context: %s",
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
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot write the build context: %s",
                      archive_error_string(ar));
    archive_write_free(ar);
    if (rc != 0)
        unlink(path);
    return rc;
}

/* ---- the submit: record, context and job ---- */

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
    if (!nb_template_name_ok(image) || nb_tpl_conf_template(&o->a->conf, image) >= 0)
        return 0;
    if (nb_template_get(o->a, image, nb_template_owner(o->owner), &t, &e2) != 0) {
        if (e2.err == NB_E_NOT_FOUND)
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
        nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                      "template builds are off on this server (template_builds_max = 0)");
        return -1;
    }
    if (!nb_template_name_ok(rq->name)) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_name",
                      "a template name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a "
                      "letter or digit");
        return -1;
    }
    if (nb_tpl_conf_template(c, rq->name) >= 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "name_taken", "\"%s\" names one of the operator's images",
                      rq->name);
        return -1;
    }
    for (size_t i = 0; i < rq->n_files; i++) {
        if (nb_template_path_ok(rq->files[i].path) != 0) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_path",
                          "files: \"%.100s\" must be a relative path without . or .. segments, "
                          "and not Dockerfile",
                          rq->files[i].path);
            return -1;
        }
        total += 512 + ((rq->files[i].len + 511) / 512) * 512;
    }
    if (total > c->template_context_max) {
        nb_apierr_set(ae, NB_E_TOO_LARGE, "too_large",
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
    if (nb_tpl_ensure_dirs(c) != 0 || (lock = nb_tpl_lock(c)) < 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot use the templates directory: %s",
                      strerror(errno));
        nb_buf_free(&checked);
        return -1;
    }
    nb_template_key(c, rq->owner, rq->name, key);
    nb_tpl_key_ref(c, key, ref, sizeof(ref));
    nb_tpl_job_path(c, "queue", key, "tar", tarp, sizeof(tarp));
    nb_tpl_job_path(c, "queue", key, "json", jobp, sizeof(jobp));
    nb_tpl_key_log_path(c, key, logp, sizeof(logp));
    if (nb_docker_image_inspect(&a->docker, ref, &im, &de) == 0) {
        nb_apierr_set(ae, NB_E_CONFLICT, "name_taken", "template \"%s\" exists (DELETE it first)",
                      rq->name);
        goto out;
    }
    /* the key's quota, counted under the names lock that every submit holds */
    if (rq->max_templates && rq->owner != NULL) {
        unsigned mine = 0;
        if (nb_tpl_count_owned(a, rq->owner, &mine, ae) != 0)
            goto out;
        if (mine >= rq->max_templates) {
            nb_apierr_set(ae, NB_E_LIMIT, "quota",
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
    if (nb_tpl_put_record(&a->docker, c, rq->name, rq->owner ? rq->owner : "", "building", now,
                          NULL, id, &de) != 0) {
        nb_apierr_docker(ae, &de, "record the template");
        unlink(tarp);
        goto out;
    }
    if (write_job(jobp, c, rq) != 0) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "cannot queue the build: %s", strerror(errno));
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
    nb_tpl_unlock(lock);
    nb_buf_free(&checked);
    return rc;
}
