/*
 * root.c - see root.h.
 *
 * Capability sets are set with the raw capset syscall (no libcap in a
 * static binary). A root command ends with every set empty: its bounding
 * set is dropped before the ids change (that needs SETPCAP, which the
 * agent keeps for this), so that even an exec as uid 0 grants nothing
 * (the kernel gives root at exec what the bounding set allows). The
 * sandbox user's commands drop the bounding set too and lose the rest at
 * setresuid, which clears the permitted and effective sets when no uid
 * stays 0. Both get no_new_privs, as the container has.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "root.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

#define ROOT_CAP_MAX 63 /* bounding set bits tried; the kernel answers EINVAL past its last */
#define ROOT_AGENT_CAPS \
    ((1u << CAP_SETUID) | (1u << CAP_SETGID) | (1u << CAP_SETPCAP) | (1u << CAP_KILL))

int init_root_mode;
uid_t init_root_uid;
gid_t init_root_gid;

/* capset(effective, permitted, inheritable) of the low 32 capabilities;
 * the high 32 are emptied. Raw syscall: safe between vfork and exec. */
static int caps_set(uint32_t eff, uint32_t prm, uint32_t inh)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    memset(d, 0, sizeof(d));
    d[0].effective = eff;
    d[0].permitted = prm;
    d[0].inheritable = inh;
    return (int)syscall(SYS_capset, &h, d);
}

/* Drop every capability from the bounding set but those in keep. */
static int bounding_drop(uint32_t keep)
{
    for (int c = 0; c <= ROOT_CAP_MAX; c++) {
        if (c < 32 && (keep & (1u << c)))
            continue;
        if (syscall(SYS_prctl, PR_CAPBSET_DROP, c, 0, 0, 0) == -1) {
            if (errno == EINVAL)
                return 0; /* past the kernel's last capability */
            return -1;
        }
    }
    return 0;
}

static int id_parse(const char *s, const char **end, unsigned long *out)
{
    char *e;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    *out = strtoul(s, &e, 10);
    if (errno != 0 || *out == 0 || *out >= 0xffffffffUL)
        return -1;
    *end = e;
    return 0;
}

int init_root_setup(const char *spec, int *status)
{
    unsigned long uid, gid;
    const char *p;
    gid_t g;

    *status = 2;
    if (id_parse(spec, &p, &uid) != 0 || *p != ':' || id_parse(p + 1, &p, &gid) != 0 ||
        *p != '\0') {
        fprintf(stderr, "nanobox-init: --user wants UID:GID, both above 0, not %s\n", spec);
        return -1;
    }
    if (geteuid() != 0 || getuid() != 0) {
        fprintf(stderr, "nanobox-init: --user (root mode) needs to be started as uid 0\n");
        return -1;
    }
    *status = 1;
    init_root_uid = (uid_t)uid;
    init_root_gid = g = (gid_t)gid;
    if (setgroups(1, &g) == -1 || bounding_drop(ROOT_AGENT_CAPS) == -1 ||
        (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 && errno != EINVAL) ||
        caps_set(ROOT_AGENT_CAPS, ROOT_AGENT_CAPS, 0) == -1) {
        fprintf(stderr, "nanobox-init: root mode: %s\n", strerror(errno));
        return -1;
    }
    init_root_fs_user();
    if ((uid_t)setfsuid((uid_t)-1) != init_root_uid || (gid_t)setfsgid((gid_t)-1) != g) {
        fprintf(stderr, "nanobox-init: root mode: setfsuid/setfsgid refused\n");
        return -1;
    }
    /* a change of fsuid resets it to suid_dumpable: set it again */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    init_root_mode = 1;
    return 0;
}

void init_root_fs_root(void)
{
    if (!init_root_mode)
        return;
    setfsgid(0);
    setfsuid(0);
}

void init_root_fs_user(void)
{
    setfsgid(init_root_gid);
    setfsuid(init_root_uid);
}

int init_root_child(int as_root)
{
    uid_t u = as_root ? 0 : init_root_uid;
    gid_t g = as_root ? 0 : init_root_gid;

    if (!init_root_mode)
        return 0;
    if (bounding_drop(0) == -1)
        return -1;
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
        errno != EINVAL)
        return -1;
    /* the sandbox user's one group, as its commands have today; root none */
    if (syscall(SYS_setgroups, as_root ? 0 : 1, as_root ? NULL : &init_root_gid) == -1 ||
        syscall(SYS_setresgid, g, g, g) == -1 || syscall(SYS_setresuid, u, u, u) == -1)
        return -1;
    /* uid 0 kept its capabilities through setresuid: empty every set */
    if (as_root && caps_set(0, 0, 0) == -1)
        return -1;
    if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
        return -1;
    return 0;
}

int init_root_inotify_init(int flags)
{
    int fd, e;

    if (!init_root_mode)
        return inotify_init1(flags);
    /* the saved uid stays 0, so euid 0 (and with it the effective
     * capabilities, from the permitted set) comes back */
    if (setresuid((uid_t)-1, init_root_uid, (uid_t)-1) == -1)
        return -1;
    fd = inotify_init1(flags);
    e = errno;
    if (setresuid((uid_t)-1, 0, (uid_t)-1) == -1) {
        fprintf(stderr, "nanobox-init: cannot return to euid 0: %s\n", strerror(errno));
        _exit(1);
    }
    /* a change of euid moved the fs ids along */
    init_root_fs_user();
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    errno = e;
    return fd;
}

int init_root_access(const char *path, int mode)
{
    if (!init_root_mode)
        return access(path, mode);
#ifdef SYS_faccessat2
    /* the glibc wrapper may emulate AT_EACCESS from the euid (0): the raw call */
    if (syscall(SYS_faccessat2, AT_FDCWD, path, mode, AT_EACCESS) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
#endif
    /* an older kernel: as the sandbox user, for the moment of the check */
    {
        int rc, e;
        if (setresuid((uid_t)-1, init_root_uid, (uid_t)-1) == -1)
            return -1;
        setresgid((gid_t)-1, init_root_gid, (gid_t)-1);
        rc = faccessat(AT_FDCWD, path, mode, AT_EACCESS);
        e = errno;
        /* euid 0 first: it brings back SETGID for the egid */
        if (setresuid((uid_t)-1, 0, (uid_t)-1) == -1)
            _exit(1);
        setresgid((gid_t)-1, 0, (gid_t)-1);
        init_root_fs_user();
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        errno = e;
        return rc;
    }
}
