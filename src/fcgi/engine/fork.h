/*
 * fork.h - a live sandbox copied into N new ones in one call (docs/API.md,
 * "POST /sandbox/{id}/fork"; docs/ARCHITECTURE.md, "Fork").
 *
 * A fork copies what a snapshot keeps (snapshot.h: /workspace, /tmp, and
 * for a sandbox with a root what it wrote into its image), its env and
 * metadata, its limits, network kind and lifecycle, into new sandboxes of
 * the same image. No image is made: the files are read once (frozen, as a
 * snapshot's) into scratch tars under <sandbox_dir>/templates and written
 * into each new sandbox before the call answers. Processes and memory are
 * not copied (checkpointing them needs CRIU, which this kernel does not
 * offer): each fork starts with a fresh agent.
 */
#ifndef NB_FORK_H
#define NB_FORK_H

#include "app.h"
#include "keys.h"
#include "table.h"

/*
 * Fork sandbox id (running or paused; it keeps running, or stays paused)
 * into count new running sandboxes of key (their owner, within its
 * quotas), each ending ttl seconds from now; their slots into out[0..count).
 * All or nothing: 404 not_found, 400 out_of_range (count not 1..fork_max),
 * 429 quota (the key cannot hold count more: nothing is made), 413
 * too_large (over snapshot_max), or a create's error, after which every
 * fork made is destroyed and the scratch files are gone.
 */
int nb_sandbox_fork(struct nb_app *a, const char *id, unsigned count, unsigned ttl,
                    const struct nb_key *key, struct nb_slot *out, struct nb_apierr *ae);

#endif
