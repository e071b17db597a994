/*
 * tarball.c - tars for "nanobox cp -r" (see tarball.h), with libarchive.
 */
#include "config.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tarball.h"

static la_ssize_t to_buf(struct archive *a, void *arg, const void *data, size_t n)
{
    struct nb_buf *out = arg;
    if (nb_buf_append(out, data, n) != NB_OK) {
        archive_set_error(a, EFBIG, "the tar is larger than max_answer (%zu bytes)", out->cap);
        return -1;
    }
    return (la_ssize_t)n;
}

/* "dir/a/b" under dir -> "./a/b"; dir itself -> "." (into rel). */
static void relative_name(const char *dir, size_t dlen, const char *path, struct nb_buf *rel)
{
    nb_buf_reset(rel);
    if (strncmp(path, dir, dlen) == 0 && (path[dlen] == '\0' || path[dlen] == '/')) {
        const char *rest = path + dlen;
        while (*rest == '/')
            rest++;
        nb_buf_printf(rel, *rest ? "./%s" : ".", rest);
    } else {
        nb_buf_printf(rel, "%s", path); /* not under dir: cannot happen */
    }
}

int tar_pack_dir(const char *dir, struct nb_buf *out, int *skipped)
{
    struct archive *disk = archive_read_disk_new(), *w = archive_write_new();
    struct archive_entry *e = NULL;
    struct nb_buf rel;
    size_t dlen = strlen(dir);
    char data[65536];
    int rc = -1;

    nb_buf_init(&rel, (size_t)-1);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    if (disk == NULL || w == NULL) {
        fprintf(stderr, "nanobox: out of memory\n");
        goto out;
    }
    archive_write_set_format_pax_restricted(w);
    archive_write_set_bytes_in_last_block(w, 1);
    archive_read_disk_set_symlink_physical(disk);
    archive_read_disk_set_standard_lookup(disk);
    if (archive_write_open(w, out, NULL, to_buf, NULL) != ARCHIVE_OK ||
        archive_read_disk_open(disk, dir) != ARCHIVE_OK) {
        fprintf(stderr, "nanobox: cannot read %s: %s\n", dir,
                archive_error_string(disk) ? archive_error_string(disk) : archive_error_string(w));
        goto out;
    }
    for (;;) {
        int r;
        mode_t type;
        if (e != NULL)
            archive_entry_free(e);
        e = archive_entry_new();
        r = archive_read_next_header2(disk, e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            fprintf(stderr, "nanobox: cannot read %s: %s\n", dir, archive_error_string(disk));
            goto out;
        }
        type = archive_entry_filetype(e);
        if (type == AE_IFDIR)
            archive_read_disk_descend(disk);
        if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
            fprintf(stderr,
                    "nanobox: skipped %s: only files, directories and symlinks are copied\n",
                    archive_entry_pathname(e));
            (*skipped)++;
            continue;
        }
        relative_name(dir, dlen, archive_entry_pathname(e), &rel);
        archive_entry_set_pathname(e, rel.data);
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            fprintf(stderr, "nanobox: %s: %s\n", rel.data, archive_error_string(w));
            goto out;
        }
        if (type == AE_IFREG) {
            la_ssize_t n;
            while ((n = archive_read_data(disk, data, sizeof(data))) > 0) {
                if (archive_write_data(w, data, (size_t)n) != n) {
                    fprintf(stderr, "nanobox: %s: %s\n", rel.data, archive_error_string(w));
                    goto out;
                }
            }
            if (n < 0) {
                fprintf(stderr, "nanobox: cannot read %s: %s\n", archive_entry_sourcepath(e),
                        archive_error_string(disk));
                goto out;
            }
        }
    }
    if (archive_write_close(w) != ARCHIVE_OK) {
        fprintf(stderr, "nanobox: %s\n", archive_error_string(w));
        goto out;
    }
    rc = 0;
out:
    if (e != NULL)
        archive_entry_free(e);
    if (disk != NULL)
        archive_read_free(disk);
    if (w != NULL)
        archive_write_free(w);
    nb_buf_free(&rel);
    return rc;
}

int tar_unpack(const void *tar, size_t len, const char *dest, int *skipped)
{
    struct archive *r = archive_read_new(), *w = archive_write_disk_new();
    struct archive_entry *e;
    int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1, got;

    if (r == NULL || w == NULL || here < 0) {
        fprintf(stderr, "nanobox: cannot extract into %s: %s\n", dest, strerror(errno));
        goto out;
    }
    archive_read_support_format_tar(r);
    archive_read_support_filter_none(r);
    archive_write_disk_set_options(
        w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
               ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
    /* relative names, from dest: the secure checks refuse absolute ones */
    if (chdir(dest) != 0) {
        fprintf(stderr, "nanobox: cannot extract into %s: %s\n", dest, strerror(errno));
        goto out;
    }
    if (archive_read_open_memory(r, tar, len) != ARCHIVE_OK) {
        fprintf(stderr, "nanobox: the server's answer is no tar: %s\n", archive_error_string(r));
        goto back;
    }
    while ((got = archive_read_next_header(r, &e)) == ARCHIVE_OK || got == ARCHIVE_WARN) {
        mode_t type = archive_entry_filetype(e);
        const void *block;
        size_t n;
        la_int64_t off;
        int d;

        if (archive_entry_hardlink(e) == NULL && type != AE_IFREG && type != AE_IFDIR &&
            type != AE_IFLNK) {
            fprintf(stderr, "nanobox: skipped %s: only files, directories and links are copied\n",
                    archive_entry_pathname(e));
            (*skipped)++;
            continue;
        }
        if (archive_write_header(w, e) != ARCHIVE_OK) {
            fprintf(stderr, "nanobox: refused %s: %s\n", archive_entry_pathname(e),
                    archive_error_string(w));
            goto back;
        }
        while ((d = archive_read_data_block(r, &block, &n, &off)) == ARCHIVE_OK) {
            if (archive_write_data_block(w, block, n, off) != ARCHIVE_OK) {
                fprintf(stderr, "nanobox: cannot write %s: %s\n", archive_entry_pathname(e),
                        archive_error_string(w));
                goto back;
            }
        }
        if (d != ARCHIVE_EOF || archive_write_finish_entry(w) != ARCHIVE_OK) {
            fprintf(stderr, "nanobox: %s: %s\n", archive_entry_pathname(e),
                    d != ARCHIVE_EOF ? archive_error_string(r) : archive_error_string(w));
            goto back;
        }
    }
    if (got != ARCHIVE_EOF) {
        fprintf(stderr, "nanobox: the tar from the server is damaged or cut short: %s\n",
                archive_error_string(r));
        goto back;
    }
    if (archive_write_close(w) != ARCHIVE_OK) { /* directories' modes and times */
        fprintf(stderr, "nanobox: %s\n", archive_error_string(w));
        goto back;
    }
    rc = 0;
back:
    if (fchdir(here) != 0) {
        fprintf(stderr, "nanobox: cannot return to the current directory: %s\n", strerror(errno));
        rc = -1;
    }
out:
    if (here >= 0)
        close(here);
    if (r != NULL)
        archive_read_free(r);
    if (w != NULL)
        archive_write_free(w);
    return rc;
}
