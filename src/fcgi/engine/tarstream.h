/*
 * tarstream.h - a directory of a sandbox as one tar stream, and a tar
 * extracted under a directory (tarstream.c). The sandbox's own GNU tar does
 * the work, run by the exec engine as the sandbox user inside the sandbox:
 * the host never opens a path inside it. A tar to extract is checked here
 * first, whole, with libarchive: nothing is written unless every entry
 * stays under the directory. It knows no HTTP (api_files.c is its front).
 */
#ifndef NB_TARSTREAM_H
#define NB_TARSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"

/* What a tar holds: its entries and the bytes of its regular files. */
struct nb_tar_stats {
    uint64_t entries;
    uint64_t bytes;
};

/*
 * Where a directory's tar goes: on_begin once, before the first byte (so
 * that an error found before can still be an answer of its own), then the
 * bytes in pieces. A callback that returns non-zero stops the tar (the
 * reader went away). size is the tar's length as measured just before.
 */
struct nb_tar_sink {
    int (*on_begin)(void *arg, uint64_t size);
    int (*on_data)(void *arg, const void *data, size_t len);
    void *arg;
};

/*
 * Stream the tar of directory dir (its contents, names relative to it,
 * symlinks as symlinks). Measured first: more than max_file bytes is 413
 * too_large, a missing dir 404 not_found, not a directory 409 conflict, a
 * file the sandbox user cannot read 403 forbidden. 0 once streamed (or the
 * reader left), -1 with ae set when nothing was sent.
 */
int nb_tar_read(struct nb_app *a, const struct nb_slot *slot, const char *dir, int client_fd,
                struct nb_tar_sink *sink, struct nb_apierr *ae);

/*
 * Check tar[0..len) without writing anything: an uncompressed tar whose
 * entries are regular files, directories, symlinks and hard links, every
 * name relative and without "..", every symlink's target relative and
 * staying under the directory (as written, from where the link is), and
 * at most max_bytes bytes of files. 0 with st filled in, or -1 with ae set
 * (400 bad_archive, 413 too_large).
 */
int nb_tar_check(const void *tar, size_t len, size_t max_bytes, struct nb_tar_stats *st,
                 struct nb_apierr *ae);

/*
 * Check tar (nb_tar_check), then extract it under directory dir of the
 * sandbox (made with its parents when missing), modes and mtimes kept,
 * files that exist replaced. 0 with st filled in, or -1 with ae set.
 */
int nb_tar_extract(struct nb_app *a, const struct nb_slot *slot, const char *dir, const void *tar,
                   size_t len, int client_fd, struct nb_tar_stats *st, struct nb_apierr *ae);

#endif
