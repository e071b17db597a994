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
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* The sandbox's user namespace for root commands (-1: none, root as before). */
static int root_userns = -1;

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

/*
 * The kernel counts inotify instances and watches, message queue bytes and
 * processes per (user namespace, uid), and charges each count to every
 * ancestor namespace as (parent, the namespace's owner). A root command
 * in the container's namespace (the host's) is counted as the host's uid 0.
 * So root commands join a user namespace of the sandbox's own, owned by the
 * sandbox user, with the identity map "0 0 4294967295": kuid 0 stays 0 (its
 * files are root's, as before), and its counts are (that namespace, 0) and
 * (host, the sandbox user), never (host, 0).
 *
 * The namespace is made once, at start, by a child that becomes the
 * sandbox user and unshares; the agent writes its maps (which needs, in
 * the host's namespace, CAP_SETUID, CAP_SETGID, CAP_SETFCAP to map uid 0,
 * and the owner's euid, which grants CAP_SYS_ADMIN over it: the agent takes
 * the sandbox user's euid for a moment, keeping its capabilities with
 * SECBIT_NO_SETUID_FIXUP) and keeps a descriptor of it; the child exits.
 * The container's seccomp profile allows unshare and setns of a user
 * namespace only (sandbox.c); every process the agent starts gets a filter
 * that refuses both again (child_filter).
 */
static int userns_write(pid_t pid, const char *file)
{
    static const char map[] = "0 0 4294967295\n";
    char path[64];
    ssize_t n;
    int fd;
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd == -1)
        return -1;
    n = write(fd, map, sizeof(map) - 1);
    close(fd);
    return n == (ssize_t)(sizeof(map) - 1) ? 0 : -1;
}

static int userns_make(uid_t uid, gid_t gid, const char **what)
{
    char path[64], c = 0;
    int go[2], ready[2], fd = -1, status, e = 0;
    pid_t pid;

    *what = "pipe";
    if (pipe2(go, O_CLOEXEC) == -1)
        return -1;
    if (pipe2(ready, O_CLOEXEC) == -1) {
        close(go[0]);
        close(go[1]);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        /* the owner is the creator's euid: the sandbox user, all ids */
        char ok = 1;
        close(go[1]);
        close(ready[0]);
        if (setgroups(0, NULL) == -1 || setresgid(gid, gid, gid) == -1 ||
            setresuid(uid, uid, uid) == -1 || unshare(CLONE_NEWUSER) == -1)
            ok = 0;
        /* dumpable: its /proc files are then the sandbox user's, which
         * the agent writes as that euid */
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        if (read(go[0], &ok, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    if (pid == -1) {
        *what = "fork";
        e = errno;
        goto out;
    }
    *what = "unshare(CLONE_NEWUSER) (the seccomp profile, or user.max_user_namespaces)";
    if (read(ready[0], &c, 1) != 1 || c != 1) {
        e = EPERM;
        goto out;
    }
    *what = "securebits";
    if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) == -1) {
        e = errno;
        goto out;
    }
    *what = "seteuid";
    if (setresuid((uid_t)-1, uid, (uid_t)-1) == 0) {
        *what = "uid_map (CAP_SETFCAP?)";
        if (userns_write(pid, "uid_map") == 0) {
            *what = "gid_map";
            if (userns_write(pid, "gid_map") == 0) {
                *what = "open its ns/user";
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
            }
        }
        e = errno;
        if (setresuid((uid_t)-1, 0, (uid_t)-1) == -1) {
            fprintf(stderr, "nanobox-init: cannot return to euid 0: %s\n", strerror(errno));
            _exit(1);
        }
    } else {
        e = errno;
    }
    prctl(PR_SET_SECUREBITS, 0, 0, 0, 0);
out:
    close(go[1]); /* the child exits */
    close(ready[0]);
    if (pid > 0)
        while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
            ;
    if (fd == -1)
        errno = e;
    return fd;
}

/*
 * A filter for every process the agent starts in root mode: unshare and
 * setns fail with EPERM (the container's profile lets them through for a
 * user namespace, for the agent). Other namespaces and clone's CLONE_NEW*
 * stay refused by that profile itself.
 */
#define NR_DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, DENY)
#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define COMPAT_ARCH AUDIT_ARCH_I386
#define NATIVE_MASK 0xbfffffffu /* x32 calls carry bit 30 */
#define COMPAT_UNSHARE 310
#define COMPAT_SETNS 346
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#define COMPAT_ARCH AUDIT_ARCH_ARM
#define NATIVE_MASK 0xffffffffu
#define COMPAT_UNSHARE 337
#define COMPAT_SETNS 375
#endif

static int child_filter(void)
{
#ifdef NATIVE_ARCH
    static struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 7),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, NATIVE_MASK),
        NR_DENY(SYS_unshare),
        NR_DENY(SYS_setns),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_ARCH, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        NR_DENY(COMPAT_UNSHARE),
        NR_DENY(COMPAT_SETNS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    static struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
    /* prctl, not seccomp(2): the same filter, and valgrind (the agent's
     * tests under it) knows prctl but answers seccomp(2) with ENOSYS */
    return (int)syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
    return 0; /* no filter for this arch, and no namespace either (init_root_setup) */
#endif
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
#ifdef NATIVE_ARCH
    {
        const char *what = "";
        root_userns = userns_make(init_root_uid, g, &what);
        if (root_userns == -1)
            fprintf(stderr,
                    "nanobox-init: root mode: no user namespace for root commands (%s: %s); "
                    "they count against the host's uid 0\n",
                    what, strerror(errno));
    }
#endif
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

/*
 * Root in the sandbox's user namespace: leave every host id for the
 * sandbox user's (the namespace's owner, which may join it), join, take
 * uid and gid 0 there (kuid 0: the identity map), then drop what joining
 * gave (a full set of capabilities in the namespace, bounding set too).
 */
static int child_userns_root(void)
{
    uid_t u = init_root_uid;
    gid_t g = init_root_gid;
    if (syscall(SYS_setresgid, g, g, g) == -1 || syscall(SYS_setresuid, u, u, u) == -1 ||
        syscall(SYS_setns, root_userns, CLONE_NEWUSER) == -1 ||
        syscall(SYS_setgroups, 0, NULL) == -1 || syscall(SYS_setresgid, 0, 0, 0) == -1 ||
        syscall(SYS_setresuid, 0, 0, 0) == -1)
        return -1;
    if (bounding_drop(0) == -1)
        return -1;
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
        errno != EINVAL)
        return -1;
    return caps_set(0, 0, 0);
}

int init_root_child(int as_root)
{
    uid_t u = as_root ? 0 : init_root_uid;
    gid_t g = as_root ? 0 : init_root_gid;

    if (!init_root_mode)
        return 0;
    if (as_root && root_userns != -1) {
        if (child_userns_root() == -1 || syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
            return -1;
        return child_filter();
    }
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
    return child_filter();
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
