/*
 * templates.h - the templates engine: images sandboxes start from, built
 * from a Dockerfile through Docker's POST /build (docs/API.md, Templates).
 *
 * Docker holds the state. A template is the image <repo>:<key>, repo
 * nanobox-tpl-<instance> (nb_template_ref), with labels nanobox.instance,
 * nanobox.template (its name), nanobox.kind ("build"; a snapshot will be
 * "snapshot" with nanobox.parent and nanobox.parent_template),
 * nanobox.status and nanobox.created_at. While it builds, and after a
 * failed build, the name points at a record image (an empty filesystem
 * imported with those labels: status "building", or "failed" and
 * nanobox.error); a build that succeeds moves the name to the image it
 * made, labelled "ready". So a restart of nanobox loses nothing.
 *
 * Builds run outside the workers: a worker writes the job (the context tar
 * made with libarchive, and a small JSON) under <sandbox_dir>/templates/
 * queue and answers 202; the reaper (nb_templates_pump, every subtick, and
 * at once when nb_templates_queue_fd wakes it) starts at most
 * template_builds_max builder processes, its children, and queues the
 * rest. A builder dies with the reaper (PDEATHSIG), so a build that was
 * running when nanobox died is found "building" with no builder by the
 * next reaper's first pump, and marked failed.
 *
 * The images of the config (`images`) are templates too (kind "image",
 * always ready), named after the image without ":latest".
 */
#ifndef NB_TEMPLATES_H
#define NB_TEMPLATES_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"

#define NB_TPL_NAME_MAX 63
/* a template's build log (<sandbox_dir>/templates/<name>.log) stops growing here */
#define NB_TPL_LOG_MAX (1024 * 1024)

struct nb_template {
    char name[NB_TPL_NAME_MAX + 1];
    char image[128]; /* what sandboxes of it run */
    char status[16]; /* "building", "ready", "failed" */
    char kind[16];   /* "image" (the config's), "build"; later "snapshot" */
    char parent[64]; /* a snapshot's sandbox ("" otherwise) */
    char parent_tpl[64];
    int64_t created_at;
    int64_t size;    /* bytes, 0 while building */
    char digest[80]; /* the image id, "sha256:..." */
    char error[512]; /* why it failed */
    char owner[40];  /* the name of the key that built it; "" for the config's images: shared */
};

struct nb_template_file {
    const char *path; /* relative, in the build context */
    const void *data;
    size_t len;
};

struct nb_template_req {
    const char *name;
    const char *dockerfile;
    size_t dockerfile_len;
    const struct nb_template_file *files;
    size_t n_files;
    uint64_t memory;        /* of the build; 0: template_memory */
    uint64_t nano_cpus;     /* of the build; 0: template_cpus */
    const char *owner;      /* the key building it (keys.h): the template's owner */
    unsigned max_templates; /* that key's quota of templates; 0: none */
};

/* ^[a-z0-9][a-z0-9._-]{0,62}$ */
int nb_template_name_ok(const char *name);
/* A path of files: relative, no "." or ".." segment, not the Dockerfile. 0, or -1. */
int nb_template_path_ok(const char *path);
/*
 * Names are the owner's own: key A's "foo" and key B's "foo" are two
 * templates. The image behind (owner, name) is nanobox-tpl-<instance>:<key>,
 * key the first NB_TPL_KEY_LEN hex digits of HMAC-SHA256 under the
 * instance's secret (<sandbox_dir>/templates/.secret) of instance, owner and
 * name: not guessable from a name. Owner and name are the image's labels.
 * The job files and the build log are named after the key too.
 */
#define NB_TPL_KEY_LEN 32
/* owner, or NB_KEY_DEFAULT (the admin's) for NULL or "" */
const char *nb_template_owner(const char *owner);
void nb_template_key(const struct nb_conf *c, const char *owner, const char *name,
                     char out[NB_TPL_KEY_LEN + 1]);
/* The image of owner's template name (owner NULL: the admin's). */
void nb_template_ref(const struct nb_conf *c, const char *owner, const char *name, char *out,
                     size_t outlen);
/*
 * Templates made before names were the owner's (image tag = the name): each
 * is moved to its hidden image name, once, at the reaper's start. 0, or the
 * number that could not be moved.
 */
int nb_template_migrate(struct nb_app *a);
/* The template name behind a sandbox's image (labels), or the image itself. */
void nb_template_name_of(struct nb_app *a, const char *image, char *out, size_t outlen);
/* The template name of one of the config's images ("nanobox:latest" -> "nanobox"). */
void nb_template_conf_name(const char *image, char *out, size_t outlen);
/* May a Dockerfile say FROM image (template_from, default the config's images)? */
int nb_template_from_allowed(const struct nb_conf *c, const char *image);
/*
 * Check a Dockerfile (dockerfile.h) against the operator's images alone.
 * 0, or -1 with ae set: 403 from_forbidden (an image not allowed, or one
 * named through an ARG), 403 url_forbidden, 403 dockerfile_forbidden, 400
 * bad_dockerfile. A submit checks the same, with the owner's own ready
 * templates allowed too (written as their images).
 */
