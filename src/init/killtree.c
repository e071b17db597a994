/*
 * killtree.c - kill a command with everything it started.
 *
 * kill(-pgid) misses what left the group: a `setsid` grandchild, a
 * daemon. So /proc is scanned for every process in the command's session
 * or group or below it in the tree (by parent pid). Each process found is
 * stopped first (SIGSTOP) and the scan repeated until it finds nothing
 * new: a stopped tree cannot fork, and nobody in it dies (re-parenting its
 * children to us, which would hide whose they were) before the SIGKILL
 * that ends them all. What was re-parented to us before the scan cannot be
 * traced back and is left alone unless it is in the session or group.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"
#include "procstat.h"

#define KILLTREE_PASSES 8

struct ptask {
    pid_t pid, ppid, pgrp, sid;
    char state; /* 'Z': already dead, not counted as killed */
    uint8_t mark;
};

static int ptask_read(pid_t pid, struct ptask *t)
{
    struct nb_procstat st;
    if (nb_procstat_read(pid, &st) != 0)
        return -1;
    t->pid = pid;
    t->ppid = st.ppid;
    t->pgrp = st.pgrp;
    t->sid = st.sid;
    t->state = st.state;
    t->mark = 0;
    return 0;
}

static size_t ptask_scan(struct ptask **out)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    struct ptask *v = NULL;
    size_t n = 0, cap = 0;

    *out = NULL;
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        struct ptask t;
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        if (ptask_read((pid_t)atol(de->d_name), &t) == -1)
            continue;
        if (n == cap) {
            struct ptask *nv = realloc(v, (cap ? cap * 2 : 256) * sizeof(*v));
            if (nv == NULL)
                break;
            v = nv;
            cap = cap ? cap * 2 : 256;
        }
        v[n++] = t;
    }
    closedir(d);
    *out = v;
    return n;
}

/* Is pid in the set? The sets are small (one command's tree). */
static int pidset_has(const pid_t *set, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++) {
        if (set[i] == pid)
            return 1;
    }
    return 0;
}

/*
 * One pass: every process of the tree not yet in *set is stopped and added.
 * Returns how many were added (-1 out of memory). Parents are taken from
 * the set too, so a child whose parent was found in an earlier pass is
 * found even though the parent scan came before it existed.
 */
static long killtree_pass(pid_t pid, pid_t **set, size_t *n_set, size_t *cap_set)
{
    struct ptask *v;
    size_t n = ptask_scan(&v);
    long added = 0;
    pid_t self = getpid();
    int changed = 1;

    for (size_t i = 0; i < n; i++) {
        if (v[i].pid == pid || v[i].sid == pid || v[i].pgrp == pid ||
            pidset_has(*set, *n_set, v[i].pid))
            v[i].mark = 1;
    }
    /* Descendants: mark children of marked processes until nothing moves. */
    while (changed) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i].mark)
                continue;
            for (size_t j = 0; j < n; j++) {
                if (v[j].mark && v[j].pid == v[i].ppid) {
                    v[i].mark = 1;
                    changed = 1;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!v[i].mark || v[i].state == 'Z' || v[i].pid == self || v[i].pid == 1 ||
            pidset_has(*set, *n_set, v[i].pid))
            continue;
        if (*n_set == *cap_set) {
            size_t ncap = *cap_set ? *cap_set * 2 : 64;
            pid_t *ns = realloc(*set, ncap * sizeof(*ns));
            if (ns == NULL) {
                free(v);
                return -1;
            }
            *set = ns;
            *cap_set = ncap;
        }
        /* Stopped, it can neither fork nor die and orphan its children
         * (who would then look like ours) before the final SIGKILL. */
        kill(v[i].pid, SIGSTOP);
        (*set)[(*n_set)++] = v[i].pid;
        added++;
    }
    free(v);
    return added;
}

void init_killtree(pid_t pid)
{
    pid_t *set = NULL;
    size_t n_set = 0, cap_set = 0;

    if (pid <= 1)
        return;
    kill(-pid, SIGSTOP);
    for (int i = 0; i < KILLTREE_PASSES; i++) {
        if (killtree_pass(pid, &set, &n_set, &cap_set) <= 0)
            break;
    }
    kill(-pid, SIGKILL);
    for (size_t i = 0; i < n_set; i++)
        kill(set[i], SIGKILL);
    free(set);
}
