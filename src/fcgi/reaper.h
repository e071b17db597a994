/*
 * reaper.h - the reaper child of the master: about once a second it
 * destroys expired sandboxes; at start and every reconcile interval it
 * reconciles the table with Docker (orphan containers removed, slots whose
 * container vanished freed, slots abandoned mid-create/destroy finished).
 */
#ifndef NB_REAPER_H
#define NB_REAPER_H

#include "app.h"

/* One pass of each; exposed for tests and for the master's start-up. */
void nb_reaper_expire(struct nb_app *a);
int nb_reaper_reconcile(struct nb_app *a);

/* Loop forever (until SIGTERM), then _exit(0). */
void nb_reaper_run(struct nb_app *a) __attribute__((noreturn));

#endif
