/*
 * procstat.c - see procstat.h.
 */
#include "procstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

unsigned long long nb_proc_number(const char *path, const char *prefix, unsigned long long def)
{
    char line[256];
    unsigned long long v, out = def;
    size_t n = strlen(prefix);
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return def;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, prefix, n) == 0) {
            if (sscanf(line + n, " %llu", &v) == 1)
                out = v;
            break;
        }
    fclose(f);
    return out;
}

int nb_procstat_read(pid_t pid, struct nb_procstat *st)
{
    char path[64], buf[1024];
    const char *p;
    long ppid, pgrp, sid;
    ssize_t n;
    int fd;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* the command name (field 2) may hold spaces and parentheses: parse after the last ')' */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1,
                            " %c %ld %ld %ld %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                            "%*d %*d %*d %llu",
                            &st->state, &ppid, &pgrp, &sid, &st->start) != 5)
        return -1;
    st->ppid = (pid_t)ppid;
    st->pgrp = (pid_t)pgrp;
    st->sid = (pid_t)sid;
    return 0;
}
