/*
 * cgstat.c - see cgstat.h.
 *
 * cgroup v2 (root/cgroup.controllers exists): one directory, the path of
 * the "0::" line of /proc/PID/cgroup, with cpu.stat (usage_usec,
 * user_usec, system_usec), memory.current, memory.peak (kernel 5.19+),
 * memory.max, pids.current and pids.max ("max": no limit).
 *
 * cgroup v1: one directory per hierarchy, root/<controllers>/<path> from
 * the line naming the controller: cpuacct.usage (ns) and cpuacct.stat
 * (user, system in clock ticks), memory.usage_in_bytes,
 * memory.max_usage_in_bytes, memory.limit_in_bytes (a huge number: no
 * limit), pids.current, pids.max.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cgstat.h"

#define CG_PATH_MAX 1024

/* v1's memory.limit_in_bytes without a limit is PAGE_COUNTER_MAX pages: anything this big. */
#define CG_V1_NO_LIMIT (INT64_C(1) << 60)

/* Read a small file into buf (NUL-terminated). 0, or -1. */
static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    size_t got = 0;

    if (fd < 0)
        return -1;
    while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)n;
    close(fd);
    buf[got] = '\0';
    return 0;
}

/* A file holding one number (or "max"): the number, -1 for "max" or none. */
static int64_t read_num(const char *dir, const char *file)
{
    char path[CG_PATH_MAX + 32], buf[64], *end;
    long long v;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (read_small(path, buf, sizeof(buf)) != 0)
        return -1;
    if (!strncmp(buf, "max", 3))
        return -1;
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno != 0 || end == buf || v < 0)
        return -1;
    return (int64_t)v;
}

