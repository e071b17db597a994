/*
 * cgstat.h - what one container uses, as the host sees it: the numbers of
 * its cgroup (v2, or v1's memory, cpuacct and pids hierarchies) and the
 * filling of its tmpfs mounts. Found from the container's PID 1 on the
 * host: /proc/PID/cgroup names its cgroup, /proc/PID/root reaches its
 * mounts. Nothing is asked of Docker or of the sandbox's agent, so a
 * reading costs a few small file reads.
 *
 * The directories are parameters so the unit tests read a fake tree.
 */
#ifndef NB_CGSTAT_H
#define NB_CGSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* Where a real host keeps them (the unit tests pass a fake tree instead). */
#define NB_CGSTAT_CG_ROOT "/sys/fs/cgroup"
#define NB_CGSTAT_PROC_ROOT "/proc"

/* Every field -1 when not known; a limit is -1 too when there is none. */
struct nb_cgstat {
    int version; /* cgroup version read: 1 or 2 */
    int64_t cpu_usage_usec, cpu_user_usec, cpu_system_usec;
    int64_t mem_current, mem_peak, mem_limit; /* bytes */
    int64_t pids_current, pids_limit;
};

/*
 * Read pid's cgroup under root (normally "/sys/fs/cgroup"), found through
 * proc ("/proc"). match, when not NULL, must occur in the cgroup's path
 * (the container's id): otherwise the pid is somebody else's now and -1 is
 * returned. -1 with a message in err when the cgroup cannot be found;
 * files missing inside it only leave their fields at -1.
 */
int nb_cgstat_read(const char *proc, const char *root, pid_t pid, const char *match,
                   struct nb_cgstat *st, char *err, size_t errlen);

/*
 * The filesystem mounted at path inside pid's mount namespace (reached as
 * proc/PID/root/path): its bytes used and its size. 0, or -1.
 */
int nb_cgstat_fs(const char *proc, pid_t pid, const char *path, int64_t *used, int64_t *size);

#endif
