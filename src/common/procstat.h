/*
 * procstat.h - the fields nanobox reads from /proc/<pid>/stat, parsed one
 * way for every program: the forwarder (is its sandbox's PID 1 still the
 * same process?), the host (is a forwarder still ours? which processes
 * belong to a timed-out command?) and nanobox-init (the same question
 * inside a sandbox). Plain libc: nanobox-init links it statically.
 */
#ifndef NB_PROCSTAT_H
#define NB_PROCSTAT_H

#include <sys/types.h>

struct nb_procstat {
    char state; /* R, S, D, Z, T, X ... */
    pid_t ppid, pgrp, sid;
    unsigned long long start; /* field 22: clock ticks since boot */
};

/* 0 with *st filled; -1 if the process is gone or the line is unreadable. */
int nb_procstat_read(pid_t pid, struct nb_procstat *st);

/*
 * A number of the host's from /proc: the first line of path that starts
 * with prefix ("MemTotal:" in /proc/meminfo, a value in kB), or with ""
 * the file's one number (/proc/sys/kernel/pid_max); def when unreadable.
 */
unsigned long long nb_proc_number(const char *path, const char *prefix, unsigned long long def);

#endif
