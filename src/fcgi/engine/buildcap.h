/*
 * buildcap.h - the disk bound of a template build while it runs
 * (template_disk_max; templates.c, docs/SECURITY.md "Template builds").
 *
 * Two parts. The kernel's: every RUN step's processes have RLIMIT_FSIZE
 * set to the cap (the /build call's ulimits), so one file can never grow
 * past it: `fallocate -l 8G` fails at once with EFBIG. And a watcher: a
 * child of the builder that learns from the build's stream which
 * containers the build makes (" ---> Running in <id>") and the images it
 * commits (" ---> <id>"), and every WATCH_MS sums the blocks and the
 * entries of those containers' writable layers (overlay2's UpperDir;
 * committed ones keep their last count). Over template_disk_max bytes, or
 * over template_disk_max / 16 KiB entries (ext4's bytes per inode), it
 * writes why into the job's marker file, empties every regular file of
 * those layers where it lies (no symlink followed: the disk comes back at
 * once, and a commit under way fails), kills the builder (its connection
 * to dockerd closes: Docker cancels the build, kills and removes its
 * container), removes the build's containers and the images it made, and
 * exits. The reaper finds the builder killed and fails the template with
 * the marker's text.
 */
#ifndef NB_BUILDCAP_H
#define NB_BUILDCAP_H

#include <stdint.h>
#include <sys/types.h>

#include "app.h"

#define NB_BUILDCAP_IMAGES 256

struct nb_buildcap {
    pid_t pid; /* the watcher, 0 when none */
    int fd;    /* its pipe: "c <container>\n", "i <image>\n" */
    /* the images the build committed (" ---> <id>"), for the cleanup of a failed one */
    char images[NB_BUILDCAP_IMAGES][16];
    unsigned n_images;
};

/*
 * Start the watcher of the calling process's build: cap bytes (0: no
 * watcher), marker the file it writes its reason into. 0, or -1 (errno)
 * with no watcher.
 */
int nb_buildcap_start(struct nb_buildcap *w, const struct nb_conf *c, const char *marker,
                      uint64_t cap);
/* One "stream" text of the build: what it names goes to the watcher. */
void nb_buildcap_line(struct nb_buildcap *w, const char *text);
/* The build's call returned: the watcher ends (it kills nothing any more). */
void nb_buildcap_stop(struct nb_buildcap *w);
/* A failed build: remove the images it committed, newest first (a used one stays). */
void nb_buildcap_cleanup(struct nb_buildcap *w, struct nb_docker *d);

#endif