int nb_template_check_from(const struct nb_conf *c, const char *df, size_t len,
                           struct nb_apierr *ae);

/* Queue a build: 202's record into out. 400/403/409/413/503 in ae. */
int nb_template_submit(struct nb_app *a, const struct nb_template_req *rq, struct nb_template *out,
                       struct nb_apierr *ae);
/*
 * viewer: the key whose names are meant (NULL: the admin's, "default").
 * A name is looked up among viewer's own templates and the config's images
 * only: another key's template of the same name is another image, and is
 * never found (404, as for a name that does not exist). A list with viewer
 * NULL shows every key's.
 */

/* One template (the config's images included). 404 not_found. */
int nb_template_get(struct nb_app *a, const char *name, const char *viewer, struct nb_template *t,
                    struct nb_apierr *ae);
typedef void (*nb_template_fn)(void *arg, const struct nb_template *t);
/* Every template viewer sees: the config's images first, then the built ones by name. -1 with ae. */
int nb_template_list(struct nb_app *a, const char *viewer, nb_template_fn cb, void *arg,
                     struct nb_apierr *ae);
/*
 * Remove one: 403 for the config's images, 404, 409 while it builds, 409
 * while sandboxes of it run unless force (they keep running).
 */
int nb_template_delete(struct nb_app *a, const char *name, const char *viewer, int force,
                       struct nb_apierr *ae);
/*
 * How a cluster node's record names a template (cluster.h): "name" for
 * one of the operator's, "owner/name" for a key's (viewer's, or owner's).
 */
void nb_template_node_name(const struct nb_conf *c, const char *name, const char *owner, char *out,
                           size_t n);
/* The image a create with {"template": name} runs: 404 not_found, 409 not_ready. */
int nb_template_image(struct nb_app *a, const char *name, const char *viewer, char *image, size_t n,
                      struct nb_apierr *ae);
/* The allow-list of images: the config's, and viewer's ready templates (NULL: anyone's). */
int nb_template_image_allowed(struct nb_app *a, const char *image, const char *viewer);
/* <sandbox_dir>/templates/<key>.log of owner's name */
void nb_template_log_path(const struct nb_conf *c, const char *owner, const char *name, char *out,
                          size_t outlen);

/* The container a snapshot is committed from: NB_SNAPSHOT_CTR "<its key>". */
#define NB_SNAPSHOT_CTR "nanobox-snap-"
/* <sandbox_dir>/templates/<file>: scratch files of snapshots */
void nb_template_work_path(const struct nb_conf *c, const char *file, char *out, size_t outlen);
/* The template name a sandbox's image stands for (the image itself when it is none). */
void nb_template_of_image(const struct nb_conf *c, const char *image, char *out, size_t outlen);
/*
 * Do sandboxes of image have a root (root_templates names its template, or
 * is "*")? Such a sandbox starts as uid 0 with a writable image and its
 * agent gives root to commands that ask (sudo, user "root"): sandbox.c.
 */
int nb_template_root(const struct nb_conf *c, const char *image);
/*
 * Take name for a snapshot: its record image (kind "snapshot", status
 * "building", parents as labels), its id into rec_id. 400 bad_name, 409
 * name_taken, 429 quota (owner's max_templates, 0: none). The snapshot's build then moves the name to its image, or
 * the caller removes the record (nb_docker_image_remove of rec_id).
 */
int nb_template_claim(struct nb_app *a, const char *name, const char *owner, unsigned max_templates,
                      const char *parent, const char *parent_tpl, int64_t now, char rec_id[80],
                      struct nb_apierr *ae);

/*
 * The reaper's, at every subtick and when the queue's descriptor wakes it:
 * fail orphaned builds, reap builders, start queued ones.
 */
void nb_templates_pump(struct nb_app *a);
/*
 * The reaper's wake source for the pump: a non-blocking inotify descriptor
 * on queue/ that becomes readable when a build is queued, so that it
 * starts at once rather than at the next subtick; the reaper reads it
 * empty. -1 (logged) when the directory cannot be watched.
 */
int nb_templates_queue_fd(const struct nb_conf *c);
/*
 * For a follower of a build log: an inotify descriptor on the templates
 * directory (a log written or created), or -1; nb_template_wait sleeps up to
 * usec, less when it fires (a plain sleep for -1).
 */
int nb_template_log_watch(const struct nb_conf *c);
void nb_template_wait(int fd, unsigned usec);
/* Build one queued job (its key) in this process (the builder's body; the unit tests call it). */
int nb_template_build_job(struct nb_app *a, struct nb_docker *d, const char *key);

#endif
