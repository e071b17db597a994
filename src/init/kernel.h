/*
 * kernel.h - the code bridge (docs/AGENT-PROTOCOL.md, request K): one
 * process per sandbox, `python3 -I /.nanobox/kernel/bridge.py`, started by
 * nanobox-init on the first K and handed each K connection over a
 * SOCK_SEQPACKET socketpair (SCM_RIGHTS). init never reads or writes a
 * connection it handed over.
 *
 * The bridge is init's child in a session of its own: exec's kill of a
 * command's tree never reaches it (killtree.c follows the command's
 * session, group and descendants), the reaper forgets it when it dies and
 * the next K starts a new one, and shutdown ends it with everything else.
 * The request handler itself, init_kernel_start, is in ops.h.
 */
#ifndef INIT_KERNEL_H
#define INIT_KERNEL_H

#include <sys/types.h>

/*
 * At start, after init_is_pid1 is known. Not as PID 1 (the tests only),
 * $NANOBOX_KERNEL_BRIDGE, an absolute path, replaces the bridge's path:
 * a sandbox's init is always PID 1 and never reads it.
 */
void init_kernel_setup(void);
/* A child was reaped: if it is the bridge, forget it (and close our end). */
void init_kernel_reaped(pid_t pid);
/* Send sig to the bridge's process group (shutdown when not PID 1). */
void init_kernel_signal(int sig);

#endif
