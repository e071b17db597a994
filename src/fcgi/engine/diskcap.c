/*
 * diskcap.c - see diskcap.h.
 *
 * Blocks rather than Docker's SizeRw: SizeRw sums apparent sizes, which a
 * root could keep small while filling the disk (fallocate --keep-size), and
 * it costs Docker a walk of its own on every inspect.
 */
#include "config.h"

#include <ftw.h>
#include <stddef.h>
#include <sys/stat.h>

#include "diskcap.h"

/* nftw has no context argument; the reaper is one thread */
static uint64_t walk_sum, walk_stop, walk_count;

static int walk_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag != FTW_NS) /* an entry removed while walking: nothing to count */
        walk_sum += (uint64_t)st->st_blocks * 512;
    walk_count++;
    return walk_stop && walk_sum > walk_stop ? 1 : 0;
}

int64_t nb_diskcap_walk(const char *dir, uint64_t stop_after)
{
    struct stat st;
    int rc;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    walk_sum = 0;
    walk_stop = stop_after;
    rc = nftw(dir, walk_entry, 16, FTW_PHYS | FTW_MOUNT);
    if (rc < 0)
        return -1;
    return (int64_t)walk_sum;
}

int64_t nb_diskcap_walk_count(const char *dir, uint64_t stop_after, uint64_t *entries)
{
    int64_t r;
    walk_count = 0;
    r = nb_diskcap_walk(dir, stop_after);
    *entries = walk_count;
    return r;
}