/* The value of "key N" among the lines of a stat file, or -1. */
static int64_t stat_key(const char *text, const char *key)
{
    size_t kl = strlen(key);
    const char *p = text;

    while (p != NULL && *p) {
        if (!strncmp(p, key, kl) && p[kl] == ' ')
            return strtoll(p + kl + 1, NULL, 10);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return -1;
}

/*
 * From /proc/PID/cgroup's text: the path of the hierarchy holding
 * controller (v1), or of the unified one (controller NULL: the "0::"
 * line), and (v1) the controllers field that names its mount.
 */
static int cg_line(const char *text, const char *controller, char *ctrls, size_t ctrlslen,
                   char *path, size_t pathlen)
{
    const char *line = text;

    while (line != NULL && *line) {
        const char *c1 = strchr(line, ':'), *c2, *eol = strchr(line, '\n');
        size_t cl, pl;
        if (eol == NULL)
            eol = line + strlen(line);
        if (c1 == NULL || c1 > eol || (c2 = strchr(c1 + 1, ':')) == NULL || c2 > eol)
            goto next;
        cl = (size_t)(c2 - c1 - 1);
        pl = (size_t)(eol - c2 - 1);
        if (controller == NULL) {
            if (cl != 0)
                goto next;
        } else {
            /* one of the comma-separated names equals controller */
            const char *n = c1 + 1;
            int found = 0;
            while (n < c2 && !found) {
                const char *comma = memchr(n, ',', (size_t)(c2 - n));
                const char *e = comma != NULL ? comma : c2;
                found = (size_t)(e - n) == strlen(controller) &&
                        !strncmp(n, controller, (size_t)(e - n));
                n = e + 1;
            }
            if (!found)
                goto next;
        }
        if (cl >= ctrlslen || pl >= pathlen || pl == 0 || c2[1] != '/')
            return -1;
        memcpy(ctrls, c1 + 1, cl);
        ctrls[cl] = '\0';
        memcpy(path, c2 + 1, pl);
        path[pl] = '\0';
        /* no way out of the hierarchy */
        if (strstr(path, "/../") != NULL || (pl >= 3 && !strcmp(path + pl - 3, "/..")))
            return -1;
        return 0;
next:
        line = *eol ? eol + 1 : NULL;
    }
    return -1;
}

static void cg_clear(struct nb_cgstat *st)
{
    st->version = 0;
    st->cpu_usage_usec = st->cpu_user_usec = st->cpu_system_usec = -1;
    st->mem_current = st->mem_peak = st->mem_limit = -1;
    st->pids_current = st->pids_limit = -1;
}

static void read_v2(const char *dir, struct nb_cgstat *st)
{
    char path[CG_PATH_MAX + 16], buf[2048];

    st->version = 2;
    snprintf(path, sizeof(path), "%s/cpu.stat", dir);
    if (read_small(path, buf, sizeof(buf)) == 0) {
        st->cpu_usage_usec = stat_key(buf, "usage_usec");
        st->cpu_user_usec = stat_key(buf, "user_usec");
        st->cpu_system_usec = stat_key(buf, "system_usec");
    }
    st->mem_current = read_num(dir, "memory.current");
    st->mem_peak = read_num(dir, "memory.peak");
    st->mem_limit = read_num(dir, "memory.max");
    st->pids_current = read_num(dir, "pids.current");
    st->pids_limit = read_num(dir, "pids.max");
}

/* root/<controllers>/<path> of the v1 hierarchy holding controller; -1 if none. */
static int v1_dir(const char *root, const char *text, const char *controller, char *dir,
                  size_t dirlen)
{
    char ctrls[128], path[CG_PATH_MAX / 2];

    if (cg_line(text, controller, ctrls, sizeof(ctrls), path, sizeof(path)) != 0)
        return -1;
    snprintf(dir, dirlen, "%s/%s%s", root, ctrls, path);
    return 0;
}

static int read_v1(const char *root, const char *text, struct nb_cgstat *st)
{
    char dir[CG_PATH_MAX], buf[512];
    int found = 0;

    st->version = 1;
    if (v1_dir(root, text, "cpuacct", dir, sizeof(dir)) == 0) {
        char path[CG_PATH_MAX + 16];
        int64_t ns = read_num(dir, "cpuacct.usage");
        long hz = sysconf(_SC_CLK_TCK);
        found = 1;
        st->cpu_usage_usec = ns >= 0 ? ns / 1000 : -1;
        snprintf(path, sizeof(path), "%s/cpuacct.stat", dir);
        if (hz > 0 && read_small(path, buf, sizeof(buf)) == 0) {
            int64_t u = stat_key(buf, "user"), s = stat_key(buf, "system");
            st->cpu_user_usec = u >= 0 ? u * 1000000 / hz : -1;
            st->cpu_system_usec = s >= 0 ? s * 1000000 / hz : -1;
        }
    }
    if (v1_dir(root, text, "memory", dir, sizeof(dir)) == 0) {
        found = 1;
        st->mem_current = read_num(dir, "memory.usage_in_bytes");
        st->mem_peak = read_num(dir, "memory.max_usage_in_bytes");
        st->mem_limit = read_num(dir, "memory.limit_in_bytes");
        if (st->mem_limit >= CG_V1_NO_LIMIT)
            st->mem_limit = -1;
    }
    if (v1_dir(root, text, "pids", dir, sizeof(dir)) == 0) {
        found = 1;
        st->pids_current = read_num(dir, "pids.current");
        st->pids_limit = read_num(dir, "pids.max");
    }
    return found ? 0 : -1;
}

int nb_cgstat_read(const char *proc, const char *root, pid_t pid, const char *match,
                   struct nb_cgstat *st, char *err, size_t errlen)
{
    char path[CG_PATH_MAX], text[4096];

    cg_clear(st);
    if (pid <= 0) {
        snprintf(err, errlen, "no process to read the cgroup of");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%d/cgroup", proc, (int)pid);
    if (read_small(path, text, sizeof(text)) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (match != NULL && match[0] != '\0' && strstr(text, match) == NULL) {
        snprintf(err, errlen, "process %d is no longer the container's", (int)pid);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
    if (access(path, F_OK) == 0) {
        char ctrls[8], cg[CG_PATH_MAX / 2];
        if (cg_line(text, NULL, ctrls, sizeof(ctrls), cg, sizeof(cg)) != 0) {
            snprintf(err, errlen, "process %d has no cgroup v2 path", (int)pid);
            return -1;
        }
        snprintf(path, sizeof(path), "%s%s", root, cg);
        if (access(path, F_OK) != 0) {
            snprintf(err, errlen, "cannot see %s: %s", path, strerror(errno));
            return -1;
        }
        read_v2(path, st);
        return 0;
    }
    if (read_v1(root, text, st) != 0) {
        snprintf(err, errlen, "process %d has no cgroup v1 memory, cpuacct or pids path", (int)pid);
        return -1;
    }
    return 0;
}

int nb_cgstat_fs(const char *proc, pid_t pid, const char *path, int64_t *used, int64_t *size)
{
    char full[CG_PATH_MAX];
    struct statvfs sv;
    int fd, rc;

    if (pid <= 0 || path[0] != '/' || strstr(path, "..") != NULL)
        return -1;
    snprintf(full, sizeof(full), "%s/%d/root%s", proc, (int)pid, path);
    fd = open(full, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    rc = fstatvfs(fd, &sv);
    close(fd);
    if (rc != 0)
        return -1;
    *size = (int64_t)(sv.f_blocks * sv.f_frsize);
    *used = (int64_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize);
    return 0;
}
