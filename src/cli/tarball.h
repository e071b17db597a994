/*
 * tarball.h - a local directory into a tar held in memory, and a tar out of
 * a sandbox extracted under a local directory (tarball.c, libarchive), for
 * "nanobox cp -r" through /sandbox/{id}/files/archive.
 */
#ifndef NB_CLI_TARBALL_H
#define NB_CLI_TARBALL_H

#include <stddef.h>

#include "buf.h"

/*
 * The tree under dir (its contents, names "./...", symlinks as symlinks)
 * appended to out as a tar (out's cap bounds it). Entries other than files,
 * directories and symlinks are left out, each said on stderr and counted
 * in *skipped. 0, or -1 after saying why on stderr.
 */
int tar_pack_dir(const char *dir, struct nb_buf *out, int *skipped);

/*
 * Extract tar[0..len) under dest (an existing directory), modes and mtimes
 * kept, as libarchive's secure extraction does: no absolute name, no "..",
 * nothing written through a symlink. Devices, FIFOs and sockets are left
 * out (said on stderr, counted in *skipped). 0, or -1 after saying why.
 */
int tar_unpack(const void *tar, size_t len, const char *dest, int *skipped);

#endif
