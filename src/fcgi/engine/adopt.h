/*
 * adopt.h - adopting running sandboxes into a table made afresh.
 *
 * A table file of another layout (an upgrade of nanobox), a damaged one or
 * a missing one is replaced by a fresh table (table.c) flagged
 * NB_TABLE_ADOPT_PENDING. The first reconciliation then adopts every
 * running container of this instance from what Docker knows: the labels
 * its create gave it (sandbox.c: slot index, expiry, owner, image, limits,
 * network, auto_resume, metadata), overridden by its slot's lease file for
 * what changed since (a warm sandbox's hand-out, an extended TTL), its
 * state (running or paused) and its PID 1; a sandbox paused without its
 * memory from its pause image's labels (snapshot.h). Open ports are taken back from
 * the forwarders still running (their command lines say everything). What
 * cannot be adopted is left to reconciliation, which removes it as an
 * orphan.
 */
#ifndef NB_ADOPT_H
#define NB_ADOPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "app.h"
#include "docker.h"
#include "table.h"

/* What a slot's lease file (sandbox_dir/slots/<i>/lease) records. */
struct nb_lease {
    char id[NB_ID_LEN + 1];
    char owner[NB_OWNER_LEN + 8];
    int64_t expires;       /* paused: now + TTL left, when written */
    int64_t ttl_left;      /* paused: its TTL left; 0 running */
    int64_t pause_expires; /* paused: when its pause ends; 0 running */
    int auto_resume;
    int pause_on_timeout; /* "on_timeout": "pause" */
    char metadata[NB_META_LEN];
};

/*
 * Write slot index i's lease from slot s (its id, owner, expiry or, paused,
 * now + TTL left, auto_resume, metadata): at a hand-out and when a TTL
 * changes, which Docker's labels cannot follow. A failure is logged only.
 */
void nb_adopt_lease_write(const struct nb_conf *c, uint32_t i, const struct nb_slot *s,
                          int64_t now);

/* The same for the RUNNING or PAUSED sandbox id, as the table has it now. */
void nb_adopt_lease_note(struct nb_app *a, const char *id);

/* Parse a lease file's text (NUL at text[len]). 0, or -1 when it is not one. */
int nb_adopt_lease_parse(const char *text, size_t len, struct nb_lease *l);

/*
 * The slot for listed container c, whose PID 1 is init_pid, with lease l
 * (NULL: none, or another sandbox's): 0 and *out, *to (RUNNING or PAUSED)
 * filled, or -1 with why (not running, no slot label: made by a build
 * before adoption labels, a warm one never handed out, a slot index beyond
 * max_sandboxes). max_pause: the pause TTL a paused one gets afresh.
 */
int nb_adopt_slot(const struct nb_docker_ctr *c, const struct nb_lease *l, pid_t init_pid,
                  uint32_t nslots, unsigned max_pause, int64_t now, struct nb_slot *out,
                  enum nb_slot_state *to, char *why, size_t whylen);

/* A forwarder's record, from its command line. */
struct nb_fwd_rec {
    char id[NB_ID_LEN + 1];
    uint16_t sandboxport;
    uint16_t hostport;
    pid_t target_pid;
    int64_t expires;
};

/*
 * Parse the command line (NUL-separated, as /proc/<pid>/cmdline) of a
 * nanobox-fwd that ports.c started with its unix socket under ports_dir.
 * 0, or -1 when it is not one.
 */
int nb_adopt_fwd_parse(const char *cmdline, size_t len, const char *ports_dir,
                       struct nb_fwd_rec *r);

/*
 * The adoption pass over a listing of this instance's containers, if the
 * table is flagged NB_TABLE_ADOPT_PENDING (the flag is cleared after).
 * Returns the number of sandboxes adopted.
 */
int nb_adopt_run(struct nb_app *a, const struct nb_docker_ctr *list, size_t n);

#endif
