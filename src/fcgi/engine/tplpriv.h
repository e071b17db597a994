/*
 * tplpriv.h - what the files of the templates engine share; templates.h
 * is the engine's interface, this header is for its own files only.
 *
 * The engine's files, each calling only those above it in this list:
 *   tplname.c     names, the owners' hidden image refs, the paths below,
 *                 the names' lock, which templates have a root
 *   templates.c   record images; get, list, delete, image, claim, migrate
 *   tplcontext.c  a build's submission: the Dockerfile's images checked
 *                 (FROM), the build context written (libarchive), the job
 *                 queued
 *   tplbuild.c    a builder's body: one job through POST /build
 *   tplqueue.c    the reaper's side: builders started and reaped, the
 *                 sweep of builds cut short, the queue's wake descriptor,
 *                 the waits of a log's follower
 *
 * Files under <sandbox_dir>/templates (<key>: nb_template_key's hex):
 *   .lock              flock'd while a name is checked and claimed, or removed
 *   .secret            the instance's key of the image names (tplname.c)
 *   queue/<key>.tar    the build context (Dockerfile + files), written by the worker
 *   queue/<key>.json   the job ({"memory", "nano_cpus"}), written last: a queued build
 *   run/<key>.json     the job once the reaper handed it to a builder
 *   run/<key>.disk     why the disk watcher stopped the build (buildcap.h)
 *   <key>.log          the build's output, NDJSON, capped at NB_TPL_LOG_MAX
 */
#ifndef NB_TPLPRIV_H
#define NB_TPLPRIV_H

#include <stddef.h>
#include <stdint.h>

#include "templates.h"

/* ---- tplname.c ---- */

/* <sandbox_dir>/templates/<sub> (sub "": the directory) */
void nb_tpl_path(const struct nb_conf *c, const char *sub, char *out, size_t outlen);
/* The repository of the instance's templates: nanobox-tpl-<instance> */
void nb_tpl_repo(const struct nb_conf *c, char *out, size_t outlen);
/* The image of the job key (what nb_template_key gave). */
void nb_tpl_key_ref(const struct nb_conf *c, const char *key, char *out, size_t outlen);
/* <templates>/<key>.log */
void nb_tpl_key_log_path(const struct nb_conf *c, const char *key, char *out, size_t outlen);
/* <templates>/<where>/<key>.<ext>: where "queue" or "run" */
void nb_tpl_job_path(const struct nb_conf *c, const char *where, const char *key, const char *ext,
                     char *out, size_t outlen);
/* The directory, queue/ and run/: 0, or -1 (errno). */
int nb_tpl_ensure_dirs(const struct nb_conf *c);
/* The names' lock (.lock, flock): its descriptor, or -1 (errno). */
int nb_tpl_lock(const struct nb_conf *c);
void nb_tpl_unlock(int fd);
/* The index of the config's image that name names, or -1. */
int nb_tpl_conf_template(const struct nb_conf *c, const char *name);

/* ---- templates.c ---- */

/* Is im the image its (owner, name) points at (a record being replaced is not)? */
int nb_tpl_named_image(const struct nb_conf *c, const struct nb_docker_image *im);
/* A build's record image (kind "build", status "building" or "failed"); its id into id. */
int nb_tpl_put_record(struct nb_docker *d, const struct nb_conf *c, const char *name,
                      const char *owner, const char *status, int64_t created_at, const char *error,
                      char id[80], struct nb_derr *de);
/* Append one {"status": ..., "error"?: ...} line: the log's end. */
void nb_tpl_log_final(const struct nb_conf *c, const char *owner, const char *name,
                      const char *status, const char *error);
/* Turn name's record (old_id) into a failed one; the job's files go. */
void nb_tpl_fail_build(const struct nb_conf *c, struct nb_docker *d, const char *name,
                       const char *owner, int64_t created_at, const char *old_id,
                       const char *error);
/* The built templates (any status) of owner into *n. -1 with ae. */
int nb_tpl_count_owned(struct nb_app *a, const char *owner, unsigned *n, struct nb_apierr *ae);

/* ---- tplbuild.c ---- */

/*
 * The builds' network made sure of (template_network "bridge"), at most
 * 10 s before a builder forks: the builder inherits the result.
 */
void nb_tpl_build_net_prepare(struct nb_app *a);

#endif
