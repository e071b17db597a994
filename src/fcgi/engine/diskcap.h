/*
 * diskcap.h - the disk cap of sandboxes with a root (root_templates).
 *
 * Their root file system is writable, and what a root writes into the image
 * (apt-get install, /opt, /var) lands in the container's writable layer in
 * Docker's storage, which overlay2 on ext4 cannot cap. The reaper measures
 * that layer every root_disk_check seconds and destroys a sandbox whose layer
 * holds more than root_disk_max (reaper.c, nb_reaper_root_disk).
 */
#ifndef NB_DISKCAP_H
#define NB_DISKCAP_H

#include <stdint.h>

/*
 * Bytes on disk under dir (st_blocks * 512 of every entry, the directories
 * too; symlinks not followed, other file systems not entered). The walk
 * stops once the sum passes stop_after (0: never) and returns the sum so
 * far. -1 when dir cannot be walked (absent, not readable).
 */
int64_t nb_diskcap_walk(const char *dir, uint64_t stop_after);
/* The same, and the number of entries walked (inodes) into *entries (a build's cap, templates.c). */
int64_t nb_diskcap_walk_count(const char *dir, uint64_t stop_after, uint64_t *entries);

#endif
