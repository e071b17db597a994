/*
 * isolation.h - what keeps sandboxes apart from each other and from the
 * host beyond Docker's namespaces: a uid and gid of their own per slot,
 * the passwd and group files that name that uid, the agent mounted from a
 * neutral path, and nanobox's seccomp profile.
 *
 * The kernel counts some limits per uid (inotify instances and watches,
 * POSIX message queue bytes, processes, pipe buffers, epoll watches,
 * keys): sandboxes that share a uid, or share it with a host user, share
 * those limits, and one can starve the others. So slot i of the table runs
 * as uid and gid sandbox_uid_base + i: unique among live sandboxes, stable
 * for a slot (a warm sandbox gets its uid when it is created), never a uid
 * of the host's passwd, group or subuid ranges (checked at start).
 */
#ifndef NB_ISOLATION_H
#define NB_ISOLATION_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"

/*
 * At start, in the master, before any sandbox is made: check the uid
 * range, install the agent and the code bridge's files (kernel_dir; when
 * there are none the directory stays empty and sandboxes have no code
 * interpreter) and write every slot's passwd and group into the sandbox
 * directory, and load the seccomp profile into a->seccomp.
 * -1 with a message the operator can act on.
 */
int nb_isolation_prepare(struct nb_app *a, char *err, size_t errlen);

/* uid and gid the sandbox in slot runs as. */
void nb_isolation_ids(const struct nb_conf *c, uint32_t slot, unsigned long *uid,
                      unsigned long *gid);

/*
 * Host path of a file under the sandbox directory: the agent
 * ("nanobox-init"), the code bridge's directory ("kernel"), "hosts" and
 * "resolv.conf" of sandboxes without network, the templates' directory
 * "templates", E2B's "home" (slot ignored), or a slot's
 * "passwd", "group", "passwd-e2b", "group-e2b" or "hostname".
 */
void nb_isolation_path(const struct nb_conf *c, const char *file, uint32_t slot, char *out,
                       size_t outlen);

/*
 * Write the slot's hostname file (its directory made if missing) for a
 * sandbox without network, before its container is created. -1 with a
 * message.
 */
int nb_isolation_set_hostname(const struct nb_conf *c, uint32_t slot, const char *hostname,
                              char *err, size_t errlen);

/*
 * Do sandboxes get a /home of nanobox's, holding e2b_home's name as a link
 * to the workspace (e2b_home set, and not the workspace itself)?
 */
int nb_isolation_home_link(const struct nb_conf *c);

/* Does each slot have passwd and group files of its own (sandbox_uid_base set)? */
int nb_isolation_per_slot(const struct nb_conf *c);

/*
 * Do sandboxes E2B clients create get E2B's layout (e2b_user_home, and
 * e2b_home a /home/<name> apart from the workspace): e2b_home as their
 * workspace, mounted there (the real path every process sees), and
 * <name> as their user's name and home in the slot's "passwd-e2b" and
 * "group-e2b"? NB_LIFE_E2B_HOME marks such a sandbox.
 */
int nb_isolation_e2b_layout(const struct nb_conf *c);

/* The workspace of a sandbox of these lifecycle bits: e2b_home in E2B's layout. */
const char *nb_isolation_workspace(const struct nb_conf *c, unsigned lifecycle);

#endif
