/*
 * snapshot.h - a running sandbox's files as a new template, and those
 * files back in a sandbox that starts from it (docs/ARCHITECTURE.md,
 * "Snapshots").
 *
 * A sandbox's root filesystem is its image, read-only: what its processes
 * wrote is in its two tmpfs mounts, /workspace (the configured workspace)
 * and /tmp. A snapshot reads them from the host through
 * /proc/<PID 1>/root while the sandbox is frozen (docker pause: a
 * consistent copy, and no process can swap a directory for a symlink
 * under the walk), writes them with libarchive as one tar, and builds the
 * image "FROM <the sandbox's image>" plus that tar at NB_SNAPSHOT_TAR.
 * A sandbox whose image holds that file gets it unpacked into its fresh
 * tmpfs mounts, owned by its own uid, before its create answers (or
 * before it joins a warm pool).
 */
#ifndef NB_SNAPSHOT_H
#define NB_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "app.h"
#include "templates.h"

/* Where a snapshot image carries its tmpfs content (entries workspace/... and tmp/...). */
#define NB_SNAPSHOT_TAR "/.nanobox/snapshot.tar"

/*
 * Snapshot sandbox id (running or paused; a paused one stays paused) as
 * template name (NULL or "": snap-<id's first 8>-<time>). The sandbox
 * keeps running. The new template into out. 404 not_found, 400 bad_name,
 * 409 name_taken, 429 quota (owner, the requesting key, holds max_templates), 413 too_large (over snapshot_max), 5xx from Docker.
 */
int nb_snapshot_take(struct nb_app *a, const char *id, const char *name, const char *owner,
                     unsigned max_templates, struct nb_template *out, struct nb_apierr *ae);

/*
 * If the image of the container whose PID 1 is pid (host pid) holds
 * NB_SNAPSHOT_TAR, unpack it into its workspace ws and /tmp, owned by
 * the uid and gid of slot. 0 (also when there is nothing to unpack), or
 * -1 with err.
 */
int nb_snapshot_restore(const struct nb_conf *c, uint32_t slot, pid_t pid, const char *ws,
                        char *err, size_t errlen);

/*
 * A fork's half of a snapshot, with no image: the files of the live
 * sandbox src (a copy of its slot) into the tar file files_tar (its
 * /workspace and /tmp, as a snapshot's NB_SNAPSHOT_TAR) and, for a sandbox
 * with a root (*has_root), what root wrote into its image (its overlay
 * upper directory, deletions as a layer's whiteouts) into root_tar. Read
 * frozen, as nb_snapshot_take; snapshot_max caps the two together (413
 * too_large). 0, or -1 with ae; the caller removes the files.
 */
int nb_snapshot_capture(struct nb_app *a, const struct nb_slot *src, const char *files_tar,
                        const char *root_tar, int *has_root, struct nb_apierr *ae);

/*
 * Those files into a fresh sandbox (slot index slot, PID 1 pid, workspace
 * ws) of the same image: root_tar (when not NULL) applied on its image,
 * owners kept and whiteouts removing, then files_tar into its tmpfs
 * mounts owned by the slot's uid. 0, or -1 with err.
 */
int nb_snapshot_apply(const struct nb_conf *c, uint32_t slot, pid_t pid, const char *ws,
                      const char *files_tar, const char *root_tar, char *err, size_t errlen);

/*
 * A pause that releases the memory (sandbox.h): the files of the sandbox of
 * slot (frozen by the caller; workspace, /tmp and, with a root, what it
 * wrote into its image, within snapshot_max: 413 too_large) as its pause
 * image (nb_snapshot_pause_ref), made the way a snapshot's is, with the
 * container's Env and labels nanobox.kind "pause" and nanobox.paused <id>.
 * It is no template: no name, no quota, not listed. A container of that
 * image gets its files back at its start (nb_snapshot_restore). 0, or -1
 * with ae; nothing is left behind on failure.
 */
int nb_snapshot_save(struct nb_app *a, const struct nb_slot *slot, struct nb_apierr *ae);
/* The pause image of sandbox id: nanobox-pause-<instance>:<id>. */
void nb_snapshot_pause_ref(const struct nb_conf *c, const char *id, char *out, size_t outlen);
/* Remove sandbox id's pause image (none counts as removed), and any earlier
 * one of it left untagged: for a sandbox that is gone. 0, or -1 (logged). */
int nb_snapshot_drop(struct nb_app *a, const char *id);
/*
 * Reconciliation's, after adoption: remove the pause images of this
 * instance that no slot uses (their sandbox gone while nanobox was down,
 * or one a fresh table could not adopt). The count listed, or -1 if
 * Docker could not list them.
 */
int nb_snapshot_sweep(struct nb_app *a);
/* Each pause image of this instance: its sandbox's id, its image id, its labels (a yajl_val). */
typedef void (*nb_pause_image_fn)(void *arg, const char *sandbox_id, const char *image_id,
                                  const void *labels);
int nb_snapshot_pause_images(struct nb_app *a, nb_pause_image_fn cb, void *arg);

#endif
