/*
 * root.h - root mode (nanobox-init --user UID:GID, docs/AGENT-PROTOCOL.md).
 *
 * The agent starts as uid 0 and stays uid 0 (real, effective, saved) so
 * that it may start root commands and signal both them and the sandbox
 * user's; its file system ids become the sandbox user's (setfsuid,
 * setfsgid), so every file it touches for the host is touched with that
 * user's rights, and its capabilities shrink to SETUID, SETGID, SETPCAP
 * (what its children need to change ids and drop their bounding set) and
 * KILL. Every child then leaves that state between vfork and exec
 * (init_root_child): to the sandbox user, or to a root without any
 * capability.
 *
 * Without --user nothing here changes anything: init_root_mode stays 0.
 */
#ifndef INIT_ROOT_H
#define INIT_ROOT_H

#include <sys/types.h>

extern int init_root_mode;
extern uid_t init_root_uid; /* the sandbox user */
extern gid_t init_root_gid;

/* --user UID:GID: enter root mode. 0, or -1 with a message on stderr and
 * the exit status (2 for a wrong use, 1 for a failure) in *status. */
int init_root_setup(const char *spec, int *status);

/* Between vfork and exec (syscalls only, on memory prepared before):
 * in root mode become the sandbox user (as_root 0) or root with no
 * capabilities (as_root 1); outside root mode do nothing. 0 or -1 (errno). */
int init_root_child(int as_root);

/* Root mode: look at the file system as root (no capabilities) rather
 * than as the sandbox user until init_root_fs_user (a root command's
 * working directory is checked with the rights it will have). */
void init_root_fs_root(void);
void init_root_fs_user(void);

/* access(path, mode) for the sandbox user: in root mode access() would
 * ask for the real uid (0); this asks for the fs ids (faccessat2 with
 * AT_EACCESS). */
int init_root_access(const char *path, int mode);

/* inotify_init1, charged to the sandbox user in root mode (the kernel
 * counts inotify instances and watches per effective uid: the agent's
 * would otherwise count against the host's root). */
int init_root_inotify_init(int flags);

#endif
