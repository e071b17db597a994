/*
 * rootdisk.h - the disk bound of sandboxes with a root (root_templates),
 * enforced by the kernel.
 *
 * What a root writes into its image lands in the container's writable
 * layer, a directory of Docker's storage (overlay2: <layer>/diff, with the
 * work directory <layer>/work beside it, on the host's file system), which
 * nothing bounds. So after Docker creates the container and before it
 * starts, nanobox mounts over <layer> a file system of its own: ext4 of
 * root_disk_max bytes and at most root_disk_inodes inodes, on a loop device
 * whose backing file is an unnamed (O_TMPFILE), sparse file in Docker's
 * storage directory, where the layer would have been. Writes past the bound
 * (fallocate, dd, a flood of small files) get ENOSPC from the kernel at
 * once; the host's disk gives the layer at most root_disk_max bytes; the
 * mount holds the only reference to the loop device (LO_FLAGS_AUTOCLEAR),
 * which holds the only one to the file, so unmounting frees all three.
 *
 * The mount is made and unmounted in dockerd's mount namespace (its pid
 * file's), whatever namespace nanobox-fcgi runs in (systemd's ProtectSystem gives it
 * one of its own), by a child process. It lives in the kernel, not in
 * nanobox: a restart of nanobox-fcgi or of dockerd (live-restore) leaves
 * it. It must go before Docker removes the container (Docker's removal
 * would fail, the layer's directory busy): every removal of a sandbox's
 * container goes through nb_rootdisk_remove.
 */
#ifndef NB_ROOTDISK_H
#define NB_ROOTDISK_H

#include <stddef.h>
#include <sys/types.h>

#include "app.h"
#include "docker.h"

/* Does a sandbox of this image get a bounded layer (a root, root_disk_max set)? */
int nb_rootdisk_wanted(const struct nb_conf *c, const char *image);

/*
 * Mount the bounded file system over the writable layer of container cid
 * (created, not started). 0 when mounted (or already); -1 with a message.
 */
int nb_rootdisk_attach(struct nb_app *a, const char *cid, char *err, size_t errlen);

/*
 * After the start: does the container whose PID 1 is pid write into the
 * bounded file system (its root's statfs, which overlay takes from the
 * upper layer's, holds at most root_disk_max bytes)? 0 yes, -1 with a
 * message: dockerd did not see the mount.
 */
int nb_rootdisk_verify(const struct nb_conf *c, pid_t pid, char *err, size_t errlen);

/*
 * Is the overlay2 upper directory upper on a bounded file system of ours
 * (its layer directory a mount point)? For the reaper, which then need not
 * measure it.
 */
int nb_rootdisk_bounded(const char *upper);

/*
 * Remove a sandbox's container (nb_docker_remove), unmounting its bounded
 * layer first: root 1 when the caller knows the sandbox has one (the
 * container is then killed, waited for and its layer unmounted before the
 * removal); root 0 tries the removal alone, and only when Docker says the
 * layer is busy (a sandbox made with a root under an older configuration)
 * unmounts and tries again.
 */
int nb_rootdisk_remove(struct nb_app *a, const char *id, int root, struct nb_derr *de);

/*
 * A persistent volume's file system (volume.c), the same kind as a root's
 * layer (ext4 on a loop device, so a write past it fails with ENOSPC) but
 * in the named file img, mounted (nosuid, nodev) on the directory dir in
 * dockerd's mount namespace: NB_RDV_CREATE makes the file of bytes, the
 * file system and dir and mounts it, its root open to every uid (0777
 * and a default ACL rwx for all: the owner's sandboxes share it);
 * NB_RDV_MOUNT mounts it again unless it is (after a reboot);
 * NB_RDV_REMOVE unmounts it (lazily) and removes file and dir. 0, or -1
 * with a message.
 */
#define NB_RDV_CREATE 1
#define NB_RDV_MOUNT 2
#define NB_RDV_REMOVE 3
int nb_rootdisk_volume(int op, const char *img, const char *dir, uint64_t bytes, char *err,
                       size_t errlen);

#endif
