/*
 * volume.h - persistent named volumes, each its owner's (an API key's):
 * made, listed, found and removed here, and mounted into a sandbox at its
 * create (sandbox.h, nb_sandbox_spec's volumes). docs/API.md "Volumes".
 *
 * A volume is a Docker named volume of the local driver, a bind of the
 * directory its file system is mounted on: ext4 in a sparse file of its
 * size under volume_dir, on a loop device (rootdisk.h, nb_rootdisk_volume),
 * so the kernel holds it to its size (a write past it fails with ENOSPC).
 * Its labels say whose it is: nanobox.instance, nanobox.owner,
 * nanobox.volume (its name), nanobox.volume_id and nanobox.size; never
 * nanobox.sandbox, which reconciliation's sweep removes when unused.
 * Names are per owner: another key's volume of the same name is simply
 * not found, nor is it by its id.
 */
#ifndef NB_VOLUME_H
#define NB_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "app.h"
#include "keys.h"

#define NB_VOLUME_NAME_MAX 63 /* [A-Za-z0-9][A-Za-z0-9_.-]* */
#define NB_VOLUME_ID_LEN 16   /* hex */
#define NB_VOLUME_PATH_MAX 200
#define NB_VOLUMES_PER_SANDBOX 8

struct nb_volume {
    char name[NB_VOLUME_NAME_MAX + 1];
    char id[NB_VOLUME_ID_LEN + 1];
    char docker[160]; /* the Docker volume's name */
    uint64_t size;    /* bytes the kernel lets it hold */
    int64_t created;  /* Unix seconds */
    char owner[NB_KEY_NAME_MAX + 1];
    /* on a cluster node (volreg.h): the node that holds it, and is it up */
    char node[NB_NODE_NAME_MAX + 1];
    int node_up;
};

/* One volume mounted into a sandbox: its Docker name and the path inside. */
struct nb_volume_mount {
    char name[NB_VOLUME_NAME_MAX + 1];
    char path[NB_VOLUME_PATH_MAX + 1];
    char docker[160];
};

int nb_volume_name_valid(const char *name);

/*
 * Make owner's volume name of size bytes (0: volume_size_default). 400
 * bad name, 413 over volume_size_max, 409 exists, 429 quota: the owner's
 * volumes and their bytes, at most key's max_volumes and
 * max_volume_bytes (keys.h), or where the key sets none the config's
 * volume_max_count and volume_quota. 5xx from Docker or the file
 * system's set-up.
 */
int nb_volume_create(struct nb_app *a, const struct nb_key *key, const char *name, uint64_t size,
                     struct nb_volume *out, struct nb_apierr *ae);

/* owner's volumes (NULL: every owner's) on this node into *out (malloc'd, *n of them). */
int nb_volume_list(struct nb_app *a, const char *owner, struct nb_volume **out, size_t *n,
                   struct nb_apierr *ae);

/*
 * May key hold n volumes of held bytes in all and one more of size bytes?
 * Its max_volumes and max_volume_bytes, or where it sets none the config's
 * volume_max_count and volume_quota. 0, or -1 with a 429 quota.
 */
int nb_volume_quota(const struct nb_conf *c, const struct nb_key *key, size_t n, uint64_t held,
                    uint64_t size, struct nb_apierr *ae);

/* owner's volume whose name or id is key; 404 otherwise. */
int nb_volume_get(struct nb_app *a, const char *owner, const char *key, struct nb_volume *out,
                  struct nb_apierr *ae);

/* Remove owner's volume (by name or id) and its file system: 404, or 409 while a sandbox has it
 * mounted (Docker's own count of its users) or, paused without its memory, will mount it again at
 * its resume (its pause image's NB_VOLUME_LABEL). */
int nb_volume_delete(struct nb_app *a, const char *owner, const char *key, struct nb_apierr *ae);

/*
 * Is path a place a volume may be mounted in a sandbox whose workspace is
 * ws? Absolute, no "." or ".." or empty component, not / nor over what
 * the sandbox's own mounts need (/proc, /dev, /sys, /etc, /.nanobox, the
 * system's directories, /tmp and the workspace themselves). 0, or -1 with
 * a message.
 */
int nb_volume_path_valid(const char *path, const char *ws, char *err, size_t errlen);

/*
 * For a create: check the n mounts (paths valid, none twice or inside
 * another, at most NB_VOLUMES_PER_SANDBOX), find each of owner's volumes
 * (404 as for a name not there), make sure its file system is mounted (a
 * reboot unmounts it) and fill in its Docker name. *lock gets a shared
 * lock that keeps the volumes from being removed until
 * nb_volume_release, after the create. 0, or -1 (nothing held).
 */
int nb_volume_prepare(struct nb_app *a, const char *owner, const char *ws,
                      struct nb_volume_mount *m, unsigned n, int *lock, struct nb_apierr *ae);
void nb_volume_release(int lock);

/*
 * A create body's list of mounts, [{"name", "path"}] (the native API's
 * "volumes", E2B's "volumeMounts": the same shape), into m (at most
 * NB_VOLUMES_PER_SANDBOX) and *n; NULL v: none. 0, or -1 with a 400.
 */
int nb_volume_mounts_parse(yajl_val v, struct nb_volume_mount *m, unsigned *n,
                           struct nb_apierr *ae);

/*
 * The label nanobox.volumes a sandbox's container (and the image of its
 * pause without memory, which copies its labels) carries: its mounts as
 * "name:path,name:path" (a name has no ':', a path no ':' nor ','), so a
 * fork and a resume mount the same volumes at the same paths. "" for none.
 */
#define NB_VOLUME_LABEL "nanobox.volumes"
void nb_volume_label(const struct nb_volume_mount *m, unsigned n, char *out, size_t len);
/* That label back into m (at most NB_VOLUMES_PER_SANDBOX) and *n: 0, or -1 if malformed. */
int nb_volume_label_parse(const char *label, struct nb_volume_mount *m, unsigned *n);
/*
 * The mounts the label of Docker's object at inspect (a path of the API:
 * "/containers/<id>/json", "/images/<ref>/json") names, into m and *n (0
 * for none). 0, or -1 with ae (Docker down, or the object is gone).
 */
int nb_volume_mounts_of(struct nb_app *a, const char *inspect, struct nb_volume_mount *m,
                        unsigned *n, struct nb_apierr *ae);

/* Both for a create: nb_volume_mounts_parse of v, then nb_volume_prepare. */
int nb_volume_prepare_json(struct nb_app *a, const char *owner, const char *ws, yajl_val v,
                           struct nb_volume_mount *m, unsigned *n, int *lock, struct nb_apierr *ae);

#endif
