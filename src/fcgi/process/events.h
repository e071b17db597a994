/*
 * events.h - the events child of the master: it follows Docker's event
 * stream for this instance's containers (die, oom, destroy) and destroys a
 * sandbox whose container died at once, by the reaper's own path
 * (nb_reaper_container_event), instead of at the next reconciliation.
 */
#ifndef NB_EVENTS_H
#define NB_EVENTS_H

#include "app.h"

/* Follow the stream until SIGTERM, reconnecting while Docker is away; then _exit(0). */
void nb_events_run(struct nb_app *a) __attribute__((noreturn));

#endif
