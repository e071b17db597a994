/*
 * reaper.h - the reaper child of the master: about once a second it
 * destroys expired sandboxes; at start and every reconcile interval it
 * reconciles the table with Docker (orphan containers removed, slots whose
 * container vanished freed, slots abandoned mid-create/destroy finished).
 * Its loop runs a table of periodic jobs (nb_reaper_run, below).
 */
#ifndef NB_REAPER_H
#define NB_REAPER_H

#include "app.h"

/* A CREATING/DESTROYING slot in that state longer than this is abandoned. */
#define NB_REAPER_STUCK_SECONDS 180

/* One pass of each; exposed for tests and for the master's start-up. */
void nb_reaper_expire(struct nb_app *a);
/* Returns the number of containers removed and slots finished, or -1 when
 * Docker could not list the containers (nothing is changed then). */
int nb_reaper_reconcile(struct nb_app *a);
/* Root sandboxes whose writable layer holds more than root_disk_max are
 * destroyed (diskcap.h); returns how many. */
int nb_reaper_root_disk(struct nb_app *a);

/*
 * The rules of those passes, as pure functions of a slot and what Docker
 * listed, so they are unit-tested on their own (docs/ARCHITECTURE.md,
 * "Reaper", numbers the rules).
 */

/* Expiry: does the sandbox of s go now? */
int nb_reaper_expired(const struct nb_slot *s, int64_t now);

/* Rule 1: is listed container c an orphan, given the slot its label names (NULL: none)? */
int nb_reaper_orphan(const struct nb_docker_ctr *c, const struct nb_slot *s);

/*
 * Idle (the idle pause, sandbox.h): a RUNNING sandbox with an idle_pause
 * that no API call named (last_active) for that long since it last began
 * to run.
 */
int nb_reaper_idle(const struct nb_slot *s, int64_t now);
/* Pause the idle sandboxes without their memory, at most NB_REAPER_IDLE_BATCH a pass. */
#define NB_REAPER_IDLE_BATCH 8
void nb_reaper_idle_pause(struct nb_app *a);

enum nb_reconcile {
    NB_RECONCILE_KEEP,    /* nothing to do */
    NB_RECONCILE_FREE,    /* rule 2: its container vanished: free the slot */
    NB_RECONCILE_DESTROY, /* rule 3: its container stopped: destroy the sandbox */
    NB_RECONCILE_FINISH,  /* rule 4: abandoned mid-create/destroy: take over, finish */
};

/*
 * Rules 2 to 4 for slot s: ctr is its container in a listing taken at
 * listed_at (NULL: not listed), owner_alive whether s->owner_pid lives.
 */
enum nb_reconcile nb_reaper_judge(const struct nb_slot *s, const struct nb_docker_ctr *ctr,
                                  int owner_alive, int64_t listed_at);

/*
 * Slot s (RUNNING or PAUSED) with no owner takes the nanobox.owner label of
 * its listed container ctr, when that names one: 1 if it did.
 */
int nb_reaper_owner_from_label(struct nb_slot *s, const struct nb_docker_ctr *ctr);

/*
 * Docker said container cid (label nanobox.sandbox = id) died, was
 * OOM-killed or was removed (gone: 1 for a removal): if it is still the
 * container of a live slot (RUNNING, PAUSED or POOLED) and is really not
 * running (an inspect, unless gone; an OOM kill of one process leaves it
 * running), the sandbox is destroyed at once, by the path expiry and
 * reconciliation take (ports, rules, slot). 1 if it was, 0 if nothing was
 * to be done, -1 if Docker could not say (reconciliation will).
 */
int nb_reaper_container_event(struct nb_app *a, const char *id, const char *cid, int gone);

/*
 * The loop: a table of jobs, run in its order at the subticks they are
 * due (every `every` subticks, counted from the reaper's start), with a
 * wait of 0.1 s after each subtick. A job may hand the reaper a wake
 * descriptor (non-blocking): when it becomes readable during the wait,
 * the reaper reads it empty and runs that job at once, and the wait goes
 * on to its end, so the other jobs keep their periods. docs/ARCHITECTURE.md
 * ("Reaper") lists the jobs.
 */
#define NB_REAPER_JOBS_MAX 16
struct nb_reaper;
struct nb_reaper_job {
    const char *name;
    unsigned every;   /* subticks between runs (0: never at a subtick) */
    int needs_docker; /* skipped while Docker is away */
    void (*run)(struct nb_reaper *r);
    int wake_fd; /* -1: none */
};
struct nb_reaper {
    struct nb_app *a;
    unsigned tick;   /* subticks run so far */
    int docker_away; /* reconcile every pass, refill nothing, until it answers */
    const struct nb_reaper_job *jobs;
    size_t njobs;
};
/* Run the jobs due at r->tick, then count the subtick. */
void nb_reaper_subtick(struct nb_reaper *r);
/* Wait usec (to the millisecond), running the jobs whose wake descriptor fires. */
void nb_reaper_wait(struct nb_reaper *r, unsigned usec);

/* Loop forever (until SIGTERM), then _exit(0). */
void nb_reaper_run(struct nb_app *a) __attribute__((noreturn));

#endif
